//! Deferred dedup end to end (`004_62bf1a5ddd5ed253.txt` post-processing
//! dedup, duplicates removed by PGC+ of `003_ea5fccc485a97c5d.txt` §3.4):
//! a deferred backup looks nothing up and stores every chunk it meets (a
//! repeat within the backup once), its snapshot restores at once and
//! `check` is clean; the next collection drops the older copies, leaving a
//! repository about the size of one deduplicated inline all along.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::{Backend, ContainerId, Fingerprint};
use cairn_engine::gc::{self, Collector, GcOptions, NoProgress};
use cairn_engine::{BackupOutcome, DedupMode, Repository};

mod common;
use common::{assert_check_clean, assert_restores_as, backup_with, copy_dir, tiny_config, Rng};

/// `files` files of 5-65 KB of random content in two directories, plus
/// `twin`, a copy of `f0` (a repeat within one backup).
fn write_generation(root: &Path, seed: u64, files: usize, changed: &[usize]) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    for i in 0..files {
        if !changed.is_empty() && !changed.contains(&i) {
            continue;
        }
        let mut rng = Rng((seed * 1000 + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let len = 5_000 + rng.below(60_000);
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let dir = if i % 2 == 0 {
            root.to_path_buf()
        } else {
            root.join("sub")
        };
        std::fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
    std::fs::copy(root.join("f0"), root.join("twin")).unwrap();
}

/// Every object of the repository, bytes.
fn repo_bytes(repo: &Repository) -> u64 {
    let b = repo.backend();
    ["containers/", "index/", "snapshots/"]
        .iter()
        .flat_map(|p| b.list(p).unwrap())
        .map(|k| b.read(&k).unwrap().len() as u64)
        .sum()
}

/// The fingerprints more than one container holds, with those containers.
fn duplicated(repo: &Repository) -> Vec<(Fingerprint, Vec<ContainerId>)> {
    let mut out: HashMap<Fingerprint, Vec<ContainerId>> = HashMap::new();
    for id in repo.log.ids().unwrap() {
        for d in repo.log.read_meta(id).unwrap().descriptors {
            out.entry(d.fp).or_default().push(id);
        }
    }
    out.into_iter().filter(|(_, c)| c.len() > 1).collect()
}

/// The one place this file runs a collection.
fn run_gc(repo: &Repository, collector: Collector, seed: u64) -> gc::GcReport {
    let opts = GcOptions {
        collector,
        seed: Some(seed),
        ..Default::default()
    };
    common::gc(repo, &opts, &NoProgress).unwrap()
}

fn new_repo() -> Repository {
    Repository::init(Arc::new(MemBackend::new()), tiny_config()).unwrap()
}

fn backup(repo: &Repository, data: &Path, mode: DedupMode) -> BackupOutcome {
    backup_with(repo, data, mode).unwrap()
}

#[test]
fn deferred_backup_stores_everything_and_pgc_plus_removes_the_duplicates() {
    deferred_then_gc(Collector::PgcPlus);
}

/// LGC and PGC drop the older copies too: their Live Instance filter holds
/// the canonical (newest) copy only.
#[test]
fn lgc_and_pgc_remove_the_duplicates_too() {
    deferred_then_gc(Collector::Lgc);
    deferred_then_gc(Collector::Pgc);
}

fn deferred_then_gc(collector: Collector) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Generation 1: 40 files; generation 2 rewrites 4 of them.
    write_generation(&data, 1, 40, &[]);
    let gen1 = dir.path().join("gen1");
    copy_dir(&data, &gen1);
    write_generation(&data, 2, 40, &[3, 10, 17, 30]);
    let gen2 = dir.path().join("gen2");
    copy_dir(&data, &gen2);

    // Baseline: both generations inline.
    let inline = new_repo();
    backup(&inline, &gen1, DedupMode::Inline);
    let inline2 = backup(&inline, &gen2, DedupMode::Inline);
    let inline_bytes = repo_bytes(&inline);

    // Generation 1 inline, generation 2 deferred.
    let repo = new_repo();
    let s1 = backup(&repo, &gen1, DedupMode::Inline).snapshot_id;
    let after1 = repo_bytes(&repo);
    let out = backup(&repo, &gen2, DedupMode::Deferred);
    let s2 = out.snapshot_id.clone();
    let after2 = repo_bytes(&repo);

    // Nothing older was looked up: no cache, no filter, no index page.
    let c = &out.counters;
    assert_eq!(c.cache_probes, 0, "{c:?}");
    assert_eq!(c.bloom_tests, 0, "{c:?}");
    assert_eq!(c.index_page_reads, 0, "{c:?}");
    assert_eq!(c.prefetches, 0, "{c:?}");
    assert_eq!(c.container_meta_reads, 0, "{c:?}");
    // Every chunk was stored, except the repeats within this backup (the
    // twin of f0 and nothing else of note): the inline run stored only the
    // 4 rewritten files.
    let st = &out.record.stats;
    assert!(
        st.data_chunks > st.new_data_chunks,
        "the twin is stored once"
    );
    let twin_chunks = st.data_chunks - st.new_data_chunks;
    assert!(
        twin_chunks * 20 < st.data_chunks,
        "only repeats within the run are deduplicated: {st:?}"
    );
    let inline_new = inline2.record.stats.new_data_chunks;
    assert!(
        inline_new * 5 < st.new_data_chunks,
        "{inline_new} vs {st:?}"
    );
    // The repository grew by about the whole generation.
    let grown = after2 - after1;
    assert!(
        grown as f64 > 0.9 * after1 as f64,
        "grew {grown} over {after1}"
    );
    let dups_before = duplicated(&repo).len();
    assert!(dups_before as u64 * 2 > st.new_data_chunks, "{dups_before}");

    // Both snapshots restore now, and check (with data) is clean: an older
    // copy is a duplicate the index does not name, not a problem.
    assert_restores_as(&repo, &s1, "gen1", &gen1);
    assert_restores_as(&repo, &s2, "gen2", &gen2);
    assert_check_clean(&repo);
    // Containers whose every chunk has a newer copy are reached by no
    // snapshot: check reports them as reclaimable.
    let reclaimable = cairn_engine::check::check(&repo, false)
        .unwrap()
        .reclaimable_containers;
    assert!(reclaimable > 0, "check reports the superseded containers");

    // The collection removes the older copies.
    let report = run_gc(&repo, collector, 3);
    assert_eq!(report.collector, collector.name(), "{report:?}");
    assert!(report.containers_deleted >= reclaimable, "{report:?}");
    assert!(report.containers_deleted > 0, "{report:?}");
    let after_gc = repo_bytes(&repo);
    let dups_after = duplicated(&repo);
    // PGC+'s live vector is exact: no older copy survives. LGC and PGC
    // judge instances with a Bloom filter (~2% false positives): a few
    // superseded chunks are copied forward instead of dropped (their copy
    // becomes the newest, and the deferred backup's copy the dead one),
    // for the next collection, with a fresh seed, to drop.
    let tolerated = match collector {
        Collector::PgcPlus => 0,
        _ => dups_before / 20,
    };
    assert!(
        dups_after.len() <= tolerated,
        "{} duplicates left of {dups_before}: {dups_after:?}",
        dups_after.len()
    );
    // The repository is about the size of the inline one.
    let ratio = after_gc as f64 / inline_bytes as f64;
    eprintln!(
        "{}: gen1 {after1} B, after deferred gen2 {after2} B ({dups_before} chunks twice), \
         after gc {after_gc} B = {ratio:.3} x inline {inline_bytes} B; gc deleted {} containers, \
         copied {} chunks; {} chunks still twice",
        collector.name(),
        report.containers_deleted,
        report.copied_chunks,
        dups_after.len()
    );
    assert!(
        (0.95..=1.05).contains(&ratio),
        "after gc {after_gc} vs inline {inline_bytes} ({ratio:.3})"
    );
    assert_restores_as(&repo, &s1, "gen1", &gen1);
    assert_restores_as(&repo, &s2, "gen2", &gen2);
    assert_check_clean(&repo);

    // A second collection (another seed) finds nothing, or only what the
    // first one's false positives left.
    let again = run_gc(&repo, collector, 4);
    let left = duplicated(&repo);
    if dups_after.is_empty() {
        assert_eq!(again.containers_deleted, 0, "{again:?}");
    } else {
        assert!(left.len() < dups_after.len(), "{left:?}");
    }
    assert_check_clean(&repo);

    // An inline backup afterwards deduplicates against what gc kept.
    let s3 = backup(&repo, &gen2, DedupMode::Inline);
    assert_eq!(s3.record.stats.new_data_chunks, 0, "{:?}", s3.record.stats);
}

/// Deferred dedup refuses an explicit rewrite scheme instead of ignoring it.
#[test]
fn deferred_backup_refuses_a_rewrite_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_generation(&data, 1, 4, &[]);
    let repo = new_repo();
    let lock = repo.lock_writer(false).unwrap();
    let err = cairn_engine::backup(
        &repo,
        &lock,
        cairn_engine::BackupOptions {
            sources: vec![cairn_engine::Source::Path(data)],
            progress: Default::default(),
            rewrite_scheme: Some(cairn_engine::config::RewriteConfig::parse("fcrc").unwrap()),
            dedup: DedupMode::Deferred,
            ..Default::default()
        },
    )
    .err()
    .expect("refused");
    assert!(err.to_string().contains("needs inline dedup"), "{err}");
}
