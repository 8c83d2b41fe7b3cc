//! The steps of a collection that hold the writer lock, Merge and Commit,
//! and what lets backups run between them (`003_ea5fccc485a97c5d.txt`
//! §3.1 step 1, §3.5 "online" GC; docs/gc.md, "Concurrent ingest").
//!
//! ```text
//! Merge   (writer lock)  finish a dead collection's pending deletes;
//!                        uncovered containers join the index; the roots
//!                        are read; ids for this collection's copies are
//!                        reserved
//! ...     (no writer lock: backups commit meanwhile)
//! Commit  (writer lock)  the index is re-read as it is now; snapshots
//!                        committed since Merge are walked and every chunk
//!                        they reach that the collection would forget is
//!                        copied (the paper's "write a duplicate for
//!                        safety"); pending list, one index change
//! Delete  (readers out)  the cleaned containers go
//! ```
//!
//! Why the commit is right against an index that moved on: between Merge
//! and Commit only backups write, and a backup only adds entries naming
//! containers newer than every container the collection judged (it
//! allocates above the reservation), or replays the collection's own
//! copies. So an entry that still names a cleaned container at Commit is
//! the entry the mark phase judged: live from the old roots means copied;
//! reached from a new snapshot means resurrected, and copied here.

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::dir::BlobRef;
use cairn_format::index::IndexEntry;

use super::mark::{damage_at, stop, NodeReader};
use super::reservation::{self, Reservation};
use super::sweep::{self, Copied, CopyWriter};
use super::{pending, Entries, GcOptions, GcProgress};
use crate::catalog;
use crate::codec::ChunkCodec;
use crate::index::disk_index::DiskIndex;
use crate::index::overlay::IndexUpdate;
use crate::index::OpenedIndex;
use crate::reachability::{At, Reachability, Visitor};
use crate::read::cache::{ChunkStore, Locator};
use crate::repo::{GcLock, MayDelete, Repository};

/// The roots of the mark: every snapshot record. A record that cannot be
/// read stops the collection: its data would look dead.
pub(super) fn live_roots(repo: &Repository) -> Result<Vec<(String, BlobRef)>> {
    let (snaps, bad) = catalog::list(&**repo.backend())?;
    if let Some((id, e)) = bad.first() {
        return Err(Error::corrupt(
            format!("snapshot {id}"),
            format!(
                "{e}; garbage collection would treat its data as garbage \
                 (forget it or run `cairn repair snapshots` first)"
            ),
        ));
    }
    snaps
        .into_iter()
        .map(|s| Ok((s.id, BlobRef::try_from(&s.record.root)?)))
        .collect()
}

fn open_index(repo: &Repository) -> Result<OpenedIndex> {
    crate::index::open_for_write(
        repo.backend().clone(),
        repo.counters.clone(),
        &*repo.log,
        &repo.config.index,
        &crate::warnings::Warnings::default(),
    )
}

/// Replayed entries, the canonical copy of each chunk.
fn canonical_map(entries: &[IndexEntry]) -> FpMap<ContainerId> {
    let mut map = FpMap::default();
    for e in entries {
        crate::canonical::place(&mut map, e.fp, e.container);
    }
    map
}

fn puts_of(map: &FpMap<ContainerId>) -> Vec<IndexEntry> {
    map.iter()
        .map(|(fp, c)| IndexEntry {
            fp: *fp,
            container: *c,
        })
        .collect()
}

/// What Merge leaves for the phases that follow it.
pub(super) struct Merged {
    pub roots: Vec<(String, BlobRef)>,
    /// Containers present after Merge: what the collection judges.
    pub ids: Vec<ContainerId>,
    /// The ids this collection's copies go to (none in a dry run).
    pub reservation: Option<Reservation>,
    /// Dry run: containers the index does not cover yet (not committed).
    pub uncovered: FpMap<ContainerId>,
    pub warnings: Vec<String>,
    /// The Bloom seed this state gives ([`state_seed`]).
    pub seed: u64,
}

/// The seed of the Bloom hash functions for a collection that sees `roots`
/// with `next` the first container id not yet handed out. 003 §3.1 seeds
/// the filters afresh on every run so that a dead chunk taken for live
/// (a false positive) does not stay so: every run that may copy reserves
/// container ids at Merge, which moves `next`, so two such runs never
/// share a seed. A dry run reserves nothing, so it plans with the seed of
/// the run that follows it on the same repository, and prints that run's
/// plan.
pub(super) fn state_seed(roots: &[(String, BlobRef)], next: ContainerId) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&next.0.to_le_bytes());
    for (id, root) in roots {
        h.update(id.as_bytes());
        h.update(&[0]);
        h.update(root.root.as_bytes());
    }
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap())
}

/// Merge (§3.1 step 1). A dry run only reads what Merge would index
/// (under the writer lock: opening the index repairs a damaged one).
pub(super) fn merge(
    repo: &Repository,
    gc: &GcLock,
    opts: &GcOptions,
    progress: &dyn GcProgress,
) -> Result<Merged> {
    let writer = repo.lock_writer_for_gc(gc, opts.wait)?;
    if opts.dry_run {
        let opened = open_index(repo)?;
        let mut roots = live_roots(repo)?;
        roots.retain(|(id, _)| !opts.assume_forgotten.contains(id));
        return Ok(Merged {
            seed: state_seed(&roots, repo.log.next_id()),
            roots,
            ids: repo.log.ids()?,
            reservation: None,
            uncovered: canonical_map(&opened.replayed),
            warnings: Vec::new(),
        });
    }
    let backend = repo.backend();
    let mut warnings = Vec::new();
    let roots = live_roots(repo)?;
    let mut opened = open_index(repo)?;
    let mut replayed = canonical_map(&opened.replayed);
    let mut retiring = pending::read(&**backend);
    if let Err(e) = &retiring {
        if e.is_corruption() {
            // Which containers were retiring is lost. Their live chunks were
            // copied, but the index may have forgotten their other chunks:
            // those are indexed again (every stored fingerprint must stay a
            // key), and the containers are judged like any other.
            warnings.push(format!("{e}; containers it named are judged again"));
            update_reindex(repo, &mut replayed)?;
            pending::clear(&**backend)?;
            retiring = Ok(Vec::new());
        }
    }
    let retiring = retiring?;
    // A reservation left by a collection that died is replaced below: its
    // copies are sound duplicates (verified, then written whole) of chunks
    // the index names elsewhere; when a pending delete retires the
    // original, `keep_survivors` points the index at the copy. One that
    // cannot be read is only reported: no collection is writing into it.
    if let Err(e) = reservation::read(&**backend) {
        warnings.push(format!("{e}; replaced"));
    }
    let mut update = IndexUpdate::puts(puts_of(&replayed));
    if !retiring.is_empty() {
        let disk = DiskIndex::open(backend.clone(), repo.counters.clone())?;
        disk.for_each_entry(&mut |e| {
            if retiring.contains(&e.container) && !replayed.contains_key(&e.fp) {
                update.removes.push(e.fp);
            }
        })?;
        let staying: Vec<ContainerId> = repo
            .log
            .ids()?
            .into_iter()
            .filter(|id| !retiring.contains(id))
            .collect();
        sweep::keep_survivors(&*repo.log, &mut update, &staying)?;
    }
    opened.kind.commit(
        &**backend,
        update,
        repo.log.next_id(),
        repo.config.fp_width(),
        repo.config.index.page_size as usize,
    )?;
    if !retiring.is_empty() {
        delete_retired(repo, gc, &retiring, progress)?;
    }
    // Copies never need more containers than the ones they come from
    // (next-fit packing of a subsequence of containers' chunks, each
    // container a group that fits: greedy is optimal for ordered packing),
    // so one id per container present, plus one, always suffices.
    let ids = repo.log.ids()?;
    // The copies go into these ids outside the writer lock: claimed as one
    // block, under the container-id mark, so no writer is handed one.
    let block = repo.log.reserve(ids.len() as u64 + 1)?;
    let start = block.start;
    let reserved = Reservation {
        start,
        end: block.end,
    };
    reservation::write(&**backend, &reserved)?;
    drop(writer);
    Ok(Merged {
        seed: state_seed(&roots, start),
        roots,
        ids,
        reservation: Some(reserved),
        uncovered: FpMap::default(),
        warnings,
    })
}

/// Adds to `replayed` every chunk of a covered container that the index
/// does not name (after a damaged pending list: the chunks of containers a
/// dead collection was retiring).
fn update_reindex(repo: &Repository, replayed: &mut FpMap<ContainerId>) -> Result<()> {
    let disk = DiskIndex::open(repo.backend().clone(), repo.counters.clone())?;
    let coverage = disk.coverage();
    let mut indexed = cairn_core::FpSet::default();
    disk.for_each_entry(&mut |e| {
        indexed.insert(e.fp);
    })?;
    for id in repo.log.ids()? {
        if !coverage.covers(id) {
            continue;
        }
        for d in super::meta_of(&*repo.log, id)?.descriptors {
            if !indexed.contains(&d.fp) {
                crate::canonical::place(replayed, d.fp, id);
            }
        }
    }
    Ok(())
}

/// Deletes containers whose live chunks are copied and no longer indexed,
/// with readers locked out, then the pending list that named them.
pub(super) fn delete_retired(
    repo: &Repository,
    proof: &dyn MayDelete,
    ids: &[ContainerId],
    progress: &dyn GcProgress,
) -> Result<()> {
    let _readers_out = repo.lock_out_readers(proof, true)?;
    let present: HashSet<ContainerId> = repo.log.ids()?.into_iter().collect();
    for id in ids {
        if present.contains(id) {
            repo.log.delete(*id)?;
        }
        progress.advance(1);
    }
    pending::clear(&**repo.backend())
}

/// Finds, in snapshots committed since Merge, the chunks the collection
/// is about to forget.
struct Resurrections<'r, 'a> {
    reader: &'r mut NodeReader<'a>,
    doomed: &'r FpMap<ContainerId>,
    found: FpMap<ContainerId>,
    error: Option<Error>,
}

impl Resurrections<'_, '_> {
    fn note(&mut self, fp: &Fingerprint) {
        if let Some(c) = self.doomed.get(fp) {
            self.found.insert(*fp, *c);
        }
    }
}

impl Visitor for Resurrections<'_, '_> {
    fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
        self.note(fp);
        true
    }

    fn read(&mut self, fp: &Fingerprint, _level: u8, at: At<'_>) -> Option<Vec<u8>> {
        self.note(fp);
        self.reader.read_or_stop(fp, at, &mut self.error)
    }

    fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
        stop(&mut self.error, damage_at(message, at));
    }
}

/// What Commit did.
#[derive(Default)]
pub(super) struct Committed {
    pub removed: u64,
    pub moved: u64,
    /// Chunks of snapshots committed during the collection that it would
    /// have forgotten, copied instead (§3.5).
    pub resurrected: u64,
    /// Snapshots committed during the collection.
    pub new_snapshots: usize,
    pub written_bytes: u64,
    pub containers_written: u64,
}

/// Commit: under the writer lock, the index change of the collection
/// against the index as it is now, with resurrected chunks copied first.
/// `last`: the collection's last commit, which ends its id reservation (the
/// commit of whole dead containers, `dead_first.rs`, comes before copies
/// into the reserved ids and keeps it).
pub(super) fn commit(
    repo: &Repository,
    gc: &GcLock,
    merged: &Merged,
    copied: &Copied,
    chunk_counts: &HashMap<ContainerId, u64>,
    last: bool,
) -> Result<Committed> {
    let cfg = &repo.config;
    let backend = repo.backend();
    let _writer = repo.lock_writer_for_gc(gc, true)?;
    let mut opened = open_index(repo)?;
    if !last {
        // Whole dead containers on what may be a full disk: a delta costs
        // the bytes of the removals, a merged generation the whole index.
        opened.kind.prefer_deltas();
    }
    let replayed = canonical_map(&opened.replayed);
    let entries = Entries {
        disk: DiskIndex::open(backend.clone(), repo.counters.clone())?,
        pending: replayed,
    };
    let (mut update, doomed, named) =
        sweep::index_update(&mut |f| entries.for_each(f), &copied.cleaned, &copied.moved)?;
    let mut out = Committed::default();

    // Resurrection (§3.5): snapshots committed since the roots were read.
    let old: HashSet<&str> = merged.roots.iter().map(|(id, _)| id.as_str()).collect();
    let fresh: Vec<(String, BlobRef)> = live_roots(repo)?
        .into_iter()
        .filter(|(id, _)| !old.contains(id.as_str()))
        .collect();
    out.new_snapshots = fresh.len();
    if !fresh.is_empty() && !doomed.is_empty() {
        let codec = ChunkCodec::for_repo(repo);
        let store = ChunkStore::new(
            repo.log.clone(),
            Locator::Disk(DiskIndex::open(backend.clone(), repo.counters.clone())?),
            codec.clone(),
        );
        let mut reader = NodeReader::new(&store);
        let mut v = Resurrections {
            reader: &mut reader,
            doomed: &doomed,
            found: FpMap::default(),
            error: None,
        };
        let mut walk = Reachability::new(cfg.fp_width());
        for (id, root) in &fresh {
            walk.walk_snapshot(id, root, &mut v);
        }
        if let Some(e) = v.error {
            return Err(e);
        }
        let found = v.found;
        if !found.is_empty() {
            let mut by_container: HashMap<ContainerId, HashSet<Fingerprint>> = HashMap::new();
            for (fp, c) in &found {
                by_container.entry(*c).or_default().insert(*fp);
            }
            let mut w = CopyWriter::new(
                &*repo.log,
                &codec,
                cfg.fp_width(),
                cfg.container_size as usize,
                None,
            );
            let mut ids: Vec<_> = by_container.keys().copied().collect();
            ids.sort();
            for id in ids {
                let want = &by_container[&id];
                w.copy_matching(id, |d| want.contains(&d.fp))?;
            }
            w.seal()?;
            update.removes.retain(|fp| !found.contains_key(fp));
            update
                .puts
                .extend(w.out.moved.iter().map(|(fp, c)| IndexEntry {
                    fp: *fp,
                    container: *c,
                }));
            out.resurrected = w.out.chunks;
            out.written_bytes = w.out.written_bytes;
            out.containers_written = w.out.containers_written;
        }
    }

    // Chunks leaving the index whose older copy stays elsewhere keep an
    // entry naming it (`keep_survivors`); the reserved copies hold only
    // chunks the index names already.
    let cleaned: HashSet<ContainerId> = copied.cleaned.iter().copied().collect();
    let mut staying = Vec::new();
    for id in repo.log.ids()? {
        if cleaned.contains(&id) || merged.reservation.is_some_and(|r| r.contains(id)) {
            continue;
        }
        let chunks = match chunk_counts.get(&id) {
            Some(n) => *n,
            None => super::meta_of(&*repo.log, id)?.descriptors.len() as u64,
        };
        if chunks > named.get(&id).copied().unwrap_or(0) {
            staying.push(id);
        }
    }
    sweep::keep_survivors(&*repo.log, &mut update, &staying)?;
    out.removed = update.removes.len() as u64;
    out.moved = update.puts.len() as u64;

    // The pending list goes first: from then on the cleaned containers are
    // garbage to every reader of the repository.
    update.puts.extend(puts_of(&entries.pending));
    pending::write(&**backend, &copied.cleaned)?;
    opened.kind.commit(
        &**backend,
        update,
        repo.log.next_id(),
        cfg.fp_width(),
        cfg.index.page_size as usize,
    )?;
    if last {
        reservation::clear(&**backend)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;

    #[test]
    fn the_seed_follows_the_state_and_moves_with_every_reservation() {
        let root = |b: u8| BlobRef {
            root: Fingerprint::from_slice(&[b; 32]),
            level: 0,
            size: 1,
        };
        let roots = vec![("a".to_string(), root(1)), ("b".to_string(), root(2))];
        let seed = state_seed(&roots, ContainerId(7));
        // A dry run and the run after it see the same state.
        assert_eq!(seed, state_seed(&roots.clone(), ContainerId(7)));
        // A run that reserved ids, a new backup, a forgotten snapshot.
        assert_ne!(seed, state_seed(&roots, ContainerId(8)));
        let mut more = roots.clone();
        more.push(("c".to_string(), root(3)));
        assert_ne!(seed, state_seed(&more, ContainerId(7)));
        assert_ne!(seed, state_seed(&roots[..1], ContainerId(7)));
    }
}
