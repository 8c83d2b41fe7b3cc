//! Interrupted commands through the binary: Ctrl-C (SIGINT) stops a
//! writing command at a safe point with exit 130 and one line saying what
//! was committed, its lock released; what a repository looks like to
//! `check` after the first backup or a copy into a new repository died
//! before committing anything (healthy: the missing index is a note), and
//! that real damage beside it still fails the check.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Whether `dir` holds at least one container file.
fn has_container(repo: &Path) -> bool {
    repo.join("containers").is_dir()
        && walk(&repo.join("containers"))
            .iter()
            .any(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().contains("tmp"))
}

/// Waits until `repo` holds a container while `child` still runs, then
/// kills it with SIGKILL. Panics when the child ends first: the kill must
/// land mid-command for the test to mean anything.
fn kill_once_a_container_is_written(child: &mut Child, repo: &Path) {
    wait_for_a_container(child, repo);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Waits until `repo` holds a container while `child` still runs.
fn wait_for_a_container(child: &mut Child, repo: &Path) {
    let started = Instant::now();
    while !has_container(repo) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the command ended before it wrote a container"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "no container");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the command ended before it could be killed"
    );
}

/// Sends SIGINT (what Ctrl-C sends) to `child`.
fn interrupt(child: &Child) {
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Many small containers of random data: the first appears early in a
/// backup that runs for a while.
/// A clear source repository holding one backup of a [`big_tree`] (small
/// containers) and an empty destination made for copies from it (`init
/// --from-repo --copy-chunker-params`): (source, destination, tree).
fn copy_pair(dir: &Path, seed: u64) -> (PathBuf, PathBuf, PathBuf) {
    let src = dir.join("src");
    let dst = dir.join("dst");
    let tree = big_tree(dir, seed);
    cairn(&src, &["init", "-q", "--container-size", "256KiB"]).ok();
    cairn(&src, &["backup", "-q", s(&tree)]).ok();
    let from = ["--from-repo", s(&src), "--copy-chunker-params"];
    let mut init = vec!["init", "-q", "--container-size", "256KiB"];
    init.extend(from);
    cairn(&dst, &init).ok();
    (src, dst, tree)
}

fn big_tree(dir: &Path, seed: u64) -> PathBuf {
    let tree = dir.join("tree");
    let mut rng = Rng::new(seed);
    build_random_files(&tree, &mut rng, 8, 2 << 20);
    tree
}

fn spawn(repo: &Path, args: &[&str]) -> Child {
    command(repo, args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The first backup of a repository killed after it wrote containers:
/// nothing is committed, `check` says so in a note and exits 0 (the index
/// is written by the next backup, not lost); the next backup indexes the
/// orphans and restores byte for byte. A damaged orphan is still damage.
#[test]
fn check_after_an_interrupted_first_backup_reports_a_healthy_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = big_tree(tmp.path(), 90);
    cairn(&repo, &["init", "-q", "--container-size", "256KiB"]).ok();
    let mut child = spawn(&repo, &["backup", "-q", s(&tree)]);
    kill_once_a_container_is_written(&mut child, &repo);
    assert!(snapshot_ids(&repo).is_empty(), "nothing was committed");

    let r = cairn(&repo, &["check"]).ok();
    assert!(
        r.stderr
            .contains("cairn: note: no snapshot was committed yet")
            && !r.stderr.contains("damage"),
        "{}",
        r.stderr
    );
    let j = cairn(&repo, &["check", "--read-data", "--json"])
        .ok()
        .json();
    assert!(j["problems"].as_array().unwrap().is_empty(), "{j}");
    assert_eq!(j["notes"].as_array().unwrap().len(), 1, "{j}");

    // Real damage beside the missing index still fails the check.
    let damaged = tmp.path().join("damaged");
    copy_dir(&repo, &damaged);
    let first = files_under(&damaged.join("containers"))[0].clone();
    truncate(&first, 50);
    let r = cairn(&damaged, &["check"]).code(1);
    assert!(
        r.stderr.contains("cairn: damage: container unreadable"),
        "{}",
        r.stderr
    );

    // The next backup completes and restores exactly.
    let expected = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-q", "-t", s(&out)]).ok();
    assert_tree_matches(&expected, &out.join("tree"));
    let r = cairn(&repo, &["check", "--read-data"]).ok();
    assert!(!r.stderr.contains("note"), "{}", r.stderr);
}

/// A copy into a new (empty) repository killed after it wrote containers: the
/// destination checks healthy (a note), and the next copy completes it.
#[test]
fn check_after_an_interrupted_copy_reports_a_healthy_destination() {
    // Clear: the destination then needs no password of its own.
    set_encryption("none");
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst, tree) = copy_pair(tmp.path(), 91);
    let mut child = spawn(&src, &["copy", "-q", "--to", s(&dst)]);
    kill_once_a_container_is_written(&mut child, &dst);
    assert!(snapshot_ids(&dst).is_empty(), "nothing was committed");

    let r = cairn(&dst, &["check"]).ok();
    assert!(
        r.stderr.contains("cairn: note:") && !r.stderr.contains("damage"),
        "{}",
        r.stderr
    );

    cairn(&src, &["copy", "-q", "--to", s(&dst)]).ok();
    let expected = Manifest::capture(&tree);
    let out = tmp.path().join("out");
    cairn(&dst, &["restore", "latest", "-q", "-t", s(&out)]).ok();
    assert_tree_matches(&expected, &out.join("tree"));
    cairn(&dst, &["check", "--read-data"]).ok();
}

/// Ctrl-C in the middle of the first backup (containers written, nothing
/// committed): exit 130 and one line saying nothing was committed; no
/// snapshot; the lock is released (a backup without --wait starts at once);
/// `check` calls the repository healthy; the next backup restores exactly.
#[test]
fn ctrl_c_during_a_backup_says_nothing_was_committed_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = big_tree(tmp.path(), 92);
    cairn(&repo, &["init", "-q", "--container-size", "256KiB"]).ok();
    let mut child = command(&repo, &["backup", "-q", s(&tree)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_a_container(&mut child, &repo);
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "cairn: interrupted: nothing committed: the snapshot was not written (the containers \
         already written are reused by the next backup)",
    );
    assert!(snapshot_ids(&repo).is_empty(), "no snapshot");
    let r = cairn(&repo, &["check"]).ok();
    assert!(r.stderr.contains("cairn: note:"), "{}", r.stderr);

    let expected = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-q", "-t", s(&out)]).ok();
    assert_tree_matches(&expected, &out.join("tree"));
    cairn(&repo, &["check", "--read-data"]).ok();
}

/// Runs `args` on `repo`, waits until `ready` holds while it runs, sends
/// SIGINT, and returns its exit code and standard error.
fn interrupt_when(repo: &Path, args: &[&str], ready: impl Fn() -> bool) -> (Option<i32>, String) {
    let mut child = command(repo, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{args:?} ended before the interrupt"
        );
        assert!(started.elapsed() < Duration::from_secs(60), "never ready");
        std::thread::sleep(Duration::from_millis(1));
    }
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Ctrl-C once a collection has reserved its ids (past Merge): exit 130,
/// one line saying nothing was deleted (or, had it reached its commit,
/// that it finished), the gc lock released (the next collection runs
/// without --wait and completes), and the kept snapshot restores exactly.
#[test]
fn ctrl_c_during_gc_says_what_was_deleted_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(93);
    build_random_files(&tree, &mut rng, 40, 100_000);
    cairn(&repo, &["init", "-q", "--container-size", "128KiB"]).ok();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    for i in (0..40).step_by(2) {
        write_file(&tree.join(format!("new{i}")), &rng.bytes(100_000), 0o644);
    }
    let kept = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    cairn(&repo, &["forget", "--keep-last", "1", "-q"]).ok();
    let before = files_under(&repo.join("containers"));

    let (code, stderr) = interrupt_when(&repo, &["gc", "-q"], || repo.join("gc-ids").exists());
    assert_eq!(code, Some(130), "{stderr}");
    let line = stderr.trim();
    assert!(
        line.starts_with(
            "cairn: interrupted: garbage collection stopped before its commit: nothing was \
             deleted"
        ) || line.starts_with("cairn: interrupted: the command had already finished"),
        "{stderr}"
    );
    if line.contains("nothing was deleted") {
        let after = files_under(&repo.join("containers"));
        assert!(before.iter().all(|c| after.contains(c)), "a container went");
    }
    cairn(&repo, &["check"]).ok();
    let j = cairn(&repo, &["--json", "gc"]).ok().json();
    assert!(j["containers_deleted"].as_u64().unwrap() > 0 || !line.contains("nothing"));
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-q", "-t", s(&out)]).ok();
    assert_tree_matches(&kept, &out.join("tree"));
}

/// Ctrl-C during a copy into a new (empty) repository, once a container is there:
/// exit 130, one line saying no snapshot was copied; the next copy
/// completes and restores exactly.
#[test]
fn ctrl_c_during_a_copy_says_which_snapshots_were_committed() {
    set_encryption("none");
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst, tree) = copy_pair(tmp.path(), 94);
    let (code, stderr) = interrupt_when(&src, &["copy", "-q", "--to", s(&dst)], || {
        has_container(&dst)
    });
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr
            .trim()
            .starts_with("cairn: interrupted: 0 snapshot(s) copied and committed before it"),
        "{stderr}"
    );
    assert!(snapshot_ids(&dst).is_empty());
    cairn(&dst, &["check"]).ok();
    cairn(&src, &["copy", "-q", "--to", s(&dst)]).ok();
    let out = tmp.path().join("out");
    cairn(&dst, &["restore", "latest", "-q", "-t", s(&out)]).ok();
    assert_tree_matches(&Manifest::capture(&tree), &out.join("tree"));
}

/// Ctrl-C while a backup waits for the writer lock (`--wait`; another
/// process holds it): nothing was written, so it ends at once with exit
/// 130 and says so.
#[test]
fn ctrl_c_while_waiting_for_the_lock_ends_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    cairn(&repo, &["init", "-q"]).ok();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    // flock(1) holds the local backend's writer lock (an flock(2) lock).
    let holder = std::process::Command::new("flock")
        .arg(repo.join("locks/write"))
        .args(["sleep", "60"])
        .spawn();
    let Ok(mut holder) = holder else {
        return skip_or_fail("flock(1) is not installed (util-linux)");
    };
    let started = Instant::now();
    // `forget` keeping everything takes the lock and changes nothing.
    while cairn(&repo, &["forget", "--keep-last", "100", "-q"]).code != Some(1) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "flock never held the lock"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let args = ["backup", "--wait", "-q", s(&tree)];
    let mut waiter = Watched::spawn(command(&repo, &args).stdin(Stdio::null()), &args);
    // The waiter reports the held lock and the kernel shows it blocked on
    // the lock file: the interrupt reaches it inside its wait.
    assert!(
        waiter.wait_for_stderr(
            "cairn: waiting for another writer to finish",
            Duration::from_secs(120)
        ),
        "--wait did not report waiting:\n{}",
        waiter.stderr_so_far()
    );
    wait_until_flock_blocked(&repo.join("locks/write"), Duration::from_secs(120));
    assert!(waiter.still_running(), "it did not wait");
    let sent = std::process::Command::new("kill")
        .args(["-INT", &waiter.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = waiter.finish(Duration::from_secs(120));
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.code, Some(130), "{}", out.stderr);
    assert_eq!(
        out.stderr.lines().last().unwrap_or_default(),
        "cairn: interrupted: nothing committed (nothing was written yet)",
        "{}",
        out.stderr
    );
    assert_eq!(snapshot_ids(&repo).len(), 1);
}
