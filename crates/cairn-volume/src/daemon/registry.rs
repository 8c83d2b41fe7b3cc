//! The jobs the mount daemon runs, by name: each entry turns a request's
//! options (the request's JSON object without its `request` field) into
//! the job's own options, runs it on the daemon's `Volume`, and returns
//! its report as JSON.
//!
//! Plugging in a job written as `fn(&Volume, &Options) -> Result<Report>`
//! (`Report: Serialize`) is one entry in [`JOBS`]: a function that reads
//! the options it accepts from the JSON object (refusing unknown ones),
//! calls the job, and serializes the report. The job may call the
//! progress sink between units of work; `status` then shows it.

use serde::Deserialize;
use serde_json::Value;

use cairn_core::{Error, Result};

use crate::gc::{gc, GcOptions};
use crate::job_state::ProgressSink;
use crate::optimize::{optimize, OptimizeOptions};
use crate::scrub::{scrub, ScrubOptions};
use crate::snapshot::{snapshot, SnapshotOptions};
use crate::volume::Volume;

/// Runs one job: the volume, the request's options, where to report
/// progress; the report as JSON, or the job's error.
pub type RunJob = fn(&Volume, &Value, ProgressSink<'_>) -> Result<Value>;

/// A job the daemon knows.
#[derive(Clone, Copy)]
pub struct JobSpec {
    /// Its request name, and its name in `status`'s `jobs`.
    pub name: &'static str,
    pub run: RunJob,
}

impl std::fmt::Debug for JobSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every job of the daemon. Any two exclude each other: one runs at a time.
pub const JOBS: &[JobSpec] = &[
    JobSpec {
        name: "optimize",
        run: run_optimize,
    },
    JobSpec {
        name: "gc",
        run: run_gc,
    },
    JobSpec {
        name: "scrub",
        run: run_scrub,
    },
    JobSpec {
        name: "snapshot",
        run: run_snapshot,
    },
];

/// The policy overrides an `optimize` request may carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimizeRequest {
    /// Instead of the volume's minimum age (at least 1).
    pub min_age_secs: Option<u64>,
    /// Instead of the volume's minimum size.
    pub min_size: Option<u64>,
    /// Sessions run in parallel (004's parallel sessions; default one, as
    /// the scheduled runs do).
    pub sessions: Option<usize>,
    /// How several sessions split the files (default: by type).
    #[serde(default)]
    pub partition_by: crate::partitions::PartitionBy,
    /// Instead of `partitions::MIN_PARTITION_BYTES`.
    pub min_partition_bytes: Option<u64>,
}

/// The options of a request, read as `T` (unknown fields refused).
pub fn options<T: for<'de> Deserialize<'de>>(job: &str, args: &Value) -> Result<T> {
    T::deserialize(args).map_err(|e| Error::invalid(format!("{job} request: {e}")))
}

fn run_optimize(vol: &Volume, args: &Value, progress: ProgressSink<'_>) -> Result<Value> {
    let req: OptimizeRequest = options("optimize", args)?;
    let mut policy = vol.config().policy.clone();
    if let Some(age) = req.min_age_secs {
        policy.min_age_secs = age;
    }
    if let Some(size) = req.min_size {
        policy.min_size = size;
    }
    let report = optimize(
        vol,
        &OptimizeOptions {
            policy: Some(policy),
            progress: Some(progress),
            pacer: vol.job_pacer(),
            sessions: req.sessions.unwrap_or(1),
            partition_by: req.partition_by,
            min_partition_bytes: req.min_partition_bytes,
            ..Default::default()
        },
    )?;
    Ok(serde_json::to_value(report).expect("a report serializes"))
}

/// The job named `name`, from `jobs`.
pub fn find<'a>(jobs: &'a [JobSpec], name: &str) -> Option<&'a JobSpec> {
    jobs.iter().find(|j| j.name == name)
}

/// The options a `gc` request may carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcRequest {
    /// The store's collector by name (`lgc`, `pgc`, `pgc+`); default PGC+.
    pub collector: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

fn run_gc(vol: &Volume, args: &Value, _progress: ProgressSink<'_>) -> Result<Value> {
    let req: GcRequest = options("gc", args)?;
    let collector = req.collector.as_deref().map(str::parse).transpose()?;
    let report = gc(
        vol,
        &GcOptions {
            collector,
            dry_run: req.dry_run,
            pacer: vol.job_pacer(),
            ..Default::default()
        },
    )?;
    Ok(serde_json::to_value(report).expect("a report serializes"))
}

/// The options a `scrub` request may carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrubRequest {
    /// Chunks referenced more than this many times are kept twice
    /// (default: `scrub::DEFAULT_COPIES_ABOVE`).
    pub copies_above: Option<u64>,
}

fn run_scrub(vol: &Volume, args: &Value, _progress: ProgressSink<'_>) -> Result<Value> {
    let req: ScrubRequest = options("scrub", args)?;
    let mut opts = ScrubOptions {
        pacer: vol.job_pacer(),
        ..Default::default()
    };
    if let Some(n) = req.copies_above {
        opts.copies_above = n;
    }
    let report = scrub(vol, &opts)?;
    Ok(serde_json::to_value(report).expect("a report serializes"))
}

/// The options a `snapshot` request may carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Tags beside `volume-snapshot`.
    #[serde(default)]
    pub tags: Vec<String>,
}

fn run_snapshot(vol: &Volume, args: &Value, _progress: ProgressSink<'_>) -> Result<Value> {
    let req: SnapshotRequest = options("snapshot", args)?;
    let report = snapshot(
        vol,
        &SnapshotOptions {
            tags: req.tags,
            pacer: vol.job_pacer(),
        },
    )?;
    Ok(serde_json::to_value(report).expect("a report serializes"))
}
