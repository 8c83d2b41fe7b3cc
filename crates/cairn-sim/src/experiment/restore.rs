//! `cairn experiment restore`: `002_c5d78fa3332f6f9f.txt` §6 on cairn's
//! engine. Each workload is backed up under Normal (no rewriting) and under
//! Capping, FCRC and LBW with their parameters swept, and under HAR (issue
//! 34: history-aware rewriting, its utilization threshold swept) alone and
//! in front of LBW, and with a collection's re-layout after every backup
//! (issue 34; without rewriting, and behind `lbw:loss=15`); every
//! generation is
//! restored with forward assembly (FAA), ALACC and Belady's bound, all with
//! the same memory. From those runs:
//!
//! - Fig. 6: speed factor (FAA) against dedup ratio as the parameters sweep;
//! - Fig. 7: the mean speed factor of each scheme tuned to the same dedup
//!   ratio reduction (the run closest to 7%, as 002 tunes them), per cache;
//! - Fig. 8: speed factor per backup version of the tuned schemes;
//! - restore time of the last generation per device class: its container
//!   reads priced by the device model (plus an object store of 20 ms per
//!   request and 100 MB/s, an assumption of ours).
//!
//! Workloads: the DDFS generations, the lineage workload, and any traces
//! given (`--trace`, one file per generation: real data traced with `cairn
//! trace` stands in for 002's FSL traces).

use std::sync::Arc;

use cairn_core::Result;
use cairn_engine::config::RewriteConfig;
use cairn_engine::read::{CacheOptions, PolicyKind};
use cairn_engine::{RepoConfig, Repository};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{json, Value};

use super::{plot_format, ExperimentOptions, ExperimentOutput};
use crate::device::{DeviceClass, DeviceModel};
use crate::figure::{Area, Drawn, T};
use crate::sim::{self, GenerationInput, SimOptions, SimReport};
use crate::workload;

/// 002 §6 tunes every scheme to this dedup-ratio reduction.
pub const TARGET_LOSS: f64 = 0.07;

/// One backup configuration of the sweep.
#[derive(Clone, Debug)]
struct Scheme {
    family: &'static str,
    /// The swept parameter's value, as text (empty for Normal).
    param: String,
    rewrite: RewriteConfig,
    /// A collection's re-layout after every backup (issue 34).
    relayout: bool,
}

fn schemes(quick: bool) -> Vec<Scheme> {
    let mut out = vec![Scheme {
        family: "normal",
        param: String::new(),
        rewrite: RewriteConfig::None,
        relayout: false,
    }];
    let caps: &[u32] = if quick { &[1, 4] } else { &[2, 5, 10, 20, 40] };
    let losses: &[u32] = if quick { &[7, 20] } else { &[2, 5, 7, 10, 20] };
    for &cap in caps {
        out.push(Scheme {
            family: "capping",
            param: format!("cap={cap}"),
            rewrite: RewriteConfig::parse(&format!("capping:cap={cap}")).expect("valid"),
            relayout: false,
        });
    }
    for family in ["fcrc", "lbw"] {
        for &loss in losses {
            out.push(Scheme {
                family,
                param: format!("loss={loss}%"),
                rewrite: RewriteConfig::parse(&format!("{family}:loss={loss}")).expect("valid"),
                relayout: false,
            });
        }
    }
    let utilizations: &[u32] = if quick { &[50] } else { &[30, 50, 70] };
    for &u in utilizations {
        out.push(Scheme {
            family: "har",
            param: format!("utilization={u}%"),
            rewrite: RewriteConfig::parse(&format!("har:utilization={u}")).expect("valid"),
            relayout: false,
        });
    }
    for &loss in losses {
        out.push(Scheme {
            family: "har+lbw",
            param: format!("loss={loss}%"),
            rewrite: RewriteConfig::parse(&format!("lbw:loss={loss},har=50")).expect("valid"),
            relayout: false,
        });
    }
    // Re-layout at collection time (issue 34): without rewriting, and
    // behind the product's default rewriting (`lbw:loss=15`).
    out.push(Scheme {
        family: "relayout",
        param: String::new(),
        rewrite: RewriteConfig::None,
        relayout: true,
    });
    out.push(Scheme {
        family: "lbw+relayout",
        param: "loss=15%".into(),
        rewrite: RewriteConfig::parse("lbw:loss=15").expect("valid"),
        relayout: true,
    });
    if quick {
        // Quick workloads are small: segments and windows shrink with them.
        for s in &mut out {
            s.rewrite = match s.rewrite {
                RewriteConfig::Capping { cap, har, .. } => RewriteConfig::Capping {
                    segment_bytes: 2 << 20,
                    cap,
                    har,
                },
                RewriteConfig::Fcrc { cap, loss, har, .. } => RewriteConfig::Fcrc {
                    segment_bytes: 2 << 20,
                    cap: cap.min(4),
                    loss,
                    har,
                },
                RewriteConfig::Lbw {
                    loss,
                    candidate_bytes,
                    har,
                    ..
                } => RewriteConfig::Lbw {
                    window: 4,
                    cap: 4,
                    loss,
                    candidate_bytes,
                    har,
                },
                other @ (RewriteConfig::None | RewriteConfig::Har { .. }) => other,
            };
        }
    }
    out
}

struct Workload {
    name: String,
    inputs: Vec<GenerationInput>,
    config: RepoConfig,
    cache_bytes: u64,
}

fn workloads(opts: &ExperimentOptions) -> Result<Vec<Workload>> {
    let mut config = Repository::default_config();
    let mut cache_bytes = cairn_engine::read::policy::DEFAULT_CACHE_BYTES;
    if opts.quick {
        config.container_size = 512 << 10;
        config.index.expected_chunks = 1 << 16;
        cache_bytes = 4 << 20;
    }
    let generated = |name: &str, params: &[(&str, &str)]| -> Result<Workload> {
        let w: Arc<dyn workload::Workload> =
            Arc::from(workload::from_name(name, &super::params(params))?);
        Ok(Workload {
            name: name.into(),
            inputs: (0..w.generations())
                .map(|generation| GenerationInput::Workload {
                    workload: w.clone(),
                    generation,
                })
                .collect(),
            config: config.clone(),
            cache_bytes,
        })
    };
    let mut out = if opts.quick {
        vec![
            generated(
                "ddfs",
                &[("generations", "6"), ("generation_bytes", "24MiB")],
            )?,
            generated(
                "lineage",
                &[
                    ("generations", "6"),
                    ("lineages", "4"),
                    ("file_size", "fixed:4MiB"),
                ],
            )?,
        ]
    } else {
        vec![
            generated(
                "ddfs",
                &[("generations", "20"), ("generation_bytes", "1GiB")],
            )?,
            generated(
                "lineage",
                &[
                    ("generations", "20"),
                    ("lineages", "8"),
                    ("file_size", "lognormal:32MiB:0.5"),
                ],
            )?,
        ]
    };
    if !opts.traces.is_empty() {
        out.push(Workload {
            name: "trace".into(),
            inputs: opts
                .traces
                .iter()
                .map(|p| GenerationInput::Trace {
                    path: p.clone(),
                    format: None,
                })
                .collect(),
            config,
            cache_bytes,
        });
    }
    Ok(out)
}

/// The caches every generation is restored with: FAA first (Fig. 6-8's),
/// then ALACC and Belady.
const CACHES: [PolicyKind; 3] = [PolicyKind::Faa, PolicyKind::Alacc, PolicyKind::Belady];

/// One run's summary.
#[derive(Clone, Debug)]
struct RunSummary {
    workload: String,
    scheme: Scheme,
    /// Over all generations: logical / raw bytes stored (new + rewritten).
    dedup_ratio: f64,
    /// Per cache: mean speed factor over generations, and per generation.
    per_gen: Vec<[f64; 3]>,
    /// Last generation under FAA: container reads and bytes read.
    last_reads: (u64, u64),
    rewritten: u64,
}

impl RunSummary {
    fn mean(&self, cache: usize) -> f64 {
        let n = self.per_gen.len().max(1) as f64;
        self.per_gen.iter().map(|g| g[cache]).sum::<f64>() / n
    }
}

fn run_one(w: &Workload, scheme: &Scheme) -> Result<(RunSummary, SimReport)> {
    let mut config = w.config.clone();
    config.rewrite = scheme.rewrite;
    let cache = |policy| CacheOptions {
        policy,
        bytes: w.cache_bytes,
    };
    let report = sim::run(
        &w.inputs,
        &SimOptions {
            config,
            device: DeviceModel::for_device(DeviceClass::hdd()),
            restore: true,
            restore_cache: cache(CACHES[0]),
            also_restore: CACHES[1..].iter().map(|&p| cache(p)).collect(),
            relayout: scheme.relayout.then(Default::default),
        },
    )?;
    let (mut logical, mut raw) = (0.0, 0.0);
    let mut per_gen = Vec::new();
    for g in &report.generations {
        logical += g.logical_bytes as f64;
        if g.dedup_ratio > 0.0 {
            raw += g.logical_bytes as f64 / g.dedup_ratio;
        }
        let mut sf = [g.speed_factor, 0.0, 0.0];
        for (i, r) in g.restores.iter().enumerate() {
            sf[i + 1] = r.speed_factor;
        }
        per_gen.push(sf);
    }
    let last = report.generations.last();
    Ok((
        RunSummary {
            workload: w.name.clone(),
            scheme: scheme.clone(),
            dedup_ratio: if raw > 0.0 { logical / raw } else { 0.0 },
            per_gen,
            last_reads: last.map_or((0, 0), |g| (g.containers_read, g.restore_bytes_read)),
            rewritten: report.totals.rewritten_chunks,
        },
        report,
    ))
}

/// Device classes of the restore-time table.
fn devices() -> Vec<DeviceClass> {
    vec![
        DeviceClass::hdd(),
        DeviceClass::ssd(),
        DeviceClass {
            name: "object store".into(),
            access_latency_us: 20_000.0,
            seq_bandwidth_mb_s: 100.0,
        },
    ]
}

pub fn restore(opts: &ExperimentOptions) -> Result<ExperimentOutput> {
    let ext = plot_format(&opts.plot_ext)?;
    let mut rows = Vec::new();
    let mut runs: Vec<RunSummary> = Vec::new();
    for w in workloads(opts)? {
        for scheme in schemes(opts.quick) {
            let (sum, report) = run_one(&w, &scheme)?;
            for (g, row) in report.generations.iter().enumerate() {
                let mut r = json!({
                    "workload": w.name, "scheme": scheme.family, "param": scheme.param,
                    "generation": g + 1, "dedup_ratio": row.dedup_ratio,
                    "rewritten_chunks": row.rewritten_chunks,
                    "containers_read_faa": row.containers_read,
                });
                for (i, c) in CACHES.iter().enumerate() {
                    r[format!("speed_factor_{}", c.name())] = sum.per_gen[g][i].into();
                }
                rows.push(r);
            }
            runs.push(sum);
        }
    }
    let summary = summarize(&runs);
    let mut extra = serde_json::Map::new();
    extra.insert("runs".into(), summary.runs.clone());
    extra.insert("tuned".into(), summary.tuned.clone());
    extra.insert("ordering".into(), summary.ordering.clone());
    extra.insert("devices".into(), summary.devices.clone());
    extra.insert("target_loss".into(), TARGET_LOSS.into());
    let csv = csv(&rows);
    let table = table(&summary);
    let workloads: Vec<String> = dedup_names(&runs);
    let size = crate::figure::size(3 * workloads.len());
    let svg = crate::figure::svg(size, |root| draw(&runs, &summary, root))?;
    ExperimentOutput::new("restore", rows, extra, csv, table).written(
        &opts.out_dir,
        &ext,
        svg,
        size,
    )
}

struct Summary {
    runs: Value,
    /// Per workload, per family: the run tuned to the target loss.
    tuned: Value,
    ordering: Value,
    devices: Value,
    picked: Vec<(String, Vec<usize>)>,
}

fn dedup_names(runs: &[RunSummary]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        if !names.contains(&r.workload) {
            names.push(r.workload.clone());
        }
    }
    names
}

fn summarize(runs: &[RunSummary]) -> Summary {
    let mut all = Vec::new();
    let mut tuned = serde_json::Map::new();
    let mut ordering = serde_json::Map::new();
    let mut devices_out = serde_json::Map::new();
    let mut picked = Vec::new();
    for w in dedup_names(runs) {
        let of: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].workload == w).collect();
        let normal = of
            .iter()
            .copied()
            .find(|&i| runs[i].scheme.family == "normal")
            .expect("normal runs first");
        let base_dr = runs[normal].dedup_ratio;
        let loss = |i: usize| 1.0 - runs[i].dedup_ratio / base_dr.max(1e-12);
        for &i in &of {
            let r = &runs[i];
            all.push(json!({
                "workload": w, "scheme": r.scheme.family, "param": r.scheme.param,
                "rewrite": r.scheme.rewrite.to_string(),
                "dedup_ratio": r.dedup_ratio, "dedup_loss": loss(i),
                "rewritten_chunks": r.rewritten,
                "mean_speed_factor_faa": r.mean(0), "mean_speed_factor_alacc": r.mean(1),
                "mean_speed_factor_belady": r.mean(2),
                "first_speed_factor_faa": r.per_gen.first().map_or(0.0, |g| g[0]),
                "last_speed_factor_faa": r.per_gen.last().map_or(0.0, |g| g[0]),
                "last_speed_factor_alacc": r.per_gen.last().map_or(0.0, |g| g[1]),
            }));
        }
        // Tuned: per family, the run whose loss is closest to the target.
        let mut pick = vec![normal];
        let mut t = serde_json::Map::new();
        for &fam in &FAMILIES[1..] {
            let best = of
                .iter()
                .copied()
                .filter(|&i| runs[i].scheme.family == fam)
                .min_by(|&a, &b| {
                    (loss(a) - TARGET_LOSS)
                        .abs()
                        .total_cmp(&(loss(b) - TARGET_LOSS).abs())
                });
            if let Some(i) = best {
                pick.push(i);
                t.insert(
                    fam.into(),
                    json!({ "param": runs[i].scheme.param, "dedup_loss": loss(i),
                            "mean_speed_factor_faa": runs[i].mean(0),
                            "mean_speed_factor_alacc": runs[i].mean(1) }),
                );
            }
        }
        tuned.insert(w.clone(), Value::Object(t));
        // 002's ordering at equal loss: LBW >= FCRC >= Capping >= Normal.
        let mut o = serde_json::Map::new();
        for (c, name) in [(0, "faa"), (1, "alacc")] {
            // 002's four (HAR's picks follow them in `pick`).
            let means: Vec<f64> = pick.iter().take(4).map(|&i| runs[i].mean(c)).collect();
            let holds = means.windows(2).all(|m| m[1] >= m[0]);
            o.insert(
                name.into(),
                json!({ "holds": holds, "normal_capping_fcrc_lbw": means }),
            );
        }
        ordering.insert(w.clone(), Value::Object(o));
        let mut d = Vec::new();
        for &i in &pick {
            let (reads, bytes) = runs[i].last_reads;
            let mut row = serde_json::Map::new();
            row.insert("scheme".into(), runs[i].scheme.family.into());
            for dev in devices() {
                row.insert(dev.name.clone(), dev.seconds(reads, bytes).into());
            }
            d.push(Value::Object(row));
        }
        devices_out.insert(w.clone(), Value::Array(d));
        picked.push((w, pick));
    }
    Summary {
        runs: Value::Array(all),
        tuned: Value::Object(tuned),
        ordering: Value::Object(ordering),
        devices: Value::Object(devices_out),
        picked,
    }
}

const COLUMNS: [&str; 10] = [
    "workload",
    "scheme",
    "param",
    "generation",
    "dedup_ratio",
    "rewritten_chunks",
    "containers_read_faa",
    "speed_factor_faa",
    "speed_factor_alacc",
    "speed_factor_belady",
];

fn csv(rows: &[Value]) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for r in rows {
        let cells: Vec<String> = COLUMNS
            .iter()
            .map(|c| match &r[*c] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n
                    .as_f64()
                    .filter(|_| n.is_f64())
                    .map_or_else(|| n.to_string(), |f| format!("{f:.6}")),
                other => other.to_string(),
            })
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

fn table(s: &Summary) -> String {
    let mut t = String::from(
        "restore: speed factor (MB per container read) per rewrite scheme and restore cache \
         (002 Fig. 6-8)\n",
    );
    t.push_str(&format!(
        "{:<8} {:<8} {:<10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "workload",
        "scheme",
        "param",
        "dedup",
        "loss",
        "FAA",
        "ALACC",
        "Belady",
        "FAA-1st",
        "FAA-last"
    ));
    for r in s.runs.as_array().into_iter().flatten() {
        t.push_str(&format!(
            "{:<8} {:<8} {:<10} {:>7.2} {:>6.1}% {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}\n",
            r["workload"].as_str().unwrap_or(""),
            r["scheme"].as_str().unwrap_or(""),
            r["param"].as_str().unwrap_or(""),
            r["dedup_ratio"].as_f64().unwrap_or(0.0),
            100.0 * r["dedup_loss"].as_f64().unwrap_or(0.0),
            r["mean_speed_factor_faa"].as_f64().unwrap_or(0.0),
            r["mean_speed_factor_alacc"].as_f64().unwrap_or(0.0),
            r["mean_speed_factor_belady"].as_f64().unwrap_or(0.0),
            r["first_speed_factor_faa"].as_f64().unwrap_or(0.0),
            r["last_speed_factor_faa"].as_f64().unwrap_or(0.0),
        ));
    }
    for (w, o) in s.ordering.as_object().into_iter().flatten() {
        t.push_str(&format!(
            "{w}: tuned to ~{:.0}% loss, LBW >= FCRC >= Capping >= Normal holds under FAA: {}, under ALACC: {}\n",
            TARGET_LOSS * 100.0,
            o["faa"]["holds"],
            o["alacc"]["holds"]
        ));
    }
    t
}

const COLORS: [RGBColor; 8] = [
    RGBColor(0x33, 0x33, 0x33),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x8c, 0x56, 0x4b),
];
const FAMILIES: [&str; 8] = [
    "normal",
    "capping",
    "fcrc",
    "lbw",
    "har",
    "har+lbw",
    "relayout",
    "lbw+relayout",
];
const LABELS: [&str; 8] = [
    "Normal",
    "Capping",
    "FCRC",
    "LBW",
    "HAR",
    "HAR+LBW",
    "GC re-layout",
    "LBW+re-layout",
];

fn color_of(family: &str) -> RGBColor {
    FAMILIES
        .iter()
        .position(|f| *f == family)
        .map_or(BLACK, |i| COLORS[i])
}

/// Three panels per workload, one under the other: Fig. 6, Fig. 7, Fig. 8.
fn draw(runs: &[RunSummary], s: &Summary, root: &Area) -> Drawn {
    let panels = crate::figure::panels(
        root,
        "Restore speed vs rewriting (002 Fig. 6-8)",
        3 * s.picked.len(),
    )?;
    for ((w, pick), p) in s.picked.iter().zip(panels.chunks(3)) {
        let of: Vec<&RunSummary> = runs.iter().filter(|r| &r.workload == w).collect();
        draw_tradeoff(w, &of, &p[0])?;
        draw_bars(w, pick, runs, &p[1])?;
        draw_versions(w, pick, runs, &p[2])?;
    }
    root.present()
}

fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    if lo > hi {
        (0.0, 1.0)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-3);
        (lo - pad, hi + pad)
    }
}

/// Fig. 6: mean speed factor (FAA) against dedup ratio, a line per scheme.
fn draw_tradeoff(w: &str, runs: &[&RunSummary], area: &Area) -> Drawn {
    let (xl, xh) = span(runs.iter().map(|r| r.dedup_ratio));
    let (_, yh) = span(runs.iter().map(|r| r.mean(0)));
    let mut chart = crate::figure::chart(area, &format!("{w}: speed vs dedup (FAA)"))
        .build_cartesian_2d(xl..xh, 0f64..yh * 1.25)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_desc("dedup ratio (logical / stored)")
        .y_desc("mean speed factor (MB/read)")
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    for (k, fam) in FAMILIES.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = runs
            .iter()
            .filter(|r| r.scheme.family == *fam)
            .map(|r| (r.dedup_ratio, r.mean(0)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let c = COLORS[k];
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(LABELS[k])
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::LowerLeft)
}

/// Fig. 7: mean speed factor of the tuned schemes under FAA and ALACC, with
/// Belady's bound for each.
fn draw_bars(w: &str, pick: &[usize], runs: &[RunSummary], area: &Area) -> Drawn {
    let ymax = pick
        .iter()
        .flat_map(|&i| [runs[i].mean(0), runs[i].mean(1), runs[i].mean(2)])
        .fold(0.0f64, f64::max);
    let n = pick.len() as f64;
    let mut chart = crate::figure::chart(area, &format!("{w}: schemes tuned to ~7% loss"))
        .build_cartesian_2d(0f64..2.0 * n + 1.0, 0f64..(ymax * 2.1).max(1e-3))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(0)
        .y_labels(6)
        .x_desc("restore cache (o = Belady's bound)")
        .y_desc("mean speed factor (MB/read)")
        .label_style(T.tick())
        .axis_desc_style(T.axis())
        .draw()?;
    for (name, x) in [("FAA", n / 2.0), ("ALACC", n + 1.0 + n / 2.0)] {
        chart.draw_series(std::iter::once(Text::new(
            name,
            (x, ymax * 1.08),
            T.axis()
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )))?;
    }
    for (cache, base) in [(0usize, 0.0), (1, n + 1.0)] {
        for (k, &i) in pick.iter().enumerate() {
            let c = color_of(runs[i].scheme.family);
            let x = base + k as f64;
            let v = runs[i].mean(cache);
            let bar = chart.draw_series(std::iter::once(Rectangle::new(
                [(x + 0.1, 0.0), (x + 0.9, v)],
                c.filled(),
            )))?;
            if cache == 0 {
                let label = LABELS[FAMILIES
                    .iter()
                    .position(|f| *f == runs[i].scheme.family)
                    .unwrap_or(0)];
                bar.label(label).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled())
                });
            }
            chart.draw_series(std::iter::once(Circle::new(
                (x + 0.5, runs[i].mean(2)),
                4,
                BLACK.stroke_width(1),
            )))?;
        }
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Fig. 8: speed factor (FAA) per backup version of the tuned schemes.
fn draw_versions(w: &str, pick: &[usize], runs: &[RunSummary], area: &Area) -> Drawn {
    let versions = pick
        .iter()
        .map(|&i| runs[i].per_gen.len())
        .max()
        .unwrap_or(1);
    let ymax = pick
        .iter()
        .flat_map(|&i| runs[i].per_gen.iter().map(|g| g[0]))
        .fold(0.0f64, f64::max)
        * 1.1;
    let mut chart = crate::figure::per_version_chart(
        area,
        &format!("{w}: speed per version (FAA)"),
        versions,
        ymax * 1.6,
    )?;
    for &i in pick {
        let c = color_of(runs[i].scheme.family);
        let pts: Vec<(f64, f64)> = runs[i]
            .per_gen
            .iter()
            .enumerate()
            .map(|(g, v)| (g as f64 + 1.0, v[0]))
            .collect();
        let label = LABELS[FAMILIES
            .iter()
            .position(|f| *f == runs[i].scheme.family)
            .unwrap_or(0)];
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    crate::figure::legend(&mut chart, SeriesLabelPosition::UpperRight)
}
