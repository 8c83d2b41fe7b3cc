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
//! Two 256-entry tables, built at compile time, make each step two lookups:
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

/// `a mod P` for any 64-bit polynomial `a`.
const fn poly_mod(mut a: u64) -> u64 {
    let mut bit = 63;
    while bit >= DEGREE {
        if (a >> bit) & 1 == 1 {
            a ^= RABIN_POLYNOMIAL << (bit - DEGREE);
        }
        bit -= 1;
    }
    a
}

const fn make_append_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = poly_mod((i as u64) << DEGREE);
        i += 1;
    }
    t
}

static APPEND: [u64; 256] = make_append_table();

/// `f * x^8 + b mod P`, for a reduced fingerprint `f` (degree < 53).
#[inline(always)]
const fn append_with(table: &[u64; 256], f: u64, b: u8) -> u64 {
    (((f << 8) | b as u64) & FP_MASK) ^ table[(f >> TOP_SHIFT) as usize]
}

const fn make_out_table() -> [u64; 256] {
    let append = make_append_table();
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut f = i as u64;
        let mut k = 0;
        while k < RABIN_WINDOW {
            f = append_with(&append, f, 0);
            k += 1;
        }
        t[i] = f;
        i += 1;
    }
    t
}

static OUT: [u64; 256] = make_out_table();

#[inline(always)]
fn append(f: u64, b: u8) -> u64 {
    append_with(&APPEND, f, b)
}

/// Slides the window: appends `inb` and drops `out`, the byte 48 positions
/// earlier.
#[inline(always)]
fn slide(f: u64, out: u8, inb: u8) -> u64 {
    // Same value as `append(f, inb) ^ OUT[out]`, associated so the OUT lookup
    // joins before the APPEND lookup that depends on `f`.
    ((((f << 8) | inb as u64) & FP_MASK) ^ OUT[out as usize]) ^ APPEND[(f >> TOP_SHIFT) as usize]
}

/// Rabin fingerprint of a whole byte string (the definition the rolling
/// update is tested against).
#[cfg(test)]
pub(crate) fn fingerprint_of(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |f, &b| append(f, b))
}

/// Scans `data` (already truncated to at most `max` bytes) for the first
/// chunk length `len >= min` for which `hit(fp, len)` returns true, where
/// `fp` is the Rabin fingerprint of the window ending at `data[len - 1]`.
/// Returns `None` if no length qualifies (or `data.len() < min`).
#[inline(always)]
pub(crate) fn scan<F: FnMut(u64, usize) -> bool>(
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
        f = append(f, b);
    }
    // Lengths min ..= full (only more than one when min < 48): no removal yet.
    let lo = full.min(end);
    for (i, &b) in data.iter().enumerate().take(lo).skip(min - 1) {
        f = append(f, b);
        if hit(f, i + 1) {
            return Some(i + 1);
        }
    }
    if lo < end {
        let outs = &data[lo - RABIN_WINDOW..end - RABIN_WINDOW];
        let ins = &data[lo..end];
        for (k, (&o, &b)) in outs.iter().zip(ins).enumerate() {
            f = slide(f, o, b);
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
}

impl RabinChunker {
    /// Panics unless `0 < min <= avg <= max` and `avg` is a power of two
    /// (use [`crate::new_chunker`] for validated configuration).
    pub fn new(min: usize, avg: usize, max: usize) -> Self {
        check_sizes("rabin", min, avg, max);
        RabinChunker {
            min,
            max,
            mask: avg as u64 - 1,
            last: CutKind::EndOfInput,
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
        match scan(&data[..end], self.min, |f, _| f & mask == mask) {
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

    /// a * b mod p over GF(2), for polynomials of degree < 64 reduced mod p.
    fn mulmod(mut a: u64, mut b: u64, p: u64) -> u64 {
        let d = 63 - p.leading_zeros();
        let mut r = 0;
        while b != 0 {
            if b & 1 == 1 {
                r ^= a;
            }
            b >>= 1;
            a <<= 1;
            if (a >> d) & 1 == 1 {
                a ^= p;
            }
        }
        r
    }

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

    /// Rabin's irreducibility test for a polynomial of prime degree d:
    /// x^(2^d) == x (mod p) and gcd(x^2 - x, p) == 1.
    fn irreducible_prime_degree(p: u64) -> bool {
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
    }

    #[test]
    fn tables_match_direct_reduction() {
        let mut x384 = 1u64;
        for _ in 0..RABIN_WINDOW * 8 {
            x384 = mulmod(x384, 2, RABIN_POLYNOMIAL);
        }
        for b in 0..256u64 {
            assert_eq!(APPEND[b as usize], poly_mod(b << DEGREE));
            assert_eq!(OUT[b as usize], mulmod(b, x384, RABIN_POLYNOMIAL));
        }
    }

    #[test]
    fn rolling_equals_fingerprint_of_window() {
        let data = random_bytes(1, 600);
        let min = 100;
        let mut seen = 0;
        scan(&data, min, |f, len| {
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
        scan(&data[..200], 10, |f, len| {
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
