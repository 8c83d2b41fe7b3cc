//! The index deltas of the current generation, applied in order as one map
//! over the paged index file (`cairn_format::index_delta`).
//!
//! A delta's removals apply before its puts. A put combines with what the
//! index already holds by the canonical-copy rule (`crate::canonical`); a
//! fingerprint removed by this or an earlier delta forgets the base file's
//! entry, so a later put of it is taken as it is (that is how garbage
//! collection moves a chunk). Every put a backup makes names a container at
//! or above the base file's `covered_below`, newer than any base entry, so
//! a lookup that finds a put needs no page read to apply the rule.

use std::sync::Arc;

use cairn_core::{Backend, ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;
use cairn_format::index_delta::{decode_index_delta, IndexDelta};

use crate::blocking_map::blocking_for_each;
use crate::canonical::canonical;
use crate::object_names;

/// What the deltas say about one fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Stored here too: combined with the base entry, if any, canonically.
    Put(ContainerId),
    /// The base entry is forgotten; `Some` if a later put stored it again.
    Replace(Option<ContainerId>),
}

/// The deltas of one generation, applied.
#[derive(Clone, Debug, Default)]
pub struct Overlay {
    /// The last delta applied (0: none).
    pub seq: u32,
    /// The highest `covered_below` of the deltas applied. Writers running
    /// together each cover their own containers, and a delta may be
    /// written after one with a higher mark: every container below the
    /// highest is in some delta, or an orphan of a writer that never
    /// committed, or still being written by one that will
    /// (docs/concurrency.md).
    pub covered_below: Option<ContainerId>,
    /// Every container some delta's puts name: the deltas index them
    /// (a writer's delta puts every chunk it stored), whatever their ids.
    pub containers: std::collections::HashSet<ContainerId>,
    pub changes: FpMap<Change>,
}

/// What one commit (or one garbage-collection pass) changes in the index.
#[derive(Clone, Debug, Default)]
pub struct IndexUpdate {
    /// Chunks stored (or stored again) in these containers.
    pub puts: Vec<IndexEntry>,
    /// Fingerprints to forget (applied before `puts`).
    pub removes: Vec<Fingerprint>,
    /// `Some(b)`: a removal forgets an entry an earlier delta put only if
    /// that entry names a container below `b` (a collection committing
    /// beside backups, which may store the chunk again above `b`
    /// meanwhile; docs/concurrency.md). `None`: unconditional.
    pub removes_below: Option<ContainerId>,
}

impl IndexUpdate {
    pub fn puts(puts: Vec<IndexEntry>) -> Self {
        IndexUpdate {
            puts,
            removes: Vec::new(),
            removes_below: None,
        }
    }

    /// An update of `puts` and unconditional `removes`.
    pub fn new(puts: Vec<IndexEntry>, removes: Vec<Fingerprint>) -> Self {
        IndexUpdate {
            puts,
            removes,
            removes_below: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.removes.is_empty()
    }

    pub fn len(&self) -> usize {
        self.puts.len() + self.removes.len()
    }
}

impl Overlay {
    /// Applies one batch: removals first, then puts. With `removes_below`
    /// a removal leaves an entry an earlier batch put in a container at or
    /// above it (it names a newer copy, which the canonical rule prefers
    /// to any the removal meant).
    pub fn apply(
        &mut self,
        removes: &[Fingerprint],
        removes_below: Option<ContainerId>,
        puts: &[IndexEntry],
    ) {
        self.containers.extend(puts.iter().map(|e| e.container));
        for fp in removes {
            let newer = match (self.changes.get(fp), removes_below) {
                (Some(Change::Put(c) | Change::Replace(Some(c))), Some(below)) => *c >= below,
                _ => false,
            };
            if !newer {
                self.changes.insert(*fp, Change::Replace(None));
            }
        }
        for e in puts {
            let c = match self.changes.get(&e.fp) {
                None => Change::Put(e.container),
                Some(Change::Put(p)) => Change::Put(canonical(*p, e.container)),
                Some(Change::Replace(None)) => Change::Replace(Some(e.container)),
                Some(Change::Replace(Some(p))) => Change::Replace(Some(canonical(*p, e.container))),
            };
            self.changes.insert(e.fp, c);
        }
    }

    /// The answer for `fp` if the deltas decide it: `Some(None)` = removed.
    pub fn lookup(&self, fp: &Fingerprint) -> Option<Option<ContainerId>> {
        match self.changes.get(fp)? {
            Change::Put(c) => Some(Some(*c)),
            Change::Replace(c) => Some(*c),
        }
    }

    /// Entries the deltas hold (puts, re-stored removals).
    pub fn stored(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        self.changes.iter().filter_map(|(fp, c)| match c {
            Change::Put(id) | Change::Replace(Some(id)) => Some(IndexEntry {
                fp: *fp,
                container: *id,
            }),
            Change::Replace(None) => None,
        })
    }

    pub fn removed(&self) -> usize {
        self.changes
            .values()
            .filter(|c| **c == Change::Replace(None))
            .count()
    }

    /// Loads and applies every delta of `generation`, which must run
    /// 1, 2, ... without a gap and match the base file's fingerprint width.
    /// A missing, damaged or foreign delta is damage to derived data.
    /// `listing` is the listing of `index/` that found the generation (one
    /// LIST per open: on object storage each is a round trip).
    pub fn load(
        backend: &dyn Backend,
        listing: &[String],
        generation: u64,
        fp_width: usize,
    ) -> Result<Self> {
        let seqs = delta_seqs(listing, generation)?;
        let mut overlay = Overlay::default();
        overlay.extend(backend, generation, fp_width, &seqs)?;
        Ok(overlay)
    }

    /// [`Overlay::load`] through `memo`: the overlay it holds for this
    /// generation is reused as it is when the listing shows no delta
    /// beyond it, else extended by the deltas after it.
    pub fn load_memoized(
        backend: &dyn Backend,
        listing: &[String],
        generation: u64,
        fp_width: usize,
        memo: &OverlayMemo,
    ) -> Result<Arc<Self>> {
        let seqs = delta_seqs(listing, generation)?;
        let last = seqs.len() as u32;
        let held = memo.0.lock().clone();
        let overlay = match held {
            Some((g, w, o)) if g == generation && w == fp_width && o.seq == last => return Ok(o),
            Some((g, w, o)) if g == generation && w == fp_width && o.seq < last => {
                let mut grown = (*o).clone();
                grown.extend(backend, generation, fp_width, &seqs[o.seq as usize..])?;
                grown
            }
            _ => Overlay::load(backend, listing, generation, fp_width)?,
        };
        let overlay = Arc::new(overlay);
        *memo.0.lock() = Some((generation, fp_width, overlay.clone()));
        Ok(overlay)
    }

    /// Applies the deltas `seqs` of `generation`, in order. On a store
    /// that serves requests in parallel (object storage) the deltas are
    /// fetched and decoded a window of [`Backend::read_parallelism`] at a
    /// time: eight writers add a delta each per backup, and one GET after
    /// another made opening the index the longest wait of a backup there.
    /// A window bounds what is held besides the overlay to that many deltas.
    fn extend(
        &mut self,
        backend: &dyn Backend,
        generation: u64,
        fp_width: usize,
        seqs: &[u32],
    ) -> Result<()> {
        blocking_for_each(
            seqs,
            backend.read_parallelism(),
            |&seq| read_delta(backend, generation, seq, fp_width),
            |&seq, delta| {
                let delta = delta?;
                self.apply(&delta.removes, removes_below(&delta), &delta.puts);
                self.seq = seq;
                self.covered_below = self.covered_below.max(Some(delta.covered_below));
                Ok(())
            },
        )
    }
}

/// Reads, decodes and checks delta `seq` of `generation`.
fn read_delta(
    backend: &dyn Backend,
    generation: u64,
    seq: u32,
    fp_width: usize,
) -> Result<IndexDelta> {
    let key = object_names::index_delta(generation, seq);
    let delta = decode_index_delta(&backend.read(&key)?).map_err(|e| match e {
        Error::Corrupt { detail, .. } => Error::corrupt(key.clone(), detail),
        other => other,
    })?;
    check_delta(&delta, &key, generation, seq, fp_width)?;
    Ok(delta)
}

/// The deltas of `generation` that `listing` shows, which must run 1, 2,
/// ... without a gap.
fn delta_seqs(listing: &[String], generation: u64) -> Result<Vec<u32>> {
    let mut seqs: Vec<u32> = listing
        .iter()
        .filter_map(|k| object_names::parse_index_delta(k))
        .filter(|(g, _)| *g == generation)
        .map(|(_, s)| s)
        .collect();
    seqs.sort_unstable();
    for (i, seq) in seqs.iter().enumerate() {
        if *seq != i as u32 + 1 {
            return Err(Error::corrupt(
                object_names::index_delta(generation, *seq),
                format!(
                    "delta {} of index generation {generation} is missing",
                    i + 1
                ),
            ));
        }
    }
    Ok(seqs)
}

/// The overlay a repository handle loaded last, by generation, fingerprint
/// width and last delta. Deltas never change once written and their names
/// are never reused (a generation's number only rises), so those name one
/// overlay. A backup opens the index three or four times (its dedup
/// index, its parent's locator, the container-id floor), each time over the
/// same listing: without this each open read, decrypted and applied every
/// delta again, about 15% of an incremental backup's CPU with 8 writers.
#[derive(Default)]
pub struct OverlayMemo(parking_lot::Mutex<Option<(u64, usize, Arc<Overlay>)>>);

/// A delta's `removes_below` as an update says it (`u64::MAX`: none).
pub fn removes_below(d: &IndexDelta) -> Option<ContainerId> {
    (d.removes_below.0 != u64::MAX).then_some(d.removes_below)
}

fn check_delta(d: &IndexDelta, key: &str, generation: u64, seq: u32, width: usize) -> Result<()> {
    if d.base_generation != generation || d.seq != seq || d.fp_width != width {
        return Err(Error::corrupt(
            key,
            format!(
                "names generation {} delta {} of {}-byte fingerprints; expected generation \
                 {generation} delta {seq} of {width}-byte fingerprints",
                d.base_generation, d.seq, d.fp_width
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(b: u8) -> Fingerprint {
        Fingerprint::from_slice(&[b; 32])
    }

    fn put(b: u8, c: u64) -> IndexEntry {
        IndexEntry {
            fp: fp(b),
            container: ContainerId(c),
        }
    }

    /// A collection removes, below its bound, chunks it judged dead; a
    /// backup that stored one of them again above the bound in a delta
    /// numbered before the collection's keeps its entry.
    #[test]
    fn a_conditional_removal_keeps_a_newer_put() {
        let mut o = Overlay::default();
        // Earlier deltas: one chunk moved into a doomed container 5, one
        // stored again by a backup in container 40.
        o.apply(&[], None, &[put(1, 5), put(2, 40)]);
        // The collection's delta: both judged dead in containers below 30.
        o.apply(&[fp(1), fp(2), fp(3)], Some(ContainerId(30)), &[]);
        assert_eq!(
            o.lookup(&fp(1)),
            Some(None),
            "put below the bound: forgotten"
        );
        assert_eq!(
            o.lookup(&fp(2)),
            Some(Some(ContainerId(40))),
            "newer put kept"
        );
        assert_eq!(o.lookup(&fp(3)), Some(None), "base entry: forgotten");
        // Unconditional removals forget whatever was put.
        o.apply(&[fp(2)], None, &[]);
        assert_eq!(o.lookup(&fp(2)), Some(None));
    }

    /// The memo gives what a fresh load gives: reused over the same
    /// listing (no delta read again), extended by deltas added after it,
    /// and never confused across generations or with a gap.
    #[test]
    fn a_memoized_load_equals_a_fresh_one() {
        use cairn_backend::MemBackend;
        use cairn_format::index_delta::{encode_index_delta, IndexDelta};
        let backend = MemBackend::new();
        let write =
            |generation: u64, seq: u32, puts: Vec<IndexEntry>, removes: Vec<Fingerprint>| {
                let d = IndexDelta {
                    fp_width: 32,
                    base_generation: generation,
                    seq,
                    covered_below: ContainerId(100 + seq as u64),
                    removes_below: ContainerId(u64::MAX),
                    removes,
                    puts,
                };
                backend
                    .write_atomic(
                        &object_names::index_delta(generation, seq),
                        &encode_index_delta(&d).unwrap(),
                    )
                    .unwrap();
            };
        let listing = || backend.list(object_names::INDEX).unwrap();
        let same = |a: &Overlay, b: &Overlay| {
            assert_eq!(a.seq, b.seq);
            assert_eq!(a.covered_below, b.covered_below);
            assert_eq!(a.containers, b.containers);
            assert_eq!(a.changes, b.changes);
        };
        let memo = OverlayMemo::default();
        write(3, 1, vec![put(1, 10), put(2, 11)], vec![]);
        write(3, 2, vec![put(3, 12)], vec![fp(1)]);
        let first = Overlay::load_memoized(&backend, &listing(), 3, 32, &memo).unwrap();
        same(&first, &Overlay::load(&backend, &listing(), 3, 32).unwrap());
        // Same listing: the same overlay, no delta read again (a delta
        // that went bad since is not noticed: deltas never change).
        let again = Overlay::load_memoized(&backend, &listing(), 3, 32, &memo).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // A delta added: extended, as a fresh load.
        write(3, 3, vec![put(1, 13)], vec![fp(2)]);
        let grown = Overlay::load_memoized(&backend, &listing(), 3, 32, &memo).unwrap();
        same(&grown, &Overlay::load(&backend, &listing(), 3, 32).unwrap());
        assert_eq!(grown.lookup(&fp(1)), Some(Some(ContainerId(13))));
        // A newer generation is loaded afresh.
        write(4, 1, vec![put(9, 20)], vec![]);
        let next = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap();
        same(&next, &Overlay::load(&backend, &listing(), 4, 32).unwrap());
        assert_eq!(next.lookup(&fp(1)), None);
        // A gap is damage, memo or not.
        write(4, 3, vec![put(8, 21)], vec![]);
        let e = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }
}
