//! Where restore finds chunks: [`ChunkStore`] (the index to locate a chunk,
//! the container log to read it, the codec to decode and verify it) and the
//! planner's reader of recipe nodes and directory listings ([`MetaChunks`]).
//! Data chunks go through the restore policies instead (`policy`).
//!
//! Every chunk handed out is decompressed and verified against its
//! fingerprint, so a damaged container is detected at the chunk it damages.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use crate::codec::ChunkCodec;
use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::container::{ContainerMeta, Descriptor};

use crate::blocking_map::blocking_map;
use crate::container_log::{ContainerStore, LoadedContainer};
use crate::index::disk_index::DiskIndex;
use crate::index::missing_chunk;
use cairn_format::tree::decode_tree_node;

/// How chunks are located: the on-disk index (one page read per miss), or a
/// map already in memory (`check`, which has read the whole index anyway).
pub enum Locator {
    Disk(DiskIndex),
    Memory(FpMap<ContainerId>),
}

/// Where chunks live: the index to locate them, the log to read containers.
pub struct ChunkStore {
    pub log: Arc<dyn ContainerStore>,
    pub locator: Locator,
    /// Decodes and verifies every chunk handed out.
    pub codec: ChunkCodec,
    /// Built from every container's metadata section if the index turns out
    /// damaged: containers are self-describing, so restore goes on.
    fallback: OnceLock<FpMap<ContainerId>>,
}

impl ChunkStore {
    pub fn new(log: Arc<dyn ContainerStore>, locator: Locator, codec: ChunkCodec) -> Self {
        ChunkStore {
            log,
            locator,
            codec,
            fallback: OnceLock::new(),
        }
    }

    /// The container holding `fp`: the index's answer, or, when the index
    /// is damaged, missing (deleted: it is derived data) or does not know
    /// the chunk, the answer of the containers' own metadata sections.
    pub fn locate(&self, fp: &Fingerprint) -> Result<ContainerId> {
        let found = match &self.locator {
            Locator::Disk(ix) => match ix.lookup(fp) {
                Err(e) if crate::index::is_damage(&e) => None,
                other => other?,
            },
            Locator::Memory(map) => map.get(fp).copied(),
        };
        match found {
            Some(id) => Ok(id),
            None => self.locate_in_containers(fp, None),
        }
    }

    /// Where the containers' metadata sections place `fp`, other than
    /// `stale` (a container the index named that turned out missing or not
    /// to hold it). Built once per reader, on first need.
    pub fn locate_in_containers(
        &self,
        fp: &Fingerprint,
        stale: Option<ContainerId>,
    ) -> Result<ContainerId> {
        match self.rebuilt()?.get(fp) {
            Some(&id) if Some(id) != stale => Ok(id),
            _ => Err(missing_chunk(fp)),
        }
    }

    fn rebuilt(&self) -> Result<&FpMap<ContainerId>> {
        if let Some(m) = self.fallback.get() {
            return Ok(m);
        }
        let map = map_from_containers(&*self.log)?;
        Ok(self.fallback.get_or_init(|| map))
    }

    /// Decodes chunk `d` of `c` into `out`, verified (the chunk codec).
    pub fn extract(&self, c: &LoadedContainer, d: &Descriptor, out: &mut Vec<u8>) -> Result<()> {
        self.codec.decode_verified(&c.bytes, &c.meta, d, out)
    }

    pub fn fp_width(&self) -> usize {
        self.codec.fp_width()
    }
}

/// Fingerprint -> container for every chunk in every readable container's
/// metadata section (the canonical copy: `crate::canonical`): what an
/// index rebuild would produce.
pub fn map_from_containers(log: &dyn ContainerStore) -> Result<FpMap<ContainerId>> {
    let mut map = FpMap::default();
    for id in log.ids()? {
        if let Ok(meta) = log.read_meta(id) {
            for d in meta.descriptors {
                crate::canonical::place(&mut map, d.fp, id);
            }
        }
    }
    Ok(map)
}

/// Prefetched chunks [`MetaChunks`] holds at most (recipe nodes of up to
/// 128 children: about 20 MiB), dropping those never asked for.
const READY_MAX: usize = 1 << 12;

pub trait RestoreCache: Send {
    /// Writes the raw bytes of chunk `fp` into `out` (cleared first).
    fn read_chunk(&mut self, fp: &Fingerprint, store: &ChunkStore, out: &mut Vec<u8>)
        -> Result<()>;

    /// Chunks about to be read one by one (the roots of a directory's
    /// entries, a tree node's children), each with its tree level (0: not
    /// a tree node): a cache may read them at once, in parallel, and the
    /// tree nodes beneath them. Failures are left for
    /// [`RestoreCache::read_chunk`] to report.
    fn prefetch(&mut self, _chunks: &[(Fingerprint, u8)], _store: &ChunkStore) {}
}

/// The planner's reader of recipe nodes and directory listings: an LRU of
/// container *metadata sections*, and one range read per chunk. Recipe
/// nodes are stored among a stream's data chunks, so reading their whole
/// containers would read most of a file's data twice (once to plan, once
/// to restore it); a metadata section and a few KiB per node cost little.
pub struct MetaChunks {
    /// Chunks prefetched (decoded, verified), each handed out once.
    ready: FpMap<Vec<u8>>,
    capacity: usize,
    metas: HashMap<ContainerId, Cached>,
    by_fp: FpMap<(ContainerId, usize)>,
    lru: BTreeMap<u64, ContainerId>,
    tick: u64,
}

struct Cached {
    meta: ContainerMeta,
    tick: u64,
}

impl MetaChunks {
    /// A cache of `capacity` metadata sections (at least one).
    pub fn new(capacity: usize) -> Self {
        MetaChunks {
            ready: FpMap::default(),
            capacity: capacity.max(1),
            metas: HashMap::new(),
            by_fp: FpMap::default(),
            lru: BTreeMap::new(),
            tick: 0,
        }
    }

    fn load(&mut self, id: ContainerId, store: &ChunkStore) -> Result<()> {
        while self.metas.len() >= self.capacity {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            if let Some(c) = self.metas.remove(&victim) {
                for d in &c.meta.descriptors {
                    if self.by_fp.get(&d.fp).is_some_and(|(cid, _)| *cid == victim) {
                        self.by_fp.remove(&d.fp);
                    }
                }
            }
        }
        let meta = store.log.read_meta(id)?;
        for (i, d) in meta.descriptors.iter().enumerate() {
            self.by_fp.insert(d.fp, (id, i));
        }
        self.tick += 1;
        self.lru.insert(self.tick, id);
        self.metas.insert(
            id,
            Cached {
                meta,
                tick: self.tick,
            },
        );
        Ok(())
    }
}

impl RestoreCache for MetaChunks {
    fn read_chunk(
        &mut self,
        fp: &Fingerprint,
        store: &ChunkStore,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(b) = self.ready.remove(fp) {
            out.clear();
            out.extend_from_slice(&b);
            return Ok(());
        }
        let (meta, d) = self.locate(fp, store)?;
        let stored = store.log.read_chunk(meta, &d)?;
        store.codec.decode_owned_verified(stored, meta, &d, out)
    }

    /// On a store with parallel reads, reads the chunks with that many
    /// requests in flight, level by level: the chunks, then the children
    /// of those that are tree nodes above level 1, and so on (planning a
    /// large file reads one recipe node per ~1 MiB of content, one round
    /// trip each when done one by one; here it is one per level).
    fn prefetch(&mut self, chunks: &[(Fingerprint, u8)], store: &ChunkStore) {
        let threads = store.log.read_parallelism();
        if threads <= 1 {
            return;
        }
        // Left over by walks that failed midway: valid, but not to pile up.
        if self.ready.len() > READY_MAX {
            self.ready.clear();
        }
        let mut level: Vec<(Fingerprint, u8)> = chunks.to_vec();
        while !level.is_empty() && self.ready.len() + level.len() <= READY_MAX {
            let read = self.read_at_once(&level, store, threads);
            let mut below = Vec::new();
            for ((fp, lv), bytes) in level.iter().zip(read) {
                let Some(bytes) = bytes else { continue };
                if *lv >= 2 {
                    if let Ok(node) = decode_tree_node(&bytes, store.fp_width()) {
                        below.extend(node.children.iter().map(|c| (c.fp, lv - 1)));
                    }
                }
                self.ready.insert(*fp, bytes);
            }
            level = below;
        }
    }
}

impl MetaChunks {
    /// The container holding chunk `fp` (its metadata section loaded and
    /// made the most recently used) and the chunk's descriptor in it.
    pub fn locate(
        &mut self,
        fp: &Fingerprint,
        store: &ChunkStore,
    ) -> Result<(&ContainerMeta, Descriptor)> {
        if !self.by_fp.contains_key(fp) {
            let id = store.locate(fp)?;
            // The index is derived data: if the container it names is gone,
            // damaged or lacks the chunk, the containers themselves decide.
            match self.load(id, store) {
                Err(e) if e.is_not_found() || crate::index::is_damage(&e) => {
                    match store.locate_in_containers(fp, Some(id)) {
                        Ok(other) => self.load(other, store)?,
                        Err(_) => return Err(e),
                    }
                }
                r => r?,
            }
            if !self.by_fp.contains_key(fp) {
                if let Ok(other) = store.locate_in_containers(fp, Some(id)) {
                    self.load(other, store)?;
                }
            }
        }
        let Some(&(id, i)) = self.by_fp.get(fp) else {
            return Err(Error::corrupt(
                "repository",
                format!("index places chunk {fp} in a container that does not hold it"),
            ));
        };
        let c = self
            .metas
            .get_mut(&id)
            .expect("indexed container is cached");
        self.lru.remove(&c.tick);
        self.tick += 1;
        c.tick = self.tick;
        self.lru.insert(self.tick, id);
        let d = c.meta.descriptors[i];
        Ok((&c.meta, d))
    }

    /// Reads `chunks` (those not held already) with `threads` requests in
    /// flight: their containers located, the metadata sections not cached
    /// read, then the chunks, each verified. `None` for a chunk held
    /// already or that failed.
    fn read_at_once(
        &self,
        chunks: &[(Fingerprint, u8)],
        store: &ChunkStore,
        threads: usize,
    ) -> Vec<Option<Vec<u8>>> {
        let mut groups: HashMap<ContainerId, Vec<Fingerprint>> = HashMap::new();
        for (fp, _) in chunks {
            if self.ready.contains_key(fp) || self.by_fp.contains_key(fp) {
                continue;
            }
            if let Ok(id) = store.locate(fp) {
                groups.entry(id).or_default().push(*fp);
            }
        }
        let groups: Vec<(ContainerId, Vec<Fingerprint>)> = groups.into_iter().collect();
        let metas = blocking_map(&groups, threads, |(id, _)| match self.metas.get(id) {
            Some(c) => Some(c.meta.clone()),
            None => store.log.read_meta(*id).ok(),
        });
        let tasks: Vec<(&ContainerMeta, Descriptor)> = groups
            .iter()
            .zip(&metas)
            .filter_map(|((_, fps), meta)| Some((meta.as_ref()?, fps)))
            .flat_map(|(meta, fps)| {
                fps.iter().filter_map(move |fp| {
                    let d = meta.descriptors.iter().find(|d| d.fp == *fp)?;
                    Some((meta, *d))
                })
            })
            .collect();
        let read: FpMap<Vec<u8>> = blocking_map(&tasks, threads, |(meta, d)| {
            let stored = store.log.read_chunk(meta, d).ok()?;
            let mut out = Vec::new();
            store
                .codec
                .decode_stored_verified(&stored, meta, d, &mut out)
                .ok()?;
            Some((d.fp, out))
        })
        .into_iter()
        .flatten()
        .collect();
        chunks.iter().map(|(fp, _)| read.get(fp).cloned()).collect()
    }
}
