//! Random access to snapshot content: directory listings by blob, and any
//! byte range of a file without reading the rest of it (what `cairn mount`
//! serves a file system from).
//!
//! A range is found by descending the file's Merkle recipe: every node
//! records the logical size of each child, so a binary search over a node's
//! cumulative child ends picks the children covering the range, and only
//! the data chunks under them are read. Chunks are read with range reads
//! located through the metadata-section cache ([`MetaChunks`]), never by
//! loading whole containers. [`RandomAccess::read_into`] reads the chunks
//! that lie wholly inside its range and are stored uncompressed straight
//! into the caller's buffer and verifies them there (a primary volume's
//! sequential reads: one copy of each byte, none cached); other chunks are
//! decoded, verified and kept in an LRU bounded in bytes
//! ([`SharedChunks`]), so a sequential `cat` through many small reads reads
//! each chunk once. Several readers (threads) may share
//! one such cache: a chunk one of them is decoding is waited for, not
//! decoded twice, and [`RandomAccess::warm`] readies chunks ahead of the
//! reads (read-ahead: uncompressed runs fetched into the page cache by the
//! store, compressed chunks decoded into the cache). Decoded tree nodes and
//! directory listings have LRUs of their own per reader, bounded in
//! entries.
//!
//! Every node's level and children's sizes are checked against what its
//! parent recorded, and every data chunk's length against its recorded size,
//! as the restore path does (`read::plan`), so a damaged recipe is an
//! error, never wrong bytes.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Fingerprint, Result};
use cairn_format::container::{chunk_file_range, ContainerMeta, Descriptor};
use cairn_format::dir::{decode_dir, BlobRef, DirEntry};
use cairn_format::tree::decode_tree_node;
use lru::LruCache;
use parking_lot::{Condvar, Mutex};

use crate::codec::ChunkCodec;
use crate::read::blob_reader::BlobReader;
use crate::read::cache::{ChunkStore, MetaChunks, RestoreCache};
use crate::Repository;

/// One data chunk of a recipe, where it lies in the blob
/// ([`RandomAccess::leaf_ranges`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub fp: Fingerprint,
    /// Offset of its first byte in the blob.
    pub start: u64,
    pub size: u64,
}

impl Leaf {
    pub fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// How much a [`RandomAccess`] keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// Bytes of decoded data chunks (one chunk more may be held while it
    /// is being copied out).
    pub chunk_bytes: usize,
    /// Decoded recipe tree nodes.
    pub nodes: usize,
    /// Decoded directory listings.
    pub listings: usize,
    /// Container metadata sections (the chunk locator of every read).
    pub metadata_sections: usize,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            chunk_bytes: 32 << 20,
            nodes: 1024,
            listings: 1024,
            metadata_sections: 16,
        }
    }
}

/// A decoded tree node with the end offset of each child (relative to the
/// node's start), for binary search.
struct Node {
    fps: Vec<Fingerprint>,
    ends: Vec<u64>,
}

/// A listing is named by its whole reference: the same root fingerprint
/// read as another level or size would be a damaged parent, not a hit.
type ListingKey = (Fingerprint, u8, u64);

/// Reads listings and file ranges of one repository, through bounded caches.
pub struct RandomAccess {
    store: ChunkStore,
    meta: MetaChunks,
    chunks: Arc<SharedChunks>,
    nodes: LruCache<Fingerprint, Arc<Node>>,
    listings: LruCache<ListingKey, Arc<Vec<DirEntry>>>,
    buf: Vec<u8>,
    /// The stored bytes of [`RandomAccess::warm`]'s range reads, reused
    /// from read to read.
    range_buf: Vec<u8>,
}

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n.max(1)).expect("at least one")
}

impl RandomAccess {
    /// Opens the repository's chunk locator (the index, or the containers'
    /// metadata when the index is damaged, as restore does).
    pub fn open(repo: &Repository, limits: CacheLimits) -> Result<Self> {
        Self::open_shared(repo, limits, SharedChunks::new(limits.chunk_bytes))
    }

    /// As [`RandomAccess::open`], keeping decoded chunks in `chunks`
    /// (shared with other readers of the same repository) instead of a
    /// cache of its own; `limits.chunk_bytes` is then unused.
    pub fn open_shared(
        repo: &Repository,
        limits: CacheLimits,
        chunks: Arc<SharedChunks>,
    ) -> Result<Self> {
        let store = ChunkStore::new(
            repo.log.clone(),
            crate::read::open_locator(repo)?,
            crate::codec::ChunkCodec::for_repo(repo),
        );
        Ok(RandomAccess {
            store,
            meta: MetaChunks::new(limits.metadata_sections),
            chunks,
            nodes: LruCache::new(cap(limits.nodes)),
            listings: LruCache::new(cap(limits.listings)),
            buf: Vec::new(),
            range_buf: Vec::new(),
        })
    }

    /// The entries of a directory listing (`None`: an empty directory),
    /// decoded once while it stays in the cache.
    pub fn read_dir(&mut self, listing: Option<&BlobRef>) -> Result<Arc<Vec<DirEntry>>> {
        let Some(b) = listing else {
            return Ok(Arc::new(Vec::new()));
        };
        let key = (b.root, b.level, b.size);
        if let Some(hit) = self.listings.get(&key) {
            return Ok(hit.clone());
        }
        let bytes = BlobReader::new(&self.store, &mut self.meta).read_all(b)?;
        let entries = Arc::new(decode_dir(&bytes, self.store.fp_width())?);
        self.listings.put(key, entries.clone());
        Ok(entries)
    }

    /// Appends to `out` the logical bytes `[offset, offset + len)` of file
    /// `e` (zeros in a sparse file's holes), cut at its end.
    pub fn read_file_at(
        &mut self,
        e: &DirEntry,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let Some(ext) = &e.extras.extents else {
            return match &e.content {
                Some(b) => self.read_at(b, offset, len, out),
                None => Ok(()),
            };
        };
        let hi = offset.saturating_add(len as u64).min(e.size);
        let mut pos = offset;
        let mut data = 0u64; // content offset where extent `x` starts
        for x in ext {
            if pos >= hi {
                break;
            }
            if x.end() > pos && x.offset < hi {
                let from = x.offset.max(pos);
                let to = x.end().min(hi);
                out.resize(out.len() + (from - pos) as usize, 0);
                let blob = e
                    .content
                    .as_ref()
                    .ok_or_else(|| Error::corrupt("sparse file", "extents without content"))?;
                let before = out.len();
                self.read_at(blob, data + (from - x.offset), (to - from) as usize, out)?;
                if (out.len() - before) as u64 != to - from {
                    return Err(Error::corrupt(
                        "sparse file",
                        "content shorter than its extents",
                    ));
                }
                pos = to;
            }
            data += x.len;
        }
        if pos < hi {
            out.resize(out.len() + (hi - pos) as usize, 0);
        }
        Ok(())
    }

    /// Appends to `out` the bytes `[offset, offset + len)` of the blob,
    /// cut at its end (nothing at or past the end).
    pub fn read_at(
        &mut self,
        blob: &BlobRef,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let hi = offset.saturating_add(len as u64).min(blob.size);
        if offset >= hi {
            return Ok(());
        }
        out.reserve((hi - offset) as usize);
        self.range(blob.root, blob.level, blob.size, 0, offset, hi, out)
    }

    /// Copies the blob's bytes at `offset` into `out`, as many as there
    /// are before its end; returns how many.
    ///
    /// Chunks that lie wholly inside the range, are stored raw, sit back to
    /// back in one container, and that no reader holds or is decoding, are
    /// read straight into `out` (one range read per run) and verified
    /// there: no buffer between the file and `out`, and no cache entry (a
    /// sequential reader asks for each byte once). A chunk cut by the
    /// range's edge, a compressed one, or one already cached goes through
    /// the chunk cache, so the read that continues past the edge finds it
    /// decoded.
    pub fn read_into(&mut self, blob: &BlobRef, offset: u64, out: &mut [u8]) -> Result<usize> {
        let hi = offset.saturating_add(out.len() as u64).min(blob.size);
        if offset >= hi {
            return Ok(0);
        }
        let leaves = self.leaf_ranges(blob, offset, hi - offset)?;
        // The pending run of direct chunks: where it starts in `out`, its
        // container and the chunks' descriptors.
        let mut run: Option<DirectRun> = None;
        for leaf in leaves {
            let at = (leaf.start.max(offset) - offset) as usize;
            let direct = if leaf.start >= offset
                && leaf.end() <= hi
                && !self.chunks.held_or_claimed(&leaf.fp)
            {
                let (meta, d) = self.meta.locate(&leaf.fp, &self.store)?;
                (ChunkCodec::stored_raw(&d) && u64::from(d.raw_len) == leaf.size)
                    .then_some((meta.id, d))
            } else {
                None
            };
            if let Some((container, d)) = direct {
                if let Some(r) = run.as_mut().filter(|r| r.continues(container, &d)) {
                    r.chunks.push(d);
                    continue;
                }
                if let Some(r) = run.take() {
                    self.read_direct(&r, out)?;
                }
                run = Some(DirectRun {
                    at,
                    container,
                    chunks: vec![d],
                });
                continue;
            }
            if let Some(r) = run.take() {
                self.read_direct(&r, out)?;
            }
            let chunk = self.chunk(&leaf.fp, leaf.size)?;
            let from = (offset.max(leaf.start) - leaf.start) as usize;
            let to = (hi.min(leaf.end()) - leaf.start) as usize;
            out[at..at + (to - from)].copy_from_slice(&chunk[from..to]);
        }
        if let Some(r) = run.take() {
            self.read_direct(&r, out)?;
        }
        Ok((hi - offset) as usize)
    }

    /// Reads run `r` of [`RandomAccess::read_into`] into its place in
    /// `out` with one range read, then verifies each chunk where it lies.
    fn read_direct(&mut self, r: &DirectRun, out: &mut [u8]) -> Result<()> {
        let (meta, _) = self.meta.locate(&r.chunks[0].fp, &self.store)?;
        let Range { start, end } = run_file_range(meta, &r.chunks);
        let dest = out
            .get_mut(r.at..r.at + (end - start) as usize)
            .ok_or_else(|| {
                Error::corrupt(
                    format!("container {}", meta.id),
                    "chunk run overruns the read",
                )
            })?;
        self.store
            .log
            .read_range_into_slice(meta, start..end, dest)?;
        let mut at = 0;
        for d in &r.chunks {
            let n = d.raw_len as usize;
            self.store.codec.verify_raw(&dest[at..at + n], meta, d)?;
            at += n;
        }
        Ok(())
    }

    /// The data chunks of the blob that hold bytes of `[offset, offset +
    /// len)`, in order, each with where it starts in the blob and its
    /// size: the recipe's leaves, found by descending only the nodes over
    /// the range (no data chunk is read). A caller that keeps some of a
    /// stored file's chunks and replaces others (the primary volume's
    /// incremental optimization) splices a new recipe from them.
    pub fn leaf_ranges(&mut self, blob: &BlobRef, offset: u64, len: u64) -> Result<Vec<Leaf>> {
        let hi = offset.saturating_add(len).min(blob.size);
        let mut out = Vec::new();
        if offset >= hi {
            return Ok(out);
        }
        self.visit_leaves(
            blob.root,
            blob.level,
            blob.size,
            0,
            offset,
            hi,
            &mut |_, fp, start, size| {
                out.push(Leaf { fp, start, size });
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Readies the chunks under the blob's bytes `[offset, offset + len)`
    /// that the cache neither holds nor sees being decoded by another
    /// reader, for reads soon after (read-ahead). Chunks stored back to
    /// back in one container are taken as one run (content is stored in
    /// the order it was written, so a stream's read-ahead sees its
    /// containers in large pieces, not chunk by chunk):
    ///
    /// - a run of chunks stored raw is only fetched in the background by
    ///   the store ([`ContainerStore::prefetch_range`]: local files into
    ///   the page cache), since [`RandomAccess::read_into`] reads such
    ///   chunks straight into its caller's buffer and verifies them there;
    /// - a run of compressed chunks, or raw ones on a store that cannot
    ///   fetch in the background, is read with one range read, decoded,
    ///   verified and cached, so the read finds them decoded (if the
    ///   cache still holds them).
    ///
    /// [`ContainerStore::prefetch_range`]: crate::container_log::ContainerStore::prefetch_range
    pub fn warm(&mut self, blob: &BlobRef, offset: u64, len: u64) -> Result<()> {
        let leaves = self.leaf_ranges(blob, offset, len)?;
        let chunks = self.chunks.clone();
        let mut wanted: Vec<(ContainerId, Descriptor)> = Vec::new();
        for Leaf { fp, .. } in leaves {
            if chunks.held_or_claimed(&fp) {
                continue;
            }
            let (meta, d) = self.meta.locate(&fp, &self.store)?;
            wanted.push((meta.id, d));
        }
        while !wanted.is_empty() {
            // The run of chunks stored back to back in the first's
            // container, all raw or all not.
            let raw = ChunkCodec::stored_raw(&wanted[0].1);
            let mut n = 1;
            while n < wanted.len()
                && wanted[n].0 == wanted[0].0
                && ChunkCodec::stored_raw(&wanted[n].1) == raw
                && stored_after(&wanted[n - 1].1, &wanted[n].1)
            {
                n += 1;
            }
            let run: Vec<Descriptor> = wanted.drain(..n).map(|(_, d)| d).collect();
            let (meta, _) = self.meta.locate(&run[0].fp, &self.store)?;
            let Range { start, end } = run_file_range(meta, &run);
            if raw && self.store.log.prefetch_range(meta, start..end) {
                continue;
            }
            let claimed: Vec<_> = run
                .iter()
                .filter_map(|d| Some((chunks.try_claim(&d.fp)?, *d)))
                .collect();
            if claimed.is_empty() {
                continue;
            }
            self.store
                .log
                .read_range_into(meta, start..end, &mut self.range_buf)?;
            for (claim, d) in claimed {
                let at = (u64::from(d.offset) - u64::from(run[0].offset)) as usize;
                let stored = self
                    .range_buf
                    .get(at..at + d.stored_len as usize)
                    .ok_or_else(|| {
                        Error::corrupt(format!("container {}", meta.id), "range read came short")
                    })?;
                let mut out = chunks.spare_buffer(d.raw_len as usize);
                self.store
                    .codec
                    .decode_stored_verified(stored, meta, &d, &mut out)?;
                claim.fill(Arc::new(out));
            }
        }
        Ok(())
    }

    /// Calls `leaf(self, fp, base, size)` for each data chunk of the
    /// subtree `fp` (`size` bytes starting at absolute offset `base`, at
    /// tree `level`) that holds bytes of `[lo, hi)`, in order; the caller
    /// guarantees the two ranges overlap.
    #[allow(clippy::too_many_arguments)]
    fn visit_leaves(
        &mut self,
        fp: Fingerprint,
        level: u8,
        size: u64,
        base: u64,
        lo: u64,
        hi: u64,
        leaf: &mut dyn FnMut(&mut Self, Fingerprint, u64, u64) -> Result<()>,
    ) -> Result<()> {
        if level == 0 {
            return leaf(self, fp, base, size);
        }
        let node = self.node(&fp, level, size)?;
        // The first child ending after `lo`.
        let first = node.ends.partition_point(|&end| base + end <= lo);
        for i in first..node.fps.len() {
            let start = base + if i == 0 { 0 } else { node.ends[i - 1] };
            if start >= hi {
                break;
            }
            let child_size = node.ends[i] - (start - base);
            self.visit_leaves(node.fps[i], level - 1, child_size, start, lo, hi, leaf)?;
        }
        Ok(())
    }

    /// Appends `[lo, hi)` (absolute offsets) of the subtree `fp` of
    /// `size` bytes that starts at `base`; the caller guarantees the two
    /// ranges overlap.
    #[allow(clippy::too_many_arguments)]
    fn range(
        &mut self,
        fp: Fingerprint,
        level: u8,
        size: u64,
        base: u64,
        lo: u64,
        hi: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.visit_leaves(fp, level, size, base, lo, hi, &mut |me, fp, base, size| {
            let chunk = me.chunk(&fp, size)?;
            let from = (lo.max(base) - base) as usize;
            let to = (hi.min(base + size) - base) as usize;
            out.extend_from_slice(&chunk[from..to]);
            Ok(())
        })
    }

    /// A decoded tree node, checked against what its parent recorded.
    fn node(&mut self, fp: &Fingerprint, level: u8, size: u64) -> Result<Arc<Node>> {
        let node = match self.nodes.get(fp) {
            Some(n) => n.clone(),
            None => {
                self.meta.read_chunk(fp, &self.store, &mut self.buf)?;
                let decoded = decode_tree_node(&self.buf, self.store.fp_width())?;
                if decoded.level != level {
                    return Err(Error::corrupt(
                        format!("tree node {fp}"),
                        format!("has level {}, its parent expects {level}", decoded.level),
                    ));
                }
                let mut end = 0u64;
                let mut n = Node {
                    fps: Vec::with_capacity(decoded.children.len()),
                    ends: Vec::with_capacity(decoded.children.len()),
                };
                for c in decoded.children {
                    end = end.checked_add(c.size).ok_or_else(|| {
                        Error::corrupt(format!("tree node {fp}"), "child sizes overflow")
                    })?;
                    n.fps.push(c.fp);
                    n.ends.push(end);
                }
                let n = Arc::new(n);
                self.nodes.put(*fp, n.clone());
                n
            }
        };
        let total = node.ends.last().copied().unwrap_or(0);
        if total != size {
            return Err(Error::corrupt(
                format!("tree under {fp}"),
                format!("recorded size {size} bytes, its children add up to {total}"),
            ));
        }
        Ok(node)
    }

    /// A decoded, verified data chunk of the recorded `size`.
    fn chunk(&mut self, fp: &Fingerprint, size: u64) -> Result<Arc<Vec<u8>>> {
        let chunk = match self.chunks.get_or_claim(fp) {
            Some(c) => c,
            None => {
                // Claimed: this reader decodes it; others asking wait.
                let claim = Claim {
                    chunks: &self.chunks,
                    fp: *fp,
                };
                let mut bytes = Vec::new();
                self.meta.read_chunk(fp, &self.store, &mut bytes)?;
                // Moved, not copied, into the cache.
                let c = Arc::new(bytes);
                claim.fill(c.clone());
                c
            }
        };
        if chunk.len() as u64 != size {
            return Err(Error::corrupt(
                format!("chunk {fp}"),
                format!("recorded as {size} bytes, holds {}", chunk.len()),
            ));
        }
        Ok(chunk)
    }

    /// Bytes of decoded data chunks held now (by every reader sharing
    /// this one's cache).
    pub fn cached_chunk_bytes(&self) -> usize {
        self.chunks.bytes()
    }
}

/// Chunks of one container stored raw and back to back, read by
/// [`RandomAccess::read_into`] with one range read into `out[at..]`.
struct DirectRun {
    at: usize,
    container: ContainerId,
    chunks: Vec<Descriptor>,
}

impl DirectRun {
    /// Whether chunk `d` of `container` is stored right after the run's
    /// last chunk (it then also follows it in the blob: the caller adds
    /// chunks in blob order).
    fn continues(&self, container: ContainerId, d: &Descriptor) -> bool {
        self.container == container && stored_after(&self.chunks[self.chunks.len() - 1], d)
    }
}

/// Whether chunk `d` is stored right after `prev` (in the same container).
fn stored_after(prev: &Descriptor, d: &Descriptor) -> bool {
    u64::from(d.offset) == u64::from(prev.offset) + u64::from(prev.stored_len)
}

/// The file range of a run of chunks stored back to back in container
/// `meta` (`run` in stored order, not empty): one range read covers it.
fn run_file_range(meta: &ContainerMeta, run: &[Descriptor]) -> Range<u64> {
    let start = chunk_file_range(meta, &run[0]).start;
    let end = chunk_file_range(meta, &run[run.len() - 1]).end;
    start..end
}

/// Decoded, verified data chunks in an LRU bounded in bytes, shared by the
/// readers ([`RandomAccess::open_shared`]) of one repository on any number
/// of threads. A chunk is decoded by one reader at a time: the first to
/// miss claims it, the others wait for it (read-ahead and the read that
/// catches up with it do the work once).
pub struct SharedChunks {
    state: Mutex<ChunkLru>,
    /// Signalled whenever a claim ends (filled or given up).
    claims_ended: Condvar,
}

struct ChunkLru {
    chunks: LruCache<Fingerprint, Arc<Vec<u8>>>,
    /// Buffers of evicted chunks that no reader held any more, handed out
    /// again for chunks about to be decoded ([`SharedChunks::spare_buffer`]):
    /// a stream read through the cache reuses memory it has touched
    /// instead of faulting in fresh zeroed pages for every chunk.
    spare: Vec<Vec<u8>>,
    /// Capacity held in `spare`; at most [`SharedChunks::spare_budget`].
    spare_bytes: usize,
    /// Bytes held in `chunks`; at most `budget` but for the most recent
    /// chunk (one chunk more may be held while it is being copied out).
    bytes: usize,
    budget: usize,
    /// Chunks some reader is decoding now (never also in `chunks`).
    claimed: HashSet<Fingerprint>,
}

impl SharedChunks {
    /// An empty cache of `budget` bytes.
    pub fn new(budget: usize) -> Arc<Self> {
        Arc::new(SharedChunks {
            state: Mutex::new(ChunkLru {
                chunks: LruCache::unbounded(),
                spare: Vec::new(),
                spare_bytes: 0,
                bytes: 0,
                budget,
                claimed: HashSet::new(),
            }),
            claims_ended: Condvar::new(),
        })
    }

    /// Bytes of decoded chunks held now.
    pub fn bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// Capacity of evicted chunks' buffers kept for reuse: a quarter of
    /// the cache, at most 16 MiB (twice a volume's read-ahead window).
    fn spare_budget(budget: usize) -> usize {
        (budget / 4).min(16 << 20)
    }

    /// An empty buffer for a chunk of `len` bytes: a spare one that holds
    /// it if there is one, else a new one.
    fn spare_buffer(&self, len: usize) -> Vec<u8> {
        let mut st = self.state.lock();
        match st.spare.iter().rposition(|b| b.capacity() >= len) {
            Some(i) => {
                let mut b = st.spare.swap_remove(i);
                st.spare_bytes -= b.capacity();
                b.clear();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    /// Whether `fp` is held or some reader is decoding it.
    fn held_or_claimed(&self, fp: &Fingerprint) -> bool {
        let st = self.state.lock();
        st.chunks.contains(fp) || st.claimed.contains(fp)
    }

    /// `fp` claimed by the caller, unless it is held or being decoded.
    fn try_claim(&self, fp: &Fingerprint) -> Option<Claim<'_>> {
        let mut st = self.state.lock();
        if st.chunks.contains(fp) || !st.claimed.insert(*fp) {
            return None;
        }
        Some(Claim {
            chunks: self,
            fp: *fp,
        })
    }

    /// The chunk if held (waiting while another reader decodes it), else
    /// `None` with `fp` claimed by the caller, who must end the claim
    /// ([`Claim`]).
    fn get_or_claim(&self, fp: &Fingerprint) -> Option<Arc<Vec<u8>>> {
        let mut st = self.state.lock();
        loop {
            if let Some(c) = st.chunks.get(fp) {
                return Some(c.clone());
            }
            if st.claimed.insert(*fp) {
                return None;
            }
            self.claims_ended.wait(&mut st);
        }
    }
}

/// A claim on one chunk: filled with its bytes, or (dropped unfilled, the
/// read failed) given up so that a waiting reader tries itself.
struct Claim<'a> {
    chunks: &'a SharedChunks,
    fp: Fingerprint,
}

impl Claim<'_> {
    fn fill(self, chunk: Arc<Vec<u8>>) {
        let mut st = self.chunks.state.lock();
        st.bytes += chunk.len();
        st.chunks.put(self.fp, chunk);
        while st.bytes > st.budget && st.chunks.len() > 1 {
            if let Some((_, old)) = st.chunks.pop_lru() {
                st.bytes -= old.len();
                // Kept for reuse unless a reader still copies out of it.
                if let Ok(buf) = Arc::try_unwrap(old) {
                    if st.spare_bytes + buf.capacity() <= SharedChunks::spare_budget(st.budget) {
                        st.spare_bytes += buf.capacity();
                        st.spare.push(buf);
                    }
                }
            }
        }
        // The claim ends in `drop`, with the chunk already in place.
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.chunks.state.lock().claimed.remove(&self.fp);
        self.chunks.claims_ended.notify_all();
    }
}

#[cfg(test)]
#[path = "random_access_tests.rs"]
mod tests;
