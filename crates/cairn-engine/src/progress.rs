//! Progress of a long operation, shared between the engine, which counts,
//! and a display, which polls: one [`Progress`] for backup, restore,
//! `restore --verify`, `check` and the simulator's runs, so the CLI draws
//! every bar from the same counters.

use std::sync::atomic::AtomicU64;

/// Progress shared with the caller (bytes of file content read so far).
/// Backup, restore, `restore --verify` and `check` fill it in; a display
/// polls it.
#[derive(Debug, Default)]
pub struct Progress {
    pub bytes_done: AtomicU64,
    pub files_done: AtomicU64,
    /// Total input bytes if known (0 = unknown).
    pub bytes_total: AtomicU64,
    /// Total files (or, for `check`, items) if known (0 = unknown).
    pub files_total: AtomicU64,
    /// What is being worked on now (a path; empty if nothing to show).
    pub current: parking_lot::Mutex<String>,
}

impl Progress {
    /// Records known totals. `bytes` is stored as at least 1, so a display
    /// can tell "known, nothing to do" from "unknown".
    pub fn set_totals(&self, files: u64, bytes: u64) {
        self.files_total
            .store(files, std::sync::atomic::Ordering::Relaxed);
        self.bytes_total
            .store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Names what is being worked on now.
    pub fn set_current(&self, what: impl std::fmt::Display) {
        let mut c = self.current.lock();
        c.clear();
        use std::fmt::Write;
        let _ = write!(c, "{what}");
    }
}
