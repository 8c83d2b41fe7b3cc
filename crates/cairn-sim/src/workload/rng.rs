//! The workload generators' pseudo-random numbers: SplitMix64.
//!
//! No paper prescribes a generator; this serves the DDFS §5.3
//! (`001_3652cceaf162c5a1.txt`) and GC-paper §4.2
//! (`003_ea5fccc485a97c5d.txt`) workloads, whose only requirement is that
//! data be reproducible ("to ensure that the data is the same across
//! experiments", §4.2).
//!
//! Every random choice a generator makes comes from a [`SplitMix64`] whose
//! seed is derived ([`derive`]) from the workload seed and the coordinates
//! of the choice (stream or lineage, generation, purpose). A generation can
//! therefore be recomputed on its own, and two generators never share a
//! stream of numbers by accident. SplitMix64 (Steele, Lea and Flood, 2014) is
//! the generator whose finalizer is [`cairn_core::mix64`]: a 64-bit counter
//! advanced by the golden-ratio increment and mixed; it passes BigCrush and
//! costs a few cycles per number, which is all a workload needs (nothing here
//! is cryptographic).

use cairn_core::mix64;

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// Combines a seed with coordinates into a new, well-mixed seed.
pub fn derive(seed: u64, coords: &[u64]) -> u64 {
    let mut h = mix64(seed ^ 0x5ca1_ab1e_0dd5_eed5);
    for &c in coords {
        h = mix64(h.wrapping_add(GAMMA) ^ mix64(c.wrapping_add(GAMMA)));
    }
    h
}

/// SplitMix64: a counter mixed by [`mix64`].
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }

    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift (bias below
    /// 2^-64 · n, irrelevant here).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        if hi - lo == u64::MAX {
            return self.next_u64();
        }
        lo + self.below(hi - lo + 1)
    }

    /// A standard normal deviate (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Splits `total` into `parts` non-negative integers summing to `total`,
    /// uniformly over such compositions' cut points (sorted uniform cuts).
    pub fn composition(&mut self, total: u64, parts: usize) -> Vec<u64> {
        if parts == 0 {
            return Vec::new();
        }
        let mut cuts: Vec<u64> = (1..parts).map(|_| self.below(total + 1)).collect();
        cuts.sort_unstable();
        let mut out = Vec::with_capacity(parts);
        let mut prev = 0;
        for c in cuts {
            out.push(c - prev);
            prev = c;
        }
        out.push(total - prev);
        out
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// Maps 64 random bits to `[0, 1)`.
#[inline]
pub fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seed_sensitive() {
        let a: Vec<u64> = {
            let mut r = SplitMix64::new(7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SplitMix64::new(7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = SplitMix64::new(8);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(derive(1, &[2, 3]), derive(1, &[3, 2]));
        assert_ne!(derive(1, &[2]), derive(2, &[2]));
    }

    #[test]
    fn composition_sums_and_shuffle_permutes() {
        let mut r = SplitMix64::new(1);
        for (total, parts) in [(0u64, 3usize), (10, 1), (1000, 17), (5, 9)] {
            let c = r.composition(total, parts);
            assert_eq!(c.len(), parts);
            assert_eq!(c.iter().sum::<u64>(), total);
        }
        let mut v: Vec<u32> = (0..50).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort_unstable();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(3) < 3);
            let y = r.range_inclusive(5, 7);
            assert!((5..=7).contains(&y));
        }
    }
}
