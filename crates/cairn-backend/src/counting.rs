//! [`CountingBackend`]: a pass-through backend that counts I/O.
//!
//! Every successful data read (`read`, `read_at`, `read_tail`) adds one to
//! `read_ops` and the bytes returned to `bytes_read`; every successful
//! `write_atomic` adds one to `write_ops` and the object size to
//! `bytes_written`. Metadata calls (`size`, `exists`, `list`), deletes and
//! locks are passed through uncounted. The counters are the shared
//! [`cairn_core::Counters`] the rest of the engine reports into.

use cairn_core::counters::bump;
use cairn_core::{Backend, Counters, LockGuard, LockMode, Result};
use std::sync::Arc;

/// Wraps a backend and counts its reads and writes into shared counters.
#[derive(Debug)]
pub struct CountingBackend<B> {
    inner: B,
    counters: Arc<Counters>,
}

impl<B: Backend> CountingBackend<B> {
    pub fn new(inner: B, counters: Arc<Counters>) -> Self {
        CountingBackend { inner, counters }
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    pub fn into_inner(self) -> B {
        self.inner
    }

    fn count_read(&self, bytes: usize) {
        bump(&self.counters.read_ops, 1);
        bump(&self.counters.bytes_read, bytes as u64);
    }
}

impl<B: Backend> Backend for CountingBackend<B> {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        let data = self.inner.read(key)?;
        self.count_read(data.len());
        Ok(data)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let data = self.inner.read_at(key, offset, len)?;
        self.count_read(data.len());
        Ok(data)
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        let (size, data) = self.inner.read_tail(key, len)?;
        self.count_read(data.len());
        Ok((size, data))
    }

    fn size(&self, key: &str) -> Result<u64> {
        self.inner.size(key)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        self.inner.exists(key)
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        self.inner.write_atomic(key, data)?;
        bump(&self.counters.write_ops, 1);
        bump(&self.counters.bytes_written, data.len() as u64);
        Ok(())
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

    fn clean_temporaries(&self) -> Result<usize> {
        self.inner.clean_temporaries()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemBackend;

    #[test]
    fn counts_reads_and_writes() {
        let counters = Arc::new(Counters::default());
        let b = CountingBackend::new(MemBackend::new(), Arc::clone(&counters));
        b.write_atomic("a", &[7; 100]).unwrap();
        b.write_atomic("b", &[7; 10]).unwrap();
        b.read("a").unwrap();
        b.read_at("a", 10, 20).unwrap();
        b.read_tail("b", 4).unwrap();
        assert!(b.read("missing").is_err());
        b.size("a").unwrap();
        b.exists("a").unwrap();
        b.list("").unwrap();
        let s = counters.snapshot();
        assert_eq!((s.write_ops, s.bytes_written), (2, 110));
        assert_eq!((s.read_ops, s.bytes_read), (3, 124));
        assert_eq!(b.describe(), "memory");
    }
}
