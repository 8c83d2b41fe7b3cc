//! Per-inode locks and open-handle counts shared by the FUSE layer and the
//! background jobs. A job switches a file (optimized, recalled, forgotten)
//! only under its lock and only while no handle has it open for
//! passthrough; the FUSE layer takes the same lock around every content
//! call (`crate::content`).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

/// Shards of the lock table: inodes hash onto one of these mutexes, so the
/// table needs no entry per inode and never grows.
const SHARDS: usize = 256;

/// The lock table and the open counts.
#[derive(Debug)]
pub struct InodeLocks {
    shards: Vec<Mutex<()>>,
    open: Mutex<HashMap<u64, OpenCount>>,
    /// Per inode, how many content changes (writes, truncates) the mount
    /// has made since it started: an optimization switches a file only if
    /// this is what it was when the file was scanned.
    changes: Mutex<HashMap<u64, u64>>,
}

/// How many handles have an inode open, and how many of those the kernel
/// serves directly (passthrough: the volume never sees their I/O).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpenCount {
    pub handles: u32,
    pub passthrough: u32,
}

impl Default for InodeLocks {
    fn default() -> Self {
        InodeLocks {
            shards: (0..SHARDS).map(|_| Mutex::new(())).collect(),
            open: Mutex::new(HashMap::new()),
            changes: Mutex::new(HashMap::new()),
        }
    }
}

impl InodeLocks {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Holds `ino`'s lock until the guard drops. Two inodes may share a
    /// shard: never hold one inode's guard while taking another's.
    pub fn lock(&self, ino: u64) -> MutexGuard<'_, ()> {
        self.shards[(cairn_core::mix64(ino) as usize) % SHARDS].lock()
    }

    /// A handle on `ino` was opened (`passthrough`: served by the kernel).
    pub fn opened(&self, ino: u64, passthrough: bool) {
        let mut open = self.open.lock();
        let c = open.entry(ino).or_default();
        c.handles += 1;
        c.passthrough += u32::from(passthrough);
    }

    /// A handle opened by [`InodeLocks::opened`] was released.
    pub fn closed(&self, ino: u64, passthrough: bool) {
        let mut open = self.open.lock();
        if let Some(c) = open.get_mut(&ino) {
            c.handles = c.handles.saturating_sub(1);
            c.passthrough = c.passthrough.saturating_sub(u32::from(passthrough));
            if c.handles == 0 {
                open.remove(&ino);
            }
        }
    }

    /// The content of `ino` changed (called under its lock, before the
    /// change is made).
    pub fn changed(&self, ino: u64) {
        *self.changes.lock().entry(ino).or_default() += 1;
    }

    /// How many times [`InodeLocks::changed`] was called for `ino`.
    pub fn change_count(&self, ino: u64) -> u64 {
        self.changes.lock().get(&ino).copied().unwrap_or(0)
    }

    /// The handles `ino` has open now.
    pub fn open_count(&self, ino: u64) -> OpenCount {
        self.open.lock().get(&ino).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_counts_follow_opens_and_closes() {
        let l = InodeLocks::new();
        l.opened(5, true);
        l.opened(5, false);
        assert_eq!(
            l.open_count(5),
            OpenCount {
                handles: 2,
                passthrough: 1
            }
        );
        l.closed(5, true);
        l.closed(5, false);
        assert_eq!(l.open_count(5), OpenCount::default());
        drop(l.lock(5));
        assert_eq!(l.change_count(5), 0);
        l.changed(5);
        assert_eq!(l.change_count(5), 1);
    }
}
