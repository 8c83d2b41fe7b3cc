//! Randomized hostile operations: a seeded sequence of backups (the first
//! racing an `init`), deletion and corruption of containers, index files and
//! Summary Vector checkpoints, `repair index`, and restores into dirty
//! targets (hard links and symlinks pointing outside, stale files).
//!
//! Invariant after every command: it exits 0 with a result that restores
//! byte-identically, or it exits non-zero with a `cairn: error:` line and no
//! panic; and no byte outside a restore's target ever changes.
//!
//! Both clear and encrypted repositories run the sequences.
//!
//! One exception, by design: a byte flipped inside a container's *data*
//! section (silent bit rot, metadata intact) is invisible to a backup, which
//! reads only metadata sections (DDFS §4.4); a later backup may deduplicate
//! against the damaged chunk. Its restore then fails cleanly, naming the
//! container, and `check --read-data` finds it; `repair index --read-data`
//! removes such chunks from the index so the next backup stores them again.
//! Until that repair runs, a fresh snapshot's restore may fail that way,
//! and only that way.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::damage::file_name;
use common::*;

struct World {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    data: PathBuf,
    outside: PathBuf,
    rng: Rng,
    /// Snapshot id -> the tree it holds.
    snapshots: Vec<(String, Manifest)>,
    restores: usize,
    /// A data byte was flipped and no `repair index --read-data` ran since.
    bitrot: bool,
}

fn failed_cleanly(r: &Run, what: &str) {
    assert!(
        matches!(r.code, Some(c) if c != 0),
        "{what}: expected a failure"
    );
    assert!(
        r.stderr.lines().any(|l| l.starts_with("cairn: error: ")),
        "{what}: no `cairn: error:` line:\n{}",
        r.stderr
    );
}

impl World {
    fn new(seed: u64) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let data = tmp.path().join("data");
        let outside = tmp.path().join("outside");
        let mut rng = Rng::new(seed);
        build_random_files(&data, &mut rng, 6, 400_000);
        write_file(&data.join("sub/a.txt"), &rng.text(20_000), 0o644);
        write_file(&data.join("sub/b.txt"), &rng.text(30_000), 0o644);
        write_file(&outside.join("victim.txt"), b"outside: do not touch", 0o644);
        fs::create_dir_all(outside.join("dir")).unwrap();
        write_file(&outside.join("dir/keep.txt"), b"keep", 0o644);
        World {
            tmp,
            repo,
            data,
            outside,
            rng,
            snapshots: Vec::new(),
            restores: 0,
            bitrot: false,
        }
    }

    fn containers(&self) -> Vec<PathBuf> {
        files_under(&self.repo.join("containers"))
    }

    fn pick(&mut self, v: &[PathBuf]) -> Option<PathBuf> {
        (!v.is_empty()).then(|| v[self.rng.range(0, v.len() as u64) as usize].clone())
    }

    fn mutate_data(&mut self) {
        let i = self.rng.range(0, 6);
        let n = self.rng.range(50_000, 600_000) as usize;
        write_file(
            &self.data.join(format!("f{i:02}.bin")),
            &self.rng.bytes(n),
            0o644,
        );
        if self.rng.range(0, 3) == 0 {
            let t = self.rng.text(10_000);
            write_file(&self.data.join("sub/a.txt"), &t, 0o644);
        }
    }

    /// A backup; if it succeeds its snapshot must restore byte-identically
    /// right away.
    fn backup(&mut self) {
        let m = Manifest::capture(&self.data);
        let r = cairn(&self.repo, &["backup", "--json", s(&self.data)]);
        if r.code == Some(0) {
            let id = r.json()["id"].as_str().unwrap().to_string();
            self.restore_clean(&id, &m);
            self.snapshots.push((id, m));
        } else {
            failed_cleanly(&r, "backup");
        }
    }

    /// The first backup races an `init` with other settings.
    fn racing_first_backup(&mut self) {
        let m = Manifest::capture(&self.data);
        let spawn = |args: &[&str]| {
            command(&self.repo, args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let b = spawn(&["backup", "--json", s(&self.data)]);
        // Other settings than the backup's: its fingerprint in the clear,
        // its algorithm when encrypted (which needs BLAKE3).
        let i = if encrypting() {
            spawn(&["init", "-q", "--encryption", "chacha20poly1305"])
        } else {
            spawn(&["init", "-q", "--fingerprint", "sha256"])
        };
        let b = finish(b, &["backup"]);
        let i = finish(i, &["init"]);
        if i.code != Some(0) {
            failed_cleanly(&i, "racing init");
        }
        if b.code == Some(0) {
            let id = b.json()["id"].as_str().unwrap().to_string();
            self.restore_clean(&id, &m);
            self.snapshots.push((id, m));
        } else {
            failed_cleanly(&b, "racing backup");
        }
    }

    fn restore_clean(&mut self, id: &str, m: &Manifest) {
        let out = self.tmp.path().join(format!("clean{}", self.restores));
        self.restores += 1;
        let r = cairn(&self.repo, &["restore", id, "--target", s(&out)]);
        if r.code == Some(0) {
            assert_tree_matches(m, &out.join("data"));
        } else {
            // In an encrypted repository the damaged chunk's block fails to
            // authenticate before any fingerprint is computed.
            let rot = ["does not match its fingerprint", "authentication failed"];
            assert!(
                self.bitrot && rot.iter().any(|m| r.stderr.contains(m)),
                "a backup exited 0 but its snapshot does not restore:\n{}",
                r.stderr
            );
            failed_cleanly(&r, "restore after bit rot");
        }
        let _ = fs::remove_dir_all(&out);
    }

    /// Restores a random snapshot into a target holding a hard link to an
    /// outside file and a symlink to an outside directory where the snapshot
    /// has a file and a directory. Damage injected earlier may make it fail;
    /// it must never write outside.
    fn restore_dirty(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let k = self.rng.range(0, self.snapshots.len() as u64) as usize;
        let (id, m) = self.snapshots[k].clone();
        let out = self.tmp.path().join(format!("dirty{}", self.restores));
        self.restores += 1;
        fs::create_dir_all(out.join("data")).unwrap();
        fs::hard_link(self.outside.join("victim.txt"), out.join("data/f00.bin")).unwrap();
        std::os::unix::fs::symlink(self.outside.join("dir"), out.join("data/sub")).unwrap();
        let before = Manifest::capture(&self.outside);
        let r = cairn(&self.repo, &["restore", &id, "--target", s(&out)]);
        if r.code == Some(0) {
            assert_tree_matches(&m, &out.join("data"));
        } else {
            failed_cleanly(&r, "dirty restore");
        }
        assert!(
            Manifest::capture(&self.outside) == before,
            "a restore changed bytes outside its target"
        );
        fs::remove_dir_all(&out).unwrap();
    }

    fn damage(&mut self) {
        match self.rng.range(0, 6) {
            0 => {
                let c = self.containers();
                if let Some(f) = self.pick(&c) {
                    fs::remove_file(f).unwrap();
                }
            }
            1 => {
                let c = self.containers();
                if let Some(f) = self.pick(&c) {
                    let len = fs::metadata(&f).unwrap().len() as i64;
                    let at = self.rng.range(0, len as u64) as i64;
                    flip_byte(&f, at);
                    self.bitrot = true;
                }
            }
            2 => {
                let _ = fs::remove_dir_all(self.repo.join("index"));
            }
            3 => {
                let f = files_under(&self.repo.join("index"));
                if let Some(f) = self.pick(&f) {
                    flip_byte(&f, 300);
                }
            }
            4 => {
                let f = files_under(&self.repo.join("bloom"));
                if let Some(f) = self.pick(&f) {
                    if self.rng.range(0, 2) == 0 {
                        fs::remove_file(f).unwrap();
                    } else {
                        truncate(&f, 100);
                    }
                }
            }
            _ => {
                let read_data = self.rng.range(0, 2) == 0;
                let args: &[&str] = if read_data {
                    &["repair", "index", "--read-data"]
                } else {
                    &["repair", "index"]
                };
                let r = cairn(&self.repo, args);
                if r.code == Some(0) {
                    self.bitrot &= !read_data;
                } else {
                    failed_cleanly(&r, "repair index");
                }
            }
        }
    }
}

fn run_sequence(seed: u64, steps: usize) {
    let mut w = World::new(seed);
    w.racing_first_backup();
    for _ in 0..steps {
        match w.rng.range(0, 10) {
            0..=3 => {
                w.mutate_data();
                w.backup();
            }
            4..=6 => w.damage(),
            _ => w.restore_dirty(),
        }
    }
    // Whatever happened, check must not panic and a repair then a fresh
    // backup must give a restorable snapshot.
    let r = cairn(&w.repo, &["check"]);
    if r.code != Some(0) {
        failed_cleanly(&r, "check");
    }
    repair_then_backup_restores(&mut w);
}

/// The newest index generation present (file `index/<016x>`, or a delta
/// `index/<016x>.<08x>` over it), if any.
fn newest_index_generation(repo: &Path) -> Option<u64> {
    files_under(&repo.join("index"))
        .iter()
        .filter_map(|f| {
            let name = file_name(f);
            u64::from_str_radix(name.split('.').next()?, 16).ok()
        })
        .max()
}

/// `repair index --read-data` runs and rebuilds the index from every
/// container present (writing a newer generation, removing containers with
/// damaged chunks), then a backup of changed data commits a new snapshot
/// that restores byte for byte.
fn repair_then_backup_restores(w: &mut World) {
    let containers_before = w.containers().len() as u64;
    let generation_before = newest_index_generation(&w.repo);
    let r = cairn(&w.repo, &["repair", "index", "--read-data", "--json"]).ok();
    let report = r.json();
    assert_eq!(
        report["containers"].as_u64(),
        Some(containers_before),
        "the repair did not read every container: {report}"
    );
    let generation = report["index_generation"].as_u64().unwrap();
    assert!(
        generation_before.is_none_or(|before| generation > before),
        "the repair wrote no newer index: {generation} after {generation_before:?}"
    );
    let index_files: Vec<String> = files_under(&w.repo.join("index"))
        .iter()
        .map(|f| file_name(f))
        .collect();
    assert_eq!(
        index_files,
        vec![format!("{generation:016x}")],
        "the repaired index is not the only index file"
    );
    let present: Vec<String> = w.containers().iter().map(|f| file_name(f)).collect();
    for salvaged in report["salvaged_containers"].as_array().unwrap() {
        let old = salvaged[0].as_str().unwrap();
        assert!(
            !present.iter().any(|p| p == old),
            "container {old} had damaged chunks and is still present"
        );
    }
    w.bitrot = false;

    let snapshots_before = snapshot_ids(&w.repo);
    w.mutate_data();
    let m = Manifest::capture(&w.data);
    let r = cairn(&w.repo, &["backup", "--json", s(&w.data)]).ok();
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert!(!snapshots_before.contains(&id), "no new snapshot: {id}");
    let snapshots_after = snapshot_ids(&w.repo);
    assert_eq!(snapshots_after.len(), snapshots_before.len() + 1);
    assert!(snapshots_after.contains(&id));
    // With no bit rot outstanding, restore_clean requires the restore to
    // succeed and the bytes to equal the source's.
    w.restore_clean(&id, &m);
}

/// Runs three seeded sequences from `first`; `CAIRN_HOSTILE_SEEDS=N` runs
/// N more for a longer search.
fn run_seeds(first: u64) {
    let extra: u64 = std::env::var("CAIRN_HOSTILE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for seed in first..first + 3 + extra {
        run_sequence(seed, 24);
    }
}

#[test]
fn hostile_operations_never_lose_a_reported_success() {
    run_seeds(1);
}

/// The same sequences on encrypted repositories (AES-256-GCM): damage is
/// felt per sealed block, and the invariant is the same.
#[test]
fn hostile_operations_on_encrypted_repositories() {
    set_encryption("aes-256-gcm");
    run_seeds(101);
}
