//! The error type of cairn's library crates.
//!
//! Every failure a user can cause or meet (bad input, a damaged repository, a
//! second writer, a full disk) is a typed variant with a message that reads as
//! one line; the CLI prints it and exits non-zero. Corruption is its own
//! variant so callers (`check`, restore) can tell damage from I/O trouble.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O failure, with what was being done.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Stored bytes fail a magic, length, checksum or structural check.
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// A repository object that should exist does not.
    #[error("not found: {0}")]
    NotFound(String),
    /// Another process holds the repository lock.
    #[error("repository is locked by another process ({0}); retry later or pass --wait")]
    Locked(String),
    /// The path is not a cairn repository.
    #[error("{0} is not a cairn repository (no config file)")]
    NotARepository(PathBuf),
    /// A caller-supplied value is invalid (a parameter, a path, an id).
    #[error("{0}")]
    InvalidInput(String),
    /// Encrypted bytes failed authentication: the key is wrong or the bytes
    /// were modified, swapped or truncated. Nothing of them was decrypted.
    #[error("authentication failed for {what}: wrong key or tampered data")]
    Authentication { what: String },
    /// The user interrupted the command (Ctrl-C, SIGTERM) and it stopped at
    /// a safe point; the message says what was committed before it stopped.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// The repository or file was written by a format version this build cannot read.
    #[error("unsupported {what} version {found} (this build reads up to {supported})")]
    UnsupportedVersion {
        what: String,
        found: u32,
        supported: u32,
    },
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    pub fn authentication(what: impl Into<String>) -> Self {
        Error::Authentication { what: what.into() }
    }

    /// An authenticated decryption failed (wrong key or tampered data).
    pub fn is_authentication(&self) -> bool {
        matches!(self, Error::Authentication { .. })
    }

    /// Stored bytes are damaged: they fail a structural check, or (in an
    /// encrypted repository) authentication. A tampered object is handled
    /// like a corrupted one everywhere (`check` reports it, restore skips
    /// it, repair rebuilds around it); only unlocking tells the two apart,
    /// to try the next key file.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. } | Error::Authentication { .. })
    }

    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Interrupted(_))
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound(_))
            || matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Attach a context string to an `io::Result`.
pub trait IoContext<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(context(), e))
    }
}
