//! The on-disk fingerprint index (DDFS "segment index"): a paged hash table,
//! one page read per lookup. Buckets are ordered by fingerprint prefix, so a
//! merge of sorted entries writes the file sequentially.
//!
//! The file is immutable like every other object. Updates are batched (DDFS
//! §3.2: the index is updated after containers are appended): the engine keeps
//! entries of newly sealed containers in memory and, at commit, writes a new
//! generation `index/<gen+1>` holding old and new entries, then deletes the
//! older generations. The header records `covered_below`: every container with
//! a smaller id is in the file, which is the checkpoint that replay starts from.

use std::sync::Arc;

use parking_lot::RwLock;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Error, Fingerprint, Result};
use cairn_format::index::{self as codec, IndexEntry, IndexHeader};

use crate::canonical::canonical;
use crate::keys;

pub struct DiskIndex {
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    current: RwLock<Option<Current>>,
}

#[derive(Clone)]
struct Current {
    generation: u64,
    header: IndexHeader,
}

/// Fraction of page capacity a new index file is filled to on average, so
/// that random bucket sizes rarely overflow a page.
const TARGET_FILL: f64 = 0.6;

impl DiskIndex {
    /// Opens the newest index generation (none in a new repository).
    pub fn open(backend: Arc<dyn Backend>, counters: Arc<Counters>) -> Result<Self> {
        let current = Self::load_latest(&*backend)?;
        Ok(DiskIndex {
            backend,
            counters,
            current: RwLock::new(current),
        })
    }

    fn load_latest(backend: &dyn Backend) -> Result<Option<Current>> {
        let Some(generation) = backend
            .list(keys::INDEX)?
            .iter()
            .filter_map(|k| keys::parse_generation(k, keys::INDEX))
            .max()
        else {
            return Ok(None);
        };
        let key = keys::index(generation);
        let page0 = backend.read_at(
            &key,
            0,
            codec::INDEX_HEADER_LEN.min(backend.size(&key)? as usize),
        )?;
        let header = codec::decode_index_header(&page0).map_err(|e| rename_corrupt(e, &key))?;
        Ok(Some(Current { generation, header }))
    }

    pub fn generation(&self) -> u64 {
        self.current.read().as_ref().map_or(0, |c| c.generation)
    }

    pub fn header(&self) -> Option<IndexHeader> {
        self.current.read().as_ref().map(|c| c.header)
    }

    /// Every container below this id is in the file.
    pub fn covered_below(&self) -> ContainerId {
        self.current
            .read()
            .as_ref()
            .map_or(ContainerId(0), |c| c.header.covered_below)
    }

    pub fn entry_count(&self) -> u64 {
        self.current
            .read()
            .as_ref()
            .map_or(0, |c| c.header.entry_count)
    }

    /// Looks a fingerprint up with one page read. If a concurrent writer has
    /// replaced this generation meanwhile, reloads the newest one and retries.
    pub fn lookup(&self, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        Ok(self.with_current(|cur| self.lookup_in(cur, fp))?.flatten())
    }

    /// Runs `f` on the current generation (`None` when there is no index).
    /// If a concurrent writer replaced that generation meanwhile (its object
    /// is gone), reloads the newest generation and runs `f` once more.
    fn with_current<T>(&self, f: impl Fn(&Current) -> Result<T>) -> Result<Option<T>> {
        let Some(cur) = self.current.read().clone() else {
            return Ok(None);
        };
        match f(&cur) {
            Err(e) if e.is_not_found() => {
                let fresh = Self::load_latest(&*self.backend)?;
                *self.current.write() = fresh.clone();
                fresh.map(|c| f(&c)).transpose()
            }
            other => other.map(Some),
        }
    }

    /// The page `fp` lives on in the current generation: lazy lookup's buffer
    /// bucket (`000_d04706aa48332137.txt` §2.3). `None` when there is no page
    /// to read (no index yet, or a fingerprint of another width).
    pub fn page_of(&self, fp: &Fingerprint) -> Option<u64> {
        let cur = self.current.read();
        let h = &cur.as_ref()?.header;
        (h.page_count > 0 && fp.len() == h.fp_width).then(|| codec::page_of(fp, h.page_count))
    }

    /// Looks up several fingerprints, reading each distinct page they fall on
    /// once (one read for a lazy bucket, whose fingerprints share a page).
    /// Results are in the order of `fps`.
    pub fn lookup_many(&self, fps: &[Fingerprint]) -> Result<Vec<Option<ContainerId>>> {
        let found = self.with_current(|cur| {
            let h = &cur.header;
            let mut out = vec![None; fps.len()];
            if h.page_count == 0 {
                return Ok(out);
            }
            let key = keys::index(cur.generation);
            let mut order: Vec<(u64, usize)> = fps
                .iter()
                .enumerate()
                .filter(|(_, fp)| fp.len() == h.fp_width)
                .map(|(i, fp)| (codec::page_of(fp, h.page_count), i))
                .collect();
            order.sort_unstable();
            for run in order.chunk_by(|a, b| a.0 == b.0) {
                let page_no = run[0].0;
                let page = self.backend.read_at(
                    &key,
                    codec::index_page_offset(h, page_no),
                    h.page_size,
                )?;
                bump(&self.counters.index_page_reads, 1);
                for &(_, i) in run {
                    out[i] = codec::lookup_in_page(&page, h, page_no, &fps[i])
                        .map_err(|e| rename_corrupt(e, &key))?;
                }
            }
            Ok(out)
        })?;
        Ok(found.unwrap_or_else(|| vec![None; fps.len()]))
    }

    fn lookup_in(&self, cur: &Current, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        let h = &cur.header;
        if h.page_count == 0 || fp.len() != h.fp_width {
            return Ok(None);
        }
        let page_no = codec::page_of(fp, h.page_count);
        let key = keys::index(cur.generation);
        let page = self
            .backend
            .read_at(&key, codec::index_page_offset(h, page_no), h.page_size)?;
        bump(&self.counters.index_page_reads, 1);
        codec::lookup_in_page(&page, h, page_no, fp).map_err(|e| rename_corrupt(e, &key))
    }

    /// Every entry of the current generation (sequentially, verifying every
    /// page), sorted by fingerprint.
    pub fn read_all(&self) -> Result<Vec<IndexEntry>> {
        let mut out = Vec::with_capacity(self.entry_count().min(1 << 26) as usize);
        self.for_each_entry(&mut |e| out.push(*e))?;
        Ok(out)
    }

    /// Calls `f` with every entry of the current generation in fingerprint
    /// order, verifying every page; returns the count. Streams page by page.
    pub fn for_each_entry(&self, f: &mut dyn FnMut(&IndexEntry)) -> Result<u64> {
        let Some((cur, bytes)) = self.read_file()? else {
            return Ok(0);
        };
        let key = keys::index(cur.generation);
        let mut n = 0;
        for page in Pages::new(&cur.header, &bytes, &key) {
            for e in page? {
                f(&e);
                n += 1;
            }
        }
        if n != cur.header.entry_count {
            return Err(Error::corrupt(
                key,
                format!(
                    "header says {} entries, pages hold {n}",
                    cur.header.entry_count
                ),
            ));
        }
        Ok(n)
    }

    /// The current generation's header and file bytes (re-reading the newest
    /// generation if a concurrent writer replaced this one).
    fn read_file(&self) -> Result<Option<(Current, Vec<u8>)>> {
        self.with_current(|c| Ok((c.clone(), self.backend.read(&keys::index(c.generation))?)))
    }

    /// Writes a new generation holding the current entries plus `new_entries`
    /// (a new entry replaces a present one: the newest copy wins), then deletes older
    /// generations. `covered_below` becomes the new replay checkpoint.
    ///
    /// The merge streams: old pages are decoded one at a time and merged with
    /// the sorted new entries straight into output pages, so memory holds the
    /// old and new file images but never a decoded copy of the whole index.
    pub fn write_merged(
        &self,
        new_entries: Vec<IndexEntry>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        let old = self.read_file()?;
        self.write_generation(old, new_entries, covered_below, fp_width, page_size)
    }

    /// Writes a new generation holding exactly `entries` (`repair index`:
    /// the old generation is not read, so a damaged one does not matter),
    /// then deletes older generations.
    pub fn write_replacing(
        &self,
        entries: Vec<IndexEntry>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        self.write_generation(None, entries, covered_below, fp_width, page_size)
    }

    fn write_generation(
        &self,
        old: Option<(Current, Vec<u8>)>,
        mut new_entries: Vec<IndexEntry>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        // Among equal fingerprints the canonical copy is kept (`canonical`:
        // the newest container): sorted first among its equals.
        new_entries.sort_by(|a, b| {
            codec::entry_order(&a.fp)
                .cmp(&codec::entry_order(&b.fp))
                .then(b.container.cmp(&a.container))
        });
        new_entries.dedup_by(|later, first| {
            later.fp == first.fp && {
                first.container = canonical(first.container, later.container);
                true
            }
        });
        let old_count = old.as_ref().map_or(0, |(c, _)| c.header.entry_count);
        let per_page = codec::entries_per_page(page_size, fp_width).max(1);
        // Sized for the upper bound (old and new never overlap in practice).
        let upper = old_count + new_entries.len() as u64;
        let mut page_count =
            ((upper as f64 / (per_page as f64 * TARGET_FILL)).ceil() as u64).max(1);
        let generation = self.generation() + 1;
        let bytes = loop {
            match merge_into_pages(
                old.as_ref(),
                &new_entries,
                fp_width,
                page_size,
                page_count,
                covered_below,
            ) {
                Ok(b) => break b,
                // A bucket overflowed its page: spread over more pages. Page
                // keys hash whole fingerprints, so this converges fast; the
                // bound stops fingerprints crafted to collide in the 64-bit
                // page key from growing the file without end.
                Err(Error::InvalidInput(_)) if page_count < upper.max(64) * 4 => {
                    page_count = page_count + page_count / 2 + 1
                }
                Err(Error::InvalidInput(m)) => {
                    return Err(Error::invalid(format!(
                        "the fingerprint index cannot place {upper} entries ({m}): \
                         too many fingerprints share a page key"
                    )))
                }
                Err(e) => return Err(e),
            }
        };
        drop(old);
        self.backend
            .write_atomic(&keys::index(generation), &bytes)?;
        let header = codec::decode_index_header(&bytes)?;
        *self.current.write() = Some(Current { generation, header });
        for key in self.backend.list(keys::INDEX)? {
            match keys::parse_generation(&key, keys::INDEX) {
                Some(g) if g < generation => self.backend.delete(&key)?,
                _ => {}
            }
        }
        Ok(generation)
    }
}

/// Decodes the data pages of an index file image one at a time.
struct Pages<'a> {
    header: &'a IndexHeader,
    bytes: &'a [u8],
    key: &'a str,
    next: u64,
}

impl<'a> Pages<'a> {
    fn new(header: &'a IndexHeader, bytes: &'a [u8], key: &'a str) -> Self {
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
        let off = codec::index_page_offset(self.header, page_no) as usize;
        let Some(page) = self.bytes.get(off..off + self.header.page_size) else {
            return Some(Err(Error::corrupt(
                self.key.to_string(),
                format!("truncated before page {page_no}"),
            )));
        };
        Some(
            codec::decode_index_page(page, self.header, page_no)
                .map_err(|e| rename_corrupt(e, self.key)),
        )
    }
}

/// One pass of the streaming merge with a given page count; `InvalidInput`
/// if some page overflows.
fn merge_into_pages(
    old: Option<&(Current, Vec<u8>)>,
    new: &[IndexEntry],
    fp_width: usize,
    page_size: usize,
    page_count: u64,
    covered_below: ContainerId,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity((page_count as usize + 1) * page_size);
    out.resize(page_size, 0); // the header page, written last
    let key = old
        .map(|(c, _)| keys::index(c.generation))
        .unwrap_or_default();
    let mut old_pages = old.map(|(c, bytes)| Pages::new(&c.header, bytes, &key));
    let mut old_buf: std::vec::IntoIter<IndexEntry> = Vec::new().into_iter();
    let mut old_next = || -> Result<Option<IndexEntry>> {
        loop {
            if let Some(e) = old_buf.next() {
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

fn rename_corrupt(e: Error, key: &str) -> Error {
    match e {
        Error::Corrupt { what, detail } => {
            Error::corrupt(format!("index file {key} ({what})"), detail)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;

    fn fp(i: u64) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    fn entries(range: std::ops::Range<u64>, c: u64) -> Vec<IndexEntry> {
        range
            .map(|i| IndexEntry {
                fp: fp(i),
                container: ContainerId(c),
            })
            .collect()
    }

    #[test]
    fn merge_keeps_every_entry_and_lookups_find_them() {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let counters = Arc::new(Counters::default());
        let ix = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
        assert_eq!(ix.lookup(&fp(1)).unwrap(), None);
        ix.write_merged(entries(0..3000, 1), ContainerId(2), 32, 4096)
            .unwrap();
        ix.write_merged(entries(2000..6000, 2), ContainerId(3), 32, 4096)
            .unwrap();
        assert_eq!(ix.generation(), 2);
        assert_eq!(ix.entry_count(), 6000);
        assert_eq!(ix.covered_below(), ContainerId(3));
        assert_eq!(ix.lookup(&fp(10)).unwrap(), Some(ContainerId(1)));
        assert_eq!(
            ix.lookup(&fp(2500)).unwrap(),
            Some(ContainerId(2)),
            "the newest copy wins"
        );
        assert_eq!(ix.lookup(&fp(5999)).unwrap(), Some(ContainerId(2)));
        assert_eq!(ix.lookup(&fp(6000)).unwrap(), None);
        assert_eq!(backend.list(keys::INDEX).unwrap(), vec![keys::index(2)]);
        // A reader opened on the old state reloads after the generation moved on.
        let reader = DiskIndex::open(backend.clone(), counters).unwrap();
        ix.write_merged(entries(7000..7001, 3), ContainerId(4), 32, 4096)
            .unwrap();
        assert_eq!(reader.lookup(&fp(7000)).unwrap(), Some(ContainerId(3)));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use cairn_backend::MemBackend;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// The index never loses an entry: after any sequence of merges every
        /// fingerprint ever merged is found (the newest container wins), by a page
        /// lookup and by a full read.
        #[test]
        fn merges_never_lose_entries(
            rounds in proptest::collection::vec(proptest::collection::vec(any::<u32>(), 0..400), 1..6),
            width in prop_oneof![Just(6usize), Just(20), Just(32)],
            page_size in prop_oneof![Just(256usize), Just(512), Just(4096)],
        ) {
            let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
            let ix = DiskIndex::open(backend, Arc::new(Counters::default())).unwrap();
            let mut model: BTreeMap<Vec<u8>, ContainerId> = BTreeMap::new();
            for (r, keys) in rounds.iter().enumerate() {
                let c = ContainerId(r as u64 + 1);
                let entries: Vec<IndexEntry> = keys.iter().map(|k| IndexEntry {
                    fp: Fingerprint::from_slice(&blake3::hash(&k.to_le_bytes()).as_bytes()[..width]),
                    container: c,
                }).collect();
                for e in &entries {
                    model.insert(e.fp.as_bytes().to_vec(), c);
                }
                ix.write_merged(entries, ContainerId(r as u64 + 2), width, page_size).unwrap();
            }
            prop_assert_eq!(ix.entry_count(), model.len() as u64);
            let all = ix.read_all().unwrap();
            prop_assert_eq!(all.len(), model.len());
            for e in &all {
                prop_assert_eq!(model.get(e.fp.as_bytes()), Some(&e.container));
            }
            for (k, c) in &model {
                prop_assert_eq!(ix.lookup(&Fingerprint::from_slice(k)).unwrap(), Some(*c));
            }
        }
    }
}
