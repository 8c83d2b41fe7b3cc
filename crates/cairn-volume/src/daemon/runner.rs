//! The job runner: one job at a time on the daemon's `Volume`, the others
//! queued in arrival order (so optimize, gc and scrub exclude each other),
//! each job's state and last result kept for `status`, which never waits
//! for a job: it reads this state under a short lock.
//!
//! A run belongs to the runner once queued: the client that asked may
//! disconnect and the run still happens (nothing cancels it but the
//! daemon's stop, which drops the runs still queued and waits for the
//! running one).

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use serde_json::Value;

use super::protocol::ProgressLine;
use super::registry::JobSpec;
use crate::job_state::{unix_now, JobState, JobStatus, Jobs, LastRun, Progress, Trigger};
use crate::volume::Volume;

/// Runs queued at most (beyond, a request is refused).
pub const MAX_QUEUED: usize = 16;

/// One run of a job, queued or running.
pub struct Ticket {
    id: u64,
    pub job: JobSpec,
    args: Value,
    trigger: Trigger,
    /// Set once, when the run ends: its report, or its error (one line).
    outcome: Mutex<Option<Result<Value, String>>>,
}

impl Ticket {
    pub fn outcome(&self) -> Option<Result<Value, String>> {
        self.outcome.lock().clone()
    }
}

struct Running {
    ticket: Arc<Ticket>,
    started: u64,
    progress: Option<Progress>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Arc<Ticket>>,
    running: Option<Running>,
    last: HashMap<&'static str, LastRun>,
    stopping: bool,
}

/// The queue and the state `status` shows, shared by the runner thread,
/// the schedule and the connections.
pub struct Runner {
    jobs: Vec<JobSpec>,
    state: Mutex<State>,
    /// Notified at every change of `state` (a run queued, started,
    /// progressing or ended; the stop).
    changed: Condvar,
    next_id: AtomicU64,
}

impl Runner {
    pub fn new(jobs: &[JobSpec]) -> Arc<Runner> {
        Arc::new(Runner {
            jobs: jobs.to_vec(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            next_id: AtomicU64::new(1),
        })
    }

    pub fn jobs(&self) -> &[JobSpec] {
        &self.jobs
    }

    /// Starts the thread that runs queued jobs on `vol`.
    pub fn spawn(self: &Arc<Self>, vol: Arc<Volume>) -> std::io::Result<JoinHandle<()>> {
        let runner = self.clone();
        std::thread::Builder::new()
            .name("volume-jobs".into())
            .spawn(move || runner.run_queue(&vol))
    }

    /// Queues a run of `job`, with where it stands in the queue then;
    /// refused (one line) when the daemon stops or the queue is full.
    pub fn submit(
        &self,
        job: JobSpec,
        args: Value,
        trigger: Trigger,
    ) -> Result<(Arc<Ticket>, ProgressLine), String> {
        let mut st = self.state.lock();
        if st.stopping {
            return Err("the volume is being unmounted".into());
        }
        if st.queue.len() >= MAX_QUEUED {
            return Err(format!(
                "{MAX_QUEUED} job runs already wait their turn; try again later"
            ));
        }
        let ticket = Arc::new(Ticket {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            job,
            args,
            trigger,
            outcome: Mutex::new(None),
        });
        st.queue.push_back(ticket.clone());
        let queued_at = ProgressLine {
            job: job.name.to_string(),
            state: JobState::Queued,
            ahead: Some(st.queue.len() as u64 - 1 + u64::from(st.running.is_some())),
            progress: None,
        };
        self.changed.notify_all();
        Ok((ticket, queued_at))
    }

    /// Whether a run of `name` is queued or running.
    pub fn pending(&self, name: &str) -> bool {
        let st = self.state.lock();
        st.running
            .as_ref()
            .is_some_and(|r| r.ticket.job.name == name)
            || st.queue.iter().any(|t| t.job.name == name)
    }

    /// Where `ticket` is now (`None` once it ended).
    pub fn where_is(&self, ticket: &Ticket) -> Option<ProgressLine> {
        let st = self.state.lock();
        let line = |state, ahead, progress| ProgressLine {
            job: ticket.job.name.to_string(),
            state,
            ahead,
            progress,
        };
        if let Some(r) = st.running.as_ref().filter(|r| r.ticket.id == ticket.id) {
            return Some(line(JobState::Running, None, r.progress.clone()));
        }
        let at = st.queue.iter().position(|t| t.id == ticket.id)?;
        let ahead = at as u64 + u64::from(st.running.is_some());
        Some(line(JobState::Queued, Some(ahead), None))
    }

    /// Waits until `ticket` ended or something changed, at most `limit`.
    pub fn wait_change(&self, ticket: &Ticket, limit: Duration) {
        let mut st = self.state.lock();
        if ticket.outcome.lock().is_none() {
            self.changed.wait_for(&mut st, limit);
        }
    }

    /// Every job's state, progress and last result.
    pub fn jobs_status(&self) -> Jobs {
        let st = self.state.lock();
        let mut out = Jobs::new();
        for job in &self.jobs {
            let mut s = JobStatus {
                queued: st.queue.iter().filter(|t| t.job.name == job.name).count() as u64,
                last: st.last.get(job.name).cloned(),
                ..JobStatus::default()
            };
            if s.queued > 0 {
                s.state = JobState::Queued;
            }
            if let Some(r) = st
                .running
                .as_ref()
                .filter(|r| r.ticket.job.name == job.name)
            {
                s.state = JobState::Running;
                s.started = Some(r.started);
                s.progress = r.progress.clone();
            }
            out.insert(job.name.to_string(), s);
        }
        out
    }

    /// Stops taking runs and drops those queued (their clients get an
    /// error); the running one finishes (the runner thread then ends).
    pub fn stop(&self) {
        let mut st = self.state.lock();
        st.stopping = true;
        for t in st.queue.drain(..) {
            *t.outcome.lock() = Some(Err(
                "the volume was unmounted before this job ran".to_string()
            ));
        }
        self.changed.notify_all();
    }

    /// Waits, at most `limit`, until the daemon stops; whether it did.
    pub fn wait_stopping(&self, limit: Duration) -> bool {
        let mut st = self.state.lock();
        if !st.stopping {
            self.changed.wait_for(&mut st, limit);
        }
        st.stopping
    }

    fn run_queue(&self, vol: &Volume) {
        loop {
            let ticket = {
                let mut st = self.state.lock();
                loop {
                    if st.stopping {
                        return;
                    }
                    if let Some(t) = st.queue.pop_front() {
                        st.running = Some(Running {
                            ticket: t.clone(),
                            started: unix_now(),
                            progress: None,
                        });
                        self.changed.notify_all();
                        break t;
                    }
                    self.changed.wait(&mut st);
                }
            };
            let started = unix_now();
            let sink = |p: Progress| {
                let mut st = self.state.lock();
                if let Some(r) = st.running.as_mut() {
                    r.progress = Some(p);
                }
                self.changed.notify_all();
            };
            // A job that panics fails its run; the daemon goes on serving.
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                (ticket.job.run)(vol, &ticket.args, &sink)
            }));
            let outcome = match outcome {
                Ok(Ok(report)) => Ok(report),
                Ok(Err(e)) => Err(e.to_string().replace('\n', " ")),
                Err(_) => Err(format!("the {} job panicked", ticket.job.name)),
            };
            let mut st = self.state.lock();
            st.running = None;
            let (report, error) = match &outcome {
                Ok(r) => (Some(r.clone()), None),
                Err(e) => (None, Some(e.clone())),
            };
            st.last.insert(
                ticket.job.name,
                LastRun {
                    trigger: ticket.trigger,
                    started,
                    finished: unix_now(),
                    report,
                    error,
                },
            );
            *ticket.outcome.lock() = Some(outcome);
            self.changed.notify_all();
        }
    }
}
