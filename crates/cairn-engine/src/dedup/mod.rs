//! The dedup state every stream of a backup shares, and the lookup steps
//! the strategies are built from (DDFS `001_3652cceaf162c5a1.txt` §4.4;
//! `000_d04706aa48332137.txt` Algorithm 2):
//!
//! - the Locality Preserved Cache (DDFS §4.3), by container;
//! - the index kind (`index::kinds`: Summary Vector + paged index, or the
//!   frugal index), chosen once from the config;
//! - the in-memory index part: the chunks stored since the last merge, those
//!   of closed containers (with their container id) and those decided new
//!   but still being packed by some stream ("in flight"), so two parallel
//!   streams never store the same new chunk twice;
//! - the confirmation of every index hit (the container must still hold the
//!   chunk), which doubles as DDFS's prefetch of the container's metadata.
//!
//! Every lookup answers with a [`Location`]: new, stored in container C, or
//! in flight. The order of the steps is the strategy's ([`strategy`]): eager
//! ([`eager`], DDFS §4.4) or lazy ([`lazy`], `000` Algorithm 2), chosen once
//! per stream from the config, or deferred ([`deferred`], 004
//! post-processing dedup: no lookup of anything older than the backup) when
//! the backup asks for it. Strategies reach the state only through a locked
//! [`Session`]'s step methods.
//!
//! Ablations for DDFS Table 4 switch the Summary Vector or the cache off.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;

use crate::container_log::ContainerStore;
use crate::index::kinds::FingerprintIndex;
use crate::index::locality_cache::LocalityCache;
use crate::index::overlay::IndexUpdate;
use crate::index::OpenedIndex;
use memory_part::{MemoryPart, Slot};

pub mod choose;
pub mod deferred;
pub mod eager;
pub mod lazy;
pub mod location;
mod memory_part;
pub mod part_budget;
pub mod strategy;

pub use location::Location;
pub use strategy::{Decision, LookupStrategy};

pub struct Dedup {
    log: Arc<dyn ContainerStore>,
    counters: Arc<Counters>,
    use_cache: bool,
    /// The first container id this backup can allocate: every container
    /// at or above it was written by this run (ids only grow), every one
    /// below it (replayed entries included) is older.
    run_start: ContainerId,
    state: Mutex<State>,
    /// Bounds the in-memory part (`part_budget`), when set.
    budget: Option<part_budget::PartBudget>,
    /// Signalled when a container becomes durable or the sealer fails.
    sealed: parking_lot::Condvar,
}

struct State {
    cache: LocalityCache,
    /// The index kind chosen by the config (`index::kinds`).
    index: Box<dyn FingerprintIndex>,
    /// In-memory index part: the container once packed, else in flight.
    memory: MemoryPart,
    /// Containers being filled: no metadata section on disk yet.
    open: HashSet<ContainerId>,
    /// Containers closed but not yet durable, with their fingerprints (what
    /// their metadata section will list): at most the sealer's queue.
    pending: std::collections::HashMap<ContainerId, Vec<Fingerprint>>,
    /// Containers present at open plus those sealed since (checked when the
    /// locality cache is off).
    present: HashSet<ContainerId>,
    /// Containers a collection condemned (`gc-pending` at open): an index
    /// hit in one is never confirmed, even while the container is still
    /// there, since the collection deletes it without waiting for a
    /// backup that began after it condemned it (docs/concurrency.md).
    retiring: HashSet<ContainerId>,
    /// Containers an index hit pointed at that are missing or damaged, why.
    lost: std::collections::BTreeMap<ContainerId, String>,
    /// Index hits that could not be confirmed: chunks stored again.
    stored_again: u64,
    /// A container write failed: the backup fails, nothing waits for the
    /// containers still queued.
    seal_failed: bool,
}

/// The dedup state locked for a batch of lookups: the steps a lookup
/// strategy (`eager`, `lazy`) is built from. Strategies see nothing else of
/// the state.
pub struct Session<'a> {
    dedup: &'a Dedup,
    st: MutexGuard<'a, State>,
}

impl Dedup {
    pub fn new(
        index: OpenedIndex,
        log: Arc<dyn ContainerStore>,
        counters: Arc<Counters>,
        cache_containers: usize,
        use_cache: bool,
    ) -> Self {
        let mut placed = FpMap::default();
        for e in index.replayed {
            crate::canonical::place(&mut placed, e.fp, e.container);
        }
        let memory = placed
            .into_iter()
            .map(|(fp, id)| (fp, Slot::packed(id)))
            .collect();
        let run_start = log.next_id();
        Dedup {
            log,
            counters,
            use_cache,
            run_start,
            state: Mutex::new(State {
                cache: LocalityCache::new(cache_containers),
                index: index.kind,
                memory,
                open: HashSet::new(),
                pending: Default::default(),
                present: index.present,
                retiring: index.retiring,
                lost: Default::default(),
                stored_again: 0,
                seal_failed: false,
            }),
            budget: None,
            sealed: parking_lot::Condvar::new(),
        }
    }

    /// Locks the state for a batch of lookups.
    pub fn session(&self) -> Session<'_> {
        Session {
            dedup: self,
            st: self.state.lock(),
        }
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
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
        } else if st.retiring.contains(&id) {
            // Not a loss: the chunk is stored again, a duplicate the next
            // collection reconciles.
            return Ok(false);
        } else if let Some(fps) = st.pending.get(&id) {
            // Closed by a stream, still on its way to disk: the section it
            // will have is known, and loading it counts as the read it would
            // be once durable, so counters do not depend on disk timing.
            let held = fps.contains(fp);
            if self.use_cache && !st.cache.contains_container(id) {
                let fps = fps.clone();
                self.log.served_meta(fps.len(), fp.len());
                st.cache.insert(id, fps);
                bump(&self.counters.prefetches, 1);
                bump(&self.counters.container_meta_reads, 1);
            }
            held
        } else if st.lost.contains_key(&id) {
            false
        } else if !st.present.contains(&id) {
            // Not listed at open nor sealed since: every container the index
            // names was sealed before its delta, so before the listing, and
            // one missing from it was deleted. Asked before its metadata is
            // read, since a local cache may still serve the tail of a
            // container the store has lost.
            st.lost.insert(id, "missing".into());
            false
        } else if !self.use_cache {
            true
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
    /// The containers present: listed when the index was opened (under
    /// the writer lock, so no other writer adds or deletes any since) plus
    /// those this run sealed. Lets the rest of a backup check a container's
    /// presence without listing the store again.
    pub fn present_containers(&self) -> HashSet<ContainerId> {
        self.state.lock().present.clone()
    }

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
            let slot = st.memory.entry(*fp, Slot::IN_FLIGHT);
            *slot = Slot::packed(match slot.container() {
                Some(other) => crate::canonical::canonical(other, id),
                None => id,
            });
        }
        st.open.remove(&id);
        st.pending.insert(id, fps);
    }

    /// Container `id` is written and durable.
    pub fn container_sealed(&self, id: ContainerId) {
        let mut st = self.state.lock();
        st.pending.remove(&id);
        st.present.insert(id);
        drop(st);
        self.sealed.notify_all();
    }

    /// Entries to merge into the on-disk index (all packed chunks).
    pub fn memory_entries(&self) -> Vec<IndexEntry> {
        self.state
            .lock()
            .memory
            .iter()
            .filter_map(|(fp, c)| {
                c.container()
                    .map(|container| IndexEntry { fp: *fp, container })
            })
            .collect()
    }

    /// Takes the entries to merge into the on-disk index, leaving the
    /// in-memory part empty: a backup's commit then frees the table before
    /// the merge builds the new generation, instead of holding both (with
    /// the merge's own copies, tens of MiB per million chunks).
    pub fn take_memory_entries(&self) -> Vec<IndexEntry> {
        let memory = std::mem::take(&mut self.state.lock().memory);
        // Sized once: grown by doubling it peaked at twice the entries.
        let mut entries = Vec::with_capacity(memory.len());
        entries.extend(
            memory
                .into_entries()
                .filter_map(|(fp, c)| c.container().map(|container| IndexEntry { fp, container })),
        );
        entries
    }

    /// After a merge the disk index holds the in-memory part.
    pub fn clear_memory(&self) {
        self.state.lock().memory.clear();
    }

    /// Makes the index durable at commit through the index kind (the
    /// frugal kind's chunk log, the paged index, the Summary Vector
    /// checkpoint: `index::kinds`).
    pub fn commit_index(
        &self,
        backend: &dyn Backend,
        update: IndexUpdate,
        covered: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<()> {
        self.state
            .lock()
            .index
            .commit(backend, update, covered, fp_width, page_size)
    }

    /// Whether other writers may commit beside this backup's index handle.
    pub fn beside_other_writers(&self) -> bool {
        self.state.lock().index.is_beside_other_writers()
    }

    /// The index deltas this backup's commits wrote, in order, as
    /// (generation, number).
    pub fn written_deltas(&self) -> Vec<(u64, u32)> {
        self.state.lock().index.written_deltas()
    }

    /// Entries of the paged on-disk index.
    pub fn indexed_entries(&self) -> u64 {
        self.state.lock().index.entry_count()
    }

    /// Fingerprint-lookup RAM (Summary Vector or frugal table, plus the
    /// in-memory index part), bytes.
    pub fn ram_bytes(&self) -> u64 {
        let st = self.state.lock();
        st.index.ram_bytes() + st.memory.ram_bytes()
    }
}

/// The steps of DDFS §4.4 and `000` Algorithm 2, each counting what it does.
impl Session<'_> {
    pub fn counters(&self) -> &Counters {
        &self.dedup.counters
    }

    /// Step 1 (and lazy lookup's pre-lookup): the locality cache, when in
    /// use. A hit means duplicate, in the container returned.
    pub fn cache_probe(&mut self, fp: &Fingerprint) -> Option<ContainerId> {
        if !self.dedup.use_cache {
            return None;
        }
        bump(&self.dedup.counters.cache_probes, 1);
        self.st.cache.lookup(fp)
    }

    /// Lazy lookup's post-lookup: the cache again, without counting a probe.
    pub fn cache_recheck(&mut self, fp: &Fingerprint) -> Option<ContainerId> {
        if !self.dedup.use_cache {
            return None;
        }
        self.st.cache.lookup(fp)
    }

    pub fn uses_cache(&self) -> bool {
        self.dedup.use_cache
    }

    /// Step 2: the index kind's filter. `true` means certainly new.
    pub fn certainly_new(&self, fp: &Fingerprint) -> bool {
        self.st.index.certainly_new(fp)
    }

    /// Step 3, first half: the in-memory index part (this backup's chunks
    /// and replayed ones). `Some` when it knows `fp`: `InFlight`, or a
    /// stored copy confirmed by [`Self::confirmed`].
    pub fn in_memory(&mut self, fp: &Fingerprint) -> Result<Option<Location>> {
        match self.st.memory.get(fp).map(Slot::container) {
            Some(Some(id)) => self.confirmed(id, fp).map(Some),
            Some(None) => Ok(Some(Location::InFlight)),
            None => Ok(None),
        }
    }

    /// Deferred dedup: where this backup itself stored `fp` (in a container
    /// of this run, or still packing it); `None` when it has not, even if
    /// an older copy exists (replayed entries are older). No lookup of
    /// anything older and no confirmation: this run wrote those containers.
    pub fn stored_by_this_run(&self, fp: &Fingerprint) -> Option<Location> {
        match self.st.memory.get(fp).map(Slot::container) {
            Some(None) => Some(Location::InFlight),
            Some(Some(id)) if id >= self.dedup.run_start => Some(Location::Stored(id)),
            _ => None,
        }
    }

    /// Whether the in-memory part knows `fp` (nothing confirmed).
    pub fn known_in_memory(&self, fp: &Fingerprint) -> bool {
        self.st.memory.contains_key(fp)
    }

    /// Step 3, second half: the index kind (one page read, or the frugal
    /// table and log). `None` means not indexed; a hit is confirmed.
    pub fn index_lookup(&mut self, fp: &Fingerprint) -> Result<Option<Location>> {
        match self.st.index.lookup(fp)? {
            Some(id) => self.confirmed(id, fp).map(Some),
            None => Ok(None),
        }
    }

    /// An index hit on container `id`, confirmed (see `Dedup::confirm`):
    /// `Stored(id)`, or `New` when the chunk must be stored again.
    pub fn confirmed(&mut self, id: ContainerId, fp: &Fingerprint) -> Result<Location> {
        Ok(if self.dedup.confirm(&mut self.st, id, fp)? {
            Location::Stored(id)
        } else {
            Location::New
        })
    }

    /// Lazy lookup: the on-disk page `fp` belongs to, if there is an index.
    pub fn page_of(&self, fp: &Fingerprint) -> Option<u64> {
        self.st.index.page_of(fp)
    }

    /// Lazy lookup: one page read answering every fingerprint in `fps`.
    pub fn lookup_page(&self, fps: &[Fingerprint]) -> Result<Vec<Option<ContainerId>>> {
        self.st.index.lookup_page(fps)
    }

    /// Lazy lookup: the filter passed but no entry confirmed it.
    pub fn note_false_positive(&self) {
        self.st.index.note_false_positive();
    }

    /// `fp` is new: it joins the filter and, in flight, the in-memory index
    /// part, so every later occurrence is a duplicate.
    pub fn decide_new(&mut self, fp: &Fingerprint) {
        self.st.index.note_new(fp);
        self.st.memory.insert(*fp, Slot::IN_FLIGHT);
    }
}

#[cfg(test)]
mod tests;
