//! `cairn backup`'s selection flags through the binary (docs/
//! backup-selection.md; command-line behaviour, no paper's): each flag backs
//! up a tree, the snapshot is restored and compared byte for byte (content,
//! modes, mtimes) against the tree less what the flag leaves out; the
//! excluded count is reported; bad patterns, missing exclude files and
//! missing listed paths are one error line and create no repository; a dry
//! run creates nothing and predicts what the real backup then stores.

mod common;

use std::path::Path;

use common::*;

/// `m` without the entries `drop` names and everything below them.
fn without(m: &Manifest, drop: &[&str]) -> Manifest {
    let mut out = m.clone();
    out.0.retain(|k, _| {
        !drop
            .iter()
            .any(|d| k == d || k.starts_with(&format!("{d}/")))
    });
    out
}

const TAG: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55\n# a cache\n";

/// A tree with something for every flag to leave out.
fn build_tree(root: &Path) {
    let mut rng = Rng::new(7);
    write_file(&root.join("docs/readme.txt"), &rng.text(3000), 0o644);
    write_file(&root.join("docs/secret.key"), &rng.bytes(300), 0o600);
    write_file(&root.join("tool.sh"), b"#!/bin/sh\necho hi\n", 0o755);
    std::fs::create_dir_all(root.join("empty")).unwrap();
    symlink("docs/readme.txt", &root.join("link"));
    write_file(&root.join("src/main.o"), &rng.bytes(3000), 0o644);
    write_file(&root.join("src/deep/x/util.o"), &rng.bytes(100), 0o644);
    write_file(&root.join("src/main.c"), &rng.text(500), 0o644);
    write_file(&root.join("photos/A.JPG"), &rng.bytes(800), 0o644);
    write_file(&root.join("photos/b.jpg"), &rng.bytes(700), 0o644);
    write_file(&root.join("photos/c.png"), &rng.bytes(600), 0o644);
    write_file(&root.join("build/tmp/a.tmp"), &rng.bytes(50), 0o644);
    write_file(&root.join("build/keep.tmp"), &rng.bytes(50), 0o644);
    write_file(&root.join("vm/.nobackup"), b"", 0o644);
    write_file(&root.join("vm/disk.img"), &rng.bytes(5000), 0o644);
    write_file(&root.join("cache/CACHEDIR.TAG"), TAG, 0o644);
    write_file(&root.join("cache/blob"), &rng.bytes(900), 0o644);
    // A tag with a wrong signature does not make a cache directory.
    write_file(
        &root.join("notcache/CACHEDIR.TAG"),
        b"Signature: wrong\n",
        0o644,
    );
    write_file(&root.join("big.iso"), &rng.bytes(300_000), 0o644);
    // A directory named like the source, below it: a name pattern for the
    // source's name leaves this one out but never the source.
    write_file(&root.join("nested/data/n.txt"), &rng.text(40), 0o644);
    randomize_mtimes(root, &mut rng);
}

/// Backs up `data` with `flags` into a fresh repository, restores it and
/// compares against the tree less `dropped`; checks the excluded count.
#[track_caller]
fn backup_restore_compare(dir: &Path, data: &Path, flags: &[&str], dropped: &[&str]) {
    let full = Manifest::capture(data);
    let repo = dir.join(format!("repo-{}", flags.join("-").replace('/', "_")));
    let mut args = vec!["--json", "backup", s(data)];
    args.extend_from_slice(flags);
    let j = cairn(&repo, &args).ok().json();
    assert_eq!(j["excluded"], dropped.len(), "{flags:?}: {j}");
    assert_eq!(
        j["excluded_paths"].as_array().unwrap().len(),
        dropped.len(),
        "{j}"
    );
    let target = dir.join(format!(
        "out-{}",
        repo.file_name().unwrap().to_str().unwrap()
    ));
    cairn(&repo, &["restore", "latest", "--target", s(&target), "-q"]).ok();
    assert_tree_matches(&without(&full, dropped), &target.join("data"));
}

#[test]
fn each_flag_backs_up_exactly_the_selected_subset() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    build_tree(&data);
    let abs_build = format!("{}/build/tmp", data.display());
    let list = dir.path().join("excludes.txt");
    std::fs::write(
        &list,
        "# compiled objects\n*.o\n\n   \n  photos/c.png  \n#big.iso\n",
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--exclude", "*.o"],
            vec!["src/main.o", "src/deep/x/util.o"],
        ),
        (vec!["--exclude", &abs_build], vec!["build/tmp"]),
        // Relative with a slash: trailing components at any depth.
        (vec!["--exclude", "build/*.tmp"], vec!["build/keep.tmp"]),
        (vec!["--exclude", "/**/x/*.o"], vec!["src/deep/x/util.o"]),
        (vec!["--exclude", "*.jpg"], vec!["photos/b.jpg"]),
        (
            vec!["--iexclude", "*.jpg"],
            vec!["photos/A.JPG", "photos/b.jpg"],
        ),
        (
            vec!["--exclude-file", s(&list)],
            vec!["src/main.o", "src/deep/x/util.o", "photos/c.png"],
        ),
        (vec!["--exclude-if-present", ".nobackup"], vec!["vm"]),
        (vec!["--exclude-caches"], vec!["cache"]),
        (
            vec!["--exclude-larger-than", "4KiB"],
            vec!["big.iso", "vm/disk.img"],
        ),
        // One file system: the test tree has no mount points below it.
        (vec!["--one-file-system"], vec![]),
        // The source is named `data`: only the nested `data` goes.
        (vec!["--exclude", "data"], vec!["nested/data"]),
    ];
    for (flags, dropped) in &cases {
        backup_restore_compare(dir.path(), &data, flags, dropped);
    }
}

#[test]
fn files_from_adds_listed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let more = dir.path().join("more");
    let single = dir.path().join("single.bin");
    let mut rng = Rng::new(3);
    build_random_files(&data, &mut rng, 4, 2000);
    build_random_files(&more, &mut rng, 3, 1500);
    write_file(&single, &rng.bytes(1234), 0o600);
    let list = dir.path().join("list");
    std::fs::write(
        &list,
        format!(
            "# extra sources\n{}\n\n{}\n",
            more.display(),
            single.display()
        ),
    )
    .unwrap();
    let m = Manifest::capture(dir.path());
    let repo = dir.path().join("repo");
    cairn(
        &repo,
        &[
            "backup",
            s(&data),
            "--files-from",
            s(&list),
            "--exclude",
            "f0[01]*",
            "-q",
        ],
    )
    .ok();
    let out = dir.path().join("out");
    cairn(&repo, &["restore", "latest", "--target", s(&out), "-q"]).ok();
    let excluded: Vec<String> =
        m.0.keys()
            .filter(|k| {
                ["data/f00", "data/f01", "more/f00", "more/f01"]
                    .iter()
                    .any(|p| k.starts_with(p))
            })
            .cloned()
            .collect();
    assert_eq!(excluded.len(), 4, "{excluded:?}");
    let dropped: Vec<&str> = excluded.iter().map(String::as_str).collect();
    let m = without(&m, &dropped);
    assert_tree_matches(&m.subtree("data"), &out.join("data"));
    assert_tree_matches(&m.subtree("more"), &out.join("more"));
    assert_tree_matches(&m.subtree("single.bin"), &out.join("single.bin"));

    // Listed paths count as given paths: all of them missing is an error,
    // and no repository is made.
    let gone = dir.path().join("gone-list");
    std::fs::write(&gone, format!("{}\n", dir.path().join("nope").display())).unwrap();
    let repo2 = dir.path().join("repo2");
    let e = cairn(&repo2, &["backup", "--files-from", s(&gone)]).one_line_error();
    assert!(e.contains("nope"), "{e}");
    assert!(!repo2.exists());
    let e = cairn(
        &repo2,
        &["backup", "--files-from", s(&dir.path().join("no-list"))],
    )
    .one_line_error();
    assert!(e.contains("--files-from") && e.contains("no-list"), "{e}");
    assert!(!repo2.exists());
}

#[test]
fn bad_input_is_one_error_line_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    build_random_files(&data, &mut Rng::new(5), 2, 100);
    let repo = dir.path().join("repo");
    let bad_file = dir.path().join("bad-excludes");
    std::fs::write(&bad_file, "*.o\n# fine\n[oops\n").unwrap();
    let missing = dir.path().join("missing-excludes");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--exclude", "[abc"], "[abc"),
        (vec!["--iexclude", ""], "empty exclude pattern"),
        (vec!["--exclude-file", s(&missing)], "missing-excludes"),
        (vec!["--exclude-file", s(&bad_file)], "line 3"),
        (vec!["--exclude-if-present", "a/b"], "a/b"),
        (
            vec!["--exclude-larger-than", "ten"],
            "--exclude-larger-than",
        ),
    ];
    for (flags, needle) in cases {
        for dry in [false, true] {
            let mut args = vec!["backup", s(&data)];
            args.extend_from_slice(&flags);
            if dry {
                args.push("--dry-run");
            }
            let e = cairn(&repo, &args).one_line_error();
            assert!(e.contains(needle), "{flags:?}: {e}");
            assert!(!repo.exists(), "{flags:?} created the repository");
        }
    }
    // Standard input cannot be measured by a dry run.
    let r = cairn(&repo, &["backup", "--stdin", "--dry-run"]);
    assert_ne!(r.code, Some(0));
    assert!(!repo.exists());
}

#[test]
fn dry_run_creates_nothing_and_predicts_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    build_tree(&data);
    let before = Manifest::capture(dir.path());
    let repo = dir.path().join("repo");
    let flags = [
        "--exclude",
        "*.o",
        "--exclude-caches",
        "--exclude-larger-than",
        "4KiB",
    ];
    let mut args = vec!["--json", "backup", s(&data), "--dry-run"];
    args.extend_from_slice(&flags);
    let dry = cairn(&repo, &args).ok().json();
    assert_eq!(dry["dry_run"], true);
    assert!(!repo.exists(), "a dry run created the repository");
    assert_eq!(
        Manifest::capture(dir.path()),
        before,
        "a dry run changed something on disk"
    );
    // Human output: one line per excluded entry, then the totals.
    let mut args = vec!["backup", s(&data), "--dry-run"];
    args.extend_from_slice(&flags);
    let text = cairn(&repo, &args).ok().stdout_str();
    assert!(
        text.contains("excluded ") && text.contains("would back up"),
        "{text}"
    );
    assert!(!repo.exists());

    // The real backup stores what the dry run predicted.
    let mut args = vec!["--json", "backup", s(&data)];
    args.extend_from_slice(&flags);
    let real = cairn(&repo, &args).ok().json();
    let st = &real["stats"];
    assert_eq!(dry["files"], st["files"], "{dry} vs {real}");
    assert_eq!(dry["dirs"], st["dirs"], "{dry} vs {real}");
    assert_eq!(dry["symlinks"], st["symlinks"], "{dry} vs {real}");
    assert_eq!(dry["bytes"], st["logical_bytes"], "{dry} vs {real}");
    assert_eq!(dry["excluded"], real["excluded"]);
    assert_eq!(dry["excluded_paths"], real["excluded_paths"]);
    // 2 objects, the cache directory, big.iso and vm/disk.img.
    assert_eq!(real["excluded"], 5, "{real}");
}

/// `--one-file-system` on a real mount point, where the machine has one
/// below a small directory (`/dev/shm` is usually its own tmpfs).
#[test]
fn one_file_system_stops_at_a_mount_point() {
    use std::os::unix::fs::MetadataExt;
    let (Ok(dev), Ok(shm)) = (std::fs::metadata("/dev"), std::fs::metadata("/dev/shm")) else {
        return skip_or_fail("no /dev/shm: no mount point to stop at");
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let j = cairn(
        &repo,
        &["--json", "backup", "/dev", "--dry-run", "--one-file-system"],
    )
    .json();
    assert!(!repo.exists());
    let excluded: Vec<&str> = j["excluded_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let shm_excluded = excluded.contains(&"/dev/shm: on another file system");
    assert_eq!(shm_excluded, dev.dev() != shm.dev(), "{j}");
    // Without the flag nothing is left out.
    let j = cairn(&repo, &["--json", "backup", "/dev", "--dry-run"]).json();
    assert_eq!(j["excluded"], 0, "{j}");
}
