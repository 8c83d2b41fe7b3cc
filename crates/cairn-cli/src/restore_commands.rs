//! `restore` (with `--include`/`--exclude` and `--verify`) and `dump`:
//! parse the selection, run the engine, print (docs/restore-target.md).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use serde_json::json;

use cairn_engine::restore::verify::VerifyReport;
use cairn_engine::restore::{Placed, Reader, RestoreOptions, RestoreSelection};
use cairn_engine::{Progress, Repository};

use crate::args::{Cli, RestoreArgs};
use crate::commands::{read_lock, restore_cache_options};
use crate::output::{bytes, display_name};
use crate::progress::{Display, Unit};

/// The `--include`/`--exclude` flags (and their any-case forms) as one
/// selection; a bad pattern is refused before anything is opened.
fn selection(a: &RestoreArgs) -> Result<RestoreSelection> {
    // A pattern that is not UTF-8 matches the escaped names
    // (`cairn_engine::names`).
    let text = |p: &std::ffi::OsString| cairn_engine::names::os_pattern(p);
    let mut b = RestoreSelection::builder();
    for p in &a.include {
        b.include(&text(p), false)?;
    }
    for p in &a.iinclude {
        b.include(&text(p), true)?;
    }
    for p in &a.exclude {
        b.exclude(&text(p), false)?;
    }
    for p in &a.iexclude {
        b.exclude(&text(p), true)?;
    }
    Ok(b.build()?)
}

pub fn restore(cli: &Cli, repo: &Repository, a: &RestoreArgs) -> Result<ExitCode> {
    let sel = selection(a)?;
    let cache = restore_cache_options(&a.restore_policy, &a.restore_cache)?;
    let opts = RestoreOptions {
        overwrite: a.overwrite.parse()?,
        delete: a.delete,
        dry_run: a.dry_run,
    };
    let target = a.target.as_path();
    let _reading = read_lock(repo)?;
    let snap = crate::snapshot_args::resolve(repo, &a.snapshot, &a.filter.filter()?)?;
    let before = repo.counters.snapshot();
    let started = std::time::Instant::now();
    let mut reader = Reader::open(repo, cache)?;
    let show = !cli.quiet && !cli.json;
    if show && cli.verbose > 0 {
        reader.log_entries(Box::new(|dest, placed| {
            let what = match placed {
                Placed::New => "new",
                Placed::Replaced => "replaced",
                Placed::Skipped => "skipped",
                Placed::NonEmptyDir => return,
            };
            println!("{what:<8} {}", display_name(&dest.to_string_lossy()));
        }));
    }
    let progress = Arc::new(Progress::default());
    let display = Display::start_with(progress.clone(), show, "restore", Unit::Bytes);
    let sum = reader.restore_selected(&snap.record, target, &sel, &opts, &progress);
    drop(display);
    let sum = sum?;
    let secs = started.elapsed().as_secs_f64();
    let c = repo.counters.snapshot().since(&before);
    for e in &sum.errors {
        eprintln!("cairn: error: {e}");
    }
    for w in &sum.warnings {
        eprintln!("cairn: warning: {w}");
    }
    let verified = if a.verify {
        let progress = Arc::new(Progress::default());
        let display = Display::start_with(progress.clone(), show, "verify", Unit::Bytes);
        let v = reader.verify(&snap.record, target, &sel, &progress);
        drop(display);
        let v = v?;
        for m in &v.mismatches {
            eprintln!("cairn: error: verify: {m}");
        }
        Some(v)
    } else {
        None
    };
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "snapshot": snap.id, "target": target, "summary": sum, "seconds": secs,
                "containers_read": c.containers_read, "container_range_reads": c.container_range_reads,
                "container_fetches": sum.policy.container_reads,
                "index_page_reads": c.index_page_reads, "bytes_read": c.bytes_read,
                // 002's speed factor: MB restored per container read, whole or ranged.
                "speed_factor": if sum.policy.container_reads > 0 { sum.bytes as f64 / 1e6 / sum.policy.container_reads as f64 } else { 0.0 },
                "restore_policy": sum.policy.policy, "restore_memory_bytes": sum.policy.peak_memory_bytes,
                "verify": verified, "dry_run": a.dry_run,
            }))?
        );
    } else if !cli.quiet && a.dry_run {
        for line in crate::report::restore::dry_run_lines(&sum, target) {
            println!("{line}");
        }
    } else if !cli.quiet {
        println!(
            "restored {} files, {} dirs, {} symlinks ({}) to {} in {:.2}s; {} containers read",
            sum.files,
            sum.dirs,
            sum.symlinks,
            bytes(sum.bytes),
            target.display(),
            secs,
            sum.policy.container_reads
        );
        if sum.replaced + sum.skipped + sum.deleted > 0 {
            println!(
                "existing entries in the target: {} replaced, {} skipped, {} deleted",
                sum.replaced, sum.skipped, sum.deleted
            );
        }
        if a.stats {
            println!(
                "snapshot {}; restore policy {} ({} memory, peak {}): {} read, {} steps served from memory, {} index page reads",
                cairn_engine::catalog::short_id(&snap.id),
                sum.policy.policy,
                bytes(sum.policy.cache_bytes),
                bytes(sum.policy.peak_memory_bytes),
                bytes(c.bytes_read),
                sum.policy.memory_hits,
                c.index_page_reads
            );
        }
        if let Some(v) = &verified {
            println!(
                "verified {} files ({}): {}",
                v.files,
                bytes(v.bytes),
                if v.mismatches.is_empty() {
                    "all match the snapshot".to_string()
                } else {
                    format!("{} differ", v.mismatches.len())
                }
            );
        }
    }
    verdict(sum.errors.len(), verified.as_ref())
}

/// The exit: an error line if entries failed or files differ.
fn verdict(errors: usize, verified: Option<&VerifyReport>) -> Result<ExitCode> {
    let differ = verified.map_or(0, |v| v.mismatches.len());
    match (errors, differ) {
        (0, 0) => Ok(ExitCode::SUCCESS),
        (e, 0) => Err(anyhow!("{e} entries could not be restored")),
        (0, d) => Err(anyhow!(
            "verify: {d} restored files differ from the snapshot"
        )),
        (e, d) => Err(anyhow!(
            "{e} entries could not be restored; verify: {d} restored files differ from the snapshot"
        )),
    }
}

pub fn dump(
    repo: &Repository,
    snapshot: &str,
    path: Option<&str>,
    filter: &cairn_engine::catalog::SnapshotFilter,
) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let snap = crate::snapshot_args::resolve(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    reader.dump(&snap.record, path.unwrap_or(""), &mut out)?;
    out.flush().context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}
