//! Compaction of the index's deltas, after a backup (docs/concurrency.md,
//! "Compaction beside writers"). Backups that share the writer lock only
//! add index deltas; once [`MAX_DELTAS`] of them are listed, the next
//! backup to finish merges them into a new generation, holding the writer
//! lock *shared* (backups go on committing beside it) and the `compact`
//! lock alone (one merge at a time). It never waits: if either lock is
//! held, the next backup tries.
//!
//! What makes the merge safe beside writers (`index/overlay.rs`,
//! `index/disk_index.rs`):
//! - it deletes exactly the deltas it folded, in order, after writing the
//!   new file; a delta a writer adds to the older generation after the
//!   merge's listing stays listed, and readers apply it over the new file;
//! - a merge that stops half-way leaves a suffix of what it folded, which
//!   applied again over the new file changes nothing;
//! - the new file's mark covers no container a running writer may still
//!   store into: it is the lowest of one past the last container listed
//!   and the floors of the sessions listed after that listing, never below
//!   the old file's mark. Containers listed below it that no delta names
//!   (orphans of writers that died) are read and folded in.
//!
//! A frugal-index repository merges the same way: the fold's puts go to
//! the merging handle's own chunk-log partition (`index::open_frugal`).
//! A repository whose writers do not share the lock (no index file yet)
//! merges as before: the first writer to find the lock free takes it
//! alone. Either way a writer alone also removes leftover temporaries.

use cairn_core::{ContainerId, Error, Result};

use crate::index::disk_index::MAX_DELTAS;
use crate::index::overlay::IndexUpdate;
use crate::{object_names, Repository};

/// Deltas listed before a backup compacts: [`MAX_DELTAS`], or
/// `CAIRN_COMPACT_DELTAS` (at least 1; tests and the kill benchmark set it
/// low, so merges run beside writers all the time).
pub fn threshold() -> usize {
    std::env::var("CAIRN_COMPACT_DELTAS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(MAX_DELTAS as usize, |n| n.max(1))
}

/// Whether `at` deltas or more are listed (of every generation: those a
/// writer added to an older one after a merge are folded by the next),
/// from one listing (no delta is read).
fn deltas_piled_up(repo: &Repository, at: usize) -> Result<bool> {
    let listing = repo.backend().list(object_names::INDEX)?;
    let deltas = listing
        .iter()
        .filter(|k| object_names::parse_index_delta(k).is_some())
        .count();
    Ok(deltas >= at)
}

/// After a backup: merges the index's deltas into a new generation once
/// [`threshold`] of them piled up, beside any other writer where writers
/// share the lock; removes leftover temporaries when no other writer runs.
/// Returns whether it merged.
pub fn compact(repo: &Repository) -> Result<bool> {
    compact_at(repo, threshold())
}

/// [`compact`] after a backup whose commit listed `deltas` index deltas,
/// its own counted (`BackupOutcome::deltas_after_commit`): below the
/// threshold there is nothing to merge, and nothing is listed again (a
/// request and a round trip fewer per backup on object storage). Deltas
/// other writers add after that listing are theirs to count after their
/// own commits.
pub fn compact_after_backup(repo: &Repository, deltas: usize) -> Result<bool> {
    let at = threshold();
    compact_if(repo, at, || Ok(deltas >= at && deltas_piled_up(repo, at)?))
}

/// [`compact`] once `at` deltas are listed.
pub fn compact_at(repo: &Repository, at: usize) -> Result<bool> {
    compact_if(repo, at, || deltas_piled_up(repo, at))
}

/// Removes leftover temporaries if any, then merges once `piled_up` says
/// `at` deltas are there.
fn compact_if(
    repo: &Repository,
    at: usize,
    piled_up: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    if repo.backend().has_temporaries()? {
        // Taken alone, the writer lock removes leftover temporaries.
        match repo.lock_writer(false) {
            Ok(lock) => drop(lock),
            Err(Error::Locked(_)) => {}
            Err(e) => return Err(e),
        }
    }
    if !piled_up()? {
        return Ok(false);
    }
    if repo.writers_share()? {
        merge_beside_writers(repo, at)
    } else {
        merge_alone(repo, at)
    }
}

/// The merge beside writers (module doc).
fn merge_beside_writers(repo: &Repository, at: usize) -> Result<bool> {
    let Some((writer, compacting)) = repo.lock_compaction()? else {
        return Ok(false);
    };
    // Another compaction may have merged between the look and the locks.
    if !deltas_piled_up(repo, at)? {
        return Ok(false);
    }
    let warnings = crate::warnings::Warnings::default();
    // Opened as a backup beside others opens it: a damaged index is left
    // for a writer alone to rebuild (it deletes what others add to).
    let Some(mut opened) = crate::index::open_beside_writers_memoized(
        repo.backend().clone(),
        repo.counters.clone(),
        &*repo.log,
        &repo.config.index,
        &warnings,
        &repo.overlays,
        None,
    )?
    else {
        return Ok(false);
    };
    // Containers (the open's listing, whose uncovered ones it replayed),
    // then sessions: a container listed was written by a session this
    // listing sees (its floor bounds the mark), or by one that ended (its
    // delta is listed, or it died and the container is an orphan the open
    // replayed). A session that died keeps its floor until a collection
    // reaps it: the containers above stay out of the mark meanwhile, and
    // readers replay them.
    let floor = crate::session::lowest_floor(&**repo.backend())?;
    let past_last = opened
        .present
        .iter()
        .chain(&opened.retiring)
        .max()
        .map_or(ContainerId(0), |id| ContainerId(id.0 + 1));
    let base = opened.kind.base_covered_below().unwrap_or(ContainerId(0));
    let mark = floor.map_or(past_last, |f| f.min(past_last)).max(base);
    let replayed: Vec<_> = std::mem::take(&mut opened.replayed)
        .into_iter()
        .filter(|e| e.container < mark)
        .collect();
    fold(repo, &mut opened, IndexUpdate::puts(replayed), mark)?;
    drop(compacting);
    drop(writer);
    Ok(true)
}

/// The merge of a repository whose writers take the lock alone.
fn merge_alone(repo: &Repository, at: usize) -> Result<bool> {
    let lock = match repo.lock_writer(false) {
        Ok(l) => l,
        Err(Error::Locked(_)) => return Ok(false),
        Err(e) => return Err(e),
    };
    if !deltas_piled_up(repo, at)? {
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
    fold(repo, &mut opened, update, repo.log.next_id())?;
    drop(lock);
    Ok(true)
}

/// Merges every delta listed and `update` into a new generation whose
/// mark is `covered`.
fn fold(
    repo: &Repository,
    opened: &mut crate::index::OpenedIndex,
    update: IndexUpdate,
    covered: ContainerId,
) -> Result<()> {
    opened.kind.merge_next();
    opened.kind.commit(
        &**repo.backend(),
        update,
        covered,
        repo.config.fp_width(),
        repo.config.index.page_size as usize,
    )
}
