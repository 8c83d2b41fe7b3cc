//! Which [`LookupStrategy`] a backup stream runs: the factory over the
//! strategies (`eager.rs`, `lazy.rs`, deferred dedup's resolver), kept
//! apart from the trait so the strategies depend on the trait alone.

use super::strategy::LookupStrategy;
use crate::config::{LookupConfig, LookupStrategy as Choice};

/// The strategy of a backup in `mode`: deferred dedup replaces the
/// configured lookup (it looks nothing up); inline runs `cfg`'s.
pub fn for_backup(mode: super::deferred::DedupMode, cfg: &LookupConfig) -> Box<dyn LookupStrategy> {
    match mode {
        super::deferred::DedupMode::Deferred => {
            Box::new(super::eager::Eager::with(super::deferred::resolve))
        }
        super::deferred::DedupMode::Inline => for_config(cfg),
    }
}

/// The strategy `cfg` names. `auto` is resolved before a backup starts.
pub fn for_config(cfg: &LookupConfig) -> Box<dyn LookupStrategy> {
    match cfg.strategy {
        Choice::Lazy => Box::new(super::lazy::LazyBuffer::new(cfg)),
        Choice::Eager | Choice::Auto => Box::new(super::eager::Eager::default()),
    }
}
