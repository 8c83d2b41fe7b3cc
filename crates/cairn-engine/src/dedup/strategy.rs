//! The lookup-strategy seam: in which order a stream's fingerprints go
//! through the dedup steps, and when each is decided. Chosen once per
//! stream from `index.lookup.strategy`; the backup stream calls it only
//! through [`LookupStrategy`]. A new strategy is a new file in `dedup/`
//! plus one arm in [`for_config`] (or, like deferred dedup, a backup
//! option chosen in [`for_backup`]).

use cairn_core::{Fingerprint, Result};

use super::{Dedup, Location};
use crate::config::{LookupConfig, LookupStrategy as Choice};

/// What a strategy decided for one submitted fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Decided now.
    Decided(Location),
    /// Buffered: the decision comes later from
    /// [`LookupStrategy::take_resolved`] under this rank (the fingerprint's
    /// arrival order in the stream, counted from 0).
    Pending(u64),
}

pub trait LookupStrategy: Send {
    /// The rank the next submitted fingerprint gets.
    fn next_rank(&self) -> u64;

    /// Runs `fps` (ranks `next_rank()..`) through the dedup steps; `out[i]`
    /// is the decision for `fps[i]`. Buffered fingerprints decided by this
    /// call (of this batch or earlier ones) wait in `take_resolved`.
    fn submit(&mut self, dedup: &Dedup, fps: &[Fingerprint], out: &mut Vec<Decision>)
        -> Result<()>;

    /// Decides every buffered fingerprint (end of the stream).
    fn flush(&mut self, dedup: &Dedup) -> Result<()>;

    /// Buffered fingerprints decided since the last call: `(rank, where)`.
    fn take_resolved(&mut self) -> Vec<(u64, Location)>;

    /// Fingerprints buffered now.
    fn buffered(&self) -> usize;
}

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
