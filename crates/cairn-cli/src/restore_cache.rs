//! The restore cache options shared by `restore` and `sim --restore`.

use anyhow::Result;

/// `--restore-policy` and `--restore-cache` as the engine's options.
pub fn restore_cache_options(policy: &str, size: &str) -> Result<cairn_engine::read::CacheOptions> {
    Ok(cairn_engine::read::CacheOptions {
        policy: policy.parse()?,
        bytes: crate::output::parse_size_u64(size)?,
    })
}
