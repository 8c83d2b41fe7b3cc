//! Cooperative interruption (Ctrl-C, SIGTERM): the command's signal handler
//! only sets a flag ([`request`]); long-running writers look at it at safe
//! points ([`check`]), where stopping leaves the repository as a crash
//! there would, and return [`Error::Interrupted`] saying what was committed.
//! Everything then unwinds normally: locks and leases are released, and the
//! command exits with one line.
//!
//! Until the command takes a lock to write ([`arm`]: the writer or
//! collector lock) it has written nothing, and may be waiting at a password
//! prompt or for another writer: the handler then ends it at once.
//!
//! Safe points are chosen before commit points (a backup before its index
//! and record; a collection before its commit, and between its deletion of
//! whole dead containers and its copies; a copy between snapshots; repair
//! before it replaces the index), never inside one: a commit that started
//! finishes, and the command reports it.

use std::sync::atomic::{AtomicBool, Ordering};

use cairn_core::{Error, Result};

/// Set once by the signal handler; never cleared (one command per process).
static REQUESTED: AtomicBool = AtomicBool::new(false);
/// Set when the command took a lock to write; never cleared.
static ARMED: AtomicBool = AtomicBool::new(false);

/// From now on the command writes: an interruption waits for a safe point.
pub fn arm() {
    ARMED.store(true, Ordering::SeqCst);
}

/// Whether the command took a lock to write.
pub fn armed() -> bool {
    ARMED.load(Ordering::SeqCst)
}

/// Asks the running command to stop at its next safe point (async-signal
/// context: one atomic store).
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether an interruption was requested.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// A safe point: `Err(Interrupted(committed()))` when an interruption was
/// requested. `committed` says what is durable at this point.
pub fn check(committed: impl FnOnce() -> String) -> Result<()> {
    if requested() {
        Err(Error::Interrupted(committed()))
    } else {
        Ok(())
    }
}
