//! Readers take no lock: everything they read is immutable, and a reader
//! that sees the index generation replaced under it reloads. So readers must
//! keep working, and keep being right, while a writer commits backup after
//! backup.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;

/// A repository with `prefill` small stdin snapshots (many containers).
fn prefilled(tmp: &Path, prefill: usize) -> PathBuf {
    let repo = tmp.join("repo");
    let mut rng = Rng::new(80);
    for i in 0..prefill {
        let name = format!("s{i}");
        cairn_stdin(
            &repo,
            &["backup", "-q", "--stdin", "--stdin-name", &name],
            &rng.bytes(100_000),
        )
        .ok();
    }
    repo
}

/// Runs at least `backups` small stdin backups on a thread, and goes on
/// until `readers` reports `min_rounds` reader rounds (so the readers
/// overlap it however slowly a loaded machine runs them); `done` turns
/// true at the end. Returns how many backups it made.
fn writer(
    repo: PathBuf,
    backups: usize,
    readers: Arc<AtomicUsize>,
    min_rounds: usize,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut rng = Rng::new(81);
        let mut made = 0;
        while made < backups || readers.load(Ordering::SeqCst) < min_rounds {
            cairn_stdin(
                &repo,
                &["backup", "-q", "--stdin", "--stdin-name", "w"],
                &rng.bytes(50_000),
            )
            .ok();
            made += 1;
        }
        done.store(true, Ordering::SeqCst);
        made
    })
}

#[test]
fn readers_stay_correct_while_a_writer_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = prefilled(tmp.path(), 3);
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(82));
    let m = Manifest::capture(&tree);
    let id = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let done = Arc::new(AtomicBool::new(false));
    const WRITES: usize = 40;
    const MIN_ROUNDS: usize = 3;
    let reader_rounds = Arc::new(AtomicUsize::new(0));
    let w = writer(
        repo.clone(),
        WRITES,
        reader_rounds.clone(),
        MIN_ROUNDS,
        done.clone(),
    );
    let out = tmp.path().join("out");
    let mut rounds = 0;
    while !done.load(Ordering::SeqCst) {
        let cat = cairn(&repo, &["cat", &id[..8], &format!("tree/{BIG1}")]).ok();
        assert!(cat.stdout == m.file(BIG1), "round {rounds}: cat differs");
        cairn(&repo, &["ls", "latest"]).ok();
        cairn(&repo, &["snapshots", "--json"]).ok();
        cairn(&repo, &["stats", "--json"]).ok();
        if rounds % 3 == 0 {
            if out.exists() {
                std::fs::remove_dir_all(&out).unwrap();
            }
            cairn(&repo, &["restore", &id, "-q", "-t", s(&out)]).ok();
            assert_tree_matches(&m, &out.join("tree"));
        }
        rounds += 1;
        reader_rounds.store(rounds, Ordering::SeqCst);
    }
    let made = w.join().unwrap();
    assert!(
        rounds >= MIN_ROUNDS,
        "only {rounds} reader rounds overlapped the writer"
    );
    assert_eq!(snapshot_ids(&repo).len(), 3 + 1 + made);
    cairn(&repo, &["check", "--read-data"]).ok();
}

#[test]
fn check_during_a_backup_reports_no_false_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = prefilled(tmp.path(), 40);
    let done = Arc::new(AtomicBool::new(false));
    let w = writer(repo.clone(), 120, Arc::default(), 0, done.clone());
    let mut runs = 0;
    let mut failures = Vec::new();
    while !done.load(Ordering::SeqCst) {
        let r = cairn(&repo, &["check", "-q"]);
        if r.code != Some(0) {
            failures.push(r.stderr.lines().next().unwrap_or_default().to_string());
        }
        runs += 1;
    }
    w.join().unwrap();
    cairn(&repo, &["check"]).ok();
    assert!(
        failures.is_empty(),
        "{} of {runs} concurrent checks failed on a healthy repository, e.g. {}",
        failures.len(),
        failures[0]
    );
}
