//! Where commands meet the unlocked-key cache (`cairn unlock`, in
//! `unlock_commands.rs`): every command that opens an encrypted repository
//! uses a live entry before it asks for a password, and the key commands
//! that change passwords forget the entry.

use cairn_core::Backend;
use cairn_crypto::password::process_env;
use cairn_crypto::{KeyCache, MasterKey, Password};
use cairn_engine::crypto::{self as repo_crypto, StoredConfig};

/// The master key of an encrypted repository for
/// `Repository::open_with_master_key`: a live cache entry of its id whose
/// key opens the stored config; else (no entry, or one that fails that
/// check and is dropped) from `password`. A cache the environment spoils
/// (a misspelled `CAIRN_KEY_CACHE`) is not used: `unlock` reports it.
pub fn cached_or_password<'a>(
    password: &'a mut dyn FnMut() -> cairn_core::Result<Password>,
) -> impl FnMut(&dyn Backend, &StoredConfig) -> cairn_core::Result<MasterKey> + 'a {
    move |backend, stored| {
        if let Ok(cache) = KeyCache::from_env(&process_env) {
            if let Some(master) = cache.get(stored.id()) {
                if stored.opens_with(&master) {
                    return Ok(master);
                }
                // Another repository's key under this id, or a repository
                // replaced since: never used again.
                let _ = cache.forget(stored.id());
            }
        }
        repo_crypto::unlock_with_password(backend, stored, password)
    }
}

/// Forgets the cached key of repository `repo_id` (after `key passwd` or
/// `key remove`: whoever changes the passwords wants the next command to
/// prove one again). A cache that cannot be reached holds nothing to forget.
pub fn forget_cached_key(repo_id: &str) -> cairn_core::Result<()> {
    if let Ok(cache) = KeyCache::from_env(&process_env) {
        cache.forget(repo_id)?;
    }
    Ok(())
}
