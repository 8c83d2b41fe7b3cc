//! Issue 31, frictions 1 and 5: one path form everywhere. The source paths
//! `snapshots` prints (absolute, as backed up) work in `ls`, `cat`, `dump`,
//! `diff` and `find` like the snapshot paths `ls` prints; restic's
//! `ID:subfolder` works in `ls`, `cat`, `dump`, `diff` and `restore`; plus
//! `snapshots --latest N` and `find -i`.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// A repository with two snapshots of `<tmp>/home/me/docs` (the second
/// with `sub/b.txt` changed). Returns (tmp, repo, the tree's absolute path).
fn docs_repo() -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = std::fs::canonicalize(tmp.path())
        .unwrap()
        .join("home/me/docs");
    write_file(&tree.join("a.txt"), b"alpha\n", 0o644);
    write_file(&tree.join("sub/b.txt"), b"beta\n", 0o644);
    write_file(&tree.join("sub/Readme.TXT"), b"read me\n", 0o644);
    cairn(&repo, &["init", "-q"]).ok();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    write_file(&tree.join("sub/b.txt"), b"beta, changed\n", 0o644);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let abs = tree.to_str().unwrap().to_string();
    (tmp, repo, abs)
}

fn at(abs: &str, rest: &str) -> String {
    format!("{abs}/{rest}")
}

#[test]
fn the_paths_snapshots_prints_work_in_every_browsing_command() {
    let (_tmp, repo, abs) = docs_repo();
    let snaps = snapshots(&repo);
    assert_eq!(snaps[1]["paths"][0].as_str().unwrap(), abs);

    // ls: the source path and the snapshot path list the same entries.
    let by_source = cairn(&repo, &["--json", "ls", "latest", &at(&abs, "sub")])
        .ok()
        .json_paths();
    let by_snapshot = cairn(&repo, &["--json", "ls", "latest", "/docs/sub"])
        .ok()
        .json_paths();
    assert_eq!(by_source, by_snapshot);
    assert!(
        by_source.contains(&"docs/sub/b.txt".to_string()),
        "{by_source:?}"
    );
    let whole = cairn(&repo, &["--json", "ls", "latest", &abs])
        .ok()
        .json_paths();
    assert_eq!(whole[0], "docs");

    // cat and dump of a file.
    let cat = cairn(&repo, &["cat", "latest", &at(&abs, "sub/b.txt")]).ok();
    assert_eq!(cat.stdout, b"beta, changed\n");
    let dump = cairn(&repo, &["dump", "latest", &at(&abs, "a.txt")]).ok();
    assert_eq!(dump.stdout, b"alpha\n");
    // The old forms keep working.
    let cat = cairn(&repo, &["cat", "latest", "docs/a.txt"]).ok();
    assert_eq!(cat.stdout, b"alpha\n");

    // diff at a source path.
    let ids = snapshot_ids(&repo);
    let diff = cairn(
        &repo,
        &["--json", "diff", &ids[0], &ids[1], &at(&abs, "sub")],
    )
    .ok();
    let changes = diff.json()["changes"].as_array().unwrap().clone();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["path"], "docs/sub/b.txt");

    // find with an anchored pattern spelled as the backed-up path.
    let found = cairn(
        &repo,
        &["--json", "find", "-s", "latest", &at(&abs, "*.txt")],
    )
    .ok()
    .json_paths();
    assert_eq!(found, ["docs/a.txt"]);

    // A path in no form is still one clear error.
    let miss = cairn(&repo, &["cat", "latest", &at(&abs, "nope.txt")]).code(1);
    assert!(miss.one_line_error().contains("nope.txt"));
}

#[test]
fn id_colon_subfolder_is_the_folder_as_root() {
    let (_tmp, repo, abs) = docs_repo();
    let sub = format!("latest:{}", at(&abs, "sub"));
    let listed = cairn(&repo, &["--json", "ls", &sub]).ok().json_paths();
    assert!(listed.contains(&"docs/sub/b.txt".to_string()), "{listed:?}");
    assert!(!listed.contains(&"docs/a.txt".to_string()), "{listed:?}");
    let cat = cairn(&repo, &["cat", "latest:/docs/sub", "b.txt"]).ok();
    assert_eq!(cat.stdout, b"beta, changed\n");
    let dump = cairn(&repo, &["dump", &sub, "b.txt"]).ok();
    assert_eq!(dump.stdout, b"beta, changed\n");
    let ids = snapshot_ids(&repo);
    let diff = cairn(
        &repo,
        &[
            "--json",
            "diff",
            &format!("{}:/docs", ids[0]),
            &format!("{}:/docs", ids[1]),
        ],
    )
    .ok();
    assert_eq!(diff.json()["changes"].as_array().unwrap().len(), 1);
    // restore restores the folder's contents into the target (more in
    // restore_subfolder.rs).
    let target = repo.parent().unwrap().join("out");
    cairn(&repo, &["restore", "-q", &sub, "--target", s(&target)]).ok();
    assert_eq!(
        std::fs::read(target.join("b.txt")).unwrap(),
        b"beta, changed\n"
    );
    assert!(!target.join("sub").exists());
}

#[test]
fn find_ignore_case_and_snapshots_latest() {
    let (tmp, repo, _abs) = docs_repo();
    let found = |args: &[&str]| {
        let mut all = vec!["--json", "find", "-s", "latest"];
        all.extend_from_slice(args);
        cairn(&repo, &all).ok().json_paths()
    };
    assert!(found(&["readme.txt"]).is_empty());
    assert_eq!(found(&["-i", "readme.txt"]), ["docs/sub/Readme.TXT"]);
    assert_eq!(
        found(&["--ignore-case", "/DOCS/*/README.*"]),
        ["docs/sub/Readme.TXT"]
    );

    // A third snapshot of another source: --latest 1 keeps the newest of
    // each host-and-paths group, oldest first.
    let other = tmp.path().join("other");
    write_file(&other.join("x"), b"x", 0o644);
    cairn(&repo, &["backup", "-q", s(&other)]).ok();
    let ids = snapshot_ids(&repo);
    let latest = cairn(&repo, &["--json", "snapshots", "--latest", "1"])
        .ok()
        .json();
    let kept: Vec<&str> = latest
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept, [ids[1].as_str(), ids[2].as_str()]);
    let two = cairn(&repo, &["--json", "snapshots", "--latest", "2"])
        .ok()
        .json();
    assert_eq!(two.as_array().unwrap().len(), 3);
    let human = cairn(&repo, &["snapshots", "--latest", "1"])
        .ok()
        .stdout_str();
    assert!(!human.contains(&ids[0][..8]), "{human}");
}

/// Removes the test's directory at `/` however the test ends.
struct AtRoot(PathBuf);

impl Drop for AtRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_backup_of_root_holds_its_entries_at_the_snapshot_root() {
    // `/` itself, with every other top-level entry excluded: only a
    // directory this test makes there is read.
    let name = format!("cairn-root-test-{}", std::process::id());
    let dir = AtRoot(Path::new("/").join(&name));
    if std::fs::create_dir(&dir.0).is_err() {
        skip_or_fail("/ is not writable here (not root): backing up / needs a directory there");
        return;
    }
    write_file(&dir.0.join("sub/a.txt"), b"at the root\n", 0o644);
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init", "-q"]).ok();
    let mut args = vec!["backup".to_string(), "-q".into(), "/".into()];
    for e in std::fs::read_dir("/").unwrap() {
        let other = e.unwrap().file_name().to_string_lossy().into_owned();
        if other != name {
            args.extend(["--exclude".into(), format!("/{other}")]);
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cairn(&repo, &args).ok();
    // The second backup finds the first as its parent through the root.
    cairn(&repo, &args).ok();

    let listed = cairn(&repo, &["--json", "ls", "latest"]).ok().json_paths();
    assert_eq!(listed[0], name, "{listed:?}");
    assert!(listed.contains(&format!("{name}/sub/a.txt")), "{listed:?}");
    let file = format!("/{name}/sub/a.txt");
    let cat = cairn(&repo, &["cat", "latest", &file]).ok();
    assert_eq!(cat.stdout, b"at the root\n");
    let out = tmp.path().join("out");
    cairn(
        &repo,
        &["restore", "-q", "latest", "-t", s(&out), "--include", &file],
    )
    .ok();
    assert_eq!(
        std::fs::read(out.join(&name).join("sub/a.txt")).unwrap(),
        b"at the root\n"
    );
}
