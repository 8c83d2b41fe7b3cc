//! Directory listings: one directory's entries, sorted by name.
//!
//! A listing is a blob like file content: the engine chunks it into
//! [`ChunkKind::Meta`](cairn_core::ChunkKind) chunks and builds the same
//! Merkle tree over them (`003_ea5fccc485a97c5d.txt` §2), so a snapshot is one
//! tree whose leaves are file data and whose inner structure is recipes and
//! listings. Each entry points at its content with a [`BlobRef`]: the root
//! chunk of the content's tree, that root's level, and the logical size.
//!
//! ```text
//! listing := version u8 (= 1) | entry count varint | entry*
//! entry   := name_len varint | name | kind u8 | flags u8
//!            | mode u32 | uid u32 | gid u32 | mtime_ns i64 | size u64
//!            | [target_len varint | target]          if flags & 1
//!            | [root fp [w] | level u8 | size u64]    if flags & 2
//! ```
//!
//! Varints are canonical unsigned LEB128. Entries are strictly sorted by name
//! bytes, so one directory has exactly one encoding (listings are
//! content-addressed and deduplicate across snapshots).

use cairn_core::{Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, put_u32, put_u64, put_varint, Reader};

/// The listing format version this build writes and the newest it reads.
pub const DIR_VERSION: u8 = 1;
const FLAG_TARGET: u8 = 1;
const FLAG_CONTENT: u8 = 2;
/// Fixed bytes of an entry besides name, target and content: a lower bound
/// used to cap the entry count by the bytes present.
const ENTRY_MIN_LEN: usize = 1 + 1 + 1 + 1 + 4 + 4 + 4 + 8 + 8;

/// What a directory entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
}

impl EntryKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(EntryKind::File),
            1 => Some(EntryKind::Dir),
            2 => Some(EntryKind::Symlink),
            _ => None,
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
    pub size: u64,
    /// The link target; `Some` exactly for symlinks.
    pub target: Option<Vec<u8>>,
    /// File data or subdirectory listing; `None` for an empty file (and
    /// always for symlinks).
    pub content: Option<BlobRef>,
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
fn entry_error(prev: Option<&[u8]>, e: &DirEntry) -> Option<String> {
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
            format!("{:?} entry with a link target", e.kind)
        });
    }
    if is_link && e.content.is_some() {
        return Some("symlink with content".to_string());
    }
    None
}

fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Appends the listing of `entries` to `out`. Entries must be sorted by name,
/// unique and valid ([`Error::InvalidInput`] otherwise; `out` is then left
/// as it was).
pub fn encode_dir(entries: &[DirEntry], out: &mut Vec<u8>) -> Result<()> {
    let mut width = None;
    for (i, e) in entries.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| entries[p].name.as_slice());
        if let Some(why) = entry_error(prev, e) {
            return Err(Error::invalid(format!(
                "directory entry {i} ({:?}): {why}",
                show(&e.name)
            )));
        }
        if let Some(c) = &e.content {
            if *width.get_or_insert(c.root.len()) != c.root.len() {
                return Err(Error::invalid(format!(
                    "directory entry {i} ({:?}): fingerprint width {} differs from {}",
                    show(&e.name),
                    c.root.len(),
                    width.unwrap_or(0)
                )));
            }
        }
    }
    out.push(DIR_VERSION);
    put_varint(out, entries.len() as u64);
    for e in entries {
        put_varint(out, e.name.len() as u64);
        out.extend_from_slice(&e.name);
        out.push(e.kind as u8);
        let flags = if e.target.is_some() { FLAG_TARGET } else { 0 }
            | if e.content.is_some() { FLAG_CONTENT } else { 0 };
        out.push(flags);
        put_u32(out, e.mode);
        put_u32(out, e.uid);
        put_u32(out, e.gid);
        put_u64(out, e.mtime_ns as u64);
        put_u64(out, e.size);
        if let Some(t) = &e.target {
            put_varint(out, t.len() as u64);
            out.extend_from_slice(t);
        }
        if let Some(c) = &e.content {
            out.extend_from_slice(c.root.as_bytes());
            out.push(c.level);
            put_u64(out, c.size);
        }
    }
    Ok(())
}

/// Decodes a listing whose fingerprints are `fp_width` bytes wide, checking
/// every rule [`encode_dir`] enforces.
pub fn decode_dir(bytes: &[u8], fp_width: usize) -> Result<Vec<DirEntry>> {
    const WHAT: &str = "directory listing";
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
    let count = r.varint("entry count")?;
    let max = (r.remaining() / ENTRY_MIN_LEN) as u64;
    if count > max {
        return Err(r.corrupt(format!(
            "truncated: {count} entries cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let mut entries: Vec<DirEntry> = Vec::with_capacity(count as usize);
    for i in 0..count {
        let start = r.pos();
        let name_len = r.len_prefix("name length")?;
        let name = r.take(name_len, "name")?.to_vec();
        let kind_byte = r.u8("kind")?;
        let kind = EntryKind::from_u8(kind_byte)
            .ok_or_else(|| r.corrupt(format!("entry {i}: unknown kind {kind_byte}")))?;
        let flags = r.u8("flags")?;
        if flags & !(FLAG_TARGET | FLAG_CONTENT) != 0 {
            return Err(r.corrupt(format!("entry {i}: unknown flags {flags:#04x}")));
        }
        let mode = r.u32("mode")?;
        let uid = r.u32("uid")?;
        let gid = r.u32("gid")?;
        let mtime_ns = r.i64("mtime")?;
        let size = r.u64("size")?;
        let target = if flags & FLAG_TARGET != 0 {
            let n = r.len_prefix("target length")?;
            Some(r.take(n, "target")?.to_vec())
        } else {
            None
        };
        let content = if flags & FLAG_CONTENT != 0 {
            Some(BlobRef {
                root: r.fp(fp_width, "content root")?,
                level: r.u8("content level")?,
                size: r.u64("content size")?,
            })
        } else {
            None
        };
        let e = DirEntry {
            name,
            kind,
            mode,
            uid,
            gid,
            mtime_ns,
            size,
            target,
            content,
        };
        let prev = entries.last().map(|p| p.name.as_slice());
        if let Some(why) = entry_error(prev, &e) {
            return Err(Error::corrupt(
                WHAT,
                format!("entry {i} ({:?}) at offset {start}: {why}", show(&e.name)),
            ));
        }
        entries.push(e);
    }
    r.finish()?;
    Ok(entries)
}

#[cfg(test)]
#[path = "dir_tests.rs"]
mod tests;
