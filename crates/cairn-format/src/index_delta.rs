//! An index delta: what one commit changed in the fingerprint index, written
//! beside the paged index file instead of rewriting it (DDFS §3.2 batches
//! index updates; a delta makes a commit cost proportional to what changed,
//! which matters on object storage where every rewritten byte is uploaded).
//!
//! A delta belongs to one base generation and has a sequence number; the
//! index is the base file with its deltas applied in sequence order. Within
//! one delta the removals apply before the puts, so moving a fingerprint to
//! another container is a removal plus a put.
//!
//! The payload sits in an [envelope](crate::envelope) with magic `CAIRNIXD`:
//!
//! ```text
//! offset  size  field
//! 0       1     fp_width (1..=32)
//! 1       8     base_generation u64 (the index file it applies to)
//! 9       4     seq u32 (1, 2, ... within the base generation)
//! 13      8     covered_below u64 (every container below is indexed)
//! 21      4     remove_count u32
//! 25      4     put_count u32
//! 29      ...   remove_count fingerprints (fp_width bytes each)
//! ...     ...   put_count entries: fingerprint, container id u64
//! ```
//!
//! Fingerprints of each list are strictly ascending (one encoding per delta).
//!
//! Version 2 adds, after `covered_below`, `removes_below` u64: a removal
//! forgets an entry the earlier deltas put only if it names a container
//! below it (a garbage collection's removals, written beside backups that
//! may store the same chunk again in newer containers meanwhile:
//! docs/concurrency.md). A delta whose removals are unconditional is
//! written as version 1, so every delta has one encoding.

use cairn_core::{ContainerId, Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, put_u32, put_u64, Reader};
use crate::envelope;
use crate::index::IndexEntry;

pub const INDEX_DELTA_MAGIC: [u8; 8] = *b"CAIRNIXD";
/// The delta format version this build writes and the newest it reads.
pub const INDEX_DELTA_VERSION: u32 = 2;

const WHAT: &str = "index delta";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDelta {
    pub fp_width: usize,
    pub base_generation: u64,
    pub seq: u32,
    pub covered_below: ContainerId,
    /// The removals forget an entry an earlier delta put only if it names
    /// a container below this; `u64::MAX`: unconditional (version 1).
    pub removes_below: ContainerId,
    /// Fingerprints the index forgets (before `puts` apply).
    pub removes: Vec<Fingerprint>,
    pub puts: Vec<IndexEntry>,
}

/// Encodes `delta`; its lists are sorted (and must hold no repeats).
pub fn encode_index_delta(delta: &IndexDelta) -> Result<Vec<u8>> {
    check_fp_width(WHAT, delta.fp_width).map_err(|_| {
        Error::invalid(format!(
            "index delta: fingerprint width {} out of range",
            delta.fp_width
        ))
    })?;
    let mut removes = delta.removes.clone();
    removes.sort_unstable();
    let mut puts = delta.puts.clone();
    puts.sort_unstable_by_key(|e| e.fp);
    let repeated =
        removes.windows(2).any(|w| w[0] == w[1]) || puts.windows(2).any(|w| w[0].fp == w[1].fp);
    let wrong_width = removes.iter().any(|f| f.len() != delta.fp_width)
        || puts.iter().any(|e| e.fp.len() != delta.fp_width);
    if repeated || wrong_width {
        return Err(Error::invalid(
            "index delta: repeated fingerprint or fingerprint of another width",
        ));
    }
    let mut p = Vec::with_capacity(29 + removes.len() * 32 + puts.len() * 40);
    p.push(delta.fp_width as u8);
    put_u64(&mut p, delta.base_generation);
    put_u32(&mut p, delta.seq);
    put_u64(&mut p, delta.covered_below.0);
    let version = if delta.removes_below.0 == u64::MAX {
        1
    } else {
        put_u64(&mut p, delta.removes_below.0);
        2
    };
    put_u32(&mut p, removes.len() as u32);
    put_u32(&mut p, puts.len() as u32);
    for f in &removes {
        p.extend_from_slice(f.as_bytes());
    }
    for e in &puts {
        p.extend_from_slice(e.fp.as_bytes());
        put_u64(&mut p, e.container.0);
    }
    Ok(envelope::seal(&INDEX_DELTA_MAGIC, version, &p))
}

pub fn decode_index_delta(bytes: &[u8]) -> Result<IndexDelta> {
    let (version, payload) = envelope::open(&INDEX_DELTA_MAGIC, INDEX_DELTA_VERSION, WHAT, bytes)?;
    let mut r = Reader::new(WHAT, payload);
    let fp_width = r.u8("fp_width")? as usize;
    check_fp_width(WHAT, fp_width)?;
    let base_generation = r.u64("base_generation")?;
    let seq = r.u32("seq")?;
    if seq == 0 {
        return Err(r.corrupt("sequence number 0"));
    }
    let covered_below = ContainerId(r.u64("covered_below")?);
    let removes_below = if version >= 2 {
        let b = r.u64("removes_below")?;
        if b == u64::MAX {
            // Written as version 1: one encoding per delta.
            return Err(r.corrupt("version 2 with unconditional removals"));
        }
        ContainerId(b)
    } else {
        ContainerId(u64::MAX)
    };
    let remove_count = r.u32("remove_count")? as usize;
    let put_count = r.u32("put_count")? as usize;
    // Checked against the bytes present before anything is allocated.
    let need = remove_count as u128 * fp_width as u128 + put_count as u128 * (fp_width as u128 + 8);
    if need != r.remaining() as u128 {
        return Err(r.corrupt(format!(
            "counts need {need} bytes of entries, {} present",
            r.remaining()
        )));
    }
    let mut removes: Vec<Fingerprint> = Vec::with_capacity(remove_count);
    for _ in 0..remove_count {
        let f = r.fp(fp_width, "removed fingerprint")?;
        if removes.last().is_some_and(|last| *last >= f) {
            return Err(r.corrupt("removed fingerprints out of order"));
        }
        removes.push(f);
    }
    let mut puts: Vec<IndexEntry> = Vec::with_capacity(put_count);
    for _ in 0..put_count {
        let fp = r.fp(fp_width, "fingerprint")?;
        let container = ContainerId(r.u64("container")?);
        if puts.last().is_some_and(|last| last.fp >= fp) {
            return Err(r.corrupt("entries out of order"));
        }
        puts.push(IndexEntry { fp, container });
    }
    r.finish()?;
    Ok(IndexDelta {
        fp_width,
        base_generation,
        seq,
        covered_below,
        removes_below,
        removes,
        puts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, reseal_envelope, MutationRun};
    use proptest::prelude::*;

    fn fp(i: u32, w: usize) -> Fingerprint {
        let mut b = [0u8; 32];
        for (k, chunk) in b.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&cairn_core::mix64(i as u64 * 4 + k as u64).to_le_bytes());
        }
        Fingerprint::from_slice(&b[..w])
    }

    fn sample(w: usize, n: u32) -> IndexDelta {
        IndexDelta {
            fp_width: w,
            base_generation: 7,
            seq: 3,
            covered_below: ContainerId(99),
            removes_below: ContainerId(if n.is_multiple_of(2) { u64::MAX } else { 50 }),
            removes: (0..n / 3).map(|i| fp(i, w)).collect(),
            puts: (n / 3..n)
                .map(|i| IndexEntry {
                    fp: fp(i, w),
                    container: ContainerId(i as u64 + 1),
                })
                .collect(),
        }
    }

    fn sorted(mut d: IndexDelta) -> IndexDelta {
        d.removes.sort_unstable();
        d.puts.sort_unstable_by_key(|e| e.fp);
        d
    }

    #[test]
    fn round_trip_sorts_and_every_flip_is_detected() {
        let d = sample(20, 30);
        let bytes = encode_index_delta(&d).unwrap();
        assert_eq!(decode_index_delta(&bytes).unwrap(), sorted(d));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(decode_index_delta(&b).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(decode_index_delta(&bytes[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn conditional_removals_are_version_2_and_unconditional_ones_version_1() {
        for (below, version) in [(u64::MAX, 1u8), (50, 2)] {
            let mut d = sample(20, 6);
            d.removes_below = ContainerId(below);
            let bytes = encode_index_delta(&d).unwrap();
            assert_eq!(bytes[8], version, "version byte after the magic");
            assert_eq!(decode_index_delta(&bytes).unwrap(), sorted(d));
        }
    }

    #[test]
    fn repeats_and_widths_are_refused() {
        let mut d = sample(32, 6);
        d.puts.push(d.puts[0]);
        assert!(encode_index_delta(&d).is_err());
        let mut d = sample(32, 6);
        d.removes.push(fp(1, 20));
        assert!(encode_index_delta(&d).is_err());
    }

    /// Mutated valid deltas never panic the decoder, and what decodes
    /// re-encodes to the same bytes (one encoding per delta).
    #[test]
    fn mutated_deltas_decode_canonically_or_not_at_all() {
        let valid =
            (4usize..=32, 0u32..40, any::<u64>(), 1u32..5).prop_map(|(w, n, generation, seq)| {
                let mut d = sample(w, n);
                d.base_generation = generation;
                d.seq = seq;
                ((), encode_index_delta(&d).unwrap())
            });
        let run = MutationRun {
            name: "index delta",
            cases: 512,
            min_decoded_pct: 30,
        };
        check_mutations(run, valid, reseal_envelope, |(), bytes| {
            let Ok(d) = decode_index_delta(bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(encode_index_delta(&d).unwrap(), bytes);
            Ok(true)
        });
    }

    proptest! {
        #[test]
        fn prop_round_trip(w in 4usize..=32, n in 0u32..200) {
            let d = sample(w, n);
            let bytes = encode_index_delta(&d).unwrap();
            prop_assert_eq!(decode_index_delta(&bytes).unwrap(), sorted(d));
        }

        #[test]
        fn prop_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_index_delta(&bytes);
        }
    }
}
