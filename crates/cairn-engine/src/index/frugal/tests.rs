use super::cuckoo::{CuckooTable, KeyHash, SLOT_BYTES};
use super::*;
use cairn_backend::MemBackend;
use cairn_core::ids::mix64;
use proptest::prelude::*;
use std::collections::HashMap;

/// A pseudo-random fingerprint of `width` bytes, distinct for distinct `i`
/// (the first 8 bytes are a bijection of `i`).
fn fp(i: u64, width: usize) -> Fingerprint {
    let mut b = [0u8; 32];
    for (j, w) in b.chunks_mut(8).enumerate() {
        w.copy_from_slice(&mix64(i.wrapping_add((j as u64) << 56)).to_le_bytes());
    }
    b[..8].copy_from_slice(&mix64(i).to_le_bytes());
    Fingerprint::from_slice(&b[..width])
}

fn open(backend: &Arc<MemBackend>, cfg: FrugalConfig) -> FrugalIndex {
    let b: Arc<dyn Backend> = backend.clone();
    FrugalIndex::open(b, Arc::new(Counters::default()), cfg).unwrap()
}

fn small_cfg() -> FrugalConfig {
    FrugalConfig {
        expected_chunks: 16,
        segment_records: 64,
        prefetch_run: 16,
        prefetch_cache_entries: 100,
        ..FrugalConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Never loses an entry: through growth, flushes and a reopen, every
    /// inserted fingerprint is found with its container and absent ones are not.
    #[test]
    fn frugal_never_loses_entries(
        keys in proptest::collection::hash_set(any::<u64>(), 0..1500),
        absent in proptest::collection::vec(any::<u64>(), 0..200),
        width in prop_oneof![Just(6usize), Just(20), Just(32)],
        bucket_slots in prop_oneof![Just(2usize), Just(4), Just(8)],
        flush_every in 1usize..500,
    ) {
        let backend = Arc::new(MemBackend::new());
        let cfg = FrugalConfig { bucket_slots, ..small_cfg() };
        let mut ix = open(&backend, cfg.clone());
        let mut model = HashMap::new();
        for (n, &k) in keys.iter().enumerate() {
            let c = ContainerId(k % 1000);
            ix.insert(&fp(k, width), c).unwrap();
            model.insert(k, c);
            if n % flush_every == 0 {
                ix.flush().unwrap();
            }
        }
        prop_assert_eq!(ix.len(), model.len());
        for (&k, &c) in &model {
            prop_assert_eq!(ix.lookup(&fp(k, width)).unwrap(), Some(c));
        }
        for &k in absent.iter().filter(|k| !model.contains_key(k)) {
            prop_assert_eq!(ix.lookup(&fp(k, width)).unwrap(), None);
        }
        ix.flush().unwrap();
        let mut re = open(&backend, cfg);
        prop_assert_eq!(re.len(), model.len());
        for (&k, &c) in &model {
            prop_assert_eq!(re.lookup(&fp(k, width)).unwrap(), Some(c));
        }
    }
}

/// RAM per indexed chunk at 1M entries. Counted: every slot of the table
/// (empty or not) at 6 bytes plus the stash, divided by entries.
#[test]
fn frugal_ram_per_chunk_at_one_million() {
    const N: usize = 1_000_000;
    assert_eq!(std::mem::size_of::<[u8; SLOT_BYTES]>(), 6);

    // Default sizing (8-slot buckets, sized for 97% load).
    let cfg = FrugalConfig::default();
    let mut t = CuckooTable::with_capacity(N, cfg.bucket_slots, cfg.max_load, cfg.max_kicks);
    for i in 0..N as u64 {
        t.insert(KeyHash::of(&fp(i, 8)), i as u32);
    }
    assert!(!t.needs_grow(), "stash {}", t.stash_len());
    let bpc = t.bytes_per_chunk();
    eprintln!(
        "1M entries, {}-slot buckets: load {:.4}, {} bytes, {:.3} bytes/chunk, stash {}, kicks {}",
        t.bucket_slots(),
        t.load_factor(),
        t.ram_bytes(),
        bpc,
        t.stash_len(),
        t.kicks()
    );
    // Each entry costs exactly one 6-byte slot; empty slots add 6 * (1/load - 1).
    assert!(bpc <= 6.0 / 0.965, "bytes/chunk {bpc}");

    // How full a table gets before the stash overflows: 8-slot buckets,
    // exactly 2^20 slots, fill until an insert would make it grow.
    let mut t = CuckooTable::with_buckets(1 << 17, 8, 500);
    let mut i = 0u64;
    while !t.needs_grow() && t.len() < t.slot_count() {
        t.insert(KeyHash::of(&fp(i, 8)), i as u32);
        i += 1;
    }
    eprintln!(
        "fill to failure (8-slot): {} entries in {} slots, load {:.4}, {:.3} bytes/chunk",
        t.len(),
        t.slot_count(),
        t.load_factor(),
        t.bytes_per_chunk()
    );
    assert!(t.load_factor() > 0.97);
    assert!(t.bytes_per_chunk() < 6.2);
}

/// A 16-bit signature matches an absent key's in each occupied slot of its
/// two buckets with probability 1/65536, so the expected false matches per
/// absent lookup are `2 * bucket_slots * load / 65536`; each costs one read.
#[test]
fn frugal_false_match_rate_of_signatures() {
    const N: u64 = 100_000;
    const M: u64 = 200_000;
    let backend = Arc::new(MemBackend::new());
    let cfg = FrugalConfig {
        expected_chunks: N as usize,
        ..FrugalConfig::default()
    };
    let mut ix = open(&backend, cfg.clone());
    for i in 0..N {
        ix.insert(&fp(i, 20), ContainerId(i)).unwrap();
    }
    ix.flush().unwrap();
    ix.reset_stats();
    for i in N..N + M {
        assert_eq!(ix.lookup(&fp(i, 20)).unwrap(), None);
    }
    let s = ix.stats();
    let load = ix.table().load_factor();
    let expected = M as f64 * 2.0 * cfg.bucket_slots as f64 * load / 65536.0;
    eprintln!(
        "absent lookups {M}: false matches {} (expected {expected:.1}, {:.2}/65536 per lookup), \
         log reads {}, table negatives {}",
        s.false_matches,
        s.false_matches as f64 / M as f64 * 65536.0,
        s.log_reads,
        s.table_negatives
    );
    assert!(
        (s.false_matches as f64) > expected / 3.0 && (s.false_matches as f64) < expected * 3.0,
        "false matches {} vs expected {expected}",
        s.false_matches
    );
    assert_eq!(s.false_match_reads, s.log_reads);
    assert_eq!(s.table_negatives + s.false_matches, M);
}

/// Lookups in insertion order cost about one log read per `prefetch_run`
/// lookups (plus one per segment boundary); random order costs ~one each.
#[test]
fn frugal_prefetch_in_insertion_order() {
    const N: u64 = 100_000;
    let backend = Arc::new(MemBackend::new());
    let cfg = FrugalConfig {
        expected_chunks: N as usize,
        prefetch_run: 500,
        segment_records: 4096,
        ..FrugalConfig::default()
    };
    let mut ix = open(&backend, cfg.clone());
    for i in 0..N {
        ix.insert(&fp(i, 32), ContainerId(i / 100)).unwrap();
    }
    ix.flush().unwrap();

    let counters = Arc::new(Counters::default());
    let b: Arc<dyn Backend> = backend.clone();
    let mut ix = FrugalIndex::open(b, counters.clone(), cfg.clone()).unwrap();
    for i in 0..N {
        assert_eq!(ix.lookup(&fp(i, 32)).unwrap(), Some(ContainerId(i / 100)));
    }
    let s = ix.stats();
    let segments = ix.own_log().segment_count() as u64;
    eprintln!(
        "in order: {N} lookups, {} log reads ({} records), {} prefetch hits, {} false matches, {segments} segments",
        s.log_reads, s.records_read, s.prefetch_hits, s.false_matches
    );
    assert!(s.log_reads >= N / 500);
    assert!(s.log_reads <= N / 500 + segments + s.false_match_reads + 1);
    assert_eq!(counters.snapshot().index_page_reads, s.log_reads);

    // Random order with a cache smaller than the index: ~one read per lookup.
    let cfg = FrugalConfig {
        prefetch_cache_entries: 1000,
        ..cfg
    };
    let b: Arc<dyn Backend> = backend.clone();
    let mut ix = FrugalIndex::open(b, Arc::new(Counters::default()), cfg).unwrap();
    for j in 0..2000u64 {
        let i = mix64(j) % N;
        assert_eq!(ix.lookup(&fp(i, 32)).unwrap(), Some(ContainerId(i / 100)));
    }
    let r = ix.stats();
    eprintln!("random order: 2000 lookups, {} log reads", r.log_reads);
    assert!(r.log_reads > 1500);
}

/// The table is rebuilt from the log after reopen; unflushed records are
/// not durable; a damaged segment is reported, not trusted.
#[test]
fn frugal_persistence_and_damage() {
    let backend = Arc::new(MemBackend::new());
    let mut ix = open(&backend, small_cfg());
    for i in 0..1000 {
        ix.insert(&fp(i, 20), ContainerId(i + 7)).unwrap();
    }
    ix.flush().unwrap();
    for i in 1000..1010 {
        ix.insert(&fp(i, 20), ContainerId(i + 7)).unwrap();
    }
    // Buffered records are found without I/O.
    ix.reset_stats();
    assert_eq!(
        ix.lookup(&fp(1005, 20)).unwrap(),
        Some(ContainerId(1005 + 7))
    );
    assert_eq!(ix.stats().log_reads, 0);
    drop(ix);

    let mut re = open(&backend, small_cfg());
    assert_eq!(re.len(), 1000);
    assert_eq!(re.own_log().len(), 1000);
    for i in 0..1000 {
        assert_eq!(re.lookup(&fp(i, 20)).unwrap(), Some(ContainerId(i + 7)));
    }
    assert_eq!(re.lookup(&fp(1005, 20)).unwrap(), None);
    // Appends continue after the last position.
    assert_eq!(re.insert(&fp(5000, 20), ContainerId(1)).unwrap(), 1000);
    // A different width is refused.
    assert!(re.insert(&fp(5001, 8), ContainerId(1)).is_err());

    let key = log::segment_key(0, 64);
    assert!(backend.tamper(&key, |b| b[20] ^= 1));
    let b: Arc<dyn Backend> = backend.clone();
    let err = FrugalIndex::open(b, Arc::new(Counters::default()), small_cfg())
        .err()
        .expect("damage detected");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn frugal_empty_index() {
    let backend = Arc::new(MemBackend::new());
    let mut ix = open(&backend, FrugalConfig::default());
    assert!(ix.is_empty());
    assert_eq!(ix.lookup(&fp(1, 32)).unwrap(), None);
    ix.flush().unwrap();
    assert_eq!(ix.ram().entries, 0);
}

/// `reserve` sizes the table for a batch of inserts at once, so after the
/// batch it is near its maximum load (6 / 0.97 bytes per chunk), where
/// doubling on demand would leave it about half empty.
#[test]
fn frugal_reserve_keeps_the_table_full() {
    let backend = Arc::new(MemBackend::new());
    let mut idx = open(
        &backend,
        FrugalConfig {
            expected_chunks: 10_000,
            ..small_cfg()
        },
    );
    for i in 0..10_000 {
        idx.insert(&fp(i, 32), ContainerId(i / 100)).unwrap();
    }
    idx.reserve(50_000).unwrap();
    for i in 10_000..60_000 {
        idx.insert(&fp(i, 32), ContainerId(i / 100)).unwrap();
    }
    let ram = idx.ram();
    assert_eq!(ram.entries, 60_000);
    assert!(ram.bytes_per_chunk < 6.3, "{ram:?}");
    for i in (0..60_000).step_by(997) {
        assert_eq!(idx.lookup(&fp(i, 32)).unwrap(), Some(ContainerId(i / 100)));
    }
}

/// A table that grows insert by insert past several growths stays within
/// 8 bytes per chunk at every step (issue 32's bound): a growth adds a
/// quarter, so the load never falls below 0.97 / 1.25.
#[test]
fn frugal_growth_keeps_every_step_within_8_bytes_per_chunk() {
    let backend = Arc::new(MemBackend::new());
    let mut idx = open(
        &backend,
        FrugalConfig {
            expected_chunks: 2_000,
            ..small_cfg()
        },
    );
    let mut worst: f64 = 0.0;
    for i in 0..40_000 {
        idx.insert(&fp(i, 32), ContainerId(i / 100)).unwrap();
        if i >= 2_000 {
            worst = worst.max(idx.ram().bytes_per_chunk);
        }
    }
    assert!(idx.stats().rebuilds >= 5, "{:?}", idx.stats());
    assert!(worst <= 8.0, "{worst} bytes per chunk at worst");
    for i in (0..40_000).step_by(331) {
        assert_eq!(idx.lookup(&fp(i, 32)).unwrap(), Some(ContainerId(i / 100)));
    }
}

/// `ram_bytes_for` (what `cairn stats` reports) is the slot RAM of the
/// table `with_capacity` would build.
#[test]
fn ram_bytes_for_matches_an_allocated_table() {
    for (entries, slots, load) in [
        (0, 8, 0.97),
        (1, 8, 0.97),
        (65_536, 8, 0.97),
        (1_000_003, 4, 0.9),
    ] {
        let t = CuckooTable::with_capacity(entries, slots, load, 500);
        assert_eq!(
            CuckooTable::ram_bytes_for(entries, slots, load),
            t.ram_bytes()
        );
    }
}

/// A rewrite deletes each log's first segment before the others
/// (`index::rebuild_frugal_log`): they are told by name, in every partition.
#[test]
fn first_segments_are_told_by_name() {
    assert!(log::is_first_segment(&log::segment_key(0, 0)));
    assert!(log::is_first_segment(&log::segment_key(7, 0)));
    assert!(!log::is_first_segment(&log::segment_key(0, 4096)));
    assert!(!log::is_first_segment(&log::segment_key(7, 1_000_000_000)));
    assert!(!log::is_first_segment("frugal/p7"));
    assert!(!log::is_first_segment("index/0000000000"));
}
