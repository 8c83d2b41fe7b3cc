//! Which copy of a chunk is canonical when several containers hold it.
//!
//! Copies arise when a backup stores a chunk again because its indexed
//! container was lost or damaged, when `repair index --read-data` salvages a
//! container's sound chunks, and (next) when a rewrite policy (`002`) or a
//! garbage collector's copy-forward (`003`) writes live chunks into new
//! containers. Every one of those writes the copy that should be read from
//! now on into a newer container, and container ids are never reused and
//! grow with time, so **the newest copy (the highest container id) wins**.
//!
//! Every place that resolves a fingerprint to one container goes through
//! this module: the index merge (`index::disk_index`), the frugal index's
//! puts (`index::frugal`), replay and the
//! in-memory index part (`dedup`), the restore locator built from container
//! metadata (`read::cache::map_from_containers`), `check`, and the
//! simulated restore (`cairn-sim`).

use cairn_core::{ContainerId, Fingerprint, FpMap};

/// Of two copies of one chunk, the one lookups, restores and `check`
/// resolve to.
#[inline]
pub fn canonical(a: ContainerId, b: ContainerId) -> ContainerId {
    a.max(b)
}

/// Records that container `id` holds `fp`, keeping the canonical copy.
#[inline]
pub fn place(map: &mut FpMap<ContainerId>, fp: Fingerprint, id: ContainerId) {
    map.entry(fp)
        .and_modify(|c| *c = canonical(*c, id))
        .or_insert(id);
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use cairn_backend::MemBackend;
    use cairn_core::{Backend, Counters};
    use cairn_format::index::IndexEntry;
    use proptest::prelude::*;

    use super::*;
    use crate::index::disk_index::DiskIndex;

    fn fp(i: u8) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&[i]).as_bytes())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Several copies of each chunk, given in any order and spread over
        /// several index generations: the in-memory map and the paged index
        /// both resolve every fingerprint to its newest copy.
        #[test]
        fn the_newest_copy_wins_everywhere(
            copies in proptest::collection::vec((0u8..40, 1u64..200), 1..150),
            generations in 1usize..4,
        ) {
            let mut newest: HashMap<Fingerprint, ContainerId> = HashMap::new();
            for &(f, c) in &copies {
                let e = newest.entry(fp(f)).or_insert(ContainerId(c));
                *e = (*e).max(ContainerId(c));
            }

            let mut map = FpMap::default();
            for &(f, c) in &copies {
                place(&mut map, fp(f), ContainerId(c));
            }
            prop_assert_eq!(map.len(), newest.len());
            for (f, c) in &newest {
                prop_assert_eq!(map[f], *c);
            }

            let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
            let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
            let per = copies.len().div_ceil(generations);
            for (g, part) in copies.chunks(per).enumerate() {
                let entries = part
                    .iter()
                    .map(|&(f, c)| IndexEntry { fp: fp(f), container: ContainerId(c) })
                    .collect();
                ix.write_merged(entries, ContainerId(200 + g as u64), 32, 512).unwrap();
            }
            let ix = DiskIndex::open(backend, Arc::new(Counters::default())).unwrap();
            prop_assert_eq!(ix.entry_count(), newest.len() as u64);
            for (f, c) in &newest {
                prop_assert_eq!(ix.lookup(f).unwrap(), Some(*c));
            }
        }
    }
}
