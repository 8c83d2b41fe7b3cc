//! An encrypted repository's keys and the objects that find them
//! (`docs/security.md`; issue 13).
//!
//! * `RepoKeys` (`repo_keys.rs`): what an unlocked repository holds.
//! * The `config` of an encrypted repository (envelope version 2): the
//!   repository id and algorithm in the clear, because they are needed to
//!   find and check the key files, and the whole [`RepoConfig`] sealed.
//! * Key files under `keys/<id>`: the master key wrapped under a password
//!   (`cairn_crypto::KeyFile`). Several may exist; removing the last is
//!   refused.
//!
//! Managing the key files of an open repository (`cairn key`) is
//! `key_admin.rs`.
//!
//! A repository without encryption keeps its version 1 config, byte for
//! byte: nothing here applies to it.

use cairn_core::{Backend, Error, Result};
use cairn_crypto::{Algorithm, KdfParams, KeyFile, KeyLabel, MasterKey, Password};
use serde::{Deserialize, Serialize};

use crate::config::{RepoConfig, CONFIG_MAGIC, CONFIG_VERSION};
use crate::object_names;
use crate::repo_keys::RepoKeys;

/// The envelope version of an encrypted repository's config.
pub const SEALED_CONFIG_VERSION: u32 = 2;

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
    object_ad(&format!("{}\0{id}", object_names::CONFIG))
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
    pub(crate) fn wrong_password(&self) -> Error {
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
    for name in backend.list(object_names::KEYS)? {
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
    let name = object_names::key_file(kf.id());
    // A key file holds a fresh salt: equal bytes in the way are this
    // create's own, applied by a store whose answer was lost.
    if !cairn_core::backend::create_new_or_own(backend, &name, &kf.to_bytes())? {
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

#[cfg(test)]
#[path = "crypto_tests.rs"]
mod tests;
