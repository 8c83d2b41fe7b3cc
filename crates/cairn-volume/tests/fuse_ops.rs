//! The FUSE layer's operations through an in-process mount, on plain
//! files (checked against the backing tree) and on a "non-plain" file
//! whose bytes a test `Content` serves from memory (so each daemon call
//! into `Content` is exercised).

mod fuse_support;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirEntryExt, FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::sync::Arc;

use cairn_volume::fuse::MountOptions;
use fuse_support::{eventually, is_root, mount_plain, mount_with, pattern, MemContent};
use rustix::fs::{AtFlags, FallocateFlags, Mode, RenameFlags, Timespec, Timestamps, CWD};

#[test]
fn reads_writes_appends_and_truncates_reach_the_backing_file() {
    let Some(v) = mount_plain(|_| {}) else { return };
    let data = pattern(1, 200_000);
    fs::write(v.m("a"), &data).unwrap();
    assert_eq!(fs::read(v.m("a")).unwrap(), data);
    assert_eq!(fs::read(v.b("a")).unwrap(), data);

    // Append, then a write past the end (a hole between).
    let mut f = OpenOptions::new().append(true).open(v.m("a")).unwrap();
    f.write_all(b"tail").unwrap();
    drop(f);
    let f = OpenOptions::new().write(true).open(v.m("a")).unwrap();
    f.write_all_at(b"far", 300_000).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut want = data.clone();
    want.extend_from_slice(b"tail");
    want.resize(300_000, 0);
    want.extend_from_slice(b"far");
    assert_eq!(fs::read(v.m("a")).unwrap(), want);
    assert_eq!(fs::read(v.b("a")).unwrap(), want);

    // Truncate down and up (the new bytes are zeros), then O_TRUNC.
    let f = OpenOptions::new().write(true).open(v.m("a")).unwrap();
    f.set_len(1000).unwrap();
    f.set_len(5000).unwrap();
    drop(f);
    want.truncate(1000);
    want.resize(5000, 0);
    assert_eq!(fs::read(v.m("a")).unwrap(), want);
    assert_eq!(fs::metadata(v.b("a")).unwrap().len(), 5000);
    fs::write(v.m("a"), b"short").unwrap();
    assert_eq!(fs::read(v.b("a")).unwrap(), b"short");

    // Read-write handle: seek, overwrite, read back.
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.m("a"))
        .unwrap();
    f.seek(SeekFrom::Start(1)).unwrap();
    f.write_all(b"HO").unwrap();
    let mut s = String::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "sHOrt");

    // fallocate extends with zeros and fsync succeeds.
    rustix::fs::fallocate(&f, FallocateFlags::empty(), 0, 8192).unwrap();
    f.sync_data().unwrap();
    assert_eq!(fs::metadata(v.m("a")).unwrap().len(), 8192);
    assert_eq!(fs::metadata(v.b("a")).unwrap().len(), 8192);
}

#[test]
fn directories_renames_links_and_special_files() {
    let Some(v) = mount_plain(|b| fs::write(b.join("old"), b"old").unwrap()) else {
        return;
    };
    fs::create_dir(v.m("d")).unwrap();
    fs::create_dir(v.m("d/e")).unwrap();
    for i in 0..50 {
        fs::write(v.m(&format!("d/f{i}")), format!("{i}")).unwrap();
    }
    let names = |p: &std::path::Path| {
        let mut n: Vec<_> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&v.m("d")), names(&v.b("d")));
    assert_eq!(names(&v.m("d")).len(), 51);
    // Inode numbers are the backing tree's, in listings too.
    for e in fs::read_dir(v.m("d")).unwrap() {
        let e = e.unwrap();
        let backing = fs::symlink_metadata(v.b("d").join(e.file_name())).unwrap();
        assert_eq!(e.ino(), backing.ino());
        assert_eq!(e.metadata().unwrap().ino(), backing.ino());
    }
    let err = fs::remove_dir(v.m("d")).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(rustix::io::Errno::NOTEMPTY.raw_os_error())
    );
    fs::remove_dir(v.m("d/e")).unwrap();
    assert!(!v.b("d/e").exists());

    // Rename, over an existing file, NOREPLACE, EXCHANGE.
    fs::rename(v.m("d/f1"), v.m("moved")).unwrap();
    assert_eq!(fs::read(v.b("moved")).unwrap(), b"1");
    fs::rename(v.m("moved"), v.m("old")).unwrap();
    assert_eq!(fs::read(v.m("old")).unwrap(), b"1");
    assert!(!v.b("moved").exists());
    let noreplace =
        rustix::fs::renameat_with(CWD, v.m("d/f2"), CWD, v.m("old"), RenameFlags::NOREPLACE);
    assert_eq!(noreplace, Err(rustix::io::Errno::EXIST));
    rustix::fs::renameat_with(CWD, v.m("d/f2"), CWD, v.m("old"), RenameFlags::EXCHANGE).unwrap();
    assert_eq!(fs::read(v.b("old")).unwrap(), b"2");
    assert_eq!(fs::read(v.b("d/f2")).unwrap(), b"1");

    // A hard link shares the inode (the backing one), across a rename.
    fs::hard_link(v.m("old"), v.m("d/link")).unwrap();
    fs::rename(v.m("old"), v.m("renamed")).unwrap();
    let a = fs::metadata(v.m("renamed")).unwrap();
    let b = fs::metadata(v.m("d/link")).unwrap();
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.ino(), fs::metadata(v.b("renamed")).unwrap().ino());
    assert_eq!(a.nlink(), 2);
    fs::write(v.m("d/link"), b"via link").unwrap();
    assert_eq!(fs::read(v.m("renamed")).unwrap(), b"via link");
    fs::remove_file(v.m("d/link")).unwrap();
    assert_eq!(fs::metadata(v.m("renamed")).unwrap().nlink(), 1);
    assert!(!v.b("d/link").exists());

    // Symlinks.
    std::os::unix::fs::symlink("renamed", v.m("sym")).unwrap();
    assert_eq!(fs::read_link(v.m("sym")).unwrap().to_str(), Some("renamed"));
    assert_eq!(fs::read_link(v.b("sym")).unwrap().to_str(), Some("renamed"));
    assert!(fs::symlink_metadata(v.m("sym"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read(v.m("sym")).unwrap(), b"via link");

    // mknod: a fifo and a socket node.
    rustix::fs::mknodat(
        CWD,
        v.m("fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o640),
        0,
    )
    .unwrap();
    rustix::fs::mknodat(
        CWD,
        v.m("sock"),
        rustix::fs::FileType::Socket,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let fifo = fs::symlink_metadata(v.b("fifo")).unwrap();
    assert!(fifo.file_type().is_fifo());
    assert_eq!(fifo.permissions().mode() & 0o7777, 0o640);
    assert!(fs::symlink_metadata(v.m("sock"))
        .unwrap()
        .file_type()
        .is_socket());
    if is_root() {
        let dev = rustix::fs::makedev(1, 3);
        rustix::fs::mknodat(
            CWD,
            v.m("null"),
            rustix::fs::FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            dev,
        )
        .unwrap();
        assert_eq!(fs::symlink_metadata(v.m("null")).unwrap().rdev(), dev);
        assert_eq!(fs::symlink_metadata(v.b("null")).unwrap().rdev(), dev);
    }

    // Unlink removes the backing name; the mount stops showing it.
    fs::remove_file(v.m("renamed")).unwrap();
    assert!(!v.b("renamed").exists());
    assert_eq!(
        fs::metadata(v.m("renamed")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn metadata_owners_times_xattrs_and_statfs() {
    let Some(v) = mount_with(
        Arc::new(cairn_volume::content::Plain),
        MountOptions {
            allow_other: true,
            ..MountOptions::default()
        },
        |_| {},
    ) else {
        return;
    };
    fs::write(v.m("f"), b"x").unwrap();
    fs::set_permissions(v.m("f"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(v.b("f")).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(fs::metadata(v.m("f")).unwrap().mode() & 0o7777, 0o640);

    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 5,
        },
        last_modification: Timespec {
            tv_sec: 1_200_000_000,
            tv_nsec: 7,
        },
    };
    rustix::fs::utimensat(CWD, v.m("f"), &times, AtFlags::empty()).unwrap();
    let b = fs::metadata(v.b("f")).unwrap();
    assert_eq!((b.mtime(), b.mtime_nsec()), (1_200_000_000, 7));
    assert_eq!((b.atime(), b.atime_nsec()), (1_000_000_000, 5));
    assert_eq!(fs::metadata(v.m("f")).unwrap().mtime(), 1_200_000_000);

    // Extended attributes are the backing file's.
    rustix::fs::setxattr(
        v.m("f"),
        "user.cairn",
        b"value",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut buf = [0u8; 64];
    let n = rustix::fs::getxattr(v.b("f"), "user.cairn", &mut buf[..]).unwrap();
    assert_eq!(&buf[..n], b"value");
    let n = rustix::fs::getxattr(v.m("f"), "user.cairn", &mut buf[..]).unwrap();
    assert_eq!(&buf[..n], b"value");
    let n = rustix::fs::listxattr(v.m("f"), &mut buf[..]).unwrap();
    assert!(buf[..n].split(|&c| c == 0).any(|x| x == b"user.cairn"));
    let create = rustix::fs::setxattr(
        v.m("f"),
        "user.cairn",
        b"again",
        rustix::fs::XattrFlags::CREATE,
    );
    assert_eq!(create, Err(rustix::io::Errno::EXIST));
    rustix::fs::removexattr(v.m("f"), "user.cairn").unwrap();
    assert_eq!(
        rustix::fs::getxattr(v.b("f"), "user.cairn", &mut buf[..]),
        Err(rustix::io::Errno::NODATA)
    );

    // statfs reports the backing file system (the default hook).
    let (m, b) = (
        rustix::fs::statvfs(&v.mnt).unwrap(),
        rustix::fs::statvfs(&v.backing).unwrap(),
    );
    assert_eq!((m.f_blocks, m.f_files), (b.f_blocks, b.f_files));
    rustix::fs::access(v.m("f"), rustix::fs::Access::READ_OK).unwrap();

    if !is_root() {
        return;
    }
    // As root: chown, files created by another user belong to that user,
    // and the kernel enforces permissions (default_permissions).
    fs::create_dir(v.m("pub")).unwrap();
    fs::set_permissions(v.m("pub"), fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(v.m("f"), Some(1234), Some(5678)).unwrap();
    let b = fs::metadata(v.b("f")).unwrap();
    assert_eq!((b.uid(), b.gid()), (1234, 5678));
    let nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .args(args)
            .output()
            .expect("setpriv")
    };
    let made = v.m("pub/made");
    let out = nobody(&["sh", "-c", &format!("echo hi > {}", made.display())]);
    assert!(out.status.success(), "{out:?}");
    let b = fs::metadata(v.b("pub/made")).unwrap();
    assert_eq!((b.uid(), b.gid()), (65534, 65534));
    // In a set-group-ID directory: the directory's group, and a directory
    // made there is set-group-ID too.
    fs::create_dir(v.m("pub/g")).unwrap();
    std::os::unix::fs::chown(v.m("pub/g"), None, Some(5678)).unwrap();
    fs::set_permissions(v.m("pub/g"), fs::Permissions::from_mode(0o2777)).unwrap();
    let script = format!("echo hi > {0}/f && mkdir {0}/sub", v.m("pub/g").display());
    let out = nobody(&["sh", "-c", &script]);
    assert!(out.status.success(), "{out:?}");
    let f = fs::metadata(v.b("pub/g/f")).unwrap();
    assert_eq!((f.uid(), f.gid()), (65534, 5678));
    let sub = fs::metadata(v.b("pub/g/sub")).unwrap();
    assert_eq!(sub.gid(), 5678);
    assert_ne!(sub.mode() & 0o2000, 0, "subdirectory lost set-group-ID");
    // fsyncdir.
    File::open(v.m("pub")).unwrap().sync_all().unwrap();
    fs::write(v.m("secret"), b"s").unwrap();
    fs::set_permissions(v.m("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    let out = nobody(&["cat", v.m("secret").to_str().unwrap()]);
    assert!(!out.status.success(), "nobody read a 0600 root file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
}

#[test]
fn a_non_plain_file_is_read_written_and_truncated_through_content() {
    let content = Arc::new(MemContent::default());
    let data = pattern(7, 300_000);
    let c = content.clone();
    let d = data.clone();
    let Some(v) = mount_with(content.clone(), MountOptions::default(), move |b| {
        fs::write(b.join("opt"), &d).unwrap();
        fs::write(b.join("plain"), b"plain bytes").unwrap();
        c.optimize(&b.join("opt"));
    }) else {
        return;
    };
    let ino = fs::metadata(v.b("opt")).unwrap().ino();
    assert!(fs::read(v.b("opt")).unwrap().iter().all(|&x| x == 0));
    // Reads come from the content state, not the (zeroed) backing bytes.
    assert_eq!(fs::read(v.m("opt")).unwrap(), data);
    assert!(content.count("read") > 0);

    // A non-plain file is never passthrough; a plain one is when the
    // kernel offers it (root on Linux 6.9 and later). The kernel sends the
    // release of the read's handle after `close` returns (a CI run counted
    // 2 handles below without this wait).
    eventually("the read's handle released", || {
        v.locks.open_count(ino).handles == 0
    });
    let f = File::open(v.m("opt")).unwrap();
    assert_eq!(v.locks.open_count(ino).passthrough, 0);
    assert_eq!(v.locks.open_count(ino).handles, 1);
    drop(f);
    let plain_ino = fs::metadata(v.b("plain")).unwrap().ino();
    let p = File::open(v.m("plain")).unwrap();
    println!(
        "plain file passthrough handles: {}",
        v.locks.open_count(plain_ino).passthrough
    );
    drop(p);

    // Truncate tells the content state; bytes below stay, the rest go.
    let changes = v.locks.change_count(ino);
    let f = OpenOptions::new().write(true).open(v.m("opt")).unwrap();
    f.set_len(200_000).unwrap();
    assert_eq!(content.count("truncated"), 1);
    assert!(v.locks.change_count(ino) > changes);
    assert_eq!(fs::read(v.m("opt")).unwrap(), data[..200_000]);

    // A write counts a change, recalls, then lands in the backing file.
    let changes = v.locks.change_count(ino);
    f.write_all_at(b"0123456789", 1000).unwrap();
    assert_eq!(content.count("recall"), 1);
    assert!(v.locks.change_count(ino) > changes);
    let mut want = data[..200_000].to_vec();
    want[1000..1010].copy_from_slice(b"0123456789");
    assert_eq!(fs::read(v.m("opt")).unwrap(), want);
    assert_eq!(fs::read(v.b("opt")).unwrap(), want);
    drop(f);

    // O_TRUNC on another optimized file.
    fs::write(v.b("opt2"), &data[..5000]).unwrap();
    content.optimize(&v.b("opt2"));
    fs::write(v.m("opt2"), b"new").unwrap();
    assert_eq!(content.count("truncated"), 2);
    assert_eq!(fs::read(v.m("opt2")).unwrap(), b"new");

    // Unlinked while open: forgotten when the last handle goes.
    fs::write(v.b("opt3"), &data[..5000]).unwrap();
    content.optimize(&v.b("opt3"));
    let ino3 = fs::metadata(v.b("opt3")).unwrap().ino();
    let mut f = File::open(v.m("opt3")).unwrap();
    fs::remove_file(v.m("opt3")).unwrap();
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got, data[..5000]);
    assert!(!content.released.lock().contains(&ino3));
    drop(f);
    eventually("the unlinked file's release", || {
        content.released.lock().contains(&ino3)
    });
    // Punching a hole into an optimized file recalls the range first.
    fs::write(v.b("opt4"), &data[..20_000]).unwrap();
    content.optimize(&v.b("opt4"));
    let recalls = content.count("recall");
    let f = OpenOptions::new().write(true).open(v.m("opt4")).unwrap();
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(&f, punch, 8192, 4096).unwrap();
    drop(f);
    assert_eq!(content.count("recall"), recalls + 1);
    let mut want = data[..20_000].to_vec();
    want[8192..12_288].fill(0);
    assert_eq!(fs::read(v.m("opt4")).unwrap(), want);

    // A rename over an optimized file removes its last name.
    fs::write(v.b("opt5"), &data[..5000]).unwrap();
    content.optimize(&v.b("opt5"));
    let ino5 = fs::metadata(v.b("opt5")).unwrap().ino();
    fs::rename(v.m("opt4"), v.m("opt5")).unwrap();
    assert!(content.released.lock().contains(&ino5));

    // Unlinked with no handle open: forgotten at once.
    fs::remove_file(v.m("opt")).unwrap();
    assert!(content.released.lock().contains(&ino));
    assert!(content.files.lock().is_empty());
}

#[test]
fn serve_runs_until_unmounted_and_bad_paths_are_one_line_errors() {
    use cairn_volume::fuse::{mount, serve, FuseError};
    use cairn_volume::inode_locks::InodeLocks;
    let tmp = tempfile::tempdir().unwrap();
    let plain = || Arc::new(cairn_volume::content::Plain);
    let try_mount = |backing: &std::path::Path, mnt: &std::path::Path| {
        mount(
            backing,
            mnt,
            plain(),
            InodeLocks::new(),
            MountOptions::default(),
        )
        .err()
        .expect("mounted a bad path")
    };
    fs::write(tmp.path().join("file"), b"").unwrap();
    let e = try_mount(&tmp.path().join("missing"), tmp.path());
    assert!(matches!(e, FuseError::Backing { .. }), "{e}");
    let e = try_mount(tmp.path(), &tmp.path().join("missing"));
    assert!(matches!(e, FuseError::Mountpoint { .. }), "{e}");
    let e = try_mount(tmp.path(), &tmp.path().join("file"));
    assert!(e.to_string().ends_with("not a directory"), "{e}");
    assert!(!e.to_string().contains('\n'));

    if let Some(why) = fuse_support::fuse_missing() {
        return fuse_support::skip_or_fail(&format!("FUSE unavailable: {why}"));
    }
    let (backing, mnt) = (tmp.path().join("b"), tmp.path().join("m"));
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mnt).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (b, m) = (backing.clone(), mnt.clone());
    let server = std::thread::spawn(move || {
        serve(
            &b,
            &m,
            plain(),
            InodeLocks::new(),
            MountOptions::default(),
            |u| tx.send(u).unwrap(),
        )
    });
    let mut unmounter = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("serve mounted");
    fs::write(mnt.join("x"), b"served").unwrap();
    assert_eq!(fs::read(backing.join("x")).unwrap(), b"served");
    unmounter.unmount().unwrap();
    server
        .join()
        .unwrap()
        .expect("serve ends cleanly when unmounted");
    assert!(!mnt.join("x").exists(), "still mounted");
}
