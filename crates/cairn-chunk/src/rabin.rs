//! Rabin-fingerprint content-defined chunking over a 48-byte sliding window.
//!
//! Follows the anchoring step of DDFS (`001_3652cceaf162c5a1.txt` §3.1
//! Content Store: "Anchoring partitions the byte range into variable-length
//! segments in a content dependent manner [Man93, BDH94]"; §2.1 on variable vs
//! fixed segments; related work: Manber's anchors "when certain bits of
//! rolling fingerprints are zeros", computed with Rabin fingerprints), as LBFS
//! popularised it: a Rabin
//! fingerprint of the last 48 bytes is maintained at every byte, and a chunk
//! ends after the byte where the fingerprint's low `log2(avg)` bits are all
//! ones. This is also the "basic version of fingerprint based chunking" that
//! `004_62bf1a5ddd5ed253.txt` improves on with regression chunking
//! ([`crate::RegressionChunker`] reuses the scan loop defined here).
//!
//! # The fingerprint
//!
//! Bytes are read as a polynomial over GF(2), most significant bit first; the
//! fingerprint of a window `b_0 .. b_47` (oldest first) is
//! `sum b_i(x) * x^(8 * (47 - i)) mod P(x)` with the fixed irreducible
//! polynomial of degree 53 [`RABIN_POLYNOMIAL`] = `0x39634cfcc16f29`
//! (`x^53 + x^52 + x^51 + x^48 + ... + x^5 + x^3 + 1`). It was chosen as the
//! first irreducible candidate among splitmix64 draws seeded with the ASCII
//! bytes "cairnRab" (bit 53 and bit 0 forced on); the unit tests re-check its
//! irreducibility with Rabin's test (`x^(2^53) = x mod P` and
//! `gcd(x^2 - x, P) = 1`, enough since 53 is prime).
//!
//! Two 256-entry tables ([`RabinTables`], built once per polynomial) make
//! each step two lookups:
//! * `APPEND[t] = t(x) * x^53 mod P` reduces the byte shifted out at the top
//!   when the fingerprint is multiplied by `x^8` and the new byte is appended;
//! * `OUT[b] = b(x) * x^(8 * 48) mod P` cancels the byte leaving the window.
//!   Because reduction is linear, "remove the old byte, then append" equals
//!   "append, then XOR `OUT[old]`", which keeps the removal off the dependency
//!   chain.
//!
//! # Scanning
//!
//! Each chunk is scanned afresh: the window starts filling at `min - 48`, so
//! it is full when the first eligible cut (`len == min`) is tested, and the
//! bytes before that are skipped entirely. The window's bytes are read from the
//! input slice itself (`data[i - 48]`), so no ring buffer is needed. A chunk
//! whose scan reaches `max` without a match is cut at `max` (a forced cut).

use std::sync::{Arc, LazyLock};

use cairn_core::Chunker;

use crate::{check_sizes, CutKind};

/// The irreducible degree-53 polynomial of the Rabin fingerprint (bit `i` is
/// the coefficient of `x^i`).
pub const RABIN_POLYNOMIAL: u64 = 0x0039_634c_fcc1_6f29;

/// Bytes in the sliding window.
pub const RABIN_WINDOW: usize = 48;

const DEGREE: u32 = 53;
const FP_MASK: u64 = (1 << DEGREE) - 1;
const TOP_SHIFT: u32 = DEGREE - 8;

/// `a mod p` for any 64-bit polynomial `a` and a `p` of degree 53.
const fn poly_mod(mut a: u64, p: u64) -> u64 {
    let mut bit = 63;
    while bit >= DEGREE {
        if (a >> bit) & 1 == 1 {
            a ^= p << (bit - DEGREE);
        }
        bit -= 1;
    }
    a
}

/// `f * x^8 + b mod P`, for a reduced fingerprint `f` (degree < 53).
#[inline(always)]
const fn append_with(append: &[u64; 256], f: u64, b: u8) -> u64 {
    (((f << 8) | b as u64) & FP_MASK) ^ append[(f >> TOP_SHIFT) as usize]
}

/// The two lookup tables of one degree-53 polynomial (see the module doc).
pub struct RabinTables {
    poly: u64,
    append: [u64; 256],
    out: [u64; 256],
}

impl RabinTables {
    /// Tables of `poly`, which must have degree 53.
    const fn new(poly: u64) -> Self {
        assert!(poly >> DEGREE == 1);
        let mut append = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            append[i] = poly_mod((i as u64) << DEGREE, poly);
            i += 1;
        }
        let mut out = [0u64; 256];
        let mut i = 0;
        while i < 256 {
            let mut f = i as u64;
            let mut k = 0;
            while k < RABIN_WINDOW {
                f = append_with(&append, f, 0);
                k += 1;
            }
            out[i] = f;
            i += 1;
        }
        RabinTables { poly, append, out }
    }

    /// The tables of [`RABIN_POLYNOMIAL`] (clear repositories).
    pub fn unseeded() -> Arc<RabinTables> {
        static UNSEEDED: LazyLock<Arc<RabinTables>> =
            LazyLock::new(|| Arc::new(RabinTables::new(RABIN_POLYNOMIAL)));
        UNSEEDED.clone()
    }

    /// The tables of a random irreducible polynomial of degree 53 drawn from
    /// `seed` (a repository's chunker seed): candidates with bits 53 and 0
    /// set are read from BLAKE3's extendable output keyed with the seed until
    /// one passes Rabin's irreducibility test. About one candidate in 27
    /// passes, so this takes well under a millisecond.
    pub fn seeded(seed: &[u8; 32]) -> Arc<RabinTables> {
        let mut xof = blake3::Hasher::new_keyed(seed)
            .update(SEEDED_RABIN_CONTEXT)
            .finalize_xof();
        let poly = loop {
            let mut b = [0u8; 8];
            xof.fill(&mut b);
            let p = (u64::from_le_bytes(b) & FP_MASK) | (1 << DEGREE) | 1;
            if irreducible(p) {
                break p;
            }
        };
        Arc::new(RabinTables::new(poly))
    }

    /// The polynomial (bit `i` is the coefficient of `x^i`).
    pub fn polynomial(&self) -> u64 {
        self.poly
    }

    #[inline(always)]
    fn append(&self, f: u64, b: u8) -> u64 {
        append_with(&self.append, f, b)
    }

    /// Slides the window: appends `inb` and drops `out`, the byte 48
    /// positions earlier.
    #[inline(always)]
    fn slide(&self, f: u64, out: u8, inb: u8) -> u64 {
        // Same value as `append(f, inb) ^ OUT[out]`, associated so the OUT
        // lookup joins before the APPEND lookup that depends on `f`.
        ((((f << 8) | inb as u64) & FP_MASK) ^ self.out[out as usize])
            ^ self.append[(f >> TOP_SHIFT) as usize]
    }
}

/// Prints the polynomial only for the fixed one: a seeded polynomial is
/// derived from a secret.
impl std::fmt::Debug for RabinTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.poly == RABIN_POLYNOMIAL {
            write!(f, "RabinTables({:#x})", self.poly)
        } else {
            f.write_str("RabinTables(seeded)")
        }
    }
}

/// Key-derivation input of a seeded polynomial (the seed is the BLAKE3 key).
const SEEDED_RABIN_CONTEXT: &[u8] = b"cairn rabin polynomial v1";

/// `a * b mod p` over GF(2), for `a`, `b` reduced mod `p` of degree 53.
fn mulmod(mut a: u64, mut b: u64, p: u64) -> u64 {
    let mut r = 0;
    while b != 0 {
        if b & 1 == 1 {
            r ^= a;
        }
        b >>= 1;
        a <<= 1;
        if (a >> DEGREE) & 1 == 1 {
            a ^= p;
        }
    }
    r
}

/// Rabin's irreducibility test for `p` of degree 53. As 53 is prime, `p` is
/// irreducible iff `x^(2^53) = x mod p` and `gcd(x^2 - x, p) = 1`; the
/// latter says `p` has no root in GF(2): `p(0) = 1` (constant term set) and
/// `p(1) = 1` (an odd number of terms).
pub(crate) fn irreducible(p: u64) -> bool {
    if p >> DEGREE != 1 || p & 1 == 0 || p.count_ones().is_multiple_of(2) {
        return false;
    }
    let mut y = 2u64; // the polynomial x
    for _ in 0..DEGREE {
        y = mulmod(y, y, p);
    }
    y == 2
}

/// Rabin fingerprint of a whole byte string (the definition the rolling
/// update is tested against).
#[cfg(test)]
pub(crate) fn fingerprint_of(bytes: &[u8]) -> u64 {
    let t = RabinTables::unseeded();
    bytes.iter().fold(0, |f, &b| t.append(f, b))
}

/// Scans `data` (already truncated to at most `max` bytes) for the first
/// chunk length `len >= min` for which `hit(fp, len)` returns true, where
/// `fp` is the Rabin fingerprint of the window ending at `data[len - 1]`.
/// Returns `None` if no length qualifies (or `data.len() < min`).
#[inline(always)]
pub(crate) fn scan<F: FnMut(u64, usize) -> bool>(
    t: &RabinTables,
    data: &[u8],
    min: usize,
    mut hit: F,
) -> Option<usize> {
    let end = data.len();
    if end < min || min == 0 {
        return None;
    }
    let start = min.saturating_sub(RABIN_WINDOW);
    // Index of the first byte whose append also drops a byte from the window.
    let full = start + RABIN_WINDOW;
    let mut f = 0u64;
    // Fill the window up to byte min-2; no cut is eligible there.
    for &b in &data[start..min - 1] {
        f = t.append(f, b);
    }
    // Lengths min ..= full (only more than one when min < 48): no removal yet.
    let lo = full.min(end);
    for (i, &b) in data.iter().enumerate().take(lo).skip(min - 1) {
        f = t.append(f, b);
        if hit(f, i + 1) {
            return Some(i + 1);
        }
    }
    if lo < end {
        let outs = &data[lo - RABIN_WINDOW..end - RABIN_WINDOW];
        let ins = &data[lo..end];
        for (k, (&o, &b)) in outs.iter().zip(ins).enumerate() {
            f = t.slide(f, o, b);
            if hit(f, lo + k + 1) {
                return Some(lo + k + 1);
            }
        }
    }
    None
}

/// Rabin/LBFS-style content-defined chunker: cut after the byte where the
/// 48-byte window's fingerprint has its low `log2(avg)` bits all set.
#[derive(Clone, Debug)]
pub struct RabinChunker {
    min: usize,
    max: usize,
    mask: u64,
    last: CutKind,
    tables: Arc<RabinTables>,
}

impl RabinChunker {
    /// Panics unless `0 < min <= avg <= max` and `avg` is a power of two
    /// (use [`crate::new_chunker`] for validated configuration).
    pub fn new(min: usize, avg: usize, max: usize) -> Self {
        Self::with_tables(min, avg, max, RabinTables::unseeded())
    }

    /// [`Self::new`] with another polynomial's tables (a repository's
    /// seeded one, [`RabinTables::seeded`]).
    pub fn with_tables(min: usize, avg: usize, max: usize, tables: Arc<RabinTables>) -> Self {
        check_sizes("rabin", min, avg, max);
        RabinChunker {
            min,
            max,
            mask: avg as u64 - 1,
            last: CutKind::EndOfInput,
            tables,
        }
    }

    /// How the last returned boundary was chosen: [`CutKind::Full`],
    /// [`CutKind::Forced`] or [`CutKind::EndOfInput`].
    pub fn last_cut_kind(&self) -> CutKind {
        self.last
    }
}

impl Chunker for RabinChunker {
    fn next_boundary(&mut self, data: &[u8], eof: bool) -> Option<usize> {
        if data.is_empty() || (data.len() < self.max && !eof) {
            return None;
        }
        let end = data.len().min(self.max);
        let mask = self.mask;
        match scan(&self.tables, &data[..end], self.min, |f, _| {
            f & mask == mask
        }) {
            Some(len) => {
                self.last = CutKind::Full;
                Some(len)
            }
            None => {
                self.last = CutKind::unmatched(end, self.max);
                Some(end)
            }
        }
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
    use crate::testutil::random_bytes;

    fn degree(a: u128) -> i32 {
        127 - a.leading_zeros() as i32
    }

    fn rem(mut a: u128, p: u128) -> u128 {
        while a != 0 && degree(a) >= degree(p) {
            a ^= p << (degree(a) - degree(p));
        }
        a
    }

    fn gcd(mut a: u128, mut b: u128) -> u128 {
        while b != 0 {
            (a, b) = (b, rem(a, b));
        }
        a
    }

    /// Rabin's irreducibility test for a polynomial of degree 53 (prime):
    /// x^(2^53) == x (mod p) and gcd(x^2 - x, p) == 1, the gcd computed
    /// here rather than read off p's terms as the production test does.
    fn irreducible_prime_degree(p: u64) -> bool {
        assert_eq!(63 - p.leading_zeros(), DEGREE, "{p:#x}");
        let mut y = 2u64; // the polynomial x
        for _ in 0..(63 - p.leading_zeros()) {
            y = mulmod(y, y, p);
        }
        y == 2 && gcd(p as u128, 0b110) == 1
    }

    #[test]
    fn polynomial_is_irreducible() {
        assert_eq!(63 - RABIN_POLYNOMIAL.leading_zeros(), DEGREE);
        assert!(irreducible_prime_degree(RABIN_POLYNOMIAL));
        // Sanity of the test itself: divisible by x; x^53 + 1 by x + 1.
        assert!(!irreducible_prime_degree(RABIN_POLYNOMIAL ^ 1));
        assert!(!irreducible_prime_degree((1 << 53) | 1));
        assert!(irreducible(RABIN_POLYNOMIAL));
        assert!(!irreducible(RABIN_POLYNOMIAL ^ 1));
        assert!(!irreducible((1 << 53) | 1));
    }

    /// The production test agrees with the gcd-based reference on random
    /// degree-53 candidates (irreducible ones included: about 1 in 27 of
    /// those with the constant term set).
    #[test]
    fn irreducibility_test_matches_reference() {
        let mut hits = 0;
        for (i, w) in random_bytes(7, 8 * 2000).chunks_exact(8).enumerate() {
            let p = (u64::from_le_bytes(w.try_into().unwrap()) & FP_MASK) | (1 << DEGREE);
            let p = if i % 2 == 0 { p | 1 } else { p };
            assert_eq!(irreducible(p), irreducible_prime_degree(p), "{p:#x}");
            hits += irreducible(p) as u32;
        }
        assert!((10..100).contains(&hits), "{hits} irreducible of 2000");
    }

    #[test]
    fn seeded_polynomials_are_irreducible_deterministic_and_differ_per_seed() {
        let a = RabinTables::seeded(&[1; 32]);
        let b = RabinTables::seeded(&[2; 32]);
        assert_eq!(a.polynomial(), RabinTables::seeded(&[1; 32]).polynomial());
        assert_ne!(a.polynomial(), b.polynomial());
        for t in [&a, &b] {
            assert_ne!(t.polynomial(), RABIN_POLYNOMIAL);
            assert_eq!(63 - t.polynomial().leading_zeros(), DEGREE);
            assert!(irreducible_prime_degree(t.polynomial()));
        }
        assert_eq!(format!("{a:?}"), "RabinTables(seeded)");
        assert_eq!(RabinTables::unseeded().polynomial(), RABIN_POLYNOMIAL);
        // The derivation is part of the format (docs/FORMAT.md): pinned.
        assert_eq!(
            RabinTables::seeded(&[0; 32]).polynomial(),
            0x23_6616_db30_7339
        );
    }

    #[test]
    fn tables_match_direct_reduction() {
        for t in [RabinTables::unseeded(), RabinTables::seeded(&[3; 32])] {
            let p = t.polynomial();
            let mut x384 = 1u64;
            for _ in 0..RABIN_WINDOW * 8 {
                x384 = mulmod(x384, 2, p);
            }
            for b in 0..256u64 {
                assert_eq!(t.append[b as usize], poly_mod(b << DEGREE, p));
                assert_eq!(t.out[b as usize], mulmod(b, x384, p));
            }
        }
    }

    #[test]
    fn rolling_equals_fingerprint_of_window() {
        let data = random_bytes(1, 600);
        let min = 100;
        let mut seen = 0;
        let t = RabinTables::unseeded();
        scan(&t, &data, min, |f, len| {
            assert_eq!(
                f,
                fingerprint_of(&data[len - RABIN_WINDOW..len]),
                "len {len}"
            );
            seen += 1;
            false
        });
        assert_eq!(seen, 600 - min + 1);
        // min below the window size: the window is partial up to 48 bytes.
        let mut seen = 0;
        scan(&t, &data[..200], 10, |f, len| {
            let from = len.saturating_sub(RABIN_WINDOW);
            assert_eq!(f, fingerprint_of(&data[from..len]), "len {len}");
            seen += 1;
            false
        });
        assert_eq!(seen, 191);
    }

    #[test]
    fn cuts_depend_only_on_window_content() {
        let mut c = RabinChunker::new(64, 256, 4096);
        let data = random_bytes(2, 1 << 16);
        let mut cuts = Vec::new();
        crate::cut_points(&mut c, &data, &mut cuts);
        let mut start = 0;
        for &end in &cuts {
            let len = end - start;
            if c.min_size() < len && len < c.max_size() && end < data.len() {
                let f = fingerprint_of(&data[end - RABIN_WINDOW..end]);
                assert_eq!(f & 255, 255);
            }
            start = end;
        }
        let avg = data.len() / cuts.len();
        assert!((200..400).contains(&avg), "average chunk {avg}");
    }

    #[test]
    fn zeros_give_forced_cuts() {
        let mut c = RabinChunker::new(1024, 4096, 8192);
        let data = vec![0u8; 20000];
        assert_eq!(c.next_boundary(&data, false), Some(8192));
        assert_eq!(c.last_cut_kind(), CutKind::Forced);
        assert_eq!(c.next_boundary(&data[..5000], false), None);
        assert_eq!(c.next_boundary(&data[..5000], true), Some(5000));
        assert_eq!(c.last_cut_kind(), CutKind::EndOfInput);
        assert_eq!(c.next_boundary(&data[..10], true), Some(10));
        assert_eq!(c.next_boundary(&[], true), None);
    }
}
