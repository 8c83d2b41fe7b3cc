//! What the scheduler measures: the mount's own requests
//! ([`ForegroundMeter`], counted where requests enter the FUSE layer), the
//! kernel's pressure stall information (`/proc/pressure/{cpu,io,memory}`,
//! [`Psi`]), the process's CPU time and resident set size. The readings
//! other than the meter come through [`Signals`], so the policy's tests
//! drive it with a fake clock and fake pressure.
//!
//! PSI as the Linux kernel documents it (`Documentation/accounting/psi.rst`):
//! each file's `some` line is the share of time at least one task was
//! stalled on the resource, as averages over 10, 60 and 300 s and a
//! `total` of stalled microseconds since boot; the files exist from Linux
//! 4.20 when PSI is enabled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The mount's requests: how many are in flight, how many completed, and
/// the wall and CPU time they took (summed). Counted by the FUSE layer for
/// every request that serves the workload (lookups, attributes, directory
/// reads, opens, reads, writes, syncs); four atomic adds and two reads of
/// the thread's CPU clock per request.
#[derive(Debug, Default)]
pub struct ForegroundMeter {
    in_flight: AtomicU64,
    completed: AtomicU64,
    latency_ns: AtomicU64,
    cpu_ns: AtomicU64,
}

/// A snapshot of a [`ForegroundMeter`]; counters only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeterReading {
    pub in_flight: u64,
    pub completed: u64,
    /// Wall time of the completed requests, summed.
    pub latency_ns: u64,
    /// CPU time the serving threads spent on them, summed.
    pub cpu_ns: u64,
}

impl ForegroundMeter {
    /// Counts a request from now until the guard is dropped.
    pub fn start(&self) -> RequestGuard<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        RequestGuard {
            meter: self,
            started: Instant::now(),
            cpu_started: thread_cpu(),
        }
    }

    /// Records a completed request directly (what a guard's drop does).
    pub fn record(&self, latency: Duration, cpu: Duration) {
        self.completed.fetch_add(1, Ordering::Relaxed);
        self.latency_ns
            .fetch_add(latency.as_nanos() as u64, Ordering::Relaxed);
        self.cpu_ns
            .fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn reading(&self) -> MeterReading {
        MeterReading {
            in_flight: self.in_flight.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            latency_ns: self.latency_ns.load(Ordering::Relaxed),
            cpu_ns: self.cpu_ns.load(Ordering::Relaxed),
        }
    }
}

/// One request being served (see [`ForegroundMeter::start`]).
pub struct RequestGuard<'a> {
    meter: &'a ForegroundMeter,
    started: Instant,
    cpu_started: Duration,
}

impl Drop for RequestGuard<'_> {
    fn drop(&mut self) {
        let cpu = thread_cpu().saturating_sub(self.cpu_started);
        self.meter.record(self.started.elapsed(), cpu);
        self.meter.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    timespec(rustix::time::clock_gettime(
        rustix::time::ClockId::ThreadCPUTime,
    ))
}

fn timespec(t: rustix::time::Timespec) -> Duration {
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// A resource the kernel reports pressure for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Io,
    Memory,
}

impl Resource {
    fn file(self) -> &'static str {
        match self {
            Resource::Cpu => "/proc/pressure/cpu",
            Resource::Io => "/proc/pressure/io",
            Resource::Memory => "/proc/pressure/memory",
        }
    }
}

/// The `some` line of a pressure file: the share of the last 10 s in which
/// at least one task was stalled on the resource (percent), and the total
/// stalled time since boot (microseconds), whose differences give shorter
/// windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Psi {
    pub some_avg10: f64,
    pub some_total_us: u64,
}

impl Psi {
    /// Parses a pressure file's text; `None` if it has no `some` line.
    pub fn parse(text: &str) -> Option<Psi> {
        let line = text.lines().find(|l| l.starts_with("some "))?;
        let mut avg10 = None;
        let mut total = None;
        for field in line.split_whitespace().skip(1) {
            match field.split_once('=') {
                Some(("avg10", v)) => avg10 = v.parse().ok(),
                Some(("total", v)) => total = v.parse().ok(),
                _ => {}
            }
        }
        Some(Psi {
            some_avg10: avg10?,
            some_total_us: total?,
        })
    }
}

/// Where the scheduler reads time, CPU, pressure and memory, and how it
/// sleeps. [`SystemSignals`] is the machine's; tests use a fake.
pub trait Signals: Send + Sync {
    /// A monotonic clock.
    fn now(&self) -> Duration;
    /// CPU time of the whole process (every thread).
    fn process_cpu(&self) -> Duration;
    /// The resource's pressure; `None` where the kernel has no PSI (older
    /// than 4.20, or `psi=0`) or it cannot be read.
    fn psi(&self, resource: Resource) -> Option<Psi>;
    /// The process's resident set size; `None` if it cannot be read.
    fn rss_bytes(&self) -> Option<u64>;
    fn sleep(&self, d: Duration);
}

/// The machine's own clocks, `/proc/pressure/*` and `/proc/self/statm`.
pub struct SystemSignals {
    origin: Instant,
}

impl Default for SystemSignals {
    fn default() -> Self {
        SystemSignals {
            origin: Instant::now(),
        }
    }
}

impl Signals for SystemSignals {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn process_cpu(&self) -> Duration {
        timespec(rustix::time::clock_gettime(
            rustix::time::ClockId::ProcessCPUTime,
        ))
    }

    fn psi(&self, resource: Resource) -> Option<Psi> {
        Psi::parse(&std::fs::read_to_string(resource.file()).ok()?)
    }

    fn rss_bytes(&self) -> Option<u64> {
        // statm: size resident shared ... in pages.
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * rustix::param::page_size() as u64)
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_some_line_of_a_pressure_file() {
        let text = "some avg10=37.78 avg60=11.03 avg300=5.78 total=14317146470\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            Psi::parse(text),
            Some(Psi {
                some_avg10: 37.78,
                some_total_us: 14_317_146_470
            })
        );
        assert_eq!(Psi::parse("full avg10=1.00 total=3\n"), None);
        assert_eq!(Psi::parse("some avg10=x total=3\n"), None);
        assert_eq!(Psi::parse(""), None);
    }

    #[test]
    fn the_meter_counts_requests_in_flight_and_completed() {
        let meter = ForegroundMeter::default();
        let guard = meter.start();
        assert_eq!(meter.reading().in_flight, 1);
        drop(guard);
        let r = meter.reading();
        assert_eq!((r.in_flight, r.completed), (0, 1));
        meter.record(Duration::from_millis(2), Duration::from_millis(1));
        let r = meter.reading();
        assert_eq!(r.completed, 2);
        assert!(r.latency_ns >= 2_000_000 && r.cpu_ns >= 1_000_000);
    }

    #[test]
    fn the_machine_signals_read() {
        let s = SystemSignals::default();
        assert!(s.rss_bytes().unwrap() > 0);
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_millis(5) {}
        assert!(s.process_cpu() > Duration::ZERO);
        // PSI may be absent (None); where present it parses.
        let _ = s.psi(Resource::Memory);
    }
}
