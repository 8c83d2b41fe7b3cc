//! End-to-end tests of everyday behaviour around the commands: output into
//! a pipe closed early (`cairn ls | head`), tag changes by filter, what
//! `restore -v` prints, the progress total, files changing while read, and
//! names that are not UTF-8 given as arguments.

mod common;

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
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

#[test]
fn backup_progress_total_leaves_out_excluded_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, tree) = (tmp.path().join("repo"), tmp.path().join("tree"));
    let mut rng = Rng::new(4);
    // Enough to read that the bar is drawn a few times with its total.
    write_file(&tree.join("keep.bin"), &rng.bytes(12 << 20), 0o644);
    write_file(&tree.join("cache/big.bin"), &rng.bytes(30 << 20), 0o644);
    let Some(out) = on_terminal(&repo, &["backup", "--exclude", "cache", s(&tree)]) else {
        return;
    };
    assert!(out.contains("/12.00 MiB"), "no bar with the total:\n{out}");
    assert!(
        !out.contains("42.00 MiB"),
        "total counts the excluded file:\n{out}"
    );
}

#[test]
fn a_file_changing_during_the_read_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, tree) = (tmp.path().join("repo"), tmp.path().join("tree"));
    let mut rng = Rng::new(5);
    let busy = tree.join("busy.bin");
    write_file(&busy, &rng.bytes(24 << 20), 0o644);
    write_file(&tree.join("calm.txt"), b"calm", 0o644);
    // Another process keeps changing the file's times (and so its ctime)
    // for as long as the backup runs: its read (hundreds of milliseconds)
    // sees a change between the stat before and the one after.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let toucher = {
        let (stop, busy) = (stop.clone(), busy.clone());
        std::thread::spawn(move || {
            let mut t = 1_000_000_000;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                t += 1;
                set_mtime(&busy, (t, 0));
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let run = cairn(&repo, &["backup", "--json", s(&tree)]).ok();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    toucher.join().unwrap();
    let v = run.json();
    assert_eq!(v["changed_while_read"], 1, "{v}");
    assert_eq!(v["stats"]["files_changed_while_read"], 1, "{v}");
    assert_eq!(v["changed_while_read_paths"][0], s(&busy), "{v}");
    assert!(
        run.stderr.contains(&format!(
            "cairn: warning: {}: changed while it was read",
            busy.display()
        )),
        "{}",
        run.stderr
    );
    // Quiet now: nothing reported, the snapshot holds both files.
    let v = cairn(&repo, &["backup", "--json", "--force", s(&tree)])
        .ok()
        .json();
    assert_eq!(v["changed_while_read"], 0, "{v}");
    assert_eq!(v["stats"]["files"], 2, "{v}");
}

/// Runs `cairn --repo repo args` with arguments given as bytes.
fn cairn_bytes(repo: &Path, args: &[&[u8]]) -> Run {
    let args: Vec<&OsStr> = args.iter().map(|a| OsStr::from_bytes(a)).collect();
    let out = command(repo, &[])
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let shown = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Run {
        args: shown,
        code: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
    .ok()
}

#[test]
fn names_that_are_not_utf8_work_as_arguments_and_stay_faithful_in_json() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    // The source itself and a file below it have names that are not UTF-8.
    let src = tmp.path().join(OsStr::from_bytes(b"caf\xe9"));
    let file = src.join(OsStr::from_bytes(b"f\xff.txt"));
    write_file(&file, b"not utf-8", 0o644);
    write_file(&src.join("plain.txt"), b"plain", 0o644);
    let src_b = src.as_os_str().as_bytes();
    cairn_bytes(&repo, &[b"backup", b"--init", b"-q", src_b]);

    // The source path is recorded escaped, and --path finds it as bytes.
    let snaps = cairn_bytes(&repo, &[b"snapshots", b"--json", b"--path", src_b]).json();
    let want = format!("{}/caf\\xe9", s(tmp.path()));
    assert_eq!(snaps[0]["paths"][0], want.as_str(), "{snaps}");

    let raw: &[u8] = b"/caf\xe9/f\xff.txt";
    let cat = cairn_bytes(&repo, &[b"cat", b"latest", raw]);
    assert_eq!(cat.stdout, b"not utf-8");
    // The escaped text that ls prints addresses the same file.
    let cat = cairn_bytes(&repo, &[b"cat", b"latest", br"/caf\xe9/f\xff.txt"]);
    assert_eq!(cat.stdout, b"not utf-8");
    let dump = cairn_bytes(&repo, &[b"dump", b"latest", raw]);
    assert_eq!(dump.stdout, b"not utf-8");

    let paths = cairn_bytes(&repo, &[b"ls", b"--json", b"latest", b"/caf\xe9"]).json_paths();
    assert_eq!(
        paths,
        [r"caf\xe9", r"caf\xe9/f\xff.txt", r"caf\xe9/plain.txt"]
    );
    let human = cairn_bytes(&repo, &[b"ls", b"latest"]).stdout_str();
    assert!(human.contains(r"caf\xe9/f\xff.txt"), "{human}");

    let found = cairn_bytes(&repo, &[b"find", b"--json", b"f\xff*"]).json();
    assert_eq!(found[0]["path"], r"caf\xe9/f\xff.txt", "{found}");

    // Restore of the one file, selected by its raw path: the bytes come back.
    let out = tmp.path().join("out");
    let out_b = out.as_os_str().as_bytes();
    cairn_bytes(
        &repo,
        &[b"restore", b"latest", b"--target", out_b, b"--include", raw],
    );
    let back = out.join(OsStr::from_bytes(b"caf\xe9/f\xff.txt"));
    assert_eq!(std::fs::read(&back).unwrap(), b"not utf-8");
    assert!(!out.join(OsStr::from_bytes(b"caf\xe9/plain.txt")).exists());
}

#[test]
fn two_sources_with_one_base_name_keep_their_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    // Resolved, as the snapshot names the directories above the sources.
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (a, b) = (base.join("a/data"), base.join("b/data"));
    write_file(&a.join("one.txt"), b"from a", 0o644);
    write_file(&b.join("two.txt"), b"from b", 0o644);

    // A source inside another is refused before anything is created.
    let refused = cairn(&repo, &["backup", s(&a), s(&b), s(&base.join("a"))]);
    let line = refused.one_line_error();
    assert!(line.contains("give only the outer one"), "{line}");
    assert!(!repo.exists(), "a refused backup created the repository");
    // So is a parent in a repository that does not exist yet.
    cairn(&repo, &["backup", "--parent", "abcd", s(&a)]).one_line_error();
    assert!(!repo.exists(), "a refused backup created the repository");

    cairn(&repo, &["backup", "-q", s(&a), s(&b)]).ok();
    let snaps = snapshots(&repo);
    assert_eq!(snaps[0]["paths"], serde_json::json!([s(&a), s(&b)]));
    let rel = |p: &Path| p.strip_prefix("/").unwrap().to_str().unwrap().to_string();
    let paths = cairn(&repo, &["ls", "--json", "latest"]).ok().json_paths();
    assert!(paths.contains(&rel(&a.join("one.txt"))), "{paths:?}");
    assert!(paths.contains(&rel(&b.join("two.txt"))), "{paths:?}");
    let cat = cairn(&repo, &["cat", "latest", s(&b.join("two.txt"))]).ok();
    assert_eq!(cat.stdout, b"from b");
    let found = cairn(&repo, &["find", "--json", "*.txt"]).ok().json();
    assert_eq!(found.as_array().unwrap().len(), 2, "{found}");

    // Unchanged since the first backup: nothing read again, no difference.
    let v = cairn(&repo, &["backup", "--json", s(&a), s(&b)])
        .ok()
        .json();
    assert_eq!(v["stats"]["files_unmodified"], 2, "{v}");
    let ids = snapshot_ids(&repo);
    let diff = cairn(&repo, &["diff", "--json", &ids[0], &ids[1]])
        .ok()
        .json();
    assert_eq!(diff["changes"].as_array().unwrap().len(), 0, "{diff}");

    // Both restore, under the directories they came from.
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_eq!(
        std::fs::read(out.join(rel(&a)).join("one.txt")).unwrap(),
        b"from a"
    );
    assert_eq!(
        std::fs::read(out.join(rel(&b)).join("two.txt")).unwrap(),
        b"from b"
    );
    let out2 = tmp.path().join("out2");
    cairn(
        &repo,
        &["restore", "latest", "-t", s(&out2), "--include", s(&b)],
    )
    .ok();
    assert!(out2.join(rel(&b)).join("two.txt").exists());
    assert!(!out2.join(rel(&a)).exists());
}
