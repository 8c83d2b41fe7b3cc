//! Many writers, one repository: what concurrency costs deduplication, and
//! what reconciliation gives back (`cairn sim --writers N`, issue 33).
//!
//! Model (`docs/concurrency.md`): each writer deduplicates against the
//! repository's index as of its start plus its own new chunks, its
//! *partition* in the sense of `004_62bf1a5ddd5ed253.txt` (El-Shimi et al.,
//! "Primary Data Deduplication – Large Scale Study and System Design"),
//! slides "Data Partitioning and Reconciliation" and "Reconciliation of Data
//! Partitions": phase 1 deduplicates within each partition, phase 2
//! *reconciles* the duplicates across partitions. Here a partition is one
//! writer's backup of one round, and reconciliation is what cairn's garbage
//! collection does to the copies two writers stored at the same time: it
//! keeps one copy per fingerprint, the canonical one (the highest container
//! id, so the newest), and drops the others; snapshots, which name chunks by
//! fingerprint, do not change. `crate::partition` studies 004's phase 2 with
//! its `k`-way passes over static partitions; this module replays the
//! partitions as they arise over time and reconciles all of them (004's
//! `k = P`).
//!
//! # The replay ([`Replay`])
//!
//! The inputs (trace files or workload generations, in order) are cut into
//! **backup streams** by a [`Unit`] ([`streams`] has the rule), giving one
//! sequence `S_0, S_1, ...`. Stream `S_i` belongs to writer `i mod N` in
//! round `i / N`: in each round every writer backs up its next stream.
//! Every writer of a round deduplicates against the repository's fingerprint
//! set as it was at the start of the round plus the chunks it stored itself
//! in this round; at the end of the round every writer's new chunks join the
//! repository. A chunk that `c >= 2` writers of one round store new is stored
//! `c` times: `c - 1` copies are the dedup **lost to concurrency**.
//!
//! In the same pass the same streams are replayed **one after another**
//! (`S_0`, `S_1`, ... against one growing fingerprint set, i.e. `N = 1` on
//! the same order of streams), with a set of its own.
//!
//! **Reconciliation** keeps each fingerprint once. The canonical copy is the
//! newest: in a round, the copy of the highest-numbered writer that stored
//! it (writers take container ids in blocks, so this stands for "the highest
//! container id"; which copy is kept decides only the per-writer
//! `kept_chunks`, never the totals).
//!
//! # Invariants (tested, `tests.rs`)
//!
//! * logical bytes = the sum over writers = the sum over rounds;
//! * before reconciliation = after reconciliation + lost, in bytes and in
//!   chunks; before >= after;
//! * after reconciliation == one after another, **exactly**, in chunks,
//!   bytes and compressed bytes: both hold each fingerprint once, at the size
//!   of its first occurrence in stream order (a fingerprint given several
//!   sizes, as FSL's 48-bit hashes can be, counts at that size for every
//!   copy, as in `crate::partition`);
//! * `N = 1` loses nothing; `N` writers backing up identical streams store
//!   each new chunk `N` times before reconciliation and once after.
//!
//! # What is not modelled (chunk placement)
//!
//! The model counts fingerprints, not containers, so "after ==
//! one after another" holds exactly here. In a repository the two differ by
//! where chunks land: (1) rewrite schemes (capping, FCRC, LBW) store some
//! duplicates again, and differently when a writer sees a smaller index;
//! (2) garbage collection reclaims whole containers, so a non-canonical copy
//! in a container it does not select (liveness above its threshold) stays
//! until a later collection copies that container forward; (3) containers
//! are filled per writer, so the last partly-filled container of each
//! writer's backup adds padding and metadata per writer, not per run.

pub mod streams;

#[cfg(test)]
mod tests;

use serde::Serialize;

use cairn_core::{FpMap, FpSet, Result, TraceChunk};

use crate::sim::GenerationInput;
pub use streams::{split_streams, Stream, Unit};

/// Chunks, raw bytes and bytes after local compression held by a set of
/// chunk copies, with the dedup ratio they give (logical / raw bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stored {
    pub chunks: u64,
    pub bytes: u64,
    pub compressed_bytes: u64,
    pub dedup_ratio: f64,
}

impl Stored {
    fn add(&mut self, copies: u64, size: u32, stored: u32) {
        self.chunks += copies;
        self.bytes += copies * size as u64;
        self.compressed_bytes += copies * stored as u64;
    }

    fn with_ratio(mut self, logical: u64) -> Self {
        self.dedup_ratio = ratio(logical, self.bytes);
        self
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// One writer's share of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WriterRow {
    pub writer: usize,
    pub streams: u64,
    pub chunks: u64,
    pub logical_bytes: u64,
    /// Copies this writer stored (new to the repository and to itself).
    pub stored_chunks: u64,
    pub stored_bytes: u64,
    /// Of those, the copies reconciliation keeps (canonical).
    pub kept_chunks: u64,
    pub kept_bytes: u64,
}

/// One round: the streams `round * N ..` backed up at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RoundRow {
    pub round: usize,
    pub streams: u64,
    pub logical_bytes: u64,
    /// Bytes the round's writers stored (before reconciliation).
    pub stored_bytes: u64,
    /// Bytes the same streams store run one after another.
    pub one_after_another_bytes: u64,
    pub lost_chunks: u64,
    pub lost_bytes: u64,
}

/// What [`Replay::finish`] and [`run`] report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WritersReport {
    pub writers: usize,
    /// The [`Unit`] streams were cut by (empty when fed by hand).
    pub unit: String,
    pub streams: u64,
    pub rounds: u64,
    pub chunks: u64,
    pub logical_bytes: u64,
    /// Stored by the N writers, duplicates of one round included.
    pub before_reconciliation: Stored,
    /// Stored by the same streams backed up one after another (N = 1).
    pub one_after_another: Stored,
    /// `before_reconciliation` with each fingerprint kept once.
    pub after_reconciliation: Stored,
    /// Copies concurrency added: before - after reconciliation.
    pub lost_chunks: u64,
    pub lost_bytes: u64,
    pub lost_compressed_bytes: u64,
    /// `lost_bytes / one_after_another.bytes`.
    pub lost_fraction: f64,
    /// Most copies of one chunk stored in one round.
    pub max_copies: u64,
    pub per_writer: Vec<WriterRow>,
    pub per_round: Vec<RoundRow>,
}

/// A chunk new to the repository in the current round.
struct NewChunk {
    size: u32,
    stored: u32,
    copies: u32,
    /// The highest-numbered writer holding a copy: the canonical one.
    newest: u32,
}

/// The round-by-round replay of the module doc. Feed streams in order with
/// [`Replay::push_stream`], then [`Replay::finish`].
pub struct Replay {
    writers: usize,
    /// Fingerprints in the repository at the start of the current round.
    repo: FpSet,
    /// Chunks stored new in the current round.
    round_new: FpMap<NewChunk>,
    /// The one-after-another replay's fingerprint set.
    sequential: FpSet,
    one_after_another: Stored,
    before: Stored,
    after: Stored,
    lost: Stored,
    max_copies: u64,
    streams: u64,
    chunks: u64,
    logical: u64,
    per_writer: Vec<WriterRow>,
    per_round: Vec<RoundRow>,
    /// Streams pushed into the current round.
    in_round: usize,
}

impl Replay {
    /// A replay with `writers` writers (at least 1).
    pub fn new(writers: usize) -> Result<Self> {
        if writers == 0 || writers > u32::MAX as usize {
            return Err(cairn_core::Error::invalid(
                "writers: the number of writers must be between 1 and 2^32 - 1",
            ));
        }
        Ok(Replay {
            writers,
            repo: FpSet::default(),
            round_new: FpMap::default(),
            sequential: FpSet::default(),
            one_after_another: Stored::default(),
            before: Stored::default(),
            after: Stored::default(),
            lost: Stored::default(),
            max_copies: 0,
            streams: 0,
            chunks: 0,
            logical: 0,
            per_writer: (0..writers)
                .map(|writer| WriterRow {
                    writer,
                    ..Default::default()
                })
                .collect(),
            per_round: Vec::new(),
            in_round: 0,
        })
    }

    /// Backs up the next stream: writer `i mod N` of round `i / N`, `i` the
    /// number of streams pushed before.
    pub fn push_stream<'a>(&mut self, chunks: impl IntoIterator<Item = &'a TraceChunk>) {
        if self.in_round == 0 {
            self.per_round.push(RoundRow {
                round: self.per_round.len(),
                ..Default::default()
            });
        }
        let w = self.in_round;
        let round = self.per_round.last_mut().expect("a round was opened");
        let writer = &mut self.per_writer[w];
        round.streams += 1;
        writer.streams += 1;
        self.streams += 1;
        // The writer's own new chunks of this round (its partition's part
        // beyond the repository as of the round's start).
        let mut own = FpSet::default();
        for c in chunks {
            self.chunks += 1;
            writer.chunks += 1;
            let size = c.size as u64;
            self.logical += size;
            writer.logical_bytes += size;
            round.logical_bytes += size;
            if self.sequential.insert(c.fp) {
                self.one_after_another.add(1, c.size, c.stored_size);
                round.one_after_another_bytes += size;
            }
            if self.repo.contains(&c.fp) || !own.insert(c.fp) {
                continue;
            }
            let e = self.round_new.entry(c.fp).or_insert(NewChunk {
                size: c.size,
                stored: c.stored_size,
                copies: 0,
                newest: 0,
            });
            e.copies += 1;
            e.newest = w as u32;
            writer.stored_chunks += 1;
            writer.stored_bytes += e.size as u64;
            round.stored_bytes += e.size as u64;
        }
        self.in_round += 1;
        if self.in_round == self.writers {
            self.end_round();
        }
    }

    /// Every writer's new chunks join the repository.
    fn end_round(&mut self) {
        let Some(round) = self.per_round.last_mut() else {
            return;
        };
        for (fp, e) in self.round_new.drain() {
            let copies = e.copies as u64;
            self.before.add(copies, e.size, e.stored);
            self.after.add(1, e.size, e.stored);
            self.lost.add(copies - 1, e.size, e.stored);
            round.lost_chunks += copies - 1;
            round.lost_bytes += (copies - 1) * e.size as u64;
            self.max_copies = self.max_copies.max(copies);
            let kept = &mut self.per_writer[e.newest as usize];
            kept.kept_chunks += 1;
            kept.kept_bytes += e.size as u64;
            self.repo.insert(fp);
        }
        self.in_round = 0;
    }

    /// Ends the last (possibly partial) round and reports.
    pub fn finish(mut self) -> WritersReport {
        if self.in_round > 0 {
            self.end_round();
        }
        let logical = self.logical;
        WritersReport {
            writers: self.writers,
            unit: String::new(),
            streams: self.streams,
            rounds: self.per_round.len() as u64,
            chunks: self.chunks,
            logical_bytes: logical,
            before_reconciliation: self.before.with_ratio(logical),
            one_after_another: self.one_after_another.with_ratio(logical),
            after_reconciliation: self.after.with_ratio(logical),
            lost_chunks: self.lost.chunks,
            lost_bytes: self.lost.bytes,
            lost_compressed_bytes: self.lost.compressed_bytes,
            lost_fraction: ratio(self.lost.bytes, self.one_after_another.bytes),
            max_copies: self.max_copies,
            per_writer: self.per_writer,
            per_round: self.per_round,
        }
    }
}

/// Options of [`run`].
#[derive(Clone, Copy, Debug)]
pub struct WritersOptions {
    pub writers: usize,
    pub unit: Unit,
}

/// Replays `inputs` (in order) with `opts.writers` writers: each input is
/// cut into streams by `opts.unit`, the streams are dealt round-robin.
pub fn run(inputs: &[GenerationInput], opts: &WritersOptions) -> Result<WritersReport> {
    if inputs.is_empty() {
        return Err(cairn_core::Error::invalid(
            "nothing to simulate: give trace files or --workload",
        ));
    }
    let mut replay = Replay::new(opts.writers)?;
    for (g, input) in inputs.iter().enumerate() {
        let (mut src, _) = input.open()?;
        for s in split_streams(&mut *src, &input.name(g), opts.unit)? {
            replay.push_stream(&s.chunks);
        }
    }
    let mut report = replay.finish();
    report.unit = opts.unit.name().into();
    Ok(report)
}
