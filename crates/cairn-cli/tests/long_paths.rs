//! Very long paths (issue 12): a tree deeper than `PATH_MAX` (4096 bytes of
//! path) is backed up with nothing skipped, backed up again against its
//! parent, restored byte for byte with its metadata, verified, listed, and
//! read by `cat` and `dump`; and a source, a restore target and a working
//! directory that are themselves that long. Std's path functions cannot
//! reach that deep, so the test builds and compares the trees through
//! directory handles of its own (`openat`, `fstatat`, `readlinkat`), never
//! through whole paths.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, mkdirat, FileStat, Mode, SFlag};

use common::*;

/// Levels of 200-byte directory names: 25 of them make 5,025 bytes of path.
const LEVELS: usize = 25;

fn level_name(i: usize) -> String {
    format!("{i:02}{}", "d".repeat(198))
}

fn open_dir(base: impl AsFd, name: &str) -> OwnedFd {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(base, name, flags, Mode::empty()).unwrap_or_else(|e| panic!("opening {name}: {e}"))
}

fn mkdir_in(dir: &OwnedFd, name: &str) -> OwnedFd {
    mkdirat(dir, name, Mode::from_bits_truncate(0o755)).unwrap();
    open_dir(dir, name)
}

fn write_in(dir: &OwnedFd, name: &str, data: &[u8], mode: u32) {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC;
    let fd = openat(dir, name, flags, Mode::from_bits_truncate(mode)).unwrap();
    File::from(fd).write_all(data).unwrap();
}

/// Creates `LEVELS` nested directories named by `name` below `dir`;
/// returns the deepest one's handle and its path below `dir`.
fn mkdirs(mut dir: OwnedFd, name: fn(usize) -> String) -> (OwnedFd, String) {
    let mut rel = Vec::new();
    for i in 0..LEVELS {
        let n = name(i);
        dir = mkdir_in(&dir, &n);
        rel.push(n);
    }
    (dir, rel.join("/"))
}

/// Fills `dir` with `file` (with a user extended attribute where the file
/// system takes one), `link -> file` and `sub/inner`; returns `file`'s
/// content.
fn fill(dir: &OwnedFd) -> Vec<u8> {
    let mut rng = Rng::new(12);
    let content: Vec<u8> = (0..70_000).map(|_| rng.next_u64() as u8).collect();
    write_in(dir, "file", &content, 0o640);
    // Through the open file: no path involved. A file system without user
    // attributes leaves the attribute out of the comparison.
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let f = File::from(openat(dir, "file", flags, Mode::empty()).unwrap());
    if let Err(e) = xattr::FileExt::set_xattr(&f, "user.deep", b"at depth") {
        eprintln!("no user extended attributes here ({e}); not compared");
    }
    nix::unistd::symlinkat("file", dir, "link").unwrap();
    let sub = mkdir_in(dir, "sub");
    write_in(&sub, "inner", b"inner bytes\n", 0o600);
    content
}

/// Builds `src/<LEVELS levels>/{file, link -> file, sub/inner}`; returns
/// the deep directory's path below `src` and `file`'s content.
fn build(src: &Path) -> (String, Vec<u8>) {
    std::fs::create_dir(src).unwrap();
    let (dir, rel) = mkdirs(open_dir(nix::fcntl::AT_FDCWD, s(src)), level_name);
    (rel, fill(&dir))
}

/// Opens directory `rel` below `base` one name at a time.
fn open_below(base: impl AsFd, rel: &str) -> OwnedFd {
    let mut names = rel.split('/');
    let mut dir = open_dir(base, names.next().unwrap());
    for n in names {
        dir = open_dir(&dir, n);
    }
    dir
}

/// The names in directory `d`, sorted.
fn names(d: &OwnedFd) -> Vec<String> {
    let mut dir = nix::dir::Dir::from_fd(open_dir(d, ".")).unwrap();
    let mut v: Vec<String> = dir
        .iter()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    v.sort();
    v
}

fn lstat(d: &OwnedFd, name: &str) -> FileStat {
    fstatat(d, name, AtFlags::AT_SYMLINK_NOFOLLOW).unwrap()
}

fn read_in(d: &OwnedFd, name: &str) -> Vec<u8> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut out = Vec::new();
    File::from(openat(d, name, flags, Mode::empty()).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The extended attributes of file `name` in `d`, read through the open file.
fn xattrs(d: &OwnedFd, name: &str) -> Vec<(std::ffi::OsString, Option<Vec<u8>>)> {
    use xattr::FileExt;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let f = File::from(openat(d, name, flags, Mode::empty()).unwrap());
    let mut v: Vec<_> = f
        .list_xattr()
        .map(|l| l.map(|n| (n.clone(), f.get_xattr(&n).unwrap())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[derive(Default, Debug, PartialEq)]
struct Seen {
    dirs: usize,
    files: usize,
    symlinks: usize,
    deepest: usize,
}

/// Compares directory `b` with `a` entry by entry (kind, mode, size, mtime
/// to the nanosecond, content, symlink target); `depth` is the bytes of
/// path below the roots.
fn compare(a: &OwnedFd, b: &OwnedFd, depth: usize, seen: &mut Seen) {
    let listed = names(a);
    assert_eq!(listed, names(b), "listings differ {depth} bytes down");
    for n in listed {
        let (sa, sb) = (lstat(a, &n), lstat(b, &n));
        let depth = depth + 1 + n.len();
        seen.deepest = seen.deepest.max(depth);
        assert_eq!(sa.st_mode, sb.st_mode, "{n}: kind and mode");
        let kind = SFlag::from_bits_truncate(sa.st_mode & SFlag::S_IFMT.bits());
        if kind == SFlag::S_IFDIR {
            seen.dirs += 1;
            compare(&open_dir(a, &n), &open_dir(b, &n), depth, seen);
        } else if kind == SFlag::S_IFLNK {
            seen.symlinks += 1;
            assert_eq!(
                readlinkat(a, n.as_str()).unwrap(),
                readlinkat(b, n.as_str()).unwrap()
            );
            continue;
        } else {
            seen.files += 1;
            assert_eq!(read_in(a, &n), read_in(b, &n), "{n}: content");
            assert_eq!(xattrs(a, &n), xattrs(b, &n), "{n}: extended attributes");
        }
        assert_eq!(
            (sa.st_mtime, sa.st_mtime_nsec),
            (sb.st_mtime, sb.st_mtime_nsec),
            "{n}: mtime"
        );
    }
}

fn backup(repo: &Path, src: &Path) -> serde_json::Value {
    let out = cairn(repo, &["backup", "--json", s(src)]).ok().json();
    assert_eq!(out["skipped"], serde_json::json!([]), "{out}");
    out
}

#[test]
fn a_tree_deeper_than_path_max_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, src) = (dir.path().join("repo"), dir.path().join("src"));
    let (deep, content) = build(&src);
    // Past the racy margin (backup/parent.rs), so the second backup may
    // trust the first one's entries.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let bottom = src.join(&deep);
    assert!(bottom.as_os_str().len() > 5000);
    assert!(
        std::fs::symlink_metadata(&bottom).is_err(),
        "the tree is not deeper than a whole path can reach"
    );

    let first = backup(&repo, &src);
    assert_eq!(first["stats"]["files"], 2, "{first}");
    assert_eq!(first["stats"]["dirs"], LEVELS as u64 + 2, "{first}");
    // Against its parent: nothing changed, nothing read again.
    let again = backup(&repo, &src);
    assert_eq!(again["stats"]["files_unmodified"], 2, "{again}");

    let target = dir.path().join("out");
    cairn(&repo, &["restore", "latest", "--target", s(&target)]).ok();
    let mut seen = Seen::default();
    let a = open_dir(nix::fcntl::AT_FDCWD, s(&src));
    let b = open_dir(open_dir(nix::fcntl::AT_FDCWD, s(&target)), "src");
    compare(&a, &b, 0, &mut seen);
    assert_eq!((seen.dirs, seen.files, seen.symlinks), (LEVELS + 1, 2, 1));
    assert!(seen.deepest > 4096, "{seen:?}");

    // Restoring over the restored tree replaces its files and symlink in
    // place (temporary + rename at depth); --verify reads them back.
    let v = cairn(
        &repo,
        &["restore", "latest", "--target", s(&target), "--verify"],
    )
    .ok();
    assert!(
        v.stdout_str().contains("all match the snapshot"),
        "{}",
        v.stdout_str()
    );
    let mut seen = Seen::default();
    compare(&a, &b, 0, &mut seen);
    assert_eq!(seen.files, 2);

    // Browsing by the snapshot path of the deep directory.
    let snap_dir = format!("src/{deep}");
    let ls = cairn(&repo, &["ls", "latest", &snap_dir]).ok().stdout_str();
    for name in ["/file", "/link -> file", "/sub", "/sub/inner"] {
        assert!(
            ls.lines().any(|l| l.ends_with(name)),
            "ls lacks {name}:\n{ls}"
        );
    }
    let cat = cairn(&repo, &["cat", "latest", &format!("{snap_dir}/file")]).ok();
    assert!(cat.stdout == content, "cat gives other bytes");

    // `dump` of the deep directory: a tar whose long names survive.
    let dump = cairn(&repo, &["dump", "latest", &snap_dir]).ok();
    let listed = tar_names(&dump.stdout);
    let inner = listed
        .lines()
        .find(|l| l.ends_with("/sub/inner"))
        .unwrap_or_else(|| panic!("tar lacks sub/inner:\n{listed}"));
    assert!(inner.len() > 4096, "{inner}");
}

/// Runs `cairn` in directory `cwd` (absolute, of any length: entered with
/// `fchdir` on a handle, as `chdir` takes no long path), so that relative
/// paths start there.
#[allow(unsafe_code)]
fn cairn_in(cwd: &Path, repo: &Path, args: &[&str]) -> Run {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let dir = open_below(
        open_dir(nix::fcntl::AT_FDCWD, "/"),
        s(cwd).trim_start_matches('/'),
    );
    let fd = dir.as_raw_fd();
    let mut c = command(repo, args);
    // SAFETY: fchdir is async-signal-safe and `dir` outlives the spawn.
    unsafe {
        c.pre_exec(move || match nix::libc::fchdir(fd) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running cairn");
    finish(child, args)
}

#[test]
fn a_source_and_a_target_longer_than_path_max_work() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let repo = dir.join("repo");
    std::fs::create_dir(dir.join("top")).unwrap();
    let (deep, rel) = mkdirs(
        open_dir(nix::fcntl::AT_FDCWD, s(&dir.join("top"))),
        level_name,
    );
    let content = fill(&deep);
    std::thread::sleep(std::time::Duration::from_millis(60));
    let src = dir.join("top").join(&rel);
    assert!(src.as_os_str().len() > 5000);
    assert!(std::fs::symlink_metadata(&src).is_err(), "not too long");

    // Absolute, then relative to the working directory: the same source,
    // so the second backup finds its parent and reads nothing again.
    let first = backup(&repo, &src);
    assert_eq!(
        (&first["stats"]["files"], &first["stats"]["dirs"]),
        (&2.into(), &2.into()),
        "{first}"
    );
    let again = cairn_in(&dir, &repo, &["backup", "--json", &format!("top/{rel}")])
        .ok()
        .json();
    assert_eq!(again["skipped"], serde_json::json!([]), "{again}");
    assert_eq!(again["stats"]["files_unmodified"], 2, "{again}");
    assert_eq!(again["paths"][0].as_str(), Some(s(&src)), "{again}");

    // A target that does not exist yet, itself longer than PATH_MAX, in
    // both forms; restoring again with --verify reads it all back.
    let top = level_name(LEVELS - 1);
    fn out_name(i: usize) -> String {
        format!("{i:02}{}", "o".repeat(198))
    }
    let out_rel = (0..LEVELS).map(out_name).collect::<Vec<_>>().join("/");
    for (cwd, target) in [
        (dir.clone(), dir.join("out").join(&out_rel)),
        (dir.join("rel"), Path::new(&out_rel).to_path_buf()),
    ] {
        std::fs::create_dir_all(&cwd).unwrap();
        let t = s(&target);
        cairn_in(&cwd, &repo, &["restore", "latest", "--target", t]).ok();
        let v = cairn_in(
            &cwd,
            &repo,
            &["restore", "latest", "--target", t, "--verify"],
        )
        .ok();
        assert!(
            v.stdout_str().contains("verified 2 files") && v.stdout_str().contains("all match"),
            "{}",
            v.stdout_str()
        );
        let restored = match target.strip_prefix(&dir) {
            Ok(r) => open_below(open_dir(nix::fcntl::AT_FDCWD, s(&dir)), s(r)),
            Err(_) => open_below(open_dir(nix::fcntl::AT_FDCWD, s(&cwd)), &out_rel),
        };
        let mut seen = Seen::default();
        compare(&deep, &open_dir(&restored, &top), 0, &mut seen);
        assert_eq!((seen.dirs, seen.files, seen.symlinks), (1, 2, 1));
    }

    // Two sources with one base name, listed in --files-from: the snapshot
    // keeps the directories above them, so its paths are long too.
    let twin = dir.join("twin").join(&top);
    std::fs::create_dir_all(&twin).unwrap();
    std::fs::write(twin.join("t"), b"twin").unwrap();
    let list = dir.join("list");
    std::fs::write(&list, format!("{}\n{}\n", s(&src), s(&twin))).unwrap();
    let both = cairn(&repo, &["backup", "--json", "--files-from", s(&list)])
        .ok()
        .json();
    assert_eq!(both["skipped"], serde_json::json!([]), "{both}");
    assert_eq!(both["stats"]["files"], 3, "{both}");
    let snap = s(&src).trim_start_matches('/').to_string();
    let ls = cairn(&repo, &["ls", "latest", &snap]).ok().stdout_str();
    assert!(ls.lines().any(|l| l.ends_with("/sub/inner")), "{ls}");
    let cat = cairn(&repo, &["cat", "latest", &format!("{snap}/file")]).ok();
    assert!(cat.stdout == content, "cat gives other bytes");
    let found = cairn(&repo, &["find", "--json", "**/sub/inner"])
        .ok()
        .stdout_str();
    assert!(found.contains(&format!("{snap}/sub/inner")), "{found}");
    let dump = cairn(&repo, &["dump", "latest", &snap]).ok();
    let listed = tar_names(&dump.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.ends_with("/sub/inner") && l.len() > 4096),
        "{listed}"
    );

    // A repository inside the long directory, given relative to it from
    // there: reached, and left out of a backup of that directory.
    let inner = cairn_in(&src, Path::new("repo"), &["backup", "--json", "."]).ok();
    assert!(
        inner
            .stderr
            .contains("not backing up the repository itself"),
        "{}",
        inner.stderr
    );
    assert_eq!(inner.json()["skipped"], serde_json::json!([]));
    let ls = cairn_in(&src, Path::new("repo"), &["ls", "latest"])
        .ok()
        .stdout_str();
    assert!(ls.lines().any(|l| l.ends_with("/sub/inner")), "{ls}");
    assert!(!ls.lines().any(|l| l.contains("/repo")), "{ls}");
}

/// The member names `tar -t` lists for the archive `bytes`.
fn tar_names(bytes: &[u8]) -> String {
    let mut tar = Command::new("tar")
        .args(["-tf", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running tar");
    tar.stdin.take().unwrap().write_all(bytes).unwrap();
    let listed = tar.wait_with_output().unwrap();
    assert!(listed.status.success());
    String::from_utf8(listed.stdout).unwrap()
}
