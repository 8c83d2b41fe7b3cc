//! A local cache of a remote repository's metadata (issue 14): the index
//! files, the snapshot records, and each container's size and *tail* (its
//! metadata section, DDFS §4.3), kept on the local disk so that a restore
//! or the next backup finds them without a round trip to the store
//! (`check` and `repair` bypass it: they judge the store's own objects). It wraps the
//! store's backend, below the sealing layer, so it holds only what the
//! store holds (sealed bytes in an encrypted repository) and everything it
//! serves is authenticated or checksummed again above it.
//!
//! **Keyed** by repository id and location: `ROOT/<id>-<hash of the
//! location>/`, so two repositories, or two copies of one repository at
//! different places, never share entries.
//!
//! **Valid** because what it caches never changes under its name: a
//! container id is never reused (`docs/FORMAT.md`), an index file name,
//! once visible, always names the same bytes (`repair index` writes a new
//! generation above the old ones), and a snapshot record is named by the
//! hash of its content. An index delta's name may name other bytes later
//! (a writer that opened before a compaction may create again the name of
//! a delta it deleted), so a delta is served from the cache only to
//! [`Backend::read_stable`]: the index asks so for the deltas of the
//! generation its listing shows newest, whose names are not reused while
//! it is (docs/concurrency.md, "Index deltas in the local cache"). With
//! eight writers each open read every delta the others had added since
//! its generation began, afresh in each process: 25 GETs per backup,
//! against the 7 others' new ones read once per host now. A listing of
//! `index/` drops the cached deltas it no longer shows. Deleting through
//! this backend drops the entry; an object deleted by another client (its
//! gc) leaves an entry nothing asks for, since nothing names a deleted
//! container or index generation any more.
//!
//! **The config is not cached**: it can change (a new key, a format
//! upgrade). The one read `wrap` makes to key the cache is handed to the
//! open that follows instead of a second request, and never after a lock
//! is taken, so a writer always re-reads it from the store.
//!
//! **Local notes** (`local-notes/<name>`, [`Backend::read_local_note`]):
//! derived data of this host's own that the engine keeps between runs
//! (the parent check's record, `backup/parent_held.rs`), in the same
//! entries, sealed by the layer above in an encrypted repository. No
//! object of the store is named so, and nothing reads a note as one.
//!
//! **Safe to delete**, whole or in part: a missing entry is a miss. Each
//! entry carries a BLAKE3 hash of itself, checked on every read; a damaged
//! or truncated entry is removed and read from the store again. Writing
//! the cache is best effort: a full or read-only cache disk costs speed,
//! never a command.
//!
//! ```text
//! entry := "CAIRNLC1" | object size u64 | start u64 | blake3(size|start|bytes) [32] | bytes
//!          bytes = the object's bytes from `start` to its end (all of an
//!          index file; the last TAIL bytes of a container; none: size only)
//! ```

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use cairn_core::{Backend, LockGuard, LockMode, Result};

use crate::object_names;

/// Bytes of a container's end kept: its metadata section (a 4 MiB
/// container of 8 KiB chunks has about 30 KiB) with room for the sealing
/// layer's block rounding.
pub const TAIL: u64 = 256 << 10;

const MAGIC: &[u8; 8] = b"CAIRNLC1";
const HEADER: usize = SPAN + 32;

/// What the cache keeps of an object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    Whole,
    Tail,
    /// Kept whole, served only to [`Backend::read_stable`].
    WholeForStableReads,
    Nothing,
}

/// What the cache keeps of object `key` written as `data` (`None`: nothing).
fn entry_of(key: &str, data: &[u8]) -> Option<Entry> {
    let size = data.len() as u64;
    let start = match kept(key) {
        Kept::Whole | Kept::WholeForStableReads => 0,
        Kept::Tail => size.saturating_sub(TAIL),
        Kept::Nothing => return None,
    };
    Some(Entry {
        size,
        start,
        bytes: data[start as usize..].to_vec(),
    })
}

/// Where a local note is kept: a directory no object of the store is
/// named under, so a note never stands for an object.
fn note_key(name: &str) -> String {
    format!("local-notes/{name}")
}

fn kept(key: &str) -> Kept {
    if key.starts_with(object_names::CONTAINERS) {
        Kept::Tail
    } else if object_names::parse_index_delta(key).is_some() {
        // An index delta's name may name other bytes later: a compaction
        // beside writers deletes the deltas it folded, and a writer that
        // opened before it may create one of those names again
        // (docs/concurrency.md, "Compaction beside writers").
        Kept::WholeForStableReads
    } else if key.starts_with(object_names::INDEX) || key.starts_with(object_names::SNAPSHOTS) {
        Kept::Whole
    } else {
        Kept::Nothing
    }
}

/// Where an entry holds its object's bytes: from `start` to the object's
/// `size` (the fields after the magic).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Checked {
    size: u64,
    start: u64,
}

/// Bytes of an entry's magic, size and start: what [`Checked::parse`] reads.
const SPAN: usize = 8 + 8 + 8;

impl Checked {
    /// The span an entry's first bytes record; `None` without the magic.
    fn parse(head: &[u8]) -> Option<Checked> {
        if head.len() < SPAN || &head[..8] != MAGIC {
            return None;
        }
        Some(Checked {
            size: u64::from_le_bytes(head[8..16].try_into().ok()?),
            start: u64::from_le_bytes(head[16..24].try_into().ok()?),
        })
    }
}

/// An entry: the object's size and its bytes from `start` on.
struct Entry {
    size: u64,
    start: u64,
    bytes: Vec<u8>,
}

impl Entry {
    fn covers(&self, offset: u64, len: usize) -> bool {
        offset >= self.start
            && offset + len as u64 <= self.size
            && self.bytes.len() as u64 == self.size - self.start
    }

    fn checked(&self) -> Checked {
        Checked {
            size: self.size,
            start: self.start,
        }
    }

    fn slice(&self, offset: u64, len: usize) -> Vec<u8> {
        let at = (offset - self.start) as usize;
        self.bytes[at..at + len].to_vec()
    }

    fn hash(size: u64, start: u64, bytes: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new();
        h.update(&size.to_le_bytes());
        h.update(&start.to_le_bytes());
        h.update(bytes);
        h.finalize()
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.bytes.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.start.to_le_bytes());
        out.extend_from_slice(Self::hash(self.size, self.start, &self.bytes).as_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < HEADER {
            return None;
        }
        let Checked { size, start } = Checked::parse(b)?;
        let bytes = &b[HEADER..];
        let ok = start <= size
            && bytes.len() as u64 == size - start
            && Self::hash(size, start, bytes).as_bytes() == &b[SPAN..HEADER];
        ok.then(|| Entry {
            size,
            start,
            bytes: bytes.to_vec(),
        })
    }
}

/// A backend whose metadata reads are served from a local directory when
/// it has them (see the module doc).
pub struct LocalCache {
    inner: Arc<dyn Backend>,
    dir: PathBuf,
    /// Entries checked in this process, with the span of the object each
    /// holds: read in place from then on, not loaded and hashed again (an
    /// index lookup reads one page of a file of many MiB; the parent check
    /// reads a few recipe nodes from each of a hundred container tails,
    /// several times each). What an in-place read gets is authenticated
    /// or checksummed above this layer, as everything it serves is.
    checked: Mutex<HashMap<String, Checked>>,
    /// Names temporaries apart between the threads of this process.
    temporaries: AtomicU64,
    /// The config object as `wrap` read it to key the cache: the open that
    /// follows reads it once more, and takes these bytes instead of a
    /// second request. Dropped by the first lock taken, so a writer's
    /// re-read under its lock (a config changed meanwhile must be seen)
    /// always goes to the store.
    config_read_at_wrap: Mutex<Option<Vec<u8>>>,
}

impl LocalCache {
    /// Wraps `inner` with the cache for its repository under `root`; `inner`
    /// itself when it holds no repository yet (nothing to key the cache by)
    /// or the cache directory cannot be made (one notice on standard error).
    pub fn wrap(inner: Arc<dyn Backend>, root: &Path) -> Result<Arc<dyn Backend>> {
        let config = match inner.read(object_names::CONFIG) {
            Ok(c) => c,
            Err(e) if e.is_not_found() => return Ok(inner),
            Err(e) => return Err(e),
        };
        let id = crate::crypto::StoredConfig::decode(&config)?
            .id()
            .to_string();
        let place = blake3::hash(inner.describe().as_bytes()).to_hex();
        let dir = root.join(format!("{id}-{}", &place[..16]));
        if let Err(e) = fs::create_dir_all(&dir) {
            eprintln!(
                "cairn: notice: not caching metadata in {}: {e}",
                dir.display()
            );
            return Ok(inner);
        }
        Ok(Arc::new(LocalCache {
            inner,
            dir,
            checked: Mutex::new(HashMap::new()),
            temporaries: AtomicU64::new(0),
            config_read_at_wrap: Mutex::new(Some(config)),
        }))
    }

    /// The directory of this repository's entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    fn load(&self, key: &str) -> Option<Entry> {
        let path = self.path(key);
        let bytes = fs::read(&path).ok()?;
        let entry = Entry::decode(&bytes);
        match &entry {
            Some(e) => self.note_checked(key, e),
            None => {
                // Damaged or truncated: read from the store again.
                self.checked.lock().remove(key);
                let _ = fs::remove_file(&path);
            }
        }
        entry
    }

    fn note_checked(&self, key: &str, entry: &Entry) {
        if matches!(kept(key), Kept::Whole | Kept::Tail) {
            self.checked.lock().insert(key.to_string(), entry.checked());
        }
    }

    /// Stores an entry, best effort (temporary and rename: a reader sees
    /// the old entry, the new one, or none).
    fn store(&self, key: &str, entry: &Entry) {
        let path = self.path(key);
        let write = || -> std::io::Result<()> {
            fs::create_dir_all(path.parent().expect("entries live in directories"))?;
            let n = self.temporaries.fetch_add(1, Ordering::Relaxed);
            let tmp = PathBuf::from(format!("{}.tmp-{}-{n}", path.display(), std::process::id()));
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&entry.encode())?;
            drop(f);
            fs::rename(&tmp, &path)
        };
        match write() {
            Ok(()) => self.note_checked(key, entry),
            // The file may still hold the entry noted before, or none.
            Err(_) => {
                self.checked.lock().remove(key);
            }
        }
    }

    /// Removes the entries of index deltas that `listing` (of `index/`)
    /// does not show; best effort.
    fn drop_unlisted_deltas(&self, listing: &[String]) {
        let Ok(dir) = fs::read_dir(self.path(object_names::INDEX)) else {
            return;
        };
        let listed: std::collections::HashSet<&str> = listing.iter().map(String::as_str).collect();
        for entry in dir.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let key = format!("{}{name}", object_names::INDEX);
            if object_names::parse_index_delta(&key).is_some() && !listed.contains(key.as_str()) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// `len` bytes at `offset` of an entry checked before, read in place;
    /// `None` when it was not checked, does not hold them or cannot be
    /// read. Another process sharing the cache may have replaced the entry
    /// since (by rename: this read sees the old file or the new one); the
    /// object's bytes are the same in both, but a tail may now start
    /// elsewhere, so the file's own size and start must be the ones noted.
    fn read_checked(&self, key: &str, offset: u64, len: usize) -> Option<Vec<u8>> {
        let noted = *self.checked.lock().get(key)?;
        if offset < noted.start || offset + len as u64 > noted.size {
            return None;
        }
        let f = fs::File::open(self.path(key)).ok()?;
        let mut head = [0; SPAN];
        f.read_exact_at(&mut head, 0).ok()?;
        if Checked::parse(&head)? != noted {
            return None;
        }
        let mut buf = vec![0; len];
        f.read_exact_at(&mut buf, HEADER as u64 + offset - noted.start)
            .ok()?;
        Some(buf)
    }

    /// A whole entry, loaded (checked) or read from the store.
    fn whole(&self, key: &str) -> Result<Entry> {
        let e = self.entry_from(key, |_| 0)?;
        self.note_checked(key, &e);
        Ok(e)
    }

    fn remember(&self, key: &str, data: &[u8]) {
        if let Some(entry) = entry_of(key, data) {
            self.store(key, &entry);
        }
    }

    /// The entry of `key` with at least its bytes from `from` on, read
    /// from the store (and kept) when the cache lacks them.
    fn entry_from(&self, key: &str, from: impl Fn(u64) -> u64) -> Result<Entry> {
        let known = self.load(key);
        if let Some(e) = &known {
            if e.start <= from(e.size) {
                return Ok(known.expect("checked"));
            }
        }
        let entry = match known {
            // What the entry lacks before its bytes (a decoded entry holds
            // every byte from its start to the end), read and put before them.
            Some(e) => {
                let (size, start) = (e.size, from(e.size).min(e.size));
                let mut bytes = self.inner.read_at(key, start, (e.start - start) as usize)?;
                bytes.extend_from_slice(&e.bytes);
                Entry { size, start, bytes }
            }
            // Unknown size: one request that brings the size with the
            // bytes (a suffix-range GET on object storage), not two.
            None if kept(key) == Kept::Whole => {
                let bytes = self.inner.read(key)?;
                let size = bytes.len() as u64;
                let start = from(size).min(size);
                Entry {
                    size,
                    start,
                    bytes: bytes[start as usize..].to_vec(),
                }
            }
            None => {
                let (size, tail) = self.inner.read_tail(key, TAIL as usize)?;
                let start = from(size).min(size);
                let tail_start = size - tail.len() as u64;
                let bytes = if start >= tail_start {
                    tail[(start - tail_start) as usize..].to_vec()
                } else {
                    self.inner.read_at(key, start, (size - start) as usize)?
                };
                Entry { size, start, bytes }
            }
        };
        self.store(key, &entry);
        Ok(entry)
    }
}

impl Backend for LocalCache {
    cairn_core::delegate_backend!(
        inner: read_salvaging, exists, clean_temporaries, describe,
        write_parallelism, read_parallelism, naming_key, stored_size
    );

    fn read_local_note(&self, name: &str) -> Option<Vec<u8>> {
        self.load(&note_key(name)).map(|e| e.bytes)
    }

    fn write_local_note(&self, name: &str, bytes: &[u8]) {
        let entry = Entry {
            size: bytes.len() as u64,
            start: 0,
            bytes: bytes.to_vec(),
        };
        self.store(&note_key(name), &entry);
    }

    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        self.config_read_at_wrap.lock().take();
        self.inner.lock(name, mode, wait)
    }

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        if key == object_names::CONFIG {
            if let Some(config) = self.config_read_at_wrap.lock().take() {
                return Ok(config);
            }
        }
        match kept(key) {
            Kept::Whole => Ok(self.whole(key)?.bytes),
            _ => self.inner.read(key),
        }
    }

    /// A delta from its entry when there is a whole one, else from the
    /// store, then kept.
    fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
        if kept(key) != Kept::WholeForStableReads {
            return self.read(key);
        }
        if let Some(e) = self.load(key).filter(|e| e.start == 0) {
            return Ok(e.bytes);
        }
        let bytes = self.inner.read(key)?;
        self.remember(key, &bytes);
        Ok(bytes)
    }

    /// A listing of `index/` also drops the cached deltas it does not
    /// show: deleted from the store (folded by a compaction), so never
    /// asked for again under the name they had.
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let keys = self.inner.list(prefix)?;
        if prefix == object_names::INDEX {
            self.drop_unlisted_deltas(&keys);
        }
        Ok(keys)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        match kept(key) {
            Kept::Whole => {
                if let Some(b) = self.read_checked(key, offset, len) {
                    return Ok(b);
                }
                let e = self.whole(key)?;
                if e.covers(offset, len) {
                    return Ok(e.slice(offset, len));
                }
                self.inner.read_at(key, offset, len)
            }
            Kept::Tail => {
                if let Some(b) = self.read_checked(key, offset, len) {
                    return Ok(b);
                }
                let size = self.size(key)?;
                // Only reads within the tail are the metadata's.
                if offset + len as u64 <= size && offset >= size.saturating_sub(TAIL) {
                    let e = self.entry_from(key, |size| size.saturating_sub(TAIL))?;
                    if e.covers(offset, len) {
                        return Ok(e.slice(offset, len));
                    }
                }
                self.inner.read_at(key, offset, len)
            }
            Kept::WholeForStableReads | Kept::Nothing => self.inner.read_at(key, offset, len),
        }
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        if matches!(kept(key), Kept::Nothing | Kept::WholeForStableReads) || len as u64 > TAIL {
            return self.inner.read_tail(key, len);
        }
        // Bound first: the guard must not live through the body, which
        // takes the lock again.
        let noted = self.checked.lock().get(key).map(|c| c.size);
        if let Some(size) = noted {
            let take = (len as u64).min(size);
            if let Some(b) = self.read_checked(key, size - take, take as usize) {
                return Ok((size, b));
            }
        }
        let e = self.entry_from(key, |size| match kept(key) {
            Kept::Whole => 0,
            _ => size.saturating_sub(TAIL),
        })?;
        let take = (len as u64).min(e.size);
        Ok((e.size, e.slice(e.size - take, take as usize)))
    }

    fn size(&self, key: &str) -> Result<u64> {
        if matches!(kept(key), Kept::Nothing | Kept::WholeForStableReads) {
            return self.inner.size(key);
        }
        if let Some(c) = self.checked.lock().get(key) {
            return Ok(c.size);
        }
        if let Some(e) = self.load(key) {
            return Ok(e.size);
        }
        // An object kept whole is read after its size is asked (an index
        // generation's pages): one suffix read brings the size with the
        // last TAIL bytes, which is the whole object when it is small,
        // where a size query and then a read were two round trips.
        if kept(key) == Kept::Whole {
            let (size, tail) = self.inner.read_tail(key, TAIL as usize)?;
            let entry = Entry {
                size,
                start: size - tail.len() as u64,
                bytes: tail,
            };
            self.store(key, &entry);
            return Ok(size);
        }
        let size = self.inner.size(key)?;
        // A size-only entry: the tail comes with the first read of it.
        self.store(
            key,
            &Entry {
                size,
                start: size,
                bytes: Vec::new(),
            },
        );
        Ok(size)
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        self.inner.write_atomic(key, data)?;
        self.remember(key, data);
        Ok(())
    }

    fn write_atomic_owned(&self, key: &str, data: Vec<u8>) -> Result<()> {
        // What the cache keeps is taken before the bytes go.
        let entry = entry_of(key, &data);
        self.inner.write_atomic_owned(key, data)?;
        if let Some(entry) = entry {
            self.store(key, &entry);
        }
        Ok(())
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        let created = self.inner.create_new(key, data)?;
        if created {
            self.remember(key, data);
        }
        Ok(created)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.checked.lock().remove(key);
        let _ = fs::remove_file(self.path(key));
        self.inner.delete(key)
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        for key in keys {
            self.checked.lock().remove(key);
            let _ = fs::remove_file(self.path(key));
        }
        self.inner.delete_many(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::{CountingBackend, MemBackend};
    use cairn_core::Counters;

    /// A store holding a repository config.
    fn store() -> Arc<MemBackend> {
        let mem = Arc::new(MemBackend::new());
        mem.write_atomic(
            object_names::CONFIG,
            &crate::RepoConfig::new("0123abcd".into()).encode(),
        )
        .unwrap();
        mem
    }

    /// A process's cache over `mem` (reads of the store counted).
    fn cache_of(mem: &Arc<MemBackend>, root: &Path) -> (Arc<dyn Backend>, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        let counted: Arc<dyn Backend> =
            Arc::new(CountingBackend::new(mem.clone(), counters.clone()));
        (LocalCache::wrap(counted, root).unwrap(), counters)
    }

    fn reads(c: &Counters) -> u64 {
        c.read_ops.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn object(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
    }

    #[test]
    fn metadata_is_read_from_the_store_once_then_from_the_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        let container = object_names::container(cairn_core::ContainerId(7));
        let big = object(600 << 10, 1);
        mem.write_atomic(&container, &big).unwrap();
        mem.write_atomic("index/3", &object(100_000, 2)).unwrap();

        let (cache, counters) = cache_of(&mem, tmp.path());
        let before = reads(&counters);
        let (size, tail) = cache.read_tail(&container, 64 << 10).unwrap();
        assert_eq!(
            (size, &tail[..]),
            (big.len() as u64, &big[big.len() - (64 << 10)..])
        );
        assert_eq!(
            cache.read_at("index/3", 5000, 10).unwrap(),
            object(100_000, 2)[5000..5010]
        );
        assert_eq!(reads(&counters) - before, 2, "one read each");

        // From the cache now, in this process and in the next.
        for (c, counters) in [(cache, counters), cache_of(&mem, tmp.path())] {
            let before = reads(&counters);
            assert_eq!(
                c.read_tail(&container, 1000).unwrap().1,
                big[big.len() - 1000..]
            );
            let at = big.len() - 200_000;
            assert_eq!(
                c.read_at(&container, at as u64, 100).unwrap(),
                big[at..at + 100]
            );
            assert_eq!(c.read("index/3").unwrap(), object(100_000, 2));
            assert_eq!(c.size(&container).unwrap(), big.len() as u64);
            assert_eq!(reads(&counters), before);
            // Data outside the tail always comes from the store.
            assert_eq!(c.read_at(&container, 10, 100).unwrap(), big[10..110]);
            assert_eq!(reads(&counters), before + 1);
        }
    }

    #[test]
    fn writes_fill_the_cache_and_deletes_empty_it() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        let (cache, counters) = cache_of(&mem, tmp.path());
        // Written from borrowed bytes, and from bytes given away.
        for (id, owned) in [(9, false), (10, true)] {
            let container = object_names::container(cairn_core::ContainerId(id));
            let bytes = object(100_000, id as u8);
            if owned {
                cache.write_atomic_owned(&container, bytes.clone()).unwrap();
            } else {
                cache.write_atomic(&container, &bytes).unwrap();
            }
            assert!(mem.read(&container).unwrap() == bytes);
            let before = reads(&counters);
            assert_eq!(
                cache.read_tail(&container, 500).unwrap().1,
                bytes[bytes.len() - 500..]
            );
            assert_eq!(reads(&counters), before);
            cache.delete(&container).unwrap();
            assert!(cache.read_tail(&container, 500).unwrap_err().is_not_found());
        }
    }

    #[test]
    fn damaged_or_deleted_entries_are_read_again_from_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        let data = object(50_000, 4);
        mem.write_atomic("index/1", &data).unwrap();
        assert_eq!(cache_of(&mem, tmp.path()).0.read("index/1").unwrap(), data);
        let dir = fs::read_dir(tmp.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let entry = dir.join("index/1");
        let mut b = fs::read(&entry).unwrap();
        let at = b.len() - 10;
        b[at] ^= 1;
        fs::write(&entry, &b).unwrap();
        // The next process finds the damage and reads the store again.
        let (cache, counters) = cache_of(&mem, tmp.path());
        assert_eq!(cache.read("index/1").unwrap(), data);
        assert_eq!(reads(&counters), 2, "the config, then the index file");
        assert_eq!(
            Entry::decode(&fs::read(&entry).unwrap()).unwrap().bytes,
            data
        );
        fs::remove_dir_all(tmp.path()).unwrap();
        let (cache, counters) = cache_of(&mem, tmp.path());
        assert_eq!(cache.read_at("index/1", 7, 3).unwrap(), data[7..10]);
        assert_eq!(reads(&counters), 2, "the config, then the index file");
    }

    /// Entries checked once are read in place afterwards; another process
    /// sharing the cache may meanwhile replace one with an entry that
    /// starts elsewhere in the object, and the in-place read must notice.
    #[test]
    fn in_place_reads_follow_an_entry_another_process_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        // Bytes that do not repeat (`object`'s repeat every 256 bytes, so
        // a read at a wrong multiple of 256 would not show).
        let unrepeated = |n: usize, seed: u8| {
            let mut b = vec![0; n];
            blake3::Hasher::new()
                .update(&[seed])
                .finalize_xof()
                .fill(&mut b);
            b
        };
        let key = "index/0000000000000009";
        let data = unrepeated(3 * TAIL as usize, 6);
        mem.write_atomic(key, &data).unwrap();
        let container = object_names::container(cairn_core::ContainerId(9));
        let packed = unrepeated(TAIL as usize + 4096, 7);
        mem.write_atomic(&container, &packed).unwrap();

        // Process A: the index file's size (its tail is kept) and the
        // container's tail, both noted.
        let (a, _) = cache_of(&mem, tmp.path());
        assert_eq!(a.size(key).unwrap(), data.len() as u64);
        let end = data.len() as u64 - 100;
        assert_eq!(a.read_at(key, end, 50).unwrap(), data[end as usize..][..50]);
        let (size, _) = a.read_tail(&container, 100).unwrap();
        let at = size - 1000;
        assert_eq!(
            a.read_at(&container, at, 200).unwrap(),
            packed[at as usize..][..200]
        );

        // Process B reads the index file whole: its entry now starts at 0.
        let (b, _) = cache_of(&mem, tmp.path());
        assert_eq!(b.read(key).unwrap(), data);

        // A's next reads, in the tail and before it, are the object's bytes.
        assert_eq!(a.read_at(key, end, 50).unwrap(), data[end as usize..][..50]);
        assert_eq!(a.read_at(key, 10, 50).unwrap(), data[10..60]);
        assert_eq!(
            a.read_at(&container, at, 200).unwrap(),
            packed[at as usize..][..200]
        );
        assert_eq!(a.size(&container).unwrap(), packed.len() as u64);
    }

    #[test]
    fn a_store_without_a_repository_is_not_cached_and_places_are_kept_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let empty: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let wrapped = LocalCache::wrap(empty.clone(), tmp.path()).unwrap();
        assert!(Arc::ptr_eq(&wrapped, &empty));
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
        cache_of(&store(), tmp.path());
        cache_of(&store(), tmp.path());
        // Same id, and memory stores all describe themselves alike.
        let dirs: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(dirs.len(), 1);
        let name = dirs[0].as_ref().unwrap().file_name();
        assert!(name.to_string_lossy().starts_with("0123abcd-"), "{name:?}");
    }

    /// An index delta is kept for stable reads only: a later process
    /// reads it without a request, a plain read always asks the store,
    /// and a listing that no longer shows it drops it, so its name
    /// recreated later is read afresh.
    #[test]
    fn deltas_are_served_to_stable_reads_and_dropped_when_unlisted() {
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        let delta = object_names::index_delta(3, 1);
        mem.write_atomic(&delta, &object(5000, 1)).unwrap();

        let (cache, counters) = cache_of(&mem, tmp.path());
        assert_eq!(cache.read_stable(&delta).unwrap(), object(5000, 1));
        assert_eq!(reads(&counters), 2, "the config, then the delta");
        let (cache, counters) = cache_of(&mem, tmp.path());
        assert_eq!(cache.read_stable(&delta).unwrap(), object(5000, 1));
        assert_eq!(reads(&counters), 1, "the config only");
        assert_eq!(cache.read(&delta).unwrap(), object(5000, 1));
        assert_eq!(reads(&counters), 2, "a plain read goes to the store");

        // Folded by a merge: deleted by another host, unlisted here.
        mem.delete(&delta).unwrap();
        assert!(cache.list(object_names::INDEX).unwrap().is_empty());
        // Created again under that name (a writer that opened before the
        // merge): read from the store.
        mem.write_atomic(&delta, &object(4000, 2)).unwrap();
        let (cache, counters) = cache_of(&mem, tmp.path());
        assert_eq!(cache.read_stable(&delta).unwrap(), object(4000, 2));
        assert_eq!(reads(&counters), 2);

        // A delta this host creates is kept as it is written.
        let own = object_names::index_delta(3, 2);
        assert!(cache.create_new(&own, &object(3000, 3)).unwrap());
        assert_eq!(cache.read_stable(&own).unwrap(), object(3000, 3));
        assert_eq!(reads(&counters), 2);
        // A listing that shows both keeps both.
        assert_eq!(cache.list(object_names::INDEX).unwrap().len(), 2);
        let (cache, counters) = cache_of(&mem, tmp.path());
        cache.read_stable(&delta).unwrap();
        cache.read_stable(&own).unwrap();
        assert_eq!(reads(&counters), 1);
    }

    /// Through one host's cache, the overlay of the newest generation is
    /// read once; after a merge to the next generation and a stale writer's
    /// delta under a folded name, a load gives what the store itself gives.
    #[test]
    fn an_overlay_through_the_cache_equals_one_from_the_store() {
        use crate::index::overlay::Overlay;
        use cairn_core::{ContainerId, Fingerprint};
        use cairn_format::index::IndexEntry;
        use cairn_format::index_delta::{encode_index_delta, IndexDelta};
        let tmp = tempfile::tempdir().unwrap();
        let mem = store();
        let fp = |b: u8| Fingerprint::from_slice(&[b; 32]);
        let write = |generation: u64, seq: u32, fp_byte: u8, container: u64| {
            let d = IndexDelta {
                fp_width: 32,
                base_generation: generation,
                seq,
                covered_below: ContainerId(container + 1),
                removes_below: ContainerId(u64::MAX),
                removes: vec![],
                puts: vec![IndexEntry {
                    fp: fp(fp_byte),
                    container: ContainerId(container),
                }],
            };
            let key = object_names::index_delta(generation, seq);
            mem.write_atomic(&key, &encode_index_delta(&d).unwrap())
                .unwrap();
        };
        let listing = || mem.list(object_names::INDEX).unwrap();
        let found = |o: &Overlay, b: u8| o.lookup(&fp(b)).and_then(|c| c.over(None));
        write(3, 1, 1, 10);
        write(3, 2, 2, 11);
        let (cache, _) = cache_of(&mem, tmp.path());
        Overlay::load(&*cache, &listing(), 3, 32).unwrap();
        let (cache, counters) = cache_of(&mem, tmp.path());
        let o = Overlay::load(&*cache, &listing(), 3, 32).unwrap();
        assert_eq!(reads(&counters), 1, "the config only");
        assert_eq!(found(&o, 2), Some(ContainerId(11)));

        // A merge writes generation 4 and deletes 3's deltas; a writer
        // that opened at 3 adds delta 3.2 again, with other entries.
        mem.write_atomic(&object_names::index(4), b"file").unwrap();
        mem.delete(&object_names::index_delta(3, 1)).unwrap();
        mem.delete(&object_names::index_delta(3, 2)).unwrap();
        write(3, 2, 7, 12);
        let (cache, counters) = cache_of(&mem, tmp.path());
        let o = Overlay::load(&*cache, &listing(), 4, 32).unwrap();
        let fresh = Overlay::load(&*mem, &listing(), 4, 32).unwrap();
        assert_eq!(reads(&counters), 2, "the config, then 3.2 from the store");
        for b in [1, 2, 7] {
            assert_eq!(found(&o, b), found(&fresh, b), "fingerprint {b}");
        }
        assert_eq!(found(&o, 7), Some(ContainerId(12)));
        assert_eq!(found(&o, 2), None);
    }

    /// An index generation's size asked before its pages are read: one
    /// read of the store brings the size with the bytes (all of them when
    /// the object fits the tail read), and no size query goes to the store.
    #[test]
    fn a_whole_object_sized_first_costs_one_read_when_it_is_small() {
        use crate::counts_calls::CountsCalls;
        let key = "index/0000000000000004";
        for len in [
            0,
            1000,
            TAIL as usize,
            TAIL as usize + 1,
            3 * TAIL as usize + 5,
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let mem = store();
            let bytes = object(len, 5);
            mem.write_atomic(key, &bytes).unwrap();
            let counted = Arc::new(CountsCalls::new(mem.clone()));
            let cache = LocalCache::wrap(counted.clone(), tmp.path()).unwrap();
            let before = counted.reads();
            assert_eq!(cache.size(key).unwrap(), len as u64);
            let mid = len / 2;
            assert_eq!(
                cache.read_at(key, mid as u64, len - mid).unwrap(),
                bytes[mid..],
                "{len} bytes"
            );
            assert_eq!(cache.read(key).unwrap(), bytes, "{len} bytes");
            let expected = if len <= TAIL as usize { 1 } else { 2 };
            assert_eq!(counted.reads() - before, expected, "{len} bytes");
            assert_eq!(counted.sizes(), 0, "{len} bytes");
            // The next process reads it from the cache.
            let (again, counters) = cache_of(&mem, tmp.path());
            let before = reads(&counters);
            assert_eq!(again.read(key).unwrap(), bytes);
            assert_eq!(
                again.read_at(key, 0, len.min(10)).unwrap(),
                bytes[..len.min(10)]
            );
            assert_eq!(reads(&counters), before);
        }
    }
}
