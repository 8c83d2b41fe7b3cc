//! `eager-vs-lazy` and `ring-size`: `000_d04706aa48332137.txt` §5.2 (Fig. 5-6,
//! Table 4) and §5.3 (Fig. 7-8, Table 5).
//!
//! One workload is simulated through the real engine (`sim::run`) with eager
//! lookup (DDFS §4.4) and with lazy lookup (`000` Algorithm 2) at each ring
//! size of [`RING_SIZES`]. A run is device-independent (the device model
//! only accounts), so each run is priced on HDD, SSD, Optane and PM
//! ([`StrategyRun::price`]); the memory stages are on DRAM. The lookup time
//! (`total_seconds`) is `000`'s: Bloom + cache (pre-lookup) + disk (index
//! page reads + metadata prefetches) + post-lookup; container writes are not
//! part of it.
//!
//! The workload stands in for `000`'s MIRROR dataset (§5.1 Table 3: 104 GB of
//! versioned images written in time order, 56% duplicate, 4 KB Rabin chunks):
//! DDFS-style generations in one stream, 4 KiB mean chunks, and a change rate
//! that makes the whole run about 58% duplicate ([`workload_params`]).

use std::sync::Arc;

use plotters::prelude::*;
use serde_json::{json, Value};

use cairn_core::Result;
use cairn_engine::config::LookupStrategy;
use cairn_engine::{RepoConfig, Repository};

use super::tabulate::{self, f, s};
use super::{plot_format, ExperimentOptions, ExperimentOutput};
use crate::device::{DeviceClass, StageTimes};
use crate::figure::{Area, Drawn, T};
use crate::sim::auto::{eq8, run_strategy, StrategyRun, RING_SIZES};
use crate::sim::GenerationInput;
use crate::workload;

/// Devices each run is priced on (`000` Table 1).
pub const DEVICES: [&str; 4] = ["HDD", "SSD", "Optane", "PM"];

/// Ring size of the `eager-vs-lazy` lazy run: `000` §5.2 uses 2048.
pub const PAPER_RING_SIZE: u32 = 2048;

/// Buffered fingerprints per stream in both experiments: about `000` §5.2's
/// 256 MB of cache and buffer (cairn holds ~100 B per buffered fingerprint
/// in the simulator, where chunks carry no content). Batching needs many
/// more buffered fingerprints than index pages (see docs/experiments/lookup.md).
pub const EXPERIMENT_BUFFER: u32 = 1 << 20;

/// `000` Table 4 (seconds; HDD, Optane SSD, PM): eager Bloom, cache, disk;
/// lazy Bloom, pre-lookup, disk, post-lookup.
pub const PAPER_TABLE4: [(&str, [f64; 7]); 3] = [
    ("HDD", [8.81, 3.05, 167.63, 10.53, 1.57, 69.36, 8.72]),
    ("Optane", [13.68, 3.57, 1.0, 11.74, 1.72, 0.62, 8.69]),
    ("PM", [11.26, 3.28, 0.998, 11.37, 1.73, 0.993, 9.03]),
];

/// `000` Table 5: best ring size and its lookup time (s).
pub const PAPER_TABLE5: [(&str, u32, f64); 3] = [
    ("HDD", 512, 68.82),
    ("Optane", 64, 19.22),
    ("PM", 32, 18.44),
];

/// The synthetic workload: 10 generations in one stream, 4 KiB chunks, 35%
/// of each generation new (whole run: 1 - (1 + 9 * 0.35) / 10 = 58.5%
/// duplicate, MIRROR: 56.4%), 1 GiB per generation (`quick`: 4 MiB).
pub fn workload_params(quick: bool) -> Vec<(String, String)> {
    let bytes = if quick { "4MiB" } else { "1GiB" };
    super::params(&[
        ("generations", "10"),
        ("generation_bytes", bytes),
        ("streams", "1"),
        ("avg_chunk", "4KiB"),
        ("change_rate", "0.35"),
        ("seed", "1"),
    ])
}

fn inputs(opts: &ExperimentOptions) -> Result<Vec<GenerationInput>> {
    if !opts.traces.is_empty() {
        return Ok(opts
            .traces
            .iter()
            .map(|p| GenerationInput::Trace {
                path: p.clone(),
                format: None,
            })
            .collect());
    }
    let w: Arc<dyn workload::Workload> =
        Arc::from(workload::from_name("ddfs", &workload_params(opts.quick))?);
    Ok((0..w.generations())
        .map(|generation| GenerationInput::Workload {
            workload: w.clone(),
            generation,
        })
        .collect())
}

/// The default configuration with the experiments' lazy buffer.
fn base_config() -> RepoConfig {
    let mut cfg = Repository::default_config();
    // The papers' engines do not rewrite (002's schemes are measured by `restore`).
    cfg.rewrite = cairn_engine::config::RewriteConfig::None;
    cfg.index.lookup.buffer_fingerprints = EXPERIMENT_BUFFER;
    cfg
}

fn devices() -> Vec<DeviceClass> {
    DEVICES
        .iter()
        .map(|d| DeviceClass::by_name(d).expect("built-in device"))
        .collect()
}

fn workload_extra(opts: &ExperimentOptions) -> Value {
    if opts.traces.is_empty() {
        json!({ "ddfs": workload_params(opts.quick).into_iter().map(|(k, v)| (k, Value::from(v))).collect::<serde_json::Map<_, _>>() })
    } else {
        json!({ "trace": opts.traces.iter().map(|p| p.display().to_string()).collect::<Vec<_>>() })
    }
}

/// Per-stage lookup seconds, the keys of both experiments' rows.
fn stage_fields(t: &StageTimes, run: &StrategyRun) -> serde_json::Map<String, Value> {
    let c = &run.counters;
    let v = json!({
        "total_seconds": t.lookup_seconds,
        "bloom_seconds": t.bloom_seconds,
        "pre_lookup_seconds": t.cache_seconds,
        "disk_seconds": t.index_page_read_seconds + t.prefetch_seconds,
        "post_lookup_seconds": t.post_lookup_seconds,
        "lookups": c.lookups,
        "cache_hits": c.cache_hits,
        "post_lookup_hits": c.post_lookup_hits,
        "index_page_reads": c.index_page_reads,
        "prefetches": c.prefetches,
        "wall_seconds": run.wall_seconds,
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

const STAGE_COLUMNS: [&str; 11] = [
    "total_seconds",
    "bloom_seconds",
    "pre_lookup_seconds",
    "disk_seconds",
    "post_lookup_seconds",
    "lookups",
    "cache_hits",
    "post_lookup_hits",
    "index_page_reads",
    "prefetches",
    "wall_seconds",
];

const STAGE_HEADERS: [(&str, &str); 8] = [
    ("total_seconds", "total s"),
    ("bloom_seconds", "bloom s"),
    ("pre_lookup_seconds", "cache/pre s"),
    ("disk_seconds", "disk s"),
    ("post_lookup_seconds", "post s"),
    ("index_page_reads", "page reads"),
    ("prefetches", "prefetches"),
    ("post_lookup_hits", "post hits"),
];

/// The CSV and the printable table of rows keyed by device and `key`
/// (`(row key, table header)`), with the stage columns.
fn csv_and_table(rows: &[Value], key: (&str, &str), title: &str) -> (String, String) {
    let mut cols = vec!["device", key.0];
    cols.extend(STAGE_COLUMNS);
    let mut heads = vec![("device", "device"), key];
    heads.extend(STAGE_HEADERS);
    (
        tabulate::csv(rows, &cols),
        tabulate::text(title, rows, &heads, 3),
    )
}

/// `eager-vs-lazy`: both strategies (lazy at ring size 2048, `000` §5.2) on
/// every device; per-stage time, the winner, and eq. (8) from the counters.
pub fn eager_vs_lazy(opts: &ExperimentOptions) -> Result<ExperimentOutput> {
    let ext = plot_format(&opts.plot_ext)?;
    let inputs = inputs(opts)?;
    let base = base_config();
    let eager = run_strategy(&inputs, &base, LookupStrategy::Eager, PAPER_RING_SIZE)?;
    let lazy = run_strategy(&inputs, &base, LookupStrategy::Lazy, PAPER_RING_SIZE)?;
    let mut rows = Vec::new();
    let mut winners = serde_json::Map::new();
    let mut eq8s = serde_json::Map::new();
    for device in devices() {
        let te = eager.price(&device);
        let tl = lazy.price(&device);
        for (run, t) in [(&eager, &te), (&lazy, &tl)] {
            let mut row = serde_json::Map::new();
            row.insert("device".into(), device.name.clone().into());
            row.insert("strategy".into(), run.strategy.name().into());
            row.extend(stage_fields(t, run));
            rows.push(Value::Object(row));
        }
        let winner = if tl.lookup_seconds < te.lookup_seconds {
            "lazy"
        } else {
            "eager"
        };
        winners.insert(device.name.clone(), winner.into());
        eq8s.insert(
            device.name.clone(),
            serde_json::to_value(eq8(&device, &eager, &lazy)).unwrap_or(Value::Null),
        );
    }
    let mut extra = serde_json::Map::new();
    extra.insert("winner".into(), Value::Object(winners));
    extra.insert("eq8".into(), Value::Object(eq8s));
    extra.insert("ring_size".into(), PAPER_RING_SIZE.into());
    extra.insert("workload".into(), workload_extra(opts));
    extra.insert(
        "paper_table4".into(),
        Value::Array(
            PAPER_TABLE4
                .iter()
                .map(|(d, v)| {
                    json!({ "device": d,
                        "eager": { "bloom_seconds": v[0], "cache_seconds": v[1], "disk_seconds": v[2], "total_seconds": v[0] + v[1] + v[2] },
                        "lazy": { "bloom_seconds": v[3], "pre_lookup_seconds": v[4], "disk_seconds": v[5], "post_lookup_seconds": v[6], "total_seconds": v[3] + v[4] + v[5] + v[6] } })
                })
                .collect(),
        ),
    );
    let (csv, mut table) = csv_and_table(
        &rows,
        ("strategy", "strategy"),
        "eager-vs-lazy: modeled fingerprint-lookup time per stage (000 Fig. 6, Table 4)",
    );
    for d in DEVICES {
        let e = &extra["eq8"][d];
        table.push_str(&format!(
            "{d}: {} faster; eq. (8) V_disk/V_DRAM = {:.1} vs right side {}\n",
            extra["winner"][d].as_str().unwrap_or(""),
            e["lhs"].as_f64().unwrap_or(0.0),
            e["rhs"]
                .as_f64()
                .map_or_else(|| "n/a".to_string(), |r| format!("{r:.1}")),
        ));
    }
    let svg = crate::figure::svg(SIZE, |root| draw_stages(&rows, root))?;
    ExperimentOutput::new("eager-vs-lazy", rows, extra, csv, table).written(
        &opts.out_dir,
        &ext,
        svg,
        SIZE,
    )
}

/// `ring-size`: lazy lookup at every ring size of [`RING_SIZES`] on every
/// device, and the best ring size per device (`optimum`).
pub fn ring_size(opts: &ExperimentOptions) -> Result<ExperimentOutput> {
    let ext = plot_format(&opts.plot_ext)?;
    let inputs = inputs(opts)?;
    let base = base_config();
    let mut runs = Vec::with_capacity(RING_SIZES.len());
    for ring in RING_SIZES {
        runs.push(run_strategy(&inputs, &base, LookupStrategy::Lazy, ring)?);
    }
    let mut rows = Vec::new();
    let mut optimum = serde_json::Map::new();
    let mut optimum_seconds = serde_json::Map::new();
    for device in devices() {
        let mut best: Option<(u32, f64)> = None;
        for run in &runs {
            let t = run.price(&device);
            if best.is_none_or(|(_, s)| t.lookup_seconds < s) {
                best = Some((run.ring_size, t.lookup_seconds));
            }
            let mut row = serde_json::Map::new();
            row.insert("device".into(), device.name.clone().into());
            row.insert("ring_size".into(), run.ring_size.into());
            row.extend(stage_fields(&t, run));
            rows.push(Value::Object(row));
        }
        if let Some((ring, secs)) = best {
            optimum.insert(device.name.clone(), ring.into());
            optimum_seconds.insert(device.name.clone(), secs.into());
        }
    }
    let mut extra = serde_json::Map::new();
    extra.insert("optimum".into(), Value::Object(optimum.clone()));
    extra.insert("optimum_seconds".into(), Value::Object(optimum_seconds));
    extra.insert("workload".into(), workload_extra(opts));
    extra.insert(
        "paper_table5".into(),
        Value::Array(
            PAPER_TABLE5
                .iter()
                .map(|(d, r, s)| json!({ "device": d, "ring_size": r, "total_seconds": s }))
                .collect(),
        ),
    );
    let (csv, mut table) = csv_and_table(
        &rows,
        ("ring_size", "ring"),
        "ring-size: modeled lazy-lookup time per locality-ring size (000 Fig. 7-8, Table 5)",
    );
    let best: Vec<String> = DEVICES
        .iter()
        .map(|d| format!("{d} {}", optimum.get(*d).unwrap_or(&Value::Null)))
        .collect();
    table.push_str(&format!("best ring size: {}\n", best.join(", ")));
    let svg = crate::figure::svg(SIZE, |root| draw_rings(&rows, root))?;
    ExperimentOutput::new("ring-size", rows, extra, csv, table).written(
        &opts.out_dir,
        &ext,
        svg,
        SIZE,
    )
}

const SIZE: (u32, u32) = crate::figure::size(DEVICES.len());

/// The stages: their column, legend label and colour.
const STAGES: [(&str, &str, RGBColor); 4] = [
    ("bloom_seconds", "Bloom filter", RGBColor(0x1f, 0x77, 0xb4)),
    (
        "pre_lookup_seconds",
        "cache before disk",
        RGBColor(0x2c, 0xa0, 0x2c),
    ),
    ("disk_seconds", "index on disk", RGBColor(0xd6, 0x27, 0x28)),
    (
        "post_lookup_seconds",
        "cache after disk",
        RGBColor(0xff, 0x7f, 0x0e),
    ),
];

/// One panel per device: eager and lazy bars, stacked by stage.
fn draw_stages(rows: &[Value], root: &Area) -> Drawn {
    let panels =
        crate::figure::panels(root, "Eager vs lazy lookup, time per stage", DEVICES.len())?;
    for (device, area) in DEVICES.iter().zip(panels.iter()) {
        let bars: Vec<&Value> = rows.iter().filter(|r| s(r, "device") == *device).collect();
        let ymax = bars
            .iter()
            .map(|r| f(r, "total_seconds"))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.9;
        let mut chart = crate::figure::chart(area, &format!("{device} (modeled)"))
            .build_cartesian_2d(0f64..2.0, 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(5)
            .x_label_formatter(&|x| match ((x - 0.5) * 2.0).round() as i64 {
                0 if (x - 0.5).abs() < 1e-6 => "eager".into(),
                2 if (x - 1.5).abs() < 1e-6 => "lazy".into(),
                _ => String::new(),
            })
            .disable_y_mesh()
            .y_labels(6)
            .x_desc("fingerprint lookup")
            .y_desc("modeled time (s)")
            .label_style(T.tick())
            .axis_desc_style(T.axis())
            .draw()?;
        for (i, r) in bars.iter().enumerate() {
            let mut y0 = 0.0;
            for (k, _, color) in STAGES {
                let y1 = y0 + f(r, k);
                let x0 = i as f64 + 0.2;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, y0), (x0 + 0.6, y1)],
                    color.filled(),
                )))?;
                y0 = y1;
            }
        }
        // Stacked top first, as the bars read.
        for (_, label, color) in STAGES.iter().rev() {
            let color = *color;
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
                .label(*label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
        }
        crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    root.present()
}

/// One panel per device: total lazy lookup time against log2(ring size).
fn draw_rings(rows: &[Value], root: &Area) -> Drawn {
    let panels = crate::figure::panels(root, "Lazy lookup time vs ring size", DEVICES.len())?;
    let xmax = RING_SIZES.len() as f64 - 1.0;
    for (device, area) in DEVICES.iter().zip(panels.iter()) {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| s(r, "device") == *device)
            .map(|r| {
                let ring = r["ring_size"].as_u64().unwrap_or(1).max(1) as f64;
                (ring.log2(), f(r, "total_seconds"))
            })
            .collect();
        let (lo, hi) = pts
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
        let pad = ((hi - lo) * 0.1).max(hi * 1e-3).max(1e-12);
        let mut chart = crate::figure::chart(area, &format!("{device} (o = fastest)"))
            .build_cartesian_2d(0f64..xmax, (lo - pad).max(0.0)..hi + pad)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .x_labels(RING_SIZES.len().div_ceil(2))
            .y_labels(6)
            .x_label_formatter(&|x| format!("{}", 2f64.powf(x.round()) as u64))
            .x_desc("locality ring size (fingerprints)")
            .y_desc("modeled lookup time (s)")
            .label_style(T.tick())
            .axis_desc_style(T.axis())
            .draw()?;
        chart.draw_series(LineSeries::new(pts.iter().copied(), RED.stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, RED.filled())))?;
        if let Some(&best) = pts.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
            chart.draw_series(std::iter::once(Circle::new(best, 7, BLACK.stroke_width(2))))?;
        }
    }
    root.present()
}
