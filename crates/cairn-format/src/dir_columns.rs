//! Directory listing version 3: the entries of a listing blob, inline
//! listings included, stored column by column (FORMAT.md "Directory
//! listing").
//!
//! ```text
//! listing := version u8 (= 3) | column * 11, each: byte length varint | bytes
//! ```
//!
//! Entries are visited in pre-order: a directory's inline entries come right
//! after the directory itself. Every column holds one item per visited entry
//! that has the field, in that order:
//!
//! | # | column | per entry |
//! |---|---|---|
//! | 0 | shape | entry count varint per list (before its first entry), then kind u8, flags u8 |
//! | 1 | names | length varint, name bytes |
//! | 2 | attrs | mode, uid, gid varints |
//! | 3 | sizes | size varint |
//! | 4 | targets | (symlinks) length varint, target bytes |
//! | 5 | extras | (flag 8) the extras field (`crate::extras`) |
//! | 6 | contents | (flag 2) root level u8, then (flag 16) content size varint |
//! | 7 | fingerprints | (flag 2) root fingerprint [w] |
//! | 8 | mtimes | mtime_ns i64 |
//! | 9 | ctimes | ctime_ns − previous entry's, zigzag varint (wrapping) |
//! | 10 | inodes | inode − previous entry's, zigzag varint (wrapping) |
//!
//! Why columns: a backup's listings are cut into content-defined meta chunks
//! like file data. Row by row, every entry interleaves stable fields (name,
//! content fingerprint) with fields that change on every copy of a tree
//! (ctime, inode), so no chunk of a fresh copy's listing matches the last
//! backup's. By column, the names, attributes, sizes and fingerprints of
//! an unchanged region are the same run of bytes as before and deduplicate,
//! and only the time and inode columns are new. The 32-byte fingerprints are
//! incompressible: deduplicating them is most of the saving. Times are
//! delta-coded where they change together (a copy's ctimes and inodes are
//! nearly sequential); mtimes survive a copy, so they stay fixed-width and
//! deduplicate instead.
//!
//! One directory still has exactly one encoding: columns come in a fixed
//! order, each must be consumed exactly, and flag 16 is set exactly when the
//! content size differs from the entry size.

use cairn_core::{Error, Result};

use crate::bytes::{put_u64, put_varint, Reader};
use crate::dir_entry::{
    push_decoded, BlobRef, DirEntry, EntryKind, Extras, FLAG_CONTENT, FLAG_CONTENT_SIZE,
    FLAG_EXTRAS, FLAG_INLINE, FLAG_TARGET, MAX_INLINE_DEPTH, WHAT,
};

const SHAPE: usize = 0;
const NAMES: usize = 1;
const ATTRS: usize = 2;
const SIZES: usize = 3;
const TARGETS: usize = 4;
const EXTRAS: usize = 5;
const CONTENTS: usize = 6;
const FPS: usize = 7;
const MTIMES: usize = 8;
const CTIMES: usize = 9;
const INODES: usize = 10;
const COLUMNS: usize = 11;

/// Each column's name in errors.
const COLUMN_WHAT: [&str; COLUMNS] = [
    "directory listing (shape column)",
    "directory listing (names column)",
    "directory listing (attributes column)",
    "directory listing (sizes column)",
    "directory listing (targets column)",
    "directory listing (extras column)",
    "directory listing (contents column)",
    "directory listing (fingerprints column)",
    "directory listing (mtimes column)",
    "directory listing (ctimes column)",
    "directory listing (inodes column)",
];

const ALLOWED_FLAGS: u8 =
    FLAG_TARGET | FLAG_CONTENT | FLAG_INLINE | FLAG_EXTRAS | FLAG_CONTENT_SIZE;

/// The previous entry's delta-coded fields (pre-order, across nesting).
#[derive(Default)]
struct Previous {
    ctime_ns: i64,
    inode: u64,
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn flags(e: &DirEntry) -> u8 {
    (if e.target.is_some() { FLAG_TARGET } else { 0 })
        | if e.content.is_some() { FLAG_CONTENT } else { 0 }
        | if e.children.is_some() { FLAG_INLINE } else { 0 }
        | if e.extras.is_empty() { 0 } else { FLAG_EXTRAS }
        | match e.content {
            Some(c) if c.size != e.size => FLAG_CONTENT_SIZE,
            _ => 0,
        }
}

/// Appends the columns of `entries` (after the version byte). No
/// validation: [`crate::dir::encode_dir`] checks first, and tests use this
/// directly to build corrupt listings.
pub(crate) fn put_listing(entries: &[DirEntry], out: &mut Vec<u8>) {
    let mut cols: [Vec<u8>; COLUMNS] = Default::default();
    put_entries(entries, &mut cols, &mut Previous::default());
    for c in &cols {
        put_varint(out, c.len() as u64);
        out.extend_from_slice(c);
    }
}

fn put_entries(entries: &[DirEntry], cols: &mut [Vec<u8>; COLUMNS], prev: &mut Previous) {
    put_varint(&mut cols[SHAPE], entries.len() as u64);
    for e in entries {
        cols[SHAPE].extend_from_slice(&[e.kind as u8, flags(e)]);
        put_varint(&mut cols[NAMES], e.name.len() as u64);
        cols[NAMES].extend_from_slice(&e.name);
        for v in [e.mode, e.uid, e.gid] {
            put_varint(&mut cols[ATTRS], v.into());
        }
        put_varint(&mut cols[SIZES], e.size);
        if let Some(t) = &e.target {
            put_varint(&mut cols[TARGETS], t.len() as u64);
            cols[TARGETS].extend_from_slice(t);
        }
        if !e.extras.is_empty() {
            e.extras.encode(&mut cols[EXTRAS]);
        }
        if let Some(c) = &e.content {
            cols[CONTENTS].push(c.level);
            if c.size != e.size {
                put_varint(&mut cols[CONTENTS], c.size);
            }
            cols[FPS].extend_from_slice(c.root.as_bytes());
        }
        put_u64(&mut cols[MTIMES], e.mtime_ns as u64);
        put_varint(
            &mut cols[CTIMES],
            zigzag(e.ctime_ns.wrapping_sub(prev.ctime_ns)),
        );
        put_varint(
            &mut cols[INODES],
            zigzag(e.inode.wrapping_sub(prev.inode) as i64),
        );
        prev.ctime_ns = e.ctime_ns;
        prev.inode = e.inode;
        if let Some(children) = &e.children {
            put_entries(children, cols, prev);
        }
    }
}

/// Reads the columns after the version byte and rebuilds the entries,
/// checking every rule the encoder enforces.
pub(crate) fn get_listing(r: &mut Reader<'_>, fp_width: usize) -> Result<Vec<DirEntry>> {
    let mut cols = Vec::with_capacity(COLUMNS);
    for what in COLUMN_WHAT {
        let n = r.len_prefix("column length")?;
        cols.push(Reader::new(what, r.take(n, what)?));
    }
    let mut cols: [Reader<'_>; COLUMNS] = cols.try_into().map_err(|_| unreachable_columns())?;
    let entries = get_entries(&mut cols, fp_width, 0, &mut Previous::default())?;
    for c in &cols {
        c.finish()?;
    }
    Ok(entries)
}

fn unreachable_columns() -> Error {
    Error::corrupt(WHAT, "wrong number of columns")
}

fn get_entries(
    cols: &mut [Reader<'_>; COLUMNS],
    fp_width: usize,
    depth: usize,
    prev: &mut Previous,
) -> Result<Vec<DirEntry>> {
    let count = cols[SHAPE].varint("entry count")?;
    // Every entry takes two bytes of the shape column: bounds the count
    // before anything is allocated for it.
    if count > (cols[SHAPE].remaining() / 2) as u64 {
        return Err(cols[SHAPE].corrupt(format!(
            "truncated: {count} entries cannot fit in {} bytes",
            cols[SHAPE].remaining()
        )));
    }
    let mut entries: Vec<DirEntry> = Vec::with_capacity(count as usize);
    for i in 0..count {
        let shape = &mut cols[SHAPE];
        let kind_byte = shape.u8("kind")?;
        let kind = EntryKind::from_u8(kind_byte)
            .ok_or_else(|| shape.corrupt(format!("entry {i}: unknown kind {kind_byte}")))?;
        let flags = shape.u8("flags")?;
        if flags & !ALLOWED_FLAGS != 0 {
            return Err(shape.corrupt(format!("entry {i}: unknown flags {flags:#04x}")));
        }
        if flags & FLAG_CONTENT_SIZE != 0 && flags & FLAG_CONTENT == 0 {
            return Err(shape.corrupt(format!("entry {i}: content size without content")));
        }
        let n = cols[NAMES].len_prefix("name length")?;
        let name = cols[NAMES].take(n, "name")?.to_vec();
        let mode = cols[ATTRS].varint_u32("mode")?;
        let uid = cols[ATTRS].varint_u32("uid")?;
        let gid = cols[ATTRS].varint_u32("gid")?;
        let size = cols[SIZES].varint("size")?;
        let target = if flags & FLAG_TARGET != 0 {
            let n = cols[TARGETS].len_prefix("target length")?;
            Some(cols[TARGETS].take(n, "target")?.to_vec())
        } else {
            None
        };
        let extras = if flags & FLAG_EXTRAS != 0 {
            Extras::decode(&mut cols[EXTRAS])?
        } else {
            Extras::default()
        };
        let content = if flags & FLAG_CONTENT != 0 {
            let level = cols[CONTENTS].u8("content level")?;
            let content_size = if flags & FLAG_CONTENT_SIZE != 0 {
                let s = cols[CONTENTS].varint("content size")?;
                if s == size {
                    return Err(cols[CONTENTS].corrupt(format!(
                        "entry {i}: content size stored although it equals the size"
                    )));
                }
                s
            } else {
                size
            };
            Some(BlobRef {
                root: cols[FPS].fp(fp_width, "content root")?,
                level,
                size: content_size,
            })
        } else {
            None
        };
        let mtime_ns = cols[MTIMES].i64("mtime")?;
        let ctime_ns = prev
            .ctime_ns
            .wrapping_add(unzigzag(cols[CTIMES].varint("ctime")?));
        let inode = prev
            .inode
            .wrapping_add(unzigzag(cols[INODES].varint("inode")?) as u64);
        prev.ctime_ns = ctime_ns;
        prev.inode = inode;
        let children = if flags & FLAG_INLINE != 0 {
            if depth >= MAX_INLINE_DEPTH {
                return Err(cols[SHAPE].corrupt(format!(
                    "entry {i}: inline listings nested deeper than {MAX_INLINE_DEPTH}"
                )));
            }
            Some(get_entries(cols, fp_width, depth + 1, prev)?)
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
            ctime_ns,
            inode,
            size,
            target,
            content,
            children,
            extras,
        };
        push_decoded(&mut entries, e, || format!("entry {i}"))?;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_the_extremes() {
        for v in [0, 1, -1, 2, -2, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}
