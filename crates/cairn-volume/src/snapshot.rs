//! `cairn volume snapshot`: the volume's state recorded as a snapshot in
//! its own chunk store (issue 32, "Snapshots and backups of a volume";
//! docs/volume.md "Snapshots").
//!
//! An optimized file's stream map is a recipe in the store, so the
//! snapshot records it by reference and never reads it: the engine's
//! backup of the backing tree asks [`VolumeFiles`] for each regular file
//! (`backup::file_content`):
//! - a file whose every byte is its stream map's (nothing recalled,
//!   `valid` = the blob's size = the file's length): the stream map itself,
//!   unread;
//! - a file partly recalled, truncated below its stream map or appended
//!   to: the chunks of its stream map that still hold its bytes, unread,
//!   and the rest read through the content state (stream map and backing
//!   file as the mount serves them) under its inode lock (`crate::splice`);
//! - a plain file: read from the backing tree as any backup reads.
//!
//! Files unchanged since the previous volume snapshot keep its content
//! without being opened (the engine's parent rule). The snapshot is tagged
//! [`SNAPSHOT_TAG`] and restores, lists and mounts with the ordinary
//! `restore`, `ls` and `mount` on `DIR/store`. It is a job: it must not run
//! beside optimization, gc or scrub (a file switched under the walk would
//! read as its punched holes), which the mount daemon's job runner and the
//! volume lock of the offline commands ensure.
//!
//! **Pacing.** With a [`Pacer`] (`SnapshotOptions::pacer`; the mount
//! daemon gives it one) the snapshot paces after each file the backup
//! stores and every `PACE_CONTENT_BYTES` it reads inside a file, through
//! the backup's entry and content logs, on the engine's stream thread
//! (a pause there holds the whole pipeline), as the optimization job's
//! ingest does. A snapshot is all or nothing, so a cancel does not stop
//! it: the first one is kept, the rest of the snapshot is taken unpaced,
//! and the report's `cancelled` says so.

use std::fs::{File, Metadata};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use cairn_core::Result;
use cairn_engine::backup::file_content::{FileContent, FileSource};
use cairn_engine::backup::{backup, BackupOptions, ParentChoice, Source};
use cairn_engine::catalog;

use crate::scheduler::{HookPacer, Pacer};
use crate::splice::VolumeSources;
use crate::volume::Volume;

/// The tag of every volume snapshot (and what finds the previous one).
pub const SNAPSHOT_TAG: &str = "volume-snapshot";

/// What `cairn volume snapshot` is asked.
#[derive(Clone, Debug, Default)]
pub struct SnapshotOptions {
    /// Tags beside [`SNAPSHOT_TAG`].
    pub tags: Vec<String>,
    /// The job's pacing handle from the scheduler; `None`: unpaced.
    pub pacer: Option<Arc<Pacer>>,
}

/// What a snapshot recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SnapshotReport {
    pub snapshot: String,
    /// The previous volume snapshot, whose unchanged files were kept unread.
    pub parent: Option<String>,
    /// Optimized files recorded by their stream map, unread.
    pub files_by_stream_map: u64,
    pub bytes_by_stream_map: u64,
    /// Partly optimized files: their unchanged chunks recorded unread, the
    /// rest read through the content state.
    pub files_assembled: u64,
    /// Bytes of those files read (recalled, appended, cut by a truncate).
    #[serde(default)]
    pub bytes_assembled: u64,
    /// Bytes the store took for the snapshot (new chunks and listings).
    pub new_bytes: u64,
    /// Paths that could not be read: the snapshot holds everything else
    /// (the command then exits 3, as an incomplete backup does).
    pub skipped: Vec<String>,
    /// Why the scheduler cancelled the snapshot midway; it was finished
    /// unpaced (a snapshot is whole or absent). `None`: no cancel.
    #[serde(default)]
    pub cancelled: Option<String>,
    pub seconds: f64,
}

/// The backup's [`FileContent`] hook for the backing tree.
struct VolumeFiles {
    sources: VolumeSources,
    by_stream_map: AtomicU64,
    bytes_by_stream_map: AtomicU64,
    assembled: AtomicU64,
    bytes_assembled: AtomicU64,
}

impl FileContent for VolumeFiles {
    fn source(&self, file: &File, meta: &Metadata) -> io::Result<Option<FileSource>> {
        let Some(found) = self.sources.source(file, meta)? else {
            return Ok(None);
        };
        if found.whole {
            self.by_stream_map.fetch_add(1, Ordering::Relaxed);
            self.bytes_by_stream_map
                .fetch_add(meta.len(), Ordering::Relaxed);
        } else {
            self.assembled.fetch_add(1, Ordering::Relaxed);
            self.bytes_assembled
                .fetch_add(found.bytes_read, Ordering::Relaxed);
        }
        Ok(Some(found.source))
    }
}

/// The newest volume snapshot's id, if any.
fn latest_snapshot(vol: &Volume) -> Result<Option<String>> {
    let (snapshots, _) = catalog::list(vol.repo().backend().as_ref())?;
    Ok(snapshots
        .into_iter()
        .filter(|s| s.record.tags.iter().any(|t| t == SNAPSHOT_TAG))
        .max_by_key(|s| s.record.time_unix_ns)
        .map(|s| s.id))
}

/// Records the volume's files as a snapshot in its store.
pub fn snapshot(vol: &Volume, opts: &SnapshotOptions) -> Result<SnapshotReport> {
    let started = Instant::now();
    let hook = Arc::new(VolumeFiles {
        sources: VolumeSources::new(vol)?,
        by_stream_map: AtomicU64::new(0),
        bytes_by_stream_map: AtomicU64::new(0),
        assembled: AtomicU64::new(0),
        bytes_assembled: AtomicU64::new(0),
    });
    let parent = latest_snapshot(vol)?;
    let mut tags = vec![SNAPSHOT_TAG.to_string()];
    tags.extend(opts.tags.iter().cloned());
    // Paces after each file stored; the first cancel is kept and the
    // rest of the snapshot is taken unpaced.
    let paced = opts.pacer.clone().map(|p| Arc::new(HookPacer::new(p)));
    let (entry_log, content_log) = paced.as_ref().map(|p| p.backup_hooks()).unzip();
    let repo = vol.repo();
    let lock = repo.lock_writer(false)?;
    let outcome = backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(vol.dir().files())],
            tags,
            parent: parent.clone().map_or(ParentChoice::None, ParentChoice::Id),
            file_content: Some(hook.clone()),
            entry_log,
            content_log,
            ..Default::default()
        },
    )?;
    drop(lock);
    Ok(SnapshotReport {
        snapshot: outcome.snapshot_id,
        parent,
        files_by_stream_map: hook.by_stream_map.load(Ordering::Relaxed),
        bytes_by_stream_map: hook.bytes_by_stream_map.load(Ordering::Relaxed),
        files_assembled: hook.assembled.load(Ordering::Relaxed),
        bytes_assembled: hook.bytes_assembled.load(Ordering::Relaxed),
        new_bytes: outcome.record.stats.new_stored_bytes,
        skipped: outcome.skipped,
        cancelled: paced
            .and_then(|p| p.cancelled())
            .map(|c| format!("{c}; cancelled midway, the snapshot was finished unpaced")),
        seconds: started.elapsed().as_secs_f64(),
    })
}
