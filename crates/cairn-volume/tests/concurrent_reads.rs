//! Reads of one optimized file on several threads at once (they share its
//! inode lock) while another thread writes into it (each write recalling
//! its granules first): every page a reader sees is the original's or one
//! a write put there, never zeros or bytes from elsewhere, and no reader
//! sees a page go back to an older version. Through the content state
//! directly (taking the locks as the FUSE layer does) and through a
//! mount of the volume.

mod fuse_support;
mod support;

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::{Rng, SeedableRng};

use cairn_volume::content::Content;
use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::{optimize, OptimizeOptions, Volume};

const FILE_LEN: usize = 4 << 20;
/// The regions the writer rewrites: one granule-aligned, one across two
/// granules (the granule of a 4 MiB file is 64 KiB).
const REGIONS: [(usize, usize); 2] = [(1 << 20, 64 << 10), ((3 << 20) + 40_000, 64 << 10)];
const ROUNDS: usize = 12;
const PAGE: usize = 4096;
/// Bytes per read: a sequential reader's requests (read-ahead starts).
const READ: usize = 128 << 10;

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

/// The file's bytes after `round` writes (0: as optimized).
fn version(original: &[u8], round: usize) -> Vec<u8> {
    let mut v = original.to_vec();
    if round > 0 {
        for (i, (at, len)) in REGIONS.iter().enumerate() {
            v[*at..at + len].copy_from_slice(&noise((round * 10 + i) as u64, *len));
        }
    }
    v
}

/// A volume whose `files/big` (incompressible) is optimized; returns it,
/// the file's path in the backing tree and its bytes.
fn optimized_volume(dir: &Path) -> (Volume, std::path::PathBuf, Vec<u8>) {
    let vol = support::create(dir);
    let path = dir.join("files/big");
    let original = noise(1, FILE_LEN);
    fs::write(&path, &original).unwrap();
    support::age(&dir.join("files"));
    let report = optimize(&vol, &OptimizeOptions::default()).unwrap();
    assert_eq!(report.files_optimized, 1, "{report:?}");
    (vol, path, original)
}

/// Checks one read of `buf` at `offset` against the versions: every page
/// is some version's, and no older than what this reader saw there
/// before (`seen`, a version per page of the file). With `torn`, a page
/// may also mix two versions (a read through the page cache racing a
/// write into the same page: the kernel locks no page against readers),
/// as long as each byte is some version's.
fn check(versions: &[Vec<u8>], offset: usize, buf: &[u8], seen: &mut [usize], torn: bool) {
    for (i, page) in buf.chunks(PAGE).enumerate() {
        let at = offset + i * PAGE;
        let Some(found) = versions
            .iter()
            .rposition(|v| &v[at..at + page.len()] == page)
        else {
            assert!(torn, "the page at {at} is no version's");
            for (j, b) in page.iter().enumerate() {
                assert!(
                    versions.iter().any(|v| v[at + j] == *b),
                    "byte {} is no version's",
                    at + j
                );
            }
            continue;
        };
        // Pages outside the regions are the same in every version.
        let same_in_all = versions[0][at..at + page.len()] == versions[ROUNDS][at..at + page.len()];
        if !same_in_all {
            let p = at / PAGE;
            assert!(
                found >= seen[p],
                "the page at {at} went back from version {} to {found}",
                seen[p]
            );
            seen[p] = found;
        }
    }
}

/// Readers read the whole file `READ` bytes at a time until the writer is
/// done, through `read(offset, buf)`; the writer writes every round with
/// `write(offset, bytes)`.
fn race(
    versions: &[Vec<u8>],
    torn: bool,
    read: &(dyn Fn(usize, &mut [u8]) + Sync),
    write: &(dyn Fn(usize, &[u8]) + Sync),
) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut seen = vec![0usize; FILE_LEN / PAGE];
                let mut buf = vec![0u8; READ];
                let mut passes = 0;
                // At least two passes: one during the writes, one after.
                while !done.load(Ordering::Acquire) || passes < 2 {
                    for offset in (0..FILE_LEN).step_by(READ) {
                        read(offset, &mut buf);
                        check(versions, offset, &buf, &mut seen, torn);
                    }
                    passes += 1;
                }
            });
        }
        s.spawn(|| {
            for (round, v) in versions.iter().enumerate().skip(1) {
                for (at, len) in REGIONS {
                    write(at, &v[at..at + len]);
                }
                if round == ROUNDS {
                    done.store(true, Ordering::Release);
                }
            }
        });
    });
}

#[test]
fn concurrent_reads_of_an_optimized_file_while_it_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (vol, path, original) = optimized_volume(tmp.path());
    let versions: Vec<Vec<u8>> = (0..=ROUNDS).map(|r| version(&original, r)).collect();
    let content = vol.content().unwrap();
    let locks = vol.locks().clone();
    let ino = support::ino(&path);
    assert!(!content.is_plain(ino));
    let writer = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    race(
        &versions,
        false,
        &|offset, buf| {
            let f = File::open(&path).unwrap();
            // As the FUSE layer reads: the lock shared.
            let _shared = locks.read(ino);
            let n = content.read_at(ino, &f, offset as u64, buf).unwrap();
            assert_eq!(n, buf.len());
        },
        &|offset, bytes| {
            // As the FUSE layer writes: the lock exclusive, the change
            // counted, the range recalled, then written.
            let _exclusive = locks.lock(ino);
            locks.changed(ino);
            content
                .prepare_write(ino, &writer, offset as u64, bytes.len() as u64)
                .unwrap();
            writer.write_all_at(bytes, offset as u64).unwrap();
        },
    );
    assert!(content.recalled_bytes() > 0, "the writes recalled nothing");
    assert!(support::read_all(&content, &path) == versions[ROUNDS]);
}

#[test]
fn concurrent_reads_of_an_optimized_file_through_the_mount_while_it_is_written() {
    if let Some(why) = fuse_support::fuse_missing() {
        fuse_support::skip_or_fail(&format!("FUSE unavailable: {why}"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (vol, path, original) = optimized_volume(tmp.path());
    let versions: Vec<Vec<u8>> = (0..=ROUNDS).map(|r| version(&original, r)).collect();
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let handle = mount(
        &tmp.path().join("files"),
        &mnt,
        vol.content().unwrap(),
        vol.locks().clone(),
        MountOptions::default(),
    )
    .expect("mounting");
    let mounted = mnt.join("big");
    let writer = OpenOptions::new().write(true).open(&mounted).unwrap();
    race(
        &versions,
        true,
        &|offset, buf| {
            let f = File::open(&mounted).unwrap();
            // Drop the file's cached pages now and then, so the reads
            // reach the daemon, not only the page cache.
            if offset == 0 {
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            }
            f.read_exact_at(buf, offset as u64).unwrap();
        },
        &|offset, bytes| {
            writer.write_all_at(bytes, offset as u64).unwrap();
        },
    );
    drop(writer);
    assert!(vol.content().unwrap().recalled_bytes() > 0);
    assert!(fs::read(&mounted).unwrap() == versions[ROUNDS]);
    handle.unmount().expect("unmount");
    assert!(support::read_all(&vol.content().unwrap(), &path) == versions[ROUNDS]);
}
