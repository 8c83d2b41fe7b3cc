//! `cairn gc` (alias `prune`): reclaiming the space no snapshot uses
//! (docs/gc.md); `forget --prune` runs it too.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{bail, Result};
use cairn_engine::gc::{self, Collector, GcOptions, GcProgress, GcReport, Plan};
use cairn_engine::Repository;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::globals::Globals;
use crate::output::bytes;
use crate::values::size_default;

/// How a garbage collection runs (shared by `gc` and `forget --prune`).
#[derive(Args, Debug, Clone)]
pub struct GcTuning {
    /// Collector: lgc (logical), pgc (physical) or pgc+ (physical with a
    /// perfect-hash live vector); see docs/gc.md.
    #[arg(long, default_value_t = Collector::default(), value_parser = crate::values::choice::<Collector>(&Collector::NAMES), help_heading = "Advanced")]
    pub collector: Collector,
    /// Share of the dead space to reclaim, in percent: containers are
    /// cleaned mostly dead first until this much is covered.
    #[arg(long, default_value_t = GcOptions::DEFAULT_RECLAIM_PERCENT, conflicts_with = "max_seconds")]
    pub reclaim: f64,
    /// Stop copying, or waiting for running backups before deleting, after
    /// this many seconds; what is left waits for the next run.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Memory for the mark structures; LGC and PGC clean in two passes
    /// (focused cleaning) and PGC+ falls back to PGC when they do not fit.
    #[arg(long, value_name = "SIZE", default_value = size_default!(GcOptions::DEFAULT_MEMORY_BYTES), value_parser = crate::values::size, help_heading = "Advanced")]
    pub memory: u64,
    /// Wait for a running backup instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    /// Do not re-lay out: by default a collection also cleans the
    /// containers the newest snapshot of each host uses in part and writes
    /// every copy in the newest snapshots' restore order, so that their
    /// restores read fewer containers (at most half again the bytes the
    /// collection copies, at least a quarter of the newest snapshots' size;
    /// docs/restore-speed.md).
    #[arg(long)]
    pub no_relayout: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GcArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    #[command(flatten)]
    pub tuning: GcTuning,
    /// Print the plan; copy and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn gc_options(t: &GcTuning, dry_run: bool) -> Result<GcOptions> {
    if !(0.0..=100.0).contains(&t.reclaim) {
        bail!("--reclaim {} is not a percentage (0-100)", t.reclaim);
    }
    if t.max_seconds.is_some_and(|s| !s.is_finite() || s < 0.0) {
        bail!("--max-seconds must be a non-negative number");
    }
    Ok(GcOptions {
        collector: t.collector,
        reclaim_percent: t.reclaim,
        max_seconds: t.max_seconds,
        memory_bytes: t.memory,
        dry_run,
        seed: None,
        wait: t.wait,
        assume_forgotten: Vec::new(),
        relayout: (!t.no_relayout).then(Default::default),
    })
}

/// A bar per phase on a terminal; the plan on stdout before anything goes.
struct Bars {
    bar: Mutex<Option<ProgressBar>>,
    show_bars: bool,
    print_plan: bool,
}

impl GcProgress for Bars {
    fn phase(&self, name: &str, total: u64) {
        let mut b = self.bar.lock().expect("progress lock");
        if let Some(old) = b.take() {
            old.finish_and_clear();
        }
        if self.show_bars {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {elapsed}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar.set_prefix(name.to_string());
            *b = Some(bar);
        }
    }

    fn advance(&self, n: u64) {
        if let Some(b) = self.bar.lock().expect("progress lock").as_ref() {
            b.inc(n);
        }
    }

    fn plan(&self, p: &Plan) {
        if let Some(old) = self.bar.lock().expect("progress lock").take() {
            old.finish_and_clear();
        }
        if self.print_plan {
            print_plan(p);
        }
    }
}

fn print_plan(p: &Plan) {
    println!(
        "plan ({}): {} snapshots, {} containers, {} on disk, about {} dead",
        p.collector,
        p.snapshots,
        p.containers,
        bytes(p.repository_bytes),
        bytes(p.estimated_dead_bytes)
    );
    if p.selected_containers == 0 {
        println!("  nothing to clean");
    } else {
        println!(
            "  clean {} containers ({}, liveness up to {:.0}%): copy about {} of live chunks, reclaim about {}",
            p.selected_containers,
            bytes(p.selected_bytes),
            p.liveness_threshold * 100.0,
            bytes(p.estimated_live_bytes_to_copy),
            bytes(p.estimated_reclaim_bytes)
        );
        if p.relayout_containers > 0 {
            println!(
                "  {} of them for re-layout: the newest snapshots use them in part",
                p.relayout_containers
            );
        }
    }
}

/// One collection under the collector lock (backups may run meanwhile:
/// the collection takes the writer lock only for its Merge and Commit).
pub fn run_gc(cli: &Globals, repo: &Repository, opts: &GcOptions) -> Result<GcReport> {
    let lock = repo.lock_gc(opts.wait)?;
    let bars = Bars {
        bar: Mutex::new(None),
        show_bars: !cli.quiet && !cli.json && std::io::stderr().is_terminal(),
        print_plan: !cli.quiet && !cli.json,
    };
    let report = gc::collect(repo, &lock, opts, &bars);
    if let Some(b) = bars.bar.lock().expect("progress lock").take() {
        b.finish_and_clear();
    }
    let report = report?;
    if let Some(why) = &report.fell_back {
        eprintln!("cairn: note: using PGC instead of PGC+: {why}");
    }
    for w in &report.warnings {
        eprintln!("cairn: warning: {w}");
    }
    for d in &report.damaged {
        eprintln!(
            "cairn: warning: {d}; the container was left in place (run `cairn check --read-data`)"
        );
    }
    Ok(report)
}

pub fn print_gc(report: &GcReport) {
    if report.dry_run {
        println!("dry run: nothing copied or deleted");
        return;
    }
    if let Some(r) = &report.relayout {
        match &r.skipped {
            Some(why) => println!("re-layout skipped: {why}"),
            None => println!(
                "re-layout: {} chunks written in the order of the newest {} (from {} sparse \
                 containers, {} cleaned for it)",
                r.ordered_chunks,
                if r.head_snapshots == 1 {
                    "snapshot".to_string()
                } else {
                    format!("{} snapshots", r.head_snapshots)
                },
                r.sparse_containers,
                r.chosen_containers
            ),
        }
    }
    if report.containers_deleted == 0 && report.containers_written == 0 {
        return;
    }
    println!(
        "deleted {} containers, wrote {} ({} chunks, {} copied forward); reclaimed {} in {:.2} s{}",
        report.containers_deleted,
        report.containers_written,
        report.copied_chunks,
        bytes(report.copied_bytes),
        bytes(report.reclaimed_bytes.max(0) as u64),
        report.seconds,
        if report.mark_passes > 1 {
            " (two mark passes: focused cleaning)"
        } else {
            ""
        }
    );
    if report.concurrent_snapshots > 0 {
        println!(
            "{} snapshots were committed during the collection; {} chunks they use that it \
             would have deleted were copied",
            report.concurrent_snapshots, report.resurrected_chunks
        );
    }
    if report.unindexed_chunks > 0 {
        println!(
            "{} chunks in the containers it judged were missing from the index it read; \
             each was judged by its own liveness (`cairn check` reports containers the \
             index lacks)",
            report.unindexed_chunks
        );
    }
    if report.condemned_left > 0 {
        println!(
            "stopped at --max-seconds while backups that began before it were running: the {} \
             containers it condemned stay, and the next collection judges them again",
            report.condemned_left
        );
    } else if report.stopped_by_time {
        println!("stopped at --max-seconds: the rest is left for the next run");
    }
}

pub fn gc(cli: &Globals, repo: &Repository, a: &GcArgs) -> Result<ExitCode> {
    let opts = gc_options(&a.tuning, a.dry_run)?;
    let report = run_gc(cli, repo, &opts)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !cli.quiet {
        print_gc(&report);
    }
    Ok(ExitCode::SUCCESS)
}
