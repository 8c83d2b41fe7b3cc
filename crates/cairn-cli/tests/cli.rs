//! Everyday command-line behaviour.

mod common;

use std::fs;

use common::*;

#[test]
fn backup_creates_the_repository_and_init_refuses_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("not/yet/there");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(10));

    let b = cairn(&repo, &["backup", s(&tree)]).ok();
    assert!(
        repo.join("config").is_file(),
        "backup did not create the repo"
    );
    assert!(
        b.stderr.contains("created cairn repository"),
        "stderr: {}",
        b.stderr
    );
    assert!(b.stdout_str().contains("snapshot "), "{}", b.stdout_str());
    assert_eq!(snapshot_ids(&repo).len(), 1);

    // init on an existing repository: one line, non-zero, nothing changed.
    let config = fs::read(repo.join("config")).unwrap();
    let err = cairn(&repo, &["init"]).one_line_error();
    assert!(err.contains("already"), "{err}");
    assert_eq!(fs::read(repo.join("config")).unwrap(), config);

    // init then init again on a fresh path.
    let repo2 = tmp.path().join("repo2");
    cairn(&repo2, &["init"]).ok();
    let err = cairn(&repo2, &["init"]).one_line_error();
    assert!(err.contains("already"), "{err}");
    // The fresh repository works.
    cairn(&repo2, &["backup", "-q", s(&tree.join("sub"))]).ok();
    cairn(&repo2, &["check"]).ok();
}

#[test]
fn stdin_backup_round_trips_through_cat() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let mut rng = Rng::new(11);
    let mut dump = rng.text(1_000_000);
    dump.extend_from_slice(&rng.bytes(2_000_000));

    let b = cairn_stdin(
        &repo,
        &["backup", "--stdin", "--stdin-name", "dump.sql", "--json"],
        &dump,
    )
    .ok()
    .json();
    assert_eq!(
        b["stats"]["logical_bytes"].as_u64(),
        Some(dump.len() as u64)
    );
    let id = b["id"].as_str().unwrap();

    let cat = cairn(&repo, &["cat", id, "dump.sql"]).ok();
    assert!(cat.stdout == dump, "cat returned different bytes");
    let cat = cairn(&repo, &["cat", "latest", "/dump.sql"]).ok();
    assert!(cat.stdout == dump, "cat with a leading slash differs");

    let ls = cairn(&repo, &["ls", "latest"]).ok().stdout_str();
    assert!(ls.contains("dump.sql"), "{ls}");

    // An empty stream is a valid (empty) file.
    cairn_stdin(
        &repo,
        &["backup", "-q", "--stdin", "--stdin-name", "e"],
        b"",
    )
    .ok();
    let cat = cairn(&repo, &["cat", "latest", "e"]).ok();
    assert!(cat.stdout.is_empty());
    cairn(&repo, &["check", "--read-data"]).ok();
}

#[test]
fn tags_show_in_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(12));
    cairn(
        &repo,
        &["backup", "-q", "--tag", "nightly", "--tag", "db", s(&tree)],
    )
    .ok();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();

    let snaps = snapshots(&repo);
    assert_eq!(snaps[0]["tags"], serde_json::json!(["nightly", "db"]));
    assert_eq!(snaps[1]["tags"], serde_json::json!([]));
    let human = cairn(&repo, &["snapshots"]).ok().stdout_str();
    assert!(human.contains("nightly"), "{human}");
    assert!(
        human.contains(&snaps[0]["id"].as_str().unwrap()[..8]),
        "{human}"
    );
}

#[test]
fn restore_include_restores_only_that_subtree() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(13));
    let m = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();

    let out = tmp.path().join("out");
    cairn(
        &repo,
        &[
            "restore",
            "latest",
            "--target",
            s(&out),
            "--include",
            "tree/sub/dir",
        ],
    )
    .ok();
    // Only tree/sub/dir and its contents, at the same relative place.
    let found: Vec<String> = walk(&out)
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        found,
        [
            "",
            "tree",
            "tree/sub",
            "tree/sub/dir",
            "tree/sub/dir/leaf0.txt",
            "tree/sub/dir/leaf1.txt",
            "tree/sub/dir/leaf2.txt"
        ]
    );
    assert_tree_matches(&m.subtree("sub/dir"), &out.join("tree/sub/dir"));

    // A single file works too.
    let out = tmp.path().join("out-file");
    cairn(
        &repo,
        &[
            "restore",
            "latest",
            "-t",
            s(&out),
            "--include",
            "tree/bin/tool.sh",
        ],
    )
    .ok();
    assert_tree_matches(&m.subtree(TOOL), &out.join("tree").join(TOOL));

    // A path that is not in the snapshot: one line, nothing restored.
    let out = tmp.path().join("out-none");
    let err = cairn(
        &repo,
        &["restore", "latest", "-t", s(&out), "--include", "tree/nope"],
    )
    .one_line_error();
    assert!(err.contains("tree/nope"), "{err}");
    assert!(files_under(&out).is_empty());
}

#[test]
fn cat_ls_and_snapshot_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(14));
    let m = Manifest::capture(&tree);
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();

    // cat of files (latest), of a directory, of a symlink, of nothing.
    let cat = cairn(&repo, &["cat", "latest", &format!("tree/{BIG1}")]).ok();
    assert!(cat.stdout == m.file(BIG1));
    let cat = cairn(&repo, &["cat", "latest", "tree/data/empty.bin"]).ok();
    assert!(cat.stdout.is_empty());
    for path in ["tree/sub", "tree", "tree/link", "tree/missing.txt"] {
        let r = cairn(&repo, &["cat", "latest", path]);
        let err = r.one_line_error();
        assert!(err.contains(path), "{err}");
        assert!(r.stdout.is_empty(), "cat {path} wrote to stdout");
    }

    // ls lists every path with its kind.
    let ls = cairn(&repo, &["ls", "latest"]).ok().stdout_str();
    let listed: Vec<&str> = ls
        .lines()
        .map(|l| {
            let l = l.split(" -> ").next().unwrap();
            l.rsplit(' ').next().unwrap()
        })
        .collect();
    let mut expected: Vec<String> =
        m.0.keys()
            .map(|k| {
                if k.is_empty() {
                    "tree".to_string()
                } else {
                    format!("tree/{k}")
                }
            })
            .collect();
    expected.sort();
    let mut listed_sorted: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    listed_sorted.sort();
    assert_eq!(listed_sorted, expected);
    assert!(ls.contains(&format!("tree/link -> {BIG1}")), "{ls}");
    assert!(ls
        .lines()
        .any(|l| l.starts_with("-rwxr-xr-x") && l.ends_with(TOOL)));
    assert!(ls
        .lines()
        .any(|l| l.starts_with("drwx------") && l.ends_with("secret")));

    // Unknown or malformed snapshot ids: one line, non-zero, for every reader.
    for spec in ["deadbeef", "ffffffffffffffff", "zz", "lates", ""] {
        for args in [
            vec!["ls", spec],
            vec!["cat", spec, "tree/sub/other.txt"],
            vec!["restore", spec, "-t", s(tmp.path())],
        ] {
            let err = cairn(&repo, &args).one_line_error();
            assert!(err.contains("snapshot"), "{args:?}: {err}");
        }
    }
}

#[test]
fn latest_is_the_newest_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(15);
    build_sample_tree(&tree, &mut rng);
    let mut contents = Vec::new();
    for _ in 0..3 {
        let c = rng.text(777);
        write_file(&tree.join("v.txt"), &c, 0o644);
        cairn(&repo, &["backup", "-q", s(&tree)]).ok();
        contents.push(c);
        let cat = cairn(&repo, &["cat", "latest", "tree/v.txt"]).ok();
        assert!(&cat.stdout == contents.last().unwrap());
    }
    let ids = snapshot_ids(&repo);
    for (id, c) in ids.iter().zip(&contents) {
        let cat = cairn(&repo, &["cat", &id[..8], "tree/v.txt"]).ok();
        assert!(&cat.stdout == c);
    }
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&Manifest::capture(&tree), &out.join("tree"));
}

#[test]
fn repository_from_environment_and_missing_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(16));
    let b = cairn_env(&["backup", "--json", s(&tree)], &[("CAIRN_REPO", &repo)]).ok();
    let id = b.json()["id"].as_str().unwrap().to_string();
    let snaps = cairn_env(&["snapshots", "--json"], &[("CAIRN_REPO", &repo)]).ok();
    assert_eq!(snaps.json()[0]["id"].as_str(), Some(id.as_str()));
    // --repo wins over CAIRN_REPO.
    let other = tmp.path().join("other");
    cairn(&other, &["init", "-q"]).ok();
    let mut c = command(&other, &["snapshots", "--json"]);
    c.env("CAIRN_REPO", &repo);
    let out = c.output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, serde_json::json!([]));

    // No repository at all: one line naming both ways to give one.
    let err = cairn_env(&["snapshots"], &[]).one_line_error();
    assert!(
        err.contains("--repo") && err.contains("CAIRN_REPO"),
        "{err}"
    );
    let err = cairn_env(&["backup", s(&tree)], &[]).one_line_error();
    assert!(err.contains("--repo"), "{err}");
    // Nothing to back up.
    let err = cairn(&repo, &["backup"]).one_line_error();
    assert!(err.contains("nothing to back up"), "{err}");
}
