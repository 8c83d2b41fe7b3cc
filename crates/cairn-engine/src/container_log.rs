//! The container log (DDFS §3.3): containers are appended whole, never
//! modified, and identified by ids unique over the repository's life. It
//! supports reading a container's metadata section alone (one small tail read,
//! what Locality Preserved Caching and physical GC rely on) and reading a
//! whole container for restore. Every read and write is counted.

use std::ops::Range;
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
    /// A fresh id, unique over the store's life (among every writer of the
    /// store, running together or one after another).
    fn allocate(&self) -> Result<ContainerId>;
    /// The id the next allocation returns.
    fn next_id(&self) -> ContainerId;
    /// The lowest id this writer may ever store into: every container it
    /// allocates from now on lies at or above it (a writer session's
    /// floor, `session.rs`).
    fn floor(&self) -> Result<ContainerId> {
        Ok(self.next_id())
    }
    /// Re-reads the next id from the store, and never lets it fall below
    /// `floor` (one past every id referenced anywhere else: index, snapshot
    /// records), so the id of a container that was lost is never handed out
    /// again. A writer calls this once it holds the lock: ids read before may
    /// have been used by the writer it waited for.
    fn refresh_next_id(&self, floor: ContainerId) -> Result<()>;
    /// Appends a sealed container; durable when this returns.
    fn append(&self, writer: ContainerWriter) -> Result<()>;
    /// `n` fresh ids, consecutive, for a writer that hands them out itself
    /// (a collection's copies, written while other writers run): no other
    /// allocation, here or in any other writer, returns one of them.
    fn reserve(&self, n: u64) -> Result<Range<ContainerId>>;
    /// The metadata section alone (DDFS §4.3: one small read).
    fn read_meta(&self, id: ContainerId) -> Result<ContainerMeta>;
    /// Whether the store keeps containers' descriptions only, no chunk
    /// payloads (the simulator's `MetaOnlyStore`).
    fn describes_only(&self) -> bool {
        false
    }
    /// The metadata section of a container closed but not yet durable
    /// (`chunks` descriptors of `fp_width`-byte fingerprints) was served
    /// from memory where a [`Self::read_meta`] would be once it is: a
    /// store that models a device charges it as that read (the
    /// simulator's `DeviceStore`), so modeled time does not depend on when
    /// the sealer finishes. Default: nothing.
    fn served_meta(&self, chunks: usize, fp_width: usize) {
        let _ = (chunks, fp_width);
    }
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
    /// [`ContainerStore::read_range`] into `out`, which is exactly as long
    /// as the range: memory the caller owns (a volume read filling its
    /// reply with no buffer between).
    fn read_range_into_slice(
        &self,
        meta: &ContainerMeta,
        range: Range<u64>,
        out: &mut [u8],
    ) -> Result<()> {
        let bytes = self.read_range(meta, range)?;
        if bytes.len() != out.len() {
            return Err(Error::corrupt(
                format!("container {}", meta.id),
                format!("range read of {} bytes into {}", bytes.len(), out.len()),
            ));
        }
        out.copy_from_slice(&bytes);
        Ok(())
    }
    /// A hint that file offsets `range` of container `meta` will be read
    /// soon ([`Backend::prefetch`]): true if the store fetches them in the
    /// background. Default: false.
    fn prefetch_range(&self, meta: &ContainerMeta, range: Range<u64>) -> bool {
        let _ = (meta, range);
        false
    }
    fn delete(&self, id: ContainerId) -> Result<()>;

    /// Deletes the containers, in no particular order (on object storage in
    /// bulk requests). Default: one [`ContainerStore::delete`] each.
    fn delete_many(&self, ids: &[ContainerId]) -> Result<()> {
        ids.iter().try_for_each(|id| self.delete(*id))
    }
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
    block: parking_lot::Mutex<Block>,
    /// The highest floor [`ContainerStore::floor`] returned: a session's
    /// promise that this log never claims ids below it.
    floor_given: parking_lot::Mutex<u64>,
    /// The mark as [`ContainerStore::refresh_next_id`] last read it (under
    /// the writer lock): the next session's floor starts from it instead
    /// of reading the mark again (one request fewer per backup on object
    /// storage). A mark read earlier is never above what claims start at.
    mark_at_refresh: parking_lot::Mutex<Option<u64>>,
}

/// The ids this process hands out: `[next, end)` lie in slots this
/// process claimed (`id_mark.rs`), so no other writer (running now or
/// later) is handed one
/// (docs/concurrency.md, "Container ids in slots"). `next == end`: none
/// left, and the next allocation claims a new block at or above `next`.
#[derive(Debug)]
struct Block {
    next: u64,
    end: u64,
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
            block: parking_lot::Mutex::new(Block { next: 1, end: 1 }),
            floor_given: parking_lot::Mutex::new(0),
            mark_at_refresh: parking_lot::Mutex::new(None),
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
    /// The stored mark, or, when there is none (or it is damaged), one
    /// past the highest container present and the highest slot claimed.
    fn stored_mark(&self) -> Result<(u64, bool)> {
        Ok(match id_mark::read(&*self.backend)? {
            Some(m) => (m.0, true),
            None => {
                let top = self.ids()?.last().map_or(1, |id| id.0 + 1);
                (top.max(id_mark::slots_end(&*self.backend)?), false)
            }
        })
    }

    /// Takes at least `n` ids at or above `floor` for this process: the
    /// slots (`id_mark.rs`) from the mark (or `floor`, or the last floor
    /// this log gave a session, if higher) on, each created with
    /// `create_new`; a slot someone else holds moves the claim past it
    /// (slots of a claim that lost one later are left unused). Returns
    /// every id claimed: from the start to the end of the last slot. Then
    /// raises the mark to that end. `n == 0` only raises the mark to
    /// `floor`.
    fn claim(&self, floor: u64, n: u64) -> Result<Range<u64>> {
        let (mark, stored) = self.stored_mark()?;
        let mut start = mark.max(floor).max(*self.floor_given.lock()).max(1);
        if n == 0 {
            if !stored || start > mark {
                id_mark::write(&*self.backend, ContainerId(start))?;
            }
            return Ok(start..start);
        }
        let end = loop {
            let last = start
                .checked_add(n - 1)
                .ok_or_else(|| Error::invalid("container ids exhausted"))?
                / id_mark::BLOCK;
            let mut lost = None;
            for k in start / id_mark::BLOCK..=last {
                if !id_mark::claim_slot(&*self.backend, k)? {
                    lost = Some(k);
                    break;
                }
            }
            match lost {
                None => break (last + 1) * id_mark::BLOCK,
                Some(k) => start = (k + 1) * id_mark::BLOCK,
            }
        };
        if end > mark || !stored {
            id_mark::write(&*self.backend, ContainerId(end))?;
        }
        Ok(start..end)
    }
}

impl ContainerStore for ContainerLog {
    /// From the container-id mark; a listing of the containers only when
    /// the mark is missing or damaged, and then the mark is written again.
    fn refresh_next_id(&self, floor: ContainerId) -> Result<()> {
        let (mut mark, stored) = self.stored_mark()?;
        let next = mark.max(floor.0).max(1);
        if !stored || mark < next {
            // Missing, damaged, or below what the floor shows was used:
            // raised (a hint: claims never rest on it alone, `claim`).
            mark = self.claim(next, 0)?.end;
        }
        *self.mark_at_refresh.lock() = Some(mark);
        let mut b = self.block.lock();
        // A block with ids left stays this process's, unless the mark no
        // longer covers it (the store was rolled back, or two claims
        // raised it at once: then a few ids are left unused) or the floor
        // shows its ids used; else the next allocation claims from here on.
        if b.next >= b.end || b.next < floor.0 || b.end > mark {
            b.next = b.next.max(next);
            b.end = b.next;
        }
        Ok(())
    }

    /// The ids left in this process's block, else the stored mark: a
    /// block claimed later starts at or above it.
    /// Claims after this start at or above what it returns, even if the
    /// mark is later found lower (two claims raising it at once).
    ///
    /// The mark is the one the last refresh read, when there was one: a
    /// floor only has to lie at or below every id claimed after it, and
    /// claims start at or above the floors given (`claim`), so an older,
    /// lower mark makes a lower, still true floor.
    fn floor(&self) -> Result<ContainerId> {
        let cached = *self.mark_at_refresh.lock();
        let mark = match cached {
            Some(m) => m,
            None => self.stored_mark()?.0,
        };
        let b = self.block.lock();
        let held = if b.next < b.end { b.next } else { u64::MAX };
        let floor = mark.min(held);
        let mut given = self.floor_given.lock();
        *given = (*given).max(floor);
        Ok(ContainerId(floor))
    }

    /// The first `n` ids of a claim (the rest of its last slot is left).
    fn reserve(&self, n: u64) -> Result<Range<ContainerId>> {
        let floor = self.block.lock().end;
        let r = self.claim(floor, n)?;
        Ok(ContainerId(r.start)..ContainerId(r.start + n))
    }

    fn ids(&self) -> Result<Vec<ContainerId>> {
        Self::list_ids(&*self.backend)
    }

    fn allocate(&self) -> Result<ContainerId> {
        let mut b = self.block.lock();
        if b.next >= b.end {
            // The rest of a slot, or a whole one: claims stay slot-aligned.
            let r = self.claim(b.next, 1)?;
            b.next = r.start;
            b.end = r.end;
        }
        let id = b.next;
        b.next += 1;
        Ok(ContainerId(id))
    }

    /// The id this process's next allocation starts from: every container
    /// this process allocated lies below it (and, once all streams are
    /// sealed, is written).
    fn next_id(&self) -> ContainerId {
        ContainerId(self.block.lock().next)
    }

    /// Encodes the container and writes it whole; durable when this returns.
    fn append(&self, writer: ContainerWriter) -> Result<()> {
        let id = writer.id();
        if writer.is_sparse() {
            return Err(Error::invalid(format!(
                "container {id} lacks chunk payloads and cannot be stored"
            )));
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
        check_data_range(meta, &range)?;
        self.backend.read_at_into(
            &object_names::container(meta.id),
            range.start,
            (range.end - range.start) as usize,
            out,
        )?;
        bump(&self.counters.container_range_reads, 1);
        Ok(())
    }

    fn read_range_into_slice(
        &self,
        meta: &ContainerMeta,
        range: Range<u64>,
        out: &mut [u8],
    ) -> Result<()> {
        check_data_range(meta, &range)?;
        if (range.end - range.start) as usize != out.len() {
            return Err(Error::invalid(format!(
                "a range read of {} bytes into {}",
                range.end - range.start,
                out.len()
            )));
        }
        self.backend
            .read_at_slice(&object_names::container(meta.id), range.start, out)?;
        bump(&self.counters.container_range_reads, 1);
        Ok(())
    }

    fn prefetch_range(&self, meta: &ContainerMeta, range: Range<u64>) -> bool {
        check_data_range(meta, &range).is_ok()
            && self.backend.prefetch(
                &object_names::container(meta.id),
                range.start,
                range.end - range.start,
            )
    }

    fn delete(&self, id: ContainerId) -> Result<()> {
        self.backend.delete(&object_names::container(id))
    }

    fn delete_many(&self, ids: &[ContainerId]) -> Result<()> {
        let keys: Vec<String> = ids.iter().map(|id| object_names::container(*id)).collect();
        self.backend.delete_many(&keys)
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

/// A range read must lie inside the container's data section (a damaged
/// descriptor must not read the metadata or past the file as chunk bytes).
fn check_data_range(meta: &ContainerMeta, range: &Range<u64>) -> Result<()> {
    if range.end > meta.data_offset + meta.data_len || range.start > range.end {
        return Err(Error::corrupt(
            format!("container {}", meta.id),
            format!(
                "bytes {}..{} lie outside the data section",
                range.start, range.end
            ),
        ));
    }
    Ok(())
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
        let (first, second) = (a.allocate().unwrap(), a.allocate().unwrap());
        // The slot was claimed before its first id was handed out, and
        // the mark raised to its end.
        assert!(mem
            .exists(&id_mark::slot_key(first.0 / id_mark::BLOCK))
            .unwrap());
        assert_eq!(
            id_mark::read(&*mem).unwrap(),
            Some(ContainerId((first.0 / id_mark::BLOCK + 1) * id_mark::BLOCK))
        );
        a.append(one_chunk(second)).unwrap();
        // Crashed here: `first` never written, `second` an orphan.
        let mark = id_mark::read(&*mem).unwrap().unwrap();
        assert!(mark > second, "{mark} <= {second}");
        drop(a);

        // A foreign container above the mark is not listed: the mark rules.
        let stray = ContainerId(mark.0 + 1000);
        mem.write_atomic(&object_names::container(stray), b"x")
            .unwrap();
        let b = log_over(&mem);
        b.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(b.next_id(), mark);
        assert!(b.allocate().unwrap() > first.max(second));
        // The floor (index, snapshots, a collection's reservation) still
        // counts, for the ids not yet claimed.
        let c = log_over(&mem);
        c.refresh_next_id(ContainerId(mark.0 + 500)).unwrap();
        assert!(c.next_id() >= ContainerId(mark.0 + 500));
        assert!(c.allocate().unwrap() >= ContainerId(mark.0 + 500));

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

    /// Writers running together on one store (each its own log, as
    /// separate processes are) never hand out one id twice, whatever the
    /// interleaving; each writer's ids increase.
    #[test]
    fn writers_allocating_together_never_share_an_id() {
        let mem = Arc::new(MemBackend::new());
        let logs: Vec<ContainerLog> = (0..4).map(|_| log_over(&mem)).collect();
        for l in &logs {
            l.refresh_next_id(ContainerId(1)).unwrap();
        }
        let per_writer = 3 * id_mark::BLOCK as usize + 5;
        let ids: Vec<Vec<ContainerId>> = std::thread::scope(|s| {
            let handles: Vec<_> = logs
                .iter()
                .map(|l| s.spawn(move || (0..per_writer).map(|_| l.allocate().unwrap()).collect()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<ContainerId> = ids.iter().flatten().copied().collect();
        for mine in &ids {
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "a writer's ids increase"
            );
        }
        all.sort();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n, "an id was handed out twice");
        // Every id handed out lies below the mark.
        let mark = id_mark::read(&*mem).unwrap().unwrap();
        assert!(all.iter().all(|id| *id < mark));
        // A writer that refreshes keeps the rest of its block.
        let before = logs[0].next_id();
        logs[0].refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(logs[0].next_id(), before);
    }

    /// Ids reserved for a collection's copies are claimed at once: no
    /// writer, before or after, is handed one of them.
    #[test]
    fn reserved_ids_are_claimed_before_they_are_used() {
        let mem = Arc::new(MemBackend::new());
        let writer = log_over(&mem);
        let gc = log_over(&mem);
        writer.refresh_next_id(ContainerId(1)).unwrap();
        gc.refresh_next_id(ContainerId(1)).unwrap();
        let mine = writer.allocate().unwrap();
        let reserved = gc.reserve(40).unwrap();
        assert_eq!(reserved.end.0 - reserved.start.0, 40);
        assert!(!reserved.contains(&mine));
        assert!(id_mark::read(&*mem).unwrap().unwrap() >= reserved.end);
        // The writer's block goes on below the reservation; its next block
        // and every later writer's ids lie above it.
        for _ in 0..2 * id_mark::BLOCK {
            let id = writer.allocate().unwrap();
            assert!(!reserved.contains(&id), "{id} in {reserved:?}");
        }
        let later = log_over(&mem);
        later.refresh_next_id(ContainerId(1)).unwrap();
        assert!(later.allocate().unwrap() >= reserved.end);
        // A copy inside the reservation is written as it is.
        gc.append(one_chunk(reserved.start)).unwrap();
    }

    /// The mark is a hint: two claims raising it at once may leave it
    /// below a claimed slot. A claim from such a mark loses the slots
    /// already held and moves past them; no id is handed out twice, and no
    /// claim starts below a floor this log gave a session.
    #[test]
    fn a_mark_left_behind_costs_a_lost_slot_never_a_shared_id() {
        let mem = Arc::new(MemBackend::new());
        let a = log_over(&mem);
        a.refresh_next_id(ContainerId(1)).unwrap();
        let mine: Vec<ContainerId> = (0..70).map(|_| a.allocate().unwrap()).collect();
        // Slots 0 and 1 are a's; the mark falls back to 1.
        id_mark::write(&*mem, ContainerId(1)).unwrap();
        let b = log_over(&mem);
        b.refresh_next_id(ContainerId(1)).unwrap();
        let theirs = b.allocate().unwrap();
        assert!(!mine.contains(&theirs), "{theirs} handed out twice");
        assert_eq!(theirs, ContainerId(2 * id_mark::BLOCK));
        // A session's floor holds even if the mark falls below it later.
        let c = log_over(&mem);
        c.refresh_next_id(ContainerId(1)).unwrap();
        let floor = c.floor().unwrap();
        id_mark::write(&*mem, ContainerId(1)).unwrap();
        assert!(c.allocate().unwrap() >= floor);
        // Without a mark, the slots count as much as the containers.
        mem.delete(id_mark::KEY).unwrap();
        let end = id_mark::slots_end(&*mem).unwrap();
        let d = log_over(&mem);
        d.refresh_next_id(ContainerId(1)).unwrap();
        assert_eq!(d.allocate().unwrap(), ContainerId(end));
    }
}
