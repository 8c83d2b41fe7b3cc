//! Typed identifiers: chunk fingerprints, container ids, chunk kinds.
//!
//! Fingerprint width is a parameter, not a constant: FSL traces carry 48-bit
//! hashes, DDFS uses SHA-1 (20 bytes), cairn defaults to BLAKE3-256 (32 bytes).
//! A [`Fingerprint`] stores up to [`MAX_FINGERPRINT_LEN`] bytes plus its length.

use std::fmt;
use std::hash::{Hash, Hasher};

/// The widest fingerprint cairn stores (SHA-256 / BLAKE3-256).
pub const MAX_FINGERPRINT_LEN: usize = 32;

/// A chunk's content fingerprint, `len` bytes wide (1..=32).
///
/// Invariant: bytes past `len` are zero, so equality and derived ordering
/// are those of the significant bytes.
#[derive(Clone, Copy, Eq, PartialOrd, Ord)]
pub struct Fingerprint {
    len: u8,
    bytes: [u8; MAX_FINGERPRINT_LEN],
}

impl Fingerprint {
    /// Builds a fingerprint from its significant bytes. Panics if `bytes` is
    /// empty or wider than 32 bytes: widths come from configuration, which is
    /// validated before any fingerprint is built.
    pub fn from_slice(bytes: &[u8]) -> Self {
        assert!(
            !bytes.is_empty() && bytes.len() <= MAX_FINGERPRINT_LEN,
            "fingerprint width {} out of range",
            bytes.len()
        );
        let mut out = [0u8; MAX_FINGERPRINT_LEN];
        out[..bytes.len()].copy_from_slice(bytes);
        Fingerprint {
            len: bytes.len() as u8,
            bytes: out,
        }
    }

    /// Like [`Fingerprint::from_slice`] but returns `None` for a bad width.
    pub fn try_from_slice(bytes: &[u8]) -> Option<Self> {
        (!bytes.is_empty() && bytes.len() <= MAX_FINGERPRINT_LEN).then(|| Self::from_slice(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first 8 bytes as a little-endian integer (zero-padded for narrow
    /// fingerprints). Fingerprints are uniformly distributed, so this is a
    /// good hash and bucket selector without rehashing.
    pub fn prefix_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[..8]);
        u64::from_le_bytes(b)
    }

    /// A 64-bit hash of **every** significant byte: the length, then each
    /// 8-byte little-endian word (the last zero-padded) folded in through
    /// the splitmix64 finalizer. Hash tables, Bloom filters and index pages
    /// key on this rather than on a prefix, so fingerprints that share
    /// their first bytes (a crafted trace) still spread evenly.
    #[inline]
    pub fn fold64(&self) -> u64 {
        Self::fold64_of(self.as_bytes())
    }

    /// [`Fingerprint::fold64`] of the fingerprint whose significant bytes
    /// are `bytes`, without building it (an index page's binary search
    /// folds every entry it probes).
    #[inline]
    pub fn fold64_of(bytes: &[u8]) -> u64 {
        let mut h = bytes.len() as u64;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            h = mix64(h ^ u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = mix64(h ^ u64::from_le_bytes(last));
        }
        h
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.as_bytes())
    }

    pub fn from_hex(s: &str) -> Option<Self> {
        let v = hex::decode(s).ok()?;
        Self::try_from_slice(&v)
    }
}

impl PartialEq for Fingerprint {
    /// Two 128-bit compares instead of a `memcmp` call: fingerprint equality
    /// is the innermost operation of every index and cache probe.
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let word = |b: &[u8; MAX_FINGERPRINT_LEN], i: usize| {
            u128::from_ne_bytes(b[i..i + 16].try_into().expect("16 bytes"))
        };
        self.len == other.len
            && word(&self.bytes, 0) == word(&other.bytes, 0)
            && word(&self.bytes, 16) == word(&other.bytes, 16)
    }
}

impl Hash for Fingerprint {
    /// Every significant byte counts (see [`Fingerprint::fold64`]); maps
    /// keyed by fingerprint additionally mix in a per-process random seed
    /// ([`FpHasher`]).
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.fold64());
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.to_hex())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A container's id: unique over the life of the repository (DDFS §3.3),
/// allocated in increasing order so "containers appended since a checkpoint"
/// is a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerId(pub u64);

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// What a stored chunk holds. Data chunks are L0 leaves of file content;
/// tree chunks are L1..Ln recipe nodes; meta chunks hold directory listings.
/// The kind and level are recorded in each container descriptor so physical
/// GC can scan level by level (`003_ea5fccc485a97c5d.txt` §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ChunkKind {
    Data = 0,
    Tree = 1,
    Meta = 2,
}

impl ChunkKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(ChunkKind::Data),
            1 => Some(ChunkKind::Tree),
            2 => Some(ChunkKind::Meta),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fold of a slice is the fold of the fingerprint it makes (the
    /// index's page placement, part of the on-disk format, rests on it):
    /// checked against the definition, word by zero-padded word.
    #[test]
    fn fold_of_a_slice_is_the_fingerprints_fold() {
        let bytes: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(151) ^ 0x5a).collect();
        for w in 1..=MAX_FINGERPRINT_LEN {
            let fp = Fingerprint::from_slice(&bytes[..w]);
            let mut padded = [0u8; 32];
            padded[..w].copy_from_slice(&bytes[..w]);
            let mut h = w as u64;
            for word in padded[..w.div_ceil(8) * 8].chunks_exact(8) {
                h = mix64(h ^ u64::from_le_bytes(word.try_into().unwrap()));
            }
            assert_eq!(Fingerprint::fold64_of(&bytes[..w]), h, "width {w}");
            assert_eq!(fp.fold64(), h, "width {w}");
        }
    }

    #[test]
    fn fingerprint_width_is_kept() {
        let f = Fingerprint::from_slice(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(f.len(), 6);
        assert_eq!(f.as_bytes(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(f.to_hex(), "010203040506");
        assert_eq!(Fingerprint::from_hex("010203040506"), Some(f));
        assert_ne!(f, Fingerprint::from_slice(&[1, 2, 3, 4, 5, 6, 0]));
        assert!(Fingerprint::try_from_slice(&[]).is_none());
        assert!(Fingerprint::try_from_slice(&[0; 33]).is_none());
    }
}

/// A hasher for maps keyed by [`Fingerprint`]: `Fingerprint::hash` writes
/// the full-width [`Fingerprint::fold64`], which is mixed once more with a
/// seed drawn at random per process, so even fingerprints crafted to collide
/// under the unkeyed fold cannot be aimed at one bucket (no SipHash: one mix
/// is enough and ~10x cheaper). Map iteration order therefore varies between
/// runs; nothing that decides or counts may depend on it.
#[derive(Clone, Copy, Debug)]
pub struct FpHasher(u64);

impl Default for FpHasher {
    fn default() -> Self {
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        FpHasher(*SEED.get_or_init(|| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
        }))
    }
}

impl Hasher for FpHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

/// `BuildHasher` for [`FpHasher`].
pub type BuildFpHasher = std::hash::BuildHasherDefault<FpHasher>;

/// A `HashMap` keyed by fingerprint.
pub type FpMap<V> = std::collections::HashMap<Fingerprint, V, BuildFpHasher>;

/// A `HashSet` of fingerprints.
pub type FpSet = std::collections::HashSet<Fingerprint, BuildFpHasher>;

/// The splitmix64 finalizer: a bijective 64-bit mix.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
