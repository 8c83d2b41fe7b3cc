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
mod partition_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod update_tests;

use std::collections::VecDeque;
use std::sync::Arc;

use cairn_core::counters::bump;
use cairn_core::{Backend, ContainerId, Counters, Error, Fingerprint, FpMap, Result};

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

/// Which logs a handle's table indexes.
///
/// 004 deduplicates each partition against its own index only and
/// reconciles the copies partitions share later ("Data Partitioning and
/// Reconciliation"): [`LogScope::BaseAndOwn`] is that, the table holding
/// partition 0 (the reconciled base: what writers alone appended, a first
/// backup and every collection) and the handle's own partition, so its
/// RAM is bounded by those two logs instead of every log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogScope {
    /// Every partition's log: the repository as of the open.
    #[default]
    EveryLog,
    /// Partition 0 and the handle's own.
    BaseAndOwn,
}

/// Tells whether a container is known to be gone (deleted, or condemned):
/// log records naming it are left out of the table.
pub type GoneFn = Box<dyn Fn(ContainerId) -> bool + Send>;

/// A live record found for a fingerprint: its log, its table pointer and
/// the container it names.
#[derive(Clone, Copy, Debug)]
struct Found {
    log: usize,
    ptr: u32,
    container: ContainerId,
}

/// Whether `records` records across the logs still fit the table's
/// pointers (`cuckoo::MAX_POINTER`, `0xFFFF_FFFF` marking an empty slot).
fn pointers_left(records: u64) -> Result<()> {
    if records > u64::from(cuckoo::MAX_POINTER) + 1 {
        return Err(Error::invalid(
            "the frugal index logs hold more than 2^32-1 records",
        ));
    }
    Ok(())
}

pub struct FrugalIndex {
    cfg: FrugalConfig,
    counters: Arc<Counters>,
    /// The logs the table indexes (`log.rs`; every partition's, or by
    /// [`LogScope`]); the last is the one this handle appends its puts
    /// to, so its new records extend the pointer space.
    logs: Vec<ChunkLog>,
    /// Records in every partition's log at the open, indexed or not (the
    /// logs' health check counts them against the paged index).
    records_at_open: u64,
    /// Table pointer of each log's record 0, set by each rebuild: pointer
    /// `p` is record `p - bases[i]` of the last log `i` with `bases[i] <= p`.
    /// Only the last log's puts get pointers after a rebuild (other logs
    /// grow only by removals, which never enter the table).
    bases: Vec<u32>,
    /// This handle writes alone (it holds the writer lock exclusively): it
    /// may append removals to every log. Otherwise only to its own, the
    /// others being other writers' (docs/concurrency.md).
    alone: bool,
    /// Records naming a container known gone stay out of the table.
    gone: Option<GoneFn>,
    /// Some record was left out for naming a gone container: a prefetch
    /// run must then ask the table which records are live.
    dropped: bool,
    table: CuckooTable,
    cache: PrefetchCache,
    stats: FrugalStats,
    scratch: Vec<u32>,
}

impl FrugalIndex {
    /// Opens (or creates) the index stored under `frugal/` in `backend` for
    /// a handle that writes alone, appending to partition 0, and rebuilds
    /// the RAM table from every log (one sequential read per segment).
    pub fn open(
        backend: Arc<dyn Backend>,
        counters: Arc<Counters>,
        cfg: FrugalConfig,
    ) -> Result<Self> {
        Self::open_partition(backend, counters, cfg, 0, true, None, LogScope::EveryLog)
    }

    /// Opens the index appending to partition `own`: alone (every log
    /// writable) or beside other writers, each appending to its own
    /// partition, which the caller holds (`index::open_frugal` locks it).
    /// The table indexes the live records of the logs `scope` names (a
    /// writer alone indexes every log) but those naming a container `gone`
    /// says is gone.
    pub fn open_partition(
        backend: Arc<dyn Backend>,
        counters: Arc<Counters>,
        cfg: FrugalConfig,
        own: u32,
        alone: bool,
        gone: Option<GoneFn>,
        scope: LogScope,
    ) -> Result<Self> {
        let mut parts = log::open_partitions(&backend, cfg.segment_records)?;
        let records_at_open = parts.values().map(|l| u64::from(l.len())).sum();
        let mine = parts
            .remove(&own)
            .unwrap_or_else(|| ChunkLog::empty(backend, own, cfg.segment_records));
        if scope == LogScope::BaseAndOwn && !alone {
            parts.retain(|&k, _| k == 0);
        }
        let mut logs: Vec<ChunkLog> = parts.into_values().collect();
        logs.push(mine);
        let mut idx = FrugalIndex {
            table: CuckooTable::with_buckets(1, 1, 1),
            cache: PrefetchCache::new(cfg.prefetch_cache_entries),
            cfg,
            counters,
            logs,
            records_at_open,
            bases: Vec::new(),
            alone,
            gone,
            dropped: false,
            stats: FrugalStats::default(),
            scratch: Vec::new(),
        };
        let want = idx.cfg.expected_chunks.max(idx.records() as usize + 1);
        idx.rebuild(want)?;
        idx.stats.rebuilds = 0;
        Ok(idx)
    }

    /// Rebuilds the table, sized for `entries`, from every log's live
    /// records: a put not followed by a removal of its fingerprint in the
    /// same log. When a log holds removals, a first pass over just its
    /// segments holding them collects each removed fingerprint's last
    /// removal (RAM for removals only); without removals the rebuild is
    /// one pass per log.
    fn rebuild(&mut self, entries: usize) -> Result<()> {
        let mut bases = Vec::with_capacity(self.logs.len());
        let mut next = 0u64;
        for l in &self.logs {
            bases.push(next as u32);
            next += u64::from(l.len());
            pointers_left(next)?;
        }
        self.bases = bases;
        let mut removed: Vec<FpMap<u32>> = Vec::with_capacity(self.logs.len());
        for l in &self.logs {
            let mut map: FpMap<u32> = FpMap::default();
            if l.has_removals() {
                let reads = l.scan_removal_segments(&mut |r| {
                    if r.is_removal() {
                        map.insert(r.fp, r.pos);
                    }
                })?;
                self.stats.rebuild_segment_reads += reads;
            }
            removed.push(map);
        }
        let mut entries = entries;
        loop {
            let mut table = CuckooTable::with_capacity(
                entries,
                self.cfg.bucket_slots,
                self.cfg.max_load,
                self.cfg.max_kicks,
            );
            let mut dropped = false;
            for (i, l) in self.logs.iter().enumerate() {
                let (base, removed) = (self.bases[i], &removed[i]);
                let gone = &self.gone;
                let reads = l.scan(&mut |r| {
                    if r.is_removal() || removed.get(&r.fp).is_some_and(|&at| r.pos < at) {
                        return;
                    }
                    if gone.as_ref().is_some_and(|g| g(r.container)) {
                        dropped = true;
                        return;
                    }
                    table.insert(KeyHash::of(&r.fp), base + r.pos)
                })?;
                self.stats.rebuild_segment_reads += reads;
            }
            self.stats.rebuilds += 1;
            if !table.needs_grow() {
                self.table = table;
                self.dropped = dropped;
                return Ok(());
            }
            entries *= 2;
        }
    }

    /// The log `ptr` is in, and its position there.
    fn locate(&self, ptr: u32) -> (usize, u32) {
        let i = self.bases.partition_point(|&b| b <= ptr) - 1;
        (i, ptr - self.bases[i])
    }

    fn own_index(&self) -> usize {
        self.logs.len() - 1
    }

    /// Whether this handle may append to log `i`.
    fn writable(&self, i: usize) -> bool {
        self.alone || i == self.own_index()
    }

    fn over_load(&self) -> bool {
        (self.table.len() + 1) as f64 > self.table.slot_count() as f64 * self.cfg.max_load
    }

    /// Adds a chunk. The caller inserts only fingerprints it found absent
    /// (a repeated insert is harmless: it costs another 6-byte slot and log
    /// record). Returns the record's log position.
    pub fn insert(&mut self, fp: &Fingerprint, container: ContainerId) -> Result<u32> {
        let own = self.own_index();
        pointers_left(u64::from(self.bases[own]) + u64::from(self.logs[own].len()) + 1)?;
        let pos = self.bases[own] + self.logs[own].append(fp, container)?;
        self.stats.inserts += 1;
        if self.over_load() {
            // The new record is already in the log: the rebuild inserts it.
            self.rebuild(grown(self.table.len()) + 1)?;
        } else {
            self.table.insert(KeyHash::of(fp), pos);
            if self.table.needs_grow() {
                self.rebuild(grown(self.table.len()))?;
            }
        }
        // Table and buffer agree before the write: a failed flush leaves the
        // record buffered and findable, and the next flush writes it.
        if self.logs[own].buffer_full() {
            self.logs[own].flush()?;
        }
        Ok(pos)
    }

    /// The live records of `fp`: each table entry whose signature matches,
    /// confirmed against its log (a buffered record costs nothing, an
    /// on-disk one a one-record read). Not a lookup: the prefetch cache
    /// and the lookup counters are left alone.
    fn live_records(&mut self, fp: &Fingerprint) -> Result<Vec<Found>> {
        let mut cands = Vec::new();
        self.table.candidates(KeyHash::of(fp), &mut cands);
        let mut found = Vec::new();
        for ptr in cands {
            let (i, local) = self.locate(ptr);
            let r = match self.logs[i].buffered(local) {
                Some(r) => r,
                None => self.read_log(ptr, 1)?[0],
            };
            if r.fp == *fp {
                found.push(Found {
                    log: i,
                    ptr,
                    container: r.container,
                });
            }
        }
        Ok(found)
    }

    /// One counted log read: the records `ptr .. ptr+k` of `ptr`'s segment,
    /// with their table pointers as positions.
    fn read_log(&mut self, ptr: u32, k: usize) -> Result<Vec<LogRecord>> {
        let (i, local) = self.locate(ptr);
        let base = self.bases[i];
        let mut run = self.logs[i].read_run(local, k)?;
        for r in &mut run {
            r.pos += base;
        }
        self.stats.log_reads += 1;
        self.stats.records_read += run.len() as u64;
        bump(&self.counters.index_page_reads, 1);
        Ok(run)
    }

    /// Forgets `fp`: its table entries go and a removal record is appended
    /// to each log holding one, so a rebuild from the logs forgets it too.
    /// Returns whether it was indexed (forgetting an absent fingerprint
    /// writes nothing). Beside other writers, a record in another writer's
    /// log cannot be forgotten: that is an error (only a collection or a
    /// repair removes entries, and they write alone).
    pub fn remove(&mut self, fp: &Fingerprint) -> Result<bool> {
        let live = self.live_records(fp)?;
        if live.is_empty() {
            return Ok(false);
        }
        if live.iter().any(|r| !self.writable(r.log)) {
            return Err(Error::invalid(
                "a removal from another writer's frugal log (removals need the writer lock alone)",
            ));
        }
        self.forget_records(fp, &live)?;
        Ok(true)
    }

    fn forget_records(&mut self, fp: &Fingerprint, live: &[Found]) -> Result<()> {
        let mut logs: Vec<usize> = live.iter().map(|r| r.log).collect();
        logs.sort_unstable();
        logs.dedup();
        // The records go first: if an append fails, the table still
        // agrees with the logs.
        for &i in &logs {
            self.logs[i].append_removal(fp)?;
        }
        for r in live {
            self.table.remove(KeyHash::of(fp), r.ptr);
        }
        self.cache.forget(fp);
        for &i in &logs {
            if self.logs[i].buffer_full() {
                self.logs[i].flush()?;
            }
        }
        Ok(())
    }

    /// Indexes `fp` in `container` by the canonical-copy rule: if `fp` is
    /// already indexed elsewhere, the canonical of the two copies stays
    /// (a newer copy replaces the entry: a removal, then the put).
    ///
    /// Beside other writers, an older copy in another writer's log stays
    /// (its container holds the chunk; a lookup may answer either until a
    /// collection reconciles them, 004).
    pub fn put(&mut self, fp: &Fingerprint, container: ContainerId) -> Result<()> {
        let live = self.live_records(fp)?;
        if let Some(old) = live.iter().map(|r| r.container).reduce(canonical) {
            if canonical(old, container) == old {
                return Ok(());
            }
            let mine: Vec<Found> = live.into_iter().filter(|r| self.writable(r.log)).collect();
            if !mine.is_empty() {
                self.forget_records(fp, &mine)?;
            }
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
            let (i, local) = self.locate(ptr);
            if let Some(r) = self.logs[i].buffered(local) {
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
            // Only live records: a superseded put in the run, or one naming
            // a gone container, must not answer a later lookup. Without
            // either every record is live, and the table need not be asked.
            let any_removed = self.logs[i].has_removals() || self.dropped;
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

    /// Writes buffered records to the logs (call at commit).
    pub fn flush(&mut self) -> Result<()> {
        for l in &mut self.logs {
            l.flush()?;
        }
        Ok(())
    }

    /// Records in the logs the table indexes (puts and removals, on disk
    /// and buffered).
    pub fn records(&self) -> u64 {
        self.logs.iter().map(|l| u64::from(l.len())).sum()
    }

    /// Records in every partition's log at the open, whether the table
    /// indexes them or not.
    pub fn records_at_open(&self) -> u64 {
        self.records_at_open
    }

    /// Whether this handle writes alone (holds the writer lock
    /// exclusively), so it may rewrite every log.
    pub fn is_alone(&self) -> bool {
        self.alone
    }

    /// How many of the logs the table indexes hold records.
    pub fn logs_holding_records(&self) -> usize {
        self.logs.iter().filter(|l| !l.is_empty()).count()
    }

    /// The partitions whose logs the table indexes, its own last.
    pub fn partitions(&self) -> Vec<u32> {
        self.logs.iter().map(ChunkLog::partition).collect()
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

    /// The log this handle appends to.
    pub fn own_log(&self) -> &ChunkLog {
        &self.logs[self.own_index()]
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
            write_buffer_entries: self.logs.iter().map(ChunkLog::buffered_len).sum(),
        }
    }
}

/// Growth of a full table: room for a quarter more entries than it holds,
/// so right after a growth the table is at `max_load / 1.25` (0.78 at the
/// default 0.97) and costs at most 6 / 0.78 = 7.7 bytes per chunk (issue
/// 32's bound of 8; doubling left it at half load, 12 bytes per chunk, until
/// it filled again). Rebuilds come more often: the log is scanned about
/// 5 times per entry over a table's life instead of 2, sequentially.
fn grown(entries: usize) -> usize {
    entries + entries / 4 + 1
}
