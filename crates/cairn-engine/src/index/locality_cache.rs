//! Locality Preserved Caching (DDFS §4.3): a fingerprint -> container cache
//! filled and evicted a whole container metadata section at a time, LRU by
//! container. A lookup that hits refreshes its container's recency.

use std::collections::{BTreeMap, HashMap};

use cairn_core::{ContainerId, Fingerprint, FpMap};

pub struct LocalityCache {
    capacity: usize,
    map: FpMap<ContainerId>,
    containers: HashMap<ContainerId, Cached>,
    /// recency tick -> container, oldest first.
    lru: BTreeMap<u64, ContainerId>,
    tick: u64,
}

struct Cached {
    fps: Vec<Fingerprint>,
    tick: u64,
}

impl LocalityCache {
    /// A cache holding at most `capacity` container metadata sections.
    pub fn new(capacity: usize) -> Self {
        LocalityCache {
            capacity: capacity.max(1),
            map: FpMap::default(),
            containers: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
        }
    }

    /// DDFS `Lookup(fingerprint)`.
    pub fn lookup(&mut self, fp: &Fingerprint) -> Option<ContainerId> {
        let id = *self.map.get(fp)?;
        self.touch(id);
        Some(id)
    }

    pub fn contains_container(&self, id: ContainerId) -> bool {
        self.containers.contains_key(&id)
    }

    /// Whether cached container `id`'s metadata section lists `fp` (a scan
    /// of one section: only to confirm an index hit on a cached container).
    pub fn container_holds(&self, id: ContainerId, fp: &Fingerprint) -> bool {
        // The map names one cached holder; only when it names another does
        // the section itself have to be scanned.
        self.map.get(fp) == Some(&id)
            || self.containers.get(&id).is_some_and(|c| c.fps.contains(fp))
    }

    /// DDFS `Insert(container)`: all descriptors of one metadata section at
    /// once, evicting the least recently used container first when full.
    pub fn insert(&mut self, id: ContainerId, fps: Vec<Fingerprint>) {
        if self.containers.contains_key(&id) {
            self.touch(id);
            return;
        }
        while self.containers.len() >= self.capacity {
            let Some(victim) = self.pop_lru() else {
                break;
            };
            self.remove(victim);
        }
        for fp in &fps {
            self.map.insert(*fp, id);
        }
        self.tick += 1;
        self.lru.insert(self.tick, id);
        self.containers.insert(
            id,
            Cached {
                fps,
                tick: self.tick,
            },
        );
    }

    /// DDFS `Remove(container)`. A fingerprint also present in a later cached
    /// container keeps that container's mapping.
    fn remove(&mut self, id: ContainerId) {
        if let Some(c) = self.containers.remove(&id) {
            for fp in c.fps {
                if self.map.get(&fp) == Some(&id) {
                    self.map.remove(&fp);
                }
            }
        }
    }

    /// Marks `id` most recently used. The `lru` queue is updated lazily: a
    /// hit only stamps the container, and eviction re-queues a container
    /// whose stamp is newer than its queue position, so a hit costs O(1).
    fn touch(&mut self, id: ContainerId) {
        if let Some(c) = self.containers.get_mut(&id) {
            self.tick += 1;
            c.tick = self.tick;
        }
    }

    /// The least recently used container, removed from the queue.
    fn pop_lru(&mut self) -> Option<ContainerId> {
        while let Some((queued, id)) = self.lru.pop_first() {
            match self.containers.get(&id) {
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
        self.containers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
