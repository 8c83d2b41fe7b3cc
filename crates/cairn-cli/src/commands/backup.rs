//! `cairn backup`: back up paths or standard input into a new snapshot,
//! creating the repository if there is none.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;

use cairn_engine::{
    BackupOptions, DedupMode, ParentChoice, Progress, RepoConfig, Repository, Source,
};

use crate::globals::Globals;
use crate::output::{display_name, time};
use crate::progress::{estimate_backup, Display};
use crate::repo_config::{
    config_from, new_repository, refuse_differing_init_flags, resolve_auto, InitArgs,
};

#[derive(Args, Debug)]
pub struct BackupArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Files and directories to back up.
    pub paths: Vec<PathBuf>,
    /// Also print the internal figures: chunks, lookups (cache hits, Bloom
    /// filter negatives, index page reads), index memory and seconds per
    /// pipeline phase (all in --json too).
    #[arg(long)]
    pub stats: bool,
    /// Back up standard input as one file.
    #[arg(long)]
    pub stdin: bool,
    /// File name for --stdin.
    #[arg(long, default_value = "stdin", requires = "stdin")]
    pub stdin_name: String,
    /// Compare files with this snapshot (id prefix or `latest`) instead of
    /// the latest snapshot of the same host and paths: a file whose size,
    /// mtime, ctime and inode are unchanged keeps its stored content unread.
    /// Never applies to --stdin.
    #[arg(long, conflicts_with = "force")]
    pub parent: Option<String>,
    /// Read every file, even those unchanged since the parent snapshot.
    #[arg(long)]
    pub force: bool,
    /// Tag the snapshot (repeatable or comma-separated).
    #[arg(long = "tag", value_delimiter = ',')]
    pub tags: Vec<String>,
    /// Host name recorded in the snapshot.
    #[arg(long)]
    pub host: Option<String>,
    /// Wait for another writer to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// When duplicates are removed: inline (at ingest, against everything
    /// stored) or deferred (every chunk is stored now, a chunk repeated
    /// within this backup once; the next `cairn gc` removes the older
    /// copies). See docs/deferred-dedup.md.
    #[arg(long, default_value_t = DedupMode::default(), value_parser = crate::values::choice::<DedupMode>(&DedupMode::NAMES), help_heading = "Advanced")]
    pub dedup: DedupMode,
    #[command(flatten)]
    pub select: crate::backup_select::SelectArgs,
    /// Only walk and report what would be backed up and what is left out;
    /// no repository is opened or created, nothing is written.
    #[arg(long, conflicts_with = "stdin")]
    pub dry_run: bool,
    /// Create the repository if there is none at --repo (with the options
    /// under "Repository creation"); without it, a missing repository is
    /// an error, so a mistyped path never becomes a new repository.
    #[arg(long = "init")]
    pub create_repository: bool,
    /// Settings of a repository this backup creates (--init).
    #[command(flatten, next_help_heading = "Repository creation (with --init)")]
    pub init: InitArgs,
    /// Encryption of a repository this backup creates (--init).
    #[command(flatten, next_help_heading = "Repository creation (with --init)")]
    pub encryption: crate::repo_open::EncryptionArgs,
}

/// The argument ids of the options that only shape a new repository
/// (`--rewrite` is not one: on an existing repository it is that backup's
/// scheme).
const CREATION_OPTIONS: &[&str] = &[
    "chunker",
    "avg_size",
    "min_size",
    "max_size",
    "fingerprint",
    "compression",
    "zstd_level",
    "min_savings",
    "container_size",
    "index",
    "encryption",
    "kdf_memory_kib",
    "kdf_passes",
];

/// Refuses, before any password is asked, a backup into a location that
/// holds no repository unless `--init` asks for one (a mistyped path must
/// not become a new repository), and creation options given for an
/// existing repository (they would do nothing).
fn refuse_surprise_repository(cli: &Globals, path: &Path, a: &BackupArgs) -> Result<()> {
    let given = CREATION_OPTIONS
        .iter()
        .find(|id| cli.given_init_flags.iter().any(|g| g == *id));
    let s3 = matches!(
        crate::repo_location::parse(path, cli.s3())?,
        crate::repo_location::RepoLocation::S3(_)
    );
    if s3 && given.is_none() {
        // On object storage `open_or_create` refuses a missing repository
        // from the open's own read of the config, a request fewer.
        return Ok(());
    }
    let exists = crate::repo_location::has_config(path, cli.s3())?;
    if !exists && !a.create_repository {
        bail!(no_repository(path));
    }
    if let (true, Some(id)) = (exists, given) {
        bail!(
            "--{} only applies when a repository is created, and {} already holds one; drop it",
            id.replace('_', "-"),
            path.display()
        );
    }
    Ok(())
}

fn no_repository(path: &Path) -> String {
    format!(
        "no repository at {}: create one with `cairn init --repo {}`, or add --init to this backup",
        path.display(),
        path.display()
    )
}

/// Opens the repository at `path`, or creates it with `config()` and
/// `encryption` if there is none and `may_create`. Of two processes
/// creating it at once, one wins and the other opens what it created.
fn open_or_create(
    cli: &Globals,
    path: &Path,
    may_create: bool,
    config: impl FnOnce() -> Result<RepoConfig>,
    encryption: &crate::repo_open::EncryptionArgs,
) -> Result<(Repository, bool)> {
    let exists = || crate::repo_location::has_config(path, cli.s3());
    if let crate::repo_location::RepoLocation::S3(_) = crate::repo_location::parse(path, cli.s3())?
    {
        // On object storage, asking first costs two round trips more than
        // opening and finding no config.
        match crate::repo_open::open_repository(cli, path) {
            Err(e)
                if matches!(
                    e.downcast_ref::<cairn_core::Error>(),
                    Some(cairn_core::Error::NotARepository(_))
                ) =>
            {
                if !may_create {
                    bail!(no_repository(path));
                }
            }
            opened => return Ok((opened?, false)),
        }
    } else if exists()? {
        return Ok((crate::repo_open::open_repository(cli, path)?, false));
    }
    match crate::repo_open::init_repository(cli, path, config()?, encryption) {
        Ok(repo) => Ok((repo, true)),
        Err(e) => {
            // A concurrent creator writes its key file, then its config: give
            // it a moment before reporting what we found.
            for _ in 0..250 {
                if exists().unwrap_or(false) {
                    return Ok((crate::repo_open::open_repository(cli, path)?, false));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e)
        }
    }
}

pub fn run(cli: &Globals, path: &Path, a: &BackupArgs) -> Result<ExitCode> {
    // Positional paths and --files-from lines are treated alike.
    let paths = crate::backup_select::paths(&a.paths, &a.select)?;
    if paths.is_empty() && !a.stdin {
        bail!("nothing to back up: give one or more paths, --files-from, or --stdin");
    }
    let mut sources: Vec<Source> = paths.iter().map(|p| Source::Path(p.clone())).collect();
    if a.stdin {
        sources.push(Source::Stdin {
            name: a.stdin_name.clone(),
        });
    }
    // Validated before anything is created, so bad flags or missing sources
    // never leave a repository behind.
    let cfg = new_repository(config_from(&a.init)?);
    let dedup = a.dedup;
    let selection = crate::backup_select::selection(&a.select)?;
    cairn_engine::backup::check_sources(&sources)?;
    if let (Some(id), false) = (&a.parent, a.dry_run) {
        // Refused before `open_or_init` would create the repository.
        let absent = match crate::repo_location::parse(path, cli.s3())? {
            crate::repo_location::RepoLocation::Local(path) => {
                Repository::open_local(path).is_err() && !crate::repo_open::is_encrypted_at(path)
            }
            crate::repo_location::RepoLocation::S3(_) => {
                !crate::repo_location::has_config(path, cli.s3())?
            }
        };
        if absent {
            bail!(
                "--parent {id}: there is no repository at {} yet, so no snapshot to compare with",
                path.display()
            );
        }
    }
    if !a.stdin {
        // Through directory handles: a source may be longer than PATH_MAX.
        let mut dirs = cairn_engine::long_path::Dirs::new();
        let errors: Vec<_> = paths.iter().map(|p| dirs.lstat(p).err()).collect();
        if let Some((p, Some(e))) = paths
            .iter()
            .zip(errors.iter())
            .find(|(_, e)| e.is_some())
            .filter(|_| errors.iter().all(|e| e.is_some()))
        {
            bail!("nothing to back up: cannot read {}: {e}", p.display());
        }
    }
    if a.dry_run {
        return crate::backup_select::dry_run(cli, path, &sources, selection);
    }
    refuse_surprise_repository(cli, path, a)?;
    let given = cfg.clone();
    let cfg_rewrite = a.init.rewrite.is_some().then_some(cfg.rewrite);
    // A backup into a path without a repository creates one, encrypted
    // unless `--encryption none`, as `init` would.
    let (repo, created) = open_or_create(
        cli,
        path,
        a.create_repository,
        || resolve_auto(cli, cfg, &a.init),
        &a.encryption,
    )?;
    if created && !cli.quiet && !cli.json {
        eprintln!("created cairn repository at {}", path.display());
    }
    if !created {
        refuse_differing_init_flags(&cli.given_init_flags, &given, &repo.config)?;
    }
    // Given on an existing repository: this backup's bound on its
    // in-memory index part, which acts only on a backup holding the
    // repository alone (`dedup::part_budget`): such a backup takes the
    // writer lock alone.
    let part_budget = a.init.index_part_budget.filter(|_| !created);
    if part_budget.is_some() && repo.config.index.kind != cairn_engine::config::IndexKind::Paged {
        bail!(
            "--index-part-budget bounds the paged index's in-memory part; \
             this repository uses the frugal index, which has none"
        );
    }
    // Shared with other backups (docs/concurrency.md). The time it takes
    // (a wait for a writer alone included) is in `--json` as `lock_seconds`.
    let lock_started = std::time::Instant::now();
    let lock = match part_budget {
        Some(_) => repo.lock_writer(a.wait)?,
        None => repo.lock_backup(a.wait)?,
    };
    let lock_seconds = lock_started.elapsed().as_secs_f64();
    let progress = Arc::new(Progress::default());
    let display = Display::start(progress.clone(), !cli.quiet && !cli.json, "backup");
    if display.active() && !a.stdin {
        estimate_backup(
            paths.clone(),
            selection.clone(),
            path.to_path_buf(),
            progress.clone(),
        );
    }
    let outcome = cairn_engine::backup(
        &repo,
        &lock,
        BackupOptions {
            sources,
            tags: a.tags.iter().filter(|t| !t.is_empty()).cloned().collect(),
            host: a.host.clone(),
            progress,
            // Given on an existing repository: this backup's scheme.
            rewrite_scheme: (!created).then_some(cfg_rewrite).flatten(),
            dedup,
            selection,
            parent: match (&a.parent, a.force) {
                (_, true) => ParentChoice::None,
                (Some(id), false) => ParentChoice::Id(id.clone()),
                (None, false) => ParentChoice::Latest,
            },
            entry_log: crate::report::backup::entry_log(cli.verbose, cli.quiet || cli.json),
            index_part_budget: part_budget,
            ..Default::default()
        },
    );
    drop(display);
    if outcome.is_ok() {
        // Saves the next backups reading each record written since the
        // last summary; derived data, so a failure is a warning.
        if let Err(e) = repo.refresh_snapshot_summary() {
            eprintln!("cairn: warning: the snapshot summary was not written ({e})");
        }
    }
    drop(lock);
    let outcome = outcome?;
    // Backups that ran beside others added index deltas only and removed
    // no temporaries: the first to find itself alone afterwards does both.
    // The snapshot is committed either way, so a failure here is a warning.
    if let Err(e) = cairn_engine::compact::compact_after_backup(&repo, outcome.deltas_after_commit)
    {
        eprintln!("cairn: warning: the index was not compacted ({e}); the next backup tries again");
    }
    for s in &outcome.skipped {
        eprintln!("cairn: warning: skipped {s}");
    }
    for n in &outcome.notices {
        eprintln!("cairn: note: {n}");
    }
    for p in &outcome.changed_while_read {
        eprintln!(
            "cairn: warning: {}: changed while it was read; the snapshot holds what was read",
            display_name(p)
        );
    }
    let st = &outcome.record.stats;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "id": outcome.snapshot_id,
                "time": time(outcome.record.time_unix_ns),
                "paths": outcome.record.paths,
                "tags": outcome.record.tags,
                "dedup": dedup.name(),
                "stats": st,
                "skipped": outcome.skipped,
                "excluded": outcome.excluded.len(),
                "excluded_paths": outcome.excluded,
                "changed_while_read": outcome.changed_while_read.len(),
                "changed_while_read_paths": outcome.changed_while_read,
                "phases": outcome.phases,
                "index_ram_bytes_per_chunk": outcome.index_ram_bytes_per_chunk,
                "replayed_containers": outcome.replayed_containers,
                "concurrent_duplicates": outcome.concurrent_duplicates,
                "lock_seconds": lock_seconds,
            }))?
        );
    } else if !cli.quiet {
        crate::output::print_backup(&outcome, dedup, a.stats);
    }
    if outcome.skipped.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "cairn: error: {} path(s) could not be read; the snapshot holds everything else",
            outcome.skipped.len()
        );
        Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE))
    }
}
