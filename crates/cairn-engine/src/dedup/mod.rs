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
use crate::index::{delete_checkpoints_before, write_checkpoint, OpenedIndex};
use crate::keys;

pub mod lazy;

pub struct Dedup {
    pub disk: DiskIndex,
    pub summary: SummaryVector,
    log: Arc<dyn ContainerStore>,
    counters: Arc<Counters>,
    use_summary: bool,
    use_cache: bool,
    /// The current generation's checkpoint was unusable at open.
    checkpoint_rebuilt: bool,
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
    /// Containers closed but not yet durable, with their fingerprints (what
    /// their metadata section will list): at most the sealer's queue.
    pending: std::collections::HashMap<ContainerId, Vec<Fingerprint>>,
    /// Containers present at open plus those sealed since (checked when the
    /// locality cache is off).
    present: HashSet<ContainerId>,
    /// Containers an index hit pointed at that are missing or damaged, why.
    lost: std::collections::BTreeMap<ContainerId, String>,
    /// Index hits that could not be confirmed: chunks stored again.
    stored_again: u64,
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
        // Replayed containers come in ascending id order: the newest copy wins.
        for e in index.replayed {
            memory.insert(e.fp, Some(e.container));
        }
        let use_summary = use_summary && index.frugal.is_none();
        Dedup {
            disk: index.disk,
            summary: index.summary,
            log,
            counters,
            use_summary,
            use_cache,
            checkpoint_rebuilt: index.checkpoint_rebuilt,
            state: Mutex::new(State {
                cache: LocalityCache::new(cache_containers),
                frugal: index.frugal,
                memory,
                open: HashSet::new(),
                pending: Default::default(),
                present: index.present,
                lost: Default::default(),
                stored_again: 0,
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
            Some(Some(id)) if !self.confirm(st, id, fp)? => Ok(true),
            Some(_) => {
                bump(&c.index_hits, 1);
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

    /// Confirms an index hit: container `id` must exist and hold `fp`, so
    /// a dedup decision never points at a container that was lost, damaged
    /// or (before ids were never reused) replaced. With the locality cache
    /// on this is DDFS's prefetch (§4.4): the metadata section is read into
    /// the cache, and whether it lists `fp` is the confirmation. With the
    /// cache off (a Table 4 ablation) only the container's presence is
    /// checked, so the ablation's I/O counts stay DDFS's.
    ///
    /// `false` means the chunk must be stored again; the container is
    /// remembered as lost and reported once at the end of the backup.
    fn confirm(&self, st: &mut State, id: ContainerId, fp: &Fingerprint) -> Result<bool> {
        let held = if st.open.contains(&id) {
            true
        } else if let Some(fps) = st.pending.get(&id) {
            // Closed by a stream, still on its way to disk: the section it
            // will have is known, and loading it counts as the read it would
            // be once durable, so counters do not depend on disk timing.
            let held = fps.contains(fp);
            if self.use_cache && !st.cache.contains_container(id) {
                let fps = fps.clone();
                st.cache.insert(id, fps);
                bump(&self.counters.prefetches, 1);
                bump(&self.counters.container_meta_reads, 1);
            }
            held
        } else if st.lost.contains_key(&id) {
            false
        } else if !self.use_cache {
            if st.present.contains(&id) {
                true
            } else {
                st.lost.insert(id, "missing".into());
                false
            }
        } else if st.cache.contains_container(id) {
            st.cache.container_holds(id, fp)
        } else {
            match self.log.read_meta(id) {
                Ok(meta) => {
                    bump(&self.counters.prefetches, 1);
                    let held = meta.descriptors.iter().any(|d| d.fp == *fp);
                    st.cache
                        .insert(id, meta.descriptors.iter().map(|d| d.fp).collect());
                    held
                }
                Err(e) if e.is_not_found() || crate::index::is_damage(&e) => {
                    st.lost.insert(id, e.to_string());
                    false
                }
                Err(e) => return Err(e),
            }
        };
        if !held {
            st.stored_again += 1;
        }
        Ok(held)
    }

    /// One line per container found lost during this backup, and how many
    /// chunks were stored again because of it (empty when none).
    pub fn lost_report(&self) -> Vec<String> {
        let st = self.state.lock();
        if st.stored_again == 0 {
            return Vec::new();
        }
        let mut out: Vec<String> = st
            .lost
            .iter()
            .map(|(id, why)| format!("container {id} is missing or damaged ({why})"))
            .collect();
        out.push(format!(
            "{} chunk(s) indexed in lost or replaced containers were stored again; \
             `cairn check` reports what older snapshots lost, `cairn repair index` rebuilds the index",
            st.stored_again
        ));
        out
    }

    /// A stream starts filling container `id`.
    pub fn container_opened(&self, id: ContainerId) {
        self.state.lock().open.insert(id);
    }

    /// A stream closed container `id` holding `fps` and handed it to the
    /// sealer: its chunks are in the in-memory index from now on, and its
    /// metadata section is served from `fps` until it is durable.
    pub fn container_closed(&self, id: ContainerId, fps: Vec<Fingerprint>) {
        let mut st = self.state.lock();
        for fp in &fps {
            st.memory.insert(*fp, Some(id));
        }
        st.open.remove(&id);
        st.pending.insert(id, fps);
    }

    /// Container `id` is written and durable.
    pub fn container_sealed(&self, id: ContainerId) {
        let mut st = self.state.lock();
        st.pending.remove(&id);
        st.present.insert(id);
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
            // The checkpoint of the new generation is written before the
            // generation itself, and older checkpoints go only after it: a
            // reader (`check`) never sees an index generation without its
            // checkpoint. A crash in between leaves a checkpoint of a
            // generation not yet written, which the next commit overwrites.
            let next = generation + 1;
            if !frugal {
                backend.write_atomic(&keys::bloom(next), &self.summary.checkpoint(covered))?;
            }
            let written = self
                .disk
                .write_merged(entries, covered, fp_width, page_size)?;
            debug_assert_eq!(written, next);
            if !frugal {
                delete_checkpoints_before(backend, written)?;
            }
        } else if !frugal && generation > 0 && self.checkpoint_rebuilt {
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
