//! Tests of the `partition` experiment: the quick run's rows, files and the
//! invariants of `crate::partition` (reconciled == global, partitioned <=
//! global, peak memory non-increasing as `k` decreases); a trace workload;
//! the full run documented in `docs/experiments/partition.md`.

use super::*;
use std::path::PathBuf;

fn opts(dir: &std::path::Path, traces: Vec<PathBuf>) -> ExperimentOptions {
    ExperimentOptions {
        quick: true,
        traces,
        out_dir: dir.to_path_buf(),
        plot_ext: "svg".into(),
    }
}

/// Checks every invariant on the rows of one workload.
fn check_workload(out: &ExperimentOutput, workload: &str) {
    let rows: Vec<&Value> = out
        .rows
        .iter()
        .filter(|r| r["workload"] == workload)
        .collect();
    let global: Vec<_> = rows.iter().filter(|r| r["strategy"] == "global").collect();
    assert_eq!(global.len(), 1, "{workload}");
    let g = global[0];
    assert!(g["k"].is_null());
    assert_eq!(u(g, "partitions"), 1);
    assert_eq!(f(g, "savings_vs_global"), 1.0);
    let gs = f(g, "savings");
    let g_unique = u(g, "unique_bytes");
    let g_entries = u(g, "peak_index_entries");
    assert!(g_entries > 0);
    for st in ["type", "path", "stream"] {
        let of: Vec<&&Value> = rows.iter().filter(|r| r["strategy"] == st).collect();
        let phase1: Vec<_> = of.iter().filter(|r| r["k"].is_null()).collect();
        assert_eq!(phase1.len(), 1, "{workload} {st}");
        let p1 = phase1[0];
        let n = u(p1, "partitions");
        assert!(n >= 1);
        // Partitioned savings never exceed global savings.
        assert!(f(p1, "savings") <= gs + 1e-12, "{workload} {st}");
        assert!(u(p1, "unique_bytes") >= g_unique);
        assert!(f(p1, "savings_vs_global") <= 1.0 + 1e-12);
        let rec: Vec<_> = of.iter().filter(|r| !r["k"].is_null()).collect();
        let ks: Vec<u64> = rec.iter().map(|r| u(r, "k")).collect();
        let mut want: Vec<u64> = K_VALUES
            .iter()
            .map(|&k| k as u64)
            .filter(|&k| k < n)
            .collect();
        want.push(n);
        assert_eq!(ks, want, "{workload} {st}");
        assert_eq!(s(rec.last().unwrap(), "k_label"), "all");
        for r in &rec {
            let k = u(r, "k");
            // Reconciled savings == global savings.
            assert_eq!(u(r, "unique_bytes"), g_unique, "{workload} {st} k={k}");
            assert!((f(r, "savings") - gs).abs() < 1e-12);
            assert_eq!(u(r, "reconcile_passes"), n.div_ceil(k));
            assert_eq!(u(r, "peak_index_bytes"), u(r, "peak_index_entries") * 48);
        }
        // k = 1 needs the phase-1 memory, k = all the global index.
        assert_eq!(u(rec[0], "peak_index_entries"), u(p1, "peak_index_entries"));
        assert_eq!(u(rec.last().unwrap(), "peak_index_entries"), g_entries);
        // Peak memory non-increasing as k decreases; passes the other way.
        for w in rec.windows(2) {
            assert!(
                u(w[0], "peak_index_entries") <= u(w[1], "peak_index_entries"),
                "{workload} {st}: {} > {}",
                w[0],
                w[1]
            );
            assert!(u(w[0], "reconcile_passes") >= u(w[1], "reconcile_passes"));
            assert!(u(w[0], "index_entries_read") >= u(w[1], "index_entries_read"));
        }
    }
}

#[test]
fn partition_quick_rows_invariants_and_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = partition(&opts(tmp.path(), Vec::new())).unwrap();
    eprintln!("{}", out.table);
    eprintln!("{}", out.extra["datasets"]);
    assert_eq!(out.experiment, "partition");
    for w in ["files", "ddfs"] {
        check_workload(&out, w);
    }
    // The typed dataset: type partitioning keeps more than path
    // partitioning (004's finding, which the dataset is built to show).
    let phase1 = |w: &str, st: &str| {
        out.rows
            .iter()
            .find(|r| r["workload"] == w && r["strategy"] == st && r["k"].is_null())
            .map(|r| f(r, "savings"))
            .unwrap()
    };
    assert!(phase1("files", "type") > phase1("files", "path"));
    assert!(phase1("files", "global") > 0.1);
    // Backup generations deduplicate across generations: one partition
    // per generation keeps almost nothing of it.
    assert!(phase1("ddfs", "stream") < 0.5 * phase1("ddfs", "global"));
    for key in [
        "params",
        "datasets",
        "largest_partitions",
        "paper_004",
        "files",
    ] {
        assert!(out.extra.contains_key(key), "{key}");
    }
    assert_eq!(out.csv.lines().count(), out.rows.len() + 1);
    assert!(out
        .csv
        .starts_with("workload,strategy,k,k_label,partitions"));
    let csv = std::fs::read_to_string(tmp.path().join("partition.csv")).unwrap();
    assert_eq!(csv, out.csv);
    let svg = std::fs::read_to_string(tmp.path().join("partition.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("GFS-US"));
    assert!(out.table.contains("stream"));
    assert_eq!(
        out.to_json()["rows"].as_array().unwrap().len(),
        out.rows.len()
    );
}

#[test]
fn partition_adds_a_trace_workload() {
    let tmp = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/destor");
    let out = partition(&opts(
        tmp.path(),
        vec![data.join("gen0.trace"), data.join("gen1.trace")],
    ))
    .unwrap();
    check_workload(&out, "trace");
    assert_eq!(out.extra["datasets"]["trace"]["streams"], 2);
}

#[test]
fn partition_rejects_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let mut o = opts(tmp.path(), Vec::new());
    o.plot_ext = "gif".into();
    assert!(partition(&o)
        .unwrap_err()
        .to_string()
        .contains("svg, png or pdf"));
    let o = opts(tmp.path(), vec![tmp.path().join("missing.trace")]);
    assert!(partition(&o).is_err());
    let garbage = tmp.path().join("garbage.trace");
    std::fs::write(&garbage, b"not a trace at all").unwrap();
    assert!(partition(&opts(tmp.path(), vec![garbage])).is_err());
}

/// The full-size run documented in `docs/experiments/partition.md`:
/// `cargo test --release -p cairn-sim partition_full -- --ignored --nocapture`
/// (`CAIRN_PARTITION_TRACES=a.trace:b.trace` adds traces).
#[test]
#[ignore]
fn partition_full() {
    let dir = std::env::var_os("CAIRN_EXPERIMENT_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cairn-partition"));
    let traces = std::env::var("CAIRN_PARTITION_TRACES")
        .map(|v| {
            v.split(':')
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let out = partition(&ExperimentOptions {
        quick: false,
        traces,
        out_dir: dir.clone(),
        plot_ext: std::env::var("CAIRN_EXPERIMENT_EXT").unwrap_or_else(|_| "svg".into()),
    })
    .unwrap();
    println!("{}", out.table);
    println!("{}", serde_json::to_string_pretty(&out.to_json()).unwrap());
    println!(
        "wrote {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
}
