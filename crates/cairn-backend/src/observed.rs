//! [`ObservedBackend`]: a pass-through [`Backend`] that reports every
//! successful data access to an [`IoObserver`]: one `(op, key, bytes)` per
//! `read`, `read_at` (also into a caller's buffer), `read_tail`, `read_run`
//! (bytes returned) and
//! `write_atomic`, `create_new` and a streamed object's create (bytes
//! written). Failed calls, `size`, `exists`, `list`, `delete`, locks,
//! `prefetch` hints and `clean_temporaries` are forwarded unreported. The I/O counters
//! ([`crate::CountingBackend`]) and the simulator's device model are two
//! observers.

use cairn_core::{Backend, Result};

/// The data-moving backend methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Read,
    ReadAt,
    ReadTail,
    /// The first run of a sequential pass (`Backend::read_run` at offset 0).
    ReadRun,
    /// A later run of that pass.
    ReadRunContinued,
    Write,
}

/// Told about each successful data access of an [`ObservedBackend`].
pub trait IoObserver: Send + Sync {
    fn observe(&self, op: IoOp, key: &str, bytes: usize);
}

/// Wraps a backend and reports its data accesses to an observer.
#[derive(Debug)]
pub struct ObservedBackend<B, O> {
    inner: B,
    observer: O,
}

impl<B: Backend, O: IoObserver> ObservedBackend<B, O> {
    pub fn new(inner: B, observer: impl Into<O>) -> Self {
        ObservedBackend {
            inner,
            observer: observer.into(),
        }
    }

    pub fn observer(&self) -> &O {
        &self.observer
    }

    pub fn inner(&self) -> &B {
        &self.inner
    }

    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: Backend, O: IoObserver> Backend for ObservedBackend<B, O> {
    cairn_core::delegate_backend!(
        inner: list, lock, clean_temporaries, describe, write_parallelism, read_parallelism,
        local_notes
    );

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        let data = self.inner.read(key)?;
        self.observer.observe(IoOp::Read, key, data.len());
        Ok(data)
    }

    fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
        let data = self.inner.read_stable(key)?;
        self.observer.observe(IoOp::Read, key, data.len());
        Ok(data)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let data = self.inner.read_at(key, offset, len)?;
        self.observer.observe(IoOp::ReadAt, key, data.len());
        Ok(data)
    }

    fn read_at_into(&self, key: &str, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.inner.read_at_into(key, offset, len, out)?;
        self.observer.observe(IoOp::ReadAt, key, out.len());
        Ok(())
    }

    fn read_at_slice(&self, key: &str, offset: u64, out: &mut [u8]) -> Result<()> {
        self.inner.read_at_slice(key, offset, out)?;
        self.observer.observe(IoOp::ReadAt, key, out.len());
        Ok(())
    }

    /// Forwarded unreported: a hint moves no data to the caller.
    fn prefetch(&self, key: &str, offset: u64, len: u64) -> bool {
        self.inner.prefetch(key, offset, len)
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        let (size, data) = self.inner.read_tail(key, len)?;
        self.observer.observe(IoOp::ReadTail, key, data.len());
        Ok((size, data))
    }

    fn read_run(&self, key: &str, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.inner.read_run(key, offset, len, out)?;
        let op = if offset == 0 {
            IoOp::ReadRun
        } else {
            IoOp::ReadRunContinued
        };
        self.observer.observe(op, key, out.len());
        Ok(())
    }

    fn size(&self, key: &str) -> Result<u64> {
        self.inner.size(key)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        self.inner.exists(key)
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        self.inner.write_atomic(key, data)?;
        self.observer.observe(IoOp::Write, key, data.len());
        Ok(())
    }

    fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> Result<()> {
        let len = data.len();
        self.inner.write_atomic_owned(key, data)?;
        self.observer.observe(IoOp::Write, key, len);
        Ok(())
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        let created = self.inner.create_new(key, data)?;
        if created {
            self.observer.observe(IoOp::Write, key, data.len());
        }
        Ok(created)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        self.inner.delete_many(keys)
    }

    /// Reported as one write of the whole object when it is created, as
    /// `create_new` reports it.
    fn create_streamed(
        &self,
        key: &str,
    ) -> Result<Option<Box<dyn cairn_core::StreamedObject + '_>>> {
        Ok(cairn_core::streamed::AfterCreate::wrap(
            self.inner.create_streamed(key)?,
            key,
            move |key: &str, len: u64, r: &Result<bool>| {
                if matches!(r, Ok(true)) {
                    self.observer.observe(IoOp::Write, key, len as usize);
                }
            },
        ))
    }
}
