//! Issue 31, friction 1: `restore ID:subfolder` as in restic. The
//! subfolder's contents land in the target directly (`T/b.txt`, not
//! `T/sub/b.txt`) and the target gets the subfolder's own metadata; the
//! subfolder may be written as a snapshot path or as the path it was backed
//! up from; a file restores as `T/<name>`; a missing subfolder is one error
//! line and nothing written; `--include`/`--exclude` are relative to the
//! subfolder; `--dry-run`, `--verify` and `--delete` work from the subfolder
//! too, `--delete` only inside the target (docs/restore-select.md).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// The mtime every backed-up entry gets (seconds since the epoch).
const T: i64 = 1_600_000_000;

/// A backup of `<tmp>/home/me/docs`: files beside and inside `sub`, a
/// nested directory, a symlink and a multi-chunk file inside `sub`, which
/// has its own mode and mtime.
struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    /// The backed-up tree (absolute, as the snapshot records it).
    src: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let src = fs::canonicalize(tmp.path()).unwrap().join("home/me/docs");
    let mut rng = Rng::new(8);
    write_file(&src.join("a.txt"), &rng.text(1_500), 0o644);
    write_file(&src.join("sub/b.txt"), &rng.text(2_500), 0o640);
    write_file(&src.join("sub/notes.md"), &rng.text(700), 0o600);
    write_file(&src.join("sub/deep/c.bin"), &rng.bytes(300_000), 0o644);
    write_file(&src.join("sub/deep/run.log"), &rng.text(400), 0o644);
    write_file(&src.join("other/d.txt"), &rng.text(900), 0o644);
    symlink("b.txt", &src.join("sub/link"));
    for (i, p) in walk(&src).into_iter().enumerate() {
        if !fs::symlink_metadata(&p).unwrap().file_type().is_symlink() {
            set_mtime(&p, (T + i as i64, 7));
        }
    }
    fs::set_permissions(
        src.join("sub"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    cairn(&repo, &["init", "-q"]).ok();
    cairn(&repo, &["backup", "-q", s(&src)]).ok();
    Fixture { tmp, repo, src }
}

impl Fixture {
    /// A target path under the test's directory (not created).
    fn target(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn restore(&self, spec: &str, target: &Path, extra: &[&str]) -> Run {
        let mut args = vec!["restore", spec, "--target", s(target)];
        args.extend_from_slice(extra);
        cairn(&self.repo, &args)
    }

    /// The source's subtree at `rel`, re-rooted (its own entry is `""`).
    fn expected(&self, rel: &str) -> Manifest {
        Manifest::capture(&self.src).subtree(rel)
    }

    fn short_id(&self) -> String {
        snapshot_ids(&self.repo)[0][..8].to_string()
    }
}

#[test]
fn a_subfolder_restores_its_contents_into_the_target_in_both_path_forms() {
    let f = fixture();
    let id = f.short_id();
    let backed_up = format!("{id}:{}", f.src.join("sub").display());
    for (i, spec) in ["latest:/docs/sub", "latest:docs/sub", backed_up.as_str()]
        .iter()
        .enumerate()
    {
        let out = f.target(&format!("out{i}"));
        let run = f.restore(spec, &out, &[]).ok();
        assert!(
            run.stdout_str()
                .contains("restored 4 files, 2 dirs, 1 symlinks"),
            "{spec}: {}",
            run.stdout_str()
        );
        // Byte-identical, with modes and mtimes, and the target itself
        // carrying the subfolder's mode and mtime.
        assert_tree_matches(&f.expected("sub"), &out);
        assert!(!out.join("sub").exists() && !out.join("docs").exists());
    }
    // The whole snapshot, `ID:/`, is the plain restore.
    let out = f.target("whole");
    f.restore("latest:/", &out, &["-q"]).ok();
    assert_tree_matches(&Manifest::capture(&f.src), &out.join("docs"));
}

#[test]
fn a_nested_folder_and_a_file_as_the_subfolder() {
    let f = fixture();
    let out = f.target("deep");
    f.restore("latest:/docs/sub/deep", &out, &["-q"]).ok();
    assert_tree_matches(&f.expected("sub/deep"), &out);

    // A file lands as TARGET/NAME; what else is in the target stays.
    let out = f.target("one");
    write_file(&out.join("mine.txt"), b"mine", 0o644);
    let abs = f.src.join("sub/b.txt");
    f.restore(
        &format!("latest:{}", abs.display()),
        &out,
        &["-q", "--delete"],
    )
    .ok();
    let restored = Manifest::capture(&out);
    assert_eq!(restored.0.len(), 3, "{:?}", restored.0.keys());
    assert_eq!(restored.0["b.txt"], f.expected("sub").0["b.txt"]);
    assert_eq!(fs::read(out.join("mine.txt")).unwrap(), b"mine");
    // A symlink likewise.
    let out = f.target("link");
    f.restore("latest:/docs/sub/link", &out, &["-q"]).ok();
    assert_eq!(fs::read_link(out.join("link")).unwrap(), Path::new("b.txt"));
}

#[test]
fn a_missing_subfolder_is_one_error_and_nothing_is_written() {
    let f = fixture();
    let id = f.short_id();
    let out = f.target("missing");
    let run = f.restore("latest:/docs/nope", &out, &[]).code(1);
    let line = run.one_line_error();
    assert!(line.contains("/docs/nope") && line.contains(&id), "{line}");
    assert!(!out.exists());
    // An existing target is left exactly as it was.
    write_file(&out.join("keep.txt"), b"keep", 0o644);
    let before = Manifest::capture(&out);
    let run = f.restore(&format!("{id}:docs/sub/nope.txt"), &out, &["--delete"]);
    run.code(1).one_line_error();
    assert_eq!(Manifest::capture(&out), before);
}

#[test]
fn include_and_exclude_are_relative_to_the_subfolder() {
    let f = fixture();
    let out = f.target("inc");
    f.restore("latest:/docs/sub", &out, &["-q", "--include", "/deep"])
        .ok();
    let got = Manifest::capture(&out);
    let keys: Vec<&str> = got.0.keys().map(String::as_str).collect();
    assert_eq!(keys, ["", "deep", "deep/c.bin", "deep/run.log"]);
    assert_eq!(got.file("deep/c.bin"), f.expected("sub").file("deep/c.bin"));

    let out = f.target("exc");
    let abs = f.src.join("sub");
    f.restore(
        &format!("latest:{}", abs.display()),
        &out,
        &["-q", "--exclude", "*.log", "--exclude", "/notes.md"],
    )
    .ok();
    let mut want = f.expected("sub");
    want.0.remove("deep/run.log");
    want.0.remove("notes.md");
    // The directory that lost an entry gets its recorded mtime all the same.
    assert_tree_matches(&want, &out);

    // A pattern matching nothing below the subfolder (`a.txt` is beside
    // it) is the usual one error line, before the target is created.
    let out = f.target("none");
    let run = f.restore("latest:/docs/sub", &out, &["--include", "/a.txt"]);
    assert!(run.code(1).one_line_error().contains("a.txt"));
    assert!(!out.exists());
}

#[test]
fn dry_run_lists_what_it_would_write_and_writes_nothing() {
    let f = fixture();
    let out = f.target("dry");
    let run = f
        .restore("latest:/docs/sub", &out, &["-v", "--dry-run"])
        .ok();
    let text = run.stdout_str();
    for name in ["b.txt", "notes.md", "link", "deep/c.bin", "deep/run.log"] {
        let line = format!("new      {}", out.join(name).display());
        assert!(text.contains(&line), "{line:?} not in:\n{text}");
    }
    assert!(!text.contains("a.txt") && !text.contains("/sub/"), "{text}");
    assert!(
        text.contains("would restore 4 files, 2 dirs, 1 symlinks"),
        "{text}"
    );
    assert!(!out.exists());
    // The real run does what the dry run said.
    let real = f.restore("latest:/docs/sub", &out, &[]).ok();
    assert!(
        real.stdout_str()
            .contains("restored 4 files, 2 dirs, 1 symlinks"),
        "{}",
        real.stdout_str()
    );
}

#[test]
fn verify_checks_the_subfolder_s_files_where_they_landed() {
    let f = fixture();
    let out = f.target("v");
    let run = f.restore("latest:/docs/sub", &out, &["--verify"]).ok();
    let text = run.stdout_str();
    assert!(text.contains("verified 4 files ("), "{text}");
    assert!(text.contains("all match the snapshot"), "{text}");
    // A change in the target is found at its place under the target.
    write_file(&out.join("notes.md"), b"edited", 0o600);
    let run = f.restore(
        "latest:/docs/sub",
        &out,
        &["--verify", "--overwrite", "never"],
    );
    let run = run.code(1);
    let notes = out.join("notes.md");
    assert!(
        run.stderr
            .contains(&format!("cairn: error: verify: {}: ", notes.display())),
        "{}",
        run.stderr
    );
}

#[test]
fn delete_prunes_only_inside_the_target_against_the_subfolder() {
    let f = fixture();
    let out = f.target("del");
    write_file(&out.join("extra.txt"), b"not in sub", 0o644);
    write_file(&out.join("deep/extra.bin"), b"nor this", 0o644);
    write_file(&out.join("b.txt"), b"old", 0o644);
    let beside = f.target("beside.txt");
    write_file(&beside, b"outside the target", 0o644);
    let run = f.restore("latest:/docs/sub", &out, &["--delete"]).ok();
    assert!(
        run.stdout_str()
            .contains("1 replaced, 0 skipped, 2 deleted"),
        "{}",
        run.stdout_str()
    );
    assert_tree_matches(&f.expected("sub"), &out);
    assert_eq!(fs::read(&beside).unwrap(), b"outside the target");
}

#[test]
fn a_target_that_is_a_symlink_gives_the_folder_s_metadata_to_its_directory() {
    let f = fixture();
    let real = f.target("real");
    fs::create_dir(&real).unwrap();
    let link = f.target("link");
    symlink(s(&real), &link);
    f.restore(
        "latest:/docs/sub",
        &link,
        &["-q", "--overwrite", "if-changed"],
    )
    .ok();
    assert_tree_matches(&f.expected("sub"), &real);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}
