//! One backup stream (DDFS §4.2, Stream-Informed Segment Layout): its chunks
//! go through the shared dedup path and its new chunks are packed, in stream
//! order, into the stream's own open container; no other stream writes into
//! it. A full container is handed to the sealer thread, which writes it whole
//! and fsyncs it, and only then lets its fingerprints join the in-memory index
//! as "stored"; the stream meanwhile goes on hashing and packing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use crate::pipe::{Receiver, Sender};
use parking_lot::Mutex;
use rayon::prelude::*;

use crate::codec::ChunkCodec;
use cairn_chunk::{cut_points, ChunkerSpec};
use cairn_core::counters::bump;
use cairn_core::{ChunkKind, CompressionCodec, Counters, Error, Fingerprint, Result, TraceChunk};
use cairn_format::container::ContainerWriter;
use cairn_format::dir::BlobRef;

use super::rewrite::{self, Action, RewritePolicy};
use super::tree_builder::{NodeSink, TreeBuilder};
use crate::config::RepoConfig;
use crate::container_log::ContainerStore;
use crate::dedup::Dedup;
use crate::dedup::{choose, Decision, Location, LookupStrategy};

/// Below this many bytes a batch is hashed on the stream's own thread (a
/// quarter of it for compression, which is slower per byte). Handing a
/// small batch to the thread pool costs more than the work: the pool's idle
/// workers spin (`sched_yield`) before they sleep, so a tree of many small
/// files made tens of thousands of such calls, and under contention they
/// took CPU the backup needed (issue 12: 47,687 `sched_yield` calls for
/// 7,467 files in 3,200 directories before, 21,819 after; the rest came
/// from the channels, see `crate::pipe`).
const PARALLEL_MIN_BYTES: usize = 1 << 20;

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

/// One of the backup's sealer threads: writes the sealed containers it takes
/// from the shared queue, off the streams' threads (several sealers overlap
/// uploads to object storage; their containers may become durable in any
/// order, all of them before the commit). The first failure is kept; later
/// jobs are dropped unwritten.
pub fn run_sealer(shared: &Shared, jobs: Receiver<SealJob>) {
    for job in jobs {
        if shared.seal_error.lock().is_some() {
            continue;
        }
        let t = Instant::now();
        let id = job.writer.id();
        match shared.log.append(job.writer) {
            Ok(()) => shared.dedup.container_sealed(id),
            Err(e) => {
                *shared.seal_error.lock() = Some(e);
                shared.dedup.seal_failed();
            }
        }
        bump(&shared.phases.write_ns, elapsed_ns(t));
    }
}

/// What every stream of one backup shares.
pub struct Shared {
    pub cfg: RepoConfig,
    /// Fingerprints and encodes every chunk (`crate::codec`).
    pub codec: ChunkCodec,
    /// The repository's chunker, seeded in an encrypted repository.
    pub chunker: ChunkerSpec,
    pub dedup: Dedup,
    /// Inline, or deferred to the collector (`dedup::deferred`).
    pub dedup_mode: crate::dedup::deferred::DedupMode,
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
    /// Duplicates stored again by the rewrite scheme: chunks, raw and
    /// stored bytes (not counted as new).
    pub rewritten_chunks: AtomicU64,
    pub rewritten_raw_bytes: AtomicU64,
    pub rewritten_stored_bytes: AtomicU64,
    /// The rewrite scheme of this backup and what the previous one stored.
    pub rewrite: rewrite::RewriteConfig,
    pub history: Option<rewrite::History>,
    /// HAR's state where the scheme has HAR (`rewrite/har.rs`).
    pub har: Option<Arc<rewrite::har::HarState>>,
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
    fps: Vec<Fingerprint>,
    /// The lookup strategy (eager, or lazy with its buffer), and the chunks
    /// whose fingerprints wait in its buffer, by rank.
    lookup: Box<dyn LookupStrategy>,
    decisions: Vec<Decision>,
    held: HashMap<u64, NewChunk<'static>>,
    /// Content bytes in `held`.
    held_bytes: usize,
    /// The rewrite scheme (`None`: normal deduplication), the duplicates it
    /// holds by sequence number, the next sequence number, and the chunks
    /// this stream has rewritten (each is packed once).
    rewriter: Option<Box<dyn RewritePolicy>>,
    rw_held: HashMap<u64, NewChunk<'static>>,
    rw_seq: u64,
    rw_actions: Vec<Action>,
    rewritten: cairn_core::FpSet,
    /// Stored bytes of the chunks this stream has added so far (after
    /// dedup and compression): `backup -v` tells each file's share.
    added: std::cell::Cell<u64>,
}

/// Content a lazy stream holds at most while its fingerprints wait; beyond
/// it every bucket is read early. Bounds memory whatever the chunk sizes
/// (`buffer_fingerprints` alone would allow 8192 chunks of the maximum size).
const HELD_BYTES_MAX: usize = 64 << 20;

/// A chunk decided new, on its way into the open container.
struct NewChunk<'c> {
    fp: Fingerprint,
    kind: ChunkKind,
    level: u8,
    body: Body<'c>,
    /// A duplicate stored again by the rewrite scheme.
    rewrite: bool,
}

enum Body<'c> {
    /// Content, compressed when packed.
    Bytes(Cow<'c, [u8]>),
    /// A traced chunk: sizes only, packed payload-less.
    Sized { size: u32, stored_size: u32 },
}

impl NewChunk<'_> {
    /// Bytes of content held in memory (none for a traced chunk).
    fn content_len(&self) -> usize {
        match &self.body {
            Body::Bytes(b) => b.len(),
            Body::Sized { .. } => 0,
        }
    }

    /// Raw bytes.
    fn size(&self) -> u64 {
        match &self.body {
            Body::Bytes(b) => b.len() as u64,
            Body::Sized { size, .. } => *size as u64,
        }
    }

    fn into_owned(self) -> NewChunk<'static> {
        NewChunk {
            fp: self.fp,
            kind: self.kind,
            level: self.level,
            rewrite: self.rewrite,
            body: match self.body {
                Body::Bytes(b) => Body::Bytes(Cow::Owned(b.into_owned())),
                Body::Sized { size, stored_size } => Body::Sized { size, stored_size },
            },
        }
    }
}

/// Removes held chunk `rank` (lazy lookup has just decided it).
fn take_held(
    held: &mut HashMap<u64, NewChunk<'static>>,
    held_bytes: &mut usize,
    rank: u64,
) -> NewChunk<'static> {
    let c = held.remove(&rank).expect("held chunk");
    *held_bytes -= c.content_len();
    c
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
            fps: Vec::new(),
            lookup: choose::for_backup(shared.dedup_mode, &shared.cfg.index.lookup),
            decisions: Vec::new(),
            held: HashMap::new(),
            held_bytes: 0,
            rewriter: rewrite::for_config(
                &shared.rewrite,
                shared.cfg.container_size as u64,
                shared.history,
                shared.har.as_ref(),
            ),
            rw_held: HashMap::new(),
            rw_seq: 0,
            rw_actions: Vec::new(),
            rewritten: Default::default(),
            added: Default::default(),
        }
    }

    /// Stored bytes this stream has added to the repository so far.
    pub fn added_bytes(&self) -> u64 {
        self.added.get()
    }

    /// Fingerprints `chunks` into `self.fps`, in parallel when there is
    /// enough of it (see [`PARALLEL_MIN_BYTES`]).
    fn hash_all(&mut self, chunks: &[&[u8]]) {
        let t = Instant::now();
        let codec = &self.shared.codec;
        let bytes: usize = chunks.iter().map(|c| c.len()).sum();
        if bytes < PARALLEL_MIN_BYTES {
            self.fps.clear();
            self.fps.extend(chunks.iter().map(|c| codec.fingerprint(c)));
        } else {
            chunks
                .par_iter()
                .with_min_len(8)
                .map(|c| codec.fingerprint(c))
                .collect_into_vec(&mut self.fps);
        }
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
        let bodies = chunks.iter().map(|c| Body::Bytes(Cow::Borrowed(*c)));
        self.dedup_and_pack(kind, level, bodies.collect())?;
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
        let width = self.shared.cfg.fp_width();
        if let Some(c) = chunks.iter().find(|c| c.fp.len() != width) {
            return Err(Error::invalid(format!(
                "trace fingerprint {} is {} bytes, but this repository's fingerprints are {width} bytes",
                c.fp,
                c.fp.len()
            )));
        }
        self.fps.clear();
        self.fps.extend(chunks.iter().map(|c| c.fp));
        let bodies = chunks.iter().map(|c| Body::Sized {
            size: c.size,
            stored_size: c.stored_size,
        });
        self.dedup_and_pack(kind, level, bodies.collect())?;
        Ok(&self.fps)
    }

    /// Decides which of `self.fps` (with `bodies`) are new and packs those.
    /// Eager lookup decides the whole batch now; lazy lookup decides some now
    /// and holds the rest, packing earlier held chunks it resolves meanwhile.
    fn dedup_and_pack(&mut self, kind: ChunkKind, level: u8, bodies: Vec<Body<'_>>) -> Result<()> {
        // A safe point: what is packed so far is in containers no index
        // names yet, as after a crash.
        crate::interrupt::check(super::not_committed)?;
        let sh = self.shared;
        let t = Instant::now();
        bump(&sh.chunks, bodies.len() as u64);
        if kind == ChunkKind::Data {
            bump(&sh.data_chunks, bodies.len() as u64);
        }
        fn chunk_of<'c>(
            fp: Fingerprint,
            kind: ChunkKind,
            level: u8,
            body: Body<'c>,
        ) -> NewChunk<'c> {
            NewChunk {
                fp,
                kind,
                level,
                body,
                rewrite: false,
            }
        }
        let chunk = |fp, body| chunk_of(fp, kind, level, body);
        let mut new: Vec<NewChunk<'_>> = Vec::new();
        let base = self.lookup.next_rank();
        self.lookup
            .submit(&sh.dedup, &self.fps, &mut self.decisions)?;
        bump(&sh.phases.dedup_ns, elapsed_ns(t));
        let mut bodies: Vec<Option<Body<'_>>> = bodies.into_iter().map(Some).collect();
        let rewriting = self.rewriter.is_some() && kind == ChunkKind::Data && level == 0;
        for (i, body) in bodies.iter_mut().enumerate() {
            let d = self.decisions[i];
            if rewriting {
                if let Decision::Decided(loc) = d {
                    let c = chunk(self.fps[i], body.take().expect("body"));
                    self.rewrite_step(c, loc, &mut new);
                }
            } else if d == Decision::Decided(Location::New) {
                new.push(chunk(self.fps[i], body.take().expect("body")));
            }
        }
        // Buffered chunks decided meanwhile: of this batch (their bodies are
        // still here) or of earlier ones (held).
        for (rank, loc) in self.lookup.take_resolved() {
            let held = match rank.checked_sub(base) {
                Some(i) if (i as usize) < bodies.len() => {
                    let i = i as usize;
                    chunk(self.fps[i], bodies[i].take().expect("body"))
                }
                _ => take_held(&mut self.held, &mut self.held_bytes, rank),
            };
            if loc.is_new() {
                new.push(held);
            }
        }
        for (i, d) in self.decisions.iter().enumerate() {
            if let (Decision::Pending(rank), Some(body)) = (*d, bodies[i].take()) {
                let held = chunk(self.fps[i], body).into_owned();
                self.held_bytes += held.content_len();
                self.held.insert(rank, held);
            }
        }
        self.pack_all(new)?;
        if self.held_bytes > HELD_BYTES_MAX {
            self.flush_lazy()?;
        }
        Ok(())
    }

    /// Hands a data chunk and its dedup decision to the rewrite scheme:
    /// a new chunk joins `new` now, a held duplicate waits, and every
    /// rewrite decided meanwhile joins `new` in decision order.
    fn rewrite_step<'c>(&mut self, c: NewChunk<'c>, loc: Location, new: &mut Vec<NewChunk<'c>>) {
        let rw = self.rewriter.as_mut().expect("a rewrite scheme");
        let seq = self.rw_seq;
        self.rw_seq += 1;
        let hold = rw.push(seq, c.fp, c.size(), loc, &mut self.rw_actions);
        if loc.is_new() {
            new.push(c);
        } else if hold {
            self.rw_held.insert(seq, c.into_owned());
        }
        self.apply_rewrites(new);
    }

    /// Applies the rewrite scheme's decisions: rewritten chunks join `new`
    /// (once per chunk), released ones are dropped.
    fn apply_rewrites<'c>(&mut self, new: &mut Vec<NewChunk<'c>>) {
        for a in std::mem::take(&mut self.rw_actions) {
            match a {
                Action::Rewrite(seq) => {
                    let mut c = self.rw_held.remove(&seq).expect("held duplicate");
                    if self.rewritten.insert(c.fp) {
                        c.rewrite = true;
                        new.push(c);
                    }
                }
                Action::Release(seq) => {
                    self.rw_held.remove(&seq).expect("held duplicate");
                }
            }
        }
    }

    /// Resolves every held chunk (lazy lookup's buffer) and packs the new ones.
    fn flush_lazy(&mut self) -> Result<()> {
        let t = Instant::now();
        self.lookup.flush(&self.shared.dedup)?;
        bump(&self.shared.phases.dedup_ns, elapsed_ns(t));
        let mut new = Vec::new();
        for (rank, loc) in self.lookup.take_resolved() {
            let held = take_held(&mut self.held, &mut self.held_bytes, rank);
            if loc.is_new() {
                new.push(held);
            }
        }
        debug_assert!(self.held.is_empty() && self.held_bytes == 0);
        debug_assert_eq!(
            self.lookup.buffered(),
            0,
            "a flush resolves every held chunk"
        );
        self.pack_all(new)
    }

    /// Compresses the new chunks' contents in parallel, then packs all of
    /// them in the given order.
    fn pack_all(&mut self, new: Vec<NewChunk<'_>>) -> Result<()> {
        if new.is_empty() {
            return Ok(());
        }
        let sh = self.shared;
        let t = Instant::now();
        let codec = &sh.codec;
        let compress = |c: &NewChunk<'_>| match &c.body {
            Body::Bytes(b) => {
                let mut out = Vec::new();
                let used = codec.encode(b, &mut out);
                Some((used, out))
            }
            Body::Sized { .. } => None,
        };
        let bytes: usize = new.iter().map(NewChunk::content_len).sum();
        let compressed: Vec<Option<(CompressionCodec, Vec<u8>)>> = if bytes < PARALLEL_MIN_BYTES / 4
        {
            new.iter().map(compress).collect()
        } else {
            new.par_iter().map(compress).collect()
        };
        bump(&sh.phases.compress_ns, elapsed_ns(t));
        for (c, packed) in new.into_iter().zip(compressed) {
            match (c.body, packed) {
                (Body::Bytes(raw), Some((codec, stored))) => {
                    let raw_len = raw.len() as u32;
                    self.place(stored.len())?
                        .push(c.fp, c.kind, c.level, codec, raw_len, &stored);
                    self.count_stored(c.kind, c.rewrite, raw_len, stored.len());
                }
                (Body::Sized { size, stored_size }, _) => {
                    let codec = sh.codec.codec_for_sizes(size, stored_size);
                    self.place(stored_size as usize)?.push_absent(
                        c.fp,
                        c.kind,
                        c.level,
                        codec,
                        size,
                        stored_size,
                    );
                    self.count_stored(c.kind, c.rewrite, size, stored_size as usize);
                }
                (Body::Bytes(_), None) => unreachable!("contents are always compressed"),
            }
        }
        Ok(())
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
        if self.writer.is_none() {
            let id = sh.log.allocate()?;
            sh.dedup.container_opened(id);
            if let Some(rw) = self.rewriter.as_mut() {
                rw.container_opened(id);
            }
            self.writer = Some(ContainerWriter::new(
                id,
                sh.cfg.fp_width(),
                sh.cfg.container_size as usize,
            ));
        }
        Ok(self.writer.as_mut().expect("opened above"))
    }

    fn count_stored(&self, kind: ChunkKind, rewrite: bool, raw_len: u32, stored_len: usize) {
        let sh = self.shared;
        self.added.set(self.added.get() + stored_len as u64);
        if rewrite {
            bump(&sh.rewritten_chunks, 1);
            bump(&sh.rewritten_raw_bytes, raw_len as u64);
            bump(&sh.rewritten_stored_bytes, stored_len as u64);
            bump(&sh.counters.chunks_written, 1);
            return;
        }
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

    /// Ends the stream: resolves whatever lazy lookup still holds, then
    /// hands the open container to the sealer.
    pub fn finish(&mut self) -> Result<()> {
        self.flush_lazy()?;
        if let Some(rw) = self.rewriter.as_mut() {
            rw.finish(&mut self.rw_actions);
            let mut new = Vec::new();
            self.apply_rewrites(&mut new);
            debug_assert!(
                self.rw_held.is_empty(),
                "the scheme decides every held chunk"
            );
            self.pack_all(new)?;
        }
        self.seal()
    }

    /// Hands the open container to the sealer. Its chunks are placed in
    /// the in-memory index now, on the stream's own thread, so dedup
    /// decisions and counters never depend on how far the sealer has got;
    /// the sealer only makes it durable.
    fn seal(&mut self) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        self.shared.dedup.container_closed(
            writer.id(),
            writer.descriptors().iter().map(|d| d.fp).collect(),
        );
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
        tx.send(job).map_err(|_| failed())?;
        // After the send: the merge may wait for this very container.
        self.shared.dedup.bound_memory_part().map(|_| ())
    }

    /// Stores an in-memory blob (a directory listing) as `Meta` L0 chunks cut by
    /// the repository's chunker, plus its tree nodes.
    pub fn store_blob(&mut self, bytes: &[u8]) -> Result<Option<BlobRef>> {
        let mut chunker = self.shared.chunker.build();
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
