//! A bound on the in-memory index part (issue 35; docs/simulation.md,
//! "Memory"): DDFS keeps the chunks stored since the last merge in memory
//! and merges them into the on-disk index at commit (§4.4, step 3), so a
//! first backup of hundreds of millions of chunks held all of them in RAM,
//! then its whole update again at the commit. With a budget, a backup
//! running alone merges the part's durable entries into a new index
//! generation whenever the part passes the budget, and goes on.
//!
//! Which entries move, and when, does not depend on the sealer's timing:
//! the check runs on a stream's thread right after it hands a closed
//! container to the sealer. `X` is the lowest container id still being
//! filled (or the next id, when none is): every entry naming a container
//! below `X` is packed, and the check first waits until the sealer has
//! made every container below `X` durable. Those entries are merged into a
//! generation covering `X` (its Summary Vector checkpoint first, as at a
//! commit); the part keeps the rest (containers at or above `X`, and the
//! chunks in flight).
//!
//! Dedup decisions do not change: a moved entry is found through the
//! Summary Vector and one index page read, confirmed like any index hit.
//! What changes is the cost: page reads that the part answered for free.
//!
//! Crash safety: a backup that dies after such a merge leaves index
//! entries naming containers no snapshot references. An open replays only
//! containers at or above the index's mark, so they are not replayed; a
//! hit on one is confirmed (the container is there and holds the chunk);
//! the next collection condemns them as unreferenced and forgets their
//! entries with them (`gc/finish.rs`).
//!
//! Only where a commit would merge anyway: the paged index, a writer
//! alone (beside other writers a merge would delete deltas they add to),
//! inline dedup (a deferred backup finds its own chunks through the part).

use std::sync::Arc;

use cairn_core::{Backend, Result};
use cairn_format::index::IndexEntry;

use super::memory_part::{MemoryPart, Slot};
use super::Dedup;
use crate::index::overlay::IndexUpdate;

/// What a mid-backup merge needs.
pub struct PartBudget {
    /// Entries the part may hold before a merge.
    pub entries: usize,
    pub backend: Arc<dyn Backend>,
    pub fp_width: usize,
    pub page_size: usize,
}

impl Dedup {
    /// Bounds the in-memory part by `budget` from now on.
    pub fn with_part_budget(mut self, budget: PartBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Merges the part's durable entries into a new index generation when
    /// it holds more than the budget (see the module doc). Called by a
    /// stream after handing a closed container to the sealer. Returns the
    /// entries moved (0: under budget, or no budget).
    pub fn bound_memory_part(&self) -> Result<usize> {
        let Some(budget) = &self.budget else {
            return Ok(0);
        };
        let mut st = self.state.lock();
        if st.memory.len() <= budget.entries {
            return Ok(0);
        }
        let next = self.log.next_id();
        let below = st.open.iter().copied().min().unwrap_or(next).min(next);
        while !st.seal_failed && st.pending.keys().any(|id| *id < below) {
            self.sealed.wait(&mut st);
        }
        if st.seal_failed {
            // The backup fails with the sealer's error; nothing to merge.
            return Ok(0);
        }
        let movable = |slot: &Slot| slot.container().is_some_and(|c| c < below);
        let count = st.memory.iter().filter(|(_, slot)| movable(slot)).count();
        if count == 0 {
            // Every entry in flight or in a container still open: the
            // part stays as it is (no rebuild, no empty generation).
            return Ok(0);
        }
        let memory = std::mem::take(&mut st.memory);
        let mut moved = Vec::with_capacity(count);
        let mut kept = MemoryPart::default();
        for (fp, slot) in memory.into_entries() {
            match slot.container() {
                Some(container) if container < below => moved.push(IndexEntry { fp, container }),
                _ => kept.insert(fp, slot),
            }
        }
        st.memory = kept;
        st.index.merge_next();
        st.index.commit(
            &*budget.backend,
            IndexUpdate::puts(moved),
            below,
            budget.fp_width,
            budget.page_size,
        )?;
        // A generation written after removals rebuilds the Summary Vector
        // from the index alone: the chunks the part still holds (in flight
        // included) join it again, or they would look certainly new.
        let st = &mut *st;
        for (fp, _) in st.memory.iter() {
            st.index.note_replayed(fp);
        }
        Ok(count)
    }

    /// The sealer failed: a stream waiting in [`Self::bound_memory_part`]
    /// stops waiting (the backup fails with the sealer's error).
    pub fn seal_failed(&self) {
        self.state.lock().seal_failed = true;
        self.sealed.notify_all();
    }
}
