//! `cairn-bench deferred`: deferred (post-processing) dedup
//! (`004_62bf1a5ddd5ed253.txt`, duplicates removed by PGC+ of
//! `003_ea5fccc485a97c5d.txt` §3.4) against inline dedup, in the same run.
//!
//! Prepares (or reuses, with `--dir`) the two-generation dataset of
//! [`crate::dataset`] (`--mib`, default 256; gen2 has at least `--dup-pct`,
//! default 90, percent of its bytes in common with gen1), backs gen1 up
//! inline into a base repository (untimed), then `--runs` times (default 3)
//! copies the base repository twice (untimed) and backs gen2 up into one
//! copy inline and into the other deferred, alternating which goes first.
//! After each deferred backup `cairn gc` (PGC+, default options) runs on
//! its repository, timed.
//!
//! Reported, fastest of the runs for each quantity separately: ingest MB/s
//! (gen2 bytes / wall seconds) and CPU seconds (this process, all threads)
//! of each mode and their deferred / inline ratios; the repository's size
//! after each backup and after the collection, the latter relative to the
//! inline repository; the collection's wall and CPU seconds. Sizes do not
//! depend on the run (same data, same code): the last run's are shown.
//! Page cache warm as in `cairn-bench backup`; `sync` before each timed step.

use std::path::Path;

use anyhow::{ensure, Result};
use cairn_engine::gc::{self, GcOptions, GcReport, NoProgress};
use cairn_engine::{BackupOutcome, DedupMode, Repository};
use serde_json::{json, Value};

use crate::backup::{cairn_backup, cairn_backup_with, sources, tags, Streams, Timed};
use crate::common::{copy_tree, mbps, mib, prefault, sync, walk, warm, DatasetOptions, WorkDir};
use crate::dataset::Dataset;

type Options = DatasetOptions;

fn parse(args: &[String]) -> Result<Options> {
    DatasetOptions::parse("deferred", args, 256)
}

/// Bytes of every file under `root`.
fn dir_bytes(root: &Path) -> Result<u64> {
    let mut total = 0;
    walk(root, &mut |_| Ok(()), &mut |p, _| {
        total += p.metadata()?.len();
        Ok(())
    })?;
    Ok(total)
}

/// The one place this benchmark runs a collection (PGC+, defaults).
fn collect_garbage(repo: &Path) -> Result<GcReport> {
    let r = Repository::open_local(repo)?;
    let lock = r.lock_gc(false)?;
    Ok(gc::collect(&r, &lock, &GcOptions::default(), &NoProgress)?)
}

/// Fastest wall time and least CPU time over the runs of one step (taken
/// separately: on a busy machine the two need not come from one run).
#[derive(Default)]
struct Best {
    wall: Option<Timed>,
    cpu: Option<Timed>,
}

impl Best {
    fn add(&mut self, t: Timed) {
        self.wall = Some(t.better(self.wall));
        if self.cpu.is_none_or(|c| t.cpu < c.cpu) {
            self.cpu = Some(t);
        }
    }

    fn wall_s(&self) -> f64 {
        self.wall.expect("at least one run").wall.as_secs_f64()
    }

    fn cpu_s(&self) -> f64 {
        self.cpu.expect("at least one run").cpu.as_secs_f64()
    }

    fn disturbed(&self) -> bool {
        [self.wall, self.cpu].iter().flatten().any(Timed::disturbed)
    }
}

/// One mode's gen2 backup, over the runs.
#[derive(Default)]
struct ModeResult {
    time: Best,
    outcome: Option<BackupOutcome>,
    bytes_after: u64,
}

struct Results {
    base_bytes: u64,
    inline: ModeResult,
    deferred: ModeResult,
    gc: Best,
    gc_report: Option<GcReport>,
    bytes_after_gc: u64,
}

/// One gen2 backup in `mode` on a fresh copy of the base repository; for
/// deferred, the collection after it.
fn one(
    work: &mut WorkDir,
    o: &Options,
    ds: &Dataset,
    base: &Path,
    mode: DedupMode,
    res: &mut Results,
) -> Result<()> {
    let repo = work.scratch(&format!("repo-{mode}"), o.keep)?;
    copy_tree(base, &repo)?;
    sync();
    let tags = tags(ds, 2);
    let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
    let (t, outcome) =
        cairn_backup_with(&repo, sources(&ds.gen_dir(2), Streams::One)?, &tags, mode)?;
    ensure!(
        outcome.record.stats.logical_bytes == ds.gen_bytes[1],
        "cairn backed up {} bytes of gen2, expected {}",
        outcome.record.stats.logical_bytes,
        ds.gen_bytes[1]
    );
    let m = match mode {
        DedupMode::Inline => &mut res.inline,
        DedupMode::Deferred => &mut res.deferred,
    };
    m.time.add(t);
    m.bytes_after = dir_bytes(&repo)?;
    m.outcome = Some(outcome);
    if mode == DedupMode::Deferred {
        sync();
        let (t, report) = Timed::measure(|| collect_garbage(&repo))?;
        res.gc.add(t);
        res.bytes_after_gc = dir_bytes(&repo)?;
        res.gc_report = Some(report);
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<Value> {
    let o = parse(args)?;
    let mut work = WorkDir::new(o.dir.as_deref(), "deferred", o.keep)?;
    let ds = Dataset::prepare(&work.path, o.mib, o.dup_pct)?;
    sync();
    warm(&[&ds.gen_dir(1), &ds.gen_dir(2)])?;
    prefault(&mut work, &[&ds.gen_dir(1)])?;
    let base = work.scratch("repo-gen1", o.keep)?;
    let t1 = tags(&ds, 1);
    let t1: Vec<&str> = t1.iter().map(String::as_str).collect();
    cairn_backup(&base, sources(&ds.gen_dir(1), Streams::One)?, &t1)?;
    let mut res = Results {
        base_bytes: dir_bytes(&base)?,
        inline: ModeResult::default(),
        deferred: ModeResult::default(),
        gc: Best::default(),
        gc_report: None,
        bytes_after_gc: 0,
    };
    for r in 0..o.runs {
        let order = if r % 2 == 0 {
            [DedupMode::Inline, DedupMode::Deferred]
        } else {
            [DedupMode::Deferred, DedupMode::Inline]
        };
        for mode in order {
            one(&mut work, &o, &ds, &base, mode, &mut res)?;
        }
    }
    Ok(report(&o, &ds, &res))
}

fn report(o: &Options, ds: &Dataset, res: &Results) -> Value {
    let bytes = ds.gen_bytes[1];
    let speed = |b: &Best| mbps(bytes, b.wall.expect("at least one run").wall);
    let (inl, def) = (&res.inline, &res.deferred);
    let speed_ratio = speed(&def.time) / speed(&inl.time);
    let cpu_ratio = def.time.cpu_s() / inl.time.cpu_s().max(1e-9);
    let gc_ratio = res.bytes_after_gc as f64 / inl.bytes_after as f64;
    let stats = |m: &ModeResult| m.outcome.as_ref().map(|x| x.record.stats.clone());
    let gcr = res.gc_report.as_ref().expect("at least one run");
    let noisy = [&inl.time, &def.time, &res.gc]
        .iter()
        .any(|b| b.disturbed());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mode_json = |m: &ModeResult| {
        json!({
            "seconds": m.time.wall_s(),
            "cpu_seconds": m.time.cpu_s(),
            "mb_per_s": speed(&m.time),
            "repository_bytes_after": m.bytes_after,
            "stats": serde_json::to_value(stats(m)).unwrap_or(Value::Null),
        })
    };
    let doc = json!({
        "benchmark": "deferred",
        "mib": o.mib,
        "dup_pct": o.dup_pct,
        "runs": o.runs,
        "cpus": cpus,
        "dataset": ds.manifest,
        "gen2_bytes": bytes,
        "repository_bytes_gen1": res.base_bytes,
        "inline": mode_json(inl),
        "deferred": mode_json(def),
        "deferred_over_inline_mb_per_s": speed_ratio,
        "deferred_over_inline_cpu_seconds": cpu_ratio,
        "gc": {
            "seconds": res.gc.wall_s(),
            "cpu_seconds": res.gc.cpu_s(),
            "repository_bytes_after": res.bytes_after_gc,
            "containers_deleted": gcr.containers_deleted,
            "copied_chunks": gcr.copied_chunks,
            "copied_bytes": gcr.copied_bytes,
            "selected_containers": gcr.plan.selected_containers,
            "collector": gcr.collector,
        },
        "after_gc_over_inline_bytes": gc_ratio,
        "disturbed": noisy,
    });
    if o.json {
        println!("{doc:#}");
        return doc;
    }
    println!(
        "deferred: gen1 {} ({} files) backed up inline, then gen2 {} ({} files, >= {}% dup) \
         inline vs deferred on copies; fastest of {} alternated run(s); {cpus} CPUs; page cache warm",
        mib(ds.gen_bytes[0]),
        ds.gen_files[0],
        mib(bytes),
        ds.gen_files[1],
        ds.dup_pct,
        o.runs
    );
    println!(
        "{:<34} {:>9} {:>9} {:>11} {:>14}",
        "gen2 backup", "MB/s", "seconds", "CPU seconds", "repository"
    );
    for (name, m) in [("inline", inl), ("deferred", def)] {
        println!(
            "{name:<34} {:>9.0} {:>9.2} {:>11.2} {:>14}",
            speed(&m.time),
            m.time.wall_s(),
            m.time.cpu_s(),
            mib(m.bytes_after)
        );
    }
    println!(
        "{:<34} {:>9} {:>9.2} {:>11.2} {:>14}",
        "gc (pgc+) of the deferred one",
        "",
        res.gc.wall_s(),
        res.gc.cpu_s(),
        mib(res.bytes_after_gc)
    );
    println!(
        "deferred / inline: ingest MB/s {speed_ratio:.3}x, CPU seconds {cpu_ratio:.3}x; \
         repository after gc / inline {gc_ratio:.4}x (gen1 alone {})",
        mib(res.base_bytes)
    );
    println!(
        "gc: {} container(s) selected, {} deleted, {} chunk(s) ({}) copied",
        gcr.plan.selected_containers,
        gcr.containers_deleted,
        gcr.copied_chunks,
        mib(gcr.copied_bytes)
    );
    for (name, m) in [("inline", inl), ("deferred", def)] {
        if let Some(out) = &m.outcome {
            let (s, c) = (&out.record.stats, &out.counters);
            println!(
                "{name}: {} chunks, {} new ({} raw -> {} stored); {} cache probes, {} bloom tests, \
                 {} index page reads, {} prefetches",
                s.chunks,
                s.new_chunks,
                mib(s.new_raw_bytes),
                mib(s.new_stored_bytes),
                c.cache_probes,
                c.bloom_tests,
                c.index_page_reads,
                c.prefetches
            );
        }
    }
    if noisy {
        println!(
            "WARNING: other processes used CPU during timed steps; wall-time ratios are \
             disturbed, prefer the CPU-second ratio"
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
        let o = parse(&args(&["--mib", "8", "--runs", "1", "--json"])).unwrap();
        assert_eq!((o.mib, o.dup_pct, o.runs, o.json), (8, 90, 1, true));
        assert!(parse(&args(&["--dup-pct", "100"])).is_err());
        assert!(parse(&args(&["--bogus"])).is_err());
    }

    /// A small run: deferred stores about the whole generation, and the
    /// collection brings the repository back near the inline one.
    #[test]
    fn small_run_collects_the_duplicates() {
        let dir = std::env::temp_dir().join(format!("cairn-bench-df-{}", std::process::id()));
        let doc = run(&args(&[
            "--mib",
            "8",
            "--runs",
            "1",
            "--dir",
            dir.to_str().unwrap(),
            "--json",
        ]))
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let inline = doc["inline"]["repository_bytes_after"].as_u64().unwrap();
        let deferred = doc["deferred"]["repository_bytes_after"].as_u64().unwrap();
        let gen1 = doc["repository_bytes_gen1"].as_u64().unwrap();
        assert!(deferred - gen1 > (inline - gen1) * 3, "{doc}");
        let r = doc["after_gc_over_inline_bytes"].as_f64().unwrap();
        assert!((0.9..1.1).contains(&r), "{doc}");
    }
}
