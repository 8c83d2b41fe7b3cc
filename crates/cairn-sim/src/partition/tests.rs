//! Tests of the partitioned-dedup library: hand-computed cases, the
//! partitioning rules, input handling, and the invariants of the module doc
//! as properties over random datasets (proptest).

use proptest::prelude::{prop_assert, prop_assert_eq, proptest, ProptestConfig};
use proptest::strategy::Strategy as _;

use cairn_core::{Fingerprint, TraceChunk, TraceEvent, TraceMeta, TraceSource};

use super::Strategy as Part;
use super::*;

fn fp(i: u64) -> Fingerprint {
    Fingerprint::from_slice(&(i + 1).to_le_bytes())
}

fn chunk(i: u64, size: u32) -> TraceChunk {
    TraceChunk {
        fp: fp(i),
        size,
        stored_size: size / 2,
    }
}

/// One stream; files given as (path, [(chunk id, size)]).
fn dataset(files: &[(&str, &[(u64, u32)])]) -> Dataset {
    let mut ds = Dataset::new();
    let s = ds.add_stream("s").unwrap();
    for (path, chunks) in files {
        let f = ds.add_file(s, path).unwrap();
        for &(id, size) in *chunks {
            ds.add_chunk(f, chunk(id, size)).unwrap();
        }
    }
    ds
}

const A: u64 = 0;
const B: u64 = 1;
const C: u64 = 2;
const D: u64 = 3;
const E: u64 = 4;

/// Logical 150; distinct A10 B20 C30 D40 = 100.
fn small() -> Dataset {
    dataset(&[
        ("a/x.doc", &[(A, 10), (B, 20)]),
        ("a/y.pdf", &[(B, 20), (C, 30)]),
        ("b/z.doc", &[(A, 10), (D, 40)]),
        ("b/w.DOC", &[(A, 10), (A, 10)]),
    ])
}

fn phase1(ds: &Dataset, s: Part, share: f64) -> Partitioned {
    dedup_partitions(ds, &partition_files(ds, s, share)).unwrap()
}

#[test]
fn hand_computed_savings_per_strategy() {
    let ds = small();
    assert_eq!(ds.logical_bytes(), 150);
    assert_eq!(ds.distinct_chunks(), 4);
    let global = phase1(&ds, Part::Global, 0.1);
    assert_eq!(global.unique_bytes(), 100);
    assert!((global.savings() - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(global.peak_entries(), 4);

    // doc (x, z, w): A B D = 70; pdf (y): B C = 50.
    let ty = phase1(&ds, Part::Type, 0.1);
    let names: Vec<_> = ty.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["doc", "pdf"]);
    assert_eq!(ty.unique_bytes(), 120);
    assert!((ty.savings() - 0.2).abs() < 1e-12);
    assert_eq!(ty.peak_entries(), 3);
    assert_eq!(ty.parts[0].files, 3);
    assert_eq!(ty.parts[0].logical_bytes, 100);

    // Limit 15 bytes: a (80) and b (70) are too large, so each one's own
    // files are a partition: a: A B C = 60; b: A D = 50.
    let path = phase1(&ds, Part::Path, 0.1);
    let names: Vec<_> = path.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a/ (own files)", "b/ (own files)"]);
    assert_eq!(path.unique_bytes(), 110);
    // Limit 90: a and b are whole sub-trees.
    let path = phase1(&ds, Part::Path, 0.6);
    let names: Vec<_> = path.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a/", "b/"]);
    // Limit 150: the root is one partition.
    let path = phase1(&ds, Part::Path, 1.0);
    assert_eq!(path.parts.len(), 1);
    assert_eq!(path.unique_bytes(), 100);

    // One stream: top-level directories.
    let stream = phase1(&ds, Part::Stream, 0.1);
    let names: Vec<_> = stream.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["a/", "b/"]);
    assert_eq!(stream.unique_bytes(), 110);
}

#[test]
fn hand_computed_reconciliation_two_partitions() {
    let ty = phase1(&small(), Part::Type, 0.1);
    // k = 1: [doc: A B D] then [pdf: B C]; the second pass streams the 3
    // reconciled entries and finds B.
    let r = reconcile(&ty, 1).unwrap();
    assert_eq!(r.passes.len(), 2);
    assert_eq!(r.passes[0].in_memory_entries, 3);
    assert_eq!(r.passes[0].entries_read, 0);
    assert_eq!(r.passes[1].in_memory_entries, 2);
    assert_eq!(r.passes[1].entries_read, 3);
    assert_eq!(r.passes[1].cross_duplicates, 1);
    assert_eq!(r.passes[1].bytes_freed, 20);
    assert_eq!(r.unique_bytes, 100);
    assert_eq!(r.unique_stored_bytes, 50);
    assert_eq!(r.peak_index_entries(), 3);
    assert_eq!(r.peak_index_bytes(), 3 * INDEX_ENTRY_BYTES);
    assert_eq!(r.entries_read(), 3);
    // k = 2 = all: one pass, B found while loading.
    let r = reconcile(&ty, 2).unwrap();
    assert_eq!(r.passes.len(), 1);
    assert_eq!(r.passes[0].intra_duplicates, 1);
    assert_eq!(r.peak_index_entries(), 4);
    assert_eq!(r.entries_read(), 0);
    assert_eq!(r.unique_bytes, 100);
    // k beyond the partitions is one pass too.
    assert_eq!(reconcile(&ty, 9).unwrap().passes.len(), 1);
    assert!(reconcile(&ty, 0).is_err());
}

#[test]
fn hand_computed_reconciliation_three_partitions() {
    // p0 = {A, B}, p1 = {B, C}, p2 = {C, D, E}; sizes 1.
    let ds = dataset(&[
        ("0.a", &[(A, 1), (B, 1)]),
        ("1.b", &[(B, 1), (C, 1), (B, 1)]),
        ("2.c", &[(C, 1), (D, 1), (E, 1)]),
    ]);
    let ty = phase1(&ds, Part::Type, 0.1);
    assert_eq!(ty.unique_bytes(), 7);
    let r1 = reconcile(&ty, 1).unwrap();
    let got: Vec<_> = r1
        .passes
        .iter()
        .map(|p| (p.in_memory_entries, p.entries_read, p.cross_duplicates))
        .collect();
    assert_eq!(got, [(2, 0, 0), (2, 2, 1), (3, 3, 1)]);
    assert_eq!((r1.peak_index_entries(), r1.entries_read()), (3, 5));
    let r2 = reconcile(&ty, 2).unwrap();
    let got: Vec<_> = r2
        .passes
        .iter()
        .map(|p| (p.first, p.partitions, p.in_memory_entries, p.entries_read))
        .collect();
    assert_eq!(got, [(0, 2, 3, 0), (2, 1, 3, 3)]);
    assert_eq!(r2.passes[0].intra_duplicates, 1);
    assert_eq!(r2.passes[1].cross_duplicates, 1);
    let r3 = reconcile(&ty, 3).unwrap();
    assert_eq!(r3.peak_index_entries(), 5);
    for r in [r1, r2, r3] {
        assert_eq!(r.unique_bytes, 5);
        assert_eq!(r.reconciled_entries, 5);
    }
}

#[test]
fn file_types() {
    for (path, ty) in [
        ("a/b/Report.DOCX", "docx"),
        ("x.tar.gz", "gz"),
        ("lib/libc.so.6", "so"),
        ("libz.so.1.3.1", "so"),
        ("man/ls.1", "1"),
        (".bashrc", NO_TYPE),
        ("dir.d/Makefile", NO_TYPE),
        ("trailing.", NO_TYPE),
        ("été.txt", "txt"),
        ("é", NO_TYPE),
        ("", NO_TYPE),
    ] {
        assert_eq!(file_type(path), ty, "{path}");
    }
}

#[test]
fn paths_are_normalized_and_streams_partition() {
    let mut ds = Dataset::new();
    let s0 = ds.add_stream("gen0").unwrap();
    let s1 = ds.add_stream("gen1").unwrap();
    let f = ds.add_file(s0, "/x//./y/z.txt").unwrap();
    assert_eq!(ds.files()[f as usize].path, "x/y/z.txt");
    ds.add_chunk(f, chunk(A, 5)).unwrap();
    let g = ds.add_file(s1, "x/y/z.txt").unwrap();
    ds.add_chunk(g, chunk(A, 5)).unwrap();
    let p = partition_files(&ds, Part::Stream, 0.1);
    assert_eq!(p.names, ["gen0", "gen1"]);
    assert_eq!(p.of_file, [0, 1]);
    // Bad ids are errors, not panics.
    assert!(ds.add_file(7, "q").is_err());
    assert!(ds.add_chunk(99, chunk(A, 1)).is_err());
    let bad = Partitioning {
        strategy: Part::Type,
        names: vec!["x".into()],
        of_file: vec![0, 3],
    };
    assert!(dedup_partitions(&ds, &bad).is_err());
    assert!(dedup_partitions(
        &ds,
        &Partitioning {
            of_file: vec![0],
            ..bad
        }
    )
    .is_err());
}

#[test]
fn single_stream_uses_top_level_below_common_root() {
    let ds = dataset(&[
        ("share/a/x", &[(A, 1)]),
        ("share/a/y/z", &[(B, 1)]),
        ("share/b/w", &[(C, 1)]),
        ("share/top", &[(D, 1)]),
    ]);
    let p = partition_files(&ds, Part::Stream, 0.1);
    assert_eq!(p.names, ["share/a/", "share/b/", "share/ (own files)"]);
    assert_eq!(p.of_file, [0, 0, 1, 2]);
}

#[test]
fn conflicting_sizes_count_at_first_size() {
    let mut ds = dataset(&[("a", &[(A, 10)])]);
    let f = ds.add_file(0, "b").unwrap();
    ds.add_chunk(f, chunk(A, 99)).unwrap();
    assert_eq!(ds.size_conflicts(), 1);
    assert_eq!(ds.logical_bytes(), 20);
    assert_eq!(ds.chunks()[1].size, 10);
}

#[test]
fn k_values_chain() {
    assert_eq!(k_values(&[1, 2, 4], 10).unwrap(), [1, 2, 4, 10]);
    assert_eq!(k_values(&[4, 2, 1, 2], 3).unwrap(), [1, 2, 3]);
    assert_eq!(k_values(&[1, 2, 4], 1).unwrap(), [1]);
    assert!(k_values(&[1, 2, 4], 0).unwrap().is_empty());
    assert!(k_values(&[0], 5).is_err());
}

#[test]
fn empty_dataset_studies_to_zero() {
    let s = study(&Dataset::new(), &[1, 2]).unwrap();
    assert_eq!(s.logical_bytes, 0);
    assert_eq!(s.global.savings(), 0.0);
    for r in &s.strategies {
        assert!(r.partitioned.parts.is_empty());
        assert!(r.reconciliations.is_empty());
    }
}

/// A scripted trace source.
struct Script(std::vec::IntoIter<TraceEvent>);

impl TraceSource for Script {
    fn next_event(&mut self) -> cairn_core::Result<Option<TraceEvent>> {
        Ok(self.0.next())
    }
    fn describe(&self) -> String {
        "script".into()
    }
}

fn dir(name: &str) -> TraceEvent {
    TraceEvent::DirStart {
        name: name.into(),
        meta: TraceMeta::default(),
    }
}

fn file(name: &str) -> TraceEvent {
    TraceEvent::FileStart {
        name: name.into(),
        meta: TraceMeta::default(),
    }
}

#[test]
fn trace_events_become_paths() {
    let events = vec![
        dir("usr"),
        dir("lib"),
        file("libc.so.6"),
        TraceEvent::Chunk(chunk(A, 7)),
        TraceEvent::FileEnd,
        TraceEvent::DirEnd,
        file("top.txt"),
        TraceEvent::Chunk(chunk(B, 3)),
        TraceEvent::FileEnd,
        TraceEvent::DirEnd,
        file("/abs/ext/path.pdf"),
        TraceEvent::FileEnd,
    ];
    let mut ds = Dataset::new();
    let s = ds.add_stream("t").unwrap();
    let n = source::add_source(&mut ds, s, "", &mut Script(events.into_iter())).unwrap();
    assert_eq!(n, 2);
    let paths: Vec<_> = ds.files().iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["usr/lib/libc.so.6", "usr/top.txt", "abs/ext/path.pdf"]
    );
    let mut ds2 = Dataset::new();
    let s = ds2.add_stream("t").unwrap();
    let events = vec![dir("d"), file("f"), TraceEvent::FileEnd, TraceEvent::DirEnd];
    source::add_source(&mut ds2, s, "gen-1", &mut Script(events.into_iter())).unwrap();
    assert_eq!(ds2.files()[0].path, "gen-1/d/f");
}

#[test]
fn malformed_trace_nesting_is_an_error() {
    let cases: Vec<Vec<TraceEvent>> = vec![
        vec![TraceEvent::Chunk(chunk(A, 1))],
        vec![TraceEvent::DirEnd],
        vec![TraceEvent::FileEnd],
        vec![file("a"), file("b")],
        vec![file("a"), dir("b")],
        vec![file("a"), TraceEvent::DirEnd],
    ];
    for events in cases {
        let mut ds = Dataset::new();
        let s = ds.add_stream("t").unwrap();
        let err = source::add_source(&mut ds, s, "p", &mut Script(events.clone().into_iter()))
            .unwrap_err();
        assert!(err.to_string().contains("script"), "{events:?}: {err}");
    }
}

#[test]
fn destor_testdata_loads() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/destor");
    let ds = source::load_traces(&[data.join("gen0.trace"), data.join("gen1.trace")]).unwrap();
    assert_eq!(ds.streams(), ["gen0.trace", "gen1.trace"]);
    assert!(!ds.chunks().is_empty());
    assert!(ds.files().iter().all(|f| f.path.starts_with("gen")));
    let s = study(&ds, &[1, 2, 4]).unwrap();
    for r in &s.strategies {
        for rec in &r.reconciliations {
            assert_eq!(rec.unique_bytes, s.global.unique_bytes());
        }
    }
    assert!(source::load_traces(&[data.join("missing.trace")]).is_err());
}

#[test]
fn files_dataset_is_deterministic_and_typed() {
    let p = files::FilesParams {
        files: 300,
        size_scale: 1.0 / 64.0,
        seed: 9,
    };
    let a = files::generate(&p).unwrap();
    let b = files::generate(&p).unwrap();
    assert_eq!(a.chunks(), b.chunks());
    assert_eq!(a.files(), b.files());
    let ty = partition_files(&a, Part::Type, PATH_PARTITION_SHARE);
    assert!(ty.names.len() >= 10, "{:?}", ty.names);
    let st = partition_files(&a, Part::Stream, PATH_PARTITION_SHARE);
    assert!(st.names.iter().any(|n| n == "home-us/"), "{:?}", st.names);
    let g = phase1(&a, Part::Global, 0.1);
    assert!(g.savings() > 0.05, "{}", g.savings());
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 100.0] {
        assert!(files::generate(&files::FilesParams {
            size_scale: bad,
            ..p
        })
        .is_err());
    }
    assert!(files::generate(&files::FilesParams {
        files: usize::MAX,
        ..p
    })
    .is_err());
}

/// Random datasets: files in a small tree with a few extensions and
/// streams, chunks drawn from a small fingerprint universe so duplicates
/// are common, sizes per occurrence random (so conflicts happen too).
fn arb_dataset() -> impl proptest::strategy::Strategy<Value = Dataset> {
    let file = (
        0u8..3,
        0u8..3,
        0u8..4,
        0u32..3,
        proptest::collection::vec((0u64..40, 0u32..200), 0..12),
    );
    (1u32..4, proptest::collection::vec(file, 0..24)).prop_map(|(streams, files)| {
        let mut ds = Dataset::new();
        for s in 0..streams {
            ds.add_stream(format!("s{s}")).unwrap();
        }
        for (i, (d, sub, ext, stream, chunks)) in files.into_iter().enumerate() {
            let path = match sub {
                0 => format!("d{d}/f{i}.e{ext}"),
                _ => format!("d{d}/s{sub}/f{i}.e{ext}"),
            };
            let f = ds.add_file(stream % streams, &path).unwrap();
            for (id, size) in chunks {
                ds.add_chunk(f, chunk(id, size)).unwrap();
            }
        }
        ds
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn reconciliation_recovers_global_savings(ds in arb_dataset(), share in 0.0f64..1.2) {
        let global = phase1(&ds, Part::Global, share);
        prop_assert_eq!(global.total_entries(), ds.distinct_chunks());
        for s in [Part::Type, Part::Path, Part::Stream] {
            let p = partition_files(&ds, s, share);
            // Disjoint and covering: every file in exactly one partition.
            prop_assert_eq!(p.of_file.len(), ds.files().len());
            prop_assert!(p.of_file.iter().all(|&q| (q as usize) < p.names.len()));
            let part = dedup_partitions(&ds, &p).unwrap();
            prop_assert_eq!(part.logical_bytes, ds.logical_bytes());
            prop_assert_eq!(
                part.parts.iter().map(|q| q.logical_bytes).sum::<u64>(),
                ds.logical_bytes()
            );
            prop_assert!(part.unique_bytes() >= global.unique_bytes());
            prop_assert!(part.savings() <= global.savings() + 1e-12);
            let n = part.parts.len();
            let mut peaks = Vec::new();
            for k in 1..=n + 1 {
                let r = reconcile(&part, k).unwrap();
                prop_assert_eq!(r.unique_bytes, global.unique_bytes());
                prop_assert_eq!(r.unique_stored_bytes, global.unique_stored_bytes());
                prop_assert_eq!(r.reconciled_entries, ds.distinct_chunks());
                prop_assert!((r.savings() - global.savings()).abs() < 1e-12);
                prop_assert_eq!(r.passes.len(), n.div_ceil(k));
                // Each pass streams what the earlier ones kept.
                let mut kept = 0;
                for pass in &r.passes {
                    prop_assert_eq!(pass.entries_read, kept);
                    kept += pass.in_memory_entries - pass.cross_duplicates;
                }
                let freed: u64 = r.passes.iter().map(|p| p.bytes_freed).sum();
                prop_assert_eq!(part.unique_bytes() - freed, r.unique_bytes);
                if k == 1 {
                    prop_assert_eq!(r.peak_index_entries(), part.peak_entries());
                }
                if k >= n {
                    prop_assert_eq!(r.peak_index_entries(), ds.distinct_chunks());
                }
                peaks.push(r.peak_index_entries());
            }
            // Nested groups: peak(k) <= peak(k') whenever k divides k'.
            for k in 1..=n {
                for k2 in (k..=n).step_by(k) {
                    prop_assert!(peaks[k - 1] <= peaks[k2 - 1], "k {} {} {:?}", k, k2, peaks);
                }
            }
        }
    }

    #[test]
    fn path_subtree_partitions_respect_the_share(ds in arb_dataset(), share in 0.0f64..1.0) {
        let p = partition_files(&ds, Part::Path, share);
        let part = dedup_partitions(&ds, &p).unwrap();
        let limit = share * ds.logical_bytes() as f64;
        for q in &part.parts {
            // Whole sub-trees fit; only a directory's own files may not.
            if !q.name.ends_with("(own files)") {
                prop_assert!(q.logical_bytes as f64 <= limit, "{} {}", q.name, q.logical_bytes);
            }
        }
    }
}
