//! An incremental backup of a repository behind the local metadata cache
//! (how an S3 repository is opened) reads no container from the store:
//! the index comes from the cached index files, container metadata from
//! the cached tails, and the recipes of the unchanged files (walked to see
//! that their chunks are present) from the same tails, because containers
//! lay their tree nodes just before the metadata section
//! (`docs/object-storage.md`, "Local metadata cache").

mod common;

use std::sync::Arc;

use cairn_backend::{IoObserver, IoOp, MemBackend, ObservedBackend};
use cairn_core::Backend;
use cairn_engine::backup::ParentChoice;
use cairn_engine::local_cache::LocalCache;
use cairn_engine::{BackupOptions, Repository};
use common::*;
use parking_lot::Mutex;

/// The keys read from the store.
#[derive(Clone, Default)]
struct Reads(Arc<Mutex<Vec<String>>>);

impl IoObserver for Reads {
    fn observe(&self, op: IoOp, key: &str, _bytes: usize) {
        if op != IoOp::Write {
            self.0.lock().push(key.to_string());
        }
    }
}

#[test]
fn an_incremental_backup_reads_no_container_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut rng = Rng(11);
    let mut random = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next() as u8).collect() };
    for i in 0..8 {
        std::fs::write(src.join(format!("f{i}")), random(1 << 20)).unwrap();
    }
    // Files younger than the parent backup's start (less a margin) are
    // read again rather than trusted: let them age.
    std::thread::sleep(std::time::Duration::from_millis(60));

    // Small chunks (recipe trees of many nodes) in 4 MiB containers: a
    // container's data is mostly outside the cached 256 KiB tail.
    let mut config = tiny_config();
    config.container_size = 4 << 20;
    let mem = Arc::new(MemBackend::new());
    drop(Repository::init(mem.clone(), config).unwrap());
    let reads = Reads::default();
    let observed: ObservedBackend<_, Reads> = ObservedBackend::new(mem.clone(), reads.clone());
    let store: Arc<dyn Backend> = Arc::new(observed);
    let cache = dir.path().join("cache");
    let repo = Repository::open(LocalCache::wrap(store, &cache).unwrap()).unwrap();
    let with_parent = || BackupOptions {
        parent: ParentChoice::Latest,
        ..Default::default()
    };
    backup_opts(&repo, &src, with_parent()).unwrap();

    std::fs::write(src.join("f0"), random(1 << 20)).unwrap();
    reads.0.lock().clear();
    let second = backup_opts(&repo, &src, with_parent()).unwrap();
    let stats = &second.record.stats;
    assert!(!stats.parent.is_empty());
    assert_eq!((stats.files_changed, stats.files_unmodified), (1, 7));
    let from_store: Vec<String> = reads
        .0
        .lock()
        .iter()
        .filter(|k| k.starts_with("containers/"))
        .cloned()
        .collect();
    assert!(
        from_store.is_empty(),
        "container reads from the store: {from_store:?}"
    );
    assert_restores(&repo, &second.snapshot_id, &src);
}

/// Opening a remote repository costs one read of its config, shared by the
/// cache (which keys itself by the repository id) and the open; a writer
/// still reads it again from the store once it holds the lock.
#[test]
fn the_config_is_read_once_to_open_and_again_under_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f"), b"some bytes").unwrap();
    let mem = Arc::new(MemBackend::new());
    drop(Repository::init(mem.clone(), tiny_config()).unwrap());
    let reads = Reads::default();
    let observed: ObservedBackend<_, Reads> = ObservedBackend::new(mem.clone(), reads.clone());
    let store: Arc<dyn Backend> = Arc::new(observed);
    let config_reads = || {
        reads
            .0
            .lock()
            .iter()
            .filter(|k| *k == cairn_engine::object_names::CONFIG)
            .count()
    };

    let repo =
        Repository::open(LocalCache::wrap(store, &dir.path().join("cache")).unwrap()).unwrap();
    assert_eq!(config_reads(), 1);
    let done = backup_opts(&repo, &src, BackupOptions::default()).unwrap();
    assert_eq!(config_reads(), 2, "the writer's read under its lock");
    assert_restores(&repo, &done.snapshot_id, &src);
}

/// The parent check's record (`backup/parent_held.rs`), kept as a local
/// note beside the cache: the backup after the one that made it reads no
/// recipe of an unchanged file, and a container that has gone sends the
/// files it held back to the full check, which finds the loss and reads
/// them again, so the snapshot still restores whole.
#[test]
fn the_parent_check_record_spares_recipes_until_a_container_goes() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut rng = Rng(12);
    for i in 0..6 {
        let bytes: Vec<u8> = (0..256 << 10).map(|_| rng.next() as u8).collect();
        std::fs::write(src.join(format!("f{i}")), bytes).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(60));
    let mem = Arc::new(MemBackend::new());
    drop(Repository::init(mem.clone(), tiny_config()).unwrap());
    // Reads as the engine asks for them, above the cache.
    let reads = Reads::default();
    let cached = LocalCache::wrap(mem.clone(), &dir.path().join("cache")).unwrap();
    let observed: ObservedBackend<_, Reads> = ObservedBackend::new(cached, reads.clone());
    let repo = Repository::open(Arc::new(observed)).unwrap();
    let with_parent = || BackupOptions {
        parent: ParentChoice::Latest,
        ..Default::default()
    };
    let container_reads = || {
        let n = reads
            .0
            .lock()
            .iter()
            .filter(|k| k.starts_with("containers/"))
            .count();
        reads.0.lock().clear();
        n
    };
    backup_opts(&repo, &src, with_parent()).unwrap();
    container_reads();
    // The full check: every file's recipe is read.
    let checked = backup_opts(&repo, &src, with_parent()).unwrap();
    assert_eq!(checked.record.stats.files_unmodified, 6);
    let full = container_reads();
    // The record answers for every file: what is read is the parent's
    // listing.
    let spared = backup_opts(&repo, &src, with_parent()).unwrap();
    assert_eq!(spared.record.stats.files_unmodified, 6);
    let with_record = container_reads();
    eprintln!("container reads: {full} with the full check, {with_record} with the record");
    assert!(with_record * 4 < full, "{with_record} against {full}");
    assert_restores(&repo, &spared.snapshot_id, &src);

    // A container lost from the store: what it held is stored again.
    let lost = mem.list("containers/").unwrap().into_iter().nth(3).unwrap();
    mem.delete(&lost).unwrap();
    let after = backup_opts(&repo, &src, with_parent()).unwrap();
    assert_eq!(after.record.stats.files_changed, 1, "{lost} held one file");
    assert!(
        after.counters.chunks_written > 0,
        "the lost container's chunks were stored again"
    );
    assert!(after.notices.iter().any(|n| n.contains("missing")));
    assert_restores(&repo, &after.snapshot_id, &src);
}
