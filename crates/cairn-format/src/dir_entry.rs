//! The entry model of a directory listing ([`DirEntry`], [`EntryKind`],
//! [`BlobRef`]), the flags and limits every listing version shares, and the
//! rules an entry must keep (sorted unique names, sizes that agree). The
//! byte layouts (`dir_columns`, `dir_rows`) and the codec's entry points
//! (`dir`) build on these; re-exported from `crate::dir` for callers.

use cairn_core::{Error, Fingerprint, Result};

pub use crate::extras::{Extent, Extras, HardLink};

pub(crate) const FLAG_TARGET: u8 = 1;
pub(crate) const FLAG_CONTENT: u8 = 2;
pub(crate) const FLAG_INLINE: u8 = 4;
pub(crate) const FLAG_EXTRAS: u8 = 8;
/// Version 3: the content's size differs from the entry's size (a sparse
/// file), so the contents column carries it; otherwise it equals `size`.
pub(crate) const FLAG_CONTENT_SIZE: u8 = 16;
/// Inline listings nest at most this deep inside one listing blob (bounds
/// the decoder's recursion; the backup stores a deeper subtree as a blob).
pub const MAX_INLINE_DEPTH: usize = 32;
pub(crate) const WHAT: &str = "directory listing";

/// What a directory entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
    Fifo = 3,
    CharDevice = 4,
    BlockDevice = 5,
    Socket = 6,
}

impl EntryKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(EntryKind::File),
            1 => Some(EntryKind::Dir),
            2 => Some(EntryKind::Symlink),
            3 => Some(EntryKind::Fifo),
            4 => Some(EntryKind::CharDevice),
            5 => Some(EntryKind::BlockDevice),
            6 => Some(EntryKind::Socket),
            _ => None,
        }
    }

    /// A FIFO, device or socket: no content, no target, no listing.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            EntryKind::Fifo | EntryKind::CharDevice | EntryKind::BlockDevice | EntryKind::Socket
        )
    }

    /// A character or block device (it has a device number).
    pub fn is_device(self) -> bool {
        matches!(self, EntryKind::CharDevice | EntryKind::BlockDevice)
    }

    /// A short lower-case name ("file", "fifo", "char device", ...).
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "directory",
            EntryKind::Symlink => "symlink",
            EntryKind::Fifo => "fifo",
            EntryKind::CharDevice => "char device",
            EntryKind::BlockDevice => "block device",
            EntryKind::Socket => "socket",
        }
    }
}

/// The root of a blob's Merkle tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobRef {
    /// Fingerprint of the root chunk.
    pub root: Fingerprint,
    /// Level of the root: 0 when the blob is a single chunk.
    pub level: u8,
    /// Logical bytes of the blob.
    pub size: u64,
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Name bytes (`OsStr` on Unix): non-empty, no `/` or NUL, not `.` or `..`.
    pub name: Vec<u8>,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch (0 when unknown: version 1
    /// listings, streams).
    pub ctime_ns: i64,
    /// Inode number (0 when unknown).
    pub inode: u64,
    pub size: u64,
    /// The link target; `Some` exactly for symlinks.
    pub target: Option<Vec<u8>>,
    /// File data or subdirectory listing blob; `None` for an empty file (and
    /// always for symlinks and inline directories).
    pub content: Option<BlobRef>,
    /// A directory's entries stored inline in this listing (then `content`
    /// is `None`); `None` for every other entry.
    pub children: Option<Vec<DirEntry>>,
    /// Extended attributes, hard-link group, device number, sparse extents
    /// (flag 8; empty for most entries).
    pub extras: Extras,
}

impl DirEntry {
    /// The size of the stored content: the logical size, or for a sparse
    /// file the bytes of its data extents.
    pub fn data_size(&self) -> u64 {
        self.content.map_or(0, |c| c.size)
    }
}

/// Why a name is not a valid entry name, if it is not.
pub fn name_error(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty name")
    } else if name == b"." || name == b".." {
        Some("name is . or ..")
    } else if name.contains(&b'/') {
        Some("name contains '/'")
    } else if name.contains(&0) {
        Some("name contains NUL")
    } else {
        None
    }
}

/// The rules shared by encoder (InvalidInput) and decoder (Corrupt).
pub(crate) fn entry_error(prev: Option<&[u8]>, e: &DirEntry) -> Option<String> {
    if let Some(why) = name_error(&e.name) {
        return Some(why.to_string());
    }
    if let Some(p) = prev {
        if p >= e.name.as_slice() {
            return Some(if p == e.name.as_slice() {
                "duplicate name".to_string()
            } else {
                "entries not sorted by name".to_string()
            });
        }
    }
    let is_link = e.kind == EntryKind::Symlink;
    if is_link != e.target.is_some() {
        return Some(if is_link {
            "symlink without a target".to_string()
        } else {
            format!("{} entry with a link target", e.kind.name())
        });
    }
    if is_link && e.content.is_some() {
        return Some("symlink with content".to_string());
    }
    if e.children.is_some() && e.kind != EntryKind::Dir {
        return Some(format!("{} entry with an inline listing", e.kind.name()));
    }
    if e.children.is_some() && e.content.is_some() {
        return Some("directory with both a listing blob and an inline listing".to_string());
    }
    if e.kind.is_special() && (e.content.is_some() || e.size != 0) {
        return Some(format!("{} with content", e.kind.name()));
    }
    if e.kind.is_device() != e.extras.rdev.is_some() {
        return Some(if e.kind.is_device() {
            format!("{} without a device number", e.kind.name())
        } else {
            format!("{} with a device number", e.kind.name())
        });
    }
    if e.extras.hard_link.is_some() && e.kind == EntryKind::Dir {
        return Some("directory in a hard-link group".to_string());
    }
    if e.extras.extents.is_some() && e.kind != EntryKind::File {
        return Some(format!("{} with sparse extents", e.kind.name()));
    }
    if let Some(why) = size_error(e) {
        return Some(why);
    }
    e.extras.error(e.size, e.data_size())
}

/// Whether `e`'s sizes are impossible: above the largest file size, or
/// more than its content can hold, or a non-empty file without content.
/// A restore writes exactly the content's bytes, so a size the content
/// does not back would be reported but never written.
fn size_error(e: &DirEntry) -> Option<String> {
    let largest = i64::MAX as u64;
    if e.size > largest {
        return Some(format!("size {} above the largest file size", e.size));
    }
    if let Some(c) = &e.content {
        let max = crate::tree::max_blob_size(c.level, c.root.len());
        if c.size > max {
            return Some(format!(
                "content size {} above what a level {} tree can hold ({max})",
                c.size, c.level
            ));
        }
    }
    if e.kind != EntryKind::File || e.extras.extents.is_some() {
        // A sparse file's content holds its extents (checked with them).
        return None;
    }
    match &e.content {
        None if e.size != 0 => Some(format!("file of {} bytes without content", e.size)),
        Some(c) if c.size != e.size => Some(format!(
            "file of {} bytes with {} bytes of content",
            e.size, c.size
        )),
        _ => None,
    }
}

/// Appends decoded entry `e` after checking every rule against the entry
/// before it; `at` says where it was (for the error).
pub(crate) fn push_decoded(
    entries: &mut Vec<DirEntry>,
    e: DirEntry,
    at: impl FnOnce() -> String,
) -> Result<()> {
    let prev = entries.last().map(|p| p.name.as_slice());
    if let Some(why) = entry_error(prev, &e) {
        return Err(Error::corrupt(
            WHAT,
            format!("{} ({:?}): {why}", at(), show(&e.name)),
        ));
    }
    entries.push(e);
    Ok(())
}

pub(crate) fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}
