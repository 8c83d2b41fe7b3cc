//! The kernel keyring store: one `user` key per entry in the user keyring
//! of the calling uid, described `cairn:SCOPE:REPO_ID`, with a timeout the
//! kernel enforces (it deletes the key once the time is up, whether or not
//! cairn runs again).
//!
//! The key grants everything to its possessor and to its owning uid (so a
//! later process of the same user reads it whether or not its session
//! keyring links the user keyring), nothing to the group or others.

use std::time::Duration;

use linux_keyutils::{KeyError, KeyPermissionsBuilder, KeyRing, KeyRingIdentifier, Permission};
use zeroize::Zeroizing;

use cairn_core::{Error, Result};

/// The user keyring of this uid.
pub struct KeyringStore {
    ring: KeyRing,
}

fn description(scope: &str, repo_id: &str) -> String {
    format!("cairn:{scope}:{repo_id}")
}

fn keyring_error(doing: &str, e: KeyError) -> Error {
    Error::io(
        format!("{doing} in the kernel keyring"),
        std::io::Error::other(format!("{e:?}")),
    )
}

/// The largest entry read back: the header and a repository id of at most
/// 128 bytes (`is_plain_name`).
const MAX_ENTRY: usize = 256;

impl KeyringStore {
    /// The user keyring, if keyctl works here (a seccomp profile may
    /// refuse it: the error says so).
    pub fn open() -> Result<KeyringStore> {
        let ring = KeyRing::from_special_id(KeyRingIdentifier::User, true).map_err(|e| {
            Error::invalid(format!(
                "the kernel keyring is not available here ({e:?}): keyctl may be blocked, \
                 as in a container's default seccomp profile; set CAIRN_KEY_CACHE=file \
                 to keep unlocked keys in a tmpfs instead (docs/security.md)"
            ))
        })?;
        Ok(KeyringStore { ring })
    }

    pub(super) fn put(
        &self,
        scope: &str,
        repo_id: &str,
        payload: &[u8],
        lifetime: Duration,
    ) -> Result<()> {
        let key = self
            .ring
            .add_key(&description(scope, repo_id), payload)
            .map_err(|e| keyring_error("adding the unlocked key", e))?;
        let seconds = usize::try_from(lifetime.as_secs()).unwrap_or(usize::MAX);
        let perms = KeyPermissionsBuilder::builder()
            .posessor(Permission::ALL)
            .user(Permission::ALL)
            .build();
        // Without its timeout the key would outlive what `--for` promised:
        // any failure here removes it again.
        if let Err(e) = key.set_timeout(seconds).and_then(|()| key.set_perms(perms)) {
            let _ = key.invalidate();
            return Err(keyring_error("setting the unlocked key's timeout", e));
        }
        Ok(())
    }

    pub(super) fn get(&self, scope: &str, repo_id: &str) -> Option<Zeroizing<Vec<u8>>> {
        let key = self.ring.search(&description(scope, repo_id)).ok()?;
        let mut buf = Zeroizing::new([0u8; MAX_ENTRY]);
        let len = key.read(&mut *buf).ok()?;
        (len <= MAX_ENTRY).then(|| Zeroizing::new(buf[..len].to_vec()))
    }

    pub(super) fn forget(&self, scope: &str, repo_id: &str) -> Result<bool> {
        match self.ring.search(&description(scope, repo_id)) {
            Ok(key) => match key.invalidate() {
                Ok(()) | Err(KeyError::KeyDoesNotExist | KeyError::KeyExpired) => Ok(true),
                Err(e) => Err(keyring_error("removing the unlocked key", e)),
            },
            Err(KeyError::KeyDoesNotExist | KeyError::KeyExpired | KeyError::KeyRevoked) => {
                Ok(false)
            }
            Err(e) => Err(keyring_error("looking up the unlocked key", e)),
        }
    }

    pub(super) fn forget_all(&self, scope: &str) -> Result<usize> {
        let prefix = description(scope, "");
        let links = self
            .ring
            .get_links(4096)
            .map_err(|e| keyring_error("listing the unlocked keys", e))?;
        let mut removed = 0;
        for key in links.iter().filter_map(|node| node.as_key()) {
            let Ok(meta) = key.metadata() else { continue };
            if meta.get_description().starts_with(&prefix) && key.invalidate().is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}
