//! The steps of a collection that write the index, Merge and Commit, and
//! what lets backups run beside every step (`003_ea5fccc485a97c5d.txt`
//! §3.1 step 1, §3.5 "online" GC; docs/gc.md "Concurrent ingest",
//! docs/concurrency.md).
//!
//! ```text
//! Merge   (writer lock, shared with backups)  uncovered containers join the
//!                        index; gone writers' sessions are reaped; the roots
//!                        (snapshot and staged records) are read; what the
//!                        collection may judge is bounded below every running
//!                        writer's containers; ids for the copies are reserved
//! ...     (no writer lock: backups commit meanwhile)
//! Commit  (writer lock, shared)  the index is re-read as it is now; the
//!                        cleaned containers are condemned (pending list) and
//!                        their live chunks' entries move to the copies
//! Finish  (`finish.rs`)  wait for the writers that may have deduplicated
//!                        against them; rescue what their records reach;
//!                        the entries go; the containers go (readers out)
//! ```
//!
//! Why the commit is right against an index that moved on: between Merge
//! and Commit only backups write, and a backup only adds entries naming
//! containers at or above the bound (its session's floor), or replays the
//! collection's own copies. So an entry that still names a cleaned
//! container at Commit is the entry the mark phase judged.

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Error, FpMap, Result};
use cairn_format::dir::BlobRef;
use cairn_format::index::IndexEntry;

use super::reservation::{self, Reservation};
use super::sweep::{self, Copied};
use super::{pending, Entries, GcOptions, GcProgress};
use crate::catalog;
use crate::index::disk_index::DiskIndex;
use crate::index::overlay::IndexUpdate;
use crate::repo::{GcLock, MayDelete, Repository};

/// The roots of the mark: every snapshot record, and every staged record
/// (a writer's commit in flight, `session.rs`). A record that cannot be
/// read stops the collection: its data would look dead.
pub(super) fn live_roots(repo: &Repository) -> Result<Vec<(String, BlobRef)>> {
    let backend = &**repo.backend();
    let (snaps, bad) = catalog::list(backend)?;
    if let Some((id, e)) = bad.first() {
        return Err(Error::corrupt(
            format!("snapshot {id}"),
            format!(
                "{e}; garbage collection would treat its data as garbage \
                 (forget it or run `cairn repair snapshots` first)"
            ),
        ));
    }
    let mut roots = snaps
        .into_iter()
        .map(|s| Ok((s.id, BlobRef::try_from(&s.record.root)?)))
        .collect::<Result<Vec<_>>>()?;
    for (id, record) in crate::session::staged_records(backend)? {
        if !roots.iter().any(|(r, _)| *r == id) {
            roots.push((id, BlobRef::try_from(&record.root)?));
        }
    }
    Ok(roots)
}

/// Replayed entries, the canonical copy of each chunk.
pub(super) fn canonical_map(entries: &[IndexEntry]) -> FpMap<ContainerId> {
    let mut map = FpMap::default();
    for e in entries {
        crate::canonical::place(&mut map, e.fp, e.container);
    }
    map
}

pub(super) fn puts_of(map: &FpMap<ContainerId>) -> Vec<IndexEntry> {
    map.iter()
        .map(|(fp, c)| IndexEntry {
            fp: *fp,
            container: *c,
        })
        .collect()
}

/// What Merge leaves for the phases that follow it.
pub(super) struct Merged {
    pub roots: Vec<(String, BlobRef)>,
    /// Containers present after Merge below `bound`: what the collection
    /// judges.
    pub ids: Vec<ContainerId>,
    /// Every container a running writer may store into lies at or above
    /// this (the lowest floor of the sessions Merge found running), and so
    /// does every container written after Merge: the collection judges
    /// only containers below it, and its removals forget only entries
    /// naming containers below it (`IndexUpdate::removes_below`).
    pub bound: ContainerId,
    /// The ids this collection's copies go to (none in a dry run).
    pub reservation: Option<Reservation>,
    /// Dry run: containers the index does not cover yet (not committed).
    pub uncovered: FpMap<ContainerId>,
    pub warnings: Vec<String>,
    /// The Bloom seed this state gives ([`state_seed`]).
    pub seed: u64,
}

/// The seed of the Bloom hash functions for a collection that sees `roots`
/// with `next` the first container id not yet handed out. 003 §3.1 seeds
/// the filters afresh on every run so that a dead chunk taken for live
/// (a false positive) does not stay so: every run that may copy reserves
/// container ids at Merge, which moves `next`, so two such runs never
/// share a seed. A dry run reserves nothing, so it plans with the seed of
/// the run that follows it on the same repository, and prints that run's
/// plan.
pub(super) fn state_seed(roots: &[(String, BlobRef)], next: ContainerId) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&next.0.to_le_bytes());
    for (id, root) in roots {
        h.update(id.as_bytes());
        h.update(&[0]);
        h.update(root.root.as_bytes());
    }
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().unwrap())
}

/// Merge (§3.1 step 1). A dry run only reads what Merge would index.
pub(super) fn merge(repo: &Repository, gc: &GcLock, opts: &GcOptions) -> Result<Merged> {
    let writer = repo.lock_writer_for_gc(gc, opts.wait)?;
    if opts.dry_run {
        let opened = repo.open_index(&writer, &Default::default())?;
        let mut roots = live_roots(repo)?;
        roots.retain(|(id, _)| !opts.assume_forgotten.contains(id));
        return Ok(Merged {
            seed: state_seed(&roots, repo.log.next_id()),
            roots,
            ids: repo.log.ids()?,
            bound: ContainerId(u64::MAX),
            reservation: None,
            uncovered: canonical_map(&opened.replayed),
            warnings: Vec::new(),
        });
    }
    let backend = repo.backend();
    let mut warnings = Vec::new();
    let mut opened = repo.open_index(&writer, &Default::default())?;
    let mut replayed = canonical_map(&opened.replayed);
    // A pending list left by a collection that stopped before its deletes
    // finished: backups may have deduplicated against what it condemned
    // after it last looked (docs/concurrency.md), so its containers are
    // not deleted blind; they are indexed again where the index lost their
    // chunks and judged like any other, by this collection's whole
    // protocol. A list that cannot be read is treated the same way, for
    // every covered container (which it named is lost). The list goes only
    // once the entries put back are committed: a stop between the two
    // leaves the list, and the next collection puts them back again; the
    // other order left covered containers whose chunks no entry names, and
    // no list saying why (the kill test found it).
    let mut clear_pending = true;
    match pending::read(&**backend) {
        Ok(retiring) if retiring.is_empty() => clear_pending = false,
        Ok(retiring) => update_reindex(repo, &mut replayed, Some(&retiring))?,
        Err(e) if e.is_corruption() => {
            warnings.push(format!("{e}; containers it named are judged again"));
            update_reindex(repo, &mut replayed, None)?;
        }
        Err(e) => return Err(e),
    }
    // A reservation left by a collection that died is replaced below: its
    // copies are sound duplicates (verified, then written whole) of chunks
    // the index names elsewhere. One that cannot be read is only reported:
    // no collection is writing into it.
    if let Err(e) = reservation::read(&**backend) {
        warnings.push(format!("{e}; replaced"));
    }
    opened.kind.commit(
        &**backend,
        IndexUpdate::puts(puts_of(&replayed)),
        repo.log.next_id(),
        repo.config.fp_width(),
        repo.config.index.page_size as usize,
    )?;
    if clear_pending {
        pending::clear(&**backend)?;
    }
    // Containers first, then sessions, then roots: a container listed was
    // written by a session the survey sees running (then it lies at or
    // above the bound) or that ended before it (then its record is read
    // below, or it died and its containers are orphans to judge).
    let present = repo.log.ids()?;
    let sessions = crate::session::survey(&**backend)?;
    let roots = live_roots(repo)?;
    let bound = sessions
        .floor()
        .unwrap_or(ContainerId(u64::MAX))
        .min(ContainerId(present.last().map_or(0, |id| id.0 + 1)));
    let ids: Vec<ContainerId> = present.into_iter().filter(|id| *id < bound).collect();
    // Copies never need more containers than the ones they come from
    // (next-fit packing of a subsequence of containers' chunks, each
    // container a group that fits: greedy is optimal for ordered packing),
    // so one id per container judged, plus one, always suffices. Claimed
    // as one block under the container-id mark, so no writer is handed one.
    let block = repo.log.reserve(ids.len() as u64 + 1)?;
    let reserved = Reservation {
        start: block.start,
        end: block.end,
    };
    reservation::write(&**backend, &reserved)?;
    drop(writer);
    Ok(Merged {
        seed: state_seed(&roots, reserved.start),
        roots,
        ids,
        bound,
        reservation: Some(reserved),
        uncovered: FpMap::default(),
        warnings,
    })
}

/// Adds to `replayed` every chunk of a covered container (of `only`, if
/// given) that the index does not name: the chunks of containers a
/// collection that stopped was retiring.
fn update_reindex(
    repo: &Repository,
    replayed: &mut FpMap<ContainerId>,
    only: Option<&[ContainerId]>,
) -> Result<()> {
    let disk = DiskIndex::open(repo.backend().clone(), repo.counters.clone())?;
    let coverage = disk.coverage();
    let mut indexed = cairn_core::FpSet::default();
    disk.for_each_entry(&mut |e| {
        indexed.insert(e.fp);
    })?;
    for id in repo.log.ids()? {
        if !coverage.covers(id) || only.is_some_and(|o| !o.contains(&id)) {
            continue;
        }
        for d in super::meta_of(&*repo.log, id)?.descriptors {
            if !indexed.contains(&d.fp) {
                crate::canonical::place(replayed, d.fp, id);
            }
        }
    }
    Ok(())
}

/// Containers deleted per request (S3's `DeleteObjects` takes 1,000).
const DELETE_BATCH: usize = 1000;

/// Deletes containers whose live chunks are copied and no longer indexed,
/// with readers locked out, then the pending list that named them.
pub(super) fn delete_retired(
    repo: &Repository,
    proof: &dyn MayDelete,
    ids: &[ContainerId],
    progress: &dyn GcProgress,
) -> Result<()> {
    let _readers_out = repo.lock_out_readers(proof, true)?;
    let present: HashSet<ContainerId> = repo.log.ids()?.into_iter().collect();
    // In batches (one request each on object storage), so progress moves.
    for batch in ids.chunks(DELETE_BATCH) {
        let gone: Vec<ContainerId> = batch
            .iter()
            .copied()
            .filter(|id| present.contains(id))
            .collect();
        repo.log.delete_many(&gone)?;
        progress.advance(batch.len() as u64);
    }
    pending::clear(&**repo.backend())
}

/// What Commit did.
#[derive(Default)]
pub(super) struct Committed {
    pub removed: u64,
    pub moved: u64,
    /// Chunks of snapshots committed during the collection that it would
    /// have forgotten, copied instead (§3.5).
    pub resurrected: u64,
    /// Snapshots committed during the collection.
    pub new_snapshots: usize,
    pub written_bytes: u64,
    pub containers_written: u64,
    /// Condemned containers left for the next collection: the wait for
    /// the backups that may use them outlasted `--max-seconds`.
    pub left: u64,
}

/// What Commit condemned, for [`super::finish::finish`].
pub(super) struct Condemned {
    /// The containers that go.
    pub cleaned: Vec<ContainerId>,
    /// Chunks whose only indexed copy is in them: their entries go at
    /// the end, unless a record written meanwhile reaches them.
    pub doomed: FpMap<ContainerId>,
    /// Entries for chunks leaving the index whose older copy stays in a
    /// container that is kept (`keep_survivors`), put after the removals.
    pub survivors: Vec<IndexEntry>,
    pub moved: u64,
    /// The collection's last commit: its final index change may merge
    /// the index into a new generation (when the writer lock is held
    /// alone); the commit of whole dead containers writes deltas only.
    pub last: bool,
}

/// Commit: the collection's first index change against the index as it is
/// now, under the writer lock (shared with backups): the cleaned
/// containers are condemned (the pending list: backups starting from now
/// on do not deduplicate against them), and the live chunks' entries move
/// to their copies. The entries of the chunks judged dead stay until
/// [`super::finish::finish`] has waited for the writers that may have
/// used them and rescued what their records reach, so every record stays
/// readable meanwhile. `last`: the collection's last commit, which ends
/// its id reservation (the commit of whole dead containers, `dead_first.rs`,
/// comes before copies into the reserved ids and keeps it).
pub(super) fn commit(
    repo: &Repository,
    gc: &GcLock,
    merged: &Merged,
    copied: &Copied,
    chunk_counts: &HashMap<ContainerId, u64>,
    last: bool,
) -> Result<Condemned> {
    let cfg = &repo.config;
    let backend = repo.backend();
    let writer = repo.lock_writer_for_gc(gc, true)?;
    let mut opened = repo.open_index(&writer, &Default::default())?;
    // A delta: the final change (`finish.rs`) decides whether the index is
    // merged, seeing these moves and its removals together.
    opened.kind.prefer_deltas();
    let replayed = canonical_map(&opened.replayed);
    let entries = Entries {
        disk: DiskIndex::open(backend.clone(), repo.counters.clone())?,
        pending: replayed,
    };
    let (update, doomed, named) =
        sweep::index_update(&mut |f| entries.for_each(f), &copied.cleaned, &copied.moved)?;

    // Chunks leaving the index whose older copy stays elsewhere keep an
    // entry naming it (`keep_survivors`); the reserved copies hold only
    // chunks the index names already.
    let cleaned: HashSet<ContainerId> = copied.cleaned.iter().copied().collect();
    let mut staying = Vec::new();
    for id in repo.log.ids()? {
        if cleaned.contains(&id) || merged.reservation.is_some_and(|r| r.contains(id)) {
            continue;
        }
        let chunks = match chunk_counts.get(&id) {
            Some(n) => *n,
            None => super::meta_of(&*repo.log, id)?.descriptors.len() as u64,
        };
        if chunks > named.get(&id).copied().unwrap_or(0) {
            staying.push(id);
        }
    }
    let mut leaving = IndexUpdate::new(Vec::new(), update.removes);
    sweep::keep_survivors(&*repo.log, &mut leaving, &staying)?;

    // The moves first, then the pending list: from the list on the cleaned
    // containers are garbage to every writer that opens the index, and a
    // writer reads the list before it lists the index (`index::open_index`),
    // so one that finds the list also finds the live chunks' copies
    // instead of storing them again. A stop between the two leaves sound
    // copies and no list: the next collection reclaims the originals.
    let mut moves = update.puts;
    let moved = moves.len() as u64;
    moves.extend(puts_of(&entries.pending));
    opened.kind.commit(
        &**backend,
        IndexUpdate::puts(moves),
        repo.log.next_id(),
        cfg.fp_width(),
        cfg.index.page_size as usize,
    )?;
    pending::write(&**backend, &copied.cleaned)?;
    if last {
        reservation::clear(&**backend)?;
    }
    Ok(Condemned {
        cleaned: copied.cleaned.clone(),
        doomed,
        survivors: leaving.puts,
        moved,
        last,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;

    #[test]
    fn the_seed_follows_the_state_and_moves_with_every_reservation() {
        let root = |b: u8| BlobRef {
            root: Fingerprint::from_slice(&[b; 32]),
            level: 0,
            size: 1,
        };
        let roots = vec![("a".to_string(), root(1)), ("b".to_string(), root(2))];
        let seed = state_seed(&roots, ContainerId(7));
        // A dry run and the run after it see the same state.
        assert_eq!(seed, state_seed(&roots.clone(), ContainerId(7)));
        // A run that reserved ids, a new backup, a forgotten snapshot.
        assert_ne!(seed, state_seed(&roots, ContainerId(8)));
        let mut more = roots.clone();
        more.push(("c".to_string(), root(3)));
        assert_ne!(seed, state_seed(&more, ContainerId(7)));
        assert_ne!(seed, state_seed(&roots[..1], ContainerId(7)));
    }
}
