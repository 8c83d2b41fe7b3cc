//! One backup stream (DDFS §4.2, Stream-Informed Segment Layout): its chunks
//! go through the shared dedup path and its new chunks are packed, in stream
//! order, into the stream's own open container; no other stream writes into
//! it. A full container is handed to the sealer thread, which writes it whole
//! and fsyncs it, and only then lets its fingerprints join the in-memory index
//! as "stored"; the stream meanwhile goes on hashing and packing.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use rayon::prelude::*;

use cairn_chunk::{cut_points, new_chunker};
use cairn_core::counters::bump;
use cairn_core::{ChunkKind, CompressionCodec, Counters, Fingerprint, Result, TraceChunk};
use cairn_format::compress::compress;
use cairn_format::container::ContainerWriter;
use cairn_format::dir::BlobRef;

use super::tree_builder::{NodeSink, TreeBuilder};
use crate::config::RepoConfig;
use crate::container_log::ContainerStore;
use crate::dedup::Dedup;

/// Wall time spent per pipeline phase, nanoseconds, summed over streams.
#[derive(Debug, Default)]
pub struct PhaseTimes {
    pub read_chunk_ns: AtomicU64,
    pub hash_ns: AtomicU64,
    pub dedup_ns: AtomicU64,
    pub compress_ns: AtomicU64,
    pub write_ns: AtomicU64,
}

/// A full container on its way to disk.
pub struct SealJob {
    pub writer: ContainerWriter,
}

/// Writes sealed containers in the order handed over, off the streams'
/// threads. The first failure is kept; later jobs are dropped unwritten.
pub fn run_sealer(shared: &Shared, jobs: Receiver<SealJob>) {
    for job in jobs {
        if shared.seal_error.lock().is_some() {
            continue;
        }
        let t = Instant::now();
        let id = job.writer.id();
        let fps: Vec<Fingerprint> = job.writer.descriptors().iter().map(|d| d.fp).collect();
        match shared.log.append(job.writer) {
            Ok(()) => shared.dedup.container_sealed(id, fps.into_iter()),
            Err(e) => *shared.seal_error.lock() = Some(e),
        }
        bump(&shared.phases.write_ns, elapsed_ns(t));
    }
}

/// What every stream of one backup shares.
pub struct Shared {
    pub cfg: RepoConfig,
    pub dedup: Dedup,
    pub log: Arc<dyn ContainerStore>,
    pub counters: Arc<Counters>,
    pub phases: PhaseTimes,
    /// New chunks' raw and stored bytes, for the snapshot summary.
    pub new_raw_bytes: AtomicU64,
    pub new_stored_bytes: AtomicU64,
    pub chunks: AtomicU64,
    pub new_chunks: AtomicU64,
    pub data_chunks: AtomicU64,
    pub new_data_chunks: AtomicU64,
    pub new_data_raw_bytes: AtomicU64,
    pub new_data_stored_bytes: AtomicU64,
    /// Hand-over to the sealer thread; `None` once the backup closes it.
    pub seal_tx: Mutex<Option<Sender<SealJob>>>,
    /// The sealer's first failure (the backup's error if there is one).
    pub seal_error: Mutex<Option<cairn_core::Error>>,
}

impl Shared {
    /// No more containers will be sealed: the sealer ends once streams drop theirs.
    pub fn close_sealer(&self) {
        self.seal_tx.lock().take();
    }
}

pub struct Stream<'a> {
    shared: &'a Shared,
    seal_tx: Option<Sender<SealJob>>,
    writer: Option<ContainerWriter>,
    is_new: Vec<bool>,
    fps: Vec<Fingerprint>,
}

fn elapsed_ns(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

impl<'a> Stream<'a> {
    pub fn new(shared: &'a Shared) -> Self {
        Stream {
            shared,
            seal_tx: shared.seal_tx.lock().clone(),
            writer: None,
            is_new: Vec::new(),
            fps: Vec::new(),
        }
    }

    /// Fingerprints `chunks` in parallel into `self.fps`.
    fn hash_all(&mut self, chunks: &[&[u8]]) {
        let t = Instant::now();
        let fingerprinter = self.shared.cfg.fingerprinter();
        chunks
            .par_iter()
            .with_min_len(8)
            .map(|c| fingerprinter.of(c))
            .collect_into_vec(&mut self.fps);
        bump(&self.shared.phases.hash_ns, elapsed_ns(t));
    }

    /// Stores a sequence of chunks of one kind/level: fingerprint, dedup,
    /// compress the new ones in parallel, pack them in order. Returns the
    /// fingerprints (in `self.fps`, valid until the next call).
    pub fn store_chunks(
        &mut self,
        kind: ChunkKind,
        level: u8,
        chunks: &[&[u8]],
    ) -> Result<&[Fingerprint]> {
        self.hash_all(chunks);
        let sh = self.shared;
        let t = Instant::now();
        sh.dedup.resolve_batch(&self.fps, &mut self.is_new)?;
        bump(&sh.phases.dedup_ns, elapsed_ns(t));
        bump(&sh.chunks, chunks.len() as u64);
        if kind == ChunkKind::Data {
            bump(&sh.data_chunks, chunks.len() as u64);
        }

        let new_idx: Vec<usize> = (0..chunks.len()).filter(|&i| self.is_new[i]).collect();
        if !new_idx.is_empty() {
            let t = Instant::now();
            let ccfg = sh.cfg.compression;
            let compressed: Vec<(CompressionCodec, Vec<u8>)> = new_idx
                .par_iter()
                .map(|&i| {
                    let mut out = Vec::new();
                    let codec = compress(&ccfg, chunks[i], &mut out);
                    (codec, out)
                })
                .collect();
            bump(&sh.phases.compress_ns, elapsed_ns(t));
            for (&i, (codec, stored)) in new_idx.iter().zip(compressed) {
                self.pack(
                    self.fps[i],
                    kind,
                    level,
                    codec,
                    chunks[i].len() as u32,
                    &stored,
                )?;
            }
        }
        Ok(&self.fps)
    }

    /// Stores chunks known by fingerprint and sizes only (a trace): the same
    /// dedup path, packed as payload-less descriptors of their stored size.
    pub fn store_fingerprinted(
        &mut self,
        kind: ChunkKind,
        level: u8,
        chunks: &[TraceChunk],
    ) -> Result<&[Fingerprint]> {
        let sh = self.shared;
        self.fps.clear();
        self.fps.extend(chunks.iter().map(|c| c.fp));
        let t = Instant::now();
        sh.dedup.resolve_batch(&self.fps, &mut self.is_new)?;
        bump(&sh.phases.dedup_ns, elapsed_ns(t));
        bump(&sh.chunks, chunks.len() as u64);
        if kind == ChunkKind::Data {
            bump(&sh.data_chunks, chunks.len() as u64);
        }
        let codec = sh.cfg.compression.codec;
        for (i, c) in chunks.iter().enumerate() {
            if self.is_new[i] {
                let codec = if c.stored_size < c.size {
                    codec
                } else {
                    CompressionCodec::None
                };
                self.place(c.stored_size as usize)?.push_absent(
                    c.fp,
                    kind,
                    level,
                    codec,
                    c.size,
                    c.stored_size,
                );
                self.count_new(kind, c.size, c.stored_size as usize);
            }
        }
        Ok(&self.fps)
    }

    /// The open container, sealing the current one first if `stored_len`
    /// more bytes would not fit.
    fn place(&mut self, stored_len: usize) -> Result<&mut ContainerWriter> {
        if self
            .writer
            .as_ref()
            .is_some_and(|w| !w.would_fit(stored_len))
        {
            self.seal()?;
        }
        let sh = self.shared;
        Ok(self.writer.get_or_insert_with(|| {
            let id = sh.log.allocate();
            sh.dedup.container_opened(id);
            ContainerWriter::new(id, sh.cfg.fp_width(), sh.cfg.container_size as usize)
        }))
    }

    fn count_new(&self, kind: ChunkKind, raw_len: u32, stored_len: usize) {
        let sh = self.shared;
        if kind == ChunkKind::Data {
            bump(&sh.new_data_chunks, 1);
            bump(&sh.new_data_raw_bytes, raw_len as u64);
            bump(&sh.new_data_stored_bytes, stored_len as u64);
        }
        bump(&sh.new_chunks, 1);
        bump(&sh.new_raw_bytes, raw_len as u64);
        bump(&sh.new_stored_bytes, stored_len as u64);
        bump(&sh.counters.chunks_written, 1);
    }

    fn pack(
        &mut self,
        fp: Fingerprint,
        kind: ChunkKind,
        level: u8,
        codec: CompressionCodec,
        raw_len: u32,
        stored: &[u8],
    ) -> Result<()> {
        self.place(stored.len())?
            .push(fp, kind, level, codec, raw_len, stored);
        self.count_new(kind, raw_len, stored.len());
        Ok(())
    }

    /// Hands the open container to the sealer (durable first, then indexed
    /// in memory, both on the sealer thread).
    pub fn seal(&mut self) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        let failed = || {
            cairn_core::Error::io(
                "sealing a container",
                std::io::Error::other("an earlier container write failed"),
            )
        };
        if self.shared.seal_error.lock().is_some() {
            return Err(failed());
        }
        let job = SealJob { writer };
        let tx = self.seal_tx.as_ref().ok_or_else(failed)?;
        tx.send(job).map_err(|_| failed())
    }

    /// Stores an in-memory blob (a directory listing) as `Meta` L0 chunks cut by
    /// the repository's chunker, plus its tree nodes.
    pub fn store_blob(&mut self, bytes: &[u8]) -> Result<Option<BlobRef>> {
        let mut chunker = new_chunker(&self.shared.cfg.chunker);
        let mut ends = Vec::new();
        cut_points(chunker.as_mut(), bytes, &mut ends);
        let mut start = 0;
        let chunks: Vec<&[u8]> = ends
            .iter()
            .map(|&e| {
                let c = &bytes[start..e];
                start = e;
                c
            })
            .collect();
        let fps = self.store_chunks(ChunkKind::Meta, 0, &chunks)?.to_vec();
        let mut tree = TreeBuilder::new(&self.shared.cfg.tree);
        for (fp, c) in fps.iter().zip(&chunks) {
            tree.push_leaf(*fp, c.len() as u64, self)?;
        }
        tree.finish(self)
    }
}

impl NodeSink for Stream<'_> {
    fn store_node(&mut self, level: u8, bytes: &[u8]) -> Result<Fingerprint> {
        Ok(self.store_chunks(ChunkKind::Tree, level, &[bytes])?[0])
    }
}

impl Stream<'_> {
    pub fn tree_config(&self) -> &crate::config::TreeConfig {
        &self.shared.cfg.tree
    }
}
