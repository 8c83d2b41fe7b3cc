//! DDFS's index kind (`001_3652cceaf162c5a1.txt` §4.1, §4.4): the Summary
//! Vector answers "certainly new" from RAM; what it lets through costs one
//! page read of the on-disk paged index. At commit the checkpoint of the
//! new generation is written before the generation itself.

use std::sync::Arc;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, Result};

use super::FingerprintIndex;
use crate::index::disk_index::{DiskIndex, IndexUpdate, MAX_DELTAS};
use crate::index::summary_vector::SummaryVector;
use crate::index::{delete_checkpoints_before, write_checkpoint};
use crate::object_names;

pub struct PagedIndex {
    pub disk: DiskIndex,
    pub summary: SummaryVector,
    counters: Arc<Counters>,
    /// The Summary Vector is consulted (off only for DDFS Table 4 ablations;
    /// it is still kept up to date and checkpointed).
    use_summary: bool,
    /// The current generation's checkpoint was unusable at open: the commit
    /// rewrites it even if nothing else changed.
    checkpoint_rebuilt: bool,
    /// Summary Vector bits per chunk the filter is sized at when it grows.
    bits_per_chunk: u32,
}

impl PagedIndex {
    pub fn new(
        disk: DiskIndex,
        summary: SummaryVector,
        counters: Arc<Counters>,
        use_summary: bool,
        checkpoint_rebuilt: bool,
        bits_per_chunk: u32,
    ) -> Self {
        PagedIndex {
            disk,
            summary,
            counters,
            use_summary,
            checkpoint_rebuilt,
            bits_per_chunk,
        }
    }
}

/// What a commit wrote to the paged index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    Nothing,
    /// A delta over the current generation (cost: what changed).
    Delta,
    /// A new generation (file, deltas and new entries merged).
    Generation,
}

/// Makes `update` durable in the paged index when anything changed: as a
/// delta, or, when deltas pile up, as a merged new generation
/// (`DiskIndex::wants_merge`). A new generation's Summary Vector checkpoint
/// (when there is one) is written before the generation itself, so a reader
/// (`check`) never sees a generation without its checkpoint, and older
/// checkpoints go only after the generation is written. A crash in between
/// leaves a checkpoint of a generation not yet written, which the next
/// commit overwrites. A delta needs no checkpoint: opening loads the
/// generation's checkpoint and adds the deltas' entries (DDFS §4.1
/// checkpoint + replay, one level up).
pub(crate) fn commit_paged(
    disk: &DiskIndex,
    summary: Option<&SummaryVector>,
    backend: &dyn Backend,
    update: IndexUpdate,
    covered: ContainerId,
    fp_width: usize,
    page_size: usize,
) -> Result<Written> {
    // Nothing to add: nothing written, unless the deltas piled up (backups
    // that ran beside others add deltas only): then a writer alone merges.
    let piled_up =
        disk.generation() > 0 && (disk.delta_count() >= MAX_DELTAS || disk.merge_asked());
    if update.is_empty() && covered == disk.covered_below() && !piled_up {
        return Ok(Written::Nothing);
    }
    if !disk.wants_merge(&update) {
        disk.write_delta(update, covered, fp_width)?;
        return Ok(Written::Delta);
    }
    let next = disk.next_generation();
    if let Some(sv) = summary {
        backend.write_atomic(&object_names::bloom(next), &sv.checkpoint(covered))?;
    }
    let written = disk.merge(update, covered, fp_width, page_size)?;
    debug_assert_eq!(written, next);
    if summary.is_some() {
        delete_checkpoints_before(backend, written)?;
    }
    Ok(Written::Generation)
}

impl FingerprintIndex for PagedIndex {
    fn certainly_new(&self, fp: &Fingerprint) -> bool {
        if !self.use_summary {
            return false;
        }
        bump(&self.counters.bloom_tests, 1);
        let new = !self.summary.contains(fp);
        if new {
            bump(&self.counters.bloom_negatives, 1);
        }
        new
    }

    fn lookup(&mut self, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        let found = self.disk.lookup(fp)?;
        if found.is_none() {
            self.note_false_positive();
        }
        Ok(found)
    }

    fn note_new(&mut self, fp: &Fingerprint) {
        self.summary.insert(fp);
        if self.use_summary {
            bump(&self.counters.bloom_inserts, 1);
        }
    }

    fn note_replayed(&mut self, fp: &Fingerprint) {
        self.summary.insert(fp);
    }

    fn page_of(&self, fp: &Fingerprint) -> Option<u64> {
        self.disk.page_of(fp)
    }

    fn lookup_page(&self, fps: &[Fingerprint]) -> Result<Vec<Option<ContainerId>>> {
        self.disk.lookup_many(fps)
    }

    fn note_false_positive(&self) {
        if self.use_summary {
            bump(&self.counters.bloom_false_positives, 1);
        }
    }

    /// The Summary Vector already holds every put: a backup's through
    /// [`FingerprintIndex::note_new`], a moved chunk's since it was first
    /// indexed. A Bloom filter cannot forget, so when a new generation is
    /// written after removals (a garbage collection's commit, now or in a
    /// delta since the last generation) the filter is rebuilt from the
    /// entries that stay, in one pass over the index: a removed fingerprint
    /// costs no false positive after that. The same pass grows the filter
    /// (to four times the entries) when a new generation would leave it
    /// overfull, so the checkpoint's size follows the repository's chunk
    /// count instead of a fixed guess.
    fn commit(
        &mut self,
        backend: &dyn Backend,
        update: IndexUpdate,
        covered: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<()> {
        let generation = self.disk.generation();
        if self.disk.wants_merge(&update) {
            let removed = !update.removes.is_empty() || self.disk.deltas_removed_entries();
            // Entries the new generation holds, at most (puts may overwrite).
            let entries = self.disk.entry_count() + update.puts.len() as u64;
            // Sized like an open that finds the checkpoint overfull: twice the
            // entries, so the filter doubles geometrically as the repository
            // grows and a small repository keeps a small checkpoint.
            let overfull = self.summary.is_overfull(entries * 2, self.bits_per_chunk);
            if removed || overfull {
                let gone: cairn_core::FpSet = update.removes.iter().copied().collect();
                let mut fresh = if overfull {
                    SummaryVector::with_capacity(entries * 4, self.bits_per_chunk)
                } else {
                    self.summary.empty_like()
                };
                self.disk.for_each_entry_at_least_once(&mut |e| {
                    if !gone.contains(&e.fp) {
                        fresh.insert(&e.fp);
                    }
                })?;
                for e in &update.puts {
                    fresh.insert(&e.fp);
                }
                self.summary = fresh;
            }
        }
        let wrote = commit_paged(
            &self.disk,
            Some(&self.summary),
            backend,
            update,
            covered,
            fp_width,
            page_size,
        )?;
        // A checkpoint found unusable at open is rewritten for the file it
        // belongs to (the filter holds at least the file's entries).
        if wrote != Written::Generation && generation > 0 && self.checkpoint_rebuilt {
            let base_covered = self.disk.base_covered_below();
            write_checkpoint(backend, &self.summary, generation, base_covered)?;
            self.checkpoint_rebuilt = false;
        }
        Ok(())
    }

    fn merge_next(&self) {
        self.disk.merge_next();
    }

    fn base_covered_below(&self) -> Option<ContainerId> {
        (self.disk.generation() > 0).then(|| self.disk.base_covered_below())
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
        self.summary.ram_bytes()
    }

    fn entry_count(&self) -> u64 {
        self.disk.entry_count()
    }
}
