//! Belady's optimal replacement over chunks: the bound the other policies
//! are measured against (`002_c5d78fa3332f6f9f.txt` §2 cites it for
//! container caching). It knows the whole plan: a read keeps the chunks of
//! the container that the plan still wants, and when the budget is passed
//! the held chunk whose next use is farthest goes first (possibly the one
//! just read); a chunk the plan never wants again goes at once. A plan is a
//! batch of files, so chunks held from an earlier plan are re-ranked by
//! their first use in the new plan (or let go) when it begins.

use std::collections::BTreeSet;

use cairn_core::{ContainerId, Fingerprint, FpMap};

use super::{ContainerChunk, Memory, PlanStep, RestorePolicy};

pub struct Belady {
    capacity: u64,
    /// For each step, the position of the next step with the same chunk.
    next: Vec<usize>,
    /// Each chunk's next use at or after the current step.
    upcoming: FpMap<usize>,
    /// Held chunks by next use (farthest last), with sizes in `sizes`.
    by_next: BTreeSet<(usize, Fingerprint)>,
    held: FpMap<(usize, u64)>,
    bytes: u64,
}

const NEVER: usize = usize::MAX;

impl Belady {
    pub fn new(capacity: u64) -> Self {
        Belady {
            capacity,
            next: Vec::new(),
            upcoming: FpMap::default(),
            by_next: BTreeSet::new(),
            held: FpMap::default(),
            bytes: 0,
        }
    }

    fn release(&mut self, fp: &Fingerprint, mem: &mut Memory) {
        if let Some((n, size)) = self.held.remove(fp) {
            self.by_next.remove(&(n, *fp));
            self.bytes -= size;
            mem.drop(fp);
        }
    }

    fn hold(&mut self, fp: Fingerprint, next: usize, size: u64, mem: &mut Memory) {
        self.held.insert(fp, (next, size));
        self.by_next.insert((next, fp));
        self.bytes += size;
        mem.keep(fp, size);
    }
}

impl RestorePolicy for Belady {
    fn begin(&mut self, plan: &[PlanStep], mem: &mut Memory) {
        self.next = vec![NEVER; plan.len()];
        self.upcoming.clear();
        for (i, s) in plan.iter().enumerate().rev() {
            if let Some(later) = self.upcoming.insert(s.fp, i) {
                self.next[i] = later;
            }
        }
        let held: Vec<(Fingerprint, u64)> = self.held.iter().map(|(f, (_, s))| (*f, *s)).collect();
        for (fp, size) in held {
            let (old, _) = self.held[&fp];
            self.by_next.remove(&(old, fp));
            match self.upcoming.get(&fp) {
                Some(&n) => {
                    self.held.insert(fp, (n, size));
                    self.by_next.insert((n, fp));
                }
                None => {
                    self.held.remove(&fp);
                    self.bytes -= size;
                    mem.drop(&fp);
                }
            }
        }
    }

    fn serve(&mut self, pos: usize, plan: &[PlanStep], mem: &mut Memory) -> bool {
        let fp = plan[pos].fp;
        let next = self.next[pos];
        if next == NEVER {
            self.upcoming.remove(&fp);
        } else {
            self.upcoming.insert(fp, next);
        }
        let Some(&(old, size)) = self.held.get(&fp) else {
            return false;
        };
        if next == NEVER {
            self.release(&fp, mem);
        } else {
            self.by_next.remove(&(old, fp));
            self.by_next.insert((next, fp));
            self.held.insert(fp, (next, size));
        }
        true
    }

    fn read(
        &mut self,
        _pos: usize,
        _plan: &[PlanStep],
        _container: ContainerId,
        chunks: &[ContainerChunk],
        mem: &mut Memory,
    ) {
        for c in chunks {
            if self.held.contains_key(&c.fp) {
                continue;
            }
            if let Some(&n) = self.upcoming.get(&c.fp) {
                self.hold(c.fp, n, c.size, mem);
            }
        }
        while self.bytes > self.capacity {
            let Some(&(_, fp)) = self.by_next.last() else {
                break;
            };
            self.release(&fp, mem);
        }
    }
}
