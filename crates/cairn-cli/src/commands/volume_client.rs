//! `cairn volume optimize|status DIR` while the volume is mounted: the
//! request goes to the mount daemon's control socket (docs/volume.md,
//! "Jobs and the control socket") and its answer comes back as the same
//! report the offline path makes, so both print alike. No password is
//! asked: the daemon holds the store's key, and the socket's permissions
//! (0600, the daemon's user) decide who may ask.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use cairn_volume::daemon::client::{reach, Client, Reach};
use cairn_volume::daemon::protocol::{ProgressLine, Request, STATUS};
use cairn_volume::job_state::{unix_now, JobState, JobStatus, Trigger};
use cairn_volume::{OptimizeReport, Status};

use crate::globals::Globals;

/// The mount daemon of the volume at `dir`, if one answers; `None` when
/// nobody has the volume open (the command opens it itself); an error when
/// another process holds it and no daemon answers.
pub fn daemon(dir: &Path) -> Result<Option<Client>> {
    match reach(dir)? {
        Reach::Daemon(client) => Ok(Some(client)),
        Reach::Free => Ok(None),
        Reach::Busy(pid) => {
            let who = pid.map_or("another process".to_string(), |p| format!("process {p}"));
            bail!(
                "volume {} is in use by {who}, and no mount daemon answers at its control \
                 socket; try again when it is done",
                dir.display()
            )
        }
    }
}

/// `optimize` run by the daemon, with the policy overrides given.
pub fn optimize(
    cli: &Globals,
    client: Client,
    min_age: Option<Duration>,
    min_size: Option<u64>,
    sessions: usize,
    partition_by: cairn_volume::partitions::PartitionBy,
    min_partition_bytes: u64,
) -> Result<OptimizeReport> {
    let mut args = Map::new();
    args.insert("sessions".into(), sessions.into());
    args.insert(
        "partition_by".into(),
        serde_json::to_value(partition_by).expect("an enum serializes"),
    );
    args.insert("min_partition_bytes".into(), min_partition_bytes.into());
    if let Some(age) = min_age {
        args.insert("min_age_secs".into(), age.as_secs().into());
    }
    if let Some(size) = min_size {
        args.insert("min_size".into(), size.into());
    }
    job(cli, client, "optimize", args)
}

/// The daemon's `status`: the volume's figures and its jobs.
pub fn status(cli: &Globals, client: Client) -> Result<Status> {
    job(cli, client, STATUS, Map::new())
}

/// Sends the request `name` with its options `args` (a job of the daemon's
/// registry, or `status`) and reads its result as `T` (the job's report
/// type). While the run waits behind another job, one line on stderr says
/// so (unless --quiet or --json).
pub fn job<T: DeserializeOwned>(
    cli: &Globals,
    client: Client,
    name: &str,
    args: Map<String, Value>,
) -> Result<T> {
    let req = Request::new(name, args);
    let mut told = false;
    let mut on_progress = |p: &ProgressLine| {
        if p.state == JobState::Queued && !told && !cli.quiet && !cli.json {
            eprintln!(
                "cairn: {} waits for the mount daemon's running job to end",
                p.job
            );
            told = true;
        }
    };
    let value: Value = client.request(&req, &mut on_progress)?;
    serde_json::from_value(value).context("reading the mount daemon's answer")
}

/// One job's state in a line: running (with its progress) or queued or
/// idle, and how its last run ended.
pub fn job_line(job: &JobStatus) -> String {
    let mut line = match job.state {
        JobState::Idle => "idle".to_string(),
        JobState::Queued => format!("queued ({} waiting)", job.queued),
        JobState::Running => {
            let since = unix_now().saturating_sub(job.started.unwrap_or(0));
            let mut l = format!("running for {since} s");
            if let Some(p) = &job.progress {
                l += &format!(", {} {}", p.phase, p.done);
                if let Some(total) = p.total {
                    l += &format!(" of {total}");
                }
                l += &format!(" {}", p.unit);
            }
            l
        }
    };
    if let Some(last) = &job.last {
        let ago = unix_now().saturating_sub(last.finished);
        let how = match &last.error {
            Some(e) => format!("failed: {e}"),
            None => "succeeded".to_string(),
        };
        line += &format!(
            "; last run ({}) ended {ago} s ago, {how}",
            trigger(last.trigger)
        );
    }
    line
}

fn trigger(t: Trigger) -> &'static str {
    match t {
        Trigger::Request => "on request",
        Trigger::Schedule => "scheduled",
    }
}
