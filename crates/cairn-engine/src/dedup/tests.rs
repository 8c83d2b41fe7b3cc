//! Dedup decisions equal exact membership under every ablation and both
//! lookup strategies.

use super::*;
use crate::config::{IndexConfig, IndexKind, LookupConfig};
use crate::warnings::Warnings;
use cairn_backend::MemBackend;
use cairn_core::{Backend, ChunkKind, CompressionCodec};
use cairn_format::container::ContainerWriter;
use eager::Eager;
use lazy::LazyBuffer;
use proptest::prelude::*;
use std::collections::HashSet;

fn fp(i: u16) -> Fingerprint {
    Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
}

/// An empty in-memory backend with its counters and container log.
fn empty_repository() -> (Arc<dyn Backend>, Arc<Counters>, Arc<dyn ContainerStore>) {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let counters = Arc::new(Counters::default());
    let log: Arc<dyn ContainerStore> = Arc::new(
        crate::container_log::ContainerLog::open(backend.clone(), counters.clone()).unwrap(),
    );
    (backend, counters, log)
}

/// The dedup path of a backup over the repository's index as it is now
/// (opened for write: replaying what earlier backups left uncommitted).
pub(super) fn open_dedup(
    backend: &Arc<dyn Backend>,
    counters: &Arc<Counters>,
    log: &Arc<dyn ContainerStore>,
    cfg: &IndexConfig,
    cache_containers: usize,
    use_cache: bool,
) -> Dedup {
    let opened = crate::index::open_for_write(
        backend.clone(),
        counters.clone(),
        &**log,
        cfg,
        &Warnings::default(),
    )
    .unwrap();
    Dedup::new(
        opened,
        log.clone(),
        counters.clone(),
        cache_containers,
        use_cache,
    )
}

/// Packs new chunks into containers of `per_container` chunks, sealing
/// (and announcing to the dedup path) as a stream's sealer would.
struct Packer<'a> {
    dedup: &'a Dedup,
    log: &'a Arc<dyn ContainerStore>,
    writer: Option<ContainerWriter>,
    per_container: usize,
}

impl Packer<'_> {
    fn push(&mut self, f: Fingerprint) {
        let (dedup, log) = (self.dedup, self.log);
        let w = self.writer.get_or_insert_with(|| {
            let id = log.allocate().unwrap();
            dedup.container_opened(id);
            ContainerWriter::new(id, 32, 1 << 20)
        });
        w.push(f, ChunkKind::Data, 0, CompressionCodec::None, 1, &[0]);
        if w.len() >= self.per_container {
            self.seal();
        }
    }

    fn seal(&mut self) {
        if let Some(w) = self.writer.take() {
            let id = w.id();
            let sealed: Vec<Fingerprint> = w.descriptors().iter().map(|d| d.fp).collect();
            self.dedup.container_closed(id, sealed);
            self.log.append(w).unwrap();
            self.dedup.container_sealed(id);
        }
    }
}

/// Runs `batches` of fingerprints through the dedup path as a stream
/// would (sealing a container every `per_container` new chunks, merging
/// the index between "backups"), eagerly or, with `lazy`, through
/// Algorithm 2, and returns the new/duplicate decisions in input order.
fn run(
    batches: &[Vec<u16>],
    per_container: usize,
    summary: bool,
    cache: bool,
    lazy: Option<&LookupConfig>,
) -> Vec<bool> {
    run_counted(
        batches,
        per_container,
        summary,
        cache,
        lazy,
        IndexKind::Paged,
    )
    .0
}

/// [`run`], also returning the counters of the whole run.
fn run_counted(
    batches: &[Vec<u16>],
    per_container: usize,
    summary: bool,
    cache: bool,
    lazy: Option<&LookupConfig>,
    kind: IndexKind,
) -> (Vec<bool>, cairn_core::CountersSnapshot) {
    let (backend, counters, log) = empty_repository();
    let cfg = IndexConfig {
        expected_chunks: 64,
        cache_containers: 2,
        summary_vector: summary,
        kind,
        ..Default::default()
    };
    // Reads for the location check, counted apart from the run's counters.
    let inspect =
        crate::container_log::ContainerLog::open(backend.clone(), Arc::new(Counters::default()))
            .unwrap();
    let mut decisions: Vec<Option<bool>> = Vec::new();
    // Each pair of batches is one "backup": reopen, replay, merge at the end.
    for backup in batches.chunks(2) {
        let dedup = open_dedup(&backend, &counters, &log, &cfg, 2, cache);
        let mut packer = Packer {
            dedup: &dedup,
            log: &log,
            writer: None,
            per_container,
        };
        let mut strategy: Box<dyn LookupStrategy> = match lazy {
            Some(c) => Box::new(LazyBuffer::new(c)),
            None => Box::new(Eager::default()),
        };
        let base = decisions.len();
        let mut out = Vec::new();
        let mut fps_by_rank: Vec<Fingerprint> = Vec::new();
        // Every duplicate's location names a container holding the chunk.
        let check_location = |f: &Fingerprint, loc: Location| {
            if let Location::Stored(id) = loc {
                let meta = inspect
                    .read_meta(id)
                    .expect("a stored duplicate's container exists");
                assert!(
                    meta.descriptors.iter().any(|d| d.fp == *f),
                    "container {id} does not hold {f}"
                );
            }
        };
        let decide = |decisions: &mut Vec<Option<bool>>,
                      packer: &mut Packer,
                      slot: usize,
                      f: Fingerprint,
                      loc: Location| {
            check_location(&f, loc);
            if slot == decisions.len() {
                decisions.push(Some(loc.is_new()));
            } else {
                assert_eq!(decisions[slot], None, "slot {slot} decided twice");
                decisions[slot] = Some(loc.is_new());
            }
            if loc.is_new() {
                packer.push(f);
            }
        };
        for batch in backup {
            let fps: Vec<Fingerprint> = batch.iter().map(|&i| fp(i)).collect();
            fps_by_rank.extend(&fps);
            strategy.submit(&dedup, &fps, &mut out).unwrap();
            for (f, d) in fps.iter().zip(&out) {
                match *d {
                    Decision::Decided(loc) => {
                        let slot = decisions.len();
                        decide(&mut decisions, &mut packer, slot, *f, loc)
                    }
                    Decision::Pending(_) => decisions.push(None),
                }
            }
            for (rank, loc) in strategy.take_resolved() {
                let f = fps_by_rank[rank as usize];
                decide(&mut decisions, &mut packer, base + rank as usize, f, loc);
            }
        }
        strategy.flush(&dedup).unwrap();
        for (rank, loc) in strategy.take_resolved() {
            let f = fps_by_rank[rank as usize];
            decide(&mut decisions, &mut packer, base + rank as usize, f, loc);
        }
        assert_eq!(strategy.buffered(), 0);
        packer.seal();
        dedup
            .commit_index(
                &*backend,
                IndexUpdate::puts(dedup.take_memory_entries()),
                log.next_id(),
                32,
                512,
            )
            .unwrap();
    }
    let decisions = decisions
        .into_iter()
        .map(|d| d.expect("every chunk decided"))
        .collect();
    (decisions, counters.snapshot())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the ablation, a chunk is new exactly when it was never
    /// seen before: the Summary Vector and cache change cost, never answers.
    #[test]
    fn decisions_equal_exact_membership(
        batches in proptest::collection::vec(proptest::collection::vec(0u16..300, 0..60), 1..7),
        per_container in 1usize..20,
    ) {
        let mut seen = HashSet::new();
        let expected: Vec<bool> = batches.iter().flatten().map(|i| seen.insert(*i)).collect();
        for (summary, cache) in [(false, false), (true, false), (false, true), (true, true)] {
            prop_assert_eq!(&run(&batches, per_container, summary, cache, None), &expected,
                "summary={} cache={}", summary, cache);
        }
    }

    /// The frugal index in place of Summary Vector + paged index changes
    /// cost, never answers, with and without the locality cache.
    #[test]
    fn frugal_index_decisions_equal_exact_membership(
        batches in proptest::collection::vec(proptest::collection::vec(0u16..300, 0..60), 1..7),
        per_container in 1usize..20,
    ) {
        let mut seen = HashSet::new();
        let expected: Vec<bool> = batches.iter().flatten().map(|i| seen.insert(*i)).collect();
        for cache in [false, true] {
            let (got, _) = run_counted(&batches, per_container, true, cache, None, IndexKind::Frugal);
            prop_assert_eq!(&got, &expected, "cache={}", cache);
        }
    }

    /// Lazy lookup decides exactly what eager lookup decides, for any bucket
    /// threshold, ring size and buffer size, under every ablation.
    #[test]
    fn lazy_decides_like_eager(
        batches in proptest::collection::vec(proptest::collection::vec(0u16..300, 0..80), 1..7),
        per_container in 1usize..20,
        bucket_threshold in 1u32..6,
        ring_size in 1u32..40,
        buffer_fingerprints in 1u32..50,
    ) {
        let lazy = LookupConfig {
            bucket_threshold,
            ring_size,
            buffer_fingerprints,
            ..LookupConfig::default()
        };
        for (summary, cache) in [(false, false), (true, false), (false, true), (true, true)] {
            let eager = run(&batches, per_container, summary, cache, None);
            prop_assert_eq!(&run(&batches, per_container, summary, cache, Some(&lazy)), &eager,
                "summary={} cache={}", summary, cache);
        }
    }
}

/// On a repeated generation, lazy lookup batches index page reads: fewer
/// page reads than eager, with post-lookup resolving the rest of each ring.
#[test]
fn lazy_reads_fewer_index_pages_than_eager() {
    let gen: Vec<u16> = (0..3000).collect();
    let batches: Vec<Vec<u16>> = vec![gen.clone(), vec![], gen.clone(), vec![]];
    let lazy_cfg = LookupConfig {
        bucket_threshold: 4,
        ring_size: 256,
        buffer_fingerprints: 4096,
        ..LookupConfig::default()
    };
    let (eager, e) = run_counted(&batches, 64, true, true, None, IndexKind::Paged);
    let (lazy, l) = run_counted(&batches, 64, true, true, Some(&lazy_cfg), IndexKind::Paged);
    assert_eq!(eager, lazy);
    assert!(
        l.index_page_reads * 2 < e.index_page_reads,
        "lazy {l:?}\neager {e:?}"
    );
    assert!(l.post_lookup_hits > 0 && l.lazy_disk_resolved > 0, "{l:?}");
    assert!(l.post_lookup_visits >= l.post_lookup_probes);
    assert_eq!(e.post_lookup_visits + e.post_lookup_probes, 0);
}

/// A backup's commit takes the in-memory part for the merge: the table is
/// empty (its RAM given back) before the new generation is built, and the
/// generation holds every chunk the update carried.
#[test]
fn commit_takes_the_in_memory_part_and_indexes_all_of_it() {
    let (backend, counters, log) = empty_repository();
    let cfg = IndexConfig {
        expected_chunks: 64,
        cache_containers: 2,
        ..Default::default()
    };
    let open = || open_dedup(&backend, &counters, &log, &cfg, 2, false);
    let dedup = open();
    let mut packer = Packer {
        dedup: &dedup,
        log: &log,
        writer: None,
        per_container: 16,
    };
    for i in 0..100 {
        packer.push(fp(i));
    }
    packer.seal();
    let with_table = dedup.ram_bytes();
    let entries = dedup.take_memory_entries();
    assert_eq!(entries.len(), 100);
    assert!(dedup.memory_entries().is_empty());
    assert!(dedup.ram_bytes() < with_table, "the table is freed");
    dedup
        .commit_index(
            &*backend,
            IndexUpdate::puts(entries),
            log.next_id(),
            32,
            512,
        )
        .unwrap();
    assert_eq!(dedup.indexed_entries(), 100);
    drop(dedup);
    assert_eq!(open().indexed_entries(), 100, "a fresh open finds them");
}

/// With the frugal index, later backups find earlier chunks through the
/// chunk log (no Summary Vector, no paged-index page reads for lookups).
#[test]
fn frugal_index_finds_earlier_backups_chunks() {
    let gen: Vec<u16> = (0..2000).collect();
    let batches: Vec<Vec<u16>> = vec![gen.clone(), vec![], gen.clone(), vec![]];
    let (decisions, c) = run_counted(&batches, 64, true, false, None, IndexKind::Frugal);
    assert!(decisions[..2000].iter().all(|&n| n));
    assert!(decisions[2000..].iter().all(|&n| !n));
    // Every second-generation lookup was confirmed in the log, and the
    // prefetch cache made that a small number of log reads.
    assert_eq!(c.index_hits, 2000);
    assert!(c.index_page_reads > 0 && c.index_page_reads < 100, "{c:?}");
    assert_eq!(c.bloom_inserts, 0);
}

/// Both index kinds forget and move entries through one
/// `FingerprintIndex::commit` batch, and a fresh open agrees: the frugal
/// chunk log and the paged index resolve every fingerprint alike.
#[test]
fn both_index_kinds_forget_and_move_entries_in_one_batch() {
    for kind in [IndexKind::Paged, IndexKind::Frugal] {
        let (backend, counters, log) = empty_repository();
        let cfg = IndexConfig {
            expected_chunks: 64,
            kind,
            ..Default::default()
        };
        let open = || {
            crate::index::open_for_write(
                backend.clone(),
                counters.clone(),
                &*log,
                &cfg,
                &Warnings::default(),
            )
            .unwrap()
            .kind
        };
        let entry = |i: u16, c: u64| IndexEntry {
            fp: fp(i),
            container: ContainerId(c),
        };
        let mut ix = open();
        // New chunks join the filter when decided new, before the commit.
        (0..100).for_each(|i| ix.note_new(&fp(i)));
        let first = IndexUpdate::puts((0..100).map(|i| entry(i, i as u64 / 10)).collect());
        ix.commit(&*backend, first, ContainerId(10), 32, 512)
            .unwrap();
        // Garbage collection's shape: 0..20 forgotten, 10..20 moved to 12.
        let second = IndexUpdate {
            removes_below: None,
            removes: (0..20).map(fp).collect(),
            puts: (10..20).map(|i| entry(i, 12)).collect(),
        };
        let mut ix = open();
        ix.commit(&*backend, second, ContainerId(13), 32, 512)
            .unwrap();
        for reopened in [false, true] {
            if reopened {
                ix = open();
            }
            for i in 0..100u16 {
                let want = match i {
                    0..10 => None,
                    10..20 => Some(ContainerId(12)),
                    _ => Some(ContainerId(i as u64 / 10)),
                };
                let got = if ix.certainly_new(&fp(i)) {
                    None
                } else {
                    ix.lookup(&fp(i)).unwrap()
                };
                assert_eq!(got, want, "{kind:?}, fingerprint {i}, reopened {reopened}");
            }
        }
    }
}

/// A mid-backup merge (`part_budget`) moves only durable containers'
/// entries, keeps the rest (an open container's, chunks in flight), and
/// when it rebuilds the Summary Vector larger the kept chunks join the
/// new filter: none of them looks certainly new afterwards.
#[test]
fn a_mid_backup_merge_moves_durable_entries_and_keeps_the_rest_known() {
    let (backend, counters, log) = empty_repository();
    let cfg = IndexConfig {
        // Overfull at the first merge (the filter holds at least 1,024
        // chunks): it is rebuilt from the index.
        expected_chunks: 4,
        ..Default::default()
    };
    let dedup = open_dedup(&backend, &counters, &log, &cfg, 4, true).with_part_budget(
        part_budget::PartBudget {
            entries: 500,
            backend: backend.clone(),
            fp_width: 32,
            page_size: 4096,
        },
    );
    // Stream A fills and seals two containers; stream B holds one open
    // and decides more chunks new (in flight).
    let mut a = Packer {
        dedup: &dedup,
        log: &log,
        writer: None,
        per_container: 100,
    };
    let mut b = Packer {
        dedup: &dedup,
        log: &log,
        writer: None,
        per_container: 1000,
    };
    let decide = |i: u16| dedup.session().decide_new(&fp(i));
    for i in 0..600 {
        decide(i);
        a.push(fp(i));
    }
    for i in 1000..1004 {
        decide(i);
        b.push(fp(i));
    }
    for i in 2000..2004 {
        decide(i);
    }
    assert_eq!(dedup.bound_memory_part().unwrap(), 600);
    let s = dedup.session();
    for i in (0..600).chain(1000..1004).chain(2000..2004) {
        assert!(
            !s.certainly_new(&fp(i)),
            "chunk {i} looks new after the merge"
        );
    }
    // The moved chunks are in the index, the rest still in memory.
    for i in 0..600 {
        assert!(!s.known_in_memory(&fp(i)));
    }
    for i in (1000..1004).chain(2000..2004) {
        assert!(s.known_in_memory(&fp(i)));
    }
    drop(s);
    let mut s = dedup.session();
    assert!(matches!(
        s.index_lookup(&fp(3)).unwrap(),
        Some(Location::Stored(_))
    ));
    // Under budget now: nothing moves.
    drop(s);
    assert_eq!(dedup.bound_memory_part().unwrap(), 0);
}
