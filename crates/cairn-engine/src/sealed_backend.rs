//! Sealed storage of an encrypted repository (`docs/security.md`, "Sealed
//! objects"): every object the engine writes, except `config` and the key
//! files (which protect themselves), is stored as a run of independently
//! sealed blocks, and every read is authenticated before a byte of it is
//! returned.
//!
//! ```text
//! object := block*   (at least one; the last may be short; an empty object is one empty block)
//! block  := seal(ad = "cairn block\0" | name | "\0" | index u64 LE | last u8, plaintext[16 KiB])
//! ```
//!
//! Why blocks rather than whole objects: containers and index files are
//! read by range (one chunk, one index page), so each block opens on its
//! own, and a ranged read of `len` bytes reads and authenticates at most
//! `len + 2 × 16 KiB` (plus 40 bytes a block). Why not per chunk: one
//! mechanism then covers every object kind (containers with their data
//! and metadata sections, index files and deltas, Summary Vector
//! checkpoints, snapshot records, collection state), including any added
//! later, and chunk boundaries do not show in the stored bytes.
//!
//! The associated data binds each block to its object's name, its place
//! and whether it ends the object: a block moved within or between objects,
//! an object renamed, reordered or cut at a block boundary fails to open.
//! A read that ends before the last block does not see a cut after it, but
//! everything it returns is authentic.
//!
//! Sizes and offsets seen by the engine are the plaintext's: a sealed
//! object of `n` blocks holds `n × 40` bytes more than its plaintext.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_core::{Backend, Error, Result, Salvaged};
use parking_lot::Mutex;

use crate::object_names;
use crate::repo_keys::RepoKeys;

/// Plaintext bytes per sealed block.
pub const BLOCK: usize = 16 * 1024;

/// An encrypted repository's backend: seals on write, opens on read.
pub struct SealedBackend {
    inner: Arc<dyn Backend>,
    keys: Arc<RepoKeys>,
    /// Sealed sizes of containers read so far (containers never change
    /// once written, and their ids are never reused), so a ranged read of
    /// a chunk costs no size query.
    container_sizes: Mutex<HashMap<String, u64>>,
    /// The buffer objects are sealed into, kept between writes: a fresh
    /// 4 MiB buffer per container costs more in page faults and zeroing
    /// than sealing it does. Taken with `try_lock`; a concurrent writer
    /// seals into its own.
    scratch: Mutex<Vec<u8>>,
}

/// What [`SealedBackend::open_each`] does with a block that fails to open:
/// called with its plaintext length, the error naming it and the output.
type OnFailedBlock<'a> = dyn FnMut(usize, Error, &mut Vec<u8>) -> Result<()> + 'a;

/// Largest sealing buffer kept between writes.
const SCRATCH_KEEP: usize = 8 << 20;

/// A write's sealed bytes: in the shared scratch buffer, or its own.
enum Sealed<'a> {
    Scratch(&'a [u8]),
    Own(Vec<u8>),
}

impl Sealed<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Sealed::Scratch(b) => b,
            Sealed::Own(b) => b,
        }
    }
}

impl SealedBackend {
    pub fn new(inner: Arc<dyn Backend>, keys: Arc<RepoKeys>) -> Self {
        SealedBackend {
            inner,
            keys,
            container_sizes: Mutex::new(HashMap::new()),
            scratch: Mutex::new(Vec::new()),
        }
    }

    fn sealed_block(&self) -> usize {
        BLOCK + self.keys.overhead()
    }

    /// Objects stored as they are: the config (its secret part is sealed
    /// inside it) and the key files.
    fn is_clear(name: &str) -> bool {
        name == object_names::CONFIG || name.starts_with(object_names::KEYS)
    }

    fn seal_into(&self, name: &str, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let blocks = data.len().div_ceil(BLOCK).max(1);
        out.clear();
        out.reserve(data.len() + blocks * self.keys.overhead());
        for i in 0..blocks {
            let piece = &data[(i * BLOCK).min(data.len())..((i + 1) * BLOCK).min(data.len())];
            self.keys
                .seal(&block_ad(name, i as u64, i + 1 == blocks), piece, out)?;
        }
        Ok(())
    }

    /// Seals `data` as object `name` and hands the sealed bytes to `write`:
    /// in the scratch buffer, or in a buffer of their own when another
    /// write holds it (parallel uploads), which `write` may then give away.
    fn write_sealed<T>(
        &self,
        name: &str,
        data: &[u8],
        write: impl FnOnce(Sealed<'_>) -> Result<T>,
    ) -> Result<T> {
        self.forget_size(name);
        let Some(mut buf) = self.scratch.try_lock() else {
            let mut own = Vec::new();
            self.seal_into(name, data, &mut own)?;
            return write(Sealed::Own(own));
        };
        self.seal_into(name, data, &mut buf)?;
        let written = write(Sealed::Scratch(&buf));
        if buf.capacity() > SCRATCH_KEEP {
            *buf = Vec::new();
        }
        written
    }

    /// The plaintext size of an object of `sealed` bytes.
    fn plain_size(&self, name: &str, sealed: u64) -> Result<u64> {
        let (sb, over) = (self.sealed_block() as u64, self.keys.overhead() as u64);
        let (full, rest) = (sealed / sb, sealed % sb);
        match rest {
            0 if full > 0 => Ok(full * BLOCK as u64),
            // Only an empty object ends in an empty block.
            r if r == over && full == 0 => Ok(0),
            r if r > over => Ok(full * BLOCK as u64 + (r - over)),
            _ => Err(Error::corrupt(
                name,
                format!("{sealed} bytes cannot be a sealed object (truncated?)"),
            )),
        }
    }

    fn sealed_size(&self, name: &str) -> Result<u64> {
        if name.starts_with(object_names::CONTAINERS) {
            if let Some(&s) = self.container_sizes.lock().get(name) {
                return Ok(s);
            }
            let s = self.inner.size(name)?;
            self.container_sizes.lock().insert(name.to_string(), s);
            return Ok(s);
        }
        self.inner.size(name)
    }

    /// Opens blocks `first..=last` of `name`, of `sealed` bytes stored and
    /// `size` bytes of plaintext, and returns their plaintext. Their
    /// stored bytes come from `suffix` (the object's last stored bytes,
    /// already read) when it holds them, else from the store.
    fn open_blocks(
        &self,
        name: &str,
        (sealed, size): (u64, u64),
        first: u64,
        last: u64,
        suffix: &[u8],
    ) -> Result<Vec<u8>> {
        let sb = self.sealed_block() as u64;
        let blocks = size.div_ceil(BLOCK as u64).max(1);
        let start = first * sb;
        let end = ((last + 1) * sb).min(sealed);
        let suffix_start = sealed - suffix.len() as u64;
        if start >= suffix_start {
            let run = &suffix[(start - suffix_start) as usize..(end - suffix_start) as usize];
            return self.open_run(name, run, first, blocks);
        }
        let bytes = self.inner.read_at(name, start, (end - start) as usize)?;
        self.open_run(name, &bytes, first, blocks)
    }

    /// Opens a whole sealed object, `bytes` as stored.
    fn open_whole(&self, name: &str, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let plain = self.plain_size(name, bytes.len() as u64)?;
        self.open_run(name, &bytes, 0, plain.div_ceil(BLOCK as u64).max(1))
    }

    /// Opens consecutive sealed blocks, the first of them block `first` of
    /// an object of `blocks` blocks.
    fn open_run(&self, name: &str, bytes: &[u8], first: u64, blocks: u64) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(bytes.len());
        self.open_each(name, bytes, first, blocks, &mut out, &mut |_, e, _| Err(e))?;
        Ok(out)
    }

    /// Opens consecutive sealed blocks into `out` (as [`Self::open_run`]);
    /// a block that fails goes to `failed(its plaintext length, error naming
    /// the block, out)`, which stops the run by returning the error, or goes on
    /// (after putting what it wants in the block's place). Nothing of a
    /// failed block reaches `out` from here.
    fn open_each(
        &self,
        name: &str,
        bytes: &[u8],
        first: u64,
        blocks: u64,
        out: &mut Vec<u8>,
        failed: &mut OnFailedBlock<'_>,
    ) -> Result<()> {
        for (i, block) in bytes.chunks(self.sealed_block()).enumerate() {
            let index = first + i as u64;
            let ad = block_ad(name, index, index + 1 == blocks);
            if let Err(e) = self.keys.open(&ad, block, out) {
                let plain = block.len().saturating_sub(self.keys.overhead());
                failed(plain, block_error(name, index, e), out)?;
            }
        }
        Ok(())
    }

    /// `len` bytes at `offset` of the object `key` of `sealed` stored and
    /// `size` plaintext bytes.
    fn read_range(
        &self,
        key: &str,
        sealed: u64,
        size: u64,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        self.read_range_from(key, (sealed, size), offset, len, &[])
    }

    /// [`Self::read_range`], the stored bytes taken from `suffix` (the
    /// object's last stored bytes, already read) where it holds them.
    fn read_range_from(
        &self,
        key: &str,
        (sealed, size): (u64, u64),
        offset: u64,
        len: usize,
        suffix: &[u8],
    ) -> Result<Vec<u8>> {
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(Error::corrupt(
                key,
                format!("truncated: {len} bytes at offset {offset} are past its {size} bytes"),
            ));
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let b = BLOCK as u64;
        let (first, last) = (offset / b, (offset + len as u64 - 1) / b);
        let mut plain = self.open_blocks(key, (sealed, size), first, last, suffix)?;
        let skip = (offset - first * b) as usize;
        plain.truncate(skip + len);
        plain.drain(..skip);
        Ok(plain)
    }

    fn forget_size(&self, name: &str) {
        if name.starts_with(object_names::CONTAINERS) {
            self.container_sizes.lock().remove(name);
        }
    }
}

/// An authentication failure named by object and block.
fn block_error(name: &str, index: u64, e: Error) -> Error {
    match e {
        Error::Authentication { .. } => Error::Authentication {
            what: format!("{name} (block {index})"),
        },
        e => e,
    }
}

fn block_ad(name: &str, index: u64, last: bool) -> Vec<u8> {
    let mut ad = Vec::with_capacity(name.len() + 24);
    ad.extend_from_slice(b"cairn block\0");
    ad.extend_from_slice(name.as_bytes());
    ad.push(0);
    ad.extend_from_slice(&index.to_le_bytes());
    ad.push(last as u8);
    ad
}

impl Backend for SealedBackend {
    cairn_core::delegate_backend!(
        inner: list, lock, clean_temporaries, describe, write_parallelism, read_parallelism
    );

    fn read(&self, key: &str) -> Result<Vec<u8>> {
        if Self::is_clear(key) {
            return self.inner.read(key);
        }
        self.open_whole(key, self.inner.read(key)?)
    }

    fn read_stable(&self, key: &str) -> Result<Vec<u8>> {
        if Self::is_clear(key) {
            return self.inner.read_stable(key);
        }
        self.open_whole(key, self.inner.read_stable(key)?)
    }

    /// Opens every block it can and zero-fills the rest: one damaged block
    /// costs the chunks that overlap it, not the whole container (the clear
    /// format's per-chunk salvage, at block granularity). An object none of
    /// whose blocks opens (a wrong key, a renamed object) is an error, as is
    /// a stored size no run of blocks can have.
    fn read_salvaging(&self, key: &str) -> Result<Salvaged> {
        if Self::is_clear(key) {
            return self.inner.read_salvaging(key);
        }
        let stored = self.inner.read(key)?;
        let size = self.plain_size(key, stored.len() as u64)?;
        let blocks = size.div_ceil(BLOCK as u64).max(1);
        let mut bytes = Vec::with_capacity(size as usize);
        let (mut damaged, mut first_error) = (Vec::new(), None);
        self.open_each(key, &stored, 0, blocks, &mut bytes, &mut |plain, e, out| {
            let start = out.len() as u64;
            out.resize(out.len() + plain, 0);
            damaged.push((start..start + plain as u64, e.to_string()));
            first_error.get_or_insert(e);
            Ok(())
        })?;
        match first_error {
            Some(e) if damaged.len() as u64 == blocks => Err(e),
            _ => Ok(Salvaged { bytes, damaged }),
        }
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        if Self::is_clear(key) {
            return self.inner.read_at(key, offset, len);
        }
        let sealed = self.sealed_size(key)?;
        let size = self.plain_size(key, sealed)?;
        self.read_range(key, sealed, size, offset, len)
    }

    /// With the stored size not known yet, one suffix read of the stored
    /// bytes that brings the size too (on object storage a ranged GET,
    /// where the size first cost a HEAD: a container's metadata read was
    /// two round trips).
    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        if Self::is_clear(key) {
            return self.inner.read_tail(key, len);
        }
        let known = key.starts_with(object_names::CONTAINERS)
            && self.container_sizes.lock().contains_key(key);
        let (sealed, suffix) = if known {
            (self.sealed_size(key)?, Vec::new())
        } else {
            // `len` bytes of plaintext span at most this many blocks.
            let want = (len.div_ceil(BLOCK) + 1) * self.sealed_block();
            let (sealed, suffix) = self.inner.read_tail(key, want)?;
            if key.starts_with(object_names::CONTAINERS) {
                self.container_sizes.lock().insert(key.to_string(), sealed);
            }
            (sealed, suffix)
        };
        let size = self.plain_size(key, sealed)?;
        let take = (len as u64).min(size);
        Ok((
            size,
            self.read_range_from(key, (sealed, size), size - take, take as usize, &suffix)?,
        ))
    }

    fn size(&self, key: &str) -> Result<u64> {
        if Self::is_clear(key) {
            return self.inner.size(key);
        }
        let sealed = self.sealed_size(key)?;
        self.plain_size(key, sealed)
    }

    fn exists(&self, key: &str) -> Result<bool> {
        self.inner.exists(key)
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        if Self::is_clear(key) {
            return self.inner.write_atomic(key, data);
        }
        self.write_sealed(key, data, |sealed| match sealed {
            Sealed::Scratch(b) => self.inner.write_atomic(key, b),
            Sealed::Own(b) => self.inner.write_atomic_owned(key, b),
        })
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        if Self::is_clear(key) {
            return self.inner.create_new(key, data);
        }
        self.write_sealed(key, data, |sealed| {
            self.inner.create_new(key, sealed.bytes())
        })
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.forget_size(key);
        self.inner.delete(key)
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        keys.iter().for_each(|k| self.forget_size(k));
        self.inner.delete_many(keys)
    }

    fn stored_size(&self, key: &str) -> Result<u64> {
        self.inner.size(key)
    }

    fn naming_key(&self) -> Option<&[u8; 32]> {
        Some(self.keys.naming_key())
    }

    /// Sealed like an object, under a name no object of the store has: the
    /// local cache keeps a note as it keeps the store's objects, sealed.
    fn read_local_note(&self, name: &str) -> Option<Vec<u8>> {
        let sealed = self.inner.read_local_note(name)?;
        self.open_whole(&local_note_name(name), sealed).ok()
    }

    fn write_local_note(&self, name: &str, bytes: &[u8]) {
        let mut sealed = Vec::new();
        if self
            .seal_into(&local_note_name(name), bytes, &mut sealed)
            .is_ok()
        {
            self.inner.write_local_note(name, &sealed);
        }
    }
}

/// The name a local note is sealed under (its blocks' associated data).
fn local_note_name(name: &str) -> String {
    format!("local-note/{name}")
}

#[cfg(test)]
#[path = "sealed_backend_tests.rs"]
mod tests;
