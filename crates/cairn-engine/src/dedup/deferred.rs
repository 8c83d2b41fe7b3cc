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

use super::{Location, Session};

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
    /// The names [`FromStr`] accepts.
    pub const NAMES: [&'static str; 2] = ["inline", "deferred"];

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

/// The deferred resolver (run by [`super::eager::Eager::with`]): new
/// unless this backup already stored it.
pub fn resolve(s: &mut Session<'_>, fp: &Fingerprint) -> Result<Location> {
    Ok(match s.stored_by_this_run(fp) {
        Some(loc) => loc,
        None => {
            s.decide_new(fp);
            Location::New
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_backend::MemBackend;
    use cairn_core::{Backend, ChunkKind, CompressionCodec, ContainerId, Counters};
    use cairn_format::container::ContainerWriter;

    use super::super::eager::Eager;
    use super::super::strategy::{Decision, LookupStrategy};
    use super::super::Dedup;
    use super::*;
    use crate::config::IndexConfig;
    use crate::container_log::{ContainerLog, ContainerStore};

    fn fp(i: u16) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    fn decide(s: &mut dyn LookupStrategy, dedup: &Dedup, fps: &[Fingerprint]) -> Vec<Location> {
        let mut out = Vec::new();
        s.submit(dedup, fps, &mut out).unwrap();
        out.iter()
            .map(|d| match d {
                Decision::Decided(l) => *l,
                Decision::Pending(_) => panic!("deferred decides at once"),
            })
            .collect()
    }

    /// A container holding `fps`, announced to `dedup` as a stream would.
    fn seal(dedup: &Dedup, log: &dyn ContainerStore, fps: &[Fingerprint]) -> ContainerId {
        let id = log.allocate().unwrap();
        dedup.container_opened(id);
        let mut w = ContainerWriter::new(id, 32, 1 << 20);
        for f in fps {
            w.push(*f, ChunkKind::Data, 0, CompressionCodec::None, 1, &[0]);
        }
        dedup.container_closed(id, fps.to_vec());
        log.append(w).unwrap();
        dedup.container_sealed(id);
        id
    }

    /// Chunks an interrupted earlier backup left (replayed at open, so in
    /// the in-memory part) are stored again; a repeat within this backup
    /// is not, whether still in flight or packed; nothing older is looked
    /// up. Eager lookup over the same state finds the replayed chunks.
    #[test]
    fn only_this_runs_chunks_are_duplicates() {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let counters = Arc::new(Counters::default());
        let log: Arc<dyn ContainerStore> =
            Arc::new(ContainerLog::open(backend.clone(), counters.clone()).unwrap());
        let cfg = IndexConfig {
            expected_chunks: 64,
            ..Default::default()
        };
        let open = || crate::dedup::tests::open_dedup(&backend, &counters, &log, &cfg, 4, true);
        let old: Vec<Fingerprint> = (0..8).map(fp).collect();
        // An earlier backup stored `old` and died before its commit.
        let first = open();
        seal(&first, &*log, &old);
        drop(first);

        let dedup = open();
        let before = counters.snapshot();
        let mut s = Eager::with(resolve);
        let got = decide(&mut s, &dedup, &[old[0], old[1], old[0]]);
        assert_eq!(
            got,
            [Location::New, Location::New, Location::InFlight],
            "replayed chunks are stored again, a repeat in flight is not"
        );
        let id = seal(&dedup, &*log, &[old[0], old[1]]);
        let got = decide(&mut s, &dedup, &[old[1], old[2]]);
        assert_eq!(got, [Location::Stored(id), Location::New]);
        assert_eq!(s.next_rank(), 5);
        let c = counters.snapshot().since(&before);
        assert_eq!(
            (
                c.cache_probes,
                c.bloom_tests,
                c.index_page_reads,
                c.prefetches
            ),
            (0, 0, 0, 0),
            "{c:?}"
        );
        // Inline lookup over the same state: the replayed chunk is a duplicate.
        let got = decide(&mut Eager::default(), &dedup, &[old[3]]);
        assert!(matches!(got[0], Location::Stored(_)), "{got:?}");
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [DedupMode::Inline, DedupMode::Deferred] {
            assert_eq!(m.name().parse::<DedupMode>().unwrap(), m);
        }
        assert_eq!(DedupMode::default(), DedupMode::Inline);
        let e = "later".parse::<DedupMode>().unwrap_err().to_string();
        assert!(e.contains("inline or deferred"), "{e}");
    }
}
