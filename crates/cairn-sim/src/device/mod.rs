//! The device model: what the same dedup run would cost on HDD, SSD, Optane
//! SSD, persistent memory, without owning those devices.
//!
//! cairn runs the real engine on whatever storage is at hand (usually a
//! `MemBackend`) and *models* the time each access would take on a chosen
//! device, following He et al., "Fingerprint Search Optimization for
//! Deduplication on Emerging Storage Devices" (`000_d04706aa48332137.txt`):
//!
//! * [`class`]: device classes. Access latencies are `000` Table 1 (§3.1);
//!   sequential bandwidths are cairn's assumptions. Custom classes from TOML.
//! * [`model`]: [`DeviceModel`] charges `latency + bytes / bandwidth` per
//!   access, per [`Stage`] (the Bloom / cache / disk decomposition of `000`
//!   §3.2 and eq. (2), plus container and other I/O), and reports
//!   [`StageTimes`]; in-memory stages come from the engine's counters.
//! * [`backend`]: [`DeviceBackend`], a pass-through `Backend` that classifies
//!   each call by key and method and charges the model; it never sleeps.
//! * [`store`]: [`DeviceStore`], the same for a `ContainerStore`, charging
//!   logical container sizes (for the simulator's metadata-only store).
//! * [`analytic`]: the eager-vs-lazy cost model, `000` §4.1 eqs. (1)-(8).
//!
//! Charging rules, stage classification and the equations are written up in
//! `docs/device-model.md`.

pub mod analytic;
pub mod backend;
pub mod class;
pub mod model;
pub mod store;

#[cfg(test)]
mod tests;

pub use analytic::{Choice, EagerCost, EagerParams, LazyCost, LazyParams};
pub use backend::{classify, DeviceBackend, DeviceCharger, IoOp};
pub use class::{find_class, load_classes, parse_classes, DeviceClass, TABLE1_LATENCY_US};
pub use model::{DeviceConfig, DeviceModel, IoUsage, Stage, StageTimes};
pub use store::DeviceStore;
