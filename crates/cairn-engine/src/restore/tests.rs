//! Engine-level restore tests that need the target's test hooks or the
//! counters: a full target file system (simulated with
//! [`Target::with_capacity`]) stops the whole restore with one error, leaves
//! no temporary and keeps the old content of the file being written; plans
//! span files, so small files sharing a container read it once; a damaged
//! chunk fails its file only, in the middle of a batch.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use cairn_backend::MemBackend;
use cairn_core::rng::SplitMix64;

use super::target::{RestoreOptions, Target, TEMP_PREFIX};
use crate::read::{CacheOptions, PolicyKind, Reader};
use crate::{catalog, BackupOptions, Progress, Repository, Source};

fn repo_with(tree: &Path) -> (Repository, String) {
    repo_on(Arc::new(MemBackend::new()), tree)
}

fn repo_on(backend: Arc<MemBackend>, tree: &Path) -> (Repository, String) {
    repo_sized(backend, tree, Repository::default_config().container_size)
}

fn repo_sized(backend: Arc<MemBackend>, tree: &Path, container_size: u32) -> (Repository, String) {
    let mut config = Repository::default_config();
    config.container_size = container_size;
    let repo = Repository::init(backend, config).unwrap();
    let lock = repo.lock_writer(false).unwrap();
    let out = crate::backup(
        &repo,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(tree.to_path_buf())],
            host: Some("test".into()),
            ..Default::default()
        },
    )
    .unwrap();
    drop(lock);
    (repo, out.snapshot_id)
}

fn temporaries(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                out.push(e.path().display().to_string());
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_full_target_stops_the_whole_restore_with_one_error() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir(&tree).unwrap();
    for i in 0..6u8 {
        let data: Vec<u8> = (0..50_000u32)
            .map(|j| (j.wrapping_mul(31) ^ i as u32) as u8)
            .collect();
        fs::write(tree.join(format!("f{i}")), data).unwrap();
    }
    let (repo, id) = repo_with(&tree);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();

    let out = tmp.path().join("out");
    fs::create_dir_all(out.join("tree")).unwrap();
    fs::write(out.join("tree/f2"), b"old f2").unwrap();
    // Room for two files and part of the third.
    let target = Target::with_capacity(RestoreOptions::default(), 120_000);
    let err = Reader::open(&repo, Default::default())
        .unwrap()
        .restore_into(
            &snap.record,
            &out,
            &Default::default(),
            &target,
            &Progress::default(),
            None,
        )
        .unwrap_err();
    let msg = err.to_string();
    let f2 = out.join("tree/f2");
    assert!(
        msg.starts_with(&format!(
            "target file system is full while writing {}",
            f2.display()
        )),
        "{msg}"
    );
    assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
    // The file being written keeps its old content; nothing after it was tried.
    assert_eq!(fs::read(&f2).unwrap(), b"old f2");
    assert_eq!(fs::read(out.join("tree/f1")).unwrap().len(), 50_000);
    for i in 3..6 {
        assert!(!out.join(format!("tree/f{i}")).exists(), "f{i} was written");
    }

    // With room, the same target restores completely.
    let sum = Reader::open(&repo, Default::default())
        .unwrap()
        .restore(&snap.record, &out, None, &Progress::default())
        .unwrap();
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!(sum.files, 6);
    for i in 0..6 {
        let name = format!("f{i}");
        assert_eq!(
            fs::read(out.join("tree").join(&name)).unwrap(),
            fs::read(tree.join(&name)).unwrap()
        );
    }
}

/// Recipe nodes are stored among a file's data chunks; the planner reads
/// them with range reads, so restoring one large file of unique data reads
/// each of its containers exactly once (before, every node's whole container
/// was read to plan and again to restore: about twice the reads).
#[test]
fn planning_reads_recipe_nodes_without_reading_whole_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir(&tree).unwrap();
    let data = random_bytes(&mut SplitMix64::new(1), 24 << 20);
    fs::write(tree.join("big"), &data).unwrap();
    let (repo, id) = repo_with(&tree);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let data_containers = data_containers(&repo).len() as u64;
    assert!(data_containers >= 5, "{data_containers} containers");

    let before = repo.counters.snapshot();
    let out = tmp.path().join("out");
    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    let sum = reader
        .restore(&snap.record, &out, None, &Progress::default())
        .unwrap();
    let c = repo.counters.snapshot().since(&before);
    assert_eq!(fs::read(out.join("tree/big")).unwrap(), data);
    assert_eq!(sum.policy.container_reads, data_containers);
    assert_eq!(c.containers_read, data_containers, "{c:?}");
    assert!(c.chunk_reads > 0, "recipe nodes come by range reads");
}

fn random_bytes(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

fn data_containers(repo: &Repository) -> Vec<cairn_core::ContainerId> {
    repo.log
        .ids()
        .unwrap()
        .into_iter()
        .filter(|&id| {
            let meta = repo.log.read_meta(id).unwrap();
            meta.descriptors
                .iter()
                .any(|d| d.kind == cairn_core::ChunkKind::Data)
        })
        .collect()
}

fn restore_with(
    repo: &Repository,
    snap: &cairn_format::snapshot::SnapshotRecord,
    out: &Path,
    policy: PolicyKind,
) -> super::RestoreSummary {
    let opts = CacheOptions {
        policy,
        ..Default::default()
    };
    Reader::open(repo, opts)
        .unwrap()
        .restore(snap, out, None, &Progress::default())
        .unwrap()
}

/// 300 small files (one chunk each, enough steps for the pipelined
/// extractor) of which the last 50 repeat the first 50; `f200` is one byte
/// longer than the others, so its chunk can be found.
fn small_file_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let tree = root.join("tree");
    fs::create_dir_all(&tree).unwrap();
    let mut rng = SplitMix64::new(2);
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..300 {
        let data = if i >= 250 {
            files[i - 250].1.clone()
        } else {
            random_bytes(&mut rng, if i == 200 { 1_501 } else { 1_500 })
        };
        fs::write(tree.join(format!("f{i:03}")), &data).unwrap();
        files.push((format!("f{i:03}"), data));
    }
    files
}

/// 002's restore is of a whole backup stream: with one plan per file, each
/// of these small files would read the shared container again (250 reads
/// under FAA, which keeps nothing past its window).
#[test]
fn small_files_planned_together_read_their_container_once() {
    let tmp = tempfile::tempdir().unwrap();
    let files = small_file_tree(tmp.path());
    let (repo, id) = repo_with(&tmp.path().join("tree"));
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let containers = data_containers(&repo).len() as u64;
    assert_eq!(containers, 1);
    for policy in PolicyKind::ALL {
        let out = tmp.path().join(format!("out-{policy}"));
        let sum = restore_with(&repo, &snap.record, &out, policy);
        assert!(sum.errors.is_empty(), "{policy}: {:?}", sum.errors);
        assert_eq!(sum.files, 300);
        assert_eq!(sum.policy.container_reads, containers, "{policy}");
        for (name, data) in &files {
            assert_eq!(&fs::read(out.join("tree").join(name)).unwrap(), data);
        }
    }
}

/// A damaged chunk in the middle of a batch fails its file only: the files
/// before it were written, the batch goes on after it, and the policy
/// starts afresh (the chunks it held may not have reached the writer).
#[test]
fn a_damaged_chunk_fails_its_file_only_and_the_batch_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let files = small_file_tree(tmp.path());
    let backend = Arc::new(MemBackend::new());
    // Small containers, so the decider reads (and keeps from) more of them
    // after the damaged chunk while the writer is still behind.
    let (repo, id) = repo_sized(backend.clone(), &tmp.path().join("tree"), 64 << 10);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let containers = data_containers(&repo);
    assert!(containers.len() >= 4, "{} containers", containers.len());
    let (cid, d) = containers
        .iter()
        .find_map(|&cid| {
            let meta = repo.log.read_meta(cid).unwrap();
            let d = meta
                .descriptors
                .into_iter()
                .find(|d| d.kind == cairn_core::ChunkKind::Data && d.raw_len == 1_501)?;
            Some((cid, d))
        })
        .expect("f200's chunk");
    let at = cairn_format::container::CONTAINER_HEADER_LEN + (d.offset + d.stored_len / 2) as usize;
    assert!(backend.tamper(&crate::object_names::container(cid), |b| b[at] ^= 0x40));

    for policy in PolicyKind::ALL {
        let out = tmp.path().join(format!("out-{policy}"));
        let sum = restore_with(&repo, &snap.record, &out, policy);
        assert_eq!(sum.errors.len(), 1, "{policy}: {:?}", sum.errors);
        assert!(sum.errors[0].contains("f200"), "{policy}: {:?}", sum.errors);
        assert_eq!(sum.files, 299, "{policy}");
        assert!(temporaries(&out).is_empty(), "{policy}");
        for (name, data) in &files {
            let p = out.join("tree").join(name);
            if name == "f200" {
                assert!(!p.exists(), "{policy}: the damaged file was placed");
            } else {
                assert_eq!(&fs::read(&p).unwrap(), data, "{policy}: {name}");
            }
        }
    }
}

/// A selected restore, its verification and `check` fill in the progress
/// totals before they start and finish with done equal to the total: the
/// display never shows a bar without a total, nor stops short.
#[test]
fn progress_totals_match_what_restore_verify_and_check_do() {
    use std::sync::atomic::Ordering::Relaxed;
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("tree");
    fs::create_dir_all(src.join("keep")).unwrap();
    fs::create_dir_all(src.join("skip")).unwrap();
    fs::write(src.join("keep/a"), vec![1u8; 70_000]).unwrap();
    fs::write(src.join("keep/b"), b"bb").unwrap();
    fs::write(src.join("skip/c"), vec![3u8; 50_000]).unwrap();
    let (repo, id) = repo_with(&src);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap().record;
    let mut sel = super::RestoreSelection::builder();
    sel.exclude("/tree/skip", false).unwrap();
    let sel = sel.build().unwrap();
    let out = tmp.path().join("out");
    let mut reader = Reader::open(&repo, Default::default()).unwrap();

    let p = Progress::default();
    let sum = reader
        .restore_selected(&snap, &out, &sel, &RestoreOptions::default(), &p)
        .unwrap();
    assert_eq!((sum.files, sum.bytes), (2, 70_002));
    assert_eq!(
        (p.files_total.load(Relaxed), p.bytes_total.load(Relaxed)),
        (2, 70_002)
    );
    assert_eq!(
        (p.files_done.load(Relaxed), p.bytes_done.load(Relaxed)),
        (2, 70_002)
    );
    assert!(p.current.lock().ends_with("keep/a") || p.current.lock().ends_with("keep/b"));
    assert!(!out.join("tree/skip").exists());

    let p = Progress::default();
    let v = reader.verify(&snap, &out, &sel, &p).unwrap();
    assert!(v.mismatches.is_empty(), "{:?}", v.mismatches);
    assert_eq!((v.files, v.bytes), (2, 70_002));
    assert_eq!(p.bytes_done.load(Relaxed), p.bytes_total.load(Relaxed));

    let p = Progress::default();
    crate::check::check_with_progress(&repo, true, &p).unwrap();
    let total = p.files_total.load(Relaxed);
    assert_eq!(total, repo.log.ids().unwrap().len() as u64 + 1);
    assert_eq!(p.files_done.load(Relaxed), total);
    assert!(p.current.lock().starts_with("snapshot "));
}

/// A restore that needs a few chunks of a container reads only their
/// stretch of it (one range read); one that needs most of it reads it
/// whole. Either way the bytes are those backed up.
#[test]
fn a_restore_reads_only_the_stretch_of_a_container_it_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let files = small_file_tree(tmp.path());
    let (repo, id) = repo_with(&tmp.path().join("tree"));
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap();
    let containers = data_containers(&repo);
    assert_eq!(containers.len(), 1);
    let whole = repo.log.read_meta(containers[0]).unwrap().file_size;

    let out = tmp.path().join("one");
    let before = repo.counters.snapshot();
    let sum = Reader::open(&repo, Default::default())
        .unwrap()
        .restore(&snap.record, &out, Some("tree/f007"), &Progress::default())
        .unwrap();
    let used = repo.counters.snapshot().since(&before);
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!(fs::read(out.join("tree/f007")).unwrap(), files[7].1);
    assert_eq!((used.container_range_reads, used.containers_read), (1, 0));
    // Everything read (snapshot, listing, index, metadata section, the
    // chunk) is less than half of the container.
    assert!(
        used.bytes_read < whole / 2,
        "{} of {whole} bytes read",
        used.bytes_read
    );

    let out = tmp.path().join("all");
    let before = repo.counters.snapshot();
    let sum = restore_with(&repo, &snap.record, &out, PolicyKind::ContainerLru);
    let used = repo.counters.snapshot().since(&before);
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!((used.container_range_reads, used.containers_read), (0, 1));
    for (name, data) in &files {
        assert_eq!(&fs::read(out.join("tree").join(name)).unwrap(), data);
    }
}

/// A restore re-rooted at a subfolder (`restore ID:sub`) walks that
/// folder's listing into the target, whether the folder is stored inline in
/// its parent's listing or as a tree object of its own; the target gets the
/// folder's metadata; a file lands as `target/<name>`; a missing path fails
/// before the target is created; `verify` walks from the same place.
#[test]
fn a_restore_re_rooted_at_a_subfolder_walks_its_listing_into_the_target() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("tree");
    fs::create_dir_all(src.join("small/inner")).unwrap();
    fs::create_dir_all(src.join("big")).unwrap();
    fs::write(src.join("top.txt"), b"top").unwrap();
    fs::write(src.join("small/a"), b"aaa").unwrap();
    fs::write(src.join("small/inner/b"), vec![7u8; 90_000]).unwrap();
    // Enough long names that the listing passes the inline limit.
    let names: Vec<String> = (0..1_200)
        .map(|i| format!("{i:04}-{}", "n".repeat(60)))
        .collect();
    for n in &names {
        fs::write(src.join("big").join(n), n.as_bytes()).unwrap();
    }
    fs::set_permissions(src.join("small"), fs::Permissions::from_mode(0o751)).unwrap();
    let small_mtime = filetime::FileTime::from_unix_time(1_500_000_000, 5);
    filetime::set_file_mtime(src.join("small"), small_mtime).unwrap();
    let (repo, id) = repo_with(&src);
    let snap = catalog::resolve(&**repo.backend(), &id).unwrap().record;
    let mut reader = Reader::open(&repo, Default::default()).unwrap();
    // Both ways a directory is stored are exercised.
    let small = reader.find(&snap, "tree/small").unwrap().unwrap();
    let big = reader.find(&snap, "tree/big").unwrap().unwrap();
    assert!(small.children.is_some(), "small/ should be inline");
    assert!(
        big.children.is_none() && big.content.is_some(),
        "big/ should be a tree object"
    );

    let restore = |reader: &mut Reader, sub: &str, out: &Path| {
        let sel = super::RestoreSelection::default().within(sub);
        let opts = RestoreOptions::default();
        reader.restore_selected(&snap, out, &sel, &opts, &Progress::default())
    };
    let out = tmp.path().join("small-out");
    let sum = restore(&mut reader, "/tree/small/", &out).unwrap();
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!(sum.files, 2);
    assert_eq!(fs::read(out.join("a")).unwrap(), b"aaa");
    assert_eq!(fs::read(out.join("inner/b")).unwrap(), vec![7u8; 90_000]);
    assert!(!out.join("small").exists() && !out.join("tree").exists());
    let m = fs::metadata(&out).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o751);
    assert_eq!((m.mtime(), m.mtime_nsec()), (1_500_000_000, 5));

    let out = tmp.path().join("big-out");
    let sum = restore(&mut reader, "tree/big", &out).unwrap();
    assert!(sum.errors.is_empty(), "{:?}", sum.errors);
    assert_eq!(sum.files, names.len() as u64);
    for n in names.iter().step_by(97) {
        assert_eq!(fs::read(out.join(n)).unwrap(), n.as_bytes());
    }
    let sel = super::RestoreSelection::default().within("tree/big");
    let v = reader
        .verify(&snap, &out, &sel, &Progress::default())
        .unwrap();
    assert!(v.mismatches.is_empty(), "{:?}", v.mismatches);
    assert_eq!(v.files, names.len() as u64);

    let out = tmp.path().join("file-out");
    let sum = restore(&mut reader, "tree/small/inner/b", &out).unwrap();
    assert_eq!((sum.files, sum.dirs), (1, 0));
    assert_eq!(fs::read_dir(&out).unwrap().count(), 1);
    assert_eq!(fs::read(out.join("b")).unwrap().len(), 90_000);

    let out = tmp.path().join("missing-out");
    let err = restore(&mut reader, "tree/nope", &out).unwrap_err();
    assert!(matches!(err, cairn_core::Error::NotFound(_)), "{err}");
    assert!(err.to_string().contains("tree/nope"), "{err}");
    assert!(!out.exists());
}
