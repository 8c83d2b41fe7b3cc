//! Property tests of forgetting and moving entries in the frugal index:
//! no entry lost, no stale entry resurrected, through the prefetch cache,
//! table growth, flushes, reopen (a rebuild from the log) and crashes.

use super::*;
use cairn_backend::MemBackend;
use cairn_format::index::IndexEntry;
use proptest::prelude::*;
use std::collections::HashMap;

fn fp(k: u8) -> Fingerprint {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&cairn_core::ids::mix64(k as u64).to_le_bytes());
    b[19] = k;
    Fingerprint::from_slice(&b)
}

fn open(backend: &Arc<MemBackend>, segment_records: usize) -> FrugalIndex {
    let b: Arc<dyn Backend> = backend.clone();
    let cfg = FrugalConfig {
        expected_chunks: 4,
        segment_records,
        prefetch_run: 8,
        prefetch_cache_entries: 16,
        ..FrugalConfig::default()
    };
    FrugalIndex::open(b, Arc::new(Counters::default()), cfg).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u64),
    Remove(u8),
    /// One batch: removals first, then puts.
    Apply(Vec<u8>, Vec<(u8, u64)>),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..40;
    let container = 0u64..30;
    prop_oneof![
        6 => (key.clone(), container.clone()).prop_map(|(k, c)| Op::Put(k, c)),
        3 => key.clone().prop_map(Op::Remove),
        2 => (
            proptest::collection::vec(key.clone(), 0..6),
            proptest::collection::vec((key, container), 0..6)
        )
            .prop_map(|(r, p)| Op::Apply(r, p)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// The model: what each key resolves to, by the canonical-copy rule.
fn model_put(model: &mut HashMap<u8, ContainerId>, k: u8, c: ContainerId) {
    let e = model.entry(k).or_insert(c);
    *e = crate::canonical::canonical(*e, c);
}

/// One batch, applied to the index and the model alike.
fn apply_batch(
    ix: &mut FrugalIndex,
    model: &mut HashMap<u8, ContainerId>,
    removes: &[u8],
    puts: &[(u8, u64)],
) {
    let update = IndexUpdate {
        removes_below: None,
        puts: puts
            .iter()
            .map(|&(k, c)| IndexEntry {
                fp: fp(k),
                container: ContainerId(c),
            })
            .collect(),
        removes: removes.iter().map(|&k| fp(k)).collect(),
    };
    ix.apply(&update).unwrap();
    for k in removes {
        model.remove(k);
    }
    for &(k, c) in puts {
        model_put(model, k, ContainerId(c));
    }
}

fn assert_agrees(ix: &mut FrugalIndex, model: &HashMap<u8, ContainerId>) {
    for k in 0..40u8 {
        assert_eq!(
            ix.lookup(&fp(k)).unwrap(),
            model.get(&k).copied(),
            "key {k}"
        );
    }
    assert_eq!(ix.len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// After every operation, every key resolves exactly as the model says:
    /// a removed key is gone (also after a rebuild from the log, and from
    /// the prefetch cache), a moved key resolves to its new container, a
    /// put of an older copy does not displace a newer one.
    #[test]
    fn removals_and_moves_match_the_model(
        ops in proptest::collection::vec(op(), 1..80),
        segment_records in 1usize..12,
    ) {
        let backend = Arc::new(MemBackend::new());
        let mut ix = open(&backend, segment_records);
        let mut model = HashMap::new();
        for op in ops {
            match op {
                Op::Put(k, c) => {
                    ix.put(&fp(k), ContainerId(c)).unwrap();
                    model_put(&mut model, k, ContainerId(c));
                }
                Op::Remove(k) => {
                    let was = ix.remove(&fp(k)).unwrap();
                    prop_assert_eq!(was, model.remove(&k).is_some());
                }
                Op::Apply(removes, puts) => {
                    // Applying a batch again (a commit retried after a
                    // crash between the log and the paged index) changes
                    // nothing: removals, then the same puts.
                    apply_batch(&mut ix, &mut model, &removes, &puts);
                    apply_batch(&mut ix, &mut model, &removes, &puts);
                }
                Op::Flush => ix.flush().unwrap(),
                Op::Reopen => {
                    ix.flush().unwrap();
                    drop(ix);
                    ix = open(&backend, segment_records);
                }
            }
            assert_agrees(&mut ix, &model);
        }
        ix.flush().unwrap();
        drop(ix);
        let mut ix = open(&backend, segment_records);
        assert_agrees(&mut ix, &model);
    }

    /// A crash loses only what was not flushed: reopening gives exactly the
    /// state of the last flush (no segment is written before the flush
    /// here), never a removed entry back and never a flushed one lost.
    #[test]
    fn a_crash_returns_to_the_last_flush(
        before in proptest::collection::vec(op(), 0..40),
        after in proptest::collection::vec(op(), 0..40),
    ) {
        let backend = Arc::new(MemBackend::new());
        let mut ix = open(&backend, 1 << 20);
        let mut model = HashMap::new();
        for (ops, durable) in [(before, true), (after, false)] {
            for op in ops {
                match op {
                    Op::Put(k, c) => {
                        ix.put(&fp(k), ContainerId(c)).unwrap();
                        if durable {
                            model_put(&mut model, k, ContainerId(c));
                        }
                    }
                    Op::Remove(k) => {
                        ix.remove(&fp(k)).unwrap();
                        if durable {
                            model.remove(&k);
                        }
                    }
                    // Batches flush: only in the durable part.
                    Op::Apply(removes, puts) if durable => {
                        apply_batch(&mut ix, &mut model, &removes, &puts)
                    }
                    _ => {}
                }
            }
            if durable {
                ix.flush().unwrap();
            }
        }
        drop(ix);
        let mut ix = open(&backend, 1 << 20);
        assert_agrees(&mut ix, &model);
    }
}

/// A fingerprint removed and put back in an older container than before
/// resolves to the new put, not to the record the removal superseded, even
/// when both records sit in one prefetch run.
#[test]
fn a_moved_chunk_never_resolves_to_its_old_container() {
    let backend = Arc::new(MemBackend::new());
    let mut ix = open(&backend, 64);
    for k in 0..10 {
        ix.put(&fp(k), ContainerId(20)).unwrap();
    }
    ix.apply(&IndexUpdate {
        removes_below: None,
        puts: vec![IndexEntry {
            fp: fp(3),
            container: ContainerId(5),
        }],
        removes: vec![fp(3)],
    })
    .unwrap();
    // The lookup of key 0 reads a run holding key 3's stale record.
    assert_eq!(ix.lookup(&fp(0)).unwrap(), Some(ContainerId(20)));
    assert_eq!(ix.lookup(&fp(3)).unwrap(), Some(ContainerId(5)));
    drop(ix);
    let mut ix = open(&backend, 64);
    assert_eq!(ix.lookup(&fp(0)).unwrap(), Some(ContainerId(20)));
    assert_eq!(ix.lookup(&fp(3)).unwrap(), Some(ContainerId(5)));
    assert_eq!(ix.len(), 10);
    assert!(ix.own_log().has_removals());
}
