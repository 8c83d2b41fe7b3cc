//! Directory listings: one directory's entries, sorted by name.
//!
//! A listing is a blob like file content: the engine chunks it into
//! [`ChunkKind::Meta`](cairn_core::ChunkKind) chunks and builds the same
//! Merkle tree over them (`003_ea5fccc485a97c5d.txt` §2), so a snapshot is one
//! tree whose leaves are file data and whose inner structure is recipes and
//! listings. Each entry points at its content with a [`BlobRef`]: the root
//! chunk of the content's tree, that root's level, and the logical size.
//!
//! This module holds the codec's entry points; the entry model and the
//! rules every version shares are `dir_entry`, the byte layouts
//! `dir_columns` (version 3, written) and `dir_rows` (versions 1 and 2,
//! still read).
//!
//! Version 2 (issue 12) added the change time and inode number (a file
//! whose size, mtime, ctime and inode match its entry in the parent
//! snapshot is not read again), varint fields, special files and extras
//! ([`crate::extras`]: extended attributes, hard-link groups, device
//! numbers, sparse extents), and inline listings: a directory may carry its
//! listing inside its parent's (flag 4) instead of as a blob of its own, so
//! a tree of many small directories is a few content-defined chunks of one
//! listing, not one chunk (with descriptor and index entry) per directory.
//!
//! Version 3 stores the same entries by column: all names, then all modes,
//! ..., then all content fingerprints, then all times. Within one column the
//! bytes of successive backups of a tree line up, so the content-defined
//! meta chunks of the names and fingerprint columns deduplicate across
//! versions even when every entry's ctime and inode changed (a fresh copy of
//! a release), and like fields compress together.
//!
//! Varints are canonical unsigned LEB128. Entries are strictly sorted by name
//! bytes, so one directory has exactly one encoding (listings are
//! content-addressed and deduplicate across snapshots).

use cairn_core::{Error, Result};

use crate::bytes::{check_fp_width, Reader};
use crate::dir_entry::{entry_error, show, WHAT};
pub use crate::dir_entry::{
    name_error, BlobRef, DirEntry, EntryKind, Extent, Extras, HardLink, MAX_INLINE_DEPTH,
};

/// The listing format version this build writes and the newest it reads.
pub const DIR_VERSION: u8 = 3;
/// Appends the listing of `entries` to `out`. Entries must be sorted by name,
/// unique and valid, inline listings included ([`Error::InvalidInput`]
/// otherwise; `out` is then left as it was).
pub fn encode_dir(entries: &[DirEntry], out: &mut Vec<u8>) -> Result<()> {
    let mut width = None;
    check_entries(entries, &mut width, 0, "")?;
    out.push(DIR_VERSION);
    crate::dir_columns::put_listing(entries, out);
    Ok(())
}

fn check_entries(
    entries: &[DirEntry],
    width: &mut Option<usize>,
    depth: usize,
    at: &str,
) -> Result<()> {
    if depth > MAX_INLINE_DEPTH {
        return Err(Error::invalid(format!(
            "inline listings nested deeper than {MAX_INLINE_DEPTH} at {at:?}"
        )));
    }
    for (i, e) in entries.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| entries[p].name.as_slice());
        let path = format!("{at}{}", show(&e.name));
        if let Some(why) = entry_error(prev, e) {
            return Err(Error::invalid(format!(
                "directory entry {i} ({path:?}): {why}"
            )));
        }
        if let Some(c) = &e.content {
            if *width.get_or_insert(c.root.len()) != c.root.len() {
                return Err(Error::invalid(format!(
                    "directory entry {i} ({path:?}): fingerprint width {} differs from {}",
                    c.root.len(),
                    width.unwrap_or(0)
                )));
            }
        }
        if let Some(children) = &e.children {
            check_entries(children, width, depth + 1, &format!("{path}/"))?;
        }
    }
    Ok(())
}

/// Decodes a listing (version 1, 2 or 3) whose fingerprints are `fp_width`
/// bytes wide, checking every rule [`encode_dir`] enforces.
pub fn decode_dir(bytes: &[u8], fp_width: usize) -> Result<Vec<DirEntry>> {
    check_fp_width(WHAT, fp_width)?;
    let mut r = Reader::new(WHAT, bytes);
    let version = r.u8("version")?;
    if version > DIR_VERSION {
        return Err(Error::UnsupportedVersion {
            what: WHAT.into(),
            found: version.into(),
            supported: DIR_VERSION.into(),
        });
    }
    if version == 0 {
        return Err(Error::corrupt(WHAT, "version 0 is not a valid version"));
    }
    let entries = match version {
        3 => crate::dir_columns::get_listing(&mut r, fp_width)?,
        _ => crate::dir_rows::get_entries(&mut r, version, fp_width, 0)?,
    };
    r.finish()?;
    Ok(entries)
}

#[cfg(test)]
#[path = "dir_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "dir_size_tests.rs"]
mod size_tests;
