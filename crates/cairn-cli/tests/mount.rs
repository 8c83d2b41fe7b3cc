//! `cairn mount` end to end: the real binary mounts a repository with FUSE,
//! and the mounted tree is compared with the backed-up one byte for byte
//! (kinds, modes, mtimes, symlink targets; extended attributes, link counts
//! and shared inodes of hard links, device numbers, the blocks of a sparse
//! file), read at offsets, listed by id, time and tag, refused writes, and
//! unmounted by SIGINT, SIGTERM or an external `fusermount -u` with exit 0
//! and an empty mountpoint after.
//!
//! The kernel caches attributes, entries and file pages for an hour, so
//! each check looks at something no earlier look could have cached: another
//! path (every virtual path of a snapshot is its own subtree of inodes), a
//! directory listing against a `stat`, or the source tree.
//!
//! Only where FUSE cannot work at all (no /dev/fuse, one this user cannot
//! open, or no fusermount for a non-root user) does a mounting test skip
//! (`skip_or_fail`), checked before mounting; any mount failure fails the
//! test.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::fuse::*;
use common::*;

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The process exited 0 and left nothing mounted and nothing in the
/// mountpoint.
#[track_caller]
fn assert_clean_exit(run: Run, mnt: &Path) {
    let run = run.ok();
    assert!(!run.stderr.contains("error"), "{}", run.stderr);
    assert!(!is_mounted(&fs::canonicalize(mnt).unwrap()));
    assert!(names(mnt).is_empty(), "mountpoint not empty after unmount");
}

struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    src: PathBuf,
    mnt: PathBuf,
}

/// The sample tree (a 2 MiB file, symlinks, nested and empty directories,
/// odd modes, random mtimes) and a directory of 600 long-named entries, backed up twice: the second time tagged and
/// with one more file.
fn fixture() -> (Fixture, Manifest, Manifest) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let (repo, src, mnt) = (root.join("repo"), root.join("tree"), root.join("mnt"));
    fs::create_dir_all(&mnt).unwrap();
    build_sample_tree(&src, &mut Rng::new(11));
    // Long names, more than one readdir reply holds (the kernel asks for
    // 32 KiB or so): the directory is listed in several calls.
    for i in 0..600 {
        write_file(
            &src.join(format!("many/{i:03}{}", "x".repeat(240))),
            format!("{i}").as_bytes(),
            0o644,
        );
    }
    let first = Manifest::capture(&src);
    cairn(&repo, &["backup", s(&src)]).ok();
    write_file(
        &src.join("added.txt"),
        b"only in the second snapshot\n",
        0o640,
    );
    let second = Manifest::capture(&src);
    cairn(&repo, &["backup", s(&src), "--tag", "keep"]).ok();
    let f = Fixture {
        _tmp: tmp,
        repo,
        src,
        mnt,
    };
    (f, first, second)
}

#[test]
fn a_mounted_repository_shows_every_snapshot_byte_for_byte() {
    let (f, first, second) = fixture();
    let Some(m) = mount(&f.repo, &f.mnt) else {
        return;
    };
    let mnt = &f.mnt;
    let snaps = snapshots(&f.repo);
    let short: Vec<String> = snaps
        .iter()
        .map(|s| s["short_id"].as_str().unwrap().to_string())
        .collect();

    assert_eq!(names(mnt), ["hosts", "ids", "snapshots", "tags"]);
    let mut ids = short.clone();
    ids.sort();
    assert_eq!(names(&mnt.join("ids")), ids);
    let by_time = names(&mnt.join("snapshots"));
    assert_eq!(by_time.len(), 3, "{by_time:?}");
    assert!(by_time.contains(&"latest".to_string()));
    let newest = fs::read_link(mnt.join("snapshots/latest")).unwrap();
    assert!(by_time.contains(&newest.to_string_lossy().into_owned()));
    assert_eq!(names(&mnt.join("tags")), ["keep"]);
    assert_eq!(names(&mnt.join("hosts")).len(), 1);

    // Every entry of both snapshots: kind, bytes, mode, mtime, target.
    assert_tree_matches(&first, &mnt.join("ids").join(&short[0]).join("tree"));
    assert_tree_matches(&second, &mnt.join("snapshots/latest/tree"));
    let tagged = mnt.join("tags/keep/latest/tree");
    assert_tree_matches(&second, &tagged);

    let tree = mnt.join("snapshots/latest/tree");
    assert_eq!(fs::read_link(tree.join(LINK)).unwrap(), Path::new(BIG1));
    let key = fs::metadata(tree.join(KEY)).unwrap();
    let src_key = fs::metadata(f.src.join(KEY)).unwrap();
    assert_eq!((key.uid(), key.gid()), (src_key.uid(), src_key.gid()));

    // Reads at offsets, backwards, across chunk boundaries, of a file no
    // earlier check read (the latest snapshot's file by its id: its own
    // inode, so none of its pages are cached).
    let big = second.file(BIG1);
    let unread = mnt.join("ids").join(&short[1]).join("tree");
    let mut file = fs::File::open(unread.join(BIG1)).unwrap();
    for &(off, len) in &[
        (1_000_003usize, 70_000usize),
        (17, 5),
        (big.len() - 9, 100),
        (0, 1),
    ] {
        file.seek(SeekFrom::Start(off as u64)).unwrap();
        let mut got = Vec::new();
        (&mut file).take(len as u64).read_to_end(&mut got).unwrap();
        assert_eq!(got, &big[off..(off + len).min(big.len())], "offset {off}");
    }
    let host = &names(&mnt.join("hosts"))[0];
    let unread = mnt.join("hosts").join(host).join("latest/tree");
    let dd = Command::new("dd")
        .arg(format!("if={}", unread.join(BIG1).display()))
        .args(["bs=4096", "skip=300", "count=3", "status=none"])
        .output()
        .unwrap();
    assert_eq!(dd.stdout, &big[300 * 4096..303 * 4096]);

    // Inodes are stable within the mount, and distinct: a second `stat`
    // would be answered from the kernel's cache, so the directory listing
    // (a readdir request, numbered by the mount's own table) must give the
    // number the lookup gave.
    let ino = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
    let listed: Vec<(String, u64)> = fs::read_dir(tree.join("data"))
        .unwrap()
        .map(|e| {
            use std::os::unix::fs::DirEntryExt;
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), e.ino())
        })
        .collect();
    let listed_ino = |name: &str| listed.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(ino(&tree.join(BIG1)), listed_ino("big1.bin"));
    assert_eq!(ino(&tree.join(BIG2)), listed_ino("big2.bin"));
    assert_ne!(ino(&tree.join(BIG1)), ino(&tree.join(BIG2)));

    // Read-only.
    let e = fs::write(tree.join("new.txt"), b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ReadOnlyFilesystem, "{e}");
    let e = fs::OpenOptions::new()
        .write(true)
        .open(tree.join(LOG))
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ReadOnlyFilesystem, "{e}");
    assert!(fs::create_dir(mnt.join("ids/x")).is_err());
    assert!(fs::remove_file(tree.join(LOG)).is_err());
    assert!(fs::metadata(tree.join("missing")).is_err());
    drop(file);

    signal(m.pid(), "-INT");
    assert_clean_exit(m.wait_exit(), mnt);
}

#[test]
fn an_external_unmount_or_sigterm_ends_the_mount_with_exit_0() {
    let (f, _, second) = fixture();
    let Some(m) = mount(&f.repo, &f.mnt) else {
        return;
    };
    let data = fs::read(f.mnt.join("snapshots/latest/tree/added.txt")).unwrap();
    assert_eq!(data, second.file("added.txt"));
    let mnt = fs::canonicalize(&f.mnt).unwrap();
    // `umount` when no fusermount helper is installed (root only).
    let helper = fusermount().unwrap_or("umount");
    let args: &[&str] = if helper == "umount" { &[] } else { &["-u"] };
    let ok = Command::new(helper).args(args).arg(&mnt).status().unwrap();
    assert!(ok.success(), "{helper} failed");
    assert_clean_exit(m.wait_exit(), &f.mnt);

    let Some(m) = mount(&f.repo, &f.mnt) else {
        return;
    };
    assert_eq!(names(&f.mnt.join("tags")), ["keep"]);
    signal(m.pid(), "-TERM");
    assert_clean_exit(m.wait_exit(), &f.mnt);
}

#[test]
fn a_bad_mountpoint_is_one_line_error() {
    let (f, _, _) = fixture();
    let missing = f.mnt.join("nope");
    let err = cairn(&f.repo, &["mount", s(&missing)])
        .code(1)
        .one_line_error();
    assert!(err.contains("does not exist"), "{err}");
    let file = f.src.join(LOG);
    let err = cairn(&f.repo, &["mount", s(&file)])
        .code(1)
        .one_line_error();
    assert!(err.contains("is not a directory"), "{err}");
    let err = cairn(&f.mnt.join("norepo"), &["mount", s(&f.mnt)])
        .code(1)
        .one_line_error();
    assert!(err.contains("not a cairn repository"), "{err}");
}

/// The mount's readers lock keeps a collection from deleting containers a
/// mounted snapshot reads: a `forget --prune` of a snapshot with data of
/// its own waits until the mount ends, and the forgotten snapshot stays
/// readable meanwhile: a second file of it, never read before (neither
/// the kernel's page cache nor the mount's chunk cache holds its bytes),
/// reads whole while the prune waits.
#[test]
fn a_mount_holds_off_garbage_collection_until_unmounted() {
    let (f, _, _) = fixture();
    let gone = f.src.parent().unwrap().join("gone");
    let data = Rng::new(5).bytes(1 << 20);
    write_file(&gone.join("unique.bin"), &data, 0o644);
    let unread = Rng::new(6).bytes(1 << 20);
    write_file(&gone.join("unread.bin"), &unread, 0o644);
    cairn(&f.repo, &["backup", s(&gone)]).ok();
    let id = snapshot_ids(&f.repo).pop().unwrap();
    let Some(m) = mount(&f.repo, &f.mnt) else {
        return;
    };
    let file = f.mnt.join("snapshots/latest/gone/unique.bin");
    assert_eq!(fs::read(&file).unwrap(), data);

    let prune_args = ["forget", &id, "--prune"];
    let mut prune = Watched::spawn(
        command(&f.repo, &prune_args).stdin(Stdio::null()),
        &prune_args,
    );
    // The collection reports that it waits for the mount's readers lock
    // (no timing: until the report it may still be marking), and the
    // kernel shows it blocked on the lock file.
    assert!(
        prune.wait_for_stderr(
            "cairn: waiting for running readers to finish",
            Duration::from_secs(120)
        ),
        "the collection did not wait for the mount's readers lock:\n{}",
        prune.stderr_so_far()
    );
    wait_until_flock_blocked(&f.repo.join("locks/readers"), Duration::from_secs(120));
    assert!(
        prune.still_running(),
        "the collection deleted while the mount held its readers lock"
    );
    let unread_file = f.mnt.join("snapshots/latest/gone/unread.bin");
    assert_eq!(fs::read(unread_file).unwrap(), unread);

    signal(m.pid(), "-INT");
    assert_clean_exit(m.wait_exit(), &f.mnt);
    let run = prune.finish(Duration::from_secs(120)).ok();
    assert!(!snapshot_ids(&f.repo).contains(&id), "{}", run.stderr);
}

/// What a listing stores beyond mode, owner, size and times is served as
/// stored (docs/file-kinds.md): extended attributes (`getxattr`,
/// `listxattr`), the link count of a hard-linked file and one inode for its
/// names, a device's number, and a sparse file's allocated blocks (its data,
/// not its holes). Each is compared with the source tree, through paths no
/// earlier look went through.
#[test]
fn a_mount_serves_xattrs_hard_links_devices_and_holes_as_stored() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let (repo, src, mnt) = (
        tmp.path().join("repo"),
        tmp.path().join("src"),
        tmp.path().join("mnt"),
    );
    fs::create_dir_all(&mnt).unwrap();
    fs::create_dir_all(src.join("sub")).unwrap();

    let tagged = src.join("tagged");
    write_file(&tagged, b"content", 0o644);
    if xattr::set(&tagged, "user.colour", b"blue").is_err() {
        return skip_or_fail("the temporary directory's file system has no user.* xattrs");
    }
    xattr::set(&tagged, "user.empty", b"").unwrap();
    xattr::set(src.join("sub"), "user.dir", b"yes").unwrap();

    write_file(&src.join("linked"), b"one file, two names", 0o600);
    fs::hard_link(src.join("linked"), src.join("sub/second-name")).unwrap();

    // 10 MiB of hole, 100 000 bytes of data, a hole to 64 MiB.
    let sparse = src.join("sparse");
    let data = Rng::new(3).bytes(100_000);
    {
        let mut f = fs::File::create(&sparse).unwrap();
        f.seek(SeekFrom::Start(10 << 20)).unwrap();
        f.write_all(&data).unwrap();
        f.set_len(64 << 20).unwrap();
        f.sync_all().unwrap();
    }
    if fs::metadata(&sparse).unwrap().blocks() * 512 > 4 << 20 {
        return skip_or_fail("the temporary directory's file system does not keep holes");
    }

    let device = Command::new("mknod")
        .args([s(&src.join("null")), "c", "1", "3"])
        .status()
        .is_ok_and(|st| st.success());
    if !device {
        skip_or_fail("mknod not permitted (not root): the device part of this test");
    }

    cairn(&repo, &["backup", s(&src)]).ok();
    let Some(m) = mount(&repo, &mnt) else {
        return;
    };
    let tree = mnt.join("snapshots/latest/src");
    let src_meta = |rel: &str| fs::symlink_metadata(src.join(rel)).unwrap();
    let mnt_meta = |rel: &str| fs::symlink_metadata(tree.join(rel)).unwrap();

    // Extended attributes: the names and every value, as in the source.
    let xattrs = |p: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = xattr::list(p)
            .unwrap()
            .map(|n| {
                let value = xattr::get(p, &n).unwrap().expect("a listed attribute");
                (n.to_string_lossy().into_owned(), value)
            })
            .collect();
        v.sort();
        v
    };
    let want = xattrs(&tagged);
    assert_eq!(want.len(), 2, "{want:?}");
    assert_eq!(xattrs(&tree.join("tagged")), want);
    assert_eq!(xattrs(&tree.join("sub")), xattrs(&src.join("sub")));
    let missing = xattr::get(tree.join("tagged"), "user.none").unwrap();
    assert_eq!(missing, None);
    assert!(xattrs(&mnt.join("snapshots")).is_empty());

    // Hard links: the recorded link count, one inode for both names (the
    // second name looked up first, so neither answer is a cached one).
    let second = mnt_meta("sub/second-name");
    let first = mnt_meta("linked");
    assert_eq!(first.nlink(), src_meta("linked").nlink());
    assert_eq!(first.nlink(), 2);
    assert_eq!(second.nlink(), 2);
    assert_eq!(first.ino(), second.ino(), "two names of one file");
    assert_ne!(first.ino(), mnt_meta("tagged").ino());
    assert_eq!(mnt_meta("tagged").nlink(), 1);

    // A sparse file: its logical size, the blocks of its data only (as
    // the source has them), its bytes and zeros in the holes.
    let (got, want) = (mnt_meta("sparse"), src_meta("sparse"));
    assert_eq!(got.len(), 64 << 20);
    assert!(
        got.blocks() * 512 >= data.len() as u64 && got.blocks() * 512 < 1 << 20,
        "sparse file shows {} blocks (source {})",
        got.blocks(),
        want.blocks()
    );
    let mut f = fs::File::open(tree.join("sparse")).unwrap();
    let mut buf = vec![0u8; data.len()];
    f.seek(SeekFrom::Start(10 << 20)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(buf, data);
    f.seek(SeekFrom::Start(40 << 20)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a hole reads as zeros");
    drop(f);

    if device {
        let (got, want) = (mnt_meta("null"), src_meta("null"));
        assert!(got.file_type().is_char_device());
        assert_eq!(got.rdev(), want.rdev(), "device number 1:3");
    }

    signal(m.pid(), "-INT");
    assert_clean_exit(m.wait_exit(), &mnt);
}
