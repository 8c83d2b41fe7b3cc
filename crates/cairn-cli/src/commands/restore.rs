//! `cairn restore` (with `--include`/`--exclude`, `--verify` and restic's
//! `ID:subfolder`): parse the selection, run the engine, print
//! (docs/restore-target.md, docs/restore-select.md).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use cairn_engine::catalog::SnapshotInfo;
use cairn_engine::read::Reader;
use cairn_engine::restore::verify::VerifyReport;
use cairn_engine::restore::{EntryLogFn, Overwrite, Placed, RestoreOptions, RestoreSelection};
use cairn_engine::{Progress, Repository};

use crate::globals::Globals;
use crate::output::{bytes, display_name};
use crate::progress::{Display, Unit};
use crate::repo_open::read_lock;
use crate::restore_cache::RestoreCacheArgs;
use crate::snapshot_args::{position, resolve_at, FilterArgs};

#[derive(Args, Debug)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`;
    /// `ID:SUBFOLDER` restores the folder's contents directly into the
    /// target (a file: as TARGET/NAME), patterns then relative to it.
    pub snapshot: String,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Directory to restore into (created if missing).
    #[arg(short, long)]
    pub target: PathBuf,
    /// Restore only entries matching PATTERN (repeatable), with the
    /// directories leading to them; a matching directory with all below it.
    /// Patterns as for `backup --exclude`, matched against the snapshot path
    /// with or without a leading `/` (`tree/docs`, `/tree/docs`); an
    /// anchored pattern also matches the path the entry was backed up from.
    /// See docs/restore-select.md.
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<OsString>,
    /// As --include, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iinclude: Vec<OsString>,
    /// Leave out entries matching PATTERN (repeatable), with all below them.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<OsString>,
    /// As --exclude, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iexclude: Vec<OsString>,
    /// After restoring, read back every restored regular file and compare
    /// its content (by fingerprint, at the snapshot's chunk boundaries),
    /// size, mode and mtime with the snapshot; each mismatch is reported and
    /// the exit is non-zero.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify: bool,
    /// Decide everything a restore would (selection, --overwrite, --delete)
    /// and report what it would write, replace, skip and delete; change
    /// nothing in the target.
    #[arg(long)]
    pub dry_run: bool,
    /// Also print the restore policy's figures: memory, peak, bytes read,
    /// steps served from memory, index page reads (all in --json too).
    #[arg(long)]
    pub stats: bool,
    /// Entries already in the target where the snapshot has one: `always`
    /// replaces files, symlinks and empty directories (a non-empty
    /// directory only with --delete; otherwise it is reported as an error
    /// and kept); `if-changed` is `always` but keeps a file whose size
    /// and mtime match; `if-newer` is `always` but keeps an entry whose
    /// mtime is not older than the snapshot's; `never` keeps every existing
    /// entry (counted as skipped) and still descends into existing
    /// directories.
    #[arg(long, default_value_t = Overwrite::default(), value_parser = crate::values::choice::<Overwrite>(&Overwrite::NAMES))]
    pub overwrite: Overwrite,
    /// Also remove entries of the restored directories that the snapshot
    /// does not have (a full restore: of the whole target), and allow
    /// replacing a non-empty directory by a file or symlink. Removes only
    /// entries inside the target; symlinks are removed, never followed.
    /// Directories restored only to reach --include matches are not pruned.
    #[arg(long)]
    pub delete: bool,
    /// The restore policy and its memory (last: the heading it sets
    /// would carry on to any option after it).
    #[command(flatten, next_help_heading = "Advanced")]
    pub cache: RestoreCacheArgs,
}

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

pub fn restore(cli: &Globals, repo: &Repository, a: &RestoreArgs) -> Result<ExitCode> {
    let sel = selection(a)?;
    let cache = a.cache.options();
    let opts = RestoreOptions {
        overwrite: a.overwrite,
        delete: a.delete,
        dry_run: a.dry_run,
    };
    let target = a.target.as_path();
    let _reading = read_lock(repo)?;
    let (snap, sub) = resolve_at(repo, &a.snapshot, &a.filter.filter()?)?;
    let before = repo.counters.snapshot();
    let started = std::time::Instant::now();
    let mut reader = Reader::open(repo, cache)?;
    let sel = match &sub {
        None => sel,
        Some(sub) => sel.within(&subfolder(&mut reader, &snap, sub)?),
    };
    let show = !cli.quiet && !cli.json;
    let mut print_entry = |dest: &Path, placed: &Placed| {
        let what = match placed {
            Placed::New => "new",
            Placed::Replaced => "replaced",
            Placed::Skipped => "skipped",
            Placed::NonEmptyDir => return,
        };
        println!("{what:<8} {}", display_name(&dest.to_string_lossy()));
    };
    let log: Option<&mut EntryLogFn> = (show && cli.verbose > 0).then_some(&mut print_entry);
    let progress = Arc::new(Progress::default());
    let display = Display::start_with(progress.clone(), show, "restore", Unit::Bytes);
    let sum = reader.restore_logged(&snap.record, target, &sel, &opts, &progress, log);
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
                "snapshot": snap.id, "subfolder": sub, "target": target, "summary": sum, "seconds": secs,
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

/// The snapshot path that `ID:sub`'s `sub` (either path form) names in
/// `snap`; one error line naming both when it is not there, before the
/// target is touched.
fn subfolder(reader: &mut Reader, snap: &SnapshotInfo, sub: &str) -> Result<String> {
    let path = position(reader, snap, Some(sub), None)?;
    match reader.find(&snap.record, &path) {
        Ok(_) => Ok(path),
        Err(cairn_core::Error::NotFound(_)) => Err(anyhow!(
            "{sub}: not in snapshot {}",
            cairn_engine::catalog::short_id(&snap.id)
        )),
        Err(e) => Err(e.into()),
    }
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
