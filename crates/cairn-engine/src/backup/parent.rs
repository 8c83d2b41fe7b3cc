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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Result};
use cairn_format::dir::{DirEntry, EntryKind};

use super::walker::EntryMeta;
use crate::catalog;
use crate::restore::{CacheOptions, Reader};
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

/// The parent snapshot's top-level entries, by source name.
pub(crate) struct Parent {
    pub id: String,
    pub tops: HashMap<Vec<u8>, DirEntry>,
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
            let (good, _) = catalog::list(&**repo.backend())?;
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
pub(crate) fn unchanged(before: &DirEntry, now: &EntryMeta) -> bool {
    before.kind == EntryKind::File
        && before.inode != 0
        && before.ctime_ns != 0
        && before.inode == now.inode
        && before.ctime_ns == now.ctime_ns
        && before.mtime_ns == now.mtime_ns
        && before.size == now.size
        && (before.content.is_some() || now.size == 0)
}

/// The parent's tree below one source, read as the walker descends.
pub(crate) struct ParentTree {
    reader: Reader,
    /// Containers present when the backup started.
    present: Arc<HashSet<ContainerId>>,
}

impl ParentTree {
    pub fn new(repo: &Repository, present: Arc<HashSet<ContainerId>>) -> Result<Self> {
        Ok(ParentTree {
            reader: Reader::open(repo, CacheOptions::default())?,
            present,
        })
    }

    /// Whether every chunk of `content` is in a container that is present:
    /// content whose container was lost is read and stored again instead of
    /// carried into the new snapshot (its recipe is read, never its data).
    pub fn stored(&mut self, content: &cairn_format::dir::BlobRef) -> bool {
        let mut leaves = Vec::new();
        let listed = self.reader.for_each_leaf(content, &mut |fp| {
            leaves.push(*fp);
            Ok(())
        });
        listed.is_ok()
            && leaves.iter().all(|fp| {
                self.reader
                    .locate(fp)
                    .is_ok_and(|c| self.present.contains(&c))
            })
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

    #[test]
    fn only_identical_metadata_is_unchanged() {
        let e = file(5);
        assert!(unchanged(&e, &now(5, 10, 20, 30)));
        assert!(!unchanged(&e, &now(6, 10, 20, 30)));
        assert!(!unchanged(&e, &now(5, 11, 20, 30)));
        assert!(
            !unchanged(&e, &now(5, 10, 21, 30)),
            "ctime moved: written since"
        );
        assert!(!unchanged(&e, &now(5, 10, 20, 31)));
        let mut unknown = file(5);
        unknown.ctime_ns = 0;
        assert!(
            !unchanged(&unknown, &now(5, 10, 0, 30)),
            "no ctime recorded"
        );
        unknown = file(5);
        unknown.inode = 0;
        assert!(
            !unchanged(&unknown, &now(5, 10, 20, 0)),
            "no inode recorded"
        );
        let mut dir = file(5);
        dir.kind = EntryKind::Dir;
        assert!(!unchanged(&dir, &now(5, 10, 20, 30)));
    }
}
