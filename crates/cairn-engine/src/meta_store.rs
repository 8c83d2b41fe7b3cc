//! A metadata-only container store: what the simulator keeps instead of
//! container files. Each sealed container is kept as its metadata section
//! (descriptors with logical offsets and sizes, `ContainerWriter::into_meta`)
//! in memory; payloads are never stored. Every operation is counted exactly
//! as the real `ContainerLog` counts it, with the byte sizes the real files
//! would have, so lookups, prefetches and container counts agree with a real
//! backup of the same chunks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use cairn_core::counters::bump;
use cairn_core::{ContainerId, Counters, Error, Result};
use cairn_format::container::{
    metadata_len, ContainerMeta, ContainerWriter, CONTAINER_TRAILER_LEN,
};

use crate::container_log::{ContainerStore, LoadedContainer};

pub struct MetaOnlyStore {
    counters: Arc<Counters>,
    metas: RwLock<BTreeMap<ContainerId, Arc<ContainerMeta>>>,
    next_id: AtomicU64,
}

impl MetaOnlyStore {
    pub fn new(counters: Arc<Counters>) -> Self {
        MetaOnlyStore {
            counters,
            metas: RwLock::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Bytes a metadata-section read of this container transfers (what the
    /// real store's tail read needs: descriptors and trailer).
    pub fn meta_read_bytes(meta: &ContainerMeta) -> u64 {
        (metadata_len(meta.descriptors.len(), meta.fp_width) + CONTAINER_TRAILER_LEN) as u64
    }

    /// Logical bytes held (what the container files would occupy).
    pub fn logical_bytes(&self) -> u64 {
        self.metas.read().values().map(|m| m.file_size).sum()
    }

    /// Heap bytes of the metadata held (each container's record, its
    /// descriptors' allocation and its map entry), for memory reports.
    pub fn heap_bytes(&self) -> u64 {
        let metas = self.metas.read();
        // A BTreeMap entry (key and Arc) plus the node's share of spare
        // slots: about 1.5x the pair.
        let entry = 3 * (std::mem::size_of::<ContainerId>() + std::mem::size_of::<usize>()) / 2;
        // The Arc's two counters beside the record.
        let record = std::mem::size_of::<ContainerMeta>() + 2 * std::mem::size_of::<usize>();
        let descriptor = std::mem::size_of::<cairn_format::container::Descriptor>();
        metas
            .values()
            .map(|m| (entry + record + m.descriptors.capacity() * descriptor) as u64)
            .sum()
    }

    /// A stored container's metadata without counting a read (for reports).
    pub fn peek(&self, id: ContainerId) -> Option<Arc<ContainerMeta>> {
        self.metas.read().get(&id).cloned()
    }
}

impl ContainerStore for MetaOnlyStore {
    fn ids(&self) -> Result<Vec<ContainerId>> {
        Ok(self.metas.read().keys().copied().collect())
    }

    fn allocate(&self) -> Result<ContainerId> {
        Ok(ContainerId(self.next_id.fetch_add(1, Ordering::Relaxed)))
    }

    fn reserve(&self, n: u64) -> Result<std::ops::Range<ContainerId>> {
        let start = self.next_id.fetch_add(n, Ordering::Relaxed);
        Ok(ContainerId(start)..ContainerId(start + n))
    }

    fn next_id(&self) -> ContainerId {
        ContainerId(self.next_id.load(Ordering::Relaxed))
    }

    fn refresh_next_id(&self, floor: ContainerId) -> Result<()> {
        let next = self.metas.read().keys().last().map_or(1, |id| id.0 + 1);
        self.next_id.fetch_max(next.max(floor.0), Ordering::Relaxed);
        Ok(())
    }

    fn append(&self, writer: ContainerWriter) -> Result<()> {
        let meta = writer.into_meta();
        let c = &*self.counters;
        bump(&c.containers_written, 1);
        bump(&c.write_ops, 1);
        bump(&c.bytes_written, meta.file_size);
        self.metas.write().insert(meta.id, Arc::new(meta));
        Ok(())
    }

    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta> {
        let meta = self
            .peek(id)
            .ok_or_else(|| Error::NotFound(format!("container {id}")))?;
        let c = &*self.counters;
        bump(&c.container_meta_reads, 1);
        bump(&c.read_ops, 1);
        bump(&c.bytes_read, Self::meta_read_bytes(&meta));
        Ok((*meta).clone())
    }

    fn describes_only(&self) -> bool {
        true
    }

    fn read(&self, id: ContainerId) -> Result<LoadedContainer> {
        Err(Error::invalid(format!(
            "container {id} is held as metadata only (a simulated repository has no chunk payloads)"
        )))
    }

    fn delete(&self, id: ContainerId) -> Result<()> {
        self.metas.write().remove(&id);
        Ok(())
    }
}
