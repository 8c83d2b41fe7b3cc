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
        let Some(cur) = self.current.read().clone() else {
            return Ok(None);
        };
        match self.lookup_in(&cur, fp) {
            Err(e) if e.is_not_found() => {
                let fresh = Self::load_latest(&*self.backend)?;
                *self.current.write() = fresh.clone();
                match fresh {
                    Some(cur) => self.lookup_in(&cur, fp),
                    None => Ok(None),
                }
            }
            other => other,
        }
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

    /// Reads every entry of the current generation (sequentially, verifying
    /// every page), sorted by fingerprint.
    pub fn read_all(&self) -> Result<Vec<IndexEntry>> {
        match self.read_all_once() {
            // A concurrent writer replaced this generation: read the newest.
            Err(e) if e.is_not_found() => {
                *self.current.write() = Self::load_latest(&*self.backend)?;
                self.read_all_once()
            }
            other => other,
        }
    }

    fn read_all_once(&self) -> Result<Vec<IndexEntry>> {
        let Some(cur) = self.current.read().clone() else {
            return Ok(Vec::new());
        };
        let key = keys::index(cur.generation);
        let bytes = self.backend.read(&key)?;
        let h = &cur.header;
        let mut out = Vec::with_capacity(h.entry_count.min(1 << 26) as usize);
        for page_no in 0..h.page_count {
            let off = codec::index_page_offset(h, page_no) as usize;
            let page = bytes.get(off..off + h.page_size).ok_or_else(|| {
                Error::corrupt(key.clone(), format!("truncated before page {page_no}"))
            })?;
            out.extend(
                codec::decode_index_page(page, h, page_no).map_err(|e| rename_corrupt(e, &key))?,
            );
        }
        if out.len() as u64 != h.entry_count {
            return Err(Error::corrupt(
                key,
                format!(
                    "header says {} entries, pages hold {}",
                    h.entry_count,
                    out.len()
                ),
            ));
        }
        Ok(out)
    }

    /// Writes a new generation holding the current entries plus `new_entries`
    /// (entries already present keep their container), then deletes older
    /// generations. `covered_below` becomes the new replay checkpoint.
    pub fn write_merged(
        &self,
        mut new_entries: Vec<IndexEntry>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        let old = self.read_all()?;
        new_entries.sort_by_key(|e| e.fp);
        new_entries.dedup_by(|a, b| a.fp == b.fp);
        let merged = merge_sorted(old, new_entries);
        let per_page = codec::entries_per_page(page_size, fp_width).max(1);
        let mut page_count =
            ((merged.len() as f64 / (per_page as f64 * TARGET_FILL)).ceil() as u64).max(1);
        let generation = self.generation() + 1;
        let bytes = loop {
            let header = IndexHeader {
                fp_width,
                page_size,
                page_count,
                entry_count: merged.len() as u64,
                covered_below,
            };
            match codec::encode_index(&header, &merged) {
                Ok(b) => break b,
                // A bucket overflowed its page: spread over more pages.
                Err(Error::InvalidInput(_)) => page_count = page_count + page_count / 2 + 1,
                Err(e) => return Err(e),
            }
        };
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

/// Merges two fingerprint-sorted entry lists; on equal fingerprints the
/// entry of `old` wins (a chunk stays where it was first stored).
fn merge_sorted(old: Vec<IndexEntry>, new: Vec<IndexEntry>) -> Vec<IndexEntry> {
    let mut out = Vec::with_capacity(old.len() + new.len());
    let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.fp.cmp(&y.fp) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => {
                    b.next();
                    true
                }
            },
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        out.push(if take_a { a.next() } else { b.next() }.expect("peeked"));
    }
    out
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
            Some(ContainerId(1)),
            "old entry wins"
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
        /// fingerprint ever merged is found (first container wins), by a page
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
                    model.entry(e.fp.as_bytes().to_vec()).or_insert(c);
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
