//! One backup stream (DDFS §4.2, Stream-Informed Segment Layout): its chunks
//! go through the shared dedup path and its new chunks are packed, in stream
//! order, into the stream's own open container; no other stream writes into
//! it. A full container is sealed (written whole and fsynced) before its
//! fingerprints join the in-memory index as "stored".

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use cairn_chunk::{cut_points, fingerprint, new_chunker};
use cairn_core::counters::bump;
use cairn_core::{ChunkKind, CompressionCodec, ContainerId, Counters, Fingerprint, Result};
use cairn_format::compress::compress;
use cairn_format::container::ContainerWriter;
use cairn_format::dir::BlobRef;

use super::tree_builder::{NodeSink, TreeBuilder};
use crate::config::RepoConfig;
use crate::container_log::ContainerLog;
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

/// What every stream of one backup shares.
pub struct Shared {
    pub cfg: RepoConfig,
    pub dedup: Dedup,
    pub log: Arc<ContainerLog>,
    pub counters: Arc<Counters>,
    pub phases: PhaseTimes,
    /// New chunks' raw and stored bytes, for the snapshot summary.
    pub new_raw_bytes: AtomicU64,
    pub new_stored_bytes: AtomicU64,
    pub chunks: AtomicU64,
    pub new_chunks: AtomicU64,
}

pub struct Stream<'a> {
    shared: &'a Shared,
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
            writer: None,
            is_new: Vec::new(),
            fps: Vec::new(),
        }
    }

    /// Fingerprints `chunks` in parallel into `self.fps`.
    fn hash_all(&mut self, chunks: &[&[u8]]) {
        let t = Instant::now();
        let algo = self.shared.cfg.fingerprint;
        chunks
            .par_iter()
            .with_min_len(8)
            .map(|c| fingerprint(algo, c))
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

    fn pack(
        &mut self,
        fp: Fingerprint,
        kind: ChunkKind,
        level: u8,
        codec: CompressionCodec,
        raw_len: u32,
        stored: &[u8],
    ) -> Result<()> {
        if self
            .writer
            .as_ref()
            .is_some_and(|w| !w.would_fit(stored.len()))
        {
            self.seal()?;
        }
        let sh = self.shared;
        let writer = self.writer.get_or_insert_with(|| {
            let id = sh.log.allocate();
            sh.dedup.container_opened(id);
            ContainerWriter::new(
                id,
                sh.cfg.fingerprint.width(),
                sh.cfg.container_size as usize,
            )
        });
        writer.push(fp, kind, level, codec, raw_len, stored);
        bump(&sh.new_chunks, 1);
        bump(&sh.new_raw_bytes, raw_len as u64);
        bump(&sh.new_stored_bytes, stored.len() as u64);
        bump(&sh.counters.chunks_written, 1);
        Ok(())
    }

    /// Seals the open container: durable first, then indexed in memory.
    pub fn seal(&mut self) -> Result<Option<ContainerId>> {
        let Some(writer) = self.writer.take() else {
            return Ok(None);
        };
        let id = writer.id();
        let fps: Vec<Fingerprint> = writer.descriptors().iter().map(|d| d.fp).collect();
        let bytes = writer.finish();
        let t = Instant::now();
        self.shared.log.append(id, &bytes)?;
        bump(&self.shared.phases.write_ns, elapsed_ns(t));
        self.shared.dedup.container_sealed(id, fps.into_iter());
        Ok(Some(id))
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
