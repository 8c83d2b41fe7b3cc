//! cairn-chunk: chunkers (fixed, Rabin, FastCDC, regression), fingerprint
//! functions and a streaming chunk reader.
//!
//! Every chunker implements [`cairn_core::Chunker`]: given a buffer whose first
//! byte starts a chunk, it returns the chunk's length. Scans start afresh at
//! each chunk's first byte (no state carries from one chunk to the next), and
//! no call allocates.
//!
//! * [`FixedChunker`]: fixed-size blocks (the Venti baseline DDFS compares
//!   against, `001_3652cceaf162c5a1.txt` §5.4).
//! * [`RabinChunker`]: content-defined anchoring with a Rabin fingerprint over
//!   a 48-byte sliding window (DDFS §3.1 "Anchoring", after Manber / LBFS), the
//!   "basic version of fingerprint based chunking" of `004_62bf1a5ddd5ed253.txt`.
//! * [`FastCdcChunker`]: Gear rolling hash with normalized chunking
//!   (FastCDC, Xia et al.), the default.
//! * [`RegressionChunker`]: regression chunking (`004_62bf1a5ddd5ed253.txt`,
//!   slides "Regression Chunking Algorithm"): on reaching the maximum size it
//!   falls back to the last position that matched the longest suffix of the
//!   boundary pattern instead of a content-independent forced cut.
//!
//! The content-defined chunkers record how their last cut was made
//! ([`CutKind`], via `last_cut_kind()`), so a dataset study can report the
//! forced-boundary rate.
//!
//! [`fingerprint`] computes BLAKE3-256, SHA-256 or SHA-1 chunk fingerprints;
//! [`ChunkReader`] turns any `Read` into batches of complete chunks
//! ([`ChunkBatch`]) through one reused look-ahead buffer; [`cut_points`] chunks
//! a whole in-memory buffer.
//!
//! [`ChunkerSpec`] is a configuration with an optional 32-byte seed (an
//! encrypted repository's chunker seed): the seed replaces FastCDC's Gear
//! table ([`GearTable::seeded`]) and the Rabin polynomial of the Rabin and
//! regression chunkers ([`RabinTables::seeded`]), computed once per spec;
//! [`ChunkerSpec::build`] then makes chunkers that share them. Fixed-size
//! chunking has nothing to seed.

mod fastcdc;
mod fingerprint;
mod fixed;
mod gear;
mod rabin;
mod reader;
mod regression;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

pub use cairn_core::Chunker;
pub use fastcdc::FastCdcChunker;
pub use fingerprint::fingerprint;
pub use fixed::FixedChunker;
pub use gear::GearTable;
pub use rabin::{RabinChunker, RabinTables, RABIN_POLYNOMIAL, RABIN_WINDOW};
pub use reader::{cut_points, ChunkBatch, ChunkReader};
pub use regression::{RegressionChunker, REGRESSION_LEVELS};

use std::sync::Arc;

use cairn_core::{ChunkerConfig, Result};

/// How a content-defined chunker chose its last cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutKind {
    /// The rolling hash matched the full boundary pattern (the normal case).
    Full,
    /// Regression chunking only: the maximum size was reached without a full
    /// match, and the cut fell back to the last position whose hash matched
    /// the pattern with this many of its bits dropped (1 = longest suffix).
    Regressed(u8),
    /// The maximum size was reached without any (full or relaxed) match: a
    /// content-independent cut.
    Forced,
    /// Input ended (eof) before the maximum size and before any match: the
    /// last chunk of a stream.
    EndOfInput,
}

impl CutKind {
    /// The kind of a cut at `end` with no hash match, `max` being the
    /// chunker's maximum size: forced at the maximum, else the input's end.
    pub fn unmatched(end: usize, max: usize) -> CutKind {
        if end == max {
            CutKind::Forced
        } else {
            CutKind::EndOfInput
        }
    }
}

/// Builds the chunker a configuration describes (unseeded: the fixed Gear
/// table and Rabin polynomial of clear repositories).
///
/// Panics if `cfg.validate()` fails: configurations come from a repository
/// config or command line that was validated when read. Use
/// [`try_new_chunker`] to get the error instead.
pub fn new_chunker(cfg: &ChunkerConfig) -> Box<dyn Chunker> {
    new_chunker_seeded(cfg, None)
}

/// [`new_chunker`] with an optional chunker seed (see [`ChunkerSpec`]). To
/// make many chunkers with one seed, build a [`ChunkerSpec`] once instead:
/// this computes the seeded table on every call.
pub fn new_chunker_seeded(cfg: &ChunkerConfig, seed: Option<&[u8; 32]>) -> Box<dyn Chunker> {
    match ChunkerSpec::new(cfg, seed) {
        Ok(spec) => spec.build(),
        Err(e) => panic!("invalid chunker configuration: {e}"),
    }
}

/// Builds the chunker a configuration describes (unseeded), after
/// validating it.
pub fn try_new_chunker(cfg: &ChunkerConfig) -> Result<Box<dyn Chunker>> {
    Ok(ChunkerSpec::new(cfg, None)?.build())
}

/// A validated chunker configuration and, when seeded, the table or
/// polynomial derived from the seed: cheap to clone and to build chunkers
/// from (one per file), the seeded part computed once in [`Self::new`].
#[derive(Clone, Debug)]
pub struct ChunkerSpec {
    cfg: ChunkerConfig,
    seeded: bool,
    gear: Arc<GearTable>,
    rabin: Arc<RabinTables>,
}

impl ChunkerSpec {
    /// The spec of `cfg` with the fixed tables (`seed` = `None`) or with
    /// those derived from `seed`. Only the tables `cfg`'s chunker uses are
    /// derived.
    pub fn new(cfg: &ChunkerConfig, seed: Option<&[u8; 32]>) -> Result<Self> {
        cfg.validate()?;
        let (gear, rabin) = match (seed, cfg) {
            (Some(s), ChunkerConfig::FastCdc { .. }) => {
                (GearTable::seeded(s), RabinTables::unseeded())
            }
            (Some(s), ChunkerConfig::Rabin { .. } | ChunkerConfig::Regression { .. }) => {
                (GearTable::unseeded(), RabinTables::seeded(s))
            }
            _ => (GearTable::unseeded(), RabinTables::unseeded()),
        };
        Ok(ChunkerSpec {
            cfg: *cfg,
            seeded: seed.is_some(),
            gear,
            rabin,
        })
    }

    /// The unseeded spec of `cfg`; panics if `cfg` is invalid (see
    /// [`new_chunker`]).
    pub fn unseeded(cfg: &ChunkerConfig) -> Self {
        match Self::new(cfg, None) {
            Ok(spec) => spec,
            Err(e) => panic!("invalid chunker configuration: {e}"),
        }
    }

    pub fn config(&self) -> &ChunkerConfig {
        &self.cfg
    }

    /// Whether a seed was given (fixed-size chunking ignores it).
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// A fresh chunker of this spec.
    pub fn build(&self) -> Box<dyn Chunker> {
        match self.cfg {
            ChunkerConfig::Fixed { size } => Box::new(FixedChunker::new(size as usize)),
            ChunkerConfig::Rabin { min, avg, max } => Box::new(RabinChunker::with_tables(
                min as usize,
                avg as usize,
                max as usize,
                self.rabin.clone(),
            )),
            ChunkerConfig::FastCdc { min, avg, max } => Box::new(FastCdcChunker::with_table(
                min as usize,
                avg as usize,
                max as usize,
                self.gear.clone(),
            )),
            ChunkerConfig::Regression { min, avg, max } => {
                Box::new(RegressionChunker::with_tables(
                    min as usize,
                    avg as usize,
                    max as usize,
                    self.rabin.clone(),
                ))
            }
        }
    }
}

/// Panics unless `0 < min <= avg <= max` and `avg` is a power of two >= 2;
/// shared by the content-defined chunkers' constructors.
pub(crate) fn check_sizes(name: &str, min: usize, avg: usize, max: usize) {
    assert!(
        min > 0 && min <= avg && avg <= max,
        "{name}: need 0 < min <= avg <= max (got {min}/{avg}/{max})"
    );
    assert!(
        avg >= 2 && avg.is_power_of_two(),
        "{name}: average size {avg} must be a power of two >= 2"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_chunker_validates() {
        let bad = ChunkerConfig::FastCdc {
            min: 100,
            avg: 1000,
            max: 4000,
        };
        assert!(try_new_chunker(&bad).is_err());
        assert!(std::panic::catch_unwind(|| new_chunker(&bad)).is_err());
        let bad = ChunkerConfig::Rabin {
            min: 32,
            avg: 1024,
            max: 4096,
        };
        assert!(try_new_chunker(&bad).is_err());
        for name in ["fixed", "rabin", "fastcdc", "regression"] {
            let cfg = ChunkerConfig::from_name(name, 8192).unwrap();
            let c = new_chunker(&cfg);
            assert_eq!(c.max_size(), cfg.max_size() as usize);
        }
        let c = new_chunker(&ChunkerConfig::default());
        assert_eq!((c.min_size(), c.max_size()), (2048, 65536));
        assert!(ChunkerSpec::new(&bad, Some(&[0; 32])).is_err());
    }

    /// Seeded chunkers cut elsewhere than unseeded ones and than other seeds
    /// (except fixed-size chunking, which has no seed); the same seed cuts
    /// the same way every time.
    #[test]
    fn seeds_move_content_defined_boundaries() {
        let data = testutil::random_bytes(11, 1 << 20);
        let cuts = |name: &str, seed: Option<&[u8; 32]>| {
            let cfg = ChunkerConfig::from_name(name, 8192).unwrap();
            let mut out = Vec::new();
            cut_points(new_chunker_seeded(&cfg, seed).as_mut(), &data, &mut out);
            out
        };
        for name in ["rabin", "fastcdc", "regression"] {
            let plain = cuts(name, None);
            let a = cuts(name, Some(&[1; 32]));
            assert_eq!(a, cuts(name, Some(&[1; 32])), "{name}");
            let b = cuts(name, Some(&[2; 32]));
            assert_eq!(plain, {
                let cfg = ChunkerConfig::from_name(name, 8192).unwrap();
                let mut out = Vec::new();
                cut_points(new_chunker(&cfg).as_mut(), &data, &mut out);
                out
            });
            for other in [&plain, &b] {
                let shared = a.iter().filter(|e| other.binary_search(e).is_ok()).count();
                // Only the end of the data (and chance) is shared.
                assert!(
                    shared * 10 < a.len(),
                    "{name}: {shared} of {} shared",
                    a.len()
                );
            }
        }
        assert_eq!(cuts("fixed", None), cuts("fixed", Some(&[1; 32])));
        let spec = ChunkerSpec::new(&ChunkerConfig::default(), Some(&[1; 32])).unwrap();
        assert!(spec.is_seeded());
        assert_eq!(spec.config(), &ChunkerConfig::default());
        assert!(!ChunkerSpec::unseeded(&ChunkerConfig::default()).is_seeded());
    }
}
