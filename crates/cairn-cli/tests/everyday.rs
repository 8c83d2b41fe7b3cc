//! End-to-end tests of everyday behaviour around the commands: output into
//! a pipe closed early (`cairn ls | head`), tag changes by filter, and
//! what `restore -v` prints.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::*;

/// A repository with three snapshots of a small tree holding one 3 MiB
/// file (`big.bin`) and forty small ones. Returns (tmp, repo, tree).
fn small_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let mut rng = Rng::new(12);
    write_file(&tree.join("big.bin"), &rng.bytes(3 << 20), 0o644);
    for i in 0..40 {
        write_file(
            &tree.join(format!("d{}/f{i}.txt", i % 4)),
            &rng.text(100),
            0o644,
        );
    }
    for host in ["alpha", "beta", "alpha"] {
        cairn(&repo, &["backup", "-q", "--host", host, s(&tree)]).ok();
    }
    (tmp, repo, tree)
}

/// Runs `cairn args` with standard output a pipe whose read end is closed
/// after `keep` bytes were read; asserts the command ended quietly: no
/// panic (checked by `finish`), no error line, and either a clean exit or
/// the end by SIGPIPE that every Unix filter shows.
fn closed_pipe(repo: &Path, args: &[&str], keep: usize) {
    let mut child = command(repo, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; keep];
    stdout.read_exact(&mut buf).unwrap();
    drop(stdout);
    let run = finish(child, args);
    assert!(
        !run.stderr.contains("error") && !run.stderr.contains("Broken pipe"),
        "cairn {args:?} complained about the closed pipe:\n{}",
        run.stderr
    );
    assert!(
        matches!(run.code, None | Some(0)),
        "cairn {args:?} exited with {:?}",
        run.code
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let (_tmp, repo, _tree) = small_repo();
    closed_pipe(&repo, &["snapshots"], 10);
    closed_pipe(&repo, &["snapshots", "--json"], 10);
    closed_pipe(&repo, &["ls", "latest"], 10);
    closed_pipe(&repo, &["ls", "--json", "latest"], 10);
    closed_pipe(&repo, &["find", "*.txt"], 10);
    closed_pipe(&repo, &["cat", "latest", "/tree/big.bin"], 10);
    closed_pipe(&repo, &["dump", "latest", "/"], 10);
}

#[test]
fn tag_with_only_a_filter_changes_every_matching_snapshot() {
    let (_tmp, repo, _tree) = small_repo();
    // Neither ids nor a filter: refused, nothing changed.
    cairn(&repo, &["tag", "--add", "x"]).one_line_error();
    cairn(&repo, &["tag", "--host", "gamma", "--add", "x"]).one_line_error();
    cairn(&repo, &["tag", "--host", "alpha", "--add", "kept"]).ok();
    let snaps = snapshots(&repo);
    assert_eq!(snaps.len(), 3);
    for snap in &snaps {
        let tags: Vec<&str> = snap["tags"]
            .as_array()
            .map(|a| a.iter().map(|t| t.as_str().unwrap()).collect())
            .unwrap_or_default();
        let want: &[&str] = if snap["host"] == "alpha" {
            &["kept"]
        } else {
            &[]
        };
        assert_eq!(tags, want, "{snap}");
    }
}

#[test]
fn verbose_restore_prints_a_line_per_file() {
    let (tmp, repo, _tree) = small_repo();
    let target = tmp.path().join("out");
    let out = cairn(&repo, &["restore", "-v", "latest", "--target", s(&target)])
        .ok()
        .stdout_str();
    let new: Vec<&str> = out.lines().filter(|l| l.starts_with("new ")).collect();
    assert_eq!(new.len(), 41, "{out}");
    assert!(
        out.lines()
            .any(|l| l == format!("new      {}", target.join("tree/big.bin").display())),
        "{out}"
    );
    // Again, keeping what is there: every file is skipped.
    let out = cairn(
        &repo,
        &[
            "restore",
            "-v",
            "latest",
            "--target",
            s(&target),
            "--overwrite",
            "never",
        ],
    )
    .ok()
    .stdout_str();
    let skipped = out.lines().filter(|l| l.starts_with("skipped ")).count();
    assert_eq!(skipped, 41, "{out}");
    // Without -v, no per-file lines.
    let out = cairn(&repo, &["restore", "latest", "--target", s(&target)])
        .ok()
        .stdout_str();
    assert!(!out.contains("replaced "), "{out}");
}
