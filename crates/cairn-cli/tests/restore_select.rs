//! Restore selection, verification and dump, end to end: `restore
//! --include/--exclude` (and the any-case forms) restore exactly the
//! selected entries with their metadata and create nothing else;
//! `restore --verify` passes on a good restore and fails, naming the file,
//! when the target holds something else; `dump` writes a file's bytes or a
//! tar archive that the system `tar` extracts to the backed-up tree.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    src: PathBuf,
    tree: Manifest,
}

/// The sample tree plus a path too long for a tar header's name field.
fn fixture(seed: u64) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let src = tmp.path().join("tree");
    let mut rng = Rng::new(seed);
    build_sample_tree(&src, &mut rng);
    let long = format!("long/{}/{}.txt", "d".repeat(90), "f".repeat(60));
    write_file(&src.join(long), &rng.text(3_000), 0o640);
    randomize_mtimes(&src, &mut rng);
    // Before 1970, with a fraction of a second: a pax record in the tar.
    write_file(&src.join("data/old.txt"), b"old", 0o644);
    set_mtime(&src.join("data/old.txt"), (-86_400, 250_000_000));
    set_mtime(&src.join("data"), (1_500_000_000, 0));
    let tree = Manifest::capture(&src);
    cairn(&repo, &["backup", "-q", s(&src)]).ok();
    Fixture {
        tmp,
        repo,
        src,
        tree,
    }
}

impl Fixture {
    fn out(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `restore latest -t OUT --verify ARGS`, asserted successful.
    fn restore(&self, out: &Path, args: &[&str]) -> Run {
        let mut a = vec!["restore", "latest", "-q", "--verify", "-t", s(out)];
        a.extend_from_slice(args);
        cairn(&self.repo, &a).ok()
    }

    /// The backed-up tree restricted to the entries `keep` accepts (paths
    /// relative to the tree; `""` is the tree itself).
    fn only(&self, keep: impl Fn(&str) -> bool) -> Manifest {
        let map: BTreeMap<_, _> = self
            .tree
            .0
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Manifest(map)
    }
}

/// Entries directly in `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn under(k: &str, dir: &str) -> bool {
    k == dir || k.starts_with(&format!("{dir}/"))
}

#[test]
fn include_and_exclude_restore_exactly_the_selection_with_metadata() {
    let fx = fixture(21);

    // Two includes (relative and leading-slash forms): their subtrees and
    // the parents leading to them, with the parents' own metadata.
    let out = fx.out("inc");
    fx.restore(
        &out,
        &["--include", "tree/docs", "--include", "/tree/sub/dir"],
    );
    assert_eq!(names(&out), ["tree"]);
    let want = fx.only(|k| k.is_empty() || k == "sub" || under(k, "docs") || under(k, "sub/dir"));
    assert_tree_matches(&want, &out.join("tree"));

    // Excludes: a name glob at any depth and an anchored subtree.
    let out = fx.out("exc");
    fx.restore(
        &out,
        &["--exclude", "*.bin", "--exclude", "/tree/docs/notes"],
    );
    let want = fx.only(|k| !k.ends_with(".bin") && !under(k, "docs/notes"));
    assert_tree_matches(&want, &out.join("tree"));

    // Both: a directory included, part of it excluded again.
    let out = fx.out("both");
    fx.restore(&out, &["--include", "tree/data", "--exclude", "r[0-4].bin"]);
    let want = fx.only(|k| {
        k.is_empty() || (under(k, "data") && !(k.starts_with("data/r") && k.as_bytes()[6] <= b'4'))
    });
    assert!(want.0.contains_key("data/r7.bin") && !want.0.contains_key("data/r3.bin"));
    assert_tree_matches(&want, &out.join("tree"));

    // Any case, and a file pattern at any depth: only the matching files
    // and their parents.
    let out = fx.out("icase");
    fx.restore(&out, &["--iinclude", "N[0-1].TXT", "--iexclude", "N1.*"]);
    let want = fx.only(|k| ["", "docs", "docs/notes", "docs/notes/n0.txt"].contains(&k));
    assert_tree_matches(&want, &out.join("tree"));

    // The absolute path the tree was backed up from names the same entries.
    let out = fx.out("abs");
    let bin = format!("{}/bin", s(&fx.src));
    fx.restore(&out, &["--include", &bin, "--include", "link"]);
    let want = fx.only(|k| k.is_empty() || under(k, "bin") || k == LINK);
    assert_tree_matches(&want, &out.join("tree"));

    // A directory restored only as a parent keeps what the target had
    // there, even with --delete; an included one is pruned.
    write_file(&out.join("tree/extra.txt"), b"mine", 0o644);
    write_file(&out.join("tree/bin/extra.txt"), b"mine", 0o644);
    fx.restore(&out, &["--include", &bin, "--delete"]);
    assert!(out.join("tree/extra.txt").exists());
    assert!(!out.join("tree/bin/extra.txt").exists());
}

#[test]
fn bad_or_unmatched_patterns_are_one_line_errors_creating_nothing() {
    let fx = fixture(22);
    let out = fx.out("none");
    for args in [
        &["--include", "[abc"][..],
        &["--exclude", ""],
        &["--include", "tree/nope", "--include", "*.nothing"],
    ] {
        let mut a = vec!["restore", "latest", "-t", s(&out)];
        a.extend_from_slice(args);
        let err = cairn(&fx.repo, &a).one_line_error();
        assert!(err.contains(args[1]), "{err}");
        assert!(!out.exists(), "{args:?} created the target");
    }
}

#[test]
fn verify_passes_on_a_good_restore_and_names_files_that_differ() {
    let fx = fixture(23);
    let out = fx.out("v");
    let json = cairn(
        &fx.repo,
        &["restore", "latest", "-t", s(&out), "--verify", "--json"],
    )
    .ok()
    .json();
    let files = fx
        .tree
        .0
        .values()
        .filter(|e| matches!(e.kind, Kind::File(_)))
        .count();
    assert_eq!(json["verify"]["files"], files as u64, "{json}");
    assert_eq!(json["verify"]["mismatches"].as_array().unwrap().len(), 0);
    assert_eq!(
        json["verify"]["bytes"],
        fx.tree.total_file_bytes(),
        "{json}"
    );

    // Same size and mtime, other bytes: `--overwrite if-changed` keeps the
    // file, and only reading it back shows that it is not the snapshot's.
    let log = out.join("tree").join(LOG);
    let before = fs::symlink_metadata(&log).unwrap();
    flip_byte(&log, 123_456);
    let t = filetime::FileTime::from_last_modification_time(&before);
    filetime::set_file_times(&log, t, t).unwrap();
    // A file of another size and mode under `--overwrite never`.
    let key = out.join("tree").join(KEY);
    write_file(&key, b"edited", 0o644);
    // A quiet restore over `out` with `--verify` and `--overwrite MODE`.
    let verify_over = |mode: &str| {
        cairn(
            &fx.repo,
            &[
                "restore",
                "latest",
                "-q",
                "-t",
                s(&out),
                "--verify",
                "--overwrite",
                mode,
            ],
        )
    };
    let run = verify_over("if-changed");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    // if-changed replaced the key (its size changed); the log stayed.
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert!(
        lines[0].contains(s(&log)) && lines[0].contains("content differs"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("1 restored files differ"), "{}", lines[1]);

    let run = verify_over("never");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains(s(&log)), "{}", run.stderr);
    assert!(!run.stderr.contains(s(&key)), "{}", run.stderr);

    write_file(&key, b"edited", 0o644);
    let run = verify_over("never");
    let key_line = run
        .stderr
        .lines()
        .find(|l| l.contains(s(&key)))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        key_line.contains("size 6 bytes") && key_line.contains("mode 0644"),
        "{key_line}"
    );
    assert!(
        run.stderr.contains("2 restored files differ"),
        "{}",
        run.stderr
    );

    // A plain restore puts the snapshot back, and verify agrees.
    fx.restore(&out, &[]);
    assert_tree_matches(&fx.tree, &out.join("tree"));
}

/// Extracts a tar archive with the system `tar`, keeping permissions.
fn untar(archive: &[u8], dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let file = dir.with_extension("tar");
    fs::write(&file, archive).unwrap();
    let st = Command::new("tar")
        .arg("-xpf")
        .arg(&file)
        .arg("-C")
        .arg(dir)
        .status()
        .expect("running tar");
    assert!(st.success(), "tar failed on {}", file.display());
}

#[test]
fn dump_writes_a_file_or_a_tar_that_tar_extracts_to_the_tree() {
    let fx = fixture(24);
    let run = cairn(&fx.repo, &["dump", "latest", &format!("tree/{BIG1}")]).ok();
    assert!(run.stdout == fx.tree.file(BIG1));
    let run = cairn(&fx.repo, &["dump", "latest", "tree/data/empty.bin"]).ok();
    assert!(run.stdout.is_empty());

    let run = cairn(
        &fx.repo,
        &["dump", "latest", "/tree/docs", "--archive", "tar"],
    )
    .ok();
    let x = fx.out("x-docs");
    untar(&run.stdout, &x);
    assert_eq!(names(&x), ["tree"]);
    assert_eq!(names(&x.join("tree")), ["docs"]);
    assert_tree_matches(&fx.tree.subtree("docs"), &x.join("tree/docs"));

    for whole in [&["dump", "latest"][..], &["dump", "latest", "/"]] {
        let run = cairn(&fx.repo, whole).ok();
        let x = fx.out(&format!("x-all{}", whole.len()));
        untar(&run.stdout, &x);
        assert_tree_matches(&fx.tree, &x.join("tree"));
    }
}

#[test]
fn dump_errors_are_one_line() {
    let fx = fixture(25);
    let err = cairn(&fx.repo, &["dump", "latest", "tree/nope"]).one_line_error();
    assert!(err.contains("tree/nope"), "{err}");
    let err = cairn(&fx.repo, &["dump", "latest", "tree/link"]).one_line_error();
    assert!(err.contains("symlink"), "{err}");
    let err = cairn(&fx.repo, &["dump", "latest", "tree/docs/readme.txt/x"]).one_line_error();
    assert!(err.contains("readme.txt"), "{err}");
    let run = cairn(&fx.repo, &["dump", "latest", "tree", "--archive", "zip"]);
    assert_ne!(run.code, Some(0));
}
