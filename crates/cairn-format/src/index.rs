//! The on-disk fingerprint index: DDFS's "segment index" (`001_3652cceaf162c5a1.txt`
//! §4, §4.1), mapping a fingerprint to the container that holds its chunk.
//!
//! A paged hash table in one immutable file: page 0 is a header page, then
//! `page_count` data pages of `page_size` bytes. A fingerprint lives in page
//! [`page_of`]`(fp)`, so a lookup is one page read (`offset = (page_no + 1) *
//! page_size`). The bucket function is monotone in the page key (a hash of
//! every fingerprint byte, [`page_key`]), and entries are stored in
//! [`entry_order`] (page key, then fingerprint), so merging a sorted run of
//! new entries with the old file writes the new file sequentially, and
//! fingerprints that share a prefix cannot crowd one page. `covered_below`
//! is the checkpoint for replay after a crash (DDFS §4.1): every container
//! with a smaller id is in the file; later ones are re-read from the log.
//!
//! ```text
//! header page:  magic "CAIRNIDX" | version u32 | fp_width u8 | reserved [3]
//!               | page_size u32 | reserved u32 | page_count u64 | entry_count u64
//!               | covered_below u64 | crc32c u32 (over the 48 bytes before) | zero padding
//! data page:    page_no u64 | entry count u32 | entries (fp [w] | container u64),
//!               in entry_order | zero padding | crc32c u32 (last 4 bytes, over the rest)
//! ```

use cairn_core::{ContainerId, Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, get_u32, get_u64, set_u32, set_u64, show_magic};

/// First 8 bytes of an index file.
pub const INDEX_MAGIC: [u8; 8] = *b"CAIRNIDX";
/// The index format version this build writes and the newest it reads.
/// Version 2 places entries by a hash of the whole fingerprint (version 1
/// used its first 8 bytes); an index of another version is derived data
/// that the next backup rebuilds.
pub const INDEX_VERSION: u32 = 2;
/// Smallest allowed page size.
pub const MIN_INDEX_PAGE_SIZE: usize = 256;
/// Largest allowed page size.
pub const MAX_INDEX_PAGE_SIZE: usize = 16 << 20;

const H_MAGIC_OFFSET: usize = 0;
const H_VERSION_OFFSET: usize = H_MAGIC_OFFSET + 8;
const H_FP_WIDTH_OFFSET: usize = H_VERSION_OFFSET + 4;
const H_RESERVED1_OFFSET: usize = H_FP_WIDTH_OFFSET + 1;
const H_RESERVED1_LEN: usize = 3;
const H_PAGE_SIZE_OFFSET: usize = H_RESERVED1_OFFSET + H_RESERVED1_LEN;
const H_RESERVED2_OFFSET: usize = H_PAGE_SIZE_OFFSET + 4;
const H_RESERVED2_LEN: usize = 4;
const H_PAGE_COUNT_OFFSET: usize = H_RESERVED2_OFFSET + H_RESERVED2_LEN;
const H_ENTRY_COUNT_OFFSET: usize = H_PAGE_COUNT_OFFSET + 8;
const H_COVERED_OFFSET: usize = H_ENTRY_COUNT_OFFSET + 8;
const H_CRC_OFFSET: usize = H_COVERED_OFFSET + 8;
/// Bytes of page 0 that [`decode_index_header`] needs; read at least this
/// much before the page size is known.
pub const INDEX_HEADER_LEN: usize = H_CRC_OFFSET + 4;

const P_PAGE_NO_OFFSET: usize = 0;
const P_COUNT_OFFSET: usize = P_PAGE_NO_OFFSET + 8;
const P_ENTRIES_OFFSET: usize = P_COUNT_OFFSET + 4;
const P_CRC_LEN: usize = 4;
/// Per-page overhead: page header plus the trailing checksum.
pub const INDEX_PAGE_OVERHEAD: usize = P_ENTRIES_OFFSET + P_CRC_LEN;
const CONTAINER_LEN: usize = 8;

/// One index entry: a chunk's fingerprint and the container holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub fp: Fingerprint,
    pub container: ContainerId,
}

/// The header page of an index file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexHeader {
    pub fp_width: usize,
    pub page_size: usize,
    /// Data pages (the file has `page_count + 1` pages).
    pub page_count: u64,
    pub entry_count: u64,
    /// Every container with an id below this is in the file (DDFS §4.1 checkpoint).
    pub covered_below: ContainerId,
}

/// Entries one data page holds.
pub fn entries_per_page(page_size: usize, fp_width: usize) -> usize {
    page_size.saturating_sub(INDEX_PAGE_OVERHEAD) / fp_width.saturating_add(CONTAINER_LEN)
}

/// The page key of a fingerprint: [`Fingerprint::fold64`], a hash of every
/// byte, so fingerprints sharing a prefix still spread over all pages.
pub fn page_key(fp: &Fingerprint) -> u64 {
    fp.fold64()
}

/// The order of entries in an index file, within and across pages: by page
/// key, then by fingerprint bytes. [`page_of`] is monotone in the page key,
/// so this order is page order for every page count (which is what lets a
/// merge stream an old file into a new one of another size).
pub fn entry_order(fp: &Fingerprint) -> (u64, Fingerprint) {
    (page_key(fp), *fp)
}

/// The data page holding `fp`: `(page_key * page_count) >> 64`; 0 when
/// `page_count` is 0.
pub fn page_of(fp: &Fingerprint, page_count: u64) -> u64 {
    ((page_key(fp) as u128 * page_count as u128) >> 64) as u64
}

/// File offset of data page `page_no`.
pub fn index_page_offset(header: &IndexHeader, page_no: u64) -> u64 {
    page_no
        .saturating_add(1)
        .saturating_mul(header.page_size as u64)
}

/// Size of the whole index file.
pub fn index_file_len(header: &IndexHeader) -> u64 {
    index_page_offset(header, header.page_count)
}

/// Data pages for `entry_count` entries at a load factor of about 1/2, which
/// makes a bucket overflow unlikely for pages of 50 entries or more.
pub fn suggested_page_count(entry_count: u64, page_size: usize, fp_width: usize) -> u64 {
    let per = entries_per_page(page_size, fp_width).max(1) as u64;
    (entry_count.saturating_mul(2) / per).max(1)
}

/// Problems with header values, shared by encoder and decoder.
fn header_problem(h: &IndexHeader) -> Option<String> {
    if !(1..=cairn_core::MAX_FINGERPRINT_LEN).contains(&h.fp_width) {
        return Some(format!(
            "fingerprint width {} out of range 1..=32",
            h.fp_width
        ));
    }
    if !(MIN_INDEX_PAGE_SIZE..=MAX_INDEX_PAGE_SIZE).contains(&h.page_size) {
        return Some(format!(
            "page size {} out of range {MIN_INDEX_PAGE_SIZE}..={MAX_INDEX_PAGE_SIZE}",
            h.page_size
        ));
    }
    if h.page_count == 0 {
        return Some("page count 0".into());
    }
    if h.page_count
        .checked_add(1)
        .and_then(|p| p.checked_mul(h.page_size as u64))
        .is_none()
    {
        return Some(format!(
            "{} pages of {} bytes overflow u64",
            h.page_count, h.page_size
        ));
    }
    let cap = h
        .page_count
        .saturating_mul(entries_per_page(h.page_size, h.fp_width) as u64);
    if h.entry_count > cap {
        return Some(format!(
            "{} entries exceed the capacity {cap}",
            h.entry_count
        ));
    }
    None
}

/// Appends the header page (`page_size` bytes) to `out`.
pub fn encode_index_header(header: &IndexHeader, out: &mut Vec<u8>) -> Result<()> {
    if let Some(p) = header_problem(header) {
        return Err(Error::invalid(format!("index header: {p}")));
    }
    let start = out.len();
    out.resize(start + header.page_size, 0);
    let h = &mut out[start..];
    h[H_MAGIC_OFFSET..H_MAGIC_OFFSET + 8].copy_from_slice(&INDEX_MAGIC);
    set_u32(h, H_VERSION_OFFSET, INDEX_VERSION);
    h[H_FP_WIDTH_OFFSET] = header.fp_width as u8;
    set_u32(h, H_PAGE_SIZE_OFFSET, header.page_size as u32);
    set_u64(h, H_PAGE_COUNT_OFFSET, header.page_count);
    set_u64(h, H_ENTRY_COUNT_OFFSET, header.entry_count);
    set_u64(h, H_COVERED_OFFSET, header.covered_below.0);
    let crc = crc32c::crc32c(&h[..H_CRC_OFFSET]);
    set_u32(h, H_CRC_OFFSET, crc);
    Ok(())
}

/// Appends data page `page_no` holding `entries` (sorted, unique, all with
/// `page_of == page_no`) to `out`. [`Error::InvalidInput`] if they do not fit:
/// the caller retries the whole file with more pages.
pub fn encode_index_page(
    header: &IndexHeader,
    page_no: u64,
    entries: &[IndexEntry],
    out: &mut Vec<u8>,
) -> Result<()> {
    let per = entries_per_page(header.page_size, header.fp_width);
    if entries.len() > per {
        return Err(Error::invalid(format!(
            "index page {page_no} overflows: {} entries, capacity {per}; use more pages",
            entries.len()
        )));
    }
    for (i, e) in entries.iter().enumerate() {
        if e.fp.len() != header.fp_width {
            return Err(Error::invalid(format!(
                "index entry {}: width {} but the index uses {}",
                e.fp,
                e.fp.len(),
                header.fp_width
            )));
        }
        if page_of(&e.fp, header.page_count) != page_no {
            return Err(Error::invalid(format!(
                "index entry {} does not belong to page {page_no}",
                e.fp
            )));
        }
        if i > 0 && entry_order(&entries[i - 1].fp) >= entry_order(&e.fp) {
            return Err(Error::invalid(format!(
                "index entries not sorted and unique at {}",
                e.fp
            )));
        }
    }
    let start = out.len();
    out.resize(start + header.page_size, 0);
    let p = &mut out[start..];
    set_u64(p, P_PAGE_NO_OFFSET, page_no);
    set_u32(p, P_COUNT_OFFSET, entries.len() as u32);
    let w = header.fp_width;
    for (i, e) in entries.iter().enumerate() {
        let at = P_ENTRIES_OFFSET + i * (w + CONTAINER_LEN);
        p[at..at + w].copy_from_slice(e.fp.as_bytes());
        set_u64(p, at + w, e.container.0);
    }
    let crc_at = header.page_size - P_CRC_LEN;
    let crc = crc32c::crc32c(&p[..crc_at]);
    set_u32(p, crc_at, crc);
    Ok(())
}

/// The whole index file: header page, then `page_count` data pages.
/// `sorted_entries` must be in [`entry_order`] and unique, and
/// `header.entry_count` must equal their number. [`Error::InvalidInput`] if a
/// bucket overflows its page (retry with more pages).
pub fn encode_index(header: &IndexHeader, sorted_entries: &[IndexEntry]) -> Result<Vec<u8>> {
    if header.entry_count != sorted_entries.len() as u64 {
        return Err(Error::invalid(format!(
            "index header says {} entries, {} given",
            header.entry_count,
            sorted_entries.len()
        )));
    }
    if let Some(p) = header_problem(header) {
        return Err(Error::invalid(format!("index header: {p}")));
    }
    let total = usize::try_from(index_file_len(header))
        .ok()
        .filter(|&t| t <= isize::MAX as usize)
        .ok_or_else(|| Error::invalid("index file too large for memory"))?;
    let mut out = Vec::with_capacity(total);
    encode_index_header(header, &mut out)?;
    let mut rest = sorted_entries;
    for page_no in 0..header.page_count {
        let n = rest
            .iter()
            .position(|e| page_of(&e.fp, header.page_count) != page_no)
            .unwrap_or(rest.len());
        encode_index_page(header, page_no, &rest[..n], &mut out)?;
        rest = &rest[n..];
    }
    if let Some(e) = rest.first() {
        // Only reachable when the entries were not sorted.
        return Err(Error::invalid(format!(
            "index entries not sorted: {} comes after a later page",
            e.fp
        )));
    }
    Ok(out)
}

/// Decodes the header from the first [`INDEX_HEADER_LEN`] (or more) bytes of
/// an index file.
pub fn decode_index_header(page0: &[u8]) -> Result<IndexHeader> {
    const WHAT: &str = "index header";
    if page0.len() < INDEX_HEADER_LEN {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "truncated at offset {}: the header needs {INDEX_HEADER_LEN} bytes",
                page0.len()
            ),
        ));
    }
    let magic = &page0[H_MAGIC_OFFSET..H_MAGIC_OFFSET + 8];
    if magic != INDEX_MAGIC {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "bad magic \"{}\" (expected \"{}\")",
                show_magic(magic),
                show_magic(&INDEX_MAGIC)
            ),
        ));
    }
    let version = get_u32(page0, H_VERSION_OFFSET);
    if version > INDEX_VERSION {
        return Err(Error::UnsupportedVersion {
            what: "index".into(),
            found: version,
            supported: INDEX_VERSION,
        });
    }
    if version == 0 {
        return Err(Error::corrupt(WHAT, "version 0 is not a valid version"));
    }
    let stored = get_u32(page0, H_CRC_OFFSET);
    let actual = crc32c::crc32c(&page0[..H_CRC_OFFSET]);
    if stored != actual {
        return Err(Error::corrupt(
            WHAT,
            format!("checksum mismatch: stored {stored:08x}, computed {actual:08x}"),
        ));
    }
    if page0[H_RESERVED1_OFFSET..H_RESERVED1_OFFSET + H_RESERVED1_LEN] != [0; H_RESERVED1_LEN]
        || page0[H_RESERVED2_OFFSET..H_RESERVED2_OFFSET + H_RESERVED2_LEN] != [0; H_RESERVED2_LEN]
    {
        return Err(Error::corrupt(WHAT, "reserved bytes are not zero"));
    }
    let h = IndexHeader {
        fp_width: page0[H_FP_WIDTH_OFFSET] as usize,
        page_size: get_u32(page0, H_PAGE_SIZE_OFFSET) as usize,
        page_count: get_u64(page0, H_PAGE_COUNT_OFFSET),
        entry_count: get_u64(page0, H_ENTRY_COUNT_OFFSET),
        covered_below: ContainerId(get_u64(page0, H_COVERED_OFFSET)),
    };
    check_fp_width(WHAT, h.fp_width)?;
    if let Some(p) = header_problem(&h) {
        return Err(Error::corrupt(WHAT, p));
    }
    Ok(h)
}

/// Verifies page bytes (length, checksum, page number, count) and returns
/// the entry count. `page_no` is 0-based among data pages.
pub fn check_page(page: &[u8], header: &IndexHeader, page_no: u64) -> Result<usize> {
    if page_no >= header.page_count {
        return Err(Error::invalid(format!(
            "index page {page_no} out of range (the index has {} pages)",
            header.page_count
        )));
    }
    let what = || format!("index page {page_no}");
    if page.len() != header.page_size {
        return Err(Error::corrupt(
            what(),
            format!(
                "truncated at offset {}: page is {} bytes, expected {}",
                page.len().min(header.page_size),
                page.len(),
                header.page_size
            ),
        ));
    }
    // header_problem() guarantees page_size >= MIN_INDEX_PAGE_SIZE for decoded headers;
    // re-check for hand-built ones so slicing below cannot fail.
    if page.len() < INDEX_PAGE_OVERHEAD {
        return Err(Error::invalid(format!(
            "index page size {} too small",
            page.len()
        )));
    }
    let crc_at = page.len() - P_CRC_LEN;
    let stored = get_u32(page, crc_at);
    let actual = crc32c::crc32c(&page[..crc_at]);
    if stored != actual {
        return Err(Error::corrupt(
            what(),
            format!("checksum mismatch: stored {stored:08x}, computed {actual:08x}"),
        ));
    }
    let found = get_u64(page, P_PAGE_NO_OFFSET);
    if found != page_no {
        return Err(Error::corrupt(
            what(),
            format!("page says it is page {found}"),
        ));
    }
    let count = get_u32(page, P_COUNT_OFFSET) as usize;
    let per = entries_per_page(header.page_size, header.fp_width);
    if count > per {
        return Err(Error::corrupt(
            what(),
            format!("{count} entries exceed the page capacity {per}"),
        ));
    }
    Ok(count)
}

/// Verifies a data page's integrity (length, checksum, page number, count)
/// without decoding its entries, and returns the entry count: what opening
/// an index for writing checks of every page. A page that passes and is
/// later decoded still gets [`decode_index_page`]'s structural checks.
pub fn verify_index_page(page: &[u8], header: &IndexHeader, page_no: u64) -> Result<usize> {
    check_page(page, header, page_no)
}

fn entry_at(page: &[u8], w: usize, i: usize) -> (&[u8], u64) {
    let at = P_ENTRIES_OFFSET + i * (w + CONTAINER_LEN);
    (&page[at..at + w], get_u64(page, at + w))
}

/// Decodes and verifies data page `page_no`: checksum, page number, and that
/// every entry belongs to this page, in strictly increasing order.
pub fn decode_index_page(
    page: &[u8],
    header: &IndexHeader,
    page_no: u64,
) -> Result<Vec<IndexEntry>> {
    let count = check_page(page, header, page_no)?;
    let w = header.fp_width;
    if !(1..=cairn_core::MAX_FINGERPRINT_LEN).contains(&w) {
        return Err(Error::invalid(format!(
            "index fingerprint width {w} out of range"
        )));
    }
    let mut out: Vec<IndexEntry> = Vec::with_capacity(count);
    for i in 0..count {
        let (fpb, container) = entry_at(page, w, i);
        let fp = Fingerprint::from_slice(fpb);
        let bad = |d: &str| {
            Error::corrupt(
                format!("index page {page_no}"),
                format!("entry {i} ({fp}): {d}"),
            )
        };
        if page_of(&fp, header.page_count) != page_no {
            return Err(bad("belongs to another page"));
        }
        if out
            .last()
            .is_some_and(|p| entry_order(&p.fp) >= entry_order(&fp))
        {
            return Err(bad("not sorted or duplicate"));
        }
        out.push(IndexEntry {
            fp,
            container: ContainerId(container),
        });
    }
    Ok(out)
}

/// Looks `fp` up in data page `page_no` (normally `page_of(fp)`) without
/// decoding the page: checksum and page number are verified, then a binary
/// search over the sorted entries.
pub fn lookup_in_page(
    page: &[u8],
    header: &IndexHeader,
    page_no: u64,
    fp: &Fingerprint,
) -> Result<Option<ContainerId>> {
    let count = check_page(page, header, page_no)?;
    Ok(search_page(page, header, count, fp))
}

/// Looks `fp` up in a page [`check_page`] has verified (`count`: the entry
/// count it returned), without verifying it again: a reader that keeps
/// verified pages in memory pays the checksum once per page.
pub fn search_page(
    page: &[u8],
    header: &IndexHeader,
    count: usize,
    fp: &Fingerprint,
) -> Option<ContainerId> {
    let w = header.fp_width;
    if fp.len() != w || !(1..=cairn_core::MAX_FINGERPRINT_LEN).contains(&w) {
        return None;
    }
    // `entry_order` on the probed bytes as they lie in the page: the same
    // width, so comparing the significant bytes is comparing fingerprints.
    let key = (page_key(fp), fp.as_bytes());
    let (mut lo, mut hi) = (0usize, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (k, c) = entry_at(page, w, mid);
        match (Fingerprint::fold64_of(k), k).cmp(&key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(ContainerId(c)),
        }
    }
    None
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
