//! What restore reads once the policy has decided: the container's
//! *metadata section* tells the policy which chunks a read yields (so the
//! policy decides before any data moves), and a [`Fetch`] then reads only
//! what it decided to use, the step's chunk and the chunks it keeps, with
//! each chunk decoded and verified against its fingerprint.
//!
//! A fetch reads the whole container in one request, or, when the wanted
//! chunks lie in a few short stretches adding up to at most half of it,
//! only those stretches (one range read each; neighbours closer than
//! [`MERGE_GAP`] share one). On object storage a request costs a round
//! trip whatever its size, so whole reads stay the rule and ranges are
//! taken only where they save at least half the bytes; on a local disk
//! both are one read.
//!
//! The index is derived data: when the container it names is gone, damaged
//! or lacks the chunk, the containers' own metadata decide where the chunk
//! is (`ChunkStore::locate_in_containers`), and the policy is told of the
//! container actually read.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::container::{self, ContainerMeta, Descriptor};
use rayon::prelude::*;

use super::cache::ChunkStore;
use super::policy::PlanStep;

/// Wanted chunks closer than this are fetched by one range read (the gap
/// read along): a request costs more than 256 KiB at any realistic link.
pub const MERGE_GAP: u64 = 256 << 10;
/// Most range reads one fetch makes before a whole read is cheaper.
pub const MAX_RANGES: usize = 8;

/// A container's metadata with each chunk's position in it.
pub struct Known {
    pub meta: ContainerMeta,
    pos: FpMap<usize>,
}

impl Known {
    pub fn new(meta: ContainerMeta) -> Self {
        let pos = meta
            .descriptors
            .iter()
            .enumerate()
            .map(|(i, d)| (d.fp, i))
            .collect();
        Known { meta, pos }
    }

    /// The position of chunk `fp` among the descriptors.
    pub fn position(&self, fp: &Fingerprint) -> Option<usize> {
        self.pos.get(fp).copied()
    }
}

/// Plan steps past a miss whose containers' metadata sections the decider
/// reads ahead, in parallel, on a store with parallel reads.
pub const LOOK_AHEAD_STEPS: usize = 16384;

/// The metadata sections the decider has read lately (first in, first
/// out): a policy with little memory reads some containers many times.
pub struct Metas {
    known: HashMap<ContainerId, Arc<Known>>,
    order: VecDeque<ContainerId>,
    capacity: usize,
    /// Plan steps up to here have had their containers' sections read ahead.
    scanned: usize,
}

impl Metas {
    pub fn new(capacity: usize) -> Self {
        Metas {
            known: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            scanned: 0,
        }
    }

    fn get(&mut self, store: &ChunkStore, id: ContainerId) -> Result<Arc<Known>> {
        if let Some(k) = self.known.get(&id) {
            return Ok(k.clone());
        }
        let k = Arc::new(Known::new(store.log.read_meta(id)?));
        self.insert(id, k.clone());
        Ok(k)
    }

    fn insert(&mut self, id: ContainerId, k: Arc<Known>) {
        if self.order.len() >= self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.known.remove(&old);
            }
        }
        self.order.push_back(id);
        self.known.insert(id, k);
    }

    /// On a store with parallel reads, reads at once the metadata sections
    /// of the containers the index names for the plan's next steps (up to
    /// [`LOOK_AHEAD_STEPS`] past `pos`, at most half the sections kept):
    /// without it the decider waits a round trip per container it meets,
    /// and a restore with a cold cache runs at one container at a time.
    /// Failures are left for [`Metas::locate`] to meet and report.
    pub fn look_ahead(&mut self, store: &ChunkStore, plan: &[PlanStep], pos: usize) {
        let threads = store.log.read_parallelism();
        if threads <= 1 || self.scanned > pos + LOOK_AHEAD_STEPS / 2 {
            return;
        }
        let end = (pos + LOOK_AHEAD_STEPS).min(plan.len());
        let mut at = self.scanned.max(pos);
        let mut wanted: Vec<ContainerId> = Vec::new();
        while at < end && wanted.len() < self.capacity / 2 {
            if let Ok(id) = store.locate(&plan[at].fp) {
                if !self.known.contains_key(&id) && !wanted.contains(&id) {
                    wanted.push(id);
                }
            }
            at += 1;
        }
        self.scanned = at;
        let read =
            crate::blocking_map::blocking_map(&wanted, threads, |id| store.log.read_meta(*id).ok());
        for (id, meta) in wanted.into_iter().zip(read) {
            if let Some(m) = meta {
                self.insert(id, Arc::new(Known::new(m)));
            }
        }
    }

    /// The container holding `fp` and the chunk's position in it: the one
    /// the index names, or, when that one is gone, damaged or lacks it,
    /// the one the containers' metadata names.
    pub fn locate(&mut self, store: &ChunkStore, fp: &Fingerprint) -> Result<(Arc<Known>, usize)> {
        let id = store.locate(fp)?;
        let first = self.get(store, id);
        if let Ok(k) = &first {
            if let Some(i) = k.position(fp) {
                return Ok((k.clone(), i));
            }
        }
        let Ok(other) = store.locate_in_containers(fp, Some(id)) else {
            first?;
            return Err(missing_here(fp));
        };
        let k = self.get(store, other)?;
        match k.position(fp) {
            Some(i) => Ok((k, i)),
            None => Err(missing_here(fp)),
        }
    }
}

fn missing_here(fp: &Fingerprint) -> Error {
    Error::corrupt(
        "repository",
        format!("index places chunk {fp} in a container that does not hold it"),
    )
}

/// One container read the policy decided on.
pub struct Fetch {
    pub known: Arc<Known>,
    /// Positions of the chunks to hand out: the step's first, then each
    /// chunk the policy keeps, in the policy's order.
    pub wanted: Vec<usize>,
}

/// The wanted chunks' bytes, decoded and verified (or why not), in the
/// order of [`Fetch::wanted`].
pub type Fetched = Vec<Result<Vec<u8>>>;

impl Fetch {
    /// The range reads that fetch the wanted chunks, or `None` when one
    /// whole read is the better buy.
    pub fn ranges(&self) -> Option<Vec<Range<u64>>> {
        let meta = &self.known.meta;
        let mut spans: Vec<Range<u64>> = self
            .wanted
            .iter()
            .map(|&i| container::chunk_file_range(meta, &meta.descriptors[i]))
            .collect();
        spans.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        for r in spans {
            match merged.last_mut() {
                Some(last) if r.start <= last.end.saturating_add(MERGE_GAP) => {
                    last.end = last.end.max(r.end);
                }
                _ => merged.push(r),
            }
        }
        let bytes: u64 = merged.iter().map(|r| r.end - r.start).sum();
        (merged.len() <= MAX_RANGES && bytes.saturating_mul(2) <= meta.file_size).then_some(merged)
    }

    /// Reads what the policy decided on and decodes the wanted chunks (in
    /// parallel). A failed read fails every wanted chunk with its error.
    pub fn run(&self, store: &ChunkStore) -> Fetched {
        let meta = &self.known.meta;
        self.read_each(store, &|stored, d| {
            let mut out = Vec::with_capacity(d.raw_len as usize);
            store
                .codec
                .decode_stored_verified(stored, meta, d, &mut out)
                .map(|()| out)
        })
    }

    /// The wanted chunks' stored bytes (compressed as they lie in the
    /// container), each decoded and verified first: `cairn copy` moves
    /// chunks as stored and never moves damage.
    pub fn read_stored(&self, store: &ChunkStore) -> Fetched {
        let meta = &self.known.meta;
        let verify = |stored: &[u8], d: &Descriptor| {
            let mut out = Vec::with_capacity(d.raw_len as usize);
            store
                .codec
                .decode_stored_verified(stored, meta, d, &mut out)
                .map(|()| stored.to_vec())
        };
        self.read_each(store, &verify)
    }

    /// Reads the wanted chunks (one whole read or the range reads of
    /// [`Fetch::ranges`]) and hands each one's stored bytes to `each`, in
    /// parallel, in the order of [`Fetch::wanted`].
    fn read_each(&self, store: &ChunkStore, each: &EachChunk<'_>) -> Fetched {
        let meta = &self.known.meta;
        let all = |one: &(dyn Fn(&Descriptor) -> Result<Vec<u8>> + Sync)| -> Fetched {
            self.wanted
                .par_iter()
                .with_min_len(4)
                .map(|&i| one(&meta.descriptors[i]))
                .collect()
        };
        let read = match self.ranges() {
            Some(ranges) => ranges
                .into_iter()
                .map(|r| Ok((r.start, store.log.read_range(meta, r)?)))
                .collect::<Result<Vec<(u64, Vec<u8>)>>>()
                .map(Read::Ranges),
            None => store.log.read(meta.id).map(Read::Whole),
        };
        match read {
            Ok(Read::Whole(c)) => all(&|d| {
                let stored = container::stored_chunk(&c.bytes, &c.meta, d).map_err(|e| {
                    Error::corrupt(
                        format!("container {}", meta.id),
                        format!("chunk {}: {e}", d.fp),
                    )
                })?;
                each(stored, d)
            }),
            Ok(Read::Ranges(read)) => all(&|d| {
                let want = container::chunk_file_range(meta, d);
                let (start, b) = read
                    .iter()
                    .find(|(start, b)| *start <= want.start && want.end <= start + b.len() as u64)
                    .expect("every wanted chunk lies in a range read");
                each(
                    &b[(want.start - start) as usize..(want.end - start) as usize],
                    d,
                )
            }),
            Err(e) => {
                let why = e.to_string();
                let mut all = vec![Err(e)];
                all.extend((1..self.wanted.len()).map(|_| {
                    Err(Error::corrupt(
                        format!("container {}", meta.id),
                        why.clone(),
                    ))
                }));
                all
            }
        }
    }
}

/// What [`Fetch`] does with each wanted chunk's stored bytes.
type EachChunk<'a> = dyn Fn(&[u8], &Descriptor) -> Result<Vec<u8>> + Sync + 'a;

enum Read {
    Whole(crate::container_log::LoadedContainer),
    /// Each range read with its start offset in the file.
    Ranges(Vec<(u64, Vec<u8>)>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{ChunkKind, CompressionCodec};
    use cairn_format::container::Descriptor;

    /// A 4 MiB container of 64 chunks of 64 KiB.
    fn known() -> Arc<Known> {
        let descriptors = (0..64u32)
            .map(|i| Descriptor {
                fp: Fingerprint::from_slice(&[i as u8; 32]),
                kind: ChunkKind::Data,
                level: 0,
                codec: CompressionCodec::None,
                offset: i * (64 << 10),
                stored_len: 64 << 10,
                raw_len: 64 << 10,
            })
            .collect();
        Arc::new(Known::new(ContainerMeta {
            id: ContainerId(1),
            fp_width: 32,
            descriptors,
            data_offset: 32,
            data_len: 4 << 20,
            data_crc: 0,
            file_size: (4 << 20) + 32 + 64 * 60,
        }))
    }

    fn ranges(wanted: &[usize]) -> Option<Vec<Range<u64>>> {
        Fetch {
            known: known(),
            wanted: wanted.to_vec(),
        }
        .ranges()
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn few_chunks_are_fetched_by_ranges_and_neighbours_share_one() {
        let at = |i: u64| 32 + i * (64 << 10);
        assert_eq!(ranges(&[5]), Some(vec![at(5)..at(6)]));
        // Chunks 5 and 8 are 192 KiB apart (< MERGE_GAP): one range.
        assert_eq!(ranges(&[8, 5]), Some(vec![at(5)..at(9)]));
        assert_eq!(ranges(&[40, 5]), Some(vec![at(5)..at(6), at(40)..at(41)]));
    }

    #[test]
    fn most_of_a_container_or_many_stretches_is_fetched_whole() {
        assert_eq!(ranges(&(0..40).collect::<Vec<_>>()), None, "over half");
        // Nine stretches far apart: more requests than a whole read is worth.
        assert_eq!(ranges(&(0..9).map(|i| i * 7).collect::<Vec<_>>()), None);
        assert!(ranges(&(0..8).map(|i| i * 7).collect::<Vec<_>>()).is_some());
    }
}
