//! [`Location`]: where a dedup decision found a chunk, the one answer every
//! lookup path gives and the rewrite schemes (`backup/rewrite/`) read; kept
//! apart from the dedup state so those schemes need nothing else of it.

use cairn_core::ContainerId;

/// Where a dedup decision found a chunk: the answer of every lookup path
/// (cache hit, in-memory part, index hit, lazy buffer, frugal index), so a
/// rewrite policy can count the containers a stream's duplicates live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// Stored nowhere: the stream writes it now.
    New,
    /// Stored in this container (durable, or closed and on its way to disk).
    Stored(ContainerId),
    /// Decided new earlier in this backup and still being packed into an
    /// open container (this stream's or another's): no container id yet.
    InFlight,
}

impl Location {
    pub fn is_new(self) -> bool {
        self == Location::New
    }

    /// The container a duplicate lives in, when it has one yet.
    pub fn container(self) -> Option<ContainerId> {
        match self {
            Location::Stored(id) => Some(id),
            _ => None,
        }
    }
}
