//! How a mount is served ([`MountOptions`]) and the `statfs` hook
//! ([`Space`]) through which the volume can report its own space.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use crate::scheduler::ForegroundMeter;

/// Space figures `statfs` reports, in the units `statvfs` uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpaceStats {
    /// Total, free and available-to-users blocks of `frsize` bytes.
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    /// Total and free inodes.
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// What `statfs` on the mount reports: the hook by which the volume can
/// report logical and physical space instead of the backing file system's.
pub trait Space: Send + Sync {
    /// The figures for the volume whose backing root is `backing_root`.
    fn statfs(&self, backing_root: BorrowedFd<'_>) -> io::Result<SpaceStats>;
}

/// The backing file system's own figures.
#[derive(Debug, Default, Clone, Copy)]
pub struct BackingSpace;

impl Space for BackingSpace {
    fn statfs(&self, backing_root: BorrowedFd<'_>) -> io::Result<SpaceStats> {
        let v = rustix::fs::fstatvfs(backing_root)?;
        Ok(SpaceStats {
            blocks: v.f_blocks,
            bfree: v.f_bfree,
            bavail: v.f_bavail,
            files: v.f_files,
            ffree: v.f_ffree,
            bsize: u32::try_from(v.f_bsize).unwrap_or(4096),
            namelen: u32::try_from(v.f_namemax).unwrap_or(255),
            frsize: u32::try_from(v.f_frsize).unwrap_or(4096),
        })
    }
}

/// How the mount is served.
#[derive(Clone)]
pub struct MountOptions {
    /// Request-serving threads (at least 1).
    pub threads: usize,
    /// Open plain files in passthrough mode when the kernel supports it;
    /// off serves every read and write through the daemon (to measure).
    pub passthrough: bool,
    /// Let users other than the one who mounted use the mount (`allow_other`;
    /// root may always mount so).
    pub allow_other: bool,
    /// What `statfs` reports.
    pub space: Arc<dyn Space>,
    /// Where the mount counts the workload's requests (the job
    /// scheduler's foreground demand, `crate::scheduler`).
    pub meter: Arc<ForegroundMeter>,
    /// How far the kernel reads ahead of a sequential reader of the mount,
    /// in KiB (its `read_ahead_kb`, `crate::fuse::read_ahead`); `None`
    /// leaves the kernel's default (128 KiB).
    pub read_ahead_kib: Option<u32>,
}

/// The mount's read-ahead by default: 1 MiB, so a sequential reader of an
/// optimized file asks in 1 MiB requests (the most one FUSE request
/// carries) instead of 128 KiB ones, and the daemon decodes each chunk
/// run in one go (docs/volume.md, "Measured").
pub const DEFAULT_READ_AHEAD_KIB: u32 = 1024;

impl Default for MountOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        MountOptions {
            threads: cores.clamp(2, 8),
            passthrough: true,
            allow_other: false,
            space: Arc::new(BackingSpace),
            meter: Arc::default(),
            read_ahead_kib: Some(DEFAULT_READ_AHEAD_KIB),
        }
    }
}
