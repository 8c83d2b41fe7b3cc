//! Repository locks on an object store: leases that need no conditional
//! write, only strong list-after-write consistency.
//!
//! A lock `NAME` is the set of lease objects `locks/NAME/<lease>`, one per
//! holder or contender; the lease's name carries everything a contender
//! needs from a LIST: `<order>-<random>-<mode>-<ttl ms>`, where `order` is
//! the contender's clock in nanoseconds when it first tried (16 hex digits,
//! so names sort by it). The body says who holds it (host, pid), for the
//! message of a refused lock.
//!
//! To take the lock, a contender PUTs its lease, then LISTs the lock's
//! leases, and holds the lock when that listing shows no other live lease
//! that conflicts with its mode (exclusive conflicts with everything).
//! Why two holders never coexist: a contender keeps its lease from the PUT
//! until it gives up or releases, so if A and B both won, A's LIST (after
//! A's PUT) missed B's lease and B's LIST (after B's PUT) missed A's:
//! LIST_A < PUT_B < LIST_B < PUT_A < LIST_A, impossible. On a conflict, a
//! contender that is not the smallest `(order, random)` of the conflicting
//! leases deletes its lease and then only watches the listing until no
//! conflicting lease is left (writing its lease again at least every few
//! rounds, so a dead holder's lease is judged and removed); the smallest
//! keeps its lease and polls, so racers cannot all back off forever, and
//! its listing does not keep meeting the others' short-lived leases.
//!
//! Holders refresh their lease (a new PUT) from a background thread every
//! quarter of its time to live. A lease whose last write is older than its
//! time to live belongs to a dead holder: it is ignored and deleted. Ages
//! are measured on the store's clock only (a lease's `LastModified` against
//! that of the contender's own lease, written just before the listing), so
//! clients' clocks need not agree. A holder stalled longer than its time to
//! live (suspended, cut off) can lose its lock without noticing; the lease
//! time bounds how long a crashed holder blocks others, and must exceed any
//! stall a live holder can have.

use super::{Inner, LOCKS_DIR};
use cairn_core::{Error, LockGuard, LockMode, Result};
use std::borrow::Cow;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Lease time of lock objects unless configured otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(120);
/// Prefix of the locks under which `create_new` runs on stores ignoring
/// `If-None-Match` (names starting with `.` are refused by `Backend::lock`).
const CREATE_LOCK_PREFIX: &str = ".create-";

/// The lock that excludes the other emulated creates of `key`: only creates
/// of one key must exclude each other, and one lock for every key queued
/// every writer's slots, deltas and commit markers behind each other (eight
/// writers on Garage committed 0.27x of one writer's backups a minute). A
/// hash collision only makes two keys share a lock.
pub(super) fn create_lock(key: &str) -> String {
    let hash = blake3::hash(key.as_bytes()).to_hex();
    format!("{CREATE_LOCK_PREFIX}{}", &hash[..24])
}
/// Longest pause between two polls of a waiting contender.
const MAX_POLL_MS: u64 = 500;
/// A contender that backed off writes its lease again at least every this
/// many rounds of watching the lock's listing.
const WATCH_ROUNDS: u32 = 8;
/// Rounds of the waiting loop a failed lease PUT may take before it fails the lock.
const PUT_ROUNDS: u32 = 5;
/// Slack for `LastModified`, which S3 keeps to the second.
const CLOCK_GRAIN_MS: i64 = 1000;

pub(super) fn random_id() -> String {
    let mut bytes = [0u8; 8];
    // Without an entropy source, the time and pid still separate holders
    // on one host; the clock part of a lease name separates the rest.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = now_nanos();
        bytes = (nanos ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    format!("{:016x}", u64::from_le_bytes(bytes))
}

/// A fraction in [0, 0.5).
fn jitter() -> f64 {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    f64::from(byte[0]) / 512.0
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A lease as named on the store.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    order: u64,
    random: String,
    exclusive: bool,
    ttl_ms: u64,
}

impl Lease {
    fn name(&self) -> String {
        let mode = if self.exclusive { 'x' } else { 's' };
        format!("{:016x}-{}-{mode}-{}", self.order, self.random, self.ttl_ms)
    }

    /// `None` for a name this protocol did not write.
    fn parse(name: &str) -> Option<Lease> {
        let mut parts = name.split('-');
        let order = u64::from_str_radix(parts.next()?, 16).ok()?;
        let random = parts.next()?.to_owned();
        let exclusive = match parts.next()? {
            "x" => true,
            "s" => false,
            _ => return None,
        };
        let ttl_ms = parts.next()?.parse().ok()?;
        if parts.next().is_some() || random.is_empty() {
            return None;
        }
        Some(Lease {
            order,
            random,
            exclusive,
            ttl_ms,
        })
    }

    fn rank(&self) -> (u64, &str) {
        (self.order, &self.random)
    }
}

fn lease_key(lock: &str, lease: &Lease) -> String {
    format!("{LOCKS_DIR}/{lock}/{}", lease.name())
}

fn lease_body(lease: &Lease) -> Vec<u8> {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let mode = if lease.exclusive {
        "exclusive"
    } else {
        "shared"
    };
    format!(
        "cairn lock lease\nmode {mode}\nhost {host}\npid {}\n",
        std::process::id()
    )
    .into_bytes()
}

/// What a listing says about the contender's chances.
enum Verdict {
    Won,
    /// Conflicting live leases, by key; `keep`: ours ranks first among them.
    Conflict {
        holder: String,
        keep: bool,
    },
}

fn judge(inner: &Inner, lock: &str, mine: &Lease) -> Result<Verdict> {
    let dir = format!("{LOCKS_DIR}/{lock}/");
    let listed = inner.list_meta(&dir)?;
    let my_key = lease_key(lock, mine);
    let Some(now) = listed
        .iter()
        .find(|(key, _)| *key == my_key)
        .map(|(_, meta)| meta.last_modified.timestamp_millis())
    else {
        return Err(Error::invalid(format!(
            "{}: a lease written to {my_key} is missing from the listing right after; \
             the store is not list-after-write consistent and cannot hold cairn locks",
            inner.config.describe()
        )));
    };
    let mut conflicts: Vec<(String, Option<Lease>)> = Vec::new();
    for (key, meta) in listed {
        if key == my_key {
            continue;
        }
        let name = &key[dir.len()..];
        let lease = Lease::parse(name);
        if let Some(lease) = &lease {
            let age = now - meta.last_modified.timestamp_millis();
            if age > lease.ttl_ms as i64 + CLOCK_GRAIN_MS {
                // A dead holder's lease: another contender may have deleted it too.
                inner.delete_path(&key)?;
                continue;
            }
            if !(lease.exclusive || mine.exclusive) {
                continue;
            }
        }
        // A lease this protocol cannot read counts as a live exclusive one.
        conflicts.push((key, lease));
    }
    if conflicts.is_empty() {
        return Ok(Verdict::Won);
    }
    let keep = conflicts
        .iter()
        .all(|(_, lease)| lease.as_ref().is_some_and(|l| l.rank() > mine.rank()));
    Ok(Verdict::Conflict {
        holder: conflicts.swap_remove(0).0,
        keep,
    })
}

/// Who holds a conflicting lease, from its body (best effort).
fn describe_holder(inner: &Inner, key: &str) -> String {
    let path = match inner.path(key) {
        Ok(path) => path,
        Err(_) => return key.to_owned(),
    };
    let body = inner.block_on(async {
        use object_store::ObjectStoreExt;
        inner.store.get(&path).await?.bytes().await
    });
    let Ok(body) = body else {
        return format!("lease {key}");
    };
    let text = String::from_utf8_lossy(&body);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "{} lock held by host {} pid {}, lease {key} in {}",
        field("mode"),
        field("host"),
        field("pid"),
        inner.config.describe()
    )
}

/// Takes lock `name` (already validated).
pub(super) fn acquire(
    inner: &Arc<Inner>,
    name: &str,
    mode: LockMode,
    wait: bool,
) -> Result<Box<dyn LockGuard>> {
    let guard = acquire_unless(inner, name, mode, wait, &mut || Ok(false))?;
    Ok(guard.expect("a lock that never gives up is taken"))
}

/// Takes lock `name` as [`acquire`] does, but asks `give_up` after each
/// wait for a conflicting holder, and returns `None` (holding nothing)
/// once it answers yes: a contender for an emulated create stops waiting
/// as soon as the key exists.
pub(super) fn acquire_unless(
    inner: &Arc<Inner>,
    name: &str,
    mode: LockMode,
    wait: bool,
    give_up: &mut dyn FnMut() -> Result<bool>,
) -> Result<Option<Box<dyn LockGuard>>> {
    let ttl_ms = (inner.config.lease.as_millis() as u64).max(1);
    let mine = Lease {
        order: now_nanos(),
        random: random_id(),
        exclusive: mode == LockMode::Exclusive,
        ttl_ms,
    };
    let key = lease_key(name, &mine);
    let body = lease_body(&mine);
    // Polls stay well inside the lease time so a kept lease stays live.
    let max_pause = Duration::from_millis((ttl_ms / 4).clamp(10, MAX_POLL_MS));
    let mut pause = Duration::from_millis(20).min(max_pause);
    let mut failed_puts = 0;
    // Rounds since this contender last wrote its lease, 0 while it holds
    // one (a first try, or the first-ranked contender's polls).
    let mut watching = 0u32;
    loop {
        // A contender that backed off only watches the listing until no
        // conflicting lease is left: had it written its lease at every
        // poll, the first-ranked contender's listing would nearly always
        // meet some other contender's lease between its write and its
        // delete, and with a few contenders nobody won for seconds
        // (eight writers racing for one index delta number on Garage).
        // Every WATCH_ROUNDS rounds it writes its lease anyway: only a
        // judged listing deletes a dead holder's lease.
        if watching > 0 && watching < WATCH_ROUNDS && conflicts_listed(inner, name, &mine)? {
            watching += 1;
        } else {
            if let Err(e) = inner.put(&key, Cow::Borrowed(&body)) {
                // The store already retried (and `put` itself retries the
                // 409 a file-backed gateway answers when another lease's
                // delete removes the directory); a waiting contender tries a
                // few rounds more before it gives up on the lock.
                failed_puts += 1;
                if !wait || failed_puts > PUT_ROUNDS {
                    return Err(e);
                }
                thread::sleep(pause);
                continue;
            }
            failed_puts = 0;
            let keep = match judge(inner, name, &mine) {
                Ok(Verdict::Won) => break,
                Ok(Verdict::Conflict { holder, keep }) => {
                    if !wait {
                        inner.delete_path(&key)?;
                        return Err(Error::Locked(describe_holder(inner, &holder)));
                    }
                    keep
                }
                Err(e) => {
                    let _ = inner.delete_path(&key);
                    return Err(e);
                }
            };
            watching = u32::from(!keep);
            if !keep {
                inner.delete_path(&key)?;
            }
        }
        // Jitter keeps racing contenders from polling in step.
        thread::sleep(pause + pause.mul_f64(jitter()));
        pause = pause.mul_f64(1.5).min(max_pause);
        // A kept lease goes with the contender, whatever the answer.
        let gave_up = give_up();
        if watching == 0 && !matches!(gave_up, Ok(false)) {
            inner.delete_path(&key)?;
        }
        if gave_up? {
            return Ok(None);
        }
    }
    Ok(Some(Box::new(S3LockGuard::start(
        Arc::clone(inner),
        key,
        body,
    ))))
}

/// Whether lock `name`'s listing shows a lease other than `mine` that
/// conflicts with its mode, live or not (ages need a lease of ours in the
/// same listing: `judge`).
fn conflicts_listed(inner: &Inner, name: &str, mine: &Lease) -> Result<bool> {
    let dir = format!("{LOCKS_DIR}/{name}/");
    let my_key = lease_key(name, mine);
    Ok(inner.list_meta(&dir)?.iter().any(|(key, _)| {
        *key != my_key
            && Lease::parse(&key[dir.len()..]).is_none_or(|l| l.exclusive || mine.exclusive)
    }))
}

/// A held lease: refreshed by a background thread, deleted on drop.
struct S3LockGuard {
    inner: Arc<Inner>,
    key: String,
    stop: Option<mpsc::Sender<()>>,
    refresher: Option<JoinHandle<()>>,
}

impl S3LockGuard {
    fn start(inner: Arc<Inner>, key: String, body: Vec<u8>) -> S3LockGuard {
        let (stop, stopped) = mpsc::channel::<()>();
        let every = (inner.config.lease / 4).max(Duration::from_millis(10));
        let refresher = {
            let inner = Arc::clone(&inner);
            let key = key.clone();
            thread::Builder::new()
                .name("cairn-s3-lease".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                        // A failed refresh is retried at the next tick; the
                        // lease lives for four ticks.
                        let _ = inner.put(&key, Cow::Borrowed(&body));
                    }
                })
                .ok()
        };
        S3LockGuard {
            inner,
            key,
            stop: Some(stop),
            refresher,
        }
    }
}

impl LockGuard for S3LockGuard {}

impl Drop for S3LockGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(refresher) = self.refresher.take() {
            let _ = refresher.join();
        }
        // A lease left behind (the store unreachable now) expires by itself;
        // until then it keeps other writers waiting, so say so.
        if let Err(e) = self.inner.delete_path(&self.key) {
            eprintln!(
                "cairn: notice: could not remove lock lease {} ({e}); it holds the lock \
                 until it expires, at most {} s from its last refresh",
                self.key,
                self.inner.config.lease.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_round_trip() {
        let lease = Lease {
            order: 0x1234,
            random: "00ff00ff00ff00ff".into(),
            exclusive: true,
            ttl_ms: 120_000,
        };
        assert_eq!(lease.name(), "0000000000001234-00ff00ff00ff00ff-x-120000");
        assert_eq!(Lease::parse(&lease.name()), Some(lease.clone()));
        let shared = Lease {
            exclusive: false,
            ..lease
        };
        assert_eq!(Lease::parse(&shared.name()), Some(shared));
        for bad in [
            "",
            "zz-a-x-1",
            "1-a-q-1",
            "1-a-x-",
            "1-a-x-1-extra",
            "1--x-1",
        ] {
            assert_eq!(Lease::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn each_key_has_its_own_create_lock() {
        let a = create_lock("index/0000000000000003.00000001");
        assert_eq!(a, create_lock("index/0000000000000003.00000001"));
        assert_ne!(a, create_lock("index/0000000000000003.00000002"));
        assert!(a.starts_with(CREATE_LOCK_PREFIX) && a.len() == CREATE_LOCK_PREFIX.len() + 24);
        // A name `Backend::lock` refuses, so no caller's lock can be one.
        assert!(crate::validate_lock_name(&a).is_ok() && a.starts_with('.'));
    }

    #[test]
    fn ids_differ() {
        assert_ne!(random_id(), random_id());
        assert_eq!(random_id().len(), 16);
    }
}
