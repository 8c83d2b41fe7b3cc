//! The optimization job: 004's Phase I (find the duplicate data) and
//! Phase II (optimize the target files), steps numbered as in
//! docs/volume.md, "Optimization job".
//!
//! Steps 2 to 5 are the engine's own backup pipeline run on the backing
//! tree with a selection of just the eligible files (one stream, so new
//! chunks of many small files share containers): regression chunking, frugal-index lookups with its prefetch
//! cache, new chunks in file-stream order into containers, selective
//! compression, and the crash-safe commit ending in a snapshot tagged
//! [`OPTIMIZE_TAG`]. That snapshot's listings hold each file's recipe (its
//! stream map) and the size and times it was read with. That snapshot
//! keeps the new stream maps' chunks alive until the volume's garbage
//! collection ([`crate::gc`]) lists them in a roots snapshot and forgets it,
//! so no stream map loses its root.
//!
//! **Incremental optimization.** An optimized file written since (recalled
//! granules, an appended tail, a truncate) and cold again is ingested as
//! pieces (`crate::splice`): its stream map's unchanged chunks are kept
//! unread, only the changed ranges are read and chunked, and its switch
//! replaces the entry (004: "incremental dedup will later optimize the new
//! data").
//!
//! **Batches and pacing.** The eligible files are ingested and switched in
//! batches of at most [`OPTIMIZE_BATCH_BYTES`] (each batch its own backup,
//! snapshot and switches), so a run stopped midway (cancelled by the
//! scheduler, interrupted, crashed) keeps every batch it finished. With a
//! [`Pacer`] (`OptimizeOptions::pacer`), the job paces itself
//! (`crate::scheduler`): before each batch, after each file the ingest
//! stores (through the backup's entry log, on the engine's stream thread:
//! a pause there holds the whole pipeline), and before each switch. A
//! cancel before a batch or a switch stops the run there; one during an
//! ingest lets that batch finish and switch (its chunks are stored; the
//! switches are cheap), then stops. The report says why in `cancelled`.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use cairn_core::{Error, Result};
use cairn_engine::backup::file_content::{FileContent, FileSource};
use cairn_engine::backup::{backup, BackupOptions, ParentChoice, Selection, Source};
use cairn_engine::read::{CacheOptions, Reader};
use cairn_format::dir::{BlobRef, EntryKind};

use crate::backing;
use crate::job_state::{Progress, ProgressSink};
use crate::partitions::{self, PartitionBy, PartitionMap};
use crate::policy::Policy;
use crate::scheduler::{HookPacer, Pacer};
use crate::splice::VolumeSources;
use crate::state::{Change, Entry, Identity};
use crate::volume::Volume;
use crate::walk;

/// The tag of the snapshots the job commits.
pub const OPTIMIZE_TAG: &str = "volume-optimize";

/// The most bytes of files one batch ingests (a file larger than this is a
/// batch alone): what a cancelled or interrupted run can lose at most, and
/// little enough that a batch takes seconds, while a batch's fixed costs
/// (a snapshot, a container left partly filled) stay small beside it.
pub const OPTIMIZE_BATCH_BYTES: u64 = 256 << 20;

/// Files switched under one durable commit of their entries (step 6b):
/// one `fsync` for the group instead of one per file (on a disk where a
/// flush costs milliseconds, a share of small files was bound by them),
/// while the group's inode locks are held from its checks to its last
/// punch, a few milliseconds for this many files.
pub const SWITCH_GROUP: usize = 64;

/// The points of a file's switch (step 6) where a test may stop the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchStep {
    /// 6a done: the checks passed, nothing written.
    Checked,
    /// 6b done: the entry is committed, the backing file still holds data.
    EntryWritten,
    /// 6c done: the backing file punched, its times not yet restored.
    Punched,
}

/// How a test stop ends the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// The job returns an error.
    Error,
    /// The process aborts (a crash: nothing after it runs, no destructors).
    Abort,
}

/// A test hook: stop at `step` of the `file`-th switch (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailAt {
    pub file: usize,
    pub step: SwitchStep,
    pub mode: FailMode,
}

/// How one run goes.
#[derive(Default)]
pub struct OptimizeOptions<'a> {
    /// The policy instead of `volume.json`'s (`--min-age`, `--min-size`).
    pub policy: Option<Policy>,
    /// A test hook (see [`FailAt`]).
    pub fail_at: Option<FailAt>,
    /// Called between the ingest (step 5) and the first switch (step 6):
    /// a test changes a file there.
    pub before_switch: Option<&'a (dyn Fn() + Sync)>,
    /// Told the files scanned, then the files switched of those eligible
    /// (the mount daemon shows it in `status`).
    pub progress: Option<ProgressSink<'a>>,
    /// The job's pacing handle from the scheduler; `None`: unpaced.
    pub pacer: Option<Arc<Pacer>>,
    /// Bytes per batch instead of [`OPTIMIZE_BATCH_BYTES`] (tests).
    pub batch_bytes: Option<u64>,
    /// Files per switch group instead of [`SWITCH_GROUP`] (tests).
    pub switch_group: Option<usize>,
    /// Sessions run in parallel, each over its own partitions of the
    /// files (004's parallel sessions; 0 or 1: one, deduplicating against
    /// the whole store). With a test hook, one.
    pub sessions: usize,
    /// How the files are partitioned among sessions (`crate::partitions`).
    pub partition_by: crate::partitions::PartitionBy,
    /// Instead of [`partitions::MIN_PARTITION_BYTES`]: a key with no chunk
    /// log yet and fewer bytes in the run joins the partition of small
    /// keys.
    pub min_partition_bytes: Option<u64>,
}

/// What a run did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OptimizeReport {
    /// Regular files looked at.
    pub files_scanned: u64,
    pub files_optimized: u64,
    pub files_skipped: u64,
    /// Why files were skipped, with counts.
    pub skipped: BTreeMap<String, u64>,
    /// Optimized files partly recalled, appended to or truncated since,
    /// optimized anew by this run: their unchanged chunks kept unread,
    /// only the rest read (`crate::splice`).
    pub files_reoptimized: u64,
    /// Bytes the ingest read of such files (those a change during the run
    /// left unswitched included): the recalled granules, appended tails
    /// and cut chunks, never the whole file.
    pub bytes_reread: u64,
    /// Logical bytes of the files optimized.
    pub bytes_optimized: u64,
    /// Bytes of new chunks the store took (as stored, after compression).
    pub new_chunk_bytes: u64,
    /// The snapshot holding the stream maps of this run's last batch (none
    /// if nothing was eligible); each batch commits one.
    pub snapshot: Option<String>,
    /// RAM of the fingerprint index per indexed chunk (the frugal index:
    /// about 6 bytes, 004), as the ingest measured it; 0 if nothing was
    /// ingested.
    pub index_ram_bytes_per_chunk: f64,
    /// Batches ingested.
    pub batches: u64,
    /// Sessions the files were partitioned into (004's parallel sessions).
    #[serde(default)]
    pub sessions: u64,
    /// Partitions the sessions' files were split into (by file type or
    /// path; 1: one session over every file, deduplicated against the
    /// whole store).
    #[serde(default)]
    pub partitions: u64,
    /// Why the scheduler stopped the run early (the files not reached are
    /// as they were); `None`: it ran to the end.
    pub cancelled: Option<String>,
    pub seconds: f64,
}

impl OptimizeReport {
    fn skip(&mut self, reason: &str) {
        self.files_skipped += 1;
        *self.skipped.entry(reason.to_string()).or_default() += 1;
    }

    /// Adds what one session did.
    fn absorb(&mut self, s: OptimizeReport) {
        self.files_optimized += s.files_optimized;
        self.files_skipped += s.files_skipped;
        for (reason, n) in s.skipped {
            *self.skipped.entry(reason).or_default() += n;
        }
        self.files_reoptimized += s.files_reoptimized;
        self.bytes_reread += s.bytes_reread;
        self.bytes_optimized += s.bytes_optimized;
        self.new_chunk_bytes += s.new_chunk_bytes;
        if s.snapshot.is_some() {
            self.snapshot = s.snapshot;
        }
        self.index_ram_bytes_per_chunk = self
            .index_ram_bytes_per_chunk
            .max(s.index_ram_bytes_per_chunk);
        self.batches += s.batches;
        if self.cancelled.is_none() {
            self.cancelled = s.cancelled;
        }
    }
}

/// A file the scan found eligible, as it was then.
struct Scanned {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    changes: u64,
}

/// What the ingest recorded of a file: its stream map and the size and
/// times it was read with.
struct Ingested {
    blob: BlobRef,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    sparse: bool,
}

/// Runs the job once over the volume's backing tree.
pub fn optimize(vol: &Volume, opts: &OptimizeOptions<'_>) -> Result<OptimizeReport> {
    let started = Instant::now();
    let policy = opts
        .policy
        .clone()
        .unwrap_or_else(|| vol.config().policy.clone())
        .compile()?;
    let mut report = OptimizeReport::default();
    let progress = |p: Progress| {
        if let Some(sink) = opts.progress {
            sink(p)
        }
    };

    // Step 1: the policy scan. Times are compared with one clock reading,
    // taken before the walk, so a file changed during it is too young.
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let min_age_ns = policy.policy.min_age().as_nanos() as i64;
    let mut eligible = Vec::new();
    let content = vol.content()?;
    walk::regular_files(&vol.dir().files(), &mut |f| {
        report.files_scanned += 1;
        if report.files_scanned % 1000 == 0 {
            progress(Progress::files("scan", report.files_scanned, None));
        }
        let ino = f.meta.ino();
        let (mtime_ns, ctime_ns) = backing::mtime_ctime_ns(&f.meta);
        let entry = vol.table().get(ino);
        let reason = if entry.as_ref().is_some_and(|e| {
            // Truncated below its stream map: re-optimized like a
            // recalled one, so the stream map's dead tail is freed.
            e.recalled.is_empty() && f.meta.len() <= e.valid && e.valid == e.blob.size
        }) {
            Some("already optimized")
        } else if policy.excludes(&f.rel) {
            Some("excluded")
        } else if f.meta.len() < policy.policy.min_size.max(1) {
            Some("smaller than the minimum size")
        } else if now_ns - mtime_ns.max(ctime_ns) < min_age_ns {
            Some("changed within the minimum age")
        } else if vol.locks().open_count(ino).passthrough > 0 {
            // The kernel serves such a handle's I/O without asking the
            // content state: the file must stay plain while it is open.
            // Other handles go through the content state, under the lock.
            Some("open for passthrough")
        } else {
            None
        };
        if let Some(r) = reason {
            report.skip(r);
            return Ok(());
        }
        // A file partly recalled, appended to or truncated since it was
        // optimized, and cold again, is optimized anew with the others:
        // the ingest keeps its unchanged chunks (`crate::splice`), and its
        // switch replaces the entry.
        let meta = f.meta;
        let (mtime_ns, ctime_ns) = backing::mtime_ctime_ns(&meta);
        eligible.push(Scanned {
            path: f.path,
            dev: meta.dev(),
            ino,
            size: meta.len(),
            mtime_ns,
            ctime_ns,
            changes: vol.locks().change_count(ino),
        });
        Ok(())
    })?;
    if eligible.is_empty() {
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    let progress: &(dyn Fn(Progress) + Sync) = &progress;

    // Steps 2-6: each session its batches, one batch at a time. The test
    // hooks count switches across batches: they run one session.
    let sessions = if opts.fail_at.is_some() || opts.before_switch.is_some() {
        1
    } else {
        opts.sessions.max(1)
    };
    let total = Some(eligible.len() as u64);
    let min_bytes = opts
        .min_partition_bytes
        .unwrap_or(partitions::MIN_PARTITION_BYTES);
    let parts = partitions(vol, eligible, sessions, opts.partition_by, min_bytes)?;
    report.partitions = parts.iter().map(|p| p.len() as u64).sum();
    let shared = Shared {
        total,
        switched: AtomicU64::new(0),
        content,
        progress,
    };
    let outcomes: Vec<Result<OptimizeReport>> = if parts.len() == 1 {
        vec![run_session(vol, &parts[0], opts, &shared)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|part| {
                    let shared = &shared;
                    s.spawn(move || run_session(vol, part, opts, shared))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    };
    report.sessions = parts.len() as u64;
    let mut first_error = None;
    for outcome in outcomes {
        match outcome {
            Ok(r) => report.absorb(r),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    // Every session's finished switches are kept, whatever another did.
    vol.table().flush()?;
    if let Some(e) = first_error {
        return Err(e);
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// What the sessions of one run share.
struct Shared<'a> {
    /// Files to switch, across sessions.
    total: Option<u64>,
    /// Switches so far, across sessions (for progress).
    switched: AtomicU64,
    content: Arc<crate::volume_content::VolumeContent>,
    progress: &'a (dyn Fn(Progress) + Sync),
}

/// One session (004 "parallel sessions"): steps 2-6 over its partition's
/// files, batch after batch, each batch its own backup beside the other
/// sessions' (the frugal index gives each a chunk log of its own,
/// docs/concurrency.md "Frugal logs per writer").
fn run_session(
    vol: &Volume,
    parts: &[Part],
    opts: &OptimizeOptions<'_>,
    shared: &Shared<'_>,
) -> Result<OptimizeReport> {
    let mut report = OptimizeReport::default();
    let progress = shared.progress;
    let pace = || opts.pacer.as_ref().map_or(Ok(()), |p| p.pace());
    let total = shared.total;
    let mut n = 0; // this session's switches (the test hook counts them)
    let limit = opts.batch_bytes.unwrap_or(OPTIMIZE_BATCH_BYTES);
    let runs = parts
        .iter()
        .flat_map(|p| batches(&p.files, limit).map(move |b| (p.log, b)));
    'batches: for (log, batch) in runs {
        if let Err(c) = pace() {
            report.cancelled = Some(c.to_string());
            break;
        }
        progress(Progress::files(
            "ingest",
            shared.switched.load(Ordering::Relaxed),
            total,
        ));
        // Steps 2-5: chunk, look up, store new chunks with selective
        // compression, commit the recipes (the engine's backup).
        let (ingested, cancelled) = ingest(vol, batch, log, &mut report, opts.pacer.as_ref())?;
        report.batches += 1;
        // Switched files read their new chunks through the content state.
        shared.content.refresh(vol.repo())?;
        if let Some(hook) = opts.before_switch.filter(|_| report.batches == 1) {
            hook();
        }

        // Step 6: switch the files, a group at a time.
        let members: Vec<(&Scanned, &Ingested)> = batch
            .iter()
            .filter_map(|f| match ingested.get(&f.ino) {
                Some(rec) => Some((f, rec)),
                None => {
                    report.skip("not read by the ingest");
                    None
                }
            })
            .collect();
        for group in members.chunks(opts.switch_group.unwrap_or(SWITCH_GROUP).max(1)) {
            // Ctrl-C stops between two groups: each file is whole either way.
            let done = report.files_optimized;
            progress(Progress::files(
                "switch",
                shared.switched.load(Ordering::Relaxed),
                total,
            ));
            cairn_engine::interrupt::check(|| {
                format!("{done} files optimized; the rest are as they were")
            })?;
            // Cancelled during the ingest: its batch is switched unpaced.
            // Paced before the group's locks are taken, never while held.
            if cancelled.is_none() {
                if let Err(c) = pace() {
                    report.cancelled = Some(c.to_string());
                    break 'batches;
                }
            }
            // Optimized before: its switch replaces the entry.
            let anew: Vec<bool> = group
                .iter()
                .map(|(f, _)| vol.table().contains(f.ino))
                .collect();
            let outcomes = switch_group(vol, group, n, opts.fail_at)?;
            for (((file, _), anew), outcome) in group.iter().zip(anew).zip(outcomes) {
                match outcome {
                    None => {
                        report.files_optimized += 1;
                        report.files_reoptimized += u64::from(anew);
                        report.bytes_optimized += file.size;
                    }
                    Some(reason) => report.skip(reason),
                }
            }
            n += group.len();
            shared
                .switched
                .fetch_add(group.len() as u64, Ordering::Relaxed);
        }
        if let Some(c) = cancelled {
            report.cancelled = Some(c.to_string());
            break;
        }
    }
    Ok(report)
}

/// One partition's files (in scan order) and the chunk log its batches
/// append to (`None`: the run's only session, which deduplicates against
/// every log).
struct Part {
    log: Option<u32>,
    files: Vec<Scanned>,
}

/// Splits the eligible files into partitions by `by` (004 "Efficient
/// partitioning strategies", `crate::partitions`; keys of fewer than
/// `min_bytes` with no chunk log yet share one partition) and gives them, whole,
/// largest first, to at most `sessions` sessions, each to the one with
/// the fewest bytes so far. One session (asked, or only one partition):
/// every file in one partition, deduplicated against the whole store.
fn partitions(
    vol: &Volume,
    eligible: Vec<Scanned>,
    sessions: usize,
    by: PartitionBy,
    min_bytes: u64,
) -> Result<Vec<Vec<Part>>> {
    let one = |eligible| {
        Ok(vec![vec![Part {
            log: None,
            files: eligible,
        }]])
    };
    if sessions <= 1 {
        return one(eligible);
    }
    let root = vol.dir().files();
    let keyed: Vec<(String, Scanned)> = eligible
        .into_iter()
        .map(|f| {
            (
                partitions::key(f.path.strip_prefix(&root).unwrap_or(&f.path), by),
                f,
            )
        })
        .collect();
    let mut key_bytes: BTreeMap<String, u64> = BTreeMap::new();
    for (k, f) in &keyed {
        *key_bytes.entry(k.clone()).or_default() += f.size.max(1);
    }
    let mut map = PartitionMap::load(vol.dir());
    let (groups, part_of) = partitions::coalesce(&key_bytes, &map, by, min_bytes);
    if groups.len() <= 1 {
        return one(keyed.into_iter().map(|(_, f)| f).collect());
    }
    let owner = partitions::balance(&groups, sessions);
    let logs = map.assign(vol.dir(), groups.keys().map(String::as_str))?;
    let mut by_part: BTreeMap<&str, Vec<Scanned>> = BTreeMap::new();
    for (k, f) in keyed {
        by_part.entry(part_of[&k].as_str()).or_default().push(f);
    }
    let used = owner.values().max().map_or(1, |m| m + 1);
    let mut out: Vec<Vec<Part>> = (0..used).map(|_| Vec::new()).collect();
    // Within a session its largest partition first.
    let mut parts: Vec<(&str, Vec<Scanned>)> = by_part.into_iter().collect();
    parts.sort_by(|a, b| groups[b.0].cmp(&groups[a.0]).then_with(|| a.0.cmp(b.0)));
    for (k, files) in parts {
        out[owner[k]].push(Part {
            log: Some(logs[k]),
            files,
        });
    }
    Ok(out)
}

/// Splits the eligible files, in scan order, into runs of at most
/// `limit` bytes (a larger file alone).
fn batches(eligible: &[Scanned], limit: u64) -> impl Iterator<Item = &[Scanned]> {
    let mut rest = eligible;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0u64;
        let len = rest
            .iter()
            .position(|f| {
                bytes = bytes.saturating_add(f.size);
                bytes > limit
            })
            .unwrap_or(rest.len())
            .max(1);
        let (batch, tail) = rest.split_at(len);
        rest = tail;
        Some(batch)
    })
}

/// Steps 2-5 on one batch; returns what the new snapshot recorded of each
/// file, by inode, and why the pacer cancelled the job during the ingest
/// (the ingest still finished).
fn ingest(
    vol: &Volume,
    eligible: &[Scanned],
    log: Option<u32>,
    report: &mut OptimizeReport,
    pacer: Option<&Arc<Pacer>>,
) -> Result<(HashMap<u64, Ingested>, Option<crate::scheduler::Cancelled>)> {
    // Paces after each file the ingest stores and every
    // `PACE_CONTENT_BYTES` it reads inside one; the first cancel is kept
    // and later calls no longer pace (the batch finishes unpaced).
    let paced = pacer.map(|p| Arc::new(HookPacer::new(p.clone())));
    let (entry_log, content_log) = paced.as_ref().map(|p| p.backup_hooks()).unzip();
    let hook = Arc::new(Reoptimized {
        sources: VolumeSources::new(vol)?,
        bytes_read: AtomicU64::new(0),
    });
    let repo = vol.repo();
    let mut selection = Selection::builder();
    selection.only_files(eligible.iter().map(|f| (f.dev, f.ino)).collect());
    // Shared with the run's other sessions (once the store has an index
    // file); waited for, as a session's first batch may find another
    // session's first backup holding it alone.
    let lock = repo.lock_backup(true)?;
    let outcome = backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(vol.dir().files())],
            tags: vec![OPTIMIZE_TAG.to_string()],
            parent: ParentChoice::None,
            selection: Arc::new(selection.build()?),
            // A file's stream map holds every byte, holes as zeros (they
            // deduplicate to one chunk), so offsets map one to one.
            holes_as_data: true,
            entry_log,
            content_log,
            file_content: Some(hook.clone()),
            index_partition: log,
            ..Default::default()
        },
    )?;
    drop(lock);
    report.bytes_reread += hook.bytes_read.load(Ordering::Relaxed);
    report.new_chunk_bytes += outcome.record.stats.new_stored_bytes;
    report.snapshot = Some(outcome.snapshot_id.clone());
    report.index_ram_bytes_per_chunk = outcome.index_ram_bytes_per_chunk;
    let mut by_ino = HashMap::new();
    let mut reader = Reader::open(repo, CacheOptions::default())?;
    reader.walk(&outcome.record, "", &mut |w| {
        let e = w.entry;
        if e.kind == EntryKind::File && e.inode != 0 {
            if let Some(blob) = e.content {
                by_ino.insert(
                    e.inode,
                    Ingested {
                        blob,
                        size: e.size,
                        mtime_ns: e.mtime_ns,
                        ctime_ns: e.ctime_ns,
                        sparse: e.extras.extents.is_some(),
                    },
                );
            }
        }
        Ok(())
    })?;
    let cancelled = paced.and_then(|p| p.cancelled());
    Ok((by_ino, cancelled))
}

/// The ingest's [`FileContent`] hook: an optimized file (partly
/// recalled, appended to or truncated, and cold again) is given as its
/// stream map's unchanged chunks, unread, and the ranges around them read
/// through the content state (`crate::splice`); a plain file is read from
/// the backing tree as usual. A write during the ingest changes the file's
/// ctime and change count, so its switch refuses the result.
struct Reoptimized {
    sources: VolumeSources,
    bytes_read: AtomicU64,
}

impl FileContent for Reoptimized {
    fn source(&self, file: &File, meta: &Metadata) -> io::Result<Option<FileSource>> {
        let Some(found) = self.sources.source(file, meta)? else {
            return Ok(None);
        };
        self.bytes_read
            .fetch_add(found.bytes_read, Ordering::Relaxed);
        Ok(Some(found.source))
    }
}

/// Step 6 for a group of files (each with what the ingest recorded of
/// it; `first` is the first one's number in the session, for the test
/// stops): under the group's inode locks, 6a checks each file, 6b commits
/// the entries of those that passed in one durable transaction (from there
/// they read from their stream maps), then 6c punches and 6d puts back
/// the times of each. Returns, per file, why it was left as it was
/// (`None`: switched). A crash before 6b leaves the group's files as they
/// were; after it, optimized, with recovery finishing the punches and
/// the times.
fn switch_group(
    vol: &Volume,
    group: &[(&Scanned, &Ingested)],
    first: usize,
    fail_at: Option<FailAt>,
) -> Result<Vec<Option<&'static str>>> {
    let stop = |n: usize, step: SwitchStep| -> Result<()> {
        match fail_at {
            Some(f) if f.file == n && f.step == step => match f.mode {
                FailMode::Error => Err(Error::Interrupted(format!(
                    "test stop after {step:?} of file {n}"
                ))),
                FailMode::Abort => std::process::abort(),
            },
            _ => Ok(()),
        }
    };
    let inos: Vec<u64> = group.iter().map(|(f, _)| f.ino).collect();
    let _guards = vol.locks().lock_many(&inos);
    let mut outcomes = vec![None; group.len()];
    // 6a: each file must be what the scan saw and the ingest read.
    let mut ready = Vec::with_capacity(group.len());
    for (i, (file, rec)) in group.iter().enumerate() {
        match check(vol, file, rec)? {
            Err(reason) => outcomes[i] = Some(reason),
            Ok((f, meta)) => {
                // The entry carries the times to put back after the punch.
                let mut entry = Entry::new(Identity::of(&meta), rec.blob);
                entry.times_pending = Some(backing::times_of(&meta));
                ready.push((i, f, meta, entry));
                stop(first + i, SwitchStep::Checked)?;
            }
        }
    }
    if ready.is_empty() {
        return Ok(outcomes);
    }
    // 6b: the entries, durable, in one commit.
    let puts: Vec<Change> = ready.iter().map(|r| Change::Put(r.3.clone())).collect();
    vol.table().apply(&puts)?;
    for r in &ready {
        stop(first + r.0, SwitchStep::EntryWritten)?;
    }
    // 6c: free the backing bytes; the length stays. Not fsynced: a punch
    // lost in a crash while the entry's times are still pending is redone
    // by recovery when the volume is opened; lost after the cleared times
    // became durable, recovery takes the bytes left (the file's own) as
    // recalled, and the next run optimizes the file again.
    // 6d: the times the punch moved, back as they were; then the entries
    // no longer need them. That commit is made durable by the next
    // durable one (at the latest the end of the run): lost in a crash,
    // recovery puts the same times back again.
    let mut done = Vec::with_capacity(ready.len());
    for (i, f, meta, mut entry) in ready {
        let path = &group[i].0.path;
        let io = |e| Error::io(format!("punching {}", path.display()), e);
        backing::punch_stream_map_ranges(&f, &entry).map_err(io)?;
        stop(first + i, SwitchStep::Punched)?;
        backing::restore_times(&f, &meta).map_err(io)?;
        entry.times_pending = None;
        done.push(entry);
    }
    vol.table().put_many_lazily(done)?;
    Ok(outcomes)
}

/// Step 6a for one file, under its lock: the file opened for the punch
/// and its metadata, or why it is left as it is.
fn check(
    vol: &Volume,
    file: &Scanned,
    rec: &Ingested,
) -> Result<std::result::Result<(File, Metadata), &'static str>> {
    let f = match OpenOptions::new().write(true).open(&file.path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err("removed")),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Ok(Err("not writable"))
        }
        Err(e) => return Err(Error::io(format!("opening {}", file.path.display()), e)),
    };
    let meta = f
        .metadata()
        .map_err(|e| Error::io(format!("reading {}", file.path.display()), e))?;
    let (mtime_ns, ctime_ns) = backing::mtime_ctime_ns(&meta);
    let now = (meta.ino(), meta.len(), mtime_ns, ctime_ns);
    if now != (file.ino, file.size, file.mtime_ns, file.ctime_ns)
        || (rec.size, rec.mtime_ns, rec.ctime_ns) != (file.size, file.mtime_ns, file.ctime_ns)
        || vol.locks().change_count(file.ino) != file.changes
    {
        return Ok(Err("changed since the scan"));
    }
    if rec.sparse || rec.blob.size != file.size {
        // Not what the ingest was asked for (`holes_as_data`): left plain.
        return Ok(Err("stored with extents"));
    }
    if vol.locks().open_count(file.ino).passthrough > 0 {
        return Ok(Err("open for passthrough"));
    }
    Ok(Ok((f, meta)))
}
