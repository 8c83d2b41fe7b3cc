//! The state the FUSE layer serves from: the inode table, the open
//! handles, the content seam and the inode locks, and whether passthrough
//! is on. `namespace` and `data` implement the operations on it; `fs`
//! answers the kernel with them.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fuser::Request;

use super::handles::Handles;
use super::inodes::Inodes;
use super::options::{MountOptions, Space};
use crate::content::Content;
use crate::inode_locks::InodeLocks;
use crate::scheduler::ForegroundMeter;

/// The caller of a request: who owns what it creates.
#[derive(Clone, Copy)]
pub(super) struct Caller {
    pub uid: u32,
    pub gid: u32,
}

impl Caller {
    pub(super) fn of(req: &Request) -> Self {
        Caller {
            uid: req.uid(),
            gid: req.gid(),
        }
    }
}

pub(crate) struct VolumeFs {
    pub(super) inodes: Inodes,
    pub(super) handles: Handles,
    pub(super) content: Arc<dyn Content>,
    pub(super) locks: Arc<InodeLocks>,
    pub(super) space: Arc<dyn Space>,
    /// Counts the requests that serve the workload (`fs`).
    pub(super) meter: Arc<ForegroundMeter>,
    /// Passthrough asked for by the options.
    pub(super) passthrough_wanted: bool,
    /// Passthrough granted by the kernel and still working (cleared, with
    /// one warning, if registering a backing file fails).
    pub(super) passthrough: AtomicBool,
    pub(super) stack_depth: u32,
    /// The daemon runs as root: new files then belong to their creator.
    pub(super) root: bool,
}

impl VolumeFs {
    pub(super) fn new(
        root: OwnedFd,
        content: Arc<dyn Content>,
        locks: Arc<InodeLocks>,
        options: &MountOptions,
        stack_depth: u32,
    ) -> std::io::Result<Self> {
        Ok(VolumeFs {
            inodes: Inodes::new(root)?,
            handles: Handles::default(),
            content,
            locks,
            space: options.space.clone(),
            meter: options.meter.clone(),
            passthrough_wanted: options.passthrough,
            passthrough: AtomicBool::new(false),
            stack_depth,
            root: rustix::process::geteuid().is_root(),
        })
    }

    /// The backing inode number of FUSE inode `ino`: the key of the
    /// content state and of the inode locks.
    pub(super) fn backing_ino(&self, ino: u64) -> u64 {
        self.inodes.fuse_ino(ino)
    }

    /// Stops using passthrough after the kernel refused it once.
    pub(super) fn passthrough_failed(&self, e: &std::io::Error) {
        if self.passthrough.swap(false, Ordering::Relaxed) {
            eprintln!(
                "cairn: warning: FUSE passthrough refused ({e}); plain files are served \
                 through the daemon"
            );
        }
    }
}
