//! A restic user's first hour, end to end through the `cairn` binary: the
//! README's usage section walked in order (init, backup, snapshots, the
//! browsing commands with the paths `snapshots` and `ls` print, restore with
//! `--include` and `--dry-run`, forget, check, key management, mount), with
//! the output a person reads asserted line by line, not only exit codes.
//!
//! Times are shown in UTC (`TZ=UTC`) so the lines are deterministic.

mod common;

use std::fs;
use std::path::Path;
use std::process::Stdio;

use common::fuse::mount;
use common::*;

/// `cairn --repo repo args...` as the user types it (no `--init` added by
/// the harness): the test password in `CAIRN_PASSWORD`, times in UTC.
fn run(repo: &Path, args: &[&str]) -> Run {
    cairn_as_typed(repo, args, &[("TZ", "UTC")])
}

/// The lines of standard output.
fn lines(r: &Run) -> Vec<String> {
    r.stdout_str().lines().map(str::to_string).collect()
}

/// Asserts that some line of `out` contains every one of `parts`.
#[track_caller]
fn has_line(out: &[String], parts: &[&str]) {
    assert!(
        out.iter().any(|l| parts.iter().all(|p| l.contains(p))),
        "no line with {parts:?} in:\n{}",
        out.join("\n")
    );
}

#[test]
fn a_restic_users_first_hour_reads_right() {
    let tmp = tempfile::tempdir().unwrap();
    let home = fs::canonicalize(tmp.path()).unwrap();
    let src = home.join("Documents");
    write_file(&src.join("taxes/2025.pdf"), &vec![7u8; 300_000], 0o644);
    write_file(&src.join("notes.txt"), b"buy milk\n", 0o644);
    write_file(&src.join("Photo.JPG"), &vec![9u8; 50_000], 0o644);
    fs::hard_link(src.join("notes.txt"), src.join("notes-link.txt")).unwrap();
    // Times well in the past: a file changed in the second of a backup is
    // read again by the next one (its mtime cannot tell), as in git.
    age(&src, 1_700_000_000);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let src_s = s(&src).to_string();
    let repo = home.join("repo");

    // A mistyped repository is an error, not a new repository.
    let typo = home.join("rpeo");
    let r = run(&typo, &["backup", &src_s]);
    assert_ne!(
        r.code,
        Some(0),
        "a backup to a missing repository succeeded"
    );
    assert!(r.stderr.contains("cairn init"), "{}", r.stderr);
    assert!(!typo.exists(), "the mistyped repository was created");

    // init, then the first backup: every file new.
    let r = run(&repo, &["init"]).ok();
    assert!(r.stdout_str().contains("created cairn repository"));
    let out = lines(&run(&repo, &["backup", &src_s]).ok());
    has_line(&out, &["snapshot", "saved"]);
    has_line(&out, &["files: 4 new, 0 changed, 0 unmodified"]);

    // A change, and the second backup with -v names each file's state;
    // the hard link's second name stays unmodified.
    write_file(&src.join("notes.txt"), b"buy milk and bread\n", 0o644);
    fs::remove_file(src.join("notes-link.txt")).unwrap();
    fs::hard_link(src.join("notes.txt"), src.join("notes-link.txt")).unwrap();
    set_mtime(&src.join("notes.txt"), (1_700_000_100, 0));
    // A file whose ctime is within the backup's racy margin (20 ms) of its
    // start cannot be trusted unchanged by the next backup and is read
    // again: let the changes settle first, as a person's would.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let out = lines(&run(&repo, &["backup", &src_s, "-v"]).ok());
    has_line(&out, &["changed", "Documents/notes.txt"]);
    has_line(&out, &["unmodified", "Documents/taxes/2025.pdf"]);
    has_line(&out, &["unmodified", "Documents/Photo.JPG"]);
    assert!(
        !out.iter()
            .any(|l| l.contains("bloom") || l.contains("ALACC")),
        "lookup jargon in -v:\n{}",
        out.join("\n")
    );
    let out = lines(&run(&repo, &["backup", &src_s, "-v"]).ok());
    has_line(&out, &["files: 0 new, 0 changed, 4 unmodified"]);

    // snapshots: three rows, the source path absolute, times in UTC.
    let out = lines(&run(&repo, &["snapshots"]).ok());
    assert!(out[0].starts_with("id"), "{out:?}");
    let rows: Vec<&String> = out.iter().filter(|l| l.contains(&src_s)).collect();
    assert_eq!(rows.len(), 3, "{out:?}");
    assert!(rows.iter().all(|l| l.contains(" UTC ")), "{rows:?}");
    let ids: Vec<String> = rows
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let out = lines(&run(&repo, &["snapshots", "--latest", "1"]).ok());
    assert_eq!(out.iter().filter(|l| l.contains(&src_s)).count(), 1);

    // The path snapshots printed works in ls, cat, dump, find and diff.
    let out = lines(&run(&repo, &["ls", "latest", &src_s]).ok());
    has_line(&out, &["-rw-r--r--", "Documents/notes.txt"]);
    has_line(&out, &["drwxr-xr-x", "Documents/taxes"]);
    let notes = format!("{src_s}/notes.txt");
    let r = run(&repo, &["cat", "latest", &notes]).ok();
    assert_eq!(r.stdout, b"buy milk and bread\n");
    // ... and so does the path ls printed.
    let r = run(&repo, &["cat", "latest", "/Documents/notes.txt"]).ok();
    assert_eq!(r.stdout, b"buy milk and bread\n");
    let r = run(&repo, &["dump", "latest", &format!("{src_s}/taxes")]).ok();
    let names = tar_names(&r.stdout);
    assert_eq!(
        names,
        ["Documents/taxes", "Documents/taxes/2025.pdf"],
        "{names:?}"
    );
    let out = lines(&run(&repo, &["find", "-i", "*.jpg"]).ok());
    assert_eq!(out.len(), 3, "one match per snapshot: {out:?}");
    has_line(&out, &[&ids[0], "Documents/Photo.JPG"]);
    let out = lines(&run(&repo, &["diff", &ids[0], &ids[1], &src_s]).ok());
    has_line(&out, &["M", "Documents/notes.txt"]);
    assert!(!out.iter().any(|l| l.contains("2025.pdf")), "{out:?}");

    // restore: a dry run names what it would do and writes nothing; the
    // real one restores just the included folder, byte for byte.
    let target = home.join("restored");
    let taxes = format!("{src_s}/taxes");
    let restore = |extra: &[&str]| {
        let mut args = vec![
            "restore",
            "latest",
            "--target",
            s(&target),
            "--include",
            &taxes,
        ];
        args.extend_from_slice(extra);
        lines(&run(&repo, &args).ok())
    };
    let out = restore(&["--dry-run"]);
    has_line(&out, &["dry run: would restore 1 files"]);
    has_line(&out, &["nothing was changed"]);
    assert!(!target.exists(), "a dry run created the target");
    let out = restore(&[]);
    has_line(&out, &["restored 1 files"]);
    assert_eq!(
        fs::read(target.join("Documents/taxes/2025.pdf")).unwrap(),
        vec![7u8; 300_000]
    );
    assert!(!target.join("Documents/notes.txt").exists());

    // forget the first snapshot: the counts cover the repository.
    let out = lines(&run(&repo, &["forget", &ids[0]]).ok());
    has_line(&out, &["remove", &ids[0]]);
    has_line(&out, &["2 snapshots kept, 1 removed"]);

    // check: clean, in words.
    let out = lines(&run(&repo, &["check"]).ok());
    has_line(&out, &["checked 2 snapshots"]);
    has_line(&out, &["no problems found"]);

    // Key management: a second password opens the repository, the list
    // marks the key in use, and that key cannot be removed by mistake.
    let second = home.join("second-password");
    fs::write(&second, "another secret\n").unwrap();
    run(&repo, &["key", "add", "--new-password-file", s(&second)]).ok();
    let out = lines(&run(&repo, &["key", "list"]).ok());
    assert_eq!(
        out.iter().filter(|l| l.starts_with('*')).count(),
        1,
        "{out:?}"
    );
    assert_eq!(out.len(), 3, "a header and two keys: {out:?}");
    let r = cairn_pw(&repo, "another secret", &["snapshots"]).ok();
    assert!(r.stdout_str().contains(&src_s));
    let in_use = out
        .iter()
        .find(|l| l.starts_with('*'))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();
    let r = run(&repo, &["key", "remove", &in_use]);
    assert_ne!(r.code, Some(0), "removing the key in use succeeded");
    assert!(r.stderr.contains("--force"), "{}", r.stderr);

    // unlock once, then commands need no password until lock.
    let out = lines(&run(&repo, &["unlock", "--for", "10m"]).ok());
    assert!(!out.is_empty(), "unlock said nothing");
    let r = cairn_with_env(&repo, &["snapshots"], &[("TZ", "UTC")]).ok();
    assert!(r.stdout_str().contains(&src_s));
    run(&repo, &["lock"]).ok();
    let r = cairn_with_env(&repo, &["snapshots"], &[]);
    assert_ne!(
        r.code,
        Some(0),
        "a locked repository opened without a password"
    );
    assert!(r.stderr.contains("password"), "{}", r.stderr);

    // mount: the newest snapshot by name, its files readable.
    let mnt = home.join("mnt");
    fs::create_dir(&mnt).unwrap();
    if let Some(m) = mount(&repo, &mnt) {
        let latest = mnt.join("snapshots/latest");
        let text = fs::read(latest.join("Documents/notes.txt")).unwrap();
        assert_eq!(text, b"buy milk and bread\n");
        let mut ids_seen: Vec<String> = fs::read_dir(mnt.join("ids"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        ids_seen.sort();
        assert_eq!(ids_seen.len(), 2, "{ids_seen:?}");
        drop(m);
    }
}

/// Sets the mtime of every file under `root` to `secs`.
fn age(root: &Path, secs: i64) {
    for p in walk(root) {
        if p.is_file() {
            set_mtime(&p, (secs, 0));
        }
    }
}

/// The names in a tar archive, in order.
fn tar_names(archive: &[u8]) -> Vec<String> {
    let mut child = std::process::Command::new("tar")
        .arg("tf")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running tar");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(archive).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect()
}
