//! The repository master key and the subkeys derived from it.
//!
//! The master key is 32 random bytes, made once when a repository is created
//! and stored only wrapped in key files. Nothing is ever encrypted or hashed
//! with it directly: each use gets its own subkey from
//! `blake3::derive_key(context, master)`, where `context` is a fixed,
//! never-changing string naming the use. BLAKE3's key derivation mode is a PRF
//! keyed by the master key and domain-separated by the context, so the subkeys
//! are independent of each other: learning one (for example the chunker seed,
//! which shapes chunk boundaries an attacker can observe) says nothing about
//! the others.
//!
//! The context strings are part of the on-disk format: changing one makes
//! every existing repository unreadable. Golden tests pin their outputs.

use std::fmt;

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::random;
use crate::Algorithm;
use cairn_core::Result;

/// Length of the master key and of every subkey, in bytes.
pub const KEY_LEN: usize = 32;

const CONTEXT_OBJECT_AES: &str = "cairn 2026-11 object encryption key aes-256-gcm";
const CONTEXT_OBJECT_CHACHA: &str = "cairn 2026-11 object encryption key xchacha20poly1305";
const CONTEXT_FINGERPRINT: &str = "cairn 2026-11 keyed chunk fingerprint key";
const CONTEXT_CHUNKER: &str = "cairn 2026-11 chunker seed";

/// The repository's 256-bit master key. Wiped from memory when dropped; its
/// `Debug` output never shows the bytes.
#[derive(Clone, Zeroize, ZeroizeOnDrop, PartialEq, Eq)]
pub struct MasterKey {
    bytes: [u8; KEY_LEN],
}

impl MasterKey {
    /// A fresh key from the operating system's random generator.
    pub fn generate() -> Result<MasterKey> {
        Ok(MasterKey {
            bytes: random::array()?,
        })
    }

    /// A master key with the given bytes: for key files (which hold it
    /// wrapped) and for tests with fixed keys. Never use a non-random key
    /// for a real repository.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> MasterKey {
        MasterKey { bytes }
    }

    /// The raw key, for wrapping it into a key file.
    pub(crate) fn expose(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }

    /// The key for object encryption under `algorithm`. Each algorithm has its
    /// own key, so one key never serves two ciphers.
    pub(crate) fn object_key(&self, algorithm: Algorithm) -> Zeroizing<[u8; KEY_LEN]> {
        let context = match algorithm {
            Algorithm::Aes256Gcm => CONTEXT_OBJECT_AES,
            Algorithm::ChaCha20Poly1305 => CONTEXT_OBJECT_CHACHA,
        };
        self.derive(context)
    }

    /// The key of keyed chunk fingerprints (`blake3::Hasher::new_keyed`): a
    /// stored fingerprint confirms a guessed chunk only to a key holder.
    pub fn fingerprint_key(&self) -> Zeroizing<[u8; KEY_LEN]> {
        self.derive(CONTEXT_FINGERPRINT)
    }

    /// The repository's chunker seed: 32 bytes from which the chunker builds
    /// its randomised Gear table or Rabin polynomial, so chunk boundaries
    /// depend on the repository and do not fingerprint known files.
    pub fn chunker_seed(&self) -> Zeroizing<[u8; KEY_LEN]> {
        self.derive(CONTEXT_CHUNKER)
    }

    fn derive(&self, context: &str) -> Zeroizing<[u8; KEY_LEN]> {
        Zeroizing::new(blake3::derive_key(context, &self.bytes))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(<secret>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_differ_and_debug_hides_the_bytes() {
        let a = MasterKey::generate().unwrap();
        let b = MasterKey::generate().unwrap();
        assert_ne!(a, b);
        let shown = format!("{a:?}");
        assert_eq!(shown, "MasterKey(<secret>)");
        assert!(!shown.contains(&hex::encode(a.expose())));
    }

    #[test]
    fn subkeys_are_distinct_and_deterministic() {
        let m = MasterKey::from_bytes([7; KEY_LEN]);
        let keys = [
            *m.object_key(Algorithm::Aes256Gcm),
            *m.object_key(Algorithm::ChaCha20Poly1305),
            *m.fingerprint_key(),
            *m.chunker_seed(),
            *m.expose(),
        ];
        for i in 0..keys.len() {
            for j in i + 1..keys.len() {
                assert_ne!(keys[i], keys[j], "subkeys {i} and {j} collide");
            }
        }
        assert_eq!(
            *m.fingerprint_key(),
            *MasterKey::from_bytes([7; 32]).fingerprint_key()
        );
        assert_ne!(
            *m.fingerprint_key(),
            *MasterKey::from_bytes([8; 32]).fingerprint_key()
        );
    }
}
