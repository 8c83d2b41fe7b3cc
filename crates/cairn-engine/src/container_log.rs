//! The container log (DDFS §3.3): containers are appended whole, never
//! modified, and identified by ids unique over the repository's life. It
//! supports reading a container's metadata section alone (one small tail read,
//! what Locality Preserved Caching and physical GC rely on) and reading a
//! whole container for restore. Every read and write is counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Error, Result};
use cairn_format::container::{self, ContainerMeta, TailDecode, TAIL_READ_HINT};

use crate::keys;

pub struct ContainerLog {
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    next_id: AtomicU64,
}

/// A whole container read into memory, checked against its checksums.
pub struct LoadedContainer {
    pub bytes: Vec<u8>,
    pub meta: ContainerMeta,
    /// Whether the data-section checksum held. When it does not but the
    /// metadata section is sound, the container is still served: every chunk
    /// is verified against its fingerprint on the way out, so one flipped
    /// byte costs the chunk it hits, not the 4 MiB around it.
    pub data_ok: bool,
}

impl ContainerLog {
    /// Opens the log; the next id is one past the largest container present.
    pub fn open(backend: Arc<dyn Backend>, counters: Arc<Counters>) -> Result<Self> {
        let next = Self::list_ids(&*backend)?
            .last()
            .map(|id| id.0 + 1)
            .unwrap_or(1);
        Ok(ContainerLog {
            backend,
            counters,
            next_id: AtomicU64::new(next),
        })
    }

    pub fn list_ids(backend: &dyn Backend) -> Result<Vec<ContainerId>> {
        let mut ids: Vec<ContainerId> = backend
            .list(keys::CONTAINERS)?
            .iter()
            .filter_map(|k| keys::parse_container(k))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Re-reads the next id from the containers present. A writer calls this
    /// once it holds the lock: ids read before then may already have been
    /// used by the writer it waited for.
    pub fn refresh_next_id(&self) -> Result<()> {
        let next = self.ids()?.last().map(|id| id.0 + 1).unwrap_or(1);
        self.next_id.fetch_max(next, Ordering::Relaxed);
        Ok(())
    }

    pub fn ids(&self) -> Result<Vec<ContainerId>> {
        Self::list_ids(&*self.backend)
    }

    pub fn allocate(&self) -> ContainerId {
        ContainerId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// The id the next allocation will return: every container below it
    /// has been allocated (and, once all streams are sealed, written).
    pub fn next_id(&self) -> ContainerId {
        ContainerId(self.next_id.load(Ordering::Relaxed))
    }

    /// Appends a sealed container: written whole, durable when this returns.
    pub fn append(&self, id: ContainerId, bytes: &[u8]) -> Result<()> {
        self.backend.write_atomic(&keys::container(id), bytes)?;
        bump(&self.counters.containers_written, 1);
        Ok(())
    }

    /// Reads only the metadata section (descriptors) of a container: one tail
    /// read of `TAIL_READ_HINT` bytes, a second only for unusually large
    /// metadata sections.
    pub fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta> {
        let key = keys::container(id);
        bump(&self.counters.container_meta_reads, 1);
        let (size, tail) = self.backend.read_tail(&key, TAIL_READ_HINT)?;
        let meta = match container::decode_tail(size, &tail).map_err(|e| with_container(e, id))? {
            TailDecode::Meta(m) => m,
            TailDecode::NeedTail(n) => {
                let (size, tail) = self.backend.read_tail(&key, n)?;
                match container::decode_tail(size, &tail).map_err(|e| with_container(e, id))? {
                    TailDecode::Meta(m) => m,
                    TailDecode::NeedTail(_) => {
                        return Err(Error::corrupt(
                            format!("container {id}"),
                            "metadata section extends past the start of the file",
                        ))
                    }
                }
            }
        };
        check_id(id, meta.id)?;
        Ok(meta)
    }

    /// Reads and verifies a whole container (header, trailer, both checksums).
    pub fn read(&self, id: ContainerId) -> Result<LoadedContainer> {
        let bytes = self.backend.read(&keys::container(id))?;
        bump(&self.counters.containers_read, 1);
        let (meta, data_ok) = match container::decode_container(&bytes) {
            Ok(m) => (m, true),
            Err(e) if e.is_corruption() => match container::decode_tail(bytes.len() as u64, &bytes)
            {
                Ok(TailDecode::Meta(m)) => (m, false),
                _ => return Err(with_container(e, id)),
            },
            Err(e) => return Err(with_container(e, id)),
        };
        check_id(id, meta.id)?;
        Ok(LoadedContainer {
            bytes,
            meta,
            data_ok,
        })
    }

    pub fn delete(&self, id: ContainerId) -> Result<()> {
        self.backend.delete(&keys::container(id))
    }
}

fn check_id(expected: ContainerId, found: ContainerId) -> Result<()> {
    if expected != found {
        return Err(Error::corrupt(
            format!("container {expected}"),
            format!("file records id {found}"),
        ));
    }
    Ok(())
}

/// Names the container in a corruption error that the codec could not name.
fn with_container(e: Error, id: ContainerId) -> Error {
    match e {
        Error::Corrupt { what, detail } if what.contains(&id.to_string()) => {
            Error::Corrupt { what, detail }
        }
        Error::Corrupt { what, detail } => {
            Error::corrupt(format!("container {id} ({what})"), detail)
        }
        other => other,
    }
}
