//! Enumeration, the heart of the mark phase (`003_ea5fccc485a97c5d.txt`):
//!
//! - **logical** (§3.1 step 2, LGC): every live snapshot's tree is walked
//!   depth-first from its root listing down to the L1 nodes, every file of
//!   every snapshot, shared or not; each chunk met is recorded live.
//! - **physical** (§3.2 step 2, PGC and PGC+): the namespace (directory
//!   listings) is walked to find the file roots, which get their *walk* bit
//!   in the perfect-hash vector of tree nodes; then containers are scanned
//!   **level by level**, top level first: a node whose walk bit is set gets
//!   its *confirm* bit, and its children get their walk bits (at level 1:
//!   the data chunks are recorded live). Per level, the XOR of the
//!   fingerprints given a walk bit (C, "child") must equal the XOR of the
//!   fingerprints confirmed (P, "parent") at the end of that level's scan
//!   (§3.2.2): a node that is referenced but missing, stored at the wrong
//!   level or damaged stops the collection before anything is deleted.
//!
//! What "recorded live" means is the collector's: a Bloom filter (LGC and
//! PGC) or the perfect-hash vector over every fingerprint (PGC+); with
//! focused cleaning (§3.1.2) only sampled or candidate fingerprints are
//! recorded ([`Gate`]).

use cairn_core::{mix64, ChunkKind, ContainerId, Error, Fingerprint, Result};
use cairn_format::dir::BlobRef;
use cairn_format::tree::decode_tree_node;

use super::filters::{LiveFilter, Phv};
use crate::reachability::{At, Reachability, Visitor};
use crate::read::cache::{ChunkStore, MetaChunks, RestoreCache};

/// Walk and confirm bits of the tree-node vector (§3.2.2: "a PH function
/// that maps from a chunk hash value to two bits").
pub const WALK: u32 = 0;
pub const CONFIRM: u32 = 1;

/// The live set of a collector.
pub enum Live {
    /// LGC, PGC: the Live Bloom filter.
    Bloom(LiveFilter),
    /// PGC+: one live bit per fingerprint of the index.
    Phv(Phv),
}

impl Live {
    pub fn insert(&mut self, fp: &Fingerprint) {
        match self {
            Live::Bloom(f) => f.insert(fp),
            Live::Phv(v) => {
                v.set(fp, 0);
            }
        }
    }

    pub fn contains(&self, fp: &Fingerprint) -> bool {
        match self {
            Live::Bloom(f) => f.contains(fp),
            Live::Phv(v) => v.get(fp, 0),
        }
    }

    pub fn bytes(&self) -> u64 {
        match self {
            Live::Bloom(f) => f.bytes(),
            Live::Phv(v) => v.bytes(),
        }
    }
}

/// Which fingerprints a pass records (focused cleaning, §3.1.2): all, a
/// sample (first pass), or those in the candidate containers (second pass).
pub struct Gate {
    /// A fingerprint is sampled when its mixed hash is below this.
    pub sample_below: u64,
    pub seed: u64,
    pub candidates: Option<LiveFilter>,
}

impl Gate {
    pub fn all() -> Self {
        Gate {
            sample_below: u64::MAX,
            seed: 0,
            candidates: None,
        }
    }

    #[inline]
    pub fn sampled(&self, fp: &Fingerprint) -> bool {
        self.sample_below == u64::MAX || mix64(fp.fold64() ^ self.seed) < self.sample_below
    }

    #[inline]
    pub fn admit(&self, fp: &Fingerprint) -> bool {
        self.sampled(fp) && self.candidates.as_ref().is_none_or(|c| c.contains(fp))
    }
}

/// What enumeration read.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EnumerationStats {
    /// Tree nodes and listing chunks read (one range read each).
    pub nodes_read: u64,
    /// Data-chunk references met (with repetition: logical work).
    pub data_refs: u64,
    /// Container metadata sections read by the level scans.
    pub metadata_reads: u64,
    /// Levels scanned, top first, with the matched checksums.
    pub levels: Vec<u8>,
}

/// Reads listing chunks and tree nodes for the walks: the index locates,
/// one range read per chunk, container metadata sections cached.
pub struct NodeReader<'a> {
    pub store: &'a ChunkStore,
    pub meta: MetaChunks,
    buf: Vec<u8>,
    /// Ticked every `TICK_NODES` reads (and every container a level scan
    /// reads), when set.
    progress: Option<&'a dyn super::GcProgress>,
    reads: u64,
}

impl<'a> NodeReader<'a> {
    pub fn new(store: &'a ChunkStore) -> Self {
        NodeReader {
            store,
            meta: MetaChunks::new(64),
            buf: Vec::new(),
            progress: None,
            reads: 0,
        }
    }

    /// The reader, telling `progress` of its reads ([`super::GcProgress::tick`]).
    pub fn ticking(mut self, progress: &'a dyn super::GcProgress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// One unit of reading done: a tick every `every` of them.
    fn count(&mut self, every: u64) {
        self.reads += 1;
        if let Some(p) = self.progress.filter(|_| self.reads.is_multiple_of(every)) {
            p.tick();
        }
    }

    fn read(&mut self, fp: &Fingerprint) -> Result<Vec<u8>> {
        self.count(super::TICK_NODES);
        self.meta.read_chunk(fp, self.store, &mut self.buf)?;
        Ok(std::mem::take(&mut self.buf))
    }

    /// A walk's read: the node's bytes, or `None` with the damage kept in
    /// `first` (the walk goes on; the caller stops before deleting).
    pub(super) fn read_or_stop(
        &mut self,
        fp: &Fingerprint,
        at: At<'_>,
        first: &mut Option<Error>,
    ) -> Option<Vec<u8>> {
        match self.read(fp) {
            Ok(b) => Some(b),
            Err(e) => {
                stop(first, damage_at(e, at));
                None
            }
        }
    }
}

/// Whether an interruption ends a walk (`crate::interrupt`): it does as
/// damage would, kept in `first`, so that nothing is judged from an
/// incomplete walk and the collection stops before deleting anything.
pub(super) fn interrupted_walk(first: &mut Option<Error>) -> bool {
    if crate::interrupt::requested() {
        stop(first, Error::Interrupted(super::stop::nothing_deleted()));
        return true;
    }
    false
}

/// The first damage a walk met: enumeration must not go on to delete
/// anything when a live tree could not be read whole.
pub(super) fn stop(first: &mut Option<Error>, e: Error) {
    if first.is_none() {
        *first = Some(e);
    }
}

/// Damage met walking a live snapshot, with what was (not) done and the
/// repair: the same as `check` names for lost data.
pub(super) fn damage_at(message: impl std::fmt::Display, at: At<'_>) -> Error {
    Error::corrupt(
        format!("snapshot {} at {}", at.snapshot, at.path),
        format!(
            "{message}; garbage collection stopped before deleting anything (`cairn check` \
             names the damage; `cairn repair index` then `cairn repair snapshots` repair it)"
        ),
    )
}

/// What both walks do with what they meet: record it live (through the
/// gate), read nodes, keep the first damage. Logical enumeration is this
/// visitor as it is; the namespace walk wraps it.
struct Marker<'r, 'a> {
    reader: &'r mut NodeReader<'a>,
    live: &'r mut Live,
    gate: &'r Gate,
    stats: &'r mut EnumerationStats,
    error: Option<Error>,
}

impl Visitor for Marker<'_, '_> {
    fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
        self.stats.data_refs += 1;
        if self.gate.admit(fp) {
            self.live.insert(fp);
        }
        true
    }

    fn read(&mut self, fp: &Fingerprint, _level: u8, at: At<'_>) -> Option<Vec<u8>> {
        if interrupted_walk(&mut self.error) {
            return None;
        }
        self.stats.nodes_read += 1;
        if self.gate.admit(fp) {
            self.live.insert(fp);
        }
        self.reader.read_or_stop(fp, at, &mut self.error)
    }

    fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
        stop(&mut self.error, damage_at(message, at));
    }
}

/// LGC Enumeration (§3.1 step 2): depth-first through every snapshot.
pub fn enumerate_logical(
    roots: &[(String, BlobRef)],
    reader: &mut NodeReader<'_>,
    live: &mut Live,
    gate: &Gate,
    stats: &mut EnumerationStats,
) -> Result<()> {
    for (id, root) in roots {
        let mut walk = Reachability::logical(reader.store.fp_width());
        let mut v = Marker {
            reader,
            live,
            gate,
            stats,
            error: None,
        };
        walk.walk_snapshot(id, root, &mut v);
        if let Some(e) = v.error {
            return Err(e);
        }
    }
    Ok(())
}

/// Per-level XOR checksums (§3.2.2), indexed by level.
#[derive(Default)]
pub struct Checksums {
    child: Vec<[u8; 32]>,
    parent: Vec<[u8; 32]>,
}

fn xor_into(acc: &mut Vec<[u8; 32]>, level: u8, fp: &Fingerprint) {
    let l = level as usize;
    if acc.len() <= l {
        acc.resize(l + 1, [0; 32]);
    }
    for (a, b) in acc[l].iter_mut().zip(fp.as_bytes()) {
        *a ^= b;
    }
}

impl Checksums {
    /// `fp` was found in a parent's array of children (or as a file root).
    pub fn child(&mut self, level: u8, fp: &Fingerprint) {
        xor_into(&mut self.child, level, fp);
    }
    /// `fp` was found itself at `level`.
    pub fn parent(&mut self, level: u8, fp: &Fingerprint) {
        xor_into(&mut self.parent, level, fp);
    }
    pub fn matches(&self, level: u8) -> bool {
        let get = |v: &Vec<[u8; 32]>| v.get(level as usize).copied().unwrap_or([0; 32]);
        get(&self.child) == get(&self.parent)
    }
}

/// Marks a tree node referenced at `level`: the walk bit, counted once in
/// the child checksum. A node already confirmed (a listing node read by
/// the namespace walk) is not scanned again, so its parent checksum is
/// added here too.
fn refer(lp: &mut Phv, sums: &mut Checksums, level: u8, fp: &Fingerprint) -> Result<()> {
    if !lp.is_member(fp) {
        return Err(Error::corrupt(
            format!("tree node {fp} (level L{level})"),
            "referenced by a live tree but stored in no container; garbage collection \
             stopped before deleting anything (run `cairn check`)",
        ));
    }
    if lp.set(fp, WALK) {
        sums.child(level, fp);
        if lp.get(fp, CONFIRM) {
            sums.parent(level, fp);
        }
    }
    Ok(())
}

struct NamespaceVisitor<'r, 'a> {
    marker: Marker<'r, 'a>,
    lp: &'r mut Phv,
    sums: &'r mut Checksums,
}

impl Visitor for NamespaceVisitor<'_, '_> {
    fn data(&mut self, fp: &Fingerprint, at: At<'_>) -> bool {
        self.marker.data(fp, at)
    }

    /// A listing chunk or one of its tree nodes, or a node of a file whose
    /// tree lies outside the judged containers: read now, confirmed now.
    /// A node that is no key of `lp` (stored in a container not judged)
    /// leaves `lp` alone: its slot is another node's.
    fn read(&mut self, fp: &Fingerprint, level: u8, at: At<'_>) -> Option<Vec<u8>> {
        if level > 0 && self.lp.is_member(fp) && !self.lp.get(fp, CONFIRM) {
            self.lp.set(fp, CONFIRM);
            if self.lp.get(fp, WALK) {
                // Referenced as a file root before: balance its child sum.
                self.sums.parent(level, fp);
            }
        }
        self.marker.read(fp, level, at)
    }

    fn damage(&mut self, message: String, fp: Option<&Fingerprint>, at: At<'_>) {
        self.marker.damage(message, fp, at);
    }

    /// A file root gets its walk bit; its tree is scanned level by level.
    /// A root stored in no judged container (a backup that committed
    /// beside the collection wrote it above the bound, docs/concurrency.md)
    /// is walked here instead, node by node, so the chunks it reaches in
    /// judged containers are marked: the level scans read judged
    /// containers only.
    fn file(&mut self, content: &BlobRef, at: At<'_>) -> Option<bool> {
        if content.level == 0 {
            self.marker.data(&content.root, at);
        } else if !self.lp.is_member(&content.root) {
            return None;
        } else if let Err(e) = refer(self.lp, self.sums, content.level, &content.root) {
            stop(&mut self.marker.error, e);
            return Some(false);
        }
        Some(true)
    }
}

/// PGC/PGC+ Enumeration (§3.2 step 2): the namespace, then one scan per
/// level from the top down to L1, checking each level's checksums.
/// `levels`: each container with bit `k` set when it holds a tree node of
/// level `k`.
pub fn enumerate_physical(
    roots: &[(String, BlobRef)],
    reader: &mut NodeReader<'_>,
    levels: &[(ContainerId, u64)],
    live: &mut Live,
    lp: &mut Phv,
    gate: &Gate,
    stats: &mut EnumerationStats,
) -> Result<()> {
    let mut sums = Checksums::default();
    let mut walk = Reachability::new(reader.store.fp_width());
    for (id, root) in roots {
        let mut v = NamespaceVisitor {
            marker: Marker {
                reader,
                live,
                gate,
                stats,
                error: None,
            },
            lp,
            sums: &mut sums,
        };
        walk.walk_snapshot(id, root, &mut v);
        if let Some(e) = v.marker.error {
            return Err(e);
        }
    }
    let top = levels
        .iter()
        .map(|(_, m)| 63 - m.leading_zeros().min(63))
        .max()
        .unwrap_or(0) as u8;
    let store = reader.store;
    let mut raw = Vec::new();
    for level in (1..=top).rev() {
        for &(id, mask) in levels {
            if mask & (1 << level) == 0 {
                continue;
            }
            super::stop::stop_if_interrupted()?;
            reader.count(1);
            let meta = super::meta_of(&*store.log, id)?;
            stats.metadata_reads += 1;
            for d in &meta.descriptors {
                if d.kind != ChunkKind::Tree || d.level != level {
                    continue;
                }
                if !lp.get(&d.fp, WALK) || lp.get(&d.fp, CONFIRM) {
                    continue;
                }
                let stored = store.log.read_chunk(&meta, d)?;
                store
                    .codec
                    .decode_stored_verified(&stored, &meta, d, &mut raw)?;
                stats.nodes_read += 1;
                let node = decode_tree_node(&raw, store.fp_width())
                    .map_err(|e| Error::corrupt(format!("tree node {}", d.fp), e.to_string()))?;
                if node.level != level {
                    return Err(Error::corrupt(
                        format!("tree node {} in container {id}", d.fp),
                        format!("holds level {}, stored as level {level}", node.level),
                    ));
                }
                lp.set(&d.fp, CONFIRM);
                sums.parent(level, &d.fp);
                if gate.admit(&d.fp) {
                    live.insert(&d.fp);
                }
                for c in &node.children {
                    if level == 1 {
                        stats.data_refs += 1;
                        if gate.admit(&c.fp) {
                            live.insert(&c.fp);
                        }
                    } else {
                        refer(lp, &mut sums, level - 1, &c.fp)?;
                    }
                }
            }
        }
        if !sums.matches(level) {
            return Err(Error::corrupt(
                format!("level L{level} of the live trees"),
                "the checksum of referenced nodes differs from the checksum of nodes \
                 found: a tree node is missing or damaged; garbage collection stopped \
                 before deleting anything (run `cairn check`)",
            ));
        }
        stats.levels.push(level);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_balance_in_either_order() {
        let keys: Vec<Fingerprint> = (0u8..10)
            .map(|i| Fingerprint::from_slice(blake3::hash(&[i]).as_bytes()))
            .collect();
        let mut lp = Phv::build_tagged(keys.clone(), 2);
        let mut sums = Checksums::default();
        refer(&mut lp, &mut sums, 2, &keys[0]).unwrap();
        refer(&mut lp, &mut sums, 2, &keys[0]).unwrap();
        assert!(!sums.matches(2), "referenced, not yet found");
        lp.set(&keys[0], CONFIRM);
        sums.parent(2, &keys[0]);
        assert!(sums.matches(2));
        // Confirmed first (a listing node), referenced later.
        lp.set(&keys[1], CONFIRM);
        refer(&mut lp, &mut sums, 3, &keys[1]).unwrap();
        assert!(sums.matches(3));
        let stranger = Fingerprint::from_slice(blake3::hash(b"not stored").as_bytes());
        assert!(refer(&mut lp, &mut sums, 1, &stranger).is_err());
    }
}
