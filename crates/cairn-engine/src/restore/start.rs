//! Where a restore (and `restore --verify`) starts in the snapshot: its
//! root, or the subtree a selection is re-rooted at (restic's
//! `restore ID:sub`, [`RestoreSelection::within`](super::RestoreSelection::within)).
//!
//! A restore walks one listing into the target. Re-rooting only changes
//! which listing that is, so the walk, the selection, `--delete` and
//! `--verify` need no second path:
//!
//! - the root: the snapshot's root listing; the target gets no metadata
//!   (the root has no entry of its own);
//! - a directory `sub`: its listing (inline in its parent or a tree object
//!   of its own: [`Reader::take_children`]), whose entries land in the target
//!   directly (`T/file`, not `T/sub/file`); the target stands for `sub` and
//!   gets its metadata as any restored directory gets its own;
//! - a file, symlink or special `sub`: a listing of that one entry, placed
//!   as `T/<name>`; nothing else in the target is the restore's business
//!   (no `--delete` of its neighbours, no metadata on the target).
//!
//! Pattern paths are relative to the start (`sub`, or for a single entry
//! its parent): the walk names entries from there, and [`Start::base`]
//! gives the snapshot path in front of them (for matching backed-up paths).

use cairn_core::{Error, Result};
use cairn_format::dir::{DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;

use crate::read::Reader;

/// The listing a restore walks and what stands at the target.
pub(crate) struct Start {
    /// The snapshot path of the directory the listing belongs to (`""` for
    /// the root); entry paths in the walk are relative to it.
    pub base: String,
    /// The entries restored directly into the target.
    pub entries: Vec<DirEntry>,
    /// The directory the target stands for (the subfolder), its listing
    /// taken out; its metadata goes on the target. `None` at the root and
    /// for a single-entry start.
    pub dir: Option<DirEntry>,
    /// Whether `entries` is a directory's whole listing, so `--delete` may
    /// remove from the target what it lacks (not for a single entry).
    pub whole_listing: bool,
}

impl Start {
    /// Reads the start at snapshot path `path` (a selection's
    /// [`root_path`](super::RestoreSelection::root_path); `""` is the root)
    /// in `snap`. A subfolder that is not in the snapshot is
    /// [`Error::NotFound`], before anything is written.
    pub(crate) fn read(reader: &mut Reader, snap: &SnapshotRecord, path: &str) -> Result<Start> {
        let found = if path.is_empty() {
            None
        } else {
            match reader.find(snap, path) {
                Err(Error::NotFound(_)) => {
                    return Err(Error::NotFound(format!("{path} is not in the snapshot")))
                }
                found => found?,
            }
        };
        let Some(mut e) = found else {
            return Ok(Start {
                base: String::new(),
                entries: reader.root_entries(snap)?,
                dir: None,
                whole_listing: true,
            });
        };
        if e.kind == EntryKind::Dir {
            let entries = reader.take_children(&mut e)?;
            return Ok(Start {
                base: path.to_string(),
                entries,
                dir: Some(e),
                whole_listing: true,
            });
        }
        let base = path.rsplit_once('/').map_or("", |(parent, _)| parent);
        Ok(Start {
            base: base.to_string(),
            entries: vec![e],
            dir: None,
            whole_listing: false,
        })
    }
}
