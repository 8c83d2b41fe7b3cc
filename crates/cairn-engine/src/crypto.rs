//! An encrypted repository's keys and the objects that find them
//! (`docs/security.md`; issue 13).
//!
//! * [`RepoKeys`]: what an unlocked repository holds: the object cipher and
//!   the subkeys for keyed fingerprints and the chunker seed, all derived
//!   from the master key.
//! * The `config` of an encrypted repository (envelope version 2): the
//!   repository id and algorithm in the clear, because they are needed to
//!   find and check the key files, and the whole [`RepoConfig`] sealed.
//! * Key files under `keys/<id>`: the master key wrapped under a password
//!   (`cairn_crypto::KeyFile`). Several may exist; removing the last is
//!   refused.
//!
//! A repository without encryption keeps its version 1 config, byte for
//! byte: nothing here applies to it.

use cairn_core::{Backend, Error, Result};
use cairn_crypto::{Algorithm, KdfParams, KeyFile, KeyLabel, MasterKey, ObjectCipher, Password};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::config::{RepoConfig, CONFIG_MAGIC, CONFIG_VERSION};
use crate::keys;
use crate::repo::{Repository, WriteLock};

/// The envelope version of an encrypted repository's config.
pub const SEALED_CONFIG_VERSION: u32 = 2;

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

/// The associated data of a whole object stored under `name`: a sealed
/// object moved to another name fails to open.
pub fn object_ad(name: &str) -> Vec<u8> {
    let mut ad = b"cairn object\0".to_vec();
    ad.extend_from_slice(name.as_bytes());
    ad
}

/// The clear part of an encrypted repository's config.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SealedConfig {
    id: String,
    encryption: String,
    /// The sealed JSON of the whole config, hex.
    sealed: String,
}

/// A `config` object as stored: clear (version 1) or sealed (version 2).
pub enum StoredConfig {
    Clear(RepoConfig),
    Sealed {
        id: String,
        algorithm: Algorithm,
        sealed: Vec<u8>,
    },
}

impl StoredConfig {
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (version, payload) =
            cairn_format::envelope::open(CONFIG_MAGIC, SEALED_CONFIG_VERSION, "config", bytes)?;
        if version <= CONFIG_VERSION {
            return RepoConfig::decode(bytes).map(StoredConfig::Clear);
        }
        let c: SealedConfig = serde_json::from_slice(payload)
            .map_err(|e| Error::corrupt("config", format!("invalid JSON: {e}")))?;
        let algorithm: Algorithm = c
            .encryption
            .parse()
            .map_err(|e| Error::corrupt("config", format!("{e}")))?;
        let sealed = hex::decode(&c.sealed)
            .map_err(|e| Error::corrupt("config", format!("sealed part: {e}")))?;
        Ok(StoredConfig::Sealed {
            id: c.id,
            algorithm,
            sealed,
        })
    }

    /// The repository id, readable without a key.
    pub fn id(&self) -> &str {
        match self {
            StoredConfig::Clear(c) => &c.id,
            StoredConfig::Sealed { id, .. } => id,
        }
    }

    pub fn is_encrypted(&self) -> bool {
        matches!(self, StoredConfig::Sealed { .. })
    }

    /// Whether a master key opens this sealed config (always for a clear one).
    pub fn opens_with(&self, master: &MasterKey) -> bool {
        match self {
            StoredConfig::Clear(_) => true,
            StoredConfig::Sealed {
                id,
                algorithm,
                sealed,
            } => RepoKeys::new(master, *algorithm)
                .open(&config_ad(id), sealed, &mut Vec::new())
                .is_ok(),
        }
    }

    /// The config, opened with `keys` when it is sealed.
    pub fn open(self, keys: Option<&RepoKeys>) -> Result<RepoConfig> {
        match (self, keys) {
            (StoredConfig::Clear(c), _) => Ok(c),
            (StoredConfig::Sealed { .. }, None) => Err(Error::invalid(
                "the repository is encrypted: give its password with --password-file, \
                 CAIRN_PASSWORD or CAIRN_PASSWORD_COMMAND",
            )),
            (StoredConfig::Sealed { id, sealed, .. }, Some(k)) => {
                let mut json = Vec::new();
                k.open(&config_ad(&id), &sealed, &mut json)?;
                let cfg: RepoConfig = serde_json::from_slice(&json)
                    .map_err(|e| Error::corrupt("config", format!("invalid JSON: {e}")))?;
                cfg.validate()
                    .map_err(|e| Error::corrupt("config", e.to_string()))?;
                if cfg.id != id
                    || cfg.encryption.as_ref().map(|e| e.algorithm.as_str())
                        != Some(k.algorithm().name())
                {
                    return Err(Error::corrupt(
                        "config",
                        "the sealed config names another repository or algorithm",
                    ));
                }
                Ok(cfg)
            }
        }
    }
}

fn config_ad(id: &str) -> Vec<u8> {
    object_ad(&format!("{}\0{id}", keys::CONFIG))
}

/// The bytes of `config` as stored: version 1 in the clear without
/// encryption; with it, version 2 sealed under `keys`.
pub fn encode_config(config: &RepoConfig, keys: Option<&RepoKeys>) -> Result<Vec<u8>> {
    let (Some(enc), Some(k)) = (&config.encryption, keys) else {
        if config.encryption.is_some() {
            return Err(Error::invalid(
                "an encrypted config needs the repository's keys",
            ));
        }
        return Ok(config.encode());
    };
    if enc.algorithm != k.algorithm().name() {
        return Err(Error::invalid("the config's algorithm is not the keys'"));
    }
    let json = serde_json::to_vec(config).expect("config serializes");
    let mut sealed = Vec::new();
    k.seal(&config_ad(&config.id), &json, &mut sealed)?;
    let clear = SealedConfig {
        id: config.id.clone(),
        encryption: enc.algorithm.clone(),
        sealed: hex::encode(sealed),
    };
    let payload = serde_json::to_vec(&clear).expect("config serializes");
    Ok(cairn_format::envelope::seal(
        CONFIG_MAGIC,
        SEALED_CONFIG_VERSION,
        &payload,
    ))
}

/// A repository's key files, read and parsed.
#[derive(Debug, Default)]
pub struct KeyFiles {
    /// Key files that parse and belong to the repository, by object name.
    pub good: Vec<(String, KeyFile)>,
    /// Key files that do not parse or name another repository: object name
    /// and reason. They are reported, never used, and never stop another
    /// key file from opening the repository.
    pub damaged: Vec<(String, String)>,
}

impl KeyFiles {
    /// `"; 1 more key file is damaged (keys/…: reason)"`, or nothing.
    fn damaged_note(&self) -> String {
        match self.damaged.as_slice() {
            [] => String::new(),
            [(name, why)] => format!("; 1 more key file is damaged ({name}: {why})"),
            [(name, why), rest @ ..] => format!(
                "; {} more key files are damaged ({name}: {why}, and {} more)",
                rest.len() + 1,
                rest.len()
            ),
        }
    }

    /// The error when no key file opens with the password.
    fn wrong_password(&self) -> Error {
        match (self.good.len(), self.damaged.first()) {
            (0, Some((name, why))) => Error::corrupt(name.clone(), why.clone()),
            (0, None) => Error::corrupt(
                "repository",
                "it is encrypted but holds no key file (keys/)",
            ),
            (n, _) => Error::invalid(format!(
                "wrong password: none of the repository's {n} key file(s) opens with it{}",
                self.damaged_note()
            )),
        }
    }
}

/// The key files of the repository `repo_id`. Only a failure to list or
/// read them is an error; a damaged one is listed as such.
pub fn key_files(backend: &dyn Backend, repo_id: &str) -> Result<KeyFiles> {
    let mut out = KeyFiles::default();
    for name in backend.list(keys::KEYS)? {
        let kf = match KeyFile::from_bytes(&backend.read(&name)?) {
            Ok(kf) => kf,
            Err(e) => {
                out.damaged.push((name, e.to_string()));
                continue;
            }
        };
        if kf.repository() != repo_id {
            let why = format!("key file of repository {}, not {repo_id}", kf.repository());
            out.damaged.push((name, why));
            continue;
        }
        out.good.push((name, kf));
    }
    Ok(out)
}

/// The master key, from the first key file that opens with `password` and
/// whose master key `fits` (opens the sealed config): a key file left by an
/// `init` that lost a race, or planted, may open with the same password
/// but wrap another master key.
pub fn unlock(
    backend: &dyn Backend,
    repo_id: &str,
    password: &Password,
    fits: &dyn Fn(&MasterKey) -> bool,
) -> Result<MasterKey> {
    let files = key_files(backend, repo_id)?;
    let mut unfit = 0;
    for (_, kf) in &files.good {
        match kf.open(password) {
            Ok(master) if fits(&master) => return Ok(master),
            Ok(_) => unfit += 1,
            Err(e) if e.is_authentication() => continue,
            Err(e) => return Err(e),
        }
    }
    if unfit > 0 {
        // The password is right for a key file, but its key does not open
        // the config: the config (or that key file) was replaced.
        return Err(Error::authentication(
            "config (the key the password unlocks does not open it)",
        ));
    }
    Err(files.wrong_password())
}

/// The master key of the encrypted repository whose config is `stored`,
/// from `password` (asked for here): [`unlock`] with the config as the
/// test that the key fits.
pub fn unlock_with_password(
    backend: &dyn Backend,
    stored: &StoredConfig,
    password: &mut dyn FnMut() -> Result<Password>,
) -> Result<MasterKey> {
    unlock(backend, stored.id(), &password()?, &|m| {
        stored.opens_with(m)
    })
}

/// Writes a new key file wrapping `master` under `password`; returns its
/// object name.
pub fn add_key_file(
    backend: &dyn Backend,
    repo_id: &str,
    master: &MasterKey,
    password: &Password,
    params: KdfParams,
    label: KeyLabel,
) -> Result<String> {
    let kf = KeyFile::create(master, password, params, label, repo_id)?;
    let name = keys::key_file(kf.id());
    if !backend.create_new(&name, &kf.to_bytes())? {
        return Err(Error::invalid(format!("key file {name} exists already")));
    }
    Ok(name)
}

// Key management (`cairn key list|add|remove|passwd`). Writers hold the
// repository's writer lock, so two of them never decide on a stale list of
// key files (two removals could otherwise leave none).

/// The label of a key file made on this machine: its host name, and the
/// user running `cairn` (`$USER`, else the account of the user id).
pub fn local_key_label() -> KeyLabel {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        })
        .unwrap_or_else(|| format!("uid {}", nix::unistd::getuid()));
    KeyLabel {
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        user,
    }
}

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
        .find(|(name, _)| !id.is_empty() && keys::key_file_id(name) == id)
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

#[cfg(test)]
#[path = "crypto_tests.rs"]
mod tests;
