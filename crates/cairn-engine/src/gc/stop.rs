//! What an interrupted collection says (`crate::interrupt`, issue 30): the
//! phases before anything is deleted (Merge to Select) stop at safe points
//! with "nothing was deleted". A leaf of `gc/`, so that the mark phase and
//! the dead-first commit both use it without importing each other.

use cairn_core::Result;

/// The start of every interruption message of a collection.
pub(super) const STOPPED: &str = "garbage collection stopped before its commit";

/// The message of an interruption before anything was deleted.
pub(super) fn nothing_deleted() -> String {
    format!("{STOPPED}: nothing was deleted")
}

/// A safe point of the phases before anything is deleted: an interruption
/// stops the collection there.
pub(super) fn stop_if_interrupted() -> Result<()> {
    crate::interrupt::check(nothing_deleted)
}
