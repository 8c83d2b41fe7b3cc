//! Unusual but legal input: odd file names, extreme mtimes, special mode
//! bits, deep nesting, the repository inside the backed-up tree, and restores
//! over an existing target.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use common::*;

#[test]
fn odd_names_extreme_mtimes_and_special_bits_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(70);
    let names: [&[u8]; 8] = [
        b"with space",
        b"new\nline",
        b"bad\xffutf8",
        b"-leading-dash",
        "ünïcødé-名前".as_bytes(),
        b"tab\there",
        b"back\\slash",
        b"...",
    ];
    for (i, n) in names.iter().enumerate() {
        let p = tree.join(OsStr::from_bytes(n));
        write_file(&p, &rng.text(100 * (i + 1)), 0o644);
    }
    // 30 levels deep.
    let mut deep = tree.join("deep");
    for i in 0..30 {
        deep = deep.join(format!("level{i}"));
    }
    write_file(&deep.join("bottom.txt"), b"bottom", 0o644);
    // Special permission bits.
    write_file(&tree.join("setuid"), b"#!/bin/sh\n", 0o4755);
    write_file(&tree.join("setgid"), b"#!/bin/sh\n", 0o2750);
    fs::create_dir(tree.join("sticky")).unwrap();
    fs::set_permissions(tree.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    write_file(&tree.join("readonly"), b"r", 0o444);
    // A file repeating one random block: dedup inside a single file.
    let block = rng.bytes(256 << 10);
    let mut repeated = Vec::new();
    for _ in 0..24 {
        repeated.extend_from_slice(&block);
    }
    write_file(&tree.join("repeated.bin"), &repeated, 0o644);
    randomize_mtimes(&tree, &mut rng);
    // Before 1970 (with nanoseconds), exactly 0, and far in the future.
    set_mtime(&tree.join("with space"), (-315_619_200, 500_000_000));
    set_mtime(&tree.join("-leading-dash"), (0, 0));
    set_mtime(&tree.join("..."), (7_258_118_400, 999_999_999));
    set_mtime(&tree.join("deep"), (-1, 1));
    let m = Manifest::capture(&tree);

    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    // 6 MiB of one repeated 256 KiB block is stored about once.
    let new_raw = b["stats"]["new_raw_bytes"].as_u64().unwrap();
    assert!(new_raw < 1 << 20, "repeated content stored {new_raw} bytes");
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));

    // Names are addressable by ls, cat and --include (UTF-8 ones: the
    // arguments are strings).
    let cat = cairn(&repo, &["cat", "latest", "tree/ünïcødé-名前"]).ok();
    assert!(cat.stdout == m.file("ünïcødé-名前"));
    let cat = cairn(&repo, &["cat", "latest", "tree/new\nline"]).ok();
    assert!(cat.stdout == m.file("new\nline"));
    let rows = cairn(&repo, &["ls", "latest", "--json"]).ok().json();
    assert_eq!(rows.as_array().unwrap().len(), m.0.len());
    let out2 = tmp.path().join("out2");
    let deep_rel = deep.strip_prefix(tmp.path()).unwrap();
    cairn(
        &repo,
        &[
            "restore",
            "latest",
            "-t",
            s(&out2),
            "--include",
            s(deep_rel),
        ],
    )
    .ok();
    assert_eq!(
        fs::read(out2.join(deep_rel).join("bottom.txt")).unwrap(),
        b"bottom"
    );
    cairn(&repo, &["check", "--read-data"]).ok();
}

#[test]
fn ls_shows_mtimes_before_1970() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let f = tmp.path().join("old.txt");
    write_file(&f, b"old", 0o644);
    set_mtime(&f, (-315_619_200, 0)); // 1960-01-01T00:00:00Z
    cairn(&repo, &["backup", "-q", s(&f)]).ok();
    let rows = cairn(&repo, &["ls", "latest", "--json"]).ok().json();
    assert_eq!(rows[0]["mtime_ns"].as_i64(), Some(-315_619_200_000_000_000));
    assert_eq!(rows[0]["mtime"].as_str(), Some("1960-01-01T00:00:00Z"));
    let human = cairn(&repo, &["ls", "latest"]).ok().stdout_str();
    assert!(human.contains("1960-01-01"), "{human}");
}

#[test]
fn single_files_empty_dirs_and_empty_files_as_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let file = tmp.path().join("lonely.txt");
    let empty_file = tmp.path().join("empty.bin");
    let empty_dir = tmp.path().join("emptydir");
    write_file(&file, b"just me\n", 0o640);
    write_file(&empty_file, b"", 0o600);
    fs::create_dir(&empty_dir).unwrap();
    let mut rng = Rng::new(71);
    for p in [&file, &empty_file, &empty_dir] {
        set_mtime(p, rng.mtime());
    }
    let expected = [
        ("lonely.txt", Manifest::capture(&file)),
        ("empty.bin", Manifest::capture(&empty_file)),
        ("emptydir", Manifest::capture(&empty_dir)),
    ];
    cairn(
        &repo,
        &["backup", "-q", s(&file), s(&empty_file), s(&empty_dir)],
    )
    .ok();
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    for (name, m) in &expected {
        assert_tree_matches(m, &out.join(name));
    }
    // Only an empty directory: still a snapshot.
    cairn(&repo, &["backup", "-q", s(&empty_dir)]).ok();
    let rows = cairn(&repo, &["ls", "latest", "--json"]).ok().json();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    cairn(&repo, &["check", "--read-data"]).ok();
}

#[test]
fn the_repository_inside_the_tree_is_not_backed_up() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(72));
    let m = Manifest::capture(&tree);
    let repo = tree.join("zz-repo");
    let r = cairn(&repo, &["backup", s(&tree)]).ok();
    assert!(
        r.stderr.contains("not backing up the repository itself"),
        "{}",
        r.stderr
    );
    // Twice: the second run sees a populated repository in the tree.
    let r = cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    assert!(r.stderr.contains("not backing up the repository itself"));
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert!(!out.join("tree/zz-repo").exists());
    let mut restored = Manifest::capture(&out.join("tree"));
    let mut expected = m;
    // The root's mtime changed when the repository was created in it.
    restored.0.remove("");
    expected.0.remove("");
    assert_eq!(restored, expected);
}

#[test]
fn source_names_must_be_valid_and_equal_ones_are_both_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init", "-q"]).ok();
    let a = tmp.path().join("a/same");
    let b = tmp.path().join("b/same");
    write_file(&a.join("f"), b"a", 0o644);
    write_file(&b.join("f"), b"b", 0o644);
    for name in ["a/b", "..", ".", ""] {
        let r = cairn_stdin(&repo, &["backup", "--stdin", "--stdin-name", name], b"x");
        let err = r.one_line_error();
        assert!(err.contains("name"), "{name:?}: {err}");
    }
    assert!(snapshot_ids(&repo).is_empty());
    // One name twice: both kept under the directories above them
    // (docs/backup-selection.md, "Sources with one name").
    cairn(&repo, &["backup", "-q", s(&a), s(&b)]).ok();
    let cat = cairn(&repo, &["cat", "latest", s(&b.join("f"))]).ok();
    assert_eq!(cat.stdout, b"b");
    // A stream named like a path source: the stream stays at the top.
    cairn_stdin(
        &repo,
        &["backup", "-q", s(&a), "--stdin", "--stdin-name", "same"],
        b"x",
    )
    .ok();
    assert_eq!(cairn(&repo, &["cat", "latest", "/same"]).ok().stdout, b"x");
    assert_eq!(
        cairn(&repo, &["cat", "latest", s(&a.join("f"))])
            .ok()
            .stdout,
        b"a"
    );
}

#[test]
fn restore_over_an_existing_target_replaces_without_following_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(73));
    let m = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();

    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));
    // Restoring again onto the same target gives the same tree.
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));

    // Sabotage the target: a symlink where a file goes, a symlink where a
    // directory goes, a directory where a file goes, a file where a
    // directory goes, and modified content. Nothing outside may change.
    let outside = tmp.path().join("outside");
    write_file(&outside.join("victim.txt"), b"do not touch", 0o644);
    let r = out.join("tree");
    fs::remove_file(r.join("data/one.bin")).unwrap();
    symlink(s(&outside.join("victim.txt")), &r.join("data/one.bin"));
    fs::remove_dir_all(r.join("sub/dir")).unwrap();
    symlink(s(&outside), &r.join("sub/dir"));
    fs::remove_file(r.join("docs/readme.txt")).unwrap();
    fs::create_dir_all(r.join("docs/readme.txt/inner")).unwrap();
    fs::remove_dir_all(r.join("empty")).unwrap();
    write_file(&r.join("empty"), b"not a dir", 0o644);
    write_file(&r.join(BIG2), b"short", 0o644);
    // The non-empty directory where a file goes is kept without --delete
    // (one error, exit 1), and replaced with it.
    let r1 = cairn(&repo, &["restore", "latest", "-t", s(&out)]).code(1);
    assert!(r1.stderr.contains("--delete"), "{}", r1.stderr);
    assert!(out.join("tree/docs/readme.txt/inner").is_dir());
    cairn(&repo, &["restore", "latest", "-t", s(&out), "--delete"]).ok();
    assert_tree_matches(&m, &out.join("tree"));
    assert_eq!(
        fs::read(outside.join("victim.txt")).unwrap(),
        b"do not touch"
    );
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
}
