//! The in-memory index part (DDFS §4.4 step 3's first half, the chunks
//! stored since the last index merge): fingerprint -> the container
//! holding it, or in flight. It holds every chunk one backup stores until
//! its commit, so a large first backup's part is the dedup path's largest
//! table (issue 35: the simulator's peak was this table, mid-resize).
//!
//! Entries live in fixed blocks of [`BLOCK`] (never moved, so growth
//! copies nothing and keeps no doubled spare), found through a
//! `hashbrown::HashTable` of 4-byte entry numbers. Per entry: 41 bytes
//! (the fingerprint and an unaligned id) plus 5 to 10 bytes of table,
//! against 42 to 84 bytes, and twice that during a resize, for a map of
//! fingerprint to id.

use std::hash::BuildHasher;

use cairn_core::{BuildFpHasher, ContainerId, Fingerprint};
use hashbrown::HashTable;

/// Entries per block (2.6 MiB).
const BLOCK: usize = 1 << 16;

/// One entry's value: the container holding the chunk once packed, or in
/// flight. The id's bytes, unaligned: beside the fingerprint (33 bytes,
/// alignment 1) an entry takes 41 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot([u8; 8]);

impl Slot {
    /// No container has this id: ids are allocated upwards from 1.
    pub(super) const IN_FLIGHT: Slot = Slot(u64::MAX.to_le_bytes());

    pub(super) fn packed(id: ContainerId) -> Slot {
        debug_assert_ne!(id.0, u64::MAX);
        Slot(id.0.to_le_bytes())
    }

    pub(super) fn container(self) -> Option<ContainerId> {
        (self != Self::IN_FLIGHT).then_some(ContainerId(u64::from_le_bytes(self.0)))
    }
}

#[derive(Default)]
pub(super) struct MemoryPart {
    blocks: Vec<Vec<(Fingerprint, Slot)>>,
    table: HashTable<u32>,
    len: usize,
    hasher: BuildFpHasher,
}

/// Entry `i` of `blocks`.
fn at(blocks: &[Vec<(Fingerprint, Slot)>], i: u32) -> &(Fingerprint, Slot) {
    let i = i as usize;
    &blocks[i / BLOCK][i % BLOCK]
}

impl MemoryPart {
    fn entry_at(&self, i: u32) -> &(Fingerprint, Slot) {
        at(&self.blocks, i)
    }

    fn entry_at_mut(&mut self, i: u32) -> &mut (Fingerprint, Slot) {
        let i = i as usize;
        &mut self.blocks[i / BLOCK][i % BLOCK]
    }

    fn find(&self, fp: &Fingerprint) -> Option<u32> {
        let hash = self.hasher.hash_one(fp);
        self.table
            .find(hash, |&i| self.entry_at(i).0 == *fp)
            .copied()
    }

    pub(super) fn get(&self, fp: &Fingerprint) -> Option<Slot> {
        self.find(fp).map(|i| self.entry_at(i).1)
    }

    pub(super) fn contains_key(&self, fp: &Fingerprint) -> bool {
        self.find(fp).is_some()
    }

    /// The slot of `fp`, added as `init` if absent.
    pub(super) fn entry(&mut self, fp: Fingerprint, init: Slot) -> &mut Slot {
        let i = match self.find(&fp) {
            Some(i) => i,
            None => self.push(fp, init),
        };
        &mut self.entry_at_mut(i).1
    }

    /// Sets `fp`'s slot, adding it if absent.
    pub(super) fn insert(&mut self, fp: Fingerprint, slot: Slot) {
        *self.entry(fp, slot) = slot;
    }

    fn push(&mut self, fp: Fingerprint, slot: Slot) -> u32 {
        let i = u32::try_from(self.len).expect("fewer than 2^32 chunks in one backup's part");
        if self.len.is_multiple_of(BLOCK) {
            self.blocks.push(Vec::with_capacity(BLOCK));
        }
        self.blocks
            .last_mut()
            .expect("a block with room")
            .push((fp, slot));
        self.len += 1;
        let hash = self.hasher.hash_one(fp);
        let blocks = &self.blocks;
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, i, |&j| hasher.hash_one(at(blocks, j).0));
        i
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Every entry, in the order added.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(Fingerprint, Slot)> {
        self.blocks.iter().flatten()
    }

    /// Every entry, in the order added, each block freed once passed.
    pub(super) fn into_entries(self) -> impl Iterator<Item = (Fingerprint, Slot)> {
        drop(self.table);
        self.blocks.into_iter().flatten()
    }

    pub(super) fn clear(&mut self) {
        *self = MemoryPart::default();
    }

    /// Bytes held: the blocks and the table.
    pub(super) fn ram_bytes(&self) -> u64 {
        let blocks = self.blocks.len() * BLOCK * std::mem::size_of::<(Fingerprint, Slot)>();
        let table = self.table.capacity() * (std::mem::size_of::<u32>() + 1);
        (blocks + table) as u64
    }
}

impl FromIterator<(Fingerprint, Slot)> for MemoryPart {
    fn from_iter<I: IntoIterator<Item = (Fingerprint, Slot)>>(iter: I) -> Self {
        let mut part = MemoryPart::default();
        for (fp, slot) in iter {
            part.insert(fp, slot);
        }
        part
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn entries_are_narrow_and_slots_exact() {
        assert_eq!(std::mem::size_of::<(Fingerprint, Slot)>(), 41);
        for id in [1, 2, 1 << 40, u64::MAX - 1] {
            assert_eq!(
                Slot::packed(ContainerId(id)).container(),
                Some(ContainerId(id))
            );
        }
        assert_eq!(Slot::IN_FLIGHT.container(), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// The part answers as a map of fingerprint to slot, across blocks.
        #[test]
        fn answers_as_a_map(ops in proptest::collection::vec((0u32..150_000, 0u64..5), 1..3000)) {
            let fp = |k: u32| Fingerprint::from_slice(&cairn_core::mix64(u64::from(k)).to_le_bytes());
            let mut part = MemoryPart::default();
            let mut model: HashMap<Fingerprint, Slot> = HashMap::new();
            // Many distinct keys first, so entries span blocks.
            for k in 0..70_000u32 {
                part.insert(fp(k), Slot::IN_FLIGHT);
                model.insert(fp(k), Slot::IN_FLIGHT);
            }
            for (k, v) in ops {
                let slot = if v == 0 { Slot::IN_FLIGHT } else { Slot::packed(ContainerId(v)) };
                if v % 2 == 0 {
                    part.insert(fp(k), slot);
                    model.insert(fp(k), slot);
                } else {
                    let s = part.entry(fp(k), Slot::IN_FLIGHT);
                    *s = slot;
                    model.insert(fp(k), slot);
                }
            }
            prop_assert_eq!(part.len(), model.len());
            for (f, s) in &model {
                prop_assert_eq!(part.get(f), Some(*s));
            }
            prop_assert!(!part.contains_key(&fp(200_000)));
            let all: HashMap<Fingerprint, Slot> = part.iter().copied().collect();
            prop_assert_eq!(&all, &model);
            let drained: HashMap<Fingerprint, Slot> = part.into_entries().collect();
            prop_assert_eq!(&drained, &model);
        }
    }
}
