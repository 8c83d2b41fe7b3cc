//! Encrypted repositories on the command line (docs/security.md, issue 13):
//! opening any repository with a password (resolved only when it is
//! encrypted), `init --encryption`, and `cairn key list|add|remove|passwd`.
//!
//! New repositories are encrypted unless `--encryption none` (or
//! `CAIRN_ENCRYPTION=none`) says otherwise, whether `init` or a first
//! `backup` creates them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use cairn_backend::LocalBackend;
use cairn_core::{Backend, LockMode};
use cairn_crypto::password::process_env;
use cairn_crypto::{
    resolve_password, Algorithm, KdfParams, KeyFile, Password, PasswordSource, PromptMode,
};
use cairn_engine::crypto::{self, StoredConfig};
use cairn_engine::key_admin;
use cairn_engine::{RepoConfig, Repository};

use crate::args::Cli;
use crate::output::time;
use crate::repo_location::{self, RepoLocation};

/// How long the key derivation of a new key file takes on this machine.
const KDF_TARGET: Duration = Duration::from_millis(500);

/// The encryption options of a new repository (`init`, and a `backup`
/// that creates one).
#[derive(Args, Debug, Clone)]
pub struct EncryptionArgs {
    /// Encryption of a new repository: aes-256-gcm, chacha20poly1305 or
    /// none (a clear repository: only for scratch data on a trusted disk).
    #[arg(
        long,
        env = "CAIRN_ENCRYPTION",
        default_value = "aes-256-gcm",
        value_name = "ALGORITHM"
    )]
    pub encryption: String,
    #[command(flatten)]
    pub kdf: KdfArgs,
}

/// Overrides of the Argon2id parameters tuned for a new key file.
#[derive(Args, Debug, Clone)]
pub struct KdfArgs {
    /// Argon2id memory of a new key file in KiB (default: 64 MiB).
    #[arg(long, env = "CAIRN_KDF_MEMORY_KIB", value_name = "N")]
    pub kdf_memory_kib: Option<u32>,
    /// Argon2id passes of a new key file (default: as many as take about 0.5 s here).
    #[arg(long, env = "CAIRN_KDF_PASSES", value_name = "N")]
    pub kdf_passes: Option<u32>,
}

impl KdfArgs {
    /// The parameters of a new key file: tuned to about 0.5 s on this
    /// machine, except where overridden.
    pub fn params(&self) -> Result<KdfParams> {
        let params = match (self.kdf_memory_kib, self.kdf_passes) {
            (memory, Some(t_cost)) => KdfParams {
                m_cost_kib: memory.unwrap_or(KdfParams::TUNE_MEMORY_KIB),
                t_cost,
                p_cost: 1,
            },
            (Some(memory), None) => KdfParams::tune_with_memory(memory, KDF_TARGET)?,
            (None, None) => KdfParams::tune(KDF_TARGET)?,
        };
        params.validate()?;
        Ok(params)
    }
}

/// Where the new password of `key add|passwd` comes from.
#[derive(Args, Debug, Clone)]
pub struct NewKeyArgs {
    /// Read the new password from the first line of PATH (otherwise it is
    /// asked for twice on the terminal).
    #[arg(long, value_name = "PATH")]
    pub new_password_file: Option<PathBuf>,
    #[command(flatten)]
    pub kdf: KdfArgs,
    /// Wait for another writer to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
}

/// `cairn key`: the key files of an encrypted repository.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// List the key files (the one the password opened is marked `*`).
    List,
    /// Add a key file: a new password for the same repository.
    Add(NewKeyArgs),
    /// Remove a key file (its id, or a unique prefix); the last one never
    /// is, and the one the password in use opened only with --force.
    Remove {
        id: String,
        /// Remove the key file even if it is the one the password in use
        /// opened (that password then stops working).
        #[arg(long)]
        force: bool,
        /// Wait for another writer to finish instead of failing.
        #[arg(long)]
        wait: bool,
    },
    /// Change the password of a key file (default: the one the current
    /// password opens); the old password stops working.
    Passwd {
        /// Key id or a unique prefix.
        id: Option<String>,
        #[command(flatten)]
        new: NewKeyArgs,
    },
}

/// The repository password from `--password-file`, `CAIRN_PASSWORD`,
/// `CAIRN_PASSWORD_COMMAND` or the terminal.
fn password(cli: &Cli, mode: PromptMode) -> cairn_core::Result<Password> {
    // Set to the empty string, CAIRN_PASSWORD_FILE counts as unset, as the
    // other password variables do; an empty `--password-file ''` fails to read.
    let from_empty_env = process_env("CAIRN_PASSWORD_FILE").is_some_and(|v| v.is_empty());
    let file = cli
        .password_file
        .as_deref()
        .filter(|p| !(p.as_os_str().is_empty() && from_empty_env));
    resolve_password(file, &process_env, mode)
}

/// The password of a new repository at `--repo` (asked twice on a terminal).
pub fn new_repository_password(cli: &Cli) -> cairn_core::Result<Password> {
    password(cli, PromptMode::Confirm)
}

/// A new password for `key add|passwd`: from `--new-password-file`, or
/// asked twice on the terminal. The repository password's sources are not
/// used: they hold the current password.
fn new_password(a: &NewKeyArgs) -> Result<Password> {
    let source = match &a.new_password_file {
        Some(path) => PasswordSource::File(path.clone()),
        None if std::io::stdin().is_terminal() => PasswordSource::Prompt,
        None => bail!("no new password given: use --new-password-file PATH"),
    };
    Ok(source.read(&process_env, PromptMode::Confirm)?)
}

/// Opens the local repository at `path`; its password is resolved only if
/// it is encrypted. Every command that opens a repository comes here
/// (backup's may create one: `is_encrypted_at`).
pub fn open_repository(cli: &Cli, path: &Path) -> Result<Repository> {
    open_with(cli, path, false)
}

/// [`open_repository`] reading everything from the store itself, never
/// from the local metadata cache: what `check` and `repair` verify or
/// rebuild must be the store's objects, not copies of them.
pub fn open_repository_uncached(cli: &Cli, path: &Path) -> Result<Repository> {
    open_with(cli, path, true)
}

fn open_with(cli: &Cli, path: &Path, bypass_cache: bool) -> Result<Repository> {
    let mut password = || password(cli, PromptMode::Once);
    open_at(cli, path, bypass_cache, &mut password)
}

/// Opens the repository at `path` (local or S3); `password` is asked for
/// only if it is encrypted.
pub fn open_at(
    cli: &Cli,
    path: &Path,
    bypass_cache: bool,
    password: &mut dyn FnMut() -> cairn_core::Result<Password>,
) -> Result<Repository> {
    Ok(announcing_lock_waits(
        match repo_location::parse(path, &cli.s3)? {
            RepoLocation::Local(path) => Repository::open_local_with_password(path, password)?,
            RepoLocation::S3(config) => {
                let mut opts = cli.s3.clone();
                opts.no_cache |= bypass_cache;
                let backend = repo_location::s3_backend_cached(*config, &opts)?;
                Repository::open_with_password(backend, password)?
            }
        },
    ))
}

/// `repo`, set to say on stderr what it waits for whenever a waiting lock
/// call (`--wait`, or a reader meeting a deleting writer) finds the lock
/// held. Every repository the commands open or create passes here.
pub fn announcing_lock_waits(repo: Repository) -> Repository {
    repo.on_lock_wait(Arc::new(|name: &str, mode: LockMode| {
        let holder = match (name, mode) {
            (cairn_engine::object_names::WRITE_LOCK, _) => "another writer",
            (cairn_engine::object_names::GC_LOCK, _) => "another garbage collection",
            (cairn_engine::object_names::READERS_LOCK, LockMode::Shared) => {
                "a writer that is deleting data"
            }
            (cairn_engine::object_names::READERS_LOCK, LockMode::Exclusive) => "running readers",
            _ => "another command",
        };
        eprintln!("cairn: waiting for {holder} to finish");
    }));
    repo
}

/// The repository at `--repo`, opened, and the password that opened it
/// (`None` for a clear one): commands that need its master key again.
pub fn open_keeping_password(cli: &Cli, path: &Path) -> Result<(Repository, Option<Password>)> {
    let mut given: Option<Password> = None;
    let repo = open_at(cli, path, false, &mut || {
        let p = password(cli, PromptMode::Once)?;
        given = Some(p.clone());
        Ok(p)
    })?;
    Ok((repo, given))
}

/// Creates a repository at `path` with the identity of `src` (docs/copy.md):
/// `config` (a fresh id, `src`'s chunker, fingerprint and tree settings),
/// encrypted with `src`'s own master key (as `algorithm`) when `src` is
/// encrypted, wrapped under `new_password`; clear when `src` is.
pub fn init_sharing_identity(
    cli: &Cli,
    path: &Path,
    config: RepoConfig,
    (src, src_password): (&Repository, Option<&Password>),
    algorithm: Option<Algorithm>,
    new_password: &mut dyn FnMut() -> cairn_core::Result<Password>,
    kdf: &KdfArgs,
) -> Result<Repository> {
    let backend: Arc<dyn Backend> = match repo_location::parse(path, &cli.s3)? {
        RepoLocation::Local(path) => Arc::new(LocalBackend::create(path)?),
        RepoLocation::S3(s3) => repo_location::s3_backend(*s3)?,
    };
    let Some(src_keys) = src.keys() else {
        return Ok(announcing_lock_waits(Repository::init(backend, config)?));
    };
    let src_password =
        src_password.ok_or_else(|| anyhow!("the source repository's password is needed"))?;
    let master = key_admin::opened_key(src, src_password)?.master;
    let password = new_password()?;
    let params = kdf.params()?;
    Ok(announcing_lock_waits(Repository::init_encrypted_with(
        backend,
        config,
        algorithm.unwrap_or(src_keys.algorithm()),
        &master,
        &password,
        params,
        crypto::local_key_label(),
    )?))
}

/// The backend of the repository at `path` (local or S3).
fn backend(cli: &Cli, path: &Path) -> Result<Arc<dyn Backend>> {
    match repo_location::parse(path, &cli.s3)? {
        RepoLocation::Local(path) => Ok(local(path)?),
        RepoLocation::S3(config) => repo_location::s3_backend(*config),
    }
}

fn local(path: &Path) -> Result<Arc<LocalBackend>> {
    if !path.is_dir() {
        return Err(cairn_core::Error::NotARepository(path.to_path_buf()).into());
    }
    Ok(Arc::new(LocalBackend::open(path)?))
}

/// Whether `path` holds an encrypted repository (a config that says so).
/// Anything unreadable is left to the open that follows to report.
pub fn is_encrypted_at(path: &Path) -> bool {
    std::fs::read(path.join(cairn_engine::object_names::CONFIG))
        .ok()
        .and_then(|bytes| StoredConfig::decode(&bytes).ok())
        .is_some_and(|c| c.is_encrypted())
}

/// Creates the repository of `init`, encrypted as `--encryption` says.
pub fn init_repository(
    cli: &Cli,
    path: &Path,
    config: RepoConfig,
    a: &EncryptionArgs,
) -> Result<Repository> {
    let s3 = match repo_location::parse(path, &cli.s3)? {
        RepoLocation::Local(_) => None,
        RepoLocation::S3(s3) => Some(s3),
    };
    if a.encryption == "none" {
        return Ok(announcing_lock_waits(match s3 {
            Some(s3) => Repository::init(repo_location::s3_backend(*s3)?, config)?,
            None => Repository::init_local(path, config)?,
        }));
    }
    let algorithm: Algorithm = a.encryption.parse().map_err(|_| {
        anyhow!(
            "unknown --encryption {:?} (aes-256-gcm, chacha20poly1305 or none)",
            a.encryption
        )
    })?;
    // Everything that can fail is settled before the directory is created.
    let password = password(cli, PromptMode::Confirm)?;
    let params = a.kdf.params()?;
    Ok(announcing_lock_waits(match s3 {
        Some(s3) => Repository::init_encrypted(
            repo_location::s3_backend(*s3)?,
            config,
            algorithm,
            &password,
            params,
            crypto::local_key_label(),
        )?,
        None => Repository::init_local_encrypted(
            path,
            config,
            algorithm,
            &password,
            params,
            crypto::local_key_label(),
        )?,
    }))
}

/// `cairn key ...`.
pub fn key(cli: &Cli, path: &Path, command: &KeyCommand) -> Result<ExitCode> {
    // The password is kept: it opens the repository, then names the key
    // file it opened (the engine tries the key files once more).
    let mut given: Option<Password> = None;
    let repo = announcing_lock_waits(Repository::open_with_password(
        backend(cli, path)?,
        &mut || {
            let p = password(cli, PromptMode::Once)?;
            given = Some(p.clone());
            Ok(p)
        },
    )?);
    let current =
        given.ok_or_else(|| anyhow!("the repository is not encrypted: it has no key files"))?;
    match command {
        KeyCommand::List => list(cli, &repo, &current),
        KeyCommand::Add(a) => {
            let new = new_password(a)?;
            let params = a.kdf.params()?;
            let _lock = repo.lock_writer(a.wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let name = crypto::add_key_file(
                &**repo.backend(),
                &repo.config.id,
                &opened.master,
                &new,
                params,
                crypto::local_key_label(),
            )?;
            let id = cairn_engine::object_names::key_file_id(&name);
            report(cli, "added", id)
        }
        KeyCommand::Remove { id, force, wait } => {
            let lock = repo.lock_writer(*wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let in_use = (!force).then(|| opened.key_file.id());
            let removed = key_admin::remove_key(&repo, &lock, id, in_use)?;
            report(cli, "removed", &removed)
        }
        KeyCommand::Passwd { id, new: a } => {
            let new = new_password(a)?;
            let params = a.kdf.params()?;
            let lock = repo.lock_writer(a.wait)?;
            let opened = key_admin::opened_key(&repo, &current)?;
            let target = match id {
                Some(id) => key_admin::find_key_file(&repo, id)?,
                None => (opened.name.clone(), opened.key_file.clone()),
            };
            let changed =
                key_admin::change_password(&repo, &lock, &opened.master, &target, &new, params)?;
            report(cli, "changed the password of", changed.id())
        }
    }
}

fn report(cli: &Cli, done: &str, id: &str) -> Result<ExitCode> {
    if cli.json {
        println!("{}", json!({ "id": id }));
    } else if !cli.quiet {
        println!("{done} key {id}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The creation time (a key file's clear text: any value is shown, none overflows).
fn created(kf: &KeyFile) -> String {
    time(i64::try_from(kf.created()).map_or(i64::MAX, |s| s.saturating_mul(1_000_000_000)))
}

fn key_json(kf: &KeyFile, current: bool) -> serde_json::Value {
    let p = kf.params();
    json!({
        "id": kf.id(),
        "current": current,
        "created": created(kf),
        "created_unix": kf.created(),
        "host": kf.label().host,
        "user": kf.label().user,
        "kdf": {
            "name": "argon2id",
            "m_cost_kib": p.m_cost_kib,
            "t_cost": p.t_cost,
            "p_cost": p.p_cost,
        },
    })
}

fn list(cli: &Cli, repo: &Repository, current: &Password) -> Result<ExitCode> {
    let opened = key_admin::opened_key(repo, current)?;
    let files = crypto::key_files(&**repo.backend(), &repo.config.id)?;
    if cli.json {
        let mut rows: Vec<_> = files
            .good
            .iter()
            .map(|(name, kf)| key_json(kf, *name == opened.name))
            .collect();
        rows.extend(files.damaged.iter().map(
            |(name, why)| json!({ "id": cairn_engine::object_names::key_file_id(name), "damaged": why }),
        ));
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "  {:<16}  {:<20}  {:<16}  {:<12}  kdf",
        "id", "created", "host", "user"
    );
    for (name, kf) in &files.good {
        let p = kf.params();
        println!(
            "{} {:<16}  {:<20}  {:<16}  {:<12}  argon2id m={}KiB t={} p={}",
            if *name == opened.name { '*' } else { ' ' },
            kf.id(),
            created(kf),
            crate::output::display_name(&kf.label().host),
            crate::output::display_name(&kf.label().user),
            p.m_cost_kib,
            p.t_cost,
            p.p_cost
        );
    }
    for (name, why) in &files.damaged {
        println!(
            "! {:<16}  damaged: {}",
            crate::output::display_name(cairn_engine::object_names::key_file_id(name)),
            why
        );
    }
    Ok(ExitCode::SUCCESS)
}
