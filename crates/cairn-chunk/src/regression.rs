//! Regression chunking (`004_62bf1a5ddd5ed253.txt`, El-Shimi et al.,
//! "Primary Data Deduplication", slides "Basic version of fingerprint based
//! chunking" and "Regression Chunking Algorithm" 1-2).
//!
//! Basic fingerprint chunking (here [`crate::RabinChunker`]) cuts where the
//! rolling hash matches a bit pattern `P`; when `max` is reached first it
//! forces a cut there, which is content independent and "may reduce dedup
//! savings". Regression chunking instead, on reaching `max`, relaxes the match
//! condition to a suffix of `P`: it matches `|P| - i` bits of `P` "with
//! decreasing priority for i = 0, 1, ..., k", and cuts at the position that
//! matched the longest suffix. The slides give the forced-boundary probability
//! as 2e-3 for k = 1 and 1e-14 for k = 4; cairn uses k = [`REGRESSION_LEVELS`]
//! = 4 (fewer if `log2(avg) <= 4`, keeping at least one bit).
//!
//! Implementation, as the slides' "maintains chunking throughput" slide says:
//! * the same Rabin rolling hash and 48-byte window as basic chunking (the scan
//!   loop is shared with [`crate::RabinChunker`]), with `P` = the low
//!   `log2(avg)` bits all set; a suffix of `P` with `i` bits dropped is the
//!   low `log2(avg) - i` bits all set;
//! * the core loop tests only the smallest suffix (`log2(avg) - k` bits) and
//!   breaks out of the fast path only when it matches;
//! * a single pass: on such a match the number of trailing one-bits of the
//!   hash says which suffixes matched; a full match ends the chunk at once,
//!   otherwise the position is remembered for every relaxed level it
//!   satisfies (the last such position per level, since scanning moves
//!   forward);
//! * at `max` without a full match the chunk ends at the remembered position
//!   of the highest-priority level (fewest bits dropped); only if no level
//!   matched anywhere in `[min, max]` is the cut forced at `max`.
//!
//! Regression applies only when `max` is reached; at the end of input a
//! shorter last chunk simply ends with the data. [`RegressionChunker::last_cut_kind`]
//! reports which case produced each cut, for forced-boundary statistics.

use std::sync::Arc;

use cairn_core::Chunker;

use crate::rabin::{scan, RabinTables};
use crate::{check_sizes, CutKind};

/// Number of relaxation levels `k` (bits that may be dropped from the pattern).
pub const REGRESSION_LEVELS: u32 = 4;

/// Regression chunker over the Rabin rolling hash.
#[derive(Clone, Debug)]
pub struct RegressionChunker {
    min: usize,
    max: usize,
    /// `|P|` = log2(avg).
    bits: u32,
    /// Relaxation levels in use: `min(REGRESSION_LEVELS, bits - 1)`.
    levels: u32,
    last: CutKind,
    tables: Arc<RabinTables>,
}

impl RegressionChunker {
    /// Panics unless `0 < min <= avg <= max` and `avg` is a power of two
    /// (use [`crate::new_chunker`] for validated configuration).
    pub fn new(min: usize, avg: usize, max: usize) -> Self {
        Self::with_tables(min, avg, max, RabinTables::unseeded())
    }

    /// [`Self::new`] with another polynomial's tables (a repository's
    /// seeded one, [`RabinTables::seeded`]).
    pub fn with_tables(min: usize, avg: usize, max: usize, tables: Arc<RabinTables>) -> Self {
        check_sizes("regression", min, avg, max);
        let bits = avg.trailing_zeros();
        RegressionChunker {
            min,
            max,
            bits,
            levels: REGRESSION_LEVELS.min(bits - 1),
            last: CutKind::EndOfInput,
            tables,
        }
    }

    /// How the last returned boundary was chosen: [`CutKind::Full`],
    /// [`CutKind::Regressed`]`(i)` with `i` bits dropped, [`CutKind::Forced`]
    /// or [`CutKind::EndOfInput`].
    pub fn last_cut_kind(&self) -> CutKind {
        self.last
    }
}

impl Chunker for RegressionChunker {
    fn next_boundary(&mut self, data: &[u8], eof: bool) -> Option<usize> {
        if data.is_empty() || (data.len() < self.max && !eof) {
            return None;
        }
        let end = data.len().min(self.max);
        let bits = self.bits;
        let floor_mask = (1u64 << (bits - self.levels)) - 1;
        // last_at[i - 1]: last chunk length whose hash matched P with i bits
        // dropped (0 = none).
        let mut last_at = [0usize; REGRESSION_LEVELS as usize];
        let found = scan(&self.tables, &data[..end], self.min, |f, len| {
            if f & floor_mask != floor_mask {
                return false;
            }
            let ones = (!f).trailing_zeros();
            if ones >= bits {
                return true;
            }
            // ones >= bits - levels, so 1 <= bits - ones <= levels.
            for slot in &mut last_at[(bits - ones) as usize - 1..] {
                *slot = len;
            }
            false
        });
        if let Some(len) = found {
            self.last = CutKind::Full;
            return Some(len);
        }
        if end < self.max {
            self.last = CutKind::EndOfInput;
            return Some(end);
        }
        for (i, &at) in last_at.iter().enumerate().take(self.levels as usize) {
            if at != 0 {
                self.last = CutKind::Regressed(i as u8 + 1);
                return Some(at);
            }
        }
        self.last = CutKind::Forced;
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
    use crate::rabin::{fingerprint_of, RABIN_WINDOW};
    use crate::testutil::random_bytes;
    use crate::RabinChunker;

    /// Straight from the slides: try i = 0, 1, ..., k in priority order, each
    /// over the whole [min, max] range, using window fingerprints computed
    /// from scratch.
    fn reference(min: usize, avg: usize, max: usize, data: &[u8]) -> (usize, CutKind) {
        let end = data.len().min(max);
        if end < min {
            return (end, CutKind::EndOfInput);
        }
        let bits = avg.trailing_zeros();
        let fp = |len: usize| fingerprint_of(&data[len.saturating_sub(RABIN_WINDOW)..len]);
        let matches = |len: usize, dropped: u32| {
            let m = (1u64 << (bits - dropped)) - 1;
            fp(len) & m == m
        };
        if let Some(len) = (min..=end).find(|&l| matches(l, 0)) {
            return (len, CutKind::Full);
        }
        if end < max {
            return (end, CutKind::EndOfInput);
        }
        for i in 1..=REGRESSION_LEVELS.min(bits - 1) {
            if let Some(len) = (min..=end).rev().find(|&l| matches(l, i)) {
                return (len, CutKind::Regressed(i as u8));
            }
        }
        (end, CutKind::Forced)
    }

    #[test]
    fn single_pass_matches_priority_definition() {
        let data = random_bytes(5, 1 << 17);
        // avg close to max so that many chunks need regression.
        for &(min, avg, max) in &[
            (64, 1024, 1024),
            (100, 512, 700),
            (64, 64, 64),
            (64, 256, 2048),
        ] {
            let mut c = RegressionChunker::new(min, avg, max);
            let mut pos = 0;
            let mut regressed = 0;
            while pos < data.len() {
                let rest = &data[pos..];
                let n = c.next_boundary(rest, true).unwrap();
                assert_eq!(
                    (n, c.last_cut_kind()),
                    reference(min, avg, max, rest),
                    "at {pos}"
                );
                regressed += matches!(c.last_cut_kind(), CutKind::Regressed(_)) as usize;
                pos += n;
            }
            if avg == max && min < max {
                assert!(
                    regressed > 10,
                    "{min}/{avg}/{max}: {regressed} regressed cuts"
                );
            }
        }
    }

    #[test]
    fn regression_removes_forced_cuts() {
        let data = random_bytes(6, 4 << 20);
        let (min, avg, max) = (2048, 8192, 16384);
        let count = |kinds: &mut dyn FnMut(&[u8]) -> (usize, CutKind)| {
            let (mut pos, mut forced, mut total) = (0, 0, 0);
            while pos < data.len() {
                let (n, kind) = kinds(&data[pos..]);
                forced += (kind == CutKind::Forced) as usize;
                total += 1;
                pos += n;
            }
            (forced, total)
        };
        let mut rabin = RabinChunker::new(min, avg, max);
        let (rf, rt) =
            count(&mut |d| (rabin.next_boundary(d, true).unwrap(), rabin.last_cut_kind()));
        let mut reg = RegressionChunker::new(min, avg, max);
        let (gf, gt) = count(&mut |d| (reg.next_boundary(d, true).unwrap(), reg.last_cut_kind()));
        // Basic chunking: P(no match in 14336 bytes) = e^(-14336/8192) ~ 17%.
        assert!(rf * 100 > rt * 10, "rabin forced {rf} of {rt}");
        assert_eq!(gf, 0, "regression forced {gf} of {gt}");
    }

    #[test]
    fn zeros_are_forced_and_eof_is_not_regressed() {
        let mut c = RegressionChunker::new(256, 1024, 4096);
        let zeros = vec![0u8; 10000];
        assert_eq!(c.next_boundary(&zeros, false), Some(4096));
        assert_eq!(c.last_cut_kind(), CutKind::Forced);
        assert_eq!(c.next_boundary(&zeros[..4095], false), None);
        assert_eq!(c.next_boundary(&zeros[..4095], true), Some(4095));
        assert_eq!(c.last_cut_kind(), CutKind::EndOfInput);
        assert_eq!(c.next_boundary(&zeros[..100], true), Some(100));
    }
}
