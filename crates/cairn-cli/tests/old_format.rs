//! Repositories written by earlier builds keep working. The fixture
//! `fixtures/repo-format-2026-11.tar.gz` was written by the build of
//! 2026-11-22 before index deltas (two backups of a small tree, tagged
//! `first` and `second`; every commit rewrote the index file) and holds the
//! tree as it was at the second backup. This build must verify it, restore
//! both snapshots byte-identically, and back up into it (its first commit
//! there writes an index delta over the old generation).

mod common;

use std::path::Path;

use common::*;

fn unpack(dir: &Path) {
    let archive =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/repo-format-2026-11.tar.gz");
    let st = std::process::Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .status()
        .expect("running tar");
    assert!(st.success(), "unpacking {}", archive.display());
}

fn by_tag(repo: &Path, tag: &str) -> String {
    snapshots(repo)
        .iter()
        .find(|s| s["tags"].as_array().unwrap().iter().any(|t| t == tag))
        .unwrap_or_else(|| panic!("no snapshot tagged {tag}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_repository_of_the_previous_format_opens_restores_and_takes_backups() {
    let tmp = tempfile::tempdir().unwrap();
    unpack(tmp.path());
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let m = Manifest::capture(&tree);
    cairn(&repo, &["check", "--read-data"]).ok();

    let out = tmp.path().join("out2");
    cairn(
        &repo,
        &["restore", &by_tag(&repo, "second"), "--target", s(&out)],
    )
    .ok();
    assert_tree_matches(&m, &out.join("tree"));

    let out = tmp.path().join("out1");
    cairn(
        &repo,
        &["restore", &by_tag(&repo, "first"), "--target", s(&out)],
    )
    .ok();
    let numbers: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        std::fs::read(out.join("tree/sub/numbers.txt")).unwrap(),
        numbers.as_bytes()
    );

    // A new backup into the old repository: deduplicates against it and
    // commits an index delta over its generation.
    write_file(&tree.join("new.txt"), b"written by this build\n", 0o644);
    let m = Manifest::capture(&tree);
    let b = cairn(&repo, &["backup", "--json", s(&tree)]).ok().json();
    assert!(
        b["stats"]["new_raw_bytes"].as_u64().unwrap() < 10_000,
        "the old data deduplicates: {b}"
    );
    let deltas = files_under(&repo.join("index"))
        .iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains('.'))
        .count();
    assert_eq!(
        deltas, 1,
        "the commit wrote a delta over the old generation"
    );
    cairn(&repo, &["check", "--read-data"]).ok();
    let out = tmp.path().join("out3");
    cairn(&repo, &["restore", "latest", "--target", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));
}
