//! The pages of one index file (`cairn_format::index`): reading them one
//! at a time, from an image in memory or from the store in runs, and the
//! streaming merge that writes a new file from an old one and sorted new
//! entries (`disk_index.rs`, DDFS §3.2's batched index update).

use cairn_core::{Backend, ContainerId, Error, FpMap, Result, StreamedObject};
use cairn_format::index::{self as codec, IndexEntry, IndexHeader};

use crate::canonical::canonical;

/// The file a merge reads: its header, where it is, and its name. Its
/// pages are read from the store a run at a time ([`StoredPages`]), so a
/// merge never holds the old file whole.
pub(super) struct OldFile<'a> {
    pub header: &'a IndexHeader,
    pub backend: &'a dyn Backend,
    pub key: String,
}

/// Bytes of old pages a merge reads at a time (at least one page).
const OLD_RUN_BYTES: usize = 1 << 20;

/// Bytes of new pages a merge encodes before handing them to the store.
const NEW_RUN_BYTES: usize = 1 << 20;

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

/// Decodes the data pages of a stored index file one at a time, reading
/// them in runs of [`OLD_RUN_BYTES`].
pub(super) struct StoredPages<'a> {
    file: &'a OldFile<'a>,
    run: Vec<u8>,
    run_first: u64,
    run_pages: u64,
    next: u64,
}

impl<'a> StoredPages<'a> {
    pub(super) fn new(file: &'a OldFile<'a>) -> Self {
        StoredPages {
            file,
            run: Vec::new(),
            run_first: 0,
            run_pages: 0,
            next: 0,
        }
    }

    /// Page `page_no`, reading the run that starts with it if needed. The
    /// runs are one sequential pass over the file (`Backend::read_run`),
    /// the first from offset 0 with the header page, so the pass reads
    /// the bytes one whole read would.
    fn page(&mut self, page_no: u64) -> Result<Vec<IndexEntry>> {
        let h = self.file.header;
        // Where page `run_first` starts in `run`: after the header page in
        // the first run.
        let head = |first: u64| if first == 0 { h.page_size } else { 0 };
        if !(self.run_first..self.run_first + self.run_pages).contains(&page_no) {
            let pages = ((OLD_RUN_BYTES / h.page_size).max(1) as u64).min(h.page_count - page_no);
            let len = head(page_no) + pages as usize * h.page_size;
            let offset = codec::index_page_offset(h, page_no) - head(page_no) as u64;
            self.file
                .backend
                .read_run(&self.file.key, offset, len, &mut self.run)
                .map_err(|e| match e {
                    // Merges exclude each other by a lock; on object
                    // storage the lock is a lease a paused holder can
                    // outlive, and a merge beside it may have replaced the
                    // file: refused as the create of a generation another
                    // merge wrote first is.
                    e if e.is_not_found() => Error::Locked(format!(
                        "index file {} was replaced by another merge while this one read it;                          nothing was changed, the next commit merges again",
                        self.file.key
                    )),
                    e => rename_corrupt(e, &self.file.key),
                })?;
            if self.run.len() != len {
                return Err(Error::corrupt(
                    self.file.key.clone(),
                    format!("truncated before page {page_no}"),
                ));
            }
            self.run_first = page_no;
            self.run_pages = pages;
        }
        let at = head(self.run_first) + (page_no - self.run_first) as usize * h.page_size;
        codec::decode_index_page(&self.run[at..at + h.page_size], h, page_no)
            .map_err(|e| rename_corrupt(e, &self.file.key))
    }
}

impl Iterator for StoredPages<'_> {
    type Item = Result<Vec<IndexEntry>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.file.header.page_count {
            return None;
        }
        let page_no = self.next;
        self.next += 1;
        Some(self.page(page_no))
    }
}

/// One pass of the streaming merge with a given page count, written to
/// `out` as pages are made (the header page first reserved, then filled
/// in); returns the entries written. `InvalidInput` if some page
/// overflows: `out` is then incomplete and must be dropped.
#[allow(clippy::too_many_arguments)]
pub(super) fn merge_into_pages(
    old: Option<&OldFile>,
    new: &[IndexEntry],
    forget: &FpMap<ContainerId>,
    fp_width: usize,
    page_size: usize,
    page_count: u64,
    covered_below: ContainerId,
    out: &mut dyn StreamedObject,
) -> Result<u64> {
    let mut run: Vec<u8> = Vec::with_capacity(NEW_RUN_BYTES.max(page_size) + page_size);
    run.resize(page_size, 0); // the header page, written last
    let mut old_pages = old.map(StoredPages::new);
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
            codec::encode_index_page(&header, page_no, &page, &mut run)?;
            count += page.len() as u64;
            page.clear();
            page_no += 1;
            if run.len() >= NEW_RUN_BYTES {
                out.append(&run)?;
                run.clear();
            }
        }
        match e {
            Some(e) => page.push(e),
            None => break,
        }
    }
    out.append(&run)?;
    let mut head = Vec::with_capacity(page_size);
    codec::encode_index_header(
        &IndexHeader {
            entry_count: count,
            ..header
        },
        &mut head,
    )?;
    out.patch(0, &head)?;
    Ok(count)
}

pub(super) fn rename_corrupt(e: Error, key: &str) -> Error {
    match e {
        Error::Corrupt { what, detail } => {
            Error::corrupt(format!("index file {key} ({what})"), detail)
        }
        other => other,
    }
}
