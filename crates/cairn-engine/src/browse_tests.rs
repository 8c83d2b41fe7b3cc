//! Tests of `diff`, `find` and `tag` on real backups in memory: what they
//! report, and what they read. The Merkle shortcut (`003_ea5fccc485a97c5d.txt`
//! §2: equal roots name equal subtrees) is checked with the repository's
//! `chunk_reads` counter, so a walk that read the whole tree would fail.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;

use crate::catalog::{self, SnapshotInfo};
use crate::diff::{diff, diff_at, Change, ChangeKind, DiffOptions};
use crate::find::{Finder, Pattern};
use crate::read::Reader;
use crate::tag::{retag, TagChange};
use crate::{BackupOptions, Repository, Source};

/// Directories per level and files per leaf directory of the test tree.
const FAN: usize = 6;
const FILES: usize = 3;

/// `tree/d{i}/s{j}/f{k}`: 1 + FAN + FAN² directories.
fn build(root: &Path) {
    for i in 0..FAN {
        for j in 0..FAN {
            let d = root.join(format!("d{i}/s{j}"));
            fs::create_dir_all(&d).unwrap();
            for k in 0..FILES {
                fs::write(d.join(format!("f{k}")), format!("file {i} {j} {k}\n")).unwrap();
            }
        }
    }
}

fn backup(repo: &Repository, tree: &Path) -> SnapshotInfo {
    let lock = repo.lock_writer(false).unwrap();
    let out = crate::backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(tree.to_path_buf())],
            tags: vec!["t0".into()],
            host: Some("test".into()),
            ..Default::default()
        },
    )
    .unwrap();
    catalog::resolve(&**repo.backend(), &out.snapshot_id).unwrap()
}

fn repo() -> Repository {
    Repository::init(Arc::new(MemBackend::new()), Repository::default_config()).unwrap()
}

fn chunk_reads(repo: &Repository) -> u64 {
    repo.counters.snapshot().chunk_reads
}

fn run_diff(
    repo: &Repository,
    a: &SnapshotInfo,
    b: &SnapshotInfo,
    metadata: bool,
) -> (Vec<Change>, crate::diff::DiffSummary, u64) {
    let mut reader = Reader::open(repo, Default::default()).unwrap();
    let before = chunk_reads(repo);
    let mut changes = Vec::new();
    let sum = diff(
        &mut reader,
        &a.record,
        &b.record,
        DiffOptions { metadata },
        &mut |c| {
            changes.push(c);
            Ok(())
        },
    )
    .unwrap();
    (changes, sum, chunk_reads(repo) - before)
}

fn summary(changes: &[Change]) -> Vec<(ChangeKind, String)> {
    changes.iter().map(|c| (c.kind, c.path.clone())).collect()
}

#[test]
fn a_one_file_change_reads_the_path_to_it_not_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build(&tree);
    let repo = repo();
    let s1 = backup(&repo, &tree);
    fs::write(tree.join("d3/s4/f1"), "changed content, longer\n").unwrap();
    let s2 = backup(&repo, &tree);

    let (changes, sum, reads) = run_diff(&repo, &s1, &s2, false);
    assert_eq!(
        summary(&changes),
        vec![(ChangeKind::Modified, "tree/d3/s4/f1".to_string())]
    );
    assert_eq!((sum.modified, sum.added, sum.removed), (1, 0, 0));
    assert_eq!(sum.bytes_removed, "file 3 4 1\n".len() as u64);
    assert_eq!(sum.bytes_added, "changed content, longer\n".len() as u64);
    // Every directory here is small, so inline in the root listing
    // (FORMAT.md "Directory listing"): one listing blob per side.
    assert_eq!(sum.listings_read, 2);
    assert!(reads <= 16, "{reads} chunk reads for two listing blobs");
    // Skipped unread: tree's siblings none, d3's 5 siblings, s4's 5 siblings.
    assert_eq!(sum.subtrees_skipped, 10);

    // The same snapshot against itself reads nothing.
    let (changes, sum, reads) = run_diff(&repo, &s2, &s2, true);
    assert!(changes.is_empty());
    assert_eq!((sum.listings_read, reads), (0, 0));
}

#[test]
fn a_diff_at_a_path_reports_only_that_subtree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build(&tree);
    let repo = repo();
    let s1 = backup(&repo, &tree);
    fs::write(tree.join("d3/s4/f1"), "changed\n").unwrap();
    fs::write(tree.join("d1/s0/f0"), "changed too\n").unwrap();
    fs::remove_dir_all(tree.join("d5")).unwrap();
    let s2 = backup(&repo, &tree);
    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    let mut at = |path: &str| {
        let mut changes = Vec::new();
        let sum = diff_at(
            &mut reader,
            &s1.record,
            &s2.record,
            path,
            DiffOptions::default(),
            &mut |c| {
                changes.push((c.kind, c.path));
                Ok(())
            },
        );
        sum.map(|s| (changes, s))
    };
    let (changes, sum) = at("/tree/d3").unwrap();
    assert_eq!(changes, [(ChangeKind::Modified, "tree/d3/s4/f1".into())]);
    assert_eq!((sum.modified, sum.added, sum.removed), (1, 0, 0));
    let (changes, _) = at("tree/d3/s4/f1").unwrap();
    assert_eq!(changes, [(ChangeKind::Modified, "tree/d3/s4/f1".into())]);
    let (changes, sum) = at("tree/d5").unwrap();
    assert_eq!(changes[0], (ChangeKind::Removed, "tree/d5".into()));
    assert_eq!(sum.removed as usize, 1 + FAN + FAN * FILES);
    assert!(at("tree/d2").unwrap().0.is_empty());
    assert_eq!(at("").unwrap().0.len(), 2 + 1 + FAN + FAN * FILES);
    assert!(at("tree/nope").unwrap_err().is_not_found());
}

#[test]
fn added_removed_type_and_metadata_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build(&tree);
    let repo = repo();
    let s1 = backup(&repo, &tree);
    fs::remove_dir_all(tree.join("d1/s2")).unwrap();
    fs::create_dir_all(tree.join("new/inner")).unwrap();
    fs::write(tree.join("new/inner/x"), "12345").unwrap();
    fs::remove_file(tree.join("d0/s0/f0")).unwrap();
    fs::create_dir(tree.join("d0/s0/f0")).unwrap();
    fs::set_permissions(tree.join("d2/s2/f2"), fs::Permissions::from_mode(0o600)).unwrap();
    let s2 = backup(&repo, &tree);

    let (changes, sum, _) = run_diff(&repo, &s1, &s2, true);
    let got = summary(&changes);
    use ChangeKind::*;
    for want in [
        (Removed, "tree/d0/s0/f0"),
        (Added, "tree/d0/s0/f0"),
        (Removed, "tree/d1/s2"),
        (Removed, "tree/d1/s2/f0"),
        (Removed, "tree/d1/s2/f2"),
        (Metadata, "tree/d2/s2/f2"),
        (Added, "tree/new"),
        (Added, "tree/new/inner"),
        (Added, "tree/new/inner/x"),
    ] {
        assert!(
            got.contains(&(want.0, want.1.to_string())),
            "{want:?} in {got:?}"
        );
    }
    let meta = changes
        .iter()
        .find(|c| c.path == "tree/d2/s2/f2" && c.kind == Metadata)
        .unwrap();
    assert!(meta.fields.contains(&"mode"), "{:?}", meta.fields);
    assert!(!got.iter().any(|(k, _)| *k == Modified), "{got:?}");
    // Removed: the old file f0, the directory s2 and its 3 files.
    assert_eq!(sum.removed, 1 + 1 + FILES as u64);
    assert_eq!(sum.added, 1 + 3);
    assert_eq!(sum.bytes_added, 5);
    // Changed directories' own mtimes are metadata changes too; without
    // --metadata none are reported or counted.
    let (plain, plain_sum, _) = run_diff(&repo, &s1, &s2, false);
    assert!(plain.iter().all(|c| c.kind != Metadata));
    assert_eq!(plain_sum.metadata, 0);
    assert_eq!(plain.len() as u64, sum.added + sum.removed);
    // Path order: depth-first by name, a directory before its contents.
    let paths: Vec<&str> = plain.iter().map(|c| c.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
}

fn find_all(finder: &mut Finder, snap: &SnapshotInfo) -> Vec<String> {
    let mut out = Vec::new();
    finder
        .search(&snap.record, &mut |p, _| {
            out.push(p.to_string());
            Ok(())
        })
        .unwrap();
    out
}

#[test]
fn find_searches_each_distinct_listing_once() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build(&tree);
    let repo = repo();
    let s1 = backup(&repo, &tree);
    fs::write(tree.join("d5/s0/f1"), "other").unwrap();
    let s2 = backup(&repo, &tree);

    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    let mut finder = Finder::new(&mut reader, Pattern::new("f1").unwrap());
    let before = chunk_reads(&repo);
    let a = find_all(&mut finder, &s1);
    let first = chunk_reads(&repo) - before;
    let b = find_all(&mut finder, &s2);
    let second = chunk_reads(&repo) - before - first;
    assert_eq!(a.len(), FAN * FAN);
    assert_eq!(a, b, "same paths in both snapshots");
    assert!(a.contains(&"tree/d5/s0/f1".to_string()));
    // The small directories are inline in the root listing: one listing
    // blob per snapshot, read once. (How many chunks it spans depends on
    // the recorded ctimes and inodes, which differ from run to run.)
    assert_eq!(finder.stats().listings_read, 2);
    assert!((1..=8).contains(&first), "{first} chunk reads");
    assert!((1..=8).contains(&second), "{second} chunk reads");
    assert_eq!(finder.stats().matches, 2 * (FAN * FAN) as u64);
    drop(finder);

    // Whole-path patterns: `*` stops at `/`, `**` crosses it.
    let mut finder = Finder::new(&mut reader, Pattern::new("/tree/d2/*/f?").unwrap());
    let got = find_all(&mut finder, &s1);
    assert_eq!(got.len(), FAN * FILES);
    assert!(got.iter().all(|p| p.starts_with("tree/d2/s")), "{got:?}");
    let mut finder = Finder::new(&mut reader, Pattern::new("tree/*/f0").unwrap());
    assert!(find_all(&mut finder, &s1).is_empty());
    let mut finder = Finder::new(&mut reader, Pattern::new("tree/**/s3").unwrap());
    assert_eq!(find_all(&mut finder, &s1).len(), FAN);
    // Names: directories match too.
    let mut finder = Finder::new(&mut reader, Pattern::new("d?").unwrap());
    assert_eq!(find_all(&mut finder, &s2).len(), FAN);
    // A leading `/` anchors a name at the snapshot root.
    let mut finder = Finder::new(&mut reader, Pattern::new("/d2").unwrap());
    assert!(find_all(&mut finder, &s1).is_empty());
    let mut finder = Finder::new(&mut reader, Pattern::new("/tree").unwrap());
    assert_eq!(find_all(&mut finder, &s1), ["tree"]);

    for bad in ["a[", "", "/"] {
        assert!(
            Pattern::new(bad)
                .unwrap_err()
                .to_string()
                .contains("pattern"),
            "{bad:?}"
        );
    }
}

#[test]
fn tag_changes_replace_the_record_and_keep_the_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    fs::write(tree.join("a"), "a").unwrap();
    let repo = repo();
    let s1 = backup(&repo, &tree);
    let lock = repo.lock_writer(false).unwrap();
    let change = TagChange {
        add: vec!["keep".into(), "t0".into()],
        ..Default::default()
    };
    let r = retag(&repo, &lock, &s1, &change).unwrap();
    let new_id = r.new_id.clone().unwrap();
    assert_eq!(r.tags, vec!["t0", "keep"]);
    let (all, bad) = catalog::list(&**repo.backend()).unwrap();
    assert!(bad.is_empty());
    assert_eq!(all.len(), 1, "the old record is gone");
    let s2 = &all[0];
    assert_eq!(s2.id, new_id);
    assert_eq!(s2.record.original.as_deref(), Some(s1.id.as_str()));
    let mut expect = s1.record.clone();
    expect.tags = r.tags.clone();
    expect.original = Some(s1.id.clone());
    assert_eq!(s2.record, expect, "only tags and original differ");

    // Already as asked: nothing written.
    let same = retag(&repo, &lock, s2, &change).unwrap();
    assert_eq!(same.new_id, None);
    // Back to the first tags: a new id all the same (original differs).
    let back = TagChange {
        set: Some(vec!["t0".into()]),
        ..Default::default()
    };
    let r3 = retag(&repo, &lock, s2, &back).unwrap();
    assert_ne!(r3.new_id.as_deref(), Some(s1.id.as_str()));
    let clear = TagChange {
        set: Some(vec![]),
        ..Default::default()
    };
    assert!(clear.apply(&["x".into()]).is_empty());
    let rm = TagChange {
        remove: vec!["x".into()],
        add: vec!["y".into(), "y".into()],
        ..Default::default()
    };
    assert_eq!(rm.apply(&["x".into(), "z".into()]), vec!["z", "y"]);

    for bad in [
        TagChange::default(),
        TagChange {
            set: Some(vec!["a".into()]),
            add: vec!["b".into()],
            ..Default::default()
        },
        TagChange {
            add: vec![" ".into()],
            ..Default::default()
        },
        TagChange {
            add: vec!["a,b".into()],
            ..Default::default()
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}
