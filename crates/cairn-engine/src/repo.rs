//! A repository: a backend holding a `config` object plus the container log,
//! index, Summary Vector checkpoints and snapshot catalog. Opening reads and
//! validates the config; writers additionally take the exclusive `write` lock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cairn_backend::{CountingBackend, LocalBackend};
use cairn_core::{Backend, ContainerId, Counters, Error, LockGuard, LockMode, Result};

use crate::blocking_map::joined;
use crate::catalog;
use crate::config::{EncryptionConfig, RepoConfig};
use crate::container_log::{ContainerLog, ContainerStore};
use crate::crypto::{self, StoredConfig};
use crate::index::disk_index::DiskIndex;
use crate::index::OpenedIndex;
use crate::object_names;
use crate::repo_keys::RepoKeys;
use crate::sealed_backend::SealedBackend;
use crate::warnings::Warnings;
use cairn_crypto::{Algorithm, KdfParams, KeyLabel, MasterKey, Password};

pub struct Repository {
    backend: Arc<dyn Backend>,
    pub config: RepoConfig,
    pub counters: Arc<Counters>,
    pub log: Arc<dyn ContainerStore>,
    /// The repository directory, for a local repository (never backed up into itself).
    local_root: Option<PathBuf>,
    /// The keys of an encrypted repository, once unlocked (`crypto.rs`).
    keys: Option<Arc<RepoKeys>>,
    /// Told when a waiting lock call finds its lock held and starts to wait.
    lock_wait: Mutex<Option<LockWaitObserver>>,
    /// Opens listing scopes on the outermost backend layer (`listing_memo.rs`).
    listings: crate::listing_memo::Scopes,
    /// The index deltas this handle loaded last, shared by its opens of
    /// the index (`index/overlay.rs`).
    pub(crate) overlays: Arc<crate::index::overlay::OverlayMemo>,
    /// The snapshot records this handle has read (`catalog::RecordMemo`).
    records: crate::catalog::RecordMemo,
}

/// Called with the lock's name ([`object_names::WRITE_LOCK`], [`object_names::READERS_LOCK`]
/// or [`object_names::GC_LOCK`]) and the mode asked for when a waiting lock call of
/// a [`Repository`] finds the lock held, just before it blocks: a command
/// says that it waits instead of hanging silently, and a test learns that
/// the waiter is blocked without guessing from elapsed time.
pub type LockWaitObserver = Arc<dyn Fn(&str, LockMode) + Send + Sync>;

/// Gives the master key of an encrypted repository, from the backend and
/// its stored config ([`Repository::open_with_master_key`]).
pub type MasterKeySource<'a> = dyn FnMut(&dyn Backend, &StoredConfig) -> Result<MasterKey> + 'a;

/// How long a backup without `--wait` keeps trying for the writer lock
/// held alone by someone else ([`Repository::lock_backup`]).
const MOMENTARY_HOLD: std::time::Duration = std::time::Duration::from_secs(5);

/// Held by a writer for as long as it writes: exclusive, or shared by
/// backups running together ([`Repository::lock_backup`]).
pub struct WriteLock {
    guard: parking_lot::Mutex<Box<dyn LockGuard>>,
    shared: std::sync::atomic::AtomicBool,
}

impl WriteLock {
    /// Whether other backups may be writing beside this holder: then it
    /// commits the index as deltas only and deletes nothing.
    pub fn is_shared(&self) -> bool {
        self.shared.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a [`WriteLock`] holds for the moment between giving up its shared
/// lock and taking the exclusive one.
struct Released;
impl LockGuard for Released {}

/// Held by a reader (restore, cat, ls, check, stats) for as long as it
/// reads: a shared lock that readers and backups never contend for; only a
/// writer that deletes objects excludes it ([`DeleteLock`]).
pub struct ReadLock {
    _guard: Box<dyn LockGuard>,
}

/// Held by a writer while it deletes containers or index objects a reader
/// might be using (garbage collection, `repair index --read-data`): the
/// readers lock, exclusively. Taking it waits for running readers; readers
/// that start meanwhile wait for it.
pub struct DeleteLock {
    _guard: Box<dyn LockGuard>,
}

/// Held by a garbage collection from start to end: one collection at a
/// time. It takes the writer lock only for its Merge and its commit, so
/// backups run meanwhile (docs/gc.md, "Concurrent ingest").
pub struct GcLock {
    _guard: Box<dyn LockGuard>,
}

/// Proof that this process merges the index's deltas (`compact.rs`).
pub struct CompactLock {
    _guard: Box<dyn LockGuard>,
}

/// A lock whose holder may delete objects readers use: the writer lock, or
/// the collector lock (a collection deletes what its commit retired).
pub trait MayDelete {
    /// Whether the holder may delete: false for a writer lock shared with
    /// other backups (they may be using what it would delete).
    fn may_delete(&self) -> bool {
        true
    }
}
impl MayDelete for WriteLock {
    fn may_delete(&self) -> bool {
        !self.is_shared()
    }
}
impl MayDelete for GcLock {}

/// A name nobody else takes (32 hex digits): the hash of this host,
/// process, moment and a count within the process. A repository's id, a
/// writer session's (created with `create_new`, so a clash would be an
/// error to retry, never a shared name).
pub(crate) fn fresh_id() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(&now.as_nanos().to_le_bytes());
    h.update(gethostname::gethostname().as_encoded_bytes());
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    h.update(&n.to_le_bytes());
    hex::encode(&h.finalize().as_bytes()[..16])
}

/// The `config` object as stored (a missing one: not a repository).
fn read_stored_config(backend: &dyn Backend) -> Result<StoredConfig> {
    match backend.read(object_names::CONFIG) {
        Ok(b) => StoredConfig::decode(&b),
        Err(e) if e.is_not_found() => Err(Error::NotARepository(PathBuf::from(backend.describe()))),
        Err(e) => Err(e),
    }
}

fn already_a_repository(backend: &dyn Backend) -> Error {
    Error::invalid(format!(
        "{} already holds a cairn repository",
        backend.describe()
    ))
}

impl Repository {
    /// Default configuration with a fresh repository id.
    pub fn default_config() -> RepoConfig {
        RepoConfig::new(fresh_id())
    }

    /// Creates a repository in `backend`; fails if one exists already.
    pub fn init(backend: Arc<dyn Backend>, config: RepoConfig) -> Result<Self> {
        if !Self::create_config(&*backend, &config, None)? {
            return Err(already_a_repository(&*backend));
        }
        Self::open(backend)
    }

    /// Creates an encrypted repository in `backend` (`docs/security.md`): a
    /// fresh random master key, one key file wrapping it under `password`
    /// (Argon2id with `params`), and the config sealed. The key file is
    /// written first: a crash before the config leaves no repository, only
    /// a stray key file that the next `init` refuses (the directory is not
    /// empty).
    pub fn init_encrypted(
        backend: Arc<dyn Backend>,
        config: RepoConfig,
        algorithm: Algorithm,
        password: &Password,
        params: KdfParams,
        label: KeyLabel,
    ) -> Result<Self> {
        let master = MasterKey::generate()?;
        Self::init_encrypted_with(backend, config, algorithm, &master, password, params, label)
    }

    /// [`Repository::init_encrypted`] with a given master key: another
    /// repository's (`cairn init --copy-identity-from`), so that the two
    /// fingerprint and cut chunks alike and `cairn copy` moves chunks and
    /// records between them as stored. Either repository's password then
    /// unwraps the key both use (`docs/copy.md`).
    pub fn init_encrypted_with(
        backend: Arc<dyn Backend>,
        mut config: RepoConfig,
        algorithm: Algorithm,
        master: &MasterKey,
        password: &Password,
        params: KdfParams,
        label: KeyLabel,
    ) -> Result<Self> {
        config.encryption = Some(EncryptionConfig {
            algorithm: algorithm.name().to_string(),
        });
        config.validate()?;
        let present = backend.list("")?;
        if present.iter().any(|k| k == object_names::CONFIG) {
            return Err(already_a_repository(&*backend));
        }
        if let Some(stray) = present.first() {
            // Key files without a config: another `init` is between its key
            // file and its config (or one was interrupted there).
            if present.iter().all(|k| k.starts_with(object_names::KEYS)) {
                return Err(Error::invalid(format!(
                    "{} already holds a cairn repository, or the start of one: \
                     {stray} but no config yet (another init running, or an interrupted one)",
                    backend.describe(),
                )));
            }
            return Err(Error::invalid(format!(
                "{} is not empty and not a cairn repository (found {stray})",
                backend.describe(),
            )));
        }
        let key = crypto::add_key_file(&*backend, &config.id, master, password, params, label)?;
        let keys = RepoKeys::new(master, algorithm);
        let created = Self::create_config(&*backend, &config, Some(&keys));
        if !matches!(created, Ok(true)) {
            // Another init won the race (or failed us): our key file wraps
            // a master key no config uses.
            let _ = backend.delete(&key);
            created?;
            return Err(already_a_repository(&*backend));
        }
        let stored = read_stored_config(&*backend)?;
        Self::open_unlocked(backend, stored, Some(Arc::new(keys)))
    }

    /// Writes `config` as the repository's config if there is none yet.
    /// Creation is exclusive (create-if-absent, never a rename over an
    /// existing config): of two racing creators (two `init`s, or `init` and a
    /// first `backup`) exactly one writes its config and the other sees it.
    /// Returns whether this call created the repository.
    fn create_config(
        backend: &dyn Backend,
        config: &RepoConfig,
        keys: Option<&RepoKeys>,
    ) -> Result<bool> {
        config.validate()?;
        // "auto" names a choice, not a strategy: it is resolved for a device
        // before a repository is created, and never stored.
        if config.index.lookup.strategy == crate::config::LookupStrategy::Auto {
            return Err(Error::invalid(
                "lookup strategy \"auto\" must be resolved for a device before the \
                 repository is created (cairn init --lookup auto --lookup-device NAME)",
            ));
        }
        let present = backend.list("")?;
        if present.iter().any(|k| k == object_names::CONFIG) {
            return Ok(false);
        }
        // An encrypted repository's key file is written just before.
        let expected = |k: &String| keys.is_some() && k.starts_with(object_names::KEYS);
        if let Some(stray) = present.iter().find(|k| !expected(k)) {
            return Err(Error::invalid(format!(
                "{} is not empty and not a cairn repository (found {stray})",
                backend.describe(),
            )));
        }
        // The config names the repository's random id, so bytes found in
        // the way that equal ours are our own create, applied by a store
        // whose answer was lost (object storage), not another creator's.
        cairn_core::backend::create_new_or_own(
            backend,
            object_names::CONFIG,
            &crypto::encode_config(config, keys)?,
        )
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
        backend.write_atomic(object_names::CONFIG, &crypto::encode_config(&config, None)?)?;
        let backend: Arc<dyn Backend> = Arc::new(CountingBackend::new(backend, counters.clone()));
        Ok(Repository {
            backend,
            config,
            counters,
            log: store,
            local_root: None,
            keys: None,
            lock_wait: Mutex::new(None),
            // No memo layer here: its scopes remember nothing.
            listings: Default::default(),
            overlays: Default::default(),
            records: Default::default(),
        })
    }

    /// Opens an existing repository without encryption (an encrypted one
    /// is refused: see [`Repository::open_with_password`]).
    pub fn open(backend: Arc<dyn Backend>) -> Result<Self> {
        let stored = read_stored_config(&*backend)?;
        Self::open_unlocked(backend, stored, None)
    }

    /// Opens an existing repository; if it is encrypted, `password` is
    /// asked for (only then) and must open one of its key files.
    pub fn open_with_password(
        backend: Arc<dyn Backend>,
        password: &mut dyn FnMut() -> Result<Password>,
    ) -> Result<Self> {
        Self::open_with_master_key(backend, &mut |backend, stored| {
            crypto::unlock_with_password(backend, stored, password)
        })
    }

    /// Opens an existing repository; if it is encrypted, `master_key` is
    /// asked for its master key (only then) given the stored config: from
    /// a password, or from the unlocked-key cache (which must check that
    /// the key opens the config, [`StoredConfig::opens_with`]).
    pub fn open_with_master_key(
        backend: Arc<dyn Backend>,
        master_key: &mut MasterKeySource<'_>,
    ) -> Result<Self> {
        let stored = read_stored_config(&*backend)?;
        let keys = match &stored {
            StoredConfig::Clear(_) => None,
            StoredConfig::Sealed { algorithm, .. } => {
                let master = master_key(&*backend, &stored)?;
                Some(Arc::new(RepoKeys::new(&master, *algorithm)))
            }
        };
        Self::open_unlocked(backend, stored, keys)
    }

    /// Opens the repository whose stored config is `stored` (read once per
    /// open), with its keys if it is encrypted.
    fn open_unlocked(
        backend: Arc<dyn Backend>,
        stored: StoredConfig,
        keys: Option<Arc<RepoKeys>>,
    ) -> Result<Self> {
        let config = stored.open(keys.as_deref())?;
        let counters = Arc::new(Counters::default());
        // Counted below the sealing: the counters see the bytes stored.
        let counted: Arc<dyn Backend> = Arc::new(CountingBackend::new(backend, counters.clone()));
        let backend: Arc<dyn Backend> = match &keys {
            Some(k) => Arc::new(SealedBackend::new(counted, k.clone())),
            None => counted,
        };
        // Outermost, so that every user of the repository's objects (the
        // container log included) shares what it remembers.
        let (backend, listings) = crate::listing_memo::ListingMemo::wrap_with_scopes(backend);
        let log: Arc<dyn ContainerStore> =
            Arc::new(ContainerLog::open(backend.clone(), counters.clone())?);
        Ok(Repository {
            backend,
            config,
            counters,
            log,
            local_root: None,
            keys,
            lock_wait: Mutex::new(None),
            listings,
            overlays: Default::default(),
            records: Default::default(),
        })
    }

    /// Every snapshot, oldest first, and the records that failed to load,
    /// reading only the records this handle has not read before
    /// ([`catalog::list_memoized`]). For a writer's own bookkeeping (its
    /// parent, the container-id floor); whatever must notice a record that
    /// rotted since (`check`, a collection's roots) lists through
    /// [`catalog::list`].
    pub fn snapshots(&self) -> Result<(Vec<catalog::SnapshotInfo>, catalog::Unreadable)> {
        catalog::list_memoized(&*self.backend, &self.records)
    }

    /// Writes a new snapshot summary (`catalog_summary.rs`) when this
    /// handle's listings read many records the stored one lacked; returns
    /// whether it wrote. For a writer holding the writer lock (shared or
    /// alone: a holder alone removes temporaries). Derived data: a failure
    /// is for a warning, never a failed command.
    pub fn refresh_snapshot_summary(&self) -> Result<bool> {
        if !self.records.summary_due() {
            return Ok(false);
        }
        self.records.write_summary(&*self.backend)?;
        Ok(true)
    }

    /// The keys of an encrypted repository (`None` without encryption).
    pub fn keys(&self) -> Option<&Arc<RepoKeys>> {
        self.keys.as_ref()
    }

    /// Opens the local repository at `path`.
    pub fn open_local(path: &Path) -> Result<Self> {
        if !path.is_dir() {
            return Err(Error::NotARepository(path.to_path_buf()));
        }
        let mut repo = Self::open(Arc::new(LocalBackend::open(path)?))?;
        repo.local_root = crate::long_path::canonicalize(path).ok();
        Ok(repo)
    }

    /// Opens the local repository at `path`, asking for `password` only if
    /// it is encrypted.
    pub fn open_local_with_password(
        path: &Path,
        password: &mut dyn FnMut() -> Result<Password>,
    ) -> Result<Self> {
        Self::open_local_with_master_key(path, &mut |backend, stored| {
            crypto::unlock_with_password(backend, stored, password)
        })
    }

    /// [`Repository::open_with_master_key`] of the local repository at `path`.
    pub fn open_local_with_master_key(
        path: &Path,
        master_key: &mut MasterKeySource<'_>,
    ) -> Result<Self> {
        if !path.is_dir() {
            return Err(Error::NotARepository(path.to_path_buf()));
        }
        let mut repo = Self::open_with_master_key(Arc::new(LocalBackend::open(path)?), master_key)?;
        repo.local_root = crate::long_path::canonicalize(path).ok();
        Ok(repo)
    }

    /// [`Repository::init_encrypted`] of a local repository at `path`.
    pub fn init_local_encrypted(
        path: &Path,
        config: RepoConfig,
        algorithm: Algorithm,
        password: &Password,
        params: KdfParams,
        label: KeyLabel,
    ) -> Result<Self> {
        let backend = Arc::new(LocalBackend::create(path)?);
        let mut repo = Self::init_encrypted(backend, config, algorithm, password, params, label)?;
        repo.local_root = crate::long_path::canonicalize(path).ok();
        Ok(repo)
    }

    /// Creates a local repository at `path` (the directory may exist if empty).
    pub fn init_local(path: &Path, config: RepoConfig) -> Result<Self> {
        let mut repo = Self::init(Arc::new(LocalBackend::create(path)?), config)?;
        repo.local_root = crate::long_path::canonicalize(path).ok();
        Ok(repo)
    }

    /// Opens the local repository at `path`, creating it with `config` if
    /// `path` does not hold one yet. Returns whether it was created.
    /// `config` runs only when the repository may need creating (and nothing
    /// is created if it fails). A repository created concurrently by another
    /// process wins: its config is the one opened.
    pub fn open_or_init_local<E: From<Error>>(
        path: &Path,
        config: impl FnOnce() -> std::result::Result<RepoConfig, E>,
    ) -> std::result::Result<(Self, bool), E> {
        if path.join(object_names::CONFIG).is_file() {
            return Ok((Self::open_local(path)?, false));
        }
        let config = config()?;
        let backend = LocalBackend::create(path)?;
        let created = Self::create_config(&backend, &config, None)?;
        Ok((Self::open_local(path)?, created))
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Remembers this process's listings of `index/`, `bloom/` and
    /// `snapshots/` until the scope is dropped: for a backup between its
    /// session's begin and its commit (`listing_memo.rs` says why that is
    /// sound beside other writers).
    pub fn remember_listings(&self) -> crate::listing_memo::ListingScope {
        self.listings.open()
    }

    pub fn local_root(&self) -> Option<&Path> {
        self.local_root.as_deref()
    }

    /// Takes the single-writer lock; removes leftovers of interrupted writes.
    /// The config this handle was opened with is checked against the one
    /// stored, under the lock: a writer never writes with a config other than
    /// the repository's.
    pub fn lock_writer(&self, wait: bool) -> Result<WriteLock> {
        self.lock_writer_beside(false, false, wait)
    }

    /// The writer lock for a backup: shared with other backups, so any
    /// number of them commit at once (docs/concurrency.md; ids come in
    /// blocks, index deltas are created only if absent), and excluding
    /// everything that takes it exclusively (a collection's Merge and
    /// Commit, `forget`, `repair`). Taken exclusively instead where backups
    /// cannot yet share: a repository with no index file (its first commit
    /// writes one).
    pub fn lock_backup(&self, wait: bool) -> Result<WriteLock> {
        let share = self.writers_share()?;
        if wait || !share {
            return self.lock_writer_beside(false, share, wait);
        }
        // A writer alone for a moment (a tidy-up of temporaries after
        // another backup, a collection's index change while no backup ran,
        // a frugal-index repository's collection) is waited out
        // briefly: a backup is refused only by one that holds the lock
        // longer (forget, repair, a first backup).
        let deadline = std::time::Instant::now() + MOMENTARY_HOLD;
        let mut pause = std::time::Duration::from_millis(10);
        loop {
            match self.lock_writer_beside(false, true, false) {
                Err(Error::Locked(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(500));
                }
                taken => return taken,
            }
        }
    }

    /// The writer lock for `forget`, which only removes snapshot records:
    /// shared with backups and collections (a record removed beside them
    /// is one they either read before, and a collection then keeps its
    /// data this time, or never see; docs/concurrency.md), and excluding
    /// what takes the lock alone (`repair`, `tag`).
    pub fn lock_forget(&self, wait: bool) -> Result<WriteLock> {
        self.lock_writer_beside(false, true, wait)
    }

    /// Whether writers may share the writer lock: the repository has an
    /// index file. With the frugal index each writer beside others appends
    /// to its own chunk log (a partition, `index::open_frugal`).
    pub(crate) fn writers_share(&self) -> Result<bool> {
        Ok(self
            .backend
            .list(object_names::INDEX)?
            .iter()
            .any(|k| object_names::parse_generation(k, object_names::INDEX).is_some()))
    }

    /// Whether a collection's index changes share the writer lock with
    /// backups: with the paged index. The frugal index's removals go into
    /// every writer's chunk log, so a collection changes it alone
    /// (docs/concurrency.md, "Frugal logs per writer").
    fn collections_share(&self) -> Result<bool> {
        Ok(self.config.index.kind != crate::config::IndexKind::Frugal && self.writers_share()?)
    }

    /// Makes a shared writer lock exclusive, waiting for the backups beside
    /// it to end: for a backup that must rebuild a damaged index before it
    /// writes anything (the lock is not held while it waits, so the caller
    /// must not have written yet). Exclusive already: nothing to do.
    pub fn make_exclusive(&self, lock: &WriteLock) -> Result<()> {
        if !lock.is_shared() {
            return Ok(());
        }
        let mut guard = lock.guard.lock();
        drop(std::mem::replace(&mut *guard, Box::new(Released)));
        let alone = self.lock_writer_beside(false, false, true)?;
        *guard = alone.guard.into_inner();
        lock.shared
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The index for a writer holding `lock`: beside other writers (its
    /// commits add deltas only) when the lock is shared; a damaged index is
    /// rebuilt only by a writer alone, so a shared holder that meets one
    /// first waits to hold the lock alone (nothing is written before).
    pub fn open_index(&self, lock: &WriteLock, warnings: &Warnings) -> Result<OpenedIndex> {
        self.open_index_in(lock, warnings, None)
    }

    /// [`Self::open_index`] for a backup that asks for frugal-index
    /// partition `partition` beside other writers (004's partitioned
    /// dedup: it deduplicates against that partition and partition 0 only;
    /// `BackupOptions::index_partition`).
    pub fn open_index_in(
        &self,
        lock: &WriteLock,
        warnings: &Warnings,
        partition: Option<u32>,
    ) -> Result<OpenedIndex> {
        if lock.is_shared() {
            if let Some(opened) = crate::index::open_beside_writers_memoized(
                self.backend.clone(),
                self.counters.clone(),
                &*self.log,
                &self.config.index,
                warnings,
                &self.overlays,
                partition,
            )? {
                return Ok(opened);
            }
            self.make_exclusive(lock)?;
        }
        crate::index::open_for_write_memoized(
            self.backend.clone(),
            self.counters.clone(),
            &*self.log,
            &self.config.index,
            warnings,
            Some(&self.overlays),
        )
    }

    /// The writer lock for a collection's index changes (Merge, Commit, the
    /// final change): shared with backups where they share it
    /// (docs/concurrency.md), so a collection never stops a backup, and it
    /// still excludes what takes it alone (`repair`, `tag`, a first
    /// backup); held alone when no backup runs now, so the change
    /// may merge the index into a new generation. The caller's collector
    /// lock shows no other collection is writing copies.
    pub(crate) fn lock_writer_for_gc(&self, _gc: &GcLock, wait: bool) -> Result<WriteLock> {
        if !self.collections_share()? {
            return self.lock_writer_beside(true, false, wait);
        }
        match self.lock_writer_beside(true, false, false) {
            Err(Error::Locked(_)) => self.lock_writer_beside(true, true, wait),
            taken => taken,
        }
    }

    /// Sets the observer told when a waiting lock call starts to wait.
    pub fn on_lock_wait(&self, observer: LockWaitObserver) {
        *self.lock_wait.lock().unwrap_or_else(|e| e.into_inner()) = Some(observer);
    }

    /// Takes lock `name` of the backend. A waiting call first tries without
    /// waiting, and tells the observer before it blocks only when the lock
    /// is held: an uncontended lock costs one attempt either way.
    fn take_lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        match self.backend.lock(name, mode, false) {
            Err(Error::Locked(_)) if wait => {
                let observer = self
                    .lock_wait
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(observer) = observer {
                    observer(name, mode);
                }
                self.backend.lock(name, mode, true)
            }
            taken => taken,
        }
    }

    fn lock_writer_beside(
        &self,
        holds_gc_lock: bool,
        shared: bool,
        wait: bool,
    ) -> Result<WriteLock> {
        let mode = if shared {
            LockMode::Shared
        } else {
            LockMode::Exclusive
        };
        let guard = self.take_lock(object_names::WRITE_LOCK, mode, wait)?;
        crate::interrupt::arm();
        let stored = read_stored_config(&*self.backend)?.open(self.keys.as_deref())?;
        if stored != self.config {
            return Err(Error::invalid(format!(
                "the config of {} changed after it was opened; run the command again",
                self.backend.describe()
            )));
        }
        // A collection running beside this writer may be writing copies
        // into ids it reserved: leftovers are removed only when none runs,
        // and its reservation must then be read (a damaged one stops the
        // writer: it could otherwise pick an id the collection writes).
        // Whether one runs is asked only where there are leftovers to
        // remove, or a damaged reservation to judge.
        let idle = if holds_gc_lock {
            Some(true)
        } else if self.backend.leaves_temporaries() {
            Some(self.collector_idle())
        } else {
            None
        };
        // Another backup's temporaries may be in flight beside a shared
        // holder: only a writer alone removes leftovers.
        if idle == Some(true) && !shared {
            self.backend.clean_temporaries()?;
        }
        // Everything read before the lock may be stale: the config cannot
        // change, but the container log has grown if we waited for a writer.
        self.log.refresh_next_id(self.container_id_floor(idle)?)?;
        Ok(WriteLock {
            guard: parking_lot::Mutex::new(guard),
            shared: std::sync::atomic::AtomicBool::new(shared),
        })
    }

    /// Whether no collection is running (its lock is free right now).
    fn collector_idle(&self) -> bool {
        self.backend
            .lock(object_names::GC_LOCK, LockMode::Exclusive, false)
            .is_ok()
    }

    /// Takes the shared readers lock. With `wait == false` it fails with
    /// [`Error::Locked`] while a writer is deleting.
    pub fn lock_reader(&self, wait: bool) -> Result<ReadLock> {
        let guard = self.take_lock(object_names::READERS_LOCK, LockMode::Shared, wait)?;
        Ok(ReadLock { _guard: guard })
    }

    /// The locks of a compaction beside writers (`compact.rs`): the writer
    /// lock shared (with backups, forgets and a collection's index changes;
    /// a holder alone keeps it out) and the compaction lock alone (one
    /// merge at a time). `None` when either is held: a compaction never
    /// waits, the next writer to find them free compacts.
    ///
    /// The compaction lock is tried first: while one merge runs, every
    /// backup that commits finds the deltas piled up and tries, and the
    /// writer lock costs a floor's reads (config, index, snapshots) that a
    /// held compaction lock then made useless (at eight writers on object
    /// storage, about six round trips per backup that tried). Neither lock
    /// is waited for, so the order cannot deadlock.
    pub fn lock_compaction(&self) -> Result<Option<(WriteLock, CompactLock)>> {
        let compacting =
            match self.take_lock(object_names::COMPACT_LOCK, LockMode::Exclusive, false) {
                Ok(guard) => CompactLock { _guard: guard },
                Err(Error::Locked(_)) => return Ok(None),
                Err(e) => return Err(e),
            };
        match self.lock_writer_beside(false, true, false) {
            Ok(writer) => Ok(Some((writer, compacting))),
            Err(Error::Locked(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Takes the collector lock. With `wait == false` it fails with
    /// [`Error::Locked`] while another collection runs.
    pub fn lock_gc(&self, wait: bool) -> Result<GcLock> {
        let guard = self.take_lock(object_names::GC_LOCK, LockMode::Exclusive, wait)?;
        crate::interrupt::arm();
        Ok(GcLock { _guard: guard })
    }

    /// Excludes readers while the holder of `_proof` deletes objects they
    /// might be using (the type proves the caller may delete).
    pub fn lock_out_readers(&self, proof: &dyn MayDelete, wait: bool) -> Result<DeleteLock> {
        if !proof.may_delete() {
            return Err(Error::invalid(
                "a backup sharing the writer lock may not delete objects readers use",
            ));
        }
        let guard = self.take_lock(object_names::READERS_LOCK, LockMode::Exclusive, wait)?;
        Ok(DeleteLock { _guard: guard })
    }

    /// One past every container id the repository has ever referenced
    /// outside the container log: the index's coverage mark (an index
    /// generation covers every container below it), each readable
    /// snapshot record's allocation mark, and the end of the ids a running
    /// collection copies into. Containers present are counted by
    /// the log itself. Damaged or missing sources count as 0: each is a
    /// lower bound, and a dedup hit is verified against the container anyway.
    /// `idle`: whether no collection runs, if known.
    /// The three sources are read at once (one round trip on object
    /// storage instead of three).
    fn container_id_floor(&self, idle: Option<bool>) -> Result<ContainerId> {
        let (index, snapshots, reservation) = std::thread::scope(|s| {
            let index = s.spawn(|| {
                match DiskIndex::open_memoized(
                    self.backend.clone(),
                    self.counters.clone(),
                    Some(self.overlays.clone()),
                ) {
                    Ok(ix) => ix.covered_below().0,
                    Err(_) => 0,
                }
            });
            let snapshots = s.spawn(|| self.snapshots());
            let reservation = crate::gc::reservation::read(&*self.backend);
            (joined(index), joined(snapshots), reservation)
        });
        let recorded = snapshots?
            .0
            .iter()
            .map(|s| s.record.next_container)
            .max()
            .unwrap_or(0);
        // A reservation left by a collection that died only names copies to
        // replay (present containers count anyway); a damaged one the next
        // collection repairs.
        let reserved = match reservation {
            Ok(r) => r.map_or(0, |r| r.end.0),
            Err(e) if !idle.unwrap_or_else(|| self.collector_idle()) => return Err(e),
            Err(_) => 0,
        };
        Ok(ContainerId(index.max(recorded).max(reserved).max(1)))
    }
}
