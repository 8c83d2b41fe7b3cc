//! [`FaultBackend`]: fault injection for crash and corruption tests.
//!
//! A `FaultBackend` wraps any backend and consults a shared [`FaultPlan`]
//! (an `Arc`, so a test can re-arm it while the engine runs) on every call.
//! With an empty plan it is a transparent pass-through. The modes:
//!
//! * **Crash after N writes** ([`FaultPlan::crash_after_writes`]): the next
//!   `n` `write_atomic` calls go through; the one after that and every later
//!   mutating call (`write_atomic`, `delete`, `clean_temporaries`) fails with
//!   an Io error whose source is "injected crash" (see [`is_injected_crash`]),
//!   and nothing reaches the inner backend. This models the process dying at
//!   that point: the inner backend holds exactly what was durable. With
//!   [`FaultPlan::set_crash_reads`] reads, `size`, `exists` and `list` fail
//!   too once crashed. [`FaultPlan::restart`] ends the crash ("the process
//!   restarted") so the same store can be reopened and recovered.
//! * **Fail the Nth write once** ([`FaultPlan::fail_write_once`]): the `nth`
//!   `write_atomic` call from now fails with the chosen [`InjectedError`]
//!   (e.g. [`InjectedError::DISK_FULL`], ENOSPC) without writing anything,
//!   and later calls proceed normally. This models a transient full disk or
//!   I/O error; several can be armed at once.
//! * **Corrupt reads** ([`FaultPlan::corrupt_read`],
//!   [`FaultPlan::corrupt_reads_with_prefix`]): every read of a matching key
//!   whose range covers the chosen byte returns data with one bit flipped;
//!   the stored object is untouched. This models media corruption.
//!
//! Counters: writes attempted, injected failures, corrupted reads.

use cairn_core::{Backend, Error, Result};
use parking_lot::Mutex;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

/// The error a [`FaultPlan::fail_write_once`] failure reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedError {
    /// An `io::Error` of this kind.
    Kind(io::ErrorKind),
    /// An `io::Error` from this raw OS error code (`errno`).
    Os(i32),
}

impl InjectedError {
    /// ENOSPC: no space left on device.
    pub const DISK_FULL: InjectedError = InjectedError::Os(28);
    /// EIO: a generic I/O error.
    pub const EIO: InjectedError = InjectedError::Os(5);

    pub fn to_io_error(self) -> io::Error {
        match self {
            InjectedError::Kind(kind) => io::Error::new(kind, "injected I/O failure"),
            InjectedError::Os(code) => io::Error::from_raw_os_error(code),
        }
    }
}

/// Where in an object a corruption flips its bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptAt {
    /// Byte offset from the start of the object.
    Start(u64),
    /// Byte offset back from the end: `End(1)` is the last byte.
    End(u64),
}

#[derive(Clone, Debug)]
struct Corruption {
    key: String,
    prefix: bool,
    at: CorruptAt,
    bit: u8,
}

impl Corruption {
    fn matches(&self, key: &str) -> bool {
        if self.prefix {
            key.starts_with(&self.key)
        } else {
            key == self.key
        }
    }
}

/// The source of an injected crash error (displays as "injected crash").
#[derive(Debug)]
struct InjectedCrash;

impl fmt::Display for InjectedCrash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("injected crash")
    }
}

impl std::error::Error for InjectedCrash {}

/// True if `err` was produced by a [`FaultPlan`] crash.
pub fn is_injected_crash(err: &Error) -> bool {
    matches!(err, Error::Io { source, .. }
        if source.get_ref().is_some_and(|e| e.is::<InjectedCrash>()))
}

const NEVER: u64 = u64::MAX;

/// What a [`FaultBackend`] should do wrong. Shared (`Arc`) and safe to change
/// from any thread while the backend is in use. `FaultPlan::default()` is empty.
#[derive(Debug)]
pub struct FaultPlan {
    writes_attempted: AtomicU64,
    writes_failed: AtomicU64,
    reads_corrupted: AtomicU64,
    /// The absolute (1-based) write number that crashes, or `NEVER`.
    crash_at: AtomicU64,
    crashed: AtomicBool,
    crash_reads: AtomicBool,
    /// Absolute write numbers that fail once, with their error.
    fail_once: Mutex<Vec<(u64, InjectedError)>>,
    corruptions: Mutex<Vec<Corruption>>,
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan {
            writes_attempted: AtomicU64::new(0),
            writes_failed: AtomicU64::new(0),
            reads_corrupted: AtomicU64::new(0),
            crash_at: AtomicU64::new(NEVER),
            crashed: AtomicBool::new(false),
            crash_reads: AtomicBool::new(false),
            fail_once: Mutex::new(Vec::new()),
            corruptions: Mutex::new(Vec::new()),
        }
    }
}

impl FaultPlan {
    /// An empty plan, ready to share.
    pub fn new() -> Arc<FaultPlan> {
        Arc::new(FaultPlan::default())
    }

    /// The next `n` writes succeed; write `n + 1` (counted from now) crashes,
    /// and so does every mutating call after it. `n == 0` crashes the next write.
    pub fn crash_after_writes(&self, n: u64) {
        let now = self.writes_attempted.load(SeqCst);
        self.crash_at
            .store(now.saturating_add(n).saturating_add(1), SeqCst);
    }

    /// Crash right now: every later mutating call fails.
    pub fn crash_now(&self) {
        self.crashed.store(true, SeqCst);
    }

    /// Whether reads (and `size`, `exists`, `list`) fail too once crashed.
    pub fn set_crash_reads(&self, on: bool) {
        self.crash_reads.store(on, SeqCst);
    }

    /// Whether the crash has happened.
    pub fn crashed(&self) -> bool {
        self.crashed.load(SeqCst)
    }

    /// Ends and disarms the crash (the process "restarted"); other faults stay.
    pub fn restart(&self) {
        self.crash_at.store(NEVER, SeqCst);
        self.crashed.store(false, SeqCst);
    }

    /// The `nth` `write_atomic` call from now (1 = the next one) fails once
    /// with `error`, writing nothing; later calls proceed normally.
    pub fn fail_write_once(&self, nth: u64, error: InjectedError) {
        assert!(nth >= 1, "fail_write_once: nth is 1-based");
        let at = self.writes_attempted.load(SeqCst).saturating_add(nth);
        self.fail_once.lock().push((at, error));
    }

    /// Reads of exactly `key` return data with bit `bit` (0..8) of the byte
    /// at `at` flipped, whenever the read range covers that byte.
    pub fn corrupt_read(&self, key: &str, at: CorruptAt, bit: u8) {
        self.add_corruption(key, false, at, bit);
    }

    /// Like [`FaultPlan::corrupt_read`] for every key starting with `prefix`.
    pub fn corrupt_reads_with_prefix(&self, prefix: &str, at: CorruptAt, bit: u8) {
        self.add_corruption(prefix, true, at, bit);
    }

    fn add_corruption(&self, key: &str, prefix: bool, at: CorruptAt, bit: u8) {
        assert!(bit < 8, "bit index must be 0..8");
        self.corruptions.lock().push(Corruption {
            key: key.to_owned(),
            prefix,
            at,
            bit,
        });
    }

    /// Removes all read corruptions.
    pub fn clear_corruptions(&self) {
        self.corruptions.lock().clear();
    }

    /// Disarms every fault (crash, pending write failures, corruptions);
    /// the counters keep counting.
    pub fn reset(&self) {
        self.restart();
        self.crash_reads.store(false, SeqCst);
        self.fail_once.lock().clear();
        self.clear_corruptions();
    }

    /// `write_atomic` calls seen, including failed ones.
    pub fn writes_attempted(&self) -> u64 {
        self.writes_attempted.load(SeqCst)
    }

    /// Calls failed by injection (crash or fail-once), writes and deletes alike.
    pub fn writes_failed(&self) -> u64 {
        self.writes_failed.load(SeqCst)
    }

    /// Reads that returned at least one flipped bit.
    pub fn reads_corrupted(&self) -> u64 {
        self.reads_corrupted.load(SeqCst)
    }

    fn crash_error(&self, what: String) -> Error {
        Error::io(what, io::Error::other(InjectedCrash))
    }

    /// Fails a mutating call if the process has "crashed".
    fn check_mutation(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.crashed() {
            self.writes_failed.fetch_add(1, SeqCst);
            return Err(self.crash_error(what()));
        }
        Ok(())
    }

    fn check_read(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.crashed() && self.crash_reads.load(SeqCst) {
            return Err(self.crash_error(what()));
        }
        Ok(())
    }

    /// Numbers a write and decides whether it fails.
    fn before_write(&self, key: &str) -> Result<()> {
        let n = self.writes_attempted.fetch_add(1, SeqCst) + 1;
        let what = || format!("writing {key}");
        self.check_mutation(what)?;
        if n >= self.crash_at.load(SeqCst) {
            self.crashed.store(true, SeqCst);
            self.writes_failed.fetch_add(1, SeqCst);
            return Err(self.crash_error(format!("writing {key} (write #{n})")));
        }
        let injected = {
            let mut pending = self.fail_once.lock();
            pending
                .iter()
                .position(|&(at, _)| at == n)
                .map(|i| pending.swap_remove(i).1)
        };
        if let Some(error) = injected {
            self.writes_failed.fetch_add(1, SeqCst);
            return Err(Error::io(
                format!("writing {key} (injected failure of write #{n})"),
                error.to_io_error(),
            ));
        }
        Ok(())
    }
}

/// A backend wrapper that injects the faults of a shared [`FaultPlan`].
#[derive(Debug)]
pub struct FaultBackend<B> {
    inner: B,
    plan: Arc<FaultPlan>,
}

impl<B: Backend> FaultBackend<B> {
    pub fn new(inner: B, plan: Arc<FaultPlan>) -> Self {
        FaultBackend { inner, plan }
    }

    pub fn plan(&self) -> &Arc<FaultPlan> {
        &self.plan
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    pub fn into_inner(self) -> B {
        self.inner
    }

    /// Applies matching corruptions to `buf`, which holds bytes
    /// `offset..offset + buf.len()` of `key`, an object of `size` bytes
    /// (`size` is looked up only if an `End` corruption needs it).
    fn corrupt(&self, key: &str, offset: u64, buf: &mut [u8], size: Option<u64>) -> Result<()> {
        let matching: Vec<Corruption> = {
            let all = self.plan.corruptions.lock();
            all.iter().filter(|c| c.matches(key)).cloned().collect()
        };
        if matching.is_empty() {
            return Ok(());
        }
        let mut size = size;
        let mut flipped = false;
        for c in matching {
            let pos = match c.at {
                CorruptAt::Start(p) => Some(p),
                CorruptAt::End(back) => {
                    let s = match size {
                        Some(s) => s,
                        None => *size.insert(self.inner.size(key)?),
                    };
                    s.checked_sub(back)
                }
            };
            if let Some(pos) = pos {
                if pos >= offset && pos - offset < buf.len() as u64 {
                    buf[(pos - offset) as usize] ^= 1 << c.bit;
                    flipped = true;
                }
            }
        }
        if flipped {
            self.plan.reads_corrupted.fetch_add(1, SeqCst);
        }
        Ok(())
    }
}

impl<B: Backend> Backend for FaultBackend<B> {
    cairn_core::delegate_backend!(inner: lock, describe, write_parallelism, read_parallelism);

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.plan.check_read(|| format!("reading {key}"))?;
        let mut data = self.inner.read(key)?;
        let size = data.len() as u64;
        self.corrupt(key, 0, &mut data, Some(size))?;
        Ok(data)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.plan.check_read(|| format!("reading {key}"))?;
        let mut data = self.inner.read_at(key, offset, len)?;
        self.corrupt(key, offset, &mut data, None)?;
        Ok(data)
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        self.plan.check_read(|| format!("reading {key}"))?;
        let (size, mut data) = self.inner.read_tail(key, len)?;
        let offset = size - data.len() as u64;
        self.corrupt(key, offset, &mut data, Some(size))?;
        Ok((size, data))
    }

    fn size(&self, key: &str) -> Result<u64> {
        self.plan.check_read(|| format!("reading size of {key}"))?;
        self.inner.size(key)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        self.plan.check_read(|| format!("checking {key}"))?;
        self.inner.exists(key)
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        self.plan.before_write(key)?;
        self.inner.write_atomic(key, data)
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.plan.before_write(key)?;
        self.inner.create_new(key, data)
    }

    /// A delete is numbered like a write: a crash can fall between two
    /// deletes (garbage collection deletes many objects in a row).
    fn delete(&self, key: &str) -> Result<()> {
        self.plan.before_write(key)?;
        self.inner.delete(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.plan.check_read(|| format!("listing {prefix}"))?;
        self.inner.list(prefix)
    }

    fn clean_temporaries(&self) -> Result<usize> {
        self.plan
            .check_mutation(|| "cleaning temporaries".to_owned())?;
        self.inner.clean_temporaries()
    }

    fn leaves_temporaries(&self) -> bool {
        self.inner.leaves_temporaries()
    }

    fn has_temporaries(&self) -> Result<bool> {
        self.inner.has_temporaries()
    }
}
