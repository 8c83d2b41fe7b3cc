//! Garbage collection: the three mark-and-sweep collectors of
//! `003_ea5fccc485a97c5d.txt` §3, over cairn's containers, index and
//! snapshot catalog (docs/gc.md).
//!
//! ```text
//! Merge        index covers every container (replay of uncovered ones, committed);
//!              the live roots are the snapshot records at this moment
//! Analysis     PGC, PGC+: perfect hash over the tree-node fingerprints (walk and
//!              confirm bits) and, PGC+, over every indexed fingerprint (live bit);
//!              one pass over container metadata: tree levels per container
//! Enumeration  LGC: depth-first through every snapshot into the Live Bloom filter;
//!              PGC, PGC+: namespace, then containers level by level, checksummed
//! Filter       LGC, PGC: index entries of live chunks -> Live Instance filter
//!              (fingerprint XOR container: only the canonical copy stays live)
//! Select       liveness per container; mostly dead first to the reclaim target
//!              (PGC+: backwards, Dead filter, duplicate counter)
//! [second pass] LGC, PGC focused cleaning when the filters do not fit --memory
//! Delete dead  selected containers with no live chunk: committed and deleted
//!              first, needing no copy (`dead_first`: a full disk gets space)
//! Copy         live chunks into new containers (PGC+: backwards, dynamic
//!              duplicate removal); each new container durable when written
//! Commit       index: cleaned containers' entries removed or moved (one delta)
//! Delete       with readers locked out, the cleaned containers go
//! ```
//!
//! A collection holds the collector lock throughout and the writer lock
//! only for Merge and Commit (`commit`): backups run meanwhile and their
//! snapshots are walked at Commit, so a chunk they reach is never lost
//! (§3.5). Readers are excluded only while containers are deleted.
//! An interruption (`crate::interrupt`) stops it between nodes or
//! containers of the phases before Commit, never inside a commit.
//! A crash anywhere loses nothing: before the commit the new containers
//! are copies in ids the collection reserved (the next Merge replays
//! them, the newest copy wins); between the commit and the deletes the old
//! containers are unreferenced and the next Merge removes them.

mod commit;
mod dead_first;
pub mod filters;
mod finish;
pub mod mark;
mod ordered_copy;
pub mod pending;
mod read;
pub mod relayout;
mod relayout_described;
mod report;
pub mod reservation;
mod stop;
pub mod sweep;

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;

use cairn_core::{ChunkKind, ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::dir::BlobRef;

use crate::codec::ChunkCodec;
use crate::index::disk_index::DiskIndex;
use crate::read::cache::{ChunkStore, Locator};
use crate::repo::{GcLock, Repository};
use filters::{LiveFilter, Phv, BLOOM_BITS_PER_KEY};
use mark::{EnumerationStats, Gate, Live, NodeReader};
use sweep::{CopyWriter, Tally};

use read::Entries;
pub(crate) use read::{meta_of, whole_container};
pub use relayout_described::relayout_described;
use report::Phases;
pub use report::{GcReport, MemoryReport, PhaseReport, Plan};

/// The collector (003 §3.1, §3.2, §3.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Collector {
    Lgc,
    Pgc,
    #[default]
    PgcPlus,
}

impl Collector {
    /// The names [`Self::parse`] accepts (`pgc-plus` too, as an alias).
    pub const NAMES: [&'static str; 3] = ["lgc", "pgc", "pgc+"];

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "lgc" => Ok(Collector::Lgc),
            "pgc" => Ok(Collector::Pgc),
            "pgc+" | "pgc-plus" => Ok(Collector::PgcPlus),
            other => Err(Error::invalid(format!(
                "collector {other:?}: expected lgc, pgc or pgc+"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Collector::Lgc => "lgc",
            Collector::Pgc => "pgc",
            Collector::PgcPlus => "pgc+",
        }
    }
}

impl std::fmt::Display for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Collector {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

pub struct GcOptions {
    pub collector: Collector,
    /// Share of the estimated dead bytes to reclaim, mostly dead containers first.
    pub reclaim_percent: f64,
    /// Stop copying, or waiting for running backups before the deletes
    /// (leaving what it condemned), after this long; the rest is left for
    /// the next run.
    pub max_seconds: Option<f64>,
    /// Memory for the mark structures (filters, perfect-hash vectors).
    pub memory_bytes: u64,
    /// Plan only: nothing is written or deleted.
    pub dry_run: bool,
    /// Seed of the Bloom hash functions (by default one per repository
    /// state, new on every run that may copy: `commit::state_seed`).
    pub seed: Option<u64>,
    /// Wait for a running backup at Merge instead of failing (the commit
    /// always waits: the work is done by then).
    pub wait: bool,
    /// Dry run only: plan as if these snapshots were forgotten already
    /// (`forget --dry-run --prune`).
    pub assume_forgotten: Vec<String>,
    /// Re-layout (`relayout.rs`, issue 34): also clean the containers the
    /// newest snapshots use in part, and write every copy in their
    /// restore order. On by default.
    pub relayout: Option<relayout::RelayoutOptions>,
}

impl GcOptions {
    /// Memory for the mark structures unless told otherwise.
    pub const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
    /// Reclaim all the dead space unless told otherwise.
    pub const DEFAULT_RECLAIM_PERCENT: f64 = 100.0;
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            collector: Collector::default(),
            reclaim_percent: Self::DEFAULT_RECLAIM_PERCENT,
            max_seconds: None,
            memory_bytes: Self::DEFAULT_MEMORY_BYTES,
            dry_run: false,
            seed: None,
            wait: false,
            assume_forgotten: Vec::new(),
            relayout: Some(relayout::RelayoutOptions::default()),
        }
    }
}

/// Told about each phase as it starts, and about the plan before anything
/// is copied or deleted.
pub trait GcProgress: Sync {
    fn phase(&self, _name: &str, _total: u64) {}
    fn advance(&self, _n: u64) {}
    fn plan(&self, _plan: &Plan) {}
    /// A unit of work inside a phase whose total counts something coarser
    /// (tree nodes read in enumeration, every [`TICK_NODES`]; index entries
    /// tested in the filter, every [`TICK_ENTRIES`]): a point where a
    /// caller may pause the collection (the volume's scheduler).
    fn tick(&self) {}
}

/// Tree nodes an enumeration reads between two [`GcProgress::tick`]s.
pub const TICK_NODES: u64 = 8;
/// Index entries the filter tests between two [`GcProgress::tick`]s.
pub const TICK_ENTRIES: u64 = 4096;

pub struct NoProgress;
impl GcProgress for NoProgress {}

/// One container as Analysis sees it.
struct ContainerInfo {
    id: ContainerId,
    chunks: u64,
    file_bytes: u64,
}

/// What the mark phase leaves for Copy.
enum Marked {
    /// LGC, PGC: the Live Instance filter.
    Instances(LiveFilter),
    /// PGC+: the live vector (cleared as Copy goes).
    Vector(Phv),
}

/// Everything the phases share.
struct Ctx<'a> {
    repo: &'a Repository,
    opts: &'a GcOptions,
    progress: &'a dyn GcProgress,
    roots: Vec<(String, BlobRef)>,
    ids: Vec<ContainerId>,
    infos: Vec<ContainerInfo>,
    /// Analysis: each container with bit `k` set when it holds a tree node
    /// of level `k` (the level scans' map).
    levels: Vec<(ContainerId, u64)>,
    entries: Entries,
    store: ChunkStore,
    seed: u64,
    /// Peak bytes of the mark structures.
    peak: u64,
}

impl Ctx<'_> {
    fn keys(&self) -> u64 {
        self.entries.len()
    }

    /// Enumeration with the collector's walk: logical without `lp`,
    /// physical with it.
    fn enumerate(
        &self,
        phases: &mut Phases<'_>,
        live: &mut Live,
        lp: Option<&mut Phv>,
        gate: &Gate,
        stats: &mut EnumerationStats,
    ) -> Result<()> {
        phases.start("enumeration", self.roots.len() as u64);
        let mut reader = NodeReader::new(&self.store).ticking(self.progress);
        match lp {
            None => mark::enumerate_logical(&self.roots, &mut reader, live, gate, stats),
            Some(lp) => {
                lp.reset();
                mark::enumerate_physical(
                    &self.roots,
                    &mut reader,
                    &self.levels,
                    live,
                    lp,
                    gate,
                    stats,
                )
            }
        }
    }

    /// LGC/PGC Filter (§3.1 step 3): a live chunk's canonical instance (the
    /// index entry: the newest copy) joins the Live Instance filter.
    /// `within`: only entries in these containers (focused second pass).
    fn filter(
        &self,
        phases: &mut Phases<'_>,
        live: &Live,
        gate: &Gate,
        expected: u64,
        within: Option<&HashSet<ContainerId>>,
    ) -> Result<LiveFilter> {
        phases.start("filter", self.keys());
        let mut instances = LiveFilter::new(expected, self.seed ^ 0x1);
        let mut tested = 0u64;
        self.entries.for_each(&mut |e| {
            tested += 1;
            if tested.is_multiple_of(TICK_ENTRIES) {
                self.progress.tick();
            }
            if within.is_none_or(|w| w.contains(&e.container))
                && gate.sampled(&e.fp)
                && live.contains(&e.fp)
            {
                instances.insert_instance(&e.fp, e.container);
            }
        })?;
        Ok(instances)
    }

    /// LGC/PGC Select (§3.1 step 4): liveness of `ids` from their metadata
    /// sections and the Live Instance filter (judging sampled chunks only
    /// on a sampled pass).
    fn tally_instances(
        &self,
        ids: &[ContainerId],
        instances: &LiveFilter,
        gate: &Gate,
    ) -> Result<Vec<Tally>> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            stop::stop_if_interrupted()?;
            let meta = meta_of(&*self.repo.log, id)?;
            let mut t = Tally {
                chunks: meta.descriptors.len() as u64,
                file_bytes: meta.file_size,
                ..Tally::new(id)
            };
            for d in &meta.descriptors {
                t.stored_bytes += u64::from(d.stored_len);
                if gate.sampled(&d.fp) {
                    t.judged += 1;
                    t.judged_stored += u64::from(d.stored_len);
                    if instances.contains_instance(&d.fp, id) {
                        t.live += 1.0;
                        t.live_stored += f64::from(d.stored_len);
                    }
                }
            }
            t.all_dead = t.judged == t.chunks && t.live == 0.0;
            out.push(t);
            self.progress.advance(1);
        }
        Ok(out)
    }
}

/// LGC and PGC: Live and Live Instance Bloom filters, with focused
/// cleaning when both do not fit in memory (§3.1.2): a sampled pass
/// chooses candidate containers, a second pass marks only their chunks.
fn mark_with_filters(
    ctx: &mut Ctx<'_>,
    phases: &mut Phases<'_>,
    report: &mut GcReport,
    mut lp: Option<Phv>,
) -> Result<(Marked, Vec<Tally>, Vec<ContainerId>)> {
    let lp_bytes = lp.as_ref().map_or(0, Phv::bytes);
    let per_key = 2 * BLOOM_BITS_PER_KEY / 8;
    let budget = ctx.opts.memory_bytes.saturating_sub(lp_bytes).max(1024);
    let keys = ctx.keys();
    let mut gate = Gate::all();
    let mut expected = keys;
    if keys * per_key > budget {
        let rate = budget as f64 / (keys * per_key) as f64;
        gate.seed = ctx.seed ^ 0x5a;
        gate.sample_below = (rate * u64::MAX as f64) as u64;
        expected = (keys as f64 * rate).ceil() as u64 + 64;
    }
    let mut live = Live::Bloom(LiveFilter::new(expected, ctx.seed));
    ctx.enumerate(
        phases,
        &mut live,
        lp.as_mut(),
        &gate,
        &mut report.enumeration,
    )?;
    let instances = ctx.filter(phases, &live, &gate, expected, None)?;
    ctx.peak = ctx.peak.max(lp_bytes + live.bytes() + instances.bytes());
    drop(live);
    phases.start("select", ctx.ids.len() as u64);
    let tallies = ctx.tally_instances(&ctx.ids, &instances, &gate)?;
    report.mark_passes = 1;
    if gate.sample_below == u64::MAX {
        let (sel, threshold) = sweep::select(&tallies, ctx.opts.reclaim_percent, u64::MAX);
        report.plan.liveness_threshold = threshold;
        return Ok((Marked::Instances(instances), tallies, sel));
    }
    drop(instances);
    // Candidates: mostly dead by the sample, as many as the second pass's
    // filters can hold.
    let (mut sel, threshold) = sweep::select(&tallies, ctx.opts.reclaim_percent, budget / per_key);
    report.plan.liveness_threshold = threshold;
    report.mark_passes = 2;
    if sel.is_empty() {
        return Ok((Marked::Instances(LiveFilter::new(0, 0)), tallies, sel));
    }
    phases.start("candidates", sel.len() as u64);
    let cand_chunks: u64 = tallies
        .iter()
        .filter(|t| sel.binary_search(&t.id).is_ok())
        .map(|t| t.chunks)
        .sum();
    let mut cand = LiveFilter::new(cand_chunks, ctx.seed ^ 0x2);
    for &id in &sel {
        for d in meta_of(&*ctx.repo.log, id)?.descriptors {
            cand.insert(&d.fp);
        }
    }
    let cand_bytes = cand.bytes();
    let gate = Gate {
        candidates: Some(cand),
        ..Gate::all()
    };
    let mut live = Live::Bloom(LiveFilter::new(cand_chunks, ctx.seed ^ 0x3));
    ctx.enumerate(
        phases,
        &mut live,
        lp.as_mut(),
        &gate,
        &mut report.enumeration,
    )?;
    ctx.peak = ctx.peak.max(lp_bytes + live.bytes() + cand_bytes);
    drop(gate);
    let chosen: HashSet<ContainerId> = sel.iter().copied().collect();
    let instances = ctx.filter(phases, &live, &Gate::all(), cand_chunks, Some(&chosen))?;
    ctx.peak = ctx.peak.max(lp_bytes + live.bytes() + instances.bytes());
    drop(live);
    phases.start("select", sel.len() as u64);
    let exact = ctx.tally_instances(&sel, &instances, &Gate::all())?;
    // A candidate the exact pass finds fully live is left alone.
    sel.retain(|id| exact.iter().any(|t| t.id == *id && t.liveness() < 1.0));
    let mut tallies = tallies;
    for t in exact {
        if let Some(slot) = tallies.iter_mut().find(|s| s.id == t.id) {
            *slot = t;
        }
    }
    Ok((Marked::Instances(instances), tallies, sel))
}

/// PGC+ (§3.4): the live vector over every fingerprint, one pass; Select
/// backwards with a Dead filter and the duplicate counter.
fn mark_with_vector(
    ctx: &mut Ctx<'_>,
    phases: &mut Phases<'_>,
    report: &mut GcReport,
    mut lp: Phv,
    mut stored: Vec<Fingerprint>,
) -> Result<(Marked, Vec<Tally>, Vec<ContainerId>)> {
    let mut keys = Vec::with_capacity(ctx.keys() as usize);
    let mut canonical: std::collections::HashMap<ContainerId, u64> = Default::default();
    ctx.entries.for_each(&mut |e| {
        keys.push(e.fp);
        *canonical.entry(e.container).or_insert(0) += 1;
    })?;
    // The vector answers for keys only: a fingerprint that is not one maps
    // to another key's bit, and Select and Copy would read (and Copy clear)
    // that other chunk's liveness, so a live chunk could go uncopied. 003
    // builds it over the index, which there names every stored chunk; here
    // a chunk a judged container holds may be missing from the index the
    // collection read (`unindexed_chunks`), so the keys are the index's
    // fingerprints and every fingerprint stored in a judged container.
    // The perfect hash needs distinct keys.
    keys.sort_unstable();
    keys.dedup();
    stored.sort_unstable();
    stored.dedup();
    stored.retain(|fp| keys.binary_search(fp).is_err());
    report.unindexed_chunks = stored.len() as u64;
    keys.extend(stored);
    let n = keys.len() as u64;
    let mut live = Live::Phv(Phv::build(keys, 1));
    ctx.enumerate(
        phases,
        &mut live,
        Some(&mut lp),
        &Gate::all(),
        &mut report.enumeration,
    )?;
    let Live::Phv(vector) = live else {
        unreachable!("PGC+ marks into the vector")
    };
    report.memory.live_vector_bits_per_fingerprint =
        Some(vector.bytes() as f64 * 8.0 / n.max(1) as f64);
    phases.start("select", ctx.ids.len() as u64);
    let mut dead = LiveFilter::new(n.saturating_sub(vector.count(0)), ctx.seed ^ 0xdead);
    ctx.peak = ctx.peak.max(lp.bytes() + vector.bytes() + dead.bytes());
    let mut tallies = Vec::with_capacity(ctx.infos.len());
    for info in ctx.infos.iter().rev() {
        stop::stop_if_interrupted()?;
        let meta = meta_of(&*ctx.repo.log, info.id)?;
        // Analysis duplicate counter: chunks of this container whose
        // canonical (newest) copy is elsewhere, or repeated within it.
        let dups = info
            .chunks
            .saturating_sub(canonical.get(&info.id).copied().unwrap_or(0));
        tallies.push(sweep::tally_plus(
            &meta,
            info.file_bytes,
            &vector,
            dups,
            &mut dead,
        ));
        ctx.progress.advance(1);
    }
    tallies.reverse();
    report.mark_passes = 1;
    let (sel, threshold) = sweep::select(&tallies, ctx.opts.reclaim_percent, u64::MAX);
    report.plan.liveness_threshold = threshold;
    Ok((Marked::Vector(vector), tallies, sel))
}

/// Re-layout's part of the plan (`relayout::plan`), skipped when focused
/// cleaning's Live Instance filter covers only its candidates (any other
/// container would look dead).
fn plan_relayout(
    ctx: &Ctx<'_>,
    phases: &mut Phases<'_>,
    report: &mut GcReport,
    tallies: &[Tally],
    ro: relayout::RelayoutOptions,
    selected: &mut Vec<ContainerId>,
) -> Result<FpMap<u64>> {
    if report.mark_passes != 1 {
        report.relayout = Some(relayout::RelayoutReport {
            skipped: Some("focused cleaning judged only its candidates".into()),
            ..Default::default()
        });
        return Ok(FpMap::default());
    }
    phases.start("relayout", ctx.ids.len() as u64);
    let (order, r) = relayout::plan(
        ctx.repo,
        &ctx.store,
        &ctx.ids,
        tallies,
        ro,
        ctx.opts.memory_bytes,
        selected,
    )?;
    report.plan.relayout_containers = r.chosen_containers;
    report.relayout = Some(r);
    Ok(order)
}

/// Runs one collection; the caller holds the collector lock, and no
/// writer lock (the collection takes it for Merge and Commit).
pub fn collect(
    repo: &Repository,
    gc: &GcLock,
    opts: &GcOptions,
    progress: &dyn GcProgress,
) -> Result<GcReport> {
    let started = Instant::now();
    let cfg = &repo.config;
    let backend = repo.backend().clone();
    let mut phases = Phases {
        repo,
        progress,
        out: Vec::new(),
        current: None,
    };
    let mut report = GcReport {
        requested: opts.collector.name().into(),
        dry_run: opts.dry_run,
        ..Default::default()
    };

    // Merge (§3.1 step 1): the index covers every container; the roots are
    // the snapshot records now; ids are reserved for the copies.
    phases.start("merge", 0);
    let mut merged = commit::merge(repo, gc, opts).map_err(|e| {
        dead_first::no_room(
            e,
            "the id reservation and index update of its Merge (a few KiB)",
        )
    })?;
    report.warnings = std::mem::take(&mut merged.warnings);
    stop::stop_if_interrupted()?;
    let codec = ChunkCodec::for_repo(repo);
    let mut ctx = Ctx {
        repo,
        opts,
        progress,
        roots: merged.roots.clone(),
        ids: merged.ids.clone(),
        infos: Vec::new(),
        levels: Vec::new(),
        entries: Entries {
            disk: DiskIndex::open(backend.clone(), repo.counters.clone())?,
            pending: std::mem::take(&mut merged.uncovered),
        },
        store: ChunkStore::new(
            repo.log.clone(),
            Locator::Disk(DiskIndex::open(backend.clone(), repo.counters.clone())?),
            codec.clone(),
        ),
        seed: opts.seed.unwrap_or(merged.seed),
        peak: 0,
    };
    let keys = ctx.keys();
    report.memory.fingerprints = keys;

    // PGC+ falls back to PGC when its vectors do not fit (§3.4).
    let mut collector = opts.collector;
    if collector == Collector::PgcPlus {
        // ~2 bits of hash function + 1 live bit per key, and a Dead filter
        // for a tenth of them (003: dead chunks are about 1:10 to live ones).
        let needed = keys * 3 / 8 + keys / 10 * BLOOM_BITS_PER_KEY / 8;
        if needed > opts.memory_bytes {
            report.fell_back = Some(format!(
                "PGC+ needs about {needed} bytes for its vectors, more than --memory ({} bytes)",
                opts.memory_bytes
            ));
            collector = Collector::Pgc;
        }
    }
    report.collector = collector.name().into();

    // Analysis (§3.2 phase 1'): tree levels per container; the perfect
    // hash over tree-node fingerprints (walk and confirm bits).
    // PGC+: every fingerprint the judged containers hold (the live vector's
    // keys, `mark_with_vector`).
    let mut stored = Vec::new();
    let lp = if collector == Collector::Lgc {
        None
    } else {
        phases.start("analysis", ctx.ids.len() as u64);
        let mut lp_keys = Vec::new();
        // A window of parallel reads at a time, consumed in order: on
        // object storage each metadata read is a round trip, and one after
        // another made this the longest phase of a collection beside
        // writers (272 containers, 15 s on S3 with 20 ms requests).
        let ids = std::mem::take(&mut ctx.ids);
        let log = &*repo.log;
        crate::blocking_map::blocking_for_each(
            &ids,
            log.read_parallelism(),
            |id| meta_of(log, *id),
            |&id, meta| {
                stop::stop_if_interrupted()?;
                let meta = meta?;
                let mut levels = 0u64;
                if collector == Collector::PgcPlus {
                    stored.extend(meta.descriptors.iter().map(|d| d.fp));
                }
                for d in &meta.descriptors {
                    if d.kind == ChunkKind::Tree && d.level > 0 {
                        levels |= 1 << d.level.min(63);
                        lp_keys.push(d.fp);
                    }
                }
                ctx.infos.push(ContainerInfo {
                    id,
                    chunks: meta.descriptors.len() as u64,
                    file_bytes: meta.file_size,
                });
                ctx.levels.push((id, levels));
                progress.advance(1);
                Ok(())
            },
        )?;
        ctx.ids = ids;
        lp_keys.sort();
        lp_keys.dedup();
        Some(Phv::build_tagged(lp_keys, 2))
    };
    ctx.peak = lp.as_ref().map_or(0, Phv::bytes);

    let (mut marked, tallies, selected) = match (collector, lp) {
        (Collector::PgcPlus, Some(lp)) => {
            mark_with_vector(&mut ctx, &mut phases, &mut report, lp, stored)?
        }
        (_, lp) => mark_with_filters(&mut ctx, &mut phases, &mut report, lp)?,
    };
    stop::stop_if_interrupted()?;
    report.memory.bytes = ctx.peak;
    report.memory.bits_per_fingerprint = ctx.peak as f64 * 8.0 / keys.max(1) as f64;

    // Re-layout: the heads' order, and the containers they use in part
    // cleaned as if selected (`relayout.rs`).
    let mut selected = selected;
    let head_order = opts
        .relayout
        .map(|ro| plan_relayout(&ctx, &mut phases, &mut report, &tallies, ro, &mut selected))
        .transpose()?;
    stop::stop_if_interrupted()?;

    // The plan, before anything is copied or deleted.
    let chosen: HashSet<ContainerId> = selected.iter().copied().collect();
    let plan = &mut report.plan;
    plan.collector = collector.name().into();
    plan.snapshots = ctx.roots.len();
    plan.containers = tallies.len() as u64;
    for t in &tallies {
        plan.repository_bytes += t.file_bytes;
        plan.estimated_dead_bytes += t.dead_bytes() as u64;
        if chosen.contains(&t.id) {
            plan.selected_containers += 1;
            plan.selected_bytes += t.file_bytes;
            plan.estimated_reclaim_bytes += t.dead_bytes() as u64;
            plan.estimated_live_bytes_to_copy += t.live_stored_bytes() as u64;
        }
    }
    progress.plan(&report.plan);
    if opts.dry_run || selected.is_empty() {
        if merged.reservation.is_some() {
            // Nothing was copied into the reserved ids.
            reservation::clear(&*backend)?;
        }
        phases.end();
        report.phases = phases.out;
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    }

    // Whole dead containers first: they need no new bytes (`dead_first`).
    let chunk_counts: std::collections::HashMap<ContainerId, u64> =
        tallies.iter().map(|t| (t.id, t.chunks)).collect();
    let dead = dead_first::whole_dead(&tallies, &chosen);
    if !dead.is_empty() {
        phases.start("delete dead", dead.len() as u64);
    }
    let deadline = opts
        .max_seconds
        .map(|s| started + std::time::Duration::from_secs_f64(s.max(0.0)));
    let freed = dead_first::delete(repo, gc, &merged, dead, &tallies, progress, deadline)?;
    report.dead_containers_deleted_first = freed.ids.len() as u64;
    report.dead_bytes_freed_first = freed.bytes;
    let gone = |id: &ContainerId| freed.ids.binary_search(id).is_ok();
    let selected: Vec<ContainerId> = selected.into_iter().filter(|id| !gone(id)).collect();
    let chosen: HashSet<ContainerId> = selected.iter().copied().collect();
    let ids: Vec<ContainerId> = ctx.ids.iter().copied().filter(|id| !gone(id)).collect();
    let finish = |report: &mut GcReport,
                  phases: Phases<'_>,
                  copied: sweep::Copied,
                  done: commit::Committed| {
        report.copied_chunks = copied.chunks + done.resurrected + freed.committed.resurrected;
        report.copied_bytes = copied.stored_bytes;
        report.containers_written = copied.containers_written
            + done.containers_written
            + freed.committed.containers_written;
        // Cleaned but left condemned when the wait outlasted --max-seconds.
        let deleted = if done.left > 0 {
            &[][..]
        } else {
            &copied.cleaned[..]
        };
        report.containers_deleted = (deleted.len() + freed.ids.len()) as u64;
        report.condemned_left = done.left + freed.committed.left;
        report.index_removed = done.removed + freed.committed.removed;
        report.index_moved = done.moved + freed.committed.moved;
        report.concurrent_snapshots = done.new_snapshots.max(freed.committed.new_snapshots);
        report.resurrected_chunks = done.resurrected + freed.committed.resurrected;
        let deleted_bytes = sweep::file_bytes_of(&tallies, deleted) + freed.bytes;
        report.reclaimed_bytes = deleted_bytes as i64
            - copied.written_bytes as i64
            - done.written_bytes as i64
            - freed.committed.written_bytes as i64;
        report.stopped_by_time = copied.stopped_by_time || report.condemned_left > 0;
        report.damaged = copied.damaged;
        let mut phases = phases;
        phases.end();
        report.phases = phases.out;
        report.seconds = started.elapsed().as_secs_f64();
    };
    if selected.is_empty() || freed.committed.left > 0 {
        // Every selected container was whole dead: nothing to copy; or
        // the wait for their deletion outlasted --max-seconds.
        reservation::clear(&*backend)?;
        finish(&mut report, phases, Default::default(), Default::default());
        return Ok(report);
    }
    crate::interrupt::check(|| freed.interrupted(false))?;

    // Copy (§3.1 step 5; PGC+ §3.4 backwards with dynamic duplicate
    // removal), into the reserved ids: a backup may be writing beside it.
    let mut writer = CopyWriter::new(
        &*repo.log,
        &codec,
        cfg.fp_width(),
        cfg.container_size as usize,
        merged.reservation,
    );
    if let Some(order) = head_order.as_ref().filter(|o| !o.is_empty()) {
        writer = writer.with_layout(order);
    }
    let tick = || progress.advance(1);
    let copy_result = match &mut marked {
        Marked::Instances(instances) => {
            phases.start("copy", selected.len() as u64);
            sweep::copy_forward(&mut writer, &selected, instances, deadline, &tick)
        }
        Marked::Vector(vector) => {
            phases.start("copy", ids.len() as u64);
            sweep::copy_backward(&mut writer, &ids, &chosen, vector, deadline, &tick)
                .map(|reads| report.copy_metadata_reads = reads)
        }
    };
    if let Err(e) = copy_result {
        if dead_first::is_out_of_space(&e) {
            let needed = tallies
                .iter()
                .filter(|t| chosen.contains(&t.id))
                .map(|t| t.copy_file_bytes() as u64)
                .sum::<u64>()
                + u64::from(cfg.container_size);
            return Err(dead_first::out_of_space(e, needed, &freed));
        }
        return Err(e);
    }
    if writer.out.interrupted {
        return Err(Error::Interrupted(freed.interrupted(true)));
    }
    if let Some(r) = report.relayout.as_mut() {
        (r.ordered_chunks, r.range_reads) = writer.layout_counts();
    }
    drop(marked);
    drop(ctx);
    let mut copied = writer.out;
    copied.cleaned.sort();

    // Commit (writer lock, shared with backups): against the index as
    // backups left it; then the wait for the backups that may use what it
    // condemned, their rescue, and the deletes (`finish.rs`).
    phases.start("commit", 0);
    let condemned = commit::commit(repo, gc, &merged, &copied, &chunk_counts, true)?;
    let done = finish::finish(repo, gc, &merged, condemned, progress, deadline)?;
    finish(&mut report, phases, copied, done);
    Ok(report)
}
