//! DDFS synthetic backup generations (`001_3652cceaf162c5a1.txt` §5.3).
//!
//! "The synthetic dataset was developed to model backup data from multiple
//! backup cycles from multiple backup streams ... Each backup stream is made
//! up of an ordered series of synthetic data versions where each successive
//! version ('generation') is a somewhat modified copy of the preceding
//! generation in the series. The generation-to-generation modifications
//! include: data reordering, deletion of existing data, and addition of new
//! data." The paper's runs use "an average generation (daily equivalent)
//! global compression ratio of 30, and an average generation (daily
//! equivalent) local compression ratio of 2 to 1 for each backup stream";
//! those are the defaults here.
//!
//! A backup (one generation) holds one file per stream (or a directory of
//! `files_per_stream` parts). Generation 0 is all new data. Generation `g+1`
//! of a stream is generation `g` with `delete_rate` of its chunks deleted and
//! `reorder_rate` moved, in runs, then exactly enough new chunks inserted that
//! the generation's logical bytes over its new bytes (bytes whose fingerprint
//! no earlier generation holds) equal `target_dedup_ratio` to within a chunk.
//! Streams share no data.

use std::sync::OnceLock;

use cairn_core::{Error, Result, TraceSource};

use super::model::{mutate, ChunkModel, NewData, Plan, Run, Sequence, STREAM_SHIFT};
use super::params;
use super::rng::{derive, SplitMix64};
use super::source::{mtime_of, Entry, FileSpec, RunSource};
use super::Workload;

const KIND: u64 = 0xddf5_0053;

/// Parameters of [`DdfsGenerations`]; see `docs/workloads.md`.
#[derive(Clone, Debug, PartialEq)]
pub struct DdfsParams {
    /// Backup streams (files) per generation. Default 4.
    pub streams: usize,
    /// Number of generations. Default 10.
    pub generations: usize,
    /// Logical bytes of generation 0, over all streams. Default 1 GiB.
    pub generation_bytes: u64,
    /// Mean chunk size in bytes (sizes: `avg/4` + exponential, capped at
    /// `8·avg`). Default 8192 (DDFS's expected segment size).
    pub avg_chunk: u32,
    /// Per-generation dedup ratio, logical / new bytes (> 1). Default 30
    /// (§5.3). The parameter `change_rate` sets it to `1 / change_rate`.
    pub target_dedup_ratio: f64,
    /// Local compression ratio, logical / stored bytes (>= 1). Default 2.
    pub target_compression: f64,
    /// Fraction of the previous generation's chunks deleted per generation;
    /// `None` = `1 / target_dedup_ratio`, which keeps the size steady.
    pub delete_rate: Option<f64>,
    /// Fraction of chunks moved to another position per generation.
    /// Default 0.01.
    pub reorder_rate: f64,
    /// Fraction of new-data runs inserted at random positions; the rest
    /// replace deleted runs in place. Default 0.5.
    pub insert_rate: f64,
    /// Mean length in chunks of a deleted, moved or inserted run. Default 64.
    pub run_chunks: u64,
    /// Files per stream (the stream is cut into equal chunk counts).
    /// Default 1.
    pub files_per_stream: usize,
    /// Fingerprint width in bytes, 8..=32 (20 = SHA-1 as in DDFS). Default 32.
    pub fp_width: u8,
    pub seed: u64,
}

impl Default for DdfsParams {
    fn default() -> Self {
        DdfsParams {
            streams: 4,
            generations: 10,
            generation_bytes: 1 << 30,
            avg_chunk: 8192,
            target_dedup_ratio: 30.0,
            target_compression: 2.0,
            delete_rate: None,
            reorder_rate: 0.01,
            insert_rate: 0.5,
            run_chunks: 64,
            files_per_stream: 1,
            fp_width: 32,
            seed: 0,
        }
    }
}

impl DdfsParams {
    /// The keys [`DdfsParams::set`] accepts.
    pub const ACCEPTED: &'static [&'static str] = &[
        "streams",
        "generations",
        "generation_bytes",
        "avg_chunk",
        "target_dedup_ratio",
        "change_rate",
        "target_compression",
        "delete_rate",
        "reorder_rate",
        "insert_rate",
        "run_chunks",
        "files_per_stream",
        "fp_width",
        "seed",
    ];

    /// Sets one parameter from its string form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        const W: &str = "ddfs";
        match key {
            "streams" => self.streams = params::int(W, key, value, 1, 1 << 20)? as usize,
            "generations" => self.generations = params::int(W, key, value, 1, 1 << 20)? as usize,
            "generation_bytes" => self.generation_bytes = params::bytes(W, key, value, 1, 1 << 50)?,
            "avg_chunk" => self.avg_chunk = params::bytes(W, key, value, 64, 1 << 20)? as u32,
            "target_dedup_ratio" => {
                self.target_dedup_ratio = params::float(W, key, value, 1.000001, 1e9)?
            }
            "change_rate" => {
                self.target_dedup_ratio = 1.0 / params::float(W, key, value, 1e-9, 0.999999)?
            }
            "target_compression" => {
                self.target_compression = params::float(W, key, value, 1.0, 1e6)?
            }
            "delete_rate" => self.delete_rate = Some(params::float(W, key, value, 0.0, 1.0)?),
            "reorder_rate" => self.reorder_rate = params::float(W, key, value, 0.0, 1.0)?,
            "insert_rate" => self.insert_rate = params::float(W, key, value, 0.0, 1.0)?,
            "run_chunks" => self.run_chunks = params::int(W, key, value, 1, 1 << 30)?,
            "files_per_stream" => {
                self.files_per_stream = params::int(W, key, value, 1, 100_000)? as usize
            }
            "fp_width" => self.fp_width = params::fp_width(W, key, value)?,
            "seed" => self.seed = params::int(W, key, value, 0, u64::MAX)?,
            _ => return Err(params::unknown_key(W, key, Self::ACCEPTED)),
        }
        Ok(())
    }

    /// The delete rate in effect.
    pub fn effective_delete_rate(&self) -> f64 {
        self.delete_rate.unwrap_or(1.0 / self.target_dedup_ratio)
    }

    /// Checks the ranges [`DdfsParams::set`] enforces, for hand-built values.
    pub fn validate(&self) -> Result<()> {
        let err = |m: &str| Err(Error::invalid(format!("workload ddfs: {m}")));
        if self.streams == 0 || self.streams >= 1 << 24 {
            return err("streams must be between 1 and 2^24");
        }
        if self.generations == 0 {
            return err("generations must be at least 1");
        }
        if !(64..=1 << 20).contains(&self.avg_chunk) {
            return err("avg_chunk must be between 64 and 1 MiB");
        }
        if !(self.target_dedup_ratio.is_finite() && self.target_dedup_ratio > 1.0) {
            return err("target_dedup_ratio must be a finite number > 1");
        }
        if !(self.target_compression.is_finite() && self.target_compression >= 1.0) {
            return err("target_compression must be a finite number >= 1");
        }
        let d = self.effective_delete_rate();
        let rates = [d, self.reorder_rate, self.insert_rate];
        if rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
            return err("delete_rate, reorder_rate and insert_rate must be in [0, 1]");
        }
        if d + self.reorder_rate > 1.0 {
            return err("delete_rate + reorder_rate must not exceed 1");
        }
        if self.run_chunks == 0 || self.files_per_stream == 0 {
            return err("run_chunks and files_per_stream must be at least 1");
        }
        if !(8..=32).contains(&self.fp_width) {
            return err("fp_width must be between 8 and 32");
        }
        // Identities per stream (40 bits): bounded by the smallest chunks.
        let per_gen = self.generation_bytes / self.streams as u64 / (self.avg_chunk / 4) as u64 + 1;
        let growth = 1.0 + 1.0 / (self.target_dedup_ratio - 1.0);
        let total = per_gen as f64 * growth * (self.generations as f64 + 1.0);
        if self.generation_bytes == 0 || total >= (1u64 << STREAM_SHIFT) as f64 {
            return err("generation_bytes must be > 0 and small enough for 2^40 chunks per stream");
        }
        Ok(())
    }
}

/// DDFS §5.3 synthetic backup streams; see the module documentation.
pub struct DdfsGenerations {
    params: DdfsParams,
    model: ChunkModel,
    gen0: OnceLock<Vec<Sequence>>,
}

impl DdfsGenerations {
    pub fn new(params: DdfsParams) -> Result<Self> {
        params.validate()?;
        let model = ChunkModel::new(
            derive(params.seed, &[KIND]),
            params.avg_chunk,
            params.target_compression,
            params.fp_width,
        );
        Ok(DdfsGenerations {
            params,
            model,
            gen0: OnceLock::new(),
        })
    }

    pub fn params(&self) -> &DdfsParams {
        &self.params
    }

    fn gen0(&self) -> &[Sequence] {
        self.gen0.get_or_init(|| {
            let per = self.params.generation_bytes / self.params.streams as u64;
            (0..self.params.streams)
                .map(|s| Sequence::fresh(&self.model, (s as u64) << STREAM_SHIFT, per))
                .collect()
        })
    }

    /// The edits that turn generation `g - 1` of stream `s` into `g`.
    fn plan(&self, prev: &Sequence) -> Plan {
        let p = &self.params;
        let n = prev.chunks as f64;
        Plan {
            delete: (n * p.effective_delete_rate()).round() as u64,
            moves: (n * p.reorder_rate).round() as u64,
            new_data: NewData::Ratio(p.target_dedup_ratio),
            run_chunks: p.run_chunks,
            insert_rate: p.insert_rate,
        }
    }

    /// Stream `s` at generation `g`, recomputed from generation 0.
    pub(crate) fn stream_at(&self, s: usize, g: usize) -> Sequence {
        let mut seq = self.gen0()[s].clone();
        for step in 1..=g {
            let mut rng = SplitMix64::new(derive(self.params.seed, &[KIND, s as u64, step as u64]));
            seq = mutate(&seq, &self.plan(&seq), &self.model, &mut rng).0;
        }
        seq
    }

    fn listing(&self, g: usize) -> Vec<Entry> {
        let f = self.params.files_per_stream;
        let mtime_ns = mtime_of(g);
        let mut entries = Vec::new();
        for s in 0..self.params.streams {
            let seq = self.stream_at(s, g);
            let name = format!("stream-{s:03}").into_bytes();
            if f == 1 {
                entries.push(Entry::File(FileSpec {
                    name,
                    mtime_ns,
                    size: Some(seq.bytes),
                    runs: seq.runs,
                }));
                continue;
            }
            entries.push(Entry::Dir { name, mtime_ns });
            let n = seq.chunks;
            for i in 0..f as u64 {
                let (a, b) = (n * i / f as u64, n * (i + 1) / f as u64);
                let runs: Vec<Run> = seq.slice(a, b);
                entries.push(Entry::File(FileSpec {
                    name: format!("part-{i:03}").into_bytes(),
                    mtime_ns,
                    size: None,
                    runs,
                }));
            }
            entries.push(Entry::DirEnd);
        }
        entries
    }
}

impl Workload for DdfsGenerations {
    fn generations(&self) -> usize {
        self.params.generations
    }

    fn generation(&self, g: usize) -> Box<dyn TraceSource> {
        assert!(
            g < self.params.generations,
            "ddfs workload has {} generations, asked for {g}",
            self.params.generations
        );
        Box::new(RunSource::new(
            self.listing(g),
            self.model,
            format!("ddfs generation {g} (seed {})", self.params.seed),
        ))
    }

    fn name(&self) -> &str {
        "ddfs"
    }
}
