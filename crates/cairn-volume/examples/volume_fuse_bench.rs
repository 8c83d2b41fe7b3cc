//! Read speed of a plain file through the volume's FUSE layer, with
//! passthrough on and off, against the backing file read directly:
//! sequential MB/s (1 MiB reads) and random 4 KiB read IOPS (no
//! read-ahead), each the fastest of `--runs` alternated runs, the file's
//! cached pages evicted before each (`POSIX_FADV_DONTNEED`).
//! `bench/volume-fuse.sh` builds and runs it.
//!
//!     volume_fuse_bench [--mib 512] [--runs 3] [--random-reads 20000] [--dir DIR]

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use cairn_volume::content::Plain;
use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::inode_locks::InodeLocks;

struct Args {
    mib: u64,
    runs: usize,
    random_reads: usize,
    dir: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        mib: 512,
        runs: 3,
        random_reads: 20_000,
        dir: PathBuf::from("target/volume-fuse-bench"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |_| format!("{flag}: not a number: {value}");
        match flag.as_str() {
            "--mib" => a.mib = value.parse().map_err(bad)?,
            "--runs" => a.runs = value.parse().map_err(bad)?,
            "--random-reads" => a.random_reads = value.parse().map_err(bad)?,
            "--dir" => a.dir = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

/// Evicts the file's cached pages under every path it is read by (the
/// backing file's and each mount's own page cache), and only those.
fn evict(paths: &[PathBuf]) {
    for p in paths {
        let f = File::open(p).unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    }
}

fn seq_mb_s(path: &Path) -> f64 {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    total as f64 / 1e6 / t.elapsed().as_secs_f64()
}

fn random_iops(path: &Path, reads: usize, size: u64) -> f64 {
    let f = File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Random).unwrap();
    let pages = size / 4096;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut buf = [0u8; 4096];
    let t = Instant::now();
    for _ in 0..reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f.read_exact_at(&mut buf, (x % pages) * 4096).unwrap();
    }
    reads as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("volume_fuse_bench: {e}");
            std::process::exit(2);
        }
    };
    let _ = std::fs::remove_dir_all(&a.dir);
    let (backing, on, off) = (a.dir.join("files"), a.dir.join("on"), a.dir.join("off"));
    for d in [&backing, &on, &off] {
        std::fs::create_dir_all(d).unwrap();
    }
    let size = a.mib << 20;
    {
        // Bytes that do not compress or repeat, written once.
        let f = File::create(backing.join("big")).unwrap();
        let mut x = 1u64;
        let mut block = vec![0u8; 1 << 20];
        for i in 0..a.mib {
            for w in block.chunks_mut(8) {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                w.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all_at(&block, i << 20).unwrap();
        }
        f.sync_all().unwrap();
    }
    let locks_on = InodeLocks::new();
    let options = |passthrough| MountOptions {
        passthrough,
        ..MountOptions::default()
    };
    let m_on = mount(
        &backing,
        &on,
        Arc::new(Plain),
        locks_on.clone(),
        options(true),
    )
    .unwrap();
    let m_off = mount(
        &backing,
        &off,
        Arc::new(Plain),
        InodeLocks::new(),
        options(false),
    )
    .unwrap();
    let ino = std::fs::metadata(backing.join("big")).unwrap().ino();
    let probe = File::open(on.join("big")).unwrap();
    let passthrough = locks_on.open_count(ino).passthrough > 0;
    drop(probe);

    let targets = [
        ("backing file", backing.join("big")),
        ("mount, passthrough", on.join("big")),
        ("mount, no passthrough", off.join("big")),
    ];
    let paths: Vec<PathBuf> = targets.iter().map(|(_, p)| p.clone()).collect();
    let mut best = [(0f64, 0f64); 3];
    for _ in 0..a.runs {
        for (i, (_, path)) in targets.iter().enumerate() {
            evict(&paths);
            best[i].0 = best[i].0.max(seq_mb_s(path));
            evict(&paths);
            best[i].1 = best[i].1.max(random_iops(path, a.random_reads, size));
        }
    }
    println!(
        "{} MiB file, fastest of {} alternated runs, its cached pages evicted before each, \
         passthrough {}",
        a.mib,
        a.runs,
        if passthrough {
            "granted"
        } else {
            "refused by the kernel"
        },
    );
    println!(
        "{:<24} {:>10} {:>7} {:>12} {:>7}",
        "read", "seq MB/s", "x", "4K IOPS", "x"
    );
    for ((name, _), (seq, iops)) in targets.iter().zip(best) {
        println!(
            "{:<24} {:>10.0} {:>7.2} {:>12.0} {:>7.2}",
            name,
            seq,
            seq / best[0].0,
            iops,
            iops / best[0].1
        );
    }
    m_on.unmount().unwrap();
    m_off.unmount().unwrap();
    std::fs::remove_dir_all(&a.dir).unwrap();
}
