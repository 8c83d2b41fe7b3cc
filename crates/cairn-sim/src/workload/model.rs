//! The generators' shared machinery: chunk identities, their attributes, and
//! run-length sequences edited generation by generation.
//!
//! Both generators follow the same shape: a stream (DDFS synthetic backup
//! stream, `001_3652cceaf162c5a1.txt` §5.3) or a file lineage (the GC
//! paper's load generator, `003_ea5fccc485a97c5d.txt` §4.2) is a sequence of
//! chunk *identities*, and each generation is "a somewhat modified copy of the
//! preceding generation": runs of chunks deleted, runs moved elsewhere
//! (reordering), and runs of brand-new chunks inserted.
//!
//! * A chunk identity is a `u64`; a generator allocates fresh identities from
//!   a per-stream counter (`stream << 40 | counter`), so identities never
//!   collide across streams or lineages and deleted data never comes back.
//! * [`ChunkModel`] derives everything else from the identity alone: the
//!   fingerprint (a bijective mix of the identity expanded to the fingerprint
//!   width, so distinct identities have distinct fingerprints), the logical
//!   size and the stored (locally compressed) size.
//! * A [`Sequence`] holds the identities as runs of consecutive ids
//!   ([`Run`]); fresh data is consecutive, so a stream is a few runs per edit,
//!   not one entry per chunk. Editing ([`mutate`]) costs time proportional to
//!   the runs and the edited chunks, never to the whole stream.

use cairn_core::{mix64, Fingerprint, TraceChunk};

use super::rng::{unit_f64, SplitMix64};

/// Number of identity bits per stream: `id = stream << STREAM_SHIFT | n`.
pub const STREAM_SHIFT: u32 = 40;

/// Maps a chunk identity to its fingerprint, size and stored size.
#[derive(Clone, Copy, Debug)]
pub struct ChunkModel {
    key: u64,
    min: u32,
    /// Mean of the exponential part: `avg - min`.
    spread_mean: f64,
    max: u32,
    compression: f64,
    /// Relative half-width of the per-chunk compression factor.
    variation: f64,
    fp_width: u8,
}

impl ChunkModel {
    /// `avg_chunk` >= 64, `compression` >= 1, `fp_width` in 8..=32 (checked
    /// by the parameter validation of the generators).
    pub fn new(key: u64, avg_chunk: u32, compression: f64, fp_width: u8) -> Self {
        let min = avg_chunk / 4;
        ChunkModel {
            key,
            min,
            spread_mean: (avg_chunk - min) as f64,
            max: avg_chunk.saturating_mul(8),
            compression,
            // Stored fraction is uniform in [(1-v)/c, (1+v)/c]; v <= c-1 keeps
            // it <= 1 so no clamping biases the ratio.
            variation: (compression - 1.0).clamp(0.0, 0.5),
            fp_width,
        }
    }

    #[inline]
    fn base(&self, id: u64) -> u64 {
        mix64(id ^ self.key)
    }

    /// Logical size: `avg/4` plus an exponential with mean `3·avg/4`, capped
    /// at `8·avg` (the shape of content-defined chunk sizes with a minimum).
    #[inline]
    pub fn size(&self, id: u64) -> u32 {
        self.size_from(self.base(id))
    }

    #[inline]
    fn size_from(&self, h: u64) -> u32 {
        let u = unit_f64(mix64(h ^ 0x51ce_51ce_51ce_51ce));
        let extra = -(1.0 - u).ln() * self.spread_mean;
        let s = self.min as f64 + extra;
        if s >= self.max as f64 {
            self.max
        } else {
            (s as u32).max(1)
        }
    }

    #[inline]
    fn stored_from(&self, h: u64, size: u32) -> u32 {
        let v = unit_f64(mix64(h ^ 0xc0c0_ab1e_c0c0_ab1e));
        let f = (1.0 + self.variation * (2.0 * v - 1.0)) / self.compression;
        ((size as f64 * f).round() as u32).clamp(1, size)
    }

    /// The fingerprint: `mix64(id ^ key)` (a bijection of the identity) and
    /// further mixes of it, little-endian, truncated to the width.
    #[inline]
    fn fp_from(&self, h: u64) -> Fingerprint {
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&h.to_le_bytes());
        let mut x = h;
        for k in 1..4 {
            x = mix64(x ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(k as u64)));
            b[k * 8..k * 8 + 8].copy_from_slice(&x.to_le_bytes());
        }
        Fingerprint::from_slice(&b[..self.fp_width as usize])
    }

    /// The trace chunk of identity `id`.
    #[inline]
    pub fn chunk(&self, id: u64) -> TraceChunk {
        let h = self.base(id);
        let size = self.size_from(h);
        TraceChunk {
            fp: self.fp_from(h),
            size,
            stored_size: self.stored_from(h, size),
        }
    }
}

/// Consecutive identities `start..start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub start: u64,
    pub len: u64,
}

/// Appends `run`, merging it into the last run when the ids continue.
#[inline]
pub fn push_run(out: &mut Vec<Run>, run: Run) {
    if run.len == 0 {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.start + last.len == run.start {
            last.len += run.len;
            return;
        }
    }
    out.push(run);
}

/// One stream's (or one file version's) chunk identities, with totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    pub runs: Vec<Run>,
    pub chunks: u64,
    pub bytes: u64,
    /// The next fresh identity of this stream.
    pub next_fresh: u64,
}

impl Sequence {
    /// A sequence of fresh identities from `base` whose total size is the
    /// closest to `target_bytes` (at least one chunk).
    pub fn fresh(model: &ChunkModel, base: u64, target_bytes: u64) -> Self {
        let (n, bytes) = take_bytes(model, base, target_bytes);
        let (n, bytes) = if n == 0 {
            (1, model.size(base) as u64)
        } else {
            (n, bytes)
        };
        Sequence {
            runs: vec![Run {
                start: base,
                len: n,
            }],
            chunks: n,
            bytes,
            next_fresh: base + n,
        }
    }

    /// Identities at positions `a..b`, as runs.
    pub fn slice(&self, a: u64, b: u64) -> Vec<Run> {
        let mut out = Vec::new();
        Indexed::new(&self.runs).emit(a, b, &mut out);
        out
    }

    /// Every identity in order.
    #[cfg(test)]
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(|r| r.start..r.start + r.len)
    }
}

/// How many fresh identities from `base` to take so that their total size is
/// closest to `target` (possibly 0), and that total.
fn take_bytes(model: &ChunkModel, base: u64, target: u64) -> (u64, u64) {
    let mut n = 0u64;
    let mut sum = 0u64;
    while sum < target {
        let s = model.size(base + n) as u64;
        if sum + s > target && sum + s - target > target - sum {
            break;
        }
        sum += s;
        n += 1;
    }
    (n, sum)
}

/// Runs with their starting positions, for range queries by position.
struct Indexed<'a> {
    runs: &'a [Run],
    starts: Vec<u64>,
}

impl<'a> Indexed<'a> {
    fn new(runs: &'a [Run]) -> Self {
        let mut starts = Vec::with_capacity(runs.len());
        let mut pos = 0;
        for r in runs {
            starts.push(pos);
            pos += r.len;
        }
        Indexed { runs, starts }
    }

    /// Calls `f` with the runs (clipped) covering positions `a..b`.
    fn for_each(&self, a: u64, b: u64, mut f: impl FnMut(Run)) {
        if a >= b {
            return;
        }
        let mut i = self.starts.partition_point(|&s| s <= a) - 1;
        let mut pos = a;
        while pos < b && i < self.runs.len() {
            let r = self.runs[i];
            let off = pos - self.starts[i];
            let take = (r.len - off).min(b - pos);
            f(Run {
                start: r.start + off,
                len: take,
            });
            pos += take;
            i += 1;
        }
    }

    fn emit(&self, a: u64, b: u64, out: &mut Vec<Run>) {
        self.for_each(a, b, |r| push_run(out, r));
    }
}

/// How much new data a generation step adds.
#[derive(Clone, Copy, Debug)]
pub enum NewData {
    /// Enough that `logical / new == ratio` once the step's deletions are
    /// done: `new = kept / (ratio - 1)` bytes.
    Ratio(f64),
    /// Enough to bring the sequence back to this many bytes.
    Fill(u64),
}

/// One generation step's edits.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Chunks deleted, in runs.
    pub delete: u64,
    /// Chunks moved to another position, in runs.
    pub moves: u64,
    pub new_data: NewData,
    /// Mean run length in chunks of every edit.
    pub run_chunks: u64,
    /// Fraction of new runs inserted at uniformly random positions; the rest
    /// replace deleted runs in place (where there are any).
    pub insert_rate: f64,
}

/// What a step did, for tests and documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepStats {
    pub deleted_chunks: u64,
    pub deleted_bytes: u64,
    pub moved_chunks: u64,
    pub new_chunks: u64,
    pub new_bytes: u64,
}

enum Insert {
    Fresh(Run),
    Moved(u64, u64),
}

/// Applies `plan` to `prev` with the model's sizes: picks non-overlapping
/// delete and move intervals at random positions (exact chunk counts, run
/// lengths uniform compositions with mean `run_chunks`), then fresh runs
/// sized by bytes, and rebuilds the runs in one sweep.
pub fn mutate(
    prev: &Sequence,
    plan: &Plan,
    model: &ChunkModel,
    rng: &mut SplitMix64,
) -> (Sequence, StepStats) {
    let n = prev.chunks;
    let m = plan.run_chunks.max(1);
    let del = plan.delete.min(n);
    let mov = plan.moves.min(n - del);
    let kd = del.div_ceil(m) as usize;
    let km = mov.div_ceil(m) as usize;

    // Event kinds in random order, lengths by composition, gaps between.
    let mut kinds: Vec<bool> = (0..kd)
        .map(|_| true)
        .chain((0..km).map(|_| false))
        .collect();
    rng.shuffle(&mut kinds);
    let mut del_lens = rng.composition(del, kd).into_iter();
    let mut mov_lens = rng.composition(mov, km).into_iter();
    let gaps = rng.composition(n - del - mov, kd + km + 1);

    let idx = Indexed::new(&prev.runs);
    let mut cuts: Vec<(u64, u64)> = Vec::with_capacity(kd + km);
    let mut delete_sites: Vec<u64> = Vec::with_capacity(kd);
    let mut inserts: Vec<(u64, usize, Insert)> = Vec::new();
    let mut stats = StepStats::default();
    let mut pos = 0u64;
    for (i, &is_del) in kinds.iter().enumerate() {
        pos += gaps[i];
        let len = if is_del {
            del_lens.next()
        } else {
            mov_lens.next()
        }
        .unwrap_or(0);
        let (a, b) = (pos, pos + len);
        pos = b;
        cuts.push((a, b));
        if is_del {
            delete_sites.push(a);
            stats.deleted_chunks += len;
            idx.for_each(a, b, |r| {
                for id in r.start..r.start + r.len {
                    stats.deleted_bytes += model.size(id) as u64;
                }
            });
        } else {
            stats.moved_chunks += len;
            let to = rng.below(n + 1);
            inserts.push((to, inserts.len(), Insert::Moved(a, b)));
        }
    }

    // New data, sized in bytes against what survives the deletions.
    let kept = prev.bytes - stats.deleted_bytes;
    let target = match plan.new_data {
        NewData::Ratio(r) => (kept as f64 / (r - 1.0)).round() as u64,
        NewData::Fill(total) => total.saturating_sub(kept),
    };
    let fresh0 = prev.next_fresh;
    let (count, bytes) = take_bytes(model, fresh0, target);
    stats.new_chunks = count;
    stats.new_bytes = bytes;
    let mut id = fresh0;
    let end = fresh0 + count;
    while id < end {
        let len = rng.range_inclusive(1, 2 * m - 1).min(end - id);
        let at = if delete_sites.is_empty() || rng.next_f64() < plan.insert_rate {
            rng.below(n + 1)
        } else {
            delete_sites[rng.below(delete_sites.len() as u64) as usize]
        };
        inserts.push((at, inserts.len(), Insert::Fresh(Run { start: id, len })));
        id += len;
    }
    inserts.sort_unstable_by_key(|&(p, seq, _)| (p, seq));

    // One sweep over the old positions: keep, skip cuts, place inserts.
    let mut out = Vec::with_capacity(prev.runs.len() + 2 * (cuts.len() + inserts.len()) + 1);
    let mut pos = 0u64;
    let mut ins = inserts.iter().peekable();
    let mut place = |upto: u64, pos: &mut u64, out: &mut Vec<Run>| {
        while let Some((p, _, what)) = ins.next_if(|(p, _, _)| *p <= upto) {
            if *p > *pos {
                idx.emit(*pos, *p, out);
                *pos = *p;
            }
            match *what {
                Insert::Fresh(r) => push_run(out, r),
                Insert::Moved(a, b) => idx.emit(a, b, out),
            }
        }
    };
    for &(a, b) in &cuts {
        place(a, &mut pos, &mut out);
        idx.emit(pos, a, &mut out);
        pos = b;
    }
    place(u64::MAX, &mut pos, &mut out);
    idx.emit(pos, n, &mut out);

    let next = Sequence {
        runs: out,
        chunks: n - del + count,
        bytes: kept + bytes,
        next_fresh: end,
    };
    debug_assert_eq!(next.runs.iter().map(|r| r.len).sum::<u64>(), next.chunks);
    (next, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn model() -> ChunkModel {
        ChunkModel::new(42, 8192, 2.0, 20)
    }

    #[test]
    fn chunk_attributes_are_deterministic_and_bounded() {
        let m = model();
        for id in 0..10_000u64 {
            let c = m.chunk(id);
            assert_eq!(c, m.chunk(id));
            assert_eq!(c.size, m.size(id));
            assert!((2048..=65536).contains(&c.size));
            assert!(c.stored_size >= 1 && c.stored_size <= c.size);
            assert_eq!(c.fp.len(), 20);
        }
        assert_ne!(m.chunk(1).fp, m.chunk(2).fp);
        let mean = (0..100_000u64).map(|i| m.size(i) as f64).sum::<f64>() / 100_000.0;
        assert!((mean / 8192.0 - 1.0).abs() < 0.02, "mean size {mean}");
    }

    #[test]
    fn mutate_keeps_counts_and_totals() {
        let m = model();
        let mut rng = SplitMix64::new(3);
        let mut seq = Sequence::fresh(&m, 0, 64 << 20);
        for _ in 0..5 {
            let plan = Plan {
                delete: seq.chunks / 20,
                moves: seq.chunks / 50,
                new_data: NewData::Ratio(10.0),
                run_chunks: 16,
                insert_rate: 0.5,
            };
            let (next, st) = mutate(&seq, &plan, &m, &mut rng);
            assert_eq!(st.deleted_chunks, plan.delete);
            assert_eq!(st.moved_chunks, plan.moves);
            let ids: Vec<u64> = next.ids().collect();
            assert_eq!(ids.len() as u64, next.chunks);
            let bytes: u64 = ids.iter().map(|&i| m.size(i) as u64).sum();
            assert_eq!(bytes, next.bytes);
            let set: HashSet<u64> = ids.iter().copied().collect();
            assert_eq!(set.len(), ids.len(), "no identity twice");
            let old: HashSet<u64> = seq.ids().collect();
            let new_bytes: u64 = ids
                .iter()
                .filter(|i| !old.contains(i))
                .map(|&i| m.size(i) as u64)
                .sum();
            assert_eq!(new_bytes, st.new_bytes);
            let ratio = next.bytes as f64 / new_bytes as f64;
            assert!((ratio / 10.0 - 1.0).abs() < 0.02, "ratio {ratio}");
            seq = next;
        }
        assert_eq!(seq.slice(3, 7).iter().map(|r| r.len).sum::<u64>(), 4);
    }
}
