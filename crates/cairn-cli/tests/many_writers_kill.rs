//! Backups from several hosts and garbage collections running together
//! through the binary, with SIGKILL at random moments of any of them
//! (issue 33's fault test; docs/concurrency.md). Round after round three
//! backups (trees sharing a file, so they store it side by side) and a
//! collection start together, and each process is killed with probability
//! one half at a random moment of the round; older snapshots are forgotten
//! between rounds, so every collection has garbage. Afterwards: every
//! snapshot a backup reported committed (and not forgotten) restores byte
//! for byte, `check --read-data` is clean, and after two collections
//! nothing is left that no collection reclaims (no staged record, pending
//! list or reservation; no container referenced by no snapshot).
//!
//! CI runs `CAIRN_FAULT_ROUNDS` rounds (default 6); `bench/many-writers-kill.sh`
//! runs hundreds.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

const HOSTS: usize = 3;

fn rounds() -> usize {
    std::env::var("CAIRN_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// A new generation of host `h`'s tree: two files replaced, and the file
/// every host shares this round rewritten the same way in each.
fn next_generation(tree: &Path, rng: &mut Rng, shared: &[u8], round: usize) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(tree)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("shared"))
        .collect();
    files.sort();
    for i in 0..2 {
        let victim = files.remove(rng.range(0, files.len() as u64) as usize);
        std::fs::remove_file(victim).unwrap();
        write_file(&tree.join(format!("r{round}_{i}")), &rng.bytes(60_000), 0o644);
    }
    write_file(&tree.join("shared"), shared, 0o644);
}

fn spawn(repo: &Path, args: &[&str]) -> Child {
    command(repo, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child`; its stdout if it exited 0. A killed process, or one
/// that failed with one line (a backup that a collection reaped), gives
/// `None`; a panic or a death by another signal fails the test.
fn finish(child: Child, what: &str) -> Option<String> {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    if out.status.success() {
        return Some(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    use std::os::unix::process::ExitStatusExt;
    match out.status.signal() {
        Some(9) => None,
        Some(sig) => panic!("{what} died by signal {sig}: {stderr}"),
        None => {
            assert!(
                stderr.trim_end().lines().count() == 1 && stderr.contains("error"),
                "{what} failed without one clear line: {stderr}"
            );
            None
        }
    }
}

#[test]
fn sigkill_of_backups_and_collections_running_together_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let mut rng = Rng::new(2033);
    let trees: Vec<PathBuf> = (0..HOSTS).map(|h| dir.path().join(format!("host{h}"))).collect();
    for t in &trees {
        build_random_files(t, &mut rng, 6, 60_000);
    }
    cairn(&repo, &["init", "--container-size", "128KiB", "-q"]).ok();
    // The first backup runs alone (it writes the index file).
    cairn(&repo, &["backup", s(&trees[0]), "--host", "host0", "-q"]).ok();
    let mut committed: Vec<(String, Manifest)> = Vec::new();
    let mut round_time = Duration::from_millis(400);
    let (mut kills, mut landed, mut reaped_or_failed) = (0, 0, 0);
    for round in 0..rounds() {
        let shared = rng.bytes(80_000);
        let mut manifests = Vec::new();
        for t in &trees {
            next_generation(t, &mut rng, &shared, round);
            manifests.push(Manifest::capture(t));
        }
        let started = Instant::now();
        let mut backups: Vec<Child> = trees
            .iter()
            .enumerate()
            .map(|(h, t)| {
                let host = format!("host{h}");
                spawn(&repo, &["--json", "backup", s(t), "--host", &host])
            })
            .collect();
        let mut gc = spawn(&repo, &["gc", "--wait", "-q", "--collector", ["lgc", "pgc", "pgc+"][round % 3]]);
        // Round 0 is timed unharmed: later kills spread over its length.
        if round > 0 {
            for child in backups.iter_mut().chain(std::iter::once(&mut gc)) {
                if rng.range(0, 2) == 0 {
                    std::thread::sleep(Duration::from_micros(
                        rng.range(0, round_time.as_micros() as u64 / 2 + 1),
                    ));
                    kills += 1;
                    landed += usize::from(child.try_wait().unwrap().is_none());
                    let _ = child.kill();
                }
            }
        }
        for (h, child) in backups.into_iter().enumerate() {
            match finish(child, &format!("round {round} backup of host{h}")) {
                Some(out) => {
                    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
                    let id = json["id"].as_str().unwrap().to_string();
                    committed.push((id, manifests[h].clone()));
                }
                None => reaped_or_failed += 1,
            }
        }
        finish(gc, &format!("round {round} gc"));
        if round == 0 {
            round_time = started.elapsed();
        }
        cairn(&repo, &["forget", "--keep-last", "2", "--wait", "-q"]).ok();
        let present = snapshot_ids(&repo);
        committed.retain(|(id, _)| present.contains(id));
        cairn(&repo, &["check"]).ok();
    }
    eprintln!(
        "{kills} kills, {landed} while the process ran; {reaped_or_failed} backups did not commit; \
         a round takes {round_time:?}"
    );
    assert!(landed * 3 >= kills, "only {landed} of {kills} kills landed");
    // Two collections: the first may judge again what a killed one left.
    cairn(&repo, &["gc", "-q"]).ok();
    cairn(&repo, &["gc", "-q"]).ok();
    let check = cairn(&repo, &["check", "--read-data"]).ok();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        !report.contains("reclaimable"),
        "garbage that no collection reclaims: {report}"
    );
    for (i, (id, expected)) in committed.iter().enumerate() {
        let target = dir.path().join(format!("out{i}"));
        cairn(&repo, &["restore", id, "--target", s(&target), "-q"]).ok();
        let top = std::fs::read_dir(&target).unwrap().next().unwrap().unwrap().path();
        assert_tree_matches(expected, &top);
        std::fs::remove_dir_all(&target).unwrap();
    }
    for leftover in ["staged", "gc-pending", "gc-ids"] {
        let p = repo.join(leftover);
        let empty = !p.exists() || (p.is_dir() && std::fs::read_dir(&p).unwrap().next().is_none());
        assert!(empty, "{leftover} left behind");
    }
    // Sessions: only the tombstones of reaped writers.
    if let Ok(rd) = std::fs::read_dir(repo.join("sessions")) {
        for e in rd {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(name.ends_with(".end"), "session {name} left behind");
        }
    }
}
