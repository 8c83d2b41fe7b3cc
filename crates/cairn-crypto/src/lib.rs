//! The cryptographic core of encrypted cairn repositories.
//!
//! Everything here is built from RustCrypto primitives and BLAKE3; nothing is
//! hand-written cryptography. The pieces, from the user's password down:
//!
//! - [`password`]: where the password comes from (`--password-file`,
//!   `CAIRN_PASSWORD`, `CAIRN_PASSWORD_COMMAND`, a terminal prompt) and the
//!   [`Password`] type that wipes itself.
//! - [`keyfile`]: a [`KeyFile`] wraps the repository's random [`MasterKey`]
//!   under a key derived from the password with Argon2id ([`KdfParams`]).
//! - [`key`]: the [`MasterKey`] and the subkeys derived from it with
//!   `blake3::derive_key` (object encryption, keyed fingerprints, chunker seed).
//! - [`cipher`]: [`ObjectCipher`] seals and opens repository objects
//!   (`nonce | ciphertext | tag`) with AES-256-GCM or XChaCha20-Poly1305
//!   ([`Algorithm`]).
//! - [`key_cache`]: the opt-in cache of unlocked master keys with an expiry
//!   (`cairn unlock`/`lock`), in the kernel keyring or a tmpfs file.
//!
//! The design, the threat model and what still leaks are in `docs/security.md`.

pub mod algorithm;
pub mod cipher;
pub mod key;
pub mod key_cache;
pub mod keyfile;
pub mod password;
mod random;

pub use algorithm::{Algorithm, Encryption};
pub use cipher::{ObjectCipher, NONCE_LEN, OVERHEAD, TAG_LEN};
pub use key::MasterKey;
pub use key_cache::KeyCache;
pub use keyfile::{KdfParams, KeyFile, KeyLabel};
pub use password::{
    resolve_other_password, resolve_password, Password, PasswordSource, PromptMode,
};
