//! The one small deterministic generator of the workspace: splitmix64
//! (a Weyl sequence stepped by the golden ratio, each step finished by
//! [`mix64`]). Test data, synthetic workloads and benchmark inputs draw from
//! it, so a seed names the same bytes everywhere; golden outputs depend on
//! that sequence, so it must never change. Not for anything secret.

use crate::ids::mix64;

/// The Weyl step of splitmix64 (2^64 / golden ratio).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// A splitmix64 generator; equal seeds give equal sequences.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix64(self.0)
    }

    /// Uniform in `0..n` (`n > 0`), by the high half of a 128-bit product.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Fills `out` with the little-endian bytes of successive draws (the
    /// last draw cut short).
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let w = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64's first output for seed 0 is a published reference value.
    #[test]
    fn matches_the_reference_sequence() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        let mut a = SplitMix64::new(7);
        let mut bytes = [0u8; 12];
        a.fill_bytes(&mut bytes);
        let mut b = SplitMix64::new(7);
        assert_eq!(bytes[..8], b.next_u64().to_le_bytes());
        assert_eq!(bytes[8..], b.next_u64().to_le_bytes()[..4]);
        assert!((0..1000).all(|_| b.below(10) < 10));
    }
}
