//! Crash safety: SIGKILL a backup at random moments, over and over. Every
//! snapshot committed before must stay listed and restore byte-identical,
//! `check` must stay clean (orphan containers are reclaimable, not damage),
//! and only complete snapshots may ever be listed.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use common::*;

const FILES: usize = 6;
const FILE_SIZE: usize = 4 << 20;
const ITERATIONS: usize = 24;

/// A different tree each time: two files rewritten (new containers), a few
/// bytes changed in a third, one small file replaced.
fn modify(tree: &Path, rng: &mut Rng) {
    for _ in 0..2 {
        let i = rng.range(0, FILES as u64);
        write_file(
            &tree.join(format!("f{i:02}.bin")),
            &rng.bytes(FILE_SIZE),
            0o644,
        );
    }
    let i = rng.range(0, FILES as u64);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(tree.join(format!("f{i:02}.bin")))
        .unwrap();
    f.seek(SeekFrom::Start(rng.range(0, FILE_SIZE as u64 - 64)))
        .unwrap();
    f.write_all(&rng.bytes(64)).unwrap();
    drop(f);
    write_file(&tree.join("sub/small.txt"), &rng.text(5_000), 0o600);
    set_mtime(&tree.join("sub/small.txt"), rng.mtime());
}

fn restore_and_compare(repo: &Path, id: &str, expected: &Manifest, out: &Path) {
    if out.exists() {
        std::fs::remove_dir_all(out).unwrap();
    }
    cairn(repo, &["restore", id, "-q", "-t", s(out)]).ok();
    assert_tree_matches(expected, &out.join("tree"));
}

#[test]
fn sigkill_during_backup_never_damages_committed_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let out = tmp.path().join("out");
    let mut rng = Rng::new(60);
    build_random_files(&tree, &mut rng, FILES, FILE_SIZE);
    write_file(&tree.join("sub/small.txt"), &rng.text(5_000), 0o600);

    // The first, good snapshot.
    let first = Manifest::capture(&tree);
    let started = Instant::now();
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    let full = started.elapsed();
    let first_id = b["id"].as_str().unwrap().to_string();
    // One backup of a modified tree, timed: the ones killed below are like
    // it, so their kill delays spread from 0 to (a little over) its duration.
    modify(&tree, &mut rng);
    let second = Manifest::capture(&tree);
    let started = Instant::now();
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    let incremental = started.elapsed();
    let second_id = b["id"].as_str().unwrap().to_string();
    restore_and_compare(&repo, &second_id, &second, &out);
    let mut committed = vec![first_id.clone(), second_id];
    eprintln!(
        "backup of {} MiB: {full:?} the first time, {incremental:?} after a change",
        first.total_file_bytes() >> 20
    );

    let args = ["backup", "-q", "--json", s(&tree)];
    let mut killed_midway = 0;
    for iteration in 0..ITERATIONS {
        modify(&tree, &mut rng);
        let current = Manifest::capture(&tree);
        let delay = incremental.mul_f64(rng.f64() * 1.1);
        let mut child = command(&repo, &args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let was_running = child.try_wait().unwrap().is_none();
        if was_running {
            child.kill().unwrap(); // SIGKILL
            killed_midway += 1;
        }
        let run = finish(child, &args);
        if !was_running {
            assert_eq!(run.code, Some(0), "iteration {iteration}: {}", run.stderr);
        }
        let ctx = format!(
            "iteration {iteration} (delay {delay:?}, {})",
            if was_running { "killed" } else { "finished" }
        );

        // Every committed snapshot is still listed, and `snapshots` reports
        // no damaged record (exit 0).
        let ids = snapshot_ids(&repo);
        for id in &committed {
            assert!(ids.contains(id), "{ctx}: snapshot {id} vanished");
        }
        let new: Vec<&String> = ids.iter().filter(|i| !committed.contains(i)).collect();
        assert!(new.len() <= 1, "{ctx}: {} new snapshots", new.len());
        // A snapshot that appeared (the backup got to its commit point) is
        // complete: it restores exactly the tree it was taken of.
        if let Some(id) = new.first() {
            restore_and_compare(&repo, id, &current, &out);
            committed.push((*id).clone());
        } else {
            assert!(was_running, "{ctx}: finished without a snapshot");
        }

        let check = cairn(&repo, &["check"]);
        assert_eq!(
            check.code,
            Some(0),
            "{ctx}: check failed:\n{}",
            check.all_output()
        );
        // The first snapshot restores byte-identical, every other iteration
        // (and at the end) to keep the runtime sane.
        if iteration % 2 == 1 {
            restore_and_compare(&repo, &first_id, &first, &out);
        }
    }
    eprintln!(
        "{killed_midway} of {ITERATIONS} backups killed midway, {} snapshots committed",
        committed.len()
    );
    assert!(
        killed_midway >= ITERATIONS / 2,
        "only {killed_midway} backups were killed while running"
    );

    // A normal backup succeeds afterwards, and everything verifies.
    let last = Manifest::capture(&tree);
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    let last_id = b["id"].as_str().unwrap().to_string();
    assert!(
        std::fs::read_dir(repo.join("tmp"))
            .unwrap()
            .next()
            .is_none(),
        "temporaries of killed writers were not cleaned up"
    );
    let check = cairn(&repo, &["check", "--read-data", "--json"])
        .ok()
        .json();
    assert_eq!(check["problems"], serde_json::json!([]));
    eprintln!(
        "reclaimable after the crashes: {} containers, {} bytes",
        check["reclaimable_containers"], check["reclaimable_bytes"]
    );
    restore_and_compare(&repo, &first_id, &first, &out);
    restore_and_compare(&repo, &last_id, &last, &out);
    let ids = snapshot_ids(&repo);
    assert_eq!(ids.len(), committed.len() + 1);
    // Every listed snapshot restores.
    for id in &ids {
        if out.exists() {
            std::fs::remove_dir_all(&out).unwrap();
        }
        cairn(&repo, &["restore", id, "-q", "-t", s(&out)]).ok();
    }
}
