//! `cairn volume optimize --job-cpu/--job-memory` through the binary: a
//! budget out of range is one usage line; a CPU budget paces the run to
//! its end; a memory budget the run outgrows stops it early with exit 3
//! and one warning, every file whole (optimized or as it was), and a later
//! run finishes. (Cancels midway through a run: the library's
//! `tests/scheduler.rs`.)

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::volume::volume;
use common::{s, Rng};

/// A volume of `n` files of 2 MiB sharing most of their content, a second
/// old.
fn volume_with_files(dir: &Path, n: usize) -> u64 {
    volume(&["volume", "create", s(dir), "--encryption", "none"]).ok();
    let files = dir.join("files");
    let mut rng = Rng::new(16);
    let base = rng.text(2 << 20);
    let mut logical = 0;
    for i in 0..n {
        let mut bytes = base.clone();
        bytes.extend_from_slice(&rng.text(20_000 + i));
        logical += bytes.len() as u64;
        std::fs::write(files.join(format!("f{i}")), &bytes).unwrap();
    }
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    for e in std::fs::read_dir(&files).unwrap() {
        filetime::set_file_times(e.unwrap().path(), old, old).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1100));
    logical
}

#[test]
fn job_budgets_out_of_range_are_one_usage_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    volume(&["volume", "create", s(&dir), "--encryption", "none"]).ok();
    for (bad, why) in [
        ("0", "between 1% and 6400%"),
        ("6401", "between 1% and 6400%"),
        ("half", "not a whole percentage"),
        ("-5", "not a whole percentage"),
    ] {
        let flag = format!("--job-cpu={bad}");
        let err = volume(&["volume", "optimize", s(&dir), &flag])
            .code(2)
            .one_line_error();
        assert!(
            err.contains("--job-cpu") && err.contains(why),
            "{bad}: {err}"
        );
    }
    let err = volume(&["volume", "optimize", s(&dir), "--job-memory", "lots"])
        .code(2)
        .one_line_error();
    assert!(err.contains("--job-memory"), "{err}");
}

#[test]
fn a_cpu_budget_paces_the_run_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    volume_with_files(&dir, 4);
    let out = volume(&[
        "volume",
        "optimize",
        s(&dir),
        "--min-age",
        "1s",
        "--job-cpu",
        "50%",
        "--job-memory",
        "4GiB",
    ])
    .ok();
    assert!(
        out.stdout_str().contains("optimized 4 of 4 files"),
        "{}",
        out.stdout_str()
    );
}

#[test]
fn a_run_over_its_memory_budget_stops_early_with_exit_3_and_every_file_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let logical = volume_with_files(&dir, 6);
    // One byte: the first check after the run has allocated anything
    // stops it.
    let run = volume(&[
        "volume",
        "optimize",
        s(&dir),
        "--min-age",
        "1s",
        "--job-memory",
        "1",
        "--json",
    ])
    .code(3);
    let err = run.stderr.clone();
    assert!(err.contains("memory budget"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let report = run.json();
    assert!(report["cancelled"].is_string(), "{report}");
    let done = report["files_optimized"].as_u64().unwrap();
    assert!(done < 6, "{report}");

    let st = volume(&["volume", "status", s(&dir), "--json"]).ok().json();
    assert_eq!(st["optimized_files"], done, "{st}");
    assert_eq!(st["unoptimized_files"], 6 - done, "{st}");
    assert_eq!(st["logical_bytes"], logical, "{st}");

    // Unbudgeted, the next run optimizes the rest.
    let out = volume(&["volume", "optimize", s(&dir), "--min-age", "1s"]).ok();
    let want = format!("optimized {} of 6 files", 6 - done);
    assert!(out.stdout_str().contains(&want), "{}", out.stdout_str());
}
