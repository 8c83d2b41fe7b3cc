//! The object encryption algorithms a repository can use, with their stable
//! names (configuration, CLI) and stable one-byte ids (binary formats).

use std::fmt;
use std::str::FromStr;

use cairn_core::{Error, Result};

/// An AEAD for repository objects. Both take a 256-bit key and a 192-bit
/// random nonce at the `ObjectCipher` level (see `cipher` for how AES-GCM's
/// 96-bit nonce is extended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// AES-256-GCM with a per-message key (extended nonce); fastest where the
    /// CPU has AES and carry-less multiply instructions.
    Aes256Gcm,
    /// XChaCha20-Poly1305; constant-time in software everywhere.
    ChaCha20Poly1305,
}

impl Algorithm {
    pub const ALL: [Algorithm; 2] = [Algorithm::Aes256Gcm, Algorithm::ChaCha20Poly1305];

    /// The stable name used in configuration files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aes256Gcm => "aes-256-gcm",
            Algorithm::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }

    /// The stable id used in binary formats. Never reuse a retired id.
    pub fn id(self) -> u8 {
        match self {
            Algorithm::Aes256Gcm => 1,
            Algorithm::ChaCha20Poly1305 => 2,
        }
    }

    pub fn from_id(id: u8) -> Result<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.id() == id)
            .ok_or_else(|| Error::corrupt("encryption algorithm id", format!("unknown id {id}")))
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown encryption algorithm {s:?} (expected aes-256-gcm or chacha20poly1305)"
                ))
            })
    }
}

/// A new repository's encryption as `--encryption` names it: one of the
/// algorithms, or none (a clear repository).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encryption {
    Clear,
    With(Algorithm),
}

impl Encryption {
    /// The names [`FromStr`] accepts: the algorithms', then `none`.
    pub const NAMES: [&'static str; 3] = ["aes-256-gcm", "chacha20poly1305", "none"];

    /// The algorithm, or `None` for a clear repository.
    pub fn algorithm(self) -> Option<Algorithm> {
        match self {
            Encryption::Clear => None,
            Encryption::With(a) => Some(a),
        }
    }
}

impl Default for Encryption {
    /// New repositories are encrypted, with AES-256-GCM.
    fn default() -> Self {
        Encryption::With(Algorithm::Aes256Gcm)
    }
}

impl fmt::Display for Encryption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encryption::Clear => f.write_str("none"),
            Encryption::With(a) => a.fmt(f),
        }
    }
}

impl FromStr for Encryption {
    type Err = Error;

    fn from_str(s: &str) -> Result<Encryption> {
        if s == "none" {
            return Ok(Encryption::Clear);
        }
        s.parse().map(Encryption::With).map_err(|_| {
            Error::invalid(format!(
                "unknown encryption {s:?} (expected aes-256-gcm, chacha20poly1305 or none)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encryption_names_round_trip() {
        for name in Encryption::NAMES {
            assert_eq!(name.parse::<Encryption>().unwrap().to_string(), name);
        }
        assert_eq!(Encryption::default().to_string(), "aes-256-gcm");
        assert!("rot13".parse::<Encryption>().is_err());
    }

    #[test]
    fn names_and_ids_round_trip_and_are_pinned() {
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
            assert_eq!(Algorithm::from_id(a.id()).unwrap(), a);
            assert_eq!(a.to_string(), a.name());
        }
        assert_eq!(Algorithm::Aes256Gcm.id(), 1);
        assert_eq!(Algorithm::ChaCha20Poly1305.id(), 2);
        assert_eq!(
            "aes-256-gcm".parse::<Algorithm>().unwrap(),
            Algorithm::Aes256Gcm
        );
    }

    #[test]
    fn unknown_names_and_ids_are_errors() {
        let e = "aes".parse::<Algorithm>().unwrap_err();
        assert!(
            e.to_string().contains("unknown encryption algorithm"),
            "{e}"
        );
        assert!("none".parse::<Algorithm>().is_err());
        assert!(Algorithm::from_id(0).unwrap_err().is_corruption());
        assert!(Algorithm::from_id(3).is_err());
    }
}
