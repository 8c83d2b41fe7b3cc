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

    /// The chunks those deltas put. A delta that cannot be decoded is left
    /// out (this is a report; the index is derived data).
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
