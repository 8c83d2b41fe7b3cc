//! Bad input: missing and unreadable paths, things that are not a
//! repository, and a second writer. Every failure is one `cairn: error:` line
//! on stderr (warnings aside) and a non-zero exit; nothing panics.

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn a_missing_path_among_valid_ones_still_makes_a_snapshot_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    let other = tmp.path().join("other.txt");
    let missing = tmp.path().join("missing-dir");
    build_sample_tree(&tree, &mut Rng::new(20));
    write_file(&other, b"other file\n", 0o644);
    let m = Manifest::capture(&tree);

    let r = cairn(
        &repo,
        &["backup", "--json", s(&tree), s(&missing), s(&other)],
    )
    .code(3);
    let err = r.one_line_error();
    assert!(err.contains("could not be read"), "{err}");
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("cairn: warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    assert!(warnings[0].contains(s(&missing)), "{}", warnings[0]);
    let b = r.json();
    assert_eq!(b["skipped"].as_array().unwrap().len(), 1);
    assert_eq!(b["stats"]["skipped_paths"].as_u64(), Some(1));

    // The snapshot exists and holds everything that could be read.
    let ids = snapshot_ids(&repo);
    assert_eq!(ids, vec![b["id"].as_str().unwrap().to_string()]);
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));
    assert_eq!(fs::read(out.join("other.txt")).unwrap(), b"other file\n");
    assert!(!out.join("missing-dir").exists());
    cairn(&repo, &["check"]).ok();

    // Without --json the human summary still goes to stdout.
    let r = cairn(&repo, &["backup", s(&other), s(&missing)]).code(3);
    r.one_line_error();
    assert!(r.stdout_str().contains("saved"), "{}", r.stdout_str());
}

#[test]
fn all_paths_missing_fails_without_a_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init", "-q"]).ok();
    let a = tmp.path().join("nope-a");
    let b = tmp.path().join("nope-b");
    let r = cairn(&repo, &["backup", s(&a), s(&b)]).code(1);
    let err = r.one_line_error();
    assert!(err.contains("nothing to back up"), "{err}");
    // It names a missing path.
    assert!(err.contains("nope-a") || err.contains("nope-b"), "{err}");
    assert!(snapshot_ids(&repo).is_empty());
    cairn(&repo, &["check"]).ok();
    // The repository is still usable.
    let f = tmp.path().join("f.txt");
    write_file(&f, b"x", 0o644);
    cairn(&repo, &["backup", "-q", s(&f)]).ok();
    assert_eq!(snapshot_ids(&repo).len(), 1);
}

#[test]
fn unreadable_files_are_skipped_with_a_warning_exit_3() {
    // Root reads a chmod-000 file: as root, the backup runs as `nobody`.
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    cairn(&repo, &["init", "-q"]).ok();
    let tree = tmp.path().join("tree");
    build_sample_tree(&tree, &mut Rng::new(21));
    let locked = tree.join("locked.bin");
    let locked_dir = tree.join("locked-dir");
    write_file(&locked, b"secret", 0o644);
    write_file(&locked_dir.join("inner.txt"), b"inner", 0o644);
    let mut expected = Manifest::capture(&tree);
    for k in ["locked.bin", "locked-dir", "locked-dir/inner.txt"] {
        expected.0.remove(k).unwrap();
    }
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    fs::set_permissions(&locked_dir, fs::Permissions::from_mode(0o000)).unwrap();

    let r = unprivileged_cairn(tmp.path(), &repo, &["backup", s(&tree)]);
    // Restore permissions before asserting so the tempdir can be removed.
    fs::set_permissions(&locked_dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o644)).unwrap();
    let Some(r) = r else { return };
    let r = r.code(3);
    let err = r.one_line_error();
    assert!(err.contains("2 path(s)"), "{err}");
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("cairn: warning:"))
        .collect();
    assert_eq!(warnings.len(), 2, "{}", r.stderr);
    assert!(r.stderr.contains("locked.bin"), "{}", r.stderr);
    assert!(r.stderr.contains("locked-dir"), "{}", r.stderr);

    // Everything else is in the snapshot, byte-identical.
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", "latest", "-t", s(&out)]).ok();
    assert_tree_matches(&expected, &out.join("tree"));
    cairn(&repo, &["check", "--read-data"]).ok();
}

/// Every command against `repo`, which is not a usable repository, fails
/// with one line and exit 1, and leaves `repo` as it was.
fn every_command_fails_cleanly(repo: &Path, tmp: &Path, expect: &str) {
    let source = tmp.join("source.txt");
    write_file(&source, b"data", 0o644);
    let before = repo.exists().then(|| fs::symlink_metadata(repo).unwrap());
    let before_tree = (repo.is_dir()).then(|| Manifest::capture(repo));
    let target = tmp.join("restore-target");
    for args in [
        vec!["snapshots"],
        vec!["snapshots", "--json"],
        vec!["ls", "latest"],
        vec!["cat", "latest", "x"],
        vec!["restore", "latest", "-t", s(&target)],
        vec!["stats"],
        vec!["check"],
        vec!["check", "--read-data"],
        vec!["backup", s(&source)],
        vec!["init"],
    ] {
        let r = cairn(repo, &args).code(1);
        let err = r.one_line_error();
        if args[0] != "init" && args[0] != "backup" {
            assert!(err.contains(expect), "{args:?}: {err}");
        }
        assert!(r.stdout.is_empty() || args[0] == "backup", "{args:?}");
    }
    assert!(!target.exists(), "a failed restore created its target");
    match before {
        None => assert!(!repo.exists(), "a reader created {}", repo.display()),
        Some(m) => {
            let now = fs::symlink_metadata(repo).unwrap();
            assert_eq!(m.len(), now.len());
            assert_eq!(m.file_type(), now.file_type());
        }
    }
    if let Some(t) = before_tree {
        assert_eq!(t, Manifest::capture(repo), "the directory was modified");
    }
}

#[test]
fn repo_that_is_not_a_repository() {
    let tmp = tempfile::tempdir().unwrap();
    // A non-empty directory that is not a repository.
    let dir = tmp.path().join("photos");
    write_file(&dir.join("cat.jpg"), b"meow", 0o644);
    every_command_fails_cleanly(&dir, tmp.path(), "not a cairn repository");
    // A regular file.
    let file = tmp.path().join("file.txt");
    write_file(&file, b"just a file", 0o644);
    every_command_fails_cleanly(&file, tmp.path(), "file.txt");
}

#[test]
fn readers_on_an_empty_or_missing_directory_fail_without_creating_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let missing = tmp.path().join("missing");
    for repo in [&empty, &missing] {
        for args in [
            vec!["snapshots"],
            vec!["stats"],
            vec!["check"],
            vec!["ls", "latest"],
        ] {
            let err = cairn(repo, &args).code(1).one_line_error();
            assert!(err.contains("not a cairn repository"), "{err}");
        }
    }
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);
    assert!(!missing.exists());
}

// ---------------------------------------------------------------------------
// The writer lock
// ---------------------------------------------------------------------------

const HELD_ARGS: [&str; 5] = ["backup", "--json", "--stdin", "--stdin-name", "held.bin"];

/// Starts a `backup --stdin` and returns once it holds the writer lock.
fn hold_lock(repo: &Path, first_part: &[u8]) -> (Child, ChildStdin) {
    let mut child = command(repo, &HELD_ARGS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // cairn reads standard input only after it took the writer lock, and
    // writing more than a pipe holds (64 KiB) returns only once it reads.
    assert!(first_part.len() >= 1 << 20);
    stdin.write_all(first_part).unwrap();
    (child, stdin)
}

/// Feeds the held backup (`hold_lock`) the rest of its input, waits for
/// it, and checks that its snapshot holds both parts; its snapshot id.
fn finish_held(
    repo: &Path,
    child: Child,
    mut stdin: ChildStdin,
    part1: &[u8],
    part2: &[u8],
) -> String {
    stdin.write_all(part2).unwrap();
    drop(stdin);
    let first = finish(child, &HELD_ARGS).ok();
    let id = first.json()["id"].as_str().unwrap().to_string();
    let all = [part1, part2].concat();
    let cat = cairn(repo, &["cat", &id, "held.bin"]).ok();
    assert!(cat.stdout == all, "the held backup stored different bytes");
    id
}

fn lock_scenario(tmp: &Path) -> (std::path::PathBuf, Vec<u8>, Vec<u8>) {
    let repo = tmp.join("repo");
    cairn(&repo, &["init", "-q"]).ok();
    let mut rng = Rng::new(22);
    (repo, rng.bytes(2 << 20), rng.bytes(3 << 20))
}

/// A repository's first backup writes its first index file, so it runs
/// alone: a second writer meanwhile is refused with one line.
#[test]
fn a_second_writer_fails_with_one_line_about_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, part1, part2) = lock_scenario(tmp.path());
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(23), 3, 100_000);

    let (child, stdin) = hold_lock(&repo, &part1);
    let started = Instant::now();
    let r = cairn(&repo, &["backup", s(&tree)]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "did not fail fast"
    );
    let err = r.one_line_error();
    assert!(err.contains("lock"), "{err}");
    assert!(
        err.contains("--wait"),
        "the error should suggest --wait: {err}"
    );
    // Readers take no lock.
    let snaps = snapshots(&repo);
    assert!(snaps.is_empty());
    cairn(&repo, &["check"]).ok();

    finish_held(&repo, child, stdin, &part1, &part2);
    // After the first writer is gone, the second succeeds.
    cairn(&repo, &["backup", "-q", s(&tree)]).ok();
    cairn(&repo, &["check", "--read-data"]).ok();
}

/// Once the repository has an index file, backups share the writer lock
/// (docs/concurrency.md): a second backup commits while the first still
/// runs, `forget` runs beside them too, an exclusive writer (`fastcopy`)
/// is refused with one line, and both snapshots hold what was backed up.
#[test]
fn backups_run_together_once_the_repository_has_an_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, part1, part2) = lock_scenario(tmp.path());
    let first_tree = tmp.path().join("first");
    build_random_files(&first_tree, &mut Rng::new(26), 2, 50_000);
    cairn(&repo, &["backup", "-q", s(&first_tree)]).ok();
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(27), 3, 100_000);

    let (child, stdin) = hold_lock(&repo, &part1);
    let second = cairn(&repo, &["backup", "--json", s(&tree)]).ok();
    let id2 = second.json()["id"].as_str().unwrap().to_string();
    cairn(&repo, &["forget", "-q", "--keep-last", "100"]).ok();
    let err = cairn(&repo, &["fastcopy", &id2]).one_line_error();
    assert!(err.contains("lock"), "{err}");
    finish_held(&repo, child, stdin, &part1, &part2);
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", &id2, "-t", s(&out)]).ok();
    assert_tree_matches(&Manifest::capture(&tree), &out.join("tree"));
    cairn(&repo, &["check", "--read-data"]).ok();
}

/// Runs the `--wait` scenario: a writer holds the lock while a second one
/// (backing up `tree`, new data) waits. Returns the ids of both snapshots and
/// the bytes the first stored.
fn wait_scenario(tmp: &Path, tree: &Path) -> (std::path::PathBuf, String, String, Vec<u8>) {
    let (repo, part1, part2) = lock_scenario(tmp);
    let (child, mut stdin) = hold_lock(&repo, &part1);

    let wait_args = ["backup", "--wait", "--json", s(tree)];
    let mut waiter = Watched::spawn(command(&repo, &wait_args).stdin(Stdio::null()), &wait_args);
    // The waiter reports that it found the lock held and blocks (the kernel
    // shows it blocked on the lock file); until the first writer is done it
    // neither exits nor commits.
    assert!(
        waiter.wait_for_stderr(
            "cairn: waiting for another writer to finish",
            Duration::from_secs(120)
        ),
        "--wait did not report waiting for the first writer:\n{}",
        waiter.stderr_so_far()
    );
    wait_until_flock_blocked(&repo.join("locks/write"), Duration::from_secs(120));
    assert!(
        waiter.still_running(),
        "--wait did not wait for the first writer"
    );
    assert!(
        snapshots(&repo).is_empty(),
        "a snapshot was committed while the first writer held the lock"
    );
    stdin.write_all(&part2).unwrap();
    drop(stdin);
    let first = finish(child, &HELD_ARGS).ok();
    let second = waiter.finish(Duration::from_secs(300)).ok();
    let id1 = first.json()["id"].as_str().unwrap().to_string();
    let id2 = second.json()["id"].as_str().unwrap().to_string();
    let mut all = part1;
    all.extend_from_slice(&part2);
    (repo, id1, id2, all)
}

#[test]
fn wait_waits_for_the_first_writer_then_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(24), 4, 1_500_000);
    let m = Manifest::capture(&tree);
    let (repo, id1, id2, _) = wait_scenario(tmp.path(), &tree);
    // Both committed, the waiter last.
    assert_eq!(snapshot_ids(&repo), vec![id1, id2.clone()]);
    let out = tmp.path().join("out");
    cairn(&repo, &["restore", &id2, "-t", s(&out)]).ok();
    assert_tree_matches(&m, &out.join("tree"));
}

#[test]
fn wait_keeps_the_first_writers_data() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    build_random_files(&tree, &mut Rng::new(25), 4, 1_500_000);
    let (repo, id1, _, held) = wait_scenario(tmp.path(), &tree);
    let cat = cairn(&repo, &["cat", &id1, "held.bin"]);
    assert_eq!(cat.code, Some(0), "{}", cat.stderr);
    assert!(cat.stdout == held, "the first writer's data changed");
    cairn(&repo, &["check", "--read-data"]).ok();
}

/// A backup of a nonexistent path into a repository that does not exist
/// yet fails without creating the repository.
#[test]
fn backup_of_a_missing_path_creates_no_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let err = cairn(&repo, &["backup", s(&tmp.path().join("nope"))]).one_line_error();
    assert!(err.contains("nope"), "{err}");
    assert!(!repo.exists(), "the repository was created for nothing");
}

/// `--repo` values that name a remote store are refused with one line,
/// and no local directory of that name appears.
#[test]
fn remote_repository_urls_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("f.txt");
    write_file(&f, b"x", 0o644);
    // S3 repositories are supported (tests/s3.rs).
    for url in [
        "sftp:user@host:/srv/repo",
        "rest:http://host:8000/",
        "gs:bucket:/",
        "azure:container:/",
        "b2:bucket:repo",
        "rclone:remote:repo",
        "user@host:/srv/repo",
    ] {
        for args in [vec!["init"], vec!["backup", s(&f)], vec!["snapshots"]] {
            let r = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
                .current_dir(tmp.path())
                .env_remove("CAIRN_REPO")
                .arg("--repo")
                .arg(url)
                .args(&args)
                .output()
                .unwrap();
            assert_eq!(r.status.code(), Some(1), "{url} {args:?}");
            let err = String::from_utf8_lossy(&r.stderr);
            assert!(err.contains("not supported"), "{url}: {err}");
            assert!(
                err.contains("cairn supports local paths and s3:"),
                "{url}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{url}: {err}");
        }
        let scheme = url.split(':').next().unwrap();
        assert!(!tmp.path().join(format!("{scheme}:")).exists(), "{url}");
        assert!(!tmp.path().join(url).exists(), "{url}");
    }
}

/// `sim` and `trace` take only the flags they use: a chunking flag for a
/// simulation (the trace fixes the chunks) and a repository flag for a
/// trace are refused with one line, not silently ignored.
#[test]
fn sim_and_trace_refuse_flags_they_do_not_use() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write_file(&tree.join("f"), b"some data", 0o644);
    let t = tmp.path().join("t.ctr");
    let r = cairn(
        tmp.path(),
        &["trace", s(&tree), "-o", s(&t), "--container-size", "1MiB"],
    );
    assert!(r
        .one_line_error()
        .contains("--container-size does not apply to cairn trace"));
    assert!(!t.exists());
    cairn(
        tmp.path(),
        &["trace", s(&tree), "-o", s(&t), "--chunker", "rabin"],
    )
    .ok();
    let r = cairn(tmp.path(), &["sim", s(&t), "--chunker", "fixed"]);
    assert!(r
        .one_line_error()
        .contains("--chunker does not apply to cairn sim"));
    cairn(tmp.path(), &["sim", s(&t), "--container-size", "1MiB"]).ok();
}

/// A misspelled policy or size is clap's usage error (exit 2) naming the
/// option and its valid values, before the password is looked for: the
/// password command, which would leave a marker file, never runs.
#[test]
fn misspelled_policies_fail_before_any_password() {
    set_encryption("aes-256-gcm");
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    cairn(&repo, &["init"]).ok();
    let marker = tmp.path().join("password-asked");
    let ask = format!("touch {} && echo {TEST_PASSWORD}", s(&marker));
    let restore_target = tmp.path().join("out");
    let cases: [(&[&str], &str); 6] = [
        (&["backup", s(&tree), "--dedup", "inlined"], "--dedup"),
        (&["backup", s(&tree), "--chunker", "fastcdcc"], "--chunker"),
        (
            &["backup", s(&tree), "--avg-size", "8 bananas"],
            "--avg-size",
        ),
        (
            &[
                "restore",
                "latest",
                "-t",
                s(&restore_target),
                "--overwrite",
                "sometimes",
            ],
            "--overwrite",
        ),
        (
            &[
                "restore",
                "latest",
                "-t",
                s(&restore_target),
                "--restore-policy",
                "lru",
            ],
            "--restore-policy",
        ),
        (&["gc", "--collector", "pgc++"], "--collector"),
    ];
    for (args, option) in cases {
        let out = command(&repo, args)
            .env_remove("CAIRN_PASSWORD")
            .env("CAIRN_PASSWORD_COMMAND", &ask)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(option), "{args:?}: {err}");
        assert!(!marker.exists(), "{args:?}: the password was asked for");
    }
    // `--password-command` is the flag form of CAIRN_PASSWORD_COMMAND.
    let out = command(&repo, &["--password-command", &ask, "snapshots"])
        .env_remove("CAIRN_PASSWORD")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists(), "the password command did not run");
}

/// A backup into a location without a repository fails with one line
/// naming it and saying how to create one, and creates nothing; with
/// --init it creates the repository, and a second `backup --init` reuses
/// it.
#[test]
fn backup_never_creates_a_repository_without_init() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    let mistyped = tmp.path().join("repo-typo");
    let out = cairn_as_typed(&mistyped, &["backup", s(&tree)], &[]);
    let err = &out.stderr;
    assert_eq!(out.code, Some(1), "{err}");
    assert!(
        err.contains("repo-typo") && err.contains("cairn init"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!mistyped.exists(), "a mistyped path became a repository");
    for _ in 0..2 {
        cairn_as_typed(&mistyped, &["backup", "--init", s(&tree)], &[]).ok();
    }
    assert_eq!(snapshot_ids(&mistyped).len(), 2);
    // Readers name the missing repository and how to create one too.
    let e = cairn(&tmp.path().join("nothing"), &["snapshots"]).one_line_error();
    assert!(
        e.contains("nothing") && e.contains("cairn init --repo"),
        "{e}"
    );
}

/// Options that only shape a new repository are an error on an existing
/// one (before any password), not silently ignored.
#[test]
fn creation_options_on_an_existing_repository_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    cairn(&repo, &["backup", s(&tree)]).ok();
    for args in [
        ["backup", "--chunker", "rabin", s(&tree)],
        ["backup", "--init", "--chunker=rabin", s(&tree)],
    ] {
        let e = cairn(&repo, &args).one_line_error();
        assert!(
            e.contains("--chunker") && e.contains("already holds one"),
            "{e}"
        );
    }
    assert_eq!(snapshot_ids(&repo).len(), 1);
}

/// A lookup setting that differs from the repository's is refused in words,
/// not as a Rust structure (`LookupConfig { strategy: Lazy, .. }`).
#[test]
fn differing_index_settings_are_described_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tree = tmp.path().join("tree");
    write_file(&tree.join("a"), b"a", 0o644);
    cairn(&repo, &["backup", s(&tree)]).ok();
    let e = cairn(&repo, &["backup", "--lookup", "lazy", s(&tree)]).one_line_error();
    assert!(
        e.contains("lazy lookup") && e.contains("eager lookup"),
        "{e}"
    );
    assert!(
        !e.contains('{') && !e.contains("Lazy"),
        "a Debug structure: {e}"
    );
}

/// Commands that open no repository refuse a repository option given on
/// their command line (before or after the command name) instead of
/// ignoring it; CAIRN_REPO in the environment is no error.
#[test]
fn commands_without_a_repository_refuse_repository_options() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    for args in [
        vec!["--repo", s(&repo), "sim", "--workload", "ddfs"],
        vec!["sim", "--repo", s(&repo), "--workload", "ddfs"],
        vec!["analyze", "--no-cache", s(tmp.path())],
        vec!["completions", "bash", "--password-file", "/nonexistent"],
    ] {
        let out = base_command()
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("does not apply"), "{args:?}: {err}");
    }
    let out = base_command()
        .args(["completions", "bash"])
        .env("CAIRN_REPO", &repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!repo.exists());
}
