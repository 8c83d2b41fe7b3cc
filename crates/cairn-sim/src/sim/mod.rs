//! `cairn sim`: runs a workload, generation by generation, through a fresh
//! simulated repository built from the real engine: the same backup
//! pipeline, dedup path, index, recipes and commit, with a metadata-only
//! container store and the device model in place of disks. Each generation
//! is one backup; optionally it is then "restored" through a restore policy
//! over its chunk sequence to measure the speed factor.

pub mod auto;
mod maintenance;
pub mod memory;
pub mod restore;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use cairn_core::{Backend, Counters, CountersSnapshot, Error, Result, TraceEvent, TraceSource};
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_engine::{BackupOptions, RepoConfig, Repository, Source};

use crate::device::{DeviceBackend, DeviceModel, DeviceStore, IoUsage, Stage, StageTimes};
use crate::trace::{open_trace_as, TraceFormat};
use crate::workload::Workload;
use cairn_engine::config::{IndexKind, LookupStrategy};

/// One generation's input.
pub enum GenerationInput {
    Trace {
        path: PathBuf,
        format: Option<TraceFormat>,
    },
    Workload {
        workload: Arc<dyn Workload>,
        generation: usize,
    },
}

impl GenerationInput {
    /// The generation's events, read and decoded on a thread of their own
    /// ([`crate::trace::Pipelined`]), and whether the trace names files by
    /// whole paths.
    pub(crate) fn open(&self) -> Result<(Box<dyn TraceSource>, bool)> {
        let (src, flat) = self.open_inline()?;
        Ok((Box::new(crate::trace::Pipelined::new(src)?), flat))
    }

    fn open_inline(&self) -> Result<(Box<dyn TraceSource>, bool)> {
        match self {
            GenerationInput::Trace { path, format } => {
                let (src, format) = open_trace_as(path, *format)?;
                Ok((src, format != TraceFormat::Cairn))
            }
            // Generated workloads name files by path, like external traces.
            GenerationInput::Workload {
                workload,
                generation,
            } => Ok((workload.generation(*generation), true)),
        }
    }

    pub(crate) fn name(&self, g: usize) -> String {
        match self {
            GenerationInput::Trace { path, .. } => path
                .file_name()
                .map_or_else(|| format!("gen{g}"), |n| n.to_string_lossy().into_owned()),
            GenerationInput::Workload {
                workload,
                generation,
            } => {
                format!("{}-gen{generation}", workload.name())
            }
        }
    }
}

/// Fingerprint width of the first chunk of the inputs (traces fix it; an
/// input without chunks says nothing, so the next one is asked). A later
/// chunk of another width is refused by the backup path with one clear line.
fn probe_width(inputs: &[GenerationInput]) -> Result<Option<usize>> {
    for input in inputs {
        let (mut src, _) = input.open()?;
        while let Some(ev) = src.next_event()? {
            if let TraceEvent::Chunk(c) = ev {
                return Ok(Some(c.fp.len()));
            }
        }
    }
    Ok(None)
}

pub struct SimOptions {
    /// Engine configuration; chunker choices are fixed by the trace and ignored.
    pub config: RepoConfig,
    pub device: DeviceModel,
    /// Also simulate a restore of each generation.
    pub restore: bool,
    /// Restore policy and memory of the simulated restore.
    pub restore_cache: cairn_engine::read::CacheOptions,
    /// More policies each generation is also restored with (reported in
    /// the row's `restores`, after `restore_cache`'s).
    pub also_restore: Vec<cairn_engine::read::CacheOptions>,
    /// Maintenance after each generation's backup, before its restore:
    /// a collection's re-layout (issue 34; nothing else is collectable,
    /// the simulator keeps every generation), with the generation as the
    /// newest snapshot. `None`: none, as Destor and 002 run.
    pub relayout: Option<cairn_engine::gc::relayout::RelayoutOptions>,
}

impl SimOptions {
    /// Backups only, no restore simulation, charged on the HDD model (a run
    /// is device-independent: price its `usage` on any device later).
    pub fn backups_only(config: RepoConfig) -> Self {
        SimOptions {
            config,
            device: DeviceModel::for_device(crate::device::DeviceClass::hdd()),
            restore: false,
            restore_cache: Default::default(),
            also_restore: Vec::new(),
            relayout: None,
        }
    }
}

/// One row of the report (also the shape of `totals`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct GenerationRow {
    pub id: String,
    /// Data chunks in the generation.
    pub chunks: u64,
    /// Data chunks stored new.
    pub unique_chunks: u64,
    /// Duplicate data chunks stored again by the rewrite scheme.
    pub rewritten_chunks: u64,
    pub logical_bytes: u64,
    /// Stored bytes of the new and rewritten data chunks (after local compression).
    pub stored_bytes: u64,
    /// Logical / raw bytes stored (new plus rewritten) of this generation.
    pub dedup_ratio: f64,
    /// Cumulative logical / cumulative stored, up to this generation.
    pub total_compression: f64,
    pub bloom_negatives: u64,
    pub cache_hits: u64,
    pub index_page_reads: u64,
    pub prefetches: u64,
    pub containers_written: u64,
    /// Containers read by the simulated restore (0 without `--restore`).
    pub containers_read: u64,
    /// MB restored per container read (0 without `--restore`).
    pub speed_factor: f64,
    /// Bytes of the containers the simulated restore read.
    pub restore_bytes_read: u64,
    /// Most raw chunk bytes the restore policy held (totals: the largest).
    pub restore_memory_bytes: u64,
    /// The same generation restored with `SimOptions::also_restore`'s policies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restores: Vec<RestoreRow>,
    pub modeled_seconds: f64,
    pub wall_seconds: f64,
    /// RAM of the dedup index (Summary Vector or frugal table, plus the
    /// in-memory part) per indexed chunk at the end of the generation
    /// (totals: the last generation's).
    pub index_ram_bytes_per_chunk: f64,
    /// Chunks the maintenance after the backup moved into the
    /// generation's order (`SimOptions::relayout`), and their stored bytes.
    #[serde(skip_serializing_if = "is_zero")]
    pub relayout_chunks: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub relayout_bytes: u64,
    /// Modeled time per stage.
    pub stages: StageTimes,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One generation restored with one more policy.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RestoreRow {
    pub policy: String,
    pub cache_bytes: u64,
    pub containers_read: u64,
    pub speed_factor: f64,
    pub memory_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct SimReport {
    pub config: serde_json::Value,
    pub generations: Vec<GenerationRow>,
    pub totals: GenerationRow,
    /// Engine counters of the whole run.
    pub counters: CountersSnapshot,
    /// What the whole run charged per stage, device-independent: price it
    /// on any device with [`DeviceModel::times`].
    #[serde(skip)]
    pub usage: IoUsage,
    /// With `lookup = "auto"`: what the calibration chose, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_choice: Option<auto::LookupChoice>,
    /// RAM by structure per unique chunk (`--memory-report`).
    pub memory: memory::MemoryReport,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Runs every generation in order through one fresh simulated repository.
pub fn run(inputs: &[GenerationInput], opts: &SimOptions) -> Result<SimReport> {
    run_with(inputs, opts, ContainerMetadata::Scratch)
}

/// Where a generation's simulated restores run: beside the next
/// generation's backup (on the second core: about half of a `--restore`
/// run's time was its restores, issue 35), or after their own backup
/// before the next begins, the order the rows are defined by, which the
/// test of the overlap compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overlap {
    Beside,
    #[cfg_attr(not(test), allow(dead_code))]
    InTurn,
    /// Beside, but each restore starts only once the next generation's
    /// backup has committed: the schedule in which a restore that read
    /// the live repository instead of its frozen placement would see the
    /// next generation's changes (the test's worst case).
    #[cfg_attr(not(test), allow(dead_code))]
    AfterNextBackup,
}

/// A generation's row, complete once its restores end. One generation's
/// restores run at a time, beside the next backup: a map placement is
/// lent to one restore at a time (it is brought up to date from one to
/// the next); through the index two could run, each with a view of its
/// own, but on two cores that was no faster beyond the noise (26.2-29.6 s
/// against 29.2-30.1 s for the small DDFS run) and peaked 8-42 MB higher
/// (docs/simulation.md).
struct Pending<'s> {
    row: GenerationRow,
    /// What the backup (and a re-layout) charged, and its counters.
    usage: IoUsage,
    delta: CountersSnapshot,
    restores: Option<std::thread::ScopedJoinHandle<'s, Result<Restored>>>,
    /// Dropped to let the restores start ([`Overlap::AfterNextBackup`]).
    go: Option<std::sync::mpsc::Sender<()>>,
}

/// A generation's restores: the default policy's, the others', what they
/// charged, their own wall seconds and the placement they were lent.
struct Restored {
    main: restore::RestoreResult,
    also: Vec<RestoreRow>,
    usage: IoUsage,
    wall_seconds: f64,
    frozen: restore::Frozen,
}

impl Pending<'_> {
    /// Waits for the restores and completes the row: their reads join the
    /// backup's in its modeled time (as when they ran in turn), their
    /// seconds its wall time.
    fn finish(
        self,
        placement: &mut restore::Placement,
        model: &DeviceModel,
        restored: &mut IoUsage,
    ) -> Result<GenerationRow> {
        let mut row = self.row;
        let mut usage = self.usage;
        drop(self.go);
        if let Some(handle) = self.restores {
            let r = handle
                .join()
                .map_err(|_| Error::invalid("a simulated restore panicked"))??;
            placement.thaw(r.frozen);
            usage = usage.plus(&r.usage);
            *restored = restored.plus(&r.usage);
            row.containers_read = r.main.containers_read;
            row.speed_factor = r.main.speed_factor();
            row.restore_bytes_read = r.main.policy.bytes_read;
            row.restore_memory_bytes = r.main.policy.peak_memory_bytes;
            row.restores = r.also;
            row.wall_seconds += r.wall_seconds;
        }
        let stages = model.times(&usage, &self.delta);
        row.modeled_seconds = stages.total_seconds;
        row.stages = stages;
        Ok(row)
    }
}

/// Restores generation `input` with every policy of `opts`, the
/// default's last (as the rows list them), charging `model` (its own).
fn restores(
    input: &GenerationInput,
    store: &MetaOnlyStore,
    frozen: restore::Frozen,
    model: &DeviceModel,
    opts: &SimOptions,
    unit: u64,
) -> Result<Restored> {
    let started = Instant::now();
    let mut also = Vec::new();
    for cache in &opts.also_restore {
        let (mut src, _) = input.open()?;
        let r = restore::simulate(&mut *src, store, &frozen, model, *cache, unit)?;
        also.push(RestoreRow {
            policy: r.policy.policy.clone(),
            cache_bytes: cache.bytes,
            containers_read: r.containers_read,
            speed_factor: r.speed_factor(),
            memory_bytes: r.policy.peak_memory_bytes,
        });
    }
    let (mut src, _) = input.open()?;
    let main = restore::simulate(&mut *src, store, &frozen, model, opts.restore_cache, unit)?;
    Ok(Restored {
        main,
        also,
        usage: model.usage(),
        wall_seconds: started.elapsed().as_secs_f64(),
        frozen,
    })
}

/// Where the simulated containers' metadata sections are kept: the
/// scratch directory ([`run`]), or whole in memory, the exact state the
/// compact one is checked against (`tests.rs`, issue 35's exactness guard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContainerMetadata {
    #[cfg_attr(not(test), allow(dead_code))]
    InMemory,
    Scratch,
}

pub(crate) fn run_with(
    inputs: &[GenerationInput],
    opts: &SimOptions,
    metadata: ContainerMetadata,
) -> Result<SimReport> {
    run_overlapped(inputs, opts, metadata, Overlap::Beside)
}

pub(crate) fn run_overlapped(
    inputs: &[GenerationInput],
    opts: &SimOptions,
    metadata: ContainerMetadata,
    overlap: Overlap,
) -> Result<SimReport> {
    if inputs.is_empty() {
        return Err(Error::invalid(
            "nothing to simulate: give trace files or --workload",
        ));
    }
    let mut cfg = opts.config.clone();
    if let Some(w) = probe_width(inputs)? {
        if w > cfg.fingerprint.width() {
            return Err(Error::invalid(format!(
                "trace fingerprints are {w} bytes, wider than {} ({} bytes)",
                cfg.fingerprint.name(),
                cfg.fingerprint.width()
            )));
        }
        cfg.fingerprint_width = (w < cfg.fingerprint.width()).then_some(w as u8);
    }
    let mut lookup_choice = None;
    if cfg.index.lookup.strategy == LookupStrategy::Auto {
        // The index lives on the device its page reads are charged to.
        let device = opts.device.config().device(Stage::IndexPageRead).clone();
        let choice = auto::choose(inputs, &cfg, &device)?;
        cfg.index.lookup.strategy = choice.strategy;
        cfg.index.lookup.ring_size = choice.ring_size;
        cfg.index.lookup.device = Some(device.name.clone());
        lookup_choice = Some(choice);
    }
    // Refused before any generation runs, as `init` refuses it.
    cfg.index.lookup.strategy.check_rewrite(&cfg.rewrite)?;
    let counters = Arc::new(Counters::default());
    let model = opts.device.clone();
    // The repository's objects (index generations and deltas, Summary
    // Vector checkpoints, snapshots) and the containers' metadata
    // sections go to a scratch directory: the page cache holds them, not
    // the process (issue 35).
    let objects = ScratchObjects::new()?;
    let backend: Arc<dyn Backend> =
        Arc::new(DeviceBackend::new(objects.backend.clone(), model.clone()));
    let meta_store = match metadata {
        ContainerMetadata::Scratch => {
            MetaOnlyStore::spilling(counters.clone(), &objects.container_metadata())?
        }
        ContainerMetadata::InMemory => MetaOnlyStore::new(counters.clone()),
    };
    let store = Arc::new(DeviceStore::new(meta_store, model.clone()));
    let repo = Repository::init_with_store(backend, cfg.clone(), counters.clone(), store.clone())?;

    let mut rows = Vec::with_capacity(inputs.len());
    // The exact run (metadata in memory) and frugal-index runs place
    // chunks in a map over every container; the compact one asks the
    // paged index (`restore::Placement`).
    let mut placement = match (metadata, cfg.index.kind) {
        (ContainerMetadata::Scratch, IndexKind::Paged) => {
            restore::Placement::Index(objects.backend.clone())
        }
        _ => restore::Placement::map(),
    };
    // What every restore charged.
    let mut restored = IoUsage::default();
    let (mut cum_logical, mut cum_stored) = (0u64, 0u64);
    // Chunks the index holds (data and tree nodes): nothing is deleted.
    let mut indexed = 0u64;
    let run_started = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        // The previous generation's row, waiting for its restores.
        let mut pending: Option<Pending<'_>> = None;
        for (g, input) in inputs.iter().enumerate() {
            let (src, flat) = input.open()?;
            let lock = repo.lock_writer(false)?;
            let usage_before = model.usage();
            let counters_before = counters.snapshot();
            let started = Instant::now();
            let out = cairn_engine::backup(
                &repo,
                &lock,
                BackupOptions {
                    sources: vec![Source::Trace {
                        name: input.name(g),
                        source: parking_lot::Mutex::new(src),
                        flat,
                    }],
                    tags: vec![format!("gen{g}")],
                    host: Some("sim".into()),
                    ..Default::default()
                },
            )?;
            drop(lock);
            if let Some(s) = out.skipped.first() {
                return Err(Error::invalid(s.clone()));
            }
            // The previous generation's restores may start now, and end
            // before a re-layout moves the containers they read, and before
            // this generation's freeze (the map is lent to one at a time).
            let waiting = Instant::now();
            if let Some(p) = pending.take() {
                rows.push(p.finish(&mut placement, &model, &mut restored)?);
            }
            // Not this generation's seconds.
            let waited = waiting.elapsed();
            let relaid = match opts.relayout {
                Some(ro) => maintenance::relayout(&repo, input, ro)?,
                None => Default::default(),
            };
            let usage = model.usage().since(&usage_before);
            let delta = counters.snapshot().since(&counters_before);
            let st = &out.record.stats;
            indexed += st.new_chunks;
            cum_logical += st.logical_bytes;
            cum_stored += st.new_data_stored_bytes + st.rewritten_data_stored_bytes;
            let row = GenerationRow {
                id: format!("{g}"),
                chunks: st.data_chunks,
                unique_chunks: st.new_data_chunks,
                logical_bytes: st.logical_bytes,
                rewritten_chunks: st.rewritten_data_chunks,
                stored_bytes: st.new_data_stored_bytes + st.rewritten_data_stored_bytes,
                dedup_ratio: ratio(
                    st.logical_bytes,
                    st.new_data_raw_bytes + st.rewritten_data_raw_bytes,
                ),
                total_compression: ratio(cum_logical, cum_stored),
                bloom_negatives: delta.bloom_negatives,
                cache_hits: delta.cache_hits,
                index_page_reads: delta.index_page_reads,
                prefetches: delta.prefetches,
                containers_written: delta.containers_written,
                wall_seconds: (started.elapsed() - waited).as_secs_f64(),
                index_ram_bytes_per_chunk: out.index_ram_bytes_per_chunk,
                relayout_chunks: relaid.chunks,
                relayout_bytes: relaid.bytes,
                ..Default::default()
            };
            let mut p = Pending {
                row,
                usage,
                delta,
                restores: None,
                go: None,
            };
            if opts.restore {
                let frozen = placement.freeze(store.inner(), g)?;
                // A model of the restores' own: they run beside the next
                // generation's backup, whose row must not take their reads.
                let restore_model = DeviceModel::new(model.config().clone());
                let store = store.inner();
                let unit = cfg.container_size as u64;
                let (go, wait) = std::sync::mpsc::channel::<()>();
                if overlap == Overlap::AfterNextBackup {
                    p.go = Some(go);
                }
                p.restores = Some(scope.spawn(move || {
                    // Returns once the sender is dropped.
                    let _ = wait.recv();
                    restores(input, store, frozen, &restore_model, opts, unit)
                }));
            }
            if overlap != Overlap::InTurn && opts.restore {
                pending = Some(p);
            } else {
                rows.push(p.finish(&mut placement, &model, &mut restored)?);
            }
        }
        if let Some(p) = pending.take() {
            rows.push(p.finish(&mut placement, &model, &mut restored)?);
        }
        Ok(())
    })?;
    let usage = model.usage().plus(&restored);
    let mut totals = totals(&rows, &model, &usage, &counters);
    totals.wall_seconds = run_started.elapsed().as_secs_f64();
    let memory = memory_report(&totals, indexed, &objects, store.inner());
    Ok(SimReport {
        config: serde_json::to_value(&cfg).map_err(|e| Error::invalid(e.to_string()))?,
        generations: rows,
        totals,
        counters: counters.snapshot(),
        usage,
        lookup_choice,
        memory,
    })
}

/// What each structure of the simulated repository holds at the end of
/// the run (see `memory.rs`).
fn memory_report(
    totals: &GenerationRow,
    indexed: u64,
    objects: &ScratchObjects,
    store: &MetaOnlyStore,
) -> memory::MemoryReport {
    let parts = vec![
        ("container metadata".to_string(), store.heap_bytes()),
        (
            "dedup lookup (Summary Vector, in-memory index)".into(),
            (totals.index_ram_bytes_per_chunk * indexed as f64) as u64,
        ),
        // Not the restore policy's `restore_memory_bytes`: that is the
        // chunk bytes a real restore would hold (a row's figure); the
        // simulated one holds metadata only.
    ];
    let mut report = memory::MemoryReport::new(totals.unique_chunks, parts);
    report.scratch_disk_bytes = objects.bytes() + store.spilled_bytes();
    report
}

/// The simulated repository's objects in a scratch directory under the
/// system's temporary directory, removed when dropped.
struct ScratchObjects {
    backend: cairn_backend::LocalBackend,
    dir: crate::scratch::TempDir,
}

impl ScratchObjects {
    fn new() -> Result<Self> {
        let dir = crate::scratch::tempdir("sim")?;
        let backend = cairn_backend::LocalBackend::scratch(&dir.0.join("objects"))?;
        Ok(ScratchObjects { backend, dir })
    }

    /// The file the containers' metadata sections go to (beside the
    /// repository's objects, not among them).
    fn container_metadata(&self) -> PathBuf {
        self.dir.0.join("container-metadata")
    }

    /// Bytes of the objects held.
    fn bytes(&self) -> u64 {
        let keys = self.backend.list("").unwrap_or_default();
        keys.iter().filter_map(|k| self.backend.size(k).ok()).sum()
    }
}

fn totals(
    rows: &[GenerationRow],
    model: &DeviceModel,
    usage: &IoUsage,
    counters: &Counters,
) -> GenerationRow {
    let sum = |f: fn(&GenerationRow) -> u64| rows.iter().map(f).sum::<u64>();
    let logical = sum(|r| r.logical_bytes);
    let stored = sum(|r| r.stored_bytes);
    let read = sum(|r| r.containers_read);
    let stages = model.times(usage, &counters.snapshot());
    GenerationRow {
        id: "total".into(),
        chunks: sum(|r| r.chunks),
        unique_chunks: sum(|r| r.unique_chunks),
        rewritten_chunks: sum(|r| r.rewritten_chunks),
        logical_bytes: logical,
        stored_bytes: stored,
        dedup_ratio: rows.last().map_or(0.0, |r| r.total_compression),
        total_compression: ratio(logical, stored),
        bloom_negatives: sum(|r| r.bloom_negatives),
        cache_hits: sum(|r| r.cache_hits),
        index_page_reads: sum(|r| r.index_page_reads),
        prefetches: sum(|r| r.prefetches),
        containers_written: sum(|r| r.containers_written),
        containers_read: read,
        speed_factor: if read == 0 {
            0.0
        } else {
            logical as f64 / 1e6 / read as f64
        },
        restore_bytes_read: sum(|r| r.restore_bytes_read),
        restore_memory_bytes: rows
            .iter()
            .map(|r| r.restore_memory_bytes)
            .max()
            .unwrap_or(0),
        restores: Vec::new(),
        modeled_seconds: stages.total_seconds,
        wall_seconds: rows.iter().map(|r| r.wall_seconds).sum(),
        index_ram_bytes_per_chunk: rows.last().map_or(0.0, |r| r.index_ram_bytes_per_chunk),
        relayout_chunks: sum(|r| r.relayout_chunks),
        relayout_bytes: sum(|r| r.relayout_bytes),
        stages,
    }
}

#[cfg(test)]
mod tests;
