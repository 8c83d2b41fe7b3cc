//! The operations on names and metadata: creating and removing entries,
//! links, renames, directory listings, xattrs, `statfs` and `access`. They
//! act on the backing tree through the inode table's descriptors (`*at`
//! calls relative to a directory's descriptor, `/proc/self/fd` paths where
//! an `O_PATH` descriptor cannot be used directly).
//!
//! New entries belong to the caller when the daemon runs as root (the
//! group of a set-group-ID directory, as the kernel does); their mode is
//! set after the owner, so a change of owner cannot clear bits asked for.
//! A regular file whose last name goes is reported to the content state
//! (`Content::released`) at once, or when its last open handle goes.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fuser::{
    AccessFlags, Errno, FileAttr, FileType, Generation, INodeNo, RenameFlags, ReplyDirectory,
    ReplyDirectoryPlus,
};
use rustix::fs::{AtFlags, Gid, Mode, OFlags, Stat, Uid, XattrFlags, CWD};

use super::attr::{backing_dev, errno, file_type, libc_mode, to_attr, TTL};
use super::handles::{DirRow, OpenDir};
use super::inodes::{component, proc_path, stat_fd};
use super::options::SpaceStats;
use super::state::{Caller, VolumeFs};

/// The largest xattr value or name list the kernel asks for (`XATTR_SIZE_MAX`).
const XATTR_MAX: usize = 64 * 1024;

impl VolumeFs {
    /// The owner a new entry in directory `parent` gets: `None` when the
    /// daemon is not root (it then owns everything it creates).
    fn new_owner(&self, caller: Caller, parent: &Stat) -> Option<(u32, u32)> {
        if !self.root {
            return None;
        }
        let gid = if parent.st_mode & libc_mode::S_ISGID != 0 {
            parent.st_gid
        } else {
            caller.gid
        };
        Some((caller.uid, gid))
    }

    /// Gives a just-created entry its owner and (not for a symlink) its
    /// mode, and counts the entry the kernel is about to receive.
    fn finish_new(
        &self,
        fd: OwnedFd,
        owner: Option<(u32, u32)>,
        mode: Option<u32>,
    ) -> Result<FileAttr, Errno> {
        if let Some((uid, gid)) = owner {
            rustix::fs::chownat(
                &fd,
                "",
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
                AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(errno)?;
        }
        if let Some(mode) = mode {
            rustix::fs::chmodat(
                CWD,
                proc_path(&fd),
                Mode::from_raw_mode(mode & 0o7777),
                AtFlags::empty(),
            )
            .map_err(errno)?;
        }
        let st = stat_fd(&fd)?;
        Ok(self.inodes.remember(fd, &st))
    }

    pub(super) fn make_dir(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        let dir = self.inodes.fd(parent)?;
        let name = component(name)?;
        let parent_st = stat_fd(&*dir)?;
        rustix::fs::mkdirat(&*dir, name, Mode::from_raw_mode(0o700)).map_err(errno)?;
        let (fd, _) = self.inodes.open_child(&dir, name)?;
        // A directory made in a set-group-ID directory is one too.
        let inherit = parent_st.st_mode & libc_mode::S_ISGID;
        self.finish_new(fd, self.new_owner(caller, &parent_st), Some(mode | inherit))
    }

    /// `mknod`: a regular file, fifo, socket or (as root) device node.
    pub(super) fn make_node(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Result<FileAttr, Errno> {
        let dir = self.inodes.fd(parent)?;
        let name = component(name)?;
        let parent_st = stat_fd(&*dir)?;
        let kind = match mode & libc_mode::S_IFMT {
            libc_mode::S_IFREG | 0 => rustix::fs::FileType::RegularFile,
            libc_mode::S_IFIFO => rustix::fs::FileType::Fifo,
            libc_mode::S_IFSOCK => rustix::fs::FileType::Socket,
            libc_mode::S_IFCHR => rustix::fs::FileType::CharacterDevice,
            libc_mode::S_IFBLK => rustix::fs::FileType::BlockDevice,
            _ => return Err(Errno::EINVAL),
        };
        if kind == rustix::fs::FileType::RegularFile {
            let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
            rustix::fs::openat(&*dir, name, flags, Mode::from_raw_mode(0o600)).map_err(errno)?;
        } else {
            let dev = backing_dev(rdev);
            rustix::fs::mknodat(&*dir, name, kind, Mode::from_raw_mode(0o600), dev)
                .map_err(errno)?;
        }
        let (fd, _) = self.inodes.open_child(&dir, name)?;
        self.finish_new(fd, self.new_owner(caller, &parent_st), Some(mode))
    }

    pub(super) fn make_symlink(
        &self,
        caller: Caller,
        parent: u64,
        name: &OsStr,
        target: &Path,
    ) -> Result<FileAttr, Errno> {
        let dir = self.inodes.fd(parent)?;
        let name = component(name)?;
        let parent_st = stat_fd(&*dir)?;
        rustix::fs::symlinkat(target, &*dir, name).map_err(errno)?;
        let (fd, _) = self.inodes.open_child(&dir, name)?;
        self.finish_new(fd, self.new_owner(caller, &parent_st), None)
    }

    /// `link`: a new name for inode `ino`. Through the descriptor's `/proc`
    /// path, which (unlike `AT_EMPTY_PATH`) needs no privilege.
    pub(super) fn make_link(
        &self,
        ino: u64,
        newparent: u64,
        newname: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let fd = self.inodes.fd(ino)?;
        let dir = self.inodes.fd(newparent)?;
        let newname = component(newname)?;
        rustix::fs::linkat(
            CWD,
            proc_path(&*fd),
            &*dir,
            newname,
            AtFlags::SYMLINK_FOLLOW,
        )
        .map_err(errno)?;
        self.inodes.add_lookup(ino)?;
        Ok(to_attr(ino, &stat_fd(&*fd)?))
    }

    /// `unlink` (`dir` false) or `rmdir`.
    pub(super) fn remove(&self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let parent_fd = self.inodes.fd(parent)?;
        let name = component(name)?;
        let st = self.inodes.stat_child(&parent_fd, name)?;
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        rustix::fs::unlinkat(&*parent_fd, name, flags).map_err(errno)?;
        if let Some(st) = st {
            self.name_removed(&st);
        }
        Ok(())
    }

    /// A name of the file `st` (as it was before) was removed or replaced:
    /// if that was a regular file's last name, the content state forgets it
    /// now or when its last handle goes.
    fn name_removed(&self, st: &Stat) {
        if file_type(st.st_mode) != FileType::RegularFile {
            return;
        }
        let ino = self.inodes.fuse_ino(st.st_ino);
        // The table's descriptor says exactly whether a name is left; a
        // file the kernel never looked up had the names it had.
        let last = match self.inodes.fd(ino) {
            Ok(fd) => stat_fd(&*fd).map(|s| s.st_nlink == 0).unwrap_or(false),
            Err(_) => st.st_nlink <= 1,
        };
        if !last {
            return;
        }
        let bino = self.backing_ino(ino);
        let _lock = self.locks.lock(bino);
        if self.locks.open_count(bino).handles == 0 {
            self.release_content(bino);
        } else {
            self.handles.unlinked.lock().insert(bino);
        }
    }

    /// `Content::released`, under the inode's lock (held by the caller).
    pub(super) fn release_content(&self, bino: u64) {
        if let Err(e) = self.content.released(bino) {
            eprintln!("cairn: warning: forgetting the content of removed inode {bino}: {e}");
        }
    }

    /// At unmount: files removed while open whose handles the kernel never
    /// released are forgotten now.
    pub(super) fn release_unlinked(&self) {
        let pending: Vec<u64> = self.handles.unlinked.lock().drain().collect();
        for bino in pending {
            let _lock = self.locks.lock(bino);
            self.release_content(bino);
        }
    }

    pub(super) fn rename_entry(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.contains(RenameFlags::RENAME_WHITEOUT) {
            return Err(Errno::EINVAL);
        }
        let from = self.inodes.fd(parent)?;
        let to = self.inodes.fd(newparent)?;
        let (name, newname) = (component(name)?, component(newname)?);
        // An exchange removes no file; a plain rename may replace one.
        let replaced = if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            None
        } else {
            self.inodes.stat_child(&to, newname)?
        };
        let moved = match replaced {
            Some(_) => self.inodes.stat_child(&from, name)?,
            None => None,
        };
        rustix::fs::renameat_with(
            &*from,
            name,
            &*to,
            newname,
            rustix::fs::RenameFlags::from_bits_retain(flags.bits()),
        )
        .map_err(errno)?;
        if let (Some(old), Some(moved)) = (replaced, moved) {
            // Renaming a file onto another name of itself changes nothing.
            if old.st_ino != moved.st_ino {
                self.name_removed(&old);
            }
        }
        Ok(())
    }

    pub(super) fn read_link(&self, ino: u64) -> Result<Vec<u8>, Errno> {
        let fd = self.inodes.fd(ino)?;
        let target = rustix::fs::readlinkat(&*fd, "", Vec::new()).map_err(errno)?;
        Ok(target.into_bytes())
    }

    pub(super) fn open_dir(&self, ino: u64) -> Result<u64, Errno> {
        let fd = self.inodes.fd(ino)?;
        let dir = rustix::fs::openat(
            &*fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)?;
        Ok(self.handles.add_dir(OpenDir {
            dir: File::from(dir),
            rows: parking_lot::Mutex::new(None),
        }))
    }

    /// The FUSE inode a listing row names (`..` of the root is the root).
    fn row_ino(&self, dir_ino: u64, row: &DirRow) -> u64 {
        match row.name.as_bytes() {
            b"." => dir_ino,
            b".." if dir_ino == 1 => 1,
            _ => self.inodes.fuse_ino(row.st_ino),
        }
    }

    /// Open directory `fh`, its rows read from the backing directory if
    /// the kernel starts (over) at offset 0 or has not read any yet.
    fn rows_from(&self, fh: u64, offset: u64) -> Result<std::sync::Arc<OpenDir>, Errno> {
        let d = self.handles.dir(fh)?;
        let mut rows = d.rows.lock();
        if offset == 0 || rows.is_none() {
            *rows = Some(list(&d.dir)?);
        }
        drop(rows);
        Ok(d)
    }

    pub(super) fn read_dir(&self, ino: u64, fh: u64, offset: u64, mut reply: ReplyDirectory) {
        let d = match self.rows_from(fh, offset) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        let start = offset as usize;
        let rows = d.rows.lock();
        let rows = rows.as_deref().unwrap_or_default();
        // Row `i` has offset `i + 1`: where the next call resumes.
        for (i, row) in rows.iter().enumerate().skip(start) {
            let kind = match row.kind {
                Some(k) => k,
                None => match self.inodes.stat_child(&d.dir, &row.name) {
                    Ok(Some(st)) => file_type(st.st_mode),
                    _ => continue,
                },
            };
            if reply.add(
                INodeNo(self.row_ino(ino, row)),
                i as u64 + 1,
                kind,
                &row.name,
            ) {
                break;
            }
        }
        reply.ok();
    }

    pub(super) fn read_dir_plus(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let d = match self.rows_from(fh, offset) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        let start = offset as usize;
        let dir_fd = &d.dir;
        let rows = d.rows.lock();
        let rows = rows.as_deref().unwrap_or_default();
        for (i, row) in rows.iter().enumerate().skip(start) {
            let next = i as u64 + 1;
            let full = if matches!(row.name.as_bytes(), b"." | b"..") {
                // The kernel takes no lookup for these and ignores their
                // attributes: the directory's own serve.
                let Ok(st) = stat_fd(dir_fd) else { continue };
                let attr = to_attr(self.row_ino(ino, row), &st);
                reply.add(attr.ino, next, &row.name, &TTL, &attr, Generation(0))
            } else {
                // Gone since the listing was read: skipped.
                let Ok((fd, st)) = self.inodes.open_child(dir_fd, &row.name) else {
                    continue;
                };
                let attr = to_attr(self.inodes.fuse_ino(st.st_ino), &st);
                let full = reply.add(attr.ino, next, &row.name, &TTL, &attr, Generation(0));
                // Each entry sent is a lookup the kernel will forget.
                if !full {
                    self.inodes.remember(fd, &st);
                }
                full
            };
            if full {
                break;
            }
        }
        reply.ok();
    }

    pub(super) fn sync_dir(&self, fh: u64, datasync: bool) -> Result<(), Errno> {
        let d = self.handles.dir(fh)?;
        let r = if datasync {
            d.dir.sync_data()
        } else {
            d.dir.sync_all()
        };
        r.map_err(super::attr::io_errno)
    }

    pub(super) fn stat_fs(&self) -> Result<SpaceStats, Errno> {
        let root = self.inodes.fd(1)?;
        self.space
            .statfs(root.as_fd())
            .map_err(super::attr::io_errno)
    }

    /// The path xattr calls use for `ino`: its descriptor's `/proc` path
    /// (followed to the file). A symlink has no xattrs of its own to serve
    /// (`None`): user xattrs are not allowed on one.
    fn xattr_path(&self, ino: u64) -> Result<(OwnedFd, Option<String>), Errno> {
        let (fd, kind) = self.inodes.get(ino)?;
        let fd = fd.try_clone().map_err(super::attr::io_errno)?;
        let path = (kind != FileType::Symlink).then(|| proc_path(&fd));
        Ok((fd, path))
    }

    pub(super) fn get_xattr(&self, ino: u64, name: &OsStr, size: u32) -> Result<Vec<u8>, Errno> {
        let (_fd, path) = self.xattr_path(ino)?;
        let path = path.ok_or(Errno::NO_XATTR)?;
        let mut buf = vec![0u8; if size == 0 { XATTR_MAX } else { size as usize }];
        let n = rustix::fs::getxattr(&path, name, &mut buf[..]).map_err(errno)?;
        buf.truncate(n);
        Ok(buf)
    }

    pub(super) fn list_xattr(&self, ino: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let (_fd, path) = self.xattr_path(ino)?;
        let Some(path) = path else {
            return Ok(Vec::new());
        };
        let mut buf = vec![0u8; if size == 0 { XATTR_MAX } else { size as usize }];
        let n = rustix::fs::listxattr(&path, &mut buf[..]).map_err(errno)?;
        buf.truncate(n);
        Ok(buf)
    }

    pub(super) fn set_xattr(
        &self,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> Result<(), Errno> {
        let (_fd, path) = self.xattr_path(ino)?;
        let path = path.ok_or(Errno::EPERM)?;
        let flags = XattrFlags::from_bits_retain(flags as u32);
        rustix::fs::setxattr(&path, name, value, flags).map_err(errno)
    }

    pub(super) fn remove_xattr(&self, ino: u64, name: &OsStr) -> Result<(), Errno> {
        let (_fd, path) = self.xattr_path(ino)?;
        let path = path.ok_or(Errno::NO_XATTR)?;
        rustix::fs::removexattr(&path, name).map_err(errno)
    }

    /// `access` (the kernel checks permissions itself with
    /// `default_permissions` and then never asks; this answers the same for
    /// a kernel that does): the owner, group or other bits of the mode.
    pub(super) fn check_access(
        &self,
        caller: Caller,
        ino: u64,
        mask: AccessFlags,
    ) -> Result<(), Errno> {
        let fd = self.inodes.fd(ino)?;
        let st = stat_fd(&*fd)?;
        let want = (mask.bits() & 0o7) as u32;
        if want == 0 {
            return Ok(());
        }
        let bits = if caller.uid == 0 {
            // Root may read and write anything, and execute what anyone may.
            let any_x = st.st_mode & 0o111 != 0 || file_type(st.st_mode) == FileType::Directory;
            0o6 | if any_x { 0o1 } else { 0 }
        } else if caller.uid == st.st_uid {
            (st.st_mode >> 6) & 0o7
        } else if caller.gid == st.st_gid {
            (st.st_mode >> 3) & 0o7
        } else {
            st.st_mode & 0o7
        };
        if want & !bits == 0 {
            Ok(())
        } else {
            Err(Errno::EACCES)
        }
    }
}

/// The entries of directory `dir`, read from its start.
fn list(dir: &impl AsFd) -> Result<Vec<DirRow>, Errno> {
    let entries = rustix::fs::Dir::read_from(dir).map_err(errno)?;
    let mut rows = Vec::new();
    for e in entries {
        let e = e.map_err(errno)?;
        use rustix::fs::FileType as T;
        let kind = match e.file_type() {
            T::RegularFile => Some(FileType::RegularFile),
            T::Directory => Some(FileType::Directory),
            T::Symlink => Some(FileType::Symlink),
            T::Fifo => Some(FileType::NamedPipe),
            T::Socket => Some(FileType::Socket),
            T::CharacterDevice => Some(FileType::CharDevice),
            T::BlockDevice => Some(FileType::BlockDevice),
            _ => None,
        };
        rows.push(DirRow {
            name: OsString::from(OsStr::from_bytes(e.file_name().to_bytes())),
            st_ino: e.ino(),
            kind,
        });
    }
    Ok(rows)
}
