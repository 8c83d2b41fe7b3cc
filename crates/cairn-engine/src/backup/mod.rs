//! A backup: one stream per source, run in parallel (DDFS §4.2: several
//! streams write in parallel, each into its own containers), then the commit
//! sequence that makes the snapshot appear only when everything it references
//! is durable:
//!
//! 1. every stream seals its open container (written + fsynced by the sealer
//!    thread, so streams keep hashing while the disk works);
//! 2. the top-level directory listing is stored and sealed;
//! 3. the in-memory index part is merged into a new index generation whose
//!    `covered_below` is the next container id;
//! 4. the Summary Vector checkpoint of that generation is written;
//! 5. the snapshot record is written (the commit point).
//!
//! A crash before step 5 leaves only orphan containers (and perhaps a newer
//! index generation that covers them), which the next open replays and
//! `check` reports as reclaimable.

mod commit;
mod concurrent;
pub mod dry_run;
pub mod events;
pub mod file_content;
mod layout;
mod listings;
pub mod parent;
mod parent_held;
mod read_ahead;
pub mod rewrite;
pub mod select;
pub mod stream;
pub mod trace_recorder;
pub mod trace_walker;
pub mod tree_builder;
pub mod walker;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::pipe::{bounded, Receiver};
use parking_lot::Mutex;
use serde::Serialize;

use cairn_chunk::ChunkBatch;
use cairn_core::{CountersSnapshot, Error, Result};
use cairn_format::dir::{encode_dir, DirEntry};
use cairn_format::snapshot::SnapshotRecord;

pub use crate::dedup::deferred::DedupMode;
use crate::dedup::Dedup;
use crate::progress::Progress;
use crate::repo::{Repository, WriteLock};
use commit::{commit_index, phase_report, snapshot_record};
pub use dry_run::{dry_run, DryRunOutcome};
use events::Event;
pub use parent::ParentChoice;
pub use select::{Selection, SelectionBuilder};
use stream::{PhaseTimes, Shared, Stream};
use walker::Walker;
pub use walker::{Kept, Source};

/// What to back up and how; `..Default::default()` fills what a caller
/// leaves out (no tags, no host, inline dedup, everything selected).
#[derive(Default)]
pub struct BackupOptions {
    pub sources: Vec<Source>,
    pub tags: Vec<String>,
    pub host: Option<String>,
    pub progress: Arc<Progress>,
    /// Set when this snapshot rewrites an older one (`repair snapshots`):
    /// the new record keeps the older one's time and paths.
    pub rewrite_of: Option<RewriteOf>,
    /// The rewrite scheme of this backup (`--rewrite`); `None`: the
    /// repository's (`rewrite` in the config).
    pub rewrite_scheme: Option<rewrite::RewriteConfig>,
    /// Inline dedup (the default), or deferred to the next `gc`
    /// (`--dedup deferred`, 004 post-processing dedup): no index lookups at
    /// ingest, every chunk met is stored (a chunk repeated within this
    /// backup once).
    pub dedup: DedupMode,
    /// What to leave out below the path sources (`--exclude` and friends);
    /// the default leaves out nothing.
    pub selection: Arc<Selection>,
    /// The snapshot whose unchanged files are not read again (the CLI's
    /// default is the latest of the same host and paths; `--force`: none).
    pub parent: ParentChoice,
    /// Reader threads per stream for large files (`read_ahead.rs`); `None`:
    /// one per core but one (the walker and the hashing stream need the
    /// rest), at least 1 and at most 4; `Some(0)`: every file on the
    /// walker's thread.
    /// What is stored does not depend on it.
    pub read_threads: Option<usize>,
    /// Read a file with holes as the plain bytes it reads as (holes as
    /// zeros, which deduplicate), with no extents recorded: its content is
    /// then its whole length (a volume's stream map maps file offsets to
    /// content offsets one to one). Off: only the data extents are stored.
    pub holes_as_data: bool,
    /// Asked before each regular file is read: where its bytes come from
    /// when they are not all in the file system (`file_content.rs`);
    /// `None`: every file is read.
    pub file_content: Option<Arc<dyn file_content::FileContent>>,
    /// Told of each file and directory stored, with its state against the
    /// parent snapshot (`backup -v`); `None`: nobody listens.
    pub entry_log: Option<events::EntryLog>,
    /// Told of the file bytes each batch of chunks carried
    /// ([`events::ContentLog`]); `None`: nobody listens.
    pub content_log: Option<events::ContentLog>,
    /// This backup's bound on the in-memory index part instead of the
    /// repository's `index.part_budget` (`dedup::part_budget`; it acts
    /// only where a commit would merge anyway: the paged index, a backup
    /// holding the writer lock alone, such as a repository's first, and
    /// inline dedup). `None`: the config's.
    pub index_part_budget: Option<u64>,
    /// 004's partitioned dedup: with the frugal index, beside other
    /// writers, append to chunk log `k` (k >= 1) and deduplicate against
    /// it and partition 0 only (the logs writers alone append to: a first
    /// backup, collections), so the index's RAM is that of two logs;
    /// copies another partition holds are stored again and reconciled by
    /// the next `gc`. When another writer holds `k`: the first free
    /// partition and every log. `None`: that, always. Ignored by the paged
    /// index and by a backup holding the writer lock alone.
    pub index_partition: Option<u32>,
}

/// What a rewritten snapshot keeps of the snapshot it replaces.
#[derive(Clone, Debug)]
pub struct RewriteOf {
    pub time_unix_ns: i64,
    pub paths: Vec<String>,
}

/// Seconds spent per pipeline phase (summed over streams and threads).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PhaseReport {
    pub open_seconds: f64,
    pub read_chunk_seconds: f64,
    pub hash_seconds: f64,
    pub dedup_seconds: f64,
    pub compress_seconds: f64,
    pub write_seconds: f64,
    pub commit_seconds: f64,
    pub total_seconds: f64,
}

impl PhaseReport {
    /// Phase name (without the `_seconds` suffix) -> seconds.
    pub fn as_map(&self) -> std::collections::BTreeMap<String, f64> {
        [
            ("open", self.open_seconds),
            ("read_chunk", self.read_chunk_seconds),
            ("hash", self.hash_seconds),
            ("dedup", self.dedup_seconds),
            ("compress", self.compress_seconds),
            ("write", self.write_seconds),
            ("commit", self.commit_seconds),
            ("total", self.total_seconds),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

pub struct BackupOutcome {
    pub snapshot_id: String,
    pub record: SnapshotRecord,
    /// Paths that could not be read (the snapshot holds everything else).
    pub skipped: Vec<String>,
    /// Non-fatal notices: special files, replay warnings.
    pub notices: Vec<String>,
    /// Entries the selection left out, as "path: reason" (an excluded
    /// directory once; nothing below it was visited).
    pub excluded: Vec<String>,
    /// Files that changed while they were read (size, mtime or ctime after
    /// the read differ from before): the snapshot holds what was read.
    pub changed_while_read: Vec<String>,
    pub counters: CountersSnapshot,
    pub phases: PhaseReport,
    /// Fingerprint-lookup RAM (Summary Vector + in-memory index) per indexed chunk.
    pub index_ram_bytes_per_chunk: f64,
    /// Containers appended by an interrupted earlier backup and replayed now.
    pub replayed_containers: u64,
    /// New chunks of this backup that another backup, running beside it,
    /// stored too (004 partitioned dedup: the next `gc` keeps one copy).
    pub concurrent_duplicates: u64,
    /// Index deltas listed at the commit, this backup's own counted: what
    /// `compact::compact_after_backup` needs to know, without listing again.
    pub deltas_after_commit: usize,
}

#[derive(Default)]
struct TreeCounts {
    files: AtomicU64,
    dirs: AtomicU64,
    symlinks: AtomicU64,
    logical_bytes: AtomicU64,
}

fn secs(ns: &AtomicU64) -> f64 {
    ns.load(Ordering::Relaxed) as f64 / 1e9
}

fn top_level_name(source: &Source) -> Vec<u8> {
    match source {
        Source::Path(p) => walker::source_name(p),
        Source::Stdin { name } | Source::Trace { name, .. } => name.as_bytes().to_vec(),
        Source::Kept(tree) => tree.name().to_vec(),
    }
}

/// Runs a backup; the caller holds the writer lock. The steps of the
/// module doc's commit sequence, in order.
pub fn backup(repo: &Repository, lock: &WriteLock, opts: BackupOptions) -> Result<BackupOutcome> {
    let started = Instant::now();
    check_sources(&opts.sources)?;
    check_lookup_resolved(&repo.config)?;
    let before = repo.counters.snapshot();
    let warnings = crate::warnings::Warnings::default();
    let scheme = rewrite_scheme(&repo.config, &opts)?;
    check_rewrite(&repo.config, &scheme)?;
    // Announced before the index is read (`session.rs`): a collection
    // that does not see this session changed the index before this opens it.
    let session = crate::session::Session::begin(repo)?;
    // One listing of `index/` and `snapshots/` serves the open, the parent
    // and the rewrite history (`listing_memo.rs`); the commit lists afresh.
    let listings = repo.remember_listings();
    // What steers rewriting (the newest snapshot, HAR's sparse containers)
    // is read while the index opens: on object storage they are two
    // round trips of their own (a listing of `snapshots/`, a record).
    let (opened, steering) = std::thread::scope(|s| {
        let steering = s.spawn(|| rewrite_steering(repo, &scheme, &opts, &warnings));
        let opened = repo.open_index_in(lock, &warnings, opts.index_partition);
        (opened, crate::blocking_map::joined(steering))
    });
    let (history, inherited) = steering?;
    let (shared, seal_rx, replayed_containers, replayed) =
        open_dedup(repo, opened?, lock, scheme, history, &opts, inherited)?;
    // The listing the open used (the scope remembers it).
    let deltas_at_open = concurrent::DeltasAtOpen::list(&**repo.backend())?;
    let open_seconds = started.elapsed().as_secs_f64();
    let mut run = RunState::new(repo, &opts, warnings.take(), started);
    run.attach_parent(repo, &opts, shared.dedup.present_containers())?;

    // Steps 1-2: the streams and the root listing, sealed and durable.
    let root = store_sources(&shared, seal_rx, &run, &opts.sources)?;
    // The last safe point: past it the commit runs to its end.
    crate::interrupt::check(not_committed)?;
    drop(listings);
    // Steps 3-4: the index generation and its Summary Vector checkpoint.
    // The commit's listing of `index/` (the report of concurrent
    // duplicates) also gives its delta the next free number: a stale one
    // costs a refused create, which forgets it.
    let covered = shared.log.next_id();
    let commit_listings = repo.remember_listings();
    let (index_ram_bytes_per_chunk, concurrent_duplicates, deltas_listed) = commit_index(
        &shared,
        &**repo.backend(),
        covered,
        &deltas_at_open,
        &replayed,
    )?;
    drop(commit_listings);
    // Step 5: the snapshot record, the commit point.
    let counters = repo.counters.snapshot().since(&before);
    let phases = phase_report(&shared, &run, open_seconds);
    let record = snapshot_record(&shared, &run, &opts, root, covered, counters, &phases);
    let snapshot_id = session.commit(&record)?;
    if let Some(held) = &run.parent_held {
        held.save(&**repo.backend());
    }

    let mut notices = run.notices.into_inner();
    if let Some(har) = &shared.har {
        record_sparse(repo, &snapshot_id, har, &mut notices);
    }
    notices.extend(shared.dedup.lost_report());
    Ok(BackupOutcome {
        snapshot_id,
        record,
        skipped: run.skipped.into_inner(),
        notices,
        excluded: run.excluded.into_inner(),
        changed_while_read: run.changed_while_read.into_inner(),
        counters: repo.counters.snapshot().since(&before),
        phases,
        index_ram_bytes_per_chunk,
        replayed_containers,
        concurrent_duplicates,
        deltas_after_commit: deltas_listed + 1,
    })
}

/// What an interrupted backup left: no snapshot; its containers are
/// orphans the next backup replays (and so does not store again).
pub(crate) fn not_committed() -> String {
    "nothing committed: the snapshot was not written (the containers already written \
     are reused by the next backup)"
        .into()
}

/// Whether the sources can be placed in one snapshot tree (`layout`): a
/// caller checks this before creating anything.
pub fn check_sources(sources: &[Source]) -> Result<()> {
    layout::place(sources).map(drop)
}

/// The rewrite scheme of this backup: the one given, or the repository's.
/// A deferred backup rewrites nothing: rewriting stores old duplicates
/// again to place them near their neighbours, and a deferred backup stores
/// every chunk it meets in its own containers already; giving a scheme
/// explicitly with it is refused rather than silently ignored.
fn rewrite_scheme(
    cfg: &crate::config::RepoConfig,
    opts: &BackupOptions,
) -> Result<rewrite::RewriteConfig> {
    match (opts.dedup, opts.rewrite_scheme) {
        (DedupMode::Inline, given) => Ok(given.unwrap_or(cfg.rewrite)),
        (DedupMode::Deferred, Some(s)) if !s.is_none() => Err(Error::invalid(format!(
            "rewrite scheme {} needs inline dedup: a deferred backup stores every chunk it meets",
            s.name()
        ))),
        (DedupMode::Deferred, _) => Ok(rewrite::RewriteConfig::None),
    }
}

/// A valid scheme that this repository's lookup can run
/// (`LookupStrategy::check_rewrite`).
fn check_rewrite(cfg: &crate::config::RepoConfig, scheme: &rewrite::RewriteConfig) -> Result<()> {
    scheme.validate()?;
    cfg.index.lookup.strategy.check_rewrite(scheme)
}

/// HAR's inherited sparse containers: those the latest snapshot of `host`
/// recorded (`har/<id>`). None when it recorded none; a damaged record is
/// reported and treated as none (it only steers rewriting).
fn inherited_sparse(
    repo: &Repository,
    host: &str,
    warnings: &crate::warnings::Warnings,
) -> Result<std::collections::HashSet<cairn_core::ContainerId>> {
    let (good, _) = repo.snapshots()?;
    let Some(latest) = good
        .into_iter()
        .filter(|s| s.record.host == host)
        .max_by_key(|s| s.record.time_unix_ns)
    else {
        return Ok(Default::default());
    };
    match repo.backend().read(&crate::object_names::har(&latest.id)) {
        Ok(bytes) => Ok(rewrite::har::decode(&bytes).unwrap_or_else(|e| {
            warnings.push(format!("{e}; HAR starts afresh with this backup"));
            Default::default()
        })),
        Err(e) if e.is_not_found() => Ok(Default::default()),
        Err(e) => Err(e),
    }
}

/// Step 2 of HAR after the commit: the sparse containers of this backup,
/// kept for the next backup of its host. A failure here loses only that
/// history (a notice), never the committed snapshot.
fn record_sparse(
    repo: &Repository,
    snapshot_id: &str,
    har: &rewrite::har::HarState,
    notices: &mut Vec<String>,
) {
    // A container's data chunks, from its metadata (the dedup path read
    // most of them; a local cache holds them on object storage).
    let data_bytes = |c: cairn_core::ContainerId| {
        let meta = repo.log.read_meta(c).ok()?;
        Some(
            meta.descriptors
                .iter()
                .filter(|d| d.kind == cairn_core::ChunkKind::Data && d.level == 0)
                .map(|d| u64::from(d.raw_len))
                .sum(),
        )
    };
    let sparse = har.sparse(repo.config.container_size as u64, &data_bytes);
    if let Err(e) = repo.backend().write_atomic(
        &crate::object_names::har(snapshot_id),
        &rewrite::har::encode(&sparse),
    ) {
        notices.push(format!(
            "HAR's sparse containers of this backup were not saved ({e}): the next backup \
             rewrites by its other scheme only"
        ));
    }
}

/// What a scheme's decisions start from: the newest snapshot's counts
/// (LBW's and Capping's history) and HAR's inherited sparse containers.
type Steering = (
    Option<rewrite::History>,
    Option<std::collections::HashSet<cairn_core::ContainerId>>,
);

fn rewrite_steering(
    repo: &Repository,
    scheme: &rewrite::RewriteConfig,
    opts: &BackupOptions,
    warnings: &crate::warnings::Warnings,
) -> Result<Steering> {
    let history = if scheme.is_none() {
        None
    } else {
        previous_backup(repo)?
    };
    let inherited = match scheme.har_threshold() {
        Some(_) => Some(inherited_sparse(repo, &record_host(opts), warnings)?),
        None => None,
    };
    Ok((history, inherited))
}

/// What the newest snapshot stored (002 §3.2's `N_unique` estimate).
fn previous_backup(repo: &Repository) -> Result<Option<rewrite::History>> {
    let (good, _) = repo.snapshots()?;
    let latest = good
        .into_iter()
        .map(|s| s.record)
        .max_by_key(|r| r.time_unix_ns);
    Ok(latest.map(|r| rewrite::History {
        unique_chunks: r.stats.new_data_chunks + r.stats.rewritten_data_chunks,
        logical_bytes: r.stats.logical_bytes,
    }))
}

fn check_lookup_resolved(cfg: &crate::config::RepoConfig) -> Result<()> {
    if cfg.index.lookup.strategy == crate::config::LookupStrategy::Auto {
        return Err(Error::invalid(
            "lookup strategy \"auto\" is resolved for a device class before a backup runs \
             (cairn init --lookup auto --device NAME, or cairn sim --lookup auto); \
             this repository's config still says auto",
        ));
    }
    Ok(())
}

/// The dedup state shared by every stream over the index opened for
/// writing (checkpoint + replay, DDFS §4.1), with the sealer's queue; also
/// how many containers the open replayed, and which.
fn open_dedup(
    repo: &Repository,
    opened: crate::index::OpenedIndex,
    lock: &WriteLock,
    rewrite: rewrite::RewriteConfig,
    history: Option<rewrite::History>,
    opts: &BackupOptions,
    inherited: Option<std::collections::HashSet<cairn_core::ContainerId>>,
) -> Result<(
    Shared,
    Receiver<stream::SealJob>,
    u64,
    std::collections::HashSet<cairn_core::ContainerId>,
)> {
    let cfg = repo.config.clone();
    let dedup_mode = opts.dedup;
    let replayed_containers = opened.replayed_containers;
    let replayed: std::collections::HashSet<cairn_core::ContainerId> =
        opened.replayed.iter().map(|e| e.container).collect();
    let dedup = Dedup::new(
        opened,
        repo.log.clone(),
        repo.counters.clone(),
        cfg.index.cache_containers as usize,
        cfg.index.locality_cache,
    );
    // A mid-backup merge only where a commit would merge anyway
    // (`dedup::part_budget`).
    let may_bound = cfg.index.kind == crate::config::IndexKind::Paged
        && !lock.is_shared()
        && dedup_mode == DedupMode::Inline;
    let dedup = match opts.index_part_budget.or(cfg.index.part_budget) {
        Some(entries) if may_bound => {
            dedup.with_part_budget(crate::dedup::part_budget::PartBudget {
                entries: usize::try_from(entries).unwrap_or(usize::MAX),
                backend: repo.backend().clone(),
                fp_width: cfg.fp_width(),
                page_size: cfg.index.page_size as usize,
            })
        }
        _ => dedup,
    };
    // At most two sealed containers wait for the disk (8 MiB at the default size).
    let (seal_tx, seal_rx) = bounded::<stream::SealJob>(2);
    let shared = Shared {
        codec: crate::codec::ChunkCodec::for_repo(repo),
        // Seeded once per backup: every file's chunker shares the table.
        chunker: cairn_chunk::ChunkerSpec::new(
            &cfg.chunker,
            repo.keys().map(|k| k.chunker_seed()),
        )?,
        cfg,
        dedup,
        dedup_mode,
        log: repo.log.clone(),
        counters: repo.counters.clone(),
        phases: PhaseTimes::default(),
        new_raw_bytes: AtomicU64::new(0),
        new_stored_bytes: AtomicU64::new(0),
        chunks: AtomicU64::new(0),
        new_chunks: AtomicU64::new(0),
        data_chunks: AtomicU64::new(0),
        new_data_chunks: AtomicU64::new(0),
        new_data_raw_bytes: AtomicU64::new(0),
        new_data_stored_bytes: AtomicU64::new(0),
        rewritten_chunks: AtomicU64::new(0),
        rewritten_raw_bytes: AtomicU64::new(0),
        rewritten_stored_bytes: AtomicU64::new(0),
        har: rewrite
            .har_threshold()
            .zip(inherited)
            .map(|(threshold, inherited)| {
                rewrite::har::HarState::new(inherited, repo.log.next_id(), threshold)
            }),
        rewrite,
        history,
        seal_tx: Mutex::new(Some(seal_tx)),
        seal_error: Mutex::new(None),
    };
    Ok((shared, seal_rx, replayed_containers, replayed))
}

/// What the streams of one backup share besides the dedup state: the tree
/// counts, what was skipped or noticed, timings and progress.
struct RunState {
    entry_log: Option<events::EntryLog>,
    content_log: Option<events::ContentLog>,
    counts: TreeCounts,
    skipped: Mutex<Vec<String>>,
    notices: Mutex<Vec<String>>,
    excluded: Mutex<Vec<String>>,
    /// A walker left the repository out (it lies below a source).
    left_out_repository: AtomicBool,
    selection: Arc<Selection>,
    read_threads: Option<usize>,
    holes_as_data: bool,
    file_content: Option<Arc<dyn file_content::FileContent>>,
    read_ns: Arc<AtomicU64>,
    commit_started: Mutex<Instant>,
    progress: Arc<Progress>,
    /// The repository's own directory (device, inode): never backed up.
    exclude: Option<(u64, u64)>,
    started: Instant,
    /// The parent snapshot's id, and per source (by index) its tree reader
    /// and the source's entry in it.
    parent_id: Option<String>,
    parent_trees: Mutex<std::collections::HashMap<usize, (parent::ParentTree, DirEntry)>>,
    /// Where the parent check found this host's files before, shared by
    /// every source's tree; `None` without a parent.
    parent_held: Option<Arc<parent_held::ParentHeld>>,
    files: Mutex<walker::FileCounts>,
    changed_while_read: Mutex<Vec<String>>,
}

impl RunState {
    fn new(
        repo: &Repository,
        opts: &BackupOptions,
        notices: Vec<String>,
        started: Instant,
    ) -> Self {
        let exclude = repo.local_root().and_then(|p| {
            use std::os::unix::fs::MetadataExt;
            let m = crate::long_path::Dirs::new().metadata(p);
            m.ok().map(|m| (m.dev(), m.ino()))
        });
        RunState {
            counts: TreeCounts::default(),
            skipped: Mutex::new(Vec::new()),
            notices: Mutex::new(notices),
            excluded: Mutex::new(Vec::new()),
            left_out_repository: AtomicBool::new(false),
            selection: opts.selection.clone(),
            read_threads: opts.read_threads,
            holes_as_data: opts.holes_as_data,
            file_content: opts.file_content.clone(),
            entry_log: opts.entry_log.clone(),
            content_log: opts.content_log.clone(),
            read_ns: Arc::new(AtomicU64::new(0)),
            commit_started: Mutex::new(Instant::now()),
            progress: opts.progress.clone(),
            exclude,
            started,
            parent_id: None,
            parent_held: None,
            parent_trees: Mutex::new(Default::default()),
            files: Mutex::new(Default::default()),
            changed_while_read: Mutex::new(Vec::new()),
        }
    }

    /// Finds the parent snapshot and, for each path source it holds, opens
    /// a reader of its tree. A rewrite (`repair snapshots`) has none.
    /// `present`: the containers in the repository (listed once per
    /// backup, when the index was opened).
    fn attach_parent(
        &mut self,
        repo: &Repository,
        opts: &BackupOptions,
        present: std::collections::HashSet<cairn_core::ContainerId>,
    ) -> Result<()> {
        if opts.rewrite_of.is_some() {
            return Ok(());
        }
        let host = record_host(opts);
        let mut warnings = Vec::new();
        let found = parent::resolve(
            repo,
            &opts.parent,
            &host,
            &source_paths(&opts.sources),
            &mut warnings,
        )?;
        self.notices.lock().extend(warnings);
        let Some(p) = found else {
            return Ok(());
        };
        // Shared by every source's tree.
        let present = Arc::new(present);
        let held = Arc::new(parent_held::ParentHeld::load(&**repo.backend(), &host));
        self.parent_held = Some(held.clone());
        let mut trees = self.parent_trees.lock();
        let places = layout::place(&opts.sources)?;
        for (i, (source, place)) in opts.sources.iter().zip(places).enumerate() {
            let first = match place.first() {
                Some(top) => p.tops.get(top).cloned(),
                // A backup of `/`: its parent is the parent's whole root.
                None => Some(p.root_dir()),
            };
            let (Source::Path(_), Some(first)) = (source, first) else {
                continue;
            };
            // A source below the top is found through the directories above it.
            let mut tree = parent::ParentTree::new(repo, present.clone(), held.clone(), p.trust)?;
            let mut at = Some(first);
            for name in place.iter().skip(1) {
                at = at.and_then(|d| tree.children(d).remove(name));
            }
            if let Some(top) = at {
                trees.insert(i, (tree, top));
            }
        }
        drop(trees);
        self.parent_id = Some(p.id);
        Ok(())
    }
}

/// The host a snapshot record names.
fn record_host(opts: &BackupOptions) -> String {
    opts.host
        .clone()
        .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned())
}

/// Commit steps 1-2: runs the streams and stores the root listing while the
/// sealer threads write their containers (one on a local disk; as many as
/// the backend keeps writes in flight on object storage, so uploads overlap
/// their round trips); every container is durable when this returns.
fn store_sources(
    shared: &Shared,
    seal_rx: Receiver<stream::SealJob>,
    run: &RunState,
    sources: &[Source],
) -> Result<cairn_format::dir::BlobRef> {
    let stored = std::thread::scope(|s| {
        let sealers: Vec<_> = (0..shared.log.write_parallelism().max(1))
            .map(|_| {
                let jobs = seal_rx.clone();
                s.spawn(move || stream::run_sealer(shared, jobs))
            })
            .collect();
        drop(seal_rx);
        // Closes the sealers' queue even when a stream panics, so the scope
        // can end (and re-raise the panic) instead of waiting forever.
        let close = CloseSealerOnDrop(shared);
        let r = run_streams_and_root(shared, run, sources);
        drop(close);
        for sealer in sealers {
            sealer.join().expect("sealer thread panicked");
        }
        r
    });
    if let Some(e) = shared.seal_error.lock().take() {
        return Err(e);
    }
    stored
}

/// Runs every source as a stream (at most one per core at a time, each with
/// its own container), then stores the top-level listing; returns its root.
fn run_streams_and_root(
    shared: &Shared,
    run: &RunState,
    sources: &[Source],
) -> Result<cairn_format::dir::BlobRef> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let next = AtomicUsize::new(0);
    let places = layout::place(sources)?;
    let results: Mutex<Vec<(usize, Result<Option<DirEntry>>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers.min(sources.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(source) = sources.get(i) else {
                    break;
                };
                let r = run_stream(shared, run, i, source);
                let failed = r.is_err();
                results.lock().push((i, r));
                if failed {
                    // Stop handing out sources; the others finish what they hold.
                    next.store(usize::MAX / 2, Ordering::Relaxed);
                }
            });
        }
    });
    let mut results = results.into_inner();
    results.sort_by_key(|(i, _)| *i);
    let mut top = Vec::new();
    for (i, r) in results {
        if let Some(entry) = r? {
            top.push((places[i].clone(), entry));
        }
    }
    if top.is_empty() {
        return Err(Error::invalid(format!(
            "nothing was backed up: {}",
            run.skipped
                .lock()
                .first()
                .map_or("no readable source", String::as_str)
        )));
    }

    // Commit sequence, step 2: the top-level listing (and the listings of
    // the directories above the sources, when they are kept).
    *run.commit_started.lock() = Instant::now();
    let mut commit_stream = Stream::new(shared);
    if let [(place, entry)] = top.as_slice() {
        if place.is_empty() {
            // A backup of `/`: its listing is the root listing, stored as
            // a blob when the walk kept it inline.
            let root = match (&entry.children, &entry.content) {
                (None, Some(blob)) => *blob,
                (inline, _) => {
                    let mut listing = Vec::new();
                    encode_dir(inline.as_deref().unwrap_or_default(), &mut listing)?;
                    commit_stream
                        .store_blob(&listing)?
                        .ok_or_else(|| Error::invalid("empty root listing"))?
                }
            };
            commit_stream.finish()?;
            return Ok(root);
        }
    }
    let top = layout::root_entries(top, &mut |entries| {
        let mut listing = Vec::new();
        encode_dir(entries, &mut listing)?;
        commit_stream
            .store_blob(&listing)?
            .ok_or_else(|| Error::invalid("empty listing"))
    })?;
    let mut listing = Vec::new();
    encode_dir(&top, &mut listing)?;
    let root = commit_stream
        .store_blob(&listing)?
        .ok_or_else(|| Error::invalid("empty root listing"))?;
    commit_stream.finish()?;
    Ok(root)
}

/// One stream: a walker thread reads and chunks, this thread stores.
fn run_stream(
    shared: &Shared,
    run: &RunState,
    index: usize,
    source: &Source,
) -> Result<Option<DirEntry>> {
    let parent = run.parent_trees.lock().remove(&index);
    let (tx, rx) = bounded::<Vec<Event>>(4);
    let (recycle_tx, recycle_rx) = bounded::<ChunkBatch>(8);
    let mut stream = Stream::new(shared);
    let result = std::thread::scope(|s| {
        let walker = s.spawn(|| {
            let mut w = Walker::new(
                shared.chunker.clone(),
                tx,
                recycle_rx,
                run.progress.clone(),
                run.exclude,
                run.read_ns.clone(),
            );
            w.select(run.selection.clone());
            if let Some(n) = run.read_threads {
                w.read_ahead(n);
            }
            w.holes_as_data(run.holes_as_data);
            w.file_content(run.file_content.clone());
            if let Some((tree, top)) = parent {
                w.parent(tree, top);
            }
            w.run(source);
            (
                w.skipped,
                w.notices,
                w.excluded,
                w.files,
                w.changed_while_read,
                w.left_out_repository,
            )
        });
        let r = consume(
            &mut stream,
            &run.counts,
            &rx,
            &recycle_tx,
            run.entry_log.as_ref(),
            run.content_log.as_ref(),
        );
        drop(rx); // unblocks the walker if we stopped early
        let (sk, no, ex, files, ch, repo) = walker.join().expect("walker thread panicked");
        if repo {
            run.left_out_repository.store(true, Ordering::Relaxed);
        }
        *run.files.lock() += files;
        run.changed_while_read.lock().extend(ch);
        run.skipped.lock().extend(sk);
        run.notices.lock().extend(no);
        run.excluded.lock().extend(ex);
        r
    });
    let entry = result?;
    stream.finish()?;
    Ok(entry)
}

use listings::consume;
pub use listings::{entry, INLINE_MAX_BYTES};

/// Closes the shared sealer queue when dropped (normally or while unwinding).
struct CloseSealerOnDrop<'a>(&'a Shared);

impl Drop for CloseSealerOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close_sealer();
    }
}

/// The paths a snapshot record names for its sources.
fn source_paths(sources: &[Source]) -> Vec<String> {
    sources
        .iter()
        .map(|s| match s {
            Source::Path(p) => crate::names::os_path(
                std::path::absolute(p)
                    .unwrap_or_else(|_| p.clone())
                    .as_os_str(),
            ),
            Source::Stdin { name } => format!("<stdin:{name}>"),
            Source::Trace { name, .. } => format!("<trace:{name}>"),
            Source::Kept(tree) => crate::names::name_text(tree.name()).into_owned(),
        })
        .collect()
}
