//! The segment-based schemes, Capping and FCRC (`002_c5d78fa3332f6f9f.txt`
//! §2-§3): the stream is cut into fixed segments of `segment_bytes` of data;
//! within a segment every duplicate in an *old* container (not one this
//! stream filled during the segment) is held, and each old container's
//! referenced count (CNRC: references in the segment, duplicates counted)
//! is taken. At the segment's end:
//!
//! - **Capping** ranks the old containers by CNRC, highest first, and
//!   rewrites the chunks of every container ranked below the capping level;
//! - **FCRC** rewrites the chunks of every container whose CNRC is below the
//!   threshold T_cnrc, set between the dedup-ratio bound and the
//!   container-read bound (`budget.rs`, §3.2), credits carried over.

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Fingerprint};

use super::budget::{fcrc_threshold, Budget};
use super::{Action, RewritePolicy};
use crate::dedup::location::Location;

pub enum Select {
    Capping { cap: u32 },
    Fcrc(Budget),
}

pub struct Segmented {
    segment_bytes: u64,
    bytes: u64,
    /// Held duplicates of the segment in old containers, in stream order.
    refs: Vec<(u64, ContainerId)>,
    /// Containers this stream opened during the segment (and the one open
    /// when it began): "new containers", read anyway.
    new_here: HashSet<ContainerId>,
    last_opened: Option<ContainerId>,
    select: Select,
}

impl Segmented {
    pub fn new(segment_bytes: u64, select: Select) -> Self {
        Segmented {
            segment_bytes,
            bytes: 0,
            refs: Vec::new(),
            new_here: HashSet::new(),
            last_opened: None,
            select,
        }
    }

    fn close(&mut self, out: &mut Vec<Action>) {
        let mut cnrc: HashMap<ContainerId, u32> = HashMap::new();
        for (_, c) in &self.refs {
            *cnrc.entry(*c).or_insert(0) += 1;
        }
        let rewrite: HashSet<ContainerId> = match &mut self.select {
            Select::Capping { cap } => {
                let mut ranked: Vec<(ContainerId, u32)> =
                    cnrc.iter().map(|(c, n)| (*c, *n)).collect();
                // Highest count first; ties to the newer container (deterministic).
                ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
                ranked
                    .into_iter()
                    .skip(*cap as usize)
                    .map(|(c, _)| c)
                    .collect()
            }
            Select::Fcrc(budget) => {
                let counts: Vec<u32> = cnrc.values().copied().collect();
                let (rw, reads) = budget.bounds(&counts);
                let t = fcrc_threshold(rw, reads, budget.last);
                budget.last = Some(t);
                cnrc.iter()
                    .filter(|(_, &n)| (n as f64) < t)
                    .map(|(c, _)| *c)
                    .collect()
            }
        };
        let mut rewritten = 0;
        for (seq, c) in self.refs.drain(..) {
            if rewrite.contains(&c) {
                rewritten += 1;
                out.push(Action::Rewrite(seq));
            } else {
                out.push(Action::Release(seq));
            }
        }
        if let Select::Fcrc(budget) = &mut self.select {
            budget.close_unit(rewritten, (cnrc.len() - rewrite.len()) as u64);
        }
        self.bytes = 0;
        self.new_here.clear();
        self.new_here.extend(self.last_opened);
    }
}

impl RewritePolicy for Segmented {
    fn container_opened(&mut self, id: ContainerId) {
        self.new_here.insert(id);
        self.last_opened = Some(id);
    }

    fn push(
        &mut self,
        seq: u64,
        _fp: Fingerprint,
        size: u64,
        loc: Location,
        out: &mut Vec<Action>,
    ) -> bool {
        self.bytes += size;
        let hold = match loc {
            Location::Stored(c) if !self.new_here.contains(&c) => {
                self.refs.push((seq, c));
                true
            }
            Location::New => {
                if let Select::Fcrc(b) = &mut self.select {
                    b.note_unique();
                }
                false
            }
            _ => false,
        };
        if self.bytes >= self.segment_bytes {
            self.close(out);
        }
        hold
    }

    fn finish(&mut self, out: &mut Vec<Action>) {
        if !self.refs.is_empty() || self.bytes > 0 {
            self.close(out);
        }
    }
}
