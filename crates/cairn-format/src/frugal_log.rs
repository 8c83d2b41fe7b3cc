//! A segment of the frugal index's chunk-metadata log (`004` "Log-structured
//! organization"): fixed-size records `(fingerprint, container id)` in
//! append order; a record's position is the 4-byte pointer the engine's
//! cuckoo table holds. Layout (little-endian; `docs/frugal-index.md`):
//!
//! ```text
//! 0   4  magic "CFLG"
//! 4   1  version (1: puts only; 2: may hold removal records)
//! 5   1  fingerprint width W (1..=32)
//! 6   2  reserved (0)
//! 8   4  first record position
//! 12  4  record count C
//! 16  C × (W + 8)  records: fingerprint ‖ container id u64
//! end 4  crc32c of every byte before it
//! ```
//!
//! A record whose container id is [`REMOVAL`] (`u64::MAX`, never a real
//! container) is a removal: the fingerprint's earlier records no longer
//! count. Only version-2 segments hold removals, so a build that knows only
//! version 1 refuses a log with removals instead of reading one as a
//! container; a segment without removals is still written as version 1.
//!
//! Records are fixed-size, so the engine reads a run of them with one ranged
//! read ([`decode_record`]); the checksum is verified when a segment is read
//! whole ([`decode_segment`]).

use cairn_core::{ContainerId, Error, Fingerprint, Result};

use crate::bytes::check_fp_width;

pub const FRUGAL_LOG_MAGIC: [u8; 4] = *b"CFLG";
/// The newest segment version this build reads (and writes for a segment
/// holding a removal).
pub const FRUGAL_LOG_VERSION: u8 = 2;
/// The version of a segment without removals.
pub const FRUGAL_LOG_VERSION_PUTS: u8 = 1;
/// The container id of a removal record.
pub const REMOVAL: ContainerId = ContainerId(u64::MAX);
/// Segment header bytes.
pub const SEGMENT_HEADER_LEN: usize = 16;
/// Segment trailer bytes (crc32c).
pub const SEGMENT_TRAILER_LEN: usize = 4;

/// Whether `records` hold a removal (and so make a version-2 segment).
pub fn holds_removal(records: &[(Fingerprint, ContainerId)]) -> bool {
    records.iter().any(|(_, c)| *c == REMOVAL)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub width: usize,
    pub first: u32,
    pub count: u32,
    /// Version 2: the segment may hold removal records.
    pub removals: bool,
}

/// Encodes one segment of `records` starting at position `first`; every
/// fingerprint must be `width` bytes.
pub fn encode_segment(width: usize, first: u32, records: &[(Fingerprint, ContainerId)]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(SEGMENT_HEADER_LEN + records.len() * (width + 8) + SEGMENT_TRAILER_LEN);
    out.extend_from_slice(&FRUGAL_LOG_MAGIC);
    out.push(if holds_removal(records) {
        FRUGAL_LOG_VERSION
    } else {
        FRUGAL_LOG_VERSION_PUTS
    });
    out.push(width as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for (fp, c) in records {
        debug_assert_eq!(fp.len(), width);
        out.extend_from_slice(fp.as_bytes());
        out.extend_from_slice(&c.0.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a segment header (the first [`SEGMENT_HEADER_LEN`] bytes).
/// `what` names the segment in errors.
pub fn decode_segment_header(what: &str, b: &[u8]) -> Result<SegmentHeader> {
    if b.len() < SEGMENT_HEADER_LEN || b[..4] != FRUGAL_LOG_MAGIC {
        return Err(Error::corrupt(what, "bad magic"));
    }
    if !(FRUGAL_LOG_VERSION_PUTS..=FRUGAL_LOG_VERSION).contains(&b[4]) {
        return Err(Error::UnsupportedVersion {
            what: "frugal index segment".into(),
            found: b[4] as u32,
            supported: FRUGAL_LOG_VERSION as u32,
        });
    }
    let width = b[5] as usize;
    check_fp_width(what, width)?;
    Ok(SegmentHeader {
        width,
        first: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
        count: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
        removals: b[4] == FRUGAL_LOG_VERSION,
    })
}

/// One record's bytes (`width + 8` of them, as the caller sliced them).
pub fn decode_record(width: usize, b: &[u8]) -> (Fingerprint, ContainerId) {
    (
        Fingerprint::from_slice(&b[..width]),
        ContainerId(u64::from_le_bytes(
            b[width..width + 8].try_into().expect("8 bytes"),
        )),
    )
}

/// Decodes a whole segment: checksum, header, a size that matches the
/// record count exactly, and the version its records call for (2 exactly
/// when one is a removal).
pub fn decode_segment(
    what: &str,
    bytes: &[u8],
) -> Result<(SegmentHeader, Vec<(Fingerprint, ContainerId)>)> {
    if bytes.len() < SEGMENT_HEADER_LEN + SEGMENT_TRAILER_LEN {
        return Err(Error::corrupt(what, "truncated"));
    }
    let (body, tail) = bytes.split_at(bytes.len() - SEGMENT_TRAILER_LEN);
    if crc32c::crc32c(body) != u32::from_le_bytes(tail.try_into().expect("4 bytes")) {
        return Err(Error::corrupt(what, "checksum mismatch"));
    }
    let h = decode_segment_header(what, body)?;
    let rl = h.width + 8;
    if body.len() as u64 != SEGMENT_HEADER_LEN as u64 + h.count as u64 * rl as u64 {
        return Err(Error::corrupt(what, "record count does not match the size"));
    }
    let records: Vec<(Fingerprint, ContainerId)> = body[SEGMENT_HEADER_LEN..]
        .chunks_exact(rl)
        .map(|b| decode_record(h.width, b))
        .collect();
    // One encoding per segment: version 2 exactly when a removal is in it.
    if h.removals != holds_removal(&records) {
        return Err(Error::corrupt(
            what,
            if h.removals {
                "a version-2 segment without a removal record"
            } else {
                "a removal record in a version-1 segment"
            },
        ));
    }
    Ok((h, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, reseal_trailing_crc, MutationRun};
    use proptest::prelude::*;

    /// Bytes 6..8 of a segment are reserved: written as zero, not checked.
    const RESERVED: std::ops::Range<usize> = 6..8;

    /// Mutated valid segments never panic the decoders; what decodes
    /// re-encodes to the same bytes but the reserved ones, and its header
    /// agrees with the header decoder's.
    #[test]
    fn mutated_segments_decode_canonically_or_not_at_all() {
        let valid = (
            1usize..=32,
            any::<u32>(),
            proptest::collection::vec((any::<[u8; 32]>(), any::<u64>()), 0..12),
        )
            .prop_map(|(width, first, raw)| {
                let records: Vec<(Fingerprint, ContainerId)> = raw
                    .iter()
                    .map(|(b, c)| (Fingerprint::from_slice(&b[..width]), ContainerId(*c)))
                    .collect();
                ((), encode_segment(width, first, &records))
            });
        let run = MutationRun {
            name: "frugal index segment",
            cases: 512,
            min_decoded_pct: 30,
        };
        check_mutations(run, valid, reseal_trailing_crc, |(), bytes| {
            let _ = decode_segment_header("s", bytes);
            let Ok((h, records)) = decode_segment("s", bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(decode_segment_header("s", bytes).unwrap(), h);
            let mut again = encode_segment(h.width, h.first, &records);
            again[RESERVED].copy_from_slice(&bytes[RESERVED]);
            reseal_trailing_crc(&mut again);
            prop_assert_eq!(&again[..], bytes);
            Ok(true)
        });
    }

    proptest! {
        #[test]
        fn round_trip(
            width in 1usize..=32,
            first in any::<u32>(),
            n in 0usize..20,
            seed in any::<u8>(),
            removal in proptest::option::of(0usize..20),
        ) {
            let records: Vec<(Fingerprint, ContainerId)> = (0..n)
                .map(|i| {
                    let c = if removal == Some(i) { REMOVAL } else { ContainerId(i as u64 * 7) };
                    (Fingerprint::from_slice(&vec![seed ^ i as u8; width]), c)
                })
                .collect();
            let removals = removal.is_some_and(|r| r < n);
            let bytes = encode_segment(width, first, &records);
            prop_assert_eq!(bytes[4], if removals { 2 } else { 1 });
            let (h, back) = decode_segment("s", &bytes).unwrap();
            prop_assert_eq!(h, SegmentHeader { width, first, count: n as u32, removals });
            prop_assert_eq!(back, records);
        }

        /// A version-1 segment (written before removals existed) holding
        /// the removal id is damage, not a removal.
        #[test]
        fn a_removal_in_version_1_is_corrupt(width in 1usize..=32) {
            let fp = Fingerprint::from_slice(&vec![1; width]);
            let mut bytes = encode_segment(width, 0, &[(fp, REMOVAL)]);
            bytes[4] = 1;
            let n = bytes.len() - SEGMENT_TRAILER_LEN;
            let crc = crc32c::crc32c(&bytes[..n]);
            bytes[n..].copy_from_slice(&crc.to_le_bytes());
            prop_assert!(decode_segment("s", &bytes).is_err());
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_segment("s", &bytes);
            let _ = decode_segment_header("s", &bytes);
        }
    }
}
