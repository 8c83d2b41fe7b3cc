//! `partition`: partitioned deduplication and reconciliation, after
//! `004_62bf1a5ddd5ed253.txt` ("Data Partitioning and Reconciliation",
//! "Reconciliation of Data Partitions", "Efficient partitioning
//! strategies" and its table of dedup savings, global vs clustered by file
//! type / file path). The model and its reading of the slides are in
//! [`crate::partition`].
//!
//! For each workload: global dedup, then for each strategy (`type`, `path`,
//! `stream`) phase 1 alone (each partition deduplicated with its own index;
//! row `k = null`) and phase 1 + reconciliation with `k` = 1, 2, 4 and all
//! partitions per iteration. Every reconciled row must reach the global
//! savings; what differs is memory (`peak_index_entries`: the largest
//! in-memory table of an iteration) and speed (`reconcile_passes`, and the
//! reconciled-index entries streamed).
//!
//! Workloads: `files`, the built-in typed-file dataset
//! ([`crate::partition::files`]); `ddfs`, the DDFS backup generations
//! (generation = stream); with `--trace`, `trace`: the given trace files,
//! one stream each.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{json, Value};

use cairn_core::{Error, Result};

use super::tabulate::{self, f, s, u};
use super::{plot_format, ExperimentOptions, ExperimentOutput};
use crate::figure::{Area, Drawn, T};
use crate::partition::{
    self, files::FilesParams, source, Dataset, Study, INDEX_ENTRY_BYTES, PATH_PARTITION_SHARE,
};
use crate::workload;

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;

/// Reconciliation widths besides "all partitions".
pub const K_VALUES: [usize; 3] = [1, 2, 4];

/// 004's table "Dedup Space Savings": (dataset, global, clustered by file
/// type, clustered by file path), as fractions.
pub const PAPER_004: [(&str, f64, f64, f64); 6] = [
    ("GFS-US", 0.367, 0.356, 0.243),
    ("GFS-Japan-1", 0.411, 0.389, 0.323),
    ("GFS-Japan-2", 0.391, 0.367, 0.248),
    ("HF-Amsterdam", 0.152, 0.147, 0.136),
    ("HF-Dublin", 0.168, 0.162, 0.146),
    ("HF-Japan", 0.196, 0.190, 0.129),
];

/// The DDFS generations studied as workload `ddfs`: 10 generations of 4
/// streams, per-generation dedup ratio 30 (the defaults), 256 MiB per
/// generation (`quick`: 4 MiB).
pub fn ddfs_params(quick: bool) -> Vec<(String, String)> {
    let bytes = if quick { "4MiB" } else { "256MiB" };
    super::params(&[
        ("generations", "10"),
        ("generation_bytes", bytes),
        ("streams", "4"),
        ("seed", "1"),
    ])
}

/// Runs the study on every workload and writes `partition.csv` and
/// `partition.<plot_ext>` into `out_dir`.
pub fn partition(opts: &ExperimentOptions) -> Result<ExperimentOutput> {
    let ext = plot_format(&opts.plot_ext)?;
    let files_params = FilesParams::for_run(opts.quick);
    let ddfs_params = ddfs_params(opts.quick);
    let mut workloads: Vec<(String, Dataset)> =
        vec![("files".into(), partition::files::generate(&files_params)?)];
    let ddfs = workload::from_name("ddfs", &ddfs_params)?;
    workloads.push(("ddfs".into(), source::load_workload(&*ddfs)?));
    if !opts.traces.is_empty() {
        let ds = source::load_traces(&opts.traces)?;
        if ds.chunks().is_empty() {
            return Err(Error::invalid("partition: the traces hold no chunks"));
        }
        workloads.push(("trace".into(), ds));
    }

    let mut rows = Vec::new();
    let mut datasets = serde_json::Map::new();
    let mut largest = serde_json::Map::new();
    let mut passes = serde_json::Map::new();
    for (name, ds) in &workloads {
        let st = partition::study(ds, &K_VALUES)?;
        rows.extend(study_rows(name, &st));
        datasets.insert(name.clone(), dataset_json(ds, &st));
        largest.insert(name.clone(), largest_json(&st));
        passes.insert(name.clone(), passes_json(&st));
    }

    let mut extra = serde_json::Map::new();
    extra.insert(
        "params".into(),
        json!({
            "files": { "files": files_params.files, "size_scale": files_params.size_scale,
                       "seed": files_params.seed },
            "ddfs": ddfs_params.iter().map(|(k, v)| (k.clone(), Value::from(v.clone())))
                .collect::<serde_json::Map<_, _>>(),
            "traces": opts.traces.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "k_values": K_VALUES,
            "index_entry_bytes": INDEX_ENTRY_BYTES,
            "path_partition_share": PATH_PARTITION_SHARE,
        }),
    );
    extra.insert("datasets".into(), datasets.into());
    extra.insert("largest_partitions".into(), largest.into());
    extra.insert("entries_read_per_pass".into(), passes.into());
    extra.insert(
        "paper_004".into(),
        PAPER_004
            .iter()
            .map(|(d, g, t, p)| json!({ "dataset": d, "global": g, "type": t, "path": p }))
            .collect::<Vec<_>>()
            .into(),
    );
    let csv = tabulate::csv(&rows, &COLUMNS);
    let table = table(&rows);
    let svg = crate::figure::svg(SIZE, |root| draw(&rows, root))?;
    ExperimentOutput::new("partition", rows, extra, csv, table).written(
        &opts.out_dir,
        &ext,
        svg,
        SIZE,
    )
}

/// `a / b`, 1 when both are 0 (nothing to save, nothing lost).
fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        if a == 0.0 {
            1.0
        } else {
            0.0
        }
    } else {
        a / b
    }
}

fn study_rows(workload: &str, st: &Study) -> Vec<Value> {
    let global = st.global.savings();
    let global_entries = st.global.peak_entries();
    let row = |strategy: &str,
               k: Option<(usize, bool)>,
               partitions: usize,
               unique: u64,
               unique_stored: u64,
               passes: usize,
               read: u64,
               peak: u64| {
        let savings = partition::savings(unique, st.logical_bytes);
        json!({
            "workload": workload,
            "strategy": strategy,
            "k": k.map(|(k, _)| k),
            "k_label": match k {
                None => String::new(),
                Some((_, true)) => "all".into(),
                Some((k, false)) => k.to_string(),
            },
            "partitions": partitions,
            "logical_bytes": st.logical_bytes,
            "unique_bytes": unique,
            "savings": savings,
            "savings_vs_global": ratio(savings, global),
            "savings_with_compression": partition::savings(unique_stored, st.logical_bytes),
            "reconcile_passes": passes,
            "index_entries_read": read,
            "peak_index_entries": peak,
            "peak_index_bytes": peak * INDEX_ENTRY_BYTES,
            "peak_vs_global": ratio(peak as f64, global_entries as f64),
        })
    };
    let mut out = vec![row(
        "global",
        None,
        1,
        st.global.unique_bytes(),
        st.global.unique_stored_bytes(),
        0,
        0,
        global_entries,
    )];
    for s in &st.strategies {
        let p = &s.partitioned;
        let n = p.parts.len();
        out.push(row(
            p.strategy.name(),
            None,
            n,
            p.unique_bytes(),
            p.unique_stored_bytes(),
            0,
            0,
            p.peak_entries(),
        ));
        for r in &s.reconciliations {
            out.push(row(
                p.strategy.name(),
                Some((r.k, r.k >= n)),
                n,
                r.unique_bytes,
                r.unique_stored_bytes,
                r.passes.len(),
                r.entries_read(),
                r.peak_index_entries(),
            ));
        }
    }
    out
}

fn dataset_json(ds: &Dataset, st: &Study) -> Value {
    json!({
        "streams": ds.streams().len(),
        "files": st.files,
        "chunks": st.chunks,
        "distinct_chunks": ds.distinct_chunks(),
        "logical_bytes": st.logical_bytes,
        "global_unique_bytes": st.global.unique_bytes(),
        "size_conflicts": st.size_conflicts,
    })
}

/// Up to 5 largest partitions of each strategy, with their savings within.
fn largest_json(st: &Study) -> Value {
    let mut m = serde_json::Map::new();
    for s in &st.strategies {
        let mut parts: Vec<_> = s.partitioned.parts.iter().collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.logical_bytes));
        m.insert(
            s.partitioned.strategy.name().into(),
            parts
                .iter()
                .take(5)
                .map(|p| {
                    json!({
                        "name": p.name,
                        "files": p.files,
                        "logical_bytes": p.logical_bytes,
                        "share": ratio(p.logical_bytes as f64, st.logical_bytes as f64),
                        "savings_within": partition::savings(p.unique_bytes(), p.logical_bytes),
                    })
                })
                .collect::<Vec<_>>()
                .into(),
        );
    }
    m.into()
}

/// Reconciled-index entries streamed by each pass, per strategy and `k`.
fn passes_json(st: &Study) -> Value {
    let mut m = serde_json::Map::new();
    for s in &st.strategies {
        let per_k: serde_json::Map<_, _> = s
            .reconciliations
            .iter()
            .map(|r| {
                (
                    r.k.to_string(),
                    r.passes
                        .iter()
                        .map(|p| p.entries_read)
                        .collect::<Vec<_>>()
                        .into(),
                )
            })
            .collect();
        m.insert(s.partitioned.strategy.name().into(), per_k.into());
    }
    m.into()
}

const COLUMNS: [&str; 15] = [
    "workload",
    "strategy",
    "k",
    "k_label",
    "partitions",
    "logical_bytes",
    "unique_bytes",
    "savings",
    "savings_vs_global",
    "savings_with_compression",
    "reconcile_passes",
    "index_entries_read",
    "peak_index_entries",
    "peak_index_bytes",
    "peak_vs_global",
];

fn table(rows: &[Value]) -> String {
    let head = [
        "workload",
        "strategy",
        "k",
        "partitions",
        "savings",
        "vs global",
        "passes",
        "entries read",
        "peak entries",
        "peak MiB",
        "peak/global",
    ];
    let mut lines: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let reconciled = !r["k"].is_null();
        let dash = |x: String| if reconciled { x } else { "-".into() };
        lines.push(vec![
            s(r, "workload").into(),
            s(r, "strategy").into(),
            if reconciled {
                s(r, "k_label").into()
            } else {
                "-".into()
            },
            u(r, "partitions").to_string(),
            format!("{:.2}%", 100.0 * f(r, "savings")),
            format!("{:.3}", f(r, "savings_vs_global")),
            dash(u(r, "reconcile_passes").to_string()),
            dash(u(r, "index_entries_read").to_string()),
            u(r, "peak_index_entries").to_string(),
            format!("{:.1}", u(r, "peak_index_bytes") as f64 / (1 << 20) as f64),
            format!("{:.3}", f(r, "peak_vs_global")),
        ]);
    }
    let title = format!(
        "partition: partitioned dedup + reconciliation (004), k = - (phase 1 only), {}, all; \
         peak = largest in-memory index ({INDEX_ENTRY_BYTES} bytes/entry); path partitions \
         <= {:.0}% of bytes\n",
        K_VALUES.map(|k| k.to_string()).join(", "),
        100.0 * PATH_PARTITION_SHARE
    );
    tabulate::align(&title, &lines, 2)
}

const SIZE: (u32, u32) = crate::figure::size(3);

const STRATEGIES: [&str; 4] = ["global", "type", "path", "stream"];
const COLORS: [RGBColor; 4] = [
    RGBColor(0x44, 0x44, 0x44),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
];
/// x positions of the `k` labels in the line panels.
const K_LABELS: [&str; 4] = ["1", "2", "4", "all"];

fn color(strategy: &str) -> RGBColor {
    STRATEGIES
        .iter()
        .position(|s| *s == strategy)
        .map_or(BLACK, |i| COLORS[i])
}

fn workloads(rows: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        let w = s(r, "workload");
        if !out.iter().any(|x| x == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// Three panels: phase-1 savings by strategy (with 004's GFS-US), peak
/// in-memory index vs `k` (share of the global index), passes vs `k`.
fn draw(rows: &[Value], root: &Area) -> Drawn {
    let panels = crate::figure::panels(root, "Partitioned dedup and reconciliation", 3)?;
    savings_panel(rows, &panels[0])?;
    k_panel(
        rows,
        &panels[1],
        "peak_vs_global",
        "peak index memory vs one global index",
        false,
    )?;
    k_panel(
        rows,
        &panels[2],
        "reconcile_passes",
        "reconciliation passes",
        true,
    )?;
    root.present()
}

fn savings_panel(rows: &[Value], area: &Area) -> Drawn {
    // Groups: each workload, then 004's GFS-US (no stream bar).
    let mut groups: Vec<(String, Vec<(usize, f64)>)> = workloads(rows)
        .into_iter()
        .map(|w| {
            let bars = STRATEGIES
                .iter()
                .enumerate()
                .filter_map(|(i, st)| {
                    rows.iter()
                        .find(|r| {
                            s(r, "workload") == w && s(r, "strategy") == *st && r["k"].is_null()
                        })
                        .map(|r| (i, f(r, "savings")))
                })
                .collect();
            (w, bars)
        })
        .collect();
    let (name, g, t, p) = PAPER_004[0];
    groups.push((format!("004 {name}"), vec![(0, g), (1, t), (2, p)]));
    let top = groups
        .iter()
        .flat_map(|(_, b)| b.iter().map(|x| x.1))
        .fold(0.0, f64::max)
        .max(0.01)
        * 1.6;
    let n = groups.len();
    let names: Vec<String> = groups.iter().map(|g| g.0.clone()).collect();
    let mut chart = crate::figure::chart(area, "dedup savings before reconciliation")
        .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| crate::figure::category_label(names.as_slice(), *x))
        .disable_y_mesh()
        .y_labels(6)
        .x_desc("workload")
        .y_desc("space saved by dedup")
        .y_label_formatter(&|v| format!("{:.0}%", 100.0 * v))
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    let w = 0.8 / STRATEGIES.len() as f64;
    for (si, st) in STRATEGIES.iter().enumerate() {
        let bars: Vec<(f64, f64)> = groups
            .iter()
            .enumerate()
            .filter_map(|(gi, (_, b))| {
                b.iter()
                    .find(|x| x.0 == si)
                    .map(|x| (gi as f64 + 0.1 + si as f64 * w, x.1))
            })
            .collect();
        let c = COLORS[si];
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, v)| Rectangle::new([(x, 0.0), (x + w * 0.9, v)], c.filled())),
            )?
            .label(partitioned_by(st))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        chart.draw_series(bars.iter().map(|&(x, v)| {
            Text::new(
                format!("{:.0}", 100.0 * v),
                (x + w * 0.45, v),
                T.tick()
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))?;
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Legend words for a partitioning strategy.
fn partitioned_by(strategy: &str) -> String {
    match strategy {
        "global" => "one global index".into(),
        other => format!("partitioned by {other}"),
    }
}

/// One line of a `k` panel: (workload, strategy, points).
type Series = (String, String, Vec<(f64, f64)>);

fn k_panel(rows: &[Value], area: &Area, key: &str, caption: &str, log: bool) -> Drawn {
    let series: Vec<Series> = workloads(rows)
        .into_iter()
        .flat_map(|w| {
            STRATEGIES[1..]
                .iter()
                .map(move |st| (w.clone(), st.to_string()))
        })
        .map(|(w, st)| {
            let pts = rows
                .iter()
                .filter(|r| s(r, "workload") == w && s(r, "strategy") == st && !r["k"].is_null())
                .filter_map(|r| {
                    let x = K_LABELS.iter().position(|l| *l == s(r, "k_label"))?;
                    Some((x as f64, f(r, key)))
                })
                .collect();
            (w, st, pts)
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|x| x.2.iter().map(|p| p.1))
        .fold(1.0, f64::max);
    let ws = workloads(rows);
    let marker = |w: &str| ws.iter().position(|x| x == w).unwrap_or(0);
    let x_range = -0.3f64..K_LABELS.len() as f64 - 0.7;
    let mut b = crate::figure::chart(area, caption);
    // Both panels carry the legend (colour = strategy, marker = workload),
    // upper left, above the lines.
    if log {
        let mut chart = b.build_cartesian_2d(x_range, (0.8f64..top * 30.0).log_scale())?;
        mesh(&mut chart, "passes (log scale)")?;
        lines(&mut chart, &series, &marker)?;
        legend(&mut chart, &ws)
    } else {
        let mut chart = b.build_cartesian_2d(x_range, 0f64..top * 1.45)?;
        mesh(&mut chart, "share of global index")?;
        lines(&mut chart, &series, &marker)?;
        legend(&mut chart, &ws)
    }
}

type Chart<'a, 'b, Y> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>;

fn mesh<Y>(chart: &mut Chart<'_, '_, Y>, y_desc: &str) -> Drawn
where
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_labels(K_LABELS.len() * 2)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < K_LABELS.len() {
                format!("k={}", K_LABELS[i as usize])
            } else {
                String::new()
            }
        })
        .disable_x_mesh()
        .disable_y_mesh()
        .x_desc("k: partitions reconciled per pass")
        .y_desc(y_desc)
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()
}

fn lines<Y>(
    chart: &mut Chart<'_, '_, Y>,
    series: &[Series],
    marker: &dyn Fn(&str) -> usize,
) -> Drawn
where
    Y: Ranged<ValueType = f64>,
{
    for (w, st, pts) in series {
        let c = color(st);
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
        draw_markers(chart, marker(w), pts, c)?;
    }
    Ok(())
}

/// Marker `m` (0 circle, 1 triangle, else cross) at every point.
fn draw_markers<Y>(chart: &mut Chart<'_, '_, Y>, m: usize, pts: &[(f64, f64)], c: RGBColor) -> Drawn
where
    Y: Ranged<ValueType = f64>,
{
    match m {
        0 => chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?,
        1 => chart.draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 5, c.filled())))?,
        _ => chart.draw_series(pts.iter().map(|&p| Cross::new(p, 4, c.stroke_width(2))))?,
    };
    Ok(())
}

/// Legend entries: one line per strategy colour, one marker per workload.
fn legend<'a, 'b: 'a, Y>(chart: &mut Chart<'a, 'b, Y>, workloads: &[String]) -> Drawn
where
    Y: Ranged<ValueType = f64>,
{
    let none = || std::iter::empty::<Circle<(f64, f64), i32>>();
    for st in &STRATEGIES[1..] {
        let c = color(st);
        chart
            .draw_series(none())?
            .label(partitioned_by(st))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    for (i, w) in workloads.iter().enumerate() {
        let anno = chart.draw_series(none())?.label(format!("workload {w}"));
        match i {
            0 => anno.legend(|(x, y)| Circle::new((x + 8, y), 4, BLACK.filled())),
            1 => anno.legend(|(x, y)| TriangleMarker::new((x + 8, y), 5, BLACK.filled())),
            _ => anno.legend(|(x, y)| Cross::new((x + 8, y), 4, BLACK.stroke_width(2))),
        };
    }
    crate::figure::legend(chart, SeriesLabelPosition::UpperLeft)
}
