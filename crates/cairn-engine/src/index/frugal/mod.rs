//! The RAM-frugal chunk index of Microsoft's primary-data deduplication
//! (paper 004, "Chunk Indexing"): chunk metadata in a log-structured file on
//! disk ([`log::ChunkLog`]), a cuckoo hash table in RAM holding only a 2-byte
//! signature and a 4-byte log pointer per chunk ([`cuckoo::CuckooTable`]),
//! and a prefetch cache that loads the next 100-1000 mappings of the log with
//! the one read that confirms a signature match.
//!
//! Selected with `index.kind = "frugal"`: the dedup path (`dedup/mod.rs`)
//! then looks fingerprints up here instead of in the Summary Vector and the
//! paged index, and appends new entries at commit. See `docs/frugal-index.md`.
//!
//! Forgetting and moving entries (garbage collection, rewriting): a removal
//! takes the fingerprint's slot out of the table and appends a removal
//! record to the log; a put of a fingerprint already indexed keeps the
//! canonical copy (`crate::canonical`). The invariant is that a log record
//! is live exactly when the table points at it, so the prefetch cache takes
//! only live records from a run, and a rebuild from the log drops every
//! record an equal-or-later removal names.

pub mod cuckoo;
pub mod log;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod update_tests;

use std::collections::VecDeque;
use std::sync::Arc;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Fingerprint, FpMap, Result};

use crate::canonical::canonical;
use crate::index::overlay::IndexUpdate;
use cuckoo::{CuckooTable, KeyHash};
use log::{ChunkLog, LogRecord};

/// Tuning of the frugal index.
#[derive(Clone, Debug)]
pub struct FrugalConfig {
    /// Slots per cuckoo bucket.
    pub bucket_slots: usize,
    /// Load factor the table is sized for and grown at.
    pub max_load: f64,
    /// Entries the initial table is sized for.
    pub expected_chunks: usize,
    /// Displacements before an insert gives up and stashes the entry.
    pub max_kicks: usize,
    /// Records per log segment (the write buffer's size).
    pub segment_records: usize,
    /// Records read per log I/O (the paper: 100-1000).
    pub prefetch_run: usize,
    /// Fingerprints held by the prefetch cache (the paper: 100,000).
    pub prefetch_cache_entries: usize,
}

impl Default for FrugalConfig {
    fn default() -> Self {
        FrugalConfig {
            bucket_slots: 8,
            max_load: 0.97,
            expected_chunks: 1 << 16,
            max_kicks: 500,
            segment_records: 4096,
            prefetch_run: 512,
            prefetch_cache_entries: 100_000,
        }
    }
}

/// What the index did (its own counters; log reads are also added to
/// [`Counters::index_page_reads`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrugalStats {
    pub lookups: u64,
    /// Lookups found in the prefetch cache (no I/O).
    pub prefetch_hits: u64,
    /// Lookups found in the log's write buffer (no I/O).
    pub buffer_hits: u64,
    /// Lookups found through a log read.
    pub log_hits: u64,
    /// Lookups no signature in the table matched: "new" without I/O.
    pub table_negatives: u64,
    /// Log range reads (one backend `read_at` each).
    pub log_reads: u64,
    /// Records those reads returned.
    pub records_read: u64,
    /// Signature matches whose full fingerprint differed.
    pub false_matches: u64,
    /// Of those, matches that cost a log read.
    pub false_match_reads: u64,
    pub inserts: u64,
    /// Table rebuilds from the log (growth).
    pub rebuilds: u64,
    /// Whole segments read by rebuilds (open and growth).
    pub rebuild_segment_reads: u64,
}

/// RAM used, by part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RamReport {
    pub entries: usize,
    /// Slots × 6 bytes.
    pub table_slot_bytes: usize,
    pub stash_bytes: usize,
    /// `(table_slot_bytes + stash_bytes) / entries`.
    pub bytes_per_chunk: f64,
    pub load_factor: f64,
    /// Prefetch cache entries (bounded, not per indexed chunk).
    pub prefetch_cache_entries: usize,
    /// Records in the log write buffer (bounded by the segment size).
    pub write_buffer_entries: usize,
}

/// A bounded FIFO map of recently read log records.
struct PrefetchCache {
    map: FpMap<ContainerId>,
    order: VecDeque<Fingerprint>,
    cap: usize,
}

impl PrefetchCache {
    fn new(cap: usize) -> Self {
        PrefetchCache {
            map: FpMap::default(),
            order: VecDeque::new(),
            cap,
        }
    }

    fn get(&self, fp: &Fingerprint) -> Option<ContainerId> {
        self.map.get(fp).copied()
    }

    fn put(&mut self, fp: Fingerprint, c: ContainerId) {
        if self.cap == 0 || self.map.insert(fp, c).is_some() {
            return;
        }
        self.order.push_back(fp);
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    /// Forgets `fp` (its queue place stays until it is evicted; evicting it
    /// then drops nothing, or a later copy early, which only costs a read).
    fn forget(&mut self, fp: &Fingerprint) {
        self.map.remove(fp);
    }
}

pub struct FrugalIndex {
    cfg: FrugalConfig,
    counters: Arc<Counters>,
    log: ChunkLog,
    table: CuckooTable,
    cache: PrefetchCache,
    stats: FrugalStats,
    scratch: Vec<u32>,
}

impl FrugalIndex {
    /// Opens (or creates) the index stored under `frugal/` in `backend` and
    /// rebuilds the RAM table from the log (one sequential read per segment).
    pub fn open(
        backend: Arc<dyn Backend>,
        counters: Arc<Counters>,
        cfg: FrugalConfig,
    ) -> Result<Self> {
        let log = ChunkLog::open(backend, cfg.segment_records)?;
        let mut idx = FrugalIndex {
            table: CuckooTable::with_buckets(1, 1, 1),
            cache: PrefetchCache::new(cfg.prefetch_cache_entries),
            cfg,
            counters,
            log,
            stats: FrugalStats::default(),
            scratch: Vec::new(),
        };
        let want = idx.cfg.expected_chunks.max(idx.log.len() as usize + 1);
        idx.rebuild(want)?;
        idx.stats.rebuilds = 0;
        Ok(idx)
    }

    /// Rebuilds the table, sized for `entries`, from every live log record:
    /// a put not followed by a removal of its fingerprint. When the log
    /// holds removals, a first pass over just the segments holding them
    /// collects each removed fingerprint's last removal (RAM for removals
    /// only); without removals the rebuild is one pass, as before.
    fn rebuild(&mut self, entries: usize) -> Result<()> {
        let mut removed: FpMap<u32> = FpMap::default();
        if self.log.has_removals() {
            let reads = self.log.scan_removal_segments(&mut |r| {
                if r.is_removal() {
                    removed.insert(r.fp, r.pos);
                }
            })?;
            self.stats.rebuild_segment_reads += reads;
        }
        let live =
            |r: &LogRecord| !r.is_removal() && removed.get(&r.fp).is_none_or(|&at| r.pos > at);
        let mut entries = entries;
        loop {
            let mut table = CuckooTable::with_capacity(
                entries,
                self.cfg.bucket_slots,
                self.cfg.max_load,
                self.cfg.max_kicks,
            );
            let reads = self.log.scan(&mut |r| {
                if live(&r) {
                    table.insert(KeyHash::of(&r.fp), r.pos)
                }
            })?;
            self.stats.rebuild_segment_reads += reads;
            self.stats.rebuilds += 1;
            if !table.needs_grow() {
                self.table = table;
                return Ok(());
            }
            entries *= 2;
        }
    }

    fn over_load(&self) -> bool {
        (self.table.len() + 1) as f64 > self.table.slot_count() as f64 * self.cfg.max_load
    }

    /// Adds a chunk. The caller inserts only fingerprints it found absent
    /// (a repeated insert is harmless: it costs another 6-byte slot and log
    /// record). Returns the record's log position.
    pub fn insert(&mut self, fp: &Fingerprint, container: ContainerId) -> Result<u32> {
        let pos = self.log.append(fp, container)?;
        self.stats.inserts += 1;
        if self.over_load() {
            // The new record is already in the log: the rebuild inserts it.
            self.rebuild(self.table.len() * 2 + 1)?;
        } else {
            self.table.insert(KeyHash::of(fp), pos);
            if self.table.needs_grow() {
                self.rebuild(self.table.len() * 2)?;
            }
        }
        // Table and buffer agree before the write: a failed flush leaves the
        // record buffered and findable, and the next flush writes it.
        if self.log.buffer_full() {
            self.log.flush()?;
        }
        Ok(pos)
    }

    /// The live records of `fp`: each table entry whose signature matches,
    /// confirmed against the log (a buffered record costs nothing, an
    /// on-disk one a one-record read). Not a lookup: the prefetch cache
    /// and the lookup counters are left alone.
    fn live_records(&mut self, fp: &Fingerprint) -> Result<Vec<LogRecord>> {
        let mut cands = Vec::new();
        self.table.candidates(KeyHash::of(fp), &mut cands);
        let mut found = Vec::new();
        for ptr in cands {
            let r = match self.log.buffered(ptr) {
                Some(r) => r,
                None => self.read_log(ptr, 1)?[0],
            };
            if r.fp == *fp {
                found.push(r);
            }
        }
        Ok(found)
    }

    /// One counted log read: the records `ptr .. ptr+k` of `ptr`'s segment.
    fn read_log(&mut self, ptr: u32, k: usize) -> Result<Vec<LogRecord>> {
        let run = self.log.read_run(ptr, k)?;
        self.stats.log_reads += 1;
        self.stats.records_read += run.len() as u64;
        bump(&self.counters.index_page_reads, 1);
        Ok(run)
    }

    /// Forgets `fp`: its table entries go and a removal record is appended,
    /// so a rebuild from the log forgets it too. Returns whether it was
    /// indexed (forgetting an absent fingerprint writes nothing).
    pub fn remove(&mut self, fp: &Fingerprint) -> Result<bool> {
        let live = self.live_records(fp)?;
        if live.is_empty() {
            return Ok(false);
        }
        self.forget_records(fp, &live)?;
        Ok(true)
    }

    fn forget_records(&mut self, fp: &Fingerprint, live: &[LogRecord]) -> Result<()> {
        // The record goes first: if the append fails, the table still
        // agrees with the log.
        self.log.append_removal(fp)?;
        for r in live {
            self.table.remove(KeyHash::of(fp), r.pos);
        }
        self.cache.forget(fp);
        if self.log.buffer_full() {
            self.log.flush()?;
        }
        Ok(())
    }

    /// Indexes `fp` in `container` by the canonical-copy rule: if `fp` is
    /// already indexed elsewhere, the canonical of the two copies stays
    /// (a newer copy replaces the entry: a removal, then the put).
    pub fn put(&mut self, fp: &Fingerprint, container: ContainerId) -> Result<()> {
        let live = self.live_records(fp)?;
        if let Some(old) = live.iter().map(|r| r.container).reduce(canonical) {
            if canonical(old, container) == old {
                return Ok(());
            }
            self.forget_records(fp, &live)?;
        }
        self.insert(fp, container)?;
        Ok(())
    }

    /// Applies one batch (garbage collection moving live chunks, or a
    /// commit): every removal, then every put, then a flush. Applying the
    /// same batch again changes nothing a lookup sees.
    pub fn apply(&mut self, update: &IndexUpdate) -> Result<()> {
        self.reserve(update.puts.len())?;
        for fp in &update.removes {
            self.remove(fp)?;
        }
        for e in &update.puts {
            self.put(&e.fp, e.container)?;
        }
        self.flush()
    }

    /// Makes room for `additional` inserts in one rebuild (a sequential scan
    /// of the log), sized so the table ends near its maximum load, rather
    /// than doubling part-way through them and ending half empty.
    pub fn reserve(&mut self, additional: usize) -> Result<()> {
        let want = self.table.len() + additional;
        if want as f64 > self.table.slot_count() as f64 * self.cfg.max_load {
            self.rebuild(want)?;
        }
        Ok(())
    }

    /// Looks a fingerprint up: prefetch cache, then each signature match in
    /// its two buckets, confirmed against the log (a buffered record costs
    /// nothing; an on-disk one costs one read of the next `prefetch_run`
    /// records, all put in the prefetch cache).
    pub fn lookup(&mut self, fp: &Fingerprint) -> Result<Option<ContainerId>> {
        self.stats.lookups += 1;
        if let Some(c) = self.cache.get(fp) {
            self.stats.prefetch_hits += 1;
            return Ok(Some(c));
        }
        let mut cands = std::mem::take(&mut self.scratch);
        cands.clear();
        self.table.candidates(KeyHash::of(fp), &mut cands);
        let result = self.confirm(fp, &cands);
        self.scratch = cands;
        result
    }

    fn confirm(&mut self, fp: &Fingerprint, cands: &[u32]) -> Result<Option<ContainerId>> {
        if cands.is_empty() {
            self.stats.table_negatives += 1;
            return Ok(None);
        }
        for &ptr in cands {
            if let Some(r) = self.log.buffered(ptr) {
                if r.fp == *fp {
                    self.stats.buffer_hits += 1;
                    return Ok(Some(r.container));
                }
                self.stats.false_matches += 1;
                continue;
            }
            // An earlier run of this lookup may have brought it in.
            if let Some(c) = self.cache.get(fp) {
                self.stats.prefetch_hits += 1;
                return Ok(Some(c));
            }
            let run = self.read_log(ptr, self.cfg.prefetch_run)?;
            // Only live records: a superseded put in the run must not
            // answer a later lookup. Without a removal in the log every
            // record is live, and the table need not be asked.
            let any_removed = self.log.has_removals();
            for r in &run {
                if !any_removed || r.pos == ptr || self.table.holds(KeyHash::of(&r.fp), r.pos) {
                    self.cache.put(r.fp, r.container);
                }
            }
            if run[0].fp == *fp {
                self.stats.log_hits += 1;
                return Ok(Some(run[0].container));
            }
            self.stats.false_matches += 1;
            self.stats.false_match_reads += 1;
        }
        Ok(None)
    }

    /// Writes buffered records to the log (call at commit).
    pub fn flush(&mut self) -> Result<()> {
        self.log.flush()
    }

    /// Chunks indexed.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn stats(&self) -> FrugalStats {
        self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = FrugalStats::default();
    }

    pub fn table(&self) -> &CuckooTable {
        &self.table
    }

    pub fn log(&self) -> &ChunkLog {
        &self.log
    }

    pub fn config(&self) -> &FrugalConfig {
        &self.cfg
    }

    pub fn ram(&self) -> RamReport {
        RamReport {
            entries: self.table.len(),
            table_slot_bytes: self.table.slot_count() * cuckoo::SLOT_BYTES,
            stash_bytes: self.table.stash_len() * cuckoo::STASH_ENTRY_BYTES,
            bytes_per_chunk: self.table.bytes_per_chunk(),
            load_factor: self.table.load_factor(),
            prefetch_cache_entries: self.cache.map.len(),
            write_buffer_entries: self.log.buffered_len(),
        }
    }
}
