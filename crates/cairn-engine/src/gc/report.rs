//! What a collection reports: its plan (printed before anything is copied
//! or deleted), and the time, I/O, memory and results of each phase
//! (`cairn gc --json`).

use std::time::Instant;

use serde::Serialize;

use cairn_core::CountersSnapshot;

use super::GcProgress;
use crate::repo::Repository;

use super::mark::EnumerationStats;

/// What a collection is about to do (printed before anything is deleted).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Plan {
    pub collector: String,
    pub snapshots: usize,
    pub containers: u64,
    pub repository_bytes: u64,
    pub estimated_dead_bytes: u64,
    pub selected_containers: u64,
    pub selected_bytes: u64,
    /// Highest liveness among the selected containers.
    pub liveness_threshold: f64,
    pub estimated_live_bytes_to_copy: u64,
    pub estimated_reclaim_bytes: u64,
    /// Of the selected containers, those cleaned for re-layout.
    pub relayout_containers: u64,
}

/// Time and I/O of one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    pub name: String,
    pub seconds: f64,
    pub metadata_reads: u64,
    pub containers_read: u64,
    pub chunk_reads: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryReport {
    /// Fingerprints in the index (the keys of the collection).
    pub fingerprints: u64,
    /// Peak bytes of the mark structures.
    pub bytes: u64,
    pub bits_per_fingerprint: f64,
    /// PGC+: bits per fingerprint of the live perfect-hash vector alone
    /// (function and vector; 003 §3.4 reports 2.8).
    pub live_vector_bits_per_fingerprint: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct GcReport {
    pub requested: String,
    pub collector: String,
    /// Why the requested collector was not used (PGC+ that did not fit).
    pub fell_back: Option<String>,
    /// Mark passes: 2 when focused cleaning was needed (003 §3.1.2).
    pub mark_passes: u32,
    pub dry_run: bool,
    /// PGC+: distinct chunks stored in judged containers that the index
    /// the collection read does not name (each is one more key of the live
    /// vector; `gc/mod.rs` `mark_with_vector`).
    pub unindexed_chunks: u64,
    pub plan: Plan,
    pub enumeration: EnumerationStats,
    pub memory: MemoryReport,
    pub phases: Vec<PhaseReport>,
    pub copied_chunks: u64,
    pub copied_bytes: u64,
    pub containers_written: u64,
    pub containers_deleted: u64,
    /// Bytes of deleted containers minus bytes of the new ones.
    pub reclaimed_bytes: i64,
    pub index_removed: u64,
    pub index_moved: u64,
    pub stopped_by_time: bool,
    /// Containers condemned and left for the next collection: the wait
    /// for backups that may use them outlasted `--max-seconds`.
    pub condemned_left: u64,
    /// Selected containers left in place because a live chunk was damaged.
    pub damaged: Vec<String>,
    /// Unselected containers whose metadata PGC+'s copy phase read.
    pub copy_metadata_reads: u64,
    /// Snapshots committed by backups while the collection ran, and the
    /// chunks they reached that it would have forgotten: copied (§3.5).
    pub concurrent_snapshots: usize,
    pub resurrected_chunks: u64,
    /// Containers in which no chunk was live, deleted before any copy
    /// (included in `containers_deleted`), and their bytes.
    pub dead_containers_deleted_first: u64,
    pub dead_bytes_freed_first: u64,
    /// Repairs Merge made (a damaged id reservation).
    pub warnings: Vec<String>,
    /// What re-layout did, when asked for (`relayout.rs`).
    pub relayout: Option<super::relayout::RelayoutReport>,
    pub seconds: f64,
}

/// The phases of a running collection: each one's time and I/O.
pub(super) struct Phases<'a> {
    pub repo: &'a Repository,
    pub progress: &'a dyn GcProgress,
    pub out: Vec<PhaseReport>,
    pub current: Option<(String, Instant, CountersSnapshot)>,
}

impl<'a> Phases<'a> {
    pub fn start(&mut self, name: &str, total: u64) {
        self.end();
        self.progress.phase(name, total);
        self.current = Some((
            name.to_string(),
            Instant::now(),
            self.repo.counters.snapshot(),
        ));
    }

    pub fn end(&mut self) {
        if let Some((name, t, before)) = self.current.take() {
            let d = self.repo.counters.snapshot().since(&before);
            self.out.push(PhaseReport {
                name,
                seconds: t.elapsed().as_secs_f64(),
                metadata_reads: d.container_meta_reads,
                containers_read: d.containers_read,
                chunk_reads: d.chunk_reads,
                bytes_read: d.bytes_read,
                bytes_written: d.bytes_written,
            });
        }
    }
}
