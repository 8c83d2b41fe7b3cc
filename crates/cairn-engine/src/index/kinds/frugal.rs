//! The RAM-frugal index kind (`004` "Chunk Indexing", docs/frugal-index.md):
//! the cuckoo table is the filter (no signature match means new without
//! I/O, counted as a Bloom negative), a signature match is confirmed in the
//! chunk log through the prefetch cache (a log read counts as an index page
//! read). The paged index is still written at commit, after the chunk log,
//! so the log always covers what the paged index covers; lazy lookup batches
//! its reads on the paged index's pages.

use std::sync::Arc;

use crate::index::overlay::IndexUpdate;
use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, LockGuard, Result};

use super::paged::commit_paged;
use super::FingerprintIndex;
use crate::index::disk_index::DiskIndex;
use crate::index::frugal::FrugalIndex;

pub struct FrugalKind {
    pub frugal: FrugalIndex,
    pub disk: DiskIndex,
    counters: Arc<Counters>,
    /// The lock of the partition this handle appends to, beside other
    /// writers (`index::open_frugal`); released with the handle.
    _partition: Option<Box<dyn LockGuard>>,
}

impl FrugalKind {
    pub fn new(
        frugal: FrugalIndex,
        disk: DiskIndex,
        counters: Arc<Counters>,
        partition: Option<Box<dyn LockGuard>>,
    ) -> Self {
        FrugalKind {
            frugal,
            disk,
            counters,
            _partition: partition,
        }
    }
}

impl FingerprintIndex for FrugalKind {
    /// The table filters inside [`Self::lookup`], after the in-memory part.
    fn certainly_new(&self, _fp: &Fingerprint) -> bool {
        false
    }

    fn lookup(&mut self, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        let c = &*self.counters;
        bump(&c.bloom_tests, 1);
        let negatives = self.frugal.stats().table_negatives;
        let found = self.frugal.lookup(fp)?;
        if found.is_none() {
            if self.frugal.stats().table_negatives > negatives {
                bump(&c.bloom_negatives, 1);
            } else {
                bump(&c.bloom_false_positives, 1);
            }
        }
        Ok(found)
    }

    /// New chunks join the table at commit, with their containers.
    fn note_new(&self, _fp: &Fingerprint) {}

    fn note_replayed(&mut self, _fp: &Fingerprint) {}

    fn page_of(&self, fp: &Fingerprint) -> Option<u64> {
        self.disk.page_of(fp)
    }

    fn lookup_page(&self, fps: &[Fingerprint]) -> Result<Vec<Option<ContainerId>>> {
        self.disk.lookup_many(fps)
    }

    fn note_false_positive(&self) {}

    /// The chunk log gets `update` first, then the paged index. A crash in
    /// between leaves the log ahead of the paged index; applying the batch
    /// again changes nothing a lookup sees. The frugal kind has no
    /// checkpoint.
    fn commit(
        &mut self,
        backend: &dyn Backend,
        update: IndexUpdate,
        covered: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<()> {
        self.frugal.apply(&update)?;
        commit_paged(
            &self.disk, None, backend, update, covered, fp_width, page_size,
        )?;
        Ok(())
    }

    fn merge_next(&self) {
        self.disk.merge_next();
    }

    fn prefer_deltas(&self) {
        self.disk.prefer_deltas();
    }

    fn beside_other_writers(&self) {
        self.disk.beside_other_writers();
    }

    fn expect_other_commits(&self) {
        self.disk.expect_other_commits();
    }

    fn ram_bytes(&self) -> u64 {
        let ram = self.frugal.ram();
        (ram.table_slot_bytes + ram.stash_bytes) as u64
    }

    fn entry_count(&self) -> u64 {
        self.disk.entry_count()
    }
}
