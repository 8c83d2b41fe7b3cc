//! The repository configuration: every algorithm choice and size, persisted in
//! the `config` object (an envelope with magic `CAIRNCFG` and a JSON payload)
//! when the repository is created, and read back by every later process.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use cairn_core::{ChunkerConfig, CompressionConfig, Error, Fingerprint, FingerprintAlgo, Result};
use serde::{Deserialize, Serialize};

use crate::repo_keys::RepoKeys;

pub use crate::backup::rewrite::config::RewriteConfig;

pub const CONFIG_MAGIC: &[u8; 8] = b"CAIRNCFG";
pub const CONFIG_VERSION: u32 = 1;

/// Computes stored fingerprints: the algorithm's digest, cut to the
/// repository's width; in an encrypted repository keyed BLAKE3 under its
/// fingerprint key, full width (`docs/security.md`), so a stored
/// fingerprint does not confirm a guessed chunk.
#[derive(Clone, Debug)]
pub struct Fingerprinter {
    pub algo: FingerprintAlgo,
    pub width: usize,
    /// An encrypted repository's keys (`RepoKeys`' `Debug` prints no key).
    keys: Option<Arc<RepoKeys>>,
}

impl Fingerprinter {
    /// Whether fingerprints are keyed.
    pub fn is_keyed(&self) -> bool {
        self.keys.is_some()
    }

    pub fn of(&self, data: &[u8]) -> Fingerprint {
        if let Some(k) = &self.keys {
            // `RepoConfig::validate` holds an encrypted repository to BLAKE3
            // at full width: `algo` and `width` agree with this.
            return Fingerprint::from_slice(
                blake3::keyed_hash(k.fingerprint_key(), data).as_bytes(),
            );
        }
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
    /// The rewrite scheme of backups (`002_c5d78fa3332f6f9f.txt` §3-§5);
    /// one backup may override it. Absent in configs written before it
    /// existed: none.
    #[serde(default, skip_serializing_if = "RewriteConfig::is_none")]
    pub rewrite: RewriteConfig,
    /// Encryption of every object (`docs/security.md`); absent: none. An
    /// encrypted repository stores this config sealed (`crypto.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionConfig>,
}

/// How an encrypted repository seals its objects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncryptionConfig {
    /// `aes-256-gcm` or `chacha20poly1305` (`cairn_crypto::Algorithm`).
    pub algorithm: String,
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
    /// Eager or lazy fingerprint lookup and the lazy parameters.
    #[serde(default)]
    pub lookup: LookupConfig,
    /// Which structure answers the dedup path's index lookups.
    #[serde(default)]
    pub kind: IndexKind,
    /// Entries the in-memory index part may hold before a backup running
    /// alone merges the part's durable entries into a new index generation
    /// (`dedup::part_budget`); `None`: the part holds every chunk a backup
    /// stores until its commit. Bounds a large first backup's RAM at the
    /// cost of index page reads for its own chunks (DDFS §4.4's lookups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_budget: Option<u64>,
}

/// The structure the dedup path looks fingerprints up in after the locality
/// cache. Either way the paged index is also written at commit: restore and
/// check find chunks through it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// DDFS: the Summary Vector, then one page of the on-disk paged index.
    #[default]
    Paged,
    /// `004`'s RAM-frugal index: a cuckoo table of 6-byte slots (2-byte
    /// signature, 4-byte pointer) over a log-structured chunk log on disk,
    /// with a prefetch cache. No Summary Vector: the table filters new chunks.
    Frugal,
}

impl IndexKind {
    /// The names [`Self::parse`] accepts (any case; `ddfs` too, as an alias).
    pub const NAMES: [&'static str; 2] = ["paged", "frugal"];

    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Paged => "paged",
            IndexKind::Frugal => "frugal",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "paged" | "ddfs" => Ok(IndexKind::Paged),
            "frugal" => Ok(IndexKind::Frugal),
            _ => Err(Error::invalid(format!(
                "index kind {s:?}: must be paged or frugal"
            ))),
        }
    }
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// When a fingerprint that may be a duplicate is resolved
/// (`000_d04706aa48332137.txt` §2.2-2.3). Never changes whether it is one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupStrategy {
    /// DDFS §4.4: every cache miss that passes the Summary Vector reads its
    /// index page at once.
    #[default]
    Eager,
    /// `000` Algorithm 2: misses wait in buffer buckets, one per index page,
    /// and are resolved a bucket per page read, plus post-lookup over the
    /// locality ring.
    Lazy,
    /// Chosen from the device model (`000` eq. (8)) for `device` before the
    /// engine runs: `cairn init --lookup auto --device D` and `cairn sim
    /// --lookup auto` replace it by `eager` or `lazy` and a ring size.
    Auto,
}

impl LookupStrategy {
    /// The names [`Self::parse`] accepts (any case).
    pub const NAMES: [&'static str; 3] = ["eager", "lazy", "auto"];

    pub fn name(self) -> &'static str {
        match self {
            LookupStrategy::Eager => "eager",
            LookupStrategy::Lazy => "lazy",
            LookupStrategy::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "eager" => Ok(LookupStrategy::Eager),
            "lazy" => Ok(LookupStrategy::Lazy),
            "auto" => Ok(LookupStrategy::Auto),
            _ => Err(Error::invalid(format!(
                "lookup strategy {s:?}: must be eager, lazy or auto"
            ))),
        }
    }

    /// The one rule tying rewriting to lookup: a rewrite scheme decides over
    /// chunks in stream order, and lazy lookup decides some of them late and
    /// out of order, so a scheme other than `none` needs eager lookup. Backup,
    /// `init` and `sim` all ask here.
    pub fn check_rewrite(self, scheme: &RewriteConfig) -> Result<()> {
        if !scheme.is_none() && self == LookupStrategy::Lazy {
            return Err(Error::invalid(format!(
                "rewrite scheme {} needs eager lookup, but this repository uses lazy lookup; \
                 drop the rewrite scheme or use eager lookup",
                scheme.name()
            )));
        }
        Ok(())
    }

    /// The rewrite scheme a repository gets when none is asked for: the
    /// default under eager lookup, none under lazy lookup (which cannot
    /// rewrite) or `auto` (which may choose lazy).
    pub fn default_rewrite(self) -> RewriteConfig {
        match self {
            LookupStrategy::Eager => RewriteConfig::default_for_new_repositories(),
            LookupStrategy::Lazy | LookupStrategy::Auto => RewriteConfig::None,
        }
    }
}

/// The lookup strategy and lazy lookup's parameters (`000` §2.3, §5.2-5.3).
/// The cache size of both strategies is [`IndexConfig::cache_containers`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LookupConfig {
    pub strategy: LookupStrategy,
    /// Fingerprints a buffer bucket collects before its index page is read.
    pub bucket_threshold: u32,
    /// Fingerprints per locality ring (`000` §5.2 default: 2048).
    pub ring_size: u32,
    /// Buffered fingerprints per stream at most; beyond it the bucket of the
    /// oldest one is read early. With real data each buffered chunk's
    /// content waits in memory, so this bounds memory as well (and a stream
    /// holding more than 64 MiB of content reads all its buckets early).
    pub buffer_fingerprints: u32,
    /// Device class the choice of `auto` was made for (a name of the device
    /// model's table, e.g. `HDD`); recorded, not used by the engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl fmt::Display for LookupStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LookupStrategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

impl Default for LookupConfig {
    fn default() -> Self {
        LookupConfig {
            strategy: LookupStrategy::Eager,
            bucket_threshold: 16,
            ring_size: 2048,
            buffer_fingerprints: 8192,
            device: None,
        }
    }
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

impl IndexConfig {
    /// The Summary Vector size a repository created by `init` or a first
    /// `backup` starts at (80 KiB at 10 bits a chunk). The filter grows with
    /// the repository (at a merge commit or at open when it is overfull), so
    /// a small repository keeps a small checkpoint. Simulations keep
    /// [`IndexConfig::default`]'s fixed size: the DDFS Table 4 reproductions
    /// depend on it.
    pub const NEW_REPOSITORY_EXPECTED_CHUNKS: u64 = 1 << 16;
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
            lookup: LookupConfig::default(),
            kind: IndexKind::Paged,
            part_budget: None,
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
    /// Container size of a new repository unless told otherwise.
    pub const DEFAULT_CONTAINER_SIZE: u32 = 4 * 1024 * 1024;

    pub fn new(id: String) -> Self {
        RepoConfig {
            id,
            chunker: ChunkerConfig::default(),
            fingerprint: FingerprintAlgo::default(),
            fingerprint_width: None,
            compression: CompressionConfig::default(),
            container_size: Self::DEFAULT_CONTAINER_SIZE,
            index: IndexConfig::default(),
            tree: TreeConfig::default(),
            rewrite: RewriteConfig::default_for_new_repositories(),
            encryption: None,
        }
    }

    /// Stored fingerprint width in bytes.
    pub fn fp_width(&self) -> usize {
        self.fingerprint_width
            .map_or(self.fingerprint.width(), |w| w as usize)
    }

    /// The fingerprinter of a repository with this config: keyed BLAKE3
    /// under `keys`' fingerprint key when given (an unlocked encrypted
    /// repository, whose config [`Self::validate`] holds to BLAKE3 at full
    /// width), the configured algorithm and width without.
    pub fn fingerprinter(&self, keys: Option<&Arc<RepoKeys>>) -> Fingerprinter {
        Fingerprinter {
            algo: self.fingerprint,
            width: self.fp_width(),
            keys: keys.cloned(),
        }
    }

    /// An encrypted repository fingerprints with keyed BLAKE3 at full width.
    fn check_encrypted_fingerprint(&self) -> Result<()> {
        if self.fingerprint != FingerprintAlgo::Blake3 {
            return Err(Error::invalid(format!(
                "an encrypted repository needs fingerprint blake3 (keyed BLAKE3 under the \
                 repository's fingerprint key), not {}",
                self.fingerprint.name()
            )));
        }
        if self.fp_width() != FingerprintAlgo::Blake3.width() {
            return Err(Error::invalid(format!(
                "an encrypted repository needs full-width fingerprints ({} bytes), not {}",
                FingerprintAlgo::Blake3.width(),
                self.fp_width()
            )));
        }
        Ok(())
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
        let l = &ix.lookup;
        if l.bucket_threshold == 0 || l.ring_size == 0 || l.buffer_fingerprints == 0 {
            return Err(Error::invalid(
                "lazy lookup's bucket threshold, ring size and buffer must be at least 1",
            ));
        }
        if ix.kind == IndexKind::Frugal && l.strategy == LookupStrategy::Lazy {
            return Err(Error::invalid(
                "lazy lookup batches reads of the paged index's pages; the frugal index has \
                 none (use eager lookup with it)",
            ));
        }
        self.rewrite.validate()?;
        if let Some(e) = &self.encryption {
            e.algorithm
                .parse::<cairn_crypto::Algorithm>()
                .map_err(|err| Error::invalid(format!("encryption: {err}")))?;
            self.check_encrypted_fingerprint()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_lookup_names_parse_and_display_as_themselves() {
        for name in IndexKind::NAMES {
            assert_eq!(name.parse::<IndexKind>().unwrap().to_string(), name);
        }
        for name in LookupStrategy::NAMES {
            assert_eq!(name.parse::<LookupStrategy>().unwrap().to_string(), name);
        }
    }

    /// Rewriting needs eager lookup: lazy lookup refuses every scheme but
    /// `none`, in one line naming the scheme; a lookup that may turn out lazy
    /// gets no scheme by default.
    #[test]
    fn rewriting_needs_eager_lookup() {
        let lbw = RewriteConfig::default_for_new_repositories();
        assert!(LookupStrategy::Eager.check_rewrite(&lbw).is_ok());
        assert!(LookupStrategy::Lazy
            .check_rewrite(&RewriteConfig::None)
            .is_ok());
        let err = LookupStrategy::Lazy
            .check_rewrite(&lbw)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rewrite scheme lbw needs eager lookup"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        assert_eq!(LookupStrategy::Eager.default_rewrite(), lbw);
        assert!(LookupStrategy::Lazy.default_rewrite().is_none());
        assert!(LookupStrategy::Auto.default_rewrite().is_none());
    }

    /// A config written before `index.lookup` and `index.kind` existed still
    /// decodes, as eager lookup over the paged index.
    #[test]
    fn configs_without_lookup_or_kind_decode_as_eager_paged() {
        let mut v = serde_json::to_value(RepoConfig::new("00ff".into())).unwrap();
        let index = v["index"].as_object_mut().unwrap();
        index.remove("lookup");
        index.remove("kind");
        let json = serde_json::to_vec(&v).unwrap();
        let bytes = cairn_format::envelope::seal(CONFIG_MAGIC, CONFIG_VERSION, &json);
        let cfg = RepoConfig::decode(&bytes).unwrap();
        assert_eq!(cfg.index.lookup, LookupConfig::default());
        assert_eq!(cfg.index.kind, IndexKind::Paged);
        assert_eq!(cfg, RepoConfig::new("00ff".into()));
    }

    /// An encrypted repository keys its fingerprints with BLAKE3: another
    /// algorithm or a narrowed width is refused with a message saying so.
    #[test]
    fn encryption_requires_full_width_blake3() {
        let mut cfg = RepoConfig::new("00ff".into());
        cfg.encryption = Some(EncryptionConfig {
            algorithm: "aes-256-gcm".into(),
        });
        cfg.validate().unwrap();
        cfg.fingerprint_width = Some(32);
        cfg.validate().unwrap();
        cfg.fingerprint_width = Some(8);
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("full-width fingerprints"), "{e}");
        cfg.fingerprint_width = None;
        for algo in [FingerprintAlgo::Sha256, FingerprintAlgo::Sha1] {
            cfg.fingerprint = algo;
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains("needs fingerprint blake3"), "{e}");
        }
        // Without encryption both stay allowed.
        cfg.encryption = None;
        cfg.fingerprint_width = Some(8);
        cfg.validate().unwrap();
        // Every chunker is allowed with encryption (seeded, or fixed-size).
        cfg.fingerprint = FingerprintAlgo::Blake3;
        cfg.fingerprint_width = None;
        cfg.encryption = Some(EncryptionConfig {
            algorithm: "chacha20poly1305".into(),
        });
        for name in ["fixed", "rabin", "fastcdc", "regression"] {
            cfg.chunker = ChunkerConfig::from_name(name, 8192).unwrap();
            cfg.validate().unwrap();
        }
    }

    #[test]
    fn lookup_settings_round_trip_and_are_validated() {
        let mut cfg = RepoConfig::new("00ff".into());
        cfg.index.kind = IndexKind::Frugal;
        cfg.index.lookup.device = Some("HDD".into());
        assert_eq!(RepoConfig::decode(&cfg.encode()).unwrap(), cfg);
        cfg.index.lookup.strategy = LookupStrategy::Lazy;
        assert!(cfg.validate().is_err(), "lazy lookup needs the paged index");
        cfg.index.kind = IndexKind::Paged;
        cfg.validate().unwrap();
        cfg.index.lookup.ring_size = 0;
        assert!(cfg.validate().is_err());
        for (s, want) in [
            ("EAGER", LookupStrategy::Eager),
            ("lazy", LookupStrategy::Lazy),
            ("auto", LookupStrategy::Auto),
        ] {
            assert_eq!(LookupStrategy::parse(s).unwrap(), want);
            assert_eq!(LookupStrategy::parse(want.name()).unwrap(), want);
        }
        assert!(LookupStrategy::parse("sometimes").is_err());
        assert_eq!(IndexKind::parse("ddfs").unwrap(), IndexKind::Paged);
        assert!(IndexKind::parse("btree").is_err());
    }
}
