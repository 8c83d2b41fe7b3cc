//! The unlocked-key cache behind `cairn unlock --for DURATION` and `cairn
//! lock` (docs/security.md, "The unlocked-key cache").
//!
//! An entry holds the master key of one repository, keyed by the
//! repository's id (from its config, not its path), for a limited time.
//! While it lives, commands open that repository without deriving the key
//! from a password again. It is opt-in: nothing is ever cached unless
//! `unlock` put it there.
//!
//! Two stores, one entry format ([`entry`]):
//!
//! - the Linux kernel keyring (the user keyring of the calling uid,
//!   [`keyring`]): the key lives in kernel memory and the kernel itself
//!   removes it when its timeout passes;
//! - where keyctl is refused (a container whose seccomp profile blocks it),
//!   a 0600 file in a 0700 directory on a tmpfs ([`files`]): in memory,
//!   never on a disk, the expiry checked on every read and the file
//!   removed once past it.
//!
//! `CAIRN_KEY_CACHE` chooses: `auto` (default: the keyring when it works,
//! else files), `keyring`, `file`, or `off` (never read nor written).
//! `CAIRN_KEY_CACHE_SCOPE` names a scope: entries of one scope are
//! invisible to another (tests use one each, so they never see or clear
//! the user's entries).
//!
//! The cache is only a shortcut: the caller verifies a cached key on use
//! (it must open the repository's authenticated config) and forgets an
//! entry that does not.

mod entry;
mod files;
mod keyring;

use std::ffi::OsString;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_core::{Error, Result};

use crate::MasterKey;

pub use files::FileStore;
pub use keyring::KeyringStore;

/// Chooses the store: `auto`, `keyring`, `file` or `off`.
pub const KEY_CACHE_ENV: &str = "CAIRN_KEY_CACHE";
/// The scope of the entries this process sees (default `default`).
pub const KEY_CACHE_SCOPE_ENV: &str = "CAIRN_KEY_CACHE_SCOPE";
/// The directory of the file store (default `$XDG_RUNTIME_DIR/cairn-keys`,
/// else `/dev/shm/cairn-keys-UID`); it must be on a tmpfs.
pub const KEY_CACHE_DIR_ENV: &str = "CAIRN_KEY_CACHE_DIR";

/// The longest an entry may live: a cached key is a convenience for a
/// working session, not a way to leave a repository open for good.
pub const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where the entries live.
enum Store {
    Keyring(KeyringStore),
    Files(FileStore),
    Off,
}

/// The unlocked-key cache of this process's user, in one scope.
pub struct KeyCache {
    store: Store,
    scope: String,
}

/// Whether `name` may appear in a key description or a file name: ASCII
/// letters, digits, `-` and `_`, 1 to 128 of them. Repository ids are hex.
fn is_plain_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn check_repo_id(repo_id: &str) -> Result<()> {
    if is_plain_name(repo_id) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "repository id {repo_id:?} cannot name a key cache entry"
        )))
    }
}

/// Time since the epoch, now.
fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Whole seconds since the epoch, now.
fn now_secs() -> u64 {
    now().as_secs()
}

impl KeyCache {
    /// The cache the environment (read through `env`) asks for. An
    /// unusable choice (`keyring` where keyctl is refused, `file` with no
    /// tmpfs) is an error naming why; `auto` falls back to files and then
    /// to `off` silently, since nothing was asked of it yet.
    pub fn from_env(env: &dyn Fn(&str) -> Option<OsString>) -> Result<KeyCache> {
        let get = |name: &str| {
            env(name)
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned())
        };
        let scope = get(KEY_CACHE_SCOPE_ENV).unwrap_or_else(|| "default".into());
        if !is_plain_name(&scope) {
            return Err(Error::invalid(format!(
                "{KEY_CACHE_SCOPE_ENV} {scope:?}: use letters, digits, '-' and '_'"
            )));
        }
        let dir = env(KEY_CACHE_DIR_ENV).filter(|v| !v.is_empty());
        let store = match get(KEY_CACHE_ENV).as_deref().unwrap_or("auto") {
            "off" => Store::Off,
            "keyring" => Store::Keyring(KeyringStore::open()?),
            "file" => Store::Files(FileStore::open(dir)?),
            "auto" => match KeyringStore::open() {
                Ok(k) => Store::Keyring(k),
                Err(_) => match FileStore::open(dir) {
                    Ok(f) => Store::Files(f),
                    Err(_) => Store::Off,
                },
            },
            other => {
                return Err(Error::invalid(format!(
                    "{KEY_CACHE_ENV}={other:?}: use auto, keyring, file or off"
                )))
            }
        };
        Ok(KeyCache { store, scope })
    }

    /// Where entries live, for messages: "the kernel keyring", "files in
    /// DIR", or "nowhere (CAIRN_KEY_CACHE=off)".
    pub fn describe(&self) -> String {
        match &self.store {
            Store::Keyring(_) => "the kernel keyring".into(),
            Store::Files(f) => format!("files in {}", f.dir().display()),
            Store::Off => format!("nowhere ({KEY_CACHE_ENV}=off)"),
        }
    }

    /// Whether entries can be stored at all.
    pub fn is_off(&self) -> bool {
        matches!(self.store, Store::Off)
    }

    /// Caches `master` as the key of repository `repo_id` for `lifetime`
    /// (at least one second, at most [`MAX_LIFETIME`]), replacing any
    /// entry it had.
    pub fn put(&self, repo_id: &str, master: &MasterKey, lifetime: Duration) -> Result<()> {
        check_repo_id(repo_id)?;
        if lifetime < Duration::from_secs(1) || lifetime > MAX_LIFETIME {
            return Err(Error::invalid(format!(
                "an unlock lasts from 1s to {}s, not {}s",
                MAX_LIFETIME.as_secs(),
                lifetime.as_secs_f64()
            )));
        }
        // Rounded up to the next whole second: an entry lives at least
        // `lifetime` by its own clock (the kernel's timeout counts whole
        // seconds from now too).
        let expires = (now() + lifetime).as_secs_f64().ceil() as u64;
        let payload = entry::encode(repo_id, master, expires);
        match &self.store {
            Store::Keyring(k) => k.put(&self.scope, repo_id, &payload, lifetime),
            Store::Files(f) => f.put(&self.scope, repo_id, &payload),
            Store::Off => Err(Error::invalid(format!(
                "the key cache is off ({KEY_CACHE_ENV}=off): nothing can be unlocked"
            ))),
        }
    }

    /// The cached master key of repository `repo_id`, if a live entry
    /// holds one. An expired or unreadable entry is removed and reads as
    /// none: the cache never stops a command that has a password.
    pub fn get(&self, repo_id: &str) -> Option<MasterKey> {
        if !is_plain_name(repo_id) {
            return None;
        }
        let payload = match &self.store {
            Store::Keyring(k) => k.get(&self.scope, repo_id),
            Store::Files(f) => f.get(&self.scope, repo_id),
            Store::Off => None,
        }?;
        match entry::decode(&payload, repo_id, now_secs()) {
            Some(master) => Some(master),
            None => {
                let _ = self.forget(repo_id);
                None
            }
        }
    }

    /// Removes the entry of repository `repo_id`; whether there was one.
    pub fn forget(&self, repo_id: &str) -> Result<bool> {
        if !is_plain_name(repo_id) {
            return Ok(false);
        }
        match &self.store {
            Store::Keyring(k) => k.forget(&self.scope, repo_id),
            Store::Files(f) => f.forget(&self.scope, repo_id),
            Store::Off => Ok(false),
        }
    }

    /// Removes every entry of this scope; how many there were.
    pub fn forget_all(&self) -> Result<usize> {
        match &self.store {
            Store::Keyring(k) => k.forget_all(&self.scope),
            Store::Files(f) => f.forget_all(&self.scope),
            Store::Off => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests;
