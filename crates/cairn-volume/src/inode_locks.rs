//! Per-inode locks and open-handle counts shared by the FUSE layer and the
//! background jobs. A job switches a file (optimized, recalled, forgotten)
//! only under its lock and only while no handle has it open for
//! passthrough; the FUSE layer takes the same lock around every content
//! call (`crate::content`).
//!
//! A lock is a read/write lock: reads of a file's bytes take it shared
//! ([`InodeLocks::read`]), so the kernel's concurrent requests for one file
//! (its read-ahead) are served together; everything that changes the file
//! or what its bytes come from (a write and its recall, a truncate, an
//! open that truncates, a release, a job's switch) takes it exclusive
//! ([`InodeLocks::lock`]), so no read runs across such a change and no two
//! changes interleave. A waiting exclusive locker is not starved by a
//! stream of reads (the lock is fair to it).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Shards of the lock table: inodes hash onto one of these locks, so the
/// table needs no entry per inode and never grows.
const SHARDS: usize = 256;

/// The lock table and the open counts.
#[derive(Debug)]
pub struct InodeLocks {
    shards: Vec<RwLock<()>>,
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
            shards: (0..SHARDS).map(|_| RwLock::new(())).collect(),
            open: Mutex::new(HashMap::new()),
            changes: Mutex::new(HashMap::new()),
        }
    }
}

impl InodeLocks {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn shard(&self, ino: u64) -> &RwLock<()> {
        &self.shards[(cairn_core::mix64(ino) as usize) % SHARDS]
    }

    /// Holds `ino`'s lock exclusively until the guard drops: for any change
    /// of the file's content or of where it comes from. Two inodes may
    /// share a shard: never hold one inode's guard (of either kind) while
    /// taking another's, nor take a guard twice on one thread.
    pub fn lock(&self, ino: u64) -> RwLockWriteGuard<'_, ()> {
        self.shard(ino).write()
    }

    /// Holds the locks of every inode of `inos` exclusively until the
    /// guards drop: for a job switching several files under one durable
    /// commit. Each shard is taken once, in ascending order, so two such
    /// holders never wait for each other in a cycle; as with [`Self::lock`],
    /// nothing else may be held while taking them.
    pub fn lock_many(&self, inos: &[u64]) -> Vec<RwLockWriteGuard<'_, ()>> {
        let mut shards: Vec<usize> = inos
            .iter()
            .map(|&ino| (cairn_core::mix64(ino) as usize) % SHARDS)
            .collect();
        shards.sort_unstable();
        shards.dedup();
        shards.into_iter().map(|i| self.shards[i].write()).collect()
    }

    /// Holds `ino`'s lock shared until the guard drops: for reading its
    /// bytes, beside other reads but never beside a change.
    pub fn read(&self, ino: u64) -> RwLockReadGuard<'_, ()> {
        self.shard(ino).read()
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

    #[test]
    fn lock_many_takes_each_shard_once_and_excludes_reads() {
        let l = InodeLocks::new();
        let index = |ino: u64| (cairn_core::mix64(ino) as usize) % SHARDS;
        // More inodes than shards: many shards are shared by several (a
        // shard taken twice on one thread would deadlock here).
        let inos: Vec<u64> = (0..(SHARDS as u64) * 3).collect();
        let distinct: std::collections::HashSet<usize> = inos.iter().map(|&i| index(i)).collect();
        let guards = l.lock_many(&inos);
        assert_eq!(guards.len(), distinct.len());
        assert!(l.shard(7).try_read().is_none());
        drop(guards);
        assert!(l.shard(7).try_read().is_some());
        let some = l.lock_many(&[1, 2, 1]);
        assert_eq!(some.len(), if index(1) == index(2) { 1 } else { 2 });
    }

    #[test]
    fn reads_share_a_lock_and_a_change_excludes_them() {
        let l = InodeLocks::new();
        let first = l.read(9);
        // A second read is let in while the first holds the lock.
        let second = l.shard(9).try_read();
        assert!(second.is_some());
        assert!(l.shard(9).try_write().is_none(), "a change waits for reads");
        drop(second);
        drop(first);
        let change = l.lock(9);
        assert!(l.shard(9).try_read().is_none(), "a read waits for a change");
        drop(change);
        assert!(l.shard(9).try_read().is_some());
    }
}
