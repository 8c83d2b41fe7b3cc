//! Row-wise directory listings, versions 1 and 2 (written before the
//! columnar version 3, `dir_columns`): every entry's fields one after the
//! other, an inline listing nested right after its directory's fields.
//! Still read, so repositories written before version 3 keep restoring;
//! tests write version 2 to prove that.

use cairn_core::Result;

use crate::bytes::Reader;
#[cfg(test)]
use crate::bytes::{put_u64, put_varint};
use crate::dir_entry::{
    push_decoded, BlobRef, DirEntry, EntryKind, Extras, FLAG_CONTENT, FLAG_EXTRAS, FLAG_INLINE,
    FLAG_TARGET, MAX_INLINE_DEPTH,
};

/// Fewest bytes an entry takes: a lower bound used to cap the entry count
/// by the bytes present.
fn entry_min_len(version: u8) -> usize {
    match version {
        1 => 1 + 1 + 1 + 1 + 4 + 4 + 4 + 8 + 8,
        _ => 1 + 1 + 1 + 1 + 1 + 1 + 1 + 8 + 8 + 1 + 1,
    }
}

/// The version 2 flags of `e`.
#[cfg(test)]
fn row_flags(e: &DirEntry) -> u8 {
    (if e.target.is_some() { FLAG_TARGET } else { 0 })
        | if e.content.is_some() { FLAG_CONTENT } else { 0 }
        | if e.children.is_some() { FLAG_INLINE } else { 0 }
        | if e.extras.is_empty() { 0 } else { FLAG_EXTRAS }
}

/// Appends a version 2 body (entry count and entries, no version byte)
/// without validation: tests build old and corrupt listings with it.
#[cfg(test)]
pub(crate) fn put_entries(entries: &[DirEntry], out: &mut Vec<u8>) {
    put_varint(out, entries.len() as u64);
    for e in entries {
        put_varint(out, e.name.len() as u64);
        out.extend_from_slice(&e.name);
        out.push(e.kind as u8);
        out.push(row_flags(e));
        put_varint(out, e.mode.into());
        put_varint(out, e.uid.into());
        put_varint(out, e.gid.into());
        put_u64(out, e.mtime_ns as u64);
        put_u64(out, e.ctime_ns as u64);
        put_varint(out, e.inode);
        put_varint(out, e.size);
        if let Some(t) = &e.target {
            put_varint(out, t.len() as u64);
            out.extend_from_slice(t);
        }
        if let Some(c) = &e.content {
            out.extend_from_slice(c.root.as_bytes());
            out.push(c.level);
            put_varint(out, c.size);
        }
        if !e.extras.is_empty() {
            e.extras.encode(out);
        }
        if let Some(children) = &e.children {
            put_entries(children, out);
        }
    }
}

/// Reads a version 1 or 2 body (after the version byte), checking every rule.
pub(crate) fn get_entries(
    r: &mut Reader<'_>,
    version: u8,
    fp_width: usize,
    depth: usize,
) -> Result<Vec<DirEntry>> {
    let count = r.varint("entry count")?;
    let max = (r.remaining() / entry_min_len(version)) as u64;
    if count > max {
        return Err(r.corrupt(format!(
            "truncated: {count} entries cannot fit in {} bytes",
            r.remaining()
        )));
    }
    let allowed = match version {
        1 => FLAG_TARGET | FLAG_CONTENT,
        _ => FLAG_TARGET | FLAG_CONTENT | FLAG_INLINE | FLAG_EXTRAS,
    };
    let mut entries: Vec<DirEntry> = Vec::with_capacity(count as usize);
    for i in 0..count {
        let start = r.pos();
        let name_len = r.len_prefix("name length")?;
        let name = r.take(name_len, "name")?.to_vec();
        let kind_byte = r.u8("kind")?;
        let kind = EntryKind::from_u8(kind_byte)
            .filter(|k| version > 1 || (*k as u8) <= EntryKind::Symlink as u8)
            .ok_or_else(|| r.corrupt(format!("entry {i}: unknown kind {kind_byte}")))?;
        let flags = r.u8("flags")?;
        if flags & !allowed != 0 {
            return Err(r.corrupt(format!("entry {i}: unknown flags {flags:#04x}")));
        }
        let (mode, uid, gid, mtime_ns, ctime_ns, inode, size) = if version == 1 {
            let (mode, uid, gid) = (r.u32("mode")?, r.u32("uid")?, r.u32("gid")?);
            (mode, uid, gid, r.i64("mtime")?, 0, 0, r.u64("size")?)
        } else {
            let mode = r.varint_u32("mode")?;
            let uid = r.varint_u32("uid")?;
            let gid = r.varint_u32("gid")?;
            let mtime = r.i64("mtime")?;
            let ctime = r.i64("ctime")?;
            (
                mode,
                uid,
                gid,
                mtime,
                ctime,
                r.varint("inode")?,
                r.varint("size")?,
            )
        };
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
                size: if version == 1 {
                    r.u64("content size")?
                } else {
                    r.varint("content size")?
                },
            })
        } else {
            None
        };
        let extras = if flags & FLAG_EXTRAS != 0 {
            Extras::decode(r)?
        } else {
            Extras::default()
        };
        let children = if flags & FLAG_INLINE != 0 {
            if depth >= MAX_INLINE_DEPTH {
                return Err(r.corrupt(format!(
                    "entry {i}: inline listings nested deeper than {MAX_INLINE_DEPTH}"
                )));
            }
            Some(get_entries(r, version, fp_width, depth + 1)?)
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
        push_decoded(&mut entries, e, || format!("entry {i} at offset {start}"))?;
    }
    Ok(entries)
}
