//! Opening a repository, in one place for every command: its location
//! (`repo_location`), the password (resolved only when the repository is
//! encrypted: a cached unlocked key, `--password-file`, `CAIRN_PASSWORD`,
//! `--password-command`, the prompt; docs/security.md), the readers lock;
//! and creating one (`init --encryption`).
//!
//! New repositories are encrypted unless `--encryption none` (or
//! `CAIRN_ENCRYPTION=none`) says otherwise, whether `init` or a first
//! `backup` creates them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;

use cairn_backend::LocalBackend;
use cairn_core::{Backend, LockMode};
use cairn_crypto::password::process_env;
use cairn_crypto::{resolve_password, Algorithm, Encryption, KdfParams, Password, PromptMode};
use cairn_engine::crypto::{self, StoredConfig};
use cairn_engine::key_admin;
use cairn_engine::{RepoConfig, Repository};

use crate::globals::Globals;
use crate::repo_location::{self, RepoLocation};

/// How long the key derivation of a new key file takes on this machine.
const KDF_TARGET: Duration = Duration::from_millis(500);

/// The encryption options of a new repository (`init`, and a `backup`
/// that creates one).
#[derive(Args, Debug, Clone)]
pub struct EncryptionArgs {
    /// Encryption of a new repository: an algorithm, or none (a clear
    /// repository: only for scratch data on a trusted disk).
    #[arg(
        long,
        env = "CAIRN_ENCRYPTION",
        default_value_t = Encryption::default(),
        value_parser = crate::values::choice::<Encryption>(&Encryption::NAMES),
        value_name = "ALGORITHM"
    )]
    pub encryption: Encryption,
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

/// The repository password from `--password-file`, `CAIRN_PASSWORD`,
/// `CAIRN_PASSWORD_COMMAND` or the terminal.
pub fn password(cli: &Globals, mode: PromptMode) -> cairn_core::Result<Password> {
    // Set to the empty string, CAIRN_PASSWORD_FILE counts as unset, as the
    // other password variables do; an empty `--password-file ''` fails to read.
    let from_empty_env = process_env("CAIRN_PASSWORD_FILE").is_some_and(|v| v.is_empty());
    let file = cli
        .repository
        .password
        .password_file
        .as_deref()
        .filter(|p| !(p.as_os_str().is_empty() && from_empty_env));
    // `--password-command` stands for CAIRN_PASSWORD_COMMAND: same place in
    // the order of sources, same handling of its output.
    let env = |name: &str| match &cli.repository.password.password_command {
        Some(command) if name == cairn_crypto::password::PASSWORD_COMMAND_ENV => {
            Some(std::ffi::OsString::from(command))
        }
        _ => process_env(name),
    };
    resolve_password(file, &env, mode)
}

/// The password of a new repository at `--repo` (asked twice on a terminal).
pub fn new_repository_password(cli: &Globals) -> cairn_core::Result<Password> {
    password(cli, PromptMode::Confirm)
}

/// Opens the local repository at `path`; its password is resolved only if
/// it is encrypted. Every command that opens a repository comes here
/// (backup's may create one: `is_encrypted_at`).
pub fn open_repository(cli: &Globals, path: &Path) -> Result<Repository> {
    open_with(cli, path, false)
}

/// [`open_repository`] reading everything from the store itself, never
/// from the local metadata cache: what `check` and `repair` verify or
/// rebuild must be the store's objects, not copies of them.
pub fn open_repository_uncached(cli: &Globals, path: &Path) -> Result<Repository> {
    open_with(cli, path, true)
}

fn open_with(cli: &Globals, path: &Path, bypass_cache: bool) -> Result<Repository> {
    let mut password = || password(cli, PromptMode::Once);
    open_at(cli, path, bypass_cache, &mut password)
}

/// Opens the repository at `path` (local or S3); if it is encrypted, with
/// the key `cairn unlock` cached for it, else with `password` (asked for
/// only then).
pub fn open_at(
    cli: &Globals,
    path: &Path,
    bypass_cache: bool,
    password: &mut dyn FnMut() -> cairn_core::Result<Password>,
) -> Result<Repository> {
    let mut master_key = crate::key_cache_hook::cached_or_password(password);
    open_with_master_key(cli, path, bypass_cache, &mut master_key)
}

/// [`open_at`] with `master_key` deciding an encrypted repository's key.
fn open_with_master_key(
    cli: &Globals,
    path: &Path,
    bypass_cache: bool,
    master_key: &mut cairn_engine::MasterKeySource<'_>,
) -> Result<Repository> {
    Ok(announcing_lock_waits(
        match repo_location::parse(path, cli.s3())? {
            RepoLocation::Local(path) => Repository::open_local_with_master_key(path, master_key)?,
            RepoLocation::S3(config) => {
                let mut opts = cli.s3().clone();
                opts.no_cache |= bypass_cache;
                let backend = repo_location::s3_backend_cached(*config, &opts)?;
                Repository::open_with_master_key(backend, master_key)?
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

/// Creates a repository at `path` with the identity of `src` (docs/copy.md):
/// `config` (a fresh id, `src`'s chunker, fingerprint and tree settings),
/// encrypted with `src`'s own master key (as `algorithm`) when `src` is
/// encrypted, wrapped under `new_password`; clear when `src` is.
pub fn init_sharing_identity(
    cli: &Globals,
    path: &Path,
    config: RepoConfig,
    (src, src_password): (&Repository, Option<&Password>),
    algorithm: Option<Algorithm>,
    new_password: &mut dyn FnMut() -> cairn_core::Result<Password>,
    kdf: &KdfArgs,
) -> Result<Repository> {
    let backend: Arc<dyn Backend> = match repo_location::parse(path, cli.s3())? {
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
pub fn backend(cli: &Globals, path: &Path) -> Result<Arc<dyn Backend>> {
    match repo_location::parse(path, cli.s3())? {
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
    cli: &Globals,
    path: &Path,
    config: RepoConfig,
    a: &EncryptionArgs,
) -> Result<Repository> {
    let s3 = match repo_location::parse(path, cli.s3())? {
        RepoLocation::Local(_) => None,
        RepoLocation::S3(s3) => Some(s3),
    };
    let Some(algorithm) = a.encryption.algorithm() else {
        return Ok(announcing_lock_waits(match s3 {
            Some(s3) => Repository::init(repo_location::s3_backend(*s3)?, config)?,
            None => Repository::init_local(path, config)?,
        }));
    };
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

/// The shared readers lock: readers and backups never wait for it; a
/// writer deleting containers (garbage collection, `repair index
/// --read-data`) holds it exclusively for a while, and a reader says it is
/// waiting rather than hanging silently (the repository's lock-wait
/// observer, `encryption::announcing_lock_waits`, says it).
/// A repository this process cannot write to (read-only media, another
/// user's files) is read without the lock: nobody can be deleting there
/// through this process, and refusing to read it would be worse.
pub(crate) fn read_lock(repo: &Repository) -> Result<Option<cairn_engine::ReadLock>> {
    match repo.lock_reader(true) {
        Ok(l) => Ok(Some(l)),
        Err(cairn_core::Error::Io { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
