//! Chunk-level primitives for a scrub that keeps second copies of chunks
//! outside the store and repairs the store from them (the volume's scrub,
//! `docs/volume.md`, "Scrub"):
//!
//! - [`scan_container`]: read one container whole and verify every chunk
//!   (decompressed and rehashed, as `check --read-data` does);
//! - [`open_side_store`]: a container log in another directory, in the
//!   repository's container format and (if it is encrypted) sealed with
//!   its keys, for chunks kept beside the store;
//! - [`append_chunks`]: write stored chunks into a fresh container of any
//!   log;
//! - [`rewrite_chunks`]: write stored chunks into a fresh container of the
//!   repository, index them, forget lost chunks, and only then delete the
//!   containers they replace (the order `repair index --read-data`'s salvage
//!   keeps: a crash leaves duplicates, never a chunk unindexed);
//! - [`RecipeWalker`]: every chunk of a recipe (`BlobRef`) with the byte
//!   range of the blob it covers, and byte ranges of a recipe read with a
//!   fallback to a side store for chunks the store cannot give sound (the
//!   volume's reads served from second copies).
//!
//! Chunks move between logs as they are stored (compressed, not
//! re-encoded), so a copy is byte for byte the primary's payload.

use std::path::Path;
use std::sync::Arc;

use cairn_backend::LocalBackend;
use cairn_core::{Backend, ChunkKind, CompressionCodec, ContainerId, Error, Fingerprint, Result};
use cairn_format::compress::decompress;
use cairn_format::container::{stored_chunk, ContainerWriter, Descriptor};
use cairn_format::dir::BlobRef;
use cairn_format::index::IndexEntry;
use cairn_format::tree::decode_tree_node;

use crate::codec::ChunkCodec;
use crate::container_log::{ContainerLog, ContainerStore};
use crate::index::overlay::IndexUpdate;
use crate::read::cache::{ChunkStore, MetaChunks, RestoreCache};
use crate::repo::{Repository, WriteLock};
use crate::sealed_backend::SealedBackend;

/// One chunk as a container stores it: its descriptor's fields and its
/// stored (maybe compressed) payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredChunk {
    pub fp: Fingerprint,
    pub kind: ChunkKind,
    pub level: u8,
    pub codec: CompressionCodec,
    pub raw_len: u32,
    pub stored: Vec<u8>,
}

impl StoredChunk {
    fn of(d: &Descriptor, stored: &[u8]) -> Self {
        StoredChunk {
            fp: d.fp,
            kind: d.kind,
            level: d.level,
            codec: d.codec,
            raw_len: d.raw_len,
            stored: stored.to_vec(),
        }
    }
}

/// What [`scan_container`] found: every chunk with the reason it is
/// damaged, if it is.
pub struct ScannedContainer {
    pub id: ContainerId,
    /// Bytes of the container read.
    pub bytes: u64,
    /// Why the whole-container checksum failed, if it did (the chunks are
    /// then judged one by one).
    pub damage: Option<String>,
    /// Each chunk, in the container's order; a damaged one's payload may be
    /// empty (it lay outside the container).
    pub chunks: Vec<(StoredChunk, Option<String>)>,
}

impl ScannedContainer {
    pub fn damaged(&self) -> impl Iterator<Item = &StoredChunk> {
        self.chunks
            .iter()
            .filter(|(_, why)| why.is_some())
            .map(|(c, _)| c)
    }
}

/// Reads container `id` of `log` whole and verifies each chunk with the
/// repository's codec (`log` may be the repository's or a side store of
/// it). An unreadable container (its metadata section lost) is an error.
pub fn scan_container(
    repo: &Repository,
    log: &dyn ContainerStore,
    id: ContainerId,
) -> Result<ScannedContainer> {
    let c = log.read(id)?;
    let codec = ChunkCodec::for_repo(repo);
    let chunks = c
        .meta
        .descriptors
        .iter()
        .map(|d| match stored_chunk(&c.bytes, &c.meta, d) {
            Ok(stored) => (
                StoredChunk::of(d, stored),
                codec.check(&c.bytes, &c.meta, d),
            ),
            Err(e) => (StoredChunk::of(d, &[]), Some(e.to_string())),
        })
        .collect();
    Ok(ScannedContainer {
        id,
        bytes: c.bytes.len() as u64,
        damage: c.damage,
        chunks,
    })
}

/// Whether `chunk` decompresses to bytes matching its fingerprint; the
/// reason if not.
pub fn verify_stored(repo: &Repository, chunk: &StoredChunk) -> Option<String> {
    let mut raw = Vec::new();
    if let Err(e) = decompress(chunk.codec, &chunk.stored, chunk.raw_len as usize, &mut raw) {
        return Some(format!("chunk {}: {e}", chunk.fp));
    }
    (ChunkCodec::for_repo(repo).fingerprint(&raw) != chunk.fp)
        .then(|| format!("chunk {} does not match its fingerprint", chunk.fp))
}

/// A container log in `dir` for chunks kept beside the repository: the
/// repository's container format, sealed with its keys if it is
/// encrypted, ids of its own (with their own mark in `dir`). `for_writing`:
/// `dir` is created if absent and the log learns its next id; else `dir`
/// must exist and nothing is written.
pub fn open_side_store(
    repo: &Repository,
    dir: &Path,
    for_writing: bool,
) -> Result<Arc<dyn ContainerStore>> {
    let local: Arc<dyn Backend> = Arc::new(if for_writing {
        LocalBackend::create(dir)?
    } else {
        LocalBackend::open(dir)?
    });
    let backend: Arc<dyn Backend> = match repo.keys() {
        Some(keys) => Arc::new(SealedBackend::new(local, keys.clone())),
        None => local,
    };
    let log = ContainerLog::open(backend, repo.counters.clone())?;
    if for_writing {
        log.refresh_next_id(ContainerId(1))?;
    }
    Ok(Arc::new(log))
}

/// Writes `chunks` into one fresh container of `log` (durable when this
/// returns) and returns its id. `log` must have learnt its next id
/// (a side store does at open; the repository's log under the writer lock).
pub fn append_chunks(
    repo: &Repository,
    log: &dyn ContainerStore,
    chunks: &[StoredChunk],
) -> Result<ContainerId> {
    let id = log.allocate()?;
    let payload: usize = chunks.iter().map(|c| c.stored.len()).sum();
    let capacity = (repo.config.container_size as usize).max(payload);
    let mut w = ContainerWriter::new(id, repo.config.fp_width(), capacity);
    for c in chunks {
        w.push(c.fp, c.kind, c.level, c.codec, c.raw_len, &c.stored);
    }
    log.append(w)?;
    Ok(id)
}

/// Writes `chunks` into a fresh container of the repository and makes the
/// index name it for each of them (the newest copy wins,
/// `crate::canonical`); forgets the chunks in `forget` that the index
/// places in a container of `retire` (lost chunks: the next backup that
/// meets them stores them again); calls `before_retire` (a crash-test
/// hook: the new container is durable and indexed by then); then deletes
/// the `retire` containers, readers locked out. The caller holds `lock`
/// and has put in `chunks` every sound chunk of the `retire` containers
/// it means to keep. Returns the new container (`None` if `chunks` is
/// empty).
pub fn rewrite_chunks(
    repo: &Repository,
    lock: &WriteLock,
    chunks: &[StoredChunk],
    forget: &[Fingerprint],
    retire: &[ContainerId],
    before_retire: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<ContainerId>> {
    let new = if chunks.is_empty() {
        None
    } else {
        Some(append_chunks(repo, &*repo.log, chunks)?)
    };
    // Opened after the append: the new container is among the replayed
    // ones, whose entries the commit puts, so it covers every id below
    // the log's next one.
    let mut opened = crate::index::open_for_write(
        repo.backend().clone(),
        repo.counters.clone(),
        &*repo.log,
        &repo.config.index,
        &crate::warnings::Warnings::default(),
    )?;
    let mut removes = Vec::new();
    for fp in forget {
        if opened
            .kind
            .lookup(fp)?
            .is_some_and(|at| retire.contains(&at))
        {
            removes.push(*fp);
        }
    }
    let mut puts: Vec<IndexEntry> = opened
        .replayed
        .into_iter()
        .filter(|e| !retire.contains(&e.container))
        .collect();
    if let Some(id) = new {
        // Replay found them already unless the log hides new containers
        // from listings; putting them twice is harmless.
        puts.extend(chunks.iter().map(|c| IndexEntry {
            fp: c.fp,
            container: id,
        }));
    }
    opened.kind.commit(
        &**repo.backend(),
        IndexUpdate::new(puts, removes),
        repo.log.next_id(),
        repo.config.fp_width(),
        repo.config.index.page_size as usize,
    )?;
    before_retire()?;
    if !retire.is_empty() {
        let _readers_out = repo.lock_out_readers(lock, true)?;
        for &id in retire {
            repo.log.delete(id)?;
        }
    }
    Ok(new)
}

/// One chunk of a recipe: its level (0: data) and the blob's bytes
/// `[offset, offset + size)` it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecipeChunk {
    pub fp: Fingerprint,
    pub level: u8,
    pub offset: u64,
    pub size: u64,
}

/// Walks recipes, reading their tree nodes (each verified) through the
/// index; and reads byte ranges of them. With a side store
/// ([`RecipeWalker::with_side_store`]), a chunk that the store cannot give
/// sound is read from the side store instead (the volume's second copies).
pub struct RecipeWalker {
    store: ChunkStore,
    meta: MetaChunks,
    buf: Vec<u8>,
    side: Option<SideChunks>,
}

/// The chunks of a side store, found through its metadata sections.
struct SideChunks {
    log: Arc<dyn ContainerStore>,
    /// Fingerprint -> side container, read when a chunk is first missed
    /// and again when a chunk is not in it (the side store grows).
    map: Option<cairn_core::FpMap<ContainerId>>,
}

impl SideChunks {
    fn load(&mut self) -> Result<()> {
        let mut map = cairn_core::FpMap::default();
        for id in self.log.ids()? {
            // A side container whose metadata is damaged holds nothing usable.
            if let Ok(meta) = self.log.read_meta(id) {
                for d in meta.descriptors {
                    crate::canonical::place(&mut map, d.fp, id);
                }
            }
        }
        self.map = Some(map);
        Ok(())
    }

    /// Chunk `fp` decoded and verified into `out`.
    fn read(&mut self, fp: &Fingerprint, codec: &ChunkCodec, out: &mut Vec<u8>) -> Result<()> {
        if !self.map.as_ref().is_some_and(|m| m.contains_key(fp)) {
            self.load()?;
        }
        let id = self
            .map
            .as_ref()
            .and_then(|m| m.get(fp).copied())
            .ok_or_else(|| crate::index::missing_chunk(fp))?;
        let meta = self.log.read_meta(id)?;
        let d = meta
            .descriptors
            .iter()
            .find(|d| d.fp == *fp)
            .ok_or_else(|| crate::index::missing_chunk(fp))?;
        let stored = self.log.read_chunk(&meta, d)?;
        codec.decode_stored_verified(&stored, &meta, d, out)
    }
}

impl RecipeWalker {
    pub fn open(repo: &Repository) -> Result<Self> {
        Ok(RecipeWalker {
            store: ChunkStore::new(
                repo.log.clone(),
                crate::read::open_locator(repo)?,
                ChunkCodec::for_repo(repo),
            ),
            meta: MetaChunks::new(8),
            buf: Vec::new(),
            side: None,
        })
    }

    /// Chunks the store cannot give sound are read from `log` instead.
    pub fn with_side_store(mut self, log: Arc<dyn ContainerStore>) -> Self {
        self.side = Some(SideChunks { log, map: None });
        self
    }

    /// Chunk `fp`, decoded and verified, into `self.buf`: from the store,
    /// else from the side store (the store's error if neither has it).
    fn chunk(&mut self, fp: &Fingerprint) -> Result<()> {
        let primary = self.meta.read_chunk(fp, &self.store, &mut self.buf);
        match (primary, &mut self.side) {
            (Ok(()), _) => Ok(()),
            (Err(e), None) => Err(e),
            (Err(e), Some(side)) => {
                let codec = self.store.codec.clone();
                side.read(fp, &codec, &mut self.buf).map_err(|_| e)
            }
        }
    }

    /// Calls `visit` for every chunk of `blob`, parents before children, in
    /// byte order. A node that cannot be read, or that disagrees with what
    /// its parent recorded, is an error (the chunks visited so far stay
    /// visited).
    pub fn walk(&mut self, blob: &BlobRef, visit: &mut dyn FnMut(RecipeChunk)) -> Result<()> {
        self.node(blob.root, blob.level, 0, blob.size, visit)
    }

    fn node(
        &mut self,
        fp: Fingerprint,
        level: u8,
        offset: u64,
        size: u64,
        visit: &mut dyn FnMut(RecipeChunk),
    ) -> Result<()> {
        visit(RecipeChunk {
            fp,
            level,
            offset,
            size,
        });
        if level == 0 {
            return Ok(());
        }
        let node = self.tree_node(&fp, level, size)?;
        let mut at = offset;
        for c in node.children {
            self.node(c.fp, level - 1, at, c.size, visit)?;
            at += c.size;
        }
        Ok(())
    }

    /// Tree node `fp`, checked against what its parent recorded.
    fn tree_node(
        &mut self,
        fp: &Fingerprint,
        level: u8,
        size: u64,
    ) -> Result<cairn_format::tree::TreeNode> {
        self.chunk(fp)?;
        let node = decode_tree_node(&self.buf, self.store.fp_width())?;
        if node.level != level || node.size() != size {
            return Err(Error::corrupt(
                format!("tree node {fp}"),
                format!(
                    "level {} over {} bytes, its parent recorded level {level} over {size}",
                    node.level,
                    node.size()
                ),
            ));
        }
        Ok(node)
    }

    /// Appends to `out` the bytes `[offset, offset + len)` of `blob`, cut
    /// at its end, reading only the chunks that cover them.
    pub fn read_at(
        &mut self,
        blob: &BlobRef,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let hi = offset.saturating_add(len as u64).min(blob.size);
        if offset < hi {
            self.range(blob.root, blob.level, 0, blob.size, (offset, hi), out)?;
        }
        Ok(())
    }

    fn range(
        &mut self,
        fp: Fingerprint,
        level: u8,
        base: u64,
        size: u64,
        (lo, hi): (u64, u64),
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if level == 0 {
            self.chunk(&fp)?;
            if self.buf.len() as u64 != size {
                return Err(Error::corrupt(
                    format!("chunk {fp}"),
                    format!("recorded as {size} bytes, holds {}", self.buf.len()),
                ));
            }
            let from = (lo.max(base) - base) as usize;
            let to = (hi.min(base + size) - base) as usize;
            out.extend_from_slice(&self.buf[from..to]);
            return Ok(());
        }
        let node = self.tree_node(&fp, level, size)?;
        let mut at = base;
        for c in node.children {
            if at >= hi {
                break;
            }
            if at + c.size > lo {
                self.range(c.fp, level - 1, at, c.size, (lo, hi), out)?;
            }
            at += c.size;
        }
        Ok(())
    }
}
