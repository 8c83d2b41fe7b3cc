//! `cairn_engine::copy` (docs/copy.md): snapshots move between
//! repositories of one identity with only the chunks the destination
//! lacks; a crash at any write of a copy leaves the destination with the
//! snapshots committed before it, clean, and a rerun completes it.

use std::path::Path;
use std::sync::Arc;

use cairn_backend::{FaultBackend, FaultPlan, MemBackend};
use cairn_core::Backend;
use cairn_engine::catalog::{self, SnapshotInfo};
use cairn_engine::copy::{self, CopyOptions, CopyReport, CopyWatch, Identity};
use cairn_engine::{Progress, Repository};

mod common;
use common::{assert_check_clean, assert_restores, backup, tiny_config};

fn write_tree(root: &Path, seed: u64, files: usize) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..files {
        let len = 30_000 + (i * 7_919) % 90_000;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let dir = if i % 2 == 0 {
            root.to_path_buf()
        } else {
            root.join("sub")
        };
        std::fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
}

fn all_snapshots(repo: &Repository) -> Vec<SnapshotInfo> {
    let (good, bad) = catalog::list(&**repo.backend()).unwrap();
    assert!(bad.is_empty());
    good
}

fn run_copy(src: &Repository, dest: &Repository) -> cairn_core::Result<CopyReport> {
    let read = src.lock_reader(false)?;
    let write = dest.lock_writer(false)?;
    copy::copy(
        src,
        &read,
        dest,
        &write,
        &all_snapshots(src),
        CopyOptions::default(),
        CopyWatch {
            on_snapshot: &|_| {},
            progress: &Progress::default(),
        },
    )
}

fn ids(repo: &Repository) -> Vec<String> {
    all_snapshots(repo).into_iter().map(|s| s.id).collect()
}

/// A source of two snapshots (the second changes a third of the files);
/// the trees as they were at each backup.
fn source(tmp: &Path) -> (Repository, Vec<std::path::PathBuf>) {
    let src = Repository::init(Arc::new(MemBackend::new()), tiny_config()).unwrap();
    let data = tmp.join("data");
    let mut kept = Vec::new();
    for g in 0..2u64 {
        write_tree(&data, 1 + g, if g == 0 { 12 } else { 4 });
        backup(&src, &data).unwrap();
        let keep = tmp.join(format!("gen{g}/data"));
        common::copy_dir(&data, &keep);
        kept.push(keep);
    }
    (src, kept)
}

fn same_identity_repo(src: &Repository, backend: Arc<dyn Backend>) -> Repository {
    let mut cfg = src.config.clone();
    cfg.id = Repository::default_config().id;
    Repository::init(backend, cfg).unwrap()
}

#[test]
fn a_copy_moves_what_is_missing_and_a_rerun_moves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, kept) = source(tmp.path());
    let dest = same_identity_repo(&src, Arc::new(MemBackend::new()));
    assert_eq!(copy::identity(&src, &dest).unwrap(), Identity::Same);

    // A dry run reports what the copy then moves, and writes nothing.
    let dry = {
        let read = src.lock_reader(false).unwrap();
        let write = dest.lock_writer(false).unwrap();
        let snaps = all_snapshots(&src);
        copy::copy(
            &src,
            &read,
            &dest,
            &write,
            &snaps,
            CopyOptions { dry_run: true },
            CopyWatch {
                on_snapshot: &|_| {},
                progress: &Progress::default(),
            },
        )
        .unwrap()
    };
    assert!(ids(&dest).is_empty());
    let first = run_copy(&src, &dest).unwrap();
    assert_eq!(dry.chunks_copied, first.chunks_copied);
    assert_eq!(dry.stored_bytes_copied, first.stored_bytes_copied);

    assert_eq!(ids(&dest), ids(&src), "records keep their names");
    for (id, tree) in ids(&dest).iter().zip(&kept) {
        assert_restores(&dest, id, tree);
    }
    assert_check_clean(&dest);
    // Every chunk reached once, none twice: the second snapshot moved only
    // what it changed.
    assert_eq!(first.chunks_copied, first.chunks_reached);
    assert!(first.snapshots[1].chunks < first.snapshots[0].chunks / 2);

    let again = run_copy(&src, &dest).unwrap();
    assert!(again.snapshots.iter().all(|s| s.skipped));
    assert_eq!(again.chunks_copied, 0);
    assert_eq!(again.containers_written, 0);
}

#[test]
fn a_destination_that_holds_some_chunks_gets_only_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, kept) = source(tmp.path());
    let dest = same_identity_repo(&src, Arc::new(MemBackend::new()));
    // The destination backed up the first generation itself.
    backup(&dest, &kept[0]).unwrap();
    let report = run_copy(&src, &dest).unwrap();
    assert!(report.chunks_present > 0);
    // Only the listings (their times and inodes differ) and the changed
    // files' chunks move.
    assert!(
        report.chunks_copied * 3 < report.chunks_reached,
        "{report:?}"
    );
    for s in all_snapshots(&src) {
        assert_restores(
            &dest,
            &s.id,
            &kept[if s.id == ids(&src)[0] { 0 } else { 1 }],
        );
    }
    assert_check_clean(&dest);
}

#[test]
fn repositories_of_different_identities_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = source(tmp.path());
    let mut cfg = tiny_config();
    cfg.fingerprint = cairn_core::FingerprintAlgo::Sha256;
    let other = Repository::init(Arc::new(MemBackend::new()), cfg).unwrap();
    let e = run_copy(&src, &other).unwrap_err().to_string();
    assert!(e.contains("--copy-identity-from"), "{e}");
    assert!(ids(&other).is_empty());

    // Same fingerprints, another chunker: sound, and said.
    let mut cfg = src.config.clone();
    cfg.id = Repository::default_config().id;
    cfg.chunker = cairn_core::ChunkerConfig::Fixed { size: 4096 };
    let chunked = Repository::init(Arc::new(MemBackend::new()), cfg).unwrap();
    assert!(matches!(
        copy::identity(&src, &chunked).unwrap(),
        Identity::SameFingerprints(_)
    ));
}

#[test]
fn a_crash_at_any_write_of_a_copy_loses_nothing_and_a_rerun_completes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, kept) = source(tmp.path());
    let plan = FaultPlan::new();
    // The destination holds a backup of its own (an index, a snapshot).
    let own_tree = tmp.path().join("own");
    write_tree(&own_tree, 99, 3);
    let fresh = |plan: &Arc<FaultPlan>| {
        let backend: Arc<dyn Backend> =
            Arc::new(FaultBackend::new(MemBackend::new(), plan.clone()));
        let dest = same_identity_repo(&src, backend.clone());
        backup(&dest, &own_tree).unwrap();
        (backend, dest)
    };
    let (_, probe) = fresh(&plan);
    let before = plan.writes_attempted();
    run_copy(&src, &probe).unwrap();
    let writes = plan.writes_attempted() - before;
    assert!(writes >= 6, "a copy made only {writes} writes");

    for n in 0..writes {
        plan.reset();
        let (backend, dest) = fresh(&plan);
        plan.crash_after_writes(n);
        assert!(
            run_copy(&src, &dest).is_err(),
            "a crash after {n} of {writes} writes went unnoticed"
        );
        drop(dest);
        plan.restart();

        let dest = Repository::open(backend).unwrap();
        let all = ids(&src);
        let own: Vec<String> = ids(&dest)
            .into_iter()
            .filter(|i| !all.contains(i))
            .collect();
        assert_eq!(own.len(), 1, "after {n} writes");
        let committed: Vec<String> = ids(&dest).into_iter().filter(|i| all.contains(i)).collect();
        assert!(
            committed.len() < all.len() && all.starts_with(&committed),
            "after {n} writes: {committed:?}"
        );
        for id in &committed {
            let i = all.iter().position(|a| a == id).unwrap();
            assert_restores(&dest, id, &kept[i]);
        }
        let report = cairn_engine::check::check(&dest, false).unwrap();
        assert!(
            report.is_clean(),
            "after {n} writes: {:#?}",
            report.problems
        );

        run_copy(&src, &dest).unwrap();
        assert_eq!(ids(&dest).len(), all.len() + 1);
        for (id, tree) in all.iter().zip(&kept) {
            assert_restores(&dest, id, tree);
        }
    }
}
