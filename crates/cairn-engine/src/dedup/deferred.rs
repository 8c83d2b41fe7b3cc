//! Deferred (post-processing) deduplication at ingest,
//! `004_62bf1a5ddd5ed253.txt` "Key Design Decisions: Post-processing
//! deduplication": the write path stores data without consulting the dedup
//! index, so ingest keeps its speed, and duplicates are removed later by a
//! background job. In cairn the background job is the garbage collector:
//! PGC+ (`003_ea5fccc485a97c5d.txt` §3.4) walks containers from the newest
//! down and keeps only a chunk's newest copy (`gc::sweep::copy_backward`).
//!
//! What this strategy does for every fingerprint a stream submits:
//!
//! - no locality cache probe, no Summary Vector test, no index page read and
//!   no confirmation of an index hit: nothing stored before this backup is
//!   ever looked at, so every chunk is stored;
//! - except a chunk this same backup already stored (or is packing): it is
//!   answered from the in-memory index part, which holds this run's chunks
//!   anyway (they become the index entries committed at the end). That
//!   answer is `InFlight` or `Stored(c)` with `c` a container of this run.
//!
//! 004 deduplicates in two phases: within disjoint partitions of the data
//! first, then across partitions ("reconciliation", which may be delayed).
//! Storing a run's repeats once is the first phase with this backup as the
//! partition, and it costs no lookup the inline path would not also do (the
//! in-memory part is a hash table in RAM). Reconciliation against everything
//! older is what the collector does later. The slides say nothing about
//! repeats inside one ingest: Windows stores the file as written and
//! chunks it only afterwards, so the choice here is cairn's.
//!
//! Every chunk stored still joins the filter (`decide_new`: a Summary Vector
//! insert, not a test), so the next inline backup's filter stays exact, and
//! its index entry names the copy this backup wrote: the newest copy is the
//! canonical one (`crate::canonical`), so the snapshot restores from its own
//! containers at once.

use std::fmt;
use std::str::FromStr;

use cairn_core::{Error, Fingerprint, Result};

use super::strategy::{Decision, LookupStrategy};
use super::Dedup;

/// When a backup removes duplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DedupMode {
    /// At ingest, against everything stored (DDFS §4.4; the default).
    #[default]
    Inline,
    /// Later, by the garbage collector: ingest stores every chunk it meets
    /// (a chunk repeated within the same backup once).
    Deferred,
}

impl DedupMode {
    pub fn name(self) -> &'static str {
        match self {
            DedupMode::Inline => "inline",
            DedupMode::Deferred => "deferred",
        }
    }
}

impl fmt::Display for DedupMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DedupMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "inline" => Ok(DedupMode::Inline),
            "deferred" => Ok(DedupMode::Deferred),
            other => Err(Error::invalid(format!(
                "unknown dedup mode {other:?}: inline or deferred"
            ))),
        }
    }
}

/// The deferred strategy: every fingerprint is decided at once, new unless
/// this backup already stored it.
#[derive(Default)]
pub struct Deferred {
    next_rank: u64,
}

impl LookupStrategy for Deferred {
    fn next_rank(&self) -> u64 {
        self.next_rank
    }

    fn submit(
        &mut self,
        dedup: &Dedup,
        fps: &[Fingerprint],
        out: &mut Vec<Decision>,
    ) -> Result<()> {
        out.clear();
        let mut s = dedup.session();
        for fp in fps {
            let loc = match s.stored_by_this_run(fp) {
                Some(loc) => loc,
                None => {
                    s.decide_new(fp);
                    super::Location::New
                }
            };
            out.push(Decision::Decided(loc));
        }
        self.next_rank += fps.len() as u64;
        Ok(())
    }

    fn flush(&mut self, _dedup: &Dedup) -> Result<()> {
        Ok(())
    }

    fn take_resolved(&mut self) -> Vec<(u64, super::Location)> {
        Vec::new()
    }

    fn buffered(&self) -> usize {
        0
    }
}
