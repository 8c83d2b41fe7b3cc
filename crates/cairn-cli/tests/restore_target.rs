//! Restores onto a non-empty target (issue 8, defect 5): the real binary
//! never deletes a non-empty directory unless told to (`--delete`), never
//! writes through a pre-existing hard link or follows a pre-existing
//! symlink, honours `--overwrite never`, removes only entries inside the
//! target with `--delete`, restores into an empty or missing target exactly
//! as before, and stops with one error on a full target file system.
//!
//! Every test keeps a directory OUTSIDE the target (files, a subdirectory, a
//! symlink) and asserts that its bytes and metadata are unchanged afterwards:
//! a restore touches nothing outside its target.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// A small source tree, backed up once.
struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    /// The backed-up tree as recorded before the backup.
    tree: Manifest,
    /// Restore target (not created yet).
    out: PathBuf,
    outside: Outside,
}

fn fixture(seed: u64) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let repo = root.join("repo");
    let src = root.join("tree");
    let mut rng = Rng::new(seed);
    write_file(&src.join("docs/readme.txt"), &rng.text(5_000), 0o644);
    write_file(&src.join("docs/notes/n0.txt"), &rng.text(2_000), 0o600);
    write_file(&src.join("data/one.bin"), b"x", 0o644);
    write_file(&src.join("data/empty.bin"), b"", 0o644);
    write_file(&src.join("data/r.bin"), &rng.bytes(100_000), 0o644);
    write_file(&src.join("sub/dir/leaf0.txt"), &rng.text(1_500), 0o644);
    write_file(&src.join("sub/dir/leaf1.txt"), &rng.text(2_500), 0o644);
    write_file(&src.join("sub/other.txt"), &rng.text(700), 0o640);
    write_file(&src.join("bin/tool.sh"), b"#!/bin/sh\necho hi\n", 0o755);
    fs::create_dir_all(src.join("empty")).unwrap();
    symlink("data/r.bin", &src.join("link"));
    symlink("/nonexistent/cairn/target", &src.join("dangling"));
    randomize_mtimes(&src, &mut rng);
    let tree = Manifest::capture(&src);
    cairn(&repo, &["backup", "-q", s(&src)]).ok();
    let outside = Outside::new(&root.join("outside"), seed);
    Fixture {
        out: root.join("out"),
        _tmp: tmp,
        repo,
        tree,
        outside,
    }
}

impl Fixture {
    fn restore(&self, extra: &[&str]) -> Run {
        let mut args = vec!["restore", "latest", "-t", s(&self.out)];
        args.extend_from_slice(extra);
        cairn(&self.repo, &args)
    }

    /// The restored copy of the backed-up tree.
    fn restored(&self) -> PathBuf {
        self.out.join("tree")
    }
}

/// A directory outside every target, recorded so that any change to it
/// (content, mode, mtime, entries, symlink targets) is caught.
struct Outside {
    dir: PathBuf,
    before: Option<Manifest>,
}

impl Outside {
    fn new(dir: &Path, seed: u64) -> Outside {
        let mut rng = Rng::new(seed ^ 0xdead);
        write_file(&dir.join("victim.txt"), b"do not touch", 0o644);
        write_file(&dir.join("linked.bin"), &rng.bytes(10_000), 0o640);
        write_file(&dir.join("d/inner.txt"), b"inner", 0o600);
        fs::create_dir_all(dir.join("d/deeper")).unwrap();
        write_file(&dir.join("d/deeper/x"), b"x", 0o644);
        symlink("victim.txt", &dir.join("alias"));
        randomize_mtimes(dir, &mut rng);
        Outside {
            dir: dir.to_path_buf(),
            before: None,
        }
    }

    /// Records the state to compare against (call after setting up links
    /// into it, right before the restore under test).
    fn record(&mut self) {
        self.before = Some(Manifest::capture(&self.dir));
    }

    #[track_caller]
    fn assert_unchanged(&self) {
        let before = self.before.as_ref().expect("recorded");
        assert_tree_matches(before, &self.dir);
    }
}

/// Paths of restore temporaries left anywhere under `root`.
fn temporaries(root: &Path) -> Vec<PathBuf> {
    walk(root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".cairn-restore-"))
        })
        .collect()
}

/// The manifest without the entries at and under `path`.
fn without(m: &Manifest, path: &str) -> Manifest {
    let mut m = m.clone();
    m.0.retain(|k, _| k != path && !k.starts_with(&format!("{path}/")));
    m
}

/// (a) A directory named like a file of the snapshot, holding a file.
#[test]
fn a_non_empty_directory_in_the_way_survives_unless_delete() {
    let mut fx = fixture(1);
    let r = fx.restored();
    write_file(&r.join("docs/readme.txt/precious.txt"), b"mine", 0o644);
    fx.outside.record();

    let run = fx.restore(&["-q"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "{} is a non-empty directory; pass --delete to replace it",
            r.join("docs/readme.txt").display()
        )),
        "{}",
        run.stderr
    );
    assert_eq!(
        fs::read(r.join("docs/readme.txt/precious.txt")).unwrap(),
        b"mine"
    );
    // Everything else was restored (directory mtimes aside: docs keeps the
    // extra entry, which is fine; compare the files).
    let got = Manifest::capture(&r);
    for (k, want) in &without(&fx.tree, "docs/readme.txt").0 {
        if !matches!(want.kind, Kind::Dir) {
            assert_eq!(got.0.get(k), Some(want), "{k}");
        }
    }
    fx.outside.assert_unchanged();

    // `--delete` replaces it.
    fx.restore(&["-q", "--delete"]).ok();
    assert_tree_matches(&fx.tree, &r);
    assert!(temporaries(&fx.out).is_empty());
    fx.outside.assert_unchanged();

    // An EMPTY directory in the way is replaced without --delete (with
    // `if-changed`, the unchanged rest is skipped).
    fs::remove_file(r.join("sub/other.txt")).unwrap();
    fs::create_dir(r.join("sub/other.txt")).unwrap();
    let json = fx
        .restore(&["--json", "--overwrite", "if-changed"])
        .ok()
        .json();
    assert_eq!(json["summary"]["replaced"], 1, "{json}");
    assert_eq!(json["summary"]["files"], 1, "{json}");
    assert_tree_matches(&fx.tree, &r);
    fx.outside.assert_unchanged();
}

/// (b) A hard link in the target to a file outside the target.
#[test]
fn a_hard_link_to_a_file_outside_is_replaced_not_written_through() {
    let mut fx = fixture(2);
    fx.restore(&["-q"]).ok();
    let r = fx.restored();
    for rel in ["data/one.bin", "data/r.bin", "data/empty.bin"] {
        fs::remove_file(r.join(rel)).unwrap();
    }
    fs::hard_link(fx.outside.dir.join("linked.bin"), r.join("data/r.bin")).unwrap();
    fs::hard_link(fx.outside.dir.join("victim.txt"), r.join("data/one.bin")).unwrap();
    fs::hard_link(fx.outside.dir.join("d/inner.txt"), r.join("data/empty.bin")).unwrap();
    fx.outside.record();

    fx.restore(&["-q"]).ok();
    assert_tree_matches(&fx.tree, &r);
    assert_eq!(fs::read(r.join("data/one.bin")).unwrap(), b"x");
    assert!(temporaries(&fx.out).is_empty());
    fx.outside.assert_unchanged();
}

/// (c) Symlinks in the target pointing outside, where the snapshot has a
/// directory (also as a parent of `--include`) or a file.
#[test]
fn symlinks_in_the_target_are_replaced_never_followed() {
    let mut fx = fixture(3);
    let outside = fx.outside.dir.clone();
    // A symlink where `--include tree/sub/dir` needs the directory `tree`.
    fs::create_dir_all(&fx.out).unwrap();
    symlink(s(&outside), &fx.out.join("tree"));
    fx.outside.record();
    fx.restore(&["-q", "--include", "tree/sub/dir"]).ok();
    fx.outside.assert_unchanged();
    assert!(fs::symlink_metadata(fx.out.join("tree")).unwrap().is_dir());
    assert_tree_matches(&fx.tree.subtree("sub/dir"), &fx.out.join("tree/sub/dir"));

    // Full restore; then a symlink to the outside directory where the
    // snapshot has a directory, another where it has a file, and one as the
    // include itself.
    fx.restore(&["-q"]).ok();
    let r = fx.restored();
    fs::remove_dir_all(r.join("sub/dir")).unwrap();
    symlink(s(&outside.join("d")), &r.join("sub/dir"));
    fs::remove_file(r.join("docs/readme.txt")).unwrap();
    symlink(s(&outside.join("victim.txt")), &r.join("docs/readme.txt"));
    fs::remove_dir_all(r.join("docs/notes")).unwrap();
    symlink(s(&outside), &r.join("docs/notes"));
    fx.outside.record();
    fx.restore(&["-q", "--include", "tree/docs/notes"]).ok();
    fx.outside.assert_unchanged();
    fx.restore(&["-q"]).ok();
    fx.outside.assert_unchanged();
    assert_tree_matches(&fx.tree, &r);
    assert!(temporaries(&fx.out).is_empty());
}

/// (d) `--overwrite never` keeps what is there.
#[test]
fn overwrite_never_keeps_existing_entries() {
    let mut fx = fixture(4);
    fx.restore(&["-q"]).ok();
    let r = fx.restored();
    write_file(&r.join("docs/readme.txt"), b"my edits", 0o600);
    fs::remove_file(r.join("data/one.bin")).unwrap();
    fs::remove_file(r.join("sub/other.txt")).unwrap();
    symlink("elsewhere", &r.join("sub/other.txt"));
    // A hard link to the outside is kept as it is, too.
    fs::remove_file(r.join("data/r.bin")).unwrap();
    fs::hard_link(fx.outside.dir.join("linked.bin"), r.join("data/r.bin")).unwrap();
    fx.outside.record();
    let before = Manifest::capture(&r);

    let json = fx.restore(&["--json", "--overwrite", "never"]).ok().json();
    let sum = &json["summary"];
    assert_eq!(sum["files"], 1, "{json}");
    assert_eq!(sum["replaced"], 0, "{json}");
    assert!(sum["skipped"].as_u64().unwrap() > 5, "{json}");
    let after = Manifest::capture(&r);
    assert_eq!(after.0["data/one.bin"], fx.tree.0["data/one.bin"]);
    for (k, v) in &before.0 {
        if !matches!(v.kind, Kind::Dir) {
            assert_eq!(after.0.get(k), Some(v), "{k} changed");
        }
    }
    assert_eq!(fs::read(r.join("docs/readme.txt")).unwrap(), b"my edits");
    fx.outside.assert_unchanged();

    // `always` (the default) then restores the snapshot's versions.
    fx.restore(&["-q"]).ok();
    assert_tree_matches(&fx.tree, &r);
    fx.outside.assert_unchanged();
}

/// (e) `--delete` removes extra entries inside the target, nothing outside.
#[test]
fn delete_removes_extras_inside_the_target_only() {
    let mut fx = fixture(5);
    fx.restore(&["-q"]).ok();
    let r = fx.restored();
    write_file(&r.join("extra.txt"), b"extra", 0o644);
    write_file(&r.join("docs/extra_dir/a/b.txt"), b"b", 0o644);
    symlink(s(&fx.outside.dir), &r.join("sub/dir/link_out"));
    fs::create_dir_all(r.join("empty/nested")).unwrap();
    write_file(&fx.out.join("top_extra"), b"top", 0o644);
    let outside_victim = fx.outside.dir.join("victim.txt");
    symlink(s(&outside_victim), &r.join("bin/victim_link"));
    fx.outside.record();

    // With --include only the included subtree is pruned.
    fx.restore(&["-q", "--delete", "--include", "tree/docs"])
        .ok();
    assert!(!r.join("docs/extra_dir").exists());
    assert!(r.join("extra.txt").exists());
    fx.outside.assert_unchanged();

    let json = fx.restore(&["--json", "--delete"]).ok().json();
    assert_eq!(json["summary"]["deleted"], 5, "{json}");
    assert_tree_matches(&fx.tree, &r);
    let names: Vec<_> = fs::read_dir(&fx.out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["tree"]);
    fx.outside.assert_unchanged();
}

/// (f) An empty or missing target is restored exactly as before.
#[test]
fn restore_into_an_empty_or_missing_target_is_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(6));
    let m = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let mut outside = Outside::new(&tmp.path().join("outside"), 6);
    outside.record();

    let missing = tmp.path().join("missing/out");
    let json = cairn(&repo, &["restore", "latest", "-t", s(&missing), "--json"])
        .ok()
        .json();
    for k in ["skipped", "replaced", "deleted"] {
        assert_eq!(json["summary"][k], 0, "{k}: {json}");
    }
    assert_tree_matches(&m, &missing.join("tree"));
    assert!(temporaries(&missing).is_empty());

    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    cairn(&repo, &["restore", "latest", "-t", s(&empty), "-q"]).ok();
    assert_tree_matches(&m, &empty.join("tree"));
    cairn(
        &repo,
        &[
            "restore",
            "latest",
            "-t",
            s(&empty),
            "-q",
            "--include",
            "tree/docs",
        ],
    )
    .ok();
    assert_tree_matches(&m, &empty.join("tree"));
    assert!(temporaries(&empty).is_empty());
    outside.assert_unchanged();
}

/// (g) A full target file system: one error, no temporaries, stop at once.
#[test]
fn a_full_target_file_system_is_one_error() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(7));
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let mut outside = Outside::new(&tmp.path().join("outside"), 7);
    outside.record();

    let small = tmp.path().join("small");
    let Some(_mount) = Tmpfs::mount(&small, "1m") else {
        return;
    };
    let out = small.join("out");
    let run = cairn(&repo, &["restore", "latest", "-t", s(&out)]);
    let err = run.one_line_error();
    assert!(
        err.contains("target file system is full while writing") && err.contains(s(&out)),
        "{err}"
    );
    assert!(temporaries(&small).is_empty(), "{:?}", temporaries(&small));
    // It stopped at the first full write: no file of the later top-level
    // directories of the snapshot (in name order) was written. (Their
    // directories may exist: a restore plans many files at once and
    // creates their directories while planning.)
    let mut later = Vec::new();
    let mut stack = vec![out.join("tree/sub")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type().unwrap().is_dir() {
                true => stack.push(e.path()),
                false => later.push(e.path()),
            }
        }
    }
    assert!(later.is_empty(), "written after the full write: {later:?}");
    outside.assert_unchanged();
}
