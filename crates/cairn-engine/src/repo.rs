//! A repository: a backend holding a `config` object plus the container log,
//! index, Summary Vector checkpoints and snapshot catalog. Opening reads and
//! validates the config; writers additionally take the exclusive `write` lock.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_backend::{CountingBackend, LocalBackend};
use cairn_core::{Backend, Counters, Error, LockGuard, LockMode, Result};

use crate::config::RepoConfig;
use crate::container_log::{ContainerLog, ContainerStore};
use crate::keys;

pub struct Repository {
    backend: Arc<dyn Backend>,
    pub config: RepoConfig,
    pub counters: Arc<Counters>,
    pub log: Arc<dyn ContainerStore>,
    /// The repository directory, for a local repository (never backed up into itself).
    local_root: Option<PathBuf>,
}

/// Held by a writer for as long as it writes.
pub struct WriteLock {
    _guard: Box<dyn LockGuard>,
}

fn new_repo_id() -> String {
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(&now.as_nanos().to_le_bytes());
    h.update(gethostname::gethostname().as_encoded_bytes());
    hex::encode(&h.finalize().as_bytes()[..16])
}

impl Repository {
    /// Default configuration with a fresh repository id.
    pub fn default_config() -> RepoConfig {
        RepoConfig::new(new_repo_id())
    }

    /// Creates a repository in `backend`; fails if one exists already.
    pub fn init(backend: Arc<dyn Backend>, config: RepoConfig) -> Result<Self> {
        config.validate()?;
        if backend.exists(keys::CONFIG)? {
            return Err(Error::invalid(format!(
                "{} already holds a cairn repository",
                backend.describe()
            )));
        }
        let stray = backend.list("")?;
        if !stray.is_empty() {
            return Err(Error::invalid(format!(
                "{} is not empty and not a cairn repository (found {})",
                backend.describe(),
                stray[0]
            )));
        }
        backend.write_atomic(keys::CONFIG, &config.encode())?;
        Self::open(backend)
    }

    /// Creates a repository whose containers live in a store of the caller's
    /// choosing (the simulator's metadata-only store); everything else (config,
    /// index, Summary Vector checkpoints, snapshots) goes to `backend`.
    pub fn init_with_store(
        backend: Arc<dyn Backend>,
        config: RepoConfig,
        counters: Arc<Counters>,
        store: Arc<dyn ContainerStore>,
    ) -> Result<Self> {
        config.validate()?;
        backend.write_atomic(keys::CONFIG, &config.encode())?;
        let backend: Arc<dyn Backend> = Arc::new(CountingBackend::new(backend, counters.clone()));
        Ok(Repository {
            backend,
            config,
            counters,
            log: store,
            local_root: None,
        })
    }

    /// Opens an existing repository.
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self> {
        let bytes = match backend.read(keys::CONFIG) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return Err(Error::NotARepository(PathBuf::from(backend.describe())))
            }
            Err(e) => return Err(e),
        };
        let config = RepoConfig::decode(&bytes)?;
        let counters = Arc::new(Counters::default());
        let backend: Arc<dyn Backend> = Arc::new(CountingBackend::new(backend, counters.clone()));
        let log: Arc<dyn ContainerStore> =
            Arc::new(ContainerLog::open(backend.clone(), counters.clone())?);
        Ok(Repository {
            backend,
            config,
            counters,
            log,
            local_root: None,
        })
    }

    /// Opens the local repository at `path`.
    pub fn open_local(path: &Path) -> Result<Self> {
        if !path.is_dir() {
            return Err(Error::NotARepository(path.to_path_buf()));
        }
        let mut repo = Self::open(Arc::new(LocalBackend::open(path)?))?;
        repo.local_root = path.canonicalize().ok();
        Ok(repo)
    }

    /// Creates a local repository at `path` (the directory may exist if empty).
    pub fn init_local(path: &Path, config: RepoConfig) -> Result<Self> {
        let mut repo = Self::init(Arc::new(LocalBackend::create(path)?), config)?;
        repo.local_root = path.canonicalize().ok();
        Ok(repo)
    }

    /// Opens the local repository at `path`, creating it with `config` if
    /// `path` does not hold one yet. Returns whether it was created.
    /// `config` runs only when the repository is created (and nothing is
    /// created if it fails).
    pub fn open_or_init_local<E: From<Error>>(
        path: &Path,
        config: impl FnOnce() -> std::result::Result<RepoConfig, E>,
    ) -> std::result::Result<(Self, bool), E> {
        if path.join(keys::CONFIG).is_file() {
            return Ok((Self::open_local(path)?, false));
        }
        Ok((Self::init_local(path, config()?)?, true))
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn local_root(&self) -> Option<&Path> {
        self.local_root.as_deref()
    }

    /// Takes the single-writer lock; removes leftovers of interrupted writes.
    pub fn lock_writer(&self, wait: bool) -> Result<WriteLock> {
        let guard = self
            .backend
            .lock(keys::WRITE_LOCK, LockMode::Exclusive, wait)?;
        self.backend.clean_temporaries()?;
        // Everything read before the lock may be stale: the config cannot
        // change, but the container log has grown if we waited for a writer.
        self.log.refresh_next_id()?;
        Ok(WriteLock { _guard: guard })
    }
}
