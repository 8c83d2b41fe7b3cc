//! Garbage collection end to end (003 §3): nothing still referenced is ever
//! deleted, whatever the collector, memory or sequence of backups, forgets
//! and fastcopies; a crash at any write or delete of a collection loses
//! nothing; PGC's level checksums stop a collection over a damaged tree.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_backend::{FaultBackend, FaultPlan, MemBackend};
use cairn_core::{Backend, ChunkKind};
use cairn_engine::gc::relayout::RelayoutOptions;
use cairn_engine::gc::{self, Collector, GcOptions, NoProgress};
use cairn_engine::{catalog, Repository};
use proptest::prelude::*;

mod common;
use common::{assert_check_clean, assert_restores_as, copy_dir, tiny_config, Rng};

/// Rewrites `changed` of the `files` files of `root` (all of them the
/// first time), in two directories, with random content.
fn write_tree(root: &Path, seed: u64, files: usize, changed: usize) {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    for k in 0..changed.min(files) {
        let i = (rng.next() as usize + k) % files;
        let len = 5_000 + (rng.next() % 60_000) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let dir = if i.is_multiple_of(2) {
            root.to_path_buf()
        } else {
            root.join("sub")
        };
        std::fs::write(dir.join(format!("f{i}")), data).unwrap();
    }
}

fn backup(repo: &Repository, path: &Path) -> String {
    common::backup(repo, path).unwrap()
}

/// Every snapshot in `model` restores to its recorded tree, and `check
/// --read-data` is clean.
fn assert_model(repo: &Repository, model: &[(String, PathBuf)]) {
    let (snaps, bad) = catalog::list(&**repo.backend()).unwrap();
    assert!(bad.is_empty());
    let mut ids: Vec<_> = snaps.iter().map(|s| s.id.clone()).collect();
    let mut want: Vec<_> = model.iter().map(|(id, _)| id.clone()).collect();
    ids.sort();
    want.sort();
    assert_eq!(ids, want, "snapshot list");
    for (id, tree) in model {
        assert_restores_as(repo, id, "data", tree);
    }
    assert_check_clean(repo);
}

/// Re-layout without a budget: every container the newest snapshot uses
/// only in part is cleaned.
const EVERY_SPARSE: RelayoutOptions = RelayoutOptions {
    utilization: 1.0,
    share_of_copy: 0.0,
    share_of_heads: 1000.0,
    floor_containers: 0,
};

fn run_gc(repo: &Repository, collector: Collector, memory: u64) -> gc::GcReport {
    let opts = GcOptions {
        collector,
        memory_bytes: memory,
        seed: Some(7),
        ..Default::default()
    };
    common::gc(repo, &opts, &NoProgress).unwrap()
}

fn container_bytes(backend: &dyn Backend) -> u64 {
    backend
        .list("containers/")
        .unwrap()
        .iter()
        .map(|k| backend.read(k).unwrap().len() as u64)
        .sum()
}

#[derive(Clone, Debug)]
enum Op {
    Backup {
        changed: usize,
    },
    Forget {
        pick: usize,
    },
    Fastcopy {
        pick: usize,
    },
    Gc {
        collector: Collector,
        tight: bool,
        relayout: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..6).prop_map(|changed| Op::Backup { changed }),
        2 => any::<usize>().prop_map(|pick| Op::Forget { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Fastcopy { pick }),
        3 => (prop_oneof![Just(Collector::Lgc), Just(Collector::Pgc), Just(Collector::PgcPlus)], any::<bool>(), any::<bool>())
            .prop_map(|(collector, tight, relayout)| Op::Gc { collector, tight, relayout }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Random backup / forget / fastcopy / gc sequences against a model of
    /// what must stay: after every collection, every snapshot left restores
    /// byte-identically and `check --read-data` is clean. `tight` memory
    /// forces focused cleaning (LGC, PGC) and PGC+'s fallback; `relayout`
    /// also cleans every container the newest snapshot uses sparsely and
    /// writes the copies in its order (`gc/relayout.rs`).
    #[test]
    fn collections_never_lose_what_snapshots_reference(ops in proptest::collection::vec(op(), 3..9)) {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        write_tree(&data, 1, 8, 8);
        let repo = Repository::init(Arc::new(MemBackend::new()), tiny_config()).unwrap();
        let mut model: Vec<(String, PathBuf)> = Vec::new();
        let mut versions = 0u64;
        let keep = |model: &mut Vec<(String, PathBuf)>, id: String, data: &Path, v: u64| {
            let copy = dir.path().join(format!("v{v}"));
            copy_dir(data, &copy);
            model.push((id, copy));
        };
        keep(&mut model, backup(&repo, &data), &data, versions);
        for op in ops {
            match op {
                Op::Backup { changed } => {
                    versions += 1;
                    write_tree(&data, 100 + versions, 8, changed);
                    keep(&mut model, backup(&repo, &data), &data, versions);
                }
                Op::Forget { pick } if !model.is_empty() => {
                    let (id, _) = model.remove(pick % model.len());
                    let lock = repo.lock_writer(false).unwrap();
                    cairn_engine::forget::remove(&repo, &lock, &[id]).unwrap();
                }
                Op::Fastcopy { pick } if !model.is_empty() => {
                    let (id, tree) = model[pick % model.len()].clone();
                    let lock = repo.lock_writer(false).unwrap();
                    let src = catalog::resolve(&**repo.backend(), &id).unwrap();
                    let copy = cairn_engine::forget::fastcopy(&repo, &lock, &src, vec![]).unwrap();
                    model.push((copy.id, tree));
                }
                Op::Gc { collector, tight, relayout } => {
                    let opts = GcOptions {
                        collector,
                        memory_bytes: if tight { 2048 } else { 1 << 30 },
                        seed: Some(7),
                        relayout: relayout.then_some(EVERY_SPARSE),
                        ..Default::default()
                    };
                    common::gc(&repo, &opts, &NoProgress).unwrap();
                    assert_model(&repo, &model);
                }
                _ => {}
            }
        }
        run_gc(&repo, Collector::PgcPlus, 1 << 30);
        assert_model(&repo, &model);
    }
}

/// After forgetting all but the newest snapshot, a collection leaves the
/// repository's containers within 10% of a fresh backup of that snapshot.
#[test]
fn forgetting_all_but_the_newest_comes_close_to_a_fresh_backup() {
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        write_tree(&data, 1, 16, 16);
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
        let mut ids = Vec::new();
        for g in 0..8u64 {
            write_tree(&data, 50 + g, 16, 5);
            ids.push(backup(&repo, &data));
        }
        let newest = ids.pop().unwrap();
        {
            let lock = repo.lock_writer(false).unwrap();
            cairn_engine::forget::remove(&repo, &lock, &ids).unwrap();
        }
        let before = container_bytes(&*backend);
        let report = run_gc(&repo, collector, 1 << 30);
        let after = container_bytes(&*backend);
        assert_model(&repo, &[(newest, data.clone())]);

        let fresh_backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let fresh = Repository::init(fresh_backend.clone(), tiny_config()).unwrap();
        backup(&fresh, &data);
        let alone = container_bytes(&*fresh_backend);
        assert!(
            after as f64 <= alone as f64 * 1.10,
            "{collector:?}: {after} bytes after gc (from {before}) vs {alone} fresh; {report:#?}"
        );
        assert!(report.containers_deleted > 0);
    }
}

/// A fastcopy shares its source's tree: forgetting the source keeps every
/// chunk, and a collection then deletes nothing the copy needs.
#[test]
fn a_fastcopy_keeps_its_tree_alive() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_tree(&data, 3, 6, 6);
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let id = backup(&repo, &data);
    let src = catalog::resolve(&**repo.backend(), &id).unwrap();
    let writes = |b: &Arc<dyn Backend>| b.list("").unwrap().len();
    let before = writes(&backend);
    let copy = {
        let lock = repo.lock_writer(false).unwrap();
        let c = cairn_engine::forget::fastcopy(&repo, &lock, &src, vec!["copy".into()]).unwrap();
        cairn_engine::forget::remove(&repo, &lock, std::slice::from_ref(&id)).unwrap();
        c
    };
    assert_eq!(writes(&backend), before, "one record in, one out");
    assert_eq!(copy.record.root, src.record.root);
    assert_eq!(copy.record.fastcopy_of.as_deref(), Some(id.as_str()));
    for c in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let r = run_gc(&repo, c, 1 << 30);
        assert_eq!(r.containers_deleted, 0, "{c:?}");
    }
    assert_model(&repo, &[(copy.id, data)]);
}

/// Finds a container holding a tree node (level >= 1) of the given
/// repository, and the node.
fn a_tree_node(repo: &Repository) -> (cairn_core::ContainerId, cairn_core::Fingerprint) {
    for id in repo.log.ids().unwrap() {
        let meta = repo.log.read_meta(id).unwrap();
        if let Some(d) = meta
            .descriptors
            .iter()
            .find(|d| d.kind == ChunkKind::Tree && d.level >= 1)
        {
            return (id, d.fp);
        }
    }
    panic!("no tree node stored");
}

/// A repository with one big file (a recipe tree of several levels) and a
/// forgotten snapshot, so a collection has something to delete.
fn damaged_setup(
    small: bool,
) -> (
    tempfile::TempDir,
    Arc<FaultPlan>,
    Arc<dyn Backend>,
    Repository,
) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut rng = Rng(99);
    let big: Vec<u8> = (0..if small { 300_000 } else { 900_000 })
        .map(|_| rng.next() as u8)
        .collect();
    std::fs::write(data.join("big"), &big).unwrap();
    let plan = FaultPlan::new();
    let backend: Arc<dyn Backend> = Arc::new(FaultBackend::new(MemBackend::new(), plan.clone()));
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let old = backup(&repo, &data);
    // The last third of `big` changes: its old chunks become garbage beside
    // live ones in the same containers, so a collection always has copies
    // to make (the listings alone vary in size with file times and inodes,
    // and so did the garbage they left).
    let mut changed = big.clone();
    let third = changed.len() / 3;
    for b in &mut changed[2 * third..] {
        *b = rng.next() as u8;
    }
    std::fs::write(data.join("big"), &changed).unwrap();
    write_tree(&data, 5, 4, 4);
    backup(&repo, &data);
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, &[old]).unwrap();
    drop(lock);
    (dir, plan, backend, repo)
}

/// PGC's per-level checksums (§3.2.2) catch a tree node that is missing
/// or damaged, and the collection stops before deleting anything.
#[test]
fn level_checksums_stop_a_collection_over_a_damaged_tree() {
    for (case, collector) in [
        ("missing", Collector::Pgc),
        ("missing", Collector::PgcPlus),
        ("damaged", Collector::Pgc),
        ("damaged", Collector::PgcPlus),
        ("damaged", Collector::Lgc),
    ] {
        let (_dir, plan, backend, repo) = damaged_setup(false);
        let (container, node) = a_tree_node(&repo);
        let key = cairn_engine::object_names::container(container);
        if case == "missing" {
            // The node's container loses the node: rewrite it without it.
            let meta = repo.log.read_meta(container).unwrap();
            let whole = repo.log.read(container).unwrap();
            let mut w = cairn_format::container::ContainerWriter::new(container, 32, 1 << 20);
            for d in meta.descriptors.iter().filter(|d| d.fp != node) {
                let stored =
                    cairn_format::container::stored_chunk(&whole.bytes, &whole.meta, d).unwrap();
                w.push(d.fp, d.kind, d.level, d.codec, d.raw_len, stored);
            }
            backend.write_atomic(&key, &w.finish()).unwrap();
        } else {
            let meta = repo.log.read_meta(container).unwrap();
            let d = meta.descriptors.iter().find(|d| d.fp == node).unwrap();
            let at = cairn_format::container::chunk_file_range(&meta, d).start;
            plan.corrupt_read(&key, cairn_backend::CorruptAt::Start(at), 1);
        }
        let before = backend.list("containers/").unwrap();
        let opts = GcOptions {
            collector,
            ..Default::default()
        };
        let err = common::gc(&repo, &opts, &NoProgress).unwrap_err();
        assert!(err.is_corruption(), "{case} {collector:?}: {err}");
        if case == "missing" && collector != Collector::Lgc {
            let e = err.to_string();
            assert!(
                e.contains("checksum") || e.contains("stored in no container"),
                "{e}"
            );
        }
        assert_eq!(
            backend.list("containers/").unwrap(),
            before,
            "{case} {collector:?}: nothing deleted"
        );
    }
}

/// Writes and deletes one collection makes on a fresh `damaged_setup`.
fn writes_of_a_collection(collector: Collector) -> u64 {
    let (_dir, plan, _backend, repo) = damaged_setup(true);
    let before = plan.writes_attempted();
    run_gc(&repo, collector, 1 << 30);
    plan.writes_attempted() - before
}

/// A fresh `damaged_setup` whose collection crashes after `n` writes and
/// deletes (with the counting run's seed: the same Bloom filters, so the
/// same containers selected and the same writes). Returns the data
/// directory, the restarted store, the kept snapshot and whether the
/// crash point was reached (listing sizes vary with file times, so a run
/// may write fewer objects than the counting run).
fn crashed_collection(
    collector: Collector,
    n: u64,
) -> (tempfile::TempDir, Arc<dyn Backend>, String, bool) {
    let (dir, _plan, backend, kept, reached) = crashed_collection_with_plan(collector, n);
    (dir, backend, kept, reached)
}

/// [`crashed_collection`], with the store's fault plan (for a second crash).
fn crashed_collection_with_plan(
    collector: Collector,
    n: u64,
) -> (
    tempfile::TempDir,
    Arc<FaultPlan>,
    Arc<dyn Backend>,
    String,
    bool,
) {
    let (dir, plan, backend, repo) = damaged_setup(true);
    let (snaps, _) = catalog::list(&**repo.backend()).unwrap();
    let kept = snaps[0].id.clone();
    let reached = gc_crashing_after(repo, &plan, collector, n, 7);
    (dir, plan, backend, kept, reached)
}

/// A collection on `repo` (Bloom seed `seed`) that crashes after `n`
/// writes and deletes; the store restarted after it. Whether it failed.
fn gc_crashing_after(
    repo: Repository,
    plan: &FaultPlan,
    collector: Collector,
    n: u64,
    seed: u64,
) -> bool {
    plan.crash_after_writes(n);
    let opts = GcOptions {
        collector,
        seed: Some(seed),
        ..Default::default()
    };
    let r = common::gc(&repo, &opts, &NoProgress);
    drop(repo);
    plan.restart();
    r.is_err()
}

/// A crash at every write and delete of a collection (copies, index
/// delta, container deletes) loses nothing: the earlier snapshots restore,
/// `check` is clean and the next collection completes.
#[test]
fn crash_at_every_write_of_a_collection_loses_nothing() {
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let count = writes_of_a_collection(collector);
        assert!(count >= 3, "{collector:?}: only {count} writes");
        let mut crashed = 0;
        for n in 0..count {
            let (dir, backend, kept, reached) = crashed_collection(collector, n);
            crashed += u64::from(reached);
            let repo = Repository::open(backend.clone()).unwrap();
            let model = vec![(kept.clone(), dir.path().join("data"))];
            assert_model(&repo, &model);
            run_gc(&repo, collector, 1 << 30);
            assert_model(&repo, &model);
        }
        assert!(
            crashed * 2 >= count,
            "{collector:?}: {crashed} of {count} crash points reached"
        );
    }
}

/// A collection that takes over a pending list left by one that stopped
/// (its entries for the chunks it condemned already forgotten, its
/// containers still there) and itself crashes at any write leaves a
/// repository `check` finds clean: the list goes only after the entries
/// put back are committed, so every covered container's chunks stay
/// indexed or listed as retiring. The next collection then loses nothing.
#[test]
fn a_crash_while_taking_over_a_pending_list_loses_nothing() {
    let collector = Collector::PgcPlus;
    let count = writes_of_a_collection(collector);
    let mut seen = 0;
    for n in 0..count {
        let (_, backend, _, _) = crashed_collection(collector, n);
        if !backend.exists("gc-pending").unwrap() {
            continue;
        }
        // How many writes the collection that takes over makes.
        let (_d, plan, backend, _, _) = crashed_collection_with_plan(collector, n);
        let before = plan.writes_attempted();
        run_gc(&Repository::open(backend).unwrap(), collector, 1 << 30);
        let takeover = plan.writes_attempted() - before;
        for m in 0..takeover {
            let (dir, plan, backend, kept, _) = crashed_collection_with_plan(collector, n);
            let repo = Repository::open(backend.clone()).unwrap();
            gc_crashing_after(repo, &plan, collector, m, 8);
            let repo = Repository::open(backend.clone()).unwrap();
            let report = cairn_engine::check::check(&repo, false).unwrap();
            assert!(
                report.is_clean(),
                "first stop at write {n}, second at {m}: {:#?}",
                report.problems
            );
            let model = vec![(kept.clone(), dir.path().join("data"))];
            assert_model(&repo, &model);
            run_gc(&repo, collector, 1 << 30);
            assert_model(&repo, &model);
            seen += 1;
        }
    }
    assert!(seen > 0, "no crash point left a pending list");
}

/// A damaged pending list (a collection died between its commit and its
/// deletes, then the list rotted): backups go on, `check` reports it, and
/// the next collection judges the containers it named again, losing
/// nothing and leaving `check --read-data` clean.
#[test]
fn a_damaged_pending_list_is_repaired_by_the_next_collection() {
    let count = writes_of_a_collection(Collector::PgcPlus);
    let mut seen = 0;
    for n in 0..count {
        let (dir, backend, kept, _) = crashed_collection(Collector::PgcPlus, n);
        if !backend.exists("gc-pending").unwrap() {
            continue;
        }
        seen += 1;
        let mut bytes = backend.read("gc-pending").unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        backend.write_atomic("gc-pending", &bytes).unwrap();
        let repo = Repository::open(backend.clone()).unwrap();
        let report = cairn_engine::check::check(&repo, true).unwrap();
        assert!(
            report
                .problems
                .iter()
                .any(|p| format!("{p:?}").contains("gc pending list")),
            "{:#?}",
            report.problems
        );
        let again = backup(&repo, &dir.path().join("data"));
        // Right after Merge, the index names every stored chunk again.
        struct CheckAtAnalysis<'a>(&'a Repository, std::sync::Mutex<bool>);
        impl gc::GcProgress for CheckAtAnalysis<'_> {
            fn phase(&self, name: &str, _total: u64) {
                if name == "analysis" {
                    let report = cairn_engine::check::check(self.0, false).unwrap();
                    assert!(report.is_clean(), "after Merge: {:#?}", report.problems);
                    *self.1.lock().unwrap() = true;
                }
            }
        }
        let hook = CheckAtAnalysis(&repo, std::sync::Mutex::new(false));
        let r = common::gc(&repo, &GcOptions::default(), &hook).unwrap();
        assert!(*hook.1.lock().unwrap());
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        let model = vec![
            (kept.clone(), dir.path().join("data")),
            (again, dir.path().join("data")),
        ];
        assert_model(&repo, &model);
        run_gc(&repo, Collector::PgcPlus, 1 << 30);
        assert_model(&repo, &model);
    }
    assert!(seen > 0, "no crash point left a pending list");
}

/// After a collection, the Summary Vector no longer answers "maybe" for
/// the fingerprints it removed (rebuilt when the collection's commit
/// writes a new index generation), so a backup meeting them again pays
/// no index read for them.
#[test]
fn the_summary_vector_forgets_what_a_collection_removed() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let data = dir.path().join("data");
    write_tree(&data, 1, 8, 8);
    let old = backup(&repo, &data);
    write_tree(&data, 2, 8, 8);
    backup(&repo, &data);
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, &[old]).unwrap();
    drop(lock);
    let mut stored = std::collections::HashSet::new();
    for id in repo.log.ids().unwrap() {
        for d in repo.log.read_meta(id).unwrap().descriptors {
            stored.insert(d.fp);
        }
    }
    run_gc(&repo, Collector::PgcPlus, 1 << 30);
    let opened = cairn_engine::index::open_for_write(
        backend.clone(),
        repo.counters.clone(),
        &*repo.log,
        &repo.config.index,
        &Default::default(),
    )
    .unwrap();
    let mut kind = opened.kind;
    let removed: Vec<_> = stored
        .into_iter()
        .filter(|fp| kind.lookup(fp).unwrap().is_none())
        .collect();
    assert!(removed.len() > 20, "only {} removed", removed.len());
    let negatives = removed.iter().filter(|fp| kind.certainly_new(fp)).count();
    assert!(
        negatives * 10 >= removed.len() * 9,
        "{negatives} of {} removed fingerprints certainly new",
        removed.len()
    );
}

/// PGC+'s live vector answers only for its keys: a chunk stored in a
/// judged container but missing from the index (a state concurrency can
/// leave, docs/concurrency.md) must be a key too, or Select and Copy read
/// and clear another chunk's bit and a live chunk goes uncopied. Here a
/// live snapshot's chunks are taken out of the index; the collection then
/// copies every live chunk of the half-dead containers it cleans.
#[test]
fn pgc_plus_copies_every_live_chunk_beside_chunks_the_index_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    write_tree(&a, 3, 40, 40);
    write_tree(&b, 4, 40, 40);
    let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let old = backup(&repo, &a);
    let before_b = repo.log.ids().unwrap();
    backup(&repo, &b);
    let of_b: Vec<_> = repo
        .log
        .ids()
        .unwrap()
        .into_iter()
        .filter(|id| !before_b.contains(id))
        .collect();
    // Half of a's files change: the old snapshot's containers turn half
    // dead once it is forgotten, and the collection cleans them.
    write_tree(&a, 5, 40, 20);
    let newest = backup(&repo, &a);
    {
        let lock = repo.lock_writer(false).unwrap();
        cairn_engine::forget::remove(&repo, &lock, &[old]).unwrap();
        let mut lost = Vec::new();
        for id in &of_b {
            let meta = repo.log.read_meta(*id).unwrap();
            lost.extend(meta.descriptors.iter().map(|d| d.fp));
        }
        lost.sort();
        lost.dedup();
        let mut opened = repo.open_index(&lock, &Default::default()).unwrap();
        opened
            .kind
            .commit(
                &**repo.backend(),
                cairn_engine::index::disk_index::IndexUpdate::new(Vec::new(), lost),
                repo.log.next_id(),
                repo.config.fp_width(),
                repo.config.index.page_size as usize,
            )
            .unwrap();
    }
    let report = run_gc(&repo, Collector::PgcPlus, 1 << 30);
    assert!(report.unindexed_chunks > 0, "{report:#?}");
    assert!(report.containers_deleted > 0, "{report:#?}");
    assert_restores_as(&repo, &newest, "a", &a);
}

/// Re-layout (issue 34): after backups that each change a few files, the
/// newest snapshot is spread over many containers. A collection with
/// nothing to reclaim but re-layout on cleans the containers it uses
/// sparsely and writes their chunks in its order: its restore reads fewer
/// containers, every snapshot still restores, and the repository does not
/// grow. Focused cleaning skips it and says so; in tight memory the
/// heads' order is cut short, and nothing is lost either.
#[test]
fn relayout_makes_the_newest_snapshot_read_fewer_containers() {
    use cairn_engine::read::{CacheOptions, PolicyKind};
    use cairn_engine::restore_estimate::estimate;
    let cache = CacheOptions {
        policy: PolicyKind::Faa,
        bytes: 4 * 64 * 1024,
    };
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        write_tree(&data, 1, 24, 24);
        let backend: Arc<dyn Backend> = Arc::new(MemBackend::new());
        let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
        let mut model = Vec::new();
        for g in 0..10u64 {
            write_tree(&data, 70 + g, 24, 3);
            let id = backup(&repo, &data);
            let copy = dir.path().join(format!("v{g}"));
            copy_dir(&data, &copy);
            model.push((id, copy));
        }
        let newest = catalog::resolve(&**repo.backend(), &model.last().unwrap().0).unwrap();
        let before = estimate(&repo, &newest.record, cache).unwrap();
        let bytes_before = container_bytes(&*backend);

        let opts = GcOptions {
            collector,
            seed: Some(7),
            relayout: Some(EVERY_SPARSE),
            ..Default::default()
        };
        let report = common::gc(&repo, &opts, &NoProgress).unwrap();
        let rl = report.relayout.clone().unwrap();
        assert!(rl.skipped.is_none(), "{rl:?}");
        assert!(rl.chosen_containers > 0, "{collector:?}: {rl:?}");
        assert!(rl.ordered_chunks > 0, "{collector:?}: {rl:?}");
        let after = estimate(&repo, &newest.record, cache).unwrap();
        assert_eq!(after.bytes, before.bytes);
        assert!(
            (after.container_reads as f64) <= before.container_reads as f64 * 0.9,
            "{collector:?}: {before:?} -> {after:?}; {rl:?}"
        );
        assert!(
            container_bytes(&*backend) <= bytes_before,
            "re-layout moves chunks, it never duplicates them"
        );
        assert_model(&repo, &model);
        let tight = GcOptions {
            collector,
            memory_bytes: 2048,
            seed: Some(7),
            relayout: Some(EVERY_SPARSE),
            ..Default::default()
        };
        let r = common::gc(&repo, &tight, &NoProgress).unwrap();
        if r.mark_passes == 2 {
            let skipped = r.relayout.as_ref().and_then(|x| x.skipped.clone());
            assert!(
                skipped.is_some(),
                "{collector:?}: focused cleaning skips re-layout"
            );
        } else {
            // One pass in 2 KiB: the heads' order holds 32 chunks.
            let rl = r.relayout.clone().unwrap();
            assert!(rl.order_truncated && rl.head_chunks <= 32, "{rl:?}");
        }
        assert_model(&repo, &model);
    }
}
