//! The two system calls std does not wrap: `getrusage(RUSAGE_SELF)` (CPU
//! time of this process, all threads) and `wait4` (reaps one child and
//! returns *its own* resource usage, so its peak RSS is not mixed with other
//! children's as `RUSAGE_CHILDREN` would be). The only unsafe code of the
//! crate; each call passes pointers to live, zeroed locals.
#![allow(unsafe_code)]

use std::io;
use std::time::Duration;

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// User + system CPU time consumed so far by this process (all threads).
pub fn cpu_time() -> Duration {
    // SAFETY: `ru` is a valid, writable rusage; getrusage only writes it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if r != 0 {
        return Duration::ZERO;
    }
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// How a reaped child ended, with its own peak RSS and CPU time.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    /// Exit code, or `None` if a signal ended it.
    pub code: Option<i32>,
    pub max_rss_bytes: u64,
    pub cpu: Duration,
}

/// Waits for child `pid` (which must not be waited for any other way).
pub fn wait_child(pid: u32) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: as above; `status` and `ru` are valid for writes.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let code = if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    };
    Ok(Reaped {
        code,
        // Linux reports ru_maxrss in KiB.
        max_rss_bytes: ru.ru_maxrss.max(0) as u64 * 1024,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    })
}
