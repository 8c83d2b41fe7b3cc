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
//!
//! That is the eager strategy ([`Dedup::resolve_batch`]). The lazy one
//! (`000_d04706aa48332137.txt` Algorithm 2) is [`lazy::LazyBuffer`], one per
//! stream, over the same cache, Summary Vector and index.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;

use crate::container_log::ContainerStore;
use crate::index::disk_index::DiskIndex;
use crate::index::frugal::FrugalIndex;
use crate::index::locality_cache::LocalityCache;
use crate::index::summary_vector::SummaryVector;
use crate::index::{write_checkpoint, OpenedIndex};
use crate::keys;

pub mod lazy;

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
    /// The frugal index (`004`) in place of Summary Vector + paged index.
    frugal: Option<FrugalIndex>,
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
        let use_summary = use_summary && index.frugal.is_none();
        Dedup {
            disk: index.disk,
            summary: index.summary,
            log,
            counters,
            use_summary,
            use_cache,
            state: Mutex::new(State {
                cache: LocalityCache::new(cache_containers),
                frugal: index.frugal,
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
                self.decide_new(&mut st, fp);
            }
            is_new.push(new);
        }
        Ok(())
    }

    fn resolve_one(&self, st: &mut State, fp: &Fingerprint) -> Result<bool> {
        let c = &*self.counters;
        bump(&c.lookups, 1);
        // Step 1: segment cache.
        if self.cache_probe(st, fp) {
            bump(&c.cache_hits, 1);
            return Ok(false);
        }
        // Step 2: Summary Vector.
        if self.bloom_says_new(fp) {
            bump(&c.bloom_negatives, 1);
            return Ok(true);
        }
        // Step 3: segment index, in-memory part first, then one disk page
        // (or the frugal index, whose table filters like the Summary Vector).
        let found = match st.memory.get(fp) {
            Some(&Some(id)) => Some(Some(id)),
            Some(None) => Some(None),
            None => match st.frugal.as_mut() {
                Some(frugal) => frugal_lookup(frugal, c, fp)?.map(Some),
                None => self.disk.lookup(fp)?.map(Some),
            },
        };
        match found {
            Some(container) => {
                bump(&c.index_hits, 1);
                if let Some(id) = container {
                    self.prefetch(st, id)?;
                }
                Ok(false)
            }
            None => {
                self.note_false_positive();
                Ok(true)
            }
        }
    }

    /// Probes the locality cache (when in use): a hit means duplicate.
    fn cache_probe(&self, st: &mut State, fp: &Fingerprint) -> bool {
        if !self.use_cache {
            return false;
        }
        bump(&self.counters.cache_probes, 1);
        st.cache.lookup(fp).is_some()
    }

    /// Tests the Summary Vector (when in use): `true` means certainly new.
    fn bloom_says_new(&self, fp: &Fingerprint) -> bool {
        if !self.use_summary {
            return false;
        }
        bump(&self.counters.bloom_tests, 1);
        !self.summary.contains(fp)
    }

    /// A Summary Vector hit the index did not confirm.
    fn note_false_positive(&self) {
        if self.use_summary {
            bump(&self.counters.bloom_false_positives, 1);
        }
    }

    /// `fp` is new: it joins the Summary Vector and, in flight, the
    /// in-memory index part, so every later occurrence is a duplicate.
    fn decide_new(&self, st: &mut State, fp: &Fingerprint) {
        if st.frugal.is_none() {
            self.summary.insert(fp);
        }
        if self.use_summary {
            bump(&self.counters.bloom_inserts, 1);
        }
        st.memory.insert(*fp, None);
    }

    /// Loads container `id`'s metadata section into the locality cache
    /// unless it is there already or still open (no section on disk yet).
    /// Returns whether a section was read.
    fn prefetch(&self, st: &mut State, id: ContainerId) -> Result<bool> {
        if !self.use_cache || st.open.contains(&id) || st.cache.contains_container(id) {
            return Ok(false);
        }
        let meta = self.log.read_meta(id)?;
        bump(&self.counters.prefetches, 1);
        st.cache
            .insert(id, meta.descriptors.iter().map(|d| d.fp).collect());
        Ok(true)
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

    /// Makes the index durable at commit: the frugal index's chunk log gets
    /// `entries` (before the paged index, so the log covers everything the
    /// paged index covers; a crash in between only repeats records), then
    /// a new paged-index generation and, for the paged kind, its Summary
    /// Vector checkpoint. Nothing is written when nothing changed, except a
    /// missing checkpoint.
    pub fn commit_index(
        &self,
        backend: &dyn Backend,
        entries: Vec<IndexEntry>,
        covered: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<()> {
        let frugal = {
            let mut st = self.state.lock();
            if let Some(f) = st.frugal.as_mut() {
                f.reserve(entries.len())?;
                for e in &entries {
                    f.insert(&e.fp, e.container)?;
                }
                f.flush()?;
                true
            } else {
                false
            }
        };
        let generation = self.disk.generation();
        if !entries.is_empty() || covered != self.disk.covered_below() {
            let generation = self
                .disk
                .write_merged(entries, covered, fp_width, page_size)?;
            if !frugal {
                write_checkpoint(backend, &self.summary, generation, covered)?;
            }
        } else if !frugal && generation > 0 && !backend.exists(&keys::bloom(generation))? {
            write_checkpoint(backend, &self.summary, generation, covered)?;
        }
        Ok(())
    }

    /// Fingerprint-lookup RAM (Summary Vector or frugal table, plus the
    /// in-memory index part), bytes.
    pub fn ram_bytes(&self) -> u64 {
        let st = self.state.lock();
        let entry = std::mem::size_of::<(Fingerprint, Option<ContainerId>)>() + 1;
        let index = match &st.frugal {
            Some(f) => {
                let ram = f.ram();
                (ram.table_slot_bytes + ram.stash_bytes) as u64
            }
            None => self.summary.ram_bytes(),
        };
        index + (st.memory.capacity() * entry) as u64
    }
}

/// One lookup in the frugal index (`004` "Chunk Indexing"): its table is
/// the filter (a lookup with no signature match is new without I/O, counted
/// as a Bloom negative), a signature match is confirmed in the chunk log
/// through the prefetch cache (a log read counts as an index page read).
fn frugal_lookup(
    frugal: &mut FrugalIndex,
    c: &Counters,
    fp: &Fingerprint,
) -> Result<Option<ContainerId>> {
    bump(&c.bloom_tests, 1);
    let negatives = frugal.stats().table_negatives;
    let found = frugal.lookup(fp)?;
    if found.is_none() {
        if frugal.stats().table_negatives > negatives {
            bump(&c.bloom_negatives, 1);
        } else {
            bump(&c.bloom_false_positives, 1);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
