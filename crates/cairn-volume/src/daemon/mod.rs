//! Jobs inside the mount daemon, and its control socket (docs/volume.md,
//! "Jobs and the control socket"; the protocol in docs/FORMAT.md,
//! "Volume", "Control socket").
//!
//! While a volume is mounted its daemon alone has it open (`volume.lock`),
//! so the jobs run there, on the daemon's own [`Volume`]: the same inode
//! locks and content state the FUSE layer uses, so a switch sees the
//! mount's change counts and passthrough opens, and reads see what a job
//! committed. As 004's jobs (and Windows Server Data Deduplication's, whose
//! optimization runs hourly by default: Microsoft, "Understanding Data
//! Deduplication", job types) they run in the background, on a schedule or
//! on demand.
//!
//! - `protocol`: the request and reply lines;
//! - `registry`: the jobs by name ([`registry::JOBS`]; how to add one);
//! - `runner`: one job at a time, the others queued, state for `status`;
//! - `server`: the socket (mode 0600, a stale one replaced) and its
//!   connections;
//! - `client`: what `cairn volume` commands use to reach a daemon.
//!
//! The socket's permissions are the access control: whoever may connect
//! may ask for status and jobs, and needs no password (the daemon holds
//! the store's key).

pub mod client;
pub mod protocol;
pub mod registry;
mod runner;
mod server;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use cairn_core::{Error, Result};

use crate::job_state::{JobStatus, Jobs, Trigger};
use crate::volume::Volume;
use protocol::SOCKET_NAME;
use registry::JobSpec;
use runner::Runner;

/// How often a mount optimizes by default: hourly, as Windows Server Data
/// Deduplication's background optimization (see the module doc).
pub const DEFAULT_OPTIMIZE_EVERY: Duration = Duration::from_secs(3600);

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// Run `optimize` with the volume's policy this often (the first run
    /// one period after the start); `None`: only on request.
    pub optimize_every: Option<Duration>,
    /// The jobs it knows ([`registry::JOBS`]; tests add their own).
    pub jobs: &'static [JobSpec],
}

impl Default for DaemonOptions {
    fn default() -> Self {
        DaemonOptions {
            optimize_every: Some(DEFAULT_OPTIMIZE_EVERY),
            jobs: registry::JOBS,
        }
    }
}

/// A running daemon: its socket served, its jobs run, until [`Daemon::stop`]
/// (or drop).
pub struct Daemon {
    socket: PathBuf,
    stop_accept: Arc<AtomicBool>,
    runner: Arc<Runner>,
    connections: Arc<server::Connections>,
    threads: Vec<JoinHandle<()>>,
}

impl Daemon {
    /// Binds `DIR/control.sock` and starts the job runner (and the
    /// schedule) on `vol`.
    pub fn start(vol: Arc<Volume>, options: DaemonOptions) -> Result<Daemon> {
        let socket = vol.dir().root().join(SOCKET_NAME);
        let listener = server::bind(&socket)?;
        let runner = Runner::new(options.jobs);
        let stop_accept = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(server::Connections::default());
        let mut daemon = Daemon {
            socket,
            stop_accept: stop_accept.clone(),
            runner: runner.clone(),
            connections: connections.clone(),
            threads: Vec::new(),
        };
        let thread = |e| Error::io("starting the volume daemon's threads", e);
        daemon
            .threads
            .push(runner.spawn(vol.clone()).map_err(thread)?);
        if let (Some(every), Some(job)) = (
            options.optimize_every,
            registry::find(options.jobs, "optimize"),
        ) {
            let (runner, job) = (runner.clone(), *job);
            let t = std::thread::Builder::new()
                .name("volume-schedule".into())
                .spawn(move || schedule(&runner, job, every))
                .map_err(thread)?;
            daemon.threads.push(t);
        }
        let t = std::thread::Builder::new()
            .name("volume-accept".into())
            .spawn(move || server::accept_loop(listener, vol, runner, stop_accept, connections))
            .map_err(thread)?;
        daemon.threads.push(t);
        Ok(daemon)
    }

    /// The control socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Every job's state, as `status` shows it.
    pub fn jobs(&self) -> Jobs {
        self.runner.jobs_status()
    }

    /// Stops: the socket is closed and removed, queued runs are dropped
    /// (their clients told), and the running job, if any, and the
    /// connections being answered are waited for: then the daemon holds
    /// the volume no more.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.stop_accept.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = protocol::with_socket_path(&self.socket, |p| {
            std::os::unix::net::UnixStream::connect(p)
        });
        let _ = std::fs::remove_file(&self.socket);
        self.runner.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.connections.wait_all_closed();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Queues `job` every `every`, unless a run of it is already queued or
/// running, until the daemon stops.
fn schedule(runner: &Runner, job: JobSpec, every: Duration) {
    // A period past what the clock can count (`100000y`) never comes.
    let after = |t: Instant| t.checked_add(every);
    let Some(mut next) = after(Instant::now()) else {
        return;
    };
    loop {
        let now = Instant::now();
        if now >= next {
            if !runner.pending(job.name) {
                let _ = runner.submit(job, Value::Object(Default::default()), Trigger::Schedule);
            }
            let Some(n) = after(now) else { return };
            next = n;
        }
        if runner.wait_stopping(next.saturating_duration_since(Instant::now())) {
            return;
        }
    }
}

/// Every job of [`registry::JOBS`] idle, with no last run: what an offline
/// `status` shows.
pub fn idle_jobs() -> Jobs {
    registry::JOBS
        .iter()
        .map(|j| (j.name.to_string(), JobStatus::default()))
        .collect()
}
