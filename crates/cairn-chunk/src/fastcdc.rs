//! FastCDC: Gear-hash content-defined chunking with normalized chunking.
//!
//! Follows FastCDC (Xia et al., USENIX ATC 2016; extended in IEEE TPDS 2020),
//! the fast successor of the Rabin anchoring DDFS uses
//! (`001_3652cceaf162c5a1.txt` §3.1): the same "cut where bits of a rolling hash
//! match a pattern" rule, with three changes:
//!
//! 1. **Gear hash** ([`crate::gear`]): `h = (h << 1) + GEAR[b]`, one
//!    shift-add and one lookup per byte instead of Rabin's two lookups and
//!    polynomial reduction.
//! 2. **Cut-point skipping**: bytes before `min` cannot end a chunk, so they
//!    are not tested. The hash only needs the 64 bytes before `min` to be
//!    fully determined there (bit 62 sees a 63-byte window), so hashing starts
//!    at `min - 64` and everything before is skipped unread.
//! 3. **Normalized chunking, level 2**: with `avg = 2^k`, lengths in
//!    `[min, avg)` must match a harder mask of `k + 2` one-bits (`mask_s`) and
//!    lengths in `[avg, max]` an easier mask of `k - 2` one-bits (`mask_l`).
//!    This squeezes the size distribution towards `avg`. Mask bits are spread
//!    over the word and nested, the easier mask's bits a subset of the harder
//!    one's ([`crate::gear::spread_mask`]), as in FastCDC's published masks.
//!
//! The condition is `h & mask == 0`. A chunk whose scan reaches `max` is cut
//! there (forced). On a run of one byte value `b` the hash becomes the
//! constant `-GEAR[b]`; for the fixed table in this crate that constant
//! matches no mask for any `b` when `avg >= 2 KiB`, and for 0x00, 0xFF and
//! space at every size, so such runs are cut at `max` rather than at every
//! `min` (checked by a unit test); a seeded table is drawn so that it matches
//! no mask for any `b` at any size ([`crate::gear`]).
//!
//! The inner loop is tuned for the ≥ 1 GB/s target: bounds-check-free
//! iteration over a sub-slice, and, as in FastCDC 2020's "rolling two bytes
//! each time", two bytes per iteration. For the pair `(b0, b1)` it computes
//! `x = (h << 2) + (GEAR[b0] << 1)`, which is `h'` (the hash after `b0`)
//! shifted left by one, tests it against `mask << 1` (equivalent to testing
//! `h'` against `mask`, since bit 63 of the mask is clear), then finishes
//! `h'' = x + GEAR[b1]`. The results are identical to the byte-at-a-time
//! definition (a unit test compares them).

use cairn_core::Chunker;

use std::sync::Arc;

use crate::gear::{spread_mask, GearTable, GEAR_WINDOW};
use crate::{check_sizes, CutKind};

/// FastCDC chunker with normalization level 2.
#[derive(Clone, Debug)]
pub struct FastCdcChunker {
    min: usize,
    avg: usize,
    max: usize,
    mask_s: u64,
    mask_l: u64,
    last: CutKind,
    table: Arc<GearTable>,
}

/// Normalization level: bits added to / removed from `log2(avg)`.
const NORMALIZATION: u32 = 2;

impl FastCdcChunker {
    /// Panics unless `0 < min <= avg <= max` and `avg` is a power of two
    /// (use [`crate::new_chunker`] for validated configuration).
    pub fn new(min: usize, avg: usize, max: usize) -> Self {
        Self::with_table(min, avg, max, GearTable::unseeded())
    }

    /// [`Self::new`] with another Gear table (a repository's seeded one,
    /// [`GearTable::seeded`]).
    pub fn with_table(min: usize, avg: usize, max: usize, table: Arc<GearTable>) -> Self {
        check_sizes("fastcdc", min, avg, max);
        let bits = avg.trailing_zeros();
        FastCdcChunker {
            min,
            avg,
            max,
            mask_s: spread_mask(bits + NORMALIZATION),
            mask_l: spread_mask(bits.saturating_sub(NORMALIZATION).max(1)),
            last: CutKind::EndOfInput,
            table,
        }
    }

    /// How the last returned boundary was chosen: [`CutKind::Full`] (a mask
    /// matched), [`CutKind::Forced`] or [`CutKind::EndOfInput`].
    pub fn last_cut_kind(&self) -> CutKind {
        self.last
    }

    /// The (harder, easier) masks, for tests and tools.
    pub fn masks(&self) -> (u64, u64) {
        (self.mask_s, self.mask_l)
    }
}

/// Hashes `data[from..to]` and returns the first length `i + 1` (for byte
/// index `i`) whose hash has no bit of `mask` set, or `None`; `h` carries the
/// hash into the next range when nothing matched.
#[inline(always)]
fn scan_range(
    t: &GearTable,
    data: &[u8],
    from: usize,
    to: usize,
    mask: u64,
    h: &mut u64,
) -> Option<usize> {
    if from >= to {
        return None;
    }
    let bytes = &data[from..to];
    let mask_ls = mask << 1;
    let mut x = *h;
    let mut pairs = bytes.chunks_exact(2);
    for (k, pair) in pairs.by_ref().enumerate() {
        // y = (hash after pair[0]) << 1
        let y = (x << 2).wrapping_add(t.gear_ls[pair[0] as usize]);
        if y & mask_ls == 0 {
            return Some(from + 2 * k + 1);
        }
        x = y.wrapping_add(t.gear[pair[1] as usize]);
        if x & mask == 0 {
            return Some(from + 2 * k + 2);
        }
    }
    if let [b] = *pairs.remainder() {
        x = (x << 1).wrapping_add(t.gear[b as usize]);
        if x & mask == 0 {
            return Some(to);
        }
    }
    *h = x;
    None
}

impl Chunker for FastCdcChunker {
    fn next_boundary(&mut self, data: &[u8], eof: bool) -> Option<usize> {
        if data.is_empty() || (data.len() < self.max && !eof) {
            return None;
        }
        let end = data.len().min(self.max);
        if end >= self.min {
            // Byte indices: warm-up [warm, min-1), hard mask [min-1, avg-1),
            // easy mask [max(min, avg)-1, end).
            let first = self.min - 1;
            let t = &*self.table;
            let mut h = 0u64;
            for &b in &data[first.saturating_sub(GEAR_WINDOW)..first] {
                h = (h << 1).wrapping_add(t.gear[b as usize]);
            }
            let split = (self.avg - 1).clamp(first, end);
            let found = scan_range(t, data, first, split, self.mask_s, &mut h)
                .or_else(|| scan_range(t, data, split, end, self.mask_l, &mut h));
            if let Some(len) = found {
                self.last = CutKind::Full;
                return Some(len);
            }
        }
        self.last = CutKind::unmatched(end, self.max);
        Some(end)
    }

    fn min_size(&self) -> usize {
        self.min
    }

    fn max_size(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gear::GEAR;
    use crate::testutil::random_bytes;

    /// The byte-at-a-time definition, straight from the module doc.
    fn reference(c: &FastCdcChunker, data: &[u8]) -> usize {
        let end = data.len().min(c.max);
        if end < c.min {
            return end;
        }
        let mut h = 0u64;
        for (i, &b) in data[..end].iter().enumerate() {
            h = (h << 1).wrapping_add(c.table.get(b));
            let len = i + 1;
            let mask = if len < c.avg { c.mask_s } else { c.mask_l };
            if len >= c.min && h & mask == 0 {
                return len;
            }
        }
        end
    }

    #[test]
    fn two_byte_loop_matches_reference() {
        let data = random_bytes(3, 1 << 18);
        for &(min, avg, max) in &[
            (64, 256, 1024),
            (65, 256, 1023),
            (100, 128, 129),
            (256, 256, 256),
            (1, 64, 64),
            (2048, 8192, 65536),
        ] {
            for table in [GearTable::unseeded(), GearTable::seeded(&[5; 32])] {
                let mut c = FastCdcChunker::with_table(min, avg, max, table);
                let mut pos = 0;
                while pos < data.len() {
                    let rest = &data[pos..];
                    let n = c.next_boundary(rest, true).unwrap();
                    // The reference hashes from the chunk start; contributions
                    // older than 64 bytes are shifted out, so they must agree.
                    assert_eq!(n, reference(&c, rest), "{min}/{avg}/{max} at {pos}");
                    assert!(n <= max && (n >= min || n == rest.len()));
                    pos += n;
                }
            }
        }
    }

    #[test]
    fn sizes_are_normalized() {
        let data = random_bytes(4, 4 << 20);
        let mut c = FastCdcChunker::new(2048, 8192, 65536);
        let mut cuts = Vec::new();
        crate::cut_points(&mut c, &data, &mut cuts);
        let avg = data.len() / cuts.len();
        assert!((6000..11000).contains(&avg), "average chunk {avg}");
        let mut prev = 0;
        let mut near = 0;
        for &e in &cuts {
            if (4096..=16384).contains(&(e - prev)) {
                near += 1;
            }
            prev = e;
        }
        // Normalized chunking keeps most chunks within a factor 2 of avg.
        assert!(near * 10 > cuts.len() * 7, "{near} of {}", cuts.len());
    }

    #[test]
    fn constant_runs_are_cut_at_max() {
        for k in 6..=24u32 {
            let avg = 1usize << k;
            let c = FastCdcChunker::new(avg / 4, avg, avg * 8);
            // Every byte value from 2 KiB up; the usual fill bytes always.
            let bytes = if avg >= 2048 { 0..=255u8 } else { 0..=0 };
            for b in bytes.chain([0xff, b' ']) {
                // After 64 equal bytes h = GEAR[b] * (2^64 - 1) = -GEAR[b].
                let h = GEAR[b as usize].wrapping_neg();
                assert_ne!(h & c.mask_s, 0, "avg {avg} byte {b}");
                assert_ne!(h & c.mask_l, 0, "avg {avg} byte {b}");
            }
        }
        let mut seeded = FastCdcChunker::with_table(256, 1024, 8192, GearTable::seeded(&[9; 32]));
        for b in 0..=255u8 {
            assert_eq!(
                seeded.next_boundary(&[b; 20000], false),
                Some(8192),
                "byte {b}"
            );
            assert_eq!(seeded.last_cut_kind(), CutKind::Forced);
        }
        let mut c = FastCdcChunker::new(1024, 4096, 16384);
        let zeros = vec![0u8; 40000];
        assert_eq!(c.next_boundary(&zeros, false), Some(16384));
        assert_eq!(c.last_cut_kind(), CutKind::Forced);
        assert_eq!(c.next_boundary(&zeros[..3000], true), Some(3000));
        assert_eq!(c.last_cut_kind(), CutKind::EndOfInput);
        assert_eq!(c.next_boundary(&zeros[..3000], false), None);
    }
}
