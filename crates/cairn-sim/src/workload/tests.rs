//! Tests of the workload generators against the shapes they follow: DDFS
//! §5.3 generations (`001_3652cceaf162c5a1.txt`: per-generation dedup and
//! local compression ratios) and GC-paper lineages
//! (`003_ea5fccc485a97c5d.txt` §4.2: carry-over, no cross-lineage sharing,
//! deletion of old generations), plus the real-bytes mode.

use std::collections::HashMap;

use cairn_core::{ChunkerConfig, FingerprintAlgo, FpSet, TraceChunk, TraceEvent, TraceSource};

use super::*;

fn events(mut src: Box<dyn TraceSource>) -> Vec<TraceEvent> {
    let mut v = Vec::new();
    while let Some(e) = src.next_event().unwrap() {
        v.push(e);
    }
    v
}

fn chunks(src: Box<dyn TraceSource>) -> Vec<TraceChunk> {
    events(src)
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::Chunk(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ddfs(kv: &[(&str, &str)]) -> Box<dyn Workload> {
    from_name("ddfs", &pairs(kv)).unwrap()
}

/// Per generation: logical bytes / bytes of fingerprints not seen before.
fn dedup_ratios(w: &dyn Workload) -> Vec<f64> {
    let mut seen = FpSet::default();
    (0..w.generations())
        .map(|g| {
            let (mut logical, mut new) = (0u64, 0u64);
            for c in chunks(w.generation(g)) {
                logical += c.size as u64;
                if seen.insert(c.fp) {
                    new += c.size as u64;
                }
            }
            logical as f64 / new as f64
        })
        .collect()
}

#[test]
fn ddfs_is_deterministic_per_seed() {
    let kv = [
        ("generation_bytes", "8MiB"),
        ("generations", "4"),
        ("streams", "3"),
        ("files_per_stream", "2"),
        ("seed", "11"),
    ];
    let a = ddfs(&kv);
    let b = ddfs(&kv);
    let other = ddfs(&[
        ("generation_bytes", "8MiB"),
        ("generations", "4"),
        ("seed", "12"),
    ]);
    for g in 0..4 {
        let ea = events(a.generation(g));
        assert_eq!(ea, events(b.generation(g)), "generation {g}");
        assert_eq!(ea, events(a.generation(g)), "generation {g} recomputed");
        assert_ne!(chunks(a.generation(g)), chunks(other.generation(g)));
    }
    // Generation 3 alone (fresh workload) equals generation 3 after the others.
    assert_eq!(events(ddfs(&kv).generation(3)), events(a.generation(3)));
    // Layout: 3 stream directories of 2 parts each.
    let ev = events(a.generation(0));
    let dirs = ev
        .iter()
        .filter(|e| matches!(e, TraceEvent::DirStart { .. }))
        .count();
    let files = ev
        .iter()
        .filter(|e| matches!(e, TraceEvent::FileStart { .. }))
        .count();
    assert_eq!((dirs, files), (3, 6));
    assert_eq!(a.name(), "ddfs");
    assert!(a.deleted_after(3).is_empty());
}

#[test]
fn ddfs_hits_target_dedup_ratio() {
    for (target, reorder) in [(5.0, "0.05"), (10.0, "0.01"), (30.0, "0.02"), (100.0, "0")] {
        let t = target.to_string();
        let w = ddfs(&[
            ("generation_bytes", "128MiB"),
            ("generations", "4"),
            ("streams", "2"),
            ("target_dedup_ratio", &t),
            ("reorder_rate", reorder),
            ("seed", "5"),
        ]);
        let r = dedup_ratios(w.as_ref());
        assert_eq!(r[0], 1.0, "generation 0 is all new");
        for (g, &ratio) in r.iter().enumerate().skip(1) {
            assert!(
                (ratio / target - 1.0).abs() < 0.10,
                "target {target} generation {g}: measured {ratio:.2}"
            );
        }
    }
    // change_rate is the reciprocal.
    let w = ddfs(&[
        ("generation_bytes", "64MiB"),
        ("generations", "2"),
        ("change_rate", "0.2"),
        ("delete_rate", "0"),
    ]);
    let r = dedup_ratios(w.as_ref());
    assert!((r[1] / 5.0 - 1.0).abs() < 0.10, "{r:?}");
}

#[test]
fn ddfs_sizes_and_compression() {
    for comp in [1.0, 2.0, 3.5] {
        let c = comp.to_string();
        let w = ddfs(&[
            ("generation_bytes", "64MiB"),
            ("generations", "3"),
            ("streams", "2"),
            ("target_compression", &c),
            ("fp_width", "20"),
        ]);
        for g in 0..3 {
            let cs = chunks(w.generation(g));
            let size: u64 = cs.iter().map(|c| c.size as u64).sum();
            let stored: u64 = cs.iter().map(|c| c.stored_size as u64).sum();
            let ratio = size as f64 / stored as f64;
            assert!(
                (ratio / comp - 1.0).abs() < 0.03,
                "compression {comp}: {ratio}"
            );
            // The default delete rate keeps generations near their size.
            assert!(
                (size as f64 / (64u64 << 20) as f64 - 1.0).abs() < 0.05,
                "gen {g} size {size}"
            );
            assert!(cs.iter().all(|c| c.fp.len() == 20));
            let avg = size as f64 / cs.len() as f64;
            assert!((avg / 8192.0 - 1.0).abs() < 0.05, "avg chunk {avg}");
        }
    }
    // Without deletions the generations grow by the new data.
    let w = ddfs(&[
        ("generation_bytes", "16MiB"),
        ("delete_rate", "0"),
        ("generations", "2"),
    ]);
    let s0: u64 = chunks(w.generation(0)).iter().map(|c| c.size as u64).sum();
    let s1: u64 = chunks(w.generation(1)).iter().map(|c| c.size as u64).sum();
    assert!(s1 > s0 && ((s1 - s0) as f64 / s1 as f64 - 1.0 / 30.0).abs() < 0.005);
}

fn lineage(kv: &[(&str, &str)]) -> Box<dyn Workload> {
    from_name("lineage", &pairs(kv)).unwrap()
}

/// (lineage dir, file name) -> chunks, for one generation.
fn lineage_files(w: &dyn Workload, g: usize) -> HashMap<(String, String), Vec<TraceChunk>> {
    let mut out: HashMap<(String, String), Vec<TraceChunk>> = HashMap::new();
    let (mut dir, mut file) = (String::new(), String::new());
    for e in events(w.generation(g)) {
        match e {
            TraceEvent::DirStart { name, .. } => dir = String::from_utf8(name).unwrap(),
            TraceEvent::FileStart { name, meta } => {
                file = String::from_utf8(name).unwrap();
                assert!(meta.size > 0);
                out.insert((dir.clone(), file.clone()), Vec::new());
            }
            TraceEvent::Chunk(c) => out.get_mut(&(dir.clone(), file.clone())).unwrap().push(c),
            _ => {}
        }
    }
    out
}

#[test]
fn lineage_carry_isolation_and_deletion() {
    let w = lineage(&[
        ("lineages", "5"),
        ("generations", "6"),
        ("retain", "3"),
        ("file_size", "uniform:4MiB-12MiB"),
        ("carry_fraction", "0.8"),
        ("seed", "9"),
    ]);
    let mut owner: HashMap<cairn_core::Fingerprint, String> = HashMap::new();
    for g in 0..6 {
        let files = lineage_files(w.as_ref(), g);
        let lo = (g + 1).saturating_sub(3);
        assert_eq!(files.len(), 5 * (g + 1 - lo), "live files at {g}");
        for ((dir, name), cs) in &files {
            let v: usize = name.strip_prefix("gen-").unwrap().parse().unwrap();
            assert!((lo..=g).contains(&v), "{name} live at {g}");
            for c in cs {
                let o = owner.entry(c.fp).or_insert_with(|| dir.clone());
                assert_eq!(o, dir, "fingerprint shared across lineages");
            }
        }
        if g == 0 {
            continue;
        }
        for l in 0..5 {
            let dir = format!("lineage-{l:04}");
            let prev = &files[&(dir.clone(), format!("gen-{:06}", g - 1))];
            let cur = &files[&(dir.clone(), format!("gen-{g:06}"))];
            let cur_set: FpSet = cur.iter().map(|c| c.fp).collect();
            let prev_bytes: u64 = prev.iter().map(|c| c.size as u64).sum();
            let kept: u64 = prev
                .iter()
                .filter(|c| cur_set.contains(&c.fp))
                .map(|c| c.size as u64)
                .sum();
            let carry = kept as f64 / prev_bytes as f64;
            assert!((carry - 0.8).abs() < 0.05, "{dir} gen {g}: carry {carry}");
            let cur_bytes: u64 = cur.iter().map(|c| c.size as u64).sum();
            assert!((cur_bytes as f64 / prev_bytes as f64 - 1.0).abs() < 0.02);
            assert!((4 << 20..=(12 << 20) + 65536).contains(&cur_bytes));
        }
    }
    for g in 0..3 {
        assert!(w.deleted_after(g).is_empty());
    }
    assert_eq!(w.deleted_after(3), vec![0]);
    assert_eq!(w.deleted_after(5), vec![2]);

    // "new" listing: one file per lineage, the one written at g.
    let n = lineage(&[
        ("lineages", "5"),
        ("generations", "6"),
        ("retain", "3"),
        ("file_size", "uniform:4MiB-12MiB"),
        ("carry_fraction", "0.8"),
        ("seed", "9"),
        ("listing", "new"),
    ]);
    let live = lineage_files(w.as_ref(), 4);
    let new = lineage_files(n.as_ref(), 4);
    assert_eq!(new.len(), 5);
    for (k, cs) in &new {
        assert_eq!(k.1, "gen-000004");
        assert_eq!(&live[k], cs);
    }
    assert_eq!(n.deleted_after(4), vec![1]);
}

#[test]
fn lineage_size_distributions_and_determinism() {
    for (spec, lo, hi) in [
        ("6MiB", 6 << 20, 6 << 20),
        ("fixed:2MiB", 2 << 20, 2 << 20),
        ("lognormal:4MiB:0.7", 1 << 13, 256 << 20),
    ] {
        let kv = [
            ("lineages", "12"),
            ("generations", "2"),
            ("file_size", spec),
        ];
        let w = lineage(&kv);
        let files = lineage_files(w.as_ref(), 0);
        assert_eq!(files.len(), 12);
        for cs in files.values() {
            let s: u64 = cs.iter().map(|c| c.size as u64).sum();
            assert!(s + 40_000 >= lo && s <= hi + 40_000, "{spec}: {s}");
        }
        assert_eq!(events(w.generation(1)), events(lineage(&kv).generation(1)));
    }
    let w = lineage(&[
        ("file_size", "lognormal:1MiB:1.0"),
        ("lineages", "64"),
        ("generations", "1"),
    ]);
    let sizes: Vec<u64> = lineage_files(w.as_ref(), 0)
        .values()
        .map(|cs| cs.iter().map(|c| c.size as u64).sum())
        .collect();
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(max / min >= 4, "lognormal sizes vary: {min}..{max}");
    let a = chunks(
        lineage(&[("seed", "1"), ("generations", "1"), ("file_size", "1MiB")]).generation(0),
    );
    let b = chunks(
        lineage(&[("seed", "2"), ("generations", "1"), ("file_size", "1MiB")]).generation(0),
    );
    assert_ne!(a, b);
}

#[test]
fn parameter_errors() {
    let err = |name: &str, kv: &[(&str, &str)]| match from_name(name, &pairs(kv)) {
        Ok(_) => panic!("{name} {kv:?} accepted"),
        Err(e) => {
            assert!(matches!(e, cairn_core::Error::InvalidInput(_)));
            e.to_string()
        }
    };
    let m = err("fsl", &[]);
    assert!(m.contains("ddfs") && m.contains("lineage"), "{m}");
    let m = err("ddfs", &[("nope", "1")]);
    assert!(m.contains("nope") && m.contains("target_dedup_ratio") && m.contains("reorder_rate"));
    let m = err("lineage", &[("streams", "1")]);
    assert!(m.contains("carry_fraction") && m.contains("retain"), "{m}");
    for kv in [
        ("streams", "0"),
        ("target_dedup_ratio", "1"),
        ("target_dedup_ratio", "abc"),
        ("change_rate", "1.5"),
        ("target_compression", "0.5"),
        ("reorder_rate", "2"),
        ("avg_chunk", "12"),
        ("fp_width", "40"),
        ("generation_bytes", "12Q"),
        ("generation_bytes", "1000TiB"),
    ] {
        let m = err("ddfs", &[kv]);
        assert!(m.contains(kv.0), "{kv:?}: {m}");
    }
    err("ddfs", &[("delete_rate", "0.7"), ("reorder_rate", "0.7")]);
    for kv in [
        ("file_size", "uniform:9MiB-1MiB"),
        ("file_size", "gamma:1MiB"),
        ("file_size", "lognormal:1MiB:x"),
        ("retain", "0"),
        ("carry_fraction", "1.2"),
        ("listing", "all"),
    ] {
        let m = err("lineage", &[kv]);
        assert!(m.contains(kv.0), "{kv:?}: {m}");
    }
    let w = from_name(
        "ddfs",
        &pairs(&[("avg_chunk", "4K"), ("generation_bytes", "1M")]),
    )
    .unwrap();
    assert_eq!(w.generations(), 10);
    assert!(DdfsParams {
        target_dedup_ratio: 0.5,
        ..Default::default()
    }
    .validate()
    .is_err());
    assert!(LineageParams::default().validate().is_ok());
}

/// Chunks every file of `dir` (recursively, sorted) with FastCDC and
/// returns (logical bytes, bytes of fingerprints not in `seen`), adding them.
fn cdc_new_bytes(dir: &std::path::Path, seen: &mut FpSet) -> (u64, u64) {
    let cfg = ChunkerConfig::default();
    let mut chunker = cairn_chunk::new_chunker(&cfg);
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let (mut logical, mut new) = (0u64, 0u64);
    let mut cuts = Vec::new();
    for p in paths {
        let data = std::fs::read(&p).unwrap();
        cairn_chunk::cut_points(chunker.as_mut(), &data, &mut cuts);
        let mut start = 0;
        for &end in &cuts {
            let fp = cairn_chunk::fingerprint(FingerprintAlgo::Blake3, &data[start..end]);
            logical += (end - start) as u64;
            if seen.insert(fp) {
                new += (end - start) as u64;
            }
            start = end;
        }
    }
    (logical, new)
}

#[test]
fn real_bytes_dedup_near_target() {
    let w = ddfs(&[
        ("generation_bytes", "16MiB"),
        ("generations", "3"),
        ("streams", "2"),
        ("target_dedup_ratio", "10"),
        ("seed", "3"),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = FpSet::default();
    for g in 0..3 {
        let dir = tmp.path().join(format!("gen{g}"));
        let st = write_generation_bytes(w.as_ref(), g, &dir).unwrap();
        assert_eq!(st.files, 2);
        let trace: u64 = chunks(w.generation(g)).iter().map(|c| c.size as u64).sum();
        assert_eq!(st.bytes, trace);
        let (logical, new) = cdc_new_bytes(&dir, &mut seen);
        assert_eq!(logical, st.bytes);
        let ratio = logical as f64 / new as f64;
        if g == 0 {
            assert!(ratio < 1.01, "generation 0 is new: {ratio}");
        } else {
            assert!(
                (ratio / 10.0 - 1.0).abs() < 0.20,
                "gen {g}: CDC ratio {ratio:.2}"
            );
        }
    }
    // Lineage layout (directories) writes too, and is byte-identical per seed.
    let l = lineage(&[
        ("lineages", "2"),
        ("generations", "2"),
        ("file_size", "256KiB"),
    ]);
    let a = tmp.path().join("la");
    let b = tmp.path().join("lb");
    let st = write_generation_bytes(l.as_ref(), 1, &a).unwrap();
    write_generation_bytes(l.as_ref(), 1, &b).unwrap();
    assert_eq!((st.dirs, st.files), (2, 4));
    let f = "lineage-0001/gen-000001";
    assert_eq!(
        std::fs::read(a.join(f)).unwrap(),
        std::fs::read(b.join(f)).unwrap()
    );
}
