//! The job scheduler (004, "Workload scheduler": jobs get CPU and memory
//! budgets, yield to the primary workload, and are cancelled on memory
//! pressure). One [`Scheduler`] is shared by the mount daemon and its jobs;
//! each job gets a [`Pacer`] and calls [`Pacer::pace`] between units of
//! work (a file switched, a file stored by an ingest or a snapshot, a
//! container verified or repaired by the scrub, a container the
//! collector plans or copies; [`HookPacer`] where the unit is reported
//! from inside a step that cannot stop). `pace`:
//!
//! 1. returns [`Cancelled`] on memory pressure: the kernel's memory PSI
//!    (`some avg10`) at or over [`MEMORY_PSI_CANCEL`], or the process's
//!    resident set grown by more than the job's memory budget since it
//!    started. The job then stops at that point; what it finished stays
//!    (the optimization job commits in batches, each file switched alone;
//!    the scrub verifies and repairs a container at a time); a step that
//!    cannot stop midway (a backup, the engine's collection) finishes
//!    unpaced and the job stops after it;
//! 2. pauses while the foreground is busy: the mount's own requests
//!    ([`ForegroundMeter`]) at [`BUSY_RATE`] a second or more, or one in
//!    flight (and, where asked, the kernel's CPU or I/O pressure over the
//!    window above its threshold: off by default, below). It resumes once the foreground has been quiet for
//!    [`RESUME_AFTER`] (hysteresis), and lets one unit of work through after
//!    [`MAX_PAUSE`] of continuous pause, so a workload that never stops
//!    cannot starve the job entirely;
//! 3. sleeps to hold the job to its CPU budget (a duty cycle): the job's CPU
//!    time over the window, divided by its share of a core, is the wall time
//!    the window must have taken at least.
//!
//! **How CPU is accounted.** The engine's ingest runs on several threads
//! (walker, readers, the hashing and storing stream), so one thread's CPU
//! clock would miss most of a job's work. A job's CPU time is the
//! process's (`CLOCK_PROCESS_CPUTIME_ID`) minus what the mount's request
//! threads spent serving requests (the meter reads each serving thread's
//! CPU clock around each request). What is left is the jobs' work plus the
//! daemon's idle bookkeeping; two jobs running at once share one account,
//! so each is held to its budget for both together (conservative).
//!
//! **Why CPU and I/O pressure do not pause a job by default.** PSI counts
//! every task of the machine (or cgroup) stalled on the resource, the
//! job's own threads included: a job on a machine with more runnable
//! threads than cores makes the CPU pressure that would pause it, and a
//! job reading cold files makes I/O pressure. On the 2-core machine the
//! benchmark ran on, other processes kept CPU `some avg10` near 37%, and a
//! job yielding to CPU pressure stayed paused 51 s of its 52 (docs/volume.md,
//! "Scheduler"). The mount's own requests are the workload a volume
//! serves; a plain file read through passthrough is the kernel's and
//! costs the daemon nothing. `SchedulerConfig::cpu_psi_busy` and
//! `io_psi_busy` turn them on for a machine where the volume's workload is
//! the only one. Memory pressure does cancel by default: reclaim stalls
//! everyone, and a job that stops frees its buffers.

mod signals;

pub use signals::{
    ForegroundMeter, MeterReading, Psi, RequestGuard, Resource, Signals, SystemSignals,
};

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Foreground requests a second from which the workload counts as busy. An
/// idle desktop's background lookups and attribute reads stay well below;
/// one reader streaming a file through the mount sends thousands (one
/// request per 128 KiB at most).
pub const BUSY_RATE: f64 = 50.0;
/// Requests a second at or below which the foreground counts as quiet (the
/// low side of the hysteresis band).
pub const QUIET_RATE: f64 = 10.0;
/// How long the foreground must stay quiet before a paused job resumes:
/// long enough to bridge the gaps between an application's bursts (a
/// compile's files, a copy's next file), short enough that the job loses
/// little time.
pub const RESUME_AFTER: Duration = Duration::from_millis(500);
/// The longest a job stays paused at a stretch before one unit of work is
/// let through; a few units a minute keep a job alive under a workload
/// that never pauses, at a cost the workload does not notice.
pub const MAX_PAUSE: Duration = Duration::from_secs(10);
/// How often the foreground, pressure and memory are read: readings cost a
/// few file reads, and a unit of work may be as short as one switch.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);
/// CPU pressure share (stalled time over a window, from the `total`
/// counter) from which the foreground counts as busy, when CPU pressure is
/// looked at (`SchedulerConfig::cpu_psi_busy`, off by default). High, because the
/// job's own threads and any other process on the machine count too: only
/// a machine where runnable tasks wait most of the time yields on it.
pub const CPU_PSI_BUSY: f64 = 0.80;
/// I/O pressure share from which the foreground counts as busy, when I/O
/// pressure is looked at (off by default). The job's
/// own reads count too (cold files are read from disk), so again high.
pub const IO_PSI_BUSY: f64 = 0.60;
/// Memory PSI `some avg10` (percent) at which a job is cancelled: a tenth
/// of the last 10 s with a task stalled on reclaim is thrashing that a job
/// holding buffers and caches only makes worse.
pub const MEMORY_PSI_CANCEL: f64 = 10.0;
/// A job's default CPU budget, percent of one core (004 assigns jobs
/// cores; one core leaves the others to the workload).
pub const DEFAULT_JOB_CPU_PERCENT: u32 = 100;
/// A job's default memory budget: growth of the resident set while it
/// runs. The engine's ingest holds a few batches of chunks and its index
/// caches, well under this; more means something is wrong or the store
/// is huge.
pub const DEFAULT_JOB_MEMORY_BYTES: u64 = 1 << 30;
/// The window over which a job's CPU duty cycle is measured: debts older
/// than this are forgotten, so an idle spell does not bank credit for a
/// later burst.
pub const DUTY_WINDOW: Duration = Duration::from_secs(2);

/// The scheduler's policy (the constants above, by default).
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    pub busy_rate: f64,
    pub quiet_rate: f64,
    pub resume_after: Duration,
    pub max_pause: Duration,
    pub sample_interval: Duration,
    /// `None` (the default): CPU pressure is not looked at; else the share
    /// ([`CPU_PSI_BUSY`]) from which it pauses jobs.
    pub cpu_psi_busy: Option<f64>,
    /// `None` (the default): I/O pressure is not looked at; else the share
    /// ([`IO_PSI_BUSY`]) from which it pauses jobs.
    pub io_psi_busy: Option<f64>,
    /// `None`: memory pressure never cancels (the memory budget still does).
    pub memory_psi_cancel: Option<f64>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            busy_rate: BUSY_RATE,
            quiet_rate: QUIET_RATE,
            resume_after: RESUME_AFTER,
            max_pause: MAX_PAUSE,
            sample_interval: SAMPLE_INTERVAL,
            cpu_psi_busy: None,
            io_psi_busy: None,
            memory_psi_cancel: Some(MEMORY_PSI_CANCEL),
        }
    }
}

/// What one job may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobBudget {
    /// CPU, percent of one core (200: two cores' worth), 1 to [`MAX_CPU_PERCENT`].
    pub cpu_percent: u32,
    /// Growth of the process's resident set since the job started.
    pub memory_bytes: u64,
}

/// The most CPU a budget may name: 64 cores.
pub const MAX_CPU_PERCENT: u32 = 6400;

impl Default for JobBudget {
    fn default() -> Self {
        JobBudget {
            cpu_percent: DEFAULT_JOB_CPU_PERCENT,
            memory_bytes: DEFAULT_JOB_MEMORY_BYTES,
        }
    }
}

/// A budget that cannot be honoured.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("job CPU budget {0}% is not between 1% and {MAX_CPU_PERCENT}% of a core")]
pub struct BadBudget(pub u32);

impl JobBudget {
    pub fn new(cpu_percent: u32, memory_bytes: u64) -> Result<Self, BadBudget> {
        if !(1..=MAX_CPU_PERCENT).contains(&cpu_percent) {
            return Err(BadBudget(cpu_percent));
        }
        Ok(JobBudget {
            cpu_percent,
            memory_bytes,
        })
    }
}

/// Why [`Pacer::pace`] stopped a job.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Cancelled {
    #[error(
        "cancelled on memory pressure: {avg10:.1}% of the last 10 s stalled on memory \
         (limit {limit:.1}%)"
    )]
    MemoryPressure { avg10: f64, limit: f64 },
    #[error(
        "cancelled over its memory budget: the daemon grew by {grown} bytes while it ran \
         (budget {budget})"
    )]
    MemoryBudget { grown: u64, budget: u64 },
}

/// Shared by the mount (which feeds its [`ForegroundMeter`]) and the jobs
/// (each pacing itself through a [`Pacer`]).
pub struct Scheduler {
    config: SchedulerConfig,
    meter: Arc<ForegroundMeter>,
    signals: Arc<dyn Signals>,
    foreground: Mutex<ForegroundState>,
}

/// The last sample of the foreground and the busy verdict with its
/// hysteresis.
#[derive(Default)]
struct ForegroundState {
    last: Option<Sample>,
    busy: bool,
    /// When the foreground was last seen not quiet.
    last_active: Duration,
}

#[derive(Clone, Copy)]
struct Sample {
    at: Duration,
    meter: MeterReading,
    cpu_stall_us: Option<u64>,
    io_stall_us: Option<u64>,
}

impl Scheduler {
    /// A scheduler over the machine's own signals, fed by `meter`.
    pub fn new(config: SchedulerConfig, meter: Arc<ForegroundMeter>) -> Arc<Self> {
        Self::with_signals(config, meter, Arc::new(SystemSignals::default()))
    }

    pub fn with_signals(
        config: SchedulerConfig,
        meter: Arc<ForegroundMeter>,
        signals: Arc<dyn Signals>,
    ) -> Arc<Self> {
        Arc::new(Scheduler {
            config,
            meter,
            signals,
            foreground: Mutex::new(ForegroundState::default()),
        })
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// The meter the mount counts its requests in.
    pub fn meter(&self) -> &Arc<ForegroundMeter> {
        &self.meter
    }

    /// A pacing handle for one job, whose budget starts now.
    pub fn job(self: &Arc<Self>, budget: JobBudget) -> Pacer {
        let now = self.signals.now();
        Pacer {
            scheduler: self.clone(),
            budget,
            state: Mutex::new(PacerState {
                wall_mark: now,
                cpu_mark: self.job_cpu(),
                rss_base: self.signals.rss_bytes(),
                memory_checked: None,
                stats: PaceStats::default(),
            }),
        }
    }

    /// CPU time not spent serving the mount's requests: the jobs'.
    fn job_cpu(&self) -> Duration {
        let foreground = Duration::from_nanos(self.meter.reading().cpu_ns);
        self.signals.process_cpu().saturating_sub(foreground)
    }

    /// Whether the foreground is busy now (sampled at most every
    /// `sample_interval`; between samples the last verdict stands).
    pub fn foreground_busy(&self) -> bool {
        let now = self.signals.now();
        let mut st = self.foreground.lock();
        if let Some(last) = st.last {
            if now.saturating_sub(last.at) < self.config.sample_interval {
                return st.busy;
            }
        }
        let sample = Sample {
            at: now,
            meter: self.meter.reading(),
            cpu_stall_us: self.stall_us(Resource::Cpu, self.config.cpu_psi_busy),
            io_stall_us: self.stall_us(Resource::Io, self.config.io_psi_busy),
        };
        let Some(last) = st.last.replace(sample) else {
            // The first sample has no window: only requests in flight count.
            if sample.meter.in_flight > 0 {
                st.busy = true;
                st.last_active = now;
            }
            return st.busy;
        };
        let secs = now.saturating_sub(last.at).as_secs_f64().max(1e-6);
        let rate = sample.meter.completed.saturating_sub(last.meter.completed) as f64 / secs;
        let share = |new: Option<u64>, old: Option<u64>| match (new, old) {
            (Some(n), Some(o)) => n.saturating_sub(o) as f64 / 1e6 / secs,
            _ => 0.0,
        };
        let pressured = |share: f64, limit: Option<f64>| limit.is_some_and(|l| share >= l);
        let cpu = share(sample.cpu_stall_us, last.cpu_stall_us);
        let io = share(sample.io_stall_us, last.io_stall_us);
        let demand = rate >= self.config.busy_rate
            || sample.meter.in_flight > 0
            || pressured(cpu, self.config.cpu_psi_busy)
            || pressured(io, self.config.io_psi_busy);
        let quiet = rate <= self.config.quiet_rate && !demand;
        if demand || (st.busy && !quiet) {
            st.busy = true;
            st.last_active = now;
        } else if st.busy && now.saturating_sub(st.last_active) >= self.config.resume_after {
            st.busy = false;
        }
        st.busy
    }

    /// The stalled-time counter of `resource`, when it is looked at.
    fn stall_us(&self, resource: Resource, limit: Option<f64>) -> Option<u64> {
        limit?;
        self.signals.psi(resource).map(|p| p.some_total_us)
    }
}

/// What a job's pacing did, for reports and the benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PaceStats {
    pub paces: u64,
    /// Times the job was paused for the foreground, and for how long.
    pub pauses: u64,
    pub paused: Duration,
    /// Time slept to hold the CPU budget.
    pub throttled: Duration,
}

/// One job's pacing handle (see the module doc). Shared by the job's
/// threads: the engine's ingest paces from its stream thread.
pub struct Pacer {
    scheduler: Arc<Scheduler>,
    budget: JobBudget,
    state: Mutex<PacerState>,
}

struct PacerState {
    /// Start of the duty-cycle window and the job CPU time then.
    wall_mark: Duration,
    cpu_mark: Duration,
    /// The resident set when the job started.
    rss_base: Option<u64>,
    memory_checked: Option<Duration>,
    stats: PaceStats,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("budget", &self.budget)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Pacer {
    pub fn budget(&self) -> JobBudget {
        self.budget
    }

    pub fn stats(&self) -> PaceStats {
        self.state.lock().stats
    }

    /// Called by a job between units of work: returns when the job may do
    /// its next unit, or [`Cancelled`] when it must stop.
    pub fn pace(&self) -> Result<(), Cancelled> {
        let s = &*self.scheduler;
        let signals = &*s.signals;
        // One job thread paces at a time; the others wait here, which is
        // what pacing them would do anyway.
        let mut st = self.state.lock();
        st.stats.paces += 1;
        self.check_memory(&mut st, false)?;

        // Pause while the foreground is busy, at most `max_pause` at a stretch.
        let mut pause_started = None;
        while s.foreground_busy() {
            let now = signals.now();
            let since = *pause_started.get_or_insert_with(|| {
                st.stats.pauses += 1;
                now
            });
            if now.saturating_sub(since) >= s.config.max_pause {
                break; // one unit through; the next call pauses afresh
            }
            signals.sleep(s.config.sample_interval);
            st.stats.paused += s.config.sample_interval;
            self.check_memory(&mut st, true)?;
        }
        let paused = pause_started.is_some();
        if paused {
            // A pause is no credit for the duty cycle: start a new window.
            st.wall_mark = signals.now();
            st.cpu_mark = s.job_cpu();
            return Ok(());
        }

        // Hold the duty cycle: the window must have lasted at least the
        // job's CPU time in it over its share of a core.
        let share = f64::from(self.budget.cpu_percent) / 100.0;
        let used = s.job_cpu().saturating_sub(st.cpu_mark);
        let wall = signals.now().saturating_sub(st.wall_mark);
        let needed = used.div_f64(share);
        if needed > wall {
            let debt = needed - wall;
            signals.sleep(debt);
            st.stats.throttled += debt;
        }
        let now = signals.now();
        if now.saturating_sub(st.wall_mark) >= DUTY_WINDOW {
            st.wall_mark = now;
            st.cpu_mark = s.job_cpu();
        }
        Ok(())
    }

    /// Cancels on memory pressure or over the memory budget; read at most
    /// every `sample_interval` unless `now` asks.
    fn check_memory(&self, st: &mut PacerState, force: bool) -> Result<(), Cancelled> {
        let s = &*self.scheduler;
        let now = s.signals.now();
        if !force
            && st
                .memory_checked
                .is_some_and(|at| now.saturating_sub(at) < s.config.sample_interval)
        {
            return Ok(());
        }
        st.memory_checked = Some(now);
        if let Some(limit) = s.config.memory_psi_cancel {
            if let Some(p) = s.signals.psi(Resource::Memory) {
                if p.some_avg10 >= limit {
                    return Err(Cancelled::MemoryPressure {
                        avg10: p.some_avg10,
                        limit,
                    });
                }
            }
        }
        if let (Some(base), Some(rss)) = (st.rss_base, s.signals.rss_bytes()) {
            let grown = rss.saturating_sub(base);
            if grown > self.budget.memory_bytes {
                return Err(Cancelled::MemoryBudget {
                    grown,
                    budget: self.budget.memory_bytes,
                });
            }
        }
        Ok(())
    }
}

/// File content a backup reads between two paces inside one file
/// ([`HookPacer::backup_hooks`]): a few tens of milliseconds of ingest,
/// so a pause asked for in the middle of a large file is taken there.
pub const PACE_CONTENT_BYTES: u64 = 8 << 20;

/// Paces a job from inside a step that cannot stop midway (the engine's
/// backup, told of each file it stores through its entry log and of the
/// content it reads through its content log; the engine's collector,
/// through its progress hook): the first [`Cancelled`] is kept, later
/// calls no longer pace, and the step finishes unpaced; the job reports
/// the cancel when the step returns.
#[derive(Debug)]
pub struct HookPacer {
    pacer: Arc<Pacer>,
    cancelled: Mutex<Option<Cancelled>>,
    /// Content bytes the backup hooks were told of.
    content: std::sync::atomic::AtomicU64,
}

impl HookPacer {
    pub fn new(pacer: Arc<Pacer>) -> Self {
        HookPacer {
            pacer,
            cancelled: Mutex::new(None),
            content: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The backup's hooks that pace: after each file or directory stored
    /// (its entry log), and each time the content read crosses a multiple
    /// of [`PACE_CONTENT_BYTES`] (its content log), so a large file is
    /// paced inside, not only at its end.
    pub fn backup_hooks(
        self: &Arc<Self>,
    ) -> (
        cairn_engine::backup::events::EntryLog,
        cairn_engine::backup::events::ContentLog,
    ) {
        let (a, b) = (self.clone(), self.clone());
        let entries: cairn_engine::backup::events::EntryLog = Arc::new(move |_| a.pace());
        let content: cairn_engine::backup::events::ContentLog = Arc::new(move |bytes| {
            use std::sync::atomic::Ordering::Relaxed;
            let before = b.content.fetch_add(bytes, Relaxed);
            if (before + bytes) / PACE_CONTENT_BYTES > before / PACE_CONTENT_BYTES {
                b.pace();
            }
        });
        (entries, content)
    }

    /// Paces once, unless a cancel was already kept.
    pub fn pace(&self) {
        // Held while pacing: a call after the cancel never paces.
        let mut c = self.cancelled.lock();
        if c.is_none() {
            *c = self.pacer.pace().err();
        }
    }

    /// Whether a cancel was kept, and why.
    pub fn cancelled(&self) -> Option<Cancelled> {
        self.cancelled.lock().clone()
    }

    pub fn pacer(&self) -> &Arc<Pacer> {
        &self.pacer
    }
}

#[cfg(test)]
mod tests;
