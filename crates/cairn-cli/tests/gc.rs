//! `forget`, `fastcopy` and `gc` through the binary: retention with reasons,
//! dry runs that change nothing, a collection that reclaims space and leaves
//! every kept snapshot restorable, a SIGKILL at random points of a
//! collection that loses nothing, and one-line errors for bad input.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

fn repo_bytes(repo: &Path) -> u64 {
    walk(&repo.join("containers"))
        .iter()
        .filter(|p| p.is_file())
        .map(|p| p.metadata().unwrap().len())
        .sum()
}

/// Five generations; each rewrites a few files.
fn five_generations(dir: &Path, repo: &Path) -> Vec<String> {
    let data = dir.join("data");
    let mut rng = Rng::new(5);
    build_random_files(&data, &mut rng, 12, 150_000);
    cairn(repo, &["init", "--container-size", "256KiB", "-q"]).ok();
    for g in 0..5 {
        if g > 0 {
            for i in 0..3 {
                write_file(&data.join(format!("f{g}_{i}")), &rng.bytes(120_000), 0o644);
            }
        }
        cairn(repo, &["backup", s(&data), "-q"]).ok();
    }
    snapshot_ids(repo)
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

    let before = repo_bytes(&repo);
    let plan = cairn(&repo, &["gc", "--dry-run"]).ok().stdout_str();
    assert!(
        plan.contains("plan (pgc+)") && plan.contains("dry run"),
        "{plan}"
    );
    assert_eq!(repo_bytes(&repo), before, "a dry run deletes nothing");

    let r = cairn(&repo, &["--json", "prune", "--collector", "lgc"])
        .ok()
        .json();
    assert!(r["containers_deleted"].as_u64().unwrap() > 0, "{r}");
    assert!(repo_bytes(&repo) < before);
    cairn(&repo, &["check", "--read-data"]).ok();
    let target = dir.path().join("out");
    cairn(&repo, &["restore", "latest", "--target", s(&target), "-q"]).ok();
    assert!(Manifest::capture(&dir.path().join("data")) == Manifest::capture(&target.join("data")));
}

#[test]
fn fastcopy_shares_the_tree_and_survives_forgetting_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let ids = five_generations(dir.path(), &repo);
    let first = &ids[0];
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
    cairn(&repo, &["check", "--read-data"]).ok();
    let target = dir.path().join("out");
    cairn(&repo, &["restore", &copy, "--target", s(&target), "-q"]).ok();
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
        let e = cairn(&repo, &args).code(1).one_line_error();
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

/// SIGKILL at random moments of a collection: the kept snapshots restore,
/// `check` passes, and the next collection completes.
#[test]
fn sigkill_during_gc_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    five_generations(dir.path(), &repo);
    cairn(&repo, &["forget", "--keep-last", "1", "-q"]).ok();
    let mut rng = Rng::new(77);
    for round in 0..20 {
        let mut child = command(
            &repo,
            &["gc", "-q", "--collector", ["lgc", "pgc", "pgc+"][round % 3]],
        )
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
        std::thread::sleep(Duration::from_micros(rng.range(0, 40_000)));
        let _ = child.kill();
        let _ = child.wait();
        cairn(&repo, &["check"]).ok();
        let target = dir.path().join(format!("out{round}"));
        cairn(&repo, &["restore", "latest", "--target", s(&target), "-q"]).ok();
        assert!(
            Manifest::capture(&dir.path().join("data")) == Manifest::capture(&target.join("data"))
        );
        std::fs::remove_dir_all(&target).unwrap();
        if round % 5 == 4 {
            // Give the next rounds something to collect again.
            cairn(&repo, &["backup", s(&dir.path().join("data")), "-q"]).ok();
        }
    }
    cairn(&repo, &["gc", "-q"]).ok();
    cairn(&repo, &["check", "--read-data"]).ok();
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
    let before = repo_bytes(&repo);
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
    assert_eq!(repo_bytes(&repo), before);
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
