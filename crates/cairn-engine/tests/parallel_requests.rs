//! Requests in flight on a store that waits on the network (object
//! storage, issue 14). A backup keeps as many container writes in flight
//! as its backend asks for (`Backend::write_parallelism`), never more, and
//! the snapshot it commits restores byte-identically: every container is
//! durable before the commit, whatever order the uploads end in. A restore
//! keeps as many container fetches in flight as `Backend::read_parallelism`
//! says, and writes the same bytes as one fetch at a time.

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
    /// Container reads: how many may run at once, and whether they wait.
    read_parallelism: AtomicUsize,
    slow_reads: std::sync::atomic::AtomicBool,
    reading: AtomicUsize,
    most_reading: AtomicUsize,
}

impl SlowStore {
    fn new(parallelism: usize) -> SlowStore {
        SlowStore {
            inner: MemBackend::new(),
            parallelism,
            in_flight: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
            read_parallelism: AtomicUsize::new(1),
            slow_reads: Default::default(),
            reading: AtomicUsize::new(0),
            most_reading: AtomicUsize::new(0),
        }
    }

    /// A container read: counted, and slow when asked to be.
    fn container_read<T>(&self, key: &str, read: impl FnOnce() -> T) -> T {
        if !key.starts_with("containers/") || !self.slow_reads.load(Ordering::SeqCst) {
            return read();
        }
        let now = self.reading.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_reading.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(5));
        let r = read();
        self.reading.fetch_sub(1, Ordering::SeqCst);
        r
    }
}

impl Backend for SlowStore {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.container_read(key, || self.inner.read(key))
    }
    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.container_read(key, || self.inner.read_at(key, offset, len))
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
    fn read_parallelism(&self) -> usize {
        self.read_parallelism.load(Ordering::SeqCst)
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

#[test]
fn container_fetches_overlap_up_to_the_backends_read_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("small")).unwrap();
    let mut rng = Rng(7);
    // Large files (recipe trees of several levels with the tiny config's
    // fan-out) and many small ones (one container read serves several).
    for f in 0..4 {
        let bytes: Vec<u8> = (0..400_000).map(|_| rng.next() as u8).collect();
        std::fs::write(src.join(format!("f{f}")), bytes).unwrap();
    }
    for f in 0..300 {
        let n = 100 + (rng.next() % 20_000) as usize;
        let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        std::fs::write(src.join("small").join(format!("s{f}")), bytes).unwrap();
    }
    let store = Arc::new(SlowStore::new(1));
    let repo = Repository::init(store.clone(), tiny_config()).unwrap();
    let id = backup(&repo, &src).unwrap();
    let mut reads = Vec::new();
    for parallelism in [1, 4] {
        store.read_parallelism.store(parallelism, Ordering::SeqCst);
        store.slow_reads.store(true, Ordering::SeqCst);
        store.most_reading.store(0, Ordering::SeqCst);
        let before = repo.counters.snapshot();
        assert_restores(&repo, &id, &src);
        let used = repo.counters.snapshot().since(&before);
        reads.push((used.containers_read, used.container_range_reads));
        let most = store.most_reading.load(Ordering::SeqCst);
        // The fetchers, and beside them the decider reading metadata
        // sections ahead (as many at once, or one at a time without
        // parallel reads).
        let allowed = if parallelism > 1 { 2 * parallelism } else { 2 };
        assert!(most <= allowed, "{most} reads at once, allowed {allowed}");
        if parallelism > 1 {
            assert!(most >= 2, "container reads never overlapped ({most})");
        }
        assert_eq!(store.reading.load(Ordering::SeqCst), 0);
    }
    // The policy decides the same reads however many run at once.
    assert_eq!(reads[0], reads[1]);
    assert!(reads[0].0 > 0, "{reads:?}");
}
