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
use std::os::unix::fs::MetadataExt;
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

// ---------------------------------------------------------------------------
// Hard links under every overwrite mode (issue 30, defect 1)
// ---------------------------------------------------------------------------

/// A snapshot holding the hard-link group `tree/hl1`, `tree/hl2`,
/// `tree/hl3` (one inode, content `HL`), restored into a target where
/// `tree/hl1` is already a hard link to a file outside the target.
struct LinkWorld {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    /// The backed-up tree as recorded before the backup.
    tree: Manifest,
    /// The mtime of the group's inode.
    mtime: (i64, u32),
}

impl LinkWorld {
    fn new() -> LinkWorld {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let src = tmp.path().join("tree");
        write_file(&src.join("hl1"), b"HL", 0o644);
        fs::hard_link(src.join("hl1"), src.join("hl2")).unwrap();
        fs::hard_link(src.join("hl1"), src.join("hl3")).unwrap();
        write_file(&src.join("plain"), b"plain", 0o644);
        let mtime = (1_600_000_000, 123_456_789);
        set_mtime(&src.join("hl1"), mtime);
        set_mtime(&src.join("plain"), mtime);
        let tree = Manifest::capture(&src);
        cairn(&repo, &["backup", "-q", s(&src)]).ok();
        LinkWorld {
            tmp,
            repo,
            tree,
            mtime,
        }
    }

    /// Restores with `--overwrite mode` into a fresh target whose `tree/hl1`
    /// is a hard link to an outside file holding `outside_bytes` (with the
    /// snapshot's mtime, so that `if-changed` keeps it when the size
    /// matches too), and checks that every name that did not exist before
    /// got the snapshot's bytes on an inode of its own, while the outside
    /// file is unchanged.
    fn restore_over_outside_link(&self, mode: &str, outside_bytes: &[u8]) {
        let base = self
            .tmp
            .path()
            .join(format!("{mode}-{}", outside_bytes.len()));
        let outside = base.join("outside/victim");
        write_file(&outside, outside_bytes, 0o644);
        set_mtime(&outside, self.mtime);
        let out = base.join("out");
        fs::create_dir_all(out.join("tree")).unwrap();
        fs::hard_link(&outside, out.join("tree/hl1")).unwrap();
        let before = Manifest::capture(&base.join("outside"));

        let r = cairn(
            &self.repo,
            &[
                "restore",
                "latest",
                "--target",
                s(&out),
                "--overwrite",
                mode,
            ],
        );
        let what = format!(
            "--overwrite {mode} over a {}-byte link",
            outside_bytes.len()
        );
        if r.code != Some(0) {
            failed_cleanly(&r, &what);
        }
        let restored = out.join("tree");
        for name in ["hl2", "hl3", "plain"] {
            assert_eq!(
                fs::read(restored.join(name)).unwrap(),
                self.tree.file(name),
                "{what}: {name} does not hold the snapshot's bytes"
            );
        }
        let outside_ino = fs::metadata(&outside).unwrap().ino();
        let ino = |name: &str| fs::metadata(restored.join(name)).unwrap().ino();
        assert_ne!(
            ino("hl2"),
            outside_ino,
            "{what}: hl2 shares the outside inode"
        );
        assert_ne!(
            ino("hl3"),
            outside_ino,
            "{what}: hl3 shares the outside inode"
        );
        // The names this restore wrote are still one group.
        assert_eq!(ino("hl2"), ino("hl3"), "{what}: hl2 and hl3 not linked");
        // A write through a restored name cannot reach outside.
        fs::write(restored.join("hl2"), b"changed").unwrap();
        assert!(
            Manifest::capture(&base.join("outside")) == before,
            "{what}: bytes outside the target changed"
        );
        // hl1 itself: kept under `never` (and `if-changed` when it looks
        // unchanged), else replaced by the snapshot's file.
        let kept = mode == "never"
            || (mode == "if-changed" && outside_bytes.len() == self.tree.file("hl1").len());
        if kept {
            assert_eq!(ino("hl1"), outside_ino, "{what}: hl1 was not kept");
        } else {
            assert_ne!(ino("hl1"), outside_ino, "{what}: hl1 was not replaced");
            assert_eq!(ino("hl1"), ino("hl2"), "{what}: hl1 not linked to hl2");
        }
    }

    /// The group's first name is a non-empty directory in the target, so
    /// the restore cannot write it (without `--delete`): the later names
    /// still get the snapshot's bytes, as one group of their own, and the
    /// directory is reported.
    fn restore_over_a_directory(&self) {
        let out = self.tmp.path().join("dir-in-the-way");
        write_file(&out.join("tree/hl1/mine.txt"), b"mine", 0o644);
        let r = cairn(&self.repo, &["restore", "latest", "--target", s(&out)]).code(1);
        assert!(
            r.stderr.contains("is a non-empty directory"),
            "{}",
            r.stderr
        );
        let restored = out.join("tree");
        assert_eq!(fs::read(restored.join("hl1/mine.txt")).unwrap(), b"mine");
        for name in ["hl2", "hl3"] {
            assert_eq!(fs::read(restored.join(name)).unwrap(), self.tree.file(name));
        }
        let ino = |name: &str| fs::metadata(restored.join(name)).unwrap().ino();
        assert_eq!(ino("hl2"), ino("hl3"));
    }
}

/// A name that did not exist before the restore gets the snapshot's bytes
/// under every overwrite mode, even when the first name of its hard-link
/// group was kept because it is a link to a file outside the target: it
/// is never linked to what the restore did not write.
#[test]
fn hard_link_groups_under_every_overwrite_mode_never_reach_outside() {
    let w = LinkWorld::new();
    for mode in ["always", "if-changed", "never"] {
        // Differing size (if-changed replaces hl1) and same size and mtime
        // (if-changed keeps it).
        w.restore_over_outside_link(mode, b"OHL");
        w.restore_over_outside_link(mode, b"OH");
    }
    w.restore_over_a_directory();
}

// ---------------------------------------------------------------------------
// `latest` over damaged snapshot records (issue 30, defect 2)
// ---------------------------------------------------------------------------

/// A way of damaging a file in place.
type DamageFn = fn(&Path);

/// Two snapshots of a changing tree; the newer record is then damaged in
/// each of several ways. Every command resolving `latest` must fail in one
/// line naming the damaged record and the repair, never fall back to the
/// older snapshot with exit 0; `--skip-damaged` opts into that fallback
/// (with a warning); explicit ids are unaffected; `forget ID` removes the
/// damaged record, after which `latest` is the older snapshot again.
#[test]
fn latest_over_a_damaged_newest_record_fails_unless_skip_damaged() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let src = tmp.path().join("tree");
    write_file(&src.join("f.txt"), b"old", 0o644);
    let old = cairn(&repo, &["backup", "--json", s(&src)]).ok().json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let m_old = Manifest::capture(&src);
    write_file(&src.join("f.txt"), b"new", 0o644);
    let new = cairn(&repo, &["backup", "--json", s(&src)]).ok().json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let damages: [(&str, DamageFn); 3] = [
        ("flipped", |p| flip_byte(p, 50)),
        ("truncated", |p| truncate(p, 10)),
        ("emptied", |p| truncate(p, 0)),
    ];
    for (how, damage) in damages {
        let copy = tmp.path().join(format!("repo-{how}"));
        copy_dir(&repo, &copy);
        damage(&copy.join("snapshots").join(&new));
        let out = tmp.path().join(format!("out-{how}"));
        let old_short = &old[..8];
        let commands: [Vec<&str>; 7] = [
            vec!["restore", "latest", "--target", s(&out)],
            vec!["ls", "latest"],
            vec!["cat", "latest", "tree/f.txt"],
            vec!["dump", "latest", "tree/f.txt"],
            vec!["diff", old_short, "latest"],
            vec!["find", "f.txt", "-s", "latest"],
            vec!["forget", "latest"],
        ];
        for args in commands {
            let r = cairn(&copy, &args);
            let err = r.one_line_error();
            let ctx = format!("{how}: cairn {}", args.join(" "));
            assert!(err.contains(&new[..8]), "{ctx}: {err}");
            assert!(
                err.contains(&format!("cairn forget {}", &new[..8])),
                "{ctx}: {err}"
            );
            assert!(err.contains("--skip-damaged"), "{ctx}: {err}");
            assert!(r.stdout.is_empty(), "{ctx}: printed {:?}", r.stdout_str());
        }
        assert!(!out.exists(), "{how}: a refused restore created its target");
        // `check` names the same repair.
        let r = cairn(&copy, &["check"]).code(1);
        assert!(
            r.stderr.contains(&format!("cairn forget {}", &new[..8])),
            "{how}: {}",
            r.stderr
        );
        // Nothing was forgotten by the refused `forget latest`.
        assert!(copy.join("snapshots").join(&old).exists(), "{how}");

        // Opting in: the newest readable snapshot, with a warning.
        let r = cairn(
            &copy,
            &["restore", "latest", "--skip-damaged", "--target", s(&out)],
        )
        .ok();
        assert!(
            r.stderr.contains("cairn: warning:") && r.stderr.contains(&new[..8]),
            "{how}: no warning about the skipped record:\n{}",
            r.stderr
        );
        assert_tree_matches(&m_old, &out.join("tree"));
        let r = cairn(&copy, &["cat", "latest", "tree/f.txt", "--skip-damaged"]).ok();
        assert_eq!(r.stdout, b"old", "{how}");
        // An explicit id needs no flag.
        let r = cairn(&copy, &["cat", old_short, "tree/f.txt"]).ok();
        assert_eq!(r.stdout, b"old", "{how}");

        // The repair the error names works, and `latest` works again.
        cairn(&copy, &["forget", &new[..8]]).ok();
        let r = cairn(&copy, &["cat", "latest", "tree/f.txt"]).ok();
        assert_eq!(r.stdout, b"old", "{how}");
        cairn(&copy, &["check"]).ok();
    }

    // A damaged record that is the OLDER one blocks `latest` too: its time
    // cannot be read, so it is not known to be older.
    let copy = tmp.path().join("repo-older");
    copy_dir(&repo, &copy);
    flip_byte(&copy.join("snapshots").join(&old), 50);
    let err = cairn(&copy, &["ls", "latest"]).one_line_error();
    assert!(err.contains(&old[..8]), "{err}");
    let r = cairn(&copy, &["cat", "latest", "tree/f.txt", "--skip-damaged"]).ok();
    assert_eq!(r.stdout, b"new");
}

// ---------------------------------------------------------------------------
// Crafted listings: sizes the content does not back (issue 30, defect 3)
// ---------------------------------------------------------------------------

/// Appends `v` as an unsigned LEB128 varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A version 3 listing (docs/FORMAT.md, "Directory listing") of one regular
/// file `f` of `size` bytes with no content, written by hand: the encoder
/// refuses to write it.
fn listing_of_a_file_without_content(size: u64) -> Vec<u8> {
    let mut columns: [Vec<u8>; 11] = Default::default();
    // shape: entry count, then kind 0 (file) and flags 0 (no content).
    columns[0] = vec![1, 0, 0];
    columns[1] = vec![1, b'f'];
    for v in [0o100644, 0, 0] {
        varint(&mut columns[2], v);
    }
    varint(&mut columns[3], size);
    columns[8] = 1_700_000_000_000_000_000i64.to_le_bytes().to_vec();
    columns[9] = vec![0];
    columns[10] = vec![0];
    let mut out = vec![3];
    for c in &columns {
        varint(&mut out, c.len() as u64);
        out.extend_from_slice(c);
    }
    out
}

/// Commits a snapshot record, newer than every other, whose root listing
/// is `listing`: the bytes are backed up as a one-chunk file, and the new
/// record names that chunk as its root. Returns the record's id.
fn commit_crafted_root(repo: &Path, scratch: &Path, listing: &[u8]) -> String {
    let src = scratch.join("crafted");
    write_file(&src.join("listing.bin"), listing, 0o644);
    cairn(repo, &["backup", "-q", s(&src)]).ok();
    let opened = cairn_engine::Repository::open_local(repo).unwrap();
    let backend = &**opened.backend();
    let snap = cairn_engine::catalog::resolve(backend, "latest").unwrap();
    let mut reader = cairn_engine::read::Reader::open(&opened, Default::default()).unwrap();
    let entry = reader
        .find(&snap.record, "crafted/listing.bin")
        .unwrap()
        .expect("the backed-up listing bytes");
    let blob = entry.content.expect("one chunk of content");
    assert_eq!(blob.level, 0, "the listing fits one chunk");
    let mut record = snap.record.clone();
    record.root = blob.into();
    record.time_unix_ns += 1;
    cairn_engine::catalog::commit(backend, &record).unwrap()
}

/// A file entry with a size but no content is a corrupt listing: `restore`
/// and `cat` fail naming it instead of writing an empty file with exit 0,
/// and `ls` does not report a size the content cannot back.
#[test]
fn a_crafted_file_without_content_fails_every_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init", "-q", "--encryption", "none"]).ok();
    for size in [100u64, 1 << 63] {
        let scratch = tmp.path().join(format!("scratch-{size}"));
        let id = commit_crafted_root(&repo, &scratch, &listing_of_a_file_without_content(size));
        let out = scratch.join("out");
        let commands: [Vec<&str>; 4] = [
            vec!["restore", &id[..8], "--target", s(&out)],
            vec!["cat", &id[..8], "f"],
            vec!["dump", &id[..8], "f"],
            vec!["ls", &id[..8]],
        ];
        for args in commands {
            let r = cairn(&repo, &args);
            let ctx = format!("size {size}: cairn {}", args.join(" "));
            let err = r.one_line_error();
            assert!(
                err.contains("directory listing") && err.contains("without content")
                    || err.contains("above the largest file size"),
                "{ctx}: {err}"
            );
            assert!(
                r.stdout.is_empty() || args[0] == "restore",
                "{ctx}: printed {:?}",
                r.stdout_str()
            );
        }
        assert!(
            !out.join("f").exists(),
            "size {size}: restore wrote the file"
        );
        // `check` names the damage too.
        let r = cairn(&repo, &["check"]);
        assert_eq!(r.code, Some(1), "size {size}: {}", r.all_output());
        cairn(&repo, &["forget", &id[..8]]).ok();
    }
}
