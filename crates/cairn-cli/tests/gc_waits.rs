//! A collection beside a backup that is paused (SIGSTOP) in the middle of
//! its run, on a local disk (docs/concurrency.md): the backup's session
//! lock stays held, so the collection condemns what it judged dead and
//! then waits for the backup instead of deleting anything; Ctrl-C stops
//! it with one line naming the backup it waited for, nothing deleted. The
//! backup, resumed, commits; the next collection judges again what the
//! stopped one condemned, and every snapshot restores.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn signal(child: &Child, sig: &str) {
    let sent = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn a_collection_waits_for_a_paused_backup_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let old = dir.path().join("old");
    let mut rng = Rng::new(404);
    build_random_files(&old, &mut rng, 8, 100_000);
    cairn(&repo, &["init", "--container-size", "128KiB", "-q"]).ok();
    let forgotten = cairn(&repo, &["--json", "backup", s(&old)]).ok().json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let kept_tree = dir.path().join("kept");
    build_random_files(&kept_tree, &mut rng, 4, 100_000);
    let kept = cairn(&repo, &["--json", "backup", s(&kept_tree)])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    cairn(&repo, &["forget", &forgotten, "-q"]).ok();
    // The backup: the forgotten tree again (deduplicated against chunks
    // the collection judges dead), and enough new data to be caught
    // running.
    let again = dir.path().join("again");
    copy_dir(&old, &again);
    build_random_files(&again.join("new"), &mut rng, 10, 200_000);
    let backup = command(&repo, &["--json", "backup", s(&again)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the backup's session", || {
        entries(&repo.join("sessions")) > 0
    });
    signal(&backup, "-STOP");
    let gc = command(&repo, &["gc"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the collection's condemnation", || {
        repo.join("gc-pending").exists()
    });
    let containers = entries(&repo.join("containers"));
    std::thread::sleep(Duration::from_millis(500));
    // Still waiting: nothing deleted.
    assert_eq!(entries(&repo.join("containers")), containers);
    signal(&gc, "-INT");
    let out = gc.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        last.contains("waiting for 1 running backup") && last.contains("nothing was deleted"),
        "{stderr}"
    );
    signal(&backup, "-CONT");
    let out = backup.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let resumed = json["id"].as_str().unwrap().to_string();
    let report = cairn(&repo, &["--json", "gc"]).ok().json();
    assert!(
        report["containers_deleted"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert!(!repo.join("gc-pending").exists());
    cairn(&repo, &["check", "--read-data"]).ok();
    for (id, tree) in [(&kept, &kept_tree), (&resumed, &again)] {
        let target = dir.path().join("out");
        let _ = std::fs::remove_dir_all(&target);
        cairn(&repo, &["restore", id, "--target", s(&target), "-q"]).ok();
        let name = tree.file_name().unwrap();
        assert_tree_matches(&Manifest::capture(tree), &target.join(name));
    }
}
