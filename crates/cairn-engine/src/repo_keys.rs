//! The encryption keys of an unlocked repository ([`RepoKeys`]): the object
//! cipher and the subkeys for keyed fingerprints, snapshot record names and
//! the chunker seed, all derived from the master key (docs/security.md).
//! Key files, which wrap the master key under a password, are `crypto.rs`;
//! object names (storage paths) are `object_names.rs`.

use cairn_core::Result;
use cairn_crypto::{Algorithm, MasterKey, ObjectCipher};
use zeroize::Zeroizing;

/// The keys of an unlocked encrypted repository.
pub struct RepoKeys {
    cipher: ObjectCipher,
    fingerprint_key: Zeroizing<[u8; 32]>,
    chunker_seed: Zeroizing<[u8; 32]>,
    naming_key: Zeroizing<[u8; 32]>,
}

/// Derives the key of snapshot record names from the fingerprint key.
const NAMING_KEY_CONTEXT: &str = "cairn 2026-11 keyed snapshot record names";

impl std::fmt::Debug for RepoKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RepoKeys({})", self.cipher.algorithm())
    }
}

impl RepoKeys {
    pub fn new(master: &MasterKey, algorithm: Algorithm) -> Self {
        let fingerprint_key = master.fingerprint_key();
        RepoKeys {
            cipher: ObjectCipher::new(master, algorithm),
            naming_key: Zeroizing::new(blake3::derive_key(NAMING_KEY_CONTEXT, &*fingerprint_key)),
            fingerprint_key,
            chunker_seed: master.chunker_seed(),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.cipher.algorithm()
    }

    /// Appends `nonce | ciphertext | tag` of `plaintext` to `out`; `ad` names
    /// the object (see [`object_ad`]).
    pub fn seal(&self, ad: &[u8], plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.cipher.seal(ad, plaintext, out)
    }

    /// Appends the plaintext of `sealed` to `out` if it authenticates under
    /// `ad`; otherwise [`Error::Authentication`] and `out` is unchanged.
    pub fn open(&self, ad: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.cipher.open(ad, sealed, out)
    }

    /// Bytes a sealed object has beyond its plaintext.
    pub fn overhead(&self) -> usize {
        self.cipher.overhead()
    }

    /// The key of keyed BLAKE3 chunk fingerprints.
    pub fn fingerprint_key(&self) -> &[u8; 32] {
        &self.fingerprint_key
    }

    /// The key of snapshot record names (`catalog.rs`): a record's id is
    /// its keyed BLAKE3 hash, so a guessed record cannot be confirmed by
    /// its name.
    pub fn naming_key(&self) -> &[u8; 32] {
        &self.naming_key
    }

    /// The per-repository seed of the content-defined chunker.
    pub fn chunker_seed(&self) -> &[u8; 32] {
        &self.chunker_seed
    }
}
