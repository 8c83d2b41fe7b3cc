//! [`DeviceStore`]: a pass-through [`ContainerStore`] that charges container
//! I/O to a [`DeviceModel`] at its **logical** size.
//!
//! The simulator keeps containers in a metadata-only store
//! (`cairn_engine::meta_store::MetaOnlyStore`): container files never reach
//! the [`Backend`](cairn_core::Backend), so a [`DeviceBackend`](super::DeviceBackend)
//! sees only the index, Bloom checkpoints, snapshots and config. Wrapping the
//! store charges what the real files would cost:
//!
//! | call | stage | bytes |
//! | --- | --- | --- |
//! | `append` | [`Stage::ContainerWrite`] | the encoded container size (`ContainerWriter::encoded_len`) |
//! | `read_meta` | [`Stage::MetadataPrefetch`] | metadata section + trailer (`MetaOnlyStore::meta_read_bytes`) |
//! | `served_meta` (a section served before its container is durable) | [`Stage::MetadataPrefetch`] | the same, for the read it stands for |
//! | `read` | [`Stage::ContainerRead`] | the container's file size |
//!
//! One successful call is one access; failures, `ids`, `allocate`,
//! `next_id`, `refresh_next_id` and `delete` are uncharged. Wrap only a store
//! that bypasses the backend: a `ContainerLog` over a `DeviceBackend` is
//! already charged there, and wrapping it too would count it twice.

use cairn_core::{ContainerId, Result};
use cairn_engine::container_log::{ContainerStore, LoadedContainer};
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_format::container::{ContainerMeta, ContainerWriter};

use super::model::{DeviceModel, Stage};

/// Wraps a container store and charges its container I/O to a device model.
pub struct DeviceStore<S> {
    inner: S,
    model: DeviceModel,
}

impl<S: ContainerStore> DeviceStore<S> {
    pub fn new(inner: S, model: DeviceModel) -> Self {
        DeviceStore { inner, model }
    }

    pub fn model(&self) -> &DeviceModel {
        &self.model
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: ContainerStore> ContainerStore for DeviceStore<S> {
    fn ids(&self) -> Result<Vec<ContainerId>> {
        self.inner.ids()
    }

    fn allocate(&self) -> Result<ContainerId> {
        self.inner.allocate()
    }

    fn reserve(&self, n: u64) -> Result<std::ops::Range<ContainerId>> {
        self.inner.reserve(n)
    }

    fn next_id(&self) -> ContainerId {
        self.inner.next_id()
    }

    fn refresh_next_id(&self, floor: ContainerId) -> Result<()> {
        self.inner.refresh_next_id(floor)
    }

    fn append(&self, writer: ContainerWriter) -> Result<()> {
        let bytes = writer.encoded_len() as u64;
        self.inner.append(writer)?;
        self.model.charge(Stage::ContainerWrite, bytes);
        Ok(())
    }

    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta> {
        let meta = self.inner.read_meta(id)?;
        self.model.charge(
            Stage::MetadataPrefetch,
            MetaOnlyStore::meta_read_bytes(&meta),
        );
        Ok(meta)
    }

    fn describes_only(&self) -> bool {
        self.inner.describes_only()
    }

    /// Charged as the metadata read it stands for (`read_meta` above).
    fn served_meta(&self, chunks: usize, fp_width: usize) {
        self.inner.served_meta(chunks, fp_width);
        self.model.charge(
            Stage::MetadataPrefetch,
            MetaOnlyStore::meta_read_bytes_of(chunks, fp_width),
        );
    }

    fn read(&self, id: ContainerId) -> Result<LoadedContainer> {
        let loaded = self.inner.read(id)?;
        self.model
            .charge(Stage::ContainerRead, loaded.meta.file_size);
        Ok(loaded)
    }

    fn delete(&self, id: ContainerId) -> Result<()> {
        self.inner.delete(id)
    }

    fn read_parallelism(&self) -> usize {
        self.inner.read_parallelism()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::class::DeviceClass;
    use cairn_core::{ChunkKind, CompressionCodec, Counters, Fingerprint};
    use std::sync::Arc;

    #[test]
    fn charges_logical_sizes() {
        let model = DeviceModel::for_device(DeviceClass::hdd());
        let counters = Arc::new(Counters::default());
        let store = DeviceStore::new(MetaOnlyStore::new(counters.clone()), model.clone());
        let id = store.allocate().unwrap();
        let mut w = ContainerWriter::new(id, 20, 4 << 20);
        for i in 0..100u8 {
            let fp = Fingerprint::from_slice(&[i; 20]);
            w.push_absent(fp, ChunkKind::Data, 0, CompressionCodec::None, 8192, 8192);
        }
        let logical = w.encoded_len() as u64;
        assert!(logical > 100 * 8192);
        store.append(w).unwrap();
        let meta = store.read_meta(id).unwrap();
        let meta_bytes = MetaOnlyStore::meta_read_bytes(&meta);
        assert!(store.read(id).is_err(), "metadata-only: no payload");
        assert!(store.read_meta(ContainerId(999)).is_err());
        assert_eq!(store.ids().unwrap(), vec![id]);
        store.delete(id).unwrap();

        let u = model.usage();
        let got = |s: Stage| (u.accesses(s), u.bytes(s));
        assert_eq!(got(Stage::ContainerWrite), (1, logical));
        assert_eq!(got(Stage::MetadataPrefetch), (1, meta_bytes));
        assert_eq!(got(Stage::ContainerRead), (0, 0));
        // The same bytes the store reports to the engine's counters.
        let c = counters.snapshot();
        assert_eq!((c.bytes_written, c.bytes_read), (logical, meta_bytes));
        let t = model.report(&Default::default());
        let hdd = DeviceClass::hdd();
        assert!((t.container_write_seconds - hdd.io_seconds(logical)).abs() < 1e-15);
        assert!((t.prefetch_seconds - hdd.io_seconds(meta_bytes)).abs() < 1e-15);
    }
}
