//! `cairn trace` and `cairn sim` end to end: the reference traces give their
//! expected counts, a trace recorded from a tree replays to exactly the
//! counters of the real backup of that tree, generated workloads are
//! deterministic and hit their dedup target, and a malformed trace is one
//! clear error naming the offset.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn expected_new(dir: &str) -> Vec<u64> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(testdata(&format!("{dir}/expected.json"))).unwrap())
            .unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|g| g["new_vs_previous"].as_u64().unwrap())
        .collect()
}

fn sim(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["sim", "--json"];
    all.extend_from_slice(args);
    cairn(dir, &all).ok().json()
}

#[test]
fn reference_traces_store_exactly_the_new_chunks() {
    let tmp = tempfile::tempdir().unwrap();
    for (dir, files) in [
        ("destor", ["gen0.trace", "gen1.trace"]),
        ("fsl", ["gen0.hash", "gen1.hash"]),
    ] {
        let paths: Vec<String> = files
            .iter()
            .map(|f| s(&testdata(&format!("{dir}/{f}"))).to_string())
            .collect();
        let mut args: Vec<&str> = paths.iter().map(String::as_str).collect();
        args.push("--restore");
        let report = sim(tmp.path(), &args);
        let gens = report["generations"].as_array().unwrap();
        let unique: Vec<u64> = gens
            .iter()
            .map(|g| g["unique_chunks"].as_u64().unwrap())
            .collect();
        assert_eq!(unique, expected_new(dir), "{dir}");
        for key in [
            "id",
            "chunks",
            "unique_chunks",
            "logical_bytes",
            "stored_bytes",
            "dedup_ratio",
            "bloom_negatives",
            "cache_hits",
            "index_page_reads",
            "prefetches",
            "containers_written",
            "containers_read",
            "speed_factor",
            "modeled_seconds",
            "wall_seconds",
        ] {
            assert!(
                gens[0].get(key).is_some() && report["totals"].get(key).is_some(),
                "{key}"
            );
        }
        assert!(report["totals"]["speed_factor"].as_f64().unwrap() > 0.0);
        assert!(report["config"].is_object());
    }
}

/// Traces compressed whole (zstd, gzip) replay to the rows of the plain
/// ones, read through their compression.
#[test]
fn compressed_traces_replay_as_the_plain_ones() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let plain: Vec<String> = ["gen0.hash", "gen1.hash"]
        .iter()
        .map(|f| s(&testdata(&format!("fsl/{f}"))).to_string())
        .collect();
    let zst = tmp.path().join("gen0.hash.zst");
    let bytes = std::fs::read(&plain[0]).unwrap();
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    let gz = tmp.path().join("gen1.hash.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(&plain[1]).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let rows = |args: &[&str]| -> Vec<(u64, u64, u64)> {
        sim(tmp.path(), args)["generations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let f = |k: &str| g[k].as_u64().unwrap();
                (f("chunks"), f("unique_chunks"), f("stored_bytes"))
            })
            .collect()
    };
    let want = rows(&[&plain[0], &plain[1]]);
    assert_eq!(
        want.iter().map(|r| r.1).collect::<Vec<_>>(),
        expected_new("fsl")
    );
    assert_eq!(rows(&[s(&zst), s(&gz)]), want);
}

#[test]
fn a_recorded_trace_replays_to_the_real_backups_counters() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let repo = tmp.path().join("repo");
    let mut rng = Rng::new(77);
    build_random_files(&tree, &mut rng, 10, 400_000);
    let mut traces = Vec::new();
    let mut real = Vec::new();
    for g in 0..2 {
        if g == 1 {
            build_random_files(&tree.join("new"), &mut rng, 3, 300_000);
        }
        let t = tmp.path().join(format!("gen{g}.ctr"));
        cairn(&repo, &["trace", s(&tree), "-o", s(&t)]).ok();
        traces.push(t);
        // --force: the trace replays every chunk, so the real backup reads every file.
        real.push(
            cairn(&repo, &["backup", "--json", "--force", s(&tree)])
                .ok()
                .json()["stats"]
                .clone(),
        );
    }
    let args: Vec<&str> = traces.iter().map(|t| s(t)).collect();
    let report = sim(tmp.path(), &args);
    for (g, (r, s)) in real
        .iter()
        .zip(report["generations"].as_array().unwrap())
        .enumerate()
    {
        let c = &r["counters"];
        assert_eq!(r["data_chunks"], s["chunks"], "gen {g}");
        assert_eq!(r["new_data_chunks"], s["unique_chunks"], "gen {g}");
        assert_eq!(r["logical_bytes"], s["logical_bytes"], "gen {g}");
        for key in [
            "bloom_negatives",
            "cache_hits",
            "index_page_reads",
            "prefetches",
            "containers_written",
        ] {
            assert_eq!(c[key], s[key], "gen {g}: {key}");
        }
    }
}

/// The simulated restore runs the real restore's plan order and policy:
/// restoring each generation's snapshot reads exactly the data containers
/// the simulator counts for the recorded trace and holds as much memory,
/// for every policy at several cache sizes, including generations whose
/// chunks are scattered over older containers; every restore is
/// byte-identical.
#[test]
fn real_and_simulated_restores_read_the_same_containers() {
    real_and_simulated_restores_agree(
        "none",
        &["container-lru", "chunk-lru", "faa", "alacc", "belady"],
    );
}

/// The same with the default rewrite scheme: the simulator rewrites the
/// same chunks as the real backup, and restores read the same containers.
#[test]
fn real_and_simulated_rewrites_agree() {
    real_and_simulated_restores_agree("lbw:window=2,loss=20", &["faa"]);
}

fn real_and_simulated_restores_agree(rewrite: &str, policies: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let repo = tmp.path().join("repo");
    let mut rng = Rng::new(78);
    build_random_files(&tree, &mut rng, 12, 300_000);
    cairn(
        &repo,
        &[
            "init",
            "-q",
            "--container-size",
            "256KiB",
            "--rewrite",
            rewrite,
        ],
    )
    .ok();
    let mut rewritten = Vec::new();
    let mut traces = Vec::new();
    let mut snaps = Vec::new();
    let mut manifests = Vec::new();
    for g in 0..3 {
        if g > 0 {
            // A file spliced from slices of the older files in shuffled
            // order: its chunks alternate between old containers.
            let old: Vec<Vec<u8>> = files_under(&tree)
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect();
            let mut mix = Vec::new();
            for k in 0..60 {
                let f = &old[(k * 7 + g * 5) % old.len()];
                let at = (k * 37_000) % (f.len() - 40_000);
                mix.extend_from_slice(&f[at..at + 40_000]);
            }
            write_file(&tree.join(format!("mix{g}")), &mix, 0o644);
            build_random_files(&tree.join(format!("new{g}")), &mut rng, 2, 200_000);
        }
        let t = tmp.path().join(format!("gen{g}.ctr"));
        cairn(&repo, &["trace", s(&tree), "-o", s(&t)]).ok();
        traces.push(t);
        let b = cairn(&repo, &["backup", "--json", "--force", s(&tree)])
            .ok()
            .json();
        snaps.push(b["id"].as_str().unwrap().to_string());
        rewritten.push(b["stats"]["rewritten_data_chunks"].clone());
        manifests.push(Manifest::capture(&tree));
    }
    for &policy in policies {
        let mut total_reads = Vec::new();
        for cache in ["256KiB", "768KiB", "4MiB"] {
            let mut args: Vec<&str> = vec![
                "--rewrite",
                rewrite,
                "--restore",
                "--restore-policy",
                policy,
                "--restore-cache",
                cache,
                "--container-size",
                "256KiB",
            ];
            args.extend(traces.iter().map(|t| s(t)));
            let report = sim(tmp.path(), &args);
            let gens = report["generations"].as_array().unwrap();
            for (g, r) in rewritten.iter().enumerate() {
                assert_eq!(r, &gens[g]["rewritten_chunks"], "{rewrite}: generation {g}");
            }
            total_reads.push(
                gens.iter()
                    .map(|g| g["containers_read"].as_u64().unwrap())
                    .sum::<u64>(),
            );
            for (g, snap) in snaps.iter().enumerate() {
                let out = tmp.path().join(format!("out-{policy}-{cache}-{g}"));
                let r = cairn(
                    &repo,
                    &[
                        "restore",
                        "--json",
                        snap,
                        "--target",
                        s(&out),
                        "--restore-policy",
                        policy,
                        "--restore-cache",
                        cache,
                    ],
                )
                .ok()
                .json();
                assert_tree_matches(&manifests[g], &out.join("tree"));
                // The simulator restores each generation right after its
                // backup; the real restores run after the last one. With
                // rewriting, a later backup may have copied an earlier
                // generation's chunks into newer containers (the canonical
                // copies from then on), so only the last generation's
                // restore sees the same repository in both.
                if rewrite != "none" {
                    // Known gap (issue 10's closing note): with rewriting the
                    // last generation's reads agree to within 1%, not exactly.
                    if g + 1 == snaps.len() {
                        let real = r["summary"]["policy"]["container_reads"].as_f64().unwrap();
                        let sim = gens[g]["containers_read"].as_f64().unwrap();
                        assert!(
                            (real - sim).abs() <= 0.01 * sim + 1.0,
                            "{policy} {cache}: {real} vs {sim}"
                        );
                    }
                    continue;
                }
                assert_eq!(
                    r["summary"]["policy"]["container_reads"], gens[g]["containers_read"],
                    "{policy}, generation {g}, cache {cache}: {r}"
                );
                assert_eq!(
                    r["summary"]["policy"]["peak_memory_bytes"], gens[g]["restore_memory_bytes"],
                    "{policy}, generation {g}, cache {cache}"
                );
            }
        }
        // The cache size matters here: chunks are scattered over containers.
        assert!(total_reads[0] > total_reads[2], "{policy}: {total_reads:?}");
    }
}

/// `cairn sim` of two 96 MiB DDFS generations with `extra` flags, as JSON.
fn two_small_ddfs_generations(dir: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--workload",
        "ddfs",
        "--param",
        "generations=2",
        "--param",
        "generation_bytes=96MiB",
    ];
    args.extend_from_slice(extra);
    sim(dir, &args)
}

/// `--summary-vector-chunks` sizes the filter: one sized far below the
/// workload's unique chunks (the filter's floor is 1,024 chunks; the first
/// backup stores about 12,000) answers "certainly new" less often (its
/// false positives), with the same dedup, and the report's config names
/// the size.
#[test]
fn the_summary_vector_is_sized_as_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| two_small_ddfs_generations(tmp.path(), extra);
    let sized = run(&[]);
    let tiny = run(&["--summary-vector-chunks", "64"]);
    let t = |r: &Value, k: &str| r["totals"][k].as_u64().unwrap();
    assert_eq!(t(&tiny, "unique_chunks"), t(&sized, "unique_chunks"));
    assert!(
        t(&tiny, "bloom_negatives") < t(&sized, "bloom_negatives") / 2,
        "{} vs {}",
        t(&tiny, "bloom_negatives"),
        t(&sized, "bloom_negatives")
    );
    assert_eq!(tiny["config"]["index"]["expected_chunks"], 64);
    assert_eq!(sized["config"]["index"]["expected_chunks"], 1u64 << 22);
    let e = cairn(
        tmp.path(),
        &["sim", "--workload", "ddfs", "--summary-vector-chunks", "0"],
    )
    .code(2)
    .all_output();
    assert!(e.contains("summary-vector-chunks"), "{e}");
}

/// `--index-part-budget` bounds the in-memory index part: the same dedup
/// in every generation, the first backup's lookup RAM lower (its part is
/// merged into the index whenever it passes the budget), more index bytes
/// written, and the report's config names the budget. Refused where it
/// could not act: the frugal index, several writers.
#[test]
fn the_index_part_budget_bounds_the_in_memory_part() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| two_small_ddfs_generations(tmp.path(), extra);
    let free = run(&[]);
    let bounded = run(&["--index-part-budget", "1000"]);
    for g in 0..2 {
        let u = |r: &Value| r["generations"][g]["unique_chunks"].as_u64().unwrap();
        assert_eq!(u(&bounded), u(&free), "generation {g}");
    }
    let ram = |r: &Value| {
        r["generations"][0]["index_ram_bytes_per_chunk"]
            .as_f64()
            .unwrap()
    };
    assert!(
        ram(&bounded) < ram(&free),
        "{} vs {}",
        ram(&bounded),
        ram(&free)
    );
    let written = |r: &Value| r["counters"]["bytes_written"].as_u64().unwrap();
    assert!(written(&bounded) > written(&free));
    assert_eq!(bounded["config"]["index"]["part_budget"], 1000);
    assert!(free["config"]["index"].get("part_budget").is_none());
    for extra in [&["--index", "frugal"][..], &["--writers", "2"][..]] {
        let mut args = vec!["sim", "--workload", "ddfs", "--index-part-budget", "5"];
        args.extend_from_slice(extra);
        let e = cairn(tmp.path(), &args).code(1).all_output();
        assert!(e.contains("--index-part-budget"), "{e}");
    }
}

#[test]
fn workloads_are_deterministic_and_hit_their_dedup_target() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--workload",
        "ddfs",
        "--param",
        "generations=4",
        "--param",
        "generation_bytes=48MiB",
        "--param",
        "target_dedup_ratio=10",
        "--param",
        "seed=5",
        // The generator's dedup target, not a rewrite scheme's.
        "--rewrite",
        "none",
    ];
    let a = sim(tmp.path(), &args);
    let b = sim(tmp.path(), &args);
    let counts = |r: &Value| -> Vec<(u64, u64, u64)> {
        r["generations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["chunks"].as_u64().unwrap(),
                    g["unique_chunks"].as_u64().unwrap(),
                    g["index_page_reads"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(counts(&a), counts(&b));
    for g in &a["generations"].as_array().unwrap()[1..] {
        let ratio = g["dedup_ratio"].as_f64().unwrap();
        assert!((9.0..=11.0).contains(&ratio), "dedup ratio {ratio}");
    }
}

#[test]
fn bad_trace_input_is_one_clear_line() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(testdata("fsl/gen0.hash")).unwrap();
    let cut = tmp.path().join("cut.hash");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let r = cairn(tmp.path(), &["sim", s(&cut)]).code(1);
    let line = r.one_line_error();
    assert!(line.contains("offset") || line.contains("byte"), "{line}");
    let r = cairn(tmp.path(), &["sim", s(&tmp.path().join("missing.trace"))]).code(1);
    r.one_line_error();
    // An unknown workload is a usage error listing the workloads.
    let r = cairn(tmp.path(), &["sim", "--workload", "nope"]).code(2);
    assert!(r.one_line_error().contains("ddfs"));
    let r = cairn(
        tmp.path(),
        &[
            "sim",
            s(&testdata("destor/gen0.trace")),
            "--device",
            "floppy",
        ],
    )
    .code(1);
    r.one_line_error();
}

#[test]
fn analyze_reports_and_plots() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut rng = Rng::new(3);
    build_random_files(&data, &mut rng, 4, 300_000);
    copy_dir(&data, &tmp.path().join("copy"));
    let r = cairn(
        tmp.path(),
        &["analyze", "--json", s(&data), s(&tmp.path().join("copy"))],
    )
    .ok();
    let v = r.json();
    assert!(
        v["chunk_size_sweep"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{v}"
    );
    let svg = tmp.path().join("fig.svg");
    cairn(tmp.path(), &["analyze", "-q", s(&data), "--plot", s(&svg)]).ok();
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let r = cairn(
        tmp.path(),
        &[
            "analyze",
            s(&data),
            "--plot",
            s(&tmp.path().join("fig.bmp")),
        ],
    )
    .code(1);
    assert!(r.one_line_error().contains(".svg, .png or .pdf"));
    cairn(tmp.path(), &["analyze", s(&tmp.path().join("missing"))])
        .code(1)
        .one_line_error();
}

/// `cairn experiment NAME --quick --json --out OUT`, parsed.
fn quick_experiment(dir: &std::path::Path, name: &str, out: &std::path::Path) -> serde_json::Value {
    cairn(
        dir,
        &["experiment", name, "--quick", "--json", "--out", s(out)],
    )
    .ok()
    .json()
}

#[test]
fn experiment_index_io_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let v = quick_experiment(tmp.path(), "index-io", &out);
    assert_eq!(v["experiment"], "index-io");
    let rows = v["rows"].as_array().unwrap();
    let reads = |case: &str| {
        rows.iter()
            .find(|r| r["workload"] == "ddfs" && r["case"] == case)
            .unwrap()["index_page_reads"]
            .as_u64()
            .unwrap()
    };
    for case in ["bloom", "cache", "both"] {
        assert!(reads(case) <= reads("none"), "{case}");
    }
    assert!(
        reads("both") as f64 <= 0.01 * reads("none") as f64,
        "Summary Vector + LPC avoid >= 99%"
    );
    assert!(out.join("index-io.csv").exists() && out.join("index-io.svg").exists());
    cairn(tmp.path(), &["experiment", "nope"])
        .code(2)
        .one_line_error();
}

/// `cairn experiment gc --quick --json`: mark rows for every sweep and
/// collector, the copy rows, the CSVs and one figure per sweep; a trace is
/// refused (the experiment backs up generated files).
#[test]
fn experiment_gc_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let v = quick_experiment(tmp.path(), "gc", &out);
    assert_eq!(v["experiment"], "gc");
    let rows = v["rows"].as_array().unwrap();
    for sweep in ["capacity", "compression", "files"] {
        for c in ["lgc", "lgc-2", "pgc", "pgc-2", "pgc+"] {
            assert!(
                rows.iter()
                    .any(|r| r["sweep"] == sweep && r["collector"] == c),
                "{sweep} {c}"
            );
        }
        assert!(out.join(format!("gc-{sweep}.svg")).exists());
    }
    let copy = v["copy"].as_array().unwrap();
    assert_eq!(copy.len(), 3);
    assert!(copy
        .iter()
        .all(|r| r["reclaimed_bytes"].as_i64().unwrap() > 0));
    assert!(out.join("gc.csv").exists() && out.join("gc-copy.csv").exists());
    let err = cairn(
        tmp.path(),
        &["experiment", "gc", "--quick", "--trace", "x.ctr"],
    )
    .code(1)
    .one_line_error();
    assert!(err.contains("no --trace"), "{err}");
}

#[test]
fn experiment_index_ram_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let v = quick_experiment(tmp.path(), "index-ram", &out);
    let rows = v["rows"].as_array().unwrap();
    let bpc = |i: &str| {
        rows.iter().find(|r| r["index"] == i).unwrap()["bytes_per_chunk"]
            .as_f64()
            .unwrap()
    };
    assert!((6.0..=6.3).contains(&bpc("frugal")), "{}", bpc("frugal"));
    assert_eq!(bpc("ddfs"), 1.25);
    assert!(out.join("index-ram.csv").exists());
}

/// `--json` shapes of the lookup experiments, and the papers' directions on
/// the quick workload: lazy wins under HDD, eager under Optane and PM.
#[test]
fn experiment_eager_vs_lazy_and_ring_size_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let run = |name: &str| quick_experiment(tmp.path(), name, &out);
    let v = run("eager-vs-lazy");
    assert_eq!(v["experiment"], "eager-vs-lazy");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    for r in rows {
        for k in [
            "total_seconds",
            "bloom_seconds",
            "pre_lookup_seconds",
            "disk_seconds",
            "post_lookup_seconds",
        ] {
            assert!(r[k].as_f64().unwrap() >= 0.0, "{k} in {r}");
        }
        assert!(r["device"].is_string() && r["strategy"].is_string());
    }
    let total = |d: &str, st: &str| {
        rows.iter()
            .find(|r| r["device"] == d && r["strategy"] == st)
            .unwrap()["total_seconds"]
            .as_f64()
            .unwrap()
    };
    assert!(total("HDD", "lazy") < total("HDD", "eager"));
    assert!(total("Optane", "eager") < total("Optane", "lazy"));
    assert!(total("PM", "eager") < total("PM", "lazy"));
    assert!(v["eq8"]["HDD"]["lazy_wins"].as_bool().unwrap());
    assert!(out.join("eager-vs-lazy.csv").exists() && out.join("eager-vs-lazy.svg").exists());

    let v = run("ring-size");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4 * 12);
    for d in ["HDD", "SSD", "Optane", "PM"] {
        let best = v["optimum"][d].as_u64().unwrap();
        let min = rows
            .iter()
            .filter(|r| r["device"] == d)
            .map(|r| r["total_seconds"].as_f64().unwrap())
            .fold(f64::MAX, f64::min);
        let at_best = rows
            .iter()
            .find(|r| r["device"] == d && r["ring_size"] == best)
            .unwrap()["total_seconds"]
            .as_f64()
            .unwrap();
        assert_eq!(at_best, min, "{d}");
    }
    assert!(out.join("ring-size.csv").exists() && out.join("ring-size.svg").exists());
}

/// `cairn sim --lookup auto` picks a strategy per device and says why.
#[test]
fn sim_lookup_auto_chooses_per_device() {
    let tmp = tempfile::tempdir().unwrap();
    let mut chosen = Vec::new();
    for device in ["hdd", "pm"] {
        let run = cairn(
            tmp.path(),
            &[
                "sim",
                "--json",
                "--workload",
                "ddfs",
                "--param",
                "generations=3",
                "--param",
                "generation_bytes=8MiB",
                "--lookup",
                "auto",
                "--device",
                device,
            ],
        )
        .ok();
        let v = run.json();
        let c = &v["lookup_choice"];
        assert!(c["reason"].as_str().unwrap().contains("eq. (8)"), "{c}");
        assert_eq!(v["config"]["index"]["lookup"]["strategy"], c["strategy"]);
        chosen.push(c["strategy"].as_str().unwrap().to_string());
    }
    assert_eq!(chosen[1], "eager", "PM is within 7x of DRAM: eager wins");
    cairn(
        tmp.path(),
        &["sim", "--workload", "ddfs", "--lookup-device", "hdd"],
    )
    .code(1)
    .one_line_error();
}

#[test]
fn experiment_partition_quick() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let v = quick_experiment(tmp.path(), "partition", &out);
    assert_eq!(v["experiment"], "partition");
    let rows = v["rows"].as_array().unwrap();
    let global = |w: &serde_json::Value| {
        rows.iter()
            .find(|x| x["workload"] == *w && x["strategy"] == "global")
            .unwrap()["savings"]
            .as_f64()
            .unwrap()
    };
    for r in rows {
        let (savings, g) = (r["savings"].as_f64().unwrap(), global(&r["workload"]));
        if r["k"].is_null() {
            // Each partition alone never finds more than global dedup.
            assert!(savings <= g + 1e-12, "{r}");
        } else {
            // Reconciled partitions save what global dedup saves.
            assert!((savings - g).abs() < 1e-12, "{r}");
        }
    }
    assert!(out.join("partition.csv").exists());
}

/// Fingerprints crafted to share their first 8 bytes (and, in a second run,
/// their first 16) deduplicate exactly like random ones: tables, the Summary
/// Vector and index pages hash every fingerprint byte, so nothing crowds one
/// bucket (before, such a trace made the index writer grow without end).
#[test]
fn fingerprints_sharing_a_prefix_do_not_crowd_a_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    for shared in [16usize, 32] {
        let trace = tmp.path().join(format!("prefix{shared}.trace"));
        let mut t = String::from("file start 7\nbig.dat\n");
        for i in 0..20_000u64 {
            let mut z = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut word = || {
                z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut x = z;
                x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                x ^ (x >> 31)
            };
            let tail = format!("{:016X}{:016X}{:016X}", word(), word(), word());
            let fp = format!(
                "{}{}",
                &"DEADBEEFCAFEF00D0123456789ABCDEF"[..shared],
                &tail[..40 - shared]
            );
            t += &format!("{fp} 8192\n");
        }
        t += "file end\nstream end\n";
        std::fs::write(&trace, t).unwrap();
        let report = sim(tmp.path(), &[s(&trace), s(&trace)]);
        let gens = report["generations"].as_array().unwrap();
        let unique: Vec<u64> = gens
            .iter()
            .map(|g| g["unique_chunks"].as_u64().unwrap())
            .collect();
        assert_eq!(
            unique,
            vec![20_000, 0],
            "shared prefix of {} hex digits",
            shared
        );
    }
}
