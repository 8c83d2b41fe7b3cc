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
//!   range of the blob it covers.
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

/// A container log in `dir` (created if absent) for chunks kept beside the
/// repository: the repository's container format, sealed with its keys if
/// it is encrypted, ids of its own (with their own mark in `dir`).
pub fn open_side_store(repo: &Repository, dir: &Path) -> Result<Arc<dyn ContainerStore>> {
    let local: Arc<dyn Backend> = Arc::new(LocalBackend::create(dir)?);
    let backend: Arc<dyn Backend> = match repo.keys() {
        Some(keys) => Arc::new(SealedBackend::new(local, keys.clone())),
        None => local,
    };
    let log = ContainerLog::open(backend, repo.counters.clone())?;
    log.refresh_next_id(ContainerId(1))?;
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
    let id = log.allocate();
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
        IndexUpdate { puts, removes },
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
/// index; data chunks are named, never read.
pub struct RecipeWalker {
    store: ChunkStore,
    meta: MetaChunks,
    buf: Vec<u8>,
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
        })
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
        self.meta.read_chunk(&fp, &self.store, &mut self.buf)?;
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
        let mut at = offset;
        for c in node.children {
            self.node(c.fp, level - 1, at, c.size, visit)?;
            at += c.size;
        }
        Ok(())
    }
}
