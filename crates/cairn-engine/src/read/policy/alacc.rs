//! ALACC, adaptive look-ahead chunk caching (`002_c5d78fa3332f6f9f.txt` §2
//! and §6, its ref. [10], Cao et al., FAST'18): a forward assembly area and
//! a chunk cache share one memory budget, and a look-ahead window (LAW),
//! longer than the area, tells the cache which chunks the restore will want
//! soon.
//!
//! One round per assembly window `plan[start..end]`, the LAW being
//! `plan[start..law_end]`:
//!
//! 1. a step whose chunk the area or the cache holds is served from memory;
//! 2. otherwise its container is read; each of its chunks that a later slot
//!    of the window wants goes to the area, each that the LAW wants after
//!    the window goes to the cache, the rest is dropped;
//! 3. a chunk leaving the area after its last slot moves to the cache when
//!    the LAW still wants it;
//! 4. the cache evicts least recently used chunks the LAW does not want
//!    first ("cold"), then those it does ("hot"): look-ahead assisted.
//!
//! At the end of a round the split adapts, one container-size unit at a
//! time: when the round read chunks the cache had evicted while the LAW
//! wanted them, the cache was too small and takes a unit from the area;
//! when the cache served nothing in a round that read containers, the area
//! takes a unit from it. The LAW grows by a unit while the cache has room
//! to spare (at most half full) and shrinks by one when the cache lost
//! wanted chunks; it never covers less than the area nor more than four
//! times the budget. 002 gives ALACC's starting point (§6: a 4-container
//! area, a 4-container cache and an 8-container LAW): half the budget each
//! and a LAW of the whole budget. The adaptation rule above is our reading
//! of ALACC's design ("extending and shrinking the look-ahead window" and
//! "dynamically deciding the memory" of the area and the cache); 002 does
//! not restate its formulas.

use std::collections::BTreeMap;

use cairn_core::{ContainerId, Fingerprint, FpMap, FpSet};

use super::faa::{count_slots, take_slot};
use super::{window_end, ContainerChunk, Memory, PlanStep, RestorePolicy};

pub struct Alacc {
    total: u64,
    unit: u64,
    faa: u64,
    cache: u64,
    law: u64,
    /// The assembly window ends here; the LAW at `law_end`.
    end: usize,
    /// Slots of the window after the current step, per chunk.
    wanted: FpMap<u32>,
    /// Chunks the LAW wants after the window.
    law_wanted: FpSet,
    /// Chunks held for the area.
    area: FpSet,
    cached: FpMap<Cached>,
    hot: BTreeMap<u64, Fingerprint>,
    cold: BTreeMap<u64, Fingerprint>,
    cache_used: u64,
    tick: u64,
    /// Chunks evicted from the cache while the LAW wanted them, in this
    /// round and the one before.
    evicted_now: FpSet,
    evicted_before: FpSet,
    round: Round,
    started: bool,
}

#[derive(Clone, Copy)]
struct Cached {
    tick: u64,
    size: u64,
    hot: bool,
}

#[derive(Default)]
struct Round {
    reads: u64,
    cache_hits: u64,
    lost: u64,
}

impl Alacc {
    pub fn new(total: u64, unit: u64) -> Self {
        let faa = (total / 2).max(1);
        Alacc {
            total,
            unit: unit.max(1),
            faa,
            cache: total.saturating_sub(faa),
            law: total.max(faa),
            end: 0,
            wanted: FpMap::default(),
            law_wanted: FpSet::default(),
            area: FpSet::default(),
            cached: FpMap::default(),
            hot: BTreeMap::new(),
            cold: BTreeMap::new(),
            cache_used: 0,
            tick: 0,
            evicted_now: FpSet::default(),
            evicted_before: FpSet::default(),
            round: Round::default(),
            started: false,
        }
    }

    /// The current split: (area bytes, cache bytes, LAW bytes).
    pub fn split(&self) -> (u64, u64, u64) {
        (self.faa, self.cache, self.law)
    }

    fn wants_later(&self, fp: &Fingerprint) -> bool {
        wanted_later(&self.law_wanted, &self.wanted, fp)
    }

    fn lists(&mut self, hot: bool) -> &mut BTreeMap<u64, Fingerprint> {
        if hot {
            &mut self.hot
        } else {
            &mut self.cold
        }
    }

    /// Inserts or refreshes `fp` in the cache (most recently used).
    fn cache_touch(&mut self, fp: Fingerprint, size: u64, mem: &mut Memory) {
        self.tick += 1;
        let hot = self.wants_later(&fp);
        let tick = self.tick;
        match self.cached.get(&fp).copied() {
            Some(c) => {
                self.lists(c.hot).remove(&c.tick);
                self.lists(hot).insert(tick, fp);
                self.cached.insert(
                    fp,
                    Cached {
                        tick,
                        size: c.size,
                        hot,
                    },
                );
            }
            None => {
                self.lists(hot).insert(tick, fp);
                self.cached.insert(fp, Cached { tick, size, hot });
                self.cache_used += size;
                mem.keep(fp, size);
            }
        }
    }

    fn evict_over_budget(&mut self, mem: &mut Memory) {
        while self.cache_used > self.cache {
            let victim = match self.cold.pop_first() {
                Some((_, fp)) => fp,
                None => match self.hot.pop_first() {
                    Some((_, fp)) => {
                        self.evicted_now.insert(fp);
                        fp
                    }
                    None => break,
                },
            };
            let c = self.cached.remove(&victim).expect("cached chunk");
            self.cache_used -= c.size;
            if !self.area.contains(&victim) {
                mem.drop(&victim);
            }
        }
    }

    /// The adaptation at the end of a round (see the module doc).
    fn adapt(&mut self) {
        let r = std::mem::take(&mut self.round);
        if r.lost > 0 && self.faa > self.unit {
            self.faa -= self.unit;
            self.cache += self.unit;
        } else if r.reads > 0 && r.cache_hits == 0 && self.cache >= self.unit {
            self.cache -= self.unit;
            self.faa += self.unit;
        }
        if r.lost > 0 {
            self.law = self.law.saturating_sub(self.unit);
        } else if self.cache_used * 2 <= self.cache {
            self.law += self.unit;
        }
        self.law = self.law.clamp(self.faa, 4 * self.total.max(self.faa));
    }

    /// Whether the hot and cold lists hold exactly the cached chunks, each
    /// under its tick in the tier the current LAW and window give it (what
    /// a rebuild of the lists would hold).
    fn tiers_agree(&self) -> bool {
        let listed = |hot: bool, list: &BTreeMap<u64, Fingerprint>| {
            list.iter().all(|(tick, fp)| {
                self.cached
                    .get(fp)
                    .is_some_and(|c| c.tick == *tick && c.hot == hot && self.wants_later(fp) == hot)
            })
        };
        self.hot.len() + self.cold.len() == self.cached.len()
            && listed(true, &self.hot)
            && listed(false, &self.cold)
    }

    fn new_round(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) {
        if self.started {
            self.adapt();
        }
        self.started = true;
        // Every area chunk left at its last slot; a plan change clears the rest.
        for fp in std::mem::take(&mut self.area) {
            if !self.cached.contains_key(&fp) {
                mem.drop(&fp);
            }
        }
        self.end = window_end(plan, pos, self.faa);
        let law_end = window_end(plan, pos, self.law).max(self.end);
        count_slots(plan, pos, self.end, &mut self.wanted);
        self.law_wanted.clear();
        self.law_wanted
            .extend(plan[self.end..law_end].iter().map(|s| s.fp));
        // Re-tier the cache for the new LAW; the budget may have changed.
        // The two lists always hold exactly the cached chunks, by tick, so
        // moving the chunks whose tier changed gives the lists a rebuild
        // would, without freeing and allocating every node each round
        // (issue 35: that churn was a simulated restore's largest source
        // of page faults).
        let (hot, cold) = (&mut self.hot, &mut self.cold);
        for (fp, c) in self.cached.iter_mut() {
            let now_hot = wanted_later(&self.law_wanted, &self.wanted, fp);
            if now_hot != c.hot {
                let (from, to) = if c.hot {
                    (&mut *hot, &mut *cold)
                } else {
                    (&mut *cold, &mut *hot)
                };
                from.remove(&c.tick);
                to.insert(c.tick, *fp);
                c.hot = now_hot;
            }
        }
        debug_assert!(self.tiers_agree());
        self.evicted_before = std::mem::take(&mut self.evicted_now);
        self.evict_over_budget(mem);
    }
}

/// Whether the LAW after the window or a later slot of the window wants
/// `fp`: a cached chunk's tier ("hot").
fn wanted_later(law_wanted: &FpSet, wanted: &FpMap<u32>, fp: &Fingerprint) -> bool {
    law_wanted.contains(fp) || wanted.contains_key(fp)
}

impl RestorePolicy for Alacc {
    fn begin(&mut self, _plan: &[PlanStep], _mem: &mut Memory) {
        self.end = 0;
    }

    fn serve(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) -> bool {
        if pos >= self.end {
            self.new_round(pos, plan, mem);
        }
        let s = plan[pos];
        let last = take_slot(&mut self.wanted, &s);
        let in_area = self.area.contains(&s.fp);
        let in_cache = self.cached.contains_key(&s.fp);
        if in_cache {
            if !in_area {
                self.round.cache_hits += 1;
            }
            self.cache_touch(s.fp, s.size, mem);
        }
        if in_area && last {
            self.area.remove(&s.fp);
            if self.law_wanted.contains(&s.fp) {
                self.cache_touch(s.fp, s.size, mem);
                self.evict_over_budget(mem);
            } else if !self.cached.contains_key(&s.fp) {
                mem.drop(&s.fp);
            }
        }
        let hit = in_area || in_cache;
        if !hit && (self.evicted_now.contains(&s.fp) || self.evicted_before.contains(&s.fp)) {
            self.round.lost += 1;
        }
        hit
    }

    fn read(
        &mut self,
        _pos: usize,
        _plan: &[PlanStep],
        _container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    ) {
        self.round.reads += 1;
        for c in chunks {
            if self.wanted.contains_key(&c.fp) {
                if self.area.insert(c.fp) {
                    mem.keep(c.fp, c.size);
                }
            } else if self.law_wanted.contains(&c.fp) {
                self.cache_touch(c.fp, c.size, mem);
            }
        }
        self.evict_over_budget(mem);
    }
}
