//! The restore cache options shared by `restore` and `sim --restore`: the
//! policy and its memory, typed and defaulted by the engine's
//! `CacheOptions`.

use clap::Args;

use cairn_engine::read::{policy::DEFAULT_CACHE_BYTES, CacheOptions, PolicyKind};

use crate::values::{choice, size_default};

#[derive(Args, Debug, Clone)]
pub struct RestoreCacheArgs {
    /// Restore policy: container-lru, chunk-lru, faa (forward assembly),
    /// alacc (assembly + look-ahead chunk cache) or belady (the optimal
    /// bound); see docs/restore-speed.md.
    #[arg(long, default_value_t = PolicyKind::default(), value_parser = choice::<PolicyKind>(&PolicyKind::NAMES))]
    pub restore_policy: PolicyKind,
    /// Memory of the restore policy: raw chunk bytes it may hold.
    #[arg(long, value_name = "SIZE", default_value = size_default!(DEFAULT_CACHE_BYTES), value_parser = crate::values::size)]
    pub restore_cache: u64,
}

impl RestoreCacheArgs {
    /// `--restore-policy` and `--restore-cache` as the engine's options.
    pub fn options(&self) -> CacheOptions {
        CacheOptions {
            policy: self.restore_policy,
            bytes: self.restore_cache,
        }
    }
}
