//! What a backup that shared the writer lock leaves for a writer alone
//! (docs/concurrency.md): a shared holder only adds index deltas and
//! removes no temporaries (another backup's may be in flight), so after a
//! backup, if the writer lock is free, this takes it: taking it alone
//! removes leftover temporaries (`Repository::lock_writer`), and when the
//! deltas of the current generation reached [`MAX_DELTAS`] they are merged
//! into the next generation, as a lone backup's commit does. Never waits:
//! if another writer holds the lock, the next one to find it free does this.

use cairn_core::{Error, Result};

use crate::index::disk_index::MAX_DELTAS;
use crate::index::overlay::IndexUpdate;
use crate::{object_names, Repository};

/// Whether the newest index generation has [`MAX_DELTAS`] deltas or more,
/// from one listing (no delta is read).
fn deltas_piled_up(repo: &Repository) -> Result<bool> {
    let listing = repo.backend().list(object_names::INDEX)?;
    let Some(generation) = listing
        .iter()
        .filter_map(|k| object_names::parse_generation(k, object_names::INDEX))
        .max()
    else {
        return Ok(false);
    };
    let deltas = listing
        .iter()
        .filter(|k| object_names::parse_index_delta(k).is_some_and(|(g, _)| g == generation))
        .count();
    Ok(deltas >= MAX_DELTAS as usize)
}

/// When no other writer runs: removes leftover temporaries and merges the
/// index's deltas into a new generation once they reached [`MAX_DELTAS`];
/// returns whether it merged.
pub fn tidy_if_alone(repo: &Repository) -> Result<bool> {
    if !deltas_piled_up(repo)? && !repo.backend().has_temporaries()? {
        return Ok(false);
    }
    // Taken alone, the writer lock removes leftover temporaries.
    let lock = match repo.lock_writer(false) {
        Ok(l) => l,
        Err(Error::Locked(_)) => return Ok(false),
        Err(e) => return Err(e),
    };
    // Another writer may have compacted between the look and the lock.
    if !deltas_piled_up(repo)? {
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
