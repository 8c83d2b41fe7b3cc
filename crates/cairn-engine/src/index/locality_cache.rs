//! Locality Preserved Caching (DDFS §4.3): a fingerprint -> container cache
//! filled and evicted a whole container metadata section at a time, LRU by
//! container. A lookup that hits refreshes its container's recency.
//!
//! Eviction is lazy: evicting a container drops its section, not its
//! fingerprints' map entries; a lookup answers only through a container
//! still cached, so a stale entry is a miss, exactly as if it had been
//! removed. Stale entries are swept once they reach half the live ones,
//! by refilling the table from the cached sections (`sweep`). Eviction
//! then costs no random map accesses
//! (it was most of the simulator's cache time), and the map holds at most
//! about 1.5 times the cached sections' fingerprints: a full 256-container
//! cache's table stays at 2^19 buckets, where twice the live entries grew
//! it to 2^20 (8.9 MB more).
//!
//! The map is compact (issue 35): 16 bytes per entry naming a section's
//! slot and a position in it, the fingerprint itself read from the section
//! (held once), so the map of a 256-container cache stays within the CPU's
//! last-level cache. A slot's generation tells a reused slot's entries from
//! its current section's.
//!
//! Duplicates arrive in the order their container stored them (the
//! locality DDFS §4.3 relies on), so a lookup first tries the position
//! after the last hit: when that descriptor is the fingerprint and the map
//! names it (`named`, kept with each section), the answer is the map's
//! without a map access.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

use cairn_core::{BuildFpHasher, ContainerId, Fingerprint};
use hashbrown::HashTable;

pub struct LocalityCache {
    capacity: usize,
    /// fp -> (slot, position) of the section last inserted listing it; live
    /// only while that slot still holds the section it was made for.
    map: HashTable<Entry>,
    hasher: BuildFpHasher,
    /// Cached sections; `None` marks a free slot.
    slots: Vec<Option<Cached>>,
    /// Generation of each slot, bumped when its section is evicted.
    generations: Vec<u32>,
    free: Vec<u32>,
    by_id: HashMap<ContainerId, u32>,
    /// recency tick -> container, oldest first.
    lru: BTreeMap<u64, ContainerId>,
    tick: u64,
    /// Fingerprints listed by the cached sections.
    cached_fps: usize,
    /// The last hit: (slot, its generation, position).
    cursor: Option<(u32, u32, u32)>,
}

/// One map entry: 16 bytes.
#[derive(Clone, Copy)]
struct Entry {
    /// 32 bits of the fingerprint's hash, which is also the table's hash
    /// (so a resize needs no section): most mismatches end here.
    tag: u32,
    slot: u32,
    generation: u32,
    pos: u32,
}

struct Cached {
    id: ContainerId,
    fps: Vec<Fingerprint>,
    /// `named[pos]`: the map's live entry for `fps[pos]` names this
    /// position (another section inserted later, or a later position of
    /// this one, may have taken it over).
    named: Vec<bool>,
    tick: u64,
}

/// Stale entries tolerated beyond half the live ones before a sweep.
const SWEEP_SLACK: usize = 4096;

/// Map entries allowed for `live` cached fingerprints before a sweep.
fn sweep_bound(live: usize) -> usize {
    live + live / 2 + SWEEP_SLACK
}

/// 32 bits of `fp`'s hash: an entry's tag.
fn tag_of(hasher: &BuildFpHasher, fp: &Fingerprint) -> u32 {
    (hasher.hash_one(fp) >> 32) as u32
}

/// The table's hash of a tag: its bits both where the table takes its
/// bucket (low) and its control byte (high).
fn spread(tag: u32) -> u64 {
    ((tag as u64) << 32) | tag as u64
}

/// `e`'s section, if its slot still holds the one `e` was made for.
fn live<'a>(slots: &'a [Option<Cached>], generations: &[u32], e: &Entry) -> Option<&'a Cached> {
    if generations[e.slot as usize] != e.generation {
        return None;
    }
    slots[e.slot as usize].as_ref()
}

/// Whether `e` is live in `slots` and names `fp`.
fn names(slots: &[Option<Cached>], generations: &[u32], e: &Entry, fp: &Fingerprint) -> bool {
    live(slots, generations, e).is_some_and(|c| c.fps[e.pos as usize] == *fp)
}

impl LocalityCache {
    /// A cache holding at most `capacity` container metadata sections.
    pub fn new(capacity: usize) -> Self {
        LocalityCache {
            capacity: capacity.max(1),
            map: HashTable::new(),
            hasher: BuildFpHasher::default(),
            slots: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            cached_fps: 0,
            cursor: None,
        }
    }

    fn tag(&self, fp: &Fingerprint) -> u32 {
        tag_of(&self.hasher, fp)
    }

    /// The slot and position of the live entry naming `fp`, if any.
    fn find(&self, fp: &Fingerprint) -> Option<(u32, u32)> {
        let tag = self.tag(fp);
        let (slots, generations) = (&self.slots, &self.generations);
        self.map
            .find(spread(tag), |e| {
                e.tag == tag && names(slots, generations, e, fp)
            })
            .map(|e| (e.slot, e.pos))
    }

    /// The position after the last hit, if it holds `fp` and the map names
    /// it there: the map's own answer.
    fn next_to_cursor(&self, fp: &Fingerprint) -> Option<(u32, u32)> {
        let (slot, generation, pos) = self.cursor?;
        if self.generations[slot as usize] != generation {
            return None;
        }
        let c = self.slots[slot as usize].as_ref()?;
        let next = pos as usize + 1;
        (next < c.fps.len() && c.named[next] && c.fps[next] == *fp).then_some((slot, next as u32))
    }

    /// DDFS `Lookup(fingerprint)`.
    pub fn lookup(&mut self, fp: &Fingerprint) -> Option<ContainerId> {
        let (slot, pos) = self.next_to_cursor(fp).or_else(|| self.find(fp))?;
        self.cursor = Some((slot, self.generations[slot as usize], pos));
        Some(self.stamp(slot).id)
    }

    /// Marks the section in `slot` (a cached one) most recently used.
    fn stamp(&mut self, slot: u32) -> &Cached {
        self.tick += 1;
        let c = self.slots[slot as usize]
            .as_mut()
            .expect("a live entry's or an indexed slot holds a section");
        c.tick = self.tick;
        c
    }

    /// Marks cached container `id` most recently used; `false` if it is not
    /// cached. The `lru` queue is updated lazily: see [`Self::pop_lru`].
    fn touch(&mut self, id: ContainerId) -> bool {
        let Some(&slot) = self.by_id.get(&id) else {
            return false;
        };
        self.stamp(slot);
        true
    }

    pub fn contains_container(&self, id: ContainerId) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Whether cached container `id`'s metadata section lists `fp` (a scan
    /// of one section: only to confirm an index hit on a cached container).
    pub fn container_holds(&self, id: ContainerId, fp: &Fingerprint) -> bool {
        let Some(&slot) = self.by_id.get(&id) else {
            return false;
        };
        // The map names one holder; only when it names another does the
        // section itself have to be scanned.
        self.find(fp).is_some_and(|(s, _)| s == slot)
            || self.slots[slot as usize]
                .as_ref()
                .is_some_and(|c| c.fps.contains(fp))
    }

    /// DDFS `Insert(container)`: all descriptors of one metadata section at
    /// once, evicting the least recently used container first when full.
    pub fn insert(&mut self, id: ContainerId, fps: Vec<Fingerprint>) {
        if self.touch(id) {
            return;
        }
        while self.by_id.len() >= self.capacity {
            let Some(victim) = self.pop_lru() else {
                break;
            };
            if let Some(slot) = self.by_id.remove(&victim) {
                let c = self.slots[slot as usize].take().expect("indexed");
                self.cached_fps -= c.fps.len();
                let g = &mut self.generations[slot as usize];
                *g = g.wrapping_add(1);
                self.free.push(slot);
            }
        }
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.generations.push(0);
            (self.slots.len() - 1) as u32
        });
        let generation = self.generations[slot as usize];
        let tags: Vec<u32> = fps.iter().map(|fp| self.tag(fp)).collect();
        self.cached_fps += fps.len();
        self.tick += 1;
        self.lru.insert(self.tick, id);
        self.by_id.insert(id, slot);
        let named = vec![true; fps.len()];
        self.slots[slot as usize] = Some(Cached {
            id,
            fps,
            named,
            tick: self.tick,
        });
        // Positions whose entry the new section takes over.
        let mut taken: Vec<(u32, u32)> = Vec::new();
        let (slots, generations) = (&self.slots, &self.generations);
        let fps = &slots[slot as usize].as_ref().expect("just placed").fps;
        for (pos, (fp, &tag)) in fps.iter().zip(&tags).enumerate() {
            let fresh = Entry {
                tag,
                slot,
                generation,
                pos: pos as u32,
            };
            // The live entry naming `fp` now names this section (the last
            // inserted holder); a stale one is left for the sweep.
            match self.map.find_mut(spread(tag), |e| {
                e.tag == tag && names(slots, generations, e, fp)
            }) {
                Some(e) => {
                    taken.push((e.slot, e.pos));
                    *e = fresh;
                }
                None => {
                    self.map
                        .insert_unique(spread(tag), fresh, |e| spread(e.tag));
                }
            }
        }
        for (s, pos) in taken {
            if let Some(c) = self.slots[s as usize].as_mut() {
                c.named[pos as usize] = false;
            }
        }
        if self.map.len() > sweep_bound(self.cached_fps) {
            self.sweep();
        }
    }

    /// Drops the stale entries: the table is emptied (its buckets kept) and
    /// the positions the cached sections name are inserted again, which are
    /// exactly its live entries. Refilled rather than `retain`ed: removing
    /// in place leaves tombstones, and once they fill the table the next
    /// insert doubles it (the live entries being more than half its
    /// buckets) instead of rehashing in place. Refilled from the sections
    /// rather than from a copy of the live entries: the copy was a fresh
    /// vector of every live entry at each sweep (4 MB for a full cache,
    /// first-touch page faults included).
    fn sweep(&mut self) {
        self.map.clear();
        let hasher = &self.hasher;
        for (slot, (c, &generation)) in self.slots.iter().zip(&self.generations).enumerate() {
            let Some(c) = c else { continue };
            for (pos, fp) in c.fps.iter().enumerate() {
                if c.named[pos] {
                    let tag = tag_of(hasher, fp);
                    let e = Entry {
                        tag,
                        slot: slot as u32,
                        generation,
                        pos: pos as u32,
                    };
                    self.map.insert_unique(spread(tag), e, |e| spread(e.tag));
                }
            }
        }
    }

    /// The least recently used container, removed from the queue. The
    /// queue is updated lazily: a hit only stamps the container, and this
    /// re-queues a container whose stamp is newer than its queue position,
    /// so a hit costs O(1).
    fn pop_lru(&mut self) -> Option<ContainerId> {
        while let Some((queued, id)) = self.lru.pop_first() {
            let cached = self
                .by_id
                .get(&id)
                .and_then(|&s| self.slots[s as usize].as_ref());
            match cached {
                Some(c) if c.tick != queued => {
                    self.lru.insert(c.tick, id);
                }
                Some(_) => return Some(id),
                None => {}
            }
        }
        None
    }

    pub fn len_containers(&self) -> usize {
        self.by_id.len()
    }

    /// Map entries, stale ones included (for the bound's test).
    #[cfg(test)]
    fn map_len(&self) -> usize {
        self.map.len()
    }

    /// Live map entries, and the positions the cached sections name: the
    /// sweep refills the table with the second, so they must be equal.
    #[cfg(test)]
    fn live_and_named(&self) -> (usize, usize) {
        let live = self
            .map
            .iter()
            .filter(|e| live(&self.slots, &self.generations, e).is_some())
            .count();
        let named = self
            .slots
            .iter()
            .flatten()
            .map(|c| c.named.iter().filter(|&&n| n).count())
            .sum();
        (live, named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fp(i: u8) -> Fingerprint {
        Fingerprint::from_slice(&[i; 20])
    }

    #[test]
    fn evicts_least_recently_used_container_whole() {
        let mut c = LocalityCache::new(2);
        c.insert(ContainerId(1), vec![fp(1), fp(2)]);
        c.insert(ContainerId(2), vec![fp(3)]);
        assert_eq!(c.lookup(&fp(1)), Some(ContainerId(1))); // 1 is now most recent
        c.insert(ContainerId(3), vec![fp(4)]);
        assert_eq!(
            c.lookup(&fp(3)),
            None,
            "container 2 was least recently used"
        );
        assert_eq!(c.lookup(&fp(2)), Some(ContainerId(1)));
        assert_eq!(c.lookup(&fp(4)), Some(ContainerId(3)));
        assert_eq!(c.len_containers(), 2);
    }

    #[test]
    fn shared_fingerprint_survives_eviction_of_older_container() {
        let mut c = LocalityCache::new(2);
        c.insert(ContainerId(1), vec![fp(9)]);
        c.insert(ContainerId(2), vec![fp(9)]);
        c.insert(ContainerId(3), vec![fp(7)]); // evicts 1
        assert_eq!(c.lookup(&fp(9)), Some(ContainerId(2)));
    }

    /// The eager DDFS cache, written plainly: evicting a container removes
    /// the map entries that name it.
    struct Eager {
        capacity: usize,
        map: HashMap<Fingerprint, ContainerId>,
        /// Most recently used last.
        order: Vec<(ContainerId, Vec<Fingerprint>)>,
    }

    impl Eager {
        fn touch(&mut self, id: ContainerId) {
            let i = self.order.iter().position(|(c, _)| *c == id).unwrap();
            let e = self.order.remove(i);
            self.order.push(e);
        }

        fn lookup(&mut self, fp: &Fingerprint) -> Option<ContainerId> {
            let id = *self.map.get(fp)?;
            self.touch(id);
            Some(id)
        }

        fn insert(&mut self, id: ContainerId, fps: Vec<Fingerprint>) {
            if self.order.iter().any(|(c, _)| *c == id) {
                return self.touch(id);
            }
            if self.order.len() >= self.capacity {
                let (victim, gone) = self.order.remove(0);
                for f in gone {
                    if self.map.get(&f) == Some(&victim) {
                        self.map.remove(&f);
                    }
                }
            }
            for f in &fps {
                self.map.insert(*f, id);
            }
            self.order.push((id, fps));
        }
    }

    /// Many evictions from a full cache of large sections: sweeps happen
    /// (the map shrinks), the map stays within its bound, and every cached
    /// fingerprint is found in the last section inserted that lists it.
    #[test]
    fn sweeps_keep_exactly_the_live_entries() {
        let mut c = LocalityCache::new(16);
        let section = |id: u64| -> Vec<Fingerprint> {
            // A container's first quarter is its predecessor's last.
            (0..1000u64)
                .map(|i| {
                    let n = if i < 250 {
                        (id - 1) * 1000 + 750 + i
                    } else {
                        id * 1000 + i
                    };
                    Fingerprint::from_slice(&cairn_core::mix64(n).to_le_bytes().repeat(4))
                })
                .collect()
        };
        let mut sweeps = 0;
        for id in 1..400u64 {
            let before = c.map_len();
            c.insert(ContainerId(id), section(id));
            sweeps += usize::from(c.map_len() < before);
            assert!(c.map_len() <= sweep_bound(c.cached_fps));
            let (live, named) = c.live_and_named();
            assert_eq!(live, named);
        }
        assert!(sweeps > 10, "{sweeps} sweeps");
        for id in 384..400u64 {
            for (i, fp) in section(id).iter().enumerate() {
                let want = if i >= 750 && id < 399 { id + 1 } else { id };
                assert_eq!(c.lookup(fp), Some(ContainerId(want)), "{id} {i}");
            }
        }
    }

    proptest! {
        /// Lazy eviction (and the cursor after the last hit) answers every
        /// lookup exactly as eager eviction does, and its map stays bounded.
        #[test]
        fn lazy_eviction_answers_as_eager_eviction(
            capacity in 1usize..5,
            ops in proptest::collection::vec(
                prop_oneof![
                    (0u64..12, proptest::collection::vec(0u8..40, 0..8))
                        .prop_map(|(c, f)| (Some(c), f)),
                    proptest::collection::vec(0u8..40, 1..2).prop_map(|f| (None, f)),
                    // A container's section looked up in order (the
                    // locality a lookup's cursor follows).
                    (0u64..12).prop_map(|c| (Some(c + 100), Vec::new())),
                ],
                1..300,
            ),
        ) {
            let mut lazy = LocalityCache::new(capacity);
            let mut eager = Eager { capacity, map: HashMap::new(), order: Vec::new() };
            // A container's section is fixed by its id, as on disk.
            let section = |c: u64, f: &[u8]| -> Vec<Fingerprint> {
                f.iter().map(|&b| fp(b.wrapping_add((c as u8) * 7) % 40)).collect()
            };
            let mut sections: HashMap<u64, Vec<Fingerprint>> = HashMap::new();
            for (c, f) in ops {
                match c {
                    Some(c) if c >= 100 => {
                        for q in sections.get(&(c - 100)).cloned().unwrap_or_default() {
                            prop_assert_eq!(lazy.lookup(&q), eager.lookup(&q));
                        }
                    }
                    Some(c) => {
                        let fps = sections.entry(c).or_insert_with(|| section(c, &f)).clone();
                        lazy.insert(ContainerId(c), fps.clone());
                        eager.insert(ContainerId(c), fps);
                    }
                    None => {
                        let q = fp(f[0]);
                        prop_assert_eq!(lazy.lookup(&q), eager.lookup(&q));
                    }
                }
                for b in 0..40u8 {
                    for (id, _) in &eager.order {
                        prop_assert_eq!(
                            lazy.container_holds(*id, &fp(b)),
                            sections[&id.0].contains(&fp(b))
                        );
                    }
                }
                prop_assert!(lazy.map_len() <= sweep_bound(lazy.cached_fps));
                let (live, named) = lazy.live_and_named();
                prop_assert_eq!(live, named);
            }
        }
    }
}
