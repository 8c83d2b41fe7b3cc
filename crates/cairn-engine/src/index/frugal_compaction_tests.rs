//! Tests of the frugal logs' rewrite from the paged index
//! ([`rebuild_frugal_log`]; a collection alone compacts with it,
//! `kinds::frugal::needs_compaction`): a crash at any write of a rewrite
//! leaves logs that the next open alone sees as damaged or short and
//! rebuilds, never logs that open as whole while lacking entries.

use super::*;
use cairn_backend::{FaultBackend, FaultPlan, MemBackend};
use cairn_core::Fingerprint;

fn fp(i: u64) -> Fingerprint {
    Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
}

const ENTRIES: u64 = 1_500;

fn small_logs() -> FrugalConfig {
    FrugalConfig {
        segment_records: 128,
        expected_chunks: 4096,
        ..FrugalConfig::default()
    }
}

/// A paged index of `ENTRIES` chunks in container 1, and loose logs: two
/// partitions, the second holding copies of a third of them (in container
/// 2, which the paged index does not name), puts of chunks it does not
/// hold (more records than the paged index has entries, so only the
/// deletion order keeps a crash from leaving it looking whole) and
/// removals of some of those.
fn loose_repository(backend: &Arc<dyn Backend>) -> DiskIndex {
    let counters = Arc::new(Counters::default());
    let disk = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
    let entries: Vec<IndexEntry> = (0..ENTRIES)
        .map(|i| IndexEntry {
            fp: fp(i),
            container: ContainerId(1),
        })
        .collect();
    disk.write_merged(entries, ContainerId(2), 32, 4096)
        .unwrap();
    let mut alone = FrugalIndex::open(backend.clone(), counters.clone(), small_logs()).unwrap();
    for i in 0..ENTRIES {
        alone.insert(&fp(i), ContainerId(1)).unwrap();
    }
    alone.flush().unwrap();
    drop(alone);
    let mut beside = FrugalIndex::open_partition(
        backend.clone(),
        counters,
        small_logs(),
        1,
        false,
        None,
        frugal::LogScope::EveryLog,
    )
    .unwrap();
    for i in (0..ENTRIES / 3).chain(ENTRIES..2 * ENTRIES) {
        beside.insert(&fp(i), ContainerId(2)).unwrap();
    }
    for i in ENTRIES..ENTRIES + 100 {
        beside.remove(&fp(i)).unwrap();
    }
    beside.flush().unwrap();
    disk
}

/// What the next open alone finds: damage or too few records (a rebuild
/// follows), or logs that answer every entry of the paged index.
fn open_sees_whole_or_rebuilds(backend: &Arc<dyn Backend>, at: u64) -> bool {
    let opened = FrugalIndex::open_partition(
        backend.clone(),
        Arc::new(Counters::default()),
        small_logs(),
        0,
        true,
        None,
        frugal::LogScope::EveryLog,
    );
    match opened {
        Err(e) => {
            assert!(is_damage(&e), "crash after {at} writes: {e}");
            false
        }
        Ok(f) if f.records_at_open() < ENTRIES => false,
        Ok(mut f) => {
            for i in 0..ENTRIES {
                assert!(
                    f.lookup(&fp(i)).unwrap().is_some(),
                    "crash after {at} writes: the logs open whole without entry {i}"
                );
            }
            true
        }
    }
}

#[test]
fn a_crash_anywhere_in_a_rewrite_leaves_logs_the_next_open_rebuilds() {
    let mut completed = false;
    for at in 0.. {
        let plan = FaultPlan::new();
        let backend: Arc<dyn Backend> =
            Arc::new(FaultBackend::new(MemBackend::new(), plan.clone()));
        let disk = loose_repository(&backend);
        let before = frugal::log::open_partitions(&backend, 128).unwrap();
        assert_eq!(before.len(), 2, "the setup has two partitions");
        plan.crash_after_writes(at);
        let rewrote = rebuild_frugal_log(
            &backend,
            &Arc::new(Counters::default()),
            &disk,
            small_logs(),
        );
        plan.restart();
        match rewrote {
            Ok(f) => {
                assert!(!plan.crashed());
                assert_eq!(f.records(), ENTRIES);
                assert_eq!(f.logs_holding_records(), 1);
                assert!(open_sees_whole_or_rebuilds(&backend, at));
                completed = true;
                break;
            }
            Err(e) => {
                assert!(cairn_backend::is_injected_crash(&e), "{e}");
                open_sees_whole_or_rebuilds(&backend, at);
            }
        }
    }
    assert!(completed);
}

/// Loose logs are compacted, tidy ones are not: a second partition with
/// records, or dead records of at least a quarter of the entries.
#[test]
fn compaction_waits_for_a_quarter_of_dead_records_or_a_second_log() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let disk = loose_repository(&backend);
    let counters = Arc::new(Counters::default());
    let open = || FrugalIndex::open(backend.clone(), counters.clone(), small_logs()).unwrap();
    assert!(kinds::frugal::needs_compaction(&open(), disk.entry_count()));
    let mut f = rebuild_frugal_log(&backend, &counters, &disk, small_logs()).unwrap();
    assert!(!kinds::frugal::needs_compaction(&f, ENTRIES));
    // Each removal makes two dead records (it and the put it cancels): a
    // tenth of the entries removed leaves 300 dead for 1,350, not yet.
    for i in 0..ENTRIES / 10 {
        f.remove(&fp(i)).unwrap();
    }
    f.flush().unwrap();
    assert!(!kinds::frugal::needs_compaction(
        &open(),
        ENTRIES - ENTRIES / 10
    ));
    // An eighth removed: 374 dead for 1,313 entries, now.
    for i in ENTRIES / 10..ENTRIES / 8 {
        f.remove(&fp(i)).unwrap();
    }
    f.flush().unwrap();
    assert!(kinds::frugal::needs_compaction(
        &open(),
        ENTRIES - ENTRIES / 8
    ));
}
