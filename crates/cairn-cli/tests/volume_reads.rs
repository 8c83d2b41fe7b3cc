//! Reads of an optimized file through `cairn volume mount` on several
//! threads at once (the daemon serves them together and decodes ahead of
//! sequential readers) while another thread writes into it: every page a
//! reader sees is the original's or one a write put there, and the file
//! reads back as last written, also after mounting again.

mod common;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use common::volume::volume;
use common::{s, Rng};

const FILE_LEN: usize = 6 << 20;
/// The regions the writer rewrites (one across two recall granules).
const REGIONS: [(usize, usize); 2] = [(1 << 20, 64 << 10), ((4 << 20) + 40_000, 64 << 10)];
const ROUNDS: usize = 8;
const PAGE: usize = 4096;
const READ: usize = 128 << 10;

/// Every page of `buf` (read at `offset`) is one version's, or (a read
/// racing a write into the same cached page) mixes versions byte by byte.
fn check(versions: &[Vec<u8>], offset: usize, buf: &[u8]) {
    for (i, page) in buf.chunks(PAGE).enumerate() {
        let at = offset + i * PAGE;
        if versions.iter().any(|v| &v[at..at + page.len()] == page) {
            continue;
        }
        for (j, b) in page.iter().enumerate() {
            assert!(
                versions.iter().any(|v| v[at + j] == *b),
                "byte {} read through the mount is no version's",
                at + j
            );
        }
    }
}

#[test]
fn an_optimized_file_read_on_several_threads_while_written_reads_right() {
    let (_tmp, dir, mnt) = common::volume::created(&[]);
    let files = dir.join("files");
    let mut rng = Rng::new(34);
    let original = rng.bytes(FILE_LEN);
    std::fs::write(files.join("big"), &original).unwrap();
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    filetime::set_file_times(files.join("big"), old, old).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let out = volume(&["volume", "optimize", s(&dir), "--min-age", "1s"]).ok();
    assert!(
        out.stdout_str().contains("optimized 1 of 1 files"),
        "{}",
        out.stdout_str()
    );
    let versions: Vec<Vec<u8>> = (0..=ROUNDS)
        .map(|round| {
            let mut v = original.clone();
            if round > 0 {
                for (at, len) in REGIONS {
                    v[at..at + len].copy_from_slice(&rng.bytes(len));
                }
            }
            v
        })
        .collect();

    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    let path = mnt.join("big");
    let done = AtomicBool::new(false);
    std::thread::scope(|sc| {
        for _ in 0..3 {
            sc.spawn(|| {
                let mut buf = vec![0u8; READ];
                let mut passes = 0;
                while !done.load(Ordering::Acquire) || passes < 2 {
                    let f = File::open(&path).unwrap();
                    // The file's cached pages dropped: the reads reach the
                    // daemon.
                    nix::fcntl::posix_fadvise(
                        &f,
                        0,
                        0,
                        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
                    )
                    .unwrap();
                    for offset in (0..FILE_LEN).step_by(READ) {
                        f.read_exact_at(&mut buf, offset as u64).unwrap();
                        check(&versions, offset, &buf);
                    }
                    passes += 1;
                }
            });
        }
        sc.spawn(|| {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            for v in &versions[1..] {
                for (at, len) in REGIONS {
                    f.write_all_at(&v[at..at + len], at as u64).unwrap();
                }
            }
            f.sync_all().unwrap();
            done.store(true, Ordering::Release);
        });
    });
    assert!(std::fs::read(&path).unwrap() == versions[ROUNDS]);
    common::volume::stop_mount(m);

    let Some(m) = common::fuse::volume_mount(&dir, &mnt) else {
        return;
    };
    assert!(std::fs::read(&path).unwrap() == versions[ROUNDS]);
    common::volume::stop_mount(m);
}
