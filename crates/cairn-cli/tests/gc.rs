//! `forget`, `fastcopy` and `gc` through the binary: retention with reasons,
//! dry runs that change nothing, a collection that reclaims space and leaves
//! every kept snapshot restorable, a SIGKILL at random points of a
//! collection that loses nothing, and one-line errors for bad input.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

/// Five generations; each rewrites a few files.
fn five_generations(dir: &Path, repo: &Path) -> Vec<String> {
    five_generations_captured(dir, repo);
    snapshot_ids(repo)
}

/// [`five_generations`], returning each snapshot's id (oldest first) with
/// the tree it holds.
fn five_generations_captured(dir: &Path, repo: &Path) -> Vec<(String, Manifest)> {
    let data = dir.join("data");
    let mut rng = Rng::new(5);
    build_random_files(&data, &mut rng, 12, 150_000);
    cairn(repo, &["init", "--container-size", "256KiB", "-q"]).ok();
    let mut out = Vec::new();
    for g in 0..5 {
        if g > 0 {
            for i in 0..3 {
                write_file(&data.join(format!("f{g}_{i}")), &rng.bytes(120_000), 0o644);
            }
        }
        let id = cairn(repo, &["--json", "backup", s(&data)]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        out.push((id, Manifest::capture(&data)));
    }
    out
}

#[test]
fn forget_keep_last_then_gc_reclaims_and_keeps_the_newest_restorable() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let ids = five_generations(dir.path(), &repo);
    assert_eq!(ids.len(), 5);

    let dry = cairn(&repo, &["forget", "--keep-last", "2", "--dry-run"]).ok();
    let out = dry.stdout_str();
    assert!(out.contains("keep") && out.contains("last 2"), "{out}");
    assert!(out.contains("3 would be removed"), "{out}");
    assert_eq!(snapshot_ids(&repo).len(), 5, "a dry run removes nothing");

    let j = cairn(&repo, &["--json", "forget", "--keep-last", "2"])
        .ok()
        .json();
    assert_eq!(j["removed"].as_array().unwrap().len(), 3);
    assert_eq!(snapshot_ids(&repo).len(), 2);

    let before = container_bytes(&repo);
    let plan = cairn(&repo, &["gc", "--dry-run"]).ok().stdout_str();
    assert!(
        plan.contains("plan (pgc+)") && plan.contains("dry run"),
        "{plan}"
    );
    assert_eq!(container_bytes(&repo), before, "a dry run deletes nothing");

    let r = cairn(&repo, &["--json", "prune", "--collector", "lgc"])
        .ok()
        .json();
    assert!(r["containers_deleted"].as_u64().unwrap() > 0, "{r}");
    assert!(container_bytes(&repo) < before);
    cairn(&repo, &["check", "--read-data"]).ok();
    let target = dir.path().join("out");
    cairn(&repo, &["restore", "latest", "--target", s(&target), "-q"]).ok();
    assert!(Manifest::capture(&dir.path().join("data")) == Manifest::capture(&target.join("data")));
}

#[test]
fn fastcopy_shares_the_tree_and_survives_forgetting_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let generations = five_generations_captured(dir.path(), &repo);
    let (first, first_tree) = &generations[0];
    let j = cairn(&repo, &["--json", "fastcopy", &first[..8], "--tag", "kept"])
        .ok()
        .json();
    let copy = j["snapshot_id"].as_str().unwrap().to_string();
    let r = cairn(
        &repo,
        &[
            "--json",
            "forget",
            "--keep-tag",
            "kept",
            "--prune",
            "--group-by",
            "",
        ],
    )
    .ok()
    .json();
    assert_eq!(r["removed"].as_array().unwrap().len(), 5, "{r}");
    assert_eq!(snapshot_ids(&repo), vec![copy.clone()]);
    assert!(r["gc"]["containers_deleted"].as_u64().unwrap() > 0, "{r}");
    cairn(&repo, &["check", "--read-data"]).ok();
    // The copy holds the first generation's bytes, every one of them,
    // after the collection deleted what only the later ones used.
    let target = dir.path().join("out");
    cairn(&repo, &["restore", &copy, "--target", s(&target), "-q"]).ok();
    assert_tree_matches(first_tree, &target.join("data"));
}

#[test]
fn bad_gc_and_forget_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    five_generations(dir.path(), &repo);
    for args in [
        vec!["forget"],
        vec!["forget", "--keep-within", "3w"],
        vec!["forget", "--keep-last", "1", "--group-by", "colour"],
        vec!["forget", "zzzz"],
        vec!["gc", "--collector", "refcount"],
        vec!["gc", "--reclaim", "150"],
        vec!["gc", "--memory", "lots"],
        vec!["fastcopy", "0000"],
    ] {
        // A value outside an option's list or a size that does not parse
        // is clap's usage error (exit 2); the rest is one line (exit 1).
        let e = cairn(&repo, &args).one_line_error();
        assert!(!e.is_empty(), "{args:?}");
    }
    assert_eq!(snapshot_ids(&repo).len(), 5);
}

/// The container files and their sizes (what a collection deletes).
fn container_files(repo: &Path) -> Vec<(std::path::PathBuf, u64)> {
    walk(&repo.join("containers"))
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let len = p.metadata().unwrap().len();
            (p, len)
        })
        .collect()
}

/// A file under `containers/` that is not a container, or a container
/// whose metadata is damaged, stops every collector with one line naming
/// the file, saying it is damaged or not a container and naming the
/// repair; nothing is deleted although there is garbage to collect.
#[test]
fn a_stray_or_damaged_container_file_stops_gc_with_its_name_and_repair() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    five_generations(dir.path(), &repo);
    cairn(&repo, &["forget", "--keep-last", "1", "-q"]).ok();
    let good = dir.path().join("good");
    copy_dir(&repo, &good);
    let stray = "containers/ff/00000000000000ff";
    let truncated = file_name_under(&repo, 1);
    for (name, file) in [("stray", stray.to_string()), ("truncated", truncated)] {
        for collector in ["lgc", "pgc", "pgc+"] {
            let repo = dir.path().join(format!("{name}-{collector}"));
            copy_dir(&good, &repo);
            if name == "stray" {
                write_file(&repo.join(stray), b"not a container at all", 0o644);
            } else {
                truncate(&repo.join(&file), 60);
            }
            let before = container_files(&repo);
            let e = cairn(&repo, &["gc", "-q", "--collector", collector])
                .code(1)
                .one_line_error();
            // LGC may meet the damaged container first through a snapshot
            // it walks: then the snapshot and path are named with the file.
            let what = if name == "stray" || collector != "lgc" {
                "damaged or not a cairn container"
            } else {
                "corrupt snapshot"
            };
            assert!(
                e.contains(&file)
                    && e.contains(what)
                    && e.contains("deleting anything")
                    && e.contains("cairn repair index"),
                "{name} {collector}: {e}"
            );
            assert_eq!(container_files(&repo), before, "{name} {collector}");
        }
    }
}

/// The path, relative to the repository, of the `n`th container file.
fn file_name_under(repo: &Path, n: usize) -> String {
    let files = container_files(repo);
    files[n]
        .0
        .strip_prefix(repo)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// SIGKILL at random moments of a collection, round after round, each
/// with garbage to collect (files deleted and rewritten, the older
/// snapshots forgotten): every kept snapshot restores byte for byte,
/// `check` passes, and the next collection completes. The kills are spread
/// over a measured collection's run, and at least a third of them must
/// land mid-collection (the process still running, and the collection's
/// id reservation `gc-ids` or its pending list `gc-pending` written by
/// this run on disk: it had passed Merge and not finished its commit and
/// deletes), or the test proves nothing.
#[test]
fn sigkill_during_gc_loses_nothing() {
    const ROUNDS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let data = dir.path().join("data");
    let mut rng = Rng::new(77);
    build_random_files(&data, &mut rng, 12, 150_000);
    cairn(&repo, &["init", "--container-size", "128KiB", "-q"]).ok();
    let mut kept: Vec<(String, Manifest)> = Vec::new();
    // A new generation with garbage: a few files deleted and rewritten,
    // all but the two newest snapshots forgotten.
    let next_generation = |rng: &mut Rng, round: usize, kept: &mut Vec<(String, Manifest)>| {
        let mut files: Vec<_> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for i in 0..4 {
            let victim = files.remove(rng.range(0, files.len() as u64) as usize);
            std::fs::remove_file(victim).unwrap();
            write_file(
                &data.join(format!("r{round}_{i}")),
                &rng.bytes(150_000),
                0o644,
            );
        }
        let id = cairn(&repo, &["--json", "backup", s(&data)]).ok().json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        kept.push((id, Manifest::capture(&data)));
        cairn(&repo, &["forget", "--keep-last", "2", "-q"]).ok();
        if kept.len() > 2 {
            kept.remove(0);
        }
    };
    // The collection's own objects: a killed one leaves them behind, so a
    // kill counts as landing only if they changed during this run (the
    // reservation names the ids this run reserved).
    let in_flight =
        |repo: &Path| ["gc-ids", "gc-pending"].map(|name| std::fs::read(repo.join(name)).ok());

    // One whole collection, timed: the kills below spread over its length.
    next_generation(&mut rng, 0, &mut kept);
    let started = std::time::Instant::now();
    cairn(&repo, &["gc", "-q"]).ok();
    let full = started.elapsed();
    assert_eq!(
        in_flight(&repo),
        [None, None],
        "a finished collection leaves neither"
    );
    let mut landed = 0;
    for round in 1..=ROUNDS {
        next_generation(&mut rng, round, &mut kept);
        let before = in_flight(&repo);
        let mut child = command(
            &repo,
            &["gc", "-q", "--collector", ["lgc", "pgc", "pgc+"][round % 3]],
        )
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
        std::thread::sleep(Duration::from_micros(
            rng.range(0, full.as_micros() as u64 + 1),
        ));
        let running = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let _ = child.wait();
        let after = in_flight(&repo);
        let started = after
            .iter()
            .zip(&before)
            .any(|(a, b)| a.is_some() && a != b);
        if running && started {
            landed += 1;
        }
        cairn(&repo, &["check"]).ok();
        for (id, expected) in &kept {
            let target = dir.path().join(format!("out{round}"));
            cairn(&repo, &["restore", id, "--target", s(&target), "-q"]).ok();
            assert_tree_matches(expected, &target.join("data"));
            std::fs::remove_dir_all(&target).unwrap();
        }
    }
    eprintln!("{landed} of {ROUNDS} kills landed mid-collection (a collection takes {full:?})");
    assert!(
        landed * 3 >= ROUNDS,
        "only {landed} of {ROUNDS} kills landed mid-collection"
    );
    cairn(&repo, &["gc", "-q"]).ok();
    cairn(&repo, &["check", "--read-data"]).ok();
    for (id, expected) in &kept {
        let target = dir.path().join("out-final");
        cairn(&repo, &["restore", id, "--target", s(&target), "-q"]).ok();
        assert_tree_matches(expected, &target.join("data"));
        std::fs::remove_dir_all(&target).unwrap();
    }
}

/// A backup started while a collection runs, repeatedly: both commit, the
/// backup's snapshot (data the collection had judged dead, come back, and
/// new data) restores byte for byte, and `check --read-data` is clean.
/// Rounds go on until three backups committed during a collection (the
/// collection's report counts them), at most twelve.
#[test]
fn a_backup_beside_a_collection_commits_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let data = dir.path().join("data");
    let mut rng = Rng::new(31);
    build_random_files(&data, &mut rng, 16, 200_000);
    cairn(&repo, &["init", "--container-size", "128KiB", "-q"]).ok();
    cairn(&repo, &["backup", s(&data), "-q"]).ok();
    let mut overlapped = 0;
    for round in 0..12 {
        // The backup's source: today's data, about to become partly dead.
        let again = dir.path().join("again");
        let _ = std::fs::remove_dir_all(&again);
        copy_dir(&data, &again);
        write_file(
            &again.join(format!("new{round}")),
            &rng.bytes(150_000),
            0o644,
        );
        for i in 0..4 {
            let files: Vec<_> = std::fs::read_dir(&data)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            std::fs::remove_file(&files[rng.range(0, files.len() as u64) as usize]).unwrap();
            write_file(
                &data.join(format!("g{round}_{i}")),
                &rng.bytes(100_000),
                0o644,
            );
        }
        cairn(&repo, &["backup", s(&data), "-q"]).ok();
        cairn(&repo, &["forget", "--keep-last", "1", "-q"]).ok();
        let keep = snapshot_ids(&repo);

        let gc = command(&repo, &["--json", "gc", "--wait"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.range(0, 60_000)));
        let backup = cairn(&repo, &["backup", s(&again), "--wait", "-q"]).ok();
        drop(backup);
        let out = gc.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "gc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        overlapped += usize::from(report["concurrent_snapshots"].as_u64().unwrap() > 0);

        let ids = snapshot_ids(&repo);
        assert_eq!(ids.len(), keep.len() + 1, "round {round}");
        let new_id = ids.iter().find(|id| !keep.contains(id)).unwrap();
        let target = dir.path().join("out");
        let _ = std::fs::remove_dir_all(&target);
        cairn(&repo, &["restore", new_id, "--target", s(&target), "-q"]).ok();
        assert!(
            Manifest::capture(&again) == Manifest::capture(&target.join("again")),
            "round {round}: the concurrent backup does not restore"
        );
        cairn(&repo, &["check", "--read-data"]).ok();
        if overlapped >= 3 {
            break;
        }
    }
    assert!(overlapped >= 1, "no backup ever ran beside a collection");
}

/// `forget --dry-run --prune` plans the collection as if the snapshots
/// were gone: it reports what the real run would reclaim, and changes
/// nothing.
#[test]
fn forget_dry_run_prune_plans_as_if_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    five_generations(dir.path(), &repo);
    let before = container_bytes(&repo);
    let dry = cairn(
        &repo,
        &[
            "--json",
            "forget",
            "--keep-last",
            "1",
            "--prune",
            "--dry-run",
        ],
    )
    .ok()
    .json();
    let planned = dry["gc"]["plan"]["estimated_reclaim_bytes"]
        .as_u64()
        .unwrap();
    assert!(planned > 0, "{dry}");
    assert_eq!(snapshot_ids(&repo).len(), 5);
    assert_eq!(container_bytes(&repo), before);
    let real = cairn(&repo, &["--json", "forget", "--keep-last", "1", "--prune"])
        .ok()
        .json();
    assert_eq!(
        real["gc"]["plan"]["estimated_reclaim_bytes"]
            .as_u64()
            .unwrap(),
        planned,
        "the dry run planned what the real run did"
    );
}
