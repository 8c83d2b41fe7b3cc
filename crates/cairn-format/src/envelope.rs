//! The envelope: framing for small whole-file objects (repository config,
//! snapshot records, Bloom-filter checkpoints).
//!
//! DDFS keeps a checkpoint of its Summary Vector on disk and the container
//! log as the truth (`001_3652cceaf162c5a1.txt` §4.1); such small objects are
//! written whole, so one magic, one version and one checksum frame them:
//!
//! ```text
//! offset  size  field
//! 0       8     magic (names the object kind, e.g. "CAIRNSNP")
//! 8       4     version u32
//! 12      8     payload_len u64
//! 20      n     payload
//! 20+n    4     crc32c u32 over bytes 0..20+n
//! ```
//!
//! Checks run in this order so a newer writer is reported as such even if it
//! changed the framing after the version field: magic, version (newer ->
//! [`Error::UnsupportedVersion`]), length, checksum.

use cairn_core::{Error, Result};

use crate::bytes::{get_u32, get_u64, put_u32, put_u64, show_magic};

const MAGIC_OFFSET: usize = 0;
const MAGIC_LEN: usize = 8;
const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC_LEN;
const VERSION_LEN: usize = 4;
const PAYLOAD_LEN_OFFSET: usize = VERSION_OFFSET + VERSION_LEN;
const PAYLOAD_LEN_LEN: usize = 8;
/// Bytes before the payload.
pub const ENVELOPE_HEADER_LEN: usize = PAYLOAD_LEN_OFFSET + PAYLOAD_LEN_LEN;
const CRC_LEN: usize = 4;
/// Bytes an envelope adds around its payload.
pub const ENVELOPE_OVERHEAD: usize = ENVELOPE_HEADER_LEN + CRC_LEN;

/// Frames `payload` as `magic | version | payload_len | payload | crc32c`.
pub fn seal(magic: &[u8; 8], version: u32, payload: &[u8]) -> Vec<u8> {
    seal_with(magic, version, payload.len(), |out| {
        out.extend_from_slice(payload)
    })
}

/// [`seal`] of a payload of `payload_len` bytes that `fill` appends, built
/// in place: a large payload (a Summary Vector's bits) is not held twice.
pub fn seal_with(
    magic: &[u8; 8],
    version: u32,
    payload_len: usize,
    fill: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENVELOPE_OVERHEAD + payload_len);
    out.extend_from_slice(magic);
    put_u32(&mut out, version);
    put_u64(&mut out, payload_len as u64);
    fill(&mut out);
    assert_eq!(
        out.len(),
        ENVELOPE_HEADER_LEN + payload_len,
        "the payload has the length its header says"
    );
    let crc = crc32c::crc32c(&out);
    put_u32(&mut out, crc);
    out
}

/// An envelope around a list of ids, each a little-endian u64 (a
/// collection's pending list, HAR's sparse containers).
pub fn seal_ids(magic: &[u8; 8], version: u32, ids: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let payload: Vec<u8> = ids.into_iter().flat_map(u64::to_le_bytes).collect();
    seal(magic, version, &payload)
}

/// Opens an envelope made by [`seal_ids`]: its ids, in stored order.
pub fn open_ids(magic: &[u8; 8], max_version: u32, what: &str, bytes: &[u8]) -> Result<Vec<u64>> {
    let (_, payload) = open(magic, max_version, what, bytes)?;
    if payload.len() % 8 != 0 {
        return Err(Error::corrupt(
            what,
            format!("{} bytes is not a list of 8-byte ids", payload.len()),
        ));
    }
    Ok(payload
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Verifies an envelope and returns `(version, payload)`.
///
/// `what` names the object in errors ("snapshot record", "config").
/// Versions above `max_version` are [`Error::UnsupportedVersion`]; version 0,
/// a wrong magic, a length that disagrees with the object's size and a
/// checksum mismatch are [`Error::Corrupt`].
pub fn open<'a>(
    magic: &[u8; 8],
    max_version: u32,
    what: &str,
    bytes: &'a [u8],
) -> Result<(u32, &'a [u8])> {
    let truncated = || {
        Error::corrupt(
            what,
            format!(
                "truncated at offset {}: {} bytes is shorter than the {ENVELOPE_OVERHEAD}-byte envelope",
                bytes.len(),
                bytes.len()
            ),
        )
    };
    if bytes.len() < MAGIC_LEN {
        return Err(truncated());
    }
    let found = &bytes[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC_LEN];
    if found != magic {
        return Err(Error::corrupt(
            what,
            format!(
                "bad magic \"{}\" (expected \"{}\")",
                show_magic(found),
                show_magic(magic)
            ),
        ));
    }
    if bytes.len() < ENVELOPE_OVERHEAD {
        return Err(truncated());
    }
    let version = get_u32(bytes, VERSION_OFFSET);
    if version > max_version {
        return Err(Error::UnsupportedVersion {
            what: what.to_string(),
            found: version,
            supported: max_version,
        });
    }
    if version == 0 {
        return Err(Error::corrupt(what, "version 0 is not a valid version"));
    }
    let payload_len = get_u64(bytes, PAYLOAD_LEN_OFFSET);
    let available = (bytes.len() - ENVELOPE_OVERHEAD) as u64;
    if payload_len != available {
        let detail = if payload_len > available {
            format!(
                "truncated at offset {}: payload length {payload_len} but only {available} payload bytes present",
                bytes.len()
            )
        } else {
            format!(
                "payload length {payload_len} but {} bytes follow the header (trailing bytes)",
                available + CRC_LEN as u64
            )
        };
        return Err(Error::corrupt(what, detail));
    }
    let crc_offset = bytes.len() - CRC_LEN;
    let stored = get_u32(bytes, crc_offset);
    let actual = crc32c::crc32c(&bytes[..crc_offset]);
    if stored != actual {
        return Err(Error::corrupt(
            what,
            format!("checksum mismatch: stored {stored:08x}, computed {actual:08x}"),
        ));
    }
    Ok((version, &bytes[ENVELOPE_HEADER_LEN..crc_offset]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, reseal_envelope, MutationRun};
    use proptest::prelude::*;

    const M: &[u8; 8] = b"CAIRNTST";

    #[test]
    fn round_trip() {
        let sealed = seal(M, 3, b"hello");
        assert_eq!(sealed.len(), ENVELOPE_OVERHEAD + 5);
        let (v, p) = open(M, 3, "test object", &sealed).unwrap();
        assert_eq!((v, p), (3, &b"hello"[..]));
        let empty = seal(M, 1, b"");
        assert_eq!(open(M, 1, "t", &empty).unwrap(), (1, &b""[..]));
    }

    #[test]
    fn every_prefix_is_rejected() {
        let sealed = seal(M, 1, b"payload bytes");
        for cut in 0..sealed.len() {
            let e = open(M, 1, "test object", &sealed[..cut]).unwrap_err();
            assert!(e.is_corruption(), "prefix {cut}: {e}");
        }
        let mut longer = sealed.clone();
        longer.push(0);
        let e = open(M, 1, "t", &longer).unwrap_err().to_string();
        assert!(e.contains("trailing"), "{e}");
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let sealed = seal(M, 1, b"payload bytes");
        for i in 0..sealed.len() * 8 {
            let mut b = sealed.clone();
            b[i / 8] ^= 1 << (i % 8);
            assert!(open(M, 1, "t", &b).is_err(), "flip {i} undetected");
        }
    }

    #[test]
    fn magic_and_version_errors() {
        let sealed = seal(M, 1, b"x");
        let e = open(b"CAIRNXXX", 1, "config", &sealed).unwrap_err();
        assert!(e.to_string().contains("bad magic"), "{e}");
        assert!(e.to_string().contains("config"), "{e}");
        let newer = seal(M, 2, b"x");
        match open(M, 1, "config", &newer) {
            Err(Error::UnsupportedVersion {
                found: 2,
                supported: 1,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        let zero = seal(M, 0, b"x");
        assert!(open(M, 1, "t", &zero).unwrap_err().is_corruption());
    }

    #[test]
    fn checksum_message() {
        let mut sealed = seal(M, 1, b"abc");
        sealed[ENVELOPE_HEADER_LEN] ^= 0xff;
        let e = open(M, 1, "t", &sealed).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    /// Mutated valid envelopes never panic `open`, and what opens seals
    /// again to the same bytes.
    #[test]
    fn mutated_envelopes_open_canonically_or_not_at_all() {
        let valid = (1u32..10, proptest::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(version, payload)| ((), seal(M, version, &payload)));
        let run = MutationRun {
            name: "envelope",
            cases: 512,
            min_decoded_pct: 40,
        };
        check_mutations(run, valid, reseal_envelope, |(), bytes| {
            let Ok((version, payload)) = open(M, 9, "test object", bytes) else {
                return Ok(false);
            };
            prop_assert_eq!(seal(M, version, payload), bytes);
            Ok(true)
        });
    }

    proptest! {
        #[test]
        fn prop_round_trip(version in 1u32..10, payload in proptest::collection::vec(any::<u8>(), 0..512)) {
            let sealed = seal(M, version, &payload);
            let (v, p) = open(M, 10, "t", &sealed).unwrap();
            prop_assert_eq!(v, version);
            prop_assert_eq!(p, &payload[..]);
        }

        #[test]
        fn prop_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = open(M, 1, "t", &bytes);
        }
    }
}
