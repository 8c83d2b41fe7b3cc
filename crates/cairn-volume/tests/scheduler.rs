//! The scheduler with the volume's jobs: an optimization cancelled midway
//! keeps every file it finished optimized and leaves the rest plain, all
//! reading back right; through a real mount, the workload's requests are
//! counted and a paced job pauses while they come. On a fake foreground:
//! a paced scrub, gc and snapshot pause while it is busy and go on after;
//! a read that fails while the paced collector is paused does not wait for
//! it; a cancelled scrub (while verifying, and before a repair) stops with
//! nothing half-done and a later scrub is clean; a gc cancelled before it
//! starts does nothing and one cancelled during the collection finishes
//! it; a cancelled snapshot is still whole.

mod fuse_support;
mod support;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use cairn_core::Fingerprint;
use cairn_engine::chunk_repair::RecipeWalker;
use cairn_engine::object_names;
use cairn_volume::content::Content;
use cairn_volume::fuse::{mount, MountOptions};
use cairn_volume::gc::ROOTS_TAG;
use cairn_volume::scheduler::{
    ForegroundMeter, JobBudget, Pacer, Psi, Resource, Scheduler, SchedulerConfig, Signals,
    SAMPLE_INTERVAL,
};
use cairn_volume::scrub::COPIES_DIR;
use cairn_volume::snapshot::{snapshot, SnapshotOptions};
use cairn_volume::{gc, optimize, scrub, GcOptions, OptimizeOptions, ScrubOptions, Volume};

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

/// A paced job under the `Tripwire` above, which cancels at its `trip`-th
/// pace (while nothing pauses, each pace reads memory pressure once).
fn tripwire(trip: u64) -> Arc<Pacer> {
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
    Arc::new(scheduler.job(JobBudget::default()))
}

/// A fake foreground: the clock moves 100 ms at each reading, no CPU is
/// used, and at the `busy_at`-th reading of memory pressure (one at each
/// pace, and one at each step of a pause) the mount's meter gets a burst
/// of requests, then another at each of the next `busy_sleeps` sleeps
/// (the steps of the pause it causes): busy, then quiet. `on_pause` runs
/// at the first sleep, on the job's thread, while the job is paused.
struct Foreground {
    clock_ms: AtomicU64,
    memory_reads: AtomicU64,
    busy_at: u64,
    busy_sleeps: u64,
    bursts_left: AtomicU64,
    sleeps: AtomicU64,
    meter: Arc<ForegroundMeter>,
    on_pause: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Foreground {
    fn burst(&self) {
        for _ in 0..100 {
            self.meter.record(Duration::from_micros(20), Duration::ZERO);
        }
    }
}

impl Signals for Foreground {
    fn now(&self) -> Duration {
        Duration::from_millis(self.clock_ms.fetch_add(100, Ordering::Relaxed))
    }
    fn process_cpu(&self) -> Duration {
        Duration::ZERO
    }
    fn psi(&self, resource: Resource) -> Option<Psi> {
        (resource == Resource::Memory).then(|| {
            let n = self.memory_reads.fetch_add(1, Ordering::Relaxed) + 1;
            if n == self.busy_at {
                self.bursts_left.store(self.busy_sleeps, Ordering::Relaxed);
                self.burst();
            }
            Psi {
                some_avg10: 0.0,
                some_total_us: 0,
            }
        })
    }
    fn rss_bytes(&self) -> Option<u64> {
        Some(1 << 30)
    }
    fn sleep(&self, _: Duration) {
        // No CPU is used, so the job never sleeps for its budget: every
        // sleep is a step of a pause.
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        let hook = self.on_pause.lock().unwrap().take();
        if let Some(f) = hook {
            f();
        }
        let left = self.bursts_left.load(Ordering::Relaxed);
        if left > 0 {
            self.bursts_left.store(left - 1, Ordering::Relaxed);
            self.burst();
        }
    }
}

/// A paced job on a [`Foreground`] busy from its `busy_at`-th pace for
/// `busy_sleeps` steps of pause; `on_pause` runs while it is paused.
fn busy_from(
    busy_at: u64,
    busy_sleeps: u64,
    on_pause: Option<Box<dyn FnOnce() + Send>>,
) -> (Arc<Foreground>, Arc<Pacer>) {
    let meter = Arc::new(ForegroundMeter::default());
    let fake = Arc::new(Foreground {
        clock_ms: AtomicU64::new(0),
        memory_reads: AtomicU64::new(0),
        busy_at,
        busy_sleeps,
        bursts_left: AtomicU64::new(0),
        sleeps: AtomicU64::new(0),
        meter: meter.clone(),
        on_pause: Mutex::new(on_pause),
    });
    let scheduler = Scheduler::with_signals(SchedulerConfig::default(), meter, fake.clone());
    // The first sample has no window to measure a rate over: taken now,
    // so the job's first pace can see a burst.
    assert!(!scheduler.foreground_busy());
    (fake, Arc::new(scheduler.job(JobBudget::default())))
}

/// The pause a [`busy_from`] job must have taken: one, through every
/// burst, then resumed.
fn assert_paused_once(pacer: &Pacer, fake: &Foreground, busy_sleeps: u64) {
    let stats = pacer.stats();
    assert_eq!(stats.pauses, 1, "{stats:?}");
    assert!(
        stats.paused >= SAMPLE_INTERVAL * busy_sleeps as u32,
        "{stats:?}"
    );
    assert!(fake.sleeps.load(Ordering::Relaxed) > busy_sleeps);
    assert_eq!(fake.bursts_left.load(Ordering::Relaxed), 0);
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
        let pacer = tripwire(trip);
        let report = optimize(
            &vol,
            &OptimizeOptions {
                pacer: Some(pacer.clone()),
                // Three files a batch, switched two, then one.
                batch_bytes: Some(3 * FILE_BYTES as u64),
                switch_group: Some(2),
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
    // batch (three files); one between two switch groups kept the files
    // before it.
    assert_eq!(outcomes[0], 0, "{outcomes:?}");
    assert!(
        outcomes.iter().any(|&n| n > 0 && n % 3 == 0),
        "{outcomes:?}"
    );
    assert!(outcomes.iter().any(|&n| n % 3 != 0), "{outcomes:?}");
}

/// The ingest paces inside one large file, not only at its end: a
/// 40 MiB file is paced every `PACE_CONTENT_BYTES` of it read, and a
/// foreground busy from the third pace (the second content pace, 16 MiB
/// into the file) pauses the job there; the file is optimized after.
#[test]
fn an_optimize_pauses_inside_one_large_file() {
    let dir = tempfile::tempdir().unwrap();
    let vol = support::create(dir.path());
    let files_dir = vol.dir().files();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let big: Vec<u8> = (0..40 << 20).map(|_| rng.gen()).collect();
    std::fs::write(files_dir.join("disk.img"), &big).unwrap();
    support::age(&files_dir);
    let (fake, pacer) = busy_from(3, 2, None);
    let report = optimize(
        &vol,
        &OptimizeOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.files_optimized, 1, "{report:?}");
    assert!(report.cancelled.is_none(), "{report:?}");
    // Before the batch, 5 inside the file, after it, before its switch.
    let per_file = (big.len() as u64) / cairn_volume::scheduler::PACE_CONTENT_BYTES;
    assert!(pacer.stats().paces > per_file + 1, "{:?}", pacer.stats());
    assert_paused_once(&pacer, &fake, 2);
    let content = vol.content().unwrap();
    assert!(support::read_all(&content, &files_dir.join("disk.img")) == big);
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

    // The mount serves the tree before the workload starts (on a loaded
    // machine a path looked up at once may still reach the empty
    // directory beneath the mount).
    fuse_support::eventually("the mount to serve the hot file", || {
        mnt.path().join("hot").exists()
    });
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

/// A volume with [`tree`]'s files optimized three to a batch (so the store
/// has several containers); returns it and the files.
fn optimized(dir: &Path) -> (Volume, BTreeMap<PathBuf, Vec<u8>>) {
    let vol = support::create(dir);
    let tree = tree(&vol.dir().files());
    let report = optimize(
        &vol,
        &OptimizeOptions {
            batch_bytes: Some(3 * FILE_BYTES as u64),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.files_optimized as usize, FILES, "{report:?}");
    (vol, tree)
}

/// The store's containers.
fn containers(vol: &Volume) -> Vec<cairn_core::ContainerId> {
    vol.repo().log.ids().unwrap()
}

/// The data chunks of `path`'s stream map, with the byte range each
/// covers.
fn data_chunks(vol: &Volume, path: &Path) -> Vec<(Fingerprint, u64, u64)> {
    let entry = vol.table().get(support::ino(path)).unwrap();
    let mut walker = RecipeWalker::open(vol.repo()).unwrap();
    let mut out = Vec::new();
    walker
        .walk(&entry.blob, &mut |c| {
            if c.level == 0 {
                out.push((c.fp, c.offset, c.offset + c.size));
            }
        })
        .unwrap();
    out
}

/// A data chunk of f00 that f01 (its pair) holds too, with its range in
/// f00.
fn pair_chunk(vol: &Volume) -> (Fingerprint, u64, u64) {
    let files = vol.dir().files();
    let f01: Vec<Fingerprint> = data_chunks(vol, &files.join("d1/f01"))
        .into_iter()
        .map(|c| c.0)
        .collect();
    data_chunks(vol, &files.join("d0/f00"))
        .into_iter()
        .find(|c| f01.contains(&c.0))
        .expect("f00 and f01 share a chunk")
}

/// Flips one byte of chunk `fp`'s stored payload in the store's container
/// holding it.
fn damage(vol: &Volume, fp: &Fingerprint) {
    let root = vol.dir().store().join(object_names::CONTAINERS);
    for path in support::walk(&root) {
        let bytes = std::fs::read(&path).unwrap();
        let meta = cairn_format::container::decode_container(&bytes).unwrap();
        if let Some(d) = meta.descriptors.iter().find(|d| d.fp == *fp) {
            let at = meta.data_offset + u64::from(d.offset) + u64::from(d.stored_len) / 2;
            let f = OpenOptions::new().write(true).open(&path).unwrap();
            f.write_all_at(&[bytes[at as usize] ^ 0x5a], at).unwrap();
            return;
        }
    }
    panic!("chunk {fp} is in no container of the store");
}

#[test]
fn a_paced_scrub_pauses_while_the_foreground_is_busy_and_goes_on_after() {
    let dir = tempfile::tempdir().unwrap();
    let (vol, tree) = optimized(dir.path());
    let n = containers(&vol).len() as u64;
    assert!(n >= 3, "{n} containers");
    // Step 1 paces once per stream map, step 3 once per container.
    let maps = vol.table().len() as u64;
    assert_eq!(maps, FILES as u64);
    // Busy from the pace before the second container.
    let (fake, pacer) = busy_from(maps + 2, 6, None);
    let report = scrub(
        &vol,
        &ScrubOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.cancelled, None);
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.containers_verified, n, "{report:?}");
    // No copies (nothing is referenced often enough) and nothing to
    // repair: one pace per stream map, then one per container of the store.
    assert_eq!(report.copies_made, 0, "{report:?}");
    assert_eq!(pacer.stats().paces, maps + n);
    assert_paused_once(&pacer, &fake, 6);
    assert_eq!(check(&vol, &tree), FILES);
}

#[test]
fn a_cancelled_scrub_leaves_nothing_half_done_and_a_later_scrub_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (vol, tree) = optimized(dir.path());
    let n = containers(&vol).len() as u64;
    assert!(n >= 3, "{n} containers");
    // Chunks of a pair of files get second copies; then a run that never
    // trips counts the paces of a scrub that repairs nothing.
    let opts = |pacer: Option<Arc<Pacer>>| ScrubOptions {
        copies_above: 1,
        pacer,
        ..Default::default()
    };
    let first = scrub(&vol, &opts(None)).unwrap();
    assert!(first.is_clean(), "{first:?}");
    assert!(first.copies_made > 0, "{first:?}");
    let counting = tripwire(u64::MAX);
    let second = scrub(&vol, &opts(Some(counting.clone()))).unwrap();
    assert!(
        second.is_clean() && second.cancelled.is_none(),
        "{second:?}"
    );
    let paces = counting.stats().paces;
    assert!(paces > n, "{paces} paces: copy and store containers");

    // A chunk f00 shares with f01, damaged: it has a copy.
    let (fp, _, _) = pair_chunk(&vol);
    damage(&vol, &fp);
    let before = containers(&vol);

    // Cancelled while counting the references (one pace per stream map):
    // nothing verified, copied or repaired.
    let maps = vol.table().len() as u64;
    let counting = scrub(&vol, &opts(Some(tripwire(maps / 2)))).unwrap();
    let why = counting.cancelled.clone().expect("cancelled");
    assert!(why.contains("counting"), "{why}");
    assert_eq!(counting.containers_verified, 0, "{counting:?}");
    assert_eq!(counting.copies_made, 0, "{counting:?}");
    assert_eq!(containers(&vol), before);

    // Cancelled at its third container: it stops there.
    let early = scrub(&vol, &opts(Some(tripwire(maps + 3)))).unwrap();
    let why = early.cancelled.clone().expect("cancelled");
    assert!(
        why.contains("memory pressure") && why.contains("verifying"),
        "{why}"
    );
    assert!(early.containers_verified < n, "{early:?}");
    assert!(early.replaced_containers.is_empty(), "{early:?}");
    assert_eq!(early.copy_containers_dropped, 0, "{early:?}");
    assert_eq!(containers(&vol), before);

    // Cancelled before its repair: everything verified, nothing repaired,
    // the damaged container still there, the damage reported as left.
    let unrepaired = scrub(&vol, &opts(Some(tripwire(paces + 1)))).unwrap();
    let why = unrepaired.cancelled.clone().expect("cancelled");
    assert!(why.contains("before repairing"), "{why}");
    assert_eq!(unrepaired.containers_verified, n, "{unrepaired:?}");
    assert_eq!(unrepaired.damaged_chunks, 1, "{unrepaired:?}");
    assert_eq!(unrepaired.repaired_chunks, 0, "{unrepaired:?}");
    assert_eq!(unrepaired.lost_chunks, 0, "{unrepaired:?}");
    assert_eq!(unrepaired.unrepaired_chunks(), 1, "{unrepaired:?}");
    assert!(!unrepaired.is_clean());
    assert!(unrepaired.replaced_containers.is_empty(), "{unrepaired:?}");
    assert_eq!(containers(&vol), before);
    // The damaged chunk reads from its copy meanwhile.
    assert_eq!(check(&vol, &tree), FILES);

    // The next scrub, unpaced, repairs it; the one after finds nothing.
    drop(vol);
    let vol = support::open(dir.path());
    let repaired = scrub(&vol, &opts(None)).unwrap();
    assert_eq!(repaired.cancelled, None);
    assert_eq!(repaired.damaged_chunks, 1, "{repaired:?}");
    assert_eq!(repaired.repaired_chunks, 1, "{repaired:?}");
    assert!(repaired.is_clean(), "{repaired:?}");
    let clean = scrub(&vol, &opts(None)).unwrap();
    assert_eq!(clean.damaged_chunks, 0, "{clean:?}");
    assert!(clean.is_clean() && clean.cancelled.is_none(), "{clean:?}");
    assert_eq!(clean.containers_verified, containers(&vol).len() as u64);
    assert!(vol.dir().root().join(COPIES_DIR).is_dir());
    assert_eq!(check(&vol, &tree), FILES);
}

/// [`optimized`], then both files of three of the six pairs (chunks no
/// other pair has) deleted as the mount deletes them; returns the files
/// left.
fn optimized_then_pairs_deleted(dir: &Path) -> (Volume, BTreeMap<PathBuf, Vec<u8>>) {
    let (vol, mut tree) = optimized(dir);
    let doomed: Vec<PathBuf> = tree
        .keys()
        .filter(|p| p.file_name().unwrap().to_str().unwrap() < "f06")
        .cloned()
        .collect();
    assert_eq!(doomed.len(), 6);
    for path in doomed {
        let ino = support::ino(&path);
        std::fs::remove_file(&path).unwrap();
        vol.content().unwrap().released(ino).unwrap();
        tree.remove(&path);
    }
    (vol, tree)
}

/// Every file of `tree` reads back as written through the content state.
fn read_back(vol: &Volume, tree: &BTreeMap<PathBuf, Vec<u8>>) {
    let content = vol.content().unwrap();
    for (path, want) in tree {
        assert!(&support::read_all(&content, path) == want, "{path:?}");
    }
}

#[test]
fn a_paced_gc_pauses_the_collector_while_the_foreground_is_busy_and_goes_on_after() {
    let dir = tempfile::tempdir().unwrap();
    let (vol, tree) = optimized_then_pairs_deleted(dir.path());
    // A read while the collector is paused.
    let read_while_paused = Arc::new(AtomicBool::new(false));
    let hook: Box<dyn FnOnce() + Send> = {
        let (content, done) = (vol.content().unwrap(), read_while_paused.clone());
        let (path, want) = tree
            .iter()
            .next()
            .map(|(p, w)| (p.clone(), w.clone()))
            .unwrap();
        Box::new(move || {
            assert!(support::read_all(&content, &path) == want, "{path:?}");
            done.store(true, Ordering::Relaxed);
        })
    };
    // Pace 1 is before step 1; pace 2 the collector's first unit.
    let (fake, pacer) = busy_from(2, 6, Some(hook));
    let report = gc(
        &vol,
        &GcOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.cancelled, None);
    assert!(report.containers_deleted > 0, "{report:?}");
    assert!(report.reclaimed_bytes > 0, "{report:?}");
    assert!(read_while_paused.load(Ordering::Relaxed));
    // Paced through the collection, a unit at a time.
    assert!(pacer.stats().paces > 2 + 1, "{:?}", pacer.stats());
    assert_paused_once(&pacer, &fake, 6);
    read_back(&vol, &tree);
    drop(vol);
    read_back(&support::open(dir.path()), &tree);
}

#[test]
fn a_read_that_fails_while_a_paced_collector_is_paused_does_not_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (vol, tree) = optimized(dir.path());
    let f00 = vol.dir().files().join("d0/f00");
    let (fp, start, end) = pair_chunk(&vol);
    damage(&vol, &fp);
    let intact: BTreeMap<PathBuf, Vec<u8>> = tree
        .into_iter()
        .filter(|(p, _)| !data_chunks(&vol, p).iter().any(|c| c.0 == fp))
        .collect();
    assert_eq!(intact.len(), FILES - 2);
    drop(vol);
    // Reopened: nothing of the chunk is cached.
    let vol = support::open(dir.path());
    // While paused, read the damaged chunk on another thread: with no
    // copy the read fails, and it must fail at once, not wait for the
    // collection (whose pause a read in flight would hold).
    let outcome = Arc::new(Mutex::new(None));
    let hook: Box<dyn FnOnce() + Send> = {
        let (content, outcome) = (vol.content().unwrap(), outcome.clone());
        let path = f00.clone();
        Box::new(move || {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let f = std::fs::File::open(&path).unwrap();
                let mut buf = vec![0u8; (end - start) as usize];
                let read = content.read_at(support::ino(&path), &f, start, &mut buf);
                let _ = tx.send(read.is_err());
            });
            *outcome.lock().unwrap() = Some(rx.recv_timeout(Duration::from_secs(20)).ok());
        })
    };
    let (fake, pacer) = busy_from(2, 3, Some(hook));
    let report = gc(
        &vol,
        &GcOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.cancelled, None);
    assert_paused_once(&pacer, &fake, 3);
    let outcome = outcome.lock().unwrap().take();
    assert_eq!(
        outcome,
        Some(Some(true)),
        "the read while paused: failed at once (Some(true)), or waited (None)"
    );
    read_back(&vol, &intact);
}

#[test]
fn a_gc_cancelled_before_it_starts_does_nothing_and_one_cancelled_during_the_collection_finishes_it(
) {
    let dir = tempfile::tempdir().unwrap();
    let (vol, tree) = optimized_then_pairs_deleted(dir.path());
    let tags = |vol: &Volume| {
        let (all, _) = cairn_engine::catalog::list(&**vol.repo().backend()).unwrap();
        let mut t: Vec<String> = all.into_iter().flat_map(|s| s.record.tags).collect();
        t.sort();
        t
    };
    let (tags_before, containers_before) = (tags(&vol), containers(&vol));

    let pacer = tripwire(1);
    let none = gc(
        &vol,
        &GcOptions {
            pacer: Some(pacer),
            ..Default::default()
        },
    )
    .unwrap();
    let why = none.cancelled.clone().expect("cancelled");
    assert!(why.contains("nothing was done"), "{why}");
    assert_eq!(none.roots_snapshot, None);
    assert_eq!(none.snapshots_forgotten, 0);
    assert_eq!(tags(&vol), tags_before);
    assert_eq!(containers(&vol), containers_before);
    read_back(&vol, &tree);

    // Cancelled at the collector's first unit: the collection finishes,
    // unpaced from there.
    let pacer = tripwire(2);
    let finished = gc(
        &vol,
        &GcOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let why = finished.cancelled.clone().expect("cancelled");
    assert!(why.contains("finished unpaced"), "{why}");
    assert!(finished.roots_snapshot.is_some(), "{finished:?}");
    assert!(finished.containers_deleted > 0, "{finished:?}");
    assert_eq!(pacer.stats().paces, 2, "no pacing after the cancel");
    assert!(tags(&vol).contains(&ROOTS_TAG.to_string()));
    read_back(&vol, &tree);
    drop(vol);
    read_back(&support::open(dir.path()), &tree);
}

#[test]
fn a_paced_snapshot_pauses_and_a_cancelled_one_is_still_whole() {
    // Paced: busy from its second file.
    let dir = tempfile::tempdir().unwrap();
    let (vol, _) = optimized(dir.path());
    let (fake, pacer) = busy_from(2, 4, None);
    let report = snapshot(
        &vol,
        &SnapshotOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.cancelled, None);
    assert_eq!(report.files_by_stream_map as usize, FILES, "{report:?}");
    assert!(pacer.stats().paces >= FILES as u64, "{:?}", pacer.stats());
    assert_paused_once(&pacer, &fake, 4);

    // Cancelled at its second file: every file is still in it.
    let dir = tempfile::tempdir().unwrap();
    let (vol, _) = optimized(dir.path());
    let pacer = tripwire(2);
    let report = snapshot(
        &vol,
        &SnapshotOptions {
            pacer: Some(pacer.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let why = report.cancelled.clone().expect("cancelled");
    assert!(why.contains("finished unpaced"), "{why}");
    assert_eq!(report.files_by_stream_map as usize, FILES, "{report:?}");
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(pacer.stats().paces, 2, "no pacing after the cancel");
    let (all, _) = cairn_engine::catalog::list(&**vol.repo().backend()).unwrap();
    assert!(all.iter().any(|s| s.id == report.snapshot));
}
