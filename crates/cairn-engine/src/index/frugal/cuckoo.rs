//! The RAM-frugal in-memory part of the index (paper 004, "Low RAM footprint
//! index"): a partial-key cuckoo hash table whose slots are exactly 6 bytes,
//! a 2-byte signature of the fingerprint and a 4-byte pointer to the chunk's
//! record in the on-disk log ([`super::log::ChunkLog`]).
//!
//! The full fingerprint is never held in RAM. A key has two candidate
//! buckets; the first comes from the fingerprint's hash, the second from the
//! first and the signature alone (`alt(b, sig) = (H(sig) - b) mod n`, an
//! involution), so an entry can be kicked to its other bucket without knowing
//! its fingerprint. The signature uses hash bits disjoint from the bucket
//! bits, so two keys in the same bucket still differ in signature with
//! probability 65535/65536.
//!
//! A kick-out path is bounded; an entry left homeless goes to a small stash
//! (never lost). When the stash passes [`STASH_LIMIT`] entries or the load
//! passes the configured maximum, the owner grows the table. Growing needs
//! every fingerprint again (a slot cannot tell its bucket in a larger table),
//! so [`super::FrugalIndex`] rebuilds the table from the log.

use cairn_core::ids::mix64;
use cairn_core::Fingerprint;

/// Bytes of one slot: `u16` signature + `u32` log pointer.
pub const SLOT_BYTES: usize = 6;

/// The pointer value that marks an empty slot.
const EMPTY: u32 = u32::MAX;

/// The largest storable log position (`u32::MAX` marks an empty slot).
pub const MAX_POINTER: u32 = u32::MAX - 1;

/// Homeless entries tolerated before the table asks to grow.
pub const STASH_LIMIT: usize = 16;

/// The hash bits of a fingerprint that the table uses: 32 bits select the
/// primary bucket, 16 disjoint bits are the signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    bucket_hash: u32,
    sig: u16,
}

impl KeyHash {
    /// A hash of every fingerprint byte, so fingerprints that share a
    /// prefix (a crafted trace) still spread over buckets and signatures.
    pub fn of(fp: &Fingerprint) -> Self {
        let h = fp.fold64();
        KeyHash {
            bucket_hash: (h >> 32) as u32,
            sig: h as u16,
        }
    }

    pub fn signature(&self) -> u16 {
        self.sig
    }
}

/// Lemire's multiply-shift range reduction: a uniform `u32` onto `0..n`.
#[inline]
fn reduce(x: u32, n: usize) -> usize {
    ((x as u64 * n as u64) >> 32) as usize
}

#[derive(Clone, Copy, Debug)]
struct StashEntry {
    bucket: u32,
    sig: u16,
    ptr: u32,
}

/// Bytes one stash entry is charged (bucket + signature + pointer).
pub const STASH_ENTRY_BYTES: usize = 10;

pub struct CuckooTable {
    /// `buckets * bucket_slots` slots, bucket `i` at `[i*bs, (i+1)*bs)`.
    slots: Vec<[u8; SLOT_BYTES]>,
    buckets: usize,
    bucket_slots: usize,
    len: usize,
    stash: Vec<StashEntry>,
    max_kicks: usize,
    rng: u64,
    kicks: u64,
}

#[inline]
fn encode(sig: u16, ptr: u32) -> [u8; SLOT_BYTES] {
    let s = sig.to_le_bytes();
    let p = ptr.to_le_bytes();
    [s[0], s[1], p[0], p[1], p[2], p[3]]
}

#[inline]
fn decode(slot: &[u8; SLOT_BYTES]) -> (u16, u32) {
    (
        u16::from_le_bytes([slot[0], slot[1]]),
        u32::from_le_bytes([slot[2], slot[3], slot[4], slot[5]]),
    )
}

const EMPTY_SLOT: [u8; SLOT_BYTES] = [0, 0, 0xff, 0xff, 0xff, 0xff];

impl CuckooTable {
    /// A table of exactly `buckets` buckets of `bucket_slots` slots.
    pub fn with_buckets(buckets: usize, bucket_slots: usize, max_kicks: usize) -> Self {
        let buckets = buckets.max(1);
        let bucket_slots = bucket_slots.clamp(1, 64);
        CuckooTable {
            slots: vec![EMPTY_SLOT; buckets * bucket_slots],
            buckets,
            bucket_slots,
            len: 0,
            stash: Vec::new(),
            max_kicks: max_kicks.max(1),
            rng: 0x9e37_79b9_7f4a_7c15,
            kicks: 0,
        }
    }

    /// A table sized so that `entries` fill it to `max_load`.
    pub fn with_capacity(
        entries: usize,
        bucket_slots: usize,
        max_load: f64,
        max_kicks: usize,
    ) -> Self {
        let (buckets, bs) = Self::shape_for(entries, bucket_slots, max_load);
        Self::with_buckets(buckets, bs, max_kicks)
    }

    /// `(buckets, bucket_slots)` of [`with_capacity`](Self::with_capacity).
    fn shape_for(entries: usize, bucket_slots: usize, max_load: f64) -> (usize, usize) {
        let bs = bucket_slots.clamp(1, 64);
        let slots = (entries as f64 / max_load.clamp(0.1, 1.0)).ceil() as usize;
        (slots.div_ceil(bs).max(1), bs)
    }

    /// Slot RAM of an empty [`with_capacity`](Self::with_capacity) table,
    /// without allocating it.
    pub fn ram_bytes_for(entries: usize, bucket_slots: usize, max_load: f64) -> usize {
        let (buckets, bs) = Self::shape_for(entries, bucket_slots, max_load);
        buckets * bs * SLOT_BYTES
    }

    #[inline]
    fn primary(&self, key: KeyHash) -> usize {
        reduce(key.bucket_hash, self.buckets)
    }

    /// The other bucket of an entry with signature `sig` that sits in `b`.
    #[inline]
    fn alt(&self, b: usize, sig: u16) -> usize {
        let h = reduce((mix64(sig as u64 ^ 0x5bd1_e995) >> 32) as u32, self.buckets);
        (h + self.buckets - b) % self.buckets
    }

    fn bucket(&self, b: usize) -> &[[u8; SLOT_BYTES]] {
        &self.slots[b * self.bucket_slots..(b + 1) * self.bucket_slots]
    }

    fn try_place(&mut self, b: usize, sig: u16, ptr: u32) -> bool {
        let bs = self.bucket_slots;
        for slot in &mut self.slots[b * bs..(b + 1) * bs] {
            if decode(slot).1 == EMPTY {
                *slot = encode(sig, ptr);
                return true;
            }
        }
        false
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Inserts `(key, ptr)`. Never loses the entry: after `max_kicks`
    /// displacements the homeless entry goes to the stash, and
    /// [`CuckooTable::needs_grow`] tells the owner to grow.
    pub fn insert(&mut self, key: KeyHash, ptr: u32) {
        assert!(ptr <= MAX_POINTER, "log pointer {ptr} out of range");
        self.len += 1;
        let i1 = self.primary(key);
        let i2 = self.alt(i1, key.sig);
        if self.try_place(i1, key.sig, ptr) || self.try_place(i2, key.sig, ptr) {
            return;
        }
        // Random-walk cuckoo: evict a random slot, move the victim to its other bucket.
        let (mut sig, mut p) = (key.sig, ptr);
        let mut b = if self.next_rand() & 1 == 0 { i1 } else { i2 };
        for _ in 0..self.max_kicks {
            self.kicks += 1;
            let s = b * self.bucket_slots + (self.next_rand() % self.bucket_slots as u64) as usize;
            let victim = decode(&self.slots[s]);
            self.slots[s] = encode(sig, p);
            (sig, p) = victim;
            b = self.alt(b, sig);
            if self.try_place(b, sig, p) {
                return;
            }
        }
        self.stash.push(StashEntry {
            bucket: b as u32,
            sig,
            ptr: p,
        });
    }

    /// Appends to `out` the pointers of every entry whose signature matches
    /// `key` in its two candidate buckets (and the stash). Each is a possible
    /// match; the caller confirms against the full fingerprint in the log.
    pub fn candidates(&self, key: KeyHash, out: &mut Vec<u32>) {
        let i1 = self.primary(key);
        let i2 = self.alt(i1, key.sig);
        for b in [i1, i2] {
            for slot in self.bucket(b) {
                let (sig, ptr) = decode(slot);
                if ptr != EMPTY && sig == key.sig && !out.contains(&ptr) {
                    out.push(ptr);
                }
            }
            if i1 == i2 {
                break;
            }
        }
        for e in &self.stash {
            let eb = e.bucket as usize;
            if e.sig == key.sig && (eb == i1 || eb == i2) {
                out.push(e.ptr);
            }
        }
    }

    /// Removes the entry `(key, ptr)` (its signature in one of its two
    /// buckets, or in the stash). Returns whether it was there. The freed
    /// slot takes any later insert; no other entry moves.
    pub fn remove(&mut self, key: KeyHash, ptr: u32) -> bool {
        let i1 = self.primary(key);
        let i2 = self.alt(i1, key.sig);
        let bs = self.bucket_slots;
        for b in [i1, i2] {
            for slot in &mut self.slots[b * bs..(b + 1) * bs] {
                if *slot == encode(key.sig, ptr) {
                    *slot = EMPTY_SLOT;
                    self.len -= 1;
                    return true;
                }
            }
        }
        let in_stash = self.stash.iter().position(|e| {
            let eb = e.bucket as usize;
            e.sig == key.sig && e.ptr == ptr && (eb == i1 || eb == i2)
        });
        match in_stash {
            Some(i) => {
                self.stash.swap_remove(i);
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    /// Whether the entry `(key, ptr)` is in the table: a log record is live
    /// exactly when the table points at it.
    pub fn holds(&self, key: KeyHash, ptr: u32) -> bool {
        let i1 = self.primary(key);
        let i2 = self.alt(i1, key.sig);
        let want = encode(key.sig, ptr);
        self.bucket(i1).contains(&want)
            || self.bucket(i2).contains(&want)
            || self.stash.iter().any(|e| {
                let eb = e.bucket as usize;
                e.sig == key.sig && e.ptr == ptr && (eb == i1 || eb == i2)
            })
    }

    /// Entries stored (table + stash).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn buckets(&self) -> usize {
        self.buckets
    }

    pub fn bucket_slots(&self) -> usize {
        self.bucket_slots
    }

    /// Slots in the table (entries it can hold without the stash).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub fn stash_len(&self) -> usize {
        self.stash.len()
    }

    /// Total displacements performed by inserts so far.
    pub fn kicks(&self) -> u64 {
        self.kicks
    }

    /// Entries / slots.
    pub fn load_factor(&self) -> f64 {
        (self.len - self.stash.len()) as f64 / self.slots.len() as f64
    }

    /// Whether the owner should grow the table: too many homeless entries.
    pub fn needs_grow(&self) -> bool {
        self.stash.len() > STASH_LIMIT
    }

    /// RAM of the table proper: every slot, empty or not, at 6 bytes
    /// (`Vec<[u8; 6]>` has no padding), plus the stash.
    pub fn ram_bytes(&self) -> usize {
        self.slots.len() * SLOT_BYTES + self.stash.len() * STASH_ENTRY_BYTES
    }

    /// `ram_bytes() / len()`: RAM per indexed chunk including empty slots,
    /// i.e. `6 / load_factor` (plus the stash).
    pub fn bytes_per_chunk(&self) -> f64 {
        if self.len == 0 {
            return 0.0;
        }
        self.ram_bytes() as f64 / self.len as f64
    }
}
