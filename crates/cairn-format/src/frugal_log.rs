//! A segment of the frugal index's chunk-metadata log (`004` "Log-structured
//! organization"): fixed-size records `(fingerprint, container id)` in
//! append order; a record's position is the 4-byte pointer the engine's
//! cuckoo table holds. Layout (little-endian; `docs/frugal-index.md`):
//!
//! ```text
//! 0   4  magic "CFLG"
//! 4   1  version (1)
//! 5   1  fingerprint width W (1..=32)
//! 6   2  reserved (0)
//! 8   4  first record position
//! 12  4  record count C
//! 16  C × (W + 8)  records: fingerprint ‖ container id u64
//! end 4  crc32c of every byte before it
//! ```
//!
//! Records are fixed-size, so the engine reads a run of them with one ranged
//! read ([`decode_record`]); the checksum is verified when a segment is read
//! whole ([`decode_segment`]).

use cairn_core::{ContainerId, Error, Fingerprint, Result};

use crate::bytes::check_fp_width;

pub const FRUGAL_LOG_MAGIC: [u8; 4] = *b"CFLG";
/// The segment version this build writes and the newest it reads.
pub const FRUGAL_LOG_VERSION: u8 = 1;
/// Segment header bytes.
pub const SEGMENT_HEADER_LEN: usize = 16;
/// Segment trailer bytes (crc32c).
pub const SEGMENT_TRAILER_LEN: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub width: usize,
    pub first: u32,
    pub count: u32,
}

/// Encodes one segment of `records` starting at position `first`; every
/// fingerprint must be `width` bytes.
pub fn encode_segment(width: usize, first: u32, records: &[(Fingerprint, ContainerId)]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(SEGMENT_HEADER_LEN + records.len() * (width + 8) + SEGMENT_TRAILER_LEN);
    out.extend_from_slice(&FRUGAL_LOG_MAGIC);
    out.push(FRUGAL_LOG_VERSION);
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
    if b[4] != FRUGAL_LOG_VERSION {
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

/// Decodes a whole segment: checksum, header, and a size that matches the
/// record count exactly.
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
    let records = body[SEGMENT_HEADER_LEN..]
        .chunks_exact(rl)
        .map(|b| decode_record(h.width, b))
        .collect();
    Ok((h, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(width in 1usize..=32, first in any::<u32>(), n in 0usize..20, seed in any::<u8>()) {
            let records: Vec<(Fingerprint, ContainerId)> = (0..n)
                .map(|i| (Fingerprint::from_slice(&vec![seed ^ i as u8; width]), ContainerId(i as u64 * 7)))
                .collect();
            let bytes = encode_segment(width, first, &records);
            let (h, back) = decode_segment("s", &bytes).unwrap();
            prop_assert_eq!(h, SegmentHeader { width, first, count: n as u32 });
            prop_assert_eq!(back, records);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_segment("s", &bytes);
            let _ = decode_segment_header("s", &bytes);
        }
    }
}
