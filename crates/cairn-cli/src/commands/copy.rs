//! `cairn copy --to REPO` and `cairn init --copy-identity-from REPO`
//! (docs/copy.md): snapshots moved between repositories of one identity,
//! only the chunks the destination lacks, e.g. a local repository to S3 or
//! an off-site copy kept current. The destination's password comes from
//! `--to-password-file`, `CAIRN_TO_PASSWORD` or `CAIRN_TO_PASSWORD_COMMAND`;
//! an identity source's from `--from-password-file`, `CAIRN_FROM_PASSWORD`
//! or `CAIRN_FROM_PASSWORD_COMMAND`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde_json::json;

use cairn_crypto::password::process_env;
use cairn_crypto::{resolve_other_password, Password, PromptMode};
use cairn_engine::catalog::{self, SnapshotInfo};
use cairn_engine::copy::{self, CopyOptions, CopyWatch, Identity};
use cairn_engine::{Progress, RepoConfig, Repository};

use crate::globals::Globals;
use crate::output::bytes;
use crate::progress::{Display, Unit};
use crate::repo_open;
use crate::snapshot_args::{resolve_all, FilterArgs};

#[derive(Args, Debug)]
pub struct CopyArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot ids, unique prefixes or `latest` (default: every snapshot
    /// the filter lets through).
    pub snapshots: Vec<String>,
    /// The destination: a directory or an S3 location, as for --repo,
    /// holding a repository made by `init --from-repo SRC
    /// --copy-chunker-params` (or one of the same identity).
    #[arg(long, value_name = "REPO")]
    pub to: PathBuf,
    /// Read the destination's password from the first line of PATH
    /// (otherwise CAIRN_TO_PASSWORD, CAIRN_TO_PASSWORD_COMMAND or the terminal).
    #[arg(long, env = "CAIRN_TO_PASSWORD_FILE", value_name = "PATH")]
    pub to_password_file: Option<PathBuf>,
    /// Walk and look up only: report what would be copied, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Wait for another writer on the destination instead of failing.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `init --copy-identity-from`: the repository whose identity a new one takes.
#[derive(Args, Debug, Clone, Default)]
pub struct IdentityArgs {
    /// Create the repository with the chunker, fingerprint and tree settings
    /// of REPO (and, if REPO is encrypted, its master key wrapped under the
    /// new password), so that `cairn copy` moves chunks between the two as
    /// stored and both deduplicate alike.
    #[arg(long, value_name = "REPO")]
    pub copy_identity_from: Option<PathBuf>,
    /// Read the password of --copy-identity-from's repository from the first
    /// line of PATH (otherwise CAIRN_FROM_PASSWORD, CAIRN_FROM_PASSWORD_COMMAND
    /// or the terminal).
    #[arg(long, env = "CAIRN_FROM_PASSWORD_FILE", value_name = "PATH")]
    pub from_password_file: Option<PathBuf>,
    /// restic's spelling of --copy-identity-from REPO, taken with
    /// --copy-chunker-params: the same chunker (and, encrypted, the same
    /// master key under the new repository's own password).
    #[arg(
        long,
        value_name = "REPO",
        conflicts_with = "copy_identity_from",
        requires = "copy_chunker_params"
    )]
    pub from_repo: Option<PathBuf>,
    /// With --from-repo: copy its chunker parameters (restic's flag; see
    /// --copy-identity-from for what is shared).
    #[arg(long, requires = "from_repo")]
    pub copy_chunker_params: bool,
}

impl IdentityArgs {
    /// The repository whose identity the new one takes, under either
    /// spelling.
    pub fn source(&self) -> Option<&Path> {
        self.copy_identity_from
            .as_deref()
            .or(self.from_repo.as_deref())
    }
}

fn to_password(a: &CopyArgs, mode: PromptMode) -> cairn_core::Result<Password> {
    resolve_other_password(
        a.to_password_file.as_deref(),
        "--to-password-file",
        "CAIRN_TO_PASSWORD",
        &process_env,
        mode,
        "destination repository",
    )
}

/// `src`'s config with a fresh id: a repository of the same identity.
fn same_identity_config(src: &Repository, mut base: RepoConfig) -> RepoConfig {
    base.chunker = src.config.chunker;
    base.fingerprint = src.config.fingerprint;
    base.fingerprint_width = src.config.fingerprint_width;
    base.tree = src.config.tree.clone();
    base
}

/// `cairn copy`.
pub fn copy(cli: &Globals, src_path: &Path, a: &CopyArgs) -> Result<ExitCode> {
    crate::repo_location::refuse_url(&a.to)?;
    let src = repo_open::open_repository(cli, src_path)?;
    // No surprise repositories: the destination is created by `init`,
    // with the source's chunker (and key) so the two deduplicate alike.
    if !crate::repo_location::has_config(&a.to, cli.s3())? {
        bail!(
            "{} holds no repository: create it first with `cairn init --repo {} \
             --from-repo {} --copy-chunker-params` (its own password, the source's \
             chunking), then copy again",
            a.to.display(),
            a.to.display(),
            src_path.display()
        );
    }
    let dest = repo_open::open_at(cli, &a.to, false, &mut || to_password(a, PromptMode::Once))?;
    if src.config.id == dest.config.id && src.backend().describe() == dest.backend().describe() {
        bail!("the source and the destination are the same repository");
    }
    if let Identity::SameFingerprints(what) = copy::identity(&src, &dest)? {
        eprintln!(
            "cairn: warning: the destination's {what} differs from the source's: the copy is \
             sound, but later backups into the destination will share little with the copied data"
        );
    }
    let _read = src.lock_reader(a.wait)?;
    let write = dest.lock_writer(a.wait)?;
    let filter = a.filter.filter()?;
    let selected: Vec<SnapshotInfo> = if a.snapshots.is_empty() {
        let (good, bad) = catalog::list_filtered(&**src.backend(), &filter)?;
        for (id, e) in &bad {
            eprintln!(
                "cairn: warning: snapshot {} unreadable, not copied: {e}",
                catalog::short_id(id)
            );
        }
        good
    } else {
        resolve_all(&src, &a.snapshots, &filter)?
    };
    let quiet = cli.quiet || cli.json;
    // On a terminal a bar (snapshots done of those to copy, stored bytes
    // moved, the snapshot at hand); elsewhere one line per snapshot.
    let progress = Arc::new(Progress::default());
    let verb = if a.dry_run { "checking" } else { "copy" };
    let display = Display::start_with(progress.clone(), !quiet, verb, Unit::Items);
    let lines = !quiet && !display.active();
    let on_snapshot = |s: &SnapshotInfo| {
        if lines {
            eprintln!(
                "{} snapshot {} of {} ({})",
                if a.dry_run { "checking" } else { "copying" },
                catalog::short_id(&s.id),
                crate::local_time::human_time(s.record.time_unix_ns),
                crate::output::display_name(&s.record.host),
            );
        }
    };
    let report = copy::copy(
        &src,
        &_read,
        &dest,
        &write,
        &selected,
        CopyOptions { dry_run: a.dry_run },
        CopyWatch {
            on_snapshot: &on_snapshot,
            progress: &progress,
        },
    );
    drop(display);
    let report = report?;
    for n in &report.notices {
        eprintln!("cairn: warning: destination: {n}");
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&json!(report))?);
        return Ok(ExitCode::SUCCESS);
    }
    if cli.quiet {
        return Ok(ExitCode::SUCCESS);
    }
    let copied = report.snapshots.iter().filter(|s| !s.skipped).count();
    let skipped = report.snapshots.len() - copied;
    for s in &report.snapshots {
        if s.skipped {
            println!(
                "snapshot {} of {}: already in the destination",
                catalog::short_id(&s.id),
                crate::local_time::human_time(s.time_unix_ns)
            );
        } else {
            println!(
                "snapshot {} of {}: {} {} chunks ({})",
                catalog::short_id(&s.id),
                crate::local_time::human_time(s.time_unix_ns),
                if a.dry_run { "would copy" } else { "copied" },
                s.chunks,
                bytes(s.stored_bytes)
            );
        }
    }
    println!(
        "{} {copied} snapshot(s) ({skipped} already there): {} of the {} chunks reached, {} \
         stored; {} containers read, {} written",
        if a.dry_run { "would copy" } else { "copied" },
        report.chunks_copied,
        report.chunks_reached,
        bytes(report.stored_bytes_copied),
        report.containers_read,
        report.containers_written
    );
    Ok(ExitCode::SUCCESS)
}

/// `init --copy-identity-from SRC`: the init flags' settings, `SRC`'s
/// identity. Identity flags given on the command line are refused (they
/// would do nothing); so is an encryption choice `SRC` rules out.
pub fn init_with_identity(
    cli: &Globals,
    path: &Path,
    config: RepoConfig,
    encryption_args: &repo_open::EncryptionArgs,
    identity: &IdentityArgs,
) -> Result<Repository> {
    let from = identity
        .source()
        .ok_or_else(|| anyhow!("no --copy-identity-from given"))?;
    crate::repo_location::refuse_url(from)?;
    const IDENTITY_FLAGS: [&str; 5] =
        ["chunker", "avg_size", "min_size", "max_size", "fingerprint"];
    if let Some(flag) = cli
        .given_init_flags
        .iter()
        .find(|f| IDENTITY_FLAGS.contains(&f.as_str()))
    {
        bail!(
            "--{} cannot be combined with --copy-identity-from: the chunking and \
             fingerprints are the source repository's",
            flag.replace('_', "-")
        );
    }
    let mut src_password: Option<Password> = None;
    let src = repo_open::open_at(cli, from, false, &mut || {
        let p = resolve_other_password(
            identity.from_password_file.as_deref(),
            "--from-password-file",
            "CAIRN_FROM_PASSWORD",
            &process_env,
            PromptMode::Once,
            "source repository",
        )?;
        src_password = Some(p.clone());
        Ok(p)
    })?;
    let given_encryption = cli.given_init_flags.iter().any(|f| f == "encryption");
    let algorithm = match (src.keys().is_some(), encryption_args.encryption.algorithm()) {
        (true, None) => bail!(
            "{} is encrypted: a repository sharing its identity shares its key and is \
             encrypted too (drop --encryption none)",
            from.display()
        ),
        (true, Some(algorithm)) => Some(algorithm),
        (false, None) => None,
        (false, _) if given_encryption => bail!(
            "{} is not encrypted: a repository sharing its identity fingerprints chunks \
             unkeyed and cannot be encrypted (drop --encryption)",
            from.display()
        ),
        (false, _) => None,
    };
    let config = same_identity_config(&src, config);
    repo_open::init_sharing_identity(
        cli,
        path,
        config,
        (&src, src_password.as_ref()),
        algorithm,
        &mut || repo_open::new_repository_password(cli),
        &encryption_args.kdf,
    )
}
