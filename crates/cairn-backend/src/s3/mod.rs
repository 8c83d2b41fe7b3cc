//! `S3Backend`: a repository under a prefix of an S3 (or S3-compatible)
//! bucket, built on the `object_store` crate.
//!
//! Every repository key `K` is the object `PREFIX/K`, so the layout on the
//! store is the layout of a local repository directory. The backend is
//! synchronous like every [`Backend`]: it owns a small tokio runtime and
//! blocks on each request. Mapping of the contract:
//!
//! * `write_atomic`: one PUT (S3 makes a whole object visible at once), a
//!   multipart upload above [`MULTIPART_THRESHOLD`] (visible only when the
//!   upload completes; aborted on failure).
//! * `create_new`: a PUT with `If-None-Match: *` where the store honours it
//!   (probed once, on the first call); on a store that ignores it, a
//!   check-then-PUT under the backend's own lease lock (`lock.rs`).
//! * `read_at`: a ranged GET; a range past the end is `Error::Corrupt`.
//! * `lock`: leases on lock objects under `locks/` (`lock.rs`), which is
//!   reserved like a local repository's `locks/` directory.
//!
//! Requests are retried with exponential backoff on 5xx answers, timeouts
//! and connection failures (object_store's `RetryConfig`); that is safe
//! because every write replaces a whole object. The store is assumed to be
//! strongly consistent (read-after-write and list-after-write), as AWS S3
//! is since December 2020; `docs/object-storage.md` has the details.

mod errors;
#[cfg(feature = "test-support")]
pub mod fault_proxy;
mod lock;
#[cfg(feature = "test-support")]
pub mod test_server;

use crate::{truncated, validate_key, validate_lock_name, validate_prefix};
use cairn_core::{Backend, Error, LockGuard, LockMode, Result};
use futures_util::{StreamExt as _, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig, WriteMultipart,
};
use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use lock::DEFAULT_LEASE;

/// Objects larger than this are written by a multipart upload.
pub const MULTIPART_THRESHOLD: usize = 16 << 20;
/// Part size of multipart uploads (S3 requires at least 5 MiB but the last).
const PART_SIZE: usize = 8 << 20;
/// Parts of one multipart upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;
/// Attempts of a write that a transient conflict refused
/// ([`errors::is_transient_conflict`]), and the wait before the first
/// retry (doubled each time: about 2.5 s in all).
const CONFLICT_ATTEMPTS: u32 = 8;
const CONFLICT_BACKOFF: Duration = Duration::from_millis(20);

/// Runs the request `attempt` makes until it succeeds, fails otherwise,
/// or has been refused by a transient conflict [`CONFLICT_ATTEMPTS`] times.
/// Safe for every write cairn makes: a refused request changed nothing.
async fn retrying_conflicts<T, F, Fut>(attempt: F) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    retrying_while(attempt, errors::is_transient_conflict).await
}

/// Runs the request `attempt` makes until it succeeds, or fails with an
/// error that `retry` does not accept, or [`CONFLICT_ATTEMPTS`] times.
async fn retrying_while<T, F, Fut>(
    mut attempt: F,
    retry: fn(&object_store::Error) -> bool,
) -> object_store::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = object_store::Result<T>>,
{
    let mut wait = CONFLICT_BACKOFF;
    for _ in 1..CONFLICT_ATTEMPTS {
        match attempt().await {
            Err(e) if retry(&e) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            done => return done,
        }
    }
    attempt().await
}

/// Containers a backup uploads at once by default: with 4 MiB containers
/// and a round trip of tens of milliseconds, one upload at a time leaves
/// the link idle between requests; 8 keep about 32 MiB in flight.
pub const DEFAULT_UPLOADS_IN_FLIGHT: usize = 8;
/// Containers a restore fetches at once by default (the same reasoning,
/// downstream).
pub const DEFAULT_DOWNLOADS_IN_FLIGHT: usize = 8;
/// Time one attempt of a request may take by default: long enough for an
/// 8 MiB part or a 16 MiB object over a slow uplink (about 0.5 Mbit/s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Top-level key component reserved for lock leases.
const LOCKS_DIR: &str = "locks";

/// Whether `create_new` may rely on the store's `If-None-Match: *`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConditionalWrites {
    /// Probe the store on the first `create_new`: a conditional PUT over an
    /// existing probe object must be refused.
    #[default]
    Detect,
    /// Never rely on it: `create_new` checks and writes under a lease lock.
    Emulate,
}

/// Whether a request's signature covers a SHA-256 of its body.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PayloadSigning {
    /// Over plain HTTP, signed: the signature is then the only check that
    /// the server stored the bytes sent. Over HTTPS (AWS S3 included),
    /// `UNSIGNED-PAYLOAD`: TLS authenticates every byte in transit, and the
    /// body is not hashed a second time (SHA-256 of every uploaded byte was
    /// 7-10% of a first backup's CPU, `docs/object-storage.md`).
    #[default]
    ByScheme,
    /// Always signed.
    Signed,
    /// Never signed (`UNSIGNED-PAYLOAD`), whatever the scheme.
    Unsigned,
}

impl PayloadSigning {
    /// Whether bodies sent to `endpoint` (`None`: AWS S3, over HTTPS) are
    /// signed.
    pub fn signs(self, endpoint: Option<&str>) -> bool {
        match self {
            PayloadSigning::Signed => true,
            PayloadSigning::Unsigned => false,
            PayloadSigning::ByScheme => endpoint.is_some_and(|e| !has_scheme(e, "https://")),
        }
    }
}

/// Whether `endpoint` (`None`: AWS S3, over HTTPS) is plain HTTP, named as
/// such: no connection to it uses TLS.
fn plain_http(endpoint: Option<&str>) -> bool {
    endpoint.is_some_and(|e| has_scheme(e, "http://"))
}

/// Whether `endpoint` starts with `scheme` (`"https://"`), in any case.
fn has_scheme(endpoint: &str, scheme: &str) -> bool {
    endpoint
        .trim_start()
        .get(..scheme.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
}

/// Where the repository lives and how to talk to the store.
#[derive(Clone, Debug)]
pub struct S3Config {
    /// `http(s)://host[:port]` of a self-hosted server; `None`: AWS S3.
    pub endpoint: Option<String>,
    pub bucket: String,
    /// Key prefix of the repository inside the bucket, without slashes at
    /// either end; empty: the bucket's root.
    pub prefix: String,
    /// `None`: `us-east-1`.
    pub region: Option<String>,
    /// `None` (with the secret also `None`): object_store's default
    /// credential chain (instance metadata, web identity).
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// Path-style requests (`endpoint/bucket/key`) instead of virtual hosts.
    pub path_style: bool,
    /// Lifetime of a lock lease not refreshed by its holder.
    pub lease: Duration,
    /// Retries of a failed request (5xx, timeout, connection failure).
    pub max_retries: usize,
    /// Time after which a request is not retried any more.
    pub retry_timeout: Duration,
    /// Time to establish a connection before the attempt counts as failed.
    pub connect_timeout: Duration,
    /// Time one attempt of a request may take, its body included, before
    /// it counts as failed (a store that accepted the connection and never
    /// answers); then it is retried like any failure.
    pub request_timeout: Duration,
    pub conditional_writes: ConditionalWrites,
    /// Whole-object writes a writer keeps in flight
    /// ([`Backend::write_parallelism`]): a backup uploads this many
    /// containers at once.
    pub uploads_in_flight: usize,
    /// Reads a reader keeps in flight ([`Backend::read_parallelism`]): a
    /// restore fetches this many containers at once.
    pub downloads_in_flight: usize,
    pub payload_signing: PayloadSigning,
}

impl S3Config {
    /// A configuration with the defaults for everything but the location.
    pub fn new(endpoint: Option<String>, bucket: &str, prefix: &str) -> S3Config {
        S3Config {
            endpoint,
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            region: None,
            access_key_id: None,
            secret_access_key: None,
            session_token: None,
            path_style: true,
            lease: DEFAULT_LEASE,
            max_retries: 6,
            retry_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            conditional_writes: ConditionalWrites::Detect,
            uploads_in_flight: DEFAULT_UPLOADS_IN_FLIGHT,
            downloads_in_flight: DEFAULT_DOWNLOADS_IN_FLIGHT,
            payload_signing: PayloadSigning::ByScheme,
        }
    }

    /// `s3:https://host:9000/bucket/prefix` or `s3://bucket/prefix`.
    pub fn describe(&self) -> String {
        let tail = if self.prefix.is_empty() {
            self.bucket.clone()
        } else {
            format!("{}/{}", self.bucket, self.prefix)
        };
        match &self.endpoint {
            Some(endpoint) => format!("s3:{}/{tail}", endpoint.trim_end_matches('/')),
            None => format!("s3://{tail}"),
        }
    }
}

/// What the backend and its lock guards share.
struct Inner {
    store: AmazonS3,
    runtime: tokio::runtime::Runtime,
    config: S3Config,
    /// Whether the store refuses a conditional PUT over an existing object.
    conditional: OnceLock<bool>,
    /// The probe of `conditional` running in the background
    /// (`S3Backend::start_probe`), until someone waits for it.
    probing: std::sync::Mutex<Option<tokio::task::JoinHandle<ProbeResult>>>,
    /// Whether a background probe was ever started (at most one is).
    probe_started: std::sync::atomic::AtomicBool,
}

/// What a conditional-write probe found, or the key it failed on and why.
type ProbeResult = std::result::Result<bool, (String, object_store::Error)>;

/// A repository in an S3 bucket. Cheap to clone: clones share the client.
#[derive(Clone)]
pub struct S3Backend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for S3Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Backend({})", self.inner.config.describe())
    }
}

impl S3Backend {
    /// Connects and checks that the bucket answers (one LIST request), so a
    /// refused credential, a missing bucket or an unreachable endpoint is
    /// reported here, in one line, rather than by the first read.
    pub fn open(config: S3Config) -> Result<S3Backend> {
        if config.bucket.is_empty() || config.bucket.contains('/') {
            return Err(Error::invalid(format!(
                "invalid S3 bucket name {:?}",
                config.bucket
            )));
        }
        if !config.prefix.is_empty() {
            validate_key(&config.prefix)
                .map_err(|_| Error::invalid(format!("invalid S3 prefix {:?}", config.prefix)))?;
        }
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&config.bucket)
            .with_region(config.region.as_deref().unwrap_or("us-east-1"))
            .with_virtual_hosted_style_request(!config.path_style)
            .with_unsigned_payload(!config.payload_signing.signs(config.endpoint.as_deref()))
            .with_retry(RetryConfig {
                backoff: Default::default(),
                max_retries: config.max_retries,
                retry_timeout: config.retry_timeout,
            })
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    // A plain-HTTP endpoint makes no TLS connection, so the
                    // system's trust store is not read: loading and decoding
                    // it was 2% of an incremental backup's CPU
                    // (bench/README.md, "writer-cpu.sh"). A redirect to
                    // HTTPS would then fail verification, not go unchecked.
                    .with_no_system_certificates(plain_http(config.endpoint.as_deref()))
                    .with_connect_timeout(config.connect_timeout)
                    .with_timeout(config.request_timeout),
            );
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint.trim_end_matches('/'));
        }
        if let Some(id) = &config.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &config.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        if let Some(token) = &config.session_token {
            builder = builder.with_token(token);
        }
        let store = builder.build().map_err(|e| {
            Error::invalid(format!(
                "cannot use {}: {}",
                config.describe(),
                errors::innermost(&e)
            ))
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cairn-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the S3 client runtime", e))?;
        let backend = S3Backend {
            inner: Arc::new(Inner {
                store,
                runtime,
                config,
                conditional: OnceLock::new(),
                probing: Default::default(),
                probe_started: Default::default(),
            }),
        };
        backend.probe()?;
        Ok(backend)
    }

    fn probe(&self) -> Result<()> {
        let dir = self.inner.path_of_dir("");
        self.inner
            .block_on(self.inner.store.list_with_delimiter(Some(&dir)))
            .map(drop)
            .map_err(|e| self.inner.error("listing", "", e))
    }

    /// Whether `create_new` uses the store's conditional PUT (probing now
    /// if it was not probed yet).
    pub fn conditional_writes_honoured(&self) -> Result<bool> {
        if self.inner.config.conditional_writes == ConditionalWrites::Emulate {
            return Ok(false);
        }
        if let Some(known) = self.inner.conditional.get() {
            return Ok(*known);
        }
        let started = self
            .inner
            .probing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let probed = match started {
            Some(task) => match self.inner.block_on(task) {
                Ok(probed) => probed,
                // The task did not finish (a panic): probe here.
                Err(_) => self.inner.block_on(self.inner.probe_conditional()),
            },
            None => self.inner.block_on(self.inner.probe_conditional()),
        };
        let honoured = probed
            .map_err(|(key, e)| self.inner.error("probing conditional writes with", &key, e))?;
        Ok(*self.inner.conditional.get_or_init(|| honoured))
    }

    /// Starts probing conditional writes in the background, once: a
    /// process taking the writer lock creates objects with `create_new`
    /// soon (a backup's session), and the probe's three requests then
    /// overlap the lock's and the index's instead of preceding them.
    fn start_probe(&self) {
        let inner = &self.inner;
        if inner.config.conditional_writes == ConditionalWrites::Emulate
            || inner.conditional.get().is_some()
            || inner
                .probe_started
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        *inner.probing.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(inner.runtime.spawn(inner.probe_conditional()));
    }

    fn check_key(key: &str) -> Result<()> {
        validate_key(key)?;
        if key.split('/').next() == Some(LOCKS_DIR) {
            return Err(Error::invalid(format!(
                "invalid object key {key:?}: `{LOCKS_DIR}/` is reserved"
            )));
        }
        Ok(())
    }

    fn put_create(&self, key: &str, data: &[u8]) -> Result<bool> {
        let inner = &self.inner;
        let path = inner.path(key)?;
        // A create interrupted in transit is retried here too: object_store
        // leaves it to the caller, since the store may have applied it.
        // A retry then either creates the object or is refused, by another
        // writer's object or by this very one, and a refusal is what the
        // callers are ready for (below). Without the retry, a server that
        // closed a kept-alive connection as the create went out failed a
        // backup (3 of 8 concurrent first backups in one bench run).
        let transient =
            |e: &object_store::Error| errors::is_transient_conflict(e) || errors::is_interrupted(e);
        let put = retrying_while(
            || {
                let opts = PutOptions::from(PutMode::Create);
                inner.store.put_opts(&path, data.to_vec().into(), opts)
            },
            transient,
        );
        match inner.block_on(put) {
            Ok(_) => Ok(true),
            // Also a conditional PUT that the store applied but whose
            // answer was lost, retried and refused by its own object: the
            // callers whose payloads are theirs alone read it back
            // (`cairn_core::backend::create_new_or_own`, `session.rs`); to
            // the rest a lost slot is harmless.
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(inner.error("creating", key, e)),
        }
    }

    /// `create_new` where the store ignores `If-None-Match`: check and
    /// write under the key's own lease lock (`lock::create_lock`). A
    /// contender that finds the lock held looks for the key between its
    /// polls and answers `false` once it exists (the holder created it):
    /// a create at that moment would have been refused too. Writers racing
    /// for one id slot then each pay one look instead of queuing for the
    /// lock only to find the slot taken.
    fn create_under_lock(&self, key: &str, data: &[u8]) -> Result<bool> {
        let lock = lock::create_lock(key);
        let mut taken = || self.exists(key);
        let guard =
            lock::acquire_unless(&self.inner, &lock, LockMode::Exclusive, true, &mut taken)?;
        let Some(_guard) = guard else {
            return Ok(false);
        };
        if self.exists(key)? {
            return Ok(false);
        }
        self.write_atomic(key, data)?;
        Ok(true)
    }
}

impl Inner {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn full_key(&self, key: &str) -> String {
        if self.config.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.config.prefix)
        }
    }

    fn path(&self, key: &str) -> Result<Path> {
        Path::parse(self.full_key(key))
            .map_err(|_| Error::invalid(format!("invalid object key {key:?} for S3")))
    }

    /// The listing root for a directory key (`""` or ending in `/`).
    fn path_of_dir(&self, dir: &str) -> Path {
        Path::from(
            self.full_key(dir.trim_end_matches('/'))
                .trim_end_matches('/'),
        )
    }

    /// The repository key of a listed object, if it lies under the prefix.
    fn key_of(&self, location: &Path) -> Option<String> {
        let full = location.as_ref();
        if self.config.prefix.is_empty() {
            return Some(full.to_owned());
        }
        full.strip_prefix(self.config.prefix.as_str())?
            .strip_prefix('/')
            .map(str::to_owned)
    }

    fn error(&self, doing: &str, key: &str, e: object_store::Error) -> Error {
        errors::map(&self.config, doing, key, e)
    }

    /// Writes `data` as object `key`: one PUT up to [`MULTIPART_THRESHOLD`]
    /// (bytes given away become the body as they are, borrowed ones are
    /// copied into it), a multipart upload above.
    fn put(&self, key: &str, data: Cow<'_, [u8]>) -> Result<()> {
        if data.len() <= MULTIPART_THRESHOLD {
            return self.put_whole(key, PutPayload::from(data.into_owned()));
        }
        let path = self.path(key)?;
        let put = async {
            let upload = self.store.put_multipart(&path).await?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
            for part in data.chunks(PART_SIZE) {
                if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    // Best effort: a failed abort leaves an incomplete upload
                    // that is invisible and that lifecycle rules expire.
                    let _ = writer.abort().await;
                    return Err(e);
                }
                writer.write(part);
            }
            writer.finish().await.map(drop)
        };
        self.block_on(put)
            .map_err(|e| self.error("writing", key, e))
    }

    /// One PUT of `payload` (a payload's clones share its bytes, so a
    /// retried attempt copies nothing).
    fn put_whole(&self, key: &str, payload: PutPayload) -> Result<()> {
        let path = self.path(key)?;
        let put = || self.store.put(&path, payload.clone());
        self.block_on(retrying_conflicts(put))
            .map(drop)
            .map_err(|e| self.error("writing", key, e))
    }

    fn head(&self, key: &str) -> Result<u64> {
        let path = self.path(key)?;
        match self.block_on(self.store.head(&path)) {
            Ok(meta) => Ok(meta.size),
            Err(e) => Err(self.error("reading the size of", key, e)),
        }
    }

    fn delete_path(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        match self.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("deleting", key, e)),
        }
    }

    /// Deletes the objects in bulk requests (`DeleteObjects`, a thousand
    /// keys each) where the store allows them.
    fn delete_paths(&self, keys: &[String]) -> Result<()> {
        if keys.len() <= 1 {
            return keys.iter().try_for_each(|k| self.delete_path(k));
        }
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<_>>>()?;
        let results: Vec<object_store::Result<Path>> = self.block_on(
            self.store
                .delete_stream(futures_util::stream::iter(paths.into_iter().map(Ok)).boxed())
                .collect(),
        );
        for r in results {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    let what = format!("{} objects from {}", keys.len(), keys[0]);
                    return Err(self.error("deleting", &what, e));
                }
            }
        }
        Ok(())
    }

    /// Every object under the directory key `dir` with its listing metadata.
    fn list_meta(&self, dir: &str) -> Result<Vec<(String, object_store::ObjectMeta)>> {
        let root = self.path_of_dir(dir);
        let listed: Vec<object_store::ObjectMeta> = self
            .block_on(self.store.list(Some(&root)).try_collect())
            .map_err(|e| self.error("listing", dir, e))?;
        Ok(listed
            .into_iter()
            .filter_map(|meta| Some((self.key_of(&meta.location)?, meta)))
            .collect())
    }

    /// Writes a probe object, then PUTs over it with `If-None-Match: *`: a
    /// store that honours the condition refuses the second write. Owns
    /// what it uses (a clone of the client), so it may run as a task.
    fn probe_conditional(&self) -> impl Future<Output = ProbeResult> + Send + 'static {
        let key = format!("{LOCKS_DIR}/.conditional-probe-{}", lock::random_id());
        let path = Path::from(self.full_key(&key));
        let store = self.store.clone();
        async move {
            let fail = |e| (key.clone(), e);
            retrying_conflicts(|| store.put(&path, PutPayload::from_static(b"probe")))
                .await
                .map_err(fail)?;
            let second = retrying_conflicts(|| {
                let opts = PutOptions::from(PutMode::Create);
                store.put_opts(&path, PutPayload::from_static(b"probe"), opts)
            })
            .await;
            let honoured = match second {
                Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. }) => Ok(true),
                Ok(_) | Err(object_store::Error::NotImplemented { .. }) => Ok(false),
                Err(e) => Err(e),
            };
            let deleted = match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            };
            let honoured = honoured.map_err(fail)?;
            deleted.map_err(fail)?;
            Ok(honoured)
        }
    }
}

impl Backend for S3Backend {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        Self::check_key(key)?;
        let inner = &self.inner;
        let path = inner.path(key)?;
        let get = async { inner.store.get(&path).await?.bytes().await };
        inner
            .block_on(get)
            .map(|b| b.to_vec())
            .map_err(|e| inner.error("reading", key, e))
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        Self::check_key(key)?;
        let inner = &self.inner;
        let end = offset.checked_add(len as u64);
        let (Some(end), true) = (end, len > 0) else {
            // No byte to fetch (or an impossible range): only the size decides.
            let size = inner.head(key)?;
            return match end {
                Some(end) if end <= size => Ok(Vec::new()),
                _ => Err(truncated(&self.describe_key(key), offset, len, size)),
            };
        };
        let path = inner.path(key)?;
        let opts = GetOptions::new().with_range(Some(GetRange::Bounded(offset..end)));
        let get = async {
            let result = inner.store.get_opts(&path, opts).await?;
            let size = result.meta.size;
            Ok::<_, object_store::Error>((size, result.bytes().await?))
        };
        match inner.block_on(get) {
            Ok((_, bytes)) if bytes.len() == len => Ok(bytes.to_vec()),
            Ok((size, _)) => Err(truncated(&self.describe_key(key), offset, len, size)),
            Err(e @ object_store::Error::NotFound { .. }) => Err(inner.error("reading", key, e)),
            Err(e) => {
                // A range starting past the end is refused (416) by S3; the
                // size tells that apart from a failure of the store.
                match inner.head(key) {
                    Ok(size) if end > size => {
                        Err(truncated(&self.describe_key(key), offset, len, size))
                    }
                    _ => Err(inner.error("reading", key, e)),
                }
            }
        }
    }

    /// One suffix-range GET (`bytes=-len`), whose answer carries the
    /// object's size: a container's metadata section costs one request,
    /// not a HEAD and a GET. Servers refuse a suffix range of an empty
    /// object (416); that case, and a zero `len`, take the HEAD.
    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        Self::check_key(key)?;
        let inner = &self.inner;
        if len == 0 {
            return Ok((inner.head(key)?, Vec::new()));
        }
        let path = inner.path(key)?;
        let opts = GetOptions::new().with_range(Some(GetRange::Suffix(len as u64)));
        let get = async {
            let result = inner.store.get_opts(&path, opts).await?;
            let size = result.meta.size;
            Ok::<_, object_store::Error>((size, result.bytes().await?))
        };
        match inner.block_on(get) {
            Ok((size, bytes)) if bytes.len() as u64 == size.min(len as u64) => {
                Ok((size, bytes.to_vec()))
            }
            Ok((size, bytes)) => Err(Error::corrupt(
                self.describe_key(key),
                format!(
                    "the store answered {} bytes for the last {len} of {size}",
                    bytes.len()
                ),
            )),
            Err(e @ object_store::Error::NotFound { .. }) => Err(inner.error("reading", key, e)),
            Err(e) => match inner.head(key) {
                Ok(0) => Ok((0, Vec::new())),
                _ => Err(inner.error("reading", key, e)),
            },
        }
    }

    fn size(&self, key: &str) -> Result<u64> {
        Self::check_key(key)?;
        self.inner.head(key)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        Self::check_key(key)?;
        match self.inner.head(key) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        Self::check_key(key)?;
        self.inner.put(key, Cow::Borrowed(data))
    }

    fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> Result<()> {
        Self::check_key(key)?;
        self.inner.put(key, Cow::Owned(data))
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        Self::check_key(key)?;
        if self.conditional_writes_honoured()? {
            self.put_create(key, data)
        } else {
            self.create_under_lock(key, data)
        }
    }

    fn delete(&self, key: &str) -> Result<()> {
        Self::check_key(key)?;
        self.inner.delete_path(key)
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        keys.iter().try_for_each(|k| Self::check_key(k))?;
        self.inner.delete_paths(keys)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        validate_prefix(prefix)?;
        let dir = match prefix.rfind('/') {
            Some(i) => &prefix[..=i],
            None => "",
        };
        if dir.split('/').next() == Some(LOCKS_DIR) {
            return Ok(Vec::new());
        }
        let mut keys: Vec<String> = self
            .inner
            .list_meta(dir)?
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| key.starts_with(prefix))
            .filter(|key| key.split('/').next() != Some(LOCKS_DIR))
            .collect();
        keys.sort();
        Ok(keys)
    }

    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        validate_lock_name(name)?;
        if name.starts_with('.') {
            return Err(Error::invalid(format!(
                "invalid lock name {name:?}: names starting with `.` are reserved"
            )));
        }
        // Every process that writes takes the writer lock first.
        if name == "write" {
            self.start_probe();
        }
        lock::acquire(&self.inner, name, mode, wait)
    }

    /// Every write is one PUT (or a multipart upload, invisible until
    /// completed): nothing half-written is ever visible.
    fn leaves_temporaries(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        self.inner.config.describe()
    }

    fn write_parallelism(&self) -> usize {
        self.inner.config.uploads_in_flight.max(1)
    }

    fn read_parallelism(&self) -> usize {
        self.inner.config.downloads_in_flight.max(1)
    }
}

impl S3Backend {
    fn describe_key(&self, key: &str) -> String {
        format!("{key} in {}", self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_http, PayloadSigning};

    #[test]
    fn bodies_are_signed_over_plain_http_only() {
        let by_scheme = PayloadSigning::ByScheme;
        assert!(by_scheme.signs(Some("http://127.0.0.1:9000")));
        assert!(by_scheme.signs(Some("HTTP://minio.lan")));
        assert!(!by_scheme.signs(Some("https://s3.example.com")));
        assert!(!by_scheme.signs(Some("HTTPS://s3.example.com/")));
        // AWS S3 itself: HTTPS.
        assert!(!by_scheme.signs(None));
        assert!(PayloadSigning::Signed.signs(Some("https://s3.example.com")));
        assert!(!PayloadSigning::Unsigned.signs(Some("http://127.0.0.1:9000")));
    }

    #[test]
    fn only_an_endpoint_named_http_goes_without_the_trust_store() {
        assert!(plain_http(Some("http://127.0.0.1:9000")));
        assert!(plain_http(Some(" HTTP://minio.lan")));
        assert!(!plain_http(Some("https://s3.example.com")));
        assert!(!plain_http(Some("minio.lan:9000")));
        assert!(!plain_http(None));
    }
}
