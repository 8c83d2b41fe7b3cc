//! `cairn forget`, `cairn fastcopy` and `cairn gc` (alias `prune`): removing
//! snapshots and reclaiming the space only they used (docs/gc.md).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::{bail, Result};
use cairn_engine::catalog;
use cairn_engine::forget::{self, GroupBy, Retention};
use cairn_engine::gc::{self, Collector, GcOptions, GcProgress, GcReport, Plan};
use cairn_engine::Repository;
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{Cli, ForgetArgs, GcArgs, GcTuning};
use crate::output::{bytes, parse_size_u64, time};

use cairn_engine::catalog::short_id as short;

fn gc_options(t: &GcTuning, dry_run: bool) -> Result<GcOptions> {
    if !(0.0..=100.0).contains(&t.reclaim) {
        bail!("--reclaim {} is not a percentage (0-100)", t.reclaim);
    }
    if t.max_seconds.is_some_and(|s| !s.is_finite() || s < 0.0) {
        bail!("--max-seconds must be a non-negative number");
    }
    Ok(GcOptions {
        collector: Collector::parse(&t.collector)?,
        reclaim_percent: t.reclaim,
        max_seconds: t.max_seconds,
        memory_bytes: parse_size_u64(&t.memory)?,
        dry_run,
        seed: None,
        wait: t.wait,
        assume_forgotten: Vec::new(),
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
    }
}

/// One collection under the collector lock (backups may run meanwhile:
/// the collection takes the writer lock only for its Merge and Commit).
fn run_gc(cli: &Cli, repo: &Repository, opts: &GcOptions) -> Result<GcReport> {
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

fn print_gc(report: &GcReport) {
    if report.dry_run {
        println!("dry run: nothing copied or deleted");
        return;
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
    if report.stopped_by_time {
        println!("stopped at --max-seconds: the rest is left for the next run");
    }
}

pub fn gc(cli: &Cli, repo: &Repository, a: &GcArgs) -> Result<ExitCode> {
    let opts = gc_options(&a.tuning, a.dry_run)?;
    let report = run_gc(cli, repo, &opts)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !cli.quiet {
        print_gc(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn retention(a: &ForgetArgs) -> Result<Retention> {
    Ok(Retention {
        last: a.keep_last,
        hourly: a.keep_hourly,
        daily: a.keep_daily,
        weekly: a.keep_weekly,
        monthly: a.keep_monthly,
        yearly: a.keep_yearly,
        within_ns: a
            .keep_within
            .as_deref()
            .map(forget::parse_within)
            .transpose()?,
        tags: a.keep_tag.clone(),
    })
}

/// The snapshots `forget` was given by id (or `latest`), each once. An id
/// naming a record that no longer decodes is removed too (with a warning):
/// that is the way out for a damaged record, which otherwise blocks
/// `latest`. Its time is unknown (shown as 0), and it cannot be checked
/// against a filter, so a filter refuses it.
fn named_for_forget(
    repo: &Repository,
    specs: &[String],
    filter: &catalog::SnapshotFilter,
) -> Result<Vec<forget::Decision>> {
    let mut out: Vec<forget::Decision> = Vec::new();
    for spec in specs {
        let (id, time_unix_ns) = match crate::snapshot_args::resolve(repo, spec, filter) {
            Ok(s) => (s.id, s.record.time_unix_ns),
            Err(e) if spec != "latest" && filter.is_empty() && is_corruption(&e) => {
                let id = catalog::match_id(&**repo.backend(), spec)?;
                eprintln!(
                    "cairn: warning: snapshot record {} is unreadable ({e:#}); removing it",
                    short(&id)
                );
                (id, 0)
            }
            Err(e) => return Err(e),
        };
        if !out.iter().any(|d| d.id == id) {
            out.push(forget::Decision {
                id,
                time_unix_ns,
                group: String::new(),
                keep: false,
                reasons: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Whether `e` is the engine's corruption error (a record that does not
/// decode or authenticate).
fn is_corruption(e: &anyhow::Error) -> bool {
    e.downcast_ref::<cairn_core::Error>()
        .is_some_and(|e| e.is_corruption() || e.is_authentication())
}

pub fn forget(cli: &Cli, repo: &Repository, a: &ForgetArgs) -> Result<ExitCode> {
    let policy = retention(a)?;
    let filter = a.filter.filter()?;
    let group_by = GroupBy::parse(&a.group_by)?;
    let gc_opts = a
        .prune
        .then(|| gc_options(&a.tuning, a.dry_run))
        .transpose()?;
    if a.snapshots.is_empty() && policy.is_empty() {
        bail!(
            "give snapshot ids or a policy (--keep-last, --keep-daily, ...): nothing would be kept"
        );
    }
    if !a.snapshots.is_empty() && !policy.is_empty() {
        bail!("give snapshot ids or a policy, not both");
    }
    let lock = repo.lock_writer(a.tuning.wait)?;
    let decisions = if a.snapshots.is_empty() {
        let (all, bad) = catalog::list_filtered(&**repo.backend(), &filter)?;
        for (id, e) in &bad {
            eprintln!(
                "cairn: warning: snapshot {} is unreadable ({e}); the policy leaves it alone",
                short(id)
            );
        }
        forget::plan(&all, &policy, group_by)
    } else {
        named_for_forget(repo, &a.snapshots, &filter)?
    };
    let remove: Vec<String> = decisions
        .iter()
        .filter(|d| !d.keep)
        .map(|d| d.id.clone())
        .collect();
    let tally = forget::tally(repo, &remove)?;
    if !a.dry_run {
        forget::remove(repo, &lock, &remove)?;
    }
    // The collection takes the writer lock itself, for Merge and Commit.
    drop(lock);
    if !cli.json && !cli.quiet {
        let mut group = None;
        for d in &decisions {
            if group != Some(&d.group) && !d.group.is_empty() {
                println!("group {}", d.group);
                group = Some(&d.group);
            }
            println!(
                "  {:6}  {}  {}  {}",
                if d.keep { "keep" } else { "remove" },
                short(&d.id),
                time(d.time_unix_ns),
                d.reasons.join(", ")
            );
        }
        println!(
            "{} snapshots kept, {} {}",
            tally.kept,
            tally.removed,
            if a.dry_run {
                "would be removed"
            } else {
                "removed"
            }
        );
    }
    let pruned = match gc_opts {
        Some(mut opts) => {
            if a.dry_run {
                // Plan as if the removal had happened.
                opts.assume_forgotten = remove.clone();
            }
            // An interrupted collection says what it did; the records
            // removed before it are committed too.
            Some(run_gc(cli, repo, &opts).map_err(
                |e| match e.downcast_ref::<cairn_core::Error>() {
                    Some(cairn_core::Error::Interrupted(what)) if !a.dry_run => {
                        anyhow::Error::new(cairn_core::Error::Interrupted(format!(
                            "{} snapshot record(s) were removed; {what}",
                            remove.len()
                        )))
                    }
                    _ => e,
                },
            )?)
        }
        None => None,
    };
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "dry_run": a.dry_run,
                "decisions": decisions,
                "removed": if a.dry_run { Vec::new() } else { remove },
                "kept_count": tally.kept,
                "removed_count": tally.removed,
                "gc": pruned,
            }))?
        );
    } else if !cli.quiet {
        if let Some(r) = &pruned {
            print_gc(r);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn fastcopy(
    cli: &Cli,
    repo: &Repository,
    spec: &str,
    tags: &[String],
    wait: bool,
    filter: &catalog::SnapshotFilter,
) -> Result<ExitCode> {
    let lock = repo.lock_writer(wait)?;
    let source = crate::snapshot_args::resolve(repo, spec, filter)?;
    let copy = forget::fastcopy(repo, &lock, &source, tags.to_vec())?;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "snapshot_id": copy.id,
                "fastcopy_of": source.id,
            }))?
        );
    } else if !cli.quiet {
        println!(
            "snapshot {} is a fastcopy of {}",
            short(&copy.id),
            short(&source.id)
        );
    }
    Ok(ExitCode::SUCCESS)
}
