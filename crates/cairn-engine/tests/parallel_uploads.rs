//! A backup keeps as many container writes in flight as its backend asks
//! for (`Backend::write_parallelism`: object storage, issue 14), never
//! more, and the snapshot it commits restores byte-identically: every
//! container is durable before the commit, whatever order the uploads end
//! in.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_backend::MemBackend;
use cairn_core::{Backend, LockGuard, LockMode, Result};
use cairn_engine::Repository;
use common::*;

/// A store whose container writes take a while (a network round trip),
/// counting how many run at once.
struct SlowStore {
    inner: MemBackend,
    parallelism: usize,
    in_flight: AtomicUsize,
    most: AtomicUsize,
    writes: AtomicUsize,
}

impl SlowStore {
    fn new(parallelism: usize) -> SlowStore {
        SlowStore {
            inner: MemBackend::new(),
            parallelism,
            in_flight: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
        }
    }
}

impl Backend for SlowStore {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.inner.read(key)
    }
    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.inner.read_at(key, offset, len)
    }
    fn size(&self, key: &str) -> Result<u64> {
        self.inner.size(key)
    }
    fn exists(&self, key: &str) -> Result<bool> {
        self.inner.exists(key)
    }
    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        if !key.starts_with("containers/") {
            return self.inner.write_atomic(key, data);
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(40));
        let r = self.inner.write_atomic(key, data);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.writes.fetch_add(1, Ordering::SeqCst);
        r
    }
    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.inner.create_new(key, data)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        self.inner.lock(name, mode, wait)
    }
    fn describe(&self) -> String {
        "slow store".into()
    }
    fn write_parallelism(&self) -> usize {
        self.parallelism
    }
}

#[test]
fn container_uploads_overlap_up_to_the_backends_parallelism() {
    for parallelism in [1, 4] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        let mut rng = Rng(parallelism as u64);
        // About 1.5 MiB of unique data: two dozen 64 KiB containers.
        for f in 0..6 {
            let bytes: Vec<u8> = (0..250_000).map(|_| rng.next() as u8).collect();
            std::fs::write(src.join(format!("f{f}")), bytes).unwrap();
        }
        let store = Arc::new(SlowStore::new(parallelism));
        let repo = Repository::init(store.clone(), tiny_config()).unwrap();
        let id = backup(&repo, &src).unwrap();
        let (most, writes) = (
            store.most.load(Ordering::SeqCst),
            store.writes.load(Ordering::SeqCst),
        );
        assert!(writes >= 20, "{writes} container writes");
        assert!(
            most <= parallelism,
            "{most} writes at once, allowed {parallelism}"
        );
        if parallelism > 1 {
            // The streams fill containers far faster than one 40 ms write
            // each, so the queue is never empty and the uploads overlap.
            assert!(most >= 2, "uploads never overlapped ({most})");
        }
        assert_eq!(store.in_flight.load(Ordering::SeqCst), 0);
        assert_restores(&repo, &id, &src);
        assert_check_clean(&repo);
    }
}
