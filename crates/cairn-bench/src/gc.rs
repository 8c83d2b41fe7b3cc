//! `cairn-bench gc`: deleting old backups, cairn's `forget` + `gc` against
//! `restic forget --prune`, on the same data in the same run.
//!
//! The collectors measured are those of paper `003_ea5fccc485a97c5d.txt`
//! (LGC §3.1, PGC §3.2, PGC+ §3.4, as built in `docs/gc.md`); restic is the
//! external baseline. Steps:
//!
//! 1. A file tree of `--mib` MiB ([`crate::dataset::Evolving`]) is changed
//!    in place `--generations` - 1 times (each file changed with probability
//!    `--change-pct`%: rewritten, partly overwritten or replaced by a new
//!    file), and every generation is backed up into one fresh cairn
//!    repository and one fresh restic repository (same path and host every
//!    time, so both tools group the snapshots together). The newest
//!    generation alone is also backed up into a fresh repository of each
//!    tool: the size a perfect collection would reach.
//! 2. `--runs` times, alternating the order, on a fresh copy of each
//!    repository (untimed `sync` first): `cairn forget --keep-last 1` then
//!    `cairn gc --json --collector C` for each of `--collectors`, and
//!    `restic forget --keep-last 1 --prune --max-unused 0` (restic also
//!    repacks every pack holding unused data, so both reclaim everything they
//!    can). Each tool runs as a child process measured like `memory`: wall
//!    time, the child's own CPU time and peak RSS (`wait4`), and the CPU
//!    time other processes took meanwhile. Repository bytes are walked
//!    before and after.
//! 3. After the first run of each, untimed: `cairn check --read-data` /
//!    `restic check --read-data`, one snapshot left, and a restore of it
//!    compared byte for byte with the tree. Any failure fails the benchmark.
//!
//! Reports the fastest wall time, the least CPU time and the least peak RSS
//! over the runs, bytes reclaimed, the final size over the fresh backup's,
//! and cairn's ratios to restic. restic's repository is encrypted and
//! compressed (format 2, zstd `auto`); cairn's is compressed but not
//! encrypted: the output says so. When restic is not on `PATH`, `apt-get
//! install -y restic` is tried (unless `--no-install`); if that fails the
//! comparison is skipped with a message and cairn is measured alone.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, ensure, Result};
use serde_json::{json, Value};

use crate::common::{copy_tree, disturbed, mib, remove, sync, value, WorkDir};
use crate::dataset::{Evolving, GenChange};
use crate::memory::find_cairn;

mod tools;
use tools::{check_restore, find_restic, Cairn, Cost, Restic, Size};

const ENCRYPTION_NOTE: &str = "restic's repository is encrypted (AES-256 + Poly1305) and \
    compressed (zstd, mode auto); cairn's is compressed (zstd) but not encrypted yet";

struct Options {
    mib: u64,
    generations: u64,
    change_pct: u64,
    runs: usize,
    collectors: Vec<String>,
    max_unused: String,
    cairn: Option<PathBuf>,
    restic: Option<PathBuf>,
    install: bool,
    dir: Option<PathBuf>,
    keep: bool,
    json: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        mib: 512,
        generations: 8,
        change_pct: 20,
        runs: 3,
        collectors: vec!["pgc+".into(), "pgc".into(), "lgc".into()],
        max_unused: "0".into(),
        cairn: None,
        restic: None,
        install: true,
        dir: None,
        keep: false,
        json: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mib" => o.mib = value(&mut it, a)?,
            "--generations" => o.generations = value(&mut it, a)?,
            "--change-pct" => o.change_pct = value(&mut it, a)?,
            "--runs" => o.runs = value(&mut it, a)?,
            "--collectors" => {
                let v: String = value(&mut it, a)?;
                o.collectors = v.split(',').map(|s| s.trim().to_string()).collect();
            }
            "--max-unused" => o.max_unused = value(&mut it, a)?,
            "--cairn" => o.cairn = Some(value(&mut it, a)?),
            "--restic" => o.restic = Some(value(&mut it, a)?),
            "--no-install" => o.install = false,
            "--dir" => o.dir = Some(value(&mut it, a)?),
            "--keep" => o.keep = true,
            "--json" => o.json = true,
            other => bail!("gc: unknown option {other:?}"),
        }
    }
    ensure!(o.mib > 0 && o.runs > 0, "--mib and --runs must be positive");
    ensure!(
        o.generations >= 2,
        "--generations must be at least 2 (one to forget, one to keep)"
    );
    ensure!(
        (1..=100).contains(&o.change_pct),
        "--change-pct must be 1..100"
    );
    for c in &o.collectors {
        ensure!(
            ["lgc", "pgc", "pgc+"].contains(&c.as_str()),
            "--collectors: {c:?} is not one of lgc, pgc, pgc+"
        );
    }
    ensure!(!o.collectors.is_empty(), "--collectors is empty");
    Ok(o)
}

/// One way of collecting: a cairn collector or restic.
#[derive(Clone, Debug, PartialEq)]
enum Variant {
    Cairn(String),
    Restic,
}

impl Variant {
    fn name(&self) -> String {
        match self {
            Variant::Cairn(c) => format!("cairn forget + gc --collector {c}"),
            Variant::Restic => "restic forget --prune".into(),
        }
    }
}

/// The runs of one variant.
struct Measured {
    variant: Variant,
    runs: Vec<Cost>,
    /// Repository size after each run.
    afters: Vec<Size>,
    before: Size,
    /// Repository size after the fastest run.
    after: Size,
    fresh: Size,
    /// cairn's gc report of the fastest run.
    report: Value,
}

impl Measured {
    fn best_wall(&self) -> Duration {
        self.runs.iter().map(|c| c.wall).min().unwrap_or_default()
    }
    fn best_cpu(&self) -> Duration {
        self.runs.iter().map(|c| c.cpu).min().unwrap_or_default()
    }
    fn best_peak(&self) -> u64 {
        self.runs.iter().map(|c| c.peak).min().unwrap_or_default()
    }
    fn over_fresh(&self) -> f64 {
        self.after.total as f64 / self.fresh.total.max(1) as f64
    }
    fn data_over_fresh(&self) -> f64 {
        self.after.data as f64 / self.fresh.data.max(1) as f64
    }
    fn disturbed(&self) -> bool {
        self.runs.iter().any(|c| disturbed(c.others, c.wall))
    }
}

/// Backups of every generation (single runs, reported for context).
struct Backups {
    cairn: Vec<Cost>,
    restic: Vec<Cost>,
}

pub fn run(args: &[String]) -> Result<Value> {
    let o = parse(args)?;
    let cairn = Cairn {
        bin: find_cairn(o.cairn.as_deref())?,
    };
    let found = find_restic(o.restic.as_deref(), o.install);
    if let Err(why) = &found {
        eprintln!("cairn-bench: restic is unavailable ({why}); measuring cairn alone");
    }
    let restic = found.as_ref().ok();
    let mut work = WorkDir::new(o.dir.as_deref(), "gc", o.keep)?;
    let keep = o.keep;
    let repo_c = work.scratch("gc-cairn", keep)?;
    let repo_r = work.scratch("gc-restic", keep)?;
    let fresh_c = work.scratch("gc-cairn-fresh", keep)?;
    let fresh_r = work.scratch("gc-restic-fresh", keep)?;
    let tree_dir = work.scratch("gc-tree", keep)?;

    // 1. Generations, each backed up into both repositories (order
    //    alternated so neither tool always finds the cache as the other
    //    left it).
    let mut tree = Evolving::create(&tree_dir, o.mib)?;
    let mut changes: Vec<GenChange> = Vec::new();
    let mut backups = Backups {
        cairn: Vec::new(),
        restic: Vec::new(),
    };
    for g in 0..o.generations {
        if g > 0 {
            changes.push(tree.next_generation(o.change_pct)?);
        }
        for step in 0..2 {
            sync();
            match (step + g) % 2 {
                0 => backups.cairn.push(cairn.backup(&repo_c, &tree)?),
                _ => {
                    if let Some(r) = restic {
                        backups.restic.push(r.backup(&repo_r, &tree)?);
                    }
                }
            }
        }
    }
    sync();
    cairn.backup(&fresh_c, &tree)?;
    let fresh = [
        Size::of(&fresh_c, false)?,
        match restic {
            Some(r) => {
                r.backup(&fresh_r, &tree)?;
                Size::of(&fresh_r, true)?
            }
            None => Size::default(),
        },
    ];
    let before = [
        Size::of(&repo_c, false)?,
        if restic.is_some() {
            Size::of(&repo_r, true)?
        } else {
            Size::default()
        },
    ];

    // 2. Collections on fresh copies, order reversed every other run.
    let mut variants: Vec<Variant> = o.collectors.iter().cloned().map(Variant::Cairn).collect();
    if restic.is_some() {
        variants.push(Variant::Restic);
    }
    let mut measured: Vec<Measured> = variants
        .iter()
        .map(|v| {
            let i = usize::from(*v == Variant::Restic);
            Measured {
                variant: v.clone(),
                runs: Vec::new(),
                afters: Vec::new(),
                before: before[i],
                after: Size::default(),
                fresh: fresh[i],
                report: Value::Null,
            }
        })
        .collect();
    let forgotten = o.generations - 1;
    for run in 0..o.runs {
        let mut order: Vec<usize> = (0..measured.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let m = &mut measured[i];
            let copy = work.scratch("gc-run", false)?;
            let src = if m.variant == Variant::Restic {
                &repo_r
            } else {
                &repo_c
            };
            copy_tree(src, &copy)?;
            sync();
            let (cost, report) = match (&m.variant, restic) {
                (Variant::Cairn(c), _) => cairn.collect(&copy, c, forgotten)?,
                (Variant::Restic, Some(r)) => (r.collect(&copy, &o.max_unused)?, Value::Null),
                (Variant::Restic, None) => unreachable!("restic runs only when present"),
            };
            // Not the same to the byte in every run (restic's compressed
            // index holds random ids): the fastest run's is reported.
            let after = Size::of(&copy, m.variant == Variant::Restic)?;
            if m.runs.iter().all(|c| cost.wall < c.wall) {
                m.report = report;
                m.after = after;
            }
            m.afters.push(after);
            m.runs.push(cost);
            // 3. Untimed checks, once per variant.
            if run == 0 {
                let what = m.variant.name();
                match (&m.variant, restic) {
                    (Variant::Restic, Some(r)) => {
                        r.check(&copy)?;
                        check_restore(&mut work, &tree, &what, |t| r.restore(&copy, t))?;
                    }
                    _ => {
                        cairn.check(&copy)?;
                        check_restore(&mut work, &tree, &what, |t| cairn.restore(&copy, t))?;
                    }
                }
            }
            remove(&copy)?;
        }
    }
    let restic_info = match &found {
        Ok(r) => json!({
            "binary": r.bin,
            "version": r.version,
            "init": ["init", "--repository-version", "2"],
            "collect": Restic::forget_args(&o.max_unused),
            "global": ["--no-cache"],
        }),
        Err(why) => json!({ "unavailable": why }),
    };
    Ok(report(
        &o,
        &cairn,
        restic_info,
        &tree,
        &changes,
        &backups,
        &measured,
    ))
}

fn sum(costs: &[Cost]) -> Cost {
    costs.iter().fold(Cost::default(), |a, c| a.then(*c))
}

fn report(
    o: &Options,
    cairn: &Cairn,
    restic: Value,
    tree: &Evolving,
    changes: &[GenChange],
    backups: &Backups,
    measured: &[Measured],
) -> Value {
    let mibf = |b: u64| b as f64 / (1u64 << 20) as f64;
    let restic_m = measured.iter().find(|m| m.variant == Variant::Restic);
    let ratio = |a: f64, b: f64| if b > 0.0 { Some(a / b) } else { None };
    let ratios = |m: &Measured| {
        restic_m.map(|r| {
            json!({
                "seconds": ratio(m.best_wall().as_secs_f64(), r.best_wall().as_secs_f64()),
                "cpu_seconds": ratio(m.best_cpu().as_secs_f64(), r.best_cpu().as_secs_f64()),
                "peak_rss": ratio(m.best_peak() as f64, r.best_peak() as f64),
                "final_bytes": ratio(m.after.total as f64, r.after.total as f64),
                "final_data_bytes": ratio(m.after.data as f64, r.after.data as f64),
                "final_over_fresh": ratio(m.over_fresh(), r.over_fresh()),
            })
        })
    };
    let noisy = measured.iter().any(Measured::disturbed);
    let results: Vec<Value> = measured
        .iter()
        .map(|m| {
            json!({
                "name": m.variant.name(),
                "tool": if m.variant == Variant::Restic { "restic" } else { "cairn" },
                "collector": match &m.variant { Variant::Cairn(c) => c.as_str(), Variant::Restic => "restic" },
                "best_seconds": m.best_wall().as_secs_f64(),
                "best_cpu_seconds": m.best_cpu().as_secs_f64(),
                "least_peak_rss_bytes": m.best_peak(),
                "runs": m.runs.iter().zip(&m.afters).map(|(c, a)| {
                    let mut v = c.json();
                    v["after"] = a.json();
                    v
                }).collect::<Vec<_>>(),
                "before": m.before.json(),
                "after": m.after.json(),
                "reclaimed_bytes": m.before.total as i64 - m.after.total as i64,
                "fresh_backup": m.fresh.json(),
                "after_over_fresh": m.over_fresh(),
                "data_after_over_fresh": m.data_over_fresh(),
                "disturbed": m.disturbed(),
                "ratio_to_restic": ratios(m),
                "gc_report": m.report,
            })
        })
        .collect();
    let backup_json = |c: &[Cost]| {
        json!({
            "generations": c.iter().map(Cost::json).collect::<Vec<_>>(),
            "total": sum(c).json(),
        })
    };
    let doc = json!({
        "benchmark": "gc",
        "mib": o.mib,
        "generations": o.generations,
        "change_pct": o.change_pct,
        "runs": o.runs,
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "tree": { "bytes": tree.bytes(), "files": tree.files() },
        "changes": changes.iter().map(|c| json!({
            "rewritten_files": c.rewritten_files, "rewritten_bytes": c.rewritten_bytes,
            "overwritten_regions": c.overwritten_regions, "overwritten_bytes": c.overwritten_bytes,
            "deleted_files": c.deleted_files, "deleted_bytes": c.deleted_bytes,
            "new_files": c.new_files, "new_bytes": c.new_bytes,
        })).collect::<Vec<_>>(),
        "cairn_binary": cairn.bin,
        "restic": restic,
        "encryption": ENCRYPTION_NOTE,
        "backups": { "cairn": backup_json(&backups.cairn), "restic": backup_json(&backups.restic) },
        "results": results,
        "checks": if restic_m.is_some() {
            "cairn check --read-data / restic check --read-data, one snapshot left, \
             restore compared with the tree: passed"
        } else {
            "cairn check --read-data, one snapshot left, restore compared with the tree: passed"
        },
        "disturbed": noisy,
    });
    if o.json {
        println!("{doc:#}");
        return doc;
    }
    let changed: u64 = changes
        .iter()
        .map(|c| c.rewritten_bytes + c.overwritten_bytes + c.new_bytes)
        .sum();
    println!(
        "gc: {} generations of a {} tree ({} files), {}% of files changed per generation \
         ({} of new data over all generations); keep the newest, collect the rest",
        o.generations,
        mib(tree.bytes()),
        tree.files(),
        o.change_pct,
        mib(changed)
    );
    match &restic_m {
        Some(_) => println!(
            "restic: {} ({}, --no-cache, repository version 2; each collection on a fresh copy \
             of the repository)",
            doc["restic"]["version"].as_str().unwrap_or("?"),
            Restic::forget_args(&o.max_unused).join(" ")
        ),
        None => println!(
            "restic: UNAVAILABLE ({}): cairn measured alone, no ratios",
            doc["restic"]["unavailable"].as_str().unwrap_or("?")
        ),
    }
    println!("{ENCRYPTION_NOTE}");
    let line = |tool: &str, c: Cost| {
        format!(
            "{tool} {:.2} s / {:.2} CPU-s / {:.1} MiB peak",
            c.wall.as_secs_f64(),
            c.cpu.as_secs_f64(),
            mibf(c.peak)
        )
    };
    let mut spent = vec![line("cairn", sum(&backups.cairn))];
    if restic_m.is_some() {
        spent.push(line("restic", sum(&backups.restic)));
    }
    println!(
        "backups of all generations (one run each, context only): {}",
        spent.join("; ")
    );
    println!(
        "best of {} run(s), alternated; time/CPU/peak are each the least over the runs",
        o.runs
    );
    println!(
        "{:<36} {:>8} {:>8} {:>9} {:>10} {:>10} {:>10} {:>8} {:>9} {:>7}",
        "collection",
        "seconds",
        "CPU s",
        "peak MiB",
        "before MiB",
        "after MiB",
        "fresh MiB",
        "/fresh",
        "data/fresh",
        "others"
    );
    for m in measured {
        let others = m.runs.iter().map(|c| c.others).max().unwrap_or_default();
        println!(
            "{:<36} {:>8.2} {:>8.2} {:>9.1} {:>10.1} {:>10.1} {:>10.1} {:>7.3}x {:>8.3}x {:>6.2}s",
            m.variant.name(),
            m.best_wall().as_secs_f64(),
            m.best_cpu().as_secs_f64(),
            mibf(m.best_peak()),
            mibf(m.before.total),
            mibf(m.after.total),
            mibf(m.fresh.total),
            m.over_fresh(),
            m.data_over_fresh(),
            others.as_secs_f64()
        );
    }
    if restic_m.is_some() {
        println!("cairn / restic:");
        for m in measured.iter().filter(|m| m.variant != Variant::Restic) {
            let r = ratios(m).unwrap_or(Value::Null);
            let f = |k: &str| r[k].as_f64().map_or("-".into(), |x| format!("{x:.3}x"));
            println!(
                "  {:<8} time {}, CPU {}, peak RSS {}, final size {} (data alone {}), final/fresh {}",
                match &m.variant {
                    Variant::Cairn(c) => c.as_str(),
                    Variant::Restic => "restic",
                },
                f("seconds"),
                f("cpu_seconds"),
                f("peak_rss"),
                f("final_bytes"),
                f("final_data_bytes"),
                f("final_over_fresh")
            );
        }
    }
    for m in measured.iter().filter(|m| !m.report.is_null()) {
        let g = &m.report;
        let phases: Vec<String> = g["phases"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|p| {
                format!(
                    "{} {:.2}",
                    p["name"].as_str().unwrap_or("?"),
                    p["seconds"].as_f64().unwrap_or(0.0)
                )
            })
            .collect();
        println!(
            "cairn gc {} (fastest run): {} containers cleaned into {}, {} of live chunks copied; \
             mark memory {:.1} bits/fingerprint of {} fingerprints; phases (s): {}",
            g["collector"].as_str().unwrap_or("?"),
            g["containers_deleted"],
            g["containers_written"],
            mib(g["copied_bytes"].as_u64().unwrap_or(0)),
            g["memory"]["bits_per_fingerprint"].as_f64().unwrap_or(0.0),
            g["memory"]["fingerprints"],
            phases.join(", ")
        );
    }
    println!(
        "checks after collection: {}",
        doc["checks"].as_str().unwrap_or("")
    );
    if noisy {
        println!(
            "WARNING: other processes used CPU during timed steps (column `others`, the most of \
             any run): wall times are disturbed, compare CPU seconds"
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::args;

    #[test]
    fn options_parse() {
        let o = parse(&args(&["--collectors", "pgc+,lgc", "--generations", "3"])).unwrap();
        assert_eq!(o.collectors, ["pgc+", "lgc"]);
        assert_eq!((o.generations, o.runs, o.mib), (3, 3, 512));
        assert!(parse(&args(&["--collectors", "mark-sweep"])).is_err());
        assert!(parse(&args(&["--generations", "1"])).is_err());
        assert!(parse(&args(&["--change-pct", "0"])).is_err());
    }
}
