//! The pages of one index file image (`cairn_format::index`): reading them
//! one at a time, and the streaming merge that writes a new file from an
//! old one and sorted new entries (`disk_index.rs`, DDFS §3.2's batched
//! index update).

use cairn_core::{ContainerId, Error, FpMap, Result};
use cairn_format::index::{self as codec, IndexEntry, IndexHeader};

use crate::canonical::canonical;

/// The file a merge reads: its header, bytes, and name (for errors).
pub(super) struct OldFile<'a> {
    pub header: &'a IndexHeader,
    pub bytes: &'a [u8],
    pub key: String,
}

/// Data page `page_no` of the index file `bytes` (named `key` in errors).
pub(super) fn page_bytes<'a>(
    h: &IndexHeader,
    bytes: &'a [u8],
    key: &str,
    page_no: u64,
) -> Result<&'a [u8]> {
    let off = codec::index_page_offset(h, page_no) as usize;
    bytes
        .get(off..off + h.page_size)
        .ok_or_else(|| Error::corrupt(key.to_string(), format!("truncated before page {page_no}")))
}

/// The pages of a file held `n` entries: the header must say so.
pub(super) fn check_entry_count(h: &IndexHeader, n: u64, key: &str) -> Result<()> {
    if n != h.entry_count {
        return Err(Error::corrupt(
            key.to_string(),
            format!("header says {} entries, pages hold {n}", h.entry_count),
        ));
    }
    Ok(())
}

/// Decodes the data pages of an index file image one at a time.
pub(super) struct Pages<'a> {
    header: &'a IndexHeader,
    bytes: &'a [u8],
    key: &'a str,
    next: u64,
}

impl<'a> Pages<'a> {
    pub(super) fn new(header: &'a IndexHeader, bytes: &'a [u8], key: &'a str) -> Self {
        Pages {
            header,
            bytes,
            key,
            next: 0,
        }
    }
}

impl Iterator for Pages<'_> {
    type Item = Result<Vec<IndexEntry>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.header.page_count {
            return None;
        }
        let page_no = self.next;
        self.next += 1;
        Some(
            page_bytes(self.header, self.bytes, self.key, page_no).and_then(|page| {
                codec::decode_index_page(page, self.header, page_no)
                    .map_err(|e| rename_corrupt(e, self.key))
            }),
        )
    }
}

/// One pass of the streaming merge with a given page count; `InvalidInput`
/// if some page overflows.
pub(super) fn merge_into_pages(
    old: Option<&OldFile>,
    new: &[IndexEntry],
    forget: &FpMap<ContainerId>,
    fp_width: usize,
    page_size: usize,
    page_count: u64,
    covered_below: ContainerId,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity((page_count as usize + 1) * page_size);
    out.resize(page_size, 0); // the header page, written last
    let mut old_pages = old.map(|f| Pages::new(f.header, f.bytes, &f.key));
    let mut old_buf: std::vec::IntoIter<IndexEntry> = Vec::new().into_iter();
    let mut old_next = || -> Result<Option<IndexEntry>> {
        loop {
            if let Some(e) = old_buf.next() {
                // A removal forgets the old entry only below its bound.
                if forget.get(&e.fp).is_some_and(|below| e.container < *below) {
                    continue;
                }
                return Ok(Some(e));
            }
            match old_pages.as_mut().and_then(|p| p.next()) {
                Some(page) => old_buf = page?.into_iter(),
                None => return Ok(None),
            }
        }
    };
    let header = IndexHeader {
        fp_width,
        page_size,
        page_count,
        entry_count: 0,
        covered_below,
    };
    let mut a = old_next()?;
    let mut b = new.iter().peekable();
    let mut page: Vec<IndexEntry> = Vec::new();
    let mut page_no = 0u64;
    let mut count = 0u64;
    loop {
        // Next entry in merged order. Of equal fingerprints the canonical
        // copy is kept (`canonical`: the newest container).
        let e = match (a, b.peek()) {
            (Some(x), Some(y)) if codec::entry_order(&x.fp) <= codec::entry_order(&y.fp) => {
                a = old_next()?;
                if x.fp == y.fp {
                    b.next().map(|y| IndexEntry {
                        fp: y.fp,
                        container: canonical(x.container, y.container),
                    })
                } else {
                    Some(x)
                }
            }
            (Some(_), Some(_)) | (None, Some(_)) => b.next().copied(),
            (Some(x), None) => {
                a = old_next()?;
                Some(x)
            }
            (None, None) => None,
        };
        let target = e.map_or(page_count, |e| codec::page_of(&e.fp, page_count));
        while page_no < target {
            codec::encode_index_page(&header, page_no, &page, &mut out)?;
            count += page.len() as u64;
            page.clear();
            page_no += 1;
        }
        match e {
            Some(e) => page.push(e),
            None => break,
        }
    }
    let mut head = Vec::with_capacity(page_size);
    codec::encode_index_header(
        &IndexHeader {
            entry_count: count,
            ..header
        },
        &mut head,
    )?;
    out[..page_size].copy_from_slice(&head);
    Ok(out)
}

pub(super) fn rename_corrupt(e: Error, key: &str) -> Error {
    match e {
        Error::Corrupt { what, detail } => {
            Error::corrupt(format!("index file {key} ({what})"), detail)
        }
        other => other,
    }
}
