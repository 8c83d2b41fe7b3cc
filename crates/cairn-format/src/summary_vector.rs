//! The Summary Vector checkpoint (DDFS §4.1: the Bloom filter over every
//! stored fingerprint is checkpointed to disk and, on recovery, loaded and
//! brought up to date by replaying what was appended since). The filter's
//! bits are opaque here: the engine's Bloom filter (`fastbloom`) produces and
//! consumes the words; this module only frames them.
//!
//! The payload sits in an [envelope](crate::envelope), magic `CAIRNBLM`,
//! version 2 (version 1 keyed the filter on a fingerprint prefix; a checkpoint
//! of another version is rebuilt from the index by the engine):
//!
//! ```text
//! offset  size  field
//! 0       8     covered_below u64: every container below is in the filter
//! 8       4     hashes u32 (1..=64)
//! 12      4     reserved, 0
//! 16      8     inserted u64 (insertions, duplicates included)
//! 24      8     word_count u64 (>= 1)
//! 32      8*n   words, u64 each
//! ```

use cairn_core::{ContainerId, Error, Result};

use crate::bytes::{put_u32, put_u64, Reader};
use crate::envelope;

pub const SUMMARY_VECTOR_MAGIC: [u8; 8] = *b"CAIRNBLM";
/// The checkpoint version this build writes and the newest it reads.
pub const SUMMARY_VECTOR_VERSION: u32 = 2;

const WHAT: &str = "summary vector checkpoint";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryVectorCheckpoint {
    pub covered_below: ContainerId,
    pub hashes: u32,
    pub inserted: u64,
    pub words: Vec<u64>,
}

pub fn encode_summary_vector(c: &SummaryVectorCheckpoint) -> Vec<u8> {
    encode_summary_vector_words(
        c.covered_below,
        c.hashes,
        c.inserted,
        c.words.len(),
        c.words.iter().copied(),
    )
}

/// [`encode_summary_vector`] of `word_count` words taken from `words` as
/// they are written: a filter's checkpoint held its bits once as a vector
/// of words, once as the payload and once as the envelope (issue 35).
pub fn encode_summary_vector_words(
    covered_below: ContainerId,
    hashes: u32,
    inserted: u64,
    word_count: usize,
    words: impl Iterator<Item = u64>,
) -> Vec<u8> {
    let len = 32 + word_count * 8;
    envelope::seal_with(&SUMMARY_VECTOR_MAGIC, SUMMARY_VECTOR_VERSION, len, |p| {
        put_u64(p, covered_below.0);
        put_u32(p, hashes);
        put_u32(p, 0);
        put_u64(p, inserted);
        put_u64(p, word_count as u64);
        for w in words.take(word_count) {
            put_u64(p, w);
        }
    })
}

pub fn decode_summary_vector(bytes: &[u8]) -> Result<SummaryVectorCheckpoint> {
    let (_, p) = envelope::open(&SUMMARY_VECTOR_MAGIC, SUMMARY_VECTOR_VERSION, WHAT, bytes)?;
    let mut r = Reader::new(WHAT, p);
    let covered_below = ContainerId(r.u64("covered_below")?);
    let hashes = r.u32("hashes")?;
    let _reserved = r.u32("reserved")?;
    let inserted = r.u64("inserted")?;
    let word_count = r.u64("word_count")?;
    if hashes == 0 || hashes > 64 {
        return Err(Error::corrupt(WHAT, "hash count out of range"));
    }
    if word_count == 0 || r.remaining() as u64 != word_count.saturating_mul(8) {
        return Err(Error::corrupt(
            WHAT,
            "bit-vector length does not match the payload",
        ));
    }
    let mut words = Vec::with_capacity(word_count as usize);
    for _ in 0..word_count {
        words.push(r.u64("word")?);
    }
    r.finish()?;
    Ok(SummaryVectorCheckpoint {
        covered_below,
        hashes,
        inserted,
        words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, reseal_envelope, MutationRun};
    use proptest::prelude::*;

    /// Mutated valid checkpoints never panic the decoder, and what decodes
    /// round-trips (the reserved word is not kept, so not byte for byte).
    #[test]
    fn mutated_checkpoints_round_trip_or_fail() {
        let valid = (
            proptest::collection::vec(any::<u64>(), 1..20),
            1u32..=64,
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(words, hashes, covered, inserted)| {
                let c = SummaryVectorCheckpoint {
                    covered_below: ContainerId(covered),
                    hashes,
                    inserted,
                    words,
                };
                ((), encode_summary_vector(&c))
            });
        let run = MutationRun {
            name: "summary vector",
            cases: 512,
            min_decoded_pct: 30,
        };
        check_mutations(run, valid, reseal_envelope, |(), bytes| {
            let Ok(c) = decode_summary_vector(bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(
                decode_summary_vector(&encode_summary_vector(&c)).unwrap(),
                c
            );
            Ok(true)
        });
    }

    proptest! {
        #[test]
        fn round_trip(words in proptest::collection::vec(any::<u64>(), 1..50), hashes in 1u32..=64,
                      covered in any::<u64>(), inserted in any::<u64>()) {
            let c = SummaryVectorCheckpoint { covered_below: ContainerId(covered), hashes, inserted, words };
            prop_assert_eq!(decode_summary_vector(&encode_summary_vector(&c)).unwrap(), c);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_summary_vector(&bytes);
        }
    }
}
