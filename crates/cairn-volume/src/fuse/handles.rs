//! Open handles: regular files (the backing file open in the access mode
//! asked for, and whether the kernel serves it by passthrough) and
//! directories (the listing being read), plus the per-inode I/O mode the
//! kernel requires: all handles of an inode open at once are either
//! passthrough, sharing one backing id, or cached (served by the daemon
//! through the kernel's page cache); the kernel fails an open that mixes
//! them. Modes change only under the inode's lock
//! ([`crate::inode_locks::InodeLocks`]).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fuser::{BackingId, Errno, FileType};
use parking_lot::Mutex;

/// An open regular file.
pub(super) struct OpenFile {
    pub ino: u64,
    /// The backing file (never `O_APPEND`: the kernel sends each write's
    /// offset, the end of file for an append).
    pub file: File,
    pub writable: bool,
    /// Served by the kernel straight from the backing file: the daemon sees
    /// no read or write of it.
    pub passthrough: bool,
}

/// One row of a directory listing, as `getdents` gave it.
pub(super) struct DirRow {
    pub name: OsString,
    /// The backing `st_ino`.
    pub st_ino: u64,
    /// `None` when the backing file system did not say (`DT_UNKNOWN`).
    pub kind: Option<FileType>,
}

/// An open directory: its listing, read when the kernel reads from offset
/// 0 (the first read, or again after `rewinddir`), so later reads at other
/// offsets continue one consistent listing.
pub(super) struct OpenDir {
    pub dir: File,
    pub rows: Mutex<Option<Vec<DirRow>>>,
}

/// How the open handles of one inode are served.
pub(super) struct IoMode {
    pub handles: u32,
    /// Passthrough: the backing id every handle of the inode shares.
    pub backing: Option<Arc<BackingId>>,
}

#[derive(Default)]
pub(super) struct Handles {
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    dirs: Mutex<HashMap<u64, Arc<OpenDir>>>,
    pub modes: Mutex<HashMap<u64, IoMode>>,
    /// Regular files whose last name was removed while a handle held them:
    /// the content state forgets them when the last handle goes.
    pub unlinked: Mutex<HashSet<u64>>,
    next: AtomicU64,
}

impl Handles {
    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn add_file(&self, f: OpenFile) -> u64 {
        let fh = self.next();
        self.files.lock().insert(fh, Arc::new(f));
        fh
    }

    pub fn file(&self, fh: u64) -> Result<Arc<OpenFile>, Errno> {
        self.files.lock().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    pub fn remove_file(&self, fh: u64) -> Option<Arc<OpenFile>> {
        self.files.lock().remove(&fh)
    }

    pub fn add_dir(&self, d: OpenDir) -> u64 {
        let fh = self.next();
        self.dirs.lock().insert(fh, Arc::new(d));
        fh
    }

    pub fn dir(&self, fh: u64) -> Result<Arc<OpenDir>, Errno> {
        self.dirs.lock().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    pub fn remove_dir(&self, fh: u64) {
        self.dirs.lock().remove(&fh);
    }
}
