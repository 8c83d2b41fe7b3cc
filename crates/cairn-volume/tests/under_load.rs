//! Correctness under load (issue 32): random operations through the mount
//! (writes at any offset, reads, truncates, appends, renames, `mmap`
//! writes, fsync, unlink and re-create), each read checked against a model
//! of the expected contents, while the volume's jobs run over and over in
//! the same process, on the same `Volume` the mount serves, one at a time
//! as the mount daemon runs them: optimization, garbage collection and
//! scrub, in the cycle [`JOBS`]. Some files are left alone long enough to
//! be optimized, so the operations meet files in every state: plain,
//! optimized, partly recalled, optimized anew, their chunks moved or
//! freed by a collection. Afterwards the volume is unmounted, reopened
//! (recovery runs) and every file compared once more.
//!
//! CI runs it for a few seconds; `CAIRN_UNDER_LOAD_SECS=600` (and
//! `CAIRN_UNDER_LOAD_SEED`) runs the long version (`bench/volume-faults.sh`).

// mmap is the one unsafe call here: mapping a file this test opened and
// keeps open, unmapped before it is closed.
#![allow(unsafe_code)]

mod fuse_support;
mod support;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::{gc, optimize, scrub, GcOptions, OptimizeOptions, ScrubOptions};
use fuse_support::{fuse_missing, skip_or_fail};

/// Files the operations work on. The first `HOT` take most operations;
/// the others are touched rarely, so they stay unchanged past the
/// volume's 1 s minimum age and get optimized between touches.
const FILES: usize = 8;
const HOT: usize = 3;
/// Largest file the operations grow.
const MAX_LEN: u64 = 3 << 20;

/// A background job of the cycle.
#[derive(Clone, Copy, Debug)]
enum Job {
    Optimize,
    Gc,
    Scrub,
}

/// The jobs' cycle: optimization every other run (so files keep being
/// switched), a collection and a scrub between.
const JOBS: [Job; 4] = [Job::Optimize, Job::Gc, Job::Optimize, Job::Scrub];

/// What the background jobs did, counted across runs.
#[derive(Default)]
struct JobCounts {
    optimize_runs: AtomicU64,
    switched: AtomicU64,
    reoptimized: AtomicU64,
    gc_runs: AtomicU64,
    gc_containers_deleted: AtomicU64,
    scrub_runs: AtomicU64,
    scrub_chunks_verified: AtomicU64,
}

/// Runs `job` once on `vol`, counting what it did; a scrub must find the
/// store whole.
fn run_job(vol: &cairn_volume::Volume, job: Job, counts: &JobCounts) {
    match job {
        Job::Optimize => {
            let report = optimize(vol, &OptimizeOptions::default()).expect("optimize");
            counts.optimize_runs.fetch_add(1, Ordering::Relaxed);
            counts
                .switched
                .fetch_add(report.files_optimized, Ordering::Relaxed);
            counts
                .reoptimized
                .fetch_add(report.files_reoptimized, Ordering::Relaxed);
        }
        Job::Gc => {
            let report = gc(vol, &GcOptions::default()).expect("gc");
            counts.gc_runs.fetch_add(1, Ordering::Relaxed);
            counts
                .gc_containers_deleted
                .fetch_add(report.containers_deleted, Ordering::Relaxed);
        }
        Job::Scrub => {
            let report = scrub(vol, &ScrubOptions::default()).expect("scrub");
            assert!(
                report.is_clean() && report.damaged_chunks == 0,
                "scrub under load: {report:?}"
            );
            counts.scrub_runs.fetch_add(1, Ordering::Relaxed);
            counts
                .scrub_chunks_verified
                .fetch_add(report.chunks_verified, Ordering::Relaxed);
        }
    }
}

/// One file of the model: its current name and bytes.
struct Slot {
    name: String,
    bytes: Vec<u8>,
    generation: u32,
}

/// Bytes to write: mostly slices of a shared pool (so files share chunks
/// and the store deduplicates), sometimes fresh.
fn payload(rng: &mut StdRng, pool: &[u8], len: usize) -> Vec<u8> {
    if rng.gen_bool(0.7) {
        let at = rng.gen_range(0..pool.len() - len);
        pool[at..at + len].to_vec()
    } else {
        (0..len).map(|_| rng.gen()).collect()
    }
}

/// Writes `data` at `offset` into the model's bytes, zero-filling a gap.
fn model_write(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset as usize..end].copy_from_slice(data);
}

/// Asserts the file at `path` holds `want` from `offset` for `len` bytes
/// (clipped to its end), naming the first differing byte.
fn check_range(path: &Path, want: &[u8], offset: u64, len: usize, what: &str) {
    let f = File::open(path).unwrap_or_else(|e| panic!("{what}: opening {path:?}: {e}"));
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f
            .read_at(&mut buf[got..], offset + got as u64)
            .unwrap_or_else(|e| panic!("{what}: reading {path:?}: {e}"));
        if n == 0 {
            break;
        }
        got += n;
    }
    let start = (offset as usize).min(want.len());
    let end = (offset as usize + len).min(want.len());
    let expected = &want[start..end];
    assert_eq!(
        got,
        expected.len(),
        "{what}: {path:?} read length at {offset}"
    );
    if let Some(i) = (0..got).find(|&i| buf[i] != expected[i]) {
        panic!(
            "{what}: {path:?} differs at byte {} (read {} want {})",
            offset as usize + i,
            buf[i],
            expected[i]
        );
    }
}

/// Maps `len` bytes of `f` shared and writable, writes `data` at `at`,
/// syncs and unmaps.
fn mmap_write(f: &File, len: usize, at: usize, data: &[u8]) {
    use rustix::mm::{mmap, msync, munmap, MapFlags, MsyncFlags, ProtFlags};
    // SAFETY: a fresh shared mapping of `len` bytes of an open file of at
    // least that length; only `[at, at + data.len())` (inside it) is
    // written, and it is unmapped once, before `f` is closed.
    unsafe {
        let p = mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            f,
            0,
        )
        .expect("mmap");
        let mapped = std::slice::from_raw_parts_mut(p.cast::<u8>(), len);
        mapped[at..at + data.len()].copy_from_slice(data);
        msync(p, len, MsyncFlags::SYNC).expect("msync");
        munmap(p, len).expect("munmap");
    }
}

/// Runs one random operation on `slot` through the mount at `mnt`.
fn operate(rng: &mut StdRng, pool: &[u8], mnt: &Path, slot: &mut Slot, ops: &mut [u64; 9]) {
    let path = mnt.join(&slot.name);
    let len = slot.bytes.len() as u64;
    match rng.gen_range(0..100) {
        // A write at any offset, up to a little past the end.
        0..=24 => {
            let n = rng.gen_range(1..=256 << 10);
            let offset = rng.gen_range(0..=len.min(MAX_LEN) + 4096);
            let data = payload(rng, pool, n);
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(&data, offset).unwrap();
            model_write(&mut slot.bytes, offset, &data);
            ops[0] += 1;
        }
        // A read of a random range.
        25..=49 => {
            let offset = rng.gen_range(0..=len);
            let n = rng.gen_range(1..=512 << 10);
            check_range(&path, &slot.bytes, offset, n, "read");
            ops[1] += 1;
        }
        // The whole file.
        50..=59 => {
            let got = fs::read(&path).unwrap();
            assert!(got == slot.bytes, "whole read of {path:?} differs");
            ops[2] += 1;
        }
        // Truncate, shorter or longer.
        60..=66 => {
            let to = rng.gen_range(0..=(len + (128 << 10)).min(MAX_LEN));
            OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(to)
                .unwrap();
            slot.bytes.resize(to as usize, 0);
            ops[3] += 1;
        }
        // Append.
        67..=74 => {
            let n = rng.gen_range(1..=128 << 10);
            let data = payload(rng, pool, n);
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(&data).unwrap();
            slot.bytes.extend_from_slice(&data);
            ops[4] += 1;
        }
        // Rename (the inode, and so its stream map, keeps its identity).
        75..=81 => {
            slot.generation += 1;
            let name = format!(
                "{}-{}",
                slot.name.split('-').next().unwrap(),
                slot.generation
            );
            fs::rename(&path, mnt.join(&name)).unwrap();
            slot.name = name;
            ops[5] += 1;
        }
        // A write through a shared mapping, then msync.
        82..=88 if len > 0 => {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let at = rng.gen_range(0..len as usize);
            let n = rng.gen_range(1..=(len as usize - at).min(64 << 10));
            let data = payload(rng, pool, n);
            mmap_write(&f, len as usize, at, &data);
            model_write(&mut slot.bytes, at as u64, &data);
            ops[6] += 1;
        }
        // fsync after a small write.
        82..=94 => {
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            let data = payload(rng, pool, 4096);
            let offset = rng.gen_range(0..=len);
            f.write_all_at(&data, offset).unwrap();
            f.sync_all().unwrap();
            model_write(&mut slot.bytes, offset, &data);
            ops[7] += 1;
        }
        // Unlink and create anew under the same name (a new inode: the old
        // one's stream map must never serve it).
        _ => {
            fs::remove_file(&path).unwrap();
            let n = rng.gen_range(0..=1 << 20);
            let data = payload(rng, pool, n);
            fs::write(&path, &data).unwrap();
            slot.bytes = data;
            ops[8] += 1;
        }
    }
}

#[test]
fn random_operations_through_the_mount_while_optimization_gc_and_scrub_run() {
    if let Some(why) = fuse_missing() {
        skip_or_fail(&format!("FUSE unavailable: {why}"));
        return;
    }
    let secs: u64 = std::env::var("CAIRN_UNDER_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("CAIRN_UNDER_LOAD_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    println!("under load: {secs} s, seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let pool: Vec<u8> = (0..4 << 20).map(|_| rng.gen()).collect();

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("vol");
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let vol = support::create(&dir);
    let handle = mount(
        &vol.dir().files(),
        &mnt,
        vol.content().unwrap(),
        vol.locks().clone(),
        MountOptions::default(),
    )
    .expect("mounting");

    let mut slots: Vec<Slot> = (0..FILES)
        .map(|i| {
            let len = rng.gen_range(0..2 << 20);
            let bytes = payload(&mut rng, &pool, len);
            let name = format!("f{i}");
            fs::write(mnt.join(&name), &bytes).unwrap();
            Slot {
                name,
                bytes,
                generation: 0,
            }
        })
        .collect();

    let stop = AtomicBool::new(false);
    let counts = JobCounts::default();
    let mut ops = [0u64; 9];
    std::thread::scope(|s| {
        // One job at a time, as the mount daemon's runner.
        let jobs = s.spawn(|| {
            for job in JOBS.iter().cycle() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                run_job(&vol, *job, &counts);
                std::thread::sleep(Duration::from_millis(150));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut last_cold = Instant::now();
        while Instant::now() < deadline {
            // Mostly the hot files; a cold one about every 1.5 s, so each
            // cold file sits unchanged for several seconds in between.
            let i = if last_cold.elapsed() > Duration::from_millis(1500) {
                last_cold = Instant::now();
                rng.gen_range(HOT..FILES)
            } else {
                rng.gen_range(0..HOT)
            };
            operate(&mut rng, &pool, &mnt, &mut slots[i], &mut ops);
            if rng.gen_range(0..20) == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        stop.store(true, Ordering::Relaxed);
        jobs.join().expect("the jobs' thread");
    });
    let c = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let (runs, switched) = (c(&counts.optimize_runs), c(&counts.switched));
    let (gc_runs, scrub_runs) = (c(&counts.gc_runs), c(&counts.scrub_runs));
    println!(
        "ops (write, read, whole, truncate, append, rename, mmap, fsync, recreate) {ops:?}; \
         {runs} optimize runs switched {switched} files, optimized {} anew; \
         {gc_runs} gc runs deleted {} containers; {scrub_runs} scrub runs verified {} chunks",
        c(&counts.reoptimized),
        c(&counts.gc_containers_deleted),
        c(&counts.scrub_chunks_verified),
    );
    assert!(
        switched >= 2,
        "the run must meet optimized files: only {switched} switches in {runs} runs"
    );
    assert!(
        gc_runs >= 1 && scrub_runs >= 1,
        "gc and scrub must run beside the operations: {gc_runs} gc, {scrub_runs} scrub runs"
    );

    // Every file through the mount, then after unmount and reopen.
    for slot in &slots {
        let got = fs::read(mnt.join(&slot.name)).unwrap();
        assert!(got == slot.bytes, "{} differs through the mount", slot.name);
    }
    handle.unmount().expect("unmount");
    drop(vol);
    let vol = support::open(&dir);
    let content = vol.content().unwrap();
    let files: Vec<PathBuf> = support::walk(&vol.dir().files());
    assert_eq!(files.len(), FILES, "files in the backing tree");
    for slot in &slots {
        let path = vol.dir().files().join(&slot.name);
        let got = support::read_all(&content, &path);
        assert!(got == slot.bytes, "{} differs after reopening", slot.name);
    }
}
