//! The backend conformance suite: what every [`Backend`] must do.
//!
//! Compiled into the library (not `cfg(test)`) so backends in other crates
//! can run it from their own tests:
//!
//! ```ignore
//! cairn_backend::conformance::run_all(&|| Box::new(MyBackend::new()));
//! ```
//!
//! `make` must return a fresh, empty backend on every call. Each check panics
//! (with the check's name in the message) on the first violation. Lock checks
//! that involve blocking use threads with bounded timeouts, so a broken
//! backend fails the test instead of hanging it.

use cairn_core::{Backend, Error, LockGuard, LockMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

/// A named conformance check.
pub type Check = fn(&Arc<dyn Backend>);

/// Every check, in the order [`run_all`] runs them.
pub const CHECKS: &[(&str, Check)] = &[
    ("round_trip", check_round_trip),
    ("overwrite", check_overwrite),
    ("ranges", check_ranges),
    ("truncated_read_at", check_truncated_read_at),
    ("size_exists_delete", check_size_exists_delete),
    ("list", check_list),
    ("missing", check_missing),
    ("key_validation", check_key_validation),
    ("lock_exclusion", check_lock_exclusion),
    ("lock_wait", check_lock_wait),
    ("concurrent_writes", check_concurrent_writes),
    ("create_new", check_create_new),
    ("create_new_race", check_create_new_race),
    ("create_streamed", check_create_streamed),
];

/// Runs every check, each on a fresh backend from `make`.
pub fn run_all(make: &dyn Fn() -> Box<dyn Backend>) {
    for (name, check) in CHECKS {
        let backend: Arc<dyn Backend> = Arc::from(make());
        eprintln!("conformance check {name} on {}", backend.describe());
        check(&backend);
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn check_round_trip(b: &Arc<dyn Backend>) {
    let big = pattern(1 << 20, 3);
    b.write_atomic("config", b"cfg").unwrap();
    b.write_atomic("containers/00/0000000000000001", &big)
        .unwrap();
    b.write_atomic("empty", b"").unwrap();
    assert_eq!(
        b.read("config").unwrap(),
        b"cfg",
        "round_trip: small object"
    );
    assert!(
        b.read("containers/00/0000000000000001").unwrap() == big,
        "round_trip: 1 MiB object differs"
    );
    assert_eq!(b.read("empty").unwrap(), b"", "round_trip: empty object");
    assert_eq!(b.size("empty").unwrap(), 0, "round_trip: empty size");
    // Bytes given away are stored as borrowed ones are, replacing.
    b.write_atomic_owned("containers/00/0000000000000002", big.clone())
        .unwrap();
    b.write_atomic_owned("config", b"cfg2".to_vec()).unwrap();
    assert!(
        b.read("containers/00/0000000000000002").unwrap() == big,
        "round_trip: 1 MiB object written owned differs"
    );
    assert_eq!(
        b.read("config").unwrap(),
        b"cfg2",
        "round_trip: owned write"
    );
    assert_eq!(
        b.size("containers/00/0000000000000001").unwrap(),
        big.len() as u64
    );
    assert!(!b.describe().is_empty(), "round_trip: describe is empty");
}

pub fn check_overwrite(b: &Arc<dyn Backend>) {
    b.write_atomic("index/0000000000000001", &pattern(1000, 1))
        .unwrap();
    b.write_atomic("index/0000000000000001", b"short").unwrap();
    assert_eq!(
        b.read("index/0000000000000001").unwrap(),
        b"short",
        "overwrite: old content survived"
    );
    assert_eq!(b.size("index/0000000000000001").unwrap(), 5);
    assert_eq!(b.list("index/").unwrap(), vec!["index/0000000000000001"]);
}

pub fn check_ranges(b: &Arc<dyn Backend>) {
    let data = pattern(1000, 7);
    b.write_atomic("obj", &data).unwrap();
    assert_eq!(b.read_at("obj", 0, 10).unwrap(), data[..10]);
    assert_eq!(b.read_at("obj", 500, 250).unwrap(), data[500..750]);
    assert_eq!(
        b.read_at("obj", 990, 10).unwrap(),
        data[990..],
        "ranges: last bytes"
    );
    assert_eq!(
        b.read_at("obj", 1000, 0).unwrap(),
        b"",
        "ranges: empty at end"
    );
    assert_eq!(b.read_at("obj", 0, 1000).unwrap(), data, "ranges: whole");
    assert_eq!(
        b.read_tail("obj", 16).unwrap(),
        (1000, data[984..].to_vec())
    );
    assert_eq!(b.read_tail("obj", 1000).unwrap(), (1000, data.clone()));
    assert_eq!(
        b.read_tail("obj", 5000).unwrap(),
        (1000, data.clone()),
        "ranges: tail longer than the object"
    );
    assert_eq!(b.read_tail("obj", 0).unwrap(), (1000, Vec::new()));
    // Into a reused buffer: longer, shorter and empty reads after each
    // other leave exactly the bytes asked for, whatever it held before.
    let mut buf = vec![0xAA; 2000];
    for (offset, len) in [(0, 1000), (10, 20), (500, 400), (1000, 0), (3, 997)] {
        b.read_at_into("obj", offset, len, &mut buf).unwrap();
        let want = &data[offset as usize..offset as usize + len];
        assert_eq!(buf, want, "ranges: read_at_into {offset}+{len}");
        let mut slice = vec![0x55; len];
        b.read_at_slice("obj", offset, &mut slice).unwrap();
        assert_eq!(slice, want, "ranges: read_at_slice {offset}+{len}");
    }
    b.write_atomic("empty", b"").unwrap();
    assert_eq!(b.read_tail("empty", 8).unwrap(), (0, Vec::new()));
}

pub fn check_truncated_read_at(b: &Arc<dyn Backend>) {
    b.write_atomic("containers/00/0000000000000002", &pattern(100, 2))
        .unwrap();
    for (offset, len) in [(50, 51), (100, 1), (200, 0), (0, 101), (u64::MAX, 2)] {
        let mut buf = Vec::with_capacity(4096);
        let into = b
            .read_at_into("containers/00/0000000000000002", offset, len, &mut buf)
            .expect_err("truncated_read_at: a read into a buffer past the end must fail");
        assert!(into.is_corruption(), "truncated_read_at: into: {into}");
        let mut slice = vec![0; len];
        let sliced = b
            .read_at_slice("containers/00/0000000000000002", offset, &mut slice)
            .expect_err("truncated_read_at: a read into a slice past the end must fail");
        assert!(sliced.is_corruption(), "truncated_read_at: slice: {sliced}");
        let err = b
            .read_at("containers/00/0000000000000002", offset, len)
            .expect_err("truncated_read_at: a read past the end must fail");
        assert!(
            err.is_corruption() && !err.is_not_found(),
            "truncated_read_at: want a corruption error, got {err}"
        );
        assert!(
            err.to_string().contains("containers/00/0000000000000002"),
            "truncated_read_at: message must name the key: {err}"
        );
    }
}

pub fn check_size_exists_delete(b: &Arc<dyn Backend>) {
    assert!(!b.exists("snapshots/aa").unwrap());
    b.write_atomic("snapshots/aa", b"12345").unwrap();
    assert!(b.exists("snapshots/aa").unwrap());
    assert_eq!(b.size("snapshots/aa").unwrap(), 5);
    b.delete("snapshots/aa").unwrap();
    assert!(!b.exists("snapshots/aa").unwrap(), "delete: still exists");
    b.delete("snapshots/aa").unwrap();
    b.delete("never/written").unwrap();
    assert!(b.list("snapshots/").unwrap().is_empty());
    // Many at once: present and missing alike; nothing else goes.
    let many: Vec<String> = (0..5).map(|i| format!("snapshots/m{i}")).collect();
    for k in &many[..4] {
        b.write_atomic(k, b"m").unwrap();
    }
    b.write_atomic("snapshots/kept", b"k").unwrap();
    b.delete_many(&many).unwrap();
    b.delete_many(&[]).unwrap();
    assert_eq!(
        b.list("snapshots/").unwrap(),
        vec!["snapshots/kept".to_string()],
        "delete_many"
    );
    b.delete("snapshots/kept").unwrap();
    // A directory-like prefix of existing keys is not an object.
    b.write_atomic("containers/01/0000000000000003", b"x")
        .unwrap();
    assert!(
        !b.exists("containers/01").unwrap(),
        "a directory is not an object"
    );
}

pub fn check_list(b: &Arc<dyn Backend>) {
    let keys = [
        "config",
        "containers/00/0000000000000002",
        "containers/00/0000000000000001",
        "containers/01/0000000000000100",
        "index/0000000000000003",
        "snapshots/bb",
        "snapshots/aa",
        "snapshots-old/cc",
    ];
    for k in keys {
        b.write_atomic(k, k.as_bytes()).unwrap();
    }
    let _guard = b.lock("repo", LockMode::Shared, false).unwrap();
    assert_eq!(
        b.list("snapshots/").unwrap(),
        vec!["snapshots/aa", "snapshots/bb"]
    );
    assert_eq!(
        b.list("containers/").unwrap(),
        vec![
            "containers/00/0000000000000001",
            "containers/00/0000000000000002",
            "containers/01/0000000000000100",
        ],
        "list: recursive and sorted"
    );
    assert_eq!(
        b.list("containers/01/").unwrap(),
        vec!["containers/01/0000000000000100"]
    );
    let mut all = keys.map(str::to_owned).to_vec();
    all.sort();
    assert_eq!(
        b.list("").unwrap(),
        all,
        "list: everything, no internal files"
    );
    assert!(
        b.list("nothing/").unwrap().is_empty(),
        "list: missing prefix"
    );
    assert!(
        b.list("config/").unwrap().is_empty(),
        "list: file as prefix"
    );
}

pub fn check_missing(b: &Arc<dyn Backend>) {
    b.write_atomic("present", b"x").unwrap();
    let results = [
        ("read", b.read("absent").map(drop)),
        ("read_at", b.read_at("absent", 0, 1).map(drop)),
        ("read_tail", b.read_tail("absent", 1).map(drop)),
        ("size", b.size("absent").map(drop)),
        ("read nested", b.read("no/such/key").map(drop)),
    ];
    for (op, r) in results {
        match r {
            Err(e) => assert!(e.is_not_found(), "missing: {op} gave {e}"),
            Ok(()) => panic!("missing: {op} of a missing key succeeded"),
        }
    }
}

pub fn check_key_validation(b: &Arc<dyn Backend>) {
    for key in [
        "",
        "/etc/passwd",
        "a//b",
        "a/",
        "..",
        "../x",
        "a/../b",
        "./a",
    ] {
        let invalid = |r: cairn_core::Result<()>| matches!(r, Err(Error::InvalidInput(_)));
        assert!(
            invalid(b.write_atomic(key, b"x")),
            "key_validation: write {key:?}"
        );
        assert!(
            invalid(b.read(key).map(drop)),
            "key_validation: read {key:?}"
        );
        assert!(invalid(b.delete(key)), "key_validation: delete {key:?}");
        assert!(
            invalid(b.delete_many(&["snapshots/ok".to_string(), key.to_string()])),
            "key_validation: delete_many {key:?}"
        );
        assert!(
            invalid(b.exists(key).map(drop)),
            "key_validation: exists {key:?}"
        );
    }
    assert!(matches!(b.list("../"), Err(Error::InvalidInput(_))));
    assert!(matches!(
        b.lock("a/b", LockMode::Shared, false),
        Err(Error::InvalidInput(_))
    ));
}

fn locked(b: &Arc<dyn Backend>, mode: LockMode) -> bool {
    match b.lock("repo", mode, false) {
        Ok(_) => false,
        Err(Error::Locked(_)) => true,
        Err(e) => panic!("lock: unexpected error {e}"),
    }
}

pub fn check_lock_exclusion(b: &Arc<dyn Backend>) {
    let ex = b.lock("repo", LockMode::Exclusive, false).unwrap();
    assert!(locked(b, LockMode::Exclusive), "exclusive admits exclusive");
    assert!(locked(b, LockMode::Shared), "exclusive admits shared");
    let other = b.lock("gc", LockMode::Exclusive, false);
    assert!(
        other.is_ok(),
        "locks with different names must be independent"
    );
    drop(other);
    drop(ex);
    let s1 = b.lock("repo", LockMode::Shared, false).unwrap();
    let s2 = b.lock("repo", LockMode::Shared, false).unwrap();
    assert!(locked(b, LockMode::Exclusive), "shared admits exclusive");
    drop(s1);
    assert!(locked(b, LockMode::Exclusive), "one shared holder remains");
    drop(s2);
    let ex = b.lock("repo", LockMode::Exclusive, false);
    assert!(ex.is_ok(), "lock not released on drop");
}

/// How long a lock test waits for an event before it calls the lock hung:
/// a guard against hangs, never a measurement.
const HANG: Duration = Duration::from_secs(120);

/// Checks that a waiting lock call on `waiter` blocks while `held` is held
/// and gets the lock once it is dropped, without timing anything: the
/// waiting thread first finds the lock taken (`Error::Locked` without
/// waiting), reports that, then waits; the holder marks the lock released
/// before it drops it, and the waiter must see the mark once it got in. A
/// lock that let the waiter in early fails the mark (or the first check).
/// Returns the waiter's guard.
pub fn check_waits_until_released(
    held: Box<dyn LockGuard>,
    waiter: Arc<dyn Backend>,
    name: &'static str,
    wanted: LockMode,
) -> Box<dyn LockGuard> {
    let released = Arc::new(AtomicBool::new(false));
    let (blocked_tx, blocked) = mpsc::channel();
    let (got_in_tx, got_in) = mpsc::channel();
    let released_seen = Arc::clone(&released);
    thread::spawn(move || {
        let now = waiter.lock(name, wanted, false).map(drop);
        let _ = blocked_tx.send(now);
        let r = waiter
            .lock(name, wanted, true)
            .map(|g| (g, released_seen.load(Ordering::SeqCst)));
        let _ = got_in_tx.send(r);
    });
    match blocked.recv_timeout(HANG) {
        Ok(Err(Error::Locked(_))) => {}
        Ok(Ok(())) => panic!("lock_wait: {wanted:?} on {name} taken while another holds it"),
        Ok(Err(e)) => panic!("lock_wait: {wanted:?} on {name}: {e}"),
        Err(_) => panic!("lock_wait: the waiter never tried {name}"),
    }
    released.store(true, Ordering::SeqCst);
    drop(held);
    match got_in.recv_timeout(HANG) {
        Ok(Ok((guard, true))) => guard,
        Ok(Ok((_, false))) => panic!("lock_wait: {wanted:?} on {name} got in before the release"),
        Ok(Err(e)) => panic!("lock_wait: waiting lock failed: {e}"),
        Err(_) => panic!("lock_wait: {wanted:?} on {name} still blocked after the release"),
    }
}

/// Takes `held` on "repo", then a second caller waits for `wanted`; the
/// waiter must block until the holder drops its guard.
fn wait_case(b: &Arc<dyn Backend>, held: LockMode, wanted: LockMode) {
    let guard = b.lock("repo", held, false).unwrap();
    drop(check_waits_until_released(
        guard,
        Arc::clone(b),
        "repo",
        wanted,
    ));
    // The waiter released its guard on return.
    assert!(b.lock("repo", LockMode::Exclusive, false).is_ok());
}

pub fn check_lock_wait(b: &Arc<dyn Backend>) {
    wait_case(b, LockMode::Exclusive, LockMode::Exclusive);
    wait_case(b, LockMode::Exclusive, LockMode::Shared);
    wait_case(b, LockMode::Shared, LockMode::Exclusive);
}

pub fn check_concurrent_writes(b: &Arc<dyn Backend>) {
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let b = Arc::clone(b);
            thread::spawn(move || {
                for i in 0..20u8 {
                    b.write_atomic(&format!("containers/{t:02}/{i:016}"), &pattern(300, i))
                        .unwrap();
                    b.write_atomic("shared", &pattern(4096, t)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("concurrent_writes: a writer panicked");
    }
    assert_eq!(b.list("containers/").unwrap().len(), 160);
    for t in 0..8u8 {
        assert_eq!(
            b.read(&format!("containers/{t:02}/{:016}", 19)).unwrap(),
            pattern(300, 19)
        );
    }
    let shared = b.read("shared").unwrap();
    assert!(
        (0..8).any(|t| shared == pattern(4096, t)),
        "concurrent_writes: a concurrently overwritten object is not one whole version"
    );
}

/// `create_new` writes an absent object, refuses to replace a present one
/// (returning `false` and leaving it intact), and creates missing parents.
pub fn check_create_new(b: &Arc<dyn Backend>) {
    assert!(
        b.create_new("a/b/c", b"one").expect("create_new"),
        "create_new: absent key must be created"
    );
    assert!(
        !b.create_new("a/b/c", b"two").expect("create_new"),
        "create_new: present key must not be created"
    );
    assert_eq!(
        b.read("a/b/c").expect("read"),
        b"one",
        "create_new: existing object replaced"
    );
    b.delete("a/b/c").expect("delete");
    assert!(
        b.create_new("a/b/c", b"three").expect("create_new"),
        "create_new after delete"
    );
    assert_eq!(b.read("a/b/c").expect("read"), b"three");
    assert_eq!(
        b.list("a/").expect("list"),
        vec!["a/b/c".to_string()],
        "create_new leaves no stray object"
    );
}

/// Of several threads racing to create one key, exactly one succeeds and
/// the object holds that one's bytes, whole.
pub fn check_create_new_race(b: &Arc<dyn Backend>) {
    for round in 0..8u8 {
        let key = format!("race/{round}");
        let winners: Vec<(u8, bool)> = thread::scope(|s| {
            let handles: Vec<_> = (0..6u8)
                .map(|t| {
                    let key = key.clone();
                    s.spawn(move || {
                        (
                            t,
                            b.create_new(&key, &pattern(4096, t)).expect("create_new"),
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let won: Vec<u8> = winners
            .iter()
            .filter(|(_, w)| *w)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(
            won.len(),
            1,
            "create_new race: exactly one creator wins, got {won:?}"
        );
        assert_eq!(
            b.read(&key).expect("read"),
            pattern(4096, won[0]),
            "create_new race: winner's bytes"
        );
    }
}

/// An object written in pieces ([`cairn_core::create_streamed`]): nothing
/// under its key until `create`, then exactly the appended bytes with the
/// patches applied (one reaching back into bytes already handed on, one
/// into the last piece); a present key is left as it was; a writer
/// dropped before `create` leaves nothing to list.
pub fn check_create_streamed(b: &Arc<dyn Backend>) {
    let big = pattern(3 << 20, 7);
    let mut want = big.clone();
    want.extend_from_slice(b"tail");
    want[10..14].copy_from_slice(b"HEAD");
    let at = want.len() - 2;
    want[at..].copy_from_slice(b"IL");
    let mut w = cairn_core::create_streamed(&**b, "s/obj").expect("create_streamed");
    for piece in big.chunks(700_000) {
        w.append(piece).expect("append");
    }
    w.append(b"tail").expect("append");
    w.patch(10, b"HEAD").expect("patch");
    w.patch(at as u64, b"IL").expect("patch");
    assert!(
        w.patch(want.len() as u64 - 1, b"xx").is_err(),
        "create_streamed: a patch past the end is refused"
    );
    assert_eq!(w.len(), want.len() as u64);
    assert!(
        !b.exists("s/obj").expect("exists"),
        "create_streamed: visible before create"
    );
    assert!(w.create().expect("create"), "create_streamed: absent key");
    assert_eq!(b.read("s/obj").expect("read"), want);

    let mut again = cairn_core::create_streamed(&**b, "s/obj").expect("create_streamed");
    again.append(b"other").expect("append");
    assert!(
        !again.create().expect("create"),
        "create_streamed: present key must not be created"
    );
    assert_eq!(
        b.read("s/obj").expect("read"),
        want,
        "existing object replaced"
    );

    let mut dropped = cairn_core::create_streamed(&**b, "s/gone").expect("create_streamed");
    dropped.append(&pattern(5000, 1)).expect("append");
    drop(dropped);
    assert_eq!(
        b.list("s/").expect("list"),
        vec!["s/obj".to_string()],
        "create_streamed leaves no stray object"
    );
}
