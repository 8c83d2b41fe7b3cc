//! `cairn analyze`: a dataset study of a directory tree, after the large-scale
//! study of primary data in `004_62bf1a5ddd5ed253.txt` (El-Shimi et al.,
//! "Primary Data Deduplication – Large Scale Study and System Design").
//!
//! The files under the given paths are read once; every chunker of the study
//! runs over the same buffer (in parallel, one rayon task per chunker), and
//! each chunk is fingerprinted and counted in a per-chunker [`FpMap`] /
//! [`FpSet`]. The report has four sections, each one of `004`'s findings:
//!
//! 1. **Savings vs average chunk size** (`004` slide "Average Chunk Size"):
//!    FastCDC at each average of [`AnalyzeOptions::avg_sizes`] (min = avg/4,
//!    max = avg*8, cairn's usual ratios); chunks, distinct chunks, logical and
//!    unique bytes, savings = 1 - unique/logical, and, because `004` found that
//!    "compression compensates for savings decrease with higher chunk size",
//!    the unique bytes after cairn's selective compression.
//! 2. **Basic vs regression chunking** (`004` slides "Basic version of
//!    fingerprint based chunking", "Regression Chunking Algorithm",
//!    "Regression Chunking Performance"): Rabin chunking and regression
//!    chunking with the same sizes (default 32/64/128 KiB, which gives `004`'s
//!    "~80KB" mean chunk): chunk-size histograms, mean sizes, the share of
//!    forced cuts at max size and of regressed cuts, and the savings of both.
//! 3. **Duplicate bytes by reference count** (`004` slide "Chunk Reference
//!    Count"): for FastCDC at [`AnalyzeOptions::detail_avg`] (default 8 KiB,
//!    cairn's default chunker), distinct chunks grouped by how often they are
//!    referenced (1, 2, 3-4, 5-8, ...) and each group's share of the duplicate
//!    bytes (the bytes dedup removes).
//! 4. **Global vs partitioned dedup** (`004` slide "Efficient partitioning
//!    strategies"): savings when each partition is deduplicated on its own,
//!    partitioned by file type (extension) or by file path (directory
//!    subtrees of at most [`AnalyzeOptions::path_partition_share`] of the total
//!    bytes, `004`'s "each partition <= 10% of total bytes"), against global.
//!
//! Memory: one hash-set entry (33-byte [`cairn_core::Fingerprint`] + 1 control
//! byte) per distinct chunk of each chunker, 44 + 1 bytes for the detail
//! chunker (reference count and size), plus one set entry per distinct
//! (chunk, partition) pair for each partitioning scheme; with hashbrown's load
//! factor (7/16 to 7/8) that is 39-78 bytes per distinct chunk and chunker.
//! See `docs/analyze.md`.
//!
//! [`FpMap`]: cairn_core::FpMap
//! [`FpSet`]: cairn_core::FpSet

mod plot;
mod report;
mod study;
mod table;
mod walk;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use serde::Serialize;

use cairn_core::{ChunkerConfig, CompressionConfig, Error, FingerprintAlgo, Result};

pub use plot::{check_plot_path, plot};
pub use table::render_table;

/// Minimum, average and maximum chunk size of a content-defined chunker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkSizes {
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

impl ChunkSizes {
    /// FastCDC's customary ratios: min = avg/4, max = avg*8.
    pub fn fastcdc(avg: u32) -> Self {
        ChunkSizes {
            min: avg / 4,
            avg,
            max: avg.saturating_mul(8),
        }
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// Section 1: FastCDC average chunk sizes (powers of two, bytes).
    pub avg_sizes: Vec<u32>,
    /// Chunk fingerprint function.
    pub fingerprint: FingerprintAlgo,
    /// Stop after this many regular files (walk order: names sorted).
    pub max_files: Option<u64>,
    /// Sections 3 and 4: the FastCDC average the reference-count and
    /// partitioning studies use (added to `avg_sizes` if missing).
    pub detail_avg: u32,
    /// Section 2: sizes of the basic (Rabin) and regression chunkers.
    pub regression: ChunkSizes,
    /// Section 2: linear histogram buckets over `(0, regression.max]`.
    pub histogram_buckets: u32,
    /// Section 4: a directory subtree is one path partition when it holds at
    /// most this share of all bytes (`004`: 10%).
    pub path_partition_share: f64,
    /// Section 1: compress each distinct chunk with this configuration to
    /// report savings after compression (`None`: skip, faster).
    pub compression: Option<CompressionConfig>,
    /// File and directory names skipped anywhere in the walk (e.g. `target`).
    pub exclude_names: Vec<String>,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            avg_sizes: [4, 8, 16, 32, 64, 128].iter().map(|k| k * 1024).collect(),
            fingerprint: FingerprintAlgo::default(),
            max_files: None,
            detail_avg: 8 * 1024,
            regression: ChunkSizes {
                min: 32 * 1024,
                avg: 64 * 1024,
                max: 128 * 1024,
            },
            histogram_buckets: 16,
            path_partition_share: 0.10,
            compression: Some(CompressionConfig::default()),
            exclude_names: Vec::new(),
        }
    }
}

impl AnalyzeOptions {
    /// Checks every chunker configuration and parameter.
    pub fn validate(&self) -> Result<()> {
        if self.avg_sizes.is_empty() {
            return Err(Error::invalid("analyze: no average chunk size given"));
        }
        for avg in self.sweep_sizes() {
            let s = ChunkSizes::fastcdc(avg);
            ChunkerConfig::FastCdc {
                min: s.min,
                avg: s.avg,
                max: s.max,
            }
            .validate()?;
        }
        let r = self.regression;
        ChunkerConfig::Rabin {
            min: r.min,
            avg: r.avg,
            max: r.max,
        }
        .validate()?;
        if !(1..=1024).contains(&self.histogram_buckets) {
            return Err(Error::invalid(
                "histogram buckets must be between 1 and 1024",
            ));
        }
        if !(self.path_partition_share > 0.0 && self.path_partition_share <= 1.0) {
            return Err(Error::invalid(
                "path partition share must be in (0, 1] (004 uses 0.1)",
            ));
        }
        Ok(())
    }

    /// The sweep's averages: sorted, deduplicated, `detail_avg` included.
    pub fn sweep_sizes(&self) -> Vec<u32> {
        let mut v = self.avg_sizes.clone();
        v.push(self.detail_avg);
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The study's result (serializable for `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct AnalyzeReport {
    pub paths: Vec<PathBuf>,
    pub fingerprint: FingerprintAlgo,
    pub compression: Option<CompressionConfig>,
    /// Regular files read (including empty ones and partially read ones).
    pub files: u64,
    pub empty_files: u64,
    /// Bytes read.
    pub logical_bytes: u64,
    /// `max_files` stopped the walk before every file was seen.
    pub truncated: bool,
    /// Symlinks, devices, sockets and fifos passed over.
    pub non_regular_skipped: u64,
    /// Entries skipped or cut short by an error (`path: error`); at most
    /// [`MAX_NOTES`] are kept, `notes_total` counts all.
    pub notes: Vec<String>,
    pub notes_total: u64,
    pub seconds: f64,
    pub memory: MemoryUse,
    /// Section 1.
    pub chunk_size_sweep: Vec<SweepPoint>,
    /// Section 2.
    pub chunking: ChunkingComparison,
    /// Section 3.
    pub reference_counts: RefCountReport,
    /// Section 4.
    pub partitioning: PartitionReport,
}

/// Notes kept in a report.
pub const MAX_NOTES: usize = 100;

/// Fingerprint index memory at the end of the study.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryUse {
    /// Estimated bytes of all hash tables (slots x (entry + control byte)).
    pub index_bytes: u64,
    /// Entries over all tables.
    pub index_entries: u64,
    pub bytes_per_entry: f64,
}

/// Section 1: one FastCDC configuration.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub chunker: ChunkSizes,
    pub chunks: u64,
    pub distinct_chunks: u64,
    pub logical_bytes: u64,
    pub unique_bytes: u64,
    /// 1 - unique / logical.
    pub savings: f64,
    pub mean_chunk_bytes: f64,
    /// Share of cuts forced at max size without a hash match, of all cuts
    /// not made by the end of a file.
    pub forced_share: f64,
    /// Unique bytes after selective compression, if enabled.
    pub compressed_unique_bytes: Option<u64>,
    /// 1 - compressed unique / logical.
    pub savings_with_compression: Option<f64>,
}

/// Section 2: basic (Rabin) vs regression chunking with the same sizes.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkingComparison {
    pub sizes: ChunkSizes,
    /// Width of each histogram bucket.
    pub bucket_bytes: u64,
    pub basic: ChunkingStats,
    pub regression: ChunkingStats,
}

/// Chunk statistics of one chunker.
#[derive(Clone, Debug, Serialize)]
pub struct ChunkingStats {
    pub algorithm: String,
    pub chunks: u64,
    pub distinct_chunks: u64,
    pub logical_bytes: u64,
    pub unique_bytes: u64,
    pub savings: f64,
    /// Over all chunks.
    pub mean_chunk_bytes: f64,
    /// Over the chunks the chunker cut (not ended by the end of a file).
    pub mean_cut_chunk_bytes: f64,
    /// Cuts where the full pattern matched.
    pub full_cuts: u64,
    /// Regressed cuts by level (index 0: one bit dropped); empty for basic.
    pub regressed_cuts: Vec<u64>,
    /// Cuts forced at max size.
    pub forced_cuts: u64,
    /// Chunks ended by the end of their file.
    pub end_of_input_cuts: u64,
    /// forced / (full + regressed + forced): end-of-file chunks excluded.
    pub forced_share: f64,
    /// regressed / (full + regressed + forced).
    pub regressed_share: f64,
    pub histogram: Vec<SizeBucket>,
}

/// Chunks with size in `lo..=hi`.
#[derive(Clone, Debug, Serialize)]
pub struct SizeBucket {
    pub lo: u64,
    pub hi: u64,
    /// Chunks the chunker cut (full, regressed or forced).
    pub chunks: u64,
    /// Chunks ended by the end of their file.
    pub eof_chunks: u64,
}

/// Section 3.
#[derive(Clone, Debug, Serialize)]
pub struct RefCountReport {
    /// The FastCDC configuration measured.
    pub chunker: ChunkSizes,
    pub distinct_chunks: u64,
    /// Bytes dedup removes: sum over distinct chunks of size x (refs - 1).
    pub duplicate_bytes: u64,
    /// Groups 1, 2, 3-4, 5-8, ... up to the largest reference count.
    pub groups: Vec<RefGroup>,
}

/// Distinct chunks referenced `min_refs..=max_refs` times.
#[derive(Clone, Debug, Serialize)]
pub struct RefGroup {
    pub min_refs: u64,
    pub max_refs: u64,
    pub distinct_chunks: u64,
    /// Bytes stored once.
    pub unique_bytes: u64,
    /// Bytes referenced (size x refs).
    pub logical_bytes: u64,
    /// Bytes removed (size x (refs - 1)).
    pub duplicate_bytes: u64,
    /// duplicate_bytes / all duplicate bytes (0 when there are none).
    pub duplicate_share: f64,
}

/// Section 4.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionReport {
    /// The FastCDC configuration measured.
    pub chunker: ChunkSizes,
    pub logical_bytes: u64,
    pub path_partition_share: f64,
    pub global: PartitionSummary,
    pub by_type: PartitionSummary,
    pub by_path: PartitionSummary,
}

/// Dedup within each partition of one scheme.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionSummary {
    /// "global", "file type" or "file path".
    pub scheme: String,
    pub partitions: u64,
    /// Unique bytes summed over partitions.
    pub unique_bytes: u64,
    /// 1 - unique_bytes / logical bytes.
    pub savings: f64,
    /// The largest partitions by logical bytes (at most [`MAX_LISTED`]).
    pub largest: Vec<PartitionEntry>,
}

/// Partitions listed per scheme.
pub const MAX_LISTED: usize = 10;

/// One partition.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionEntry {
    /// Extension (`(none)` without one) or directory subtree (`dir/`);
    /// `dir/ (own files)` is the files directly in a directory too large to
    /// be one partition.
    pub key: String,
    pub files: u64,
    pub logical_bytes: u64,
    pub unique_bytes: u64,
    pub savings: f64,
}

/// Runs the study over `paths` (files or directories, walked recursively;
/// only regular files are read, symlinks are not followed below the given
/// paths). Unreadable entries are noted in the report; a given path that does
/// not exist is an error. `progress`, if given, is advanced by every byte
/// read.
pub fn analyze(
    paths: &[PathBuf],
    opts: &AnalyzeOptions,
    progress: Option<&AtomicU64>,
) -> Result<AnalyzeReport> {
    opts.validate()?;
    if paths.is_empty() {
        return Err(Error::invalid("analyze: no path given"));
    }
    let started = Instant::now();
    let tree = walk::walk(paths, opts)?;
    let mut study = study::Study::new(opts, &tree);
    for file in &tree.files {
        study.add_file(file, progress);
    }
    let mut report = report::build(study, paths, opts, &tree);
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// `1 - unique / logical`, 0 for no data.
pub(crate) fn savings(unique: u64, logical: u64) -> f64 {
    if logical == 0 {
        0.0
    } else {
        1.0 - unique as f64 / logical as f64
    }
}
