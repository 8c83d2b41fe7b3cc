//! Shared helpers of the engine's integration tests: a seeded xorshift
//! generator, the small repository configuration the crash and garbage
//! collection tests use, one backup of a path, one collection, tree copies
//! and comparisons, and a clean `check --read-data`.
#![allow(dead_code)]

use std::path::Path;

use cairn_engine::read::Reader;
use cairn_engine::{catalog, BackupOptions, DedupMode, Progress, RepoConfig, Repository, Source};

/// xorshift64: deterministic test data from a seed (never 0).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// 64 KiB containers and ~2 KiB chunks: a few hundred KiB of data spans
/// many containers and recipe trees of several levels.
pub fn tiny_config() -> RepoConfig {
    let mut cfg = Repository::default_config();
    cfg.container_size = 64 * 1024;
    cfg.chunker = cairn_core::ChunkerConfig::FastCdc {
        min: 512,
        avg: 2048,
        max: 8192,
    };
    cfg.index.expected_chunks = 10_000;
    cfg
}

/// Backs up `path` (host `test`) under the writer lock; the snapshot id.
pub fn backup(repo: &Repository, path: &Path) -> cairn_core::Result<String> {
    Ok(backup_with(repo, path, DedupMode::Inline)?.snapshot_id)
}

/// Backs up `path` (host `test`) with dedup `mode`; the whole outcome.
pub fn backup_with(
    repo: &Repository,
    path: &Path,
    mode: DedupMode,
) -> cairn_core::Result<cairn_engine::BackupOutcome> {
    backup_opts(
        repo,
        path,
        BackupOptions {
            dedup: mode,
            ..Default::default()
        },
    )
}

/// Backs up `path` (host `test`) under the writer lock with `opts` (its
/// sources and host are set here); the whole outcome.
pub fn backup_opts(
    repo: &Repository,
    path: &Path,
    opts: BackupOptions,
) -> cairn_core::Result<cairn_engine::BackupOutcome> {
    let lock = repo.lock_writer(false)?;
    cairn_engine::backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(path.to_path_buf())],
            host: Some("test".into()),
            ..opts
        },
    )
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Same entries, same content, recursively.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let names = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let ea = names(a);
    assert_eq!(ea, names(b), "entries of {}", a.display());
    for n in ea {
        let (pa, pb) = (a.join(&n), b.join(&n));
        if pa.is_dir() {
            assert_same_tree(&pa, &pb);
        } else {
            assert!(
                std::fs::read(&pa).unwrap() == std::fs::read(&pb).unwrap(),
                "{}",
                pa.display()
            );
        }
    }
}

/// Snapshot `id` restores without errors, and its top-level entry `top`
/// equals the tree `expected`.
pub fn assert_restores_as(repo: &Repository, id: &str, top: &str, expected: &Path) {
    let snap = catalog::resolve(&**repo.backend(), id).unwrap();
    let target = tempfile::tempdir().unwrap();
    let mut reader = Reader::open(repo, Default::default()).unwrap();
    let sum = reader
        .restore(&snap.record, target.path(), None, &Progress::default())
        .unwrap();
    assert!(sum.errors.is_empty(), "{id}: {:?}", sum.errors);
    assert_same_tree(expected, &target.path().join(top));
}

/// Snapshot `id` of `original` restores to a copy of it.
pub fn assert_restores(repo: &Repository, id: &str, original: &Path) {
    let name = original.file_name().unwrap().to_str().unwrap();
    assert_restores_as(repo, id, name, original);
}

pub fn assert_check_clean(repo: &Repository) {
    let report = cairn_engine::check::check(repo, true).unwrap();
    assert!(report.is_clean(), "check found {:#?}", report.problems);
}

/// One garbage collection as `cairn gc` runs it: under the collector lock
/// (released when it returns).
pub fn gc(
    repo: &Repository,
    opts: &cairn_engine::gc::GcOptions,
    progress: &dyn cairn_engine::gc::GcProgress,
) -> cairn_core::Result<cairn_engine::gc::GcReport> {
    let lock = repo.lock_gc(false)?;
    cairn_engine::gc::collect(repo, &lock, opts, progress)
}
