//! Key management of an open encrypted repository (`cairn key list`,
//! `add`, `remove`, `passwd`): which key file a password opens, finding a
//! key file by id, removing one (never the last) and changing a password.
//! The key files themselves and unlocking are `crypto.rs`.

use cairn_core::{Error, Result};
use cairn_crypto::{KdfParams, KeyFile, MasterKey, Password};

use crate::crypto::key_files;
use crate::object_names;
use crate::repo::{Repository, WriteLock};
use crate::repo_keys::RepoKeys;

/// A key file that opened with a password: its object name, the file, and
/// the master key it wraps.
pub struct OpenedKey {
    pub name: String,
    pub key_file: KeyFile,
    pub master: MasterKey,
}

fn require_encrypted(repo: &Repository) -> Result<&RepoKeys> {
    repo.keys()
        .map(|k| &**k)
        .ok_or_else(|| Error::invalid("the repository is not encrypted: it has no key files"))
}

/// The key file of `repo` that `password` opens: the first in listing
/// order, the one [`unlock`] uses. It must wrap the master key `repo` was
/// unlocked with.
pub fn opened_key(repo: &Repository, password: &Password) -> Result<OpenedKey> {
    let keys = require_encrypted(repo)?;
    let files = key_files(&**repo.backend(), &repo.config.id)?;
    for (name, key_file) in &files.good {
        let master = match key_file.open(password) {
            Ok(master) => master,
            Err(e) if e.is_authentication() => continue,
            Err(e) => return Err(e),
        };
        let derived = RepoKeys::new(&master, keys.algorithm());
        if derived.fingerprint_key() != keys.fingerprint_key() {
            return Err(Error::corrupt(
                name.clone(),
                "the key file wraps another master key than the one that opened the repository",
            ));
        }
        return Ok(OpenedKey {
            name: name.clone(),
            key_file: key_file.clone(),
            master,
        });
    }
    Err(files.wrong_password())
}

/// The key file of `repo` whose id is `id` or starts with it (a unique
/// prefix), with its object name.
pub fn find_key_file(repo: &Repository, id: &str) -> Result<(String, KeyFile)> {
    require_encrypted(repo)?;
    find_among(key_files(&**repo.backend(), &repo.config.id)?.good, id)
}

/// The one of `files` whose id is `id` or starts with it.
fn find_among(files: Vec<(String, KeyFile)>, id: &str) -> Result<(String, KeyFile)> {
    if id.is_empty() {
        return Err(Error::invalid("empty key id"));
    }
    let mut found: Vec<(String, KeyFile)> = files
        .into_iter()
        .filter(|(_, kf)| kf.id().starts_with(id))
        .collect();
    match found.len() {
        0 => Err(Error::invalid(format!(
            "no key file {id} in this repository"
        ))),
        1 => Ok(found.remove(0)),
        _ => Err(Error::invalid(format!(
            "key id {id} is ambiguous: {}",
            found
                .iter()
                .map(|(_, kf)| kf.id())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Removes the key file `id` (or a unique prefix of it; a damaged key
/// file by its whole id); returns its id. The last good key file is never
/// removed: without one the repository could not be opened again. Nor is
/// `in_use`, the id of the key file the caller's password opened (the
/// password would stop working under the caller's hands), unless the
/// caller passes `None` (`key remove --force`).
pub fn remove_key(
    repo: &Repository,
    _lock: &WriteLock,
    id: &str,
    in_use: Option<&str>,
) -> Result<String> {
    require_encrypted(repo)?;
    let files = key_files(&**repo.backend(), &repo.config.id)?;
    if let Some((name, _)) = files
        .damaged
        .iter()
        .find(|(name, _)| !id.is_empty() && object_names::key_file_id(name) == id)
    {
        repo.backend().delete(name)?;
        return Ok(id.to_string());
    }
    let good = files.good.len();
    let (name, key_file) = find_among(files.good, id)?;
    if good <= 1 {
        return Err(Error::invalid(format!(
            "refusing to remove key file {}: it is the repository's last one, \
             without it the repository could never be opened again",
            key_file.id()
        )));
    }
    if in_use == Some(key_file.id()) {
        return Err(Error::invalid(format!(
            "refusing to remove key file {}: it is the one the password in use opened, \
             and that password would stop working; remove it with another key's password, \
             or pass --force",
            key_file.id()
        )));
    }
    repo.backend().delete(&name)?;
    Ok(key_file.id().to_string())
}

/// Wraps `master` anew in `target` (same id, label and creation time)
/// under `new_password` with `params`, and replaces the stored file
/// atomically under the same name: the old password no longer opens it.
pub fn change_password(
    repo: &Repository,
    _lock: &WriteLock,
    master: &MasterKey,
    target: &(String, KeyFile),
    new_password: &Password,
    params: KdfParams,
) -> Result<KeyFile> {
    require_encrypted(repo)?;
    let (name, key_file) = target;
    let stored = KeyFile::from_bytes(&repo.backend().read(name)?)
        .map_err(|e| Error::corrupt(name.clone(), e.to_string()))?;
    if &stored != key_file {
        return Err(Error::invalid(format!(
            "key file {} changed since it was read; run the command again",
            key_file.id()
        )));
    }
    let rewrapped = key_file.rewrap(master, new_password, params)?;
    repo.backend().write_atomic(name, &rewrapped.to_bytes())?;
    Ok(rewrapped)
}
