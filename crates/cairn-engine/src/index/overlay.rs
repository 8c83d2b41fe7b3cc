//! The index deltas still listed, applied in order as one map over the
//! paged index file (`cairn_format::index_delta`).
//!
//! A delta's removals apply before its puts. Every change says two things
//! about a fingerprint ([`Change`]): which of the base file's entries still
//! count (those naming a container at or above `below`: none after an
//! unconditional removal, those a collection's conditional removal spares),
//! and the canonical copy of what the deltas put (`crate::canonical`). A
//! lookup combines the two, reading the file's page unless an
//! unconditional removal already forgot it.
//!
//! The deltas applied are those of the newest generation (1, 2, ... without
//! a gap) after those of older generations still listed. A merge that runs
//! beside writers (docs/concurrency.md, "Compaction beside writers") folds
//! what it listed into a new generation and then deletes exactly that, in
//! order, so an older generation's delta still listed is either one a
//! writer added after the merge's listing, or one of a suffix the new file
//! already holds. Applying a suffix again over the file changes nothing:
//! puts combine canonically, removals apply to the file only through their
//! condition, and what a later delta put is put again after them.

use std::sync::Arc;

use cairn_core::{Backend, ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;
use cairn_format::index_delta::{decode_index_delta, IndexDelta};

use crate::blocking_map::blocking_for_each;
use crate::canonical::canonical;
use crate::object_names;

/// What the deltas say about one fingerprint: the base file's entry counts
/// only if it names a container at or above `below` (`ContainerId(0)`:
/// always; `ContainerId(u64::MAX)`: never), and is then combined
/// canonically with `put`.
///
/// Both ids are kept as unaligned bytes (`put`'s `u64::MAX`: nothing put,
/// an id no container has): beside a 33-byte fingerprint a map bucket
/// takes 49 bytes instead of 64, and the overlay is the largest table a
/// backup holds once deltas pile up (issue 35).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    below: [u8; 8],
    put: [u8; 8],
}

/// `below` of a change that removed nothing.
const KEEP_ALL: ContainerId = ContainerId(0);
/// `below` of an unconditional removal.
const FORGET_ALL: ContainerId = ContainerId(u64::MAX);
/// `put` of a change that put nothing.
const NOTHING_PUT: u64 = u64::MAX;

impl Change {
    /// Nothing removed, nothing put: where a fingerprint's change starts.
    const UNCHANGED: Change = Change {
        below: KEEP_ALL.0.to_le_bytes(),
        put: NOTHING_PUT.to_le_bytes(),
    };

    pub fn below(&self) -> ContainerId {
        ContainerId(u64::from_le_bytes(self.below))
    }

    pub fn put(&self) -> Option<ContainerId> {
        let id = u64::from_le_bytes(self.put);
        (id != NOTHING_PUT).then_some(ContainerId(id))
    }

    fn set_below(&mut self, below: ContainerId) {
        self.below = below.0.to_le_bytes();
    }

    fn set_put(&mut self, put: Option<ContainerId>) {
        debug_assert_ne!(put, Some(ContainerId(NOTHING_PUT)));
        self.put = put.map_or(NOTHING_PUT, |c| c.0).to_le_bytes();
    }

    /// A removal with bound `bound`: the file's entry counts only at or
    /// above it, and so does what earlier deltas put.
    fn remove_below(&mut self, bound: ContainerId) {
        self.set_below(self.below().max(bound));
        self.set_put(self.put().filter(|p| *p >= bound));
    }

    /// A put of the chunk in `container`, combined canonically.
    fn put_in(&mut self, container: ContainerId) {
        self.set_put(Some(
            self.put().map_or(container, |p| canonical(p, container)),
        ));
    }

    /// Whether the file's entry no longer counts, whatever it names: the
    /// change alone answers a lookup.
    pub fn forgets_file(&self) -> bool {
        self.below() == FORGET_ALL
    }

    /// Whether some removal applies to the file's entry.
    pub fn removes(&self) -> bool {
        self.below() != KEEP_ALL
    }

    /// The entry of the fingerprint, given the file's (`file`).
    pub fn over(&self, file: Option<ContainerId>) -> Option<ContainerId> {
        let kept = file.filter(|c| *c >= self.below());
        match (kept, self.put()) {
            (Some(a), Some(b)) => Some(canonical(a, b)),
            (a, b) => a.or(b),
        }
    }
}

/// The deltas listed, applied.
#[derive(Clone, Debug, Default)]
pub struct Overlay {
    /// The last delta of the newest generation applied (0: none).
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
    /// The deltas applied, `(generation, seq)` in the order applied: what a
    /// merge of this overlay deletes once its file is written.
    pub applied: Vec<(u64, u32)>,
    /// Whether some batch applied removed: without one, the deltas applied
    /// are puts, and any subset of them applied again over a file that
    /// holds them all changes nothing (a merge may then delete them in any
    /// order, `DiskIndex::write_generation`).
    pub removed_any: bool,
}

/// What one commit (or one garbage-collection pass) changes in the index.
#[derive(Clone, Debug, Default)]
pub struct IndexUpdate {
    /// Chunks stored (or stored again) in these containers.
    pub puts: Vec<IndexEntry>,
    /// Fingerprints to forget (applied before `puts`).
    pub removes: Vec<Fingerprint>,
    /// `Some(b)`: a removal forgets an entry (in the file or put by an
    /// earlier delta) only if it names a container below `b` (a collection
    /// committing beside backups, which may store the chunk again above `b`
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
    /// Applies one batch: removals first, then puts. A removal with
    /// `removes_below` spares every entry naming a container at or above
    /// it, in the file and among earlier puts (a newer copy, which the
    /// canonical rule prefers to any the removal meant); without it, it
    /// forgets them all.
    pub fn apply(
        &mut self,
        removes: &[Fingerprint],
        removes_below: Option<ContainerId>,
        puts: &[IndexEntry],
    ) {
        self.containers.extend(puts.iter().map(|e| e.container));
        self.removed_any |= !removes.is_empty();
        let bound = removes_below.unwrap_or(FORGET_ALL);
        for fp in removes {
            self.changes
                .entry(*fp)
                .or_insert(Change::UNCHANGED)
                .remove_below(bound);
        }
        for e in puts {
            self.changes
                .entry(e.fp)
                .or_insert(Change::UNCHANGED)
                .put_in(e.container);
        }
    }

    /// What a merge writes: the entries the deltas and then `update` put
    /// that no removal forgot, and the removals that still reach the file
    /// (fingerprint and bound), as [`Overlay::apply`] of `update` to a copy
    /// would leave them. Only the changes of the fingerprints the update
    /// names are copied, into a sorted vector (a change depends on its own
    /// fingerprint's alone); the others are read from `self` as they are,
    /// and the entries are allocated once at their bound: a merge held the
    /// overlay twice, then a map of the update beside a doubling vector.
    pub fn with_update(&self, update: &IndexUpdate) -> (Vec<IndexEntry>, FpMap<ContainerId>) {
        let mut touched: Vec<(Fingerprint, Change)> = update
            .removes
            .iter()
            .chain(update.puts.iter().map(|e| &e.fp))
            .map(|fp| (*fp, Change::UNCHANGED))
            .collect();
        touched.sort_unstable_by_key(|t| t.0);
        touched.dedup_by(|a, b| a.0 == b.0);
        for (fp, c) in &mut touched {
            if let Some(old) = self.changes.get(fp) {
                *c = *old;
            }
        }
        let at = |touched: &[(Fingerprint, Change)], fp: &Fingerprint| {
            touched
                .binary_search_by(|(f, _)| f.cmp(fp))
                .expect("every fingerprint the update names")
        };
        let bound = update.removes_below.unwrap_or(FORGET_ALL);
        for fp in &update.removes {
            let i = at(&touched, fp);
            touched[i].1.remove_below(bound);
        }
        for e in &update.puts {
            let i = at(&touched, &e.fp);
            touched[i].1.put_in(e.container);
        }
        let untouched = self
            .changes
            .iter()
            .filter(|(fp, _)| touched.binary_search_by(|(f, _)| f.cmp(fp)).is_err());
        let mut entries = Vec::with_capacity(self.changes.len() + touched.len());
        let mut forget = FpMap::default();
        for (fp, c) in untouched.chain(touched.iter().map(|(fp, c)| (fp, c))) {
            if let Some(container) = c.put() {
                entries.push(IndexEntry { fp: *fp, container });
            }
            if c.removes() {
                forget.insert(*fp, c.below());
            }
        }
        (entries, forget)
    }

    /// A copy of everything but the changes (which deltas were applied,
    /// the marks, the containers named).
    pub fn clone_without_changes(&self) -> Overlay {
        Overlay {
            seq: self.seq,
            covered_below: self.covered_below,
            containers: self.containers.clone(),
            changes: FpMap::default(),
            applied: self.applied.clone(),
            removed_any: self.removed_any,
        }
    }

    /// What the deltas say about `fp`, if anything.
    pub fn lookup(&self, fp: &Fingerprint) -> Option<Change> {
        self.changes.get(fp).copied()
    }

    /// What the deltas put that no removal forgot.
    pub fn stored(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        self.changes.iter().filter_map(|(fp, c)| {
            c.put().map(|id| IndexEntry {
                fp: *fp,
                container: id,
            })
        })
    }

    /// Fingerprints some removal reached and no put stored again: an upper
    /// bound on the file's entries the deltas forget.
    pub fn removed(&self) -> usize {
        self.changes
            .values()
            .filter(|c| c.removes() && c.put().is_none())
            .count()
    }

    /// Loads and applies every delta `listing` shows: those of generations
    /// older than `generation` (left by a merge that ran beside writers, in
    /// generation and sequence order), then `generation`'s own, which must
    /// run 1, 2, ... without a gap. Every delta must match the base file's
    /// fingerprint width. A missing, damaged or foreign delta is damage to
    /// derived data. `listing` is the listing of `index/` that found the
    /// generation (one LIST per open: on object storage each is a round
    /// trip).
    pub fn load(
        backend: &dyn Backend,
        listing: &[String],
        generation: u64,
        fp_width: usize,
    ) -> Result<Self> {
        let older = older_deltas(listing, generation);
        let own = own_deltas(listing, generation)?;
        let mut overlay = Overlay::default();
        overlay.extend(backend, generation, fp_width, &older)?;
        overlay.extend(backend, generation, fp_width, &own)?;
        Ok(overlay)
    }

    /// [`Overlay::load`] through `memo`: the newest generation's own
    /// deltas come from the overlay it holds, reused as it is when the
    /// listing shows no delta beyond it, else extended by the deltas after
    /// it (none of them is deleted while their generation is the newest,
    /// so their names are never reused). Older generations' deltas still
    /// listed are put before it ([`Overlay::then`]), from the memo's own
    /// copy while the listing shows the same ones ([`OverlayMemo::older`]).
    pub fn load_memoized(
        backend: &dyn Backend,
        listing: &[String],
        generation: u64,
        fp_width: usize,
        memo: &OverlayMemo,
    ) -> Result<Arc<Self>> {
        let keys = own_deltas(listing, generation)?;
        let last = keys.len() as u32;
        // Taken out while it grows, so that an overlay nothing else holds
        // (the index of the last backup dropped) grows in place instead of
        // being held twice; a failed growth leaves the memo empty.
        let held = memo.0.lock().take();
        let own = match held {
            Some((g, w, o)) if g == generation && w == fp_width && o.seq == last => o,
            Some((g, w, mut o)) if g == generation && w == fp_width && o.seq < last => {
                let from = o.seq as usize;
                Arc::make_mut(&mut o).extend(backend, generation, fp_width, &keys[from..])?;
                o
            }
            _ => {
                let mut fresh = Overlay::default();
                fresh.extend(backend, generation, fp_width, &keys)?;
                Arc::new(fresh)
            }
        };
        *memo.0.lock() = Some((generation, fp_width, own.clone()));
        let older = older_deltas(listing, generation);
        if older.is_empty() {
            return Ok(own);
        }
        let mut overlay = memo.older(backend, generation, fp_width, &older)?;
        overlay.then(&own);
        Ok(Arc::new(overlay))
    }

    /// Applies after this overlay the deltas `later` applied, from their
    /// effect alone: a later removal bound `b` spares what this overlay put
    /// only at or above `b`, as each of its removals would have, one after
    /// the other, and canonical combination is the highest id, which every
    /// bound filters alike.
    pub fn then(&mut self, later: &Overlay) {
        for (fp, l) in &later.changes {
            let c = self.changes.entry(*fp).or_insert(Change::UNCHANGED);
            // What this overlay put is to `later` what the file is to it.
            c.set_put(l.over(c.put()));
            c.set_below(c.below().max(l.below()));
        }
        self.containers.extend(later.containers.iter().copied());
        self.covered_below = self.covered_below.max(later.covered_below);
        self.applied.extend(later.applied.iter().copied());
        self.removed_any |= later.removed_any;
        self.seq = later.seq;
    }

    /// Applies the deltas `keys`, in order. On a store that serves
    /// requests in parallel (object storage) the deltas are fetched and
    /// decoded a window of [`Backend::read_parallelism`] at a time: eight
    /// writers add a delta each per backup, and one GET after another made
    /// opening the index the longest wait of a backup there. A window
    /// bounds what is held besides the overlay to that many deltas.
    fn extend(
        &mut self,
        backend: &dyn Backend,
        generation: u64,
        fp_width: usize,
        keys: &[(u64, u32)],
    ) -> Result<()> {
        blocking_for_each(
            keys,
            backend.read_parallelism(),
            |&(g, seq)| read_delta(backend, g, seq, fp_width, g == generation),
            |&(g, seq), delta| {
                let delta = delta?;
                self.apply(&delta.removes, removes_below(&delta), &delta.puts);
                if g == generation {
                    self.seq = seq;
                }
                self.applied.push((g, seq));
                self.covered_below = self.covered_below.max(Some(delta.covered_below));
                Ok(())
            },
        )
    }
}

/// Reads, decodes and checks delta `seq` of `generation`. `newest`: the
/// listing shows `generation` as the newest, so the delta's name is not
/// reused while anyone reads it as one of its deltas ([`Overlay::load_memoized`]'s
/// argument) and a local copy may serve it ([`Backend::read_stable`]).
fn read_delta(
    backend: &dyn Backend,
    generation: u64,
    seq: u32,
    fp_width: usize,
    newest: bool,
) -> Result<IndexDelta> {
    let key = object_names::index_delta(generation, seq);
    let delta = decode_index_delta(&delta_bytes(backend, &key, newest)?).map_err(|e| match e {
        Error::Corrupt { detail, .. } => Error::corrupt(key.clone(), detail),
        other => other,
    })?;
    check_delta(&delta, &key, generation, seq, fp_width)?;
    Ok(delta)
}

/// The stored bytes of delta `key`: a stable read ([`Backend::read_stable`],
/// which a local cache may serve) when `newest`, its generation the newest
/// its reader's listing shows (such a name is not reused while it is), a
/// plain read otherwise.
pub(crate) fn delta_bytes(backend: &dyn Backend, key: &str, newest: bool) -> Result<Vec<u8>> {
    if newest {
        backend.read_stable(key)
    } else {
        backend.read(key)
    }
}

/// The deltas of generations older than `generation` that `listing` shows,
/// in generation and sequence order (there may be gaps: a merge deletes
/// them in this order, and may stop half-way).
fn older_deltas(listing: &[String], generation: u64) -> Vec<(u64, u32)> {
    let mut keys: Vec<(u64, u32)> = listing
        .iter()
        .filter_map(|k| object_names::parse_index_delta(k))
        .filter(|(g, _)| *g < generation)
        .collect();
    keys.sort_unstable();
    keys
}

/// The sequence numbers of the deltas of `generation` that `listing`
/// shows, in listing order.
pub(super) fn delta_seqs(listing: &[String], generation: u64) -> impl Iterator<Item = u32> + '_ {
    listing
        .iter()
        .filter_map(|k| object_names::parse_index_delta(k))
        .filter(move |(g, _)| *g == generation)
        .map(|(_, seq)| seq)
}

/// The deltas of `generation` that `listing` shows, as `(generation,
/// seq)` in order, which must run 1, 2, ... without a gap.
fn own_deltas(listing: &[String], generation: u64) -> Result<Vec<(u64, u32)>> {
    let mut keys: Vec<(u64, u32)> = delta_seqs(listing, generation)
        .map(|seq| (generation, seq))
        .collect();
    keys.sort_unstable();
    for (i, &(_, seq)) in keys.iter().enumerate() {
        if seq != i as u32 + 1 {
            return Err(Error::corrupt(
                object_names::index_delta(generation, seq),
                format!(
                    "delta {} of index generation {generation} is missing",
                    i + 1
                ),
            ));
        }
    }
    Ok(keys)
}

/// The overlay a repository handle loaded last, by generation, fingerprint
/// width and last delta, when no older generation's delta was listed.
/// Deltas never change once written, and the newest generation's names are
/// never reused, so those name one overlay. A backup opens the index three or four times (its dedup
/// index, its parent's locator, the container-id floor), each time over the
/// same listing: without this each open read, decrypted and applied every
/// delta again, about 15% of an incremental backup's CPU with 8 writers.
///
/// It also holds the older generations' deltas it applied last
/// ([`OverlayMemo::older`]).
#[derive(Default)]
pub struct OverlayMemo(
    parking_lot::Mutex<Option<(u64, usize, Arc<Overlay>)>>,
    parking_lot::Mutex<Option<HeldOlder>>,
);

/// Older generations' deltas applied, for the newest generation and
/// fingerprint width they were listed beside, and the keys they came from.
struct HeldOlder {
    generation: u64,
    fp_width: usize,
    keys: Vec<(u64, u32)>,
    overlay: Arc<Overlay>,
}

impl OverlayMemo {
    /// The older generations' deltas `keys` (listed beside `generation`,
    /// the newest), applied: the held overlay when it came from the same
    /// keys beside the same generation, extended when they are a prefix
    /// of `keys`, else read afresh. A writer that opened before a merge
    /// and commits after it leaves such a delta for every load until the
    /// next merge, and a backup loads the index three or four times (its
    /// dedup index, its parent's locator twice, the container-id floor).
    ///
    /// Held copies may differ from the store only where a merge deleted
    /// one of those names after the load that read it and a writer that
    /// opened before that merge created it again before this load's
    /// listing, which then shows the same keys. What this returns is then
    /// what reading afresh would have given had the deletion and the
    /// creation both come after this listing: a schedule the protocol
    /// allows anyway (docs/concurrency.md, "Compaction beside writers"),
    /// and one in which only this reader's view differs, by a delta it
    /// does not see yet.
    fn older(
        &self,
        backend: &dyn Backend,
        generation: u64,
        fp_width: usize,
        keys: &[(u64, u32)],
    ) -> Result<Overlay> {
        let held = self.1.lock().take();
        let (mut overlay, from) = match held {
            Some(h)
                if h.generation == generation
                    && h.fp_width == fp_width
                    && keys.starts_with(&h.keys) =>
            {
                let n = h.keys.len();
                (Arc::unwrap_or_clone(h.overlay), n)
            }
            _ => (Overlay::default(), 0),
        };
        overlay.extend(backend, generation, fp_width, &keys[from..])?;
        *self.1.lock() = Some(HeldOlder {
            generation,
            fp_width,
            keys: keys.to_vec(),
            overlay: Arc::new(overlay.clone()),
        });
        Ok(overlay)
    }

    /// Empties the memo if it holds `overlay` itself, returning the
    /// generation it was held for.
    pub fn take_if_holding(&self, overlay: &Arc<Overlay>) -> Option<u64> {
        let mut held = self.0.lock();
        match held.as_ref() {
            Some((g, _, o)) if Arc::ptr_eq(o, overlay) => {
                let g = *g;
                *held = None;
                Some(g)
            }
            _ => None,
        }
    }

    /// Holds `overlay`, every delta of `generation` up to its `seq`.
    pub fn hold(&self, generation: u64, fp_width: usize, overlay: Arc<Overlay>) {
        *self.0.lock() = Some((generation, fp_width, overlay));
    }
}

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
        let over = |o: &Overlay, b: u8, file: Option<u64>| {
            o.lookup(&fp(b)).map(|c| c.over(file.map(ContainerId)))
        };
        assert_eq!(
            over(&o, 1, None),
            Some(None),
            "put below the bound: forgotten"
        );
        assert_eq!(
            over(&o, 2, None),
            Some(Some(ContainerId(40))),
            "newer put kept"
        );
        assert_eq!(
            over(&o, 3, Some(10)),
            Some(None),
            "file entry below: forgotten"
        );
        // A file entry at or above the bound was stored again meanwhile (a
        // merge folded a backup's delta): spared, as a newer put is.
        assert_eq!(over(&o, 3, Some(35)), Some(Some(ContainerId(35))));
        assert!(!o.lookup(&fp(3)).unwrap().forgets_file());
        // Unconditional removals forget whatever was put, and the file.
        o.apply(&[fp(2)], None, &[]);
        assert_eq!(over(&o, 2, Some(50)), Some(None));
        assert!(o.lookup(&fp(2)).unwrap().forgets_file());
    }

    /// Writes delta `seq` of `generation` (covering below `100 + seq`).
    fn write_delta(
        backend: &dyn Backend,
        generation: u64,
        seq: u32,
        puts: Vec<IndexEntry>,
        removes: Vec<Fingerprint>,
    ) {
        use cairn_format::index_delta::{encode_index_delta, IndexDelta};
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
    }

    /// The memo gives what a fresh load gives: reused over the same
    /// listing (no delta read again), extended by deltas added after it,
    /// and never confused across generations or with a gap.
    #[test]
    fn a_memoized_load_equals_a_fresh_one() {
        use cairn_backend::MemBackend;
        let backend = MemBackend::new();
        let write =
            |generation: u64, seq: u32, puts: Vec<IndexEntry>, removes: Vec<Fingerprint>| {
                write_delta(&backend, generation, seq, puts, removes)
            };
        let listing = || backend.list(object_names::INDEX).unwrap();
        let same = |a: &Overlay, b: &Overlay| {
            assert_eq!(a.seq, b.seq);
            assert_eq!(a.covered_below, b.covered_below);
            assert_eq!(a.containers, b.containers);
            assert_eq!(a.changes, b.changes);
            assert_eq!(a.applied, b.applied);
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
        assert_eq!(
            grown.lookup(&fp(1)).map(|c| c.over(None)),
            Some(Some(ContainerId(13)))
        );
        // A newer generation is loaded afresh.
        write(4, 1, vec![put(9, 20)], vec![]);
        let next = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap();
        same(&next, &Overlay::load(&backend, &listing(), 4, 32).unwrap());
        // Generation 3's deltas are still listed (a merge to 4 deletes
        // them after writing 4): applied first.
        assert_eq!(
            next.lookup(&fp(1)).map(|c| c.over(None)),
            Some(Some(ContainerId(13)))
        );
        assert_eq!(next.applied, vec![(3, 1), (3, 2), (3, 3), (4, 1)]);
        assert_eq!(next.seq, 1);
        // The memo holds generation 4's own deltas: extended by one more,
        // generation 3's held copies before them, as a fresh load.
        write(4, 2, vec![put(1, 21)], vec![fp(3)]);
        let both = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap();
        same(&both, &Overlay::load(&backend, &listing(), 4, 32).unwrap());
        for seq in 1..=3 {
            backend.delete(&object_names::index_delta(3, seq)).unwrap();
        }
        let alone = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap();
        assert_eq!(
            alone.lookup(&fp(9)).map(|c| c.over(None)),
            Some(Some(ContainerId(20)))
        );
        assert_eq!(alone.applied, vec![(4, 1), (4, 2)]);
        assert!(Arc::ptr_eq(
            &alone,
            &Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap()
        ));
        // A gap is damage, memo or not.
        write(4, 4, vec![put(8, 21)], vec![]);
        let e = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap_err();
        assert!(e.is_corruption(), "{e}");
    }

    /// Older generations' deltas are read once while the listing shows
    /// the same ones (extended when more follow), and afresh when one of
    /// them is gone; every load equals a fresh one.
    #[test]
    fn older_deltas_are_read_once_while_listed_alike() {
        use cairn_backend::{CountingBackend, MemBackend};
        let counters = Arc::new(cairn_core::Counters::default());
        let backend = CountingBackend::new(MemBackend::new(), counters.clone());
        let reads = || counters.read_ops.load(std::sync::atomic::Ordering::Relaxed);
        let write = |generation: u64, seq: u32, puts: Vec<IndexEntry>| {
            write_delta(&backend, generation, seq, puts, vec![])
        };
        let listing = || backend.list(object_names::INDEX).unwrap();
        let memo = OverlayMemo::default();
        let check = |expect_reads: u64| {
            let before = reads();
            let o = Overlay::load_memoized(&backend, &listing(), 4, 32, &memo).unwrap();
            assert_eq!(reads() - before, expect_reads);
            let fresh = Overlay::load(&backend, &listing(), 4, 32).unwrap();
            assert_eq!(o.changes, fresh.changes);
            assert_eq!(o.applied, fresh.applied);
            assert_eq!(o.covered_below, fresh.covered_below);
            assert_eq!(o.seq, fresh.seq);
        };
        write(3, 1, vec![put(1, 10)]);
        write(3, 2, vec![put(2, 11)]);
        write(4, 1, vec![put(3, 20)]);
        check(3);
        check(0);
        // A writer that opened at 3 commits after the merge to 4.
        write(3, 3, vec![put(1, 12)]);
        check(1);
        // The next merge deleted 3.1 (it goes first): read afresh.
        backend.delete(&object_names::index_delta(3, 1)).unwrap();
        check(2);
        check(0);
    }

    /// A generated batch: fingerprints removed, the removal's bound, puts.
    type Batch = (Vec<u8>, Option<u64>, Vec<(u8, u64)>);

    fn update_of((removes, below, puts): &Batch) -> IndexUpdate {
        IndexUpdate {
            puts: puts.iter().map(|(b, c)| put(*b, *c)).collect(),
            removes: removes.iter().map(|b| fp(*b)).collect(),
            removes_below: below.map(ContainerId),
        }
    }

    proptest::proptest! {
        /// Applying two runs of batches one after the other equals applying
        /// the second run's overlay after the first's ([`Overlay::then`]).
        #[test]
        fn then_equals_applying_in_order(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec(0u8..8, 0..4),
                    proptest::option::of(0u64..12),
                    proptest::collection::vec((0u8..8, 0u64..12), 0..4),
                ),
                0..10,
            ),
            split in 0usize..10,
        ) {
            let apply = |o: &mut Overlay, batch: &Batch| {
                let u = update_of(batch);
                o.apply(&u.removes, u.removes_below, &u.puts);
            };
            let split = split.min(batches.len());
            let mut whole = Overlay::default();
            batches.iter().for_each(|b| apply(&mut whole, b));
            let mut first = Overlay::default();
            batches[..split].iter().for_each(|b| apply(&mut first, b));
            let mut second = Overlay::default();
            batches[split..].iter().for_each(|b| apply(&mut second, b));
            first.then(&second);
            proptest::prop_assert_eq!(first.changes, whole.changes);
        }

        /// What a merge writes from the overlay and one more update
        /// ([`Overlay::with_update`]) equals applying the update to a copy
        /// of the overlay and reading its puts and removals.
        #[test]
        fn a_merges_entries_equal_applying_the_update_to_a_copy(
            batches in proptest::collection::vec(
                (
                    proptest::collection::vec(0u8..12, 0..4),
                    proptest::option::of(0u64..12),
                    proptest::collection::vec((0u8..12, 1u64..12), 0..6),
                ),
                1..10,
            ),
        ) {
            let (last, earlier) = batches.split_last().unwrap();
            let mut overlay = Overlay::default();
            for b in earlier {
                let u = update_of(b);
                overlay.apply(&u.removes, u.removes_below, &u.puts);
            }
            let update = update_of(last);
            let (mut entries, forget) = overlay.with_update(&update);
            let mut copy = overlay.clone();
            copy.apply(&update.removes, update.removes_below, &update.puts);
            let mut expected: Vec<IndexEntry> = copy.stored().collect();
            entries.sort_unstable_by_key(|e| e.fp);
            expected.sort_unstable_by_key(|e| e.fp);
            proptest::prop_assert_eq!(entries, expected);
            let expected_forget: FpMap<ContainerId> = copy
                .changes
                .iter()
                .filter(|(_, c)| c.removes())
                .map(|(fp, c)| (*fp, c.below()))
                .collect();
            proptest::prop_assert_eq!(forget, expected_forget);
        }
    }
}
