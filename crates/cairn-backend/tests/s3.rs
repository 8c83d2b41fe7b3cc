//! The S3 backend against a real S3 server (VersityGW on 127.0.0.1, or the
//! server named by `CAIRN_TEST_S3_ENDPOINT`): the conformance suite, then
//! what only an object store has (multipart uploads, leases, its errors).

use cairn_backend::s3::test_server::S3TestServer;
use cairn_backend::s3::{ConditionalWrites, PayloadSigning, MULTIPART_THRESHOLD};
use cairn_backend::{conformance, S3Backend, S3Config};
use cairn_core::{Backend, Error, LockMode};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i / 7) as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

fn open(config: &S3Config) -> S3Backend {
    S3Backend::open(config.clone()).expect("opening the S3 backend")
}

/// A test server behind a fault proxy, and a config that reaches the
/// server through the proxy (conditional writes detected).
fn behind_fault_proxy() -> (
    S3TestServer,
    cairn_backend::s3::fault_proxy::FaultProxy,
    S3Config,
) {
    let server = S3TestServer::start();
    let proxy = cairn_backend::s3::fault_proxy::FaultProxy::start(server.endpoint());
    let mut config = server.config();
    config.endpoint = Some(proxy.endpoint());
    config.conditional_writes = ConditionalWrites::Detect;
    (server, proxy, config)
}

#[test]
fn conformance_suite() {
    let server = S3TestServer::start();
    conformance::run_all(&|| Box::new(open(&server.config())));
}

#[test]
fn conformance_suite_without_conditional_writes() {
    let server = S3TestServer::start();
    conformance::run_all(&|| {
        let mut config = server.config();
        config.conditional_writes = ConditionalWrites::Emulate;
        let backend = open(&config);
        assert!(!backend.conditional_writes_honoured().unwrap());
        Box::new(backend)
    });
}

#[test]
fn ranged_reads() {
    let server = S3TestServer::start();
    let b = open(&server.config());
    let data = pattern(100_000, 1);
    b.write_atomic("containers/00/0000000000000001", &data)
        .unwrap();
    let key = "containers/00/0000000000000001";
    for (offset, len) in [(0, 1), (99_999, 1), (4096, 16_384), (50_000, 50_000)] {
        assert_eq!(
            b.read_at(key, offset, len).unwrap(),
            data[offset as usize..offset as usize + len]
        );
    }
    for (offset, len) in [(99_999, 2), (100_000, 1), (200_000, 10), (100_001, 0)] {
        let err = b.read_at(key, offset, len).unwrap_err();
        assert!(err.is_corruption(), "{offset}+{len}: {err}");
        assert!(err.to_string().contains(key), "{err}");
    }
    assert_eq!(
        b.read_tail(key, 10).unwrap(),
        (100_000, data[99_990..].to_vec())
    );
}

#[test]
fn multipart_upload_of_a_large_object() {
    let server = S3TestServer::start();
    let b = open(&server.config());
    let big = pattern(20 << 20, 9);
    assert!(big.len() > MULTIPART_THRESHOLD);
    b.write_atomic("containers/00/0000000000000002", &big)
        .unwrap();
    assert_eq!(
        b.size("containers/00/0000000000000002").unwrap(),
        big.len() as u64
    );
    // Across the boundary of the first two 8 MiB parts.
    let at = (8 << 20) - 100;
    assert_eq!(
        b.read_at("containers/00/0000000000000002", at as u64, 200)
            .unwrap(),
        big[at..at + 200]
    );
    assert!(b.read("containers/00/0000000000000002").unwrap() == big);
    // Replacing it with a small object leaves no trace of the large one.
    b.write_atomic("containers/00/0000000000000002", b"small")
        .unwrap();
    assert_eq!(b.read("containers/00/0000000000000002").unwrap(), b"small");
}

/// What an HTTPS endpoint gets (`PayloadSigning::ByScheme`): bodies sent
/// as `UNSIGNED-PAYLOAD`, whole and in parts, are stored as sent; creates
/// and locks work as signed ones do.
#[test]
fn unsigned_payloads_are_stored_as_sent() {
    let server = S3TestServer::start();
    let mut config = server.config();
    // The default signs bodies over plain HTTP only (the test server is
    // plain HTTP unless `CAIRN_TEST_S3_ENDPOINT` names another).
    let plain = config
        .endpoint
        .as_deref()
        .is_some_and(|e| e.starts_with("http://"));
    assert_eq!(
        config.payload_signing.signs(config.endpoint.as_deref()),
        plain
    );
    config.payload_signing = PayloadSigning::Unsigned;
    let b = open(&config);
    let small = pattern(100_000, 3);
    let big = pattern(MULTIPART_THRESHOLD + (3 << 20), 4);
    b.write_atomic("containers/00/0000000000000003", &small)
        .unwrap();
    b.write_atomic("containers/00/0000000000000004", &big)
        .unwrap();
    assert!(b.create_new("snapshots/unsigned", b"record").unwrap());
    assert!(b.read("containers/00/0000000000000003").unwrap() == small);
    assert!(b.read("containers/00/0000000000000004").unwrap() == big);
    assert_eq!(b.read("snapshots/unsigned").unwrap(), b"record");
    assert!(!b.create_new("snapshots/unsigned", b"again").unwrap());
    assert_eq!(b.read("snapshots/unsigned").unwrap(), b"record");
    // A lock's lease object is written and taken like a signed one.
    assert!(!locked(&b, LockMode::Exclusive));
}

fn locked(b: &S3Backend, mode: LockMode) -> bool {
    match b.lock("repo", mode, false) {
        Ok(_) => false,
        Err(Error::Locked(msg)) => {
            assert!(msg.contains("pid"), "the message names the holder: {msg}");
            true
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn locks_exclude_between_clients() {
    let server = S3TestServer::start();
    let config = server.config();
    let (a, b) = (open(&config), open(&config));
    let ex = a.lock("repo", LockMode::Exclusive, false).unwrap();
    assert!(locked(&b, LockMode::Exclusive));
    assert!(locked(&b, LockMode::Shared));
    drop(ex);
    let shared = a.lock("repo", LockMode::Shared, false).unwrap();
    let shared_b = b.lock("repo", LockMode::Shared, false).unwrap();
    assert!(locked(&b, LockMode::Exclusive));
    drop(shared);
    assert!(locked(&a, LockMode::Exclusive));
    drop(shared_b);
    drop(b.lock("repo", LockMode::Exclusive, false).unwrap());

    // A waiting writer gets the lock once the reader on the other client
    // leaves, and not before (no timing: see check_waits_until_released).
    let reader = a.lock("repo", LockMode::Shared, false).unwrap();
    let _guard =
        conformance::check_waits_until_released(reader, Arc::new(b), "repo", LockMode::Exclusive);
    assert!(locked(&a, LockMode::Shared));
}

#[test]
fn live_leases_are_refreshed_and_dead_ones_expire() {
    let server = S3TestServer::start();
    let mut config = server.config();
    config.lease = Duration::from_millis(1500);
    let (a, b) = (open(&config), open(&config));

    // A live holder refreshes its lease: it outlasts several lease times.
    let held = a.lock("repo", LockMode::Exclusive, false).unwrap();
    std::thread::sleep(Duration::from_secs(5));
    assert!(locked(&b, LockMode::Shared), "a refreshed lease expired");
    drop(held);

    // A dead holder: a lease written once and never refreshed, through a
    // client whose prefix is the lock's lease directory.
    let mut leases = config.clone();
    leases.prefix = format!("{}/locks/repo", config.prefix);
    let dead = open(&leases);
    let lease = "0000000000000001-00000000deadbeef-x-1500";
    dead.write_atomic(
        lease,
        b"cairn lock lease\nmode exclusive\nhost gone\npid 1\n",
    )
    .unwrap();
    assert!(locked(&b, LockMode::Shared), "a fresh lease must count");
    let start = Instant::now();
    let guard = b.lock("repo", LockMode::Exclusive, true).unwrap();
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "the dead lease blocked for {waited:?}"
    );
    assert!(
        !dead.exists(lease).unwrap(),
        "the expired lease was not removed"
    );
    drop(guard);
    assert!(
        dead.list("").unwrap().is_empty(),
        "the guard left its lease"
    );
}

#[test]
fn create_new_race_between_clients() {
    let server = S3TestServer::start();
    let config = server.config();
    for mode in [ConditionalWrites::Detect, ConditionalWrites::Emulate] {
        let mut config = config.clone();
        config.conditional_writes = mode;
        let clients: Vec<Arc<S3Backend>> = (0..4).map(|_| Arc::new(open(&config))).collect();
        for round in 0..4u8 {
            let key = format!("keys/{mode:?}-{round}");
            let won: Vec<usize> = std::thread::scope(|s| {
                let handles: Vec<_> = clients
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let key = key.clone();
                        s.spawn(move || (i, c.create_new(&key, &[i as u8; 64]).unwrap()))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap())
                    .filter(|(_, won)| *won)
                    .map(|(i, _)| i)
                    .collect()
            });
            assert_eq!(won.len(), 1, "{mode:?}: winners {won:?}");
            assert_eq!(clients[0].read(&key).unwrap(), [won[0] as u8; 64]);
        }
    }
}

/// Writers claiming id slots the way `id_mark.rs` does: each tries the
/// next slot and moves on when someone else created it. Without
/// conditional writes a contender that finds a slot's lock held stops
/// waiting once the slot exists; every slot still has one owner.
#[test]
fn emulated_creates_of_a_run_of_slots_have_one_owner_each() {
    let server = S3TestServer::start();
    let mut config = server.config();
    config.conditional_writes = ConditionalWrites::Emulate;
    let clients: Vec<Arc<S3Backend>> = (0..4).map(|_| Arc::new(open(&config))).collect();
    let claimed: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                s.spawn(move || {
                    let (mut mine, mut k) = (Vec::new(), 0);
                    while mine.len() < 3 {
                        if c.create_new(&format!("slots/{k:04}"), &[i as u8; 8])
                            .unwrap()
                        {
                            mine.push(k);
                        }
                        k += 1;
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<usize> = claimed.iter().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 12, "a slot claimed twice: {claimed:?}");
    for (i, mine) in claimed.iter().enumerate() {
        for k in mine {
            assert_eq!(
                clients[0].read(&format!("slots/{k:04}")).unwrap(),
                [i as u8; 8]
            );
        }
    }
}

fn one_line_error(result: cairn_core::Result<S3Backend>) -> String {
    let msg = result.expect_err("opening must fail").to_string();
    eprintln!("error: {msg}");
    assert!(!msg.contains('\n'), "not one line: {msg}");
    assert!(msg.len() < 400, "too long: {msg}");
    msg
}

#[test]
fn refused_credential_is_one_clear_line() {
    let server = S3TestServer::start();
    let mut config = server.config();
    config.secret_access_key = Some("not-the-secret".into());
    let msg = one_line_error(S3Backend::open(config));
    assert!(
        msg.contains("check the") && msg.contains(server.endpoint()),
        "{msg}"
    );
}

#[test]
fn missing_bucket_is_one_clear_line() {
    let server = S3TestServer::start();
    let mut config = server.config();
    config.bucket = "no-such-bucket-for-cairn".into();
    let msg = one_line_error(S3Backend::open(config));
    assert!(
        msg.contains("no-such-bucket-for-cairn") && msg.contains("does not exist"),
        "{msg}"
    );
}

#[test]
fn unreachable_endpoint_fails_in_bounded_time() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = S3Config::new(Some(format!("http://127.0.0.1:{port}")), "bucket", "repo");
    config.access_key_id = Some("key".into());
    config.secret_access_key = Some("secret".into());
    config.max_retries = 3;
    config.retry_timeout = Duration::from_secs(5);
    let start = Instant::now();
    let msg = one_line_error(S3Backend::open(config));
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert!(
        msg.contains("cannot reach") && msg.contains(&port.to_string()),
        "{msg}"
    );
}

#[test]
fn a_store_that_stops_answering_fails_in_bounded_time() {
    use cairn_backend::s3::fault_proxy::Action;
    let (_server, proxy, mut config) = behind_fault_proxy();
    config.request_timeout = Duration::from_secs(1);
    config.max_retries = 2;
    config.retry_timeout = Duration::from_secs(10);
    let store = open(&config);
    store.write_atomic("containers/00/a", b"stored").unwrap();

    // The connection is accepted and the request read, but no answer comes.
    proxy.set_rule(|_| Action::Hold);
    let start = Instant::now();
    let err = store.read("containers/00/a").unwrap_err().to_string();
    let took = start.elapsed();
    eprintln!("error after {took:?}: {err}");
    assert!(
        !err.contains('\n') && err.len() < 400,
        "not one line: {err}"
    );
    assert!(err.contains("containers/00/a"), "{err}");
    assert!(err.to_lowercase().contains("timed out"), "{err}");
    // Three attempts of a second each, and the backoff between them.
    assert!(took >= Duration::from_secs(3), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert_eq!(proxy.faults(), 3, "{:?}", proxy.log());

    proxy.release_held();
    proxy.heal();
    assert_eq!(store.read("containers/00/a").unwrap(), b"stored");
}

#[test]
fn writes_refused_by_a_vanished_parent_directory_are_retried() {
    // A server that keeps objects as files removes a directory with its
    // last object; a write that recreates it at that moment is refused
    // (409 ExistingObjectIsDirectory) although nothing is in its way.
    use cairn_backend::s3::fault_proxy::Action;
    let (_server, proxy, config) = behind_fault_proxy();
    let store = open(&config);
    let mut refused = 0;
    proxy.set_rule(move |r| {
        if r.method == "PUT" && refused < 6 {
            refused += 1;
            Action::Fail(409)
        } else {
            Action::Forward
        }
    });
    // Six refusals in a row (the conditional-write probe's first write,
    // on the first create, meets them all) stay within the attempts; a
    // store that refuses every write is reported after them.
    assert!(store.create_new("snapshots/a", b"a").unwrap());
    assert_eq!(proxy.faults(), 6, "{:?}", proxy.log());
    proxy.set_rule(|r| {
        if r.method == "PUT" {
            Action::Fail(409)
        } else {
            Action::Forward
        }
    });
    let err = store.write_atomic("index/b", b"b").unwrap_err().to_string();
    assert!(err.contains("409") && err.contains("index/b"), "{err}");
    proxy.heal();
    store.write_atomic("index/b", b"b").unwrap();
    assert_eq!(store.read("snapshots/a").unwrap(), b"a");
    assert_eq!(store.read("index/b").unwrap(), b"b");
}

#[test]
fn creates_interrupted_in_transit_are_retried() {
    // A conditional create is not idempotent, so the client library does
    // not retry it when its connection closes before the answer; cairn
    // does, and tells its own object found in the way from another's.
    use cairn_backend::s3::fault_proxy::Action;
    use cairn_core::backend::create_new_or_own;
    let (_server, proxy, config) = behind_fault_proxy();
    let store = open(&config);
    // The conditional-write probe runs on the first create.
    assert!(store.create_new("snapshots/first", b"1").unwrap());
    assert!(store.conditional_writes_honoured().unwrap());
    let once = |action: Action| {
        let mut done = false;
        move |r: &cairn_backend::s3::fault_proxy::Request| {
            if r.is("PUT", "index") && !done {
                done = true;
                action
            } else {
                Action::Forward
            }
        }
    };

    // Reset before the store saw it: the retry creates the object.
    proxy.set_rule(once(Action::Reset));
    assert!(store.create_new("index/a", b"a").unwrap());
    assert_eq!(proxy.faults(), 1, "{:?}", proxy.log());
    assert_eq!(store.read("index/a").unwrap(), b"a");

    // Applied, its answer lost: the retry is refused by this very object,
    // which the caller reads back as its own.
    proxy.set_rule(once(Action::ForwardThenReset));
    assert!(create_new_or_own(&store, "index/b", b"mine").unwrap());
    assert_eq!(proxy.faults(), 2, "{:?}", proxy.log());
    assert_eq!(store.read("index/b").unwrap(), b"mine");

    // Another writer's object in the way: refused, and not taken as ours.
    store.write_atomic("index/c", b"theirs").unwrap();
    proxy.set_rule(once(Action::ForwardThenReset));
    assert!(!create_new_or_own(&store, "index/c", b"mine").unwrap());
    assert_eq!(store.read("index/c").unwrap(), b"theirs");

    // A store that never answers a create is reported, not retried forever.
    proxy.set_rule(|r| {
        if r.is("PUT", "index") {
            Action::Reset
        } else {
            Action::Forward
        }
    });
    let err = store.create_new("index/d", b"d").unwrap_err().to_string();
    assert!(err.contains("index/d") && !err.contains('\n'), "{err}");
    proxy.heal();
}
