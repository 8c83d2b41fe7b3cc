//! Tests of the frugal index's partitions (one chunk log per writer
//! running at once, `log.rs`): writers beside each other each append to
//! their own log and see the others' as of their open; a handle alone (a
//! collection) removes from every log; a reopen finds every live record of
//! every log and none a removal superseded; records naming a gone
//! container stay out of the table and out of the prefetch cache.

use super::*;
use cairn_backend::MemBackend;
use cairn_format::index::IndexEntry;
use proptest::prelude::*;
use std::collections::HashMap;

const KEYS: u8 = 30;

fn fp(k: u8) -> Fingerprint {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&cairn_core::ids::mix64(k as u64 + 1000).to_le_bytes());
    b[19] = k;
    Fingerprint::from_slice(&b)
}

fn cfg(segment_records: usize) -> FrugalConfig {
    FrugalConfig {
        expected_chunks: 4,
        segment_records,
        prefetch_run: 8,
        prefetch_cache_entries: 16,
        ..FrugalConfig::default()
    }
}

fn open(
    backend: &Arc<MemBackend>,
    segment_records: usize,
    part: u32,
    alone: bool,
    gone: Option<GoneFn>,
) -> FrugalIndex {
    let b: Arc<dyn Backend> = backend.clone();
    FrugalIndex::open_partition(
        b,
        Arc::new(Counters::default()),
        cfg(segment_records),
        part,
        alone,
        gone,
        LogScope::EveryLog,
    )
    .unwrap()
}

/// Per key, the live record of each partition.
type Model = HashMap<u8, HashMap<u32, ContainerId>>;

/// A put as a handle sees it: `view` is what it can see of `k` (the
/// model as of its open plus its own puts); it writes into `own`.
fn model_put(view: &mut HashMap<u32, ContainerId>, own: u32, alone: bool, c: ContainerId) {
    if let Some(old) = view.values().copied().reduce(canonical) {
        if canonical(old, c) == old {
            return;
        }
        if alone {
            view.clear();
        } else {
            view.remove(&own);
        }
    }
    view.insert(own, c);
}

fn assert_resolves(ix: &mut FrugalIndex, model: &Model) {
    for k in 0..KEYS {
        let got = ix.lookup(&fp(k)).unwrap();
        let live: Vec<ContainerId> = model
            .get(&k)
            .map(|m| m.values().copied().collect())
            .unwrap_or_default();
        match got {
            None => assert!(live.is_empty(), "key {k} lost, live in {live:?}"),
            Some(c) => assert!(live.contains(&c), "key {k} -> {c}, live in {live:?}"),
        }
    }
    let records: usize = model.values().map(HashMap::len).sum();
    assert_eq!(ix.len(), records);
}

/// Keys removed, then (key, container) put.
type Batch = (Vec<u8>, Vec<(u8, u64)>);

#[derive(Clone, Debug)]
struct Round {
    /// Puts of each writer beside the others: (key, container).
    writers: Vec<Vec<(u8, u64)>>,
    /// Then, alone: removals and puts (a collection's batch).
    alone: Option<Batch>,
}

fn round() -> impl Strategy<Value = Round> {
    let put = (0..KEYS, 0u64..40);
    (
        proptest::collection::vec(proptest::collection::vec(put.clone(), 0..12), 1..4),
        proptest::option::of((
            proptest::collection::vec(0..KEYS, 0..6),
            proptest::collection::vec(put, 0..6),
        )),
    )
        .prop_map(|(writers, alone)| Round { writers, alone })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Rounds of writers beside each other (each on its own partition,
    /// seeing the others' logs as of its open), then a handle alone that
    /// removes and moves: after each round a reopened index resolves every
    /// key to a live copy, forgets every removed one, and indexes exactly
    /// one record per live copy.
    #[test]
    fn partitions_never_lose_or_resurrect_an_entry(
        rounds in proptest::collection::vec(round(), 1..6),
        segment_records in 1usize..10,
        first_part in 0u32..2,
    ) {
        let backend = Arc::new(MemBackend::new());
        let mut model: Model = HashMap::new();
        for r in rounds {
            let mut handles: Vec<(u32, FrugalIndex, Model)> = (0..r.writers.len() as u32)
                .map(|w| {
                    let part = first_part + w;
                    (part, open(&backend, segment_records, part, false, None), model.clone())
                })
                .collect();
            for (w, puts) in r.writers.iter().enumerate() {
                let (part, ix, view) = &mut handles[w];
                for &(k, c) in puts {
                    ix.put(&fp(k), ContainerId(c)).unwrap();
                    model_put(view.entry(k).or_default(), *part, false, ContainerId(c));
                }
                assert_resolves(ix, view);
            }
            // The logs as the writers left them: each partition as its
            // writer saw it.
            for (part, mut ix, view) in handles {
                ix.flush().unwrap();
                for k in 0..KEYS {
                    let mine = view.get(&k).and_then(|m| m.get(&part)).copied();
                    let m = model.entry(k).or_default();
                    match mine {
                        Some(c) => m.insert(part, c),
                        None => m.remove(&part),
                    };
                }
            }
            if let Some((removes, puts)) = &r.alone {
                let mut ix = open(&backend, segment_records, 0, true, None);
                ix.apply(&IndexUpdate {
                    removes_below: None,
                    puts: puts
                        .iter()
                        .map(|&(k, c)| IndexEntry { fp: fp(k), container: ContainerId(c) })
                        .collect(),
                    removes: removes.iter().map(|&k| fp(k)).collect(),
                })
                .unwrap();
                for k in removes {
                    model.remove(k);
                }
                for &(k, c) in puts {
                    model_put(model.entry(k).or_default(), 0, true, ContainerId(c));
                }
                assert_resolves(&mut ix, &model);
            }
            let mut ix = open(&backend, segment_records, 0, true, None);
            assert_resolves(&mut ix, &model);
        }
    }
}

/// Beside other writers a handle cannot remove what another writer's log
/// holds (only a collection alone does), and a put of a newer copy leaves
/// the other writer's older copy, which still resolves.
#[test]
fn a_writer_beside_others_touches_only_its_own_log() {
    let backend = Arc::new(MemBackend::new());
    let mut a = open(&backend, 4, 1, false, None);
    a.put(&fp(1), ContainerId(3)).unwrap();
    a.flush().unwrap();
    drop(a);
    let mut b = open(&backend, 4, 2, false, None);
    assert!(b.remove(&fp(1)).is_err());
    b.put(&fp(1), ContainerId(9)).unwrap();
    b.flush().unwrap();
    drop(b);
    let logs = log::open_partitions(&(backend.clone() as Arc<dyn Backend>), 4).unwrap();
    assert_eq!(logs.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    assert!(backend
        .list(log::LOG_PREFIX)
        .unwrap()
        .iter()
        .all(|k| k.starts_with("frugal/p1-") || k.starts_with("frugal/p2-")));
    let mut alone = open(&backend, 4, 0, true, None);
    assert_eq!(alone.len(), 2);
    assert!(alone.lookup(&fp(1)).unwrap().is_some());
    // Alone, the removal reaches both logs, and a reopen agrees.
    assert!(alone.remove(&fp(1)).unwrap());
    alone.flush().unwrap();
    drop(alone);
    let mut again = open(&backend, 4, 0, true, None);
    assert_eq!(again.lookup(&fp(1)).unwrap(), None);
    assert!(again.is_empty());
}

/// Records naming a container the opener knows gone (a writer died
/// between its log and its index delta, and a collection deleted its
/// containers) are not indexed, and a prefetch run beside live records
/// does not bring them back.
#[test]
fn records_of_gone_containers_stay_out() {
    let backend = Arc::new(MemBackend::new());
    let mut w = open(&backend, 64, 0, true, None);
    for k in 0..10 {
        w.put(&fp(k), ContainerId(if k == 4 { 7 } else { 8 }))
            .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let gone: GoneFn = Box::new(|c| c == ContainerId(7));
    let mut ix = open(&backend, 64, 0, true, Some(gone));
    assert_eq!(ix.len(), 9);
    // Key 0's run holds key 4's record.
    assert_eq!(ix.lookup(&fp(0)).unwrap(), Some(ContainerId(8)));
    assert_eq!(ix.lookup(&fp(4)).unwrap(), None);
}

/// 004's partitioned dedup: a handle scoped to its partition and the base
/// (partition 0) finds what those two logs hold and nothing of another
/// partition's, counts every log's records for the health check, and its
/// own puts stay in its own log; an unscoped handle still sees every log.
#[test]
fn a_scoped_writer_indexes_only_the_base_and_its_own_log() {
    let backend = Arc::new(MemBackend::new());
    let b: Arc<dyn Backend> = backend.clone();
    let scoped = |part: u32| {
        FrugalIndex::open_partition(
            b.clone(),
            Arc::new(Counters::default()),
            cfg(4),
            part,
            false,
            None,
            LogScope::BaseAndOwn,
        )
        .unwrap()
    };
    let mut base = open(&backend, 4, 0, true, None);
    base.put(&fp(0), ContainerId(1)).unwrap();
    base.flush().unwrap();
    drop(base);
    for (part, k) in [(1, 1), (2, 2)] {
        let mut w = scoped(part);
        w.put(&fp(k), ContainerId(10 + u64::from(k))).unwrap();
        w.flush().unwrap();
    }
    let mut one = scoped(1);
    assert_eq!(one.partitions(), vec![0, 1]);
    assert_eq!(one.records(), 2);
    assert_eq!(one.records_at_open(), 3);
    assert_eq!(one.lookup(&fp(0)).unwrap(), Some(ContainerId(1)));
    assert_eq!(one.lookup(&fp(1)).unwrap(), Some(ContainerId(11)));
    assert_eq!(one.lookup(&fp(2)).unwrap(), None, "partition 2's chunk");
    // Stored again in partition 1: both copies indexed where they live.
    one.put(&fp(2), ContainerId(21)).unwrap();
    one.flush().unwrap();
    drop(one);
    let mut every = open(&backend, 4, 3, false, None);
    assert_eq!(every.partitions(), vec![0, 1, 2, 3]);
    assert_eq!(every.lookup(&fp(2)).unwrap(), Some(ContainerId(21)));
    assert_eq!(scoped(2).lookup(&fp(2)).unwrap(), Some(ContainerId(12)));
}
