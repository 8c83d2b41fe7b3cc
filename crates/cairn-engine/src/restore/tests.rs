//! Engine-level restore tests that need the target's test hooks: a full
//! target file system (simulated with [`Target::with_capacity`]) stops the
//! whole restore with one error, leaves no temporary and keeps the old
//! content of the file being written.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;

use super::target::{RestoreOptions, Target, TEMP_PREFIX};
use super::Reader;
use crate::{catalog, BackupOptions, Progress, Repository, Source};

fn repo_with(tree: &Path) -> (Repository, String) {
    let repo = Repository::init(Arc::new(MemBackend::new()), Repository::default_config()).unwrap();
    let lock = repo.lock_writer(false).unwrap();
    let out = crate::backup(
        &repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(tree.to_path_buf())],
            tags: vec![],
            host: Some("test".into()),
            progress: Arc::new(Progress::default()),
            rewrite_of: None,
            rewrite_scheme: None,
        },
    )
    .unwrap();
    drop(lock);
    (repo, out.snapshot_id)
}

fn temporaries(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                out.push(e.path().display().to_string());
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_full_target_stops_the_whole_restore_with_one_error() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir(&tree).unwrap();
    for i in 0..6u8 {
        let data: Vec<u8> = (0..50_000u32)
            .map(|j| (j.wrapping_mul(31) ^ i as u32) as u8)
            .collect();
        fs::write(tree.join(format!("f{i}")), data).unwrap();
    }
    let (repo, id) = repo_with(&tree);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();

    let out = tmp.path().join("out");
    fs::create_dir_all(out.join("tree")).unwrap();
    fs::write(out.join("tree/f2"), b"old f2").unwrap();
    // Room for two files and part of the third.
    let target = Target::with_capacity(RestoreOptions::default(), 120_000);
    let err = Reader::open(&repo, Default::default())
        .unwrap()
        .restore_into(&snap.record, &out, None, &target, &Progress::default())
        .unwrap_err();
    let msg = err.to_string();
    let f2 = out.join("tree/f2");
    assert!(
        msg.starts_with(&format!(
            "target file system is full while writing {}",
            f2.display()
        )),
        "{msg}"
    );
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
    // The file being written keeps its old content; nothing after it was tried.
    assert_eq!(fs::read(&f2).unwrap(), b"old f2");
    assert_eq!(fs::read(out.join("tree/f1")).unwrap().len(), 50_000);
    for i in 3..6 {
        assert!(!out.join(format!("tree/f{i}")).exists(), "f{i} was written");
    }

    // With room, the same target restores completely.
    let sum = Reader::open(&repo, Default::default())
        .unwrap()
        .restore(&snap.record, &out, None, &Progress::default())
        .unwrap();
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!(sum.files, 6);
    for i in 0..6 {
        let name = format!("f{i}");
        assert_eq!(
            fs::read(out.join("tree").join(&name)).unwrap(),
            fs::read(tree.join(&name)).unwrap()
        );
    }
}

/// Recipe nodes are stored among a file's data chunks; the planner reads
/// them with range reads, so restoring one large file of unique data reads
/// each of its containers exactly once (before, every node's whole container
/// was read to plan and again to restore: about twice the reads).
#[test]
fn planning_reads_recipe_nodes_without_reading_whole_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir(&tree).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..24 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    fs::write(tree.join("big"), &data).unwrap();
    let (repo, id) = repo_with(&tree);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let data_containers = repo
        .log
        .ids()
        .unwrap()
        .into_iter()
        .filter(|&id| {
            let meta = repo.log.read_meta(id).unwrap();
            meta.descriptors
                .iter()
                .any(|d| d.kind == cairn_core::ChunkKind::Data)
        })
        .count() as u64;
    assert!(data_containers >= 5, "{data_containers} containers");

    let before = repo.counters.snapshot();
    let out = tmp.path().join("out");
    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    let sum = reader
        .restore(&snap.record, &out, None, &Progress::default())
        .unwrap();
    let c = repo.counters.snapshot().since(&before);
    assert_eq!(fs::read(out.join("tree/big")).unwrap(), data);
    assert_eq!(sum.policy.container_reads, data_containers);
    assert_eq!(c.containers_read, data_containers, "{c:?}");
    assert!(c.chunk_reads > 0, "recipe nodes come by range reads");
}
