//! The device model: modeled (not measured) time per stage of the dedup path.
//!
//! Every access is charged `latency + bytes / bandwidth` on the device class
//! of its stage ([`DeviceClass::seconds`]). Because that formula is linear,
//! the model only accumulates, per stage, the number of accesses and of bytes
//! (two relaxed atomics each; thread-safe and order-independent) and turns them
//! into seconds when asked ([`DeviceModel::report`]).
//!
//! The stages follow the decomposition of `000_d04706aa48332137.txt` §3.2 and
//! eq. (2): Bloom filter, cache lookup and external-storage ("disk") lookup,
//! where cairn's disk part is the on-disk index page read plus the container
//! metadata prefetch (DDFS-style eager lookup, `000` §2.2). Container reads and
//! writes and other objects are kept apart so lookup time stays comparable
//! with the paper's Table 4.
//!
//! In-memory stages are charged at the memory class (DRAM, 0.13 µs per access,
//! `000` Table 1) from the engine's counters:
//!
//! * [`Stage::Bloom`]: `bloom_accesses` per Summary Vector operation, tests
//!   (`lookups - cache_hits`: cairn probes the locality cache first, DDFS §4.4)
//!   plus inserts (chunks decided new, `lookups - cache_hits - index_hits`).
//! * [`Stage::CacheLookup`]: `cache_accesses` per locality-cache probe, one per
//!   lookup (`lookups`).
//!
//! Accesses charged explicitly ([`DeviceModel::charge`]) to any stage, memory
//! stages included, add to these.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use cairn_core::CountersSnapshot;
use serde::{Deserialize, Serialize};

use super::class::DeviceClass;

/// Where modeled time goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// One on-disk index page (`read_at` on `index/*`).
    IndexPageRead,
    /// Container metadata (tail) reads: prefetch into the locality cache, replay, check.
    MetadataPrefetch,
    /// Whole-container reads (restore, check --read-data).
    ContainerRead,
    /// Sealed containers written.
    ContainerWrite,
    /// Every other read (index merge reads, Bloom checkpoints, snapshots, config).
    OtherRead,
    /// Every other write (index files, Bloom checkpoints, snapshots, config).
    OtherWrite,
    /// Summary Vector (Bloom filter) tests and inserts, in memory.
    Bloom,
    /// Locality-cache probes, in memory (eager's cache step, lazy's pre-lookup).
    CacheLookup,
    /// Lazy lookup's post-lookup: locality-ring walks and second cache probes.
    PostLookup,
}

/// Number of stages.
pub const STAGES: usize = 9;

impl Stage {
    /// Every stage, in report order.
    pub const ALL: [Stage; STAGES] = [
        Stage::IndexPageRead,
        Stage::MetadataPrefetch,
        Stage::ContainerRead,
        Stage::ContainerWrite,
        Stage::OtherRead,
        Stage::OtherWrite,
        Stage::Bloom,
        Stage::CacheLookup,
        Stage::PostLookup,
    ];

    /// Position in [`Stage::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Charged at the memory class rather than the storage class by default.
    pub const fn is_memory(self) -> bool {
        matches!(self, Stage::Bloom | Stage::CacheLookup | Stage::PostLookup)
    }

    /// snake_case name, as in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::IndexPageRead => "index_page_read",
            Stage::MetadataPrefetch => "metadata_prefetch",
            Stage::ContainerRead => "container_read",
            Stage::ContainerWrite => "container_write",
            Stage::OtherRead => "other_read",
            Stage::OtherWrite => "other_write",
            Stage::Bloom => "bloom",
            Stage::CacheLookup => "cache_lookup",
            Stage::PostLookup => "post_lookup",
        }
    }
}

/// What the model charges where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceConfig {
    /// Device of every I/O stage without an override.
    pub storage: DeviceClass,
    /// Device of the in-memory stages (Bloom, CacheLookup) without an override.
    pub memory: DeviceClass,
    /// Per-stage overrides (e.g. the index on SSD, containers on HDD).
    #[serde(default)]
    pub stage_devices: BTreeMap<Stage, DeviceClass>,
    /// Memory accesses per Summary Vector test or insert. Default 1: cairn's
    /// Summary Vector (fastbloom) spreads a key's `k` bits over the whole
    /// filter, but their addresses are known at once and the accesses are
    /// independent, so the CPU overlaps the misses (docs/device-model.md).
    /// Use `k` to charge each bit as a miss of its own, 0 to leave the Bloom
    /// stage to explicit charges only.
    pub bloom_accesses: u32,
    /// Memory accesses per locality-cache probe and per locality-ring entry
    /// walked (default 1; 0: explicit charges only).
    pub cache_accesses: u32,
}

impl DeviceConfig {
    /// All I/O on `storage`, memory on DRAM, one access per Bloom operation and cache probe.
    pub fn new(storage: DeviceClass) -> Self {
        DeviceConfig {
            storage,
            memory: DeviceClass::dram(),
            stage_devices: BTreeMap::new(),
            bloom_accesses: 1,
            cache_accesses: 1,
        }
    }

    /// Puts `stage` on `device`.
    pub fn with_stage_device(mut self, stage: Stage, device: DeviceClass) -> Self {
        self.stage_devices.insert(stage, device);
        self
    }

    /// The device `stage` is charged on.
    pub fn device(&self, stage: Stage) -> &DeviceClass {
        match self.stage_devices.get(&stage) {
            Some(d) => d,
            None if stage.is_memory() => &self.memory,
            None => &self.storage,
        }
    }
}

/// Accesses and bytes charged per stage; a copyable snapshot of a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoUsage {
    /// Accesses per stage, indexed by [`Stage::index`].
    pub accesses: [u64; STAGES],
    /// Bytes per stage, indexed by [`Stage::index`].
    pub bytes: [u64; STAGES],
}

impl IoUsage {
    pub fn accesses(&self, stage: Stage) -> u64 {
        self.accesses[stage.index()]
    }

    pub fn bytes(&self, stage: Stage) -> u64 {
        self.bytes[stage.index()]
    }

    /// Field-wise `self + other`: two runs' usage together.
    pub fn plus(&self, other: &IoUsage) -> IoUsage {
        let mut s = *self;
        for i in 0..STAGES {
            s.accesses[i] += other.accesses[i];
            s.bytes[i] += other.bytes[i];
        }
        s
    }

    /// Field-wise `self - earlier`, for per-run deltas.
    pub fn since(&self, earlier: &IoUsage) -> IoUsage {
        let mut d = *self;
        for i in 0..STAGES {
            d.accesses[i] = self.accesses[i].saturating_sub(earlier.accesses[i]);
            d.bytes[i] = self.bytes[i].saturating_sub(earlier.bytes[i]);
        }
        d
    }
}

/// Modeled seconds per stage. Keys are snake_case in JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageTimes {
    /// Name of the storage device class.
    pub storage_device: String,
    /// Name of the memory device class.
    pub memory_device: String,
    pub bloom_seconds: f64,
    pub cache_seconds: f64,
    /// Lazy lookup's post-lookup (`000` eq. (4), `T_post-lookup^cache`).
    pub post_lookup_seconds: f64,
    pub index_page_read_seconds: f64,
    pub prefetch_seconds: f64,
    pub container_read_seconds: f64,
    pub container_write_seconds: f64,
    pub other_read_seconds: f64,
    pub other_write_seconds: f64,
    /// Fingerprint lookup, `000` eq. (2) / (4): bloom + cache (pre-lookup) +
    /// post-lookup + index page reads + prefetch.
    pub lookup_seconds: f64,
    /// Every stage.
    pub total_seconds: f64,
}

impl StageTimes {
    /// Seconds of one stage.
    pub fn get(&self, stage: Stage) -> f64 {
        match stage {
            Stage::IndexPageRead => self.index_page_read_seconds,
            Stage::MetadataPrefetch => self.prefetch_seconds,
            Stage::ContainerRead => self.container_read_seconds,
            Stage::ContainerWrite => self.container_write_seconds,
            Stage::OtherRead => self.other_read_seconds,
            Stage::OtherWrite => self.other_write_seconds,
            Stage::Bloom => self.bloom_seconds,
            Stage::CacheLookup => self.cache_seconds,
            Stage::PostLookup => self.post_lookup_seconds,
        }
    }

    fn slot(&mut self, stage: Stage) -> &mut f64 {
        match stage {
            Stage::IndexPageRead => &mut self.index_page_read_seconds,
            Stage::MetadataPrefetch => &mut self.prefetch_seconds,
            Stage::ContainerRead => &mut self.container_read_seconds,
            Stage::ContainerWrite => &mut self.container_write_seconds,
            Stage::OtherRead => &mut self.other_read_seconds,
            Stage::OtherWrite => &mut self.other_write_seconds,
            Stage::Bloom => &mut self.bloom_seconds,
            Stage::CacheLookup => &mut self.cache_seconds,
            Stage::PostLookup => &mut self.post_lookup_seconds,
        }
    }
}

#[derive(Debug)]
struct Inner {
    config: DeviceConfig,
    accesses: [AtomicU64; STAGES],
    bytes: [AtomicU64; STAGES],
}

/// Accumulates modeled I/O per stage. Clones share one set of accumulators
/// (like `MemBackend` clones share one store), so one model can be handed to
/// several wrappers and threads.
#[derive(Clone, Debug)]
pub struct DeviceModel {
    inner: Arc<Inner>,
}

impl DeviceModel {
    pub fn new(config: DeviceConfig) -> Self {
        DeviceModel {
            inner: Arc::new(Inner {
                config,
                accesses: Default::default(),
                bytes: Default::default(),
            }),
        }
    }

    /// All I/O on `storage`, defaults otherwise ([`DeviceConfig::new`]).
    pub fn for_device(storage: DeviceClass) -> Self {
        Self::new(DeviceConfig::new(storage))
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.inner.config
    }

    /// Charges one access of `bytes` bytes to `stage`.
    pub fn charge(&self, stage: Stage, bytes: u64) {
        self.charge_many(stage, 1, bytes);
    }

    /// Charges `accesses` accesses moving `bytes` bytes in total to `stage`.
    pub fn charge_many(&self, stage: Stage, accesses: u64, bytes: u64) {
        let i = stage.index();
        self.inner.accesses[i].fetch_add(accesses, Relaxed);
        self.inner.bytes[i].fetch_add(bytes, Relaxed);
    }

    /// What has been charged explicitly so far (not the counter-derived accesses).
    pub fn usage(&self) -> IoUsage {
        let mut u = IoUsage::default();
        for i in 0..STAGES {
            u.accesses[i] = self.inner.accesses[i].load(Relaxed);
            u.bytes[i] = self.inner.bytes[i].load(Relaxed);
        }
        u
    }

    /// Zeroes the accumulators.
    pub fn reset(&self) {
        for i in 0..STAGES {
            self.inner.accesses[i].store(0, Relaxed);
            self.inner.bytes[i].store(0, Relaxed);
        }
    }

    /// In-memory accesses derived from the engine's counters: `(bloom,
    /// cache, post_lookup)`.
    ///
    /// Bloom: `bloom_accesses * (bloom_tests + bloom_inserts)`.
    /// Cache: `cache_accesses * cache_probes`.
    /// Post-lookup: `cache_accesses * (post_lookup_visits + post_lookup_probes)`:
    /// every ring entry walked and every second probe, `000` eq. (5)'s
    /// `F_cache^post-lookup`.
    pub fn memory_accesses(&self, counters: &CountersSnapshot) -> (u64, u64, u64) {
        let c = &self.inner.config;
        let bloom = u64::from(c.bloom_accesses) * (counters.bloom_tests + counters.bloom_inserts);
        let cache = u64::from(c.cache_accesses) * counters.cache_probes;
        let post = u64::from(c.cache_accesses)
            * (counters.post_lookup_visits + counters.post_lookup_probes);
        (bloom, cache, post)
    }

    /// Modeled seconds of everything charged so far plus the in-memory
    /// stages derived from `counters`.
    pub fn report(&self, counters: &CountersSnapshot) -> StageTimes {
        self.times(&self.usage(), counters)
    }

    /// Modeled seconds of `usage` (e.g. a delta from [`IoUsage::since`]) plus
    /// the in-memory stages derived from `counters` (e.g. a
    /// [`CountersSnapshot::since`] delta of the same run).
    pub fn times(&self, usage: &IoUsage, counters: &CountersSnapshot) -> StageTimes {
        let c = &self.inner.config;
        let (bloom, cache, post) = self.memory_accesses(counters);
        let mut t = StageTimes {
            storage_device: c.storage.name.clone(),
            memory_device: c.memory.name.clone(),
            ..StageTimes::default()
        };
        for stage in Stage::ALL {
            let extra = match stage {
                Stage::Bloom => bloom,
                Stage::CacheLookup => cache,
                Stage::PostLookup => post,
                _ => 0,
            };
            let secs = c
                .device(stage)
                .seconds(usage.accesses(stage) + extra, usage.bytes(stage));
            *t.slot(stage) = secs;
        }
        t.lookup_seconds = t.bloom_seconds
            + t.cache_seconds
            + t.post_lookup_seconds
            + t.index_page_read_seconds
            + t.prefetch_seconds;
        t.total_seconds = Stage::ALL.iter().map(|&s| t.get(s)).sum();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn stage_table() {
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::Value::from(s.name())
            );
        }
        assert!(Stage::Bloom.is_memory() && Stage::CacheLookup.is_memory());
        assert!(Stage::PostLookup.is_memory());
        assert!(!Stage::IndexPageRead.is_memory() && !Stage::OtherWrite.is_memory());
    }

    #[test]
    fn io_stage_arithmetic() {
        let m = DeviceModel::for_device(DeviceClass::hdd());
        // 3 index pages of 4096 B: 3 * 11494 us + 12288 B / 150 MB/s.
        m.charge_many(Stage::IndexPageRead, 3, 3 * 4096);
        // 2 tail reads of 64 KiB.
        m.charge(Stage::MetadataPrefetch, 65536);
        m.charge(Stage::MetadataPrefetch, 65536);
        // One 4 MiB container written, one read.
        m.charge(Stage::ContainerWrite, 4 << 20);
        m.charge(Stage::ContainerRead, 4 << 20);
        m.charge(Stage::OtherRead, 0);
        m.charge(Stage::OtherWrite, 150);
        let t = m.report(&CountersSnapshot::default());
        assert!(close(t.index_page_read_seconds, 0.034482 + 0.00008192));
        assert!(close(t.prefetch_seconds, 0.022988 + 131072.0 / 150e6));
        assert!(close(
            t.container_write_seconds,
            0.011494 + 4194304.0 / 150e6
        ));
        assert!(close(t.container_read_seconds, t.container_write_seconds));
        assert!(close(t.other_read_seconds, 0.011494));
        assert!(close(t.other_write_seconds, 0.011494 + 0.000001));
        assert_eq!((t.bloom_seconds, t.cache_seconds), (0.0, 0.0));
        assert!(close(
            t.lookup_seconds,
            t.index_page_read_seconds + t.prefetch_seconds
        ));
        let sum: f64 = Stage::ALL.iter().map(|&s| t.get(s)).sum();
        assert!(close(t.total_seconds, sum));
        assert_eq!(
            (t.storage_device.as_str(), t.memory_device.as_str()),
            ("HDD", "DRAM")
        );
    }

    #[test]
    fn memory_stages_from_counters() {
        let m = DeviceModel::for_device(DeviceClass::optane());
        let c = CountersSnapshot {
            lookups: 1000,
            cache_hits: 600,
            index_hits: 300,
            bloom_negatives: 80,
            bloom_false_positives: 20,
            bloom_tests: 400,
            bloom_inserts: 100,
            cache_probes: 1000,
            post_lookup_visits: 150,
            post_lookup_probes: 50,
            ..Default::default()
        };
        // Bloom: tests 400 + inserts 100 = 500 accesses at 0.13 us = 65 us.
        // Cache: 1000 probes at 0.13 us = 130 us. Post-lookup: 200 = 26 us.
        assert_eq!(m.memory_accesses(&c), (500, 1000, 200));
        let t = m.report(&c);
        assert!(close(t.bloom_seconds, 65e-6), "{}", t.bloom_seconds);
        assert!(close(t.cache_seconds, 130e-6), "{}", t.cache_seconds);
        assert!(close(t.post_lookup_seconds, 26e-6));
        assert!(close(t.lookup_seconds, 221e-6));
        assert!(close(t.total_seconds, 221e-6));

        // k = 7 accesses per Bloom operation, no cache charging, plus an
        // explicit charge of 10 post-lookup cache accesses.
        let cfg = DeviceConfig {
            bloom_accesses: 7,
            cache_accesses: 0,
            ..DeviceConfig::new(DeviceClass::optane())
        };
        let m = DeviceModel::new(cfg);
        m.charge_many(Stage::CacheLookup, 10, 0);
        assert_eq!(m.memory_accesses(&c), (3500, 0, 0));
        let t = m.report(&c);
        assert!(close(t.bloom_seconds, 3500.0 * 0.13e-6));
        assert!(close(t.cache_seconds, 1.3e-6));
    }

    #[test]
    fn stage_device_overrides() {
        // Index on SSD, containers (and everything else) on HDD, memory on PM.
        let cfg = DeviceConfig {
            memory: DeviceClass::pm(),
            ..DeviceConfig::new(DeviceClass::hdd())
        }
        .with_stage_device(Stage::IndexPageRead, DeviceClass::ssd());
        assert_eq!(cfg.device(Stage::IndexPageRead).name, "SSD");
        assert_eq!(cfg.device(Stage::ContainerRead).name, "HDD");
        assert_eq!(cfg.device(Stage::Bloom).name, "PM");
        let m = DeviceModel::new(cfg);
        m.charge(Stage::IndexPageRead, 0);
        m.charge(Stage::ContainerRead, 0);
        let c = CountersSnapshot {
            lookups: 10,
            bloom_tests: 10,
            bloom_inserts: 10,
            cache_probes: 10,
            ..Default::default()
        };
        let t = m.report(&c);
        assert!(close(t.index_page_read_seconds, 141e-6));
        assert!(close(t.container_read_seconds, 11494e-6));
        // 10 tests + 10 inserts at 0.8 us; 10 probes at 0.8 us.
        assert!(close(t.bloom_seconds, 16e-6));
        assert!(close(t.cache_seconds, 8e-6));
    }

    #[test]
    fn usage_deltas_and_reset() {
        let m = DeviceModel::for_device(DeviceClass::ssd());
        let shared = m.clone();
        m.charge(Stage::ContainerWrite, 100);
        let before = m.usage();
        shared.charge(Stage::ContainerWrite, 50);
        shared.charge(Stage::OtherRead, 7);
        let d = m.usage().since(&before);
        assert_eq!(
            (
                d.accesses(Stage::ContainerWrite),
                d.bytes(Stage::ContainerWrite)
            ),
            (1, 50)
        );
        assert_eq!(
            (d.accesses(Stage::OtherRead), d.bytes(Stage::OtherRead)),
            (1, 7)
        );
        let t = m.times(&d, &CountersSnapshot::default());
        assert!(close(t.container_write_seconds, 141e-6 + 50.0 / 500e6));
        m.reset();
        assert_eq!(shared.usage(), IoUsage::default());
        assert_eq!(m.report(&CountersSnapshot::default()).total_seconds, 0.0);
    }

    #[test]
    fn json_keys() {
        let m = DeviceModel::for_device(DeviceClass::pm());
        let v = serde_json::to_value(m.report(&CountersSnapshot::default())).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        for k in [
            "storage_device",
            "memory_device",
            "bloom_seconds",
            "cache_seconds",
            "post_lookup_seconds",
            "index_page_read_seconds",
            "prefetch_seconds",
            "container_read_seconds",
            "container_write_seconds",
            "other_read_seconds",
            "other_write_seconds",
            "lookup_seconds",
            "total_seconds",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        assert_eq!(keys.len(), 13);
        let back: StageTimes = serde_json::from_value(v).unwrap();
        assert_eq!(back.storage_device, "PM");
        // Configs round-trip, overrides included.
        let cfg = DeviceConfig::new(DeviceClass::hdd())
            .with_stage_device(Stage::IndexPageRead, DeviceClass::ssd());
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(json.contains("\"index_page_read\""), "{json}");
        assert_eq!(serde_json::from_str::<DeviceConfig>(&json).unwrap(), cfg);
    }
}
