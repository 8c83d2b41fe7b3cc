//! Garbage collection beside backups (`003_ea5fccc485a97c5d.txt` §3.5):
//! a backup that commits while a collection runs, in any of its phases,
//! keeps every chunk it uses, even chunks the collection judged dead
//! (resurrection); container ids never collide; a collection that dies
//! after a backup covered its copies loses nothing and the next one
//! completes.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cairn_backend::{FaultBackend, FaultPlan, MemBackend};
use cairn_core::Backend;
use cairn_engine::gc::{self, Collector, GcOptions, GcProgress, NoProgress};
use cairn_engine::{catalog, Repository};

mod common;
use common::{assert_check_clean, assert_restores_as, copy_dir, tiny_config, Rng};

const PHASES: [&str; 6] = [
    "analysis",
    "enumeration",
    "filter",
    "select",
    "copy",
    "commit",
];

/// Runs `job` once, when the collection starts phase `at`.
struct Hook<'a> {
    at: &'static str,
    job: Mutex<Option<Box<dyn FnOnce() + Send + 'a>>>,
}

impl GcProgress for Hook<'_> {
    fn phase(&self, name: &str, _total: u64) {
        if name == self.at {
            if let Some(job) = self.job.lock().unwrap().take() {
                job();
            }
        }
    }
}

/// Writes files `f0`, `f{step}`, `f{2 step}`... below `files`.
fn write_files(root: &Path, seed: u64, files: usize, step: usize) {
    std::fs::create_dir_all(root).unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for i in (0..files).step_by(step) {
        let len = 8_000 + (rng.next() % 50_000) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        std::fs::write(root.join(format!("f{i}")), data).unwrap();
    }
}

/// A repository whose first snapshot is forgotten (a third of its data
/// dead), one snapshot kept. Returns the kept snapshot and the forgotten tree's copy.
struct Setup {
    dir: tempfile::TempDir,
    kept: String,
}

fn setup(repo: &Repository) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_files(&data, 1, 12, 1);
    copy_dir(&data, &dir.path().join("old"));
    let old = common::backup(repo, &data).unwrap();
    // Every third file changes: containers end up partly live, partly
    // dead, so collections copy as well as delete.
    write_files(&data, 2, 12, 3);
    let kept = common::backup(repo, &data).unwrap();
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(repo, &lock, &[old]).unwrap();
    drop(lock);
    Setup { dir, kept }
}

/// The concurrent backup: the forgotten tree again (every chunk of it
/// dead to the collection, which read its roots before) plus a new file.
fn concurrent_tree(s: &Setup) -> std::path::PathBuf {
    let tree = s.dir.path().join("again");
    copy_dir(&s.dir.path().join("old"), &tree);
    write_files(&tree.join("new"), 3, 1, 1);
    tree
}

fn collect(repo: &Repository, collector: Collector, progress: &dyn GcProgress) -> gc::GcReport {
    common::gc(repo, &options(collector), progress).unwrap()
}

fn options(collector: Collector) -> GcOptions {
    GcOptions {
        collector,
        seed: Some(11),
        ..Default::default()
    }
}

fn assert_all_restore(repo: &Repository, want: &[(&str, &Path)]) {
    let (snaps, bad) = catalog::list(&**repo.backend()).unwrap();
    assert!(bad.is_empty());
    assert_eq!(snaps.len(), want.len(), "snapshot count");
    for (id, tree) in want {
        let top = tree.file_name().unwrap().to_str().unwrap();
        assert_restores_as(repo, id, top, tree);
    }
    assert_check_clean(repo);
}

/// A backup committed in each phase of each collector keeps its data;
/// the chunks it resurrected are copied at the commit.
#[test]
fn a_backup_during_any_phase_keeps_its_data() {
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        for at in PHASES {
            let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
            let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
            let s = setup(&repo);
            let tree = concurrent_tree(&s);
            let concurrent: Mutex<Option<String>> = Mutex::new(None);
            let hook = Hook {
                at,
                job: Mutex::new(Some(Box::new(|| {
                    // Another process: its own handle on the repository.
                    let other = Repository::open(backend.clone()).unwrap();
                    let id = common::backup(&other, &tree).unwrap();
                    *concurrent.lock().unwrap() = Some(id);
                }))),
            };
            let report = collect(&repo, collector, &hook);
            let Some(id) = concurrent.lock().unwrap().clone() else {
                assert!(
                    (collector == Collector::Lgc && at == "analysis")
                        || (collector == Collector::PgcPlus && at == "filter"),
                    "{collector:?}: no phase {at}"
                );
                continue;
            };
            let ctx = format!("{collector:?} during {at}");
            assert_eq!(report.concurrent_snapshots, 1, "{ctx}");
            assert!(report.containers_deleted > 0, "{ctx}: nothing collected");
            assert!(report.containers_written > 0, "{ctx}: nothing copied");
            assert!(
                report.resurrected_chunks > 0,
                "{ctx}: the forgotten tree's chunks were judged dead, yet none copied"
            );
            let data = s.dir.path().join("data");
            let want = [(s.kept.as_str(), data.as_path()), (id.as_str(), &tree)];
            assert_all_restore(&repo, &want);
            // The next collection finds the duplicates left and loses nothing.
            collect(&repo, collector, &NoProgress);
            assert_all_restore(&repo, &want);
        }
    }
}

/// A collection that dies at any write, after a backup committed beside
/// it (raising the index's coverage mark over the collection's copies),
/// loses nothing; the next collection finishes its work.
#[test]
fn a_collection_dying_after_a_concurrent_backup_loses_nothing() {
    for collector in [Collector::Lgc, Collector::PgcPlus] {
        let count = {
            let plan = FaultPlan::new();
            let mem = MemBackend::new();
            let backend: Arc<dyn Backend> = Arc::new(FaultBackend::new(mem.clone(), plan.clone()));
            let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
            let s = setup(&repo);
            let tree = concurrent_tree(&s);
            let before = plan.writes_attempted();
            let hook = Hook {
                at: "copy",
                job: Mutex::new(Some(Box::new(|| {
                    let other = Repository::open(Arc::new(mem.clone())).unwrap();
                    common::backup(&other, &tree).unwrap();
                }))),
            };
            collect(&repo, collector, &hook);
            plan.writes_attempted() - before
        };
        assert!(count >= 4, "{collector:?}: only {count} writes");
        let mut crashed = 0;
        for n in 0..count {
            let plan = FaultPlan::new();
            let mem = MemBackend::new();
            let backend: Arc<dyn Backend> = Arc::new(FaultBackend::new(mem.clone(), plan.clone()));
            let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
            let s = setup(&repo);
            let tree = concurrent_tree(&s);
            let concurrent: Mutex<Option<String>> = Mutex::new(None);
            // The backup writes through the unfaulted store: only the
            // collection crashes.
            let hook = Hook {
                at: "copy",
                job: Mutex::new(Some(Box::new(|| {
                    let other = Repository::open(Arc::new(mem.clone())).unwrap();
                    *concurrent.lock().unwrap() = Some(common::backup(&other, &tree).unwrap());
                }))),
            };
            plan.crash_after_writes(n);
            let r = common::gc(&repo, &options(collector), &hook);
            crashed += usize::from(r.is_err());
            drop(repo);
            plan.restart();
            let repo = Repository::open(backend.clone()).unwrap();
            let data = s.dir.path().join("data");
            let id = concurrent.lock().unwrap().clone();
            let mut want = vec![(s.kept.as_str(), data.as_path())];
            if let Some(id) = &id {
                want.push((id.as_str(), tree.as_path()));
            }
            let ctx = format!("{collector:?} crash after {n} writes");
            assert_all_restore(&repo, &want);
            let r = collect(&repo, collector, &NoProgress);
            assert!(r.warnings.is_empty(), "{ctx}: {:?}", r.warnings);
            assert_all_restore(&repo, &want);
            assert!(
                !repo.backend().exists("gc-ids").unwrap(),
                "{ctx}: the reservation outlived a completed collection"
            );
        }
        assert!(
            crashed * 2 >= count as usize,
            "{collector:?}: {crashed} of {count} crash points reached"
        );
    }
}

/// A damaged reservation: a backup with no collection running goes on, a
/// backup beside a running collection stops with one line, and the next
/// collection replaces it with a warning.
#[test]
fn a_damaged_reservation_is_reported_and_replaced() {
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let s = setup(&repo);
    backend.write_atomic("gc-ids", b"CAIRNGCI garbage").unwrap();
    let again = concurrent_tree(&s);
    let id = common::backup(&repo, &again).unwrap();
    {
        let _gc = repo.lock_gc(false).unwrap();
        let other = Repository::open(backend.clone()).unwrap();
        let err = common::backup(&other, &again).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("gc id reservation"), "{err}");
    }
    let r = collect(&repo, Collector::PgcPlus, &NoProgress);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(!backend.exists("gc-ids").unwrap());
    let data = s.dir.path().join("data");
    assert_all_restore(&repo, &[(&s.kept, &data), (&id, &again)]);
}

/// Ticks per phase, for [`each_collector_ticks_inside_enumeration_and_filter`].
#[derive(Default)]
struct Ticks {
    phase: Mutex<String>,
    by_phase: Mutex<std::collections::HashMap<String, u64>>,
}

impl GcProgress for Ticks {
    fn phase(&self, name: &str, _total: u64) {
        *self.phase.lock().unwrap() = name.to_string();
    }
    fn tick(&self) {
        let phase = self.phase.lock().unwrap().clone();
        *self.by_phase.lock().unwrap().entry(phase).or_default() += 1;
    }
}

/// The collector tells its progress hook of units inside enumeration
/// (tree nodes read, or containers a level scan reads) and the filter
/// (index entries tested), where one snapshot of one large file is a
/// single unit of the phases' totals: the volume's scheduler paces there.
#[test]
fn each_collector_ticks_inside_enumeration_and_filter() {
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let repo = Repository::init(backend, tiny_config()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let mut rng = Rng(7);
        let big: Vec<u8> = (0..12 << 20).map(|_| rng.next() as u8).collect();
        std::fs::write(data.join("big"), &big).unwrap();
        common::backup(&repo, &data).unwrap();
        let ticks = Ticks::default();
        collect(&repo, collector, &ticks);
        let by_phase = ticks.by_phase.lock().unwrap().clone();
        assert!(
            by_phase.get("enumeration").copied().unwrap_or(0) > 0,
            "{collector:?}: {by_phase:?}"
        );
        if collector != Collector::PgcPlus {
            assert!(
                by_phase.get("filter").copied().unwrap_or(0) > 0,
                "{collector:?}: {by_phase:?}"
            );
        }
    }
}
