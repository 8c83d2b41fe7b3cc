//! The GC paper's load generator: file lineages (`003_ea5fccc485a97c5d.txt`
//! §4.2).
//!
//! "The tool creates files of a specified size, using a combination of
//! random and predictable content to get desired levels of deduplication and
//! compression. Each new file contains significant content from the previous
//! generation of the same 'lineage,' while some content is deleted as new
//! content is added. There should not be deduplication across independent
//! lineages, which can be written in parallel."
//!
//! Each of `lineages` lineages gets a target file size drawn once from
//! `file_size`. Generation 0 writes version 0 of every lineage (all new
//! data); generation `g` writes version `g`: version `g - 1` with
//! `1 - carry_fraction` of its chunks deleted in runs and new chunks written
//! in their place up to the lineage's size. Identities are allocated per
//! lineage, so no chunk is shared across lineages. Only the latest `retain`
//! versions stay live: after generation `g`, version `g - retain` is deleted
//! ([`LineageGenerations::deleted_after`]), which is what makes garbage for a
//! collector to find.

use std::ops::Range;
use std::sync::OnceLock;

use cairn_core::{Error, Result, TraceSource};

use super::model::{mutate, ChunkModel, NewData, Plan, Sequence, STREAM_SHIFT};
use super::params;
use super::rng::{derive, SplitMix64};
use super::source::{mtime_of, Entry, FileSpec, RunSource};
use super::Workload;

const KIND: u64 = 0x11_4ea6e;

/// How lineage file sizes are drawn (once per lineage).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FileSizeDist {
    /// Every file this size (`fixed:32MiB` or just `32MiB`).
    Fixed(u64),
    /// Uniform in `min..=max` (`uniform:4MiB-64MiB`).
    Uniform { min: u64, max: u64 },
    /// Log-normal with this mean and shape `sigma` (`lognormal:32MiB` or
    /// `lognormal:32MiB:0.5`), clamped to `[avg_chunk, 64·mean]`.
    LogNormal { mean: u64, sigma: f64 },
}

impl FileSizeDist {
    /// Parses the forms listed on the variants.
    pub fn parse(s: &str) -> Option<Self> {
        let (kind, rest) = s.split_once(':').unwrap_or(("fixed", s));
        match kind.trim() {
            "fixed" => Some(FileSizeDist::Fixed(params::parse_bytes(rest)?)),
            "uniform" => {
                let (a, b) = rest.split_once('-').or_else(|| rest.split_once(".."))?;
                let (min, max) = (params::parse_bytes(a)?, params::parse_bytes(b)?);
                (min <= max).then_some(FileSizeDist::Uniform { min, max })
            }
            "lognormal" => {
                let (m, sigma) = match rest.split_once(':') {
                    Some((m, s)) => (m, s.trim().parse::<f64>().ok()?),
                    None => (rest, 0.5),
                };
                (sigma.is_finite() && (0.0..=4.0).contains(&sigma)).then_some(())?;
                Some(FileSizeDist::LogNormal {
                    mean: params::parse_bytes(m)?,
                    sigma,
                })
            }
            _ => None,
        }
    }

    fn sample(&self, rng: &mut SplitMix64, avg_chunk: u64) -> u64 {
        let v = match *self {
            FileSizeDist::Fixed(b) => b,
            FileSizeDist::Uniform { min, max } => rng.range_inclusive(min, max),
            FileSizeDist::LogNormal { mean, sigma } => {
                let mu = (mean as f64).ln() - sigma * sigma / 2.0;
                let x = (mu + sigma * rng.normal()).exp();
                x.min(mean as f64 * 64.0) as u64
            }
        };
        v.max(avg_chunk)
    }

    fn mean(&self) -> u64 {
        match *self {
            FileSizeDist::Fixed(b) => b,
            FileSizeDist::Uniform { min, max } => min / 2 + max / 2,
            FileSizeDist::LogNormal { mean, .. } => mean,
        }
    }
}

/// What a generation's trace lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// Every live file: versions `g + 1 - retain ..= g` of every lineage
    /// (a backup of the filesystem the load generator writes to).
    Live,
    /// Only the files written at generation `g` (one per lineage), for a
    /// snapshot per generation that is deleted when its versions are.
    New,
}

/// Parameters of [`LineageGenerations`]; see `docs/workloads.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct LineageParams {
    /// Independent lineages (one file each per generation). Default 16.
    pub lineages: usize,
    /// Number of generations. Default 10.
    pub generations: usize,
    /// Lineage file sizes. Default `lognormal:32MiB:0.5`.
    pub file_size: FileSizeDist,
    /// Share of the previous version's chunks a new version keeps.
    /// Default 0.9.
    pub carry_fraction: f64,
    /// Versions per lineage that stay live (>= 1). Default 4.
    pub retain: usize,
    /// Mean chunk size in bytes. Default 8192.
    pub avg_chunk: u32,
    /// Local compression ratio (>= 1). Default 2.
    pub target_compression: f64,
    /// Mean length in chunks of a deleted (and replaced) run. Default 32.
    pub run_chunks: u64,
    /// Default [`Listing::Live`].
    pub listing: Listing,
    /// Fingerprint width in bytes, 8..=32. Default 32.
    pub fp_width: u8,
    pub seed: u64,
}

impl Default for LineageParams {
    fn default() -> Self {
        LineageParams {
            lineages: 16,
            generations: 10,
            file_size: FileSizeDist::LogNormal {
                mean: 32 << 20,
                sigma: 0.5,
            },
            carry_fraction: 0.9,
            retain: 4,
            avg_chunk: 8192,
            target_compression: 2.0,
            run_chunks: 32,
            listing: Listing::Live,
            fp_width: 32,
            seed: 0,
        }
    }
}

impl LineageParams {
    /// The keys [`LineageParams::set`] accepts.
    pub const ACCEPTED: &'static [&'static str] = &[
        "lineages",
        "generations",
        "file_size",
        "carry_fraction",
        "retain",
        "avg_chunk",
        "target_compression",
        "run_chunks",
        "listing",
        "fp_width",
        "seed",
    ];

    /// Sets one parameter from its string form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        const W: &str = "lineage";
        match key {
            "lineages" => self.lineages = params::int(W, key, value, 1, 1 << 20)? as usize,
            "generations" => self.generations = params::int(W, key, value, 1, 1 << 20)? as usize,
            "file_size" => {
                self.file_size = FileSizeDist::parse(value).ok_or_else(|| {
                    Error::invalid(format!(
                        "workload lineage: parameter file_size={value:?}: expected SIZE, \
                         fixed:SIZE, uniform:MIN-MAX or lognormal:MEAN[:SIGMA]"
                    ))
                })?
            }
            "carry_fraction" => self.carry_fraction = params::float(W, key, value, 0.0, 1.0)?,
            "retain" => self.retain = params::int(W, key, value, 1, 1 << 20)? as usize,
            "avg_chunk" => self.avg_chunk = params::bytes(W, key, value, 64, 1 << 20)? as u32,
            "target_compression" => {
                self.target_compression = params::float(W, key, value, 1.0, 1e6)?
            }
            "run_chunks" => self.run_chunks = params::int(W, key, value, 1, 1 << 30)?,
            "listing" => {
                self.listing = match value {
                    "live" => Listing::Live,
                    "new" => Listing::New,
                    _ => {
                        return Err(Error::invalid(format!(
                            "workload lineage: parameter listing={value:?}: expected live or new"
                        )))
                    }
                }
            }
            "fp_width" => self.fp_width = params::fp_width(W, key, value)?,
            "seed" => self.seed = params::int(W, key, value, 0, u64::MAX)?,
            _ => return Err(params::unknown_key(W, key, Self::ACCEPTED)),
        }
        Ok(())
    }

    /// Checks the ranges [`LineageParams::set`] enforces, for hand-built values.
    pub fn validate(&self) -> Result<()> {
        let err = |m: &str| Err(Error::invalid(format!("workload lineage: {m}")));
        if self.lineages == 0 || self.lineages >= 1 << 24 {
            return err("lineages must be between 1 and 2^24");
        }
        if self.generations == 0 || self.retain == 0 {
            return err("generations and retain must be at least 1");
        }
        if !(64..=1 << 20).contains(&self.avg_chunk) {
            return err("avg_chunk must be between 64 and 1 MiB");
        }
        if !(0.0..=1.0).contains(&self.carry_fraction) {
            return err("carry_fraction must be in [0, 1]");
        }
        if !(self.target_compression.is_finite() && self.target_compression >= 1.0) {
            return err("target_compression must be a finite number >= 1");
        }
        if self.run_chunks == 0 || !(8..=32).contains(&self.fp_width) {
            return err("run_chunks must be >= 1 and fp_width between 8 and 32");
        }
        if let FileSizeDist::LogNormal { sigma, .. } = self.file_size {
            if !(sigma.is_finite() && (0.0..=4.0).contains(&sigma)) {
                return err("lognormal sigma must be in [0, 4]");
            }
        }
        if let FileSizeDist::Uniform { min, max } = self.file_size {
            if min > max {
                return err("uniform file_size needs min <= max");
            }
        }
        // Identities per lineage (40 bits), bounded with the smallest chunks.
        let max_file = match self.file_size {
            FileSizeDist::Fixed(b) => b,
            FileSizeDist::Uniform { max, .. } => max,
            FileSizeDist::LogNormal { mean, .. } => mean.saturating_mul(64),
        };
        let per = (max_file / (self.avg_chunk / 4) as u64 + 1) as f64;
        if self.file_size.mean() == 0
            || per * (self.generations as f64 + 1.0) >= (1u64 << STREAM_SHIFT) as f64
        {
            return err("file_size must be > 0 and small enough for 2^40 chunks per lineage");
        }
        Ok(())
    }
}

/// GC-paper file lineages; see the module documentation.
pub struct LineageGenerations {
    params: LineageParams,
    model: ChunkModel,
    /// Per lineage: target size and version 0.
    gen0: OnceLock<Vec<(u64, Sequence)>>,
}

impl LineageGenerations {
    pub fn new(params: LineageParams) -> Result<Self> {
        params.validate()?;
        let model = ChunkModel::new(
            derive(params.seed, &[KIND]),
            params.avg_chunk,
            params.target_compression,
            params.fp_width,
        );
        Ok(LineageGenerations {
            params,
            model,
            gen0: OnceLock::new(),
        })
    }

    pub fn params(&self) -> &LineageParams {
        &self.params
    }

    fn gen0(&self) -> &[(u64, Sequence)] {
        self.gen0.get_or_init(|| {
            let p = &self.params;
            (0..p.lineages)
                .map(|l| {
                    let mut rng = SplitMix64::new(derive(p.seed, &[KIND, l as u64, u64::MAX]));
                    let size = p.file_size.sample(&mut rng, p.avg_chunk as u64);
                    let base = (l as u64) << STREAM_SHIFT;
                    (size, Sequence::fresh(&self.model, base, size))
                })
                .collect()
        })
    }

    /// Versions `range` of lineage `l` (recomputed from version 0).
    pub(crate) fn versions(&self, l: usize, range: Range<usize>) -> Vec<Sequence> {
        let (size, first) = &self.gen0()[l];
        let mut out = Vec::with_capacity(range.len());
        let mut seq = first.clone();
        for v in 0..range.end {
            if v > 0 {
                let mut rng =
                    SplitMix64::new(derive(self.params.seed, &[KIND, l as u64, v as u64]));
                let plan = Plan {
                    delete: ((1.0 - self.params.carry_fraction) * seq.chunks as f64).round() as u64,
                    moves: 0,
                    new_data: NewData::Fill(*size),
                    run_chunks: self.params.run_chunks,
                    insert_rate: 0.0,
                };
                seq = mutate(&seq, &plan, &self.model, &mut rng).0;
            }
            if range.contains(&v) {
                out.push(seq.clone());
            }
        }
        out
    }

    /// The versions live after generation `g`: the latest `retain`.
    pub fn live_generations(&self, g: usize) -> Range<usize> {
        (g + 1).saturating_sub(self.params.retain)..g + 1
    }

    /// The generations whose files are deleted after generation `g` is
    /// written: `g - retain`, once `g >= retain`.
    pub fn deleted_after(&self, g: usize) -> Vec<usize> {
        if g >= self.params.retain {
            vec![g - self.params.retain]
        } else {
            Vec::new()
        }
    }

    fn listing(&self, g: usize) -> Vec<Entry> {
        let range = match self.params.listing {
            Listing::Live => self.live_generations(g),
            Listing::New => g..g + 1,
        };
        let mut entries = Vec::new();
        for l in 0..self.params.lineages {
            entries.push(Entry::Dir {
                name: format!("lineage-{l:04}").into_bytes(),
                mtime_ns: mtime_of(g),
            });
            for (v, seq) in range.clone().zip(self.versions(l, range.clone())) {
                entries.push(Entry::File(FileSpec {
                    name: format!("gen-{v:06}").into_bytes(),
                    mtime_ns: mtime_of(v),
                    size: Some(seq.bytes),
                    runs: seq.runs,
                }));
            }
            entries.push(Entry::DirEnd);
        }
        entries
    }
}

impl Workload for LineageGenerations {
    fn generations(&self) -> usize {
        self.params.generations
    }

    fn generation(&self, g: usize) -> Box<dyn TraceSource> {
        assert!(
            g < self.params.generations,
            "lineage workload has {} generations, asked for {g}",
            self.params.generations
        );
        Box::new(RunSource::new(
            self.listing(g),
            self.model,
            format!("lineage generation {g} (seed {})", self.params.seed),
        ))
    }

    fn name(&self) -> &str {
        "lineage"
    }

    fn deleted_after(&self, g: usize) -> Vec<usize> {
        LineageGenerations::deleted_after(self, g)
    }
}
