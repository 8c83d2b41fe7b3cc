//! The sliding look-back window (`002_c5d78fa3332f6f9f.txt` §4-§5).
//!
//! The window (the recipe cache) covers the last `window` containers' worth
//! of the stream's data chunks and moves a container's worth at a time. Old
//! containers are counted by `CNRC_lbw` (references in the window not
//! rewritten). Each move runs the five steps of §5.2:
//!
//! 1. classify the added chunks: unique; non-rewrite (a duplicate whose old
//!    container already has a non-rewrite chunk in the window); candidate
//!    (any other duplicate in an old container, its bytes held once in the
//!    rewrite candidate cache). A candidate is its container's *leading
//!    chunk* when no other chunk of that container is in the window;
//! 2. the recipe entries of the added chunks are recorded;
//! 3. candidates of containers whose `CNRC_lbw` is above `T_dc` become
//!    non-rewrite chunks and leave the candidate cache;
//! 4. candidates still in the evicted (oldest) container are rewritten; a
//!    rewritten leading chunk takes every candidate of its container in the
//!    window with it;
//! 5. every `window` moves (a cycle), `T_dc` is adjusted by Algorithm 1
//!    from the cycle's bounds (`budget.rs`) and the referenced chunk
//!    closeness `L_c`.
//!
//! Unique chunks go to the open container at once; rewritten ones when
//! decided (step 4). Where 002 is silent: the first cycle runs with
//! `T_dc = 0` (no rewrites until the first adjustment); a candidate that
//! does not fit the candidate cache is a non-rewrite chunk (the dedup
//! ratio bound comes first, as in §3.2); `N_reads` counts, per cycle, the
//! distinct old containers that non-rewrite chunks leaving the window
//! referenced.

use std::collections::{HashMap, HashSet, VecDeque};

use cairn_core::{BuildFpHasher, ContainerId, Fingerprint, FpMap, FpSet};

/// Maps and sets keyed by container id: the fingerprint hasher mixes a
/// `u64` key in one step (the default hasher was a tenth of the
/// simulator's rewrite time).
type IdMap<V> = HashMap<ContainerId, V, BuildFpHasher>;
type IdSet = HashSet<ContainerId, BuildFpHasher>;

use super::budget::{adjust_t_dc, Budget};
use super::{Action, RewritePolicy};
use crate::dedup::location::Location;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Unique, in flight, or in a container of this window: never rewritten.
    Plain,
    NonRewrite,
    Candidate,
    Rewritten,
}

struct Entry {
    seq: u64,
    fp: Fingerprint,
    /// The old container referenced (`None` for plain chunks).
    old: Option<ContainerId>,
    state: State,
    leading: bool,
}

#[derive(Default)]
struct Group {
    entries: Vec<Entry>,
    bytes: u64,
    /// Containers the stream opened while this group was added.
    opened: Vec<ContainerId>,
}

#[derive(Default)]
struct Old {
    /// References in the window not rewritten: CNRC_lbw.
    cnrc: u32,
    nonrewrite: u32,
    candidates: u32,
}

pub struct Lbw {
    window: usize,
    group_bytes: u64,
    /// Oldest first; the last one is being filled (the window's front).
    groups: VecDeque<Group>,
    old: IdMap<Old>,
    /// Containers the stream opened while a group of the window was added.
    recent: IdSet,
    /// Candidate bytes, one copy per chunk: chunk -> (references, size).
    cache: FpMap<(u32, u64)>,
    cache_bytes: u64,
    cache_cap: u64,
    budget: Budget,
    t_dc: f64,
    moves: u64,
    lc_prev: f64,
    /// Rewrites and old containers referenced during the current cycle.
    cycle_rewritten: u64,
    cycle_reads: IdSet,
    /// [`Self::closeness`]'s working sets, kept between cycles.
    closeness: Closeness,
}

/// Working sets of one L_c computation, cleared and reused each cycle.
#[derive(Default)]
struct Closeness {
    seen: FpSet,
    /// Container -> its index in `firsts`.
    slot: IdMap<usize>,
    /// Per container, in order of first appearance: its leading chunk's
    /// position, the sum of its other chunks' distances, their count.
    firsts: Vec<(usize, f64, u32)>,
}

impl Lbw {
    pub fn new(window: u32, group_bytes: u64, candidate_bytes: u64, budget: Budget) -> Self {
        let mut groups = VecDeque::new();
        groups.push_back(Group::default());
        Lbw {
            window: window.max(2) as usize,
            group_bytes: group_bytes.max(1),
            groups,
            old: IdMap::default(),
            recent: IdSet::default(),
            cache: FpMap::default(),
            cache_bytes: 0,
            cache_cap: candidate_bytes,
            budget,
            t_dc: 0.0,
            moves: 0,
            lc_prev: 0.0,
            cycle_rewritten: 0,
            cycle_reads: IdSet::default(),
            closeness: Closeness::default(),
        }
    }

    fn uncache(&mut self, fp: &Fingerprint) {
        if let Some(e) = self.cache.get_mut(fp) {
            e.0 -= 1;
            if e.0 == 0 {
                self.cache_bytes -= e.1;
                self.cache.remove(fp);
            }
        }
    }

    /// Candidate `(g, i)` becomes a non-rewrite chunk.
    fn keep_entry(&mut self, g: usize, i: usize, out: &mut Vec<Action>) {
        let e = &mut self.groups[g].entries[i];
        e.state = State::NonRewrite;
        let (seq, fp, c) = (e.seq, e.fp, e.old.expect("candidates are old"));
        let o = self.old.get_mut(&c).expect("counted");
        o.candidates -= 1;
        o.nonrewrite += 1;
        self.uncache(&fp);
        out.push(Action::Release(seq));
    }

    /// Candidate `(g, i)` is rewritten into the open container.
    fn rewrite_entry(&mut self, g: usize, i: usize, out: &mut Vec<Action>) {
        let e = &mut self.groups[g].entries[i];
        e.state = State::Rewritten;
        let (seq, fp, c) = (e.seq, e.fp, e.old.expect("candidates are old"));
        let o = self.old.get_mut(&c).expect("counted");
        o.candidates -= 1;
        o.cnrc -= 1;
        if o.cnrc == 0 && o.candidates == 0 && o.nonrewrite == 0 {
            self.old.remove(&c);
        }
        self.uncache(&fp);
        self.cycle_rewritten += 1;
        out.push(Action::Rewrite(seq));
    }

    /// Step 3: candidates of containers above T_dc are not rewritten.
    fn reclassify(&mut self, out: &mut Vec<Action>) {
        let above: IdSet = self
            .old
            .iter()
            .filter(|(_, o)| o.candidates > 0 && o.cnrc as f64 > self.t_dc)
            .map(|(c, _)| *c)
            .collect();
        if above.is_empty() {
            return;
        }
        for g in 0..self.groups.len() {
            for i in 0..self.groups[g].entries.len() {
                let e = &self.groups[g].entries[i];
                if e.state == State::Candidate && above.contains(&e.old.expect("old")) {
                    self.keep_entry(g, i, out);
                }
            }
        }
    }

    /// Step 4: the oldest group leaves the window.
    fn evict_oldest(&mut self, out: &mut Vec<Action>) {
        for i in 0..self.groups[0].entries.len() {
            let e = &self.groups[0].entries[i];
            if e.state != State::Candidate {
                continue;
            }
            let (c, leading) = (e.old.expect("old"), e.leading);
            self.rewrite_entry(0, i, out);
            if leading {
                for g in 0..self.groups.len() {
                    for j in 0..self.groups[g].entries.len() {
                        let f = &self.groups[g].entries[j];
                        if f.state == State::Candidate && f.old == Some(c) {
                            self.rewrite_entry(g, j, out);
                        }
                    }
                }
            }
        }
        let gone = self.groups.pop_front().expect("a group to evict");
        for e in &gone.entries {
            debug_assert!(e.state != State::Candidate, "decided before leaving");
            let (Some(c), State::NonRewrite) = (e.old, e.state) else {
                continue;
            };
            let o = self.old.get_mut(&c).expect("counted");
            o.nonrewrite -= 1;
            o.cnrc -= 1;
            self.cycle_reads.insert(c);
            if o.cnrc == 0 && o.candidates == 0 && o.nonrewrite == 0 {
                self.old.remove(&c);
            }
        }
        for id in &gone.opened {
            self.recent.remove(id);
        }
    }

    /// Step 5, at the end of a cycle.
    fn end_cycle(&mut self) {
        let counts: Vec<u32> = self
            .old
            .values()
            .filter(|o| o.cnrc > 0)
            .map(|o| o.cnrc)
            .collect();
        let (rw, reads) = self.budget.bounds(&counts);
        let lc = self.closeness();
        self.t_dc = adjust_t_dc(self.t_dc, lc, self.lc_prev, rw, reads).max(0.0);
        self.lc_prev = lc;
        self.budget.close_unit(
            std::mem::take(&mut self.cycle_rewritten),
            std::mem::take(&mut self.cycle_reads).len() as u64,
        );
    }

    /// Referenced chunk closeness L_c (§5.1): for each old container in the
    /// window, the mean distance in chunks from its leading (first) chunk
    /// to its other chunks (first appearances only), over the window's
    /// chunk count; averaged over the containers with more than one chunk
    /// (summed in order of first appearance, so a run is reproducible).
    fn closeness(&mut self) -> f64 {
        let Closeness { seen, slot, firsts } = &mut self.closeness;
        seen.clear();
        slot.clear();
        firsts.clear();
        let mut pos = 0;
        for g in &self.groups {
            for e in &g.entries {
                if let (Some(c), State::NonRewrite | State::Candidate) = (e.old, e.state) {
                    if seen.insert(e.fp) {
                        let k = *slot.entry(c).or_insert_with(|| {
                            firsts.push((pos, 0.0, 0));
                            firsts.len() - 1
                        });
                        let f = &mut firsts[k];
                        if f.0 != pos {
                            f.1 += (pos - f.0) as f64;
                            f.2 += 1;
                        }
                    }
                }
                pos += 1;
            }
        }
        let n = pos.max(1) as f64;
        let (mut sum, mut count) = (0.0, 0usize);
        for f in firsts.iter().filter(|f| f.2 > 0) {
            sum += f.1 / f.2 as f64 / n;
            count += 1;
        }
        if count == 0 {
            0.0
        } else {
            sum / count as f64
        }
    }

    /// The front group is full: move the window.
    fn advance(&mut self, out: &mut Vec<Action>) {
        self.reclassify(out);
        if self.groups.len() >= self.window {
            self.evict_oldest(out);
        }
        self.groups.push_back(Group::default());
        self.moves += 1;
        if self.moves.is_multiple_of(self.window as u64) {
            self.end_cycle();
        }
    }
}

impl RewritePolicy for Lbw {
    fn container_opened(&mut self, id: ContainerId) {
        self.recent.insert(id);
        self.groups
            .back_mut()
            .expect("a front group")
            .opened
            .push(id);
    }

    fn push(
        &mut self,
        seq: u64,
        fp: Fingerprint,
        size: u64,
        loc: Location,
        out: &mut Vec<Action>,
    ) -> bool {
        // Step 1.
        let (old, state, leading) = match loc {
            Location::Stored(c) if !self.recent.contains(&c) => {
                let o = self.old.entry(c).or_default();
                let leading = o.cnrc == 0;
                o.cnrc += 1;
                let cached = self.cache.contains_key(&fp);
                let state =
                    if o.nonrewrite > 0 || (!cached && self.cache_bytes + size > self.cache_cap) {
                        o.nonrewrite += 1;
                        State::NonRewrite
                    } else {
                        o.candidates += 1;
                        let e = self.cache.entry(fp).or_insert((0, size));
                        if e.0 == 0 {
                            self.cache_bytes += size;
                        }
                        e.0 += 1;
                        State::Candidate
                    };
                (Some(c), state, leading && state == State::Candidate)
            }
            Location::New => {
                self.budget.note_unique();
                (None, State::Plain, false)
            }
            _ => (None, State::Plain, false),
        };
        // Step 2.
        let front = self.groups.back_mut().expect("a front group");
        front.entries.push(Entry {
            seq,
            fp,
            old,
            state,
            leading,
        });
        front.bytes += size;
        if front.bytes >= self.group_bytes {
            self.advance(out);
        }
        state == State::Candidate
    }

    fn finish(&mut self, out: &mut Vec<Action>) {
        // The stream ends: every remaining group leaves the window in turn.
        self.reclassify(out);
        while !self.groups.is_empty() {
            self.evict_oldest(out);
        }
        self.groups.push_back(Group::default());
    }
}
