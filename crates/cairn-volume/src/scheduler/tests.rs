//! The policy on a fake clock: sleeping advances it, and the test sets the
//! pressure, memory and CPU readings and feeds the meter.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;

#[derive(Default)]
struct Fake {
    now: Duration,
    cpu: Duration,
    memory_avg10: Option<f64>,
    cpu_stall_us: u64,
    rss: u64,
    slept: Duration,
    /// Called at each sleep with the new time (drives the meter).
    on_sleep: Option<Box<dyn FnMut(Duration) + Send>>,
}

#[derive(Default, Clone)]
struct FakeSignals(Arc<Mutex<Fake>>);

impl FakeSignals {
    fn advance(&self, wall: Duration, cpu: Duration) {
        let mut f = self.0.lock();
        f.now += wall;
        f.cpu += cpu;
    }
    fn set<F: FnOnce(&mut Fake)>(&self, f: F) {
        f(&mut self.0.lock())
    }
    fn slept(&self) -> Duration {
        self.0.lock().slept
    }
    fn now(&self) -> Duration {
        self.0.lock().now
    }
}

impl Signals for FakeSignals {
    fn now(&self) -> Duration {
        self.0.lock().now
    }
    fn process_cpu(&self) -> Duration {
        self.0.lock().cpu
    }
    fn psi(&self, resource: Resource) -> Option<Psi> {
        let f = self.0.lock();
        match resource {
            Resource::Memory => f.memory_avg10.map(|a| Psi {
                some_avg10: a,
                some_total_us: 0,
            }),
            Resource::Cpu => Some(Psi {
                some_avg10: 0.0,
                some_total_us: f.cpu_stall_us,
            }),
            Resource::Io => None,
        }
    }
    fn rss_bytes(&self) -> Option<u64> {
        Some(self.0.lock().rss)
    }
    fn sleep(&self, d: Duration) {
        let mut hook = {
            let mut f = self.0.lock();
            f.now += d;
            f.slept += d;
            f.on_sleep.take()
        };
        if let Some(h) = hook.as_mut() {
            let now = self.0.lock().now;
            h(now);
        }
        if let Some(h) = hook {
            self.0.lock().on_sleep = Some(h);
        }
    }
}

fn setup(config: SchedulerConfig) -> (FakeSignals, Arc<ForegroundMeter>, Arc<Scheduler>) {
    let signals = FakeSignals::default();
    signals.set(|f| f.rss = 100 << 20);
    let meter = Arc::new(ForegroundMeter::default());
    let s = Scheduler::with_signals(config, meter.clone(), Arc::new(signals.clone()));
    (signals, meter, s)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `n` requests of 1 ms wall and no CPU.
fn requests(meter: &ForegroundMeter, n: u64) {
    for _ in 0..n {
        meter.record(ms(1), Duration::ZERO);
    }
}

#[test]
fn an_idle_foreground_and_an_unspent_budget_let_the_job_run() {
    let (signals, _meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::default());
    for _ in 0..100 {
        signals.advance(ms(10), ms(5)); // half a core, budget one
        job.pace().unwrap();
    }
    assert_eq!(signals.slept(), Duration::ZERO);
    let st = job.stats();
    assert_eq!((st.paces, st.pauses), (100, 0));
}

#[test]
fn the_cpu_budget_is_held_by_sleeping() {
    let (signals, _meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::new(25, 1 << 30).unwrap());
    let start = signals.now();
    let mut cpu = Duration::ZERO;
    // Each unit is 10 ms of CPU done in 10 ms of wall time (one busy core).
    for _ in 0..400 {
        signals.advance(ms(10), ms(10));
        cpu += ms(10);
        job.pace().unwrap();
    }
    let wall = signals.now() - start;
    let duty = cpu.as_secs_f64() / wall.as_secs_f64();
    assert!((0.24..=0.26).contains(&duty), "duty cycle {duty}");
    assert!(job.stats().throttled > ms(11_000), "{:?}", job.stats());
}

#[test]
fn the_mounts_own_requests_do_not_count_against_the_job() {
    let (signals, meter, s) = setup(SchedulerConfig {
        // Only the budget is under test: requests never pause the job here.
        busy_rate: f64::INFINITY,
        ..Default::default()
    });
    let job = s.job(JobBudget::new(50, 1 << 30).unwrap());
    for _ in 0..100 {
        // 10 ms of CPU, all of it the mount serving requests.
        signals.advance(ms(10), ms(10));
        meter.record(ms(1), ms(10));
        job.pace().unwrap();
    }
    assert_eq!(signals.slept(), Duration::ZERO);
}

#[test]
fn a_busy_foreground_pauses_the_job_until_quiet_for_the_resume_time() {
    let (signals, meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::default());
    job.pace().unwrap(); // first sample
                         // The workload: 1000 requests a second until t = 3 s, then nothing.
    let feeder = meter.clone();
    let mut fed_until = signals.now();
    signals.set(|f| {
        f.on_sleep = Some(Box::new(move |now| {
            let stop = Duration::from_secs(3);
            let upto = now.min(stop);
            if upto > fed_until {
                requests(&feeder, (upto - fed_until).as_millis() as u64);
                fed_until = upto;
            }
        }))
    });
    signals.advance(ms(100), Duration::ZERO);
    requests(&meter, 100);
    job.pace().unwrap();
    let resumed = signals.now();
    // Paused through the busy time, resumed no sooner than RESUME_AFTER
    // after the last request, and not much later.
    assert!(
        resumed >= Duration::from_secs(3) + RESUME_AFTER,
        "{resumed:?}"
    );
    assert!(
        resumed <= Duration::from_secs(3) + RESUME_AFTER + 3 * SAMPLE_INTERVAL,
        "{resumed:?}"
    );
    let st = job.stats();
    assert_eq!(st.pauses, 1);
    assert!(st.paused >= Duration::from_secs(3), "{st:?}");
    // Quiet now: the next units run without pause.
    signals.advance(ms(100), Duration::ZERO);
    job.pace().unwrap();
    assert_eq!(job.stats().pauses, 1);
}

#[test]
fn a_trickle_of_requests_does_not_pause_but_one_in_flight_does() {
    let (signals, meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::default());
    for _ in 0..20 {
        signals.advance(ms(100), Duration::ZERO);
        requests(&meter, 1); // 10 a second: quiet
        job.pace().unwrap();
    }
    assert_eq!(job.stats().pauses, 0);
    // A request in flight for 200 ms: the job waits for it and then
    // RESUME_AFTER more.
    let held: &'static Arc<ForegroundMeter> = Box::leak(Box::new(meter.clone()));
    let guard = held.start();
    let t0 = signals.now();
    let released = Arc::new(Mutex::new(Some(guard)));
    let hold = released.clone();
    signals.set(|f| {
        f.on_sleep = Some(Box::new(move |now| {
            if now >= t0 + ms(200) {
                hold.lock().take();
            }
        }))
    });
    signals.advance(ms(100), Duration::ZERO);
    job.pace().unwrap();
    assert_eq!(job.stats().pauses, 1);
    assert!(signals.now() >= t0 + ms(200) + RESUME_AFTER);
}

#[test]
fn a_job_paused_too_long_gets_one_unit_through() {
    let (signals, meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::default());
    job.pace().unwrap();
    let feeder = meter.clone();
    signals.set(|f| f.on_sleep = Some(Box::new(move |_| requests(&feeder, 100))));
    signals.advance(ms(100), Duration::ZERO);
    requests(&meter, 100);
    let t0 = signals.now();
    job.pace().unwrap();
    let waited = signals.now() - t0;
    assert!(waited >= MAX_PAUSE && waited <= MAX_PAUSE + 2 * SAMPLE_INTERVAL);
    job.pace().unwrap();
    assert_eq!(job.stats().pauses, 2, "each call pauses afresh");
}

#[test]
fn cpu_pressure_over_its_threshold_pauses_and_absent_psi_does_not() {
    let (signals, _meter, s) = setup(SchedulerConfig {
        cpu_psi_busy: Some(CPU_PSI_BUSY),
        ..Default::default()
    });
    let job = s.job(JobBudget::default());
    job.pace().unwrap();
    // 90% of each window stalled on CPU for 2 s, then none.
    let mut stalled = 0u64;
    for _ in 0..40 {
        signals.advance(SAMPLE_INTERVAL, Duration::ZERO);
        stalled += 45_000;
        signals.set(|f| f.cpu_stall_us = stalled);
    }
    // Only the last window counts: 90% stalled, so busy.
    assert!(s.foreground_busy());
    job.pace().unwrap(); // pauses RESUME_AFTER (no more stall), then runs
    assert_eq!(job.stats().pauses, 1);

    // Not looked at (the default): never busy from it; absent (the fake
    // has no I/O file): the same.
    let (signals, _meter, s) = setup(SchedulerConfig {
        io_psi_busy: Some(IO_PSI_BUSY),
        ..Default::default()
    });
    signals.set(|f| f.cpu_stall_us = u64::MAX / 2);
    let job = s.job(JobBudget::default());
    signals.advance(ms(100), Duration::ZERO);
    job.pace().unwrap();
    assert_eq!(job.stats().pauses, 0);
}

#[test]
fn memory_pressure_cancels_and_so_does_the_memory_budget() {
    let (signals, _meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::new(100, 64 << 20).unwrap());
    signals.set(|f| f.memory_avg10 = Some(MEMORY_PSI_CANCEL - 1.0));
    job.pace().unwrap();
    signals.advance(ms(100), Duration::ZERO);
    signals.set(|f| f.memory_avg10 = Some(MEMORY_PSI_CANCEL + 5.0));
    assert!(matches!(job.pace(), Err(Cancelled::MemoryPressure { .. })));

    let (signals, _meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::new(100, 64 << 20).unwrap());
    signals.set(|f| f.rss += 60 << 20);
    signals.advance(ms(100), Duration::ZERO);
    job.pace().unwrap();
    signals.set(|f| f.rss += 10 << 20);
    signals.advance(ms(100), Duration::ZERO);
    let err = job.pace().unwrap_err();
    assert_eq!(
        err,
        Cancelled::MemoryBudget {
            grown: 70 << 20,
            budget: 64 << 20
        }
    );
    assert!(err.to_string().contains("memory budget"), "{err}");
}

#[test]
fn memory_pressure_cancels_a_paused_job() {
    let (signals, meter, s) = setup(SchedulerConfig::default());
    let job = s.job(JobBudget::default());
    job.pace().unwrap();
    let feeder = meter.clone();
    let sig = signals.clone();
    // Busy throughout; memory pressure rises 2 s into the pause.
    signals.set(|f| {
        f.on_sleep = Some(Box::new(move |now| {
            requests(&feeder, 100);
            if now >= Duration::from_secs(2) {
                sig.set(|f| f.memory_avg10 = Some(50.0));
            }
        }))
    });
    signals.advance(ms(100), Duration::ZERO);
    requests(&meter, 100);
    assert!(matches!(job.pace(), Err(Cancelled::MemoryPressure { .. })));
    assert!(signals.now() < Duration::from_secs(2) + 2 * SAMPLE_INTERVAL);
    assert_eq!(job.stats().pauses, 1);
}

#[test]
fn budgets_out_of_range_are_refused() {
    assert_eq!(JobBudget::new(0, 1), Err(BadBudget(0)));
    assert_eq!(
        JobBudget::new(MAX_CPU_PERCENT + 1, 1),
        Err(BadBudget(MAX_CPU_PERCENT + 1))
    );
    assert!(JobBudget::new(250, 1).is_ok());
}
