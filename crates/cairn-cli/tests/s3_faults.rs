//! A repository in S3 over a network that misbehaves: the `cairn` binary
//! talks to a real S3 server (VersityGW, or `CAIRN_TEST_S3_ENDPOINT`)
//! through cairn-backend's fault-injecting proxy (`s3::fault_proxy`).
//!
//! * 5xx answers, answers lost after the store applied the request, and
//!   dropped connections in the middle of a backup and a restore are
//!   retried: both succeed, byte-identical.
//! * Connections reset while a container's body is being sent (writes
//!   failing with EPIPE, which raises SIGPIPE) are retried.
//! * A store that goes away in the middle of a backup fails it with one
//!   line in bounded time and leaves no snapshot; once it is back, the
//!   earlier snapshot restores and the next backup (waiting out the dead
//!   lease) completes.
//! * A backup killed (SIGKILL) at each step of its commit, with the request
//!   of that step in flight, leaves every committed snapshot whole, lists a
//!   snapshot only if its record reached the store, and the next backup
//!   completes with `check --read-data` clean.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_backend::s3::fault_proxy::{Action, FaultProxy, Request};
use cairn_backend::s3::test_server::S3TestServer;
use common::*;

/// Lease time of every command here: a killed writer's lease keeps the next
/// one waiting this long (the shortest `--s3-lease-secs` takes).
const LEASE_SECS: &str = "10";

/// A repository on a real server, reached through a fault proxy.
struct Remote {
    proxy: FaultProxy,
    url: String,
    cache: PathBuf,
    // Dropped last: the server outlives the proxy in front of it.
    server: S3TestServer,
}

impl Remote {
    fn start() -> Remote {
        let server = S3TestServer::start();
        let proxy = FaultProxy::start(server.endpoint());
        let config = server.config();
        let url = format!(
            "s3:{}/{}/{}",
            proxy.endpoint(),
            server.bucket(),
            config.prefix
        );
        let cache = std::env::temp_dir().join(format!("cairn-test-cache-{}", config.prefix));
        Remote {
            proxy,
            url,
            cache,
            server,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = command(Path::new(&self.url), &["--s3-lease-secs", LEASE_SECS]);
        c.args(args)
            .env("CAIRN_CACHE_DIR", &self.cache)
            .env("AWS_ACCESS_KEY_ID", self.server.access_key())
            .env("AWS_SECRET_ACCESS_KEY", self.server.secret_key())
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        finish(self.command(args).spawn().expect("running cairn"), args)
    }

    fn snapshot_ids(&self) -> Vec<String> {
        self.run(&["snapshots", "--json"]).snapshot_ids()
    }

    /// A backup of `tree`, creating the repository (`--init`) if this is
    /// the first.
    fn backup(&self, tree: &Path) -> String {
        let run = self
            .run(&["backup", "--init", "--wait", "-q", "--json", s(tree)])
            .ok();
        run.json()["id"].as_str().unwrap().to_owned()
    }

    fn restore_matches(&self, id: &str, expected: &Manifest, out: &Path) {
        if out.exists() {
            std::fs::remove_dir_all(out).unwrap();
        }
        self.run(&["restore", "-q", id, "--target", s(out)]).ok();
        assert_tree_matches(expected, &out.join("tree"));
    }

    fn check_read_data_clean(&self) {
        let check = self.run(&["check", "--read-data", "--json"]).ok().json();
        assert_eq!(check["problems"], serde_json::json!([]), "{check}");
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.cache);
    }
}

/// 16 MiB of random data in four files, and a few small ones.
fn build_tree(tree: &Path, rng: &mut Rng) {
    build_random_files(tree, rng, 4, 4 << 20);
    write_file(&tree.join("sub/small.txt"), &rng.text(3_000), 0o644);
}

/// New data for the next backup: one large file rewritten, the small one
/// replaced.
fn modify(tree: &Path, rng: &mut Rng) {
    let i = rng.range(0, 4);
    write_file(
        &tree.join(format!("f{i:02}.bin")),
        &rng.bytes(4 << 20),
        0o644,
    );
    write_file(&tree.join("sub/small.txt"), &rng.text(3_000), 0o644);
}

/// A fresh repository behind its proxy, a scratch directory, and the tree
/// to back up (built from `seed`) at `<scratch>/tree`.
fn setup(seed: u64) -> (Remote, tempfile::TempDir, PathBuf, Rng) {
    let remote = Remote::start();
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(seed);
    build_tree(&tree, &mut rng);
    (remote, tmp, tree, rng)
}

/// Every `every`-th request fails once, in turn as a 503 the store never
/// saw, a 500 after the store applied it, and a dropped connection; a
/// request's retry (same method and target) is never failed again.
fn flaky(every: u64) -> impl FnMut(&Request) -> Action + Send {
    let mut failed: HashSet<(String, String)> = HashSet::new();
    let mut n = 0u64;
    move |r: &Request| {
        let key = (r.method.clone(), r.target.clone());
        if r.seq % every != every - 1 || failed.contains(&key) {
            return Action::Forward;
        }
        failed.insert(key);
        n += 1;
        match n % 3 {
            0 => Action::Fail(503),
            1 => Action::FailAfterApply(500),
            _ => Action::Drop,
        }
    }
}

#[test]
fn failed_requests_during_backup_and_restore_are_retried() {
    let (remote, tmp, tree, mut rng) = setup(141);
    build_sample_tree(&tree.join("sample"), &mut rng);
    let expected = Manifest::capture(&tree);
    remote.run(&["init"]).ok();

    remote.proxy.set_rule(flaky(3));
    let id = remote.backup(&tree);
    let during_backup = remote.proxy.faults();
    assert!(during_backup >= 5, "only {during_backup} faults injected");
    // A second backup of a changed tree, then restores with a cold cache.
    modify(&tree, &mut rng);
    let second = Manifest::capture(&tree);
    let id2 = remote.backup(&tree);
    std::fs::remove_dir_all(&remote.cache).unwrap();
    remote.restore_matches(&id, &expected, &tmp.path().join("out1"));
    remote.restore_matches(&id2, &second, &tmp.path().join("out2"));
    assert!(remote.proxy.faults() > during_backup);

    remote.proxy.heal();
    assert_eq!(remote.snapshot_ids(), vec![id, id2]);
    remote.check_read_data_clean();
}

#[test]
fn connections_reset_while_containers_are_sent_are_retried() {
    // A write into a reset connection raises SIGPIPE; cairn must neither
    // die of it (as a node of a cluster going down once made it, silently)
    // nor give up: the upload is retried.
    let (remote, tmp, tree, _) = setup(144);
    let expected = Manifest::capture(&tree);
    remote.run(&["init"]).ok();
    let mut reset: HashSet<String> = HashSet::new();
    remote.proxy.set_rule(move |r| {
        if r.is("PUT", "containers") && reset.insert(r.target.clone()) {
            Action::Reset
        } else {
            Action::Forward
        }
    });
    let id = remote.backup(&tree);
    assert!(remote.proxy.faults() >= 3, "{:?}", remote.proxy.log());
    remote.proxy.heal();
    remote.restore_matches(&id, &expected, &tmp.path().join("out"));
}

#[test]
fn a_store_gone_in_the_middle_of_a_backup_fails_it_cleanly() {
    let (remote, tmp, tree, mut rng) = setup(142);
    let out = tmp.path().join("out");
    let first = Manifest::capture(&tree);
    let first_id = remote.backup(&tree);

    // Every request after the first container upload of the next backup
    // is dropped: the store is unreachable from then on.
    modify(&tree, &mut rng);
    modify(&tree, &mut rng);
    let mut uploads = 0;
    remote.proxy.set_rule(move |r| {
        if uploads > 0 {
            return Action::Drop;
        }
        if r.is("PUT", "containers") {
            uploads += 1;
        }
        Action::Forward
    });
    let started = Instant::now();
    let failed = remote.run(&["backup", "-q", s(&tree)]);
    let took = started.elapsed();
    assert_ne!(failed.code, Some(0), "{}", failed.all_output());
    // One error line; besides it, at most a notice that the lease could
    // not be deleted either (and how long it keeps the next writer waiting).
    let errors: Vec<&str> = failed
        .stderr
        .lines()
        .filter(|l| !l.starts_with("cairn: notice: could not remove lock lease"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", failed.stderr);
    assert!(
        errors[0].starts_with("cairn: error: ") && errors[0].contains("cannot reach the store"),
        "{}",
        failed.stderr
    );
    assert!(took < Duration::from_secs(120), "failing took {took:?}");

    remote.proxy.heal();
    assert_eq!(remote.snapshot_ids(), vec![first_id.clone()]);
    remote.restore_matches(&first_id, &first, &out);
    // The failed backup could not delete its lease: the next one waits it
    // out, then stores what the failed one did not commit.
    let second = Manifest::capture(&tree);
    let second_id = remote.backup(&tree);
    remote.restore_matches(&second_id, &second, &out);
    remote.check_read_data_clean();
}

#[test]
fn a_backup_killed_at_each_commit_step_leaves_committed_snapshots_whole() {
    let (remote, tmp, tree, mut rng) = setup(143);
    let out = tmp.path().join("out");
    let mut committed = vec![(remote.backup(&tree), Manifest::capture(&tree))];

    // (the request held while the backup is killed, whether the store
    // applied it first, whether a snapshot must then be listed)
    let kill_points: [(&str, &str, Action, bool); 5] = [
        ("PUT", "containers", Action::Hold, false),
        ("PUT", "containers", Action::ForwardThenHold, false),
        ("PUT", "index", Action::Hold, false),
        ("PUT", "snapshots", Action::Hold, false),
        ("PUT", "snapshots", Action::ForwardThenHold, true),
    ];
    for (method, dir, action, listed) in kill_points {
        let ctx = format!("killed at {method} {dir}/ ({action:?})");
        modify(&tree, &mut rng);
        let current = Manifest::capture(&tree);
        let mut hit = false;
        remote.proxy.set_rule(move |r| {
            if !hit && r.is(method, dir) {
                hit = true;
                return action;
            }
            Action::Forward
        });
        let args = ["backup", "--init", "--wait", "-q", s(&tree)];
        let mut child = remote.command(&args).spawn().unwrap();
        let held = remote.proxy.wait_for_held(Duration::from_secs(120));
        child.kill().unwrap(); // SIGKILL
        let run = finish(child, &args);
        assert!(held, "{ctx}: the request never came: {}", run.all_output());
        remote.proxy.release_held();
        remote.proxy.heal();

        let ids = remote.snapshot_ids();
        for (id, _) in &committed {
            assert!(ids.contains(id), "{ctx}: snapshot {id} vanished");
        }
        let new: Vec<&String> = ids
            .iter()
            .filter(|id| !committed.iter().any(|(c, _)| c == *id))
            .collect();
        assert_eq!(
            new.len(),
            usize::from(listed),
            "{ctx}: new snapshots {new:?}"
        );
        if let Some(id) = new.first() {
            remote.restore_matches(id, &current, &out);
            committed.push(((*id).clone(), current));
        }
    }

    // The next backup waits out the last dead lease and completes; every
    // snapshot restores byte-identically and nothing is damaged.
    modify(&tree, &mut rng);
    committed.push((remote.backup(&tree), Manifest::capture(&tree)));
    assert_eq!(
        remote.snapshot_ids(),
        committed
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>()
    );
    for (id, manifest) in &committed {
        remote.restore_matches(id, manifest, &out);
    }
    remote.check_read_data_clean();
}
