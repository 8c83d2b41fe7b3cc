//! The volume's read-write FUSE layer: serves the backing tree (names,
//! directories, metadata, links, xattrs) through the kernel, and asks
//! [`Content`] for the bytes of every regular file the daemon reads or
//! writes, under the file's lock in [`InodeLocks`].
//!
//! - `inodes`: the inode table (FUSE inode = backing `st_ino`, an `O_PATH`
//!   descriptor and lookup count per inode);
//! - `handles`: open files and directories, and each inode's I/O mode
//!   (passthrough or cached);
//! - `state`: what the layer serves from (tables, content seam, locks);
//! - `namespace` (names, metadata, xattrs) and `data` (open, read, write,
//!   truncate, sync, release): the operations on that state;
//! - `fs`: the `fuser::Filesystem` the kernel talks to, replying with them;
//! - `options`: [`MountOptions`] and the `statfs` hook [`Space`];
//! - `attr`: backing `stat`s as FUSE attributes, errnos.
//!
//! Every request that serves the workload is counted in the mount's
//! `ForegroundMeter` (`MountOptions::meter`), the job scheduler's measure
//! of foreground demand.
//!
//! A plain file (all its bytes in the backing file) is opened in
//! passthrough mode where the kernel offers it: the kernel reads and writes
//! the backing file itself and the daemon sees only open, fsync and
//! release. Everything else goes through the daemon and the kernel's page
//! cache (no direct I/O, so `mmap` works; no writeback cache, so each write
//! reaches the daemon when it is made: docs/volume.md, "FUSE layer").

mod attr;
mod data;
mod fs;
mod handles;
mod inodes;
mod namespace;
mod options;
mod read_ahead;
mod state;

pub use options::{BackingSpace, MountOptions, Space, SpaceStats, DEFAULT_READ_AHEAD_KIB};

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{BackgroundSession, Config, MountOption, Session, SessionACL, SessionUnmounter};
use rustix::fs::{Mode, OFlags};

use crate::content::Content;
use crate::inode_locks::InodeLocks;
use state::VolumeFs;

/// Why the mount could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    #[error("backing tree {path}: {source}")]
    Backing { path: PathBuf, source: io::Error },
    #[error("mountpoint {path}: {why}")]
    Mountpoint { path: PathBuf, why: String },
    #[error("FUSE unavailable: {0}")]
    Unavailable(String),
    #[error("mounting {path}: {source}")]
    Mount { path: PathBuf, source: io::Error },
    #[error("serving {path}: {source}")]
    Serve { path: PathBuf, source: io::Error },
    #[error("unmounting {path}: {source}")]
    Unmount { path: PathBuf, source: io::Error },
}

/// A running mount served by background threads: [`MountHandle::unmount`]
/// or dropping it unmounts (lazily, if files on it are still in use).
pub struct MountHandle {
    session: Option<BackgroundSession>,
    mountpoint: PathBuf,
}

impl MountHandle {
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Unmounts and waits for the serving threads to end. Fails (still
    /// mounted) while a file on the mount is in use.
    pub fn unmount(mut self) -> Result<(), FuseError> {
        let session = self.session.take().expect("mounted until unmounted");
        let done = match unmount_waiting_out_busy(&self.mountpoint) {
            Ok(true) => session.join(),
            Ok(false) => session.umount_and_join(),
            Err(source) => {
                // Still mounted: hand the session back so dropping the
                // handle detaches it.
                self.session = Some(session);
                Err(source)
            }
        };
        done.map_err(|source| FuseError::Unmount {
            path: self.mountpoint.clone(),
            source,
        })
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            if session.umount_and_join().is_err() {
                // Busy: detach it; the threads end when its last user does.
                let _ =
                    rustix::mount::unmount(&self.mountpoint, rustix::mount::UnmountFlags::DETACH);
            }
        }
    }
}

/// Unmounts a mount served by [`serve`] from another thread (a signal
/// handler); `serve` then returns.
pub struct Unmounter {
    session: SessionUnmounter,
    mountpoint: PathBuf,
}

impl Unmounter {
    pub fn unmount(&mut self) -> io::Result<()> {
        if unmount_waiting_out_busy(&self.mountpoint)? {
            return Ok(());
        }
        self.session.unmount()
    }
}

/// How long an unmount waits for the mount to stop being busy.
const BUSY_UNMOUNT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Unmounts `mountpoint` itself, retrying while the kernel answers EBUSY
/// for up to [`BUSY_UNMOUNT_WAIT`]: a file closed just before can still be
/// held for a moment by a child another thread is forking (its copy of the
/// descriptor table lives until it execs), and fuser gives up its mount at
/// the first failed attempt, so a retry must happen before fuser's.
/// True when this unmounted it; false leaves the unmount to fuser: without
/// the privilege to unmount (EPERM: not root) fuser goes through
/// `fusermount3 -u`, and on EINVAL (not a mount point here) fuser knows
/// better. After a true, fuser must not try again: it may not yet see the
/// mount gone, and its own attempt would fail with EINVAL.
fn unmount_waiting_out_busy(mountpoint: &Path) -> io::Result<bool> {
    use rustix::io::Errno;
    use rustix::mount::{unmount, UnmountFlags};
    let deadline = std::time::Instant::now() + BUSY_UNMOUNT_WAIT;
    loop {
        match unmount(mountpoint, UnmountFlags::empty()) {
            Ok(()) => return Ok(true),
            Err(Errno::PERM) | Err(Errno::INVAL) => return Ok(false),
            Err(Errno::BUSY) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Mounts the backing tree `backing_root` at `mountpoint` and serves it on
/// background threads until the handle is unmounted or dropped.
pub fn mount(
    backing_root: &Path,
    mountpoint: &Path,
    content: Arc<dyn Content>,
    locks: Arc<InodeLocks>,
    options: MountOptions,
) -> Result<MountHandle, FuseError> {
    let session = session(backing_root, mountpoint, content, locks, options)?;
    let mountpoint = mountpoint.to_path_buf();
    let session = session.spawn().map_err(|source| FuseError::Serve {
        path: mountpoint.clone(),
        source,
    })?;
    Ok(MountHandle {
        session: Some(session),
        mountpoint,
    })
}

/// Mounts as [`mount`] does and serves on the calling thread (and its
/// helpers) until the file system is unmounted, from outside or through the
/// [`Unmounter`] handed to `on_mounted` once the mount is up.
pub fn serve(
    backing_root: &Path,
    mountpoint: &Path,
    content: Arc<dyn Content>,
    locks: Arc<InodeLocks>,
    options: MountOptions,
    on_mounted: impl FnOnce(Unmounter),
) -> Result<(), FuseError> {
    let mut session = session(backing_root, mountpoint, content, locks, options)?;
    on_mounted(Unmounter {
        session: session.unmount_callable(),
        mountpoint: mountpoint.to_path_buf(),
    });
    session.run().map_err(|source| FuseError::Serve {
        path: mountpoint.to_path_buf(),
        source,
    })
}

/// The character device every FUSE mount talks through.
const FUSE_DEVICE: &str = "/dev/fuse";

fn session(
    backing_root: &Path,
    mountpoint: &Path,
    content: Arc<dyn Content>,
    locks: Arc<InodeLocks>,
    options: MountOptions,
) -> Result<Session<VolumeFs>, FuseError> {
    let backing = |source: io::Error| FuseError::Backing {
        path: backing_root.to_path_buf(),
        source,
    };
    let root = rustix::fs::open(
        backing_root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| backing(e.into()))?;
    match std::fs::metadata(mountpoint) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(FuseError::Mountpoint {
                path: mountpoint.to_path_buf(),
                why: "not a directory".into(),
            })
        }
        Err(e) => {
            return Err(FuseError::Mountpoint {
                path: mountpoint.to_path_buf(),
                why: e.to_string(),
            })
        }
    }
    if !Path::new(FUSE_DEVICE).exists() {
        return Err(FuseError::Unavailable(format!(
            "{FUSE_DEVICE} does not exist"
        )));
    }
    raise_open_file_limit();
    let stack_depth = passthrough_stack_depth(root.as_fd());
    let fs = VolumeFs::new(root, content, locks, &options, stack_depth).map_err(backing)?;

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("cairn-volume".into()),
        MountOption::Subtype("cairn-volume".into()),
        MountOption::DefaultPermissions,
        MountOption::RW,
        MountOption::NoSuid,
    ];
    config.acl = if options.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(options.threads.max(1));
    config.clone_fd = true;
    let session = Session::new(fs, mountpoint, &config).map_err(|source| FuseError::Mount {
        path: mountpoint.to_path_buf(),
        source,
    })?;
    if let Some(kib) = options.read_ahead_kib {
        // Without it the mount works, with the kernel's default read-ahead:
        // expected for a user other than root, or a read-only sysfs.
        match read_ahead::set(mountpoint, kib) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                ) => {}
            Err(e) => {
                eprintln!("cairn: note: the mount's read-ahead stays the kernel's default: {e}")
            }
        }
    }
    Ok(session)
}

/// The inode table holds a descriptor per inode the kernel knows, so the
/// daemon may need many: the soft limit is raised to the hard one.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
}

/// The file-system stacking depth passthrough needs: 1 over an ordinary
/// file system (so the mount may itself be the lower layer of an overlay),
/// 2 when the backing tree is itself on an overlay (as in many containers).
fn passthrough_stack_depth(root: BorrowedFd<'_>) -> u32 {
    const OVERLAYFS_SUPER_MAGIC: u64 = 0x794c_7630;
    match rustix::fs::fstatfs(root) {
        #[allow(clippy::unnecessary_cast)]
        Ok(s) if s.f_type as u64 == OVERLAYFS_SUPER_MAGIC => 2,
        _ => 1,
    }
}
