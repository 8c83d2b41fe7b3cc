//! Algorithm choices persisted in a repository's config, each a typed enum.
//!
//! They are matched once when a pipeline is built (DESIGN: "algorithms are
//! config enums ... matched once, then a generic or dyn call"); hot loops never
//! dispatch on them per byte.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which content chunking algorithm, without its sizes: what `--chunker`
/// names. [`ChunkerConfig::with_kind`] gives it sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChunkerKind {
    #[default]
    FastCdc,
    Rabin,
    Regression,
    Fixed,
}

impl ChunkerKind {
    pub const ALL: [ChunkerKind; 4] = [
        ChunkerKind::FastCdc,
        ChunkerKind::Rabin,
        ChunkerKind::Regression,
        ChunkerKind::Fixed,
    ];
    /// The names [`FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 4] = ["fastcdc", "rabin", "regression", "fixed"];

    pub fn name(self) -> &'static str {
        match self {
            ChunkerKind::FastCdc => "fastcdc",
            ChunkerKind::Rabin => "rabin",
            ChunkerKind::Regression => "regression",
            ChunkerKind::Fixed => "fixed",
        }
    }
}

impl fmt::Display for ChunkerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ChunkerKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ChunkerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown chunker {s:?} (expected fixed, rabin, fastcdc or regression)"
                ))
            })
    }
}

/// Content chunking algorithm and its size parameters (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "algorithm", rename_all = "lowercase")]
pub enum ChunkerConfig {
    /// Fixed-size blocks.
    Fixed { size: u32 },
    /// Rabin rolling hash over a 48-byte window, anchors where the hash
    /// matches a mask (LBFS / DDFS style).
    Rabin { min: u32, avg: u32, max: u32 },
    /// Gear-hash FastCDC with normalized chunking.
    FastCdc { min: u32, avg: u32, max: u32 },
    /// Regression chunking (`004_62bf1a5ddd5ed253.txt`): at max size, fall back
    /// to the last position that matched the longest suffix of the mask.
    Regression { min: u32, avg: u32, max: u32 },
}

impl Default for ChunkerConfig {
    /// FastCDC, 8 KiB average: DDFS's expected segment size.
    fn default() -> Self {
        ChunkerConfig::FastCdc {
            min: 2 * 1024,
            avg: 8 * 1024,
            max: 64 * 1024,
        }
    }
}

impl ChunkerConfig {
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    pub fn kind(&self) -> ChunkerKind {
        match self {
            ChunkerConfig::Fixed { .. } => ChunkerKind::Fixed,
            ChunkerConfig::Rabin { .. } => ChunkerKind::Rabin,
            ChunkerConfig::FastCdc { .. } => ChunkerKind::FastCdc,
            ChunkerConfig::Regression { .. } => ChunkerKind::Regression,
        }
    }

    /// Largest chunk the configuration can emit.
    pub fn max_size(&self) -> u32 {
        match *self {
            ChunkerConfig::Fixed { size } => size,
            ChunkerConfig::Rabin { max, .. }
            | ChunkerConfig::FastCdc { max, .. }
            | ChunkerConfig::Regression { max, .. } => max,
        }
    }

    /// Expected average chunk size.
    pub fn avg_size(&self) -> u32 {
        match *self {
            ChunkerConfig::Fixed { size } => size,
            ChunkerConfig::Rabin { avg, .. }
            | ChunkerConfig::FastCdc { avg, .. }
            | ChunkerConfig::Regression { avg, .. } => avg,
        }
    }

    /// Builds a variable-size config by name with the given average; min is
    /// avg/4 and max is avg*8 (FastCDC's customary ratios).
    pub fn from_name(name: &str, avg: u32) -> Result<Self> {
        Self::with_kind(name.parse()?, avg)
    }

    /// [`Self::from_name`] for a chunker already named.
    pub fn with_kind(kind: ChunkerKind, avg: u32) -> Result<Self> {
        let (min, max) = (avg / 4, avg.saturating_mul(8));
        let c = match kind {
            ChunkerKind::Fixed => ChunkerConfig::Fixed { size: avg },
            ChunkerKind::Rabin => ChunkerConfig::Rabin { min, avg, max },
            ChunkerKind::FastCdc => ChunkerConfig::FastCdc { min, avg, max },
            ChunkerKind::Regression => ChunkerConfig::Regression { min, avg, max },
        };
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<()> {
        const LIMIT: u32 = 16 * 1024 * 1024;
        match *self {
            ChunkerConfig::Fixed { size } => {
                if size == 0 || size > LIMIT {
                    return Err(Error::invalid(format!(
                        "fixed chunk size {size} must be between 1 and {LIMIT}"
                    )));
                }
            }
            ChunkerConfig::Rabin { min, avg, max }
            | ChunkerConfig::FastCdc { min, avg, max }
            | ChunkerConfig::Regression { min, avg, max } => {
                if !(64..=LIMIT).contains(&avg) || !avg.is_power_of_two() {
                    return Err(Error::invalid(format!(
                        "average chunk size {avg} must be a power of two between 64 and {LIMIT}"
                    )));
                }
                if min == 0 || min > avg || avg > max || max > LIMIT {
                    return Err(Error::invalid(format!(
                        "chunk sizes must satisfy 0 < min <= avg <= max <= {LIMIT} (got {min}/{avg}/{max})"
                    )));
                }
                if matches!(self, ChunkerConfig::Rabin { .. }) && min < 64 {
                    return Err(Error::invalid("rabin min size must be at least 64 bytes"));
                }
            }
        }
        Ok(())
    }
}

/// Fingerprint function. Width is a property of the algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FingerprintAlgo {
    #[default]
    Blake3,
    Sha256,
    /// DDFS fidelity.
    Sha1,
}

impl FingerprintAlgo {
    /// The names [`Self::from_name`] accepts.
    pub const NAMES: [&'static str; 3] = ["blake3", "sha256", "sha1"];

    pub fn width(&self) -> usize {
        match self {
            FingerprintAlgo::Blake3 | FingerprintAlgo::Sha256 => 32,
            FingerprintAlgo::Sha1 => 20,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            FingerprintAlgo::Blake3 => "blake3",
            FingerprintAlgo::Sha256 => "sha256",
            FingerprintAlgo::Sha1 => "sha1",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "blake3" => Ok(FingerprintAlgo::Blake3),
            "sha256" => Ok(FingerprintAlgo::Sha256),
            "sha1" => Ok(FingerprintAlgo::Sha1),
            other => Err(Error::invalid(format!(
                "unknown fingerprint {other:?} (expected blake3, sha256 or sha1)"
            ))),
        }
    }
}

/// Per-chunk codec id as stored in container descriptors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum CompressionCodec {
    None = 0,
    #[default]
    Zstd = 1,
    Lz4 = 2,
}

impl CompressionCodec {
    /// The names [`Self::from_name`] accepts.
    pub const NAMES: [&'static str; 3] = ["zstd", "lz4", "none"];

    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(CompressionCodec::None),
            1 => Some(CompressionCodec::Zstd),
            2 => Some(CompressionCodec::Lz4),
            _ => None,
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "none" => Ok(CompressionCodec::None),
            "zstd" => Ok(CompressionCodec::Zstd),
            "lz4" => Ok(CompressionCodec::Lz4),
            other => Err(Error::invalid(format!(
                "unknown compression {other:?} (expected zstd, lz4 or none)"
            ))),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            CompressionCodec::None => "none",
            CompressionCodec::Zstd => "zstd",
            CompressionCodec::Lz4 => "lz4",
        }
    }
}

impl fmt::Display for FingerprintAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FingerprintAlgo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::from_name(s)
    }
}

impl fmt::Display for CompressionCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompressionCodec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::from_name(s)
    }
}

/// Local compression with selective storage (`004_62bf1a5ddd5ed253.txt`):
/// a chunk whose compressed form does not save at least `min_savings_pct`
/// percent of its size is stored raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompressionConfig {
    pub codec: CompressionCodec,
    /// zstd level (ignored by other codecs).
    pub level: i32,
    pub min_savings_pct: u8,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            codec: CompressionCodec::Zstd,
            level: 3,
            min_savings_pct: 10,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_displays_as_itself() {
        for (name, kind) in ChunkerKind::NAMES.into_iter().zip(ChunkerKind::ALL) {
            assert_eq!(name.parse::<ChunkerKind>().unwrap(), kind);
            assert_eq!(kind.to_string(), name);
            assert_eq!(ChunkerConfig::with_kind(kind, 8192).unwrap().kind(), kind);
        }
        assert_eq!(ChunkerConfig::default().kind(), ChunkerKind::default());
        for name in FingerprintAlgo::NAMES {
            assert_eq!(name.parse::<FingerprintAlgo>().unwrap().to_string(), name);
        }
        for name in CompressionCodec::NAMES {
            assert_eq!(name.parse::<CompressionCodec>().unwrap().to_string(), name);
        }
        assert!("fastcdc2".parse::<ChunkerKind>().is_err());
    }
}
