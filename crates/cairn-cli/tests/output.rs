//! What commands print about their outcome (issue 31, friction 4), through
//! the real binary: `forget ID…` counts what it keeps and removes over the
//! whole repository; `stats` figures are consistent and labelled; the gc
//! plan's estimates are within 10% of what the run then copies and
//! reclaims; backup `-v` names each file's state.

mod common;

use std::path::Path;

use common::*;

/// `n` backups of a tree in which one file changes each time; the
/// snapshot ids, oldest first.
fn generations(dir: &Path, repo: &Path, n: usize) -> Vec<String> {
    let data = dir.join("data");
    let mut rng = Rng::new(7);
    build_random_files(&data, &mut rng, 6, 40_000);
    let mut ids = Vec::new();
    for g in 0..n {
        write_file(&data.join("changing"), &rng.bytes(30_000 + g), 0o644);
        let id = cairn(repo, &["--json", "backup", s(&data)]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        ids.push(id);
    }
    ids
}

#[test]
fn forget_by_id_counts_the_snapshots_it_keeps_and_removes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let ids = generations(dir.path(), &repo, 4);

    let dry = cairn(&repo, &["forget", &ids[0], &ids[1], "--dry-run"]).ok();
    let out = dry.stdout_str();
    assert!(
        out.contains("2 snapshots kept, 2 would be removed"),
        "{out}"
    );
    let j = cairn(&repo, &["--json", "forget", &ids[0], &ids[1], "--dry-run"])
        .ok()
        .json();
    assert_eq!(j["kept_count"], 2, "{j}");
    assert_eq!(j["removed_count"], 2, "{j}");
    assert_eq!(snapshot_ids(&repo).len(), 4, "a dry run removes nothing");

    // The same snapshot named twice (full id and prefix) is removed once.
    let r = cairn(&repo, &["forget", &ids[0], &ids[0][..8]]).ok();
    let out = r.stdout_str();
    assert!(out.contains("3 snapshots kept, 1 removed"), "{out}");
    let j = cairn(&repo, &["--json", "forget", &ids[1]]).ok().json();
    assert_eq!(j["kept_count"], 2, "{j}");
    assert_eq!(j["removed_count"], 1, "{j}");
    assert_eq!(snapshot_ids(&repo).len(), 2);
}

/// The state `backup -v` gave the entry whose path ends with `suffix`.
fn state_of<'a>(out: &'a str, suffix: &str) -> &'a str {
    let line = out
        .lines()
        .find(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|p| p.ends_with(suffix))
        })
        .unwrap_or_else(|| panic!("no line for {suffix} in:\n{out}"));
    line.split_whitespace().next().unwrap()
}

#[test]
fn backup_verbose_lists_each_file_with_its_state_and_hard_links_stay_unmodified() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let tree = dir.path().join("tree");
    let mut rng = Rng::new(3);
    write_file(&tree.join("a/f1"), &rng.bytes(20_000), 0o644);
    write_file(&tree.join("a/f2"), &rng.bytes(10_000), 0o644);
    write_file(&tree.join("b/h1"), &rng.bytes(15_000), 0o644);
    std::fs::hard_link(tree.join("b/h1"), tree.join("b/h2")).unwrap();
    // Past the racy margin (`backup/parent.rs`): an entry changed just
    // before a backup is read again by the next one.
    std::thread::sleep(std::time::Duration::from_millis(60));

    let first = cairn(&repo, &["backup", "-v", s(&tree)]).ok().stdout_str();
    for f in ["a/f1", "a/f2", "b/h1", "b/h2", "tree/a/", "tree/b/"] {
        assert_eq!(state_of(&first, f), "new", "{f}:\n{first}");
    }
    // Lookup and cache jargon is for --stats and --json only.
    for jargon in ["lookups", "bloom", "phases", "index RAM"] {
        assert!(!first.contains(jargon), "{jargon} in:\n{first}");
    }

    let again = cairn(&repo, &["backup", "-v", s(&tree)]).ok().stdout_str();
    for f in ["a/f1", "a/f2", "b/h1", "b/h2", "tree/a/", "tree/b/"] {
        assert_eq!(state_of(&again, f), "unmodified", "{f}:\n{again}");
    }
    assert!(
        again.contains("files: 0 new, 0 changed, 4 unmodified"),
        "the second name of a hard link is not new on an unchanged backup:\n{again}"
    );

    write_file(&tree.join("a/f1"), &rng.bytes(20_000), 0o644);
    write_file(&tree.join("c/n"), &rng.bytes(5_000), 0o644);
    let third = cairn(&repo, &["backup", "-vv", s(&tree)]).ok().stdout_str();
    assert_eq!(state_of(&third, "a/f1"), "changed", "{third}");
    assert_eq!(state_of(&third, "a/f2"), "unmodified", "{third}");
    assert_eq!(state_of(&third, "tree/a/"), "changed", "{third}");
    assert_eq!(state_of(&third, "tree/b/"), "unmodified", "{third}");
    assert_eq!(state_of(&third, "c/n"), "new", "{third}");
    let f1 = third.lines().find(|l| l.contains("a/f1")).unwrap();
    assert!(
        f1.contains("chunks") && f1.contains("added") && f1.contains("KiB"),
        "-vv adds size, chunks and bytes added: {f1}"
    );
}

/// `a` is within 10% of `b` (both non-zero, or both zero).
fn within_10_percent(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.10 * b.abs().max(a.abs()) || (a == 0.0 && b == 0.0)
}

/// Overlapping backups, some forgotten: many small files that never
/// change (small chunks, live in every snapshot) beside larger files that
/// each backup rewrites in part (larger chunks, dead once their snapshots
/// are forgotten), so that a container's live share by chunk count is far
/// from its live share by bytes.
fn forgotten_overlaps(dir: &Path, repo: &Path) {
    let data = dir.join("data");
    let mut rng = Rng::new(11);
    cairn(repo, &["init", "--container-size", "256KiB", "-q"]).ok();
    for i in 0..300 {
        write_file(&data.join(format!("a{i:03}")), &rng.bytes(400), 0o644);
    }
    let mut ids = Vec::new();
    for g in 0..6 {
        for i in 0..4 {
            if g == 0 || (i + g) % 2 == 0 {
                let size = 100_000 + (rng.next_u64() % 200_000) as usize;
                write_file(&data.join(format!("b{i}")), &rng.bytes(size), 0o644);
            }
        }
        let id = cairn(repo, &["--json", "backup", s(&data)]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        ids.push(id);
    }
    cairn(repo, &["forget", &ids[0], &ids[1], &ids[3]]).ok();
}

/// Asserts that `plan`'s estimates are within 10% of what `run` did.
fn assert_plan_matches(what: &str, plan: &serde_json::Value, run: &serde_json::Value) {
    let n = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{v}"));
    let pairs = [
        (
            "bytes to copy",
            "estimated_live_bytes_to_copy",
            "copied_bytes",
        ),
        (
            "bytes reclaimed",
            "estimated_reclaim_bytes",
            "reclaimed_bytes",
        ),
        ("containers", "selected_containers", "containers_deleted"),
    ];
    for (name, est, done) in pairs {
        let (est, done) = (n(&plan[est]), n(&run[done]));
        assert!(done > 0.0, "{what}: nothing done: {run}");
        assert!(
            within_10_percent(est, done),
            "{what}: estimated {est} {name}, the run: {done}"
        );
    }
}

#[test]
fn gc_plan_estimates_are_within_ten_percent_of_the_run() {
    // Every collector's dry run prints the plan of the run that follows it:
    // PGC+ marks exactly, and LGC and PGC seed their Bloom filters from the
    // repository's state, which a dry run does not change (docs/gc.md).
    for collector in ["pgc+", "pgc", "lgc"] {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        forgotten_overlaps(dir.path(), &repo);
        let dry = cairn(
            &repo,
            &["--json", "gc", "--dry-run", "--collector", collector],
        )
        .ok()
        .json();
        let run = cairn(&repo, &["--json", "gc", "--collector", collector])
            .ok()
            .json();
        assert_plan_matches(&format!("{collector} dry run"), &dry["plan"], &run);
        assert_plan_matches(collector, &run["plan"], &run);
    }
}

#[test]
fn stats_figures_are_consistent_and_labelled_after_a_forget() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let mut rng = Rng::new(17);
    // Two sources with nothing in common; the first one forgotten: its
    // data stays stored (unreferenced) until a garbage collection.
    let big = dir.path().join("big");
    let small = dir.path().join("small");
    build_random_files(&big, &mut rng, 8, 100_000);
    build_random_files(&small, &mut rng, 3, 30_000);
    // A file twice in the kept snapshot: referenced twice, stored once.
    let copy = std::fs::read(
        small.join(
            std::fs::read_dir(&small)
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .file_name(),
        ),
    )
    .unwrap();
    write_file(&small.join("copy"), &copy, 0o644);
    let gone = cairn(&repo, &["--json", "backup", s(&big)]).ok().json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    cairn(&repo, &["backup", "-q", s(&small)]).ok();
    cairn(&repo, &["forget", &gone]).ok();

    let st = cairn(&repo, &["--json", "stats"]).ok().json();
    let n = |k: &str| st[k].as_u64().unwrap_or_else(|| panic!("{k} in {st}"));
    let logical = n("logical_bytes");
    let unique = n("referenced_unique_bytes");
    assert!(
        logical >= unique,
        "logical {logical} below the unique bytes it references {unique}: {st}"
    );
    assert!(logical > unique, "the duplicate file is deduplicated: {st}");
    assert!(st["dedup_ratio"].as_f64().unwrap() >= 1.0, "{st}");
    assert!(
        n("referenced_compressed_bytes") <= n("compressed_bytes"),
        "{st}"
    );
    assert_eq!(n("stored_bytes"), unique + n("unreferenced_bytes"), "{st}");
    assert!(
        n("unreferenced_bytes") >= 700_000,
        "the forgotten snapshot's data is stored, unreferenced: {st}"
    );

    let text = cairn(&repo, &["stats"]).ok().stdout_str();
    for label in [
        "logical (file content, each snapshot whole)",
        "unique data, before compression",
        "unreferenced or duplicate until gc",
        "dedup ratio (logical / unique)",
    ] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    // After a collection nothing is unreferenced.
    cairn(&repo, &["gc", "-q"]).ok();
    let st = cairn(&repo, &["--json", "stats"]).ok().json();
    assert_eq!(st["unreferenced_bytes"], 0, "{st}");
    assert_eq!(st["referenced_unique_bytes"], unique, "{st}");
}
