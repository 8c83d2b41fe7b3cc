//! The measuring core of `cairn analyze` (`004_62bf1a5ddd5ed253.txt`'s
//! dataset study): every file is read once into one buffer, and every chunker
//! of the study ([`Consumer`]) cuts and fingerprints the same bytes.
//!
//! The buffer is shared like [`cairn_chunk::ChunkReader`]'s look-ahead
//! buffer, generalised to several readers: each consumer keeps its own
//! position and cuts chunks while it has `max_size()` bytes of look-ahead (or
//! the file has ended); then the bytes every consumer has passed are dropped,
//! the rest moved to the front, and the buffer refilled. Each consumer stops
//! less than its `max_size()` short of the buffer's end, so a buffer of at
//! least twice the largest maximum always makes progress; cut points are those
//! of the chunker on the whole file (chunkers are stateless between chunks).
//!
//! Per consumer: a fingerprint set (sections 1 and 2); the detail consumer
//! (sections 3 and 4) keeps `(refs, size)` per fingerprint and, per
//! partitioning scheme, a set of fingerprints with the partition id mixed
//! into their first 8 bytes: one entry per distinct (chunk, partition) pair.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use cairn_chunk::{fingerprint, CutKind, FastCdcChunker, RabinChunker, RegressionChunker};
use cairn_core::{mix64, Chunker, CompressionConfig, Fingerprint, FingerprintAlgo, FpMap, FpSet};

use super::walk::{FileEntry, Tree};
use super::{AnalyzeOptions, ChunkSizes, MemoryUse};

/// Buffers of at least this many bytes are cut by the consumers in parallel.
const PARALLEL_BYTES: usize = 64 * 1024;

/// Smallest shared buffer.
const MIN_BUFFER: usize = 8 << 20;

/// The chunkers of the study (the concrete types expose `last_cut_kind`).
pub(super) enum Cutter {
    Cdc(FastCdcChunker),
    Rabin(RabinChunker),
    Regression(RegressionChunker),
}

impl Cutter {
    fn next(&mut self, data: &[u8], eof: bool) -> Option<(usize, CutKind)> {
        match self {
            Cutter::Cdc(c) => c.next_boundary(data, eof).map(|n| (n, c.last_cut_kind())),
            Cutter::Rabin(c) => c.next_boundary(data, eof).map(|n| (n, c.last_cut_kind())),
            Cutter::Regression(c) => c.next_boundary(data, eof).map(|n| (n, c.last_cut_kind())),
        }
    }

    pub(super) fn max_size(&self) -> usize {
        match self {
            Cutter::Cdc(c) => c.max_size(),
            Cutter::Rabin(c) => c.max_size(),
            Cutter::Regression(c) => c.max_size(),
        }
    }
}

/// Per distinct chunk of the detail consumer: 8 bytes next to the key.
#[derive(Clone, Copy, Debug)]
pub(super) struct Refs {
    pub refs: u32,
    pub size: u32,
}

/// Fingerprints seen by one consumer.
pub(super) enum Index {
    Set(FpSet),
    Counted(FpMap<Refs>),
}

impl Index {
    /// Records one reference; true if the fingerprint is new.
    fn add(&mut self, fp: Fingerprint, size: usize) -> bool {
        match self {
            Index::Set(s) => s.insert(fp),
            Index::Counted(m) => {
                let mut new = false;
                m.entry(fp)
                    .and_modify(|r| r.refs = r.refs.saturating_add(1))
                    .or_insert_with(|| {
                        new = true;
                        Refs {
                            refs: 1,
                            size: size as u32,
                        }
                    });
                new
            }
        }
    }

    fn memory(&self) -> (u64, u64) {
        match self {
            Index::Set(s) => table_memory(s.len(), s.capacity(), size_of::<Fingerprint>()),
            Index::Counted(m) => {
                table_memory(m.len(), m.capacity(), size_of::<(Fingerprint, Refs)>())
            }
        }
    }
}

/// (estimated bytes, entries) of a hashbrown table: `capacity` is 7/8 of
/// its slots; each slot holds an entry and a control byte.
fn table_memory(len: usize, capacity: usize, entry: usize) -> (u64, u64) {
    let slots = if capacity == 0 {
        0
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    ((slots * (entry + 1)) as u64, len as u64)
}

/// Dedup counters of one consumer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counts {
    pub chunks: u64,
    pub logical: u64,
    pub distinct: u64,
    pub unique: u64,
    pub compressed_unique: u64,
}

/// Cut kinds and the size histogram of one consumer.
#[derive(Clone, Debug, Default)]
pub(super) struct Cuts {
    pub full: u64,
    pub regressed: [u64; cairn_chunk::REGRESSION_LEVELS as usize],
    pub forced: u64,
    pub eof: u64,
    /// Bytes of chunks the chunker cut (not ended by end of file).
    pub cut_bytes: u64,
    pub bucket: u64,
    pub hist: Vec<u64>,
    pub hist_eof: Vec<u64>,
}

impl Cuts {
    fn add(&mut self, size: usize, kind: CutKind) {
        let last = self.hist.len().saturating_sub(1);
        let b = ((size as u64 - 1) / self.bucket.max(1)).min(last as u64) as usize;
        match kind {
            CutKind::Full => self.full += 1,
            CutKind::Regressed(i) => {
                let last = self.regressed.len();
                self.regressed[(i as usize).clamp(1, last) - 1] += 1;
            }
            CutKind::Forced => self.forced += 1,
            CutKind::EndOfInput => {
                self.eof += 1;
                if let Some(h) = self.hist_eof.get_mut(b) {
                    *h += 1;
                }
                return;
            }
        }
        self.cut_bytes += size as u64;
        if let Some(h) = self.hist.get_mut(b) {
            *h += 1;
        }
    }

    /// Full, regressed and forced cuts.
    pub(super) fn content_cuts(&self) -> u64 {
        self.full + self.regressed.iter().sum::<u64>() + self.forced
    }
}

/// Per-partition counters of one scheme.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PartCounts {
    pub files: u64,
    pub logical: u64,
    pub unique: u64,
}

/// One partitioning scheme of the detail consumer.
pub(super) struct Scheme {
    seen: FpSet,
    pub parts: Vec<PartCounts>,
}

impl Scheme {
    fn new(partitions: usize) -> Self {
        Scheme {
            seen: FpSet::default(),
            parts: vec![PartCounts::default(); partitions],
        }
    }

    fn add(&mut self, fp: &Fingerprint, size: usize, part: u32) {
        let mut key = [0u8; cairn_core::MAX_FINGERPRINT_LEN];
        let bytes = fp.as_bytes();
        key[..bytes.len()].copy_from_slice(bytes);
        let salt = mix64(u64::from(part) + 1).to_le_bytes();
        for (k, s) in key.iter_mut().zip(salt) {
            *k ^= s;
        }
        let p = &mut self.parts[part as usize];
        p.logical += size as u64;
        if self
            .seen
            .insert(Fingerprint::from_slice(&key[..bytes.len()]))
        {
            p.unique += size as u64;
        }
    }

    pub(super) fn unique(&self) -> u64 {
        self.parts.iter().map(|p| p.unique).sum()
    }
}

/// Partition ids of the file being read.
#[derive(Clone, Copy)]
struct FileCtx {
    type_part: u32,
    path_part: u32,
}

/// One chunker of the study and everything it measures.
pub(super) struct Consumer {
    pub sizes: ChunkSizes,
    pub cutter: Cutter,
    pub index: Index,
    pub counts: Counts,
    pub cuts: Cuts,
    /// Section 4 schemes (by type, by path): the detail consumer only.
    pub schemes: Option<(Scheme, Scheme)>,
    compression: Option<CompressionConfig>,
    scratch: Vec<u8>,
    /// Start of this consumer's next chunk in the shared buffer.
    pos: usize,
}

impl Consumer {
    pub(super) fn new(sizes: ChunkSizes, cutter: Cutter, buckets: u32) -> Self {
        Consumer {
            sizes,
            cutter,
            index: Index::Set(FpSet::default()),
            counts: Counts::default(),
            cuts: Cuts {
                bucket: u64::from(sizes.max).div_ceil(u64::from(buckets)),
                hist: vec![0; buckets as usize],
                hist_eof: vec![0; buckets as usize],
                ..Cuts::default()
            },
            schemes: None,
            compression: None,
            scratch: Vec::new(),
            pos: 0,
        }
    }

    /// Cuts and records chunks of `data[self.pos..]` while it can decide.
    fn consume(&mut self, data: &[u8], eof: bool, algo: FingerprintAlgo, ctx: FileCtx) {
        while self.pos < data.len() {
            let rest = &data[self.pos..];
            let Some((n, kind)) = self.cutter.next(rest, eof) else {
                break;
            };
            self.record(&rest[..n], kind, algo, ctx);
            self.pos += n;
        }
    }

    fn record(&mut self, chunk: &[u8], kind: CutKind, algo: FingerprintAlgo, ctx: FileCtx) {
        let fp = fingerprint(algo, chunk);
        let n = chunk.len();
        self.counts.chunks += 1;
        self.counts.logical += n as u64;
        if self.index.add(fp, n) {
            self.counts.distinct += 1;
            self.counts.unique += n as u64;
            if let Some(cfg) = &self.compression {
                cairn_format::compress(cfg, chunk, &mut self.scratch);
                self.counts.compressed_unique += self.scratch.len() as u64;
            }
        }
        self.cuts.add(n, kind);
        if let Some((by_type, by_path)) = &mut self.schemes {
            by_type.add(&fp, n, ctx.type_part);
            by_path.add(&fp, n, ctx.path_part);
        }
    }

    fn memory(&self) -> (u64, u64) {
        let (mut bytes, mut entries) = self.index.memory();
        if let Some((a, b)) = &self.schemes {
            for s in [a, b] {
                let (mb, me) =
                    table_memory(s.seen.len(), s.seen.capacity(), size_of::<Fingerprint>());
                bytes += mb;
                entries += me;
            }
        }
        (bytes, entries)
    }
}

/// The whole study: consumers, the shared buffer, file counters.
pub(super) struct Study {
    /// Sweep consumers (ascending average), then basic, then regression.
    pub consumers: Vec<Consumer>,
    /// Index of the detail consumer in `consumers`.
    pub detail: usize,
    algo: FingerprintAlgo,
    buf: Vec<u8>,
    pub files: u64,
    pub empty_files: u64,
    pub bytes: u64,
    /// Files skipped or cut short (`path: error`), at most `MAX_NOTES`.
    pub notes: Vec<String>,
    pub notes_total: u64,
}

impl Study {
    pub(super) fn new(opts: &AnalyzeOptions, tree: &Tree) -> Self {
        let buckets = opts.histogram_buckets;
        let mut consumers = Vec::new();
        let mut detail = 0;
        for avg in opts.sweep_sizes() {
            let s = ChunkSizes::fastcdc(avg);
            let cdc = FastCdcChunker::new(s.min as usize, s.avg as usize, s.max as usize);
            let mut c = Consumer::new(s, Cutter::Cdc(cdc), buckets);
            c.compression = opts.compression;
            if avg == opts.detail_avg {
                detail = consumers.len();
                c.index = Index::Counted(FpMap::default());
                c.schemes = Some((
                    Scheme::new(tree.type_labels.len()),
                    Scheme::new(tree.path_labels.len()),
                ));
            }
            consumers.push(c);
        }
        let r = opts.regression;
        let (min, avg, max) = (r.min as usize, r.avg as usize, r.max as usize);
        let basic = Cutter::Rabin(RabinChunker::new(min, avg, max));
        consumers.push(Consumer::new(r, basic, buckets));
        let regression = Cutter::Regression(RegressionChunker::new(min, avg, max));
        consumers.push(Consumer::new(r, regression, buckets));
        Self::with_consumers(consumers, detail, opts.fingerprint, 0)
    }

    /// A study over the given consumers; the buffer holds at least
    /// `min_buffer` bytes and four times the largest maximum chunk size.
    pub(super) fn with_consumers(
        consumers: Vec<Consumer>,
        detail: usize,
        algo: FingerprintAlgo,
        min_buffer: usize,
    ) -> Self {
        let largest = consumers
            .iter()
            .map(|c| c.cutter.max_size())
            .max()
            .unwrap_or(1);
        let min_buffer = if min_buffer == 0 {
            MIN_BUFFER
        } else {
            min_buffer
        };
        Study {
            consumers,
            detail,
            algo,
            buf: vec![0; (largest * 4).max(min_buffer)],
            files: 0,
            empty_files: 0,
            bytes: 0,
            notes: Vec::new(),
            notes_total: 0,
        }
    }

    /// Reads one file through every consumer. An open error skips the file;
    /// a read error ends it where it happened (the bytes read are counted);
    /// both are noted.
    pub(super) fn add_file(&mut self, entry: &FileEntry, progress: Option<&AtomicU64>) {
        let file = match File::open(&entry.path) {
            Ok(f) => f,
            Err(e) => {
                self.note(&entry.path, e);
                return;
            }
        };
        let ctx = FileCtx {
            type_part: entry.type_part,
            path_part: entry.path_part,
        };
        let (read, error) = self.add_reader(file, ctx, progress);
        if let Some(e) = error {
            self.note(
                &entry.path,
                format!("read error after {read} bytes (counted): {e}"),
            );
        }
        if let Some((by_type, by_path)) = &mut self.consumers[self.detail].schemes {
            by_type.parts[ctx.type_part as usize].files += 1;
            by_path.parts[ctx.path_part as usize].files += 1;
        }
        self.files += 1;
        self.empty_files += u64::from(read == 0);
    }

    fn note(&mut self, path: &std::path::Path, what: impl std::fmt::Display) {
        self.notes_total += 1;
        if self.notes.len() < super::MAX_NOTES {
            self.notes.push(format!("{}: {what}", path.display()));
        }
    }

    /// Streams `reader` through the consumers; returns the bytes read and
    /// the read error that ended it early, if any.
    fn add_reader(
        &mut self,
        mut reader: impl Read,
        ctx: FileCtx,
        progress: Option<&AtomicU64>,
    ) -> (u64, Option<std::io::Error>) {
        let (mut len, mut eof, mut read, mut error) = (0usize, false, 0u64, None);
        for c in &mut self.consumers {
            c.pos = 0;
        }
        loop {
            while len < self.buf.len() && !eof {
                match reader.read(&mut self.buf[len..]) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        len += n;
                        read += n as u64;
                        if let Some(p) = progress {
                            p.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        error = Some(e);
                        eof = true;
                    }
                }
            }
            let data = &self.buf[..len];
            let algo = self.algo;
            if len >= PARALLEL_BYTES {
                self.consumers
                    .par_iter_mut()
                    .for_each(|c| c.consume(data, eof, algo, ctx));
            } else {
                for c in &mut self.consumers {
                    c.consume(data, eof, algo, ctx);
                }
            }
            if eof {
                debug_assert!(self.consumers.iter().all(|c| c.pos == len));
                break;
            }
            let done = self.consumers.iter().map(|c| c.pos).min().unwrap_or(len);
            self.buf.copy_within(done..len, 0);
            len -= done;
            for c in &mut self.consumers {
                c.pos -= done;
            }
        }
        self.bytes += read;
        (read, error)
    }

    /// Test access: streams an in-memory file.
    #[cfg(test)]
    pub(super) fn add_bytes(&mut self, data: &[u8], type_part: u32, path_part: u32) {
        let ctx = FileCtx {
            type_part,
            path_part,
        };
        self.add_reader(data, ctx, None);
    }

    /// Fingerprint index memory over all consumers.
    pub(super) fn memory(&self) -> MemoryUse {
        let (bytes, entries) = self
            .consumers
            .iter()
            .map(Consumer::memory)
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        MemoryUse {
            index_bytes: bytes,
            index_entries: entries,
            bytes_per_entry: if entries == 0 {
                0.0
            } else {
                bytes as f64 / entries as f64
            },
        }
    }
}
