//! The scheduler's yield benchmark (issue 32: "with a foreground read
//! workload on the mount, the workload keeps >= 90% of the throughput it
//! has with jobs paused"). One process mounts a volume (`fuse::mount`) and
//! runs the optimization job on a thread beside it, as the mount daemon
//! does. A foreground reader loops over sequential 1 MiB reads of an
//! optimized file and of a plain file (through passthrough where the
//! kernel offers it) and 500 random 4 KiB reads of the optimized file, each
//! file's cached pages evicted first, for `--seconds` or until the job
//! ends (the foreground is measured only while a job runs), in three modes:
//!
//! - `idle`: no job (the baseline);
//! - `paced`: an optimize job paced by the scheduler (default budget and
//!   policy: `cairn_volume::scheduler`), fed by the mount's meter;
//! - `unpaced`: the same job with no pacer.
//!
//! Modes alternate, `--runs` rounds; each mode's fastest and median
//! foreground runs are reported, with their ratios to `idle`'s, and each job's throughput (its set's
//! bytes over its wall time, start to end; a paced job resumes once the
//! foreground stops after `--seconds`). Each job run optimizes its own fresh set of
//! `--set-mib` (duplicate-heavy, 4 MiB files); the others are excluded by
//! its policy. `bench/volume-yield.sh` builds and runs it.
//!
//!     volume_yield [--seconds 10] [--runs 5] [--set-mib 512] [--fg-mib 64] [--dir DIR]

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::scheduler::{ForegroundMeter, JobBudget, Scheduler, SchedulerConfig};
use cairn_volume::{optimize, OptimizeOptions, Policy, Volume, VolumeSettings};

struct Args {
    seconds: f64,
    runs: usize,
    set_mib: u64,
    fg_mib: u64,
    dir: PathBuf,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 10.0,
        runs: 5,
        set_mib: 512,
        fg_mib: 64,
        dir: PathBuf::from("target/volume-yield-bench"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |_| format!("{flag}: not a number: {value}");
        match flag.as_str() {
            "--seconds" => a.seconds = value.parse().map_err(|_| bad(()))?,
            "--runs" => a.runs = value.parse().map_err(|_| bad(()))?,
            "--set-mib" => a.set_mib = value.parse().map_err(|_| bad(()))?,
            "--fg-mib" => a.fg_mib = value.parse().map_err(|_| bad(()))?,
            "--dir" => a.dir = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if a.runs == 0 || a.seconds <= 0.0 || a.set_mib < 4 || a.fg_mib == 0 {
        return Err("--runs, --seconds, --fg-mib must be positive, --set-mib at least 4".into());
    }
    Ok(a)
}

/// A xorshift stream: bytes that neither compress nor repeat.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = vec![0u8; len];
    for w in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
    }
    out
}

const SET_FILE: usize = 4 << 20;

/// Job set `n`: `mib / 4` files of 4 MiB, each a window of one 8 MiB base
/// with 16 random 4 KiB blocks of its own (duplicate-heavy, as versions).
fn write_set(dir: &Path, n: usize, mib: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let base = noise(1000 + n as u64, 2 * SET_FILE);
    for k in 0..(mib / 4) as usize {
        let start = (k * (1 << 20)) % SET_FILE;
        let mut bytes = base[start..start + SET_FILE].to_vec();
        let own = noise((n * 100_000 + k) as u64, 16 * 4096);
        for (b, block) in own.chunks(4096).enumerate() {
            let at = ((b * 7919 + k * 131) % (SET_FILE / 4096)) * 4096;
            bytes[at..at + 4096].copy_from_slice(block);
        }
        std::fs::write(dir.join(format!("f{k:04}")), bytes).unwrap();
    }
}

/// Every file below `dir` an hour old, so a 1 s minimum age takes it.
fn age(dir: &Path) {
    let old = filetime::FileTime::from_system_time(SystemTime::now() - Duration::from_secs(3600));
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            age(&p);
        }
        filetime::set_file_times(&p, old, old).unwrap();
    }
}

fn policy(excluded: Vec<String>) -> Policy {
    Policy {
        min_age_secs: 1,
        min_size: 1,
        excluded,
    }
}

fn evict(path: &Path) {
    let f = File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
}

fn read_seq(path: &Path, buf: &mut [u8]) -> u64 {
    evict(path);
    let mut f = File::open(path).unwrap();
    let mut total = 0;
    loop {
        let n = f.read(buf).unwrap();
        if n == 0 {
            return total;
        }
        total += n as u64;
    }
}

fn read_random(path: &Path, reads: usize, seed: &mut u64) -> u64 {
    evict(path);
    let f = File::open(path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Random).unwrap();
    let pages = f.metadata().unwrap().len() / 4096;
    let mut buf = [0u8; 4096];
    for _ in 0..reads {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        f.read_exact_at(&mut buf, (*seed % pages) * 4096).unwrap();
    }
    (reads * 4096) as u64
}

/// The foreground workload for `seconds`, or until `job_done`: MB/s read.
fn foreground(mnt: &Path, seconds: f64, job_done: &AtomicBool) -> f64 {
    let (opt, plain) = (mnt.join("fg/optimized"), mnt.join("fg/plain"));
    let mut buf = vec![0u8; 1 << 20];
    let mut seed = 0x1234_5678_9ABC_DEF1u64;
    let started = Instant::now();
    let mut bytes = 0u64;
    let go = || started.elapsed().as_secs_f64() < seconds && !job_done.load(Ordering::Relaxed);
    while go() {
        bytes += read_seq(&opt, &mut buf);
        if go() {
            bytes += read_seq(&plain, &mut buf);
        }
        if go() {
            bytes += read_random(&opt, 500, &mut seed);
        }
    }
    bytes as f64 / 1e6 / started.elapsed().as_secs_f64()
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Idle,
    Paced,
    Unpaced,
}

const MODES: [Mode; 3] = [Mode::Idle, Mode::Paced, Mode::Unpaced];

fn name(m: Mode) -> &'static str {
    match m {
        Mode::Idle => "idle (no job)",
        Mode::Paced => "paced job",
        Mode::Unpaced => "unpaced job",
    }
}

/// One job run's outcome.
struct JobRun {
    mb_s: f64,
    seconds: f64,
    pauses: u64,
    paused: f64,
    throttled: f64,
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("volume_yield: {e}");
            std::process::exit(2);
        }
    };
    let _ = std::fs::remove_dir_all(&a.dir);
    let (vol_dir, mnt) = (a.dir.join("volume"), a.dir.join("mnt"));
    std::fs::create_dir_all(&mnt).unwrap();
    let vol = Volume::create(
        &vol_dir,
        VolumeSettings {
            policy: policy(Vec::new()),
            encryption: None,
        },
    )
    .unwrap();
    let files = vol.dir().files();

    // The foreground's files: one optimized, one plain (excluded from
    // every job), and a job set per paced and unpaced run.
    std::fs::create_dir_all(files.join("fg")).unwrap();
    let fg_bytes = (a.fg_mib << 20) as usize;
    std::fs::write(files.join("fg/optimized"), noise(1, fg_bytes)).unwrap();
    std::fs::write(files.join("fg/plain"), noise(2, fg_bytes)).unwrap();
    let sets = 2 * a.runs;
    eprintln!(
        "writing {sets} job sets of {} MiB and {} MiB of foreground files",
        a.set_mib,
        2 * a.fg_mib
    );
    for n in 0..sets {
        write_set(&files.join(format!("set{n}")), n, a.set_mib);
    }
    age(&files);
    std::thread::sleep(Duration::from_millis(1100));
    let all_sets: Vec<String> = (0..sets).map(|n| format!("set{n}/**")).collect();
    let mut first = all_sets.clone();
    first.push("fg/plain".into());
    let r = optimize(
        &vol,
        &OptimizeOptions {
            policy: Some(policy(first)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.files_optimized, 1, "the foreground's optimized file");

    let meter = Arc::new(ForegroundMeter::default());
    let scheduler = Scheduler::new(SchedulerConfig::default(), meter.clone());
    let handle = mount(
        &files,
        &mnt,
        vol.content().unwrap(),
        vol.locks().clone(),
        MountOptions {
            meter,
            ..MountOptions::default()
        },
    )
    .unwrap();

    let mut fg: Vec<Vec<f64>> = vec![Vec::new(); 3];
    let mut jobs: Vec<Vec<JobRun>> = vec![Vec::new(), Vec::new()];
    let mut set = 0;
    for round in 0..a.runs {
        for (m, &mode) in MODES.iter().enumerate() {
            // The last run's writes flushed, so none is written back
            // during this one.
            rustix::fs::sync();
            std::thread::sleep(Duration::from_secs(1));
            if mode == Mode::Idle {
                fg[m].push(foreground(&mnt, a.seconds, &AtomicBool::new(false)));
            } else {
                let mut excluded: Vec<String> = all_sets
                    .iter()
                    .filter(|s| **s != format!("set{set}/**"))
                    .cloned()
                    .collect();
                excluded.push("fg/**".into());
                set += 1;
                let pacer =
                    (mode == Mode::Paced).then(|| Arc::new(scheduler.job(JobBudget::default())));
                let done = AtomicBool::new(false);
                let (mb_s, job) = std::thread::scope(|s| {
                    let job = s.spawn(|| {
                        let t = Instant::now();
                        let r = optimize(
                            &vol,
                            &OptimizeOptions {
                                policy: Some(policy(excluded)),
                                pacer: pacer.clone(),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                        done.store(true, Ordering::Relaxed);
                        (r, t.elapsed().as_secs_f64())
                    });
                    let mb_s = foreground(&mnt, a.seconds, &done);
                    (mb_s, job.join().unwrap())
                });
                let (report, seconds) = job;
                assert!(report.cancelled.is_none(), "{:?}", report.cancelled);
                assert_eq!(report.bytes_optimized, a.set_mib << 20);
                let stats = pacer.map(|p| p.stats()).unwrap_or_default();
                fg[m].push(mb_s);
                jobs[m - 1].push(JobRun {
                    mb_s: report.bytes_optimized as f64 / 1e6 / seconds,
                    seconds,
                    pauses: stats.pauses,
                    paused: stats.paused.as_secs_f64(),
                    throttled: stats.throttled.as_secs_f64(),
                });
            }
            eprintln!(
                "round {round} {}: foreground {:.0} MB/s",
                name(mode),
                fg[m].last().unwrap()
            );
        }
    }
    handle.unmount().unwrap();

    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (idle, idle_median) = (best(&fg[0]), median(&fg[0]));
    println!(
        "foreground: sequential reads of a {} MiB optimized and a {} MiB plain file, \
         500 random 4 KiB reads of the optimized one, {} s a run, {} runs",
        a.fg_mib, a.fg_mib, a.seconds, a.runs
    );
    println!(
        "| mode | fastest MB/s | vs no job | median MB/s | vs no job | job MB/s | job s \
         | pauses | paused s | throttled s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (m, &mode) in MODES.iter().enumerate() {
        let (f, med) = (best(&fg[m]), median(&fg[m]));
        if mode == Mode::Idle {
            println!(
                "| {} | {f:.0} | 1.00 | {med:.0} | 1.00 | - | - | - | - | - |",
                name(mode)
            );
            continue;
        }
        // The job's fastest run, with its pauses.
        let j = jobs[m - 1]
            .iter()
            .max_by(|x, y| x.mb_s.total_cmp(&y.mb_s))
            .unwrap();
        println!(
            "| {} | {f:.0} | {:.2} | {med:.0} | {:.2} | {:.0} | {:.1} | {} | {:.1} | {:.1} |",
            name(mode),
            f / idle,
            med / idle_median,
            j.mb_s,
            j.seconds,
            j.pauses,
            j.paused,
            j.throttled
        );
    }
    let rounds = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (m, &mode) in MODES.iter().enumerate() {
        println!(
            "{}: foreground MB/s per round: {}",
            name(mode),
            rounds(&fg[m])
        );
    }
}
