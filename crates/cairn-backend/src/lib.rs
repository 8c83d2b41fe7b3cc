//! cairn-backend: implementations of [`cairn_core::Backend`].
//!
//! * [`LocalBackend`]: a repository directory on a local filesystem, with
//!   crash-safe atomic writes (temp file, fsync, rename, fsync directory) and
//!   `flock` repository locks.
//! * `S3Backend` (feature `s3`): a repository under a prefix of an S3 or
//!   S3-compatible bucket, with lease locks on lock objects.
//! * [`MemBackend`]: an in-memory repository with the same semantics, for
//!   tests and experiments; clones share one store.
//! * [`ObservedBackend`]: a pass-through that reports every data access to an
//!   [`IoObserver`]; [`CountingBackend`] is the one that counts read/write
//!   operations and bytes into a shared [`cairn_core::Counters`].
//! * [`FaultBackend`]: a pass-through driven by a shared [`FaultPlan`] that
//!   injects crashes, transient write failures and bit flips.
//! * [`conformance`]: a suite every backend must pass (also usable by
//!   backends in other crates).
//!
//! Keys are validated the same way everywhere ([`validate_key`]).

pub mod conformance;
pub mod counting;
pub mod fault;
pub mod local;
mod local_streamed;
pub mod mem;
pub mod observed;
#[cfg(feature = "s3")]
pub mod s3;

pub use counting::CountingBackend;
pub use fault::{is_injected_crash, CorruptAt, FaultBackend, FaultPlan, InjectedError};
pub use local::LocalBackend;
pub use mem::MemBackend;
pub use observed::{IoObserver, IoOp, ObservedBackend};
#[cfg(feature = "s3")]
pub use s3::{S3Backend, S3Config};

use cairn_core::{Error, Result};

/// Checks that `key` is a relative `/`-separated path with no empty, `.` or
/// `..` components, no backslashes and no NUL bytes. Every backend applies
/// this before touching storage, so a key can never escape the repository.
pub fn validate_key(key: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid(format!("invalid object key {key:?}: {why}")));
    if key.is_empty() {
        return bad("empty");
    }
    if key.starts_with('/') {
        return bad("absolute path");
    }
    if key.contains('\\') || key.contains('\0') {
        return bad("contains a backslash or NUL byte");
    }
    for component in key.split('/') {
        match component {
            "" => return bad("empty path component"),
            "." | ".." => return bad("`.` or `..` component"),
            _ => {}
        }
    }
    Ok(())
}

/// Checks a [`cairn_core::Backend::list`] prefix: empty (everything), a
/// directory ending in `/`, or a key-like partial name.
pub fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        return Ok(());
    }
    validate_key(prefix.strip_suffix('/').unwrap_or(prefix))
        .map_err(|_| Error::invalid(format!("invalid list prefix {prefix:?}")))
}

/// Checks a lock name: a single non-empty path component.
pub fn validate_lock_name(name: &str) -> Result<()> {
    validate_key(name)?;
    if name.contains('/') {
        return Err(Error::invalid(format!(
            "invalid lock name {name:?}: must not contain `/`"
        )));
    }
    Ok(())
}

/// The error for a ranged read past the end of an object.
pub(crate) fn truncated(key: &str, offset: u64, len: usize, size: u64) -> Error {
    Error::corrupt(
        format!("object {key}"),
        format!("truncated: wanted {len} bytes at offset {offset}, size {size}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for ok in [
            "config",
            "containers/00/0000000000000001",
            "a.b/c..d",
            "x/.y",
        ] {
            validate_key(ok).unwrap();
        }
        for bad in [
            "", "/a", "a//b", "a/", "..", "a/../b", "./a", "a/.", "a\\b", "a\0",
        ] {
            assert!(
                matches!(validate_key(bad), Err(Error::InvalidInput(_))),
                "{bad:?}"
            );
        }
        validate_prefix("").unwrap();
        validate_prefix("snapshots/").unwrap();
        validate_prefix("containers/00/").unwrap();
        assert!(validate_prefix("/").is_err());
        assert!(validate_prefix("../").is_err());
        validate_lock_name("repo").unwrap();
        assert!(validate_lock_name("a/b").is_err());
    }
}
