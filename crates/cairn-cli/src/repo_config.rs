//! The settings a new repository is created with (`init`, a `backup` that
//! creates its repository, and the engine settings of `trace` and `sim`):
//! the options, and the `RepoConfig` they describe.

use anyhow::{anyhow, bail, Result};
use clap::Args;

use cairn_core::{
    ChunkerConfig, ChunkerKind, CompressionCodec, CompressionConfig, FingerprintAlgo,
};
use cairn_engine::config::{IndexConfig, IndexKind, LookupConfig, LookupStrategy, RewriteConfig};
use cairn_engine::{RepoConfig, Repository};
use cairn_sim::device::DeviceClass;

use crate::globals::Globals;
use crate::values::{choice, size_default};

#[derive(Args, Debug, Clone)]
pub struct InitArgs {
    /// Chunker.
    #[arg(long, default_value_t = ChunkerKind::default(), value_parser = choice::<ChunkerKind>(&ChunkerKind::NAMES))]
    pub chunker: ChunkerKind,
    /// Average chunk size (fixed: the block size), e.g. 8KiB.
    #[arg(long, default_value = size_default!(ChunkerConfig::default().avg_size()), value_parser = crate::values::size32)]
    pub avg_size: u32,
    /// Minimum chunk size (default avg/4).
    #[arg(long, value_parser = crate::values::size32)]
    pub min_size: Option<u32>,
    /// Maximum chunk size (default avg*8).
    #[arg(long, value_parser = crate::values::size32)]
    pub max_size: Option<u32>,
    /// Fingerprint.
    #[arg(long, default_value_t = FingerprintAlgo::default(), value_parser = choice::<FingerprintAlgo>(&FingerprintAlgo::NAMES))]
    pub fingerprint: FingerprintAlgo,
    /// Compression.
    #[arg(long, default_value_t = CompressionConfig::default().codec, value_parser = choice::<CompressionCodec>(&CompressionCodec::NAMES))]
    pub compression: CompressionCodec,
    /// zstd level.
    #[arg(long, default_value_t = CompressionConfig::default().level)]
    pub zstd_level: i32,
    /// Store a chunk raw unless compression saves at least this percentage.
    #[arg(long, default_value_t = CompressionConfig::default().min_savings_pct, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub min_savings: u8,
    /// Container size, e.g. 4MiB.
    #[arg(long, default_value = size_default!(RepoConfig::DEFAULT_CONTAINER_SIZE), value_parser = crate::values::size32)]
    pub container_size: u32,
    /// Locality cache capacity in containers.
    #[arg(long, default_value_t = IndexConfig::default().cache_containers, help_heading = "Advanced")]
    pub cache_containers: u32,
    /// Rewrite scheme for restore speed (docs/restore-speed.md): none, capping, fcrc,
    /// lbw or har, with parameters, e.g. `capping:segment=20MiB,cap=20`,
    /// `fcrc:loss=5,cap=20`, `lbw:window=8,loss=5,cap=20,candidates=16MiB`,
    /// `har:utilization=50`; HAR in front of another: `lbw:loss=5,har=50`.
    /// At init (or a backup that creates the repository): the repository's
    /// default; on a later backup: that backup's scheme.
    #[arg(long, value_name = "SCHEME", value_parser = RewriteConfig::parse, help_heading = "Advanced")]
    pub rewrite: Option<RewriteConfig>,
    /// Disable the Summary Vector (ablation).
    #[arg(long, help_heading = "Advanced")]
    pub no_summary_vector: bool,
    /// Disable the Locality Preserved Cache (ablation).
    #[arg(long, help_heading = "Advanced")]
    pub no_locality_cache: bool,
    /// Dedup index: paged (DDFS Summary Vector + paged on-disk index) or
    /// frugal (cuckoo table of 6 bytes per chunk over an on-disk chunk log).
    #[arg(long, default_value_t = IndexKind::default(), value_parser = choice::<IndexKind>(&IndexKind::NAMES), help_heading = "Advanced")]
    pub index: IndexKind,
    /// Fingerprint lookup: eager (DDFS), lazy (buffered, batched index page
    /// reads) or auto (chosen by the device model for --lookup-device; in
    /// `cairn sim`, for --device).
    #[arg(long, default_value_t = LookupStrategy::default(), value_parser = choice::<LookupStrategy>(&LookupStrategy::NAMES), help_heading = "Advanced")]
    pub lookup: LookupStrategy,
    /// Lazy lookup: fingerprints per buffer bucket before its index page is read.
    #[arg(long, default_value_t = LookupConfig::default().bucket_threshold, help_heading = "Advanced")]
    pub bucket_threshold: u32,
    /// Lazy lookup: fingerprints per locality ring.
    #[arg(long, default_value_t = LookupConfig::default().ring_size, help_heading = "Advanced")]
    pub ring_size: u32,
    /// Lazy lookup: most fingerprints (and their chunks) buffered per stream.
    #[arg(long, default_value_t = LookupConfig::default().buffer_fingerprints, help_heading = "Advanced")]
    pub lookup_buffer: u32,
    /// Bound the in-memory index part at N entries (paged index): a backup
    /// holding the repository alone (its first, above all) whose new
    /// chunks pass N merges the durable ones into the index and goes on, so
    /// its memory does not grow with the backup. At init (or a backup that
    /// creates the repository): the repository's default; on a later
    /// backup: that backup's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Advanced")]
    pub index_part_budget: Option<u64>,
    /// Device class the repository's index is on, for --lookup auto (init,
    /// backup).
    #[arg(long, value_parser = crate::values::one_of(&DeviceClass::INDEX_DEVICE_NAMES), help_heading = "Advanced")]
    pub lookup_device: Option<String>,
}

pub fn config_from(a: &InitArgs) -> Result<RepoConfig> {
    let mut cfg = Repository::default_config();
    let mut chunker = ChunkerConfig::with_kind(a.chunker, a.avg_size)?;
    if a.min_size.is_some() || a.max_size.is_some() {
        let (min, max) = (a.min_size, a.max_size);
        chunker = match chunker {
            ChunkerConfig::Fixed { .. } => {
                bail!("--min-size/--max-size do not apply to fixed chunking")
            }
            ChunkerConfig::Rabin {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::Rabin {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
            ChunkerConfig::FastCdc {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::FastCdc {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
            ChunkerConfig::Regression {
                min: m0,
                avg,
                max: x0,
            } => ChunkerConfig::Regression {
                min: min.unwrap_or(m0),
                avg,
                max: max.unwrap_or(x0),
            },
        };
    }
    cfg.chunker = chunker;
    cfg.fingerprint = a.fingerprint;
    cfg.compression = CompressionConfig {
        codec: a.compression,
        level: a.zstd_level,
        min_savings_pct: a.min_savings,
    };
    if a.min_savings > 99 {
        bail!("--min-savings must be a percentage below 100");
    }
    cfg.container_size = a.container_size;
    cfg.index.cache_containers = a.cache_containers;
    cfg.index.summary_vector = !a.no_summary_vector;
    cfg.index.locality_cache = !a.no_locality_cache;
    cfg.index.kind = a.index;
    let lookup = &mut cfg.index.lookup;
    lookup.strategy = a.lookup;
    lookup.bucket_threshold = a.bucket_threshold;
    lookup.ring_size = a.ring_size;
    lookup.buffer_fingerprints = a.lookup_buffer;
    lookup.device = a.lookup_device.clone();
    cfg.rewrite = a
        .rewrite
        .unwrap_or_else(|| lookup.strategy.default_rewrite());
    if a.index_part_budget.is_some() && a.index != IndexKind::Paged {
        bail!(
            "--index-part-budget bounds the paged index's in-memory part; \
             the frugal index has none"
        );
    }
    cfg.index.part_budget = a.index_part_budget;
    cfg.validate()?;
    Ok(cfg)
}

/// A real repository's Summary Vector starts small and grows with it
/// (`IndexConfig::NEW_REPOSITORY_EXPECTED_CHUNKS`); `sim` keeps its fixed size.
pub fn new_repository(mut cfg: RepoConfig) -> RepoConfig {
    cfg.index.expected_chunks = cairn_engine::config::IndexConfig::NEW_REPOSITORY_EXPECTED_CHUNKS;
    cfg
}

/// The settings `init` fixes that a backup may name too (the Advanced
/// index options), as a backup into an existing repository was given them
/// on its command line (`given`: argument ids): each one given must equal
/// the repository's, or the backup is refused before anything is written;
/// a flag that silently did nothing would be a defect. (The creation
/// options proper are refused outright on an existing repository,
/// `commands/backup.rs`.) Values are described in words, never as Rust
/// structures.
pub fn refuse_differing_init_flags(
    given: &[String],
    flags: &RepoConfig,
    stored: &RepoConfig,
) -> Result<()> {
    let on_off = |on: bool| if on { "on" } else { "off" }.to_string();
    let lookup = |c: &RepoConfig| {
        let l = &c.index.lookup;
        format!(
            "{} lookup (bucket threshold {}, ring size {}, buffer {}, device {})",
            l.strategy.name(),
            l.bucket_threshold,
            l.ring_size,
            l.buffer_fingerprints,
            l.device.as_deref().unwrap_or("none")
        )
    };
    let (g, r) = (flags, stored);
    let checks: [(&[&str], String, String); 4] = [
        (
            &["cache_containers"],
            format!("{} containers", g.index.cache_containers),
            format!("{} containers", r.index.cache_containers),
        ),
        (
            &["no_summary_vector"],
            format!("summary vector {}", on_off(g.index.summary_vector)),
            format!("summary vector {}", on_off(r.index.summary_vector)),
        ),
        (
            &["no_locality_cache"],
            format!("locality cache {}", on_off(g.index.locality_cache)),
            format!("locality cache {}", on_off(r.index.locality_cache)),
        ),
        (
            &[
                "lookup",
                "bucket_threshold",
                "ring_size",
                "lookup_buffer",
                "lookup_device",
            ],
            lookup(g),
            lookup(r),
        ),
    ];
    for (ids, want, have) in checks {
        let Some(id) = ids.iter().find(|id| given.iter().any(|g| g == *id)) else {
            continue;
        };
        if want != have {
            bail!(
                "--{} gives {want}, but this repository was created with {have}; \
                 these settings are fixed at init: drop the flag, or back up into a new repository",
                id.replace('_', "-")
            );
        }
    }
    Ok(())
}

/// The configuration a new repository is created with: `--lookup auto` is
/// replaced by the strategy and ring size the device model picks for
/// `--lookup-device`, calibrated on a small synthetic backup workload
/// (there is no data yet).
///
/// A configuration no backup could use (a rewrite scheme with lazy lookup)
/// is refused here, before the repository directory exists.
pub fn resolve_auto(cli: &Globals, cfg: RepoConfig, a: &InitArgs) -> Result<RepoConfig> {
    let cfg = choose_lookup(cli, cfg, a)?;
    cfg.index.lookup.strategy.check_rewrite(&cfg.rewrite)?;
    Ok(cfg)
}

fn choose_lookup(cli: &Globals, mut cfg: RepoConfig, a: &InitArgs) -> Result<RepoConfig> {
    if cfg.index.lookup.strategy != LookupStrategy::Auto {
        return Ok(cfg);
    }
    let name = a.lookup_device.as_deref().ok_or_else(|| {
        anyhow!(
            "--lookup auto needs --lookup-device ({}): the device the index is on",
            DeviceClass::INDEX_DEVICE_NAMES.join(", ")
        )
    })?;
    let device = DeviceClass::by_name(name).ok_or_else(|| {
        anyhow!(
            "unknown device class {name:?} ({})",
            DeviceClass::INDEX_DEVICE_NAMES.join(", ")
        )
    })?;
    let choice = cairn_sim::sim::auto::choose_for_new_repository(&cfg, &device)?;
    if !cli.quiet && !cli.json {
        eprintln!("lookup auto: {}", choice.reason);
    }
    cfg.index.lookup.strategy = choice.strategy;
    cfg.index.lookup.ring_size = choice.ring_size;
    cfg.index.lookup.device = Some(device.name.clone());
    cfg.validate()?;
    Ok(cfg)
}

/// Refuses flags of the shared `init` set that `command` does not use.
pub fn refuse_unused(cli: &Globals, command: &str, unused: &[&str], why: &str) -> Result<()> {
    match unused
        .iter()
        .find(|id| cli.given_init_flags.iter().any(|g| g == *id))
    {
        Some(id) => Err(anyhow!(
            "--{} does not apply to cairn {command}: {why}",
            id.replace('_', "-")
        )),
        None => Ok(()),
    }
}
