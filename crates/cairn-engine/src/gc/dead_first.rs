//! Whole dead containers go first, before any copy (issue 30): deleting a
//! container none of whose chunks is live needs no copy, only a small index
//! change, so a collection on a full disk frees that space before it asks
//! the disk for more; and when copying forward then runs out of space, the
//! error says how much it needs, with what was freed already kept.
//!
//! Crash safety is the ordinary commit's (`commit.rs`), run once for these
//! containers alone: pending list, index change, readers locked out,
//! deletes, pending list removed. The id reservation stays for the copies
//! that follow (the second, ordinary commit clears it). The index change
//! forgets only chunks no live root reaches (a container is whole dead when
//! every chunk was judged and none is live: Bloom filters err only towards
//! live, the perfect hash is exact), and chunks a backup reached meanwhile
//! are resurrected by that commit as by any other (§3.5).

use std::collections::{HashMap, HashSet};

use cairn_core::{ContainerId, Error, Result};

use super::commit::{self, Committed, Merged};
use super::sweep::{Copied, Tally};
use super::GcProgress;
use crate::repo::{GcLock, Repository};

/// What the first step freed.
#[derive(Default)]
pub(super) struct Freed {
    /// Whole dead containers deleted, ascending.
    pub ids: Vec<ContainerId>,
    /// Their bytes on disk.
    pub bytes: u64,
    pub committed: Committed,
}

impl Freed {
    /// What is done for good, for an interruption or a failure after it.
    pub fn summary(&self) -> String {
        if self.ids.is_empty() {
            "nothing was deleted".into()
        } else {
            format!(
                "{} whole dead container(s) ({} bytes) were deleted first and that space is \
                 freed; nothing else was deleted",
                self.ids.len(),
                self.bytes
            )
        }
    }
}

impl Freed {
    /// What an interruption (`crate::interrupt`) left; `copying`: it came
    /// during Copy, whose containers written so far are then orphans.
    pub fn interrupted(&self, copying: bool) -> String {
        format!(
            "{}: {}{}",
            super::stop::STOPPED,
            self.summary(),
            if copying {
                " (copies already written are reclaimed by the next collection)"
            } else {
                ""
            }
        )
    }
}

/// The selected containers in which no chunk is live.
pub(super) fn whole_dead(tallies: &[Tally], chosen: &HashSet<ContainerId>) -> Vec<ContainerId> {
    let mut ids: Vec<ContainerId> = tallies
        .iter()
        .filter(|t| t.all_dead && chosen.contains(&t.id))
        .map(|t| t.id)
        .collect();
    ids.sort();
    ids
}

/// Commits the removal of `ids` (whole dead) and deletes them.
pub(super) fn delete(
    repo: &Repository,
    gc: &GcLock,
    merged: &Merged,
    ids: Vec<ContainerId>,
    tallies: &[Tally],
    progress: &dyn GcProgress,
    deadline: Option<std::time::Instant>,
) -> Result<Freed> {
    if ids.is_empty() {
        return Ok(Freed::default());
    }
    let chunk_counts: HashMap<ContainerId, u64> =
        tallies.iter().map(|t| (t.id, t.chunks)).collect();
    let none_copied = Copied {
        cleaned: ids.clone(),
        ..Default::default()
    };
    let condemned =
        commit::commit(repo, gc, merged, &none_copied, &chunk_counts, false).map_err(|e| {
            no_room(
                e,
                "the pending list and index delta that deleting whole dead \
             containers needs (a few KiB, plus tens of bytes per chunk removed)",
            )
        })?;
    let committed = super::finish::finish(repo, gc, merged, condemned, progress, deadline)?;
    if committed.left > 0 {
        return Ok(Freed {
            committed,
            ..Default::default()
        });
    }
    let bytes = super::sweep::file_bytes_of(tallies, &ids);
    Ok(Freed {
        ids,
        bytes,
        committed,
    })
}

/// `e`, when the disk is full, as one line saying what the collection had
/// no room for (`what`) and that nothing was deleted.
pub(super) fn no_room(e: Error, what: &str) -> Error {
    match e {
        Error::Io { source, .. } if is_out_of_space_io(&source) => Error::io(
            format!(
                "garbage collection has no room for {what}; nothing was deleted. Free some \
                 space and run it again"
            ),
            source,
        ),
        e => e,
    }
}

/// Whether `e` is the disk (or quota) running out of space.
pub(super) fn is_out_of_space(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if is_out_of_space_io(source))
}

fn is_out_of_space_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// The copy ran out of space: one line with the space it needs (the live
/// bytes still to copy, estimated by Select, and one container of slack),
/// what was freed and kept, and what to do.
pub(super) fn out_of_space(e: Error, needed: u64, freed: &Freed) -> Error {
    let Error::Io { source, .. } = e else {
        return e;
    };
    Error::io(
        format!(
            "garbage collection ran out of space copying live chunks forward: it needs about \
             {} MiB ({needed} bytes) free for its copies; {} (copies already written are \
             reclaimed by the next collection). Free that much space, or clean fewer \
             containers with `cairn gc --reclaim PERCENT`, and run it again",
            needed.div_ceil(1 << 20),
            freed.summary()
        ),
        source,
    )
}
