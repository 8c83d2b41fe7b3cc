//! The same input backed up into a fresh repository with the same config
//! gives the same counters every time, so the exact agreement between
//! `cairn sim` and real backups holds for every counter.
//!
//! The repositories are unencrypted, as the simulator's model: an
//! encrypted repository keys its fingerprints and seeds its chunker from
//! its own fresh key (docs/security.md), so the tree nodes that list the
//! fingerprints compress a few bytes differently in every new repository
//! and `bytes_written` differs (CI once saw 2 bytes of 14 MB).
//!
//! `bytes_written` may differ by a few bytes: the snapshot record is JSON
//! and holds the backup's duration and phase times, whose decimal text is
//! one digit longer or shorter from run to run. It is compared within
//! `RECORD_TIMING_BYTES`; every other counter exactly.
//!
//! Excluded, because they are timing-dependent by nature (docs/simulation.md):
//! `read_ops` and `bytes_read` count backend reads, and a metadata section of
//! a container still in the sealer's queue is served from memory instead of
//! the disk. With several parallel streams, which stream stores a chunk they
//! share first is a race too; these runs use one stream per backup.

mod common;

use std::path::Path;

use common::*;

const TIMING_DEPENDENT: [&str; 2] = ["read_ops", "bytes_read"];

/// Slack on `bytes_written` for the record's timing fields (a duration in
/// nanoseconds and a dozen phase times in seconds, as decimal text).
const RECORD_TIMING_BYTES: i64 = 64;

/// `a` and `b` agree: every counter equal, `bytes_written` within the
/// record's timing slack.
fn assert_same(
    a: &serde_json::Map<String, serde_json::Value>,
    b: &serde_json::Map<String, serde_json::Value>,
    what: &str,
) {
    let written =
        |m: &serde_json::Map<String, serde_json::Value>| m["bytes_written"].as_i64().unwrap();
    let diff = (written(a) - written(b)).abs();
    assert!(
        diff <= RECORD_TIMING_BYTES,
        "{what}: bytes_written {} vs {}",
        written(a),
        written(b)
    );
    let strip = |m: &serde_json::Map<String, serde_json::Value>| {
        let mut m = m.clone();
        m.remove("bytes_written");
        m
    };
    assert_eq!(strip(a), strip(b), "{what}");
}

fn counters(repo: &Path, tree: &Path) -> serde_json::Map<String, serde_json::Value> {
    let j = cairn(repo, &["backup", "--json", s(tree)]).ok().json();
    let mut c = j["stats"]["counters"].as_object().unwrap().clone();
    for k in TIMING_DEPENDENT {
        c.remove(k);
    }
    c.insert("new_chunks".into(), j["stats"]["new_chunks"].clone());
    c
}

#[test]
fn identical_backups_give_identical_counters() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(5);
    // Repeated content inside one backup: later copies hit containers the
    // same backup wrote, some still in the sealer's queue.
    let block = rng.bytes(3 << 20);
    for i in 0..4 {
        let mut data = block.clone();
        data.extend(rng.bytes(700_000));
        write_file(&tree.join(format!("copy{i}.bin")), &data, 0o644);
    }
    build_sample_tree(&tree.join("sample"), &mut rng);
    // The second generation: the same tree with one file changed, made once
    // so every run sees the same bytes and mtimes.
    let tree2 = tmp.path().join("gen2");
    copy_dir(&tree, &tree2);
    write_file(&tree2.join("sample/changed.txt"), &rng.text(5_000), 0o644);
    let mut runs = Vec::new();
    for run in 0..4 {
        let repo = tmp.path().join(format!("repo{run}"));
        cairn(
            &repo,
            &[
                "init",
                "-q",
                "--encryption",
                "none",
                "--container-size",
                "512KiB",
            ],
        )
        .ok();
        runs.push((counters(&repo, &tree), counters(&repo, &tree2)));
    }
    for (i, r) in runs.iter().enumerate().skip(1) {
        assert_same(&r.0, &runs[0].0, &format!("first backup, run {i} vs run 0"));
        assert_same(
            &r.1,
            &runs[0].1,
            &format!("second backup, run {i} vs run 0"),
        );
    }
    assert!(runs[0].0["cache_hits"].as_u64().unwrap() > 0);
}
