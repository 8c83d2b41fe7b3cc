//! The chunk codec: the one place a chunk's bytes are turned into what is
//! stored and back. It fingerprints (DDFS §2: a chunk is named by its hash),
//! encodes (local compression, `004` "selective compression": stored raw
//! when compression does not save `min_savings_pct`), decodes, and verifies
//! the decoded bytes against the fingerprint. Backup, restore, `check` and
//! `repair` call it and nothing else. In an encrypted repository the
//! fingerprints are keyed BLAKE3 (`Fingerprinter`), both when a chunk is
//! stored and when a chunk read back is verified.

use std::sync::Arc;

use cairn_core::{CompressionCodec, CompressionConfig, Error, Fingerprint, Result};
use cairn_format::compress::{compress, decompress};
use cairn_format::container::{stored_chunk, ContainerMeta, Descriptor};

use crate::config::{Fingerprinter, RepoConfig};
use crate::repo_keys::RepoKeys;
use crate::Repository;

#[derive(Clone, Debug)]
pub struct ChunkCodec {
    compression: CompressionConfig,
    fingerprinter: Fingerprinter,
}

impl ChunkCodec {
    /// The codec of a repository with config `cfg`, keyed with `keys` (an
    /// encrypted repository's; see [`RepoConfig::fingerprinter`]).
    pub fn new(cfg: &RepoConfig, keys: Option<&Arc<RepoKeys>>) -> Self {
        ChunkCodec {
            compression: cfg.compression,
            fingerprinter: cfg.fingerprinter(keys),
        }
    }

    /// The codec of an open repository: keyed exactly when it has keys.
    pub fn for_repo(repo: &Repository) -> Self {
        Self::new(&repo.config, repo.keys())
    }

    /// Fingerprint width, bytes.
    pub fn fp_width(&self) -> usize {
        self.fingerprinter.width
    }

    /// Whether fingerprints are keyed (an encrypted repository).
    pub fn is_keyed(&self) -> bool {
        self.fingerprinter.is_keyed()
    }

    pub fn fingerprint(&self, raw: &[u8]) -> Fingerprint {
        self.fingerprinter.of(raw)
    }

    /// The bytes to store for `raw` (in `out`) and the codec that wrote them.
    pub fn encode(&self, raw: &[u8], out: &mut Vec<u8>) -> CompressionCodec {
        compress(&self.compression, raw, out)
    }

    /// The codec a traced chunk (sizes only) is recorded with.
    pub fn codec_for_sizes(&self, raw: u32, stored: u32) -> CompressionCodec {
        if stored < raw {
            self.compression.codec
        } else {
            CompressionCodec::None
        }
    }

    /// Decodes chunk `d` of the container `(bytes, meta)` into `out` and
    /// verifies it against its fingerprint. Damage is an error naming the
    /// container and the chunk, and leaves `out` empty: nothing unverified
    /// is ever handed out.
    pub fn decode_verified(
        &self,
        bytes: &[u8],
        meta: &ContainerMeta,
        d: &Descriptor,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        let stored = stored_chunk(bytes, meta, d).map_err(|e| damaged(meta, d, e))?;
        self.decode_stored_verified(stored, meta, d, out)
    }

    /// [`Self::decode_verified`] of a chunk's stored bytes alone (a range
    /// read of its container: `ContainerStore::read_chunk`).
    pub fn decode_stored_verified(
        &self,
        stored: &[u8],
        meta: &ContainerMeta,
        d: &Descriptor,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        decompress(d.codec, stored, d.raw_len as usize, out).map_err(|e| damaged(meta, d, e))?;
        self.verify_raw(out, meta, d).inspect_err(|_| out.clear())
    }

    /// [`Self::decode_stored_verified`] of stored bytes the caller owns: an
    /// uncompressed chunk's bytes become `out` as they are (no copy).
    pub fn decode_owned_verified(
        &self,
        stored: Vec<u8>,
        meta: &ContainerMeta,
        d: &Descriptor,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if d.codec != CompressionCodec::None || stored.len() != d.raw_len as usize {
            return self.decode_stored_verified(&stored, meta, d, out);
        }
        *out = stored;
        self.verify_raw(out, meta, d).inspect_err(|_| out.clear())
    }

    /// Whether `d` is stored as its raw bytes (no compression): its stored
    /// bytes are then its content, to be verified where they were read.
    pub fn stored_raw(d: &Descriptor) -> bool {
        d.codec == CompressionCodec::None && d.stored_len == d.raw_len
    }

    /// Verifies a chunk's raw bytes against its fingerprint (and recorded
    /// length): decoded ones, or those of a chunk stored raw
    /// ([`Self::stored_raw`]) read where the caller wants them. Every
    /// decode above ends here.
    pub fn verify_raw(&self, raw: &[u8], meta: &ContainerMeta, d: &Descriptor) -> Result<()> {
        if raw.len() != d.raw_len as usize || self.fingerprint(raw) != d.fp {
            return Err(Error::corrupt(
                format!("container {}", meta.id),
                format!("chunk {} does not match its fingerprint", d.fp),
            ));
        }
        Ok(())
    }

    /// [`Self::decode_verified`] for a report: the reason, if the chunk is bad.
    pub fn check(&self, bytes: &[u8], meta: &ContainerMeta, d: &Descriptor) -> Option<String> {
        let mut raw = Vec::new();
        self.decode_verified(bytes, meta, d, &mut raw)
            .err()
            .map(|e| match e {
                Error::Corrupt { detail, .. } => detail,
                other => other.to_string(),
            })
    }
}

/// A chunk of container `meta` that cannot be read out: the error names the
/// container and the chunk.
fn damaged(meta: &ContainerMeta, d: &Descriptor, detail: impl std::fmt::Display) -> Error {
    Error::corrupt(
        format!("container {}", meta.id),
        format!("chunk {}: {detail}", d.fp),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{ChunkKind, ContainerId};
    use cairn_format::container::{decode_container, ContainerWriter};
    use proptest::prelude::*;

    fn codec() -> ChunkCodec {
        ChunkCodec::new(&crate::Repository::default_config(), None)
    }

    /// A container holding `chunks`, encoded by the codec.
    fn container(c: &ChunkCodec, chunks: &[Vec<u8>]) -> (Vec<u8>, ContainerMeta) {
        let mut w = ContainerWriter::new(ContainerId(7), c.fp_width(), 1 << 22);
        let mut out = Vec::new();
        for raw in chunks {
            let codec = c.encode(raw, &mut out);
            w.push(
                c.fingerprint(raw),
                ChunkKind::Data,
                0,
                codec,
                raw.len() as u32,
                &out,
            );
        }
        let bytes = w.finish();
        let meta = decode_container(&bytes).unwrap();
        (bytes, meta)
    }

    /// A keyed codec names chunks by keyed BLAKE3 under the fingerprint
    /// key, verifies read-back chunks with it, and refuses a chunk named by
    /// its plain digest (and the plain codec a keyed one).
    #[test]
    fn keyed_codec_uses_the_fingerprint_key_when_storing_and_verifying() {
        let master = cairn_crypto::MasterKey::from_bytes([7; 32]);
        let keys = Arc::new(RepoKeys::new(&master, cairn_crypto::Algorithm::Aes256Gcm));
        let mut cfg = crate::Repository::default_config();
        cfg.encryption = Some(crate::config::EncryptionConfig {
            algorithm: "aes-256-gcm".into(),
        });
        let keyed = ChunkCodec::new(&cfg, Some(&keys));
        let plain = codec();
        assert!(keyed.is_keyed() && !plain.is_keyed());
        let raw = b"a chunk someone might guess".to_vec();
        let fp = keyed.fingerprint(&raw);
        assert_eq!(
            fp.as_bytes(),
            blake3::keyed_hash(keys.fingerprint_key(), &raw).as_bytes()
        );
        assert_ne!(fp, plain.fingerprint(&raw));
        assert_eq!(keyed.fp_width(), 32);

        let (bytes, meta) = container(&keyed, std::slice::from_ref(&raw));
        let mut out = Vec::new();
        keyed
            .decode_verified(&bytes, &meta, &meta.descriptors[0], &mut out)
            .unwrap();
        assert_eq!(out, raw);
        assert!(plain.check(&bytes, &meta, &meta.descriptors[0]).is_some());
        let (bytes, meta) = container(&plain, &[raw]);
        let why = keyed.check(&bytes, &meta, &meta.descriptors[0]).unwrap();
        assert!(why.contains("does not match its fingerprint"), "{why}");
    }

    /// Owned stored bytes decode as borrowed ones do: an uncompressed
    /// chunk is handed over as it is, a compressed one decompressed, and a
    /// flipped byte of either is refused with `out` left empty.
    #[test]
    fn owned_stored_bytes_decode_and_verify_as_borrowed_ones() {
        let c = codec();
        let mut noise = vec![0u8; 5000];
        blake3::Hasher::new()
            .update(b"incompressible")
            .finalize_xof()
            .fill(&mut noise);
        let text = b"the same words again and again ".repeat(100);
        let (bytes, meta) = container(&c, &[noise.clone(), text.clone()]);
        assert_eq!(meta.descriptors[0].codec, CompressionCodec::None);
        assert_ne!(meta.descriptors[1].codec, CompressionCodec::None);
        for (d, raw) in meta.descriptors.iter().zip([&noise, &text]) {
            let stored = stored_chunk(&bytes, &meta, d).unwrap().to_vec();
            let mut out = Vec::new();
            c.decode_owned_verified(stored.clone(), &meta, d, &mut out)
                .unwrap();
            assert_eq!(&out, raw);
            let mut bad = stored;
            bad[10] ^= 1;
            let e = c.decode_owned_verified(bad, &meta, d, &mut out);
            assert!(e.is_err() && out.is_empty());
        }
    }

    proptest! {
        /// Encode, store, decode, verify round-trips; a flipped byte of a
        /// payload fails decoding or verification or decodes to the very
        /// same bytes: it never panics and never hands out other bytes.
        #[test]
        fn round_trip_and_no_flip_hands_out_other_bytes(
            chunks in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..3000),
                    (0u8..4, 1usize..5000).prop_map(|(b, n)| vec![b; n]),
                ],
                1..5,
            ),
            flip in any::<proptest::sample::Index>(),
        ) {
            let c = codec();
            let (bytes, meta) = container(&c, &chunks);
            let mut out = Vec::new();
            for (raw, d) in chunks.iter().zip(&meta.descriptors) {
                c.decode_verified(&bytes, &meta, d, &mut out).unwrap();
                prop_assert_eq!(&out, raw);
            }
            let data_len = meta.data_len as usize;
            if data_len > 0 {
                let at = meta.data_offset as usize + flip.index(data_len);
                let mut bad = bytes.clone();
                bad[at] ^= 0x20;
                let hit = meta.descriptors.iter().zip(&chunks).find(|(d, _)| {
                    let s = meta.data_offset as usize + d.offset as usize;
                    (s..s + d.stored_len as usize).contains(&at)
                });
                if let Some((d, raw)) = hit {
                    // A flip the decoder never reads (a zstd header bit that
                    // does not change the output) is harmless; what must
                    // never happen is other bytes handed out.
                    let mut out = Vec::new();
                    match c.decode_verified(&bad, &meta, d, &mut out) {
                        Ok(()) => {
                            prop_assert_eq!(&out, raw);
                            prop_assert!(c.check(&bad, &meta, d).is_none());
                        }
                        Err(_) => {
                            prop_assert!(out.is_empty());
                            prop_assert!(c.check(&bad, &meta, d).is_some());
                        }
                    }
                }
            }
        }
    }
}
