//! End to end: the real engine backs up and restores through a
//! [`DeviceBackend`]; the model's per-stage accesses must agree with the
//! engine's own counters (`cairn_core::Counters`).

use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, Counters};
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_engine::read::Reader;
use cairn_engine::{
    catalog, object_names, BackupOptions, Progress, RepoConfig, Repository, Source,
};

use super::backend::{CONTAINERS_PREFIX, INDEX_PREFIX};
use super::{DeviceBackend, DeviceClass, DeviceModel, DeviceStore, Stage};

fn write_tree(root: &Path, seed: u64, files: usize) {
    std::fs::create_dir_all(root).unwrap();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..files {
        let len = 50_000 + (next() % 100_000) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        std::fs::write(root.join(format!("f{i}")), data).unwrap();
    }
}

fn small_config() -> RepoConfig {
    let mut cfg = Repository::default_config();
    cfg.container_size = 128 * 1024;
    cfg.chunker = cairn_core::ChunkerConfig::FastCdc {
        min: 1024,
        avg: 4096,
        max: 16384,
    };
    cfg.index.expected_chunks = 10_000;
    cfg
}

fn backup(repo: &Repository, path: &Path) -> String {
    let lock = repo.lock_writer(false).unwrap();
    let out = cairn_engine::backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(path.to_path_buf())],
            host: Some("test".into()),
            ..Default::default()
        },
    )
    .unwrap();
    out.snapshot_id
}

#[test]
fn key_prefixes_match_the_engine() {
    assert_eq!(CONTAINERS_PREFIX, object_names::CONTAINERS);
    assert_eq!(INDEX_PREFIX, object_names::INDEX);
}

#[test]
fn engine_traffic_is_classified() {
    let model = DeviceModel::for_device(DeviceClass::hdd());
    let backend: Arc<dyn Backend> = Arc::new(DeviceBackend::new(MemBackend::new(), model.clone()));
    let src = tempfile::tempdir().unwrap();
    write_tree(src.path(), 7, 8);

    // Generation 1: everything new.
    let repo = Repository::init(backend.clone(), small_config()).unwrap();
    backup(&repo, src.path());
    let c1 = repo.counters.snapshot();
    assert!(c1.containers_written > 0);
    assert_eq!(
        model.usage().accesses(Stage::ContainerWrite),
        c1.containers_written
    );

    // Generation 2 of the same data, from a freshly opened repository: cold
    // locality cache, so duplicates are found through index pages and
    // metadata prefetches. Then a restore reads whole containers. (`open`
    // reads `config` before its counters exist: start the delta after it.)
    let repo = Repository::open(backend.clone()).unwrap();
    let u1 = model.usage();
    let id = backup(&repo, src.path());
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let target = tempfile::tempdir().unwrap();
    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    let sum = reader
        .restore(&snap.record, target.path(), None, &Progress::default())
        .unwrap();
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);

    let c = repo.counters.snapshot();
    let u = model.usage().since(&u1);
    assert!(c.index_page_reads > 0 && c.prefetches > 0 && c.containers_read > 0);
    assert!(c.cache_hits > 0, "{c:?}");
    // One charged access per backend call, the same calls the engine's
    // CountingBackend counts.
    let reads = [
        Stage::IndexPageRead,
        Stage::MetadataPrefetch,
        Stage::ContainerRead,
        Stage::OtherRead,
    ];
    let writes = [Stage::ContainerWrite, Stage::OtherWrite];
    let sum_of =
        |stages: &[Stage], f: &dyn Fn(Stage) -> u64| -> u64 { stages.iter().map(|&s| f(s)).sum() };
    assert_eq!(sum_of(&reads, &|s| u.accesses(s)), c.read_ops);
    assert_eq!(sum_of(&reads, &|s| u.bytes(s)), c.bytes_read);
    assert_eq!(sum_of(&writes, &|s| u.accesses(s)), c.write_ops);
    assert_eq!(sum_of(&writes, &|s| u.bytes(s)), c.bytes_written);
    // Per stage: index pages (plus one header read_at per index open),
    // metadata tail reads (one or two per metadata section), whole containers.
    let pages = u.accesses(Stage::IndexPageRead);
    assert!(
        pages >= c.index_page_reads && pages <= c.index_page_reads + 4,
        "{pages} {c:?}"
    );
    let tails = u.accesses(Stage::MetadataPrefetch);
    assert!(tails >= c.container_meta_reads && tails <= 2 * c.container_meta_reads);
    assert_eq!(u.accesses(Stage::ContainerRead), c.containers_read);
    assert_eq!(u.accesses(Stage::ContainerWrite), c.containers_written);

    // The report: in-memory stages from the counters, I/O from the usage.
    let t = model.times(&u, &c);
    // Eager lookup probes the cache first, tests the Summary Vector on every
    // miss and inserts every chunk it decides new.
    let tests = c.lookups - c.cache_hits;
    let inserts = tests - c.index_hits;
    assert_eq!((c.bloom_tests, c.bloom_inserts), (tests, inserts));
    assert_eq!(c.cache_probes, c.lookups);
    let dram = DeviceClass::dram().latency_seconds();
    assert!(((t.bloom_seconds - (tests + inserts) as f64 * dram) / t.bloom_seconds).abs() < 1e-12);
    assert!(((t.cache_seconds - c.lookups as f64 * dram) / t.cache_seconds).abs() < 1e-12);
    let hdd = DeviceClass::hdd();
    let want = hdd.seconds(pages, u.bytes(Stage::IndexPageRead));
    assert!(((t.index_page_read_seconds - want) / want).abs() < 1e-12);
    assert!(t.lookup_seconds > t.index_page_read_seconds + t.prefetch_seconds);
    assert!(t.total_seconds > t.lookup_seconds + t.container_read_seconds);
}

#[test]
fn metadata_only_store_is_charged_at_logical_sizes() {
    // The simulator's setup: containers in a metadata-only store (charged by
    // DeviceStore), everything else in a backend (charged by DeviceBackend),
    // one model for both.
    let model = DeviceModel::for_device(DeviceClass::optane());
    let counters = Arc::new(Counters::default());
    let store = Arc::new(DeviceStore::new(
        MetaOnlyStore::new(counters.clone()),
        model.clone(),
    ));
    let backend: Arc<dyn Backend> = Arc::new(DeviceBackend::new(MemBackend::new(), model.clone()));
    let repo =
        Repository::init_with_store(backend, small_config(), counters.clone(), store.clone())
            .unwrap();
    // `init_with_store` writes `config` before its counters exist.
    let u0 = model.usage();
    let src = tempfile::tempdir().unwrap();
    write_tree(src.path(), 11, 6);
    backup(&repo, src.path());
    backup(&repo, src.path());

    let c = counters.snapshot();
    let u = model.usage().since(&u0);
    assert!(
        c.containers_written > 0 && c.container_meta_reads > 0,
        "{c:?}"
    );
    assert_eq!(u.accesses(Stage::ContainerWrite), c.containers_written);
    assert_eq!(
        u.bytes(Stage::ContainerWrite),
        store.inner().logical_bytes()
    );
    assert_eq!(u.accesses(Stage::MetadataPrefetch), c.container_meta_reads);
    assert_eq!(u.accesses(Stage::ContainerRead), 0);
    // Every counted operation is charged exactly once, at the counted size.
    let all = |f: &dyn Fn(Stage) -> u64| -> u64 { Stage::ALL.iter().map(|&s| f(s)).sum() };
    let reads = all(&|s| match s {
        Stage::ContainerWrite | Stage::OtherWrite => 0,
        _ => u.accesses(s),
    });
    assert_eq!(reads, c.read_ops);
    assert_eq!(
        u.accesses(Stage::ContainerWrite) + u.accesses(Stage::OtherWrite),
        c.write_ops
    );
    assert_eq!(
        u.bytes(Stage::ContainerWrite) + u.bytes(Stage::OtherWrite),
        c.bytes_written
    );
    assert_eq!(
        all(&|s| u.bytes(s)) - u.bytes(Stage::ContainerWrite) - u.bytes(Stage::OtherWrite),
        c.bytes_read
    );
    let t = model.times(&u, &c);
    assert!(t.container_write_seconds > 0.0 && t.prefetch_seconds > 0.0);
}
