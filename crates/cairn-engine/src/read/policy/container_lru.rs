//! Container-based caching (`002_c5d78fa3332f6f9f.txt` §2): an LRU of whole
//! containers. A miss reads the container and keeps every chunk of it; when
//! the kept containers' raw bytes pass the budget, the least recently used
//! containers go, whole. A hit on any chunk of a held container makes that
//! container the most recently used.

use std::collections::{BTreeMap, HashMap};

use cairn_core::{ContainerId, FpMap};

use super::{ContainerChunk, Memory, PlanStep, RestorePolicy};

pub struct ContainerLru {
    capacity: u64,
    held: HashMap<ContainerId, Held>,
    lru: BTreeMap<u64, ContainerId>,
    /// Every held chunk: the held containers holding it (usually one; a
    /// rewritten chunk's copies make more).
    by_fp: FpMap<Vec<ContainerId>>,
    bytes: u64,
    tick: u64,
}

struct Held {
    tick: u64,
    chunks: Vec<ContainerChunk>,
    bytes: u64,
}

impl ContainerLru {
    pub fn new(capacity: u64) -> Self {
        ContainerLru {
            capacity,
            held: HashMap::new(),
            lru: BTreeMap::new(),
            by_fp: FpMap::default(),
            bytes: 0,
            tick: 0,
        }
    }

    fn touch(&mut self, id: ContainerId) {
        if let Some(h) = self.held.get_mut(&id) {
            self.lru.remove(&h.tick);
            self.tick += 1;
            h.tick = self.tick;
            self.lru.insert(self.tick, id);
        }
    }

    fn evict(&mut self, victim: ContainerId, mem: &mut Memory) {
        let Some(h) = self.held.remove(&victim) else {
            return;
        };
        self.lru.remove(&h.tick);
        self.bytes -= h.bytes;
        for c in &h.chunks {
            let Some(holders) = self.by_fp.get_mut(&c.fp) else {
                continue;
            };
            if let Some(i) = holders.iter().position(|&id| id == victim) {
                holders.swap_remove(i);
            }
            if holders.is_empty() {
                self.by_fp.remove(&c.fp);
                mem.drop(&c.fp);
            }
        }
    }
}

impl RestorePolicy for ContainerLru {
    fn serve(&mut self, pos: usize, plan: &[PlanStep], _mem: &mut Memory) -> bool {
        match self.by_fp.get(&plan[pos].fp).and_then(|h| h.first()) {
            Some(&id) => {
                self.touch(id);
                true
            }
            None => false,
        }
    }

    fn read(
        &mut self,
        _pos: usize,
        _plan: &[PlanStep],
        container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    ) {
        if self.held.contains_key(&container) {
            // Read again (its chunk was not found in it earlier): nothing new.
            self.touch(container);
            return;
        }
        let bytes: u64 = chunks.iter().map(|c| c.size).sum();
        while self.bytes + bytes > self.capacity {
            let Some((_, &victim)) = self.lru.first_key_value() else {
                break;
            };
            self.evict(victim, mem);
        }
        for c in chunks {
            self.by_fp.entry(c.fp).or_default().push(container);
            mem.keep(c.fp, c.size);
        }
        self.tick += 1;
        self.lru.insert(self.tick, container);
        self.bytes += bytes;
        self.held.insert(
            container,
            Held {
                tick: self.tick,
                chunks: chunks.to_vec(),
                bytes,
            },
        );
    }
}
