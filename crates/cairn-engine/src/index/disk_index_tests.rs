//! Tests of the on-disk index (`disk_index.rs`): lookups, deltas, merges
//! and damage; property tests that no entry is ever lost across updates.

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

/// A collection that forgets most entries and moves the rest (puts
/// replacing old entries) leaves a file sized for what it holds, no
/// bigger than a fresh index of the same entries.
#[test]
fn a_merge_that_forgets_most_entries_shrinks_the_file() {
    shrinks_on(Arc::new(MemBackend::new()));
    // The local directory writes a merge's file as its pages come
    // (`create_streamed`); the resize pass drops the first file unpublished.
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Backend> =
        Arc::new(cairn_backend::LocalBackend::create(dir.path()).unwrap());
    shrinks_on(local.clone());
    assert!(!local.has_temporaries().unwrap());
}

fn shrinks_on(backend: Arc<dyn Backend>) {
    let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    ix.write_merged(entries(0..20_000, 1), ContainerId(2), 32, 4096)
        .unwrap();
    let size = |b: &Arc<dyn Backend>, g| b.size(&object_names::index(g)).unwrap();
    let full = size(&backend, 1);
    let update = IndexUpdate {
        removes_below: None,
        removes: (0..16_000).map(fp).collect(),
        puts: entries(16_000..20_000, 3),
    };
    ix.merge(update, ContainerId(4), 32, 4096).unwrap();
    assert_eq!(ix.entry_count(), 4_000);
    for i in [0, 15_999] {
        assert_eq!(ix.lookup(&fp(i)).unwrap(), None);
    }
    assert_eq!(ix.lookup(&fp(19_999)).unwrap(), Some(ContainerId(3)));
    let fresh_backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let fresh = DiskIndex::open(fresh_backend.clone(), Arc::new(Counters::default())).unwrap();
    fresh
        .write_merged(entries(16_000..20_000, 3), ContainerId(4), 32, 4096)
        .unwrap();
    let (after, want) = (size(&backend, 2), size(&fresh_backend, 1));
    assert!(after * 4 < full, "{after} of {full} bytes");
    assert!(
        after <= want + want / 4,
        "{after} bytes, a fresh index {want}"
    );
}

/// Writers committing beside each other (each its own handle, loaded
/// before the other's delta existed) never overwrite a delta; opening
/// applies all of them and keeps the highest coverage mark; a merge by a
/// handle that never loaded the other's delta still keeps its entries.
#[test]
fn deltas_of_writers_side_by_side_are_all_kept() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let open = || DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    open()
        .write_merged(entries(0..100, 1), ContainerId(2), 32, 4096)
        .unwrap();
    let (a, b) = (open(), open());
    a.beside_other_writers();
    b.beside_other_writers();
    // B's block lies above A's: B commits first with the higher mark.
    b.write_delta(
        IndexUpdate::puts(entries(200..300, 70)),
        ContainerId(71),
        32,
    )
    .unwrap();
    a.write_delta(IndexUpdate::puts(entries(100..200, 5)), ContainerId(6), 32)
        .unwrap();
    // Beside other writers, even piled-up deltas never ask for a merge.
    assert!(!a.wants_merge(&IndexUpdate::puts(entries(0..100_000, 9))));
    let fresh = open();
    assert_eq!(fresh.delta_count(), 2);
    assert_eq!(fresh.covered_below(), ContainerId(71));
    for (i, c) in [(50, 1), (150, 5), (250, 70)] {
        assert_eq!(fresh.lookup(&fp(i)).unwrap(), Some(ContainerId(c)), "{i}");
    }
    // `a` loaded before B's delta existed: its merge reads the store's.
    a.merge(IndexUpdate::default(), ContainerId(71), 32, 4096)
        .unwrap();
    let merged = open();
    assert_eq!(merged.delta_count(), 0);
    assert_eq!(merged.entry_count(), 300);
    for (i, c) in [(50, 1), (150, 5), (250, 70)] {
        assert_eq!(merged.lookup(&fp(i)).unwrap(), Some(ContainerId(c)), "{i}");
    }
}

/// A store that counts the creates asked of it.
struct CountsCreates {
    inner: MemBackend,
    creates: std::sync::atomic::AtomicUsize,
}

impl Backend for CountsCreates {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, delete, exists, list, lock, describe
    );

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.creates
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.create_new(key, data)
    }
}

/// A writer whose handle opened before others committed five deltas
/// finds its number with one refused create and one listing, not one
/// refused create (and read) per delta written meanwhile; the numbers
/// stay without a gap.
#[test]
fn a_delta_after_others_committed_takes_the_next_free_number_at_once() {
    let store = Arc::new(CountsCreates {
        inner: MemBackend::new(),
        creates: Default::default(),
    });
    let backend: Arc<dyn Backend> = store.clone();
    let open = || DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    open()
        .write_merged(entries(0..100, 1), ContainerId(2), 32, 4096)
        .unwrap();
    let late = open();
    late.beside_other_writers();
    for w in 0..5u64 {
        let other = open();
        other.beside_other_writers();
        let c = 10 + w;
        other
            .write_delta(
                IndexUpdate::puts(entries(100 + 10 * w..110 + 10 * w, c)),
                ContainerId(c + 1),
                32,
            )
            .unwrap();
    }
    let before = store.creates.load(std::sync::atomic::Ordering::Relaxed);
    let seq = late
        .write_delta(
            IndexUpdate::puts(entries(500..510, 40)),
            ContainerId(41),
            32,
        )
        .unwrap();
    let creates = store.creates.load(std::sync::atomic::Ordering::Relaxed) - before;
    assert_eq!(seq, 6);
    assert_eq!(creates, 2, "creates asked for one delta");
    let fresh = open();
    assert_eq!(fresh.delta_count(), 6);
    for (i, c) in [(50, 1), (145, 14), (505, 40)] {
        assert_eq!(fresh.lookup(&fp(i)).unwrap(), Some(ContainerId(c)), "{i}");
    }
    // A writer that saw others in flight at its open lists first: one
    // create, no gap.
    let expecting = open();
    expecting.beside_other_writers();
    expecting.expect_other_commits();
    open()
        .write_delta(
            IndexUpdate::puts(entries(600..610, 50)),
            ContainerId(51),
            32,
        )
        .unwrap();
    let before = store.creates.load(std::sync::atomic::Ordering::Relaxed);
    let seq = expecting
        .write_delta(
            IndexUpdate::puts(entries(700..710, 60)),
            ContainerId(61),
            32,
        )
        .unwrap();
    assert_eq!(seq, 8);
    assert_eq!(
        store.creates.load(std::sync::atomic::Ordering::Relaxed) - before,
        1
    );
    assert_eq!(open().delta_count(), 8);
}

/// A store that records how deltas are deleted: one by one, or in a
/// batch.
struct RecordsDeletes {
    inner: MemBackend,
    deletes: parking_lot::Mutex<Vec<Vec<String>>>,
}

impl Backend for RecordsDeletes {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, create_new, exists, list, lock, describe
    );

    fn delete(&self, key: &str) -> Result<()> {
        self.deletes.lock().push(vec![key.to_string()]);
        self.inner.delete(key)
    }

    fn delete_many(&self, keys: &[String]) -> Result<()> {
        self.deletes.lock().push(keys.to_vec());
        self.inner.delete_many(keys)
    }
}

/// A merge of deltas that only put deletes them in one request, and any
/// of them left behind (a stop in the middle of that request) applied
/// again over the new file changes no lookup; a merge that folded a
/// removal deletes one by one, in order, so what a stop leaves is a
/// suffix.
#[test]
fn folded_puts_go_in_one_request_and_any_left_change_nothing() {
    let store = Arc::new(RecordsDeletes {
        inner: MemBackend::new(),
        deletes: Default::default(),
    });
    let backend: Arc<dyn Backend> = store.clone();
    let open = || {
        let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
        ix.beside_other_writers();
        ix
    };
    open()
        .write_merged(entries(0..50, 1), ContainerId(2), 32, 512)
        .unwrap();
    for d in 0..4u64 {
        open()
            .write_delta(
                IndexUpdate::puts(entries(100 + 10 * d..110 + 10 * d, 10 + d)),
                ContainerId(11 + d),
                32,
            )
            .unwrap();
    }
    // Each delta's entries also put again in a later delta, into another
    // container: the canonical copy must survive any leftover.
    open()
        .write_delta(
            IndexUpdate::puts(entries(100..105, 30)),
            ContainerId(31),
            32,
        )
        .unwrap();
    let expected = |ix: &DiskIndex| -> Vec<Option<ContainerId>> {
        (0..150).map(|i| ix.lookup(&fp(i)).unwrap()).collect()
    };
    let before = expected(&open());
    let deltas: Vec<(String, Vec<u8>)> = store
        .inner
        .list(object_names::INDEX)
        .unwrap()
        .into_iter()
        .filter(|k| object_names::parse_index_delta(k).is_some())
        .map(|k| {
            let bytes = store.inner.read(&k).unwrap();
            (k, bytes)
        })
        .collect();
    assert_eq!(deltas.len(), 5);
    store.deletes.lock().clear();
    let merger = open();
    merger.merge_next();
    merger
        .merge(IndexUpdate::default(), ContainerId(31), 32, 512)
        .unwrap();
    let batches = std::mem::take(&mut *store.deletes.lock());
    assert_eq!(
        batches[0].len(),
        5,
        "every folded delta in one request: {batches:?}"
    );
    assert!(batches[0]
        .iter()
        .all(|k| object_names::parse_index_delta(k).is_some()));
    assert_eq!(expected(&open()), before);
    // Any subset of the folded deltas left behind.
    for mask in 1u32..32 {
        let scratch: Arc<dyn Backend> = Arc::new(MemBackend::new());
        for key in store.inner.list("").unwrap() {
            scratch
                .write_atomic(&key, &store.inner.read(&key).unwrap())
                .unwrap();
        }
        for (i, (key, bytes)) in deltas.iter().enumerate() {
            if mask & (1 << i) != 0 {
                scratch.write_atomic(key, bytes).unwrap();
            }
        }
        let ix = DiskIndex::open(scratch, Arc::new(Counters::default())).unwrap();
        assert_eq!(expected(&ix), before, "deltas left: mask {mask:05b}");
    }

    // A fold with a removal: one by one, in the order applied.
    open()
        .write_delta(
            IndexUpdate {
                puts: vec![],
                removes: vec![fp(0)],
                removes_below: None,
            },
            ContainerId(31),
            32,
        )
        .unwrap();
    open()
        .write_delta(
            IndexUpdate::puts(entries(200..210, 40)),
            ContainerId(41),
            32,
        )
        .unwrap();
    store.deletes.lock().clear();
    let merger = open();
    merger.merge_next();
    merger
        .merge(IndexUpdate::default(), ContainerId(41), 32, 512)
        .unwrap();
    let batches = std::mem::take(&mut *store.deletes.lock());
    let deltas_deleted: Vec<&Vec<String>> = batches
        .iter()
        .filter(|b| {
            b.iter()
                .any(|k| object_names::parse_index_delta(k).is_some())
        })
        .collect();
    assert_eq!(deltas_deleted.len(), 2, "{batches:?}");
    assert!(deltas_deleted.iter().all(|b| b.len() == 1));
    assert!(
        deltas_deleted[0][0] < deltas_deleted[1][0],
        "in order: {batches:?}"
    );
    assert_eq!(open().lookup(&fp(0)).unwrap(), None);
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
        Some(ContainerId(2)),
        "the newest copy wins"
    );
    assert_eq!(ix.lookup(&fp(5999)).unwrap(), Some(ContainerId(2)));
    assert_eq!(ix.lookup(&fp(6000)).unwrap(), None);
    assert_eq!(
        backend.list(object_names::INDEX).unwrap(),
        vec![object_names::index(2)]
    );
    // A reader opened on the old state reloads after the generation moved on.
    let reader = DiskIndex::open(backend.clone(), counters).unwrap();
    ix.write_merged(entries(7000..7001, 3), ContainerId(4), 32, 4096)
        .unwrap();
    assert_eq!(reader.lookup(&fp(7000)).unwrap(), Some(ContainerId(3)));
}

mod properties {
    use super::*;
    use cairn_backend::MemBackend;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// The index never loses an entry: after any sequence of merges every
        /// fingerprint ever merged is found (the newest container wins), by a page
        /// lookup and by a full read.
        #[test]
        fn merges_never_lose_entries(
            rounds in proptest::collection::vec(proptest::collection::vec(any::<u32>(), 0..400), 1..6),
            width in prop_oneof![Just(6usize), Just(20), Just(32)],
            page_size in prop_oneof![Just(256usize), Just(512), Just(4096)],
            local in any::<bool>(),
        ) {
            // On a local directory each merge streams its file into a
            // temporary, dropped when a page overflows and the pass is redone.
            let dir = tempfile::tempdir().unwrap();
            let backend: Arc<dyn Backend> = if local {
                Arc::new(cairn_backend::LocalBackend::create(dir.path()).unwrap())
            } else {
                Arc::new(MemBackend::new())
            };
            let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
            let mut model: BTreeMap<Vec<u8>, ContainerId> = BTreeMap::new();
            for (r, keys) in rounds.iter().enumerate() {
                let c = ContainerId(r as u64 + 1);
                let entries: Vec<IndexEntry> = keys.iter().map(|k| IndexEntry {
                    fp: Fingerprint::from_slice(&blake3::hash(&k.to_le_bytes()).as_bytes()[..width]),
                    container: c,
                }).collect();
                for e in &entries {
                    model.insert(e.fp.as_bytes().to_vec(), c);
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
            prop_assert!(!local || !backend.has_temporaries().unwrap());
        }
    }
}

mod update_properties {
    use super::*;
    use cairn_backend::MemBackend;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        /// A backup: these keys stored in a new container.
        Store(Vec<u8>),
        /// Garbage collection forgets these keys.
        Remove(Vec<u8>),
        /// Garbage collection moves these keys to a new container.
        Move(Vec<u8>),
        /// A collection beside backups forgets these keys where they name
        /// a container below two before this one (`removes_below`).
        Collect(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let keys = || proptest::collection::vec(0u8..60, 0..40);
        prop_oneof![
            3 => keys().prop_map(Op::Store),
            1 => keys().prop_map(Op::Remove),
            1 => keys().prop_map(Op::Move),
            1 => keys().prop_map(Op::Collect),
        ]
    }

    fn fp(k: u8) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&[k]).as_bytes())
    }

    /// Every fingerprint ever seen resolves as the model says: present ones
    /// to their container, forgotten ones to nothing.
    fn agrees(ix: &DiskIndex, model: &BTreeMap<u8, ContainerId>) -> Result<(), TestCaseError> {
        for k in 0u8..60 {
            prop_assert_eq!(
                ix.lookup(&fp(k)).unwrap(),
                model.get(&k).copied(),
                "key {}",
                k
            );
        }
        let mut all: Vec<(Fingerprint, ContainerId)> = ix
            .read_all()
            .unwrap()
            .into_iter()
            .map(|e| (e.fp, e.container))
            .collect();
        all.sort();
        let mut want: Vec<(Fingerprint, ContainerId)> =
            model.iter().map(|(k, c)| (fp(*k), *c)).collect();
        want.sort();
        prop_assert_eq!(all, want);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Stores, removals and moves, committed as deltas or merged
        /// generations in any mix: no entry is lost, no forgotten entry comes
        /// back, and a fresh open (another process, or after a crash that left
        /// an older generation's deltas behind) sees the same index.
        #[test]
        fn deltas_and_merges_never_lose_or_resurrect(
            ops in proptest::collection::vec((op(), any::<bool>()), 1..14),
        ) {
            let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
            let counters = Arc::new(Counters::default());
            let ix = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
            let mut model: BTreeMap<u8, ContainerId> = BTreeMap::new();
            let mut next = 1u64;
            for (op, merge) in ops {
                let c = ContainerId(next);
                next += 1;
                let mut update = IndexUpdate::default();
                match &op {
                    Op::Store(keys) => {
                        for k in keys {
                            update.puts.push(IndexEntry { fp: fp(*k), container: c });
                            model.insert(*k, c);
                        }
                    }
                    Op::Remove(keys) => {
                        for k in keys {
                            update.removes.push(fp(*k));
                            model.remove(k);
                        }
                    }
                    Op::Collect(keys) => {
                        let below = ContainerId(c.0.saturating_sub(2));
                        update.removes_below = Some(below);
                        for k in keys {
                            update.removes.push(fp(*k));
                            if model.get(k).is_some_and(|v| *v < below) {
                                model.remove(k);
                            }
                        }
                    }
                    Op::Move(keys) => {
                        for k in keys.iter().filter(|k| model.contains_key(k)) {
                            update.removes.push(fp(*k));
                            update.puts.push(IndexEntry { fp: fp(*k), container: c });
                        }
                        for k in keys {
                            if let Some(v) = model.get_mut(k) {
                                *v = c;
                            }
                        }
                    }
                }
                let covered = ContainerId(next);
                if merge || ix.generation() == 0 {
                    // A merge that stops before deleting every delta it
                    // folded leaves a suffix of them (it deletes in order),
                    // which readers apply again over the new file.
                    ix.stop_after_deletes.store(next as usize % 4, std::sync::atomic::Ordering::Relaxed);
                    ix.merge(update, covered, 32, 512).unwrap();
                } else {
                    ix.write_delta(update, covered, 32).unwrap();
                }
                prop_assert_eq!(ix.covered_below(), covered);
                agrees(&ix, &model)?;
                let fresh = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
                prop_assert_eq!(fresh.covered_below(), covered);
                agrees(&fresh, &model)?;
            }
        }
    }

    /// A delta that is missing from the run (1, 3) or names another
    /// generation is damage to derived data, reported as corruption.
    #[test]
    fn a_gap_or_a_foreign_delta_is_damage() {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
        let e = |k| IndexEntry {
            fp: fp(k),
            container: ContainerId(k as u64 + 1),
        };
        ix.write_merged(vec![e(1)], ContainerId(2), 32, 512)
            .unwrap();
        ix.write_delta(IndexUpdate::puts(vec![e(2)]), ContainerId(3), 32)
            .unwrap();
        ix.write_delta(IndexUpdate::puts(vec![e(3)]), ContainerId(4), 32)
            .unwrap();
        let copy = backend.read(&object_names::index_delta(1, 1)).unwrap();
        backend.delete(&object_names::index_delta(1, 1)).unwrap();
        let err = DiskIndex::open(backend.clone(), Arc::new(Counters::default()))
            .err()
            .expect("a gap is damage");
        assert!(crate::index::is_damage(&err), "{err}");
        backend
            .write_atomic(&object_names::index_delta(1, 1), &copy)
            .unwrap();
        backend
            .write_atomic(
                &object_names::index_delta(1, 3),
                &backend.read(&object_names::index_delta(1, 2)).unwrap(),
            )
            .unwrap();
        let err = DiskIndex::open(backend, Arc::new(Counters::default()))
            .err()
            .expect("a delta naming another sequence number is damage");
        assert!(crate::index::is_damage(&err), "{err}");
    }
}

/// A reader that opened the index before a merge and reads every entry
/// while the merge deletes the old generation's deltas (the old file
/// still there) reads the new generation, not the old file with part of
/// its deltas: a collection reads the index this way beside `compact`.
#[test]
fn a_full_read_during_a_merge_reads_the_new_generation() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let open = || DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    open()
        .write_merged(entries(0..100, 1), ContainerId(2), 32, 4096)
        .unwrap();
    let writer = open();
    writer.beside_other_writers();
    writer
        .write_delta(IndexUpdate::puts(entries(100..200, 5)), ContainerId(6), 32)
        .unwrap();
    let reader = open();
    let old_file = backend.read(&object_names::index(1)).unwrap();
    // The merge has written generation 2 and deleted the deltas, and not
    // yet generation 1.
    open()
        .merge(IndexUpdate::default(), ContainerId(6), 32, 4096)
        .unwrap();
    backend
        .write_atomic(&object_names::index(1), &old_file)
        .unwrap();
    let mut seen = 0;
    reader.for_each_entry(&mut |_| seen += 1).unwrap();
    assert_eq!(seen, 200);
    assert_eq!(reader.generation(), 2);
}

/// A collection's removals are conditional (`removes_below`): they forget
/// an entry only where it names a container below the mark. That holds for
/// an entry a merge folded into the file as much as for one a delta holds:
/// a backup beside the collection stored the chunk again (container 20,
/// above the mark 10), a compaction merged that delta into a new
/// generation, and then the collection's delta, or its merge, forgets the
/// chunk. The backup's entry must stay.
#[test]
fn a_conditional_removal_keeps_a_newer_entry_the_file_holds() {
    for as_merge in [false, true] {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let open = || DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
        open()
            .write_merged(entries(0..100, 5), ContainerId(6), 32, 4096)
            .unwrap();
        let backup = open();
        backup.beside_other_writers();
        // The backup re-stores chunks 0..10 above the collection's mark.
        backup
            .write_delta(IndexUpdate::puts(entries(0..10, 20)), ContainerId(21), 32)
            .unwrap();
        // Compaction folds that delta into generation 2.
        open()
            .merge(IndexUpdate::default(), ContainerId(21), 32, 4096)
            .unwrap();
        // The collection (mark 10) forgets chunks 0..50, dead when it judged them.
        let gc = open();
        let update = IndexUpdate {
            puts: Vec::new(),
            removes: (0..50).map(fp).collect(),
            removes_below: Some(ContainerId(10)),
        };
        if as_merge {
            gc.merge(update, ContainerId(21), 32, 4096).unwrap();
        } else {
            gc.write_delta(update, ContainerId(21), 32).unwrap();
        }
        for ix in [&gc, &open()] {
            for i in 0..10 {
                assert_eq!(
                    ix.lookup(&fp(i)).unwrap(),
                    Some(ContainerId(20)),
                    "{i} merge={as_merge}"
                );
            }
            for i in 10..50 {
                assert_eq!(ix.lookup(&fp(i)).unwrap(), None, "{i} merge={as_merge}");
            }
            assert_eq!(ix.lookup(&fp(60)).unwrap(), Some(ContainerId(5)));
            assert_eq!(ix.read_all().unwrap().len(), 60, "merge={as_merge}");
        }
    }
}

/// A store holding index generation 1 (entries 0..10 in container 1),
/// and a way to open it afresh, as another process would.
fn one_generation() -> (Arc<dyn Backend>, impl Fn() -> DiskIndex) {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let counters = Arc::new(Counters::default());
    let store = backend.clone();
    let open = move || DiskIndex::open(store.clone(), counters.clone()).unwrap();
    open()
        .write_merged(entries(0..10, 1), ContainerId(2), 32, 512)
        .unwrap();
    (backend, open)
}

/// A merge beside writers (docs/concurrency.md, "Compaction beside
/// writers"): writers that opened the index before the merge add their
/// deltas to the generation it replaced, one of them under a name the
/// merge deleted. Readers of the new generation apply both; the next merge
/// folds them and deletes them.
#[test]
fn deltas_added_to_a_replaced_generation_are_applied_and_folded_next() {
    let (backend, open) = one_generation();
    let first = open();
    // Opened before the first delta: it numbers its own delta 1 too.
    let early = open();
    first
        .write_delta(IndexUpdate::puts(entries(10..20, 2)), ContainerId(3), 32)
        .unwrap();
    // Opened after it: it numbers its own delta 2.
    let late = open();
    let merger = open();
    assert_eq!(
        merger
            .merge(IndexUpdate::default(), ContainerId(3), 32, 512)
            .unwrap(),
        2
    );
    assert_eq!(
        backend.list(object_names::INDEX).unwrap(),
        vec![object_names::index(2)]
    );
    late.write_delta(IndexUpdate::puts(entries(20..30, 4)), ContainerId(5), 32)
        .unwrap();
    early
        .write_delta(IndexUpdate::puts(entries(30..40, 3)), ContainerId(4), 32)
        .unwrap();
    let mut listed = backend.list(object_names::INDEX).unwrap();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            object_names::index_delta(1, 1),
            object_names::index_delta(1, 2),
            object_names::index(2),
        ]
    );
    let reader = open();
    assert_eq!(reader.generation(), 2);
    let all = |ix: &DiskIndex| {
        (0..40)
            .map(|i| ix.lookup(&fp(i)).unwrap().map(|c| c.0))
            .collect::<Vec<_>>()
    };
    let want: Vec<Option<u64>> = (0..40)
        .map(|i| Some([1, 2, 4, 3][i as usize / 10]))
        .collect();
    assert_eq!(all(&reader), want);
    assert_eq!(reader.read_all().unwrap().len(), 40);
    assert!(reader.coverage().covers(ContainerId(4)));
    // The next merge folds them.
    assert_eq!(
        open()
            .merge(IndexUpdate::default(), ContainerId(5), 32, 512)
            .unwrap(),
        3
    );
    assert_eq!(
        backend.list(object_names::INDEX).unwrap(),
        vec![object_names::index(3)]
    );
    assert_eq!(all(&open()), want);
}

/// A store whose listings hide generation 2's file until told otherwise:
/// a merge that listed before another merge wrote that generation (on
/// object storage, a merge that outlived its lease).
struct ListsBefore {
    inner: MemBackend,
    hide: std::sync::atomic::AtomicBool,
}

impl Backend for ListsBefore {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, create_new, delete, exists, lock, describe
    );

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut keys = self.inner.list(prefix)?;
        if self.hide.load(std::sync::atomic::Ordering::Relaxed) {
            keys.retain(|k| *k != object_names::index(2));
        }
        Ok(keys)
    }
}

/// Two merges that both think they write generation 2: the second fails
/// with one line and changes nothing, instead of replacing the first's
/// file (whose folded deltas are gone).
#[test]
fn a_merge_never_replaces_a_generation_another_merge_wrote() {
    let store = Arc::new(ListsBefore {
        inner: MemBackend::new(),
        hide: false.into(),
    });
    let backend: Arc<dyn Backend> = store.clone();
    let counters = Arc::new(Counters::default());
    let first = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
    first
        .write_merged(entries(0..10, 1), ContainerId(2), 32, 512)
        .unwrap();
    first
        .write_delta(IndexUpdate::puts(entries(10..20, 2)), ContainerId(3), 32)
        .unwrap();
    let late = DiskIndex::open(backend.clone(), counters.clone()).unwrap();
    // The first merge writes generation 2; what it folded is still there
    // when the late one reads (it has not deleted yet), and the late one's
    // listing does not show generation 2.
    first
        .stop_after_deletes
        .store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        first
            .merge(IndexUpdate::default(), ContainerId(3), 32, 512)
            .unwrap(),
        2
    );
    store.hide.store(true, std::sync::atomic::Ordering::Relaxed);
    let err = late
        .merge(
            IndexUpdate::puts(entries(20..30, 4)),
            ContainerId(5),
            32,
            512,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    store
        .hide
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let reader = DiskIndex::open(backend, counters).unwrap();
    assert_eq!(reader.generation(), 2);
    for i in 0..20 {
        assert!(reader.lookup(&fp(i)).unwrap().is_some(), "entry {i}");
    }
}

/// A collection holds its index handle from its Merge to its Forget. A
/// merge beside it replaces the generation it opened, and a backup then
/// commits a put of a chunk into a container below the collection's bound
/// (it ended before the collection's survey, so the collection judged its
/// container). The collection's removal, written later, must come after
/// that put for every reader: it goes into the newest generation, not the
/// one the collection opened (found by the kill test: the put came back
/// and named a container the collection deleted).
#[test]
fn a_removal_is_written_into_the_newest_generation() {
    let (backend, open) = one_generation();
    let first = open();
    first
        .write_delta(IndexUpdate::puts(entries(20..22, 1)), ContainerId(2), 32)
        .unwrap();
    let collection = open();
    // The merge has not deleted generation 1 yet (or the store still
    // serves it).
    let merger = open();
    merger
        .stop_after_deletes
        .store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        merger
            .merge(IndexUpdate::default(), ContainerId(2), 32, 512)
            .unwrap(),
        2
    );
    let backup = open();
    backup
        .write_delta(IndexUpdate::puts(entries(10..12, 5)), ContainerId(6), 32)
        .unwrap();
    let forget = IndexUpdate {
        puts: Vec::new(),
        removes: vec![fp(10), fp(11)],
        removes_below: Some(ContainerId(8)),
    };
    collection.write_delta(forget, ContainerId(6), 32).unwrap();
    let reader = open();
    assert_eq!(reader.lookup(&fp(10)).unwrap(), None);
    assert_eq!(reader.lookup(&fp(11)).unwrap(), None);
    assert_eq!(reader.lookup(&fp(3)).unwrap(), Some(ContainerId(1)));
    let mut listed = backend.list(object_names::INDEX).unwrap();
    listed.sort();
    assert_eq!(
        listed,
        vec![
            object_names::index(1),
            object_names::index_delta(1, 1),
            object_names::index(2),
            object_names::index_delta(2, 1),
            object_names::index_delta(2, 2),
        ]
    );
}

proptest::proptest! {
    /// The in-place sort orders as sorting by the whole cached key does,
    /// duplicates (the newest container first among equals) included.
    #[test]
    fn the_file_order_sort_matches_the_cached_key_sort(
        keys in proptest::collection::vec((0u64..300, 1u64..6), 0..2000),
    ) {
        let mut entries: Vec<IndexEntry> = keys
            .iter()
            .map(|&(k, c)| IndexEntry { fp: fp(k), container: ContainerId(c) })
            .collect();
        let mut want = entries.clone();
        want.sort_by_cached_key(|e| (codec::entry_order(&e.fp), std::cmp::Reverse(e.container)));
        super::sort_in_file_order(&mut entries);
        proptest::prop_assert_eq!(entries, want);
    }
}

/// A store where the merged generation's file is deleted as a merge
/// starts reading it (on object storage, a merge beside one that outlived
/// its lease and replaced the file).
struct VanishesOnRead {
    inner: MemBackend,
}

impl Backend for VanishesOnRead {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, create_new, delete, exists, list, lock,
        describe
    );

    fn read_run(&self, key: &str, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        self.inner.delete(key)?;
        self.inner.read_run(key, offset, len, out)
    }
}

/// The old file gone half-way through a merge's read: refused like a
/// generation another merge wrote first, with nothing written.
#[test]
fn a_merge_whose_old_file_vanishes_changes_nothing() {
    let backend: Arc<dyn Backend> = Arc::new(VanishesOnRead {
        inner: MemBackend::new(),
    });
    let ix = DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    ix.write_merged(entries(0..500, 1), ContainerId(2), 32, 512)
        .unwrap();
    let err = ix
        .write_merged(entries(500..900, 2), ContainerId(3), 32, 512)
        .unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    assert!(
        err.to_string().contains("replaced by another merge"),
        "{err}"
    );
    assert!(!backend.exists(&object_names::index(2)).unwrap());
}

/// A store whose next listing of `index/`, once armed, is followed by a
/// merge of another process: the caller sees the generation it listed as
/// the newest, and its file is gone by the time it reads it.
struct MergesAfterListing {
    inner: Arc<MemBackend>,
    armed: std::sync::atomic::AtomicBool,
}

impl Backend for MergesAfterListing {
    cairn_core::delegate_backend!(
        inner: read, read_at, size, write_atomic, create_new, delete, exists, lock, describe
    );

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let keys = self.inner.list(prefix)?;
        if prefix == object_names::INDEX
            && self.armed.swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            let other: Arc<dyn Backend> = self.inner.clone();
            DiskIndex::open(other, Arc::new(Counters::default()))?.merge(
                IndexUpdate::default(),
                ContainerId(2),
                32,
                512,
            )?;
        }
        Ok(keys)
    }
}

/// A collection's removal judges its fingerprints against the newest
/// generation's file; a merge that replaced that generation between the
/// listing and the lookups deleted the file under them, and the commit
/// failed with "not found" (a collection beside compacting writers, in
/// `bench/many-writers.sh`). It now judges them again against the newer
/// generation.
#[test]
fn a_removal_whose_generation_is_replaced_mid_judgement_is_written() {
    let store = Arc::new(MergesAfterListing {
        inner: Arc::new(MemBackend::new()),
        armed: false.into(),
    });
    let backend: Arc<dyn Backend> = store.clone();
    let open = || DiskIndex::open(backend.clone(), Arc::new(Counters::default())).unwrap();
    open()
        .write_merged(entries(0..10, 1), ContainerId(2), 32, 512)
        .unwrap();
    let collection = open();
    store
        .armed
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let forget = IndexUpdate {
        puts: Vec::new(),
        removes: vec![fp(3), fp(4)],
        removes_below: Some(ContainerId(2)),
    };
    collection.write_delta(forget, ContainerId(2), 32).unwrap();
    let reader = open();
    assert_eq!(reader.generation(), 2);
    assert_eq!(reader.lookup(&fp(3)).unwrap(), None);
    assert_eq!(reader.lookup(&fp(4)).unwrap(), None);
    assert_eq!(reader.lookup(&fp(5)).unwrap(), Some(ContainerId(1)));
}

/// A cached reader's runs are whole sealed blocks of the file (the header
/// is slot 0, page `n` slot `n + 1`) and never pass the last page.
#[test]
fn runs_are_aligned_blocks_within_the_file() {
    assert_eq!(run_of(0, 4096, 10), (0, 3));
    assert_eq!(run_of(2, 4096, 10), (0, 3));
    assert_eq!(run_of(3, 4096, 10), (3, 7));
    assert_eq!(run_of(6, 4096, 10), (3, 7));
    assert_eq!(run_of(9, 4096, 10), (7, 10));
    assert_eq!(run_of(0, 4096, 1), (0, 1));
    assert_eq!(run_of(5, 65_536, 10), (5, 6));
    // Every page of an index is in exactly the run that holds it.
    for count in 1..40 {
        for p in 0..count {
            let (a, b) = run_of(p, 4096, count);
            assert!(a <= p && p < b && b <= count, "{p} of {count}: {a}..{b}");
            assert_eq!(
                (a + 1) * 4096 / crate::sealed_backend::BLOCK as u64,
                b * 4096 / crate::sealed_backend::BLOCK as u64
            );
        }
    }
}
