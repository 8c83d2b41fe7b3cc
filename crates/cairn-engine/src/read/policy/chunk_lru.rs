//! Chunk-based caching (`002_c5d78fa3332f6f9f.txt` §2): an LRU of chunks. A
//! miss reads the container and caches every chunk of it (the step's own
//! chunk as the most recently used); when the cached raw bytes pass the
//! budget the least recently used chunks go one by one, so chunks of a
//! container that are never asked for leave first while its useful ones
//! stay: a higher hit ratio than container caching at the cost of managing
//! chunks one at a time.

use std::collections::BTreeMap;

use cairn_core::{ContainerId, Fingerprint, FpMap};

use super::{ContainerChunk, Memory, PlanStep, RestorePolicy};

pub struct ChunkLru {
    capacity: u64,
    /// tick -> chunk, oldest first; `ticks` is its inverse.
    lru: BTreeMap<u64, (Fingerprint, u64)>,
    ticks: FpMap<u64>,
    bytes: u64,
    tick: u64,
}

impl ChunkLru {
    pub fn new(capacity: u64) -> Self {
        ChunkLru {
            capacity,
            lru: BTreeMap::new(),
            ticks: FpMap::default(),
            bytes: 0,
            tick: 0,
        }
    }

    /// Makes `fp` the most recently used, inserting it if absent.
    fn touch(&mut self, fp: Fingerprint, size: u64, mem: &mut Memory) {
        self.tick += 1;
        match self.ticks.insert(fp, self.tick) {
            Some(old) => {
                let e = self.lru.remove(&old).expect("lru entry");
                self.lru.insert(self.tick, e);
            }
            None => {
                self.lru.insert(self.tick, (fp, size));
                self.bytes += size;
                mem.keep(fp, size);
            }
        }
    }
}

impl RestorePolicy for ChunkLru {
    fn serve(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) -> bool {
        let s = &plan[pos];
        if !self.ticks.contains_key(&s.fp) {
            return false;
        }
        self.touch(s.fp, s.size, mem);
        true
    }

    fn read(
        &mut self,
        pos: usize,
        plan: &[PlanStep],
        _container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    ) {
        let want = plan[pos].fp;
        for c in chunks.iter().filter(|c| c.fp != want) {
            self.touch(c.fp, c.size, mem);
        }
        if let Some(c) = chunks.iter().find(|c| c.fp == want) {
            self.touch(c.fp, c.size, mem);
        }
        while self.bytes > self.capacity {
            let Some((_, (fp, size))) = self.lru.pop_first() else {
                break;
            };
            self.ticks.remove(&fp);
            self.bytes -= size;
            mem.drop(&fp);
        }
    }
}
