//! [`DeviceBackend`]: a pass-through [`Backend`](cairn_core::Backend) that
//! charges every data access to a [`DeviceModel`] stage, by key prefix and
//! method (an [`ObservedBackend`] whose observer is a [`DeviceCharger`]).
//!
//! | call | key | stage |
//! | --- | --- | --- |
//! | `read_at` | `index/*` | [`Stage::IndexPageRead`] |
//! | `read_tail` | `containers/*` | [`Stage::MetadataPrefetch`] |
//! | `read` | `containers/*` | [`Stage::ContainerRead`] |
//! | `write_atomic` | `containers/*` | [`Stage::ContainerWrite`] |
//! | any other read | any | [`Stage::OtherRead`] |
//! | any other write | any | [`Stage::OtherWrite`] |
//!
//! One successful call is one access: `latency + bytes / bandwidth`, bytes
//! being those returned (reads) or written. Failed calls, `size`, `exists`,
//! `list`, `delete`, locks and `clean_temporaries` are forwarded uncharged.
//! Nothing sleeps: modeled time is accounted, wall time stays the real one.
//!
//! A simulator that stores containers without their payload can take a stage
//! out of automatic charging ([`DeviceCharger::with_manual`]) and charge the
//! logical sizes itself ([`DeviceCharger::charge`], through `observer()`).
//!
//! The key prefixes are those of `cairn-engine/src/object_names.rs`. The split into
//! index page reads and metadata prefetches is the disk part of the eager
//! fingerprint lookup of `000_d04706aa48332137.txt` §2.2 (eq. (3),
//! `V_disk x F_disk`).

use cairn_backend::{IoObserver, ObservedBackend};

use super::model::{DeviceModel, Stage, STAGES};

pub use cairn_backend::IoOp;

/// Container objects (`cairn-engine` `object_names::CONTAINERS`).
pub const CONTAINERS_PREFIX: &str = "containers/";
/// On-disk index generations (`cairn-engine` `object_names::INDEX`).
pub const INDEX_PREFIX: &str = "index/";

/// The stage a call of `op` on `key` is charged to.
pub fn classify(op: IoOp, key: &str) -> Stage {
    let container = key.starts_with(CONTAINERS_PREFIX);
    match op {
        IoOp::ReadAt if key.starts_with(INDEX_PREFIX) => Stage::IndexPageRead,
        IoOp::ReadTail if container => Stage::MetadataPrefetch,
        IoOp::Read if container => Stage::ContainerRead,
        IoOp::Write if container => Stage::ContainerWrite,
        IoOp::Write => Stage::OtherWrite,
        IoOp::Read | IoOp::ReadAt | IoOp::ReadTail => Stage::OtherRead,
        // A sequential pass (an index merge's old file) is read as the
        // whole file was before runs: not page lookups.
        IoOp::ReadRun | IoOp::ReadRunContinued => Stage::OtherRead,
    }
}

/// Wraps a backend and charges its data accesses to a device model:
/// `DeviceBackend::new(inner, model)`, or `DeviceBackend::new(inner,
/// DeviceCharger::from(model).with_manual(..))`.
pub type DeviceBackend<B> = ObservedBackend<B, DeviceCharger>;

/// The [`IoObserver`] of a [`DeviceBackend`]: charges each access to the
/// stage [`classify`] names, unless that stage is left to explicit charges.
#[derive(Debug)]
pub struct DeviceCharger {
    model: DeviceModel,
    manual: [bool; STAGES],
}

impl From<DeviceModel> for DeviceCharger {
    /// Charges every stage automatically.
    fn from(model: DeviceModel) -> Self {
        DeviceCharger {
            model,
            manual: [false; STAGES],
        }
    }
}

impl DeviceCharger {
    /// Leaves `stages` to explicit [`charge`](Self::charge) calls: calls
    /// classified into them are forwarded but not charged.
    pub fn with_manual(mut self, stages: &[Stage]) -> Self {
        for s in stages {
            self.manual[s.index()] = true;
        }
        self
    }

    /// Whether `stage` is left to explicit charges.
    pub fn is_manual(&self, stage: Stage) -> bool {
        self.manual[stage.index()]
    }

    /// Charges one access of `bytes` (logical) bytes to `stage`, for I/O the
    /// caller models but does not perform. Charges manual stages too.
    pub fn charge(&self, stage: Stage, bytes: u64) {
        self.model.charge(stage, bytes);
    }

    pub fn model(&self) -> &DeviceModel {
        &self.model
    }
}

impl IoObserver for DeviceCharger {
    fn observe(&self, op: IoOp, key: &str, bytes: usize) {
        let stage = classify(op, key);
        if !self.manual[stage.index()] {
            // A pass's later runs follow the first without a new access:
            // a pass costs what one read of its bytes costs.
            let accesses = u64::from(op != IoOp::ReadRunContinued);
            self.model.charge_many(stage, accesses, bytes as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::class::DeviceClass;
    use cairn_backend::MemBackend;
    use cairn_core::{Backend, LockMode};
    use std::sync::Arc;

    const C: &str = "containers/01/0000000000000001";
    const I: &str = "index/0000000000000002";

    #[test]
    fn classification() {
        use IoOp::*;
        use Stage::*;
        let cases = [
            (ReadAt, I, IndexPageRead),
            (ReadTail, C, MetadataPrefetch),
            (Read, C, ContainerRead),
            (Write, C, ContainerWrite),
            // Everything else.
            (Read, I, OtherRead),
            (ReadTail, I, OtherRead),
            (Write, I, OtherWrite),
            (ReadAt, C, OtherRead),
            (Read, "bloom/0000000000000002", OtherRead),
            (Write, "bloom/0000000000000002", OtherWrite),
            (Read, "snapshots/abcd", OtherRead),
            (Write, "snapshots/abcd", OtherWrite),
            (Read, "config", OtherRead),
            (Write, "config", OtherWrite),
            (ReadAt, "config", OtherRead),
            // Prefixes are whole directory names.
            (ReadAt, "indexes/x", OtherRead),
            (Read, "containersx/1", OtherRead),
        ];
        for (op, key, want) in cases {
            assert_eq!(classify(op, key), want, "{op:?} {key}");
        }
    }

    #[test]
    fn charges_each_method() {
        let model = DeviceModel::for_device(DeviceClass::ssd());
        let b = DeviceBackend::new(MemBackend::new(), model.clone());
        b.write_atomic(C, &[1; 1000]).unwrap();
        b.write_atomic(I, &[2; 300]).unwrap();
        b.write_atomic("config", b"cfg").unwrap();
        b.read(C).unwrap();
        b.read_tail(C, 100).unwrap();
        b.read_tail(C, 5000).unwrap(); // capped at the size: 1000 bytes
        b.read_at(I, 10, 20).unwrap();
        b.read_at(I, 0, 30).unwrap();
        b.read(I).unwrap();
        b.read("config").unwrap();
        // Uncharged: metadata calls, deletes, locks, failures.
        b.size(C).unwrap();
        b.exists(C).unwrap();
        b.list("").unwrap();
        drop(b.lock("write", LockMode::Exclusive, false).unwrap());
        assert!(b.read("containers/00/missing").is_err());
        assert!(b.read_at(I, 290, 20).is_err());
        b.delete("config").unwrap();
        let u = model.usage();
        let got = |s: Stage| (u.accesses(s), u.bytes(s));
        assert_eq!(got(Stage::ContainerWrite), (1, 1000));
        assert_eq!(got(Stage::OtherWrite), (2, 303));
        assert_eq!(got(Stage::ContainerRead), (1, 1000));
        assert_eq!(got(Stage::MetadataPrefetch), (2, 1100));
        assert_eq!(got(Stage::IndexPageRead), (2, 50));
        assert_eq!(got(Stage::OtherRead), (2, 303));
        assert_eq!(got(Stage::Bloom), (0, 0));
        // SSD: index pages = 2 * 141 us + 50 B / 500 MB/s.
        let t = model.report(&Default::default());
        let want = 282e-6 + 50.0 / 500e6;
        assert!((t.index_page_read_seconds - want).abs() < 1e-15);
        assert_eq!(b.describe(), "memory");
    }

    /// A sequential pass read in runs (an index merge's old file) costs
    /// what one whole read of it costs: one access, every byte, and not
    /// under index page reads; a streamed create is one write.
    #[test]
    fn a_pass_in_runs_and_a_streamed_create_charge_as_whole_objects() {
        let model = DeviceModel::for_device(DeviceClass::hdd());
        let b = DeviceBackend::new(MemBackend::new(), model.clone());
        let mut w = cairn_core::create_streamed(&b, I).unwrap();
        for _ in 0..3 {
            w.append(&[3; 1000]).unwrap();
        }
        assert!(w.create().unwrap());
        let mut run = Vec::new();
        for offset in [0, 1000, 2000] {
            b.read_run(I, offset, 1000, &mut run).unwrap();
        }
        let u = model.usage();
        let got = |s: Stage| (u.accesses(s), u.bytes(s));
        assert_eq!(got(Stage::OtherRead), (1, 3000));
        assert_eq!(got(Stage::IndexPageRead), (0, 0));
        assert_eq!(got(Stage::OtherWrite), (1, 3000));
    }

    #[test]
    fn manual_stages_and_logical_sizes() {
        let model = DeviceModel::for_device(DeviceClass::hdd());
        let b = DeviceBackend::new(
            MemBackend::new(),
            DeviceCharger::from(model.clone())
                .with_manual(&[Stage::ContainerWrite, Stage::ContainerRead]),
        );
        let charger = b.observer();
        assert!(
            charger.is_manual(Stage::ContainerWrite) && !charger.is_manual(Stage::IndexPageRead)
        );
        // A metadata-only container: 64 bytes stored, 4 MiB logical.
        b.write_atomic(C, &[0; 64]).unwrap();
        b.observer().charge(Stage::ContainerWrite, 4 << 20);
        b.read(C).unwrap();
        b.read_tail(C, 16).unwrap();
        let u = model.usage();
        assert_eq!(u.accesses(Stage::ContainerWrite), 1);
        assert_eq!(u.bytes(Stage::ContainerWrite), 4 << 20);
        assert_eq!(u.accesses(Stage::ContainerRead), 0);
        assert_eq!(u.bytes(Stage::MetadataPrefetch), 16);
        let inner = b.into_inner();
        assert_eq!(inner.size(C).unwrap(), 64);
    }

    #[test]
    fn conformance() {
        let model = DeviceModel::for_device(DeviceClass::optane());
        cairn_backend::conformance::run_all(&|| {
            Box::new(DeviceBackend::new(MemBackend::new(), model.clone()))
        });
        assert!(model.usage().accesses(Stage::ContainerWrite) > 0);
        // Also through Arc<dyn Backend>, with every stage manual.
        cairn_backend::conformance::run_all(&|| {
            Box::new(DeviceBackend::new(
                Arc::new(MemBackend::new()) as Arc<dyn Backend>,
                DeviceCharger::from(model.clone()).with_manual(&Stage::ALL),
            ))
        });
    }

    #[test]
    fn threads_share_one_model() {
        let model = DeviceModel::for_device(DeviceClass::pm());
        let b = Arc::new(DeviceBackend::new(MemBackend::new(), model.clone()));
        let threads = 8u64;
        let per = 500u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let b = Arc::clone(&b);
                s.spawn(move || {
                    for i in 0..per {
                        let key = format!("containers/{t:02x}/{i:016x}");
                        b.write_atomic(&key, &[t as u8; 10]).unwrap();
                        b.read_tail(&key, 4).unwrap();
                        b.observer().charge(Stage::CacheLookup, 0);
                    }
                });
            }
        });
        let u = model.usage();
        let n = threads * per;
        assert_eq!(u.accesses(Stage::ContainerWrite), n);
        assert_eq!(u.bytes(Stage::ContainerWrite), 10 * n);
        assert_eq!(u.accesses(Stage::MetadataPrefetch), n);
        assert_eq!(u.bytes(Stage::MetadataPrefetch), 4 * n);
        assert_eq!(u.accesses(Stage::CacheLookup), n);
        let t = model.report(&Default::default());
        let want = n as f64 * 0.8e-6 + (10 * n) as f64 / 6000e6;
        assert!((t.container_write_seconds - want).abs() < 1e-12);
    }
}
