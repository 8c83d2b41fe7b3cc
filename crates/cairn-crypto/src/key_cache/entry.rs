//! The bytes of a key cache entry, the same in every store:
//!
//! ```text
//! "cairn unlocked key v1\n" | expires (u64 LE, Unix seconds) | master key (32) | repository id
//! ```
//!
//! The expiry is checked on every read even where the kernel enforces it
//! too, and the repository id must be the one asked for: an entry copied
//! under another repository's name is not used.

use zeroize::Zeroizing;

use crate::key::KEY_LEN;
use crate::MasterKey;

const MAGIC: &[u8] = b"cairn unlocked key v1\n";
const HEADER: usize = MAGIC.len() + 8 + KEY_LEN;

/// The entry of `repo_id`'s `master` key, valid until `expires`.
pub(super) fn encode(repo_id: &str, master: &MasterKey, expires: u64) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(HEADER + repo_id.len()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&expires.to_le_bytes());
    out.extend_from_slice(master.expose());
    out.extend_from_slice(repo_id.as_bytes());
    out
}

/// The master key in `payload` if it is an entry of `repo_id` still valid
/// at `now`; `None` for anything else.
pub(super) fn decode(payload: &[u8], repo_id: &str, now: u64) -> Option<MasterKey> {
    let rest = payload.strip_prefix(MAGIC)?;
    if rest.len() < 8 + KEY_LEN || &rest[8 + KEY_LEN..] != repo_id.as_bytes() {
        return None;
    }
    let expires = u64::from_le_bytes(rest[..8].try_into().ok()?);
    if now >= expires {
        return None;
    }
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    key.copy_from_slice(&rest[8..8 + KEY_LEN]);
    Some(MasterKey::from_bytes(*key))
}
