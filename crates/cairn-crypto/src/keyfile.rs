//! Key files: the repository's master key wrapped under a password.
//!
//! `password --Argon2id(salt, params)--> key-wrapping key --XChaCha20-Poly1305-->
//! wrapped master key`. A key file is one line of compact JSON with a fixed
//! field order:
//!
//! ```text
//! {"version":1,"id":"<16 hex>","created":<unix seconds>,"host":"…","user":"…",
//!  "repository":"<repository id>","kdf":{"name":"argon2id","m_cost_kib":…,
//!  "t_cost":…,"p_cost":…,"salt":"<32 hex>"},"cipher":"xchacha20poly1305",
//!  "wrapped_key":"<144 hex: nonce | encrypted master key | tag>"}
//! ```
//!
//! Every field except `wrapped_key` is the associated data of the wrapping
//! (in a length-prefixed binary form, see [`KeyFile::header_ad`]): changing
//! the id, the label, the repository it belongs to or the KDF parameters
//! makes the file fail to open, just like a wrong password. Several key files
//! (one per person or machine) can wrap the same master key.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::cipher::{Sealer, NONCE_LEN, OVERHEAD};
use crate::key::{MasterKey, KEY_LEN};
use crate::{random, Algorithm, Password};
use cairn_core::{Error, Result};

/// The key file format version this build writes and reads.
pub const KEY_FILE_VERSION: u32 = 1;
/// Length of the Argon2id salt.
pub const SALT_LEN: usize = 16;
/// Length of a key file id in bytes (shown as 16 hex digits).
pub const KEY_ID_LEN: usize = 8;
const WRAPPED_LEN: usize = KEY_LEN + OVERHEAD;
const KDF_NAME: &str = "argon2id";
const WRAP_CIPHER: &str = "xchacha20poly1305";
const AD_DOMAIN: &[u8] = b"cairn key file\0";

/// Argon2id cost parameters (RFC 9106 names: memory in KiB, passes, lanes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    pub m_cost_kib: u32,
    pub t_cost: u32,
    pub p_cost: u32,
}

impl KdfParams {
    /// Memory `tune` uses: 64 MiB, one lane.
    pub const TUNE_MEMORY_KIB: u32 = 64 * 1024;
    /// Largest memory cost a key file may ask for (4 GiB): a bound on what a
    /// modified key file can make `open` allocate.
    pub const MAX_M_COST_KIB: u32 = 4 * 1024 * 1024;
    pub const MAX_T_COST: u32 = 1000;
    pub const MAX_P_COST: u32 = 64;

    /// Tiny parameters (8 KiB, one pass) so tests stay fast. Never for real keys.
    pub fn for_tests() -> KdfParams {
        KdfParams {
            m_cost_kib: 8,
            t_cost: 1,
            p_cost: 1,
        }
    }

    /// Parameters that take about `target` on this machine: 64 MiB, one lane,
    /// as many passes as fit (at least one, so a slow machine may take longer).
    pub fn tune(target: Duration) -> Result<KdfParams> {
        KdfParams::tune_with_memory(KdfParams::TUNE_MEMORY_KIB, target)
    }

    /// `tune` with a given memory cost.
    pub fn tune_with_memory(m_cost_kib: u32, target: Duration) -> Result<KdfParams> {
        KdfParams::tune_measuring(m_cost_kib, target, KdfParams::time_one)
    }

    /// The tuning logic, with the measurement of one derivation passed in
    /// (`time_one` for real; tests pass a model of a machine, so that they
    /// check the logic without timing anything).
    pub(crate) fn tune_measuring(
        m_cost_kib: u32,
        target: Duration,
        mut measure: impl FnMut(&KdfParams) -> Result<Duration>,
    ) -> Result<KdfParams> {
        let mut params = KdfParams {
            m_cost_kib,
            t_cost: 1,
            p_cost: 1,
        };
        params.validate()?;
        // Time grows linearly with the passes; the first estimate from one
        // pass includes the allocation, so measure once more at the estimate
        // and correct.
        for _ in 0..2 {
            let took = measure(&params)?;
            let estimate =
                params.t_cost as f64 * target.as_secs_f64() / took.as_secs_f64().max(1e-9);
            let t_cost = estimate.round().clamp(1.0, KdfParams::MAX_T_COST as f64) as u32;
            if t_cost == params.t_cost {
                break;
            }
            params.t_cost = t_cost;
        }
        Ok(params)
    }

    fn time_one(&self) -> Result<Duration> {
        let start = Instant::now();
        self.derive(b"tuning the key derivation", &[0; SALT_LEN])?;
        Ok(start.elapsed())
    }

    /// Checks the parameters are within what Argon2id accepts and what a key
    /// file may ask for.
    pub fn validate(&self) -> Result<()> {
        let ok = (1..=KdfParams::MAX_P_COST).contains(&self.p_cost)
            && (1..=KdfParams::MAX_T_COST).contains(&self.t_cost)
            && self.m_cost_kib >= 8 * self.p_cost
            && self.m_cost_kib <= KdfParams::MAX_M_COST_KIB;
        if ok {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "Argon2id parameters out of range: memory {} KiB (8 KiB per lane to {} KiB), \
                 {} passes (1 to {}), {} lanes (1 to {})",
                self.m_cost_kib,
                KdfParams::MAX_M_COST_KIB,
                self.t_cost,
                KdfParams::MAX_T_COST,
                self.p_cost,
                KdfParams::MAX_P_COST
            )))
        }
    }

    /// The 256-bit key Argon2id derives from `password` and `salt`.
    fn derive(&self, password: &[u8], salt: &[u8; SALT_LEN]) -> Result<Zeroizing<[u8; KEY_LEN]>> {
        let failed = |e: argon2::Error| Error::invalid(format!("Argon2id key derivation: {e}"));
        let params = argon2::Params::new(self.m_cost_kib, self.t_cost, self.p_cost, Some(KEY_LEN))
            .map_err(failed)?;
        let argon =
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let mut out = Zeroizing::new([0u8; KEY_LEN]);
        argon
            .hash_password_into(password, salt, &mut *out)
            .map_err(failed)?;
        Ok(out)
    }
}

/// Who made a key file: free text the caller supplies (shown by `key list`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyLabel {
    pub host: String,
    pub user: String,
}

/// The values `create` normally draws at random or from the clock, fixed
/// for golden-bytes tests.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct FixedForTests {
    pub id: [u8; KEY_ID_LEN],
    pub created: u64,
    pub salt: [u8; SALT_LEN],
    pub nonce: [u8; NONCE_LEN],
}

/// A master key wrapped under a password, with what is needed to unwrap it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFile {
    id: String,
    created: u64,
    label: KeyLabel,
    repository: String,
    params: KdfParams,
    salt: [u8; SALT_LEN],
    wrapped: [u8; WRAPPED_LEN],
}

/// The JSON form; field order here is the order in the file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFileJson {
    version: u32,
    id: String,
    created: u64,
    host: String,
    user: String,
    repository: String,
    kdf: KdfJson,
    cipher: String,
    wrapped_key: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KdfJson {
    name: String,
    m_cost_kib: u32,
    t_cost: u32,
    p_cost: u32,
    salt: String,
}

/// Only the version, read first so a newer file gets a version error rather
/// than an unknown-field one.
#[derive(Deserialize)]
struct VersionJson {
    version: u32,
}

impl KeyFile {
    /// Wraps `master` under `password` in a new key file with a random id and
    /// salt, belonging to the repository `repository`.
    pub fn create(
        master: &MasterKey,
        password: &Password,
        params: KdfParams,
        label: KeyLabel,
        repository: &str,
    ) -> Result<KeyFile> {
        let fixed = FixedForTests {
            id: random::array()?,
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            salt: random::array()?,
            nonce: random::array()?,
        };
        KeyFile::create_fixed_for_tests(master, password, params, label, repository, fixed)
    }

    /// `create` with the random values and the time given: golden tests only.
    #[doc(hidden)]
    pub fn create_fixed_for_tests(
        master: &MasterKey,
        password: &Password,
        params: KdfParams,
        label: KeyLabel,
        repository: &str,
        fixed: FixedForTests,
    ) -> Result<KeyFile> {
        let mut key_file = KeyFile {
            id: hex::encode(fixed.id),
            created: fixed.created,
            label,
            repository: repository.to_string(),
            params,
            salt: fixed.salt,
            wrapped: [0; WRAPPED_LEN],
        };
        key_file.wrap(master, password, &fixed.nonce)?;
        Ok(key_file)
    }

    /// The same key file (id, label, repository, creation time) wrapping
    /// `master` under a new password, salt and parameters: `key passwd`.
    pub fn rewrap(
        &self,
        master: &MasterKey,
        new_password: &Password,
        params: KdfParams,
    ) -> Result<KeyFile> {
        let mut key_file = KeyFile {
            params,
            salt: random::array()?,
            wrapped: [0; WRAPPED_LEN],
            ..self.clone()
        };
        key_file.wrap(master, new_password, &random::array()?)?;
        Ok(key_file)
    }

    fn wrap(
        &mut self,
        master: &MasterKey,
        password: &Password,
        nonce: &[u8; NONCE_LEN],
    ) -> Result<()> {
        self.params.validate()?;
        let kek = self.params.derive(password.as_bytes(), &self.salt)?;
        let mut sealed = Vec::with_capacity(WRAPPED_LEN);
        Sealer::new(Algorithm::ChaCha20Poly1305, &kek).seal_with_nonce(
            nonce,
            &self.header_ad(),
            master.expose(),
            &mut sealed,
        )?;
        self.wrapped.copy_from_slice(&sealed);
        Ok(())
    }

    /// Unwraps the master key. A wrong password, or any change to the file's
    /// fields, gives `Error::Authentication` naming this key file.
    pub fn open(&self, password: &Password) -> Result<MasterKey> {
        let kek = self.params.derive(password.as_bytes(), &self.salt)?;
        let mut plain = Zeroizing::new(Vec::with_capacity(KEY_LEN));
        Sealer::new(Algorithm::ChaCha20Poly1305, &kek).open(
            &self.header_ad(),
            &self.wrapped,
            &mut plain,
            || format!("key file {}", self.id),
        )?;
        let bytes: [u8; KEY_LEN] = plain
            .as_slice()
            .try_into()
            .map_err(|_| Error::corrupt(format!("key file {}", self.id), "wrapped key length"))?;
        Ok(MasterKey::from_bytes(bytes))
    }

    /// The associated data of the wrapping: every header field, each
    /// length-prefixed (strings) or fixed-width little-endian (numbers), so
    /// no two different headers encode alike.
    fn header_ad(&self) -> Vec<u8> {
        let mut ad = AD_DOMAIN.to_vec();
        let string = |ad: &mut Vec<u8>, s: &str| {
            ad.extend_from_slice(&(s.len() as u64).to_le_bytes());
            ad.extend_from_slice(s.as_bytes());
        };
        ad.extend_from_slice(&KEY_FILE_VERSION.to_le_bytes());
        string(&mut ad, &self.id);
        ad.extend_from_slice(&self.created.to_le_bytes());
        string(&mut ad, &self.label.host);
        string(&mut ad, &self.label.user);
        string(&mut ad, &self.repository);
        string(&mut ad, KDF_NAME);
        for n in [
            self.params.m_cost_kib,
            self.params.t_cost,
            self.params.p_cost,
        ] {
            ad.extend_from_slice(&n.to_le_bytes());
        }
        ad.extend_from_slice(&self.salt);
        string(&mut ad, WRAP_CIPHER);
        ad
    }

    /// The key file's bytes: one line of compact JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        let json = KeyFileJson {
            version: KEY_FILE_VERSION,
            id: self.id.clone(),
            created: self.created,
            host: self.label.host.clone(),
            user: self.label.user.clone(),
            repository: self.repository.clone(),
            kdf: KdfJson {
                name: KDF_NAME.to_string(),
                m_cost_kib: self.params.m_cost_kib,
                t_cost: self.params.t_cost,
                p_cost: self.params.p_cost,
                salt: hex::encode(self.salt),
            },
            cipher: WRAP_CIPHER.to_string(),
            wrapped_key: hex::encode(self.wrapped),
        };
        let mut bytes = serde_json::to_vec(&json).expect("plain strings and numbers serialise");
        bytes.push(b'\n');
        bytes
    }

    /// Parses a key file. Anything malformed is one `Error::Corrupt` ("corrupt
    /// key file: …"); a newer version is `Error::UnsupportedVersion`. Whether
    /// the fields are authentic is only known when it opens.
    pub fn from_bytes(bytes: &[u8]) -> Result<KeyFile> {
        let corrupt = |detail: String| Error::corrupt("key file", detail);
        let version: VersionJson =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        if version.version != KEY_FILE_VERSION {
            return Err(Error::UnsupportedVersion {
                what: "key file".into(),
                found: version.version,
                supported: KEY_FILE_VERSION,
            });
        }
        let json: KeyFileJson =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        let id_ok = json.id.len() == 2 * KEY_ID_LEN
            && json
                .id
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !id_ok {
            return Err(corrupt(format!(
                "id {:?} is not 16 lowercase hex digits",
                json.id
            )));
        }
        if json.kdf.name != KDF_NAME {
            return Err(corrupt(format!(
                "unknown key derivation {:?}",
                json.kdf.name
            )));
        }
        if json.cipher != WRAP_CIPHER {
            return Err(corrupt(format!(
                "unknown wrapping cipher {:?}",
                json.cipher
            )));
        }
        let params = KdfParams {
            m_cost_kib: json.kdf.m_cost_kib,
            t_cost: json.kdf.t_cost,
            p_cost: json.kdf.p_cost,
        };
        params.validate().map_err(|e| corrupt(e.to_string()))?;
        Ok(KeyFile {
            id: json.id,
            created: json.created,
            label: KeyLabel {
                host: json.host,
                user: json.user,
            },
            repository: json.repository,
            params,
            salt: hex_array(&json.kdf.salt, "salt").map_err(corrupt)?,
            wrapped: hex_array(&json.wrapped_key, "wrapped_key").map_err(corrupt)?,
        })
    }

    /// The key file's id: 16 lowercase hex digits (its name under `keys/`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// When it was created, in seconds since the Unix epoch.
    pub fn created(&self) -> u64 {
        self.created
    }

    pub fn label(&self) -> &KeyLabel {
        &self.label
    }

    /// The id of the repository this key file belongs to.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn params(&self) -> KdfParams {
        self.params
    }
}

fn hex_array<const N: usize>(text: &str, field: &str) -> Result<[u8; N], String> {
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out)
        .map_err(|_| format!("{field} is not {} hex digits", 2 * N))?;
    Ok(out)
}

#[cfg(test)]
#[path = "keyfile_tests.rs"]
mod tests;
