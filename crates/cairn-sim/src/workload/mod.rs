//! Synthetic workloads: deterministic sequences of backup generations.
//!
//! A [`Workload`] is a sequence of generations; each generation is a
//! [`TraceSource`] (one backup's input, pre-chunked). Two generators:
//!
//! * [`DdfsGenerations`] ("ddfs"): the synthetic backup streams of DDFS
//!   (`001_3652cceaf162c5a1.txt` §5.3): each generation a modified copy of the
//!   previous one (runs reordered, deleted, new data inserted), sized to a
//!   target per-generation dedup ratio and local compression ratio.
//! * [`LineageGenerations`] ("lineage"): the GC paper's load generator
//!   (`003_ea5fccc485a97c5d.txt` §4.2): file lineages, each new file carrying
//!   much of its lineage's previous version, nothing shared across lineages,
//!   old versions deleted.
//!
//! Everything derives from a `u64` seed; generation `g` is recomputed on its
//! own from the seed (earlier generations' edits are replayed as run lists,
//! never as chunk lists, so memory stays proportional to one generation).
//! [`write_generation_bytes`] turns a generation into real files with the same
//! duplicate structure. `docs/workloads.md` documents every parameter.

mod bytes;
mod ddfs;
mod lineage;
mod model;
mod params;
mod rng;
mod source;

#[cfg(test)]
mod tests;

pub use bytes::{
    chunk_content, write_generation_bytes, write_trace_bytes, WrittenStats, CONTENT_BLOCK,
};
pub use ddfs::{DdfsGenerations, DdfsParams};
pub use lineage::{FileSizeDist, LineageGenerations, LineageParams, Listing};
pub use params::parse_bytes;
pub use rng::SplitMix64;

use cairn_core::{Error, Result, TraceSource};

/// A deterministic sequence of backup generations.
pub trait Workload: Send + Sync {
    /// Number of generations.
    fn generations(&self) -> usize;

    /// Generation `g` (`g < generations()`, else panics), recomputed from the
    /// seed: calling it twice yields identical event streams.
    fn generation(&self, g: usize) -> Box<dyn TraceSource>;

    /// The generator's name as [`from_name`] accepts it.
    fn name(&self) -> &str;

    /// Generations whose data is deleted once generation `g` is written
    /// (lineage: `g - retain`); empty for workloads that never delete.
    fn deleted_after(&self, g: usize) -> Vec<usize> {
        let _ = g;
        Vec::new()
    }
}

/// The workload names [`from_name`] accepts.
pub const WORKLOADS: &[&str] = &WorkloadKind::NAMES;

/// The synthetic workload generators, as `sim --workload` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    Ddfs,
    Lineage,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 2] = [WorkloadKind::Ddfs, WorkloadKind::Lineage];
    /// The names [`std::str::FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 2] = ["ddfs", "lineage"];

    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ddfs => "ddfs",
            WorkloadKind::Lineage => "lineage",
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WorkloadKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown workload {s:?} (accepted: {})",
                    WORKLOADS.join(", ")
                ))
            })
    }
}

/// Builds a workload by name from `key=value` parameters (unset keys keep
/// their defaults; a later duplicate key wins). Unknown names, unknown keys
/// and out-of-range values are [`Error::InvalidInput`] listing what is
/// accepted.
pub fn from_name(name: &str, params: &[(String, String)]) -> Result<Box<dyn Workload>> {
    from_kind(name.parse()?, params)
}

/// [`from_name`] for a workload already named.
pub fn from_kind(kind: WorkloadKind, params: &[(String, String)]) -> Result<Box<dyn Workload>> {
    match kind {
        WorkloadKind::Ddfs => {
            let mut p = DdfsParams::default();
            for (k, v) in params {
                p.set(k, v)?;
            }
            Ok(Box::new(DdfsGenerations::new(p)?))
        }
        WorkloadKind::Lineage => {
            let mut p = LineageParams::default();
            for (k, v) in params {
                p.set(k, v)?;
            }
            Ok(Box::new(LineageGenerations::new(p)?))
        }
    }
}
