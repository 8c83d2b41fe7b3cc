//! The parent snapshot of a backup: files unchanged since it are not read.
//!
//! A file whose size, mtime, ctime and inode all equal its entry in the
//! parent snapshot keeps the parent's content root without being opened
//! (`docs/backup-selection.md`, "Unchanged files"). The change time is what
//! makes this safe: a write that restores size and mtime (`touch -r`) still
//! moves ctime, which only the kernel sets. The shortcut never applies where
//! there is no such evidence: a stream (`--stdin`) has no mtime or inode, so
//! every stream is read in full, and an entry recorded without ctime or inode
//! (version 1 listings, traces) never matches.
//!
//! The parent is, by default, the latest snapshot of the same host with the
//! same source paths; `--parent ID` names one, `--force` disables it.
//!
//! Two more rules keep the shortcut honest:
//!
//! - **Racy entries** (the problem git calls "racily clean"): file times come
//!   from a clock that ticks every few milliseconds, so a write just after the
//!   parent's walk stat'ed a file could leave its ctime unchanged. An entry is
//!   trusted only if its ctime is [`RACY_MARGIN_NS`] older than the parent
//!   backup's start; a later write then necessarily moved it.
//! - **Unchanged directories are not listed**: creating, removing or renaming
//!   an entry moves its directory's mtime and ctime, so a directory whose
//!   inode, mtime and ctime equal its parent entry's (and that is not racy)
//!   has exactly the names of the parent's listing, and those are stat'ed
//!   without opening and reading the directory. This needs the parent's
//!   listings to be complete: a snapshot that excluded or skipped any path
//!   says so (`listings_complete` false in its stats), and then every
//!   directory is read. It also needs a file system whose directory times
//!   are kept that way ([`dir_times_reliable`]: the common local ones).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Result};
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};

use super::events::EntryMeta;
use super::parent_held::ParentHeld;
use crate::catalog;
use crate::read::{CacheOptions, Reader};
use crate::Repository;

/// Which snapshot a backup compares files against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ParentChoice {
    /// Read every file (`--force`; the engine's default).
    #[default]
    None,
    /// The latest snapshot with the same host and source paths.
    Latest,
    /// This snapshot (an id prefix or `latest`).
    Id(String),
}

/// How far after a stat a write may leave the file's times unchanged: file
/// times come from the kernel's coarse clock (one tick, 1 to 10 ms); twice
/// the longest tick.
pub const RACY_MARGIN_NS: i64 = 20_000_000;

/// The parent snapshot's top-level entries, by source name.
pub(crate) struct Parent {
    pub id: String,
    pub tops: HashMap<Vec<u8>, DirEntry>,
    /// The root listing's blob.
    pub root: BlobRef,
    pub trust: Trust,
}

impl Parent {
    /// The parent's root as a directory entry (metadata unknown), for a
    /// backup of `/`, whose entry is the root.
    pub fn root_dir(&self) -> DirEntry {
        let mut e = super::entry(Vec::new(), EntryKind::Dir, &Default::default());
        e.content = Some(self.root);
        e
    }
}

/// What the parent snapshot's entries can be trusted for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Trust {
    /// Entries whose ctime is older than this (ns since the epoch: the
    /// parent backup's start less [`RACY_MARGIN_NS`]) are not racy.
    pub before_ns: i64,
    /// Every directory listing names every entry the directory had.
    pub listings_complete: bool,
}

impl Trust {
    fn of(record: &cairn_format::snapshot::SnapshotRecord) -> Self {
        let start = record
            .time_unix_ns
            .saturating_sub(i64::try_from(record.stats.duration_ns).unwrap_or(i64::MAX));
        Trust {
            before_ns: start.saturating_sub(RACY_MARGIN_NS),
            listings_complete: record.stats.listings_complete,
        }
    }
}

/// Resolves `choice` for a backup of `paths` (the record's source paths) by
/// `host`. A parent that cannot be read is no parent: the backup reads
/// every file and says why in `warnings`.
pub(crate) fn resolve(
    repo: &Repository,
    choice: &ParentChoice,
    host: &str,
    paths: &[String],
    warnings: &mut Vec<String>,
) -> Result<Option<Parent>> {
    let info = match choice {
        ParentChoice::None => return Ok(None),
        ParentChoice::Id(spec) => catalog::resolve(&**repo.backend(), spec)?,
        ParentChoice::Latest => {
            let mut want = paths.to_vec();
            want.sort();
            let (good, _) = repo.snapshots()?;
            let found = good
                .into_iter()
                .filter(|s| {
                    s.record.host == host && {
                        let mut p = s.record.paths.clone();
                        p.sort();
                        p == want
                    }
                })
                .max_by_key(|s| s.record.time_unix_ns);
            match found {
                Some(s) => s,
                None => return Ok(None),
            }
        }
    };
    let read =
        Reader::open(repo, CacheOptions::default()).and_then(|mut r| r.root_entries(&info.record));
    match read {
        Ok(entries) => Ok(Some(Parent {
            root: info.record.root_ref()?,
            trust: Trust::of(&info.record),
            id: info.id,
            tops: entries.into_iter().map(|e| (e.name.clone(), e)).collect(),
        })),
        Err(e) if e.is_corruption() || matches!(e, Error::NotFound(_)) => {
            warnings.push(format!(
                "parent snapshot {}: {e}; reading every file",
                &info.id[..info.id.len().min(8)]
            ));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether a file whose current metadata is `now` may keep the content of
/// its parent entry `before` unread.
pub(crate) fn unchanged(before: &DirEntry, now: &EntryMeta, trust: &Trust) -> bool {
    before.kind == EntryKind::File
        && same_inode_and_times(before, now, trust)
        && before.size == now.size
        && (before.content.is_some() || now.size == 0)
}

/// Whether the file system holding `path` moves a directory's mtime and
/// ctime whenever an entry is created, removed or renamed, as seen by this
/// host: the local file systems listed here do. Network and FUSE file
/// systems may serve cached or coarse times, and overlay file systems
/// report a merged directory's times from one layer, so their directories
/// are always read again.
pub(crate) fn dir_times_reliable(path: &std::path::Path) -> bool {
    use nix::sys::statfs::{
        statfs, BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, F2FS_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC,
    };
    statfs(path).is_ok_and(|s| {
        let t = s.filesystem_type();
        [
            EXT4_SUPER_MAGIC, // also ext2 and ext3
            XFS_SUPER_MAGIC,
            BTRFS_SUPER_MAGIC,
            TMPFS_MAGIC,
            F2FS_SUPER_MAGIC,
        ]
        .contains(&t)
    })
}

/// Whether a directory whose current metadata is `now` has exactly the
/// names of its parent entry `before`'s listing.
pub(crate) fn listing_unchanged(before: &DirEntry, now: &EntryMeta, trust: &Trust) -> bool {
    before.kind == EntryKind::Dir
        && trust.listings_complete
        && same_inode_and_times(before, now, trust)
}

fn same_inode_and_times(before: &DirEntry, now: &EntryMeta, trust: &Trust) -> bool {
    before.inode != 0
        && before.ctime_ns != 0
        && before.inode == now.inode
        && before.ctime_ns == now.ctime_ns
        && before.mtime_ns == now.mtime_ns
        && before.ctime_ns < trust.before_ns
}

/// The parent's tree below one source, read as the walker descends.
pub(crate) struct ParentTree {
    reader: Reader,
    /// Containers present when the backup started.
    present: Arc<HashSet<ContainerId>>,
    /// Where this host found its files' chunks before (`parent_held.rs`).
    held: Arc<ParentHeld>,
    pub trust: Trust,
}

impl ParentTree {
    pub fn new(
        repo: &Repository,
        present: Arc<HashSet<ContainerId>>,
        held: Arc<ParentHeld>,
        trust: Trust,
    ) -> Result<Self> {
        Ok(ParentTree {
            reader: Reader::open(repo, CacheOptions::default())?,
            present,
            held,
            trust,
        })
    }

    /// Whether every recipe node and chunk of `content` is in a container
    /// that is present: content whose container was lost is read and
    /// stored again instead of carried into the new snapshot (its recipe is
    /// read, never its data). Content of several chunks whose containers
    /// this host recorded, all still present, is not looked at again
    /// (`parent_held.rs`).
    pub fn stored(&mut self, content: &cairn_format::dir::BlobRef) -> bool {
        let recorded = content.level > 0;
        if recorded && self.held.holds(&content.root, &self.present) {
            return true;
        }
        let (mut nodes, mut leaves) = (Vec::new(), Vec::new());
        if self
            .reader
            .recipe_fingerprints(content, &mut nodes, &mut leaves)
            .is_err()
        {
            return false;
        }
        let mut containers = Vec::with_capacity(nodes.len() + leaves.len());
        for fp in nodes.iter().chain(&leaves) {
            match self.reader.locate(fp) {
                Ok(c) if self.present.contains(&c) => containers.push(c),
                _ => return false,
            }
        }
        if recorded {
            self.held.record(content.root, containers);
        }
        true
    }

    /// The entries of parent directory `dir`, by name; empty (everything
    /// read in full) if `dir` is not a directory or its listing is damaged.
    pub fn children(&mut self, mut dir: DirEntry) -> HashMap<Vec<u8>, DirEntry> {
        if dir.kind != EntryKind::Dir {
            return HashMap::new();
        }
        self.reader
            .take_children(&mut dir)
            .map(|v| v.into_iter().map(|e| (e.name.clone(), e)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;
    use cairn_format::dir::BlobRef;

    fn file(size: u64) -> DirEntry {
        DirEntry {
            name: b"f".to_vec(),
            kind: EntryKind::File,
            mode: 0o100644,
            uid: 1,
            gid: 1,
            mtime_ns: 10,
            ctime_ns: 20,
            inode: 30,
            size,
            target: None,
            content: Some(BlobRef {
                root: Fingerprint::from_slice(&[1; 32]),
                level: 0,
                size,
            }),
            children: None,
            extras: Default::default(),
        }
    }

    /// Metadata of size, mtime, ctime, inode.
    fn now(size: u64, mtime_ns: i64, ctime_ns: i64, inode: u64) -> EntryMeta {
        EntryMeta {
            size,
            mtime_ns,
            ctime_ns,
            inode,
            ..EntryMeta::default()
        }
    }

    const TRUST: Trust = Trust {
        before_ns: 1_000,
        listings_complete: true,
    };

    #[test]
    fn only_identical_metadata_is_unchanged() {
        let t = &TRUST;
        let e = file(5);
        assert!(unchanged(&e, &now(5, 10, 20, 30), t));
        assert!(!unchanged(&e, &now(6, 10, 20, 30), t));
        assert!(!unchanged(&e, &now(5, 11, 20, 30), t));
        assert!(
            !unchanged(&e, &now(5, 10, 21, 30), t),
            "ctime moved: written since"
        );
        assert!(!unchanged(&e, &now(5, 10, 20, 31), t));
        let mut unknown = file(5);
        unknown.ctime_ns = 0;
        assert!(
            !unchanged(&unknown, &now(5, 10, 0, 30), t),
            "no ctime recorded"
        );
        unknown = file(5);
        unknown.inode = 0;
        assert!(
            !unchanged(&unknown, &now(5, 10, 20, 0), t),
            "no inode recorded"
        );
        let mut dir = file(5);
        dir.kind = EntryKind::Dir;
        assert!(!unchanged(&dir, &now(5, 10, 20, 30), t));
    }

    #[test]
    fn racy_entries_are_not_trusted() {
        let e = file(5);
        let racy = Trust {
            before_ns: 20,
            ..TRUST
        };
        assert!(
            !unchanged(&e, &now(5, 10, 20, 30), &racy),
            "ctime not older than the parent's start less the margin"
        );
        let mut d = file(0);
        d.kind = EntryKind::Dir;
        d.content = None;
        assert!(!listing_unchanged(&d, &now(0, 10, 20, 30), &racy));
    }

    #[test]
    fn a_listing_is_reused_only_from_complete_parents() {
        let mut d = file(0);
        d.kind = EntryKind::Dir;
        d.content = None;
        assert!(listing_unchanged(&d, &now(0, 10, 20, 30), &TRUST));
        assert!(
            !listing_unchanged(&d, &now(0, 11, 20, 30), &TRUST),
            "mtime moved"
        );
        assert!(
            !listing_unchanged(&d, &now(0, 10, 21, 30), &TRUST),
            "ctime moved"
        );
        assert!(
            !listing_unchanged(&d, &now(0, 10, 20, 31), &TRUST),
            "another inode"
        );
        let incomplete = Trust {
            listings_complete: false,
            ..TRUST
        };
        assert!(!listing_unchanged(&d, &now(0, 10, 20, 30), &incomplete));
        assert!(
            !listing_unchanged(&file(5), &now(5, 10, 20, 30), &TRUST),
            "a file"
        );
    }
}
