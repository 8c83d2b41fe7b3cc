//! The volume's content state ([`Content`]): a file's bytes from its
//! stream map or its backing file (docs/volume.md, "What a file's bytes
//! are" and "Data path"), recall of the granules a write touches, and the
//! entry changes of truncates and removals.
//!
//! Reads of optimized ranges go through a pool of chunk readers sharing one
//! bounded cache of decoded chunks (`crate::chunk_readers`, 004: a cache
//! for decompressed data), filled ahead of sequential readers
//! (`crate::read_ahead`). Reads of one file may run at once (the FUSE
//! layer holds its inode lock shared around them); everything else here
//! runs under the exclusive lock.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cairn_core::Result;
use parking_lot::Mutex;

use crate::chunk_readers::ChunkReaders;
use crate::content::{read_full_at, Content};
use crate::read_ahead::ReadAhead;
use crate::state::{Entry, StreamMapTable};

/// Smallest and largest recall granule (docs/volume.md, "Write").
pub const MIN_GRANULE: u64 = 64 << 10;
pub const MAX_GRANULE: u64 = 16 << 20;

/// Bytes copied from the store per step of a recall.
const RECALL_STEP: u64 = 1 << 20;

/// The recall granularity of a file of `size` bytes:
/// `clamp(next_power_of_two(size / 1024), 64 KiB, 16 MiB)` (004: it grows
/// with the file, so a 1 GiB file recalls 1 MiB around a small write).
pub fn granule(size: u64) -> u64 {
    (size / 1024)
        .max(1)
        .next_power_of_two()
        .clamp(MIN_GRANULE, MAX_GRANULE)
}

/// Reads optimized ranges through the chunk store and keeps the
/// stream-map table in step with writes. Shared by every FUSE thread: the
/// chunk readers and the read-ahead have their own locking, the table its
/// own, and the caller holds the file's inode lock around each call,
/// shared for reads, exclusive for the rest (`crate::content`).
pub struct VolumeContent {
    table: Arc<StreamMapTable>,
    readers: Arc<ChunkReaders>,
    read_ahead: ReadAhead,
    recalled_bytes: AtomicU64,
    /// Whether a collection of the store is under way, and how many
    /// refreshes there have been: a read that fails while one runs, or
    /// across a refresh, waits for the refresh and retries once.
    collection: Mutex<Collection>,
    refreshed: parking_lot::Condvar,
    /// Where a read the store cannot serve sound falls back to: the
    /// scrub's second copies (`copy_fallback.rs`; `None`: no copies).
    fallback: Mutex<Option<cairn_engine::chunk_repair::RecipeWalker>>,
}

#[derive(Default)]
struct Collection {
    running: bool,
    refreshes: u64,
}

impl VolumeContent {
    pub fn new(repo: &cairn_engine::Repository, table: Arc<StreamMapTable>) -> Result<Self> {
        let readers = Arc::new(ChunkReaders::open(repo)?);
        let read_ahead = ReadAhead::start(readers.clone())
            .map_err(|e| cairn_core::Error::io("starting the read-ahead threads", e))?;
        Ok(VolumeContent {
            table,
            readers,
            read_ahead,
            recalled_bytes: AtomicU64::new(0),
            collection: Mutex::new(Collection::default()),
            refreshed: parking_lot::Condvar::new(),
            fallback: Mutex::new(crate::copy_fallback::copy_reader(repo)?),
        })
    }

    /// Reopens the chunk readers on the store as it is now: a reader finds
    /// only the chunks its index (or its one-time map of the containers)
    /// knew when it first looked, so the optimization job calls this after
    /// committing new chunks and before switching files to them.
    /// A garbage collection calls it once the collection is over (it
    /// deletes containers the readers may name), and so ends what
    /// [`VolumeContent::collection_started`] began, even when it fails.
    pub fn refresh(&self, repo: &cairn_engine::Repository) -> Result<()> {
        let reopened = self.readers.refresh(repo);
        let copies = crate::copy_fallback::copy_reader(repo);
        let mut c = self.collection.lock();
        c.running = false;
        c.refreshes += 1;
        self.refreshed.notify_all();
        drop(c);
        reopened?;
        *self.fallback.lock() = copies?;
        Ok(())
    }

    /// Marks a garbage collection of the store under way, until the next
    /// [`VolumeContent::refresh`]: a chunk read that fails meanwhile (its
    /// container deleted) waits for the refresh and is tried again.
    pub fn collection_started(&self) {
        self.collection.lock().running = true;
    }

    /// Bytes copied from the store into backing files by recalls so far.
    pub fn recalled_bytes(&self) -> u64 {
        self.recalled_bytes.load(Ordering::Relaxed)
    }

    /// Copies the stream map's bytes `[offset, offset + out.len())` into `out`.
    fn read_stream_map(&self, entry: &Entry, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let refreshes = self.collection.lock().refreshes;
        let read = |out: &mut [u8]| {
            self.readers
                .with_reader(|r| r.read_into(&entry.blob, offset, out))
        };
        let got = match read(out) {
            Ok(n) => n,
            Err(e) => {
                // A collection may have deleted a container the reader
                // named: once it is over and the readers refreshed, try
                // once more.
                let retried = {
                    let mut c = self.collection.lock();
                    if !c.running && c.refreshes == refreshes {
                        Err(e)
                    } else {
                        self.refreshed.wait_while(&mut c, |c| c.running);
                        drop(c);
                        read(out)
                    }
                };
                match retried {
                    Ok(n) => n,
                    // Else a chunk the store cannot serve sound: its
                    // second copy, if the scrub keeps one.
                    Err(e) => {
                        let mut bytes = Vec::with_capacity(out.len());
                        crate::copy_fallback::read_through_copies(
                            &self.fallback,
                            &entry.blob,
                            offset,
                            out.len(),
                            &mut bytes,
                        )
                        .map_err(|_| io::Error::other(e))?;
                        let n = bytes.len().min(out.len());
                        out[..n].copy_from_slice(&bytes[..n]);
                        bytes.len()
                    }
                }
            }
        };
        if got != out.len() {
            return Err(io::Error::other(format!(
                "stream map of inode {} ends at {} bytes, before byte {}",
                entry.identity.ino,
                entry.blob.size,
                offset + out.len() as u64
            )));
        }
        Ok(())
    }

    /// The data chunks of `entry`'s stream map, in order, with where each
    /// starts (its recipe's leaves; no chunk is read).
    pub fn stream_map_leaves(
        &self,
        entry: &Entry,
    ) -> Result<Vec<cairn_engine::random_access::Leaf>> {
        self.readers
            .with_reader(|r| r.leaf_ranges(&entry.blob, 0, entry.blob.size))
    }

    /// Commits `entry` after a change: dropped once no byte comes from its
    /// stream map any more (the file is plain again).
    fn commit(&self, entry: Entry) -> io::Result<()> {
        if entry.is_spent() {
            self.table.remove(entry.identity.ino)
        } else {
            self.table.put(entry)
        }
        .map_err(io::Error::other)
    }
}

impl Content for VolumeContent {
    fn read_at(&self, ino: u64, file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let Some(entry) = self.table.get(ino) else {
            return read_full_at(file, offset, buf);
        };
        let want_end = offset.saturating_add(buf.len() as u64);
        // The backing file is never shorter than `valid` while a read runs
        // (a truncate shortens it and lowers `valid` under the exclusive
        // lock), so a read inside `[0, valid)` needs no `fstat`.
        let end = if want_end <= entry.valid {
            want_end
        } else {
            let len = file.metadata()?.len();
            if offset >= len {
                return Ok(0);
            }
            len.min(want_end)
        };
        if offset < entry.valid {
            self.read_ahead
                .note(ino, &entry.blob, entry.valid, offset, end);
        }
        let mut pos = offset;
        while pos < end {
            let at = (pos - offset) as usize;
            // A run ends where the source of its bytes changes: at `valid`,
            // or where a recalled range starts or ends.
            let (from_store, run_end) = match entry.recalled.containing(pos) {
                _ if pos >= entry.valid => (false, end),
                Some((_, e)) => (false, end.min(e)),
                None => {
                    let next_recalled = entry.recalled.next_start_after(pos).unwrap_or(u64::MAX);
                    (true, end.min(entry.valid).min(next_recalled))
                }
            };
            let part = &mut buf[at..at + (run_end - pos) as usize];
            if from_store {
                self.read_stream_map(&entry, pos, part)?;
            } else {
                // The backing file is `len` long, so it holds the whole run
                // unless it shrank under us: then the rest reads as zeros.
                let got = read_full_at(file, pos, part)?;
                part[got..].fill(0);
            }
            pos = run_end;
        }
        Ok((end - offset) as usize)
    }

    fn prepare_write(&self, ino: u64, file: &File, offset: u64, len: u64) -> io::Result<()> {
        let Some(mut entry) = self.table.get(ino) else {
            return Ok(());
        };
        let end = offset.saturating_add(len).min(entry.valid);
        if offset >= end {
            // An append or a write past `valid`: the backing file's bytes.
            return Ok(());
        }
        let g = granule(file.metadata()?.len());
        let first = offset / g * g;
        let last = end.div_ceil(g).saturating_mul(g).min(entry.valid);
        let gaps = entry.recalled.gaps(first, last);
        if gaps.is_empty() {
            return Ok(());
        }
        let mut chunk = Vec::new();
        for (start, stop) in gaps {
            let mut pos = start;
            while pos < stop {
                let n = (stop - pos).min(RECALL_STEP) as usize;
                chunk.resize(n, 0);
                self.read_stream_map(&entry, pos, &mut chunk)?;
                file.write_all_at(&chunk, pos)?;
                self.recalled_bytes.fetch_add(n as u64, Ordering::Relaxed);
                pos += n as u64;
            }
        }
        // The bytes are durable before the entry says they are there.
        file.sync_data()?;
        entry.recalled.insert(first, last);
        self.commit(entry)
    }

    fn truncated(&self, ino: u64, _file: &File, new_size: u64) -> io::Result<()> {
        let Some(mut entry) = self.table.get(ino) else {
            return Ok(());
        };
        if entry.valid <= new_size {
            return Ok(());
        }
        entry.clip(new_size);
        self.commit(entry)
    }

    fn released(&self, ino: u64) -> io::Result<()> {
        if self.table.contains(ino) {
            self.table.remove(ino).map_err(io::Error::other)?;
        }
        Ok(())
    }

    fn is_plain(&self, ino: u64) -> bool {
        !self.table.contains(ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granules_grow_with_the_file() {
        assert_eq!(granule(0), MIN_GRANULE);
        assert_eq!(granule(10 << 20), MIN_GRANULE);
        assert_eq!(granule(1 << 30), 1 << 20);
        assert_eq!(granule((1 << 30) + 1024), 2 << 20);
        assert_eq!(granule(1 << 40), MAX_GRANULE);
    }
}
