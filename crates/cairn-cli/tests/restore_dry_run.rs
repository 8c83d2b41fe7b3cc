//! `restore --dry-run` and `restore --overwrite if-newer` (issue 31,
//! friction 5) through the real binary: a dry run decides everything a
//! restore would (selection, `--overwrite`, `--delete`), reports it, and
//! changes nothing in the target; its counts are those of the real restore
//! run afterwards. `if-newer` replaces an existing entry only when the
//! snapshot's mtime is later, and a hard-link name still links only to a
//! file the restore wrote (docs/restore-target.md).

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;

/// The mtime every backed-up file gets (seconds since the epoch).
const T: i64 = 1_600_000_000;

/// A backed-up tree: files in nested directories, a symlink and a
/// hard-linked pair, all with mtime `T`.
struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    out: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let src = tmp.path().join("tree");
    let mut rng = Rng::new(31);
    write_file(&src.join("a.txt"), &rng.text(3_000), 0o644);
    write_file(&src.join("b.txt"), &rng.text(2_000), 0o644);
    write_file(&src.join("c.txt"), &rng.text(1_000), 0o644);
    write_file(&src.join("dir/d.bin"), &rng.bytes(70_000), 0o600);
    write_file(&src.join("dir/sub/e.txt"), &rng.text(500), 0o644);
    write_file(&src.join("fresh/f.txt"), &rng.text(800), 0o644);
    write_file(&src.join("h1"), &rng.text(4_000), 0o644);
    fs::hard_link(src.join("h1"), src.join("h2")).unwrap();
    symlink("a.txt", &src.join("link"));
    for p in walk(&src) {
        if !fs::symlink_metadata(&p).unwrap().file_type().is_symlink() {
            set_mtime(&p, (T, 0));
        }
    }
    cairn(&repo, &["backup", "-q", s(&src)]).ok();
    Fixture {
        out: tmp.path().join("out"),
        _tmp: tmp,
        repo,
    }
}

impl Fixture {
    fn restore(&self, extra: &[&str]) -> Run {
        let mut args = vec!["restore", "latest", "-t", s(&self.out)];
        args.extend_from_slice(extra);
        cairn(&self.repo, &args)
    }

    /// The restored copy of the tree.
    fn tree(&self) -> PathBuf {
        self.out.join("tree")
    }

    /// A target holding part of the tree: `a.txt` as backed up, `b.txt`
    /// with other bytes, `dir` as a file (the snapshot has a directory),
    /// an extra file and directory the snapshot lacks; `fresh/` and the
    /// hard-linked pair missing.
    fn partly_restored_target(&self) {
        let t = self.tree();
        self.restore(&["-q", "--include", "tree/a.txt"]).ok();
        write_file(&t.join("b.txt"), b"other bytes", 0o644);
        write_file(&t.join("dir"), b"a file where a directory was", 0o644);
        write_file(&t.join("extra.txt"), b"not in the snapshot", 0o644);
        write_file(&t.join("extra-dir/x"), b"nor this", 0o644);
        set_mtime(&t.join("b.txt"), (T + 50, 0));
    }
}

/// The counts a restore reports in its `--json` summary.
fn counts(run: &Run) -> Vec<(&'static str, u64)> {
    let v = run.json();
    let sum = &v["summary"];
    [
        "new", "replaced", "skipped", "deleted", "files", "dirs", "symlinks", "bytes",
    ]
    .into_iter()
    .map(|k| (k, sum[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))))
    .collect()
}

fn count(counts: &[(&str, u64)], key: &str) -> u64 {
    counts.iter().find(|(k, _)| *k == key).unwrap().1
}

#[test]
fn dry_run_changes_nothing_and_counts_what_the_restore_then_does() {
    let f = fixture();
    f.partly_restored_target();
    let before = Manifest::capture(&f.out);
    let opts = ["--overwrite", "if-changed", "--delete"];

    let text = f.restore(&[&opts[..], &["--dry-run"]].concat()).ok();
    let said = text.stdout_str();
    assert!(said.contains("dry run: would restore"), "{said}");
    assert!(said.contains("nothing was changed"), "{said}");
    let dry = f
        .restore(&[&opts[..], &["--dry-run", "--json"]].concat())
        .ok();
    assert_eq!(dry.json()["dry_run"], true);
    assert_eq!(
        Manifest::capture(&f.out),
        before,
        "a dry run changed the target (tree, contents or mtimes)"
    );
    let would = counts(&dry);
    // a.txt kept (if-changed); b.txt replaced; `dir` (a file) replaced by
    // a directory; extra.txt and extra-dir deleted; the rest new.
    assert_eq!(count(&would, "skipped"), 1, "{would:?}");
    assert_eq!(count(&would, "deleted"), 2, "{would:?}");
    assert_eq!(count(&would, "replaced"), 2, "{would:?}");
    assert!(count(&would, "new") >= 8, "{would:?}");

    let real = f.restore(&[&opts[..], &["--json"]].concat()).ok();
    assert_eq!(real.json()["dry_run"], false);
    assert_eq!(counts(&real), would, "dry run vs the restore that followed");
    assert!(!f.tree().join("extra.txt").exists());
    assert!(f.tree().join("dir/sub/e.txt").is_file());
}

#[test]
fn dry_run_into_a_missing_target_creates_nothing() {
    let f = fixture();
    let dry = f.restore(&["--dry-run", "--json"]).ok();
    assert!(!f.out.exists(), "a dry run created the target");
    let real = f.restore(&["--json"]).ok();
    assert_eq!(counts(&real), counts(&dry));
    assert_eq!(count(&counts(&real), "replaced"), 0);
    // Per entry, -v prints the same words in a dry run.
    let listed = f.restore(&["-v", "--dry-run", "--overwrite", "never"]).ok();
    let out = listed.stdout_str();
    assert!(
        out.lines()
            .any(|l| l.starts_with("skipped") && l.ends_with("tree/a.txt")),
        "{out}"
    );
}

#[test]
fn dry_run_refuses_verify() {
    let f = fixture();
    let r = f.restore(&["--dry-run", "--verify"]);
    assert_ne!(r.code, Some(0));
    assert!(!f.out.exists());
}

fn mtime_of(p: &Path) -> i64 {
    fs::symlink_metadata(p).unwrap().mtime()
}

#[test]
fn if_newer_replaces_only_entries_older_than_the_snapshot() {
    let f = fixture();
    f.restore(&["-q"]).ok();
    let t = f.tree();
    let original_b = fs::read(t.join("b.txt")).unwrap();
    // Older than the snapshot: replaced.
    write_file(&t.join("a.txt"), b"older edit", 0o644);
    set_mtime(&t.join("a.txt"), (T - 100, 0));
    // Newer than the snapshot: kept.
    write_file(&t.join("b.txt"), b"newer edit", 0o644);
    set_mtime(&t.join("b.txt"), (T + 100, 0));
    // Same mtime, other bytes: kept (not newer).
    write_file(&t.join("c.txt"), b"same time", 0o644);
    set_mtime(&t.join("c.txt"), (T, 0));
    // The hard-link pair: h1 newer (kept), h2 missing. h2 must get the
    // snapshot's bytes on its own inode, not a link to the kept h1.
    fs::remove_file(t.join("h1")).unwrap();
    fs::remove_file(t.join("h2")).unwrap();
    write_file(&t.join("h1"), b"newer h1", 0o644);
    set_mtime(&t.join("h1"), (T + 100, 0));

    let run = f.restore(&["--overwrite", "if-newer", "--json"]).ok();
    let c = counts(&run);
    assert_eq!(
        fs::read(t.join("a.txt")).unwrap(),
        snapshot_bytes(&f, "a.txt")
    );
    assert_eq!(mtime_of(&t.join("a.txt")), T);
    assert_eq!(fs::read(t.join("b.txt")).unwrap(), b"newer edit");
    assert_ne!(fs::read(t.join("b.txt")).unwrap(), original_b);
    assert_eq!(fs::read(t.join("c.txt")).unwrap(), b"same time");
    assert_eq!(fs::read(t.join("h1")).unwrap(), b"newer h1");
    let h2 = fs::read(t.join("h2")).unwrap();
    assert_eq!(h2.len(), 4_000, "h2 got the snapshot's content");
    assert_ne!(
        fs::metadata(t.join("h1")).unwrap().ino(),
        fs::metadata(t.join("h2")).unwrap().ino(),
        "h2 linked to the kept h1"
    );
    assert_eq!(count(&c, "new"), 1, "{c:?}");
    // a.txt; then the directories (existing, older mtimes do not matter).
    assert_eq!(count(&c, "replaced"), 1, "{c:?}");
    // b.txt, c.txt, h1, plus every other file and the symlink, all as
    // restored (same mtime: not newer).
    assert!(count(&c, "skipped") >= 5, "{c:?}");

    // A bad mode is one clear error.
    let bad = f.restore(&["--overwrite", "if-newest"]);
    assert_ne!(bad.code, Some(0));
    assert!(
        bad.all_output().contains("if-newer"),
        "{}",
        bad.all_output()
    );
}

/// The snapshot's bytes of `name` (restored afresh elsewhere).
fn snapshot_bytes(f: &Fixture, name: &str) -> Vec<u8> {
    let elsewhere = f.out.with_file_name("elsewhere");
    let p = elsewhere.join("tree").join(name);
    if !p.exists() {
        cairn(&f.repo, &["restore", "latest", "-q", "-t", s(&elsewhere)]).ok();
    }
    fs::read(p).unwrap()
}
