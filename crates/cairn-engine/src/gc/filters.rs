//! The membership structures of the mark phase (`003_ea5fccc485a97c5d.txt`
//! §3.1-§3.4):
//!
//! - [`LiveFilter`]: a Bloom filter with a fresh seed per run ("the hash
//!   functions used by the Bloom filter are changed between runs so that
//!   false positives are likely to be removed the next time", §3.1). It
//!   serves as the Live, Live Instance (key: fingerprint XOR container id),
//!   Candidate and Dead filters. A false positive keeps a dead chunk; it
//!   never drops a live one.
//! - [`Phv`]: a perfect-hash vector (§3.2): a perfect hash function over a
//!   static key set (the `ph` crate's PHast) and `bits` bits per slot.
//!   Exact for members; a non-member aliases some member's bits, so the key
//!   set must hold every fingerprint the collector will ask about
//!   (docs/gc.md, "Safety"). 003 asks for a perfect hash, not a minimal
//!   one, and counts function and vector together (2.8 bits per
//!   fingerprint for PGC+'s live vector, §3.4). So a 1-bit vector uses a
//!   non-minimal PHast with large buckets: about 1.4 bits of function and
//!   1.14 slots per key, 2.5-2.6 bits per fingerprint in all, where the
//!   minimal function alone takes 1.9-2.1. Wider slots (the tree nodes'
//!   two bits and 16-bit tags) use the minimal function, as every spare
//!   slot costs their whole width.

use cairn_core::{mix64, ContainerId, Fingerprint};
use fastbloom::BloomFilter;
use ph::GetSize;

/// Bloom bits per key of the LGC/PGC filters: about 2% false positives
/// with 6 hash functions.
pub const BLOOM_BITS_PER_KEY: u64 = 8;

pub struct LiveFilter {
    filter: BloomFilter,
    seed: u64,
    bits: u64,
}

impl LiveFilter {
    /// A filter for `expected` keys at [`BLOOM_BITS_PER_KEY`], seeded by `seed`.
    pub fn new(expected: u64, seed: u64) -> Self {
        let bits = (expected.max(64) * BLOOM_BITS_PER_KEY).next_multiple_of(64);
        LiveFilter {
            filter: BloomFilter::with_num_bits(bits as usize).hashes(6),
            seed,
            bits,
        }
    }

    #[inline]
    fn key(&self, fp: &Fingerprint) -> u64 {
        mix64(fp.fold64() ^ self.seed)
    }

    /// The Live Instance key (§3.1 step 3): the fingerprint XOR the id of
    /// the container holding the instance.
    #[inline]
    fn instance_key(&self, fp: &Fingerprint, c: ContainerId) -> u64 {
        mix64(fp.fold64() ^ mix64(c.0 ^ 0x9e37_79b9_7f4a_7c15) ^ self.seed)
    }

    pub fn insert(&mut self, fp: &Fingerprint) {
        let k = self.key(fp);
        self.filter.insert_hash(k);
    }

    pub fn contains(&self, fp: &Fingerprint) -> bool {
        self.filter.contains_hash(self.key(fp))
    }

    pub fn insert_instance(&mut self, fp: &Fingerprint, c: ContainerId) {
        let k = self.instance_key(fp, c);
        self.filter.insert_hash(k);
    }

    pub fn contains_instance(&self, fp: &Fingerprint, c: ContainerId) -> bool {
        self.filter.contains_hash(self.instance_key(fp, c))
    }

    pub fn bytes(&self) -> u64 {
        self.bits / 8
    }
}

/// The perfect hash of a [`Phv`]: slot of each key.
enum SlotHash {
    /// Slots `0..n`.
    Minimal(ph::phast::Function<ph::seeds::Bits8>),
    /// Slots `0..range`, `range` a few percent to a sixth above `n`.
    Spread(ph::phast::Perfect<ph::seeds::Bits8, ph::phast::SeedOnly, SaltedHasher>),
}

/// The library's default hasher with every level seed moved by a salt, so
/// that one key set can be given several independent functions.
#[derive(Clone, Default)]
struct SaltedHasher {
    inner: ph::BuildDefaultSeededHasher,
    salt: u64,
}

impl ph::BuildSeededHasher for SaltedHasher {
    type Hasher = <ph::BuildDefaultSeededHasher as ph::BuildSeededHasher>::Hasher;

    #[inline]
    fn build_hasher(&self, seed: u64) -> Self::Hasher {
        // Level seeds are small counters: the salt lives in the high half.
        self.inner.build_hasher(seed ^ (self.salt << 32))
    }
}

/// Below this many keys the spread function is built [`SPREAD_TRIES`] times
/// under different salts and the smallest kept. Its size there is mostly a
/// fixed part that varies several-fold with the keys (measured over 400
/// random key sets: 7.3 to 33.7 bits per key at 275 keys, 3.2 to 8.6 at
/// 2,695), while each build takes well under a millisecond.
const SPREAD_RETRY_BELOW: usize = 1 << 14;
const SPREAD_TRIES: u64 = 4;

/// Average bucket size (x100) of the spread function. PHast's default for
/// 8-bit seeds is 450, which spends function bits to keep the range near
/// `n`; with one vector bit per slot, 650 minimises function plus vector
/// (measured at 49 k, 1 M and 5 M random fingerprints: 2.61, 2.54 and 2.53
/// bits per key, against 2.89, 2.83 and 2.82 at 450 and 3.09, 2.94 and
/// 2.93 for the minimal function), and builds 3x faster than the minimal
/// function.
const SPREAD_BUCKET_SIZE_100: u16 = 650;

impl SlotHash {
    fn build(keys: Vec<Fingerprint>, spread: bool) -> Self {
        if !spread {
            return SlotHash::Minimal(ph::phast::Function::from_vec_mt(keys));
        }
        let params = ph::phast::Params::new(ph::seeds::Bits8, SPREAD_BUCKET_SIZE_100);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let build = |keys: Vec<Fingerprint>, salt: u64| {
            ph::phast::Perfect::with_vec_p_threads_hash_sc(
                keys,
                &params,
                threads,
                SaltedHasher {
                    salt,
                    ..SaltedHasher::default()
                },
                ph::phast::SeedOnly,
            )
        };
        if keys.len() >= SPREAD_RETRY_BELOW {
            return SlotHash::Spread(build(keys, 0));
        }
        // Function and one vector bit per slot: what the vector costs.
        let bits = |f: &ph::phast::Perfect<_, _, _>| f.size_bytes() * 8 + f.output_range();
        let mut best = build(keys.clone(), 0);
        for salt in 1..SPREAD_TRIES {
            let next = build(keys.clone(), salt);
            if bits(&next) < bits(&best) {
                best = next;
            }
        }
        SlotHash::Spread(best)
    }

    #[inline]
    fn get(&self, fp: &Fingerprint) -> usize {
        match self {
            SlotHash::Minimal(f) => f.get(fp),
            SlotHash::Spread(f) => f.get(fp),
        }
    }

    fn slots(&self, keys: usize) -> usize {
        match self {
            SlotHash::Minimal(_) => keys,
            SlotHash::Spread(f) => f.output_range().max(keys),
        }
    }

    fn size_bytes(&self) -> usize {
        match self {
            SlotHash::Minimal(f) => f.size_bytes(),
            SlotHash::Spread(f) => f.size_bytes(),
        }
    }
}

/// A perfect hash over a fixed set of fingerprints and a vector of `bits`
/// bits per slot.
pub struct Phv {
    hash: SlotHash,
    words: Vec<u64>,
    bits: u32,
    keys: usize,
    /// Slots of the vector: `keys`, or more for a spread function.
    slots: usize,
    /// 16 bits of each key's fingerprint at its slot ([`Phv::build_tagged`]):
    /// a fingerprint outside the key set is told apart with probability
    /// 1 - 2^-16 instead of silently aliasing a member.
    tags: Vec<u16>,
}

#[inline]
fn tag(fp: &Fingerprint) -> u16 {
    (fp.fold64() >> 48) as u16
}

impl Phv {
    /// Analysis (§3.2 phase 1'): builds the function over `keys`, which must
    /// be distinct.
    pub fn build(keys: Vec<Fingerprint>, bits: u32) -> Self {
        Self::build_with(keys, bits, bits == 1)
    }

    fn build_with(keys: Vec<Fingerprint>, bits: u32, spread: bool) -> Self {
        let n = keys.len();
        let hash = SlotHash::build(keys, spread);
        let slots = if n == 0 { 0 } else { hash.slots(n) };
        let total = (slots as u64 * u64::from(bits)).div_ceil(64) as usize;
        Phv {
            hash,
            words: vec![0; total.max(1)],
            bits,
            keys: n,
            slots,
            tags: Vec::new(),
        }
    }

    /// [`Phv::build`] over a minimal function, plus a 16-bit tag per key,
    /// for [`Phv::is_member`] (the tree-node vector: a node referenced but
    /// stored nowhere must be found, not aliased to another node's bits).
    pub fn build_tagged(keys: Vec<Fingerprint>, bits: u32) -> Self {
        let mut v = Self::build_with(keys.clone(), bits, false);
        v.tags = vec![0; v.slots];
        for k in &keys {
            let slot = v.hash.get(k);
            v.tags[slot] = tag(k);
        }
        v
    }

    /// Whether `fp` is (very probably) one of the keys; always true
    /// without tags.
    pub fn is_member(&self, fp: &Fingerprint) -> bool {
        if self.tags.is_empty() {
            return self.keys > 0;
        }
        self.tags[self.hash.get(fp)] == tag(fp)
    }

    #[inline]
    fn pos(&self, fp: &Fingerprint, bit: u32) -> usize {
        debug_assert!(bit < self.bits);
        if self.keys == 0 {
            return 0;
        }
        self.hash.get(fp) * self.bits as usize + bit as usize
    }

    #[inline]
    pub fn get(&self, fp: &Fingerprint, bit: u32) -> bool {
        let p = self.pos(fp, bit);
        self.words[p / 64] >> (p % 64) & 1 == 1
    }

    /// Sets the bit; returns whether it was clear.
    #[inline]
    pub fn set(&mut self, fp: &Fingerprint, bit: u32) -> bool {
        let p = self.pos(fp, bit);
        let w = &mut self.words[p / 64];
        let was = *w >> (p % 64) & 1 == 1;
        *w |= 1 << (p % 64);
        !was
    }

    #[inline]
    pub fn clear(&mut self, fp: &Fingerprint, bit: u32) {
        let p = self.pos(fp, bit);
        self.words[p / 64] &= !(1 << (p % 64));
    }

    /// Clears every bit (a second mark pass starts afresh).
    pub fn reset(&mut self) {
        self.words.fill(0);
    }

    /// Keys whose `bit` is set.
    pub fn count(&self, bit: u32) -> u64 {
        if self.bits == 1 {
            return self.words.iter().map(|w| u64::from(w.count_ones())).sum();
        }
        let mut n = 0;
        for k in 0..self.slots {
            let p = k * self.bits as usize + bit as usize;
            n += self.words[p / 64] >> (p % 64) & 1;
        }
        n
    }

    pub fn keys(&self) -> usize {
        self.keys
    }

    /// Bytes of the function and the vector together.
    pub fn bytes(&self) -> u64 {
        (self.hash.size_bytes() + self.words.len() * 8 + self.tags.len() * 2) as u64
    }

    /// Bytes of the hash function alone.
    pub fn function_bytes(&self) -> u64 {
        self.hash.size_bytes() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(i: u32) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    #[test]
    fn phv_bits_are_per_key_and_the_function_is_small() {
        let keys: Vec<_> = (0..200_000).map(fp).collect();
        let mut v = Phv::build(keys.clone(), 1);
        for k in keys.iter().step_by(3) {
            assert!(v.set(k, 0));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(v.get(k, 0), i % 3 == 0);
        }
        assert_eq!(v.count(0), 200_000u64.div_ceil(3));
        v.clear(&keys[0], 0);
        assert!(!v.get(&keys[0], 0));
        let bits_per_key = v.bytes() as f64 * 8.0 / keys.len() as f64;
        assert!(bits_per_key <= 3.0, "{bits_per_key} bits per key");

        let mut two = Phv::build(keys.clone(), 2);
        two.set(&keys[5], 1);
        assert!(two.get(&keys[5], 1) && !two.get(&keys[5], 0));
        assert_eq!(two.count(1), 1);
    }

    #[test]
    fn every_key_set_size_gets_distinct_slots_within_the_vector() {
        for n in [0u32, 1, 2, 3, 7, 64, 65, 1000, 10_000, 49_000] {
            let keys: Vec<_> = (0..n).map(fp).collect();
            for (bits, tagged) in [(1, false), (2, false), (2, true)] {
                let mut v = if tagged {
                    Phv::build_tagged(keys.clone(), bits)
                } else {
                    Phv::build(keys.clone(), bits)
                };
                for k in &keys {
                    assert!(v.is_member(k));
                    assert!(v.set(k, bits - 1), "n {n}: two keys share a slot");
                }
                assert_eq!(v.count(bits - 1), u64::from(n));
                assert_eq!(v.keys(), n as usize);
            }
        }
    }

    #[test]
    fn the_live_vector_meets_003s_bits_per_fingerprint() {
        // 003 §3.4: function and vector together, 2.8 bits per fingerprint.
        let keys: Vec<_> = (0..200_000).map(fp).collect();
        let v = Phv::build(keys.clone(), 1);
        let total = v.bytes() as f64 * 8.0 / keys.len() as f64;
        assert!(total <= 2.8, "{total} bits per fingerprint");
        let minimal = Phv::build_tagged(keys.clone(), 1);
        let function = minimal.function_bytes() as f64 * 8.0 / keys.len() as f64;
        assert!(
            total < function + 1.0,
            "spread {total}, minimal {function} + 1"
        );
    }

    #[test]
    fn bloom_instances_differ_by_container() {
        let mut f = LiveFilter::new(1000, 7);
        f.insert_instance(&fp(1), ContainerId(3));
        assert!(f.contains_instance(&fp(1), ContainerId(3)));
        assert!(!f.contains(&fp(1)));
        let misses = (4..1000)
            .filter(|c| f.contains_instance(&fp(1), ContainerId(*c)))
            .count();
        assert!(misses < 50, "{misses}");
    }
}
