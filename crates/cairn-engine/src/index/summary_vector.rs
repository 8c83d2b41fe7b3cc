//! The Summary Vector (DDFS §4.1): an in-memory Bloom filter over every
//! stored fingerprint that answers "definitely new" without touching the disk.
//!
//! DDFS keeps it across restarts by checkpointing it to disk and, on recovery,
//! loading the latest checkpoint and replaying the containers appended since.
//! cairn writes a checkpoint (object `bloom/<generation>`) right after each
//! index merge, recording the container mark it covers; the replay is done by
//! `FingerprintIndex::open`. The filter is the `fastbloom` crate's atomic
//! variant, so parallel streams insert without a lock.

use cairn_core::{ContainerId, Error, Fingerprint, Result};
use fastbloom::AtomicBloomFilter;
use std::sync::atomic::{AtomicU64, Ordering};

pub const BLOOM_MAGIC: &[u8; 8] = b"CAIRNBLM";
/// Version 2 keys the filter on a hash of the whole fingerprint (version 1 on
/// its first 8 bytes); a checkpoint of another version is rebuilt from the index.
pub const BLOOM_VERSION: u32 = 2;

pub struct SummaryVector {
    filter: AtomicBloomFilter,
    hashes: u32,
    inserted: AtomicU64,
}

/// The Bloom key of a fingerprint: a hash of every byte (not a prefix, so
/// fingerprints sharing their first bytes do not all set the same bits).
#[inline]
fn key(fp: &Fingerprint) -> u64 {
    fp.fold64()
}

/// Hash count minimizing the false-positive rate: k = ln 2 * bits/item.
fn optimal_hashes(bits_per_item: u32) -> u32 {
    ((bits_per_item as f64) * std::f64::consts::LN_2)
        .round()
        .clamp(1.0, 16.0) as u32
}

impl SummaryVector {
    /// A filter sized for `expected` chunks at `bits_per_chunk` bits each.
    pub fn with_capacity(expected: u64, bits_per_chunk: u32) -> Self {
        let bits = (expected.max(1024) * bits_per_chunk as u64).next_multiple_of(64);
        let hashes = optimal_hashes(bits_per_chunk);
        SummaryVector {
            filter: AtomicBloomFilter::with_num_bits(bits as usize).hashes(hashes),
            hashes,
            inserted: AtomicU64::new(0),
        }
    }

    pub fn insert(&self, fp: &Fingerprint) {
        self.filter.insert_hash(key(fp));
        self.inserted.fetch_add(1, Ordering::Relaxed);
    }

    pub fn contains(&self, fp: &Fingerprint) -> bool {
        self.filter.contains_hash(key(fp))
    }

    /// Insertions so far (duplicates included).
    pub fn inserted(&self) -> u64 {
        self.inserted.load(Ordering::Relaxed)
    }

    pub fn num_bits(&self) -> u64 {
        self.filter.num_bits() as u64
    }

    pub fn ram_bytes(&self) -> u64 {
        self.num_bits() / 8
    }

    /// Whether the filter holds more items than it was sized for at
    /// `bits_per_chunk`; a fuller filter's false-positive rate climbs fast.
    pub fn is_overfull(&self, items: u64, bits_per_chunk: u32) -> bool {
        items.saturating_mul(bits_per_chunk as u64) > self.num_bits()
    }

    /// Serializes a checkpoint that covers every container below `covered_below`.
    /// Payload: covered_below u64 | hashes u32 | reserved u32 | inserted u64 |
    /// word count u64 | words (u64 LE each).
    pub fn checkpoint(&self, covered_below: ContainerId) -> Vec<u8> {
        let words: Vec<u64> = self.filter.iter().collect();
        let mut p = Vec::with_capacity(32 + words.len() * 8);
        p.extend_from_slice(&covered_below.0.to_le_bytes());
        p.extend_from_slice(&self.hashes.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&self.inserted().to_le_bytes());
        p.extend_from_slice(&(words.len() as u64).to_le_bytes());
        for w in words {
            p.extend_from_slice(&w.to_le_bytes());
        }
        cairn_format::envelope::seal(BLOOM_MAGIC, BLOOM_VERSION, &p)
    }

    /// Loads a checkpoint; returns the filter and the container mark it covers.
    pub fn from_checkpoint(bytes: &[u8]) -> Result<(Self, ContainerId)> {
        let (_, p) =
            cairn_format::envelope::open(BLOOM_MAGIC, BLOOM_VERSION, "summary vector", bytes)?;
        let bad = |d: &str| Error::corrupt("summary vector checkpoint", d.to_string());
        if p.len() < 32 {
            return Err(bad("payload shorter than its header"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(p[o..o + 8].try_into().unwrap());
        let covered = ContainerId(u64_at(0));
        let hashes = u32::from_le_bytes(p[8..12].try_into().unwrap());
        let inserted = u64_at(16);
        let nwords = u64_at(24);
        if hashes == 0 || hashes > 64 {
            return Err(bad("hash count out of range"));
        }
        if nwords == 0 || (p.len() - 32) as u64 != nwords.saturating_mul(8) {
            return Err(bad("bit-vector length does not match the payload"));
        }
        let words: Vec<u64> = p[32..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let filter = AtomicBloomFilter::from_vec(words).hashes(hashes);
        Ok((
            SummaryVector {
                filter,
                hashes,
                inserted: AtomicU64::new(inserted),
            },
            covered,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(i: u64) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let sv = SummaryVector::with_capacity(10_000, 10);
        for i in 0..10_000 {
            sv.insert(&fp(i));
        }
        assert!((0..10_000).all(|i| sv.contains(&fp(i))));
        let fps = (10_000..110_000).filter(|&i| sv.contains(&fp(i))).count();
        assert!(fps < 2_000, "false-positive rate {} / 100000 too high", fps);
    }

    #[test]
    fn checkpoint_round_trips_and_detects_damage() {
        let sv = SummaryVector::with_capacity(1000, 10);
        for i in 0..500 {
            sv.insert(&fp(i));
        }
        let bytes = sv.checkpoint(ContainerId(42));
        let (back, covered) = SummaryVector::from_checkpoint(&bytes).unwrap();
        assert_eq!(covered, ContainerId(42));
        assert_eq!(back.inserted(), 500);
        assert!((0..500).all(|i| back.contains(&fp(i))));
        let mut bad = bytes.clone();
        bad[40] ^= 1;
        assert!(SummaryVector::from_checkpoint(&bad).is_err_and(|e| e.is_corruption()));
        assert!(SummaryVector::from_checkpoint(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn narrow_fingerprints_spread() {
        let sv = SummaryVector::with_capacity(10_000, 10);
        let narrow = |i: u64| Fingerprint::from_slice(&fp(i).as_bytes()[..6]);
        for i in 0..10_000 {
            sv.insert(&narrow(i));
        }
        let fps = (10_000..60_000)
            .filter(|&i| sv.contains(&narrow(i)))
            .count();
        assert!(
            fps < 1_000,
            "48-bit fingerprints: {fps} false positives / 50000"
        );
    }
}
