//! Backups running together into one local repository (docs/concurrency.md):
//! once the repository has an index file, backups share the writer lock,
//! so several hold it at once and commit side by side. Each takes its own
//! container ids and adds its own index delta; every snapshot restores,
//! `check --read-data` is clean, the deltas are merged once they pile up,
//! beside other writers, and a collection afterwards loses nothing.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use cairn_engine::{BackupOptions, Repository, Source};
use common::*;

/// A tree of `files` files of `size` random bytes, plus one file of
/// content `common` names (trees given the same one share it: content two
/// writers may store at the same time).
fn tree_sharing(dir: &Path, seed: u64, files: usize, size: usize, common: u64) -> PathBuf {
    let t = dir.join(format!("tree{seed}"));
    std::fs::create_dir_all(&t).unwrap();
    let mut rng = Rng(seed);
    for i in 0..files {
        let bytes: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
        std::fs::write(t.join(format!("f{i}")), bytes).unwrap();
    }
    let mut shared = Rng(common);
    let common: Vec<u8> = (0..150_000).map(|_| shared.next() as u8).collect();
    std::fs::write(t.join("common"), common).unwrap();
    t
}

/// A tree whose shared file no other tree holds.
fn tree(dir: &Path, seed: u64, files: usize, size: usize) -> PathBuf {
    tree_sharing(dir, seed, files, size, seed + 1000)
}

fn backup_shared(repo: &Repository, lock: &cairn_engine::WriteLock, path: &Path) -> String {
    backup_outcome(repo, lock, path).snapshot_id
}

/// The snapshot id, and how many of its new chunks another backup stored
/// at the same time.
fn backup_counted(repo: &Repository, lock: &cairn_engine::WriteLock, path: &Path) -> (String, u64) {
    let o = backup_outcome(repo, lock, path);
    (o.snapshot_id, o.concurrent_duplicates)
}

fn backup_outcome(
    repo: &Repository,
    lock: &cairn_engine::WriteLock,
    path: &Path,
) -> cairn_engine::backup::BackupOutcome {
    cairn_engine::backup(
        repo,
        lock,
        BackupOptions {
            sources: vec![Source::Path(path.to_path_buf())],
            host: Some("test".into()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// One collection with the default options, which must succeed.
fn collect_with_defaults(repo: &Repository) {
    gc(
        repo,
        &cairn_engine::gc::GcOptions::default(),
        &cairn_engine::gc::NoProgress,
    )
    .unwrap();
}

fn index_deltas(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains('.') && !n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

/// A repository at `dir` made with `cfg`, and its first backup (of a new
/// tree under `root`): that one runs alone, since it writes the index's
/// first file. The tree and the snapshot.
fn first_backup_alone(root: &Path, dir: &Path, cfg: cairn_engine::RepoConfig) -> (PathBuf, String) {
    let first = Repository::init_local(dir, cfg).unwrap();
    let lock = first.lock_backup(false).unwrap();
    assert!(!lock.is_shared());
    let base = tree(root, 1, 2, 60_000);
    let base_id = backup_shared(&first, &lock, &base);
    drop(lock);
    (base, base_id)
}

/// Backs up each of `trees` from a repository handle of its own (as
/// separate processes are), every one holding the writer lock, shared,
/// before any backs up. Each snapshot, and the chunks another backup
/// stored at the same time (`backup_counted`).
fn back_up_together(dir: &Path, trees: &[PathBuf]) -> Vec<(String, u64)> {
    let all_hold = Arc::new(Barrier::new(trees.len()));
    std::thread::scope(|s| {
        let handles: Vec<_> = trees
            .iter()
            .map(|t| {
                let all_hold = all_hold.clone();
                s.spawn(move || {
                    let repo = Repository::open_local(dir).unwrap();
                    let lock = repo.lock_backup(false).unwrap();
                    assert!(lock.is_shared(), "backups share the writer lock");
                    all_hold.wait();
                    backup_counted(&repo, &lock, t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn backups_hold_the_writer_lock_together_and_every_snapshot_restores() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let (base, base_id) = first_backup_alone(tmp.path(), &dir, tiny_config());

    // Three writers, all holding the writer lock before any backs up.
    const WRITERS: u64 = 3;
    let trees: Vec<PathBuf> = (0..WRITERS)
        .map(|w| tree_sharing(tmp.path(), 10 + w, 3, 80_000, 999))
        .collect();
    let outcomes = back_up_together(&dir, &trees);
    // When writers open their index before another commits, each stores
    // the file all trees share, and the later committers count it (004:
    // reconciled by the next gc). Whether they overlap so depends on the
    // scheduler here; `gc_beside_writers.rs` makes them overlap.
    let ids: Vec<String> = outcomes.into_iter().map(|o| o.0).collect();
    // One delta per writer, none overwritten.
    assert_eq!(
        index_deltas(&dir).len(),
        WRITERS as usize,
        "{:?}",
        index_deltas(&dir)
    );

    let repo = Repository::open_local(&dir).unwrap();
    assert_check_clean(&repo);
    assert_restores(&repo, &base_id, &base);
    for (id, t) in ids.iter().zip(&trees) {
        assert_restores(&repo, id, t);
    }

    // Exclusive writers still exclude backups.
    let alone = repo.lock_writer(false).unwrap();
    let other = Repository::open_local(&dir).unwrap();
    assert!(matches!(
        other.lock_backup(false),
        Err(cairn_core::Error::Locked(_))
    ));
    drop(alone);

    // Deltas pile up while backups share the lock; once 16 are listed the
    // next backup's compaction merges them into a new generation.
    assert!(!cairn_engine::compact::compact(&repo).unwrap());
    let more = tree(tmp.path(), 50, 1, 20_000);
    let mut later = Vec::new();
    for i in 0..cairn_engine::index::disk_index::MAX_DELTAS {
        std::fs::write(more.join("changing"), format!("version {i}")).unwrap();
        let lock = repo.lock_backup(false).unwrap();
        let o = backup_outcome(&repo, &lock, &more);
        // What the commit listed, its own delta counted, is what is there:
        // the compaction after a backup need not list again.
        assert_eq!(o.deltas_after_commit, index_deltas(&dir).len());
        later.push(o.snapshot_id);
    }
    let deltas = index_deltas(&dir).len();
    assert!(deltas >= cairn_engine::index::disk_index::MAX_DELTAS as usize);
    // Told of fewer deltas than the threshold, it leaves them; told of
    // the real count, it merges.
    assert!(!cairn_engine::compact::compact_after_backup(&repo, 1).unwrap());
    assert_eq!(index_deltas(&dir).len(), deltas);
    assert!(cairn_engine::compact::compact_after_backup(&repo, deltas).unwrap());
    assert!(index_deltas(&dir).is_empty(), "{:?}", index_deltas(&dir));
    assert_check_clean(&repo);
    assert_restores(&repo, later.last().unwrap(), &more);

    // A collection after it all loses nothing.
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, &later[..later.len() - 1]).unwrap();
    drop(lock);
    collect_with_defaults(&repo);
    assert_check_clean(&repo);
    for (id, t) in ids.iter().zip(&trees) {
        assert_restores(&repo, id, t);
    }
}

/// A backup sharing the writer lock that finds the index damaged does not
/// rebuild it beside others (a rebuild deletes what they add): it waits to
/// hold the lock alone, rebuilds, and commits.
#[test]
fn a_shared_backup_meeting_a_damaged_index_rebuilds_it_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let repo = Repository::init_local(&dir, tiny_config()).unwrap();
    let base = tree(tmp.path(), 1, 2, 60_000);
    let base_id = backup(&repo, &base).unwrap();
    let file = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().contains('.'))
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();

    let other = Repository::open_local(&dir).unwrap();
    let lock = other.lock_backup(false).unwrap();
    assert!(lock.is_shared());
    let t = tree(tmp.path(), 2, 2, 60_000);
    let id = backup_shared(&other, &lock, &t);
    assert!(
        !lock.is_shared(),
        "the rebuild ran under the lock held alone"
    );
    drop(lock);
    // Written above the damaged generation, never under its name: a
    // local cache may still hold that file and its deltas.
    let damaged: u64 =
        u64::from_str_radix(&file.file_name().unwrap().to_string_lossy(), 16).unwrap();
    let newest = std::fs::read_dir(dir.join("index"))
        .unwrap()
        .filter_map(|e| u64::from_str_radix(&e.unwrap().file_name().to_string_lossy(), 16).ok())
        .max()
        .unwrap();
    assert!(
        newest > damaged,
        "rebuilt as generation {newest}, damaged {damaged}"
    );
    assert_check_clean(&other);
    assert_restores(&other, &base_id, &base);
    assert_restores(&other, &id, &t);
}

/// A writer that dies after sealing a container (in its own block of ids)
/// leaves an orphan below the coverage
/// mark of a writer that committed beside it. No delta names the orphan,
/// so the index does not count it as covered: `check` is clean, the next
/// writer alone replays it, and collections (every collector, twice) keep
/// every snapshot whole.
#[test]
fn an_orphan_below_another_writers_mark_is_replayed_not_assumed_indexed() {
    for collector in [
        cairn_engine::gc::Collector::PgcPlus,
        cairn_engine::gc::Collector::Pgc,
        cairn_engine::gc::Collector::Lgc,
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        let repo = Repository::init_local(&dir, tiny_config()).unwrap();
        let base = tree(tmp.path(), 1, 2, 60_000);
        let base_id = backup(&repo, &base).unwrap();

        // Writer A takes its block first; writer B, beside it, commits
        // with a mark above A's ids before A writes anything; then A seals
        // one container (a copy of a chunk the snapshot uses) and dies
        // without a delta.
        let a = Repository::open_local(&dir).unwrap();
        let lock_a = a.lock_backup(false).unwrap();
        let orphan = a.log.allocate().unwrap();
        let b = Repository::open_local(&dir).unwrap();
        let lock_b = b.lock_backup(false).unwrap();
        let t = tree(tmp.path(), 2, 2, 60_000);
        let id = backup_shared(&b, &lock_b, &t);
        // Its own chunk (no other container holds it): were the orphan
        // counted as covered, `check` would find it missing from the index.
        let own: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 1) as u8).collect();
        let fp = a.config.fingerprinter(None).of(&own);
        let mut w = cairn_format::container::ContainerWriter::new(
            orphan,
            a.config.fp_width(),
            a.config.container_size as usize,
        );
        w.push(
            fp,
            cairn_core::ChunkKind::Data,
            0,
            cairn_core::CompressionCodec::None,
            own.len() as u32,
            &own,
        );
        a.log.append(w).unwrap();
        drop((lock_a, lock_b));
        let disk = cairn_engine::index::disk_index::DiskIndex::open(
            repo.backend().clone(),
            repo.counters.clone(),
        )
        .unwrap();
        assert!(disk.covered_below() > orphan);
        assert!(!disk.coverage().covers(orphan), "{collector:?}");

        let repo = Repository::open_local(&dir).unwrap();
        assert_check_clean(&repo);
        for _ in 0..2 {
            let opts = cairn_engine::gc::GcOptions {
                collector,
                ..Default::default()
            };
            gc(&repo, &opts, &cairn_engine::gc::NoProgress).unwrap();
            assert_check_clean(&repo);
            assert_restores(&repo, &base_id, &base);
            assert_restores(&repo, &id, &t);
        }
    }
}

/// `forget` shares the writer lock with backups: it removes a record while
/// a backup holds the lock and runs, never stops it, and is kept out only
/// by what holds the lock alone. The backup (started after the removal, so
/// without a parent) commits, and after a collection it restores.
#[test]
fn forget_runs_beside_a_backup_and_a_collection_keeps_what_it_uses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let repo = Repository::init_local(&dir, tiny_config()).unwrap();
    let t = tree(tmp.path(), 1, 3, 60_000);
    let first = backup(&repo, &t).unwrap();

    let writer = Repository::open_local(&dir).unwrap();
    let lock = writer.lock_backup(false).unwrap();
    assert!(lock.is_shared());
    let forgetter = Repository::open_local(&dir).unwrap();
    let held = forgetter
        .lock_forget(false)
        .expect("forget beside a backup");
    cairn_engine::forget::remove(&forgetter, &held, std::slice::from_ref(&first)).unwrap();
    // One file changes: its old content is garbage once the record is gone
    // (the backup, started after the removal, finds no parent).
    let mut rng = Rng(77);
    let changed: Vec<u8> = (0..60_000).map(|_| rng.next() as u8).collect();
    std::fs::write(t.join("f0"), changed).unwrap();
    let second = backup_shared(&writer, &lock, &t);
    drop(held);
    assert!(
        forgetter.lock_writer(false).is_err(),
        "a backup running keeps a writer alone out"
    );
    drop(lock);
    assert!(
        forgetter.lock_forget(false).is_ok(),
        "nothing holds the lock"
    );

    let ids: Vec<String> = cairn_engine::catalog::list(&**repo.backend())
        .unwrap()
        .0
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, std::slice::from_ref(&second));
    let report = gc(
        &repo,
        &cairn_engine::gc::GcOptions::default(),
        &cairn_engine::gc::NoProgress,
    )
    .unwrap();
    assert!(report.containers_deleted > 0, "{report:?}");
    assert_check_clean(&repo);
    assert_restores(&repo, &second, &t);
}

/// A backup that begins after a collection condemned a container (its
/// pending list names it) never deduplicates against it, even while the
/// container is still there: the collection deletes it without waiting
/// for backups that began after the list (docs/concurrency.md). Here the
/// content of a forgotten snapshot comes back, the collection's deletion
/// is played by hand, and the new snapshot still restores.
#[test]
fn a_backup_never_deduplicates_against_a_condemned_container() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let repo = Repository::init_local(&dir, tiny_config()).unwrap();
    let t = tree(tmp.path(), 1, 3, 60_000);
    let old = backup(&repo, &t).unwrap();
    let before: Vec<cairn_core::ContainerId> = repo.log.ids().unwrap();
    let lock = repo.lock_forget(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, std::slice::from_ref(&old)).unwrap();
    drop(lock);
    // What a collection's Commit leaves: the pending list (entries stay).
    cairn_engine::gc::pending::write(&**repo.backend(), &before).unwrap();

    let again = Repository::open_local(&dir).unwrap();
    let id = backup(&again, &t).unwrap();
    for c in &before {
        again.log.delete(*c).unwrap();
    }
    cairn_engine::gc::pending::clear(&**again.backend()).unwrap();
    let fresh = Repository::open_local(&dir).unwrap();
    assert_restores(&fresh, &id, &t);
}

/// Compaction beside writers (docs/concurrency.md): backups commit while
/// others merge the deltas into new generations (every two deltas), so
/// deltas land before, during and after a merge's listing and some are
/// added to a generation a merge already replaced. No entry is lost: the
/// check is clean, every snapshot restores, and a collection afterwards
/// keeps everything they use.
#[test]
fn compactions_beside_backups_lose_no_index_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    first_backup_alone(tmp.path(), &dir, tiny_config());

    const WRITERS: u64 = 3;
    const ROUNDS: u64 = 6;
    let done: Vec<Vec<(String, PathBuf, bool)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (dir, root) = (&dir, tmp.path());
                s.spawn(move || {
                    let repo = Repository::open_local(dir).unwrap();
                    (0..ROUNDS)
                        .map(|r| {
                            let t = tree_sharing(root, 100 + 10 * w + r, 2, 30_000, 7 + r);
                            let lock = repo.lock_backup(true).unwrap();
                            assert!(lock.is_shared());
                            let id = backup_shared(&repo, &lock, &t);
                            drop(lock);
                            let merged = cairn_engine::compact::compact_at(&repo, 2).unwrap();
                            (id, t, merged)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let merges = done.iter().flatten().filter(|d| d.2).count();
    assert!(merges >= 2, "only {merges} merges ran");
    eprintln!(
        "{merges} merges; deltas listed after: {:?}",
        index_deltas(&dir)
    );
    let repo = Repository::open_local(&dir).unwrap();
    assert_check_clean(&repo);
    for (id, t, _) in done.iter().flatten() {
        assert_restores(&repo, id, t);
    }
    // Whatever a late writer left in a replaced generation is folded by
    // the next merge.
    if !index_deltas(&dir).is_empty() {
        assert!(cairn_engine::compact::compact_at(&repo, 1).unwrap());
    }
    assert!(index_deltas(&dir).is_empty(), "{:?}", index_deltas(&dir));
    assert_check_clean(&repo);
    collect_with_defaults(&repo);
    assert_check_clean(&repo);
    for (id, t, _) in done.iter().flatten() {
        assert_restores(&repo, id, t);
    }
}

/// A frugal-index repository (004's chunk log): backups share the writer
/// lock, each appending to its own partition's log (`frugal/p<k>-...`), and
/// a later backup deduplicates against every partition. A collection
/// (alone, for this index kind) reconciles the copies two writers stored at
/// once and removes from every log; check and restores stay clean
/// throughout, and a reopened index holds every live chunk.
#[test]
fn frugal_index_writers_each_append_their_own_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let mut cfg = tiny_config();
    cfg.index.kind = cairn_engine::config::IndexKind::Frugal;
    let (base, base_id) = first_backup_alone(tmp.path(), &dir, cfg);

    const WRITERS: u64 = 3;
    let trees: Vec<PathBuf> = (0..WRITERS)
        .map(|w| tree_sharing(tmp.path(), 20 + w, 3, 80_000, 999))
        .collect();
    let ids: Vec<String> = back_up_together(&dir, &trees)
        .into_iter()
        .map(|o| o.0)
        .collect();
    let segments: Vec<String> = std::fs::read_dir(dir.join("frugal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        segments.iter().any(|s| s.starts_with('p')),
        "writers beside each other append to partitions of their own: {segments:?}"
    );
    let repo = Repository::open_local(&dir).unwrap();
    assert_check_clean(&repo);
    assert_restores(&repo, &base_id, &base);
    for (id, t) in ids.iter().zip(&trees) {
        assert_restores(&repo, id, t);
    }

    // A later backup of every tree finds all their chunks, whichever log
    // holds them: nothing new is written.
    for t in &trees {
        assert_nothing_new(&repo, t, "again");
    }

    // A collection alone reconciles and removes across every log.
    let lock = repo.lock_writer(false).unwrap();
    cairn_engine::forget::remove(&repo, &lock, &ids[..1]).unwrap();
    drop(lock);
    collect_with_defaults(&repo);
    assert_check_clean(&repo);
    assert_restores(&repo, &base_id, &base);
    for (id, t) in ids.iter().zip(&trees).skip(1) {
        assert_restores(&repo, id, t);
    }
    // It also wrote the logs afresh: one log again, whose records that no
    // longer count (its later commits' removals) stay under a quarter of
    // the paged index's entries (docs/frugal-index.md, "Compaction").
    let segments: Vec<String> = std::fs::read_dir(dir.join("frugal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !segments.is_empty() && segments.iter().all(|s| !s.starts_with('p')),
        "a collection alone folds the partitions into one log: {segments:?}"
    );
    let logs = cairn_engine::index::frugal::log::open_partitions(repo.backend(), 1 << 16).unwrap();
    let records: u64 = logs.values().map(|l| u64::from(l.len())).sum();
    let entries = cairn_engine::index::disk_index::DiskIndex::open(
        repo.backend().clone(),
        Default::default(),
    )
    .unwrap()
    .entry_count();
    assert!(
        records >= entries && records - entries < entries / 4,
        "{records} records for {entries} entries"
    );
    for t in trees.iter().skip(1) {
        assert_nothing_new(&repo, t, "after");
    }
}

/// A backup of `tree` (as `host`) that finds every chunk stored already.
fn assert_nothing_new(repo: &Repository, tree: &Path, host: &str) {
    let lock = repo.lock_backup(false).unwrap();
    let o = cairn_engine::backup(
        repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(tree.to_path_buf())],
            host: Some(host.into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(o.counters.chunks_written, 0, "{tree:?} stored chunks again");
}
