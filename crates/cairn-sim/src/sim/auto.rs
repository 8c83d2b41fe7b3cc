//! The device-aware lookup choice (beyond the papers): `lookup = "auto"`.
//!
//! `000_d04706aa48332137.txt` §4 shows which of eager and lazy fingerprint
//! lookup is faster depends on the device: lazy wins iff eq. (8),
//! `V_disk / V_DRAM > (F_Dup (R_cache^lazy - R_cache^eager) +
//! F_cache^post-lookup) / (F_disk^eager - F_disk^lazy)`, holds, and the best
//! locality-ring size shrinks as the device gets faster (§5.3). The right
//! side depends on the workload, not the device, so cairn measures it: a
//! calibration runs the workload's first generations through the real
//! engine once eagerly and once lazily per ring size in [`RING_SIZES`],
//! prices every run on the device with the device model, and takes the
//! fastest lookup. Eq. (8)'s two sides are reported with it, computed from
//! the calibration's counters (eager vs the chosen or best lazy run).
//!
//! Runs are device-independent (the device model only accounts), so one
//! run can be priced on any number of devices: the experiments
//! `eager-vs-lazy` and `ring-size` use [`StrategyRun`] the same way.

use serde::Serialize;

use cairn_core::{CountersSnapshot, Result};
use cairn_engine::config::{IndexKind, LookupStrategy};
use cairn_engine::RepoConfig;

use super::{GenerationInput, SimOptions};
use crate::device::analytic::{
    eager_params_from, eq8_lazy_wins, eq8_rhs, latency_ratio, lazy_params_from, r_cache_lazy, v_of,
};
use crate::device::{DeviceClass, DeviceModel, IoUsage, StageTimes};

/// Locality-ring sizes tried: 1 (no post-lookup) to 2048 (`000` §5.2's default).
pub const RING_SIZES: [u32; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];

/// Generations of the input a calibration runs (fewer when there are fewer).
pub const CALIBRATION_GENERATIONS: usize = 3;

/// One simulated run with a fixed lookup strategy, to be priced per device.
#[derive(Clone, Debug)]
pub struct StrategyRun {
    pub strategy: LookupStrategy,
    pub ring_size: u32,
    pub counters: CountersSnapshot,
    pub usage: IoUsage,
    pub wall_seconds: f64,
}

impl StrategyRun {
    /// Modeled time of this run on `device` (memory stages on DRAM).
    pub fn price(&self, device: &DeviceClass) -> StageTimes {
        DeviceModel::for_device(device.clone()).times(&self.usage, &self.counters)
    }
}

/// Simulates `inputs` with `base`'s configuration but the given strategy
/// and ring size.
pub fn run_strategy(
    inputs: &[GenerationInput],
    base: &RepoConfig,
    strategy: LookupStrategy,
    ring_size: u32,
) -> Result<StrategyRun> {
    let mut config = base.clone();
    config.index.lookup.strategy = strategy;
    config.index.lookup.ring_size = ring_size;
    // Lookup cost does not depend on rewriting, and lazy lookup has none.
    config.rewrite = cairn_engine::config::RewriteConfig::None;
    let report = super::run(inputs, &SimOptions::backups_only(config))?;
    Ok(StrategyRun {
        strategy,
        ring_size,
        counters: report.counters,
        usage: report.usage,
        wall_seconds: report.totals.wall_seconds,
    })
}

/// Both sides of `000` eq. (8) for one device, from measured counters.
#[derive(Clone, Debug, Serialize)]
pub struct Eq8 {
    /// `V_disk / V_DRAM`.
    pub lhs: f64,
    /// The right side; `None` when lazy saves no external accesses.
    pub rhs: Option<f64>,
    /// Eq. (8) holds (multiplied out, valid for any sign).
    pub lazy_wins: bool,
}

/// Eq. (8) on `device` for an eager and a lazy run of the same input.
pub fn eq8(device: &DeviceClass, eager: &StrategyRun, lazy: &StrategyRun) -> Eq8 {
    let (v_disk, v_dram) = (v_of(device), v_of(&DeviceClass::dram()));
    let e = eager_params_from(&eager.counters, eager.price(device).bloom_seconds);
    let l = lazy_params_from(&lazy.counters, lazy.price(device).bloom_seconds);
    Eq8 {
        lhs: latency_ratio(v_disk, v_dram),
        rhs: eq8_rhs(
            e.f_dup,
            r_cache_lazy(l.r_first_cache, l.r_second_cache),
            e.r_cache_eager,
            l.f_cache_post_lookup,
            e.f_disk_eager,
            l.f_disk_lazy,
        ),
        lazy_wins: eq8_lazy_wins(v_disk, v_dram, &e, &l),
    }
}

/// What `auto` chose for a device, and why.
#[derive(Clone, Debug, Serialize)]
pub struct LookupChoice {
    pub device: String,
    pub strategy: LookupStrategy,
    /// Ring size of the chosen lazy run (the configured one when eager wins).
    pub ring_size: u32,
    /// Modeled lookup seconds of the calibration: eager, and the best lazy run.
    pub eager_seconds: f64,
    pub lazy_seconds: f64,
    pub best_lazy_ring_size: u32,
    /// Eq. (8) for eager vs the best lazy run.
    pub eq8: Eq8,
    /// Modeled lookup seconds of every lazy ring size tried.
    pub lazy_by_ring_size: Vec<(u32, f64)>,
    /// One line saying what won and why.
    pub reason: String,
}

/// Calibrates on `inputs` (the first [`CALIBRATION_GENERATIONS`]) and picks
/// the strategy and ring size with the least modeled lookup time on `device`.
pub fn choose(
    inputs: &[GenerationInput],
    base: &RepoConfig,
    device: &DeviceClass,
) -> Result<LookupChoice> {
    if base.index.kind == IndexKind::Frugal {
        return Ok(frugal_choice(device, base.index.lookup.ring_size));
    }
    let sample = &inputs[..inputs.len().min(CALIBRATION_GENERATIONS)];
    let eager = run_strategy(
        sample,
        base,
        LookupStrategy::Eager,
        base.index.lookup.ring_size,
    )?;
    let mut lazy = Vec::with_capacity(RING_SIZES.len());
    for ring in RING_SIZES {
        lazy.push(run_strategy(sample, base, LookupStrategy::Lazy, ring)?);
    }
    Ok(decide(device, &eager, &lazy, base.index.lookup.ring_size))
}

/// With the frugal index there is nothing to choose: lazy lookup batches
/// paged-index page reads, which the frugal index does not have.
fn frugal_choice(device: &DeviceClass, ring_size: u32) -> LookupChoice {
    LookupChoice {
        device: device.name.clone(),
        strategy: LookupStrategy::Eager,
        ring_size,
        eager_seconds: 0.0,
        lazy_seconds: 0.0,
        best_lazy_ring_size: ring_size,
        eq8: Eq8 {
            lhs: latency_ratio(v_of(device), v_of(&DeviceClass::dram())),
            rhs: None,
            lazy_wins: false,
        },
        lazy_by_ring_size: Vec::new(),
        reason: format!(
            "{}: eager (the frugal index has no index pages for lazy lookup to batch)",
            device.name
        ),
    }
}

/// The choice from already-run calibration runs (`lazy` non-empty).
pub fn decide(
    device: &DeviceClass,
    eager: &StrategyRun,
    lazy: &[StrategyRun],
    configured_ring: u32,
) -> LookupChoice {
    let eager_seconds = eager.price(device).lookup_seconds;
    let by_ring: Vec<(u32, f64)> = lazy
        .iter()
        .map(|r| (r.ring_size, r.price(device).lookup_seconds))
        .collect();
    // Ties go to the smaller ring (less post-lookup work for the same time).
    let (best_i, &(best_ring, lazy_seconds)) = by_ring
        .iter()
        .enumerate()
        .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1).then(a.1 .0.cmp(&b.1 .0)))
        .expect("at least one lazy run");
    let eq8 = eq8(device, eager, &lazy[best_i]);
    // Ties go to eager: simpler, and it packs chunks in stream order.
    let lazy_wins = lazy_seconds < eager_seconds;
    let rhs = eq8.rhs.map_or_else(
        || "undefined (lazy saves no external access)".to_string(),
        |r| format!("{r:.1}"),
    );
    let reason = format!(
        "{}: {} wins: modeled lookup time eager {:.3} s vs lazy {:.3} s (best ring size {}); \
         eq. (8): V_disk/V_DRAM = {:.1} vs right side {} -> eq. (8) alone says {}",
        device.name,
        if lazy_wins { "lazy" } else { "eager" },
        eager_seconds,
        lazy_seconds,
        best_ring,
        eq8.lhs,
        rhs,
        if eq8.lazy_wins { "lazy" } else { "eager" },
    );
    LookupChoice {
        device: device.name.clone(),
        strategy: if lazy_wins {
            LookupStrategy::Lazy
        } else {
            LookupStrategy::Eager
        },
        ring_size: if lazy_wins {
            best_ring
        } else {
            configured_ring
        },
        eager_seconds,
        lazy_seconds,
        best_lazy_ring_size: best_ring,
        eq8,
        lazy_by_ring_size: by_ring,
        reason,
    }
}

/// The synthetic calibration workload for a repository with no data yet:
/// three DDFS-style generations (`docs/workloads.md`) of 64 MiB at the
/// repository's average chunk size.
pub fn calibration_workload(cfg: &RepoConfig) -> Result<Vec<GenerationInput>> {
    let avg = cfg.chunker.avg_size().to_string();
    let params: Vec<(String, String)> = [
        ("generations", "3"),
        ("generation_bytes", "64MiB"),
        ("streams", "1"),
        ("avg_chunk", avg.as_str()),
        ("seed", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let w: std::sync::Arc<dyn crate::workload::Workload> =
        std::sync::Arc::from(crate::workload::from_name("ddfs", &params)?);
    Ok((0..w.generations())
        .map(|generation| GenerationInput::Workload {
            workload: w.clone(),
            generation,
        })
        .collect())
}

/// `auto` for a new repository on `device`: [`choose`] over
/// [`calibration_workload`].
pub fn choose_for_new_repository(cfg: &RepoConfig, device: &DeviceClass) -> Result<LookupChoice> {
    choose(&calibration_workload(cfg)?, cfg, device)
}
