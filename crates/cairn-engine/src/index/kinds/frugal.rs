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
use crate::index::frugal::{FrugalConfig, FrugalIndex};
use crate::index::rebuild_frugal_log;

/// Whether the logs of `frugal` (a handle alone, which indexes every log)
/// are worth writing afresh after a commit: more than one partition holds
/// records (writers ran beside each other; one log again makes the next
/// open read one run of segments), or the records that no longer count
/// (removals, and the puts they cancel or newer copies superseded) are at
/// least a quarter of the `entries` the paged index holds. A rewrite costs
/// one sequential write of the live records, which a quarter of dead ones
/// pays for, as a log-structured store's cleaner does (004, "Log-structured
/// organization", leaves the cleaning policy open). Collections are what
/// hold the writer lock alone and remove, so this is maintenance, never a
/// cost of a backup beside others (docs/frugal-index.md, "Compaction").
pub(crate) fn needs_compaction(frugal: &FrugalIndex, entries: u64) -> bool {
    let records = frugal.records();
    let dead = records.saturating_sub(entries);
    frugal.logs_holding_records() > 1 || (dead > 0 && dead >= entries / 4)
}

pub struct FrugalKind {
    pub frugal: FrugalIndex,
    pub disk: DiskIndex,
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    /// The lock of the partition this handle appends to, beside other
    /// writers (`index::open_frugal`); released with the handle.
    _partition: Option<Box<dyn LockGuard>>,
}

impl FrugalKind {
    pub fn new(
        frugal: FrugalIndex,
        disk: DiskIndex,
        backend: Arc<dyn Backend>,
        counters: Arc<Counters>,
        partition: Option<Box<dyn LockGuard>>,
    ) -> Self {
        FrugalKind {
            frugal,
            disk,
            backend,
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
    fn note_new(&mut self, _fp: &Fingerprint) {}

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
    /// checkpoint. A handle alone then compacts loose logs
    /// ([`needs_compaction`]).
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
        let entries = self.disk.entry_count();
        if self.frugal.is_alone() && needs_compaction(&self.frugal, entries) {
            let cfg = FrugalConfig {
                expected_chunks: (entries as usize).max(1 << 16),
                ..self.frugal.config().clone()
            };
            self.frugal = rebuild_frugal_log(&self.backend, &self.counters, &self.disk, cfg)?;
        }
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

    fn is_beside_other_writers(&self) -> bool {
        self.disk.is_beside_other_writers()
    }

    fn written_deltas(&self) -> Vec<(u64, u32)> {
        self.disk.written_deltas()
    }

    fn ram_bytes(&self) -> u64 {
        let ram = self.frugal.ram();
        (ram.table_slot_bytes + ram.stash_bytes) as u64
    }

    fn entry_count(&self) -> u64 {
        self.disk.entry_count()
    }
}
