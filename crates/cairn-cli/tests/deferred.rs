//! `cairn backup --dedup deferred` through the binary
//! (`004_62bf1a5ddd5ed253.txt` post-processing dedup, the duplicates
//! removed by `cairn gc`, `003_ea5fccc485a97c5d.txt` §3.4): the backup
//! stores the whole generation again, restores and checks clean at once,
//! and the next collection shrinks the repository back; a bad mode is one
//! error line.

mod common;

use common::*;

#[test]
fn deferred_backup_end_to_end_then_gc_removes_the_copies() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let data = dir.path().join("data");
    let mut rng = Rng::new(11);
    build_random_files(&data, &mut rng, 10, 120_000);
    cairn(&repo, &["init", "--container-size", "256KiB", "-q"]).ok();
    cairn(&repo, &["backup", s(&data), "-q"]).ok();
    let gen1 = container_bytes(&repo);

    // Generation 2: one file more, the rest unchanged.
    write_file(&data.join("extra"), &rng.bytes(50_000), 0o644);
    let m = Manifest::capture(&data);
    let j = cairn(
        &repo,
        // --force: the point is a backup that reads and stores everything
        // without a lookup (the parent check would locate reused chunks).
        &[
            "--json",
            "backup",
            "--dedup",
            "deferred",
            "--force",
            s(&data),
        ],
    )
    .ok()
    .json();
    assert_eq!(j["dedup"], "deferred", "{j}");
    assert_eq!(j["stats"]["counters"]["index_page_reads"], 0, "{j}");
    assert_eq!(j["stats"]["counters"]["cache_probes"], 0, "{j}");
    let grown = container_bytes(&repo) - gen1;
    assert!(grown > gen1 * 9 / 10, "grew {grown} over {gen1}");

    // Restorable and clean before any collection.
    cairn(&repo, &["check", "--read-data"]).ok();
    let target = dir.path().join("out");
    cairn(&repo, &["restore", "latest", "--target", s(&target), "-q"]).ok();
    assert_tree_matches(&m, &target.join("data"));

    let r = cairn(&repo, &["--json", "gc"]).ok().json();
    assert!(r["containers_deleted"].as_u64().unwrap() > 0, "{r}");
    let after = container_bytes(&repo);
    assert!(
        after < gen1 + gen1 / 5,
        "after gc {after}, generation 1 alone {gen1}"
    );
    cairn(&repo, &["check", "--read-data"]).ok();
    for id in snapshot_ids(&repo) {
        let t = dir.path().join(format!("out-{id}"));
        cairn(&repo, &["restore", &id, "--target", s(&t), "-q"]).ok();
    }
    let t = dir.path().join("out2");
    cairn(&repo, &["restore", "latest", "--target", s(&t), "-q"]).ok();
    assert_tree_matches(&m, &t.join("data"));

    // The human summary says what was deferred.
    write_file(&data.join("extra2"), &rng.bytes(10_000), 0o644);
    let out = cairn(&repo, &["backup", "--dedup", "deferred", s(&data)])
        .ok()
        .stdout_str();
    assert!(out.contains("dedup deferred"), "{out}");
}

#[test]
fn a_bad_dedup_mode_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let data = dir.path().join("f.txt");
    write_file(&data, b"hello\n", 0o644);
    // A usage error (exit 2) naming the option, the value and the valid ones.
    let r = cairn(&repo, &["backup", "--dedup", "later", s(&data)]).code(2);
    let err = r.one_line_error();
    assert!(err.contains("--dedup") && err.contains("later"), "{err}");
    assert!(r.stderr.contains("inline, deferred"), "{}", r.stderr);
    assert!(!repo.exists(), "a bad flag leaves no repository behind");
}
