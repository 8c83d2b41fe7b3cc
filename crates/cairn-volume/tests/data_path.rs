//! Writes, truncates, extensions and reads of optimized files through
//! `VolumeContent`, as the FUSE layer makes them, checked against a model;
//! and a small write into a large optimized file recalling one granule.

mod support;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rand::Rng;

use cairn_volume::content::Content;
use cairn_volume::volume_content::granule;
use cairn_volume::{optimize, OptimizeOptions, VolumeContent};

/// One operation on a file, as the FUSE layer makes it.
#[derive(Clone, Debug)]
enum Op {
    Write { at: u64, len: usize, byte: u8 },
    SetLen(u64),
    Read { at: u64, len: usize },
}

fn op(max: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..max, 1usize..20_000, any::<u8>()).prop_map(|(at, len, byte)| Op::Write { at, len, byte }),
        1 => (0..max).prop_map(Op::SetLen),
        4 => (0..max, 0usize..200_000).prop_map(|(at, len)| Op::Read { at, len }),
    ]
}

/// Applies `op` to the file at `path` (inode `ino`) through `content` and
/// to `model`; checks every read against the model.
fn apply(
    content: &VolumeContent,
    path: &Path,
    model: &mut Vec<u8>,
    op: &Op,
) -> Result<(), TestCaseError> {
    let ino = support::ino(path);
    let f: File = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    match *op {
        Op::Write { at, len, byte } => {
            content.prepare_write(ino, &f, at, len as u64).unwrap();
            f.write_all_at(&vec![byte; len], at).unwrap();
            let end = at as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[at as usize..end].fill(byte);
        }
        Op::SetLen(n) => {
            f.set_len(n).unwrap();
            content.truncated(ino, &f, n).unwrap();
            model.resize(n as usize, 0);
        }
        Op::Read { at, len } => {
            let got = support::read(content, path, at, len);
            let lo = (at as usize).min(model.len());
            let hi = (at as usize + len).min(model.len());
            prop_assert_eq!(got.len(), hi - lo);
            prop_assert!(got == model[lo..hi], "read {}+{} differs", at, len);
        }
    }
    Ok(())
}

#[test]
fn random_operations_on_optimized_files_match_a_model() {
    const CASES: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3);
    let originals: Vec<Vec<u8>> = (0..CASES)
        .map(|i| support::text(&mut rng, 300_000 + i * 10_000))
        .collect();
    for (i, bytes) in originals.iter().enumerate() {
        std::fs::write(files_dir.join(format!("f{i}")), bytes).unwrap();
    }
    support::age(&files_dir);
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(report.files_optimized, CASES as u64);
    let content = vol.content().unwrap();

    // Each case takes the next optimized file.
    let next = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: CASES as u32,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op(400_000), 1..30), |ops| {
            let i = next.fetch_add(1, Ordering::Relaxed);
            prop_assume!(i < CASES);
            let path = files_dir.join(format!("f{i}"));
            let mut model = originals[i].clone();
            for op in &ops {
                apply(&content, &path, &mut model, op)?;
            }
            let whole = support::read_all(&content, &path);
            prop_assert!(whole == model, "file {} differs after {:?}", i, ops);
            Ok(())
        })
        .unwrap();

    // What the table says survives reopening: every file still reads as
    // its model's last state did (the whole-file reads above).
    let after: Vec<Vec<u8>> = (0..CASES)
        .map(|i| support::read_all(&content, &files_dir.join(format!("f{i}"))))
        .collect();
    drop(content);
    drop(vol);
    let vol = support::open(dir.path());
    let content = vol.content().unwrap();
    for (i, want) in after.iter().enumerate() {
        assert_eq!(
            &support::read_all(&content, &files_dir.join(format!("f{i}"))),
            want,
            "f{i}"
        );
    }
}

#[test]
fn a_small_write_into_a_large_optimized_file_recalls_only_its_granule() {
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(5);
    let size = 16u64 << 20;
    let original = support::text(&mut rng, size as usize);
    let path = files_dir.join("big.img");
    std::fs::write(&path, &original).unwrap();
    support::age(&files_dir);
    assert_eq!(
        optimize(&vol, &OptimizeOptions::default())
            .unwrap()
            .files_optimized,
        1
    );
    let content = vol.content().unwrap();
    let ino = support::ino(&path);
    let g = granule(size);
    assert_eq!(g, 64 << 10);

    // A 4 KiB write inside granule 80 recalls exactly that granule.
    let at = 80 * g + 1000;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    content.prepare_write(ino, &f, at, 4096).unwrap();
    f.write_all_at(&[0xee; 4096], at).unwrap();
    assert_eq!(content.recalled_bytes(), g);
    let entry = vol.table().get(ino).unwrap();
    assert_eq!(entry.recalled.ranges(), &[(80 * g, 81 * g)]);
    let allocated = std::os::unix::fs::MetadataExt::blocks(&f.metadata().unwrap()) * 512;
    assert!(
        allocated <= g + 8192,
        "backing file holds {allocated} bytes"
    );

    // A write across a granule boundary recalls the two granules it touches.
    let at = 200 * g - 10;
    content.prepare_write(ino, &f, at, 20).unwrap();
    f.write_all_at(&[0x11; 20], at).unwrap();
    assert_eq!(content.recalled_bytes(), 3 * g);

    let mut model = original.clone();
    model[(80 * g + 1000) as usize..][..4096].fill(0xee);
    model[(200 * g - 10) as usize..][..20].fill(0x11);
    assert!(support::read_all(&content, &path) == model);
    // Writing again into a recalled granule recalls nothing.
    content.prepare_write(ino, &f, 80 * g, 10).unwrap();
    assert_eq!(content.recalled_bytes(), 3 * g);
}

#[test]
fn a_file_written_after_optimization_is_optimized_anew_when_cold() {
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(8);
    let mut model = support::text(&mut rng, 4 << 20);
    let path = files_dir.join("doc.txt");
    std::fs::write(&path, &model).unwrap();
    std::fs::write(files_dir.join("untouched.txt"), &model[..500_000]).unwrap();
    support::age(&files_dir);
    assert_eq!(
        optimize(&vol, &OptimizeOptions::default())
            .unwrap()
            .files_optimized,
        2
    );
    let content = vol.content().unwrap();
    let ino = support::ino(&path);

    // A write in the middle (recalls a granule) and an append.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    content.prepare_write(ino, &f, 300_000, 100).unwrap();
    f.write_all_at(&[b'#'; 100], 300_000).unwrap();
    content
        .prepare_write(ino, &f, model.len() as u64, 5000)
        .unwrap();
    f.write_all_at(&[b'+'; 5000], model.len() as u64).unwrap();
    model[300_000..300_100].fill(b'#');
    model.extend_from_slice(&[b'+'; 5000]);
    assert!(!vol.table().get(ino).unwrap().recalled.is_empty());

    // Too young: left as it is, partly recalled.
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(report.files_optimized, 0, "{report:?}");
    assert_eq!(report.skipped.get("already optimized"), Some(&1));

    support::age(&files_dir);
    let old_leaves = content
        .stream_map_leaves(&vol.table().get(ino).unwrap())
        .unwrap();
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(
        (report.files_reoptimized, report.files_optimized),
        (1, 1),
        "{report:?}"
    );
    // Only the recalled granule (64 KiB for 4 MiB) and the appended tail
    // were read again, widened to the old chunks around them; the rest of
    // the 4 MiB kept its chunks unread.
    let granule = cairn_volume::volume_content::granule(model.len() as u64);
    assert!(
        report.bytes_reread >= granule + 5000 && report.bytes_reread < 1 << 20,
        "{report:?}"
    );
    let entry = vol.table().get(ino).unwrap();
    assert!(entry.recalled.is_empty());
    let new_leaves = content.stream_map_leaves(&entry).unwrap();
    let kept = new_leaves
        .iter()
        .filter(|l| {
            old_leaves
                .iter()
                .any(|o| o.fp == l.fp && o.start == l.start)
        })
        .map(|l| l.size)
        .sum::<u64>();
    assert!(
        kept + report.bytes_reread >= model.len() as u64 - 5000,
        "{kept}"
    );
    assert_eq!(entry.valid, model.len() as u64);
    let blocks = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&path).unwrap());
    assert!(blocks * 512 <= 4096, "punched again");
    assert!(support::read_all(&content, &path) == model);
    // Only the new bytes were stored: the rest deduplicated.
    assert!(report.new_chunk_bytes < 300_000, "{report:?}");
}

#[test]
fn one_content_state_reads_files_of_every_later_run() {
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let content = vol.content().unwrap();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(9);
    let mut written = Vec::new();
    for run in 0..3 {
        // Each run's file has bytes no earlier run stored.
        let bytes: Vec<u8> = (0..300_000).map(|_| rng.gen()).collect();
        let path = files_dir.join(format!("run{run}"));
        std::fs::write(&path, &bytes).unwrap();
        written.push((path, bytes));
        support::age(&files_dir);
        let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
        assert_eq!(report.files_optimized, 1, "run {run}: {report:?}");
        for (path, bytes) in &written {
            assert!(
                &support::read_all(&content, path) == bytes,
                "run {run}: {path:?}"
            );
        }
    }
}

#[test]
fn a_truncated_optimized_file_is_optimized_anew_when_cold() {
    // Its stream map's tail is no file's bytes any more: a new stream map
    // of the file's length lets the store's collection free the tail.
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(9);
    let model = support::text(&mut rng, 1 << 20);
    let path = files_dir.join("log.txt");
    std::fs::write(&path, &model).unwrap();
    support::age(&files_dir);
    optimize(&vol, &OptimizeOptions::default()).unwrap();
    let content = vol.content().unwrap();
    let ino = support::ino(&path);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(300_000).unwrap();
    content.truncated(ino, &f, 300_000).unwrap();
    drop(f);
    assert_eq!(vol.table().get(ino).unwrap().valid, 300_000);

    support::age(&files_dir);
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(
        (report.files_reoptimized, report.files_optimized),
        (1, 1),
        "{report:?}"
    );
    // Only the chunk the truncate cut was read again.
    assert!(report.bytes_reread < 300_000, "{report:?}");
    let entry = vol.table().get(ino).unwrap();
    assert_eq!((entry.valid, entry.blob.size), (300_000, 300_000));
    assert!(support::read_all(&content, &path) == model[..300_000]);
}
