//! The scheduler with the optimization job: a run cancelled midway keeps
//! every file it finished optimized and leaves the rest plain, all reading
//! back right; and, through a real mount, the workload's requests are
//! counted and a paced job pauses while they come.

mod fuse_support;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::scheduler::{
    ForegroundMeter, JobBudget, Psi, Resource, Scheduler, SchedulerConfig, Signals,
};
use cairn_volume::{optimize, OptimizeOptions, Volume};

/// A clock that moves 100 ms at each reading (so every pace samples), no
/// CPU used, and memory pressure that appears at the `trip`-th reading of
/// it.
struct Tripwire {
    clock_ms: AtomicU64,
    memory_reads: AtomicU64,
    trip: u64,
}

impl Signals for Tripwire {
    fn now(&self) -> Duration {
        Duration::from_millis(self.clock_ms.fetch_add(100, Ordering::Relaxed))
    }
    fn process_cpu(&self) -> Duration {
        Duration::ZERO
    }
    fn psi(&self, resource: Resource) -> Option<Psi> {
        (resource == Resource::Memory).then(|| {
            let n = self.memory_reads.fetch_add(1, Ordering::Relaxed) + 1;
            Psi {
                some_avg10: if n >= self.trip { 60.0 } else { 0.0 },
                some_total_us: 0,
            }
        })
    }
    fn rss_bytes(&self) -> Option<u64> {
        Some(1 << 30)
    }
    fn sleep(&self, _: Duration) {}
}

const FILES: usize = 12;
const FILE_BYTES: usize = 100_000;

/// `FILES` files in two directories, pairs sharing content, aged.
fn tree(files_dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(32);
    let mut out = BTreeMap::new();
    let mut prev = Vec::new();
    for i in 0..FILES {
        let dir = files_dir.join(format!("d{}", i % 2));
        std::fs::create_dir_all(&dir).unwrap();
        let mut bytes = if i % 2 == 1 {
            prev.clone()
        } else {
            support::text(&mut rng, FILE_BYTES)
        };
        bytes.truncate(FILE_BYTES - rng.gen_range(0..100));
        let path = dir.join(format!("f{i:02}"));
        std::fs::write(&path, &bytes).unwrap();
        prev = bytes.clone();
        out.insert(path, bytes);
    }
    support::age(files_dir);
    out
}

/// Every file reads back as written, through the content state; returns
/// how many are optimized. A plain file's backing bytes are its own.
fn check(vol: &Volume, tree: &BTreeMap<PathBuf, Vec<u8>>) -> usize {
    let content = vol.content().unwrap();
    let mut optimized = 0;
    for (path, want) in tree {
        assert_eq!(&support::read_all(&content, path), want, "{path:?}");
        if vol.table().contains(support::ino(path)) {
            optimized += 1;
        } else {
            assert_eq!(&std::fs::read(path).unwrap(), want, "{path:?} plain");
        }
    }
    optimized
}

#[test]
fn an_optimize_cancelled_midway_keeps_what_it_finished_and_leaves_the_rest_plain() {
    // Memory pressure appears at different points: before the first batch,
    // during an ingest, and between switches.
    let mut outcomes = Vec::new();
    for trip in [1, 4, 9, 14, 22] {
        let dir = tempfile::tempdir().unwrap();
        let vol = support::create(dir.path());
        let tree = tree(&vol.dir().files());
        let signals = Arc::new(Tripwire {
            clock_ms: AtomicU64::new(0),
            memory_reads: AtomicU64::new(0),
            trip,
        });
        let scheduler = Scheduler::with_signals(
            SchedulerConfig::default(),
            Arc::new(ForegroundMeter::default()),
            signals,
        );
        let pacer = Arc::new(scheduler.job(JobBudget::default()));
        let report = optimize(
            &vol,
            &OptimizeOptions {
                pacer: Some(pacer.clone()),
                // Three files a batch.
                batch_bytes: Some(3 * FILE_BYTES as u64),
                ..Default::default()
            },
        )
        .unwrap();
        let why = report.cancelled.clone().expect("cancelled");
        assert!(why.contains("memory pressure"), "{why}");
        let optimized = check(&vol, &tree);
        assert_eq!(optimized as u64, report.files_optimized, "trip {trip}");
        assert!(optimized < FILES, "trip {trip}: {report:?}");
        outcomes.push(optimized);

        // The store is sound and a later run finishes the job.
        drop(vol);
        let vol = support::open(dir.path());
        assert_eq!(check(&vol, &tree), optimized, "after reopening");
        let rest = optimize(&vol, &OptimizeOptions::default()).unwrap();
        assert_eq!(rest.files_optimized as usize, FILES - optimized);
        assert_eq!(check(&vol, &tree), FILES);
    }
    // The earliest cancel did nothing; one during an ingest kept its whole
    // batch (three files); one between switches kept the files before it.
    assert_eq!(outcomes[0], 0, "{outcomes:?}");
    assert!(
        outcomes.iter().any(|&n| n > 0 && n % 3 == 0),
        "{outcomes:?}"
    );
    assert!(outcomes.iter().any(|&n| n % 3 != 0), "{outcomes:?}");
}

#[test]
fn a_paced_job_pauses_while_the_mount_is_read_and_finishes_after() {
    if let Some(why) = fuse_support::fuse_missing() {
        fuse_support::skip_or_fail(&why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    // One file optimized now (read by the workload through the daemon),
    // the others left for the paced job.
    let hot = files_dir.join("hot");
    let hot_bytes = support::text(&mut rand::rngs::StdRng::seed_from_u64(1), 1 << 20);
    std::fs::write(&hot, &hot_bytes).unwrap();
    support::age(&files_dir);
    assert_eq!(
        optimize(&vol, &OptimizeOptions::default())
            .unwrap()
            .files_optimized,
        1
    );
    let tree = tree(&files_dir);

    let meter = Arc::new(ForegroundMeter::default());
    let mnt = tempfile::tempdir().unwrap();
    let handle = mount(
        &files_dir,
        mnt.path(),
        vol.content().unwrap(),
        vol.locks().clone(),
        MountOptions {
            passthrough: false,
            meter: meter.clone(),
            ..MountOptions::default()
        },
    )
    .unwrap();
    let scheduler = Scheduler::new(
        SchedulerConfig {
            // The foreground is this test's reader alone.
            cpu_psi_busy: None,
            io_psi_busy: None,
            memory_psi_cancel: None,
            ..Default::default()
        },
        meter.clone(),
    );

    // The workload: read the hot file through the mount for 1.5 s.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, stop) = (mnt.path().join("hot"), stop.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut reads = 0u64;
            while started.elapsed() < Duration::from_millis(1500) && !stop.load(Ordering::Relaxed) {
                // Past the page cache: each read reaches the daemon.
                let f = std::fs::File::open(&path).unwrap();
                rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
                let got = std::fs::read(&path).unwrap();
                assert_eq!(got, hot_bytes);
                reads += 1;
            }
            reads
        })
    };
    fuse_support::eventually("the foreground to count as busy", || {
        scheduler.foreground_busy()
    });
    assert!(meter.reading().completed > 0);

    let pacer = Arc::new(scheduler.job(JobBudget::default()));
    let report = optimize(
        &vol,
        &OptimizeOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads > 0);
    assert_eq!(report.cancelled, None);
    assert_eq!(report.files_optimized as usize, FILES, "{report:?}");
    let stats = pacer.stats();
    assert!(stats.pauses >= 1, "{stats:?}");
    assert!(stats.paused >= Duration::from_millis(500), "{stats:?}");
    assert_eq!(meter.reading().in_flight, 0);
    handle.unmount().unwrap();
    assert_eq!(check(&vol, &tree), FILES);
}
