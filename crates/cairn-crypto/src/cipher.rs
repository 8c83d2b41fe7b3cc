//! Sealing and opening repository objects with an AEAD.
//!
//! A sealed object is `nonce (24 bytes) | ciphertext | tag (16 bytes)`: 40
//! bytes of overhead, the ciphertext as long as the plaintext. The caller's
//! associated data (`ad`) is authenticated but not stored; it binds an object
//! to its identity (kind and fingerprint, or its object name), so an object
//! swapped for another valid one of the same repository fails to open.
//!
//! # Nonces
//!
//! Every seal draws a fresh 192-bit nonce from the operating system. Two seals
//! under one key collide with probability about `n² / 2^193` after `n`
//! messages (the birthday bound): after 2^48 objects — far more than any
//! repository will hold — the chance is below 2^-96; a repeat only becomes
//! likely around 2^96 objects. No state is kept, so
//! concurrent writers, crashed runs that restart, restored VM snapshots and
//! copies of a repository all stay safe without a per-writer counter or a
//! fresh key per run, which are what a 96-bit nonce would need.
//!
//! XChaCha20-Poly1305 takes the 24-byte nonce directly. AES-256-GCM only has
//! a 96-bit nonce, so the nonce is extended the way XAES-256-GCM does it: the
//! first 12 bytes select a per-message key
//! `k_msg = BLAKE3-keyed(object key, "aes-256-gcm" || nonce[0..12])` and the
//! last 12 bytes are the GCM nonce under `k_msg`. A GCM (key, nonce) pair thus
//! repeats only if all 24 bytes repeat, and each `k_msg` encrypts a handful
//! of messages at most, far inside GCM's per-key limits.
//!
//! # Failure
//!
//! `open` verifies the tag before any plaintext is produced; on a wrong key, a
//! wrong `ad`, any changed byte or a truncated object it returns
//! `Error::Authentication` and leaves `out` exactly as it was.

use std::fmt;

use aes_gcm::Aes256Gcm;
use chacha20poly1305::aead::{AeadInOut, Key, KeyInit, Nonce, Tag};
use chacha20poly1305::XChaCha20Poly1305;
use zeroize::{Zeroize, Zeroizing};

use crate::key::{MasterKey, KEY_LEN};
use crate::{random, Algorithm};
use cairn_core::{Error, Result};

/// Length of the stored nonce.
pub const NONCE_LEN: usize = 24;
/// Length of the authentication tag.
pub const TAG_LEN: usize = 16;
/// Bytes a sealed object has beyond its plaintext.
pub const OVERHEAD: usize = NONCE_LEN + TAG_LEN;

/// Domain string of the AES-256-GCM per-message key derivation.
const AES_MESSAGE_KEY_DOMAIN: &[u8] = b"aes-256-gcm";

/// An AEAD under one raw 256-bit key: the object cipher's engine, also used
/// by key files to wrap the master key.
pub(crate) enum Sealer {
    /// The object key; each message derives its own GCM key from it.
    Aes(Zeroizing<[u8; KEY_LEN]>),
    ChaCha(XChaCha20Poly1305),
}

impl Sealer {
    pub(crate) fn new(algorithm: Algorithm, key: &[u8; KEY_LEN]) -> Sealer {
        match algorithm {
            Algorithm::Aes256Gcm => Sealer::Aes(Zeroizing::new(*key)),
            Algorithm::ChaCha20Poly1305 => {
                let key: &Key<XChaCha20Poly1305> = key.into();
                Sealer::ChaCha(XChaCha20Poly1305::new(key))
            }
        }
    }

    pub(crate) fn seal(&self, ad: &[u8], plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let nonce = random::array::<NONCE_LEN>()?;
        self.seal_with_nonce(&nonce, ad, plaintext, out)
    }

    pub(crate) fn seal_with_nonce(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let start = out.len();
        out.reserve(plaintext.len() + OVERHEAD);
        out.extend_from_slice(nonce);
        out.extend_from_slice(plaintext);
        let body = &mut out[start + NONCE_LEN..];
        let tag = match self {
            Sealer::ChaCha(aead) => {
                let nonce: &Nonce<XChaCha20Poly1305> = nonce.into();
                aead.encrypt_inout_detached(nonce, ad, body.into())
                    .map(<[u8; TAG_LEN]>::from)
            }
            Sealer::Aes(key) => {
                let (aead, gcm_nonce) = aes_message_cipher(key, nonce);
                aead.encrypt_inout_detached(gcm_nonce, ad, body.into())
                    .map(<[u8; TAG_LEN]>::from)
            }
        };
        match tag {
            Ok(tag) => {
                out.extend_from_slice(&tag);
                Ok(())
            }
            Err(_) => {
                out[start..].zeroize();
                out.truncate(start);
                Err(Error::invalid(format!(
                    "object of {} bytes is too large to encrypt",
                    plaintext.len()
                )))
            }
        }
    }

    /// Opens `sealed`, appending the plaintext to `out`; `what` names the
    /// object in the error.
    pub(crate) fn open(
        &self,
        ad: &[u8],
        sealed: &[u8],
        out: &mut Vec<u8>,
        what: impl FnOnce() -> String,
    ) -> Result<()> {
        if sealed.len() < OVERHEAD {
            return Err(Error::authentication(what()));
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        let (Ok(nonce), Ok(tag)) = (
            <&[u8; NONCE_LEN]>::try_from(nonce),
            <&[u8; TAG_LEN]>::try_from(tag),
        ) else {
            return Err(Error::authentication(what()));
        };
        let start = out.len();
        out.extend_from_slice(ciphertext);
        let body = &mut out[start..];
        let opened = match self {
            Sealer::ChaCha(aead) => {
                let tag: &Tag<XChaCha20Poly1305> = tag.into();
                aead.decrypt_inout_detached(nonce.into(), ad, body.into(), tag)
            }
            Sealer::Aes(key) => {
                let (aead, gcm_nonce) = aes_message_cipher(key, nonce);
                let tag: &Tag<Aes256Gcm> = tag.into();
                aead.decrypt_inout_detached(gcm_nonce, ad, body.into(), tag)
            }
        };
        if opened.is_err() {
            // The tag is checked before decryption, so these bytes are still
            // ciphertext; drop them so no caller can mistake them for data.
            out.truncate(start);
            return Err(Error::authentication(what()));
        }
        Ok(())
    }
}

/// The GCM cipher under the per-message key selected by `nonce[..12]`, and
/// the GCM nonce `nonce[12..]`. The derived key is wiped on return and the
/// cipher's key schedule when it is dropped.
fn aes_message_cipher<'n>(
    key: &[u8; KEY_LEN],
    nonce: &'n [u8; NONCE_LEN],
) -> (Aes256Gcm, &'n Nonce<Aes256Gcm>) {
    let (select, gcm_nonce) = nonce.split_at(12);
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(AES_MESSAGE_KEY_DOMAIN);
    hasher.update(select);
    let message_key = Zeroizing::new(<[u8; KEY_LEN]>::from(hasher.finalize()));
    hasher.zeroize();
    let message_key: &Key<Aes256Gcm> = (&*message_key).into();
    let gcm_nonce: &[u8; 12] = gcm_nonce.try_into().expect("24 - 12 = 12 bytes");
    (Aes256Gcm::new(message_key), gcm_nonce.into())
}

/// Seals and opens repository objects under the repository's object key for
/// one [`Algorithm`]. Cheap to share between threads (`Send + Sync`).
pub struct ObjectCipher {
    algorithm: Algorithm,
    sealer: Sealer,
}

impl ObjectCipher {
    pub fn new(master: &MasterKey, algorithm: Algorithm) -> ObjectCipher {
        ObjectCipher {
            algorithm,
            sealer: Sealer::new(algorithm, &master.object_key(algorithm)),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Bytes a sealed object has beyond its plaintext (always [`OVERHEAD`]).
    pub fn overhead(&self) -> usize {
        OVERHEAD
    }

    /// Appends `nonce | ciphertext | tag` of `plaintext` to `out`, with a
    /// fresh random nonce. Fails only when the operating system gives no
    /// random bytes or the plaintext exceeds the AEAD's length limit; `out`
    /// is then unchanged.
    pub fn seal(&self, ad: &[u8], plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.sealer.seal(ad, plaintext, out)
    }

    /// `seal` with a caller-chosen nonce, for golden-bytes tests only: a
    /// nonce must never be reused under one key.
    #[doc(hidden)]
    pub fn seal_with_fixed_nonce_for_tests(
        &self,
        nonce: &[u8; NONCE_LEN],
        ad: &[u8],
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        self.sealer.seal_with_nonce(nonce, ad, plaintext, out)
    }

    /// Verifies `sealed` under `ad` and appends its plaintext to `out`. A
    /// wrong key or `ad`, any modified byte or a truncated object gives
    /// `Error::Authentication` and leaves `out` unchanged.
    pub fn open(&self, ad: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.sealer.open(ad, sealed, out, || {
            format!("encrypted object ({} bytes)", sealed.len())
        })
    }
}

impl fmt::Debug for ObjectCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectCipher")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[path = "cipher_tests.rs"]
mod tests;
