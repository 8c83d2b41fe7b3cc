//! A test store that counts the size queries and the reads made of it
//! (`read`, `read_at`, `read_tail`), for tests that a layer above asks the
//! store once where it used to ask twice (`local_cache.rs`,
//! `sealed_backend.rs`).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, Result};

pub(crate) struct CountsCalls {
    inner: Arc<MemBackend>,
    sizes: AtomicUsize,
    reads: AtomicUsize,
}

impl CountsCalls {
    pub(crate) fn new(inner: Arc<MemBackend>) -> Self {
        CountsCalls {
            inner,
            sizes: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
        }
    }

    /// Size queries so far.
    pub(crate) fn sizes(&self) -> usize {
        self.sizes.load(Relaxed)
    }

    /// Reads so far, of any kind.
    pub(crate) fn reads(&self) -> usize {
        self.reads.load(Relaxed)
    }
}

impl Backend for CountsCalls {
    cairn_core::delegate_backend!(
        inner: write_atomic, create_new, delete, exists, list, lock, describe, local_notes
    );

    fn size(&self, key: &str) -> Result<u64> {
        self.sizes.fetch_add(1, Relaxed);
        self.inner.size(key)
    }

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, Relaxed);
        self.inner.read(key)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, Relaxed);
        self.inner.read_at(key, offset, len)
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        self.reads.fetch_add(1, Relaxed);
        self.inner.read_tail(key, len)
    }
}
