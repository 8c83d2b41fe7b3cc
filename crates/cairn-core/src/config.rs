//! Algorithm choices persisted in a repository's config, each a typed enum.
//!
//! They are matched once when a pipeline is built (DESIGN: "algorithms are
//! config enums ... matched once, then a generic or dyn call"); hot loops never
//! dispatch on them per byte.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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
        match self {
            ChunkerConfig::Fixed { .. } => "fixed",
            ChunkerConfig::Rabin { .. } => "rabin",
            ChunkerConfig::FastCdc { .. } => "fastcdc",
            ChunkerConfig::Regression { .. } => "regression",
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
        let (min, max) = (avg / 4, avg.saturating_mul(8));
        let c = match name {
            "fixed" => ChunkerConfig::Fixed { size: avg },
            "rabin" => ChunkerConfig::Rabin { min, avg, max },
            "fastcdc" => ChunkerConfig::FastCdc { min, avg, max },
            "regression" => ChunkerConfig::Regression { min, avg, max },
            other => {
                return Err(Error::invalid(format!(
                    "unknown chunker {other:?} (expected fixed, rabin, fastcdc or regression)"
                )))
            }
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
