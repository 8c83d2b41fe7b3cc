//! The duplicates that running beside other backups cost (docs/concurrency.md,
//! 004's partitioned dedup): a backup deduplicates against the index as of
//! its open plus its own new chunks, so a chunk another backup stored
//! meanwhile is stored again. At commit, the index deltas that appeared
//! since the open are read and this backup's new chunks found in them are
//! counted; garbage collection later keeps one copy of each
//! (reconciliation: the canonical copy, snapshots unchanged).

use std::collections::{BTreeSet, HashSet};

use cairn_core::{Backend, ContainerId, Fingerprint, FpSet, Result};
use cairn_format::index::IndexEntry;
use cairn_format::index_delta::decode_index_delta;

use crate::blocking_map::blocking_for_each;
use crate::index::overlay::delta_bytes;
use crate::object_names;

/// The index deltas present when a backup opened its index.
pub struct DeltasAtOpen {
    names: BTreeSet<String>,
}

impl DeltasAtOpen {
    pub fn list(backend: &dyn Backend) -> Result<Self> {
        Ok(DeltasAtOpen {
            names: delta_names(backend)?,
        })
    }

    /// The deltas listed now that were not at the open: written by other
    /// backups since (and how many deltas are listed now).
    pub fn since(&self, backend: &dyn Backend) -> Result<NewDeltas> {
        let listing = backend.list(object_names::INDEX)?;
        let newest = crate::index::disk_index::newest_generation(&listing);
        let now = deltas_of(listing);
        Ok(NewDeltas {
            names: now.difference(&self.names).cloned().collect(),
            newest,
            listed: now.len(),
        })
    }
}

/// The index deltas other backups wrote since this one opened its index.
pub struct NewDeltas {
    names: Vec<String>,
    newest: Option<u64>,
    /// Deltas listed in all.
    pub listed: usize,
}

impl NewDeltas {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The deltas the listing missed: those numbered below this backup's
    /// last delta in its generation (`written`, in order, as (generation,
    /// number)), neither listed at the open nor since, and not its own.
    /// Numbers are taken in order with no gap, so each was created by
    /// another writer after this backup's commit listed `index/` and
    /// before its own delta: a commit at the same moment, which the
    /// listing alone would miss (docs/concurrency.md, "Reconciliation").
    pub fn missed(&self, at_open: &DeltasAtOpen, written: &[(u64, u32)]) -> NewDeltas {
        let names = match written.last() {
            None => Vec::new(),
            Some(&(generation, last)) => (1..last)
                .filter(|k| !written.contains(&(generation, *k)))
                .map(|k| object_names::index_delta(generation, k))
                .filter(|name| !at_open.names.contains(name) && !self.names.contains(name))
                .collect(),
        };
        NewDeltas {
            names,
            newest: self.newest,
            listed: self.listed,
        }
    }

    /// The chunks those deltas put. A delta that cannot be read or decoded
    /// (one a merge has folded and deleted meanwhile) is left out: this is
    /// a report, and the index is derived data.
    pub fn fingerprints(&self, backend: &dyn Backend) -> Result<FpSet> {
        let mut theirs = FpSet::default();
        // A window of parallel reads at a time: on object storage each
        // read is a round trip, and with eight writers several new deltas
        // wait at every commit. Those of the newest generation are stable
        // reads, as an open's (`overlay.rs`): a local cache keeps them for
        // this host's next open.
        let is_newest =
            |name: &String| object_names::parse_index_delta(name).map(|(g, _)| g) == self.newest;
        blocking_for_each(
            &self.names,
            backend.read_parallelism(),
            |name| delta_bytes(backend, name, is_newest(name)).and_then(|b| decode_index_delta(&b)),
            |_, delta| {
                if let Ok(delta) = delta {
                    theirs.extend(delta.puts.iter().map(|e| e.fp));
                }
                Ok(())
            },
        )?;
        Ok(theirs)
    }
}

/// The chunks of `ours` (the new chunks this backup commits, without
/// those naming a container in `replayed`: other writers') that a delta
/// written since the open puts too: stored by another backup at the same
/// time.
pub fn ours_to_compare(ours: &[IndexEntry], replayed: &HashSet<ContainerId>) -> Vec<Fingerprint> {
    ours.iter()
        .filter(|e| !replayed.contains(&e.container))
        .map(|e| e.fp)
        .collect()
}

pub fn duplicates(ours: &[Fingerprint], theirs: &FpSet) -> u64 {
    if theirs.is_empty() {
        return 0;
    }
    ours.iter().filter(|fp| theirs.contains(*fp)).count() as u64
}

fn delta_names(backend: &dyn Backend) -> Result<BTreeSet<String>> {
    Ok(deltas_of(backend.list(object_names::INDEX)?))
}

fn deltas_of(listing: Vec<String>) -> BTreeSet<String> {
    listing
        .into_iter()
        .filter(|k| object_names::parse_index_delta(k).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object_names::index_delta;

    #[test]
    fn missed_deltas_are_the_numbers_below_ours_that_no_listing_named() {
        let at_open = DeltasAtOpen {
            names: [index_delta(3, 1), index_delta(3, 2)].into(),
        };
        let since = NewDeltas {
            names: vec![index_delta(3, 3)],
            newest: Some(3),
            listed: 3,
        };
        // This backup wrote delta 4 mid-way and delta 7 at its commit.
        let missed = since.missed(&at_open, &[(3, 4), (3, 7)]);
        assert_eq!(missed.names, vec![index_delta(3, 5), index_delta(3, 6)]);
        // No delta of its own (it ran alone and merged): nothing missed.
        assert!(since.missed(&at_open, &[]).is_empty());
        // Its own delta right after the listed ones: nothing missed.
        assert!(since.missed(&at_open, &[(3, 4)]).is_empty());
    }
}
