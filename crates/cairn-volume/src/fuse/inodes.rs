//! The inode table. A FUSE inode number is the backing file's `st_ino`
//! (the backing root is 1, and a backing file whose `st_ino` is 1 takes the
//! root's number: the mapping is its own inverse), so a file keeps its
//! number across renames and every hard link of it shares one, as the
//! content state (keyed by backing inode) expects.
//!
//! Each inode the kernel knows holds an `O_PATH` descriptor of its backing
//! file and the kernel's lookup count: the descriptor follows the file
//! through renames and hard links (the table holds no paths), and pins the
//! backing inode so its number cannot be reused while the kernel may still
//! name it. An entry goes when the kernel forgets the last lookup; the root
//! is never forgotten.
//!
//! Every entry the table hands out is on the backing root's file system:
//! a mount point inside the backing tree is not crossed (`EXDEV`), since
//! inode numbers of two file systems could collide.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use fuser::{Errno, FileAttr, FileType};
use parking_lot::Mutex;
use rustix::fs::{AtFlags, Mode, OFlags, Stat};

use super::attr::{errno, file_type, to_attr};

/// An inode the kernel knows.
struct Node {
    fd: Arc<OwnedFd>,
    kind: FileType,
    lookups: u64,
}

pub(super) struct Inodes {
    /// The backing root's `st_ino` and device.
    root_ino: u64,
    dev: u64,
    nodes: Mutex<HashMap<u64, Node>>,
}

/// The `/proc` path that reopens descriptor `fd` (an `O_PATH` descriptor
/// cannot be read, written or have its mode changed; this path can).
pub(super) fn proc_path(fd: &impl AsRawFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// `fstat` of a descriptor (an `O_PATH` one too).
pub(super) fn stat_fd(fd: impl AsFd) -> Result<Stat, Errno> {
    rustix::fs::fstat(fd).map_err(errno)
}

/// A name as the kernel sent it, checked to be one path component (the
/// kernel never sends another; a component keeps `*at` calls in the
/// directory given).
pub(super) fn component(name: &OsStr) -> Result<&OsStr, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let b = name.as_bytes();
    if b.is_empty() || b.contains(&b'/') || b == b"." || b == b".." {
        return Err(Errno::EINVAL);
    }
    Ok(name)
}

impl Inodes {
    /// The table with the backing root `root` (a directory) as inode 1.
    pub fn new(root: OwnedFd) -> std::io::Result<Self> {
        let st = rustix::fs::fstat(&root)?;
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Node {
                fd: Arc::new(root),
                kind: FileType::Directory,
                lookups: 1,
            },
        );
        Ok(Inodes {
            root_ino: st.st_ino,
            dev: st.st_dev,
            nodes: Mutex::new(nodes),
        })
    }

    /// The FUSE inode number of backing inode `st_ino` (and, the mapping
    /// being an involution, the backing inode of a FUSE number).
    pub fn fuse_ino(&self, st_ino: u64) -> u64 {
        if st_ino == self.root_ino {
            1
        } else if st_ino == 1 {
            self.root_ino
        } else {
            st_ino
        }
    }

    /// The descriptor and kind of a known inode (`ESTALE` for one the
    /// kernel should not name any more).
    pub fn get(&self, ino: u64) -> Result<(Arc<OwnedFd>, FileType), Errno> {
        let nodes = self.nodes.lock();
        let n = nodes.get(&ino).ok_or(Errno::ESTALE)?;
        Ok((n.fd.clone(), n.kind))
    }

    /// The descriptor of a known inode.
    pub fn fd(&self, ino: u64) -> Result<Arc<OwnedFd>, Errno> {
        self.get(ino).map(|(fd, _)| fd)
    }

    /// The current attributes of a known inode.
    pub fn attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let fd = self.fd(ino)?;
        Ok(to_attr(ino, &stat_fd(&*fd)?))
    }

    /// Opens `name` in directory `dir` as an `O_PATH` descriptor (never
    /// following a symlink) and stats it; not yet counted as a lookup.
    pub fn open_child(&self, dir: &impl AsFd, name: &OsStr) -> Result<(OwnedFd, Stat), Errno> {
        let name = component(name)?;
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)?;
        let st = stat_fd(&fd)?;
        if st.st_dev != self.dev {
            return Err(Errno::EXDEV);
        }
        Ok((fd, st))
    }

    /// Counts one lookup of the file `fd` (whose `fstat` is `st`) and
    /// returns its attributes; a file already known keeps its descriptor.
    pub fn remember(&self, fd: OwnedFd, st: &Stat) -> FileAttr {
        let ino = self.fuse_ino(st.st_ino);
        let mut nodes = self.nodes.lock();
        nodes
            .entry(ino)
            .or_insert_with(|| Node {
                fd: Arc::new(fd),
                kind: file_type(st.st_mode),
                lookups: 0,
            })
            .lookups += 1;
        to_attr(ino, st)
    }

    /// `lookup`: the entry `name` of directory `parent`, counted.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<FileAttr, Errno> {
        let dir = self.fd(parent)?;
        let (fd, st) = self.open_child(&dir, name)?;
        Ok(self.remember(fd, &st))
    }

    /// Counts one more lookup of a known inode (a new hard link's entry).
    pub fn add_lookup(&self, ino: u64) -> Result<(), Errno> {
        let mut nodes = self.nodes.lock();
        nodes.get_mut(&ino).ok_or(Errno::ESTALE)?.lookups += 1;
        Ok(())
    }

    /// The kernel dropped `n` lookups of `ino`: true if it forgot the inode
    /// (its descriptor is closed once no request still uses it).
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        if ino == 1 {
            return false;
        }
        let mut nodes = self.nodes.lock();
        let Some(node) = nodes.get_mut(&ino) else {
            return false;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            nodes.remove(&ino);
            return true;
        }
        false
    }

    /// `stat` of `name` in `dir` without following a symlink, or `None`
    /// if there is no such entry.
    pub fn stat_child(&self, dir: &impl AsFd, name: &OsStr) -> Result<Option<Stat>, Errno> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(st)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    /// How many inodes the kernel knows (the root included).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_and_links_keep_one_inode_and_forget_drops_it() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), b"x").unwrap();
        let root = rustix::fs::open(tmp.path(), OFlags::PATH, Mode::empty()).unwrap();
        let t = Inodes::new(root).unwrap();
        let a = t.lookup(1, OsStr::new("a")).unwrap();
        std::fs::hard_link(tmp.path().join("a"), tmp.path().join("b")).unwrap();
        std::fs::rename(tmp.path().join("a"), tmp.path().join("c")).unwrap();
        let b = t.lookup(1, OsStr::new("b")).unwrap();
        let c = t.lookup(1, OsStr::new("c")).unwrap();
        assert_eq!(a.ino, b.ino);
        assert_eq!(a.ino, c.ino);
        assert_eq!(t.len(), 2);
        assert!(!t.forget(a.ino.0, 2));
        assert!(t.forget(a.ino.0, 1));
        assert_eq!(t.len(), 1);
        assert!(!t.forget(1, 5), "the root is never forgotten");
        assert_eq!(t.lookup(1, OsStr::new("..")), Err(Errno::EINVAL));
        assert_eq!(t.fuse_ino(t.root_ino), 1);
        assert_eq!(t.fuse_ino(1), t.root_ino);
    }
}
