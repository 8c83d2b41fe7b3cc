//! Garbage collection of the volume's chunk store (docs/volume.md,
//! "Garbage collection"): the live stream maps become the store's roots,
//! the optimization job's older snapshots are forgotten, and the engine's
//! own collector (`cairn_engine::gc`, paper 003's LGC, PGC, PGC+) frees
//! every chunk no root reaches. 004 has garbage collection in the chunk
//! store as one of its background jobs, cleaning up the chunks no file
//! references any more after writes; the mechanism here is cairn's.
//!
//! ```text
//! 1  list      S <- the snapshots tagged volume-optimize or volume-roots
//! 2  roots     R <- a snapshot tagged volume-roots whose tree lists every
//!              entry's stream map (one file per inode), committed durably
//! 3  forget    every snapshot of S (never R, never one committed after 1)
//! 4  collect   the engine's collector over what the catalog holds now
//! 5  refresh   the content state's chunk readers reopened on the new store
//! ```
//!
//! The invariant every step keeps: *every live entry's stream map is the
//! content of a file in some snapshot of the catalog*. The optimization
//! job keeps it (its snapshot is committed before any file is switched to
//! it), recovery and the data path only drop or shrink entries, and a gc
//! forgets a snapshot only once a later one (R) lists every stream map the
//! table held after the snapshot was listed. So a crash at any step
//! leaves every live chunk reachable, and the engine's collector is
//! itself crash-safe (docs/gc.md). Jobs run one at a time: an
//! optimization whose snapshot is in S and that switches files after the
//! table is read at step 2 would lose its files' roots (the offline
//! commands hold the volume lock; the daemon serializes its jobs).
//!
//! A stream map is listed whole: a file truncated below its stream map's
//! size, or with recalled ranges, keeps every chunk of the stream map
//! until it is optimized again. Trimming it would take a new recipe (new
//! tree nodes) per such file.
//!
//! **Pacing.** With a [`Pacer`] (`GcOptions::pacer`; the mount daemon
//! gives it one) the collection paces before step 1, where a cancel stops
//! it with nothing done, and during step 4 through the engine collector's
//! progress hook ([`CollectorPacing`]): every 8 tree nodes its
//! enumeration reads (and every container a level scan reads), every
//! 4,096 index entries its filter tests, and once per container its
//! planning phases (analysis, select, candidates) and its copy phase go
//! through.
//! The engine's collection cannot be stopped safely midway from outside
//! (it would be left for the next run's Merge to finish), so a cancel
//! there is kept, pacing stops, the collection finishes unpaced, and the
//! report's `cancelled` says so. The collector is never paused in its
//! merge, commit and delete phases (they hold the store's writer lock or
//! lock its readers out), and while it is paused the content state does
//! not count a collection as under way, so no read waits for a paused
//! collection (see [`CollectorPacing`]).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use serde::Serialize;

use cairn_core::{Error, Fingerprint, Result};
use cairn_engine::backup::{backup, BackupOptions, Kept, ParentChoice, Source};
use cairn_engine::catalog::{self, SnapshotInfo};
use cairn_engine::gc::{self as engine_gc, Collector, GcProgress};
use cairn_engine::read::{CacheOptions, Reader};
use cairn_format::dir::{DirEntry, EntryKind, Extras};

use crate::optimize::{FailMode, OPTIMIZE_TAG};
use crate::scheduler::{HookPacer, Pacer};
use crate::volume::Volume;
use crate::volume_content::VolumeContent;

/// The tag of the snapshot listing the live stream maps.
pub const ROOTS_TAG: &str = "volume-roots";

/// The name of the one directory of a roots snapshot (its source path).
const ROOTS_DIR: &str = "stream-maps";

/// The points of a collection where a test may stop it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcStep {
    /// Step 2 done: the roots snapshot committed, nothing forgotten.
    RootsCommitted,
    /// Step 3 under way: the first old snapshot forgotten, others not.
    FirstForgotten,
    /// Step 3 done: the old snapshots forgotten, nothing collected.
    Forgotten,
    /// Step 4 done: the store collected, the content state not refreshed.
    Collected,
}

/// A test hook: stop a collection at `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcFailAt {
    pub step: GcStep,
    pub mode: FailMode,
}

/// How one collection runs.
#[derive(Default)]
pub struct GcOptions<'a> {
    /// The engine's collector (`None`: its default, PGC+).
    pub collector: Option<Collector>,
    /// Plan only: commit, forget, copy and delete nothing.
    pub dry_run: bool,
    /// A test hook (see [`GcFailAt`]).
    pub fail_at: Option<GcFailAt>,
    /// Called between steps 4 and 5 (collected, readers not yet
    /// refreshed): a test reads files there.
    pub after_collect: Option<&'a dyn Fn()>,
    /// The job's pacing handle from the scheduler; `None`: unpaced.
    pub pacer: Option<Arc<Pacer>>,
}

/// What a collection did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// Live stream maps listed as roots (one per optimized inode).
    pub roots: u64,
    /// Logical bytes of those stream maps (whole, as listed).
    pub root_bytes: u64,
    /// The snapshot listing them (none in a dry run).
    pub roots_snapshot: Option<String>,
    /// Older `volume-optimize` and `volume-roots` snapshots forgotten (in a
    /// dry run: those that would be and hold no live stream map).
    pub snapshots_forgotten: u64,
    /// The collector that ran (after any fallback).
    pub collector: String,
    /// Bytes of containers deleted minus bytes of containers written (in a
    /// dry run: the plan's estimate).
    pub reclaimed_bytes: i64,
    pub containers_deleted: u64,
    pub containers_written: u64,
    /// Chunks the store's index holds after the collection: every live
    /// chunk, and any dead one in a container the collection left alone.
    pub chunks_after: u64,
    /// Live chunks copied out of cleaned containers, and their bytes.
    pub copied_chunks: u64,
    pub copied_bytes: u64,
    /// The engine collector's own report (phases, plan, memory).
    pub collection: engine_gc::GcReport,
    /// Why the scheduler cancelled the run: before step 1 (nothing was
    /// done), or during the collection (it was finished unpaced). `None`:
    /// no cancel.
    pub cancelled: Option<String>,
    pub seconds: f64,
}

/// Collects the volume's chunk store (steps in the module doc). The
/// caller has the volume open, and no optimization runs meanwhile.
pub fn gc(vol: &Volume, opts: &GcOptions<'_>) -> Result<GcReport> {
    let started = Instant::now();
    let repo = vol.repo();
    let stop = |step: GcStep| -> Result<()> {
        match opts.fail_at {
            Some(f) if f.step == step => match f.mode {
                FailMode::Error => Err(Error::Interrupted(format!("test stop after {step:?}"))),
                FailMode::Abort => std::process::abort(),
            },
            _ => Ok(()),
        }
    };
    let mut report = GcReport {
        dry_run: opts.dry_run,
        ..Default::default()
    };
    if let Some(Err(c)) = opts.pacer.as_ref().map(|p| p.pace()) {
        report.cancelled = Some(format!("{c}; nothing was done"));
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    // No other collection of the store runs while this one forgets roots.
    let gc_lock = repo.lock_gc(false)?;

    // Step 1, under the writer lock so no optimization commits meanwhile
    // (one committed after it is not in `old`, so it is kept).
    let writer = repo.lock_writer(false)?;
    let old = volume_snapshots(repo)?;
    // Step 2: every entry's stream map, from the table as it is now.
    let mut entries = vol.table().all();
    entries.sort_by_key(|e| e.identity.ino);
    report.roots = entries.len() as u64;
    report.root_bytes = entries.iter().map(|e| e.blob.size).sum();
    let forget: Vec<String> = if opts.dry_run {
        let live: HashSet<Fingerprint> = entries.iter().map(|e| e.blob.root).collect();
        unneeded(repo, &old, &live)?
    } else {
        let leaves = entries
            .iter()
            .map(|e| {
                Kept::Leaf(DirEntry {
                    name: format!("{:020}", e.identity.ino).into_bytes(),
                    kind: EntryKind::File,
                    mode: 0o100_444,
                    uid: 0,
                    gid: 0,
                    mtime_ns: 0,
                    ctime_ns: 0,
                    inode: e.identity.ino,
                    size: e.blob.size,
                    target: None,
                    content: Some(e.blob),
                    children: None,
                    extras: Extras::default(),
                })
            })
            .collect();
        let outcome = backup(
            repo,
            &writer,
            BackupOptions {
                sources: vec![Source::Kept(Kept::Dir {
                    entry: roots_dir_entry(),
                    children: leaves,
                })],
                tags: vec![ROOTS_TAG.to_string()],
                parent: ParentChoice::None,
                rewrite_scheme: Some(cairn_engine::backup::rewrite::RewriteConfig::None),
                ..Default::default()
            },
        )?;
        report.roots_snapshot = Some(outcome.snapshot_id.clone());
        stop(GcStep::RootsCommitted)?;
        old.into_iter()
            .map(|s| s.id)
            .filter(|id| *id != outcome.snapshot_id)
            .collect()
    };

    // Step 3: the old roots go; R holds every stream map they were needed for.
    report.snapshots_forgotten = forget.len() as u64;
    if !opts.dry_run {
        for (n, id) in forget.iter().enumerate() {
            catalog::remove(&**repo.backend(), id)?;
            if n == 0 {
                stop(GcStep::FirstForgotten)?;
            }
        }
        stop(GcStep::Forgotten)?;
    }
    drop(writer);

    // Step 4: the engine's collector (it takes the writer lock itself).
    // Reads failing from here to step 5 wait for it and retry.
    let refresh = if opts.dry_run {
        None
    } else {
        Some(Refresh::start(vol)?)
    };
    let engine_opts = engine_gc::GcOptions {
        collector: opts.collector.unwrap_or_default(),
        dry_run: opts.dry_run,
        assume_forgotten: if opts.dry_run { forget } else { Vec::new() },
        // The volume's readers follow stream maps, not the newest
        // snapshot: its layout is the optimization job's (004).
        relayout: None,
        ..Default::default()
    };
    let pacing = CollectorPacing {
        pacer: opts.pacer.clone().map(HookPacer::new),
        content: match (&opts.pacer, &refresh) {
            (Some(_), Some(_)) => Some(vol.content()?),
            _ => None,
        },
        repo,
        state: Mutex::new(PhaseState::default()),
    };
    let collected = engine_gc::collect(repo, &gc_lock, &engine_opts, &pacing)?;
    drop(gc_lock);
    if let Some(c) = pacing.pacer.as_ref().and_then(HookPacer::cancelled) {
        report.cancelled = Some(format!(
            "{c}; cancelled during the collection, which was finished unpaced"
        ));
    }
    stop(GcStep::Collected)?;
    if let Some(hook) = opts.after_collect {
        hook();
    }

    // Step 5: readers opened before the collection may name containers it
    // deleted.
    if let Some(r) = refresh {
        r.finish()?;
    }
    report.collector = collected.collector.clone();
    report.reclaimed_bytes = if opts.dry_run {
        collected.plan.estimated_reclaim_bytes as i64
    } else {
        collected.reclaimed_bytes
    };
    report.containers_deleted = collected.containers_deleted;
    report.containers_written = collected.containers_written;
    report.chunks_after = collected
        .memory
        .fingerprints
        .saturating_sub(collected.index_removed);
    report.copied_chunks = collected.copied_chunks;
    report.copied_bytes = collected.copied_bytes;
    report.collection = collected;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The collector's phases whose units are paced (tree nodes read and
/// index entries tested in its enumeration and filter, told through
/// `GcProgress::tick`; one container each in the others): they read
/// trees, the index and container metadata and copy live chunks into new
/// containers, holding no lock another user of the store waits for, and
/// delete nothing. Any other phase (merge, commit, the deletions, and any the
/// engine adds) runs unpaused.
const PACED_PHASES: &[&str] = &[
    "enumeration",
    "filter",
    "analysis",
    "select",
    "candidates",
    "copy",
];

/// Step 4's progress hook: paces the engine's collector once per unit of
/// its paced phases ([`PACED_PHASES`]).
///
/// A read that fails while a collection is under way waits for the
/// collection's end (`VolumeContent::collection_started`), and a read in
/// flight is a busy foreground, which pauses a paced job: a read waiting
/// for a paused collection would hold it paused. So, when paced, the
/// collection counts as under way only in the phases that are not paced:
/// at the start of a paced phase the content state is refreshed (its
/// readers reopened on the store as the collection has left it so far,
/// which ends what `collection_started` began); at the start of any other
/// phase it is marked under way again. A paced phase deletes nothing, so
/// no read fails because of the collection while it runs.
///
/// A cancel cannot stop the engine's collection safely: the first one is
/// kept (in the [`HookPacer`]), pacing stops, and the collection finishes
/// as an unpaced one does (under way for the content state to its end).
struct CollectorPacing<'r> {
    pacer: Option<HookPacer>,
    /// The content state to mark and refresh (a paced collection that
    /// deletes, i.e. not a dry run).
    content: Option<Arc<VolumeContent>>,
    repo: &'r cairn_engine::Repository,
    state: Mutex<PhaseState>,
}

#[derive(Default)]
struct PhaseState {
    /// Whether the current phase is paced.
    paced: bool,
    /// Whether the content state was refreshed since it was last marked.
    refreshed: bool,
}

impl GcProgress for CollectorPacing<'_> {
    fn phase(&self, name: &str, _total: u64) {
        let mut st = self.state.lock();
        // After a cancel the rest runs as an unpaced collection does.
        let pacing = self.pacer.as_ref().is_some_and(|p| p.cancelled().is_none());
        st.paced = pacing && PACED_PHASES.contains(&name);
        let Some(content) = &self.content else {
            return;
        };
        if st.paced && !st.refreshed {
            if content.refresh(self.repo).is_ok() {
                st.refreshed = true;
            } else {
                // Readers that could not be reopened may still name what
                // the collection deleted: reads keep waiting for step 5
                // (which refreshes again), and this phase is not paced.
                content.collection_started();
                st.paced = false;
            }
        } else if !st.paced && st.refreshed {
            content.collection_started();
            st.refreshed = false;
        }
    }

    fn advance(&self, _n: u64) {
        self.pace();
    }

    fn tick(&self) {
        self.pace();
    }
}

impl CollectorPacing<'_> {
    fn pace(&self) {
        // The lock is held while pacing: the phase cannot change meanwhile
        // (phases start on the collector's thread, between units).
        let st = self.state.lock();
        if st.paced {
            if let Some(p) = &self.pacer {
                p.pace();
            }
        }
    }
}

/// Steps 4 and 5 seen by the content state: begun, a collection is under
/// way (failing reads wait); ended by [`Refresh::finish`], or when dropped
/// on an error, with the readers refreshed, so no read waits for good.
pub(crate) struct Refresh<'v> {
    vol: &'v Volume,
    content: Option<std::sync::Arc<crate::volume_content::VolumeContent>>,
}

impl<'v> Refresh<'v> {
    pub(crate) fn start(vol: &'v Volume) -> Result<Self> {
        let content = vol.content()?;
        content.collection_started();
        Ok(Refresh {
            vol,
            content: Some(content),
        })
    }

    fn finish(mut self) -> Result<()> {
        match self.content.take() {
            Some(c) => c.refresh(self.vol.repo()),
            None => Ok(()),
        }
    }
}

impl Drop for Refresh<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.content.take() {
            // The collection failed: its error is the one reported.
            let _ = c.refresh(self.vol.repo());
        }
    }
}

/// The directory entry a roots snapshot lists its files in.
fn roots_dir_entry() -> DirEntry {
    DirEntry {
        name: ROOTS_DIR.as_bytes().to_vec(),
        kind: EntryKind::Dir,
        mode: 0o040_555,
        uid: 0,
        gid: 0,
        mtime_ns: 0,
        ctime_ns: 0,
        inode: 0,
        size: 0,
        target: None,
        content: None,
        children: None,
        extras: Extras::default(),
    }
}

/// The snapshots the volume's jobs committed (optimizations and roots).
fn volume_snapshots(repo: &cairn_engine::Repository) -> Result<Vec<SnapshotInfo>> {
    let (all, _unreadable) = catalog::list(&**repo.backend())?;
    Ok(all
        .into_iter()
        .filter(|s| {
            s.record
                .tags
                .iter()
                .any(|t| t == OPTIMIZE_TAG || t == ROOTS_TAG)
        })
        .collect())
}

/// A dry run's stand-in for steps 2 and 3 (it commits nothing): the
/// snapshots of `old` in which no file's content is a live stream map,
/// which a collection would forget without losing a root. Those holding
/// one are counted as kept, so the plan underestimates what a real run
/// frees (that run lists the stream maps alone).
fn unneeded(
    repo: &cairn_engine::Repository,
    old: &[SnapshotInfo],
    live: &HashSet<Fingerprint>,
) -> Result<Vec<String>> {
    let mut reader = Reader::open(repo, CacheOptions::default())?;
    let mut out = Vec::new();
    for snap in old {
        let mut holds_live = false;
        reader.walk(&snap.record, "", &mut |w| {
            if let Some(b) = w.entry.content.filter(|_| w.entry.kind == EntryKind::File) {
                holds_live |= live.contains(&b.root);
            }
            Ok(())
        })?;
        if !holds_live {
            out.push(snap.id.clone());
        }
    }
    Ok(out)
}
