//! Re-layout at collection time (issue 34; docs/restore-speed.md
//! "Re-layout when collecting"): fragmentation repaired when the collector
//! copies live chunks, instead of accumulated backup after backup.
//!
//! 003's PGC/PGC+ copy the live chunks of the containers they clean in
//! container order. A re-layout collection changes two things:
//!
//! 1. **What it copies.** The *heads*, the newest snapshot of each host,
//!    are walked in restore order. A container of which the heads use some
//!    but less than `utilization` of its data is *sparse* for them:
//!    restoring a head reads it for a part only (the criterion of HAR, Fu
//!    et al., USENIX ATC 2014, applied to the stored containers instead of
//!    the next backup's duplicates; HAR's threshold is 50%, the default
//!    here is every container used in part, which measured better).
//!    Sparse containers are cleaned as if the collector had selected them,
//!    sparsest first, within a byte budget: half of what the collection
//!    copies anyway (so a collection copies at most 1.5x the bytes it
//!    copies without re-layout), and at least a quarter of the heads'
//!    bytes or four containers, so that a collection with nothing to
//!    reclaim still repairs the layout between backups.
//! 2. **The order it writes them in.** Every copied chunk a head uses goes
//!    first, in the heads' restore order (newest head first, each in its
//!    recipe order, nodes where the walk reads them): the newest backups'
//!    chunks end up sequential in new containers. The copied chunks no
//!    head uses follow in the collector's scan order.
//!
//! The copy goes through the collector's own Copy and Commit (`sweep.rs`,
//! `commit.rs`): liveness, dynamic duplicate removal, verification, the
//! rescue of chunks a concurrent backup reached (003 §3.5) and the
//! deletes are those of the collection without re-layout; only the set of
//! cleaned containers grows and the write order changes. With focused
//! cleaning (LGC/PGC in two passes) the Live Instance filter covers only
//! the candidates, so no other container may be cleaned: re-layout is
//! skipped and the report says so.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::dir::BlobRef;

use super::mark::{damage_at, interrupted_walk, stop, NodeReader};
use super::sweep::Tally;
use crate::container_log::ContainerStore;
use crate::reachability::{At, Reachability, Visitor};
use crate::read::cache::ChunkStore;
use crate::repo::Repository;

/// How a collection re-lays out (`GcOptions::relayout`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RelayoutOptions {
    /// A container is sparse for the heads when they use less than this
    /// share of its data: 1.0, every container they use in part (HAR's
    /// 50% repairs less: docs/experiments/restore.md, "Re-layout").
    pub utilization: f64,
    /// Bytes re-layout may copy beyond the collection's own, as a share of
    /// what the collection copies.
    pub share_of_copy: f64,
    /// ... and at least this share of the heads' bytes (raw bytes of the
    /// chunks they reach), and at least `floor_containers` containers'
    /// worth.
    pub share_of_heads: f64,
    pub floor_containers: u64,
}

impl Default for RelayoutOptions {
    fn default() -> Self {
        RelayoutOptions {
            utilization: 1.0,
            share_of_copy: 0.5,
            share_of_heads: 0.25,
            floor_containers: 4,
        }
    }
}

impl RelayoutOptions {
    /// The extra bytes a collection that copies `copy` bytes, with heads
    /// of `heads` bytes, in containers of `container_size` may copy for
    /// re-layout.
    pub fn budget(&self, copy: u64, heads: u64, container_size: u64) -> u64 {
        let share = copy as f64 * self.share_of_copy.max(0.0);
        let floor = heads as f64 * self.share_of_heads.max(0.0);
        let least = (self.floor_containers * container_size) as f64;
        share.max(floor).max(least) as u64
    }
}

/// What re-layout did (`GcReport::relayout`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RelayoutReport {
    /// The newest snapshot of each host.
    pub head_snapshots: usize,
    /// Chunks (data and nodes) the heads reach, as far as the order was
    /// kept: `order_truncated` when the collection's memory (`--memory`,
    /// 64 bytes per chunk) held only the heads' first part.
    pub head_chunks: u64,
    pub order_truncated: bool,
    /// Containers the heads use for less than the utilization threshold.
    pub sparse_containers: u64,
    /// Of those, cleaned for re-layout (within the budget), and their
    /// estimated live bytes.
    pub chosen_containers: u64,
    pub chosen_live_bytes: u64,
    pub budget_bytes: u64,
    /// Copied chunks written in the heads' order.
    pub ordered_chunks: u64,
    /// Range reads of the ordered copy (a source container may be read in
    /// more than one window).
    pub range_reads: u64,
    /// Why re-layout did not run.
    pub skipped: Option<String>,
    pub seconds: f64,
}

/// The newest snapshot record of each host, newest first.
pub fn heads(repo: &Repository) -> Result<Vec<(String, BlobRef)>> {
    let (snaps, _) = crate::catalog::list(&**repo.backend())?;
    let mut newest: HashMap<String, (i64, String, BlobRef)> = HashMap::new();
    for s in snaps {
        let key = (s.record.time_unix_ns, s.id.clone());
        let keep = newest
            .get(&s.record.host)
            .is_none_or(|(t, id, _)| (*t, id.clone()) < key);
        if keep {
            let root = BlobRef::try_from(&s.record.root)?;
            newest.insert(s.record.host.clone(), (key.0, key.1, root));
        }
    }
    let mut out: Vec<(i64, String, BlobRef)> = newest.into_values().collect();
    out.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    Ok(out.into_iter().map(|(_, id, root)| (id, root)).collect())
}

/// Bytes of memory one entry of the heads' order takes (fingerprint,
/// position, the hash map's overhead).
pub const ORDER_ENTRY_BYTES: u64 = 64;

/// Walks the heads in restore order: each chunk's key is its first
/// position (data chunks as files list them, nodes and listings where the
/// walk reads them). At most `max_chunks` are recorded (the collection's
/// memory bound): the order then covers the heads' first part, and the
/// rest of their chunks count as unused by them.
pub fn head_order(
    store: &ChunkStore,
    heads: &[(String, BlobRef)],
    max_chunks: u64,
) -> Result<FpMap<u64>> {
    struct Order<'r, 'a> {
        reader: &'r mut NodeReader<'a>,
        seq: FpMap<u64>,
        max: u64,
        error: Option<Error>,
    }
    impl Order<'_, '_> {
        fn see(&mut self, fp: &Fingerprint) {
            let next = self.seq.len() as u64;
            if next < self.max {
                self.seq.entry(*fp).or_insert(next);
            }
        }
    }
    impl Visitor for Order<'_, '_> {
        fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
            self.see(fp);
            true
        }
        fn read(&mut self, fp: &Fingerprint, _level: u8, at: At<'_>) -> Option<Vec<u8>> {
            if interrupted_walk(&mut self.error) {
                return None;
            }
            self.see(fp);
            self.reader.read_or_stop(fp, at, &mut self.error)
        }
        fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
            stop(&mut self.error, damage_at(message, at));
        }
    }
    let mut reader = NodeReader::new(store);
    let mut v = Order {
        reader: &mut reader,
        seq: FpMap::default(),
        max: max_chunks,
        error: None,
    };
    let mut walk = Reachability::new(store.fp_width());
    for (id, root) in heads {
        walk.walk_snapshot(id, root, &mut v);
        if let Some(e) = v.error.take() {
            return Err(e);
        }
    }
    Ok(v.seq)
}

/// How much of one container the heads use.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    pub id: ContainerId,
    /// Raw bytes of its chunks the heads reach.
    pub used: u64,
    /// Raw bytes of all its chunks.
    pub data: u64,
}

/// The heads' use of containers `ids`, from their metadata sections
/// (parallel reads, as Analysis).
pub fn usage(
    log: &dyn ContainerStore,
    ids: &[ContainerId],
    order: &FpMap<u64>,
) -> Result<Vec<Usage>> {
    let mut out = Vec::with_capacity(ids.len());
    crate::blocking_map::blocking_for_each(
        ids,
        log.read_parallelism(),
        |id| super::meta_of(log, *id),
        |&id, meta| {
            super::stop::stop_if_interrupted()?;
            let mut u = Usage {
                id,
                used: 0,
                data: 0,
            };
            for d in &meta?.descriptors {
                u.data += u64::from(d.raw_len);
                if order.contains_key(&d.fp) {
                    u.used += u64::from(d.raw_len);
                }
            }
            out.push(u);
            Ok(())
        },
    )?;
    Ok(out)
}

/// The sparse containers to clean for re-layout, sparsest first, until
/// their live bytes would pass `budget`; `already` are cleaned anyway.
/// Only containers judged whole (every chunk's liveness known) and with a
/// live chunk qualify. Returns the chosen ids (ascending), their live
/// bytes, and how many containers were sparse.
pub fn choose(
    usages: &[Usage],
    tallies: &[Tally],
    already: &HashSet<ContainerId>,
    utilization: f64,
    budget: u64,
) -> (Vec<ContainerId>, u64, u64) {
    let judged: HashMap<ContainerId, &Tally> = tallies
        .iter()
        .filter(|t| t.judged == t.chunks && !t.all_dead)
        .map(|t| (t.id, t))
        .collect();
    let mut sparse: Vec<(f64, &Usage, u64)> = usages
        .iter()
        .filter(|u| u.used > 0 && (u.used as f64) < utilization * u.data as f64)
        .filter(|u| !already.contains(&u.id))
        .filter_map(|u| {
            let t = judged.get(&u.id)?;
            Some((
                u.used as f64 / u.data as f64,
                u,
                t.live_stored_bytes() as u64,
            ))
        })
        .collect();
    sparse.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
    let found = sparse.len() as u64;
    let (mut chosen, mut bytes) = (Vec::new(), 0u64);
    for (_, u, live) in sparse {
        if bytes + live > budget {
            break;
        }
        bytes += live;
        chosen.push(u.id);
    }
    chosen.sort();
    (chosen, bytes, found)
}

/// Re-layout's part of a collection's plan: the heads' order, and the
/// sparse containers added to `selected` (the collector's choice, ids
/// ascending) within the budget.
pub(super) fn plan(
    repo: &Repository,
    store: &ChunkStore,
    ids: &[ContainerId],
    tallies: &[Tally],
    ro: RelayoutOptions,
    memory_bytes: u64,
    selected: &mut Vec<ContainerId>,
) -> Result<(FpMap<u64>, RelayoutReport)> {
    let started = Instant::now();
    let heads = heads(repo)?;
    let max_chunks = (memory_bytes / ORDER_ENTRY_BYTES).max(1);
    let order = head_order(store, &heads, max_chunks)?;
    let usages = usage(&*repo.log, ids, &order)?;
    let already: HashSet<ContainerId> = selected.iter().copied().collect();
    let copy: u64 = tallies
        .iter()
        .filter(|t| already.contains(&t.id))
        .map(|t| t.live_stored_bytes() as u64)
        .sum();
    let heads_bytes: u64 = usages.iter().map(|u| u.used).sum();
    let budget = ro.budget(copy, heads_bytes, u64::from(repo.config.container_size));
    let (chosen, bytes, sparse) = choose(&usages, tallies, &already, ro.utilization, budget);
    let r = RelayoutReport {
        head_snapshots: heads.len(),
        head_chunks: order.len() as u64,
        order_truncated: order.len() as u64 >= max_chunks,
        sparse_containers: sparse,
        chosen_containers: chosen.len() as u64,
        chosen_live_bytes: bytes,
        budget_bytes: budget,
        seconds: started.elapsed().as_secs_f64(),
        ..Default::default()
    };
    selected.extend(chosen);
    selected.sort();
    selected.dedup();
    Ok((order, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::sweep::test_tally as tally;

    fn usage_of(id: u64, used: u64, data: u64) -> Usage {
        Usage {
            id: ContainerId(id),
            used,
            data,
        }
    }

    #[test]
    fn sparsest_first_within_the_budget_and_never_unjudged_or_unused() {
        let tallies = vec![
            tally(1, 10, 10.0, 1000),
            tally(2, 10, 10.0, 1000),
            tally(3, 10, 10.0, 1000),
            tally(4, 10, 10.0, 1000),
            Tally {
                judged: 5,
                ..tally(5, 10, 5.0, 1000)
            },
        ];
        let usages = vec![
            usage_of(1, 400, 1000), // 40%: sparse
            usage_of(2, 100, 1000), // 10%: sparsest
            usage_of(3, 900, 1000), // dense
            usage_of(4, 0, 1000),   // no head uses it: left alone
            usage_of(5, 10, 1000),  // sampled, not judged whole
        ];
        let none = HashSet::new();
        let (ids, bytes, found) = choose(&usages, &tallies, &none, 0.5, 1500);
        assert_eq!(ids, vec![ContainerId(2)], "the budget takes one");
        assert_eq!((bytes, found), (1000, 2));
        let (ids, _, _) = choose(&usages, &tallies, &none, 0.5, 5000);
        assert_eq!(ids, vec![ContainerId(1), ContainerId(2)]);
        let already: HashSet<_> = [ContainerId(2)].into_iter().collect();
        let (ids, _, _) = choose(&usages, &tallies, &already, 0.5, 1500);
        assert_eq!(ids, vec![ContainerId(1)], "the collection cleans 2 anyway");
    }

    #[test]
    fn the_budget_is_half_the_copy_and_at_least_a_quarter_of_the_heads() {
        let o = RelayoutOptions::default();
        assert_eq!(o.budget(1000, 0, 0), 500);
        assert_eq!(o.budget(0, 100_000, 0), 25_000);
        assert_eq!(o.budget(100_000, 100_000, 0), 50_000);
        assert_eq!(
            o.budget(1000, 1000, 4096),
            16384,
            "four containers at least"
        );
    }
}
