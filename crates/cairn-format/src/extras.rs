//! A directory entry's extras: the optional facts about a file beyond the
//! fixed fields of a listing entry (extended attributes, a hard-link group,
//! a device number, the data extents of a sparse file).
//!
//! An entry carries them behind flag 8 of its listing entry as one
//! length-prefixed list of tagged values, so later fields need a new tag,
//! not a new listing version:
//!
//! ```text
//! extras := byte_len varint | field+                 (fields sorted by tag, each at most once)
//! field  := tag u8 | value_len varint | value
//! tag 1  xattrs     := count varint | (name_len varint | name | value_len varint | value)*
//!                      (names strictly ascending by bytes, non-empty, no NUL)
//! tag 2  hard link  := dev varint | nlink varint    (nlink >= 2; the group is (dev, inode))
//! tag 3  rdev       := rdev varint                  (exactly for char and block devices)
//! tag 128 extents   := count varint | (gap varint | len varint)*
//!                      (the file's data regions; bytes elsewhere are holes)
//! ```
//!
//! A reader keeps a field with an unknown tag below 128 as it is (a later
//! optional fact, e.g. a new timestamp) and refuses an entry with an unknown
//! tag of 128 or more: such a field changes what the entry's bytes mean.
//!
//! Extents: `gap` is the distance from the end of the previous extent (from
//! offset 0 for the first) and must be non-zero after the first extent
//! (touching extents are one extent), every `len` is non-zero, and the
//! extents end within the file's size. An entry with extents stores only
//! the extents' bytes, concatenated, as its content; a file whose one
//! extent covers it whole has no extents field. Together these rules give
//! every set of extras exactly one encoding.

use cairn_core::{Error, Result};

use crate::bytes::{put_varint, Reader};

/// Tag of the extended attributes.
pub const TAG_XATTRS: u8 = 1;
/// Tag of the hard-link group.
pub const TAG_HARD_LINK: u8 = 2;
/// Tag of the device number.
pub const TAG_RDEV: u8 = 3;
/// Tag of a sparse file's data extents.
pub const TAG_EXTENTS: u8 = 128;
/// Tags from here on must be understood to read an entry.
pub const FIRST_CRITICAL_TAG: u8 = 128;

/// Which hard-link group a file belongs to: the device and (with the
/// entry's inode) the file it is one name of, and how many names it had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HardLink {
    pub dev: u64,
    pub nlink: u64,
}

/// One data region of a sparse file: `len` bytes at logical `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

impl Extent {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// The optional facts of one entry; the default (all absent) is encoded as
/// nothing at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// Extended attributes (name, value), sorted by name, names unique.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Set when the file had more than one name when it was backed up.
    pub hard_link: Option<HardLink>,
    /// The device number of a character or block device.
    pub rdev: Option<u64>,
    /// A sparse file's data regions; `None` for a file stored whole.
    pub extents: Option<Vec<Extent>>,
    /// Optional fields this build does not know, kept as (tag, value).
    pub other: Vec<(u8, Vec<u8>)>,
}

impl Extras {
    pub fn is_empty(&self) -> bool {
        self.xattrs.is_empty()
            && self.hard_link.is_none()
            && self.rdev.is_none()
            && self.extents.is_none()
            && self.other.is_empty()
    }

    /// Why these extras are not canonical or not valid, if they are not.
    /// `size`: the entry's logical size; `data`: its content's size.
    pub fn error(&self, size: u64, data: u64) -> Option<String> {
        for w in self.xattrs.windows(2) {
            if w[0].0 >= w[1].0 {
                return Some("extended attributes not sorted by unique name".into());
            }
        }
        if let Some((n, _)) = self
            .xattrs
            .iter()
            .find(|(n, _)| n.is_empty() || n.contains(&0))
        {
            return Some(format!(
                "extended attribute name {:?} is empty or holds NUL",
                String::from_utf8_lossy(n)
            ));
        }
        if let Some(h) = self.hard_link {
            if h.nlink < 2 {
                return Some(format!("hard link with link count {}", h.nlink));
            }
        }
        if let Some(ext) = &self.extents {
            let mut end = 0u64;
            let mut total = 0u64;
            for (i, x) in ext.iter().enumerate() {
                if x.len == 0 {
                    return Some("empty extent".into());
                }
                if i > 0 && x.offset <= end {
                    return Some("extents overlap, touch or are out of order".into());
                }
                end = match x.offset.checked_add(x.len) {
                    Some(e) if e <= size => e,
                    _ => return Some(format!("extent past the file's size {size}")),
                };
                total += x.len;
            }
            if total != data {
                return Some(format!(
                    "extents hold {total} bytes but the content holds {data}"
                ));
            }
            if ext.len() == 1 && ext[0].offset == 0 && ext[0].len == size {
                return Some("extents covering the whole file".into());
            }
        }
        for w in self.other.windows(2) {
            if w[0].0 >= w[1].0 {
                return Some("extra fields not sorted by unique tag".into());
            }
        }
        if let Some((t, _)) = self
            .other
            .iter()
            .find(|(t, _)| *t >= FIRST_CRITICAL_TAG || matches!(*t, 1..=3))
        {
            return Some(format!("unknown extra field {t} kept as known or critical"));
        }
        None
    }

    /// Appends `byte_len | field+`. Call only for non-empty extras that
    /// passed [`Extras::error`].
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let mut fields: Vec<(u8, Vec<u8>)> = Vec::new();
        if !self.xattrs.is_empty() {
            let mut v = Vec::new();
            put_varint(&mut v, self.xattrs.len() as u64);
            for (n, val) in &self.xattrs {
                put_varint(&mut v, n.len() as u64);
                v.extend_from_slice(n);
                put_varint(&mut v, val.len() as u64);
                v.extend_from_slice(val);
            }
            fields.push((TAG_XATTRS, v));
        }
        if let Some(h) = self.hard_link {
            let mut v = Vec::new();
            put_varint(&mut v, h.dev);
            put_varint(&mut v, h.nlink);
            fields.push((TAG_HARD_LINK, v));
        }
        if let Some(r) = self.rdev {
            let mut v = Vec::new();
            put_varint(&mut v, r);
            fields.push((TAG_RDEV, v));
        }
        fields.extend(self.other.iter().cloned());
        if let Some(ext) = &self.extents {
            let mut v = Vec::new();
            put_varint(&mut v, ext.len() as u64);
            let mut end = 0;
            for x in ext {
                put_varint(&mut v, x.offset - end);
                put_varint(&mut v, x.len);
                end = x.end();
            }
            fields.push((TAG_EXTENTS, v));
        }
        fields.sort_by_key(|f| f.0);
        let mut body = Vec::new();
        for (tag, v) in fields {
            body.push(tag);
            put_varint(&mut body, v.len() as u64);
            body.extend_from_slice(&v);
        }
        put_varint(out, body.len() as u64);
        out.extend_from_slice(&body);
    }

    /// Reads `byte_len | field+` (checking the encoding is canonical; the
    /// caller checks [`Extras::error`] against the entry).
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Extras> {
        let n = r.len_prefix("extras length")?;
        let body = r.take(n, "extras")?;
        let mut fr = Reader::new("entry extras", body);
        let mut x = Extras::default();
        let mut last: Option<u8> = None;
        while fr.remaining() > 0 {
            let tag = fr.u8("extra tag")?;
            if last.is_some_and(|l| l >= tag) {
                return Err(fr.corrupt(format!("extra field {tag} out of order or repeated")));
            }
            last = Some(tag);
            let len = fr.len_prefix("extra length")?;
            let val = fr.take(len, "extra value")?;
            let mut v = Reader::new("entry extra field", val);
            match tag {
                TAG_XATTRS => {
                    let count = v.varint("xattr count")?;
                    if count == 0 || count > val.len() as u64 {
                        return Err(v.corrupt(format!("{count} extended attributes")));
                    }
                    for _ in 0..count {
                        let nl = v.len_prefix("xattr name length")?;
                        let name = v.take(nl, "xattr name")?.to_vec();
                        let vl = v.len_prefix("xattr value length")?;
                        x.xattrs.push((name, v.take(vl, "xattr value")?.to_vec()));
                    }
                }
                TAG_HARD_LINK => {
                    x.hard_link = Some(HardLink {
                        dev: v.varint("hard link device")?,
                        nlink: v.varint("link count")?,
                    })
                }
                TAG_RDEV => x.rdev = Some(v.varint("rdev")?),
                TAG_EXTENTS => {
                    let count = v.varint("extent count")?;
                    if count > val.len() as u64 {
                        return Err(v.corrupt(format!("{count} extents cannot fit")));
                    }
                    let mut ext = Vec::with_capacity(count as usize);
                    let mut end = 0u64;
                    for _ in 0..count {
                        let gap = v.varint("extent gap")?;
                        let len = v.varint("extent length")?;
                        let offset = end
                            .checked_add(gap)
                            .filter(|o| o.checked_add(len).is_some())
                            .ok_or_else(|| v.corrupt("extent offset overflows"))?;
                        ext.push(Extent { offset, len });
                        end = offset + len;
                    }
                    x.extents = Some(ext);
                }
                t if t >= FIRST_CRITICAL_TAG => {
                    return Err(Error::UnsupportedVersion {
                        what: "directory entry extra field".into(),
                        found: t.into(),
                        supported: TAG_EXTENTS.into(),
                    })
                }
                t => {
                    x.other.push((t, val.to_vec()));
                    continue;
                }
            }
            v.finish()?;
        }
        if x.is_empty() {
            return Err(r.corrupt("empty extras"));
        }
        Ok(x)
    }
}

/// Maps positions in a sparse file's stored data (the extents' bytes
/// concatenated) to logical positions: how every reader presents the file
/// with zeros in its holes.
pub fn logical_ranges(
    extents: &[Extent],
    data_from: u64,
    data_len: u64,
) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut at = 0u64; // data offset where the current extent starts
    let end = data_from + data_len;
    extents.iter().filter_map(move |x| {
        let (lo, hi) = (at, at + x.len);
        at = hi;
        let (a, b) = (lo.max(data_from), hi.min(end));
        (a < b).then(|| (x.offset + (a - lo), b - a))
    })
}

#[cfg(test)]
#[path = "extras_tests.rs"]
mod tests;
