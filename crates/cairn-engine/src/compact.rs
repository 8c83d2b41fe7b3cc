//! Compaction of the index after backups that ran beside others
//! (docs/concurrency.md): a backup sharing the writer lock only adds
//! deltas, so when the deltas of the current generation pile up past
//! [`MAX_DELTAS`], a writer that finds itself alone afterwards merges them
//! into the next generation, as a lone backup's commit does. Never waits:
//! if another writer holds the lock, the next one to find itself alone
//! compacts.

use cairn_core::{Error, Result};

use crate::index::disk_index::{DiskIndex, MAX_DELTAS};
use crate::index::overlay::IndexUpdate;
use crate::Repository;

/// Merges the index's deltas into a new generation when they reached
/// [`MAX_DELTAS`] and no other writer runs; returns whether it did.
pub fn compact_if_due(repo: &Repository) -> Result<bool> {
    let due = |repo: &Repository| -> Result<bool> {
        let disk = DiskIndex::open(repo.backend().clone(), repo.counters.clone())?;
        Ok(disk.generation() > 0 && disk.delta_count() >= MAX_DELTAS)
    };
    if !due(repo)? {
        return Ok(false);
    }
    let lock = match repo.lock_writer(false) {
        Ok(l) => l,
        Err(Error::Locked(_)) => return Ok(false),
        Err(e) => return Err(e),
    };
    // Another writer may have compacted between the look and the lock.
    if !due(repo)? {
        return Ok(false);
    }
    let warnings = crate::warnings::Warnings::default();
    let mut opened = crate::index::open_for_write(
        repo.backend().clone(),
        repo.counters.clone(),
        &*repo.log,
        &repo.config.index,
        &warnings,
    )?;
    // The containers no delta covered (orphans of writers that never
    // committed, or ones this open replayed) go into the new generation.
    let update = IndexUpdate::puts(std::mem::take(&mut opened.replayed));
    opened.kind.commit(
        &**repo.backend(),
        update,
        repo.log.next_id(),
        repo.config.fp_width(),
        repo.config.index.page_size as usize,
    )?;
    drop(lock);
    Ok(true)
}
