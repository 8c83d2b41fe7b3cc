//! The fingerprint index as a whole: the Summary Vector, the in-memory part
//! (entries of containers sealed or being filled since the last merge), and
//! the on-disk paged index. Opening it for writing performs DDFS §4.1's
//! recovery: load the checkpoint, then replay containers appended since.

pub mod coverage;
pub mod disk_index;
mod file_pages;
pub mod frugal;
pub mod kinds;
pub mod locality_cache;
pub mod overlay;
pub mod page_cache;
pub mod summary_vector;

use std::sync::Arc;

use cairn_core::{Backend, ContainerId, Counters, Error, LockGuard, LockMode, Result};
use cairn_format::index::IndexEntry;

use crate::config::{IndexConfig, IndexKind};
use crate::container_log::ContainerStore;
use crate::object_names;
use crate::warnings::Warnings;
use disk_index::DiskIndex;
use frugal::{FrugalConfig, FrugalIndex};
use kinds::frugal::FrugalKind;
use kinds::paged::PagedIndex;
use kinds::FingerprintIndex;
use summary_vector::SummaryVector;

/// What a writer needs at open: the index kind chosen by the config (with
/// every stored fingerprint in its filter), and the replayed entries not yet
/// merged.
pub struct OpenedIndex {
    pub kind: Box<dyn FingerprintIndex>,
    pub replayed: Vec<IndexEntry>,
    /// Containers replayed (appended after the last checkpoint).
    pub replayed_containers: u64,
    /// Every container present in the log at open, but those a collection
    /// condemned (`gc-pending`).
    pub present: std::collections::HashSet<ContainerId>,
    /// The containers a collection condemned (`gc-pending`), present or
    /// not: garbage to this writer, whatever the index says of them.
    pub retiring: std::collections::HashSet<ContainerId>,
}

/// Opens the index for a writer: checkpoint + replay (DDFS §4.1).
pub fn open_for_write(
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    log: &dyn ContainerStore,
    cfg: &IndexConfig,
    warnings: &Warnings,
) -> Result<OpenedIndex> {
    open_for_write_memoized(backend, counters, log, cfg, warnings, None)
}

/// [`open_for_write`] loading the deltas through a repository handle's
/// `memo` (`overlay.rs`, [`overlay::OverlayMemo`]).
pub fn open_for_write_memoized(
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    log: &dyn ContainerStore,
    cfg: &IndexConfig,
    warnings: &Warnings,
    memo: Option<&Arc<overlay::OverlayMemo>>,
) -> Result<OpenedIndex> {
    open_index(backend, counters, log, cfg, warnings, Opener::Alone, memo)?
        .ok_or_else(|| Error::invalid("the index needs a rebuild"))
}

/// [`open_for_write`] for a backup that shares the writer lock with others
/// (`Repository::lock_backup`): its commits add deltas only. `None` when
/// the index is damaged: a rebuild deletes the index files other writers
/// are adding to, so the caller rebuilds only once it holds the writer
/// lock alone (`Repository::make_exclusive`, then [`open_for_write`]).
/// `partition`: see [`Opener::Beside`].
pub fn open_beside_writers_memoized(
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    log: &dyn ContainerStore,
    cfg: &IndexConfig,
    warnings: &Warnings,
    memo: &Arc<overlay::OverlayMemo>,
    partition: Option<u32>,
) -> Result<Option<OpenedIndex>> {
    let opener = Opener::Beside { partition };
    let opened = open_index(backend, counters, log, cfg, warnings, opener, Some(memo))?;
    if let Some(o) = &opened {
        o.kind.beside_other_writers();
        // Containers no delta covered yet: other writers still running.
        if o.replayed_containers > 0 {
            o.kind.expect_other_commits();
        }
    }
    Ok(opened)
}

/// Who opens the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opener {
    /// A writer holding the writer lock alone.
    Alone,
    /// A writer beside others (the writer lock shared). With the frugal
    /// index, `partition: Some(k)` (k >= 1) appends to chunk log `k` and
    /// indexes only it and partition 0 (004's partitioned dedup,
    /// [`frugal::LogScope::BaseAndOwn`]), or, when another writer holds
    /// `k`, takes the first free partition and indexes every log; `None`:
    /// the first free partition, every log. The paged index ignores it.
    Beside { partition: Option<u32> },
}

fn open_index(
    backend: Arc<dyn Backend>,
    counters: Arc<Counters>,
    log: &dyn ContainerStore,
    cfg: &IndexConfig,
    warnings: &Warnings,
    opener: Opener,
    memo: Option<&Arc<overlay::OverlayMemo>>,
) -> Result<Option<OpenedIndex>> {
    let alone = opener == Opener::Alone;
    // Containers a collection condemned are garbage: no dedup hit may
    // resurrect a chunk in them (docs/gc.md). Read before the index is
    // listed: a collection writes its moves (live chunks' entries naming
    // their copies) before the list, so a writer that finds a container
    // condemned also finds where its live chunks went.
    // A damaged list names nothing: the next collection's Merge repairs it
    // (docs/gc.md, "Crash safety"); until then the containers it named
    // stay, and a chunk in them is sound wherever the index names it.
    let retiring = crate::gc::pending::read(&*backend).or_else(|e| {
        if !e.is_corruption() {
            return Err(e);
        }
        warnings.push(format!("{e}; the next `cairn gc` repairs it"));
        Ok(Vec::new())
    })?;
    // Every page is verified up front (one sequential read): a damaged index
    // is rebuilt now rather than failing a lookup half-way through a backup.
    let disk = match DiskIndex::open_memoized(backend.clone(), counters.clone(), memo.cloned())
        .and_then(|d| d.verify().map(|_| d))
    {
        Ok(d) => d,
        // Not alone: the caller rebuilds once it is (see above).
        Err(e) if is_damage(&e) && !alone => return Ok(None),
        Err(e) if is_damage(&e) => {
            warnings.push(format!("{e}; rebuilding the index from container metadata"));
            let listed = backend.list(object_names::INDEX)?;
            // The rebuilt generations are named above every one listed, as
            // `repair index` does: a local cache may still hold those names.
            let floor = listed
                .iter()
                .filter_map(|k| {
                    object_names::parse_generation(k, object_names::INDEX)
                        .or_else(|| object_names::parse_index_delta(k).map(|(g, _)| g))
                })
                .max()
                .unwrap_or(0);
            for key in listed.into_iter().chain(backend.list(object_names::BLOOM)?) {
                backend.delete(&key)?;
            }
            DiskIndex::open(backend.clone(), counters.clone())?.with_generation_floor(floor)
        }
        Err(e) => return Err(e),
    };
    let generation = disk.generation();
    let coverage = disk.coverage();
    let indexed = disk.entry_count();
    // Listed before the frugal logs are read: a log record naming a
    // container below the last one listed and not present is stale (its
    // container was deleted) and stays out of the frugal table. The paged
    // index's Summary Vector checkpoint is read meanwhile (on object
    // storage one round trip instead of two in a row).
    let base_covered = disk.base_covered_below();
    let (ids, mut checkpoint) = match cfg.kind {
        IndexKind::Paged => std::thread::scope(|s| {
            let checkpoint =
                s.spawn(|| load_checkpoint(&*backend, generation, base_covered, cfg, indexed));
            let ids = log.ids();
            (ids, crate::blocking_map::joined(checkpoint))
        }),
        IndexKind::Frugal => (log.ids(), None),
    };
    let ids = ids?;
    let present: std::collections::HashSet<ContainerId> = ids
        .iter()
        .copied()
        .filter(|id| !retiring.contains(id))
        .collect();

    let mut kind: Box<dyn FingerprintIndex> = match cfg.kind {
        IndexKind::Paged => {
            let (summary, checkpoint_rebuilt) = match checkpoint.take() {
                Some(mut sv) => {
                    // The checkpoint covers the file; its deltas are added.
                    disk.for_each_delta_entry(&mut |e| sv.insert(&e.fp));
                    (sv, false)
                }
                None => {
                    // No usable checkpoint: rebuild from the index file itself.
                    let mut sv = SummaryVector::with_capacity(
                        cfg.expected_chunks.max(indexed * 2),
                        cfg.bloom_bits_per_chunk,
                    );
                    disk.for_each_entry_at_least_once(&mut |e| sv.insert(&e.fp))?;
                    (sv, generation > 0)
                }
            };
            Box::new(PagedIndex::new(
                disk,
                summary,
                counters,
                cfg.summary_vector,
                checkpoint_rebuilt,
                cfg.bloom_bits_per_chunk,
            ))
        }
        IndexKind::Frugal => {
            let listed_end = ids
                .last()
                .map_or(ContainerId(0), |id| ContainerId(id.0 + 1));
            let known = present.clone();
            let gone: frugal::GoneFn = Box::new(move |c| c < listed_end && !known.contains(&c));
            let Some((frugal, partition)) =
                open_frugal(&backend, &counters, &disk, warnings, opener, gone)?
            else {
                return Ok(None);
            };
            Box::new(FrugalKind::new(
                frugal,
                disk,
                backend.clone(),
                counters,
                partition,
            ))
        }
    };

    let mut replayed = Vec::new();
    let mut replayed_containers = 0;
    // Containers no delta covers yet are read in parallel where the store
    // serves requests so (object storage): with several writers those are
    // the containers of every backup still running.
    let uncovered: Vec<ContainerId> = ids.into_iter().filter(|id| !coverage.covers(*id)).collect();
    let metas = crate::blocking_map::blocking_map(&uncovered, log.read_parallelism(), |id| {
        log.read_meta(*id)
    });
    for (id, meta) in uncovered.into_iter().zip(metas) {
        match meta {
            Ok(meta) => {
                replayed_containers += 1;
                for d in meta.descriptors {
                    kind.note_replayed(&d.fp);
                    replayed.push(IndexEntry {
                        fp: d.fp,
                        container: id,
                    });
                }
            }
            Err(e) if e.is_corruption() => warnings.push(format!(
                "skipping damaged container {id} during replay: {e}"
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(OpenedIndex {
        kind,
        replayed,
        replayed_containers,
        present,
        retiring: retiring.into_iter().collect(),
    }))
}

/// The most frugal-index partitions a writer tries (one per writer running
/// at once).
pub const MAX_FRUGAL_PARTITIONS: u32 = 256;

/// A frugal index and, beside other writers, the lock of its partition.
type OpenedFrugal = (FrugalIndex, Option<Box<dyn LockGuard>>);

/// Opens the frugal index's chunk logs and table. Alone, the handle
/// appends to partition 0 and may remove from every log; beside other
/// writers, it appends to the partition the opener asks for when its lock
/// is free (indexing only it and partition 0), else to the first
/// partition whose lock it takes, and holds that lock as long as the
/// handle lives (returned with it).
///
/// The logs are derived data, like the paged index: damaged ones, or ones
/// holding fewer records than the paged index has entries (a lost
/// segment), are rebuilt from the paged index with a warning, alone only
/// (`None` beside other writers: the caller waits to be alone).
fn open_frugal(
    backend: &Arc<dyn Backend>,
    counters: &Arc<Counters>,
    disk: &DiskIndex,
    warnings: &Warnings,
    opener: Opener,
    gone: frugal::GoneFn,
) -> Result<Option<OpenedFrugal>> {
    let alone = opener == Opener::Alone;
    let cfg = FrugalConfig {
        expected_chunks: (disk.entry_count() as usize).max(1 << 16),
        ..FrugalConfig::default()
    };
    let (own, guard, scope) = match opener {
        Opener::Alone => (0, None, frugal::LogScope::EveryLog),
        Opener::Beside { partition } => {
            let asked = partition
                .filter(|&k| (1..MAX_FRUGAL_PARTITIONS).contains(&k))
                .map(|k| take_frugal_partition_k(&**backend, k))
                .transpose()?
                .flatten();
            match asked {
                Some((k, g)) => (k, Some(g), frugal::LogScope::BaseAndOwn),
                None => {
                    let (k, g) = take_frugal_partition(&**backend)?;
                    (k, Some(g), frugal::LogScope::EveryLog)
                }
            }
        }
    };
    let problem = match FrugalIndex::open_partition(
        backend.clone(),
        counters.clone(),
        cfg.clone(),
        own,
        alone,
        Some(gone),
        scope,
    ) {
        Ok(f) if f.records_at_open() >= disk.entry_count() => return Ok(Some((f, guard))),
        Ok(f) => format!(
            "the frugal index holds {} chunks, the paged index {}",
            f.records_at_open(),
            disk.entry_count()
        ),
        Err(e) if is_damage(&e) => e.to_string(),
        Err(e) => return Err(e),
    };
    if !alone {
        return Ok(None);
    }
    warnings.push(format!(
        "{problem}; rebuilding the frugal index from the paged index"
    ));
    Ok(Some((
        rebuild_frugal_log(backend, counters, disk, cfg)?,
        None,
    )))
}

/// Writes the frugal index's logs afresh from the paged index, by a
/// handle that holds the writer lock alone: every segment of every
/// partition is deleted, then partition 0 gets one put per paged entry.
/// The logs are derived data, so a crash anywhere leaves a state the next
/// open alone rebuilds: each partition's first segment (position 0) goes
/// first, and a partition without it fails its open as damaged; once
/// every first segment is gone, what is left holds fewer records than the
/// paged index has entries until the new log is whole.
pub(crate) fn rebuild_frugal_log(
    backend: &Arc<dyn Backend>,
    counters: &Arc<Counters>,
    disk: &DiskIndex,
    cfg: FrugalConfig,
) -> Result<FrugalIndex> {
    let mut keys = backend.list(frugal::log::LOG_PREFIX)?;
    keys.sort_by_key(|k| !frugal::log::is_first_segment(k));
    for key in keys {
        backend.delete(&key)?;
    }
    let mut f = FrugalIndex::open(backend.clone(), counters.clone(), cfg)?;
    let mut failed = None;
    disk.for_each_entry(&mut |e| {
        if failed.is_none() {
            if let Err(err) = f.insert(&e.fp, e.container) {
                failed = Some(err);
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    f.flush()?;
    Ok(f)
}

/// Frugal-index partition `k` with its lock, or `None` when another
/// writer holds it.
fn take_frugal_partition_k(
    backend: &dyn Backend,
    k: u32,
) -> Result<Option<(u32, Box<dyn LockGuard>)>> {
    match backend.lock(
        &object_names::frugal_partition_lock(k),
        LockMode::Exclusive,
        false,
    ) {
        Ok(guard) => Ok(Some((k, guard))),
        Err(Error::Locked(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The first frugal-index partition whose lock is free, with its lock.
fn take_frugal_partition(backend: &dyn Backend) -> Result<(u32, Box<dyn LockGuard>)> {
    for k in 0..MAX_FRUGAL_PARTITIONS {
        if let Some(taken) = take_frugal_partition_k(backend, k)? {
            return Ok(taken);
        }
    }
    Err(Error::Locked(format!(
        "all {MAX_FRUGAL_PARTITIONS} frugal-index partitions are held by running writers"
    )))
}

fn load_checkpoint(
    backend: &dyn Backend,
    generation: u64,
    covered: ContainerId,
    cfg: &IndexConfig,
    indexed: u64,
) -> Option<SummaryVector> {
    if generation == 0 {
        return Some(SummaryVector::with_capacity(
            cfg.expected_chunks,
            cfg.bloom_bits_per_chunk,
        ));
    }
    let bytes = backend.read(&object_names::bloom(generation)).ok()?;
    let (sv, sv_covered) = SummaryVector::from_checkpoint(&bytes).ok()?;
    // A checkpoint of another mark, or one holding more entries than it was
    // sized for, is rebuilt. The bound is the filter's capacity, not twice
    // the entries, which is what a rebuild and a merge size it at: with that
    // bound a filter rebuilt for `n` entries was overfull again as soon as
    // one delta added an entry, so every open of every backup between two
    // merges read the whole index to rebuild it, and every commit rewrote
    // the checkpoint (at eight writers on object storage, half of all
    // backups; docs/concurrency.md, "With eight writers").
    (sv_covered == covered && !sv.is_overfull(indexed, cfg.bloom_bits_per_chunk)).then_some(sv)
}

/// Writes the Summary Vector checkpoint for `generation` and removes older ones.
pub fn write_checkpoint(
    backend: &dyn Backend,
    summary: &SummaryVector,
    generation: u64,
    covered: ContainerId,
) -> Result<()> {
    backend.write_atomic(
        &object_names::bloom(generation),
        &summary.checkpoint(covered),
    )?;
    delete_checkpoints_before(backend, generation)
}

/// Removes the checkpoints of generations before `generation`.
pub fn delete_checkpoints_before(backend: &dyn Backend, generation: u64) -> Result<()> {
    for key in backend.list(object_names::BLOOM)? {
        match object_names::parse_generation(&key, object_names::BLOOM) {
            Some(g) if g < generation => backend.delete(&key)?,
            _ => {}
        }
    }
    Ok(())
}

/// Whether an error opening the index means the file is damaged (a flipped
/// version field reads as an unknown version): the index is derived from the
/// containers, so such an index is rebuilt rather than trusted.
pub fn is_damage(e: &Error) -> bool {
    e.is_corruption() || matches!(e, Error::UnsupportedVersion { .. })
}

/// An error for a fingerprint the index cannot place.
pub fn missing_chunk(fp: &cairn_core::Fingerprint) -> Error {
    Error::corrupt(
        "repository",
        format!("chunk {fp} is referenced but not in the index"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;

    /// A checkpoint is used while the index holds no more entries than the
    /// filter was sized for. The bound was twice the entries, the size a
    /// rebuild gives the filter, so a filter rebuilt for `n` entries was
    /// rebuilt again at every open once one delta had added an entry.
    #[test]
    fn a_checkpoint_is_used_until_the_index_outgrows_it() {
        let backend = MemBackend::new();
        let cfg = IndexConfig::default();
        let covered = ContainerId(9);
        // The size an open's rebuild gives a filter for 5,000 entries.
        let sv = SummaryVector::with_capacity(10_000, cfg.bloom_bits_per_chunk);
        let capacity = sv.num_bits() / cfg.bloom_bits_per_chunk as u64;
        write_checkpoint(&backend, &sv, 3, covered).unwrap();
        for indexed in [5_000, 5_001, 7_500, capacity] {
            assert!(
                load_checkpoint(&backend, 3, covered, &cfg, indexed).is_some(),
                "rebuilt at {indexed} entries, room for {capacity}"
            );
        }
        assert!(load_checkpoint(&backend, 3, covered, &cfg, capacity + 1).is_none());
        assert!(load_checkpoint(&backend, 3, ContainerId(8), &cfg, 5_000).is_none());
    }
}

#[cfg(test)]
#[path = "frugal_compaction_tests.rs"]
mod frugal_compaction_tests;
