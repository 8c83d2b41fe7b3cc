//! The repository configuration: every algorithm choice and size, persisted in
//! the `config` object (an envelope with magic `CAIRNCFG` and a JSON payload)
//! when the repository is created, and read back by every later process.

use cairn_core::{ChunkerConfig, CompressionConfig, Error, Fingerprint, FingerprintAlgo, Result};
use serde::{Deserialize, Serialize};

pub const CONFIG_MAGIC: &[u8; 8] = b"CAIRNCFG";
pub const CONFIG_VERSION: u32 = 1;

/// Computes stored fingerprints: the algorithm's digest, cut to the
/// repository's width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprinter {
    pub algo: FingerprintAlgo,
    pub width: usize,
}

impl Fingerprinter {
    pub fn of(&self, data: &[u8]) -> Fingerprint {
        let f = cairn_chunk::fingerprint(self.algo, data);
        if self.width < f.len() {
            Fingerprint::from_slice(&f.as_bytes()[..self.width])
        } else {
            f
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    /// Random id of this repository (hex), fixed at `init`.
    pub id: String,
    pub chunker: ChunkerConfig,
    pub fingerprint: FingerprintAlgo,
    /// Stored fingerprint width in bytes when narrower than the algorithm's:
    /// a prefix, as in traces with narrow hashes (FSL's 48-bit). `None`: full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_width: Option<u8>,
    pub compression: CompressionConfig,
    /// Target size of a sealed container in bytes (DDFS: 4 MiB).
    pub container_size: u32,
    pub index: IndexConfig,
    pub tree: TreeConfig,
}

/// Sizes of the fingerprint-lookup structures (DDFS §4.1, §4.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexConfig {
    /// Bytes per on-disk index page: one page read per index lookup.
    pub page_size: u32,
    /// Summary Vector bits per expected chunk (10 bits and 7 hashes ~ 1% false positives).
    pub bloom_bits_per_chunk: u32,
    /// Chunk count the Summary Vector is sized for at first; it is resized when exceeded.
    pub expected_chunks: u64,
    /// Locality Preserved Cache capacity, in container metadata sections.
    pub cache_containers: u32,
    /// Use the Summary Vector (off only for DDFS Table 4 ablations).
    pub summary_vector: bool,
    /// Use the Locality Preserved Cache (off only for DDFS Table 4 ablations).
    pub locality_cache: bool,
}

/// Shape of the Merkle-tree recipes (`003_ea5fccc485a97c5d.txt` §2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeConfig {
    /// Average children per tree node (power of two); node boundaries are
    /// content-defined on the child fingerprints so an insertion only
    /// rewrites the nodes on its path.
    pub fanout_avg: u32,
    pub fanout_min: u32,
    pub fanout_max: u32,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            page_size: 4096,
            bloom_bits_per_chunk: 10,
            expected_chunks: 1 << 22,
            cache_containers: 256,
            summary_vector: true,
            locality_cache: true,
        }
    }
}

impl Default for TreeConfig {
    fn default() -> Self {
        TreeConfig {
            fanout_avg: 128,
            fanout_min: 16,
            fanout_max: 1024,
        }
    }
}

impl RepoConfig {
    pub fn new(id: String) -> Self {
        RepoConfig {
            id,
            chunker: ChunkerConfig::default(),
            fingerprint: FingerprintAlgo::default(),
            fingerprint_width: None,
            compression: CompressionConfig::default(),
            container_size: 4 * 1024 * 1024,
            index: IndexConfig::default(),
            tree: TreeConfig::default(),
        }
    }

    /// Stored fingerprint width in bytes.
    pub fn fp_width(&self) -> usize {
        self.fingerprint_width
            .map_or(self.fingerprint.width(), |w| w as usize)
    }

    pub fn fingerprinter(&self) -> Fingerprinter {
        Fingerprinter {
            algo: self.fingerprint,
            width: self.fp_width(),
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.chunker.validate()?;
        if let Some(w) = self.fingerprint_width {
            if w == 0 || w as usize > self.fingerprint.width() {
                return Err(Error::invalid(format!(
                    "fingerprint width {w} must be 1..={} for {}",
                    self.fingerprint.width(),
                    self.fingerprint.name()
                )));
            }
        }
        if !(64 * 1024..=256 * 1024 * 1024).contains(&self.container_size) {
            return Err(Error::invalid(format!(
                "container size {} must be between 64 KiB and 256 MiB",
                self.container_size
            )));
        }
        if self.chunker.max_size() > self.container_size {
            return Err(Error::invalid(
                "the chunker's max size must not exceed the container size",
            ));
        }
        let ix = &self.index;
        if !(512..=1 << 20).contains(&ix.page_size) || !ix.page_size.is_power_of_two() {
            return Err(Error::invalid(
                "index page size must be a power of two between 512 B and 1 MiB",
            ));
        }
        if ix.bloom_bits_per_chunk == 0 || ix.bloom_bits_per_chunk > 64 {
            return Err(Error::invalid("bloom bits per chunk must be 1..=64"));
        }
        if ix.cache_containers == 0 {
            return Err(Error::invalid(
                "the locality cache needs at least one container",
            ));
        }
        let t = &self.tree;
        if !t.fanout_avg.is_power_of_two()
            || t.fanout_min < 2
            || t.fanout_min > t.fanout_avg
            || t.fanout_avg > t.fanout_max
        {
            return Err(Error::invalid(
                "tree fan-out must satisfy 2 <= min <= avg <= max, avg a power of two",
            ));
        }
        if !(1..=22).contains(&self.compression.level)
            && self.compression.codec == cairn_core::CompressionCodec::Zstd
        {
            return Err(Error::invalid("zstd level must be 1..=22"));
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec_pretty(self).expect("config serializes");
        cairn_format::envelope::seal(CONFIG_MAGIC, CONFIG_VERSION, &json)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (_, payload) =
            cairn_format::envelope::open(CONFIG_MAGIC, CONFIG_VERSION, "config", bytes)?;
        let cfg: RepoConfig = serde_json::from_slice(payload)
            .map_err(|e| Error::corrupt("config", format!("invalid JSON: {e}")))?;
        cfg.validate()
            .map_err(|e| Error::corrupt("config", e.to_string()))?;
        Ok(cfg)
    }
}
