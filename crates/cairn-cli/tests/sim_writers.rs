//! `cairn sim --writers N` end to end: one writer keeps today's report;
//! several writers sharing one repository report the dedup concurrency
//! costs, and reconciliation gives back exactly the one-after-another
//! figure.

mod common;

use common::*;
use serde_json::Value;

/// A small DDFS workload: 4 streams, 6 generations of 4 MiB.
const WORKLOAD: [&str; 8] = [
    "--workload",
    "ddfs",
    "--param",
    "generations=6",
    "--param",
    "generation_bytes=4MiB",
    "--param",
    "streams=4",
];

fn sim(args: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = vec!["sim"];
    all.extend_from_slice(&WORKLOAD);
    all.extend_from_slice(args);
    cairn(tmp.path(), &all)
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn one_writer_is_the_usual_engine_report() {
    let one = sim(&["--writers", "1"]).ok().stdout_str();
    let default = sim(&[]).ok().stdout_str();
    let header = |s: &str| s.lines().next().unwrap_or("").to_string();
    assert_eq!(header(&one), header(&default));
    assert!(one.contains("total"), "{one}");
    assert_eq!(one.lines().count(), default.lines().count());
    // The engine's JSON, not the writers report.
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec!["--json", "sim"];
    args.extend_from_slice(&WORKLOAD);
    args.extend_from_slice(&["--writers", "1"]);
    let v = cairn(tmp.path(), &args).ok().json();
    assert!(v["generations"].is_array() && v.get("writers").is_none());
}

#[test]
fn eight_writers_lose_dedup_that_reconciliation_gives_back() {
    for (unit, streams) in [("top", 24u64), ("input", 6)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec!["--json", "sim"];
        args.extend_from_slice(&WORKLOAD);
        args.extend_from_slice(&["--writers", "8", "--writer-unit", unit]);
        let r = cairn(tmp.path(), &args).ok().json();
        assert_eq!(u(&r, "writers"), 8);
        assert_eq!(r["unit"], unit);
        assert_eq!(u(&r, "streams"), streams);
        assert_eq!(u(&r, "rounds"), streams.div_ceil(8));
        let logical = u(&r, "logical_bytes");
        let (before, seq, after) = (
            &r["before_reconciliation"],
            &r["one_after_another"],
            &r["after_reconciliation"],
        );
        for s in [before, seq, after] {
            for key in ["chunks", "bytes", "compressed_bytes"] {
                u(s, key);
            }
            let ratio = s["dedup_ratio"].as_f64().unwrap();
            assert!((ratio - logical as f64 / u(s, "bytes") as f64).abs() < 1e-9);
        }
        assert!(u(before, "bytes") >= u(after, "bytes"));
        assert_eq!(after, seq, "{unit}");
        assert_eq!(u(before, "bytes") - u(after, "bytes"), u(&r, "lost_bytes"));
        assert_eq!(
            u(before, "chunks") - u(after, "chunks"),
            u(&r, "lost_chunks")
        );
        let writers = r["per_writer"].as_array().unwrap();
        assert_eq!(writers.len(), 8);
        let sum = |key: &str| writers.iter().map(|w| u(w, key)).sum::<u64>();
        assert_eq!(sum("logical_bytes"), logical);
        assert_eq!(sum("stored_bytes"), u(before, "bytes"));
        assert_eq!(sum("kept_bytes"), u(after, "bytes"));
        match unit {
            // Each generation is one round of 4 DDFS streams and a half of
            // the next: the streams share no data, but a stream and its
            // next generation in one round do.
            "top" => assert!(u(&r, "lost_bytes") > 0),
            // Six successive generations in one round: each stores all of
            // its data new.
            _ => assert_eq!(u(before, "bytes"), logical),
        }
    }
    // The text report names the three figures and the loss.
    let text = sim(&["--writers", "8"]).ok().stdout_str();
    for line in [
        "before reconciliation",
        "one after another",
        "after reconciliation",
        "lost to concurrency",
    ] {
        assert!(text.contains(line), "{text}");
    }
}

#[test]
fn options_that_do_not_apply_are_refused() {
    sim(&["--writers", "4", "--restore"]).code(1);
    sim(&["--writers", "4", "--csv"]).code(1);
    sim(&["--writer-unit", "file"]).code(1);
    sim(&["--writers", "0"]).code(2);
}
