//! I/O through the mount under load and in its other paths: readers and
//! writers on several threads, `mmap` writes seen by `read(2)`, and
//! passthrough on and off serving the same bytes.

// mmap is the one unsafe call here: mapping a file this test created and
// keeps open, unmapped before it is closed.
#![allow(unsafe_code)]

mod fuse_support;

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Arc;

use cairn_volume::content::Plain;
use cairn_volume::fuse::MountOptions;
use fuse_support::{is_root, mount_with, pattern, MemContent};

fn options(passthrough: bool) -> MountOptions {
    MountOptions {
        passthrough,
        ..MountOptions::default()
    }
}

const REGION: usize = 64 * 1024;
const REGIONS: usize = 8;

/// Several threads each rewrite their own regions of one file while others
/// read all of it: every byte a reader sees is one a version of its region
/// put there, and the end result is every writer's last.
fn concurrent_io(passthrough: bool, optimized: bool) {
    let content = Arc::new(MemContent::default());
    let c = content.clone();
    let Some(v) = mount_with(content, options(passthrough), move |b| {
        fs::write(b.join("shared"), pattern(0, REGION * REGIONS)).unwrap();
        if optimized {
            c.optimize(&b.join("shared"));
        }
    }) else {
        return;
    };
    let path = v.m("shared");
    let ino = fs::metadata(v.b("shared")).unwrap().ino();
    let locks = &v.locks;
    let rounds = 20u8;
    let seed = |region: usize, round: u8| (region as u8) * 32 + round;
    // Every version each region may hold: the first, then each round's.
    let first = pattern(0, REGION * REGIONS);
    let versions: Vec<Vec<Vec<u8>>> = (0..REGIONS)
        .map(|region| {
            let mut v = vec![first[region * REGION..(region + 1) * REGION].to_vec()];
            v.extend((1..=rounds).map(|r| pattern(seed(region, r), REGION)));
            v
        })
        .collect();
    let versions = &versions;
    std::thread::scope(|s| {
        for w in 0..4usize {
            let path = &path;
            s.spawn(move || {
                let f = OpenOptions::new().write(true).open(path).unwrap();
                if !optimized && is_root() {
                    assert!(locks.open_count(ino).passthrough > 0);
                }
                for r in 1..=rounds {
                    for region in [w, w + 4] {
                        f.write_all_at(&versions[region][r as usize], (region * REGION) as u64)
                            .unwrap();
                    }
                }
            });
        }
        for _ in 0..3 {
            let path = &path;
            s.spawn(move || {
                let f = File::open(path).unwrap();
                let mut buf = vec![0u8; REGION * REGIONS];
                for _ in 0..10 {
                    f.read_exact_at(&mut buf, 0).unwrap();
                    for (region, versions) in versions.iter().enumerate() {
                        let got = &buf[region * REGION..(region + 1) * REGION];
                        for (p, page) in got.chunks(4096).enumerate() {
                            let at = p * 4096..(p + 1) * 4096;
                            if versions.iter().any(|v| page == &v[at.clone()]) {
                                continue;
                            }
                            // A read racing a write may see a page half
                            // copied (the kernel locks no page against
                            // readers), but every byte is one some version
                            // put at that offset: never zeros, nor bytes
                            // from elsewhere.
                            for (i, b) in page.iter().enumerate() {
                                assert!(
                                    versions.iter().any(|v| v[at.start + i] == *b),
                                    "region {region} byte {} is no version's",
                                    at.start + i
                                );
                            }
                        }
                    }
                }
            });
        }
    });
    let got = fs::read(&path).unwrap();
    for region in 0..REGIONS {
        assert!(
            got[region * REGION..(region + 1) * REGION] == versions[region][rounds as usize][..],
            "region {region} lost its last write"
        );
    }
    assert_eq!(fs::read(v.b("shared")).unwrap(), got);
}

#[test]
fn concurrent_readers_and_writers_through_the_daemon() {
    // Non-plain (served through Content, recalled by the first write).
    concurrent_io(false, true);
}

#[test]
fn concurrent_readers_and_writers_by_passthrough() {
    // Plain: the kernel serves the file.
    concurrent_io(true, false);
}

/// Maps `len` bytes of `f` shared and writable.
fn map(f: &File, len: usize) -> *mut u8 {
    use rustix::mm::{mmap, MapFlags, ProtFlags};
    // SAFETY: a fresh mapping of an open file; the caller unmaps it before
    // closing the file and touches only `len` bytes of it.
    unsafe {
        mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            f,
            0,
        )
        .expect("mmap") as *mut u8
    }
}

#[test]
fn mmap_writes_reach_read_and_the_backing_file() {
    for passthrough in [true, false] {
        let Some(v) = mount_with(Arc::new(Plain), options(passthrough), |_| {}) else {
            return;
        };
        let len = 64 * 1024;
        fs::write(v.m("m"), pattern(3, len)).unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(v.m("m"))
            .unwrap();
        let p = map(&f, len);
        // SAFETY: `p` maps `len` bytes; the writes stay inside them.
        let mapped = unsafe { std::slice::from_raw_parts_mut(p, len) };
        assert_eq!(mapped[..100], pattern(3, len)[..100]);
        mapped[5000..5005].copy_from_slice(b"mmap!");
        mapped[len - 1] = b'$';
        // SAFETY: `p` is the mapping made above, of `len` bytes, unmapped
        // once after its last use.
        unsafe {
            rustix::mm::msync(p.cast(), len, rustix::mm::MsyncFlags::SYNC).unwrap();
            rustix::mm::munmap(p.cast(), len).unwrap();
        }
        let mut want = pattern(3, len);
        want[5000..5005].copy_from_slice(b"mmap!");
        want[len - 1] = b'$';
        let mut got = vec![0u8; len];
        File::open(v.m("m"))
            .unwrap()
            .read_exact_at(&mut got, 0)
            .unwrap();
        assert!(
            got == want,
            "read(2) after msync (passthrough {passthrough})"
        );
        assert!(
            fs::read(v.b("m")).unwrap() == want,
            "backing (passthrough {passthrough})"
        );
        drop(f);
    }
}

#[test]
fn passthrough_on_and_off_serve_the_same_bytes() {
    let Some(mut v) = mount_with(Arc::new(Plain), options(true), |_| {}) else {
        return;
    };
    let size = 1 << 20;
    fs::write(v.m("p"), pattern(9, size)).unwrap();
    let ino = fs::metadata(v.b("p")).unwrap().ino();
    // The kernel sends the release of the write's handle after `close`
    // returns: counted open until the daemon has it (a CI run saw 2
    // passthrough handles below).
    fuse_support::eventually("the write's handle released", || {
        v.locks.open_count(ino).handles == 0
    });
    let changes = v.locks.change_count(ino);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.m("p"))
        .unwrap();
    if is_root() {
        // This kernel (6.9 and later) serves it directly, and the daemon,
        // which will not see the writes, counted a change at the open.
        assert_eq!(v.locks.open_count(ino).passthrough, 1, "no passthrough");
        assert!(v.locks.change_count(ino) > changes);
    }
    for (i, off) in [0u64, 4095, 65_536, 777_777, (size - 3) as u64]
        .iter()
        .enumerate()
    {
        f.write_all_at(&[i as u8 + 1; 3], *off).unwrap();
    }
    drop(f);
    let with = fs::read(v.m("p")).unwrap();
    assert_eq!(with, fs::read(v.b("p")).unwrap());

    v.remount(Arc::new(Plain), options(false));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.m("p"))
        .unwrap();
    assert_eq!(v.locks.open_count(ino).passthrough, 0);
    assert!(
        fs::read(v.m("p")).unwrap() == with,
        "off reads what on wrote"
    );
    f.write_all_at(b"off", 123_456).unwrap();
    drop(f);
    let without = fs::read(v.m("p")).unwrap();

    v.remount(Arc::new(Plain), options(true));
    assert!(
        fs::read(v.m("p")).unwrap() == without,
        "on reads what off wrote"
    );
    assert!(fs::read(v.b("p")).unwrap() == without);
}

#[test]
fn a_file_written_by_passthrough_is_not_served_stale_from_the_page_cache() {
    // The same inode served cached (not plain), then by passthrough (plain,
    // written), then cached again: the third open must not reuse pages the
    // kernel cached in the first.
    let content = Arc::new(MemContent::default());
    let c = content.clone();
    let Some(v) = mount_with(content.clone(), options(true), move |b| {
        fs::write(b.join("f"), pattern(1, 8192)).unwrap();
        c.optimize(&b.join("f"));
    }) else {
        return;
    };
    assert!(fs::read(v.m("f")).unwrap() == pattern(1, 8192));
    // Recalled (now plain): the next open is passthrough.
    let f = OpenOptions::new().write(true).open(v.m("f")).unwrap();
    f.write_all_at(b"x", 0).unwrap();
    drop(f);
    let f = OpenOptions::new().write(true).open(v.m("f")).unwrap();
    f.write_all_at(b"passthrough", 100).unwrap();
    drop(f);
    // Optimized again (as a job would, bytes unchanged): cached once more.
    fuse_support::eventually("handles released", || {
        v.locks
            .open_count(fs::metadata(v.b("f")).unwrap().ino())
            .handles
            == 0
    });
    content.optimize(&v.b("f"));
    let mut want = pattern(1, 8192);
    want[0] = b'x';
    want[100..111].copy_from_slice(b"passthrough");
    assert!(fs::read(v.m("f")).unwrap() == want, "stale page cache");
}

#[test]
fn a_file_open_cached_stays_cached_for_later_opens_when_it_becomes_plain() {
    // The kernel fails an open (EIO) that mixes passthrough and cached
    // handles of one inode: a file recalled while open cached must be
    // opened cached again until its handles close.
    let content = Arc::new(MemContent::default());
    let c = content.clone();
    let Some(v) = mount_with(content.clone(), options(true), move |b| {
        fs::write(b.join("f"), pattern(2, 10_000)).unwrap();
        c.optimize(&b.join("f"));
    }) else {
        return;
    };
    let ino = fs::metadata(v.b("f")).unwrap().ino();
    let first = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.m("f"))
        .unwrap();
    first.write_all_at(b"recalled", 0).unwrap();
    assert!(content.files.lock().is_empty(), "the write recalled it");
    let second = OpenOptions::new()
        .read(true)
        .write(true)
        .open(v.m("f"))
        .expect("a second open of a file open cached");
    assert_eq!(v.locks.open_count(ino).passthrough, 0);
    second.write_all_at(b"second", 100).unwrap();
    let mut want = pattern(2, 10_000);
    want[..8].copy_from_slice(b"recalled");
    want[100..106].copy_from_slice(b"second");
    let mut got = vec![0u8; 10_000];
    first.read_exact_at(&mut got, 0).unwrap();
    assert!(got == want);
    drop((first, second));
    if is_root() {
        // All closed: the next open is passthrough.
        fuse_support::eventually("handles released", || v.locks.open_count(ino).handles == 0);
        let _third = File::open(v.m("f")).unwrap();
        assert_eq!(v.locks.open_count(ino).passthrough, 1);
    }
}
