//! The Summary Vector (DDFS §4.1): an in-memory Bloom filter over every
//! stored fingerprint that answers "definitely new" without touching the disk.
//!
//! DDFS keeps it across restarts by checkpointing it to disk and, on recovery,
//! loading the latest checkpoint and replaying the containers appended since.
//! cairn writes a checkpoint (object `bloom/<generation>`) right after each
//! index merge, recording the container mark it covers; the replay is done by
//! `FingerprintIndex::open`. The filter is the `fastbloom` crate's plain
//! variant: every insert happens under the dedup state's lock (or before the
//! filter is shared), so its bits are set with ordinary stores. The atomic
//! variant set each bit with a locked read-modify-write, which waits for
//! every earlier access, so an insert's misses came one after another: its
//! inserts were 13% of a first backup's replay (issue 35).

use cairn_core::{ContainerId, Fingerprint, Result};
use cairn_format::summary_vector::{decode_summary_vector, encode_summary_vector_words};

use fastbloom::BloomFilter;

/// Version 2 keys the filter on a hash of the whole fingerprint (version 1 on
/// its first 8 bytes); a checkpoint of another version is rebuilt from the index.
pub use cairn_format::summary_vector::SUMMARY_VECTOR_VERSION as BLOOM_VERSION;

pub struct SummaryVector {
    filter: BloomFilter,
    hashes: u32,
    inserted: u64,
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
            filter: BloomFilter::with_num_bits(bits as usize).hashes(hashes),
            hashes,
            inserted: 0,
        }
    }

    /// An empty filter of the same size and hash count.
    pub fn empty_like(&self) -> Self {
        SummaryVector {
            filter: BloomFilter::with_num_bits(self.num_bits() as usize).hashes(self.hashes),
            hashes: self.hashes,
            inserted: 0,
        }
    }

    pub fn insert(&mut self, fp: &Fingerprint) {
        self.filter.insert_hash(key(fp));
        self.inserted += 1;
    }

    pub fn contains(&self, fp: &Fingerprint) -> bool {
        self.filter.contains_hash(key(fp))
    }

    /// Insertions so far (duplicates included).
    pub fn inserted(&self) -> u64 {
        self.inserted
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

    /// A checkpoint that covers every container below `covered_below`
    /// (layout: `cairn_format::summary_vector`).
    pub fn checkpoint(&self, covered_below: ContainerId) -> Vec<u8> {
        let words = (self.num_bits() / 64) as usize;
        encode_summary_vector_words(
            covered_below,
            self.hashes,
            self.inserted(),
            words,
            self.filter.iter(),
        )
    }

    /// Loads a checkpoint; returns the filter and the container mark it covers.
    pub fn from_checkpoint(bytes: &[u8]) -> Result<(Self, ContainerId)> {
        let c = decode_summary_vector(bytes)?;
        let filter = BloomFilter::from_vec(c.words).hashes(c.hashes);
        Ok((
            SummaryVector {
                filter,
                hashes: c.hashes,
                inserted: c.inserted,
            },
            c.covered_below,
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
        let mut sv = SummaryVector::with_capacity(10_000, 10);
        for i in 0..10_000 {
            sv.insert(&fp(i));
        }
        assert!((0..10_000).all(|i| sv.contains(&fp(i))));
        let fps = (10_000..110_000).filter(|&i| sv.contains(&fp(i))).count();
        assert!(fps < 2_000, "false-positive rate {} / 100000 too high", fps);
    }

    #[test]
    fn checkpoint_round_trips_and_detects_damage() {
        let mut sv = SummaryVector::with_capacity(1000, 10);
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
        let mut sv = SummaryVector::with_capacity(10_000, 10);
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
