//! The pages of one index file (`cairn_format::index`): reading them one
//! at a time, from an image in memory or from the store in runs, and the
//! streaming merge that writes a new file from an old one and sorted new
//! entries (`disk_index.rs`, DDFS §3.2's batched index update).

use cairn_core::{Backend, ContainerId, Error, FpMap, Result, StreamedObject};
use cairn_format::index::{self as codec, IndexEntry, IndexHeader};

use crate::canonical::canonical;

/// Bytes of old pages a merge reads at a time (at least one page).
const OLD_RUN_BYTES: usize = 1 << 20;

/// Bytes of new pages a merge encodes before handing them to the store.
const NEW_RUN_BYTES: usize = 1 << 20;

/// Data page `page_no` of the index file `bytes` (named `key` in errors).
fn page_bytes<'a>(h: &IndexHeader, bytes: &'a [u8], key: &str, page_no: u64) -> Result<&'a [u8]> {
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

/// Where a file's pages come from.
enum Source<'a> {
    /// The whole file, read before.
    Image(&'a [u8]),
    /// The stored object, read in runs of [`OLD_RUN_BYTES`] as one
    /// sequential pass (`Backend::read_run`): a merge holds one run of
    /// the old file, never all of it. `run` holds pages
    /// `run_first..run_first + run_pages`, after the header page when
    /// `run_first` is 0 (the first run starts at offset 0, so the pass
    /// reads the bytes one whole read would).
    Stored {
        backend: &'a dyn Backend,
        run: Vec<u8>,
        run_first: u64,
        run_pages: u64,
        /// The file vanishing mid-read is a merge's lost race (`Locked`),
        /// or else passed on as `NotFound` for the reader to reload.
        gone_is_locked: bool,
    },
}

/// Decodes the data pages of an index file one at a time, in order.
pub(super) struct Pages<'a> {
    header: &'a IndexHeader,
    source: Source<'a>,
    key: &'a str,
    next: u64,
}

impl<'a> Pages<'a> {
    /// The pages of a file image.
    pub(super) fn new(header: &'a IndexHeader, bytes: &'a [u8], key: &'a str) -> Self {
        Self::from(header, Source::Image(bytes), key)
    }

    /// The pages of the stored file `key`, read in runs by a merge (which
    /// holds the merge lock: the file vanishing is a lost race).
    pub(super) fn stored(header: &'a IndexHeader, backend: &'a dyn Backend, key: &'a str) -> Self {
        Self::stored_with(header, backend, key, true)
    }

    /// The pages of the stored file `key`, read in runs by a reader
    /// without the merge lock: the file vanishing is `NotFound`, for the
    /// reader to reload the newer generation (`DiskIndex::with_current`).
    pub(super) fn stored_unlocked(
        header: &'a IndexHeader,
        backend: &'a dyn Backend,
        key: &'a str,
    ) -> Self {
        Self::stored_with(header, backend, key, false)
    }

    fn stored_with(
        header: &'a IndexHeader,
        backend: &'a dyn Backend,
        key: &'a str,
        gone_is_locked: bool,
    ) -> Self {
        let source = Source::Stored {
            backend,
            run: Vec::new(),
            run_first: 0,
            run_pages: 0,
            gone_is_locked,
        };
        Self::from(header, source, key)
    }

    fn from(header: &'a IndexHeader, source: Source<'a>, key: &'a str) -> Self {
        Pages {
            header,
            source,
            key,
            next: 0,
        }
    }

    /// Page `page_no`'s bytes: a slice of the image, or of the run that
    /// holds it (read when the page lies past the last one).
    pub(super) fn page(&mut self, page_no: u64) -> Result<&[u8]> {
        let (h, key) = (self.header, self.key);
        let (backend, run, run_first, run_pages, gone_is_locked) = match &mut self.source {
            Source::Image(bytes) => return page_bytes(h, bytes, key, page_no),
            Source::Stored {
                backend,
                run,
                run_first,
                run_pages,
                gone_is_locked,
            } => (*backend, run, run_first, run_pages, *gone_is_locked),
        };
        let head = |first: u64| if first == 0 { h.page_size } else { 0 };
        if !(*run_first..*run_first + *run_pages).contains(&page_no) {
            let pages = ((OLD_RUN_BYTES / h.page_size).max(1) as u64).min(h.page_count - page_no);
            let len = head(page_no) + pages as usize * h.page_size;
            let offset = codec::index_page_offset(h, page_no) - head(page_no) as u64;
            backend
                .read_run(key, offset, len, run)
                .map_err(|e| match e {
                    // Merges exclude each other by a lock; on object
                    // storage the lock is a lease a paused holder can
                    // outlive, and a merge beside it may have replaced the
                    // file: refused as the create of a generation another
                    // merge wrote first is.
                    e if e.is_not_found() && !gone_is_locked => e,
                    e if e.is_not_found() => Error::Locked(format!(
                        "index file {key} was replaced by another merge while this one read it; \
                         nothing was changed, the next commit merges again"
                    )),
                    e => rename_corrupt(e, key),
                })?;
            if run.len() != len {
                return Err(Error::corrupt(
                    key.to_string(),
                    format!("truncated before page {page_no}"),
                ));
            }
            *run_first = page_no;
            *run_pages = pages;
        }
        let at = head(*run_first) + (page_no - *run_first) as usize * h.page_size;
        Ok(&run[at..at + h.page_size])
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
        let (header, key) = (self.header, self.key);
        Some(self.page(page_no).and_then(|page| {
            codec::decode_index_page(page, header, page_no).map_err(|e| rename_corrupt(e, key))
        }))
    }
}

/// One pass of the streaming merge with a given page count, written to
/// `out` as pages are made (the header page first reserved, then filled
/// in); returns the entries written. `InvalidInput` if some page
/// overflows: `out` is then incomplete and must be dropped.
#[allow(clippy::too_many_arguments)]
pub(super) fn merge_into_pages(
    old: Option<Pages>,
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
    let mut old_pages = old;
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
