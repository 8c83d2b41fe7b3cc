//! A collection beside a backup that is still running when the collection
//! condemns what the backup deduplicated against (docs/concurrency.md, "A
//! collection"): the collection waits for the backup's session, then
//! rescues what its record reaches; a backup whose session a collection
//! reaped (its lock lapsed while it was paused) commits nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cairn_backend::MemBackend;
use cairn_core::{Backend, LockGuard, LockMode, Result};
use cairn_engine::gc::{Collector, GcOptions, GcProgress, NoProgress};
use cairn_engine::{catalog, Repository};

mod common;
use common::{assert_check_clean, assert_restores_as, copy_dir, tiny_config, Rng};

/// A backend that stops a writer at its staging write until the test
/// opens the gate; with `lapsed`, the writer's session lock is released as
/// soon as it is taken (a lease that lapsed: the writer looks gone).
#[derive(Clone)]
struct Gate {
    inner: Arc<dyn Backend>,
    /// Writes of keys starting with this wait for the gate.
    at: &'static str,
    open: Arc<(Mutex<bool>, Condvar)>,
    reached: Arc<Mutex<Option<mpsc::Sender<()>>>>,
    lapsed: Arc<AtomicBool>,
}

struct Nothing;
impl LockGuard for Nothing {}

impl Gate {
    fn new(inner: Arc<dyn Backend>) -> (Gate, mpsc::Receiver<()>) {
        Gate::at(inner, "staged/")
    }

    fn at(inner: Arc<dyn Backend>, at: &'static str) -> (Gate, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel();
        let gate = Gate {
            inner,
            at,
            open: Arc::new((Mutex::new(false), Condvar::new())),
            reached: Arc::new(Mutex::new(Some(tx))),
            lapsed: Arc::new(AtomicBool::new(false)),
        };
        (gate, rx)
    }

    fn release(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

impl Backend for Gate {
    cairn_core::delegate_backend!(inner: read, read_at, size);
    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        if key.starts_with(self.at) {
            if let Some(tx) = self.reached.lock().unwrap().take() {
                tx.send(()).unwrap();
            }
            let mut open = self.open.0.lock().unwrap();
            while !*open {
                open = self.open.1.wait(open).unwrap();
            }
        }
        self.inner.write_atomic(key, data)
    }
    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.inner.create_new(key, data)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        let guard = self.inner.lock(name, mode, wait)?;
        if name.starts_with("session-") && self.lapsed.load(Ordering::Relaxed) {
            drop(guard);
            return Ok(Box::new(Nothing));
        }
        Ok(guard)
    }
    cairn_core::delegate_backend!(inner: exists, list, describe);
}

/// Opens the gate when dropped: a failed assertion must not leave the
/// writer thread waiting (the scope would wait for it forever).
struct ReleaseOnDrop<'a>(&'a Gate);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Tells the test when the collection starts to wait for backups.
struct Waits(Mutex<mpsc::Sender<&'static str>>);

impl GcProgress for Waits {
    fn phase(&self, name: &str, _total: u64) {
        if name == "wait for backups" {
            let _ = self.0.lock().unwrap().send("waiting");
        }
    }
}

fn write_files(root: &std::path::Path, seed: u64, files: usize) {
    std::fs::create_dir_all(root).unwrap();
    let mut rng = Rng(seed | 1);
    for i in 0..files {
        let data: Vec<u8> = (0..40_000).map(|_| rng.next() as u8).collect();
        std::fs::write(root.join(format!("f{i}")), data).unwrap();
    }
}

/// A repository with one kept snapshot and one forgotten one, whose tree
/// the returned path holds again (every chunk of it dead to a collection).
fn setup(repo: &Repository, dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let old = dir.join("old");
    write_files(&old, 1, 10);
    let forgotten = common::backup(repo, &old).unwrap();
    let kept_tree = dir.join("kept");
    write_files(&kept_tree, 2, 4);
    let kept = common::backup(repo, &kept_tree).unwrap();
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(repo, &lock, &[forgotten]).unwrap();
    drop(lock);
    let again = dir.join("again");
    copy_dir(&old, &again);
    (kept, again)
}

/// Two backups store one new file at the same time (004's partitioned
/// dedup): the one that opened its index first and commits last counts
/// the chunks the other stored meanwhile; both snapshots restore.
#[test]
fn a_backup_counts_the_chunks_another_stored_meanwhile() {
    let Fresh { dir, mem, repo, .. } = fresh();
    let fresh = dir.path().join("fresh");
    write_files(&fresh, 9, 3);
    // The first writer stops at its first container, its index open.
    let (gate, reached) = Gate::at(Arc::new(mem.clone()), "containers/");
    std::thread::scope(|sc| {
        let _release = ReleaseOnDrop(&gate);
        let first = sc.spawn(|| {
            let other = Repository::open(Arc::new(gate.clone())).unwrap();
            let lock = other.lock_backup(false).unwrap();
            cairn_engine::backup(
                &other,
                &lock,
                cairn_engine::BackupOptions {
                    sources: vec![cairn_engine::Source::Path(fresh.clone())],
                    host: Some("first".into()),
                    ..Default::default()
                },
            )
        });
        reached.recv_timeout(Duration::from_secs(60)).unwrap();
        let second = backup_beside(&repo, &fresh).unwrap();
        gate.release();
        let first = first.join().unwrap().unwrap();
        assert!(
            first.concurrent_duplicates > 0,
            "the first writer stored what the second stored meanwhile"
        );
        assert_restores_as(&repo, &first.snapshot_id, "fresh", &fresh);
        assert_restores_as(&repo, &second, "fresh", &fresh);
    });
    assert_check_clean(&repo);
}

/// Where two writers' commits meet (`Meeting`): how many have reached
/// their first container write, whether the lister has listed `index/`
/// for its commit, and whether the other has created its delta.
#[derive(Default)]
struct MeetState {
    writing: usize,
    listed: bool,
    created: bool,
}

/// A backend that makes two backups' commits meet: neither writes a
/// container before both have opened their index (so each stores what
/// they share), the lister's commit lists `index/` before the other's
/// delta exists, and the lister creates its own delta only after it.
#[derive(Clone)]
struct Meeting {
    inner: Arc<dyn Backend>,
    lister: bool,
    wrote: Arc<AtomicBool>,
    state: Arc<(Mutex<MeetState>, Condvar)>,
}

impl Meeting {
    fn wait_until(&self, what: &str, done: impl Fn(&MeetState) -> bool) {
        let (lock, changed) = &*self.state;
        let mut st = lock.lock().unwrap();
        while !done(&st) {
            let (next, timeout) = changed.wait_timeout(st, Duration::from_secs(60)).unwrap();
            assert!(!timeout.timed_out(), "waited a minute for {what}");
            st = next;
        }
    }

    fn note(&self, change: impl Fn(&mut MeetState)) {
        change(&mut self.state.0.lock().unwrap());
        self.state.1.notify_all();
    }
}

impl Backend for Meeting {
    cairn_core::delegate_backend!(inner: read, read_at, size, delete, exists, describe);
    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        if key.starts_with("containers/") && !self.wrote.swap(true, Ordering::SeqCst) {
            self.note(|st| st.writing += 1);
            self.wait_until("both writers to open", |st| st.writing == 2);
        }
        self.inner.write_atomic(key, data)
    }
    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        let delta = key.starts_with("index/") && key.contains('.');
        if delta && !self.lister {
            self.wait_until("the lister's commit listing", |st| st.listed);
        }
        let created = self.inner.create_new(key, data);
        if delta && !self.lister {
            self.note(|st| st.created = true);
        }
        created
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let listing = self.inner.list(prefix);
        let commit = prefix == "index/" && self.wrote.load(Ordering::SeqCst);
        if commit && self.lister && !self.state.0.lock().unwrap().listed {
            self.note(|st| st.listed = true);
            self.wait_until("the other writer's delta", |st| st.created);
        }
        listing
    }
    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        self.inner.lock(name, mode, wait)
    }
}

/// Two backups that store the same new file commit at the same moment:
/// one lists `index/` for its commit before the other's delta exists and
/// creates its own after it. Its listing misses the other's delta, but
/// its delta's number does not: it counts the chunks both stored, and
/// the other, whose delta came first, counts none (so the two counts add
/// up to the copies reconciliation removes).
#[test]
fn commits_at_the_same_moment_count_what_both_stored_once() {
    let Fresh { dir, mem, repo, .. } = fresh();
    let fresh = dir.path().join("fresh");
    write_files(&fresh, 11, 3);
    let state = Arc::new((Mutex::new(MeetState::default()), Condvar::new()));
    let writer = |lister: bool| {
        let meeting = Meeting {
            inner: Arc::new(mem.clone()),
            lister,
            wrote: Arc::new(AtomicBool::new(false)),
            state: state.clone(),
        };
        let fresh = fresh.clone();
        move || {
            let repo = Repository::open(Arc::new(meeting)).unwrap();
            let lock = repo.lock_backup(false).unwrap();
            assert!(lock.is_shared());
            cairn_engine::backup(
                &repo,
                &lock,
                cairn_engine::BackupOptions {
                    sources: vec![cairn_engine::Source::Path(fresh)],
                    host: Some(if lister { "lister" } else { "other" }.into()),
                    ..Default::default()
                },
            )
            .unwrap()
        }
    };
    let (listed, other) = std::thread::scope(|sc| {
        let listed = sc.spawn(writer(true));
        let other = sc.spawn(writer(false));
        (listed.join().unwrap(), other.join().unwrap())
    });
    assert_eq!(other.concurrent_duplicates, 0, "its delta came first");
    assert!(listed.record.stats.new_data_chunks > 0);
    assert_eq!(
        listed.concurrent_duplicates, listed.record.stats.new_chunks,
        "every chunk the lister stored (data, listing, recipe), the other stored too"
    );
    assert_restores_as(&repo, &listed.snapshot_id, "fresh", &fresh);
    assert_restores_as(&repo, &other.snapshot_id, "fresh", &fresh);
    assert_check_clean(&repo);
}

/// A backup as `cairn backup` runs it: the writer lock shared with other
/// backups and with collections.
fn backup_beside(repo: &Repository, path: &std::path::Path) -> Result<String> {
    let lock = repo.lock_backup(false)?;
    assert!(lock.is_shared());
    let out = cairn_engine::backup(
        repo,
        &lock,
        cairn_engine::BackupOptions {
            sources: vec![cairn_engine::Source::Path(path.to_path_buf())],
            host: Some("test".into()),
            ..Default::default()
        },
    )?;
    Ok(out.snapshot_id)
}

/// A repository in memory as [`setup`] leaves it.
struct Fresh {
    dir: tempfile::TempDir,
    mem: MemBackend,
    backend: Arc<dyn Backend>,
    repo: Repository,
    kept: String,
    again: std::path::PathBuf,
}

fn fresh() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let mem = MemBackend::new();
    let backend: Arc<dyn Backend> = Arc::new(mem.clone());
    let repo = Repository::init(backend.clone(), tiny_config()).unwrap();
    let (kept, again) = setup(&repo, dir.path());
    Fresh {
        dir,
        mem,
        backend,
        repo,
        kept,
        again,
    }
}

/// A collection on a thread of scope `sc`, telling `waits` when it waits.
fn spawn_collection<'s>(
    sc: &'s std::thread::Scope<'s, '_>,
    repo: &'s Repository,
    collector: Collector,
    waits: &'s Waits,
) -> std::thread::ScopedJoinHandle<'s, Result<cairn_engine::gc::GcReport>> {
    sc.spawn(move || {
        let lock = repo.lock_gc(false)?;
        cairn_engine::gc::collect(repo, &lock, &options(collector), waits)
    })
}

/// [`backup_beside`] of `tree` by another process, through `gate`.
fn gated_backup(gate: &Gate, tree: &std::path::Path) -> Result<String> {
    let other = Repository::open(Arc::new(gate.clone())).unwrap();
    backup_beside(&other, tree)
}

fn options(collector: Collector) -> GcOptions {
    GcOptions {
        collector,
        seed: Some(5),
        ..Default::default()
    }
}

/// The kept snapshot and the backup `id` of `again` (as [`setup`] leaves
/// them) restore byte for byte, and `check --read-data` is clean.
fn assert_both_restore(
    repo: &Repository,
    dir: &std::path::Path,
    kept: &str,
    id: &str,
    again: &std::path::Path,
) {
    for (id, tree) in [(kept, &dir.join("kept")), (id, &again.to_path_buf())] {
        let top = tree.file_name().unwrap().to_str().unwrap();
        assert_restores_as(repo, id, top, tree);
    }
    assert_check_clean(repo);
}

#[test]
fn a_collection_waits_for_a_running_backup_and_rescues_what_it_used() {
    for collector in [Collector::Lgc, Collector::PgcPlus] {
        let Fresh {
            dir,
            mem,
            backend,
            repo,
            kept,
            again,
        } = fresh();
        let before: Vec<String> = backend.list("containers/").unwrap();
        let (gate, reached) = Gate::new(Arc::new(mem.clone()));
        let (tx, waiting) = mpsc::channel();
        let waits = Waits(Mutex::new(tx));
        std::thread::scope(|sc| {
            let _release = ReleaseOnDrop(&gate);
            // The backup deduplicates against the forgotten tree's chunks
            // and stops at its commit, its session running.
            let writer = sc.spawn(|| gated_backup(&gate, &again));
            reached.recv_timeout(Duration::from_secs(60)).unwrap();
            let collection = spawn_collection(sc, &repo, collector, &waits);
            waiting
                .recv_timeout(Duration::from_secs(120))
                .expect("the collection waits for the running backup");
            // Condemned, not deleted: every container is still there.
            let now = backend.list("containers/").unwrap();
            assert!(before.iter().all(|c| now.contains(c)), "{collector:?}");
            gate.release();
            let id = writer.join().unwrap().unwrap();
            let report = collection.join().unwrap().unwrap();
            assert!(
                report.containers_deleted > 0,
                "{collector:?}: nothing collected"
            );
            assert!(
                report.resurrected_chunks > 0,
                "{collector:?}: the chunks the backup used were judged dead, yet none rescued"
            );
            assert_eq!(report.concurrent_snapshots, 1, "{collector:?}");
            assert_both_restore(&repo, dir.path(), &kept, &id, &again);
            // Nothing of the protocol is left behind.
            assert!(backend.list("sessions/").unwrap().is_empty());
            assert!(backend.list("staged/").unwrap().is_empty());
            assert!(!backend.exists("gc-pending").unwrap());
            // The next collection loses nothing.
            common::gc(&repo, &options(collector), &NoProgress).unwrap();
            assert_restores_as(&repo, &id, "again", &again);
            assert_check_clean(&repo);
        });
    }
}

#[test]
fn a_backup_whose_session_was_reaped_commits_nothing() {
    let Fresh {
        dir,
        mem,
        backend,
        repo,
        kept,
        again,
    } = fresh();
    let (gate, reached) = Gate::new(Arc::new(mem.clone()));
    gate.lapsed.store(true, Ordering::Relaxed);
    std::thread::scope(|sc| {
        let _release = ReleaseOnDrop(&gate);
        let writer = sc.spawn(|| gated_backup(&gate, &again));
        reached.recv_timeout(Duration::from_secs(60)).unwrap();
        // The writer looks gone: the collection reaps its session, judges
        // the chunks it used dead and deletes them.
        let report = common::gc(&repo, &options(Collector::PgcPlus), &NoProgress).unwrap();
        assert!(report.containers_deleted > 0);
        gate.release();
        let err = writer.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("not committed"), "{err}");
    });
    let (snaps, bad) = catalog::list(&*backend).unwrap();
    assert!(bad.is_empty());
    assert_eq!(snaps.len(), 1, "only the kept snapshot");
    assert_restores_as(&repo, &kept, "kept", &dir.path().join("kept"));
    assert_check_clean(&repo);
    assert!(backend.list("staged/").unwrap().is_empty());
}

/// A backup commits while another runs (paused at its first container):
/// its file trees lie in containers above the running backup's floor,
/// which the collection does not judge, while the chunks those trees
/// reach (kept from a forgotten snapshot) lie below it. Every collector
/// walks such trees node by node: the collection neither stops on them
/// nor drops what they reach, and every snapshot restores.
#[test]
fn a_collection_walks_file_trees_that_lie_above_its_bound() {
    for collector in [Collector::Lgc, Collector::Pgc, Collector::PgcPlus] {
        let Fresh {
            dir,
            mem,
            repo,
            kept,
            again,
            ..
        } = fresh();
        // `again` holds the forgotten snapshot's files: one of them changes
        // in part, so its new tree reaches old chunks.
        let f0 = again.join("f0");
        let mut bytes = std::fs::read(&f0).unwrap();
        bytes[..1000].fill(7);
        std::fs::write(&f0, bytes).unwrap();
        let other = dir.path().join("other");
        write_files(&other, 5, 2);
        let (gate, reached) = Gate::at(Arc::new(mem.clone()), "containers/");
        let (tx, waiting) = mpsc::channel();
        let waits = Waits(Mutex::new(tx));
        std::thread::scope(|sc| {
            let _release = ReleaseOnDrop(&gate);
            let paused = sc.spawn(|| gated_backup(&gate, &other));
            reached.recv_timeout(Duration::from_secs(60)).unwrap();
            // Another process: its block of ids comes after the paused one's.
            let writer = Repository::open(Arc::new(mem.clone())).unwrap();
            let above = backup_beside(&writer, &again).unwrap();
            let collection = spawn_collection(sc, &repo, collector, &waits);
            // The paused backup goes on once the collection waits for it
            // (or ended without anything to wait for).
            while !collection.is_finished()
                && waiting.recv_timeout(Duration::from_millis(50)).is_err()
            {}
            gate.release();
            let report = collection.join().unwrap();
            let report = report.unwrap_or_else(|e| panic!("{collector:?}: {e}"));
            assert!(report.plan.snapshots >= 2, "{collector:?}: {report:?}");
            let paused = paused.join().unwrap().unwrap();
            assert_restores_as(&repo, &above, "again", &again);
            assert_restores_as(&repo, &paused, "other", &other);
            assert_restores_as(&repo, &kept, "kept", &dir.path().join("kept"));
        });
        assert_check_clean(&repo);
    }
}

/// `--max-seconds` bounds the wait for backups, too: a collection whose
/// time runs out while a backup that began before its condemnation still
/// runs returns, its condemned containers left (pending list and entries
/// kept); the backup commits, and the next collection judges them again
/// and loses nothing.
#[test]
fn max_seconds_ends_the_wait_for_a_running_backup() {
    let Fresh {
        dir,
        mem,
        backend,
        repo,
        kept,
        again,
    } = fresh();
    let before: Vec<String> = backend.list("containers/").unwrap();
    let (gate, reached) = Gate::new(Arc::new(mem.clone()));
    std::thread::scope(|sc| {
        let _release = ReleaseOnDrop(&gate);
        let writer = sc.spawn(|| gated_backup(&gate, &again));
        reached.recv_timeout(Duration::from_secs(60)).unwrap();
        let lock = repo.lock_gc(false).unwrap();
        let opts = GcOptions {
            max_seconds: Some(1.0),
            ..options(Collector::PgcPlus)
        };
        let report = cairn_engine::gc::collect(&repo, &lock, &opts, &NoProgress).unwrap();
        drop(lock);
        assert!(report.stopped_by_time, "{report:#?}");
        assert!(report.condemned_left > 0, "{report:#?}");
        assert_eq!(report.containers_deleted, 0, "{report:#?}");
        let now = backend.list("containers/").unwrap();
        assert!(before.iter().all(|c| now.contains(c)));
        assert!(backend.exists("gc-pending").unwrap());
        gate.release();
        let id = writer.join().unwrap().unwrap();
        let report = common::gc(&repo, &options(Collector::PgcPlus), &NoProgress).unwrap();
        assert!(report.containers_deleted > 0, "{report:#?}");
        assert!(!backend.exists("gc-pending").unwrap());
        assert_both_restore(&repo, dir.path(), &kept, &id, &again);
    });
}
