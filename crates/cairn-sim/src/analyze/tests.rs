//! Tests of `cairn analyze` (the `004_62bf1a5ddd5ed253.txt` dataset study) on
//! generated trees with known duplicates.

use std::fs;
use std::path::{Path, PathBuf};

use cairn_chunk::{cut_points, fingerprint, Chunker, FastCdcChunker, RabinChunker};
use cairn_core::{FingerprintAlgo, FpSet};

use super::report::ref_group;
use super::study::{Consumer, Cutter, Index, Study};
use super::walk::FileEntry;
use super::*;

fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn put(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

/// Small, fast options: no compression.
fn quick() -> AnalyzeOptions {
    AnalyzeOptions {
        compression: None,
        ..AnalyzeOptions::default()
    }
}

const R1: usize = 300_000;
const R2: usize = 200_000;
const R3: usize = 100_000;

/// a/x.bin, a/x2.bin, b/x.bin: R1; b/y.txt, c/y.dat: R2; c/z.txt: R3.
fn known_tree(root: &Path) {
    let (r1, r2, r3) = (random(1, R1), random(2, R2), random(3, R3));
    put(root, "a/x.bin", &r1);
    put(root, "a/x2.bin", &r1);
    put(root, "b/x.bin", &r1);
    put(root, "b/y.txt", &r2);
    put(root, "c/y.dat", &r2);
    put(root, "c/z.txt", &r3);
}

fn run(root: &Path, opts: &AnalyzeOptions) -> AnalyzeReport {
    analyze(&[root.to_path_buf()], opts, None).unwrap()
}

#[test]
fn savings_are_exact_for_copied_files() {
    let dir = tempfile::tempdir().unwrap();
    known_tree(dir.path());
    let progress = std::sync::atomic::AtomicU64::new(0);
    let r = analyze(&[dir.path().to_path_buf()], &quick(), Some(&progress)).unwrap();
    let logical = (3 * R1 + 2 * R2 + R3) as u64;
    let unique = (R1 + R2 + R3) as u64;
    assert_eq!((r.files, r.logical_bytes), (6, logical));
    assert_eq!(progress.into_inner(), logical);
    assert_eq!(r.chunk_size_sweep.len(), 6);
    for p in &r.chunk_size_sweep {
        assert_eq!(
            (p.logical_bytes, p.unique_bytes),
            (logical, unique),
            "{p:?}"
        );
        assert!((p.savings - (1.0 - unique as f64 / logical as f64)).abs() < 1e-12);
        assert!(p.compressed_unique_bytes.is_none());
    }
    for s in [&r.chunking.basic, &r.chunking.regression] {
        assert_eq!(
            (s.logical_bytes, s.unique_bytes),
            (logical, unique),
            "{s:?}"
        );
    }

    // Section 3: R1's chunks are referenced 3 times, R2's twice, R3's once.
    let rc = &r.reference_counts;
    assert_eq!(rc.chunker.avg, 8192);
    assert_eq!(rc.duplicate_bytes, (2 * R1 + R2) as u64);
    let by = |refs: u64| {
        rc.groups
            .iter()
            .find(|g| g.min_refs <= refs && refs <= g.max_refs)
    };
    assert_eq!(by(1).unwrap().unique_bytes, R3 as u64);
    assert_eq!(by(2).unwrap().duplicate_bytes, R2 as u64);
    assert_eq!(by(3).unwrap().duplicate_bytes, 2 * R1 as u64);
    assert_eq!(by(3).unwrap().logical_bytes, 3 * R1 as u64);
    let total: f64 = rc.groups.iter().map(|g| g.duplicate_share).sum();
    assert!((total - 1.0).abs() < 1e-12, "{total}");
    assert_eq!(rc.groups.len(), 3);

    // Section 4: bin {R1 x3}, txt {R2, R3}, dat {R2}; directories a {R1 x2},
    // b {R1, R2}, c {R2, R3} (each directory holds > 10% of the bytes).
    let p = &r.partitioning;
    assert_eq!(p.global.unique_bytes, unique);
    assert_eq!(p.by_type.partitions, 3);
    assert_eq!(p.by_type.unique_bytes, (R1 + R2 + R3 + R2) as u64);
    assert_eq!(p.by_path.partitions, 3);
    assert_eq!(p.by_path.unique_bytes, (R1 + R1 + R2 + R2 + R3) as u64);
    assert!(p.by_path.savings <= p.by_type.savings);
    assert!(p.by_type.savings <= p.global.savings);
    let bin = &p.by_type.largest[0];
    assert_eq!((bin.key.as_str(), bin.files), ("bin", 3));
    assert_eq!(
        (bin.logical_bytes, bin.unique_bytes),
        (3 * R1 as u64, R1 as u64)
    );
    assert!(p
        .by_path
        .largest
        .iter()
        .any(|e| e.key.ends_with("b/ (own files)")));
}

#[test]
fn path_partitions_are_subtrees_under_the_share() {
    let dir = tempfile::tempdir().unwrap();
    known_tree(dir.path());
    // Half the bytes: a (600 KB) and b (500 KB) and c (300 KB) are each one
    // subtree partition below 700 KB.
    let opts = AnalyzeOptions {
        path_partition_share: 0.5,
        ..quick()
    };
    let r = run(dir.path(), &opts);
    let keys: Vec<&str> = r
        .partitioning
        .by_path
        .largest
        .iter()
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| k.ends_with('/')), "{keys:?}");
    // Everything is one partition when the share is 1.
    let r = run(
        dir.path(),
        &AnalyzeOptions {
            path_partition_share: 1.0,
            ..quick()
        },
    );
    let p = &r.partitioning;
    assert_eq!(p.by_path.partitions, 1);
    assert_eq!(p.by_path.unique_bytes, p.global.unique_bytes);
}

#[test]
fn regression_forces_fewer_cuts_on_random_data() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "r.bin", &random(9, 2 << 20));
    let opts = AnalyzeOptions {
        avg_sizes: vec![4096],
        detail_avg: 4096,
        regression: ChunkSizes {
            min: 1024,
            avg: 4096,
            max: 8192,
        },
        ..quick()
    };
    let r = run(dir.path(), &opts);
    let (b, g) = (&r.chunking.basic, &r.chunking.regression);
    // Basic: P(no match in 7168 bytes) = e^(-7/4) ~ 17%.
    assert!(b.forced_share > 0.08, "{}", b.forced_share);
    assert!(g.forced_share <= b.forced_share);
    assert!(g.regressed_share > 0.05, "{}", g.regressed_share);
    assert_eq!(g.regressed_cuts.len(), 4);
    assert!(b.regressed_cuts.is_empty());
    for s in [b, g] {
        let cut: u64 = s.histogram.iter().map(|h| h.chunks).sum();
        let eof: u64 = s.histogram.iter().map(|h| h.eof_chunks).sum();
        assert_eq!(cut + eof, s.chunks);
        assert_eq!(eof, s.end_of_input_cuts);
        assert_eq!(s.histogram.len(), 16);
        assert_eq!(s.histogram[15].hi, 8192);
    }
    // Forced cuts are exactly max-size chunks: they sit in the last bucket.
    assert!(b.histogram[15].chunks >= b.forced_cuts);
}

#[test]
fn streaming_matches_whole_buffer_cuts() {
    let data = random(4, 300_000);
    let consumers = vec![
        Consumer::new(
            ChunkSizes {
                min: 256,
                avg: 1024,
                max: 8192,
            },
            Cutter::Cdc(FastCdcChunker::new(256, 1024, 8192)),
            8,
        ),
        Consumer::new(
            ChunkSizes {
                min: 256,
                avg: 1024,
                max: 4096,
            },
            Cutter::Rabin(RabinChunker::new(256, 1024, 4096)),
            8,
        ),
    ];
    // A 32 KiB buffer: about ten refills and compactions.
    let mut study = Study::with_consumers(consumers, 0, FingerprintAlgo::Blake3, 1);
    study.add_bytes(&data, 0, 0);
    study.add_bytes(&data[..1000], 0, 0);
    let mut whole: [Box<dyn Chunker>; 2] = [
        Box::new(FastCdcChunker::new(256, 1024, 8192)),
        Box::new(RabinChunker::new(256, 1024, 4096)),
    ];
    for (c, chunker) in study.consumers.iter().zip(whole.iter_mut()) {
        let mut expect = FpSet::default();
        let mut chunks = 0;
        for input in [&data[..], &data[..1000]] {
            let mut ends = Vec::new();
            cut_points(chunker.as_mut(), input, &mut ends);
            let mut start = 0;
            for e in ends {
                expect.insert(fingerprint(FingerprintAlgo::Blake3, &input[start..e]));
                start = e;
                chunks += 1;
            }
        }
        let Index::Set(seen) = &c.index else {
            panic!("a set")
        };
        assert_eq!(seen, &expect);
        assert_eq!(c.counts.chunks, chunks);
        assert_eq!(c.counts.logical, 301_000);
    }
}

#[test]
fn reference_groups_are_powers_of_two() {
    let groups: Vec<usize> = [1, 2, 3, 4, 5, 8, 9, 16, 17]
        .iter()
        .map(|&r| ref_group(r))
        .collect();
    assert_eq!(groups, [0, 1, 2, 2, 3, 3, 4, 4, 5]);
}

#[test]
fn compression_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let text: Vec<u8> = (0..60_000u32)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    put(dir.path(), "t/a.log", &text);
    put(dir.path(), "t/b.log", &text);
    put(dir.path(), "empty", b"");
    let opts = AnalyzeOptions {
        avg_sizes: vec![4096, 65536],
        ..AnalyzeOptions::default()
    };
    let r = run(dir.path(), &opts);
    assert_eq!((r.files, r.empty_files), (3, 1));
    let p = &r.chunk_size_sweep[0];
    let compressed = p.compressed_unique_bytes.unwrap();
    assert!(
        compressed * 2 < p.unique_bytes,
        "{compressed} of {}",
        p.unique_bytes
    );
    assert!(p.savings_with_compression.unwrap() > p.savings);
    assert_eq!(r.chunk_size_sweep.len(), 3, "detail_avg 8 KiB is added");
    let t = render_table(&r);
    for want in [
        "1. Dedup savings",
        "2. Basic (Rabin)",
        "3. Duplicate bytes",
        "4. Global vs",
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"chunk_size_sweep\""));
}

#[test]
fn plot_writes_svg_png_and_pdf_and_rejects_other_names() {
    let dir = tempfile::tempdir().unwrap();
    known_tree(&dir.path().join("data"));
    let r = run(&dir.path().join("data"), &quick());
    let svg = dir.path().join("fig.svg");
    plot(&r, &svg).unwrap();
    let text = fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"));
    assert!(text.contains("Savings vs average chunk size"));
    // PNG: the same figure rasterized; with no system fonts, a clear error.
    let png = dir.path().join("fig.png");
    match plot(&r, &png) {
        Ok(()) => {
            let bytes = fs::read(&png).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            assert!(bytes.len() > 10_000, "a whole figure");
        }
        Err(e) => assert!(e.to_string().contains("no system fonts"), "{e}"),
    }
    // PDF: the same figure as vector PDF, or the same clear error.
    let pdf = dir.path().join("fig.pdf");
    match plot(&r, &pdf) {
        Ok(()) => {
            let bytes = fs::read(&pdf).unwrap();
            assert_eq!(&bytes[..5], b"%PDF-");
            assert!(bytes.ends_with(b"%%EOF") || bytes.ends_with(b"%%EOF\n"));
        }
        Err(e) => {
            assert!(e.to_string().contains("no system fonts"), "{e}");
            assert!(!pdf.exists());
        }
    }
    // The histogram shows the chunks the end of a file cut.
    assert!(text.contains("ended by end of file"));
    for bad in ["fig.txt", "fig"] {
        let e = plot(&r, &dir.path().join(bad)).unwrap_err();
        assert!(
            matches!(e, cairn_core::Error::InvalidInput(_)),
            "{bad}: {e}"
        );
        assert!(!dir.path().join(bad).exists());
    }
    // An empty report plots too.
    let empty = dir.path().join("none");
    fs::create_dir(&empty).unwrap();
    plot(&run(&empty, &quick()), &dir.path().join("empty.SVG")).unwrap();
}

#[test]
fn walk_limits_exclusions_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    known_tree(dir.path());
    put(dir.path(), "target/big.bin", &random(5, 1000));
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("a/x.bin"), dir.path().join("link")).unwrap();
    let opts = AnalyzeOptions {
        exclude_names: vec!["target".into()],
        ..quick()
    };
    let r = run(dir.path(), &opts);
    assert_eq!(r.files, 6);
    #[cfg(unix)]
    assert_eq!(r.non_regular_skipped, 1);
    let r = run(
        dir.path(),
        &AnalyzeOptions {
            max_files: Some(2),
            ..quick()
        },
    );
    assert_eq!((r.files, r.truncated), (2, true));
    // A file named directly is read; a missing path is an error.
    let r = run(&dir.path().join("c/z.txt"), &quick());
    assert_eq!((r.files, r.logical_bytes), (1, R3 as u64));
    assert!(analyze(&[dir.path().join("missing")], &quick(), None).is_err());
    assert!(analyze(&[], &quick(), None).is_err());
    let bad = AnalyzeOptions {
        avg_sizes: vec![3000],
        ..quick()
    };
    assert!(analyze(&[dir.path().to_path_buf()], &bad, None).is_err());
    // A file that vanished between walk and read is noted and skipped.
    let opts = quick();
    let tree = walk::walk(&[dir.path().join("c")], &opts).unwrap();
    let mut study = Study::new(&opts, &tree);
    let gone = FileEntry {
        path: dir.path().join("c/vanished"),
        size: 10,
        type_part: 0,
        path_part: 0,
        dir: 0,
    };
    study.add_file(&gone, None);
    assert_eq!((study.files, study.notes_total), (0, 1));
    assert!(study.notes[0].contains("vanished"));
}

/// Manual run on a real tree until the CLI is wired:
/// `CAIRN_ANALYZE_PATH=. cargo test --release -p cairn-sim analyze::tests::manual -- --ignored --nocapture`
/// (`CAIRN_ANALYZE_EXCLUDE=target,.git`, `CAIRN_ANALYZE_PLOT=fig.svg`,
/// `CAIRN_ANALYZE_JSON=report.json`, `CAIRN_ANALYZE_NO_COMPRESSION=1` optional).
#[test]
#[ignore]
fn manual() {
    let Ok(path) = std::env::var("CAIRN_ANALYZE_PATH") else {
        return;
    };
    let opts = AnalyzeOptions {
        exclude_names: std::env::var("CAIRN_ANALYZE_EXCLUDE")
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        ..AnalyzeOptions::default()
    };
    let opts = match std::env::var("CAIRN_ANALYZE_NO_COMPRESSION") {
        Ok(_) => AnalyzeOptions {
            compression: None,
            ..opts
        },
        Err(_) => opts,
    };
    let paths: Vec<PathBuf> = path.split(',').map(PathBuf::from).collect();
    let r = analyze(&paths, &opts, None).unwrap();
    println!("{}", render_table(&r));
    if let Ok(p) = std::env::var("CAIRN_ANALYZE_PLOT") {
        plot(&r, Path::new(&p)).unwrap();
    }
    if let Ok(p) = std::env::var("CAIRN_ANALYZE_JSON") {
        fs::write(p, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    }
}
