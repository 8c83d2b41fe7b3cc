//! The on-disk fingerprint index (DDFS "segment index"): a paged hash table,
//! one page read per lookup. Buckets are ordered by fingerprint prefix, so a
//! merge of sorted entries writes the file sequentially.
//!
//! The file is immutable like every other object. Updates are batched (DDFS
//! §3.2: the index is updated after containers are appended): the engine keeps
//! entries of newly sealed containers in memory and, at commit, writes what
//! changed as a delta `index/<gen>.<seq>` beside the file (`overlay.rs`), so a
//! commit costs what it adds, not the size of the index. When the deltas pile
//! up (more than [`MAX_DELTAS`], or more changes than a [`DELTA_SHARE`] of the
//! file's entries) the commit instead merges file, deltas and new entries into
//! a new generation `index/<gen+1>` and deletes the older generations and their
//! deltas (only a writer alone merges; docs/concurrency.md). The file header
//! records `covered_below` (every container with a smaller id is in the
//! file); the deltas cover the containers their puts name (`coverage.rs`).

use std::sync::Arc;

use parking_lot::RwLock;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Error, Fingerprint, Result};
use cairn_format::index::{self as codec, IndexEntry, IndexHeader};

use crate::canonical::canonical;
use crate::object_names;

use super::coverage::Coverage;
use super::file_pages::{check_entry_count, merge_into_pages, rename_corrupt, Pages};
pub use super::overlay::IndexUpdate;
use super::overlay::{Change, Overlay, OverlayMemo};
use super::page_cache::PageCache;
use cairn_core::{FpMap, FpSet};

/// Times an open looks again when what it listed is gone (`load_latest`).
/// A merge beside writers deletes the deltas it folded one after another
/// (a round trip each on object storage), and a reader that lists meanwhile
/// may meet the next one gone at every try: it pauses a little longer each
/// time ([`pause_before_retry`]), about 4 s in all, which outlasts the
/// deletes of one merge.
const LOAD_TRIES: u32 = 24;

/// The pause before try `tries` (from 1) of a load whose objects a merge
/// deleted: 5 ms, doubling, at most 250 ms.
fn pause_before_retry(tries: u32) {
    let ms = (5u64 << tries.min(6)).min(250);
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Runs `attempt` (given how many tries failed before it) until it
/// succeeds or fails other than by a missing object, at most
/// [`LOAD_TRIES`] more times, pausing before each try after the first
/// retry.
fn retry_while_gone<T>(mut attempt: impl FnMut(u32) -> Result<T>) -> Result<T> {
    let mut tries = 0;
    loop {
        match attempt(tries) {
            Err(e) if e.is_not_found() && tries < LOAD_TRIES => {
                tries += 1;
                if tries > 1 {
                    pause_before_retry(tries - 1);
                }
            }
            other => return other,
        }
    }
}
/// Deltas over one generation before a commit merges them into the file.
pub const MAX_DELTAS: u32 = 16;
/// Changes held in deltas, as a share of the file's entries (1/8), before a
/// commit merges them: the deltas' RAM stays a fraction of the index.
pub const DELTA_SHARE: u64 = 8;

/// The newest index generation in a listing of `index/`.
pub(crate) fn newest_generation(listing: &[String]) -> Option<u64> {
    listing
        .iter()
        .filter_map(|k| object_names::parse_generation(k, object_names::INDEX))
        .max()
}

/// Whether `update` may be folded into a new file straight after the
/// deltas of `overlay`, rather than written as a delta first. A merge
/// that stops before deleting the deltas it folded leaves some of them
/// listed, and readers apply them again over the new file (`overlay.rs`):
/// harmless for the deltas among themselves, but not for an update folded
/// after them. A removal in the update would be undone by an older delta's
/// put applied again after it, and a put would be forgotten by an older
/// delta's removal whose bound it lies below. Such an update goes through
/// a delta, so it is applied again in its place. Backups' puts name new
/// containers, above every bound: they are folded straight.
fn may_fold_after_the_deltas(overlay: &Overlay, update: &IndexUpdate) -> bool {
    if overlay.applied.is_empty() {
        return true;
    }
    update.removes.is_empty()
        && update.puts.iter().all(|e| {
            overlay
                .lookup(&e.fp)
                .is_none_or(|c| !c.removes() || e.container >= c.below())
        })
}

pub struct DiskIndex {
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    current: RwLock<Option<Current>>,
    /// Pages already read, for readers that look up many fingerprints
    /// (`with_page_cache`); `None` on the dedup path.
    pages: Option<PageCache>,
    /// Generations up to here existed once (`with_generation_floor`): the
    /// next one written is above them, so a name never names two files.
    floor: u64,
    /// Commits write deltas while they can ([`DiskIndex::prefer_deltas`]).
    deltas_only: std::sync::atomic::AtomicBool,
    /// Commits always write deltas: other writers run beside this one
    /// ([`DiskIndex::beside_other_writers`]).
    never_merge: std::sync::atomic::AtomicBool,
    /// The next commit merges, whatever it holds (a compaction).
    merge_next: std::sync::atomic::AtomicBool,
    /// Other writers were in flight at the open: a delta lists the numbers
    /// taken before its first create ([`DiskIndex::expect_other_commits`]).
    others_in_flight: std::sync::atomic::AtomicBool,
    /// The deltas this handle wrote, in order: (generation, number).
    written_deltas: parking_lot::Mutex<Vec<(u64, u32)>>,
    /// Tests: a merge stops (as if killed) after deleting this many of the
    /// deltas it folded.
    #[cfg(test)]
    stop_after_deletes: std::sync::atomic::AtomicUsize,
    /// Where loads of the deltas are shared with the repository handle's
    /// other opens ([`DiskIndex::open_memoized`]).
    memo: Option<Arc<OverlayMemo>>,
}

#[derive(Clone)]
struct Current {
    generation: u64,
    header: IndexHeader,
    overlay: Arc<Overlay>,
}

/// The deltas of `generation` as `listing` shows them, through `memo`
/// where there is one.
fn load_overlay(
    backend: &dyn Backend,
    listing: &[String],
    generation: u64,
    fp_width: usize,
    memo: Option<&OverlayMemo>,
) -> Result<Arc<Overlay>> {
    match memo {
        Some(m) => Overlay::load_memoized(backend, listing, generation, fp_width, m),
        None => Overlay::load(backend, listing, generation, fp_width).map(Arc::new),
    }
}

/// Fraction of page capacity a new index file is filled to on average, so
/// that random bucket sizes rarely overflow a page.
const TARGET_FILL: f64 = 0.6;

/// Bytes a cached reader reads at once around the page it asks for: a
/// sealed repository authenticates 16 KiB blocks whole
/// (`sealed_backend::BLOCK`), so reading a 4 KiB page paid for the whole
/// block, and readers that look up every chunk of a tree (restore, the
/// parent check of a backup) touch most pages of a small index: a run
/// per read makes a quarter of the reads and authentications
/// (docs/concurrency.md, "CPU of a backup beside seven others"). A plain
/// store reads a run about as fast as one page.
const RUN_BYTES: usize = crate::sealed_backend::BLOCK;

/// The aligned run of pages `[first, end)` holding data page `page_no`:
/// runs are aligned in the file (page `n` is its slot `n + 1`, after the
/// header's), so a run is one sealed block, and never pass the last page.
fn run_of(page_no: u64, page_size: usize, page_count: u64) -> (u64, u64) {
    let per = (RUN_BYTES / page_size.max(1)).max(1) as u64;
    let slot = page_no + 1;
    let first = (slot - slot % per).max(1) - 1;
    let end = (slot - slot % per + per - 1).min(page_count);
    (first, end.max(page_no + 1))
}

impl DiskIndex {
    /// Opens the newest index generation (none in a new repository).
    pub fn open(backend: Arc<dyn Backend>, counters: Arc<Counters>) -> Result<Self> {
        Self::open_memoized(backend, counters, None)
    }

    /// [`DiskIndex::open`], loading the deltas through `memo` (the
    /// repository handle's: `Repository::overlays`), now and on every
    /// reload.
    pub fn open_memoized(
        backend: Arc<dyn Backend>,
        counters: Arc<Counters>,
        memo: Option<Arc<OverlayMemo>>,
    ) -> Result<Self> {
        let current = Self::load_latest(&*backend, memo.as_deref())?;
        Ok(DiskIndex {
            memo,
            backend,
            counters,
            current: RwLock::new(current),
            pages: None,
            floor: 0,
            deltas_only: std::sync::atomic::AtomicBool::new(false),
            never_merge: std::sync::atomic::AtomicBool::new(false),
            merge_next: std::sync::atomic::AtomicBool::new(false),
            others_in_flight: std::sync::atomic::AtomicBool::new(false),
            written_deltas: parking_lot::Mutex::new(Vec::new()),
            #[cfg(test)]
            stop_after_deletes: std::sync::atomic::AtomicUsize::new(usize::MAX),
        })
    }

    /// Keeps up to `budget` bytes of the pages read in memory, so each is
    /// read once (restore, the parent-snapshot check; `page_cache.rs`).
    pub fn with_page_cache(mut self, budget: usize) -> Self {
        self.pages = Some(PageCache::new(budget));
        self
    }

    /// Runs `f` on page `page_no` of generation `cur`, verified, and its
    /// entry count: from the page cache if there is one (verified once,
    /// when read; only real reads are counted), else read and verified. The
    /// dedup path (no cache) uses the bytes as read, with no copy.
    fn with_page<T>(
        &self,
        cur: &Current,
        page_no: u64,
        f: impl FnOnce(&[u8], usize) -> T,
    ) -> Result<T> {
        match &self.pages {
            None => {
                let (page, counts) = self.read_pages(cur, page_no, page_no + 1)?;
                Ok(f(&page, counts[0]))
            }
            Some(cache) => {
                let (page, count) = cache.get_or_read_run(cur.generation, page_no, || {
                    let h = &cur.header;
                    let (first, end) = run_of(page_no, h.page_size, h.page_count);
                    let (bytes, counts) = self.read_pages(cur, first, end)?;
                    Ok((first..end)
                        .zip(bytes.chunks_exact(h.page_size))
                        .zip(counts)
                        .map(|((no, page), count)| (no, (Arc::from(page), count)))
                        .collect())
                })?;
                Ok(f(&page, count))
            }
        }
    }

    /// Data pages `[first, end)` of generation `cur` in one read (counted
    /// once), each verified: their bytes and each one's entry count.
    fn read_pages(&self, cur: &Current, first: u64, end: u64) -> Result<(Vec<u8>, Vec<usize>)> {
        let h = &cur.header;
        let key = object_names::index(cur.generation);
        let bytes = self.backend.read_at(
            &key,
            codec::index_page_offset(h, first),
            (end - first) as usize * h.page_size,
        )?;
        bump(&self.counters.index_page_reads, 1);
        let counts = (first..end)
            .zip(bytes.chunks_exact(h.page_size))
            .map(|(no, page)| codec::check_page(page, h, no).map_err(|e| rename_corrupt(e, &key)))
            .collect::<Result<_>>()?;
        Ok((bytes, counts))
    }

    /// The newest generation with its deltas, listed again (a few times)
    /// when what was listed is gone: a merge replaced the generation.
    fn load_latest(backend: &dyn Backend, memo: Option<&OverlayMemo>) -> Result<Option<Current>> {
        retry_while_gone(|_| Self::load_listed(backend, memo))
    }

    fn load_listed(backend: &dyn Backend, memo: Option<&OverlayMemo>) -> Result<Option<Current>> {
        let listing = backend.list(object_names::INDEX)?;
        let Some(generation) = newest_generation(&listing) else {
            return Ok(None);
        };
        let key = object_names::index(generation);
        let page0 = backend.read_at(
            &key,
            0,
            codec::INDEX_HEADER_LEN.min(backend.size(&key)? as usize),
        )?;
        let header = codec::decode_index_header(&page0).map_err(|e| rename_corrupt(e, &key))?;
        let overlay = load_overlay(backend, &listing, generation, header.fp_width, memo)?;
        Ok(Some(Current {
            generation,
            header,
            overlay,
        }))
    }

    /// Deltas applied over the current generation's file.
    pub fn delta_count(&self) -> u32 {
        self.current.read().as_ref().map_or(0, |c| c.overlay.seq)
    }

    /// Writes generations above `floor` only: after the files up to it
    /// were deleted (`repair index`), a new file never takes an old name,
    /// which a reader's cache may still hold (`local_cache.rs`).
    pub fn with_generation_floor(mut self, floor: u64) -> Self {
        self.floor = floor;
        self
    }

    /// The generation the next merge writes: above the current one and
    /// the floor.
    pub fn next_generation(&self) -> u64 {
        self.generation().max(self.floor) + 1
    }

    pub fn generation(&self) -> u64 {
        self.current.read().as_ref().map_or(0, |c| c.generation)
    }

    pub fn header(&self) -> Option<IndexHeader> {
        self.current.read().as_ref().map(|c| c.header)
    }

    /// Every container below this id is indexed (by the file or its deltas).
    pub fn covered_below(&self) -> ContainerId {
        self.current.read().as_ref().map_or(ContainerId(0), |c| {
            // An older generation's delta applied over a newer file may
            // carry a lower mark than the file's.
            c.overlay
                .covered_below
                .map_or(c.header.covered_below, |d| d.max(c.header.covered_below))
        })
    }

    /// Which containers the index covers (`coverage.rs`): every one below
    /// the file's mark, and every one a delta's puts name.
    pub fn coverage(&self) -> Coverage {
        let cur = self.current.read();
        match cur.as_ref() {
            Some(c) => Coverage::new(c.header.covered_below, c.overlay.containers.clone()),
            None => Coverage::default(),
        }
    }

    /// The file's own `covered_below`: what its Summary Vector checkpoint covers.
    pub fn base_covered_below(&self) -> ContainerId {
        self.current
            .read()
            .as_ref()
            .map_or(ContainerId(0), |c| c.header.covered_below)
    }

    /// Entries indexed: the file's, plus what its deltas store, minus what
    /// they remove (an upper bound when a delta re-stores a file entry).
    pub fn entry_count(&self) -> u64 {
        self.current.read().as_ref().map_or(0, |c| {
            let stored = c.overlay.stored().count() as u64;
            (c.header.entry_count + stored).saturating_sub(c.overlay.removed() as u64)
        })
    }

    /// Calls `f` with every fingerprint the deltas store (a Summary Vector
    /// loaded from the file's checkpoint adds them).
    pub fn for_each_delta_entry(&self, f: &mut dyn FnMut(&IndexEntry)) {
        if let Some(c) = self.current.read().as_ref() {
            c.overlay.stored().for_each(|e| f(&e));
        }
    }

    /// Whether the current generation's deltas removed any entry (a
    /// collection's commit written as a delta).
    pub fn deltas_removed_entries(&self) -> bool {
        self.current
            .read()
            .as_ref()
            .is_some_and(|c| c.overlay.changes.values().any(|ch| ch.removes()))
    }

    /// Looks a fingerprint up with one page read. If a concurrent writer has
    /// replaced this generation meanwhile, reloads the newest one and retries.
    pub fn lookup(&self, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        Ok(self
            .with_current(|cur| match cur.overlay.lookup(fp) {
                Some(change) if change.forgets_file() => Ok(change.put()),
                // A put may be older than the file's entry (a delta a merge
                // folded and had not deleted yet, or one a writer that
                // opened before the merge added after it): combined with
                // the file's, canonically.
                Some(change) => Ok(change.over(self.lookup_in(cur, fp)?)),
                None => self.lookup_in(cur, fp),
            })?
            .flatten())
    }

    /// Runs `f` on the current generation (`None` when there is no index).
    /// If a concurrent writer replaced that generation meanwhile (its object
    /// is gone), reloads the newest generation and runs `f` again.
    fn with_current<T>(&self, mut f: impl FnMut(&Current) -> Result<T>) -> Result<Option<T>> {
        let Some(cur) = self.current.read().clone() else {
            return Ok(None);
        };
        // A merge beside writers replaces generations while others read
        // (docs/concurrency.md): each reload meets a newer one, and only
        // merges that follow each other within one read fail it. A reload
        // is one listing; one that meets a deleted object counts as a try.
        let mut cur = cur;
        retry_while_gone(|tries| {
            if tries > 0 {
                match Self::load_listed(&*self.backend, self.memo.as_deref())? {
                    Some(fresh) => {
                        *self.current.write() = Some(fresh.clone());
                        cur = fresh;
                    }
                    None => {
                        *self.current.write() = None;
                        return Ok(None);
                    }
                }
            }
            f(&cur).map(Some)
        })
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
        let found = self.with_current(|cur| self.lookup_many_in(cur, fps))?;
        Ok(found.unwrap_or_else(|| vec![None; fps.len()]))
    }

    /// [`Self::lookup_many`] in generation `cur` as loaded.
    fn lookup_many_in(
        &self,
        cur: &Current,
        fps: &[Fingerprint],
    ) -> Result<Vec<Option<ContainerId>>> {
        let h = &cur.header;
        let mut out = vec![None; fps.len()];
        let mut order: Vec<(u64, usize)> = Vec::with_capacity(fps.len());
        let mut changes: Vec<Option<Change>> = vec![None; fps.len()];
        for (i, fp) in fps.iter().enumerate() {
            let change = cur.overlay.lookup(fp);
            match change {
                Some(c) if c.forgets_file() => out[i] = c.put(),
                _ if h.page_count > 0 && fp.len() == h.fp_width => {
                    changes[i] = change;
                    order.push((codec::page_of(fp, h.page_count), i));
                }
                Some(c) => out[i] = c.over(None),
                None => {}
            }
        }
        order.sort_unstable();
        for run in order.chunk_by(|a, b| a.0 == b.0) {
            let page_no = run[0].0;
            self.with_page(cur, page_no, |page, count| {
                for &(_, i) in run {
                    let found = codec::search_page(page, h, count, &fps[i]);
                    out[i] = changes[i].map_or(found, |c| c.over(found));
                }
            })?;
        }
        Ok(out)
    }

    /// Leaves out of a conditional update (`removes_below`) the removals
    /// of fingerprints that `cur` already names in a container at or above
    /// the mark. The overlay applies the condition to what the deltas put
    /// (`Overlay::apply`), but a removal that reaches the file forgets its
    /// entry whatever it names, and a merge may have folded a backup's
    /// newer entry into the file between a collection's judgement and its
    /// commit (test `a_conditional_removal_keeps_a_newer_entry_the_file_holds`).
    /// Costs a page read per distinct page of the removals the deltas do
    /// not decide: a collection's commit, not a backup's.
    fn drop_removals_of_newer_entries(
        &self,
        cur: &Current,
        update: &mut IndexUpdate,
    ) -> Result<()> {
        let Some(below) = update.removes_below else {
            return Ok(());
        };
        let undecided: Vec<Fingerprint> = update
            .removes
            .iter()
            .filter(|fp| cur.overlay.lookup(fp).is_none())
            .copied()
            .collect();
        if undecided.is_empty() {
            return Ok(());
        }
        let found = self.lookup_many_in(cur, &undecided)?;
        let newer: FpSet = undecided
            .iter()
            .zip(found)
            .filter(|(_, c)| c.is_some_and(|c| c >= below))
            .map(|(fp, _)| *fp)
            .collect();
        if !newer.is_empty() {
            update.removes.retain(|fp| !newer.contains(fp));
        }
        Ok(())
    }

    fn lookup_in(&self, cur: &Current, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        let h = &cur.header;
        if h.page_count == 0 || fp.len() != h.fp_width {
            return Ok(None);
        }
        let page_no = codec::page_of(fp, h.page_count);
        self.with_page(cur, page_no, |page, count| {
            codec::search_page(page, h, count, fp)
        })
    }

    /// Every entry of the current generation with its deltas applied
    /// (sequentially, verifying every page).
    pub fn read_all(&self) -> Result<Vec<IndexEntry>> {
        let mut out = Vec::with_capacity(self.entry_count().min(1 << 26) as usize);
        self.for_each_entry(&mut |e| out.push(*e))?;
        Ok(out)
    }

    /// Calls `f` with every entry of the current generation, deltas applied
    /// (file entries in file order, then what only the deltas hold),
    /// verifying every page; returns the count. Streams page by page.
    pub fn for_each_entry(&self, f: &mut dyn FnMut(&IndexEntry)) -> Result<u64> {
        let Some((cur, bytes)) = self.read_file()? else {
            return Ok(0);
        };
        let key = object_names::index(cur.generation);
        let mut n = 0;
        let mut emitted = 0;
        let mut combined = FpSet::default();
        for page in Pages::new(&cur.header, &bytes, &key) {
            for e in page? {
                n += 1;
                let change = cur.overlay.changes.get(&e.fp);
                if change.is_some() {
                    combined.insert(e.fp);
                }
                if let Some(e) = changed(change, e) {
                    f(&e);
                    emitted += 1;
                }
            }
        }
        for e in cur.overlay.stored() {
            if !combined.contains(&e.fp) {
                f(&e);
                emitted += 1;
            }
        }
        check_entry_count(&cur.header, n, &key)?;
        Ok(emitted)
    }

    /// [`Self::for_each_entry`] for a callback that may see an entry more
    /// than once (a filter's inserts): the file is read a run at a time,
    /// never held whole, and a generation replaced mid-read is reloaded and
    /// read again from its start; a fingerprint both the file and a delta
    /// hold is passed twice. The Summary Vector's rebuild at a merge held
    /// the whole file beside the merge's own buffers (issue 35).
    pub fn for_each_entry_at_least_once(&self, f: &mut dyn FnMut(&IndexEntry)) -> Result<()> {
        self.with_current(|c| {
            let cur = self.with_stored_deltas(c)?;
            let key = object_names::index(cur.generation);
            let mut n = 0;
            for page in Pages::stored_unlocked(&cur.header, &*self.backend, &key) {
                for e in page? {
                    n += 1;
                    if let Some(e) = changed(cur.overlay.changes.get(&e.fp), e) {
                        f(&e);
                    }
                }
            }
            check_entry_count(&cur.header, n, &key)?;
            for e in cur.overlay.stored() {
                f(&e);
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Verifies every page of the current generation (checksums, page
    /// numbers, entry counts against the header) with one sequential read
    /// and no decoding: a damaged file shows up now, not half-way through
    /// a backup. Returns the file's entry count.
    ///
    /// The file is read a run at a time (`Backend::read_run`), never held
    /// whole: at every backup's open it was the process's largest buffer
    /// once the index passed the in-memory part (issue 35). A generation
    /// replaced mid-read is reloaded and verified from its start.
    pub fn verify(&self) -> Result<u64> {
        let n = self.with_current(|c| {
            let cur = self.with_stored_deltas(c)?;
            let key = object_names::index(cur.generation);
            let h = &cur.header;
            let mut pages = Pages::stored_unlocked(h, &*self.backend, &key);
            let mut n = 0u64;
            for page_no in 0..h.page_count {
                let page = pages.page(page_no)?;
                n += codec::verify_index_page(page, h, page_no)
                    .map_err(|e| rename_corrupt(e, &key))? as u64;
            }
            check_entry_count(h, n, &key)?;
            Ok(n)
        })?;
        Ok(n.unwrap_or(0))
    }

    /// The current generation's file, read whole, with every delta of it
    /// now in the store applied (not only those this handle loaded;
    /// re-reading the newest generation if a concurrent writer replaced
    /// this one).
    fn read_file(&self) -> Result<Option<(Current, Vec<u8>)>> {
        self.with_current(|c| {
            let c = self.with_stored_deltas(c)?;
            let bytes = self.backend.read(&object_names::index(c.generation))?;
            Ok((c, bytes))
        })
    }

    /// The current generation with every delta of it now in the store
    /// applied, its file checked to be there (a generation gone is
    /// reloaded as in [`Self::read_file`]); a merge reads the file later,
    /// a run of pages at a time, holding the lock that keeps other merges
    /// from deleting it.
    fn current_with_deltas(&self) -> Result<Option<Current>> {
        self.with_current(|c| {
            let c = self.with_stored_deltas(c)?;
            self.backend.size(&object_names::index(c.generation))?;
            Ok(c)
        })
    }

    /// `c` with the deltas of its generation listed now applied; `NotFound`
    /// if a newer generation is listed (see [`Self::with_current`]).
    fn with_stored_deltas(&self, c: &Current) -> Result<Current> {
        let listing = self.backend.list(object_names::INDEX)?;
        // A newer generation listed: a merge replaced this one and is
        // deleting its deltas (after writing the new file), so the deltas
        // still listed may be only some of them, and the file with them is
        // not the index. Reloaded like a generation gone.
        if newest_generation(&listing) > Some(c.generation) {
            return Err(Error::NotFound(format!(
                "index generation {} (replaced by a merge)",
                c.generation
            )));
        }
        let mut c = c.clone();
        c.overlay = load_overlay(
            &*self.backend,
            &listing,
            c.generation,
            c.header.fp_width,
            self.memo.as_deref(),
        )?;
        Ok(c)
    }

    /// [`Self::merge`] of puts only.
    pub fn write_merged(
        &self,
        new_entries: Vec<IndexEntry>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        self.merge(
            IndexUpdate::puts(new_entries),
            covered_below,
            fp_width,
            page_size,
        )
    }

    /// How many folded deltas a merge deletes before it stops (tests: as
    /// if killed half-way).
    fn deletes_allowed(&self) -> usize {
        #[cfg(test)]
        return self
            .stop_after_deletes
            .load(std::sync::atomic::Ordering::Relaxed);
        #[cfg(not(test))]
        usize::MAX
    }

    /// From now on commits add deltas, however large, until [`MAX_DELTAS`]:
    /// a delta costs the bytes of what it changes, a merge the whole index
    /// and its checkpoint (a collection on a full disk, `gc/dead_first.rs`).
    pub fn prefer_deltas(&self) {
        self.deltas_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// From now on commits only add deltas (once a file exists): a merge
    /// deletes deltas other writers may be adding to (docs/concurrency.md).
    pub fn beside_other_writers(&self) {
        self.never_merge
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether commits only add deltas because other writers may commit
    /// beside this handle ([`DiskIndex::beside_other_writers`]).
    pub fn is_beside_other_writers(&self) -> bool {
        self.never_merge.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The deltas this handle wrote, in order, as (generation, number):
    /// every number below one in its generation was taken when it was
    /// created.
    pub fn written_deltas(&self) -> Vec<(u64, u32)> {
        self.written_deltas.lock().clone()
    }

    /// Other writers had containers in flight when this handle opened, so
    /// they will most likely have committed deltas before this one does:
    /// its delta lists `index/` first and takes the next free number (one
    /// listing instead of a refused create, the read of the delta in its
    /// way and then the listing, with eight writers nearly every commit).
    pub fn expect_other_commits(&self) {
        self.others_in_flight
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The next commit merges every delta listed into a new generation,
    /// even an empty one (a compaction beside writers, `compact.rs`).
    pub fn merge_next(&self) {
        self.merge_next
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Self::merge_next`] was asked.
    pub fn merge_asked(&self) -> bool {
        self.merge_next.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a commit of `update` should merge (rather than add a delta):
    /// there is no file yet, the deltas reached [`MAX_DELTAS`], or they would
    /// hold more changes than 1/[`DELTA_SHARE`] of the file's entries (unless
    /// deltas are preferred).
    pub fn wants_merge(&self, update: &IndexUpdate) -> bool {
        let cur = self.current.read();
        let Some(c) = cur.as_ref() else {
            return true;
        };
        if self.merge_asked() {
            return true;
        }
        if self.never_merge.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        if self.deltas_only.load(std::sync::atomic::Ordering::Relaxed) {
            return c.overlay.seq >= MAX_DELTAS;
        }
        let changes = (c.overlay.changes.len() + update.len()) as u64;
        c.overlay.seq >= MAX_DELTAS || changes * DELTA_SHARE > c.header.entry_count
    }

    /// Writes `update` as the next delta of the current generation (a
    /// commit whose cost is what it changed). Requires a current file.
    pub fn write_delta(
        &self,
        update: IndexUpdate,
        covered_below: ContainerId,
        fp_width: usize,
    ) -> Result<u32> {
        let mut cur = self
            .current
            .read()
            .clone()
            .ok_or_else(|| Error::invalid("an index delta needs an index file to apply to"))?;
        // Readers apply older generations' deltas before the newest's, so
        // a delta written into a generation a merge has replaced comes
        // before deltas written earlier into the newer one. Puts do not
        // mind, but a removal would be undone by a put of a container
        // below its bound that another writer committed before it (a
        // collection holds its handle from Merge to Forget, and the kill
        // test found such a put resurrect an entry naming a container the
        // collection then deleted). A delta that removes is therefore
        // written into the newest generation listed now: every delta
        // committed before this one is in it or older.
        // The removals are then judged against that generation's file; a
        // merge that replaces it meanwhile deletes the file under the
        // lookups (a collection's commit beside compacting writers failed
        // so), and the judgement starts again from the newer generation,
        // as a reader's reload does (`with_current`).
        let mut update = update;
        if !update.removes.is_empty() {
            retry_while_gone(|tries| {
                let newer_listed = tries > 0 || {
                    let listing = self.backend.list(object_names::INDEX)?;
                    newest_generation(&listing) > Some(cur.generation)
                };
                if newer_listed {
                    if let Some(fresh) = Self::load_listed(&*self.backend, self.memo.as_deref())? {
                        *self.current.write() = Some(fresh.clone());
                        cur = fresh;
                    }
                }
                // Changes `update` only once its lookups succeeded.
                self.drop_removals_of_newer_entries(&cur, &mut update)
            })?;
        }
        let mut removes = update.removes;
        removes.sort_unstable();
        removes.dedup();
        // Puts of one fingerprint within the update collapse canonically
        // (sorted in place: a map of them held a backup's new chunks twice).
        let mut puts = update.puts;
        puts.sort_unstable_by_key(|e| e.fp);
        collapse_canonically(&mut puts);
        // The next free number, created only if absent: writers side by
        // side never replace each other's deltas, and leave no gap.
        let mut delta = cairn_format::index_delta::IndexDelta {
            fp_width,
            base_generation: cur.generation,
            seq: cur.overlay.seq,
            covered_below,
            removes_below: update.removes_below.unwrap_or(ContainerId(u64::MAX)),
            removes,
            puts,
        };
        // Every number up to the last listed is taken, so the next one
        // leaves no gap.
        let take_next_free = |delta: &mut cairn_format::index_delta::IndexDelta| -> Result<()> {
            let listing = self.backend.list(object_names::INDEX)?;
            let last = super::overlay::delta_seqs(&listing, cur.generation).max();
            delta.seq = delta.seq.max(last.unwrap_or(0));
            Ok(())
        };
        let mut listed = self
            .others_in_flight
            .load(std::sync::atomic::Ordering::Relaxed);
        if listed {
            take_next_free(&mut delta)?;
        }
        loop {
            delta.seq += 1;
            let bytes = cairn_format::index_delta::encode_index_delta(&delta)?;
            let key = object_names::index_delta(cur.generation, delta.seq);
            // The delta names this writer's containers, so no other writer
            // writes its bytes: finding them means our create took effect.
            // Another writer's delta found in the way is of the generation
            // this commit takes as the newest, a stable read as an open's.
            if cairn_core::backend::create_new_or_own_stable(&*self.backend, &key, &bytes)? {
                break;
            }
            // Taken: other writers committed since this handle's open. One
            // listing says where their numbers end, instead of a refused
            // create and a read (two round trips on object storage) for
            // each delta they wrote; every number up to the last listed is
            // taken, so the next one leaves no gap.
            if !listed {
                listed = true;
                take_next_free(&mut delta)?;
            }
        }
        let seq = delta.seq;
        self.written_deltas.lock().push((cur.generation, seq));
        // The overlay is changed in place when nothing but this handle and
        // the memo hold it (a reader's copy makes `make_mut` clone it), so
        // the index's largest structure is not held twice at each commit.
        let mut current = self.current.write();
        let mut overlay = std::mem::take(&mut cur.overlay);
        if let Some(held) = current.as_mut() {
            if Arc::ptr_eq(&held.overlay, &overlay) {
                held.overlay = Arc::default();
            }
        }
        let memo = self
            .memo
            .as_deref()
            .and_then(|m| m.take_if_holding(&overlay));
        let grown = Arc::make_mut(&mut overlay);
        let follows = grown.seq + 1 == seq;
        grown.apply(&delta.removes, update.removes_below, &delta.puts);
        grown.seq = seq;
        grown.applied.push((cur.generation, seq));
        grown.covered_below = grown.covered_below.max(Some(covered_below));
        // The memo may hold it again only if no other writer's delta came
        // between: its overlay is every delta up to its `seq`.
        if let (Some(m), Some(generation), true) = (self.memo.as_deref(), memo, follows) {
            m.hold(generation, fp_width, overlay.clone());
        }
        *current = Some(Current { overlay, ..cur });
        Ok(seq)
    }

    /// Writes a new generation holding the current entries (deltas applied)
    /// with `update` applied, then deletes older generations and every delta.
    /// `covered_below` becomes the new replay checkpoint.
    ///
    /// The merge streams: old pages are read from the store in runs and
    /// decoded one at a time, merged with the sorted new entries straight
    /// into output pages, and those are handed to the store as they are
    /// made (`create_streamed`: a local repository writes them to a
    /// temporary file; other stores collect the new file in memory). Memory
    /// holds the new entries, never a decoded copy of the whole index.
    pub fn merge(
        &self,
        update: IndexUpdate,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        let mut old = self.current_with_deltas()?;
        let mut update = update;
        if let Some(cur) = &old {
            self.drop_removals_of_newer_entries(cur, &mut update)?;
            if !may_fold_after_the_deltas(&cur.overlay, &update) {
                drop(old);
                self.write_delta(update, covered_below, fp_width)?;
                return self.merge(IndexUpdate::default(), covered_below, fp_width, page_size);
            }
        }
        // Puts alone over a file no delta changes (a repository's first
        // backup, a large commit with no deltas pending) go to
        // `write_generation` as they are: it sorts them and keeps the
        // canonical copy of each fingerprint, as the overlay would, without
        // a map of every put (about 150 bytes each beside the puts' 40).
        let pending = old.as_ref().is_some_and(|c| !c.overlay.changes.is_empty());
        let (entries, forget) = if !pending && update.removes.is_empty() {
            (update.puts, FpMap::default())
        } else {
            let (entries, forget) = match &old {
                Some(c) => c.overlay.with_update(&update),
                None => Overlay::default().with_update(&update),
            };
            // Freed before the pages are encoded and written: a backup's
            // commit would otherwise hold its new chunks twice meanwhile.
            drop(update);
            if let Some(c) = old.as_mut() {
                self.release_changes(c);
            }
            (entries, forget)
        };
        let written =
            self.write_generation(old, entries, &forget, covered_below, fp_width, page_size);
        if written.is_err() {
            // The overlay's changes were released: the state is read again
            // from the store (a failed reload leaves it to the next open).
            if let Ok(fresh) = Self::load_latest(&*self.backend, self.memo.as_deref()) {
                *self.current.write() = fresh;
            }
        }
        written
    }

    /// Releases the deltas' changes once a merge has taken what it writes
    /// from them: `c`'s overlay, and the same overlay held by this handle's
    /// current state and by the memo, keep everything but the changes (the
    /// merge needs only which deltas it folded). The overlay is the largest
    /// table a backup holds once deltas pile up, and it was held through
    /// the whole merge beside the entries taken from it (issue 35). A
    /// handle is not read while it merges (a backup's dedup state is locked
    /// through its commit, a collection merges between its phases); a
    /// merge that fails reloads the state.
    fn release_changes(&self, c: &mut Current) {
        let light = Arc::new(c.overlay.clone_without_changes());
        if let Some(held) = self.current.write().as_mut() {
            if Arc::ptr_eq(&held.overlay, &c.overlay) {
                held.overlay = light.clone();
            }
        }
        if let Some(m) = self.memo.as_deref() {
            m.take_if_holding(&c.overlay);
        }
        c.overlay = light;
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
        let none = FpMap::default();
        self.write_generation(None, entries, &none, covered_below, fp_width, page_size)
    }

    /// Writes `old`'s entries except those in `forget`, merged with
    /// `new_entries`, as the next generation.
    fn write_generation(
        &self,
        old: Option<Current>,
        mut new_entries: Vec<IndexEntry>,
        forget: &FpMap<ContainerId>,
        covered_below: ContainerId,
        fp_width: usize,
        page_size: usize,
    ) -> Result<u64> {
        // Among equal fingerprints the canonical copy is kept (`canonical`:
        // the newest container): sorted first among its equals.
        sort_in_file_order(&mut new_entries);
        collapse_canonically(&mut new_entries);
        let old_count = old.as_ref().map_or(0, |c| c.header.entry_count);
        let per_page = codec::entries_per_page(page_size, fp_width).max(1);
        // Sized for the upper bound (old and new never overlap in practice).
        let upper = old_count + new_entries.len() as u64;
        let pages_for =
            |n: u64| ((n as f64 / (per_page as f64 * TARGET_FILL)).ceil() as u64).max(1);
        let mut page_count = pages_for(upper);
        let generation = self.next_generation();
        let mut resized = false;
        let key = object_names::index(generation);
        let old_key = old.as_ref().map(|c| object_names::index(c.generation));
        let (written, held) = loop {
            let old_pages = old
                .as_ref()
                .zip(old_key.as_deref())
                .map(|(c, k)| Pages::stored(&c.header, &*self.backend, k));
            let mut out = cairn_core::create_streamed(&*self.backend, &key)?;
            match merge_into_pages(
                old_pages,
                &new_entries,
                forget,
                fp_width,
                page_size,
                page_count,
                covered_below,
                &mut *out,
            ) {
                // The bound counted removed entries and puts that replace
                // old ones (a collection's moves): when the file came out
                // far emptier than the target fill, it is written again at
                // its size, once, so an index shrinks when a collection
                // forgets most of it.
                Ok(held) => {
                    let fit = pages_for(held);
                    if resized || fit * 4 >= page_count * 3 {
                        break (out, held);
                    }
                    resized = true;
                    page_count = fit;
                }
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
        drop(new_entries);
        let folded = old.as_ref().map(|c| c.overlay.applied.clone());
        let folded_puts_only = old.as_ref().is_some_and(|c| !c.overlay.removed_any);
        drop(old);
        // Created only if absent: merges exclude each other by a lock,
        // and on object storage a lock is a lease a paused holder can
        // outlive. Two merges writing one generation would lose what the
        // first folded and deleted; the second fails instead.
        // A create the store applied but answered with a failure finds its
        // own bytes on the retry: still this merge's generation.
        if !written.create()? {
            return Err(Error::Locked(format!(
                "another writer wrote index generation {generation} first (a merge beside \
                 this one); nothing was changed, the next commit merges again"
            )));
        }
        let header = IndexHeader {
            fp_width,
            page_size,
            page_count,
            entry_count: held,
            covered_below,
        };
        *self.current.write() = Some(Current {
            generation,
            header,
            overlay: Arc::default(),
        });
        // The deltas folded go first, exactly those and in the order
        // applied: a writer that opened before this merge may add a delta
        // to an older generation after its listing, which readers apply
        // over the new file until the next merge folds it; and a stop
        // half-way leaves a suffix of what was folded, which applied again
        // over the new file changes nothing (`overlay.rs`). Deltas that
        // only put (every backup's) go in one request instead: any of them
        // left by a stop applied again changes nothing either, and while
        // they were deleted one round trip after another every open in
        // that time read the rest again (with eight writers on object
        // storage, 10 of a backup's 87 requests). Without an old file
        // (`repair index`, holding the writer lock alone) every delta goes.
        let listing = self.backend.list(object_names::INDEX)?;
        let deltas: Vec<String> = match &folded {
            Some(applied) => applied
                .iter()
                .map(|(g, s)| object_names::index_delta(*g, *s))
                .collect(),
            None => listing
                .iter()
                .filter(|k| object_names::parse_index_delta(k).is_some_and(|(g, _)| g < generation))
                .cloned()
                .collect(),
        };
        let allowed = self.deletes_allowed();
        let stopped = deltas.len() > allowed;
        let deleted = &deltas[..deltas.len().min(allowed)];
        if folded_puts_only {
            self.backend.delete_many(deleted)?;
        } else {
            for key in deleted {
                self.backend.delete(key)?;
            }
        }
        if stopped {
            return Ok(generation);
        }
        for key in &listing {
            match object_names::parse_generation(key, object_names::INDEX) {
                Some(g) if g < generation => self.backend.delete(key)?,
                _ => {}
            }
        }
        Ok(generation)
    }
}

/// Keeps one entry per fingerprint, naming the canonical copy of the
/// entries it had (`entries` holds each fingerprint's entries side by side).
fn collapse_canonically(entries: &mut Vec<IndexEntry>) {
    entries.dedup_by(|later, first| {
        later.fp == first.fp && {
            first.container = canonical(first.container, later.container);
            true
        }
    });
}

/// The file's entry `e` as the deltas' change of its fingerprint (if any)
/// leaves it: kept, combined with what they put, or forgotten.
fn changed(change: Option<&Change>, e: IndexEntry) -> Option<IndexEntry> {
    match change {
        None => Some(e),
        Some(c) => c.over(Some(e.container)).map(|container| IndexEntry {
            fp: e.fp,
            container,
        }),
    }
}

/// Sorts `entries` in file order (`codec::entry_order`), the canonical
/// copy (the newest container) first among equal fingerprints, in place
/// and with no per-entry memory beside them: a large first backup's commit
/// peaks here (issue 35; a cached copy of each sort key took 56 bytes per
/// entry, a page key and an entry number 16).
///
/// The page key hashes the whole fingerprint, so it is not recomputed in
/// every comparison: the entries are first distributed by the key's top
/// bits into buckets, in place (an American flag sort, computing each
/// entry's key about twice), then each bucket, a few dozen entries, is
/// sorted by its cached whole keys. The key's top bits are monotone in the
/// key, so bucket order then order within buckets is file order.
fn sort_in_file_order(entries: &mut [IndexEntry]) {
    let n = entries.len();
    // About 32 entries per bucket, at most 2^16 buckets (1 MiB of counts).
    let bits = (usize::BITS - (n / 32).leading_zeros()).clamp(1, 16);
    let bucket = |e: &IndexEntry| (codec::page_key(&e.fp) >> (64 - bits)) as usize;
    let mut ends = vec![0usize; 1 << bits];
    for e in entries.iter() {
        ends[bucket(e)] += 1;
    }
    let mut heads = Vec::with_capacity(ends.len());
    let mut at = 0;
    for end in ends.iter_mut() {
        heads.push(at);
        at += *end;
        *end = at;
    }
    for b in 0..ends.len() {
        // Every entry before heads[b] belongs to bucket b; each swap puts
        // one entry in its own bucket for good.
        while heads[b] < ends[b] {
            let t = bucket(&entries[heads[b]]);
            if t == b {
                heads[b] += 1;
            } else {
                entries.swap(heads[b], heads[t]);
                heads[t] += 1;
            }
        }
    }
    let mut start = 0;
    for &end in &ends {
        entries[start..end]
            .sort_by_cached_key(|e| (codec::entry_order(&e.fp), std::cmp::Reverse(e.container)));
        start = end;
    }
}

#[cfg(test)]
#[path = "disk_index_tests.rs"]
mod tests;
