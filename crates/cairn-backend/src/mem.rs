//! [`MemBackend`]: an in-memory repository for tests and experiments.
//!
//! Objects live in a `BTreeMap<String, Arc<Vec<u8>>>` behind a lock; a write
//! swaps in a whole new object, so it is atomic by construction. Clones share
//! the same store (and the same lock table), so a test can "reopen" a
//! repository by cloning the handle, and "a second process" is simply a
//! second clone. Locks are reader/writer locks keyed by name, released when
//! the guard drops; `wait == true` blocks on a condition variable.
//!
//! For corruption tests, [`MemBackend::tamper`] edits a stored object in place
//! (which no real writer may do).
//!
//! It also keeps local notes (`Backend::read_local_note`) in memory, shared
//! by clones, as a local cache would beside a remote repository.

use crate::{truncated, validate_key, validate_lock_name, validate_prefix};
use cairn_core::{Backend, Error, LockGuard, LockMode, Result};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

#[derive(Default)]
struct Inner {
    objects: RwLock<BTreeMap<String, Arc<Vec<u8>>>>,
    locks: Mutex<HashMap<String, LockState>>,
    released: Condvar,
    /// Local notes, as the local cache keeps them beside a remote
    /// repository (`Backend::read_local_note`): kept here so that every
    /// test of the engine on this backend runs the paths that use them.
    notes: Mutex<HashMap<String, Vec<u8>>>,
}

/// How a named lock is held: by `readers` shared holders, or by one writer.
#[derive(Default)]
struct LockState {
    readers: usize,
    writer: bool,
}

impl LockState {
    fn admits(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::Shared => !self.writer,
            LockMode::Exclusive => !self.writer && self.readers == 0,
        }
    }
}

/// An in-memory repository; `Clone` shares the store.
#[derive(Clone, Default)]
pub struct MemBackend {
    inner: Arc<Inner>,
}

impl fmt::Debug for MemBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let objects = self.inner.objects.read();
        f.debug_struct("MemBackend")
            .field("objects", &objects.len())
            .finish()
    }
}

impl MemBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of stored objects.
    pub fn len(&self) -> usize {
        self.inner.objects.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes of all stored objects.
    pub fn total_bytes(&self) -> u64 {
        let objects = self.inner.objects.read();
        objects.values().map(|v| v.len() as u64).sum()
    }

    /// Edits a stored object in place (test tool for corruption and
    /// truncation scenarios). Returns `false` if the object does not exist.
    pub fn tamper(&self, key: &str, edit: impl FnOnce(&mut Vec<u8>)) -> bool {
        let mut objects = self.inner.objects.write();
        match objects.get_mut(key) {
            Some(obj) => {
                edit(Arc::make_mut(obj));
                true
            }
            None => false,
        }
    }

    fn get(&self, key: &str) -> Result<Arc<Vec<u8>>> {
        validate_key(key)?;
        self.inner
            .objects
            .read()
            .get(key)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("object {key} in memory")))
    }
}

/// A held in-memory lock; dropping it releases the lock and wakes waiters.
struct MemLock {
    inner: Arc<Inner>,
    name: String,
    mode: LockMode,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut locks = self.inner.locks.lock();
        if let Some(state) = locks.get_mut(&self.name) {
            match self.mode {
                LockMode::Shared => state.readers = state.readers.saturating_sub(1),
                LockMode::Exclusive => state.writer = false,
            }
            if state.readers == 0 && !state.writer {
                locks.remove(&self.name);
            }
        }
        drop(locks);
        self.inner.released.notify_all();
    }
}

impl LockGuard for MemLock {}

impl Backend for MemBackend {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        Ok(self.get(key)?.as_ref().clone())
    }

    fn read_local_note(&self, name: &str) -> Option<Vec<u8>> {
        self.inner.notes.lock().get(name).cloned()
    }

    fn write_local_note(&self, name: &str, bytes: &[u8]) {
        self.inner.notes.lock().insert(name.into(), bytes.to_vec());
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let obj = self.get(key)?;
        let size = obj.len() as u64;
        match offset.checked_add(len as u64) {
            Some(end) if end <= size => Ok(obj[offset as usize..end as usize].to_vec()),
            _ => Err(truncated(key, offset, len, size)),
        }
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        let obj = self.get(key)?;
        let take = len.min(obj.len());
        Ok((obj.len() as u64, obj[obj.len() - take..].to_vec()))
    }

    fn size(&self, key: &str) -> Result<u64> {
        Ok(self.get(key)?.len() as u64)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        validate_key(key)?;
        Ok(self.inner.objects.read().contains_key(key))
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        validate_key(key)?;
        let obj = Arc::new(data.to_vec());
        self.inner.objects.write().insert(key.to_owned(), obj);
        Ok(())
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        validate_key(key)?;
        let mut objects = self.inner.objects.write();
        if objects.contains_key(key) {
            return Ok(false);
        }
        objects.insert(key.to_owned(), Arc::new(data.to_vec()));
        Ok(true)
    }

    fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.inner.objects.write().remove(key);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        validate_prefix(prefix)?;
        let objects = self.inner.objects.read();
        Ok(objects
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }

    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        validate_lock_name(name)?;
        let mut locks = self.inner.locks.lock();
        loop {
            let state = locks.entry(name.to_owned()).or_default();
            if state.admits(mode) {
                match mode {
                    LockMode::Shared => state.readers += 1,
                    LockMode::Exclusive => state.writer = true,
                }
                break;
            }
            if !wait {
                return Err(Error::Locked(format!("memory lock {name} is held")));
            }
            self.inner.released.wait(&mut locks);
        }
        Ok(Box::new(MemLock {
            inner: Arc::clone(&self.inner),
            name: name.to_owned(),
            mode,
        }))
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_store_and_tamper_edits() {
        let a = MemBackend::new();
        let b = a.clone();
        a.write_atomic("x/y", b"hello").unwrap();
        assert_eq!(b.read("x/y").unwrap(), b"hello");
        assert_eq!((b.len(), b.total_bytes()), (1, 5));
        assert!(b.tamper("x/y", |v| v[0] ^= 1));
        assert_eq!(a.read("x/y").unwrap(), b"iello");
        assert!(!b.tamper("missing", |_| {}));
        let _g = a.lock("repo", LockMode::Exclusive, false).unwrap();
        assert!(matches!(
            b.lock("repo", LockMode::Shared, false),
            Err(Error::Locked(_))
        ));
    }
}
