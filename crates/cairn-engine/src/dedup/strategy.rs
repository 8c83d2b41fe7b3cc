//! The lookup-strategy seam: in which order a stream's fingerprints go
//! through the dedup steps, and when each is decided. Chosen once per
//! stream from `index.lookup.strategy`; the backup stream calls it only
//! through [`LookupStrategy`]. A new strategy is a new file in `dedup/`
//! plus one arm in `choose::for_config` (or, like deferred dedup, a backup
//! option chosen in `choose::for_backup`).

use cairn_core::{Fingerprint, Result};

use super::{Dedup, Location};

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
