//! The container log (DDFS §3.3): containers are appended whole, never
//! modified, and identified by ids unique over the repository's life. It
//! supports reading a container's metadata section alone (one small tail read,
//! what Locality Preserved Caching and physical GC rely on) and reading a
//! whole container for restore. Every read and write is counted.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Error, Result, Salvaged};
use cairn_format::container::{
    self, ContainerMeta, ContainerWriter, Descriptor, TailDecode, TAIL_READ_HINT,
};

use crate::{id_mark, object_names};

/// The container log as the engine sees it: append whole containers, read a
/// metadata section alone, read a whole container. [`ContainerLog`] stores
/// encoded containers in a [`Backend`]; the simulator supplies a
/// metadata-only store behind the same trait, so the engine never asks
/// whether it is simulating.
pub trait ContainerStore: Send + Sync {
    /// Ids of the containers present, ascending.
    fn ids(&self) -> Result<Vec<ContainerId>>;
    /// A fresh id, unique over the store's life.
    fn allocate(&self) -> ContainerId;
    /// The id the next allocation returns.
    fn next_id(&self) -> ContainerId;
    /// Re-reads the next id from the store, and never lets it fall below
    /// `floor` (one past every id referenced anywhere else: index, snapshot
    /// records), so the id of a container that was lost is never handed out
    /// again. A writer calls this once it holds the lock: ids read before may
    /// have been used by the writer it waited for.
    fn refresh_next_id(&self, floor: ContainerId) -> Result<()>;
    /// Appends a sealed container; durable when this returns.
    fn append(&self, writer: ContainerWriter) -> Result<()>;
    /// Ids below `end` are spoken for (a collection's copies, written
    /// while other writers run): a store that keeps a mark of the ids used
    /// raises it over them now, under the writer lock.
    fn reserve_ids(&self, _end: ContainerId) -> Result<()> {
        Ok(())
    }
    /// The metadata section alone (DDFS §4.3: one small read).
    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta>;
    /// The whole container, checked.
    fn read(&self, id: ContainerId) -> Result<LoadedContainer>;
    /// The stored bytes of one chunk `d` of container `meta` (one range
    /// read: recipe nodes and listings need no whole-container read).
    /// Unchecked: the caller verifies the chunk against its fingerprint.
    fn read_chunk(&self, meta: &ContainerMeta, d: &Descriptor) -> Result<Vec<u8>> {
        let c = self.read(meta.id)?;
        Ok(container::stored_chunk(&c.bytes, &c.meta, d)?.to_vec())
    }
    /// The stored bytes at file offsets `range` of container `meta` (one
    /// range read: restore fetching only the chunks it needs). Unchecked:
    /// the caller verifies each chunk against its fingerprint.
    fn read_range(&self, meta: &ContainerMeta, range: Range<u64>) -> Result<Vec<u8>> {
        let c = self.read(meta.id)?;
        slice_of(&c.bytes, meta.id, range)
    }
    /// [`ContainerStore::read_range`] into `out` (replacing what it held):
    /// a reader of many ranges reuses one buffer's memory.
    fn read_range_into(
        &self,
        meta: &ContainerMeta,
        range: Range<u64>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        *out = self.read_range(meta, range)?;
        Ok(())
    }
    fn delete(&self, id: ContainerId) -> Result<()>;
    /// How many reads a restore may keep in flight from different threads
    /// ([`Backend::read_parallelism`] of the store underneath).
    fn read_parallelism(&self) -> usize {
        1
    }
    /// How many appends may run at once from different threads
    /// ([`Backend::write_parallelism`] of the store underneath).
    fn write_parallelism(&self) -> usize {
        1
    }
}

pub struct ContainerLog {
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    next_id: AtomicU64,
    /// The container-id mark this process knows is stored (`id_mark.rs`;
    /// 0: none known): a container with an id at or above it is written
    /// only after the mark is raised past it.
    marked: parking_lot::Mutex<u64>,
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
    /// Why the whole-container decode failed when `data_ok` is false (the
    /// section it names: header, data checksum, ...), for reports.
    pub damage: Option<String>,
}

impl ContainerLog {
    /// Opens the log. It does not list the containers: readers never
    /// allocate, and a writer learns the next id from
    /// [`ContainerStore::refresh_next_id`] once it holds the lock (on
    /// object storage a listing costs a request per 1,000 containers).
    /// Until then allocation starts at 1, which is right for a new
    /// repository only.
    pub fn open(backend: Arc<dyn Backend>, counters: Arc<Counters>) -> Result<Self> {
        Ok(ContainerLog {
            backend,
            counters,
            next_id: AtomicU64::new(1),
            marked: parking_lot::Mutex::new(0),
        })
    }

    pub fn list_ids(backend: &dyn Backend) -> Result<Vec<ContainerId>> {
        let mut ids: Vec<ContainerId> = backend
            .list(object_names::CONTAINERS)?
            .iter()
            .filter_map(|k| object_names::parse_container(k))
            .collect();
        ids.sort();
        Ok(ids)
    }
}

impl ContainerLog {
    /// Stores the mark `to` unless one at least as high is known stored.
    fn raise_mark(&self, to: ContainerId) -> Result<()> {
        let mut marked = self.marked.lock();
        if to.0 > *marked {
            id_mark::write(&*self.backend, to)?;
            *marked = to.0;
        }
        Ok(())
    }
}

impl ContainerStore for ContainerLog {
    /// From the container-id mark; a listing of the containers only when
    /// the mark is missing or damaged, and then the mark is written again.
    fn refresh_next_id(&self, floor: ContainerId) -> Result<()> {
        let mark = id_mark::read(&*self.backend)?;
        let start = match mark {
            Some(m) => m.0,
            None => self.ids()?.last().map(|id| id.0 + 1).unwrap_or(1),
        };
        let next = start.max(floor.0).max(1);
        self.next_id.fetch_max(next, Ordering::Relaxed);
        let mut marked = self.marked.lock();
        if mark.is_none() {
            id_mark::write(&*self.backend, ContainerId(next))?;
        }
        // Under the writer lock the stored mark is the truth, whatever this
        // process raised it to before.
        *marked = mark.map_or(next, |m| m.0);
        Ok(())
    }

    fn reserve_ids(&self, end: ContainerId) -> Result<()> {
        self.raise_mark(end)
    }

    fn ids(&self) -> Result<Vec<ContainerId>> {
        Self::list_ids(&*self.backend)
    }

    fn allocate(&self) -> ContainerId {
        ContainerId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// The id the next allocation will return: every container below it
    /// has been allocated (and, once all streams are sealed, written).
    fn next_id(&self) -> ContainerId {
        ContainerId(self.next_id.load(Ordering::Relaxed))
    }

    /// Encodes the container and writes it whole; durable when this returns.
    fn append(&self, writer: ContainerWriter) -> Result<()> {
        let id = writer.id();
        if writer.is_sparse() {
            return Err(Error::invalid(format!(
                "container {id} lacks chunk payloads and cannot be stored"
            )));
        }
        if id.0 >= *self.marked.lock() {
            self.raise_mark(ContainerId(id.0 + 1 + id_mark::MARK_AHEAD))?;
        }
        let bytes = writer.finish();
        self.backend
            .write_atomic(&object_names::container(id), &bytes)?;
        bump(&self.counters.containers_written, 1);
        Ok(())
    }

    /// Reads only the metadata section (descriptors) of a container: one tail
    /// read of `TAIL_READ_HINT` bytes, a second only for unusually large
    /// metadata sections.
    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta> {
        let key = object_names::container(id);
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
    /// A container whose metadata section is sound is served even when parts
    /// of its data are not (a flipped byte in the clear, a sealed block that
    /// fails to authenticate, zero-filled by the backend): its chunks are
    /// verified one by one on the way out.
    fn read(&self, id: ContainerId) -> Result<LoadedContainer> {
        let Salvaged { bytes, damaged } =
            self.backend.read_salvaging(&object_names::container(id))?;
        bump(&self.counters.containers_read, 1);
        // Blocks that failed to authenticate say more than the checksum
        // their zero-filling then breaks.
        let unreadable = |e: Error| match damaged.first() {
            Some((_, why)) => Error::corrupt(format!("container {id}"), why.clone()),
            None => with_container(e, id),
        };
        let (meta, decode_error) = match container::decode_container(&bytes) {
            Ok(m) => (m, None),
            Err(e) if e.is_corruption() => match container::decode_tail(bytes.len() as u64, &bytes)
            {
                Ok(TailDecode::Meta(m)) => (m, Some(e.to_string())),
                _ => return Err(unreadable(e)),
            },
            Err(e) => return Err(unreadable(e)),
        };
        // The metadata section and trailer must be authentic, not merely
        // decode: a zero-filled block inside them means they are not.
        let meta_start = meta.data_offset + meta.data_len;
        if let Some((_, why)) = damaged.iter().find(|(r, _)| r.end > meta_start) {
            return Err(Error::corrupt(format!("container {id}"), why.clone()));
        }
        let damage = damaged.first().map(|(_, why)| why.clone()).or(decode_error);
        check_id(id, meta.id)?;
        Ok(LoadedContainer {
            bytes,
            meta,
            data_ok: damage.is_none(),
            damage,
        })
    }

    fn read_chunk(&self, meta: &ContainerMeta, d: &Descriptor) -> Result<Vec<u8>> {
        let r = container::chunk_file_range(meta, d);
        if u64::from(d.offset) + u64::from(d.stored_len) > meta.data_len {
            return Err(Error::corrupt(
                format!("container {}", meta.id),
                format!("chunk {} lies outside the data section", d.fp),
            ));
        }
        let bytes = self.backend.read_at(
            &object_names::container(meta.id),
            r.start,
            d.stored_len as usize,
        )?;
        bump(&self.counters.chunk_reads, 1);
        Ok(bytes)
    }

    fn read_range(&self, meta: &ContainerMeta, range: Range<u64>) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.read_range_into(meta, range, &mut bytes)?;
        Ok(bytes)
    }

    fn read_range_into(
        &self,
        meta: &ContainerMeta,
        range: Range<u64>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if range.end > meta.data_offset + meta.data_len || range.start > range.end {
            return Err(Error::corrupt(
                format!("container {}", meta.id),
                format!(
                    "bytes {}..{} lie outside the data section",
                    range.start, range.end
                ),
            ));
        }
        self.backend.read_at_into(
            &object_names::container(meta.id),
            range.start,
            (range.end - range.start) as usize,
            out,
        )?;
        bump(&self.counters.container_range_reads, 1);
        Ok(())
    }

    fn delete(&self, id: ContainerId) -> Result<()> {
        self.backend.delete(&object_names::container(id))
    }

    fn read_parallelism(&self) -> usize {
        self.backend.read_parallelism()
    }

    fn write_parallelism(&self) -> usize {
        self.backend.write_parallelism()
    }
}

/// `range` of a whole container's bytes, or why not.
fn slice_of(bytes: &[u8], id: ContainerId, range: Range<u64>) -> Result<Vec<u8>> {
    bytes
        .get(range.start as usize..range.end as usize)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| {
            Error::corrupt(
                format!("container {id}"),
                format!("bytes {}..{} lie past its end", range.start, range.end),
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;
    use cairn_core::{ChunkKind, CompressionCodec, Fingerprint};

    fn log_over(mem: &Arc<MemBackend>) -> ContainerLog {
        ContainerLog::open(mem.clone(), Arc::new(Counters::default())).unwrap()
    }

    fn one_chunk(id: ContainerId) -> ContainerWriter {
        let mut w = ContainerWriter::new(id, 32, 1 << 16);
        let fp = Fingerprint::from_slice(&[id.0 as u8; 32]);
        w.push(fp, ChunkKind::Data, 0, CompressionCodec::None, 3, b"abc");
        w
    }

    /// A writer starts from the mark, not from a listing; a crashed
    /// writer's containers lie below the mark it raised first; a lost
    /// mark costs one listing and is written again.
    #[test]
    fn the_next_id_comes_from_the_mark_and_a_crash_never_lowers_it() {
        let mem = Arc::new(MemBackend::new());
        let a = log_over(&mem);
        a.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(id_mark::read(&*mem).unwrap(), Some(ContainerId(1)));
        let (first, second) = (a.allocate(), a.allocate());
        a.append(one_chunk(second)).unwrap();
        // Crashed here: `first` never written, `second` an orphan.
        let mark = id_mark::read(&*mem).unwrap().unwrap();
        assert!(mark > second, "{mark} <= {second}");
        assert_eq!(mark.0, second.0 + 1 + id_mark::MARK_AHEAD);
        drop(a);

        // A foreign container above the mark is not listed: the mark rules.
        let stray = ContainerId(mark.0 + 1000);
        mem.write_atomic(&object_names::container(stray), b"x")
            .unwrap();
        let b = log_over(&mem);
        b.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(b.next_id(), mark);
        assert!(b.allocate() > first.max(second));
        // The floor (index, snapshots, a collection's reservation) still counts.
        b.refresh_next_id(ContainerId(mark.0 + 5)).unwrap();
        assert!(b.next_id() >= ContainerId(mark.0 + 5));

        // Without a mark, the containers are listed and the mark restored.
        mem.delete(id_mark::KEY).unwrap();
        let c = log_over(&mem);
        c.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(c.next_id(), ContainerId(stray.0 + 1));
        assert_eq!(
            id_mark::read(&*mem).unwrap(),
            Some(ContainerId(stray.0 + 1))
        );
        // A damaged one likewise.
        mem.write_atomic(id_mark::KEY, b"garbage").unwrap();
        let d = log_over(&mem);
        d.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(d.next_id(), ContainerId(stray.0 + 1));
    }

    /// Ids reserved for a collection's copies are covered by the mark at
    /// once, so the copies (written outside the writer lock) never raise it.
    #[test]
    fn reserved_ids_are_marked_before_they_are_used() {
        let mem = Arc::new(MemBackend::new());
        let log = log_over(&mem);
        log.refresh_next_id(ContainerId(1)).unwrap();
        log.reserve_ids(ContainerId(40)).unwrap();
        assert_eq!(id_mark::read(&*mem).unwrap(), Some(ContainerId(40)));
        mem.write_atomic(id_mark::KEY, &id_mark::encode(ContainerId(500)))
            .unwrap();
        // A copy inside the reservation: the mark (raised since by another
        // writer) is left alone.
        log.append(one_chunk(ContainerId(7))).unwrap();
        assert_eq!(id_mark::read(&*mem).unwrap(), Some(ContainerId(500)));
    }
}
