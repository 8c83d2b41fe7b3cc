//! `diff`: what changed between two snapshots, found by walking both trees
//! side by side and descending only where they differ.
//!
//! A snapshot is a Merkle tree (`003_ea5fccc485a97c5d.txt` §2): every
//! directory listing and every file's content is named by the root
//! fingerprint of its own tree, and a listing holds its children's roots.
//! Two equal roots therefore name identical content, all the way down.
//! The walk uses that in two places:
//!
//! - a directory present in both snapshots with the same listing root is an
//!   identical subtree: it is skipped without reading its listing;
//! - a file with the same content root (and size) has identical bytes: only
//!   its metadata is compared, its recipe is never read.
//!
//! So the listings read are those of the directories on the paths from the
//! root to the changes (two per level, one per side), plus the listings of
//! subtrees that were added or removed whole (their entries are reported one
//! by one). Two snapshots that differ in one file read `2 × (depth + 1)`
//! listings however large the tree is.
//!
//! ```text
//! diff(old dir, new dir, path):            // caller: the two listings differ
//!     merge the two listings by name (both are sorted by name bytes)
//!     only old -> removed (and everything under it)
//!     only new -> added (and everything under it)
//!     both, kinds differ -> removed old, added new
//!     both dirs  -> metadata change if mode/owner/mtime differ;
//!                   same listing root: skip, else diff(old, new, path/name)
//!     both files -> content root differs: modified; else metadata change
//!     both links -> target differs: modified; else metadata change
//! ```

use std::cmp::Ordering;

use cairn_core::{Error, Result};
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use crate::read::{join, Reader};

/// What happened to one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Only in the new snapshot.
    Added,
    /// Only in the old snapshot.
    Removed,
    /// Content differs (file bytes or symlink target).
    Modified,
    /// Same content, different mode, owner, group or mtime (reported only
    /// with [`DiffOptions::metadata`]).
    Metadata,
}

/// One changed path. `old` is set unless `Added`, `new` unless `Removed`.
#[derive(Clone, Debug)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
    pub old: Option<DirEntry>,
    pub new: Option<DirEntry>,
    /// For `Metadata` (and `Modified` with metadata reporting on): which of
    /// `mode`, `uid`, `gid`, `mtime` differ.
    pub fields: Vec<&'static str>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct DiffOptions {
    /// Report metadata-only changes too.
    pub metadata: bool,
}

/// Counts of a diff. Bytes are logical file sizes: `bytes_added` sums the
/// new side of added and modified files, `bytes_removed` the old side of
/// removed and modified files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DiffSummary {
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    /// Metadata-only changes (0 unless requested).
    pub metadata: u64,
    pub bytes_added: u64,
    pub bytes_removed: u64,
    /// Directory listings read (both sides).
    pub listings_read: u64,
    /// Directories present in both snapshots with the same listing root,
    /// skipped unread.
    pub subtrees_skipped: u64,
}

/// Which metadata fields of two entries differ.
pub fn metadata_fields(a: &DirEntry, b: &DirEntry) -> Vec<&'static str> {
    let mut f = Vec::new();
    if a.mode != b.mode {
        f.push("mode");
    }
    if a.uid != b.uid {
        f.push("uid");
    }
    if a.gid != b.gid {
        f.push("gid");
    }
    if a.mtime_ns != b.mtime_ns {
        f.push("mtime");
    }
    if a.extras.xattrs != b.extras.xattrs {
        f.push("xattrs");
    }
    f
}

struct Differ<'r, 'v> {
    reader: &'r mut Reader,
    opts: DiffOptions,
    visit: &'v mut dyn FnMut(Change) -> Result<()>,
    sum: DiffSummary,
}

/// Compares snapshot `old` with `new`, calling `visit` for each change in
/// depth-first name order (a directory before its contents).
pub fn diff(
    reader: &mut Reader,
    old: &SnapshotRecord,
    new: &SnapshotRecord,
    opts: DiffOptions,
    visit: &mut dyn FnMut(Change) -> Result<()>,
) -> Result<DiffSummary> {
    let (a, b) = (old.root_ref()?, new.root_ref()?);
    let mut d = Differ {
        reader,
        opts,
        visit,
        sum: DiffSummary::default(),
    };
    if a == b {
        // Same root listing: the snapshots hold the same tree.
        d.sum.subtrees_skipped += 1;
    } else {
        let old = d.read_blob(&a)?;
        let new = d.read_blob(&b)?;
        d.dirs(old, new, "")?;
    }
    Ok(d.sum)
}

/// [`diff`] limited to the entry at `path` (components separated by `/`,
/// relative to the snapshot root; empty: the whole snapshots). The entry
/// may be missing on one side (then it was added or removed whole), but not
/// on both. Change paths stay relative to the snapshot root.
pub fn diff_at(
    reader: &mut Reader,
    old: &SnapshotRecord,
    new: &SnapshotRecord,
    path: &str,
    opts: DiffOptions,
    visit: &mut dyn FnMut(Change) -> Result<()>,
) -> Result<DiffSummary> {
    // The path as typed: a snapshot path or a backed-up one, looked up in
    // the new snapshot first (crate::snapshot_paths).
    let typed = path;
    let Some(path) = crate::snapshot_paths::resolve_in_any(reader, &[new, old], typed)? else {
        return Err(Error::NotFound(format!(
            "{} in either snapshot",
            typed.trim_matches('/')
        )));
    };
    let path = path.as_str();
    if path.is_empty() {
        return diff(reader, old, new, opts, visit);
    }
    let mut lookup = |snap: &SnapshotRecord| match reader.find(snap, path) {
        Ok(e) => Ok(e),
        Err(Error::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    };
    let (a, b) = (lookup(old)?, lookup(new)?);
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    let mut d = Differ {
        reader,
        opts,
        visit,
        sum: DiffSummary::default(),
    };
    match (a, b) {
        (None, None) => {
            return Err(Error::NotFound(format!("{path} in either snapshot")));
        }
        (Some(x), None) => d.whole(ChangeKind::Removed, parent, x)?,
        (None, Some(y)) => d.whole(ChangeKind::Added, parent, y)?,
        (Some(x), Some(y)) => d.pair(parent, x, y)?,
    }
    Ok(d.sum)
}

impl Differ<'_, '_> {
    fn read_blob(&mut self, listing: &BlobRef) -> Result<Vec<DirEntry>> {
        self.sum.listings_read += 1;
        self.reader.read_listing(listing)
    }

    /// A directory's entries (moved out of an inline listing, or read).
    fn read(&mut self, dir: &mut DirEntry) -> Result<Vec<DirEntry>> {
        self.read_parts(dir.children.take(), dir.content)
    }

    fn read_parts(
        &mut self,
        inline: Option<Vec<DirEntry>>,
        blob: Option<BlobRef>,
    ) -> Result<Vec<DirEntry>> {
        match (inline, blob) {
            (Some(inline), _) => Ok(inline),
            (None, Some(blob)) => self.read_blob(&blob),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// Two listings known to differ: merge them by name.
    fn dirs(&mut self, a: Vec<DirEntry>, b: Vec<DirEntry>, prefix: &str) -> Result<()> {
        let (mut ai, mut bi) = (a.into_iter().peekable(), b.into_iter().peekable());
        loop {
            let order = match (ai.peek(), bi.peek()) {
                (None, None) => return Ok(()),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(x), Some(y)) => x.name.cmp(&y.name),
            };
            match order {
                Ordering::Less => {
                    let x = ai.next().expect("peeked");
                    self.whole(ChangeKind::Removed, prefix, x)?;
                }
                Ordering::Greater => {
                    let y = bi.next().expect("peeked");
                    self.whole(ChangeKind::Added, prefix, y)?;
                }
                Ordering::Equal => {
                    let (x, y) = (ai.next().expect("peeked"), bi.next().expect("peeked"));
                    self.pair(prefix, x, y)?;
                }
            }
        }
    }

    /// An entry present on one side only, and everything under it.
    fn whole(&mut self, kind: ChangeKind, prefix: &str, mut e: DirEntry) -> Result<()> {
        let path = join(prefix, &e.name);
        let children = if e.kind == EntryKind::Dir {
            self.read(&mut e)?
        } else {
            Vec::new()
        };
        if e.kind == EntryKind::File {
            match kind {
                ChangeKind::Added => self.sum.bytes_added += e.size,
                _ => self.sum.bytes_removed += e.size,
            }
        }
        let (old, new) = match kind {
            ChangeKind::Added => {
                self.sum.added += 1;
                (None, Some(e))
            }
            _ => {
                self.sum.removed += 1;
                (Some(e), None)
            }
        };
        (self.visit)(Change {
            path: path.clone(),
            kind,
            old,
            new,
            fields: Vec::new(),
        })?;
        for c in children {
            self.whole(kind, &path, c)?;
        }
        Ok(())
    }

    /// The same name on both sides.
    fn pair(&mut self, prefix: &str, mut x: DirEntry, mut y: DirEntry) -> Result<()> {
        if x.kind != y.kind {
            self.whole(ChangeKind::Removed, prefix, x)?;
            return self.whole(ChangeKind::Added, prefix, y);
        }
        let path = join(prefix, &x.name);
        let fields = metadata_fields(&x, &y);
        let same_content = match x.kind {
            // Equal content roots name equal bytes (the Merkle property).
            EntryKind::File => {
                x.content == y.content && x.size == y.size && x.extras.extents == y.extras.extents
            }
            EntryKind::CharDevice | EntryKind::BlockDevice => x.extras.rdev == y.extras.rdev,
            EntryKind::Fifo | EntryKind::Socket => true,
            EntryKind::Symlink => x.target == y.target,
            EntryKind::Dir => true,
        };
        if !same_content {
            self.sum.modified += 1;
            if x.kind == EntryKind::File {
                self.sum.bytes_added += y.size;
                self.sum.bytes_removed += x.size;
            }
            let fields = if self.opts.metadata {
                fields
            } else {
                Vec::new()
            };
            return (self.visit)(Change {
                path,
                kind: ChangeKind::Modified,
                old: Some(x),
                new: Some(y),
                fields,
            });
        }
        let is_dir = x.kind == EntryKind::Dir;
        let listings = (x.content, y.content);
        let inline = (x.children.take(), y.children.take());
        if self.opts.metadata && !fields.is_empty() {
            self.sum.metadata += 1;
            (self.visit)(Change {
                path: path.clone(),
                kind: ChangeKind::Metadata,
                old: Some(x),
                new: Some(y),
                fields,
            })?;
        }
        if !is_dir {
            // A file with the same content root, or a link with the same
            // target: nothing more to compare, the recipe is not read.
            return Ok(());
        }
        if inline.0.is_none() && inline.1.is_none() && listings.0 == listings.1 {
            // The same listing root: an identical subtree, skipped unread.
            self.sum.subtrees_skipped += 1;
            return Ok(());
        }
        if inline.0.is_some() && inline.0 == inline.1 {
            // Equal inline listings (already read with their parent).
            self.sum.subtrees_skipped += 1;
            return Ok(());
        }
        let a = self.read_parts(inline.0, listings.0)?;
        let b = self.read_parts(inline.1, listings.1)?;
        self.dirs(a, b, &path)
    }
}
