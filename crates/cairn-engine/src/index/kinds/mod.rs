//! The index-kind seam: which structure answers the dedup path's lookups
//! once the locality cache and the in-memory index part have missed (DDFS
//! §4.4 steps 2-3), and how the index is made durable at commit.
//!
//! A kind is chosen once, from `index.kind` in the repository config, when a
//! writer opens the index ([`super::open_for_write`]); the dedup path then
//! calls it only through [`FingerprintIndex`]. A new kind is a new file here
//! plus one arm in [`super::open_for_write`], nothing else.
//!
//! - [`paged::PagedIndex`]: DDFS, the Summary Vector in front of the paged
//!   on-disk index (`001` §4.1, §4.4).
//! - [`frugal::FrugalKind`]: `004`'s RAM-frugal cuckoo table over a chunk
//!   log (docs/frugal-index.md); the paged index is still written beside it
//!   for restore and check.

pub mod frugal;
pub mod paged;

use cairn_core::{Backend, ContainerId, Fingerprint, Result};

use crate::index::overlay::IndexUpdate;

/// One index kind, as the dedup path sees it. Counting of filter tests,
/// negatives and false positives belongs to the kind, since only the kind
/// knows whether it has a filter.
pub trait FingerprintIndex: Send {
    /// Step 2: the filter in front of the index. `true` means certainly new
    /// (no I/O); a kind without a separate filter always answers `false`.
    fn certainly_new(&self, fp: &Fingerprint) -> bool;

    /// Step 3, after the in-memory part missed: the container the index
    /// places `fp` in. A miss after the filter passed is counted as the
    /// filter's false positive.
    fn lookup(&mut self, fp: &Fingerprint) -> Result<Option<ContainerId>>;

    /// `fp` was decided new: it joins the filter.
    fn note_new(&mut self, fp: &Fingerprint);

    /// A chunk replayed at open (stored after the last commit): it joins
    /// the filter without counting as an insert of this backup.
    fn note_replayed(&mut self, fp: &Fingerprint);

    /// Lazy lookup (`000` Algorithm 2): the on-disk page `fp` belongs to;
    /// `None` when there is no on-disk index to batch reads for.
    fn page_of(&self, fp: &Fingerprint) -> Option<u64>;

    /// Lazy lookup: one read of a page answers every fingerprint in `fps`.
    fn lookup_page(&self, fps: &[Fingerprint]) -> Result<Vec<Option<ContainerId>>>;

    /// Lazy lookup: a filter positive that no index entry confirmed.
    fn note_false_positive(&self);

    /// Makes `update` durable (a backup: every chunk it packed, as puts;
    /// garbage collection: removals and moves) covering containers below
    /// `covered`. A put of a fingerprint already indexed keeps the
    /// canonical copy (`crate::canonical`); a removal forgets every copy
    /// before the batch's puts apply. Nothing is written when nothing
    /// changed, except derived data found missing.
    fn commit(
        &mut self,
        backend: &dyn Backend,
        update: IndexUpdate,
        covered: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<()>;

    /// Commits of this handle write the fewest bytes they can: deltas,
    /// not a merged generation, while the paged index allows
    /// ([`crate::index::disk_index::DiskIndex::prefer_deltas`]).
    fn prefer_deltas(&self) {}

    /// The next commit merges every delta listed into a new generation
    /// (a compaction beside writers, `compact.rs`); a no-op where the
    /// index has no deltas to merge.
    fn merge_next(&self) {}

    /// The mark of the index file (every container below it is in the
    /// file), where the index has one.
    fn base_covered_below(&self) -> Option<ContainerId> {
        None
    }

    /// Commits of this handle only add deltas: the writer runs beside
    /// others (`DiskIndex::beside_other_writers`).
    fn beside_other_writers(&self) {}

    /// Other writers had containers in flight at the open
    /// (`DiskIndex::expect_other_commits`).
    fn expect_other_commits(&self) {}

    /// Whether other writers may commit beside this handle
    /// (`DiskIndex::is_beside_other_writers`).
    fn is_beside_other_writers(&self) -> bool {
        false
    }

    /// The index deltas this handle's commits wrote, in order, as
    /// (generation, number) (`DiskIndex::written_deltas`).
    fn written_deltas(&self) -> Vec<(u64, u32)> {
        Vec::new()
    }

    /// Lookup RAM (filter or table), bytes.
    fn ram_bytes(&self) -> u64;

    /// Entries of the paged on-disk index.
    fn entry_count(&self) -> u64;
}
