//! A metadata-only container store: what the simulator keeps instead of
//! container files. Each sealed container is kept as its metadata section
//! (descriptors with logical offsets and sizes, `ContainerWriter::into_meta`);
//! payloads are never stored. Every operation is counted exactly as the
//! real `ContainerLog` counts it, with the byte sizes the real files would
//! have, so lookups, prefetches and container counts agree with a real
//! backup of the same chunks.
//!
//! The sections are held in memory ([`MetaOnlyStore::new`]) or, for
//! simulations at trace scale (issue 35), written to one scratch file
//! as a container file holds them (`cairn_format::container::encode_metadata`)
//! with only each container's trailer facts and the section's place in
//! RAM ([`MetaOnlyStore::spilling`]): about 50 bytes per chunk in memory
//! become about 0.1 (one record per container), read back from the file
//! (the page cache) at each prefetch.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use cairn_core::counters::bump;
use cairn_core::{ContainerId, Counters, Error, Result};
use cairn_format::container::{
    decode_metadata, encode_metadata, metadata_len, ContainerMeta, ContainerWriter,
    CONTAINER_TRAILER_LEN,
};

use crate::container_log::{ContainerStore, LoadedContainer};

/// A container's metadata as held: whole in memory, or its trailer facts
/// and where its section lies in the spill file.
enum Kept {
    Whole(Arc<ContainerMeta>),
    Spilled(Spilled),
}

/// The section's place in the spill file, and what the trailer says (the
/// metadata with its descriptors left out).
struct Spilled {
    at: u64,
    count: u32,
    trailer: ContainerMeta,
}

impl Kept {
    fn file_size(&self) -> u64 {
        match self {
            Kept::Whole(m) => m.file_size,
            Kept::Spilled(s) => s.trailer.file_size,
        }
    }
}

/// The file the spilled sections are appended to.
struct SpillFile {
    path: PathBuf,
    file: File,
    /// Its length; appends are serialized by this lock.
    end: Mutex<u64>,
}

impl SpillFile {
    fn err(&self, what: &str, e: std::io::Error) -> Error {
        Error::io(format!("{what} {}", self.path.display()), e)
    }
}

pub struct MetaOnlyStore {
    counters: Arc<Counters>,
    metas: RwLock<BTreeMap<ContainerId, Kept>>,
    spill: Option<SpillFile>,
    next_id: AtomicU64,
}

impl MetaOnlyStore {
    /// Sections held in memory.
    pub fn new(counters: Arc<Counters>) -> Self {
        MetaOnlyStore {
            counters,
            metas: RwLock::new(BTreeMap::new()),
            spill: None,
            next_id: AtomicU64::new(1),
        }
    }

    /// Sections written to a new file at `path` (created, truncated; the
    /// caller removes it): a scratch file nothing reads after the process.
    pub fn spilling(counters: Arc<Counters>, path: &Path) -> Result<Self> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        let mut store = Self::new(counters);
        store.spill = Some(SpillFile {
            path: path.to_path_buf(),
            file,
            end: Mutex::new(0),
        });
        Ok(store)
    }

    /// Bytes a metadata-section read of this container transfers (what the
    /// real store's tail read needs: descriptors and trailer).
    pub fn meta_read_bytes(meta: &ContainerMeta) -> u64 {
        Self::meta_read_bytes_of(meta.descriptors.len(), meta.fp_width)
    }

    /// [`Self::meta_read_bytes`] of a container of `chunks` descriptors
    /// of `fp_width`-byte fingerprints.
    pub fn meta_read_bytes_of(chunks: usize, fp_width: usize) -> u64 {
        (metadata_len(chunks, fp_width) + CONTAINER_TRAILER_LEN) as u64
    }

    /// Logical bytes held (what the container files would occupy).
    pub fn logical_bytes(&self) -> u64 {
        self.metas.read().values().map(Kept::file_size).sum()
    }

    /// Heap bytes of the metadata held (each container's record, its
    /// descriptors' allocation when in memory and its map entry), for
    /// memory reports.
    pub fn heap_bytes(&self) -> u64 {
        let metas = self.metas.read();
        // A BTreeMap entry (key and record) plus the node's share of spare
        // slots: about 1.5x the pair.
        let entry = 3 * (std::mem::size_of::<ContainerId>() + std::mem::size_of::<Kept>()) / 2;
        // The Arc's two counters beside the record.
        let record = std::mem::size_of::<ContainerMeta>() + 2 * std::mem::size_of::<usize>();
        let descriptor = std::mem::size_of::<cairn_format::container::Descriptor>();
        metas
            .values()
            .map(|k| match k {
                Kept::Whole(m) => (entry + record + m.descriptors.capacity() * descriptor) as u64,
                Kept::Spilled(_) => entry as u64,
            })
            .sum()
    }

    /// Bytes of the spill file (on disk and in the page cache, not in the
    /// process); 0 when the sections are held in memory.
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| *s.end.lock())
    }

    /// A stored container's metadata without counting a read (for reports
    /// and the simulated restore).
    pub fn peek(&self, id: ContainerId) -> Result<Option<Arc<ContainerMeta>>> {
        let metas = self.metas.read();
        match metas.get(&id) {
            None => Ok(None),
            Some(Kept::Whole(m)) => Ok(Some(m.clone())),
            Some(Kept::Spilled(s)) => self.read_spilled(id, s).map(|m| Some(Arc::new(m))),
        }
    }

    fn read_spilled(&self, id: ContainerId, s: &Spilled) -> Result<ContainerMeta> {
        let spill = self.spill.as_ref().expect("spilled sections have a file");
        let t = &s.trailer;
        let mut section = vec![0u8; metadata_len(s.count as usize, t.fp_width)];
        spill
            .file
            .read_exact_at(&mut section, s.at)
            .map_err(|e| spill.err("reading", e))?;
        let descriptors = decode_metadata(
            &format!("container {id} in {}", spill.path.display()),
            &section,
            s.count,
            t.fp_width,
            t.data_len,
        )?;
        Ok(ContainerMeta {
            descriptors,
            ..t.clone()
        })
    }

    /// `meta` as this store keeps it.
    fn keep(&self, mut meta: ContainerMeta) -> Result<Kept> {
        let Some(spill) = &self.spill else {
            return Ok(Kept::Whole(Arc::new(meta)));
        };
        let mut section = Vec::new();
        encode_metadata(&meta.descriptors, &mut section);
        let at = {
            let mut end = spill.end.lock();
            let at = *end;
            spill
                .file
                .write_all_at(&section, at)
                .map_err(|e| spill.err("writing", e))?;
            *end += section.len() as u64;
            at
        };
        let count = meta.descriptors.len() as u32;
        meta.descriptors = Vec::new();
        Ok(Kept::Spilled(Spilled {
            at,
            count,
            trailer: meta,
        }))
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
        let (id, file_size) = (meta.id, meta.file_size);
        let kept = self.keep(meta)?;
        let c = &*self.counters;
        bump(&c.containers_written, 1);
        bump(&c.write_ops, 1);
        bump(&c.bytes_written, file_size);
        self.metas.write().insert(id, kept);
        Ok(())
    }

    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta> {
        let meta = self
            .peek(id)?
            .ok_or_else(|| Error::NotFound(format!("container {id}")))?;
        let c = &*self.counters;
        bump(&c.container_meta_reads, 1);
        bump(&c.read_ops, 1);
        bump(&c.bytes_read, Self::meta_read_bytes(&meta));
        Ok(Arc::unwrap_or_clone(meta))
    }

    fn describes_only(&self) -> bool {
        true
    }

    /// Counted as the read it stands for, as `read_meta` counts one, so a
    /// simulation's counters do not depend on the sealer's timing.
    fn served_meta(&self, chunks: usize, fp_width: usize) {
        let c = &*self.counters;
        bump(&c.read_ops, 1);
        bump(&c.bytes_read, Self::meta_read_bytes_of(chunks, fp_width));
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

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{ChunkKind, CompressionCodec, Fingerprint};

    fn container(id: u64, chunks: u8) -> ContainerWriter {
        let mut w = ContainerWriter::new(ContainerId(id), 20, 1 << 20);
        for i in 0..chunks {
            let fp = Fingerprint::from_slice(&[i.wrapping_mul(7).wrapping_add(id as u8); 20]);
            w.push(
                fp,
                ChunkKind::Data,
                0,
                CompressionCodec::None,
                100 + u32::from(i),
                &vec![i; 100 + usize::from(i)],
            );
        }
        w
    }

    /// A spilling store answers every read as the in-memory one does, with
    /// the same counters, and holds one small record per container.
    #[test]
    fn a_spilled_store_answers_as_one_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cb) = (Arc::new(Counters::default()), Arc::new(Counters::default()));
        let whole = MetaOnlyStore::new(ca.clone());
        let spilled = MetaOnlyStore::spilling(cb.clone(), &dir.path().join("meta")).unwrap();
        for (id, n) in [(1, 3), (2, 0), (3, 40)] {
            whole.append(container(id, n)).unwrap();
            spilled.append(container(id, n)).unwrap();
        }
        whole.delete(ContainerId(2)).unwrap();
        spilled.delete(ContainerId(2)).unwrap();
        assert_eq!(whole.ids().unwrap(), spilled.ids().unwrap());
        for id in [1, 3] {
            let id = ContainerId(id);
            assert_eq!(whole.read_meta(id).unwrap(), spilled.read_meta(id).unwrap());
            assert_eq!(whole.peek(id).unwrap(), spilled.peek(id).unwrap());
        }
        assert!(spilled.peek(ContainerId(2)).unwrap().is_none());
        assert!(spilled
            .read_meta(ContainerId(9))
            .unwrap_err()
            .is_not_found());
        assert_eq!(ca.snapshot(), cb.snapshot());
        assert_eq!(whole.logical_bytes(), spilled.logical_bytes());
        assert!(spilled.heap_bytes() * 4 < whole.heap_bytes());
        assert!(spilled.spilled_bytes() > 43 * 20);
    }
}
