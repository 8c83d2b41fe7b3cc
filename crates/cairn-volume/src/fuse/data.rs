//! The operations on a regular file's bytes and attributes: open and
//! create (choosing passthrough or cached I/O), read, write, truncate,
//! `fallocate`, fsync and release. Every call into [`Content`] is made with
//! the file's inode lock held (shared for a read, exclusive for the rest:
//! [`InodeLocks`]), and every change of content counts
//! (`InodeLocks::changed`) before it is made, so an optimization that
//! scanned the file sees it changed and leaves it for the next run.
//!
//! [`Content`]: crate::content::Content
//! [`InodeLocks`]: crate::inode_locks::InodeLocks

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fuser::{BackingId, Errno, FileAttr, FileType, FopenFlags, TimeOrNow};
use rustix::fs::{AtFlags, FallocateFlags, Gid, Mode, OFlags, Timespec, Timestamps, Uid, CWD};

use super::attr::{errno, io_errno};
use super::handles::{IoMode, OpenFile};
use super::inodes::{component, proc_path, stat_fd};
use super::state::{Caller, VolumeFs};

/// Registers a backing file for passthrough (the reply's `open_backing`).
pub(super) type OpenBacking<'a> = &'a dyn Fn(&File) -> std::io::Result<BackingId>;

/// An opened handle, for the reply.
pub(super) struct Opened {
    pub fh: u64,
    pub flags: FopenFlags,
    /// Passthrough: the inode's backing id.
    pub backing: Option<Arc<BackingId>>,
}

/// What a `setattr` changes.
pub(super) struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
    pub fh: Option<u64>,
}

/// `fallocate` modes that keep the content as it is (allocate blocks,
/// zeros past the end) and that zero a range.
const FALLOC_KEEP_SIZE: i32 = 0x01;
const FALLOC_PUNCH_HOLE: i32 = 0x02;
const FALLOC_ZERO_RANGE: i32 = 0x10;

/// The flags the backing file is opened with for open flags `flags`:
/// `O_RDWR` for any write access (the daemon may read what it recalls or
/// reads for the page cache), and of the rest only the synchronous-write
/// flags. Never `O_APPEND` (the kernel sends each write's offset), nor
/// `O_TRUNC` (the daemon truncates under the inode lock), nor `O_CREAT`.
fn backing_flags(flags: i32) -> (OFlags, bool) {
    let acc = flags & 0o3;
    let trunc = flags & (OFlags::TRUNC.bits() as i32) != 0;
    let writable = acc != 0 || trunc;
    let mut o = if writable {
        OFlags::RDWR
    } else {
        OFlags::RDONLY
    };
    o |= OFlags::CLOEXEC;
    o |= OFlags::from_bits_retain(flags as u32) & (OFlags::SYNC | OFlags::DSYNC);
    (o, writable)
}

/// A timestamp for `utimensat`: left as it is, now, or the time given.
fn timespec(t: Option<TimeOrNow>) -> Timespec {
    match t {
        None => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => {
            let (secs, nsec) = match t.duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
                Err(e) => {
                    // Before 1970: whole seconds down, nanoseconds up.
                    let d = e.duration();
                    let mut secs = -(d.as_secs() as i64);
                    let mut nsec = d.subsec_nanos();
                    if nsec > 0 {
                        secs -= 1;
                        nsec = 1_000_000_000 - nsec;
                    }
                    (secs, nsec)
                }
            };
            Timespec {
                tv_sec: secs,
                tv_nsec: nsec.into(),
            }
        }
    }
}

impl VolumeFs {
    /// Opens inode `fd`'s backing file for a handle. A daemon that is not
    /// root may not read a write-only file: it is then opened write-only
    /// (the kernel sends no reads for a write-only handle).
    fn open_backing_file(fd: &OwnedFd, flags: OFlags) -> Result<File, Errno> {
        let path = proc_path(fd);
        let f = match rustix::fs::open(&path, flags, Mode::empty()) {
            Err(rustix::io::Errno::ACCESS) if flags.contains(OFlags::RDWR) => {
                let write_only = (flags - OFlags::RDWR) | OFlags::WRONLY;
                rustix::fs::open(&path, write_only, Mode::empty())
            }
            r => r,
        };
        Ok(File::from(f.map_err(errno)?))
    }

    /// Makes the handle for `file`, the backing file of `ino` just opened:
    /// truncates it first if asked, then serves it in the inode's current
    /// I/O mode, or (first handle) by passthrough if the file is plain and
    /// the kernel takes it, else cached.
    fn register(
        &self,
        ino: u64,
        file: File,
        writable: bool,
        truncate: bool,
        open_backing: OpenBacking<'_>,
    ) -> Result<Opened, Errno> {
        let bino = self.backing_ino(ino);
        let _lock = self.locks.lock(bino);
        if truncate {
            self.locks.changed(bino);
            file.set_len(0).map_err(io_errno)?;
            self.content.truncated(bino, &file, 0).map_err(io_errno)?;
        }
        // The modes of `bino` change only under its lock, held here: the
        // table's own lock is not held across the calls below.
        let current = self
            .handles
            .modes
            .lock()
            .get(&bino)
            .map(|m| m.backing.clone());
        let backing = match current {
            Some(backing) => backing,
            None if self.passthrough.load(std::sync::atomic::Ordering::Relaxed)
                && self.content.is_plain(bino) =>
            {
                match open_backing(&file) {
                    Ok(id) => Some(Arc::new(id)),
                    Err(e) => {
                        self.passthrough_failed(&e);
                        None
                    }
                }
            }
            None => None,
        };
        self.handles
            .modes
            .lock()
            .entry(bino)
            .or_insert(IoMode {
                handles: 0,
                backing: backing.clone(),
            })
            .handles += 1;
        let passthrough = backing.is_some();
        let mut flags = FopenFlags::empty();
        if passthrough {
            if writable {
                // The daemon will not see these writes: count them now
                // (and again at release).
                self.locks.changed(bino);
            }
        } else {
            // Everything that changes the file goes through the kernel,
            // which keeps its cache right, and a job's switch keeps the
            // bytes, so cached pages stay valid across cached opens. A
            // passthrough open is made without this flag: the kernel drops
            // what it cached before, so pages cached before passthrough
            // writes are never served after them.
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        self.locks.opened(bino, passthrough);
        let fh = self.handles.add_file(OpenFile {
            ino,
            file,
            writable,
            passthrough,
        });
        Ok(Opened { fh, flags, backing })
    }

    pub(super) fn open_file(
        &self,
        ino: u64,
        flags: i32,
        open_backing: OpenBacking<'_>,
    ) -> Result<Opened, Errno> {
        let (fd, kind) = self.inodes.get(ino)?;
        if kind != FileType::RegularFile {
            return Err(if kind == FileType::Directory {
                Errno::EISDIR
            } else {
                Errno::EINVAL
            });
        }
        let (oflags, writable) = backing_flags(flags);
        let file = Self::open_backing_file(&fd, oflags)?;
        let truncate = flags & (OFlags::TRUNC.bits() as i32) != 0;
        self.register(ino, file, writable, truncate, open_backing)
    }

    /// `create`: a new regular file `name` in `parent`, opened; an existing
    /// one is opened unless `O_EXCL` was asked.
    pub(super) fn create_file(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        open_backing: OpenBacking<'_>,
    ) -> Result<(FileAttr, Opened), Errno> {
        let dir = self.inodes.fd(parent)?;
        let name = component(name)?;
        let parent_st = stat_fd(&*dir)?;
        let (oflags, writable) = backing_flags(flags);
        let created = rustix::fs::openat(
            &*dir,
            name,
            oflags | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o600),
        );
        let exclusive = flags & (OFlags::EXCL.bits() as i32) != 0;
        let (file, new) = match created {
            Ok(f) => (File::from(f), true),
            Err(rustix::io::Errno::EXIST) if !exclusive => {
                // Made by someone else meanwhile: open it as `open` would.
                let (fd, st) = self.inodes.open_child(&dir, name)?;
                if super::attr::file_type(st.st_mode) != FileType::RegularFile {
                    return Err(Errno::EISDIR);
                }
                (Self::open_backing_file(&fd, oflags)?, false)
            }
            Err(e) => return Err(errno(e)),
        };
        if new {
            if self.root {
                let gid = if parent_st.st_mode & super::attr::libc_mode::S_ISGID != 0 {
                    parent_st.st_gid
                } else {
                    caller.gid
                };
                rustix::fs::fchown(
                    &file,
                    Some(Uid::from_raw(caller.uid)),
                    Some(Gid::from_raw(gid)),
                )
                .map_err(errno)?;
            }
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o7777)).map_err(errno)?;
        }
        // The table's descriptor for the file just opened (not by name,
        // which another request may have replaced meanwhile).
        let path_fd = rustix::fs::open(
            proc_path(&file),
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)?;
        let st = stat_fd(&path_fd)?;
        let attr = self.inodes.remember(path_fd, &st);
        let truncate = !new && flags & (OFlags::TRUNC.bits() as i32) != 0;
        let opened = self.register(attr.ino.0, file, writable, truncate, open_backing)?;
        // A truncate changed the size the entry reports.
        let attr = if truncate {
            self.inodes.attr(attr.ino.0)?
        } else {
            attr
        };
        Ok((attr, opened))
    }

    /// Reads up to `size` bytes at `offset` into the front of `buf` (grown
    /// as needed; its bytes past the count returned are left as they were);
    /// returns how many.
    pub(super) fn read_file(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<usize, Errno> {
        let h = self.handles.file(fh)?;
        let bino = self.backing_ino(h.ino);
        if buf.len() < size as usize {
            buf.resize(size as usize, 0);
        }
        // Shared: other reads of the file run beside this one, never a
        // change of it.
        let _lock = self.locks.read(bino);
        self.content
            .read_at(bino, &h.file, offset, &mut buf[..size as usize])
            .map_err(io_errno)
    }

    pub(super) fn write_file(&self, fh: u64, offset: u64, data: &[u8]) -> Result<u32, Errno> {
        let h = self.handles.file(fh)?;
        if !h.writable {
            return Err(Errno::EBADF);
        }
        let len = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        let bino = self.backing_ino(h.ino);
        let _lock = self.locks.lock(bino);
        self.locks.changed(bino);
        self.content
            .prepare_write(bino, &h.file, offset, data.len() as u64)
            .map_err(io_errno)?;
        h.file.write_all_at(data, offset).map_err(io_errno)?;
        Ok(len)
    }

    pub(super) fn sync_file(&self, fh: u64, datasync: bool) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        let r = if datasync {
            h.file.sync_data()
        } else {
            h.file.sync_all()
        };
        r.map_err(io_errno)
    }

    pub(super) fn release_file(&self, fh: u64) {
        let Some(h) = self.handles.remove_file(fh) else {
            return;
        };
        let bino = self.backing_ino(h.ino);
        let _lock = self.locks.lock(bino);
        if h.passthrough && h.writable {
            self.locks.changed(bino);
        }
        self.locks.closed(bino, h.passthrough);
        {
            let mut modes = self.handles.modes.lock();
            if let Some(m) = modes.get_mut(&bino) {
                m.handles -= 1;
                if m.handles == 0 {
                    // Drops the last reference to the backing id: the
                    // kernel closes it.
                    modes.remove(&bino);
                }
            }
        }
        if self.locks.open_count(bino).handles == 0
            && self.handles.unlinked.lock().remove(&bino)
            && stat_fd(&h.file).is_ok_and(|s| s.st_nlink == 0)
        {
            self.release_content(bino);
        }
    }

    /// `truncate` of inode `ino` (through handle `h` if it may write).
    fn truncate(
        &self,
        ino: u64,
        fd: &OwnedFd,
        h: Option<&OpenFile>,
        size: u64,
    ) -> Result<(), Errno> {
        let owned;
        let file = match h {
            Some(h) if h.writable => &h.file,
            _ => {
                owned = Self::open_backing_file(fd, OFlags::WRONLY | OFlags::CLOEXEC)?;
                &owned
            }
        };
        let bino = self.backing_ino(ino);
        let _lock = self.locks.lock(bino);
        self.locks.changed(bino);
        file.set_len(size).map_err(io_errno)?;
        self.content.truncated(bino, file, size).map_err(io_errno)
    }

    /// `setattr`: size first (permissions as the kernel checked them), then
    /// owner, then mode (a change of owner may clear set-ID bits), then
    /// times (the other changes move the mtime).
    pub(super) fn set_attr(&self, ino: u64, c: AttrChange) -> Result<FileAttr, Errno> {
        let (fd, kind) = self.inodes.get(ino)?;
        if let Some(size) = c.size {
            match kind {
                FileType::RegularFile => {}
                FileType::Directory => return Err(Errno::EISDIR),
                _ => return Err(Errno::EINVAL),
            }
            let h = c.fh.and_then(|fh| self.handles.file(fh).ok());
            self.truncate(ino, &fd, h.as_deref(), size)?;
        }
        if c.uid.is_some() || c.gid.is_some() {
            rustix::fs::chownat(
                &*fd,
                "",
                c.uid.map(Uid::from_raw),
                c.gid.map(Gid::from_raw),
                AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(errno)?;
        }
        if let Some(mode) = c.mode {
            if kind == FileType::Symlink {
                return Err(Errno::EOPNOTSUPP);
            }
            let mode = Mode::from_raw_mode(mode & 0o7777);
            rustix::fs::chmodat(CWD, proc_path(&*fd), mode, AtFlags::empty()).map_err(errno)?;
        }
        if c.atime.is_some() || c.mtime.is_some() {
            let times = Timestamps {
                last_access: timespec(c.atime),
                last_modification: timespec(c.mtime),
            };
            if kind == FileType::Symlink {
                // No way to set a symlink's times by descriptor alone.
                rustix::fs::utimensat(&*fd, "", &times, AtFlags::EMPTY_PATH).map_err(|e| {
                    if e == rustix::io::Errno::INVAL {
                        Errno::EPERM
                    } else {
                        errno(e)
                    }
                })?;
            } else {
                rustix::fs::utimensat(CWD, proc_path(&*fd), &times, AtFlags::empty())
                    .map_err(errno)?;
            }
        }
        Ok(super::attr::to_attr(ino, &stat_fd(&*fd)?))
    }

    /// `fallocate`: allocating keeps the bytes (and zeros what it adds past
    /// the end); punching a hole or zeroing a range changes bytes, so the
    /// range is first made the backing file's (`prepare_write`).
    pub(super) fn allocate(&self, fh: u64, offset: u64, len: u64, mode: i32) -> Result<(), Errno> {
        let h = self.handles.file(fh)?;
        if !h.writable {
            return Err(Errno::EBADF);
        }
        let bino = self.backing_ino(h.ino);
        let _lock = self.locks.lock(bino);
        match mode & !FALLOC_KEEP_SIZE {
            0 => {
                let size = stat_fd(&h.file)?.st_size as u64;
                if mode & FALLOC_KEEP_SIZE == 0 && offset.saturating_add(len) > size {
                    self.locks.changed(bino);
                }
            }
            FALLOC_PUNCH_HOLE | FALLOC_ZERO_RANGE => {
                self.locks.changed(bino);
                self.content
                    .prepare_write(bino, &h.file, offset, len)
                    .map_err(io_errno)?;
            }
            _ => return Err(Errno::EOPNOTSUPP),
        }
        let flags = FallocateFlags::from_bits_retain(mode as u32);
        rustix::fs::fallocate(&h.file, flags, offset, len).map_err(errno)
    }
}
