//! A bounded memory of index pages already read, for readers that look up
//! many fingerprints: restore and the parent-snapshot check of a backup
//! (`backup/parent.rs`) locate every chunk of every file they touch, and on
//! a tree of many small files that is thousands of lookups over a few dozen
//! pages. Without it each lookup costs an open, a seek and a read of the
//! index file; with it each page is read once.
//!
//! The dedup path never uses it: DDFS's design (`003_ea5fccc485a97c5d.txt`
//! background, `000_d04706aa48332137.txt` §2) avoids index page reads with
//! the Summary Vector and the locality cache, and the experiments count the
//! page reads that remain, so caching them there would hide what they
//! measure.
//!
//! Pages are immutable (a generation's file is never rewritten; a new
//! generation has a new key), so a cached page is keyed by generation and
//! page number and never goes stale. The budget bounds memory: once it is
//! reached the cache is emptied and fills again (the readers' access is
//! random by fingerprint, so no eviction order would do much better). A
//! page is verified (checksum, number, count) once, when it is read.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Index pages by (generation, page number), at most `budget` bytes.
pub struct PageCache {
    budget: usize,
    held: Mutex<Held>,
}

/// A verified page and its entry count.
type Page = (Arc<[u8]>, usize);

#[derive(Default)]
struct Held {
    /// Verified pages with their entry counts.
    pages: HashMap<(u64, u64), Page>,
    bytes: usize,
}

impl PageCache {
    /// A cache holding at most `budget` bytes of pages.
    pub fn new(budget: usize) -> Self {
        PageCache {
            budget,
            held: Mutex::new(Held::default()),
        }
    }

    /// The page and its entry count, from memory or from `read`, which
    /// verifies and returns a run of pages holding it (all kept).
    pub fn get_or_read_run(
        &self,
        generation: u64,
        page_no: u64,
        read: impl FnOnce() -> cairn_core::Result<Vec<(u64, Page)>>,
    ) -> cairn_core::Result<Page> {
        if let Some(p) = self.held.lock().pages.get(&(generation, page_no)) {
            return Ok(p.clone());
        }
        let run = read()?;
        let mut asked = None;
        let mut held = self.held.lock();
        for (no, (page, count)) in run {
            if no == page_no {
                asked = Some((page.clone(), count));
            }
            if held.bytes + page.len() > self.budget {
                held.pages.clear();
                held.bytes = 0;
            }
            if page.len() <= self.budget {
                held.bytes += page.len();
                held.pages.insert((generation, no), (page, count));
            }
        }
        asked.ok_or_else(|| {
            cairn_core::Error::invalid(format!("a run of index pages lacks page {page_no}"))
        })
    }

    /// Bytes of pages held.
    pub fn bytes(&self) -> usize {
        self.held.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A read of one page (a run of one).
    fn one(
        cache: &PageCache,
        generation: u64,
        page_no: u64,
        read: impl FnOnce() -> cairn_core::Result<Page>,
    ) -> cairn_core::Result<Page> {
        cache.get_or_read_run(generation, page_no, || read().map(|p| vec![(page_no, p)]))
    }

    #[test]
    fn a_page_is_read_once_and_the_budget_holds() {
        let cache = PageCache::new(10);
        let reads = Cell::new(0);
        let read = |b: u8| {
            reads.set(reads.get() + 1);
            Ok((Arc::from(vec![b; 4]), b as usize))
        };
        let page = |r: cairn_core::Result<(Arc<[u8]>, usize)>| r.unwrap().0.to_vec();
        assert_eq!(page(one(&cache, 1, 0, || read(7))), [7; 4]);
        assert_eq!(one(&cache, 1, 0, || read(9)).unwrap().1, 7);
        assert_eq!(reads.get(), 1);
        // another generation's page 0 is another page
        assert_eq!(page(one(&cache, 2, 0, || read(3))), [3; 4]);
        assert_eq!(cache.bytes(), 8);
        // a third page passes the budget: the cache starts over
        one(&cache, 1, 1, || read(1)).unwrap();
        assert_eq!(cache.bytes(), 4);
        one(&cache, 1, 0, || read(5)).unwrap();
        assert_eq!(reads.get(), 4);
        // a read error is returned and nothing is kept
        let err = one(&cache, 9, 9, || {
            Err(cairn_core::Error::NotFound("x".into()))
        });
        assert!(err.is_err());
        assert_eq!(cache.bytes(), 8);
    }

    /// A run's pages are all kept: asking for its other pages reads nothing.
    #[test]
    fn a_run_keeps_every_page_it_read() {
        let cache = PageCache::new(1 << 20);
        let reads = Cell::new(0);
        let run = || {
            reads.set(reads.get() + 1);
            Ok((4..8u64)
                .map(|n| (n, (Arc::from(vec![n as u8; 16]), n as usize)))
                .collect())
        };
        assert_eq!(cache.get_or_read_run(1, 5, run).unwrap().1, 5);
        for n in 4..8 {
            assert_eq!(cache.get_or_read_run(1, n, run).unwrap().1, n as usize);
        }
        assert_eq!(reads.get(), 1);
        // a run that lacks the page asked for is an error, not a panic
        assert!(cache.get_or_read_run(2, 9, run).is_err());
    }
}
