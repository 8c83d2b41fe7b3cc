//! The Gear rolling hash's table and FastCDC's spread masks, built at compile
//! time.
//!
//! Gear (Xia et al., used by FastCDC) updates `h = (h << 1) + GEAR[byte]`:
//! one shift, one add and one table lookup per byte. Bit `j` of `h` depends
//! only on the last `j + 1` bytes (older contributions are shifted past bit
//! 63), so the high bits behave like a hash of a sliding window of up to 64
//! bytes without ever removing a byte explicitly.
//!
//! `GEAR` holds 256 pseudo-random 64-bit values drawn from splitmix64 seeded
//! with [`GEAR_SEED`] (the ASCII bytes "cairn-gr" read big-endian), so the
//! table, and therefore every FastCDC boundary cairn computes, is fixed by
//! this source file.
//!
//! FastCDC tests `h & mask == 0` with the mask's one-bits spread over the
//! word rather than packed at the bottom (packed low bits would only see the
//! last few bytes). [`spread_mask`] spreads `n` one-bits over bits 16..=62,
//! nested like FastCDC's published masks (the easier mask's bits are a subset
//! of the harder mask's). The top bit is always 62, so every tested bit
//! pattern depends on a 63-byte window; bit 63 stays clear.
//!
//! An encrypted repository's chunker uses a [`GearTable`] drawn from its
//! chunker seed instead ([`GearTable::seeded`]): the 256 entries are read
//! from BLAKE3's extendable output keyed with the seed, so boundaries depend
//! on the repository. A seeded entry `g` is redrawn unless bit 62 of `-g` is
//! set: after 64 equal bytes `b` the hash is `-GEAR[b]`, and every mask has
//! bit 62, so no run of one byte value ever matches (runs are cut at `max`,
//! as with the fixed table's fill bytes). That costs one bit of each entry's
//! randomness (in effect bit 62 of every entry is clear, so bit 62 of the
//! hash sees 62 bytes instead of 63).

use std::sync::{Arc, LazyLock};

/// Seed of the splitmix64 generator that fills [`GEAR`].
pub const GEAR_SEED: u64 = u64::from_be_bytes(*b"cairn-gr");

/// Bytes of input after which the hash no longer depends on its start: the
/// highest mask bit is 62, which depends on the last 63 bytes.
pub const GEAR_WINDOW: usize = 64;

const fn splitmix64(state: u64) -> (u64, u64) {
    let s = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (s, z ^ (z >> 31))
}

const fn make_gear() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut state = GEAR_SEED;
    let mut i = 0;
    while i < 256 {
        let (s, v) = splitmix64(state);
        state = s;
        t[i] = v;
        i += 1;
    }
    t
}

/// The Gear table.
pub static GEAR: [u64; 256] = make_gear();

/// Key-derivation input of a seeded Gear table (the seed is the BLAKE3 key).
const SEEDED_GEAR_CONTEXT: &[u8] = b"cairn gear table v1";

/// A Gear table and its entries shifted left by one (FastCDC's two-bytes-
/// per-step loop uses both).
pub struct GearTable {
    pub(crate) gear: [u64; 256],
    pub(crate) gear_ls: [u64; 256],
}

impl GearTable {
    const fn from_gear(gear: [u64; 256]) -> Self {
        let mut gear_ls = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            gear_ls[i] = gear[i] << 1;
            i += 1;
        }
        GearTable { gear, gear_ls }
    }

    /// The fixed table ([`GEAR`]) of clear repositories.
    pub fn unseeded() -> Arc<GearTable> {
        static UNSEEDED: LazyLock<Arc<GearTable>> =
            LazyLock::new(|| Arc::new(GearTable::from_gear(GEAR)));
        UNSEEDED.clone()
    }

    /// The table of a repository whose chunker seed is `seed` (see the
    /// module doc): deterministic, and different for every seed.
    pub fn seeded(seed: &[u8; 32]) -> Arc<GearTable> {
        let mut xof = blake3::Hasher::new_keyed(seed)
            .update(SEEDED_GEAR_CONTEXT)
            .finalize_xof();
        let mut gear = [0u64; 256];
        for g in &mut gear {
            *g = loop {
                let mut b = [0u8; 8];
                xof.fill(&mut b);
                let v = u64::from_le_bytes(b);
                if (v.wrapping_neg() >> 62) & 1 == 1 {
                    break v;
                }
            };
        }
        Arc::new(GearTable::from_gear(gear))
    }

    /// The entry of byte `b`.
    pub fn get(&self, b: u8) -> u64 {
        self.gear[b as usize]
    }
}

/// Prints no entries: a seeded table is derived from a secret.
impl std::fmt::Debug for GearTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GearTable(..)")
    }
}

/// Lowest and highest bit positions a mask may use.
const MASK_LO: u32 = 16;
const MASK_HI: u32 = 62;
const MASK_SPAN: usize = (MASK_HI - MASK_LO + 1) as usize;

/// The bit positions 16..=62 in the order masks take them: 62 first, then
/// greedily the position farthest from all positions taken so far (ties to
/// the higher bit). Every prefix is thus spread over the word, and the mask
/// with fewer bits is a subset of the mask with more, so a position that
/// passes the harder normalized-chunking test also passes the easier one.
const fn mask_order() -> [u32; MASK_SPAN] {
    let mut order = [0u32; MASK_SPAN];
    let mut taken = [false; MASK_SPAN];
    order[0] = MASK_HI;
    taken[MASK_SPAN - 1] = true;
    let mut n = 1;
    while n < MASK_SPAN {
        let mut best = 0;
        let mut best_dist = 0;
        let mut cand = 0;
        while cand < MASK_SPAN {
            if !taken[cand] {
                let pos = MASK_LO + cand as u32;
                let mut dist = u32::MAX;
                let mut k = 0;
                while k < n {
                    let d = pos.abs_diff(order[k]);
                    if d < dist {
                        dist = d;
                    }
                    k += 1;
                }
                if dist >= best_dist {
                    best_dist = dist;
                    best = cand;
                }
            }
            cand += 1;
        }
        taken[best] = true;
        order[n] = MASK_LO + best as u32;
        n += 1;
    }
    order
}

const MASK_ORDER: [u32; MASK_SPAN] = mask_order();

/// A mask with `n` one-bits (1..=47) spread over bits 16..=62: the first `n`
/// positions of the greedy farthest-point order (always including bit 62).
pub const fn spread_mask(n: u32) -> u64 {
    assert!(n >= 1 && n as usize <= MASK_SPAN);
    let mut m = 0u64;
    let mut k = 0;
    while k < n as usize {
        m |= 1 << MASK_ORDER[k];
        k += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gear_table_is_fixed_and_distinct() {
        // splitmix64's first output for seed 0 is a published reference value.
        assert_eq!(splitmix64(0).1, 0xE220_A839_7B1D_CDAF);
        let mut v = GEAR.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 256);
        let ones: u32 = GEAR.iter().map(|g| g.count_ones()).sum();
        assert!((7800..8600).contains(&ones), "{ones} one-bits");
    }

    #[test]
    fn unseeded_table_is_gear() {
        let t = GearTable::unseeded();
        assert_eq!(t.gear, GEAR);
        for b in 0..=255u8 {
            assert_eq!(t.get(b), GEAR[b as usize]);
            assert_eq!(t.gear_ls[b as usize], GEAR[b as usize] << 1);
        }
    }

    #[test]
    fn seeded_tables_are_deterministic_distinct_and_differ_per_seed() {
        let a = GearTable::seeded(&[1; 32]);
        assert_eq!(a.gear, GearTable::seeded(&[1; 32]).gear);
        let mut other = [1; 32];
        other[31] = 2;
        let b = GearTable::seeded(&other);
        for t in [&a, &b] {
            assert_ne!(t.gear, GEAR);
            let mut v = t.gear.to_vec();
            v.sort_unstable();
            v.dedup();
            assert_eq!(v.len(), 256);
            // Bit 62 of -g is set for every entry: no run of one byte value
            // matches a mask (all masks hold bit 62).
            assert!(t.gear.iter().all(|g| (g.wrapping_neg() >> 62) & 1 == 1));
            let ones: u32 = t.gear.iter().map(|g| g.count_ones()).sum();
            assert!((7500..8600).contains(&ones), "{ones} one-bits");
        }
        let same = a.gear.iter().zip(&b.gear).filter(|(x, y)| x == y).count();
        assert_eq!(same, 0, "seeds that differ in one byte share entries");
        assert_eq!(format!("{a:?}"), "GearTable(..)");
    }

    /// The derivation is part of the format (docs/FORMAT.md): pinned.
    #[test]
    fn seeded_table_golden_values() {
        let t = GearTable::seeded(&[0; 32]);
        assert_eq!(t.get(0), 0xb869_cd15_fb78_8f90);
        assert_eq!(t.get(1), 0x9755_05fd_2390_862c);
        assert_eq!(t.get(255), 0xa7e9_6818_a661_f68c);
    }

    #[test]
    fn masks_have_the_requested_bits() {
        for n in 1..=47 {
            let m = spread_mask(n);
            assert_eq!(m.count_ones(), n);
            assert_eq!(m >> 63, 0);
            assert_eq!(m & ((1 << 16) - 1), 0);
            assert_ne!(m & (1 << 62), 0);
            if n > 1 {
                assert_eq!(spread_mask(n - 1) & !m, 0, "nested");
            }
        }
    }
}
