//! Crash and fault tests through the fault-injecting backend.
//!
//! A "crash" after N writes means the (N+1)-th write and everything after it
//! never reach storage, as when the process dies. For every N that falls inside
//! a backup, the repository must afterwards still list exactly the earlier
//! snapshots, restore them byte-identical, pass `check`, and accept the next
//! backup. A transient full disk must fail the backup cleanly and lose nothing.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use cairn_backend::{FaultBackend, FaultPlan, InjectedError, MemBackend};
use cairn_core::Backend;
use cairn_engine::read::Reader;
use cairn_engine::{catalog, Progress, RepoConfig, Repository};

mod common;
use common::{assert_check_clean, assert_restores, assert_restores_as, backup, copy_dir};

fn write_tree(root: &Path, seed: u64, files: usize) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..files {
        let len = 20_000 + (next() % 200_000) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let dir = if i % 2 == 0 {
            root.to_path_buf()
        } else {
            root.join("sub")
        };
        std::fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
}

fn small_config() -> RepoConfig {
    let mut cfg = Repository::default_config();
    cfg.container_size = 256 * 1024;
    cfg.chunker = cairn_core::ChunkerConfig::FastCdc {
        min: 1024,
        avg: 4096,
        max: 16384,
    };
    cfg.index.expected_chunks = 10_000;
    cfg
}

fn fresh(plan: &Arc<FaultPlan>) -> (MemBackend, Arc<dyn Backend>) {
    let mem = MemBackend::new();
    let backend: Arc<dyn Backend> = Arc::new(FaultBackend::new(mem.clone(), plan.clone()));
    (mem, backend)
}

#[test]
fn crash_at_every_write_of_a_backup_loses_nothing() {
    crash_at_every_write(small_config);
}

/// Lazy lookup holds chunks until their bucket or ring resolves them: a
/// crash anywhere still loses nothing committed.
#[test]
fn crash_at_every_write_with_lazy_lookup_loses_nothing() {
    crash_at_every_write(|| {
        let mut cfg = small_config();
        cfg.index.lookup.strategy = cairn_engine::config::LookupStrategy::Lazy;
        // Rewrite schemes need eager lookup.
        cfg.rewrite = cairn_engine::config::RewriteConfig::None;
        cfg.index.lookup.bucket_threshold = 2;
        cfg.index.lookup.ring_size = 16;
        cfg.index.lookup.buffer_fingerprints = 32;
        cfg
    });
}

/// The frugal index's chunk log is written at commit before the paged
/// index: a crash between them, or anywhere else, loses nothing.
#[test]
fn crash_at_every_write_with_the_frugal_index_loses_nothing() {
    crash_at_every_write(|| {
        let mut cfg = small_config();
        cfg.index.kind = cairn_engine::config::IndexKind::Frugal;
        cfg
    });
}

/// A bounded in-memory index part merges the backup's durable chunks into
/// new index generations mid-backup (`dedup::part_budget`): a crash after
/// such a merge leaves index entries naming containers no snapshot
/// references. Nothing committed is lost, `check` passes, the next backup
/// works, and a collection then forgets those containers and their entries
/// (`a_crash_after_a_mid_backup_merge_is_collected`).
#[test]
fn crash_at_every_write_with_a_bounded_in_memory_part_loses_nothing() {
    crash_at_every_write(bounded_part_config);
}

fn bounded_part_config() -> RepoConfig {
    let mut cfg = small_config();
    cfg.index.part_budget = Some(24);
    cfg
}

/// A backup killed after its mid-backup merges, then `gc`, then `check`
/// with every chunk read: the orphaned containers and their index entries
/// are gone, and every snapshot restores.
#[test]
fn a_crash_after_a_mid_backup_merge_is_collected() {
    let src = tempfile::tempdir().unwrap();
    let data = src.path().join("data");
    write_tree(&data, 11, 10);
    let plan = FaultPlan::new();
    let (mem, backend) = fresh(&plan);
    let repo = Repository::init(backend.clone(), bounded_part_config()).unwrap();
    let s1 = backup(&repo, &data).unwrap();
    let newest_generation = |m: &MemBackend| {
        let names = m.list(cairn_engine::object_names::INDEX).unwrap();
        names
            .iter()
            .filter_map(|k| {
                cairn_engine::object_names::parse_generation(k, cairn_engine::object_names::INDEX)
            })
            .max()
    };
    let committed = newest_generation(&mem);
    // How many writes the second backup makes (measured on a twin), then
    // a crash half-way, after some of its mid-backup merges.
    let twin_plan = FaultPlan::new();
    let (_, twin_backend) = fresh(&twin_plan);
    let twin = Repository::init(twin_backend, bounded_part_config()).unwrap();
    backup(&twin, &data).unwrap();
    write_tree(&data, 12, 10);
    let before = twin_plan.writes_attempted();
    backup(&twin, &data).unwrap();
    let writes = twin_plan.writes_attempted() - before;
    plan.crash_after_writes(writes / 2);
    assert!(backup(&repo, &data).is_err());
    assert!(
        newest_generation(&mem) > committed,
        "the backup wrote no index generation before the crash"
    );
    drop(repo);
    plan.restart();
    let repo = Repository::open(backend.clone()).unwrap();
    let (snaps, _) = catalog::list(&**repo.backend()).unwrap();
    assert_eq!(snaps.len(), 1);
    let containers_before = mem
        .list(cairn_engine::object_names::CONTAINERS)
        .unwrap()
        .len();
    let opts = cairn_engine::gc::GcOptions {
        seed: Some(3),
        ..Default::default()
    };
    common::gc(&repo, &opts, &cairn_engine::gc::NoProgress).unwrap();
    assert!(
        mem.list(cairn_engine::object_names::CONTAINERS)
            .unwrap()
            .len()
            < containers_before,
        "the crashed backup's containers were not collected"
    );
    assert_check_clean(&repo);
    write_tree(&data, 11, 10);
    assert_restores(&repo, &s1, &data);
    let s3 = backup(&repo, &data).unwrap();
    assert_restores(&repo, &s3, &data);
    assert_check_clean(&repo);
}

/// A rewrite scheme packs old duplicates again into the backup's
/// containers (capping level 0: every one of them): a crash anywhere
/// leaves the earlier snapshot, whose chunks the rewrites copy, intact.
#[test]
fn crash_at_every_write_while_rewriting_loses_nothing() {
    crash_at_every_write(rewriting_config);
}

fn rewriting_config() -> RepoConfig {
    let mut cfg = small_config();
    // HAR in front: its sparse-container record is written after each
    // commit, under the same faults.
    cfg.rewrite = cairn_engine::config::RewriteConfig::Capping {
        segment_bytes: 64 << 10,
        cap: 0,
        har: Some(0.5),
    };
    cfg
}

/// Every scheme restores every snapshot byte-identically and leaves a
/// clean repository; the rewritten copies are the canonical ones.
#[test]
fn every_rewrite_scheme_restores_byte_identically() {
    use cairn_engine::config::RewriteConfig;
    for scheme in [
        "capping:segment=64KiB,cap=0",
        "capping:segment=64KiB,cap=2",
        "fcrc:segment=64KiB,cap=1,loss=30",
        "lbw:window=2,cap=1,loss=30,candidates=256KiB",
    ] {
        let src = tempfile::tempdir().unwrap();
        let data = src.path().join("data");
        write_tree(&data, 11, 12);
        let mut cfg = small_config();
        cfg.rewrite = RewriteConfig::parse(scheme).unwrap();
        let repo = Repository::init(Arc::new(MemBackend::new()), cfg).unwrap();
        let mut ids = Vec::new();
        let mut copies = Vec::new();
        for g in 0..4u64 {
            write_tree(&data, 20 + g, 3 + g as usize % 2); // a few files change
            ids.push(backup(&repo, &data).unwrap());
            let keep = src.path().join(format!("gen{g}"));
            copy_dir(&data, &keep);
            copies.push(keep);
        }
        let rewritten: u64 = catalog::list(&**repo.backend())
            .unwrap()
            .0
            .iter()
            .map(|s| s.record.stats.rewritten_data_chunks)
            .sum();
        if scheme.contains("cap=0") {
            assert!(rewritten > 0, "{scheme} rewrote nothing");
        }
        for (id, copy) in ids.iter().zip(&copies) {
            assert_restores_as(&repo, id, "data", copy);
        }
        assert_check_clean(&repo);
    }
}

fn crash_at_every_write(small_config: fn() -> RepoConfig) {
    let src = tempfile::tempdir().unwrap();
    let gen1 = src.path().join("data");
    write_tree(&gen1, 1, 12);
    let gen2 = src.path().join("data2");
    let plan = FaultPlan::new();

    // How many writes does the second backup make?
    let (_, backend) = fresh(&plan);
    let repo = Repository::init(backend.clone(), small_config()).unwrap();
    backup(&repo, &gen1).unwrap();
    std::fs::rename(&gen1, &gen2).unwrap();
    write_tree(&gen2, 2, 6); // overwrite half the files: new data
    let before = plan.writes_attempted();
    backup(&repo, &gen2).unwrap();
    let writes = plan.writes_attempted() - before;
    assert!(writes >= 5, "second backup made only {writes} writes");
    std::fs::rename(&gen2, &gen1).unwrap();
    write_tree(&gen1, 1, 12); // restore generation 1 content

    let crashes = AtomicU64::new(0);
    for n in 0..writes {
        plan.reset();
        let (_, backend) = fresh(&plan);
        let repo = Repository::init(backend.clone(), small_config()).unwrap();
        let s1 = backup(&repo, &gen1).unwrap();
        std::fs::rename(&gen1, &gen2).unwrap();
        write_tree(&gen2, 2, 6);
        plan.crash_after_writes(n);
        let r = backup(&repo, &gen2);
        crashes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        drop(repo);
        plan.restart();

        // Reopen as a new process would.
        let repo = Repository::open(backend.clone()).unwrap();
        let (snaps, bad) = catalog::list(&**repo.backend()).unwrap();
        assert!(bad.is_empty());
        match r {
            // Only past the commit point (the snapshot record): what
            // follows it (the staged copy, the session) is best effort.
            Ok(s2) => {
                assert_eq!(snaps.len(), 2, "crash after {n} writes");
                assert_restores(&repo, &s2, &gen2);
            }
            Err(_) => assert_eq!(
                snaps.len(),
                1,
                "crash after {n} writes left a partial snapshot"
            ),
        }
        assert_eq!(snaps[0].id, s1);
        std::fs::rename(&gen2, &gen1).unwrap();
        write_tree(&gen1, 1, 12);
        assert_restores(&repo, &s1, &gen1);
        assert_check_clean(&repo);
        // The next backup works and sees everything.
        let s2 = backup(&repo, &gen1).unwrap();
        assert_restores(&repo, &s2, &gen1);
        assert_check_clean(&repo);
    }
    assert_eq!(crashes.into_inner(), writes);
}

#[test]
fn full_disk_fails_the_backup_cleanly() {
    let src = tempfile::tempdir().unwrap();
    let data = src.path().join("data");
    write_tree(&data, 7, 8);
    let plan = FaultPlan::new();
    let (_, backend) = fresh(&plan);
    let repo = Repository::init(backend.clone(), small_config()).unwrap();
    let s1 = backup(&repo, &data).unwrap();
    write_tree(&data, 8, 8);
    for nth in 1..=3 {
        plan.fail_write_once(nth, InjectedError::DISK_FULL);
        let err = backup(&repo, &data).unwrap_err().to_string();
        assert!(
            err.contains("No space left") || err.contains("disk full"),
            "{err}"
        );
        plan.reset();
    }
    let (snaps, _) = catalog::list(&**repo.backend()).unwrap();
    assert_eq!(snaps.len(), 1);
    let s2 = backup(&repo, &data).unwrap();
    assert_ne!(s1, s2);
    assert_restores(&repo, &s2, &data);
    assert_check_clean(&repo);
}

#[test]
fn corrupted_container_reads_are_reported_not_restored() {
    let src = tempfile::tempdir().unwrap();
    let data = src.path().join("data");
    write_tree(&data, 3, 6);
    let plan = FaultPlan::new();
    let (_, backend) = fresh(&plan);
    let repo = Repository::init(backend.clone(), small_config()).unwrap();
    let s1 = backup(&repo, &data).unwrap();
    // Flip a bit in the middle of the first container's data section.
    let first = backend.list("containers/").unwrap()[0].clone();
    plan.corrupt_read(&first, cairn_backend::CorruptAt::Start(5000), 3);
    let report = cairn_engine::check::check(&repo, true).unwrap();
    assert!(!report.is_clean());
    let id_hex = first.rsplit('/').next().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.container.as_deref() == Some(id_hex)),
        "{:#?}",
        report.problems
    );
    let snap = catalog::resolve(&**repo.backend(), &s1).unwrap();
    let target = tempfile::tempdir().unwrap();
    let sum = Reader::open(&repo, Default::default()).unwrap().restore(
        &snap.record,
        target.path(),
        None,
        &Progress::default(),
    );
    let failed = match sum {
        Err(e) => e.is_corruption(),
        Ok(s) => !s.errors.is_empty(),
    };
    assert!(
        failed,
        "restore from a damaged container must not succeed silently"
    );
}
