//! Listings remembered while this process holds the writer lock (issue 14:
//! the serial requests of a backup on object storage, where every LIST is
//! a round trip).
//!
//! A backup lists `index/` and `snapshots/` several times (the container-id
//! floor under the lock, the parent snapshot, the index open and its
//! deltas, the commit's clean-up of old generations). Only holders of the
//! writer lock add or remove objects under `index/`, `bloom/` and
//! `snapshots/` (backups, `forget`, `repair`, a collection's Merge and
//! Commit; readers write nothing there, a collection's long phases write
//! containers only), so while this process holds it those listings change
//! only by this process's own writes. The first listing of each prefix
//! after the lock is taken goes to the store; later ones are served from
//! it, kept up to date by this process's writes and deletes through this
//! layer. Releasing the lock forgets everything.
//!
//! A write or delete that fails leaves the object's presence unknown: the
//! prefix's listing is forgotten and the next one goes to the store.
//! `containers/` is never remembered (a collection running beside the
//! writer adds copies there).
//!
//! A backup sharing the writer lock with others (issue 33) remembers its
//! listings in a [`ListingScope`] instead, from its session's begin to its
//! commit: the index open, the parent snapshot and the Summary Vector list
//! `index/` and `snapshots/` five times within a fraction of a second. A
//! listing served from the scope is one the store could have answered at
//! the scope's first listing, while other writers may add deltas and
//! records: those only add dedup candidates the backup does not need
//! (what it deduplicates against is confirmed against the containers,
//! listed afresh, and `gc-pending`, read afresh; docs/concurrency.md).
//! A `create_new` that finds its object present proves the listing stale,
//! and so does a read that finds a listed object absent (a compaction
//! beside the backup deleted the deltas it merged): it is forgotten.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

use cairn_core::{Backend, LockGuard, LockMode, Result};

use crate::object_names;

/// The prefixes whose listings are remembered.
const REMEMBERED: [&str; 3] = [
    object_names::INDEX,
    object_names::BLOOM,
    object_names::SNAPSHOTS,
];

#[derive(Default)]
struct State {
    /// Writer locks this process holds through this layer.
    holders: usize,
    /// Remembered listings by prefix.
    lists: HashMap<&'static str, BTreeSet<String>>,
    /// Bumped by every change under a prefix: a listing fetched while a
    /// change ran is not remembered.
    changes: HashMap<&'static str, u64>,
}

impl State {
    fn changed(&mut self, prefix: &'static str) {
        *self.changes.entry(prefix).or_default() += 1;
    }

    /// The remembered listing of `prefix` is stale: the next listing goes
    /// to the store (and one already under way is not remembered).
    fn forget(&mut self, prefix: &'static str) {
        self.changed(prefix);
        self.lists.remove(prefix);
    }

    /// One holder (a writer lock or a scope) fewer; the last forgets all.
    fn release(&mut self) {
        self.holders -= 1;
        if self.holders == 0 {
            self.lists.clear();
        }
    }
}

/// A backend layer remembering listings under the writer lock (see the
/// module doc).
pub struct ListingMemo {
    inner: Arc<dyn Backend>,
    state: Arc<Mutex<State>>,
}

/// Opens [`ListingScope`]s on one [`ListingMemo`].
#[derive(Clone, Default)]
pub struct Scopes {
    state: Arc<Mutex<State>>,
}

impl Scopes {
    /// Remembers listings until the scope is dropped (see the module doc).
    pub fn open(&self) -> ListingScope {
        self.state.lock().holders += 1;
        ListingScope {
            state: self.state.clone(),
        }
    }
}

/// Listings are remembered while this lives (see the module doc).
pub struct ListingScope {
    state: Arc<Mutex<State>>,
}

impl Drop for ListingScope {
    fn drop(&mut self) {
        self.state.lock().release();
    }
}

impl ListingMemo {
    pub fn wrap(inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        Self::wrap_with_scopes(inner).0
    }

    /// [`ListingMemo::wrap`], and the handle that opens scopes on it.
    pub fn wrap_with_scopes(inner: Arc<dyn Backend>) -> (Arc<dyn Backend>, Scopes) {
        let state: Arc<Mutex<State>> = Arc::default();
        let scopes = Scopes {
            state: state.clone(),
        };
        (Arc::new(ListingMemo { inner, state }), scopes)
    }

    fn remembered(key: &str) -> Option<&'static str> {
        REMEMBERED.iter().copied().find(|p| key.starts_with(p))
    }

    /// Records a create-if-absent of `key`: created or already there, it
    /// is present either way; already there and not listed, the listing
    /// was stale (a scope's) and is forgotten.
    fn remember_create(&self, key: &str, r: &Result<bool>) {
        if let (Ok(false), Some(prefix)) = (r, Self::remembered(key)) {
            let mut st = self.state.lock();
            if !st.lists.get(prefix).is_some_and(|l| l.contains(key)) {
                st.forget(prefix);
                return;
            }
        }
        self.record(key, r, |_| true);
    }

    /// Records the outcome of a write or delete of `key`: present or
    /// absent when it succeeded, unknown when it failed.
    fn record<T>(&self, key: &str, outcome: &Result<T>, present: impl Fn(&T) -> bool) {
        let Some(prefix) = Self::remembered(key) else {
            return;
        };
        let mut st = self.state.lock();
        st.changed(prefix);
        match outcome {
            Ok(v) => {
                if let Some(list) = st.lists.get_mut(prefix) {
                    if present(v) {
                        list.insert(key.to_string());
                    } else {
                        list.remove(key);
                    }
                }
            }
            Err(_) => {
                st.lists.remove(prefix);
            }
        }
    }
}

impl ListingMemo {
    /// A remembered listing that names an object a read finds absent is
    /// stale (a scope's: a compaction beside this backup deleted the
    /// deltas it merged, docs/concurrency.md): it is forgotten, so the
    /// reader's next listing goes to the store.
    fn gone_if_absent<T>(&self, key: &str, outcome: Result<T>) -> Result<T> {
        if let (Err(e), Some(prefix)) = (&outcome, Self::remembered(key)) {
            if e.is_not_found() {
                self.state.lock().forget(prefix);
            }
        }
        outcome
    }
}

/// The writer lock taken through the memo: releasing it forgets the
/// remembered listings.
struct MemoGuard {
    _inner: Box<dyn LockGuard>,
    state: Arc<Mutex<State>>,
}

impl LockGuard for MemoGuard {}

impl Drop for MemoGuard {
    fn drop(&mut self) {
        self.state.lock().release();
    }
}

impl Backend for ListingMemo {
    cairn_core::delegate_backend!(
        inner: exists, read_at_into, read_at_slice, prefetch, read_run, read_salvaging, describe, write_parallelism,
        read_parallelism,
        naming_key, stored_size, local_notes
    );

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        self.gone_if_absent(key, self.inner.read(key))
    }

    fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
        self.gone_if_absent(key, self.inner.read_stable(key))
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.gone_if_absent(key, self.inner.read_at(key, offset, len))
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        self.gone_if_absent(key, self.inner.read_tail(key, len))
    }

    fn size(&self, key: &str) -> Result<u64> {
        self.gone_if_absent(key, self.inner.size(key))
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        let r = self.inner.write_atomic(key, data);
        self.record(key, &r, |_| true);
        r
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        let r = self.inner.create_new(key, data);
        self.remember_create(key, &r);
        r
    }

    /// The inner backend's streamed object, remembered at its create as
    /// `create_new` remembers (`None` where the inner one has none: the
    /// buffered object then comes through `create_new` above).
    fn create_streamed(
        &self,
        key: &str,
    ) -> Result<Option<Box<dyn cairn_core::StreamedObject + '_>>> {
        Ok(cairn_core::streamed::AfterCreate::wrap(
            self.inner.create_streamed(key)?,
            key,
            move |key: &str, _len: u64, r: &Result<bool>| self.remember_create(key, r),
        ))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let r = self.inner.delete(key);
        self.record(key, &r, |_| false);
        r
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        let r = self.inner.delete_many(keys);
        for key in keys {
            self.record(key, &r, |_| false);
        }
        r
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let Some(p) = REMEMBERED.iter().copied().find(|p| *p == prefix) else {
            return self.inner.list(prefix);
        };
        let before = {
            let st = self.state.lock();
            if st.holders == 0 {
                drop(st);
                return self.inner.list(prefix);
            }
            if let Some(list) = st.lists.get(p) {
                return Ok(list.iter().cloned().collect());
            }
            st.changes.get(p).copied().unwrap_or(0)
        };
        let listed = self.inner.list(prefix)?;
        let mut st = self.state.lock();
        if st.holders > 0 && st.changes.get(p).copied().unwrap_or(0) == before {
            st.lists.insert(p, listed.iter().cloned().collect());
        }
        Ok(listed)
    }

    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        let guard = self.inner.lock(name, mode, wait)?;
        if name != object_names::WRITE_LOCK || mode != LockMode::Exclusive {
            return Ok(guard);
        }
        let mut st = self.state.lock();
        st.holders += 1;
        // What a scope remembered predates the lock: listed afresh.
        st.lists.clear();
        for p in REMEMBERED {
            st.changed(p);
        }
        Ok(Box::new(MemoGuard {
            _inner: guard,
            state: self.state.clone(),
        }))
    }

    fn clean_temporaries(&self) -> Result<usize> {
        self.state.lock().lists.clear();
        self.inner.clean_temporaries()
    }

    fn leaves_temporaries(&self) -> bool {
        self.inner.leaves_temporaries()
    }

    fn has_temporaries(&self) -> Result<bool> {
        self.inner.has_temporaries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A store that counts its listings.
    struct Counted(MemBackend, AtomicU64);

    impl Backend for Counted {
        fn read(&self, key: &str) -> Result<Vec<u8>> {
            self.0.read(key)
        }
        fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
            self.0.read_at(key, offset, len)
        }
        fn size(&self, key: &str) -> Result<u64> {
            self.0.size(key)
        }
        fn exists(&self, key: &str) -> Result<bool> {
            self.0.exists(key)
        }
        fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
            self.0.write_atomic(key, data)
        }
        fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
            self.0.create_new(key, data)
        }
        fn delete(&self, key: &str) -> Result<()> {
            self.0.delete(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>> {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.list(prefix)
        }
        fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
            self.0.lock(name, mode, wait)
        }
        fn describe(&self) -> String {
            "counted".into()
        }
    }

    fn memo() -> (Arc<dyn Backend>, Arc<Counted>) {
        let store = Arc::new(Counted(MemBackend::new(), AtomicU64::new(0)));
        (ListingMemo::wrap(store.clone()), store)
    }

    fn lists(c: &Counted) -> u64 {
        c.1.load(Ordering::Relaxed)
    }

    #[test]
    fn listings_are_remembered_only_under_the_writer_lock() {
        let (b, c) = memo();
        b.write_atomic("index/0000000000000001", b"a").unwrap();
        b.list(object_names::INDEX).unwrap();
        b.list(object_names::INDEX).unwrap();
        assert_eq!(lists(&c), 2, "no lock: every listing goes to the store");

        let readers = b
            .lock(object_names::READERS_LOCK, LockMode::Shared, false)
            .unwrap();
        b.list(object_names::INDEX).unwrap();
        b.list(object_names::INDEX).unwrap();
        assert_eq!(lists(&c), 4, "a reader's lock remembers nothing");
        drop(readers);

        let lock = b
            .lock(object_names::WRITE_LOCK, LockMode::Exclusive, false)
            .unwrap();
        assert_eq!(
            b.list(object_names::INDEX).unwrap(),
            ["index/0000000000000001"]
        );
        b.write_atomic("index/0000000000000002", b"b").unwrap();
        b.delete("index/0000000000000001").unwrap();
        b.create_new("index/0000000000000003", b"c").unwrap();
        assert_eq!(
            b.list(object_names::INDEX).unwrap(),
            ["index/0000000000000002", "index/0000000000000003"]
        );
        assert_eq!(lists(&c), 5, "one listing under the lock, then own writes");
        // Containers are never remembered (a collection adds copies).
        b.list(object_names::CONTAINERS).unwrap();
        b.list(object_names::CONTAINERS).unwrap();
        assert_eq!(lists(&c), 7);

        // Released: the next listing sees what others did meanwhile.
        drop(lock);
        c.write_atomic("index/0000000000000009", b"x").unwrap();
        assert_eq!(b.list(object_names::INDEX).unwrap().len(), 3);
        assert_eq!(lists(&c), 8);
    }

    #[test]
    fn a_scope_remembers_until_it_ends_and_a_lost_create_forgets() {
        let c = Arc::new(Counted(MemBackend::new(), AtomicU64::new(0)));
        let (b, scopes) = ListingMemo::wrap_with_scopes(c.clone());
        let scope = scopes.open();
        b.list(object_names::INDEX).unwrap();
        // Another writer adds a delta: the scope still answers its listing.
        c.write_atomic("index/0000000000000001.00000001", b"d")
            .unwrap();
        assert!(b.list(object_names::INDEX).unwrap().is_empty());
        assert_eq!(lists(&c), 1);
        // Creating that name finds it there: the listing was stale.
        assert!(!b
            .create_new("index/0000000000000001.00000001", b"e")
            .unwrap());
        assert_eq!(b.list(object_names::INDEX).unwrap().len(), 1);
        assert_eq!(lists(&c), 2);
        drop(scope);
        b.list(object_names::INDEX).unwrap();
        assert_eq!(lists(&c), 3, "the scope ended: listings go to the store");
    }

    #[test]
    fn a_failed_write_forgets_the_listing() {
        let (b, c) = memo();
        let _lock = b
            .lock(object_names::WRITE_LOCK, LockMode::Exclusive, false)
            .unwrap();
        b.list(object_names::SNAPSHOTS).unwrap();
        // An invalid key fails in the store: its presence is unknown.
        assert!(b.write_atomic("snapshots/../x", b"a").is_err());
        b.list(object_names::SNAPSHOTS).unwrap();
        b.list(object_names::SNAPSHOTS).unwrap();
        assert_eq!(lists(&c), 2, "listed again once, then remembered");
    }
}
