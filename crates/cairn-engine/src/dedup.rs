//! Accelerated segment filtering, DDFS (`001_3652cceaf162c5a1.txt`) §4.4, in
//! the paper's order, for every incoming chunk:
//!
//! 1. Look the fingerprint up in the segment cache (Locality Preserved Cache).
//!    A hit means duplicate.
//! 2. On a miss, test the Summary Vector. Not in it means new: the chunk is
//!    written into the stream's current container.
//! 3. Otherwise look the fingerprint up in the segment index (its in-memory
//!    part, then one on-disk page). Found means duplicate, and the whole
//!    metadata section of that container is inserted into the cache (LRU by
//!    container, evicting first when full). Not found means new.
//!
//! The in-memory part of the index holds the chunks stored since the last
//! merge: those of sealed containers (with their container id) and those
//! decided new but still being packed by some stream ("in flight"), so two
//! parallel streams never store the same new chunk twice. A hit on a sealed
//! container prefetches its metadata like an on-disk hit; a hit on an open
//! container has no metadata section to read yet.
//!
//! Ablations for DDFS Table 4 switch the Summary Vector or the cache off.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use cairn_core::counters::bump;
use cairn_core::{ContainerId, Counters, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;

use crate::container_log::ContainerStore;
use crate::index::disk_index::DiskIndex;
use crate::index::locality_cache::LocalityCache;
use crate::index::summary_vector::SummaryVector;
use crate::index::OpenedIndex;

pub struct Dedup {
    pub disk: DiskIndex,
    pub summary: SummaryVector,
    log: Arc<dyn ContainerStore>,
    counters: Arc<Counters>,
    use_summary: bool,
    use_cache: bool,
    state: Mutex<State>,
}

struct State {
    cache: LocalityCache,
    /// In-memory index part: `Some(container)` once packed, `None` in flight.
    memory: FpMap<Option<ContainerId>>,
    /// Containers being filled: no metadata section on disk yet.
    open: HashSet<ContainerId>,
}

impl Dedup {
    pub fn new(
        index: OpenedIndex,
        log: Arc<dyn ContainerStore>,
        counters: Arc<Counters>,
        cache_containers: usize,
        use_summary: bool,
        use_cache: bool,
    ) -> Self {
        let mut memory = FpMap::default();
        for e in index.replayed {
            memory.entry(e.fp).or_insert(Some(e.container));
        }
        Dedup {
            disk: index.disk,
            summary: index.summary,
            log,
            counters,
            use_summary,
            use_cache,
            state: Mutex::new(State {
                cache: LocalityCache::new(cache_containers),
                memory,
                open: HashSet::new(),
            }),
        }
    }

    /// Decides, in order, whether each fingerprint is new (`true`) or a
    /// duplicate. A fingerprint decided new is in flight from then on, so a
    /// repeat later in the same batch or in another stream is a duplicate.
    pub fn resolve_batch(&self, fps: &[Fingerprint], is_new: &mut Vec<bool>) -> Result<()> {
        is_new.clear();
        let mut st = self.state.lock();
        for fp in fps {
            let new = self.resolve_one(&mut st, fp)?;
            if new {
                self.summary.insert(fp);
                st.memory.insert(*fp, None);
            }
            is_new.push(new);
        }
        Ok(())
    }

    fn resolve_one(&self, st: &mut State, fp: &Fingerprint) -> Result<bool> {
        let c = &*self.counters;
        bump(&c.lookups, 1);
        // Step 1: segment cache.
        if self.use_cache && st.cache.lookup(fp).is_some() {
            bump(&c.cache_hits, 1);
            return Ok(false);
        }
        // Step 2: Summary Vector.
        if self.use_summary && !self.summary.contains(fp) {
            bump(&c.bloom_negatives, 1);
            return Ok(true);
        }
        // Step 3: segment index, in-memory part first, then one disk page.
        let found = match st.memory.get(fp) {
            Some(&Some(id)) => Some(Some(id)),
            Some(None) => Some(None),
            None => self.disk.lookup(fp)?.map(Some),
        };
        match found {
            Some(container) => {
                bump(&c.index_hits, 1);
                if let Some(id) = container {
                    if self.use_cache && !st.open.contains(&id) && !st.cache.contains_container(id)
                    {
                        let meta = self.log.read_meta(id)?;
                        bump(&c.prefetches, 1);
                        st.cache
                            .insert(id, meta.descriptors.iter().map(|d| d.fp).collect());
                    }
                }
                Ok(false)
            }
            None => {
                if self.use_summary {
                    bump(&c.bloom_false_positives, 1);
                }
                Ok(true)
            }
        }
    }

    /// A stream starts filling container `id`.
    pub fn container_opened(&self, id: ContainerId) {
        self.state.lock().open.insert(id);
    }

    /// Chunks packed into container `id` (called when it is sealed and durable).
    pub fn container_sealed(&self, id: ContainerId, fps: impl Iterator<Item = Fingerprint>) {
        let mut st = self.state.lock();
        for fp in fps {
            st.memory.insert(fp, Some(id));
        }
        st.open.remove(&id);
    }

    /// Entries to merge into the on-disk index (all packed chunks).
    pub fn memory_entries(&self) -> Vec<IndexEntry> {
        self.state
            .lock()
            .memory
            .iter()
            .filter_map(|(fp, c)| c.map(|container| IndexEntry { fp: *fp, container }))
            .collect()
    }

    /// After a merge the disk index holds the in-memory part.
    pub fn clear_memory(&self) {
        self.state.lock().memory.clear();
    }

    /// Fingerprint-lookup RAM (Summary Vector + in-memory index part), bytes.
    pub fn ram_bytes(&self) -> u64 {
        let st = self.state.lock();
        let entry = std::mem::size_of::<(Fingerprint, Option<ContainerId>)>() + 1;
        self.summary.ram_bytes() + (st.memory.capacity() * entry) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IndexConfig;
    use crate::warnings::Warnings;
    use cairn_backend::MemBackend;
    use cairn_core::{Backend, ChunkKind, CompressionCodec};
    use cairn_format::container::ContainerWriter;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn fp(i: u16) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    /// Runs `batches` of fingerprints through the dedup path as a stream
    /// would (sealing a container every `per_container` new chunks, merging
    /// the index between "backups"), and returns the new/duplicate decisions.
    fn run(batches: &[Vec<u16>], per_container: usize, summary: bool, cache: bool) -> Vec<bool> {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let counters = Arc::new(Counters::default());
        let log: Arc<dyn ContainerStore> = Arc::new(
            crate::container_log::ContainerLog::open(backend.clone(), counters.clone()).unwrap(),
        );
        let cfg = IndexConfig {
            expected_chunks: 64,
            cache_containers: 2,
            ..Default::default()
        };
        let mut decisions = Vec::new();
        // Each pair of batches is one "backup": reopen, replay, merge at the end.
        for backup in batches.chunks(2) {
            let opened = crate::index::open_for_write(
                backend.clone(),
                counters.clone(),
                &*log,
                &cfg,
                &Warnings::default(),
            )
            .unwrap();
            let dedup = Dedup::new(opened, log.clone(), counters.clone(), 2, summary, cache);
            let mut writer: Option<ContainerWriter> = None;
            let mut is_new = Vec::new();
            for batch in backup {
                let fps: Vec<Fingerprint> = batch.iter().map(|&i| fp(i)).collect();
                dedup.resolve_batch(&fps, &mut is_new).unwrap();
                for (f, &new) in fps.iter().zip(&is_new) {
                    decisions.push(new);
                    if !new {
                        continue;
                    }
                    let w = writer.get_or_insert_with(|| {
                        let id = log.allocate();
                        dedup.container_opened(id);
                        ContainerWriter::new(id, 32, 1 << 20)
                    });
                    w.push(*f, ChunkKind::Data, 0, CompressionCodec::None, 1, &[0]);
                    if w.len() >= per_container {
                        let w = writer.take().unwrap();
                        let id = w.id();
                        let sealed: Vec<Fingerprint> =
                            w.descriptors().iter().map(|d| d.fp).collect();
                        log.append(w).unwrap();
                        dedup.container_sealed(id, sealed.into_iter());
                    }
                }
            }
            if let Some(w) = writer.take() {
                let id = w.id();
                let sealed: Vec<Fingerprint> = w.descriptors().iter().map(|d| d.fp).collect();
                log.append(w).unwrap();
                dedup.container_sealed(id, sealed.into_iter());
            }
            let covered = log.next_id();
            let g = dedup
                .disk
                .write_merged(dedup.memory_entries(), covered, 32, 512)
                .unwrap();
            crate::index::write_checkpoint(&*backend, &dedup.summary, g, covered).unwrap();
        }
        decisions
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever the ablation, a chunk is new exactly when it was never
        /// seen before: the Summary Vector and cache change cost, never answers.
        #[test]
        fn decisions_equal_exact_membership(
            batches in proptest::collection::vec(proptest::collection::vec(0u16..300, 0..60), 1..7),
            per_container in 1usize..20,
        ) {
            let mut seen = HashSet::new();
            let expected: Vec<bool> = batches.iter().flatten().map(|i| seen.insert(*i)).collect();
            for (summary, cache) in [(false, false), (true, false), (false, true), (true, true)] {
                prop_assert_eq!(&run(&batches, per_container, summary, cache), &expected,
                    "summary={} cache={}", summary, cache);
            }
        }
    }
}
