//! The commit of a backup (docs/ARCHITECTURE.md "Backup, step by step",
//! steps 3-5): its chunks into the index (a delta, or a merged generation
//! when it runs alone), the duplicates that running beside other backups
//! cost (`concurrent.rs`), the phase timings, and the snapshot record.

use std::sync::atomic::{AtomicU64, Ordering};

use cairn_core::{CountersSnapshot, Result};
use cairn_format::snapshot::{SnapshotRecord, SnapshotStats};

use super::stream::Shared;
use super::{concurrent, record_host, secs, source_paths, BackupOptions, PhaseReport, RunState};

/// Commit steps 3-4: merges this backup's chunks into a new index
/// generation covering containers below `covered` (and its checkpoint).
/// Returns the lookup RAM per indexed chunk, how many of its new chunks
/// another backup stored meanwhile (`concurrent.rs`), and how many index
/// deltas were listed just before this one's.
pub(super) fn commit_index(
    shared: &Shared,
    backend: &dyn cairn_core::Backend,
    covered: cairn_core::ContainerId,
    deltas_at_open: &concurrent::DeltasAtOpen,
    replayed: &std::collections::HashSet<cairn_core::ContainerId>,
) -> Result<(f64, u64, usize)> {
    // The in-memory part's entries move into the update (its table is freed
    // before the merge); its RAM still counts as the backup's lookup RAM,
    // with the Summary Vector as the commit leaves it.
    let with_table = shared.dedup.ram_bytes();
    let puts = shared.dedup.take_memory_entries();
    let table_bytes = with_table.saturating_sub(shared.dedup.ram_bytes());
    // The listing gives the delta its number (the caller's listing scope
    // keeps it for `commit_index`); the deltas other backups wrote since
    // the open are read while this one's is written, so at eight writers on
    // object storage their reads cost no round trip of their own.
    let new = deltas_at_open.since(backend)?;
    // Beside other writers, a delta committed at the same moment as this
    // one's is found only after it (`NewDeltas::missed`), so this backup's
    // new chunks are kept for the comparison then too.
    let beside = shared.dedup.beside_other_writers();
    let ours = if new.is_empty() && !beside {
        Vec::new()
    } else {
        concurrent::ours_to_compare(&puts, replayed)
    };
    let (theirs, committed) = std::thread::scope(|s| {
        let theirs = (!new.is_empty()).then(|| s.spawn(|| new.fingerprints(backend)));
        let committed = shared.dedup.commit_index(
            backend,
            crate::index::overlay::IndexUpdate::puts(puts),
            covered,
            shared.cfg.fp_width(),
            shared.cfg.index.page_size as usize,
        );
        let theirs = theirs.map(crate::blocking_map::joined);
        (theirs, committed)
    });
    committed?;
    let mut theirs = match theirs {
        Some(theirs) => theirs?,
        None => Default::default(),
    };
    if beside {
        let missed = new.missed(deltas_at_open, &shared.dedup.written_deltas());
        if !missed.is_empty() {
            theirs.extend(missed.fingerprints(backend)?);
        }
    }
    let duplicates = concurrent::duplicates(&ours, &theirs);
    let deltas_listed = new.listed;
    let indexed = shared.dedup.indexed_entries().max(1);
    Ok((
        (shared.dedup.ram_bytes() + table_bytes) as f64 / indexed as f64,
        duplicates,
        deltas_listed,
    ))
}

pub(super) fn phase_report(shared: &Shared, run: &RunState, open_seconds: f64) -> PhaseReport {
    let p = &shared.phases;
    let commit_started = *run.commit_started.lock();
    PhaseReport {
        open_seconds,
        read_chunk_seconds: secs(&run.read_ns),
        hash_seconds: secs(&p.hash_ns),
        dedup_seconds: secs(&p.dedup_ns),
        compress_seconds: secs(&p.compress_ns),
        write_seconds: secs(&p.write_ns),
        commit_seconds: commit_started.elapsed().as_secs_f64(),
        total_seconds: run.started.elapsed().as_secs_f64(),
    }
}

/// The snapshot record of this backup (a rewrite keeps the original's time
/// and paths).
pub(super) fn snapshot_record(
    shared: &Shared,
    run: &RunState,
    opts: &BackupOptions,
    root: cairn_format::dir::BlobRef,
    covered: cairn_core::ContainerId,
    counters: CountersSnapshot,
    phases: &PhaseReport,
) -> SnapshotRecord {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let files = *run.files.lock();
    // Computed before the literal: a lock guard taken inside it would be
    // held to the end of the statement, and `skipped` is locked there too.
    let listings_complete = opts.rewrite_of.is_none()
        && run.skipped.lock().is_empty()
        && run.excluded.lock().is_empty()
        && !run.left_out_repository.load(Ordering::Relaxed);
    let stats = SnapshotStats {
        logical_bytes: load(&run.counts.logical_bytes),
        files: load(&run.counts.files),
        dirs: load(&run.counts.dirs),
        symlinks: load(&run.counts.symlinks),
        chunks: load(&shared.chunks),
        new_chunks: load(&shared.new_chunks),
        data_chunks: load(&shared.data_chunks),
        new_data_chunks: load(&shared.new_data_chunks),
        new_data_raw_bytes: load(&shared.new_data_raw_bytes),
        new_data_stored_bytes: load(&shared.new_data_stored_bytes),
        new_raw_bytes: load(&shared.new_raw_bytes),
        new_stored_bytes: load(&shared.new_stored_bytes),
        rewritten_data_chunks: load(&shared.rewritten_chunks),
        rewritten_data_raw_bytes: load(&shared.rewritten_raw_bytes),
        rewritten_data_stored_bytes: load(&shared.rewritten_stored_bytes),
        rewrite: if shared.rewrite.is_none() {
            String::new()
        } else {
            shared.rewrite.to_string()
        },
        containers_written: counters.containers_written,
        duration_ns: run.started.elapsed().as_nanos() as u64,
        skipped_paths: run.skipped.lock().len() as u64,
        parent: run.parent_id.clone().unwrap_or_default(),
        files_new: load(&run.counts.files).saturating_sub(files.changed + files.unmodified),
        files_changed: files.changed,
        files_unmodified: files.unmodified,
        unmodified_bytes: files.unmodified_bytes,
        listings_complete,
        files_changed_while_read: run.changed_while_read.lock().len() as u64,
        counters,
        phases: phases.as_map(),
    };
    let (time_unix_ns, paths) = match &opts.rewrite_of {
        Some(r) => (r.time_unix_ns, r.paths.clone()),
        None => (
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0),
            source_paths(&opts.sources),
        ),
    };
    SnapshotRecord {
        time_unix_ns,
        host: record_host(opts),
        paths,
        tags: opts.tags.clone(),
        root: root.into(),
        stats,
        next_container: covered.0,
        fastcopy_of: None,
        original: None,
    }
}
