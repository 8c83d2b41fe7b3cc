//! End-to-end tests of `cairn diff`, `cairn find` and `cairn tag`: what
//! they print (human and JSON), how they take snapshot arguments (short
//! ids, `latest`), how bad input fails (one error line, non-zero exit), and
//! that an interrupted tag change (both records left) is harmless.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use common::*;

/// A repository with two snapshots of a sample tree: the second with one
/// file modified, one added, one removed and one chmod-ed. Returns
/// (tmp, repo, tree, [old id, new id]).
fn two_snapshots() -> (tempfile::TempDir, PathBuf, PathBuf, [String; 2]) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(7));
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    write_file(&tree.join("sub/other.txt"), b"rewritten", 0o644);
    write_file(&tree.join("docs/added.md"), b"0123456789", 0o644);
    fs::remove_dir_all(tree.join("sub/dir")).unwrap();
    fs::set_permissions(
        tree.join("docs/readme.txt"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    let ids = snapshot_ids(&repo);
    assert_eq!(ids.len(), 2);
    (tmp, repo, tree, [ids[0].clone(), ids[1].clone()])
}

fn changes(v: &Value) -> Vec<(String, String)> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["change"].as_str().unwrap().to_string(),
                c["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn diff_reports_changes_in_human_and_json_form() {
    let (_tmp, repo, _tree, [old, new]) = two_snapshots();
    let short = &old[..6];
    let human = cairn(&repo, &["diff", short, "latest"]).ok().stdout_str();
    assert!(human.contains("M file"), "{human}");
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("M ") && l.ends_with("tree/sub/other.txt")),
        "{human}"
    );
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("+ ") && l.ends_with("tree/docs/added.md")),
        "{human}"
    );
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("- ") && l.ends_with("tree/sub/dir/leaf1.txt")),
        "{human}"
    );
    assert!(!human.lines().any(|l| l.starts_with("U ")), "{human}");
    let last = human.lines().last().unwrap();
    assert!(
        last.contains("1 added") && last.contains("4 removed") && last.contains("1 modified"),
        "{last}"
    );

    let v = cairn(&repo, &["diff", "--json", "--metadata", &old, &new])
        .ok()
        .json();
    assert_eq!(v["old"], old.as_str());
    assert_eq!(v["new"], new.as_str());
    let c = changes(&v);
    let has = |kind: &str, path: &str| c.contains(&(kind.to_string(), path.to_string()));
    assert!(has("modified", "tree/sub/other.txt"), "{c:?}");
    assert!(has("added", "tree/docs/added.md"), "{c:?}");
    assert!(has("removed", "tree/sub/dir"), "{c:?}");
    assert!(has("metadata", "tree/docs/readme.txt"), "{c:?}");
    let readme = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "tree/docs/readme.txt")
        .unwrap();
    assert_eq!(readme["fields"], serde_json::json!(["mode"]));
    assert_eq!(readme["old"]["mode"], 0o644);
    assert_eq!(readme["new"]["mode"], 0o600);
    let sum = &v["summary"];
    assert_eq!(sum["added"], 1);
    assert_eq!(sum["modified"], 1);
    assert_eq!(sum["bytes_added"], 10 + 9);
    assert!(sum["metadata"].as_u64().unwrap() >= 1);
    // Unchanged directories (docs/notes, data, deep, ...) were skipped unread.
    assert!(sum["subtrees_skipped"].as_u64().unwrap() >= 3, "{sum}");

    // A snapshot against itself: nothing, nothing read.
    let same = cairn(&repo, &["diff", "--json", &new, "latest"])
        .ok()
        .json();
    assert!(same["changes"].as_array().unwrap().is_empty());
    assert_eq!(same["summary"]["listings_read"], 0);
}

#[test]
fn find_matches_names_and_paths_in_every_snapshot() {
    let (_tmp, repo, _tree, [old, new]) = two_snapshots();
    let v = cairn(&repo, &["find", "--json", "*.md"]).ok().json();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1, "only the new snapshot has added.md: {v}");
    assert_eq!(rows[0]["snapshot"], new.as_str());
    assert_eq!(rows[0]["path"], "tree/docs/added.md");
    assert_eq!(rows[0]["type"], "file");
    assert_eq!(rows[0]["size"], 10);

    // A name found in both snapshots is reported for each.
    let v = cairn(&repo, &["find", "--json", "readme.txt"]).ok().json();
    let snaps: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(snaps, vec![old.as_str(), new.as_str()]);

    // Whole-path globs, one snapshot by short id.
    let human = cairn(&repo, &["find", "tree/sub/**/leaf?.txt", "-s", &old[..8]])
        .ok()
        .stdout_str();
    assert_eq!(human.lines().count(), 3, "{human}");
    assert!(human.lines().all(|l| l.starts_with(&old[..8])), "{human}");
    let none = cairn(&repo, &["find", "tree/sub/**/leaf?.txt", "-s", "latest"]).ok();
    assert!(none.stdout.is_empty());

    let err = cairn(&repo, &["find", "a[b"]).one_line_error();
    assert!(err.contains("pattern"), "{err}");
    let err = cairn(&repo, &["find", "x", "-s", "ffff0000"]).one_line_error();
    assert!(err.contains("snapshot"), "{err}");
}

fn record_path(repo: &Path, id: &str) -> PathBuf {
    repo.join("snapshots").join(id)
}

#[test]
fn tag_replaces_records_and_an_interrupted_change_is_harmless() {
    let (_tmp, repo, _tree, [old, new]) = two_snapshots();
    let saved = fs::read(record_path(&repo, &old)).expect("records are files named by id");

    let v = cairn(
        &repo,
        &["tag", "--json", &old[..6], "latest", "--add", "a,b"],
    )
    .ok()
    .json();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["old_id"], old.as_str());
    let renamed = rows[0]["new_id"].as_str().unwrap().to_string();
    assert_ne!(renamed, old);
    assert_eq!(rows[0]["tags"], serde_json::json!(["a", "b"]));
    let ids = snapshot_ids(&repo);
    assert!(!ids.contains(&old) && !ids.contains(&new), "{ids:?}");
    assert!(ids.contains(&renamed));

    // The same tree under the new id: nothing to diff.
    let d = cairn(&repo, &["diff", "--json", &renamed, &renamed])
        .ok()
        .json();
    assert!(d["changes"].as_array().unwrap().is_empty());
    let human = cairn(&repo, &["tag", &renamed[..8], "--remove", "a"])
        .ok()
        .stdout_str();
    assert!(human.contains(" -> ") && human.contains("[b]"), "{human}");
    let unchanged = cairn(&repo, &["tag", "latest", "--add", "b"])
        .ok()
        .stdout_str();
    assert!(unchanged.contains("unchanged"), "{unchanged}");
    let cleared = cairn(&repo, &["tag", "--json", "latest", "--set", ""])
        .ok()
        .json();
    assert_eq!(cleared[0]["tags"], serde_json::json!([]));

    // Bad input: one error line, nothing changed.
    let before = snapshot_ids(&repo);
    for args in [
        vec!["tag", "latest"],
        vec!["tag", "latest", "--set", "x", "--add", "y"],
        vec!["tag", "latest", "ffff0000", "--add", "y"],
        vec!["tag", "latest", "--add", ""],
    ] {
        cairn(&repo, &args).one_line_error();
    }
    assert_eq!(snapshot_ids(&repo), before);

    // A crash after the new record was written and before the old one was
    // deleted leaves both: put the old record back to simulate it.
    fs::write(record_path(&repo, &old), &saved).unwrap();
    let ids = snapshot_ids(&repo);
    assert_eq!(ids.len(), 3, "{ids:?}");
    cairn(&repo, &["check"]).ok();
    let restored = tempfile::tempdir().unwrap();
    cairn(&repo, &["restore", &old, "-t", s(restored.path())]).ok();
    // Its replacement (tags changed since) names the same tree.
    let same_tree = ids.iter().filter(|id| **id != old).any(|id| {
        let d = cairn(&repo, &["diff", "--json", &old, id]).ok().json();
        d["changes"].as_array().unwrap().is_empty()
    });
    assert!(same_tree, "{ids:?}");
    // Either copy can be forgotten; the data stays for the other.
    cairn(&repo, &["forget", &old]).ok();
    cairn(&repo, &["gc"]).ok();
    cairn(&repo, &["check", "--read-data"]).ok();
    assert_eq!(snapshot_ids(&repo).len(), 2);
}
