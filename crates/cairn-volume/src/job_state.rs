//! What a job is doing and what it last did, as `status` shows it
//! (docs/volume.md, "Jobs and the control socket"). Plain data: the jobs
//! report progress with it and the mount daemon keeps it; nothing here
//! runs a job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How far a running job is: `done` of `total` `unit`s (`total` where the
/// job knows it) in its current `phase`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub phase: String,
    pub done: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// `files` or `bytes`.
    pub unit: String,
}

impl Progress {
    pub fn files(phase: &str, done: u64, total: Option<u64>) -> Progress {
        Progress {
            phase: phase.to_string(),
            done,
            total,
            unit: "files".to_string(),
        }
    }
}

/// Where a job reports its progress; called from the job's own thread.
pub type ProgressSink<'a> = &'a (dyn Fn(Progress) + Sync);

/// A job's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Neither running nor waiting.
    #[default]
    Idle,
    /// Waiting for another job to end.
    Queued,
    Running,
}

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// A client's request on the control socket.
    Request,
    /// The mount's schedule (`--optimize-every`).
    Schedule,
}

/// The end of a job's last run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub trigger: Trigger,
    /// Unix seconds.
    pub started: u64,
    pub finished: u64,
    /// The job's report when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
    /// Its error (one line) when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One job as `status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    pub state: JobState,
    /// Runs of this job waiting their turn.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: u64,
    /// When the running run started (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<LastRun>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Every job by name.
pub type Jobs = BTreeMap<String, JobStatus>;

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
