//! Chunk fingerprints: BLAKE3-256 (cairn's default), SHA-256, and SHA-1 (the
//! segment fingerprint of DDFS, `001_3652cceaf162c5a1.txt` §3.1 "Segment
//! fingerprinting computes the SHA-1 hash").
//!
//! The width of the result is the algorithm's ([`FingerprintAlgo::width`]):
//! 32, 32 and 20 bytes. The hash implementations are the `blake3`, `sha2` and
//! `sha1` crates; this module only dispatches.

use cairn_core::{Fingerprint, FingerprintAlgo};
use sha2::Digest;

/// The fingerprint of `data` under `algo`, `algo.width()` bytes wide.
pub fn fingerprint(algo: FingerprintAlgo, data: &[u8]) -> Fingerprint {
    match algo {
        FingerprintAlgo::Blake3 => Fingerprint::from_slice(blake3::hash(data).as_bytes()),
        FingerprintAlgo::Sha256 => Fingerprint::from_slice(&sha2::Sha256::digest(data)),
        FingerprintAlgo::Sha1 => Fingerprint::from_slice(&sha1::Sha1::digest(data)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers_for_abc() {
        let cases = [
            (
                FingerprintAlgo::Blake3,
                "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
            ),
            (
                FingerprintAlgo::Sha256,
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                FingerprintAlgo::Sha1,
                "a9993e364706816aba3e25717850c26c9cd0d89d",
            ),
        ];
        for (algo, hex) in cases {
            let f = fingerprint(algo, b"abc");
            assert_eq!(f.len(), algo.width());
            assert_eq!(f.to_hex(), hex, "{}", algo.name());
        }
    }

    #[test]
    fn known_answers_for_empty_input() {
        assert_eq!(
            fingerprint(FingerprintAlgo::Blake3, b"").to_hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(
            fingerprint(FingerprintAlgo::Sha256, b"").to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            fingerprint(FingerprintAlgo::Sha1, b"").to_hex(),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
    }
}
