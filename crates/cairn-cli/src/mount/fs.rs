//! The read-only FUSE file system of `cairn mount`: the virtual top
//! ([`Layout`]) and, below each snapshot directory, the snapshot's tree as
//! its listings record it (mode, owner, size, mtime; symlink targets; file
//! bytes read through [`RandomAccess`]).
//!
//! Inode numbers: the virtual nodes are inodes `1..=N` (node `i` is inode
//! `i + 1`, so the root is 1); a snapshot entry gets the next free number
//! the first time it is listed or looked up, remembered by (parent inode,
//! name), so a path keeps its inode for the whole mount. A snapshot
//! reachable by several virtual paths (`ids/`, `snapshots/`, `tags/`) is a
//! separate subtree under each: a directory inode has one parent, as the
//! kernel expects. The table only grows; an entry costs its listing record.
//!
//! The names of one hard-link group (the same `(device, inode)` recorded
//! with a link count, docs/file-kinds.md) within one snapshot subtree share
//! one inode, as they shared one file when backed up.
//!
//! Entry attributes are served as stored (`entry_attr`): the recorded link
//! count of a hard-linked file, a device's number, the allocated size of a
//! sparse file (its data extents, not its holes); `getxattr`/`listxattr`
//! answer from the entry's stored extended attributes.
//!
//! Listings are decoded once: a directory stored inline in its parent's
//! listing keeps its entries behind an `Arc` in its inode (made when the
//! inode is), and `opendir` pins the directory's listing to the handle, so
//! the `readdir` calls of one pass over a large directory share one decoded
//! listing even if the listing cache evicted it meanwhile.
//!
//! Everything is immutable while mounted, so attributes and entries carry a
//! long TTL and opened files keep the page cache. The kernel refuses writes
//! on the read-only mount (`EROFS`); `open` refuses write access as well.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_core::Error;
use cairn_engine::catalog::SnapshotInfo;
use cairn_engine::random_access::RandomAccess;
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyXattr, Request,
};

use super::layout::{Layout, VNode};

/// Nothing changes under a mount: the kernel may cache for long.
const TTL: Duration = Duration::from_secs(3600);

/// Owner and times of the virtual directories.
#[derive(Clone, Copy, Debug)]
pub struct VirtualMeta {
    pub uid: u32,
    pub gid: u32,
    /// The newest snapshot's time (the mount time if there is none).
    pub mtime: SystemTime,
}

// Most inodes are entries: boxing them would add an allocation each.
#[allow(clippy::large_enum_variant)]
enum Inode {
    Virtual(usize),
    /// `entry.children` is always `None`: a directory's inline entries are
    /// in `inline`, shared by every lookup and readdir in it.
    Entry {
        parent: u64,
        /// The inode of the snapshot directory this entry is below: the
        /// scope of its hard-link group.
        root: u64,
        entry: DirEntry,
        inline: Option<Arc<Vec<DirEntry>>>,
    },
}

struct State {
    access: RandomAccess,
    inodes: Vec<Inode>,
    by_name: HashMap<(u64, Vec<u8>), u64>,
    /// Hard-linked files by (snapshot root inode, device, inode): every
    /// name of a group in one snapshot subtree maps to the first one's.
    by_link: HashMap<(u64, u64, u64), u64>,
    buf: Vec<u8>,
    /// Open snapshot directories: handle -> listing (handle 0: none, a
    /// virtual directory or one opened before this table existed).
    open_dirs: HashMap<u64, Arc<Vec<DirEntry>>>,
    next_handle: u64,
}

pub struct SnapshotFs {
    layout: Layout,
    /// The parent node of each virtual node (the root's is the root).
    virtual_parents: Vec<usize>,
    snaps: Vec<SnapshotInfo>,
    meta: VirtualMeta,
    /// The kernel may send requests from one thread only (the session
    /// runs single-threaded), so this lock is never contended.
    state: Mutex<State>,
}

/// A failed operation: the errno for the kernel.
fn errno(e: &Error) -> Errno {
    if e.is_not_found() {
        Errno::ENOENT
    } else {
        Errno::EIO
    }
}

pub(super) fn system_time(ns: i64) -> SystemTime {
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

fn file_type(k: EntryKind) -> FileType {
    match k {
        EntryKind::File => FileType::RegularFile,
        EntryKind::Dir => FileType::Directory,
        EntryKind::Symlink => FileType::Symlink,
        EntryKind::Fifo => FileType::NamedPipe,
        EntryKind::CharDevice => FileType::CharDevice,
        EntryKind::BlockDevice => FileType::BlockDevice,
        EntryKind::Socket => FileType::Socket,
    }
}

impl SnapshotFs {
    pub fn new(
        layout: Layout,
        snaps: Vec<SnapshotInfo>,
        access: RandomAccess,
        meta: VirtualMeta,
    ) -> Self {
        let inodes = (0..layout.nodes.len()).map(Inode::Virtual).collect();
        let mut virtual_parents = vec![0; layout.nodes.len()];
        for (p, node) in layout.nodes.iter().enumerate() {
            if let VNode::Dir(entries) = node {
                for (_, c) in entries {
                    virtual_parents[*c] = p;
                }
            }
        }
        SnapshotFs {
            layout,
            virtual_parents,
            snaps,
            meta,
            state: Mutex::new(State {
                access,
                inodes,
                by_name: HashMap::new(),
                by_link: HashMap::new(),
                buf: Vec::new(),
                open_dirs: HashMap::new(),
                next_handle: 1,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic inside a request cannot leave the tables half-updated in
        // a way that matters (they only grow), so a poisoned lock is used.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn virtual_attr(&self, ino: u64, node: usize) -> FileAttr {
        let (kind, perm, size, mtime) = match &self.layout.nodes[node] {
            VNode::Dir(_) => (FileType::Directory, 0o555, 0, self.meta.mtime),
            VNode::Link(t) => (FileType::Symlink, 0o777, t.len() as u64, self.meta.mtime),
            VNode::Snapshot(i) => (
                FileType::Directory,
                0o555,
                0,
                system_time(self.snaps[*i].record.time_unix_ns),
            ),
        };
        attr(ino, kind, perm, size, self.meta.uid, self.meta.gid, mtime)
    }

    fn attr_of(&self, st: &State, ino: u64) -> Option<FileAttr> {
        match st.inodes.get(ino.checked_sub(1)? as usize)? {
            Inode::Virtual(n) => Some(self.virtual_attr(ino, *n)),
            Inode::Entry { entry, .. } => Some(entry_attr(ino, entry)),
        }
    }

    /// The stored extended attributes of inode `ino` (none for the
    /// virtual directories); `None` for an unknown inode.
    fn xattrs_of<'a>(&self, st: &'a State, ino: u64) -> Option<&'a [(Vec<u8>, Vec<u8>)]> {
        match st.inodes.get((ino as usize).wrapping_sub(1))? {
            Inode::Virtual(_) => Some(&[]),
            Inode::Entry { entry, .. } => Some(&entry.extras.xattrs),
        }
    }

    /// The listing a directory inode shows from the snapshot tree:
    /// `Ok(None)` for a virtual directory, `Err(ENOTDIR)` for a non-directory.
    fn listing(&self, st: &mut State, ino: u64) -> Result<Option<Arc<Vec<DirEntry>>>, Errno> {
        let blob: Option<BlobRef> = match st.inodes.get((ino as usize).wrapping_sub(1)) {
            None => return Err(Errno::ENOENT),
            Some(Inode::Virtual(n)) => match &self.layout.nodes[*n] {
                VNode::Dir(_) => return Ok(None),
                VNode::Link(_) => return Err(Errno::ENOTDIR),
                VNode::Snapshot(i) => {
                    Some(BlobRef::try_from(&self.snaps[*i].record.root).map_err(|e| self.eio(&e))?)
                }
            },
            Some(Inode::Entry { entry, inline, .. }) if entry.kind == EntryKind::Dir => {
                // A small directory's listing is stored inline in its
                // parent's (FORMAT.md "Directory listing").
                if let Some(inline) = inline {
                    return Ok(Some(inline.clone()));
                }
                entry.content
            }
            Some(Inode::Entry { .. }) => return Err(Errno::ENOTDIR),
        };
        st.access
            .read_dir(blob.as_ref())
            .map(Some)
            .map_err(|e| self.eio(&e))
    }

    /// Opens directory `ino`: a snapshot directory's listing is pinned to
    /// the handle returned (0 for a virtual directory, which has none).
    fn open_dir(&self, st: &mut State, ino: u64) -> Result<u64, Errno> {
        let Some(listing) = self.listing(st, ino)? else {
            return Ok(0);
        };
        let fh = st.next_handle;
        st.next_handle += 1;
        st.open_dirs.insert(fh, listing);
        Ok(fh)
    }

    /// The listing of directory `ino` opened as handle `fh`: the pinned
    /// one, or (handle 0) read now.
    fn dir_listing(
        &self,
        st: &mut State,
        ino: u64,
        fh: u64,
    ) -> Result<Option<Arc<Vec<DirEntry>>>, Errno> {
        match st.open_dirs.get(&fh) {
            Some(l) => Ok(Some(l.clone())),
            None => self.listing(st, ino),
        }
    }

    /// Reports a read error once on stderr (the kernel only sees EIO).
    fn eio(&self, e: &Error) -> Errno {
        let n = errno(e);
        if n == Errno::EIO {
            eprintln!("cairn: warning: {e}");
        }
        n
    }

    /// The inode of snapshot entry `e` in directory `parent`: a later name
    /// of a hard-link group below the same snapshot directory gets the
    /// group's inode.
    fn entry_ino(st: &mut State, parent: u64, e: &DirEntry) -> u64 {
        if let Some(&ino) = st.by_name.get(&(parent, e.name.clone())) {
            return ino;
        }
        // The parent of an entry is a snapshot directory (its own root) or
        // an entry below one.
        let root = match st.inodes.get((parent as usize).wrapping_sub(1)) {
            Some(Inode::Entry { root, .. }) => *root,
            _ => parent,
        };
        let link_key = e.extras.hard_link.map(|h| (root, h.dev, e.inode));
        if let Some(&ino) = link_key.and_then(|k| st.by_link.get(&k)) {
            st.by_name.insert((parent, e.name.clone()), ino);
            return ino;
        }
        let mut entry = e.clone();
        let inline = entry.children.take().map(Arc::new);
        st.inodes.push(Inode::Entry {
            parent,
            root,
            entry,
            inline,
        });
        let ino = st.inodes.len() as u64;
        st.by_name.insert((parent, e.name.clone()), ino);
        if let Some(k) = link_key {
            st.by_link.insert(k, ino);
        }
        ino
    }

    fn parent_of(&self, st: &State, ino: u64) -> u64 {
        match st.inodes.get((ino as usize).wrapping_sub(1)) {
            Some(Inode::Entry { parent, .. }) => *parent,
            Some(Inode::Virtual(n)) => self.virtual_parents[*n] as u64 + 1,
            None => 1,
        }
    }
}

fn attr(
    ino: u64,
    kind: FileType,
    perm: u16,
    size: u64,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: mtime,
        mtime,
        ctime: mtime,
        crtime: mtime,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// The attributes of a snapshot entry as its listing stored them.
fn entry_attr(ino: u64, e: &DirEntry) -> FileAttr {
    let mut a = attr(
        ino,
        file_type(e.kind),
        (e.mode & 0o7777) as u16,
        e.size,
        e.uid,
        e.gid,
        system_time(e.mtime_ns),
    );
    if let Some(h) = e.extras.hard_link {
        a.nlink = u32::try_from(h.nlink).unwrap_or(u32::MAX);
    }
    if let Some(rdev) = e.extras.rdev {
        a.rdev = kernel_dev(rdev);
    }
    // A sparse file occupies its data extents; its holes take no blocks.
    if let Some(extents) = &e.extras.extents {
        a.blocks = extents.iter().map(|x| x.len).sum::<u64>().div_ceil(512);
    }
    a
}

/// A stored device number (`st_rdev`, the C library's 64-bit encoding) in
/// the 32-bit encoding FUSE hands the kernel: minor's low 8 bits, then
/// 12 bits of major, then minor's upper 12 bits. A major or minor too
/// large for it (none on Linux today) is cut to its low bits.
fn kernel_dev(rdev: u64) -> u32 {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & 0xfff00) << 12)
}

/// Answers an xattr request for `data`: its size when `size` is 0 (the
/// caller asks how big a buffer to pass), the bytes if they fit, `ERANGE`
/// if not.
fn reply_xattr(reply: ReplyXattr, size: u32, data: &[u8]) {
    match u32::try_from(data.len()) {
        Ok(len) if size == 0 => reply.size(len),
        Ok(len) if len <= size => reply.data(data),
        _ => reply.error(Errno::ERANGE),
    }
}

impl Filesystem for SnapshotFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let parent = u64::from(parent);
        let mut st = self.state();
        let found = match self.listing(&mut st, parent) {
            Err(e) => Err(e),
            Ok(None) => {
                let Some(Inode::Virtual(dir)) = st.inodes.get(parent as usize - 1) else {
                    return reply.error(Errno::ENOENT);
                };
                let child = name.to_str().and_then(|n| self.layout.child(*dir, n));
                child.map(|c| c as u64 + 1).ok_or(Errno::ENOENT)
            }
            Ok(Some(entries)) => match entries.iter().find(|e| e.name == name.as_bytes()) {
                Some(e) => Ok(Self::entry_ino(&mut st, parent, e)),
                None => Err(Errno::ENOENT),
            },
        };
        match found.map(|ino| self.attr_of(&st, ino)) {
            Ok(Some(a)) => reply.entry(&TTL, &a, Generation(0)),
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let st = self.state();
        match self.attr_of(&st, u64::from(ino)) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let st = self.state();
        match st.inodes.get((u64::from(ino) as usize).wrapping_sub(1)) {
            Some(Inode::Virtual(n)) => match &self.layout.nodes[*n] {
                VNode::Link(t) => reply.data(t.as_bytes()),
                _ => reply.error(Errno::EINVAL),
            },
            Some(Inode::Entry { entry, .. }) => match &entry.target {
                Some(t) => reply.data(t),
                None => reply.error(Errno::EINVAL),
            },
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let st = self.state();
        let Some(xattrs) = self.xattrs_of(&st, u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        match xattrs.iter().find(|(n, _)| n == name.as_bytes()) {
            Some((_, value)) => reply_xattr(reply, size, value),
            None => reply.error(Errno::NO_XATTR),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let st = self.state();
        let Some(xattrs) = self.xattrs_of(&st, u64::from(ino)) else {
            return reply.error(Errno::ENOENT);
        };
        // The names, each followed by a NUL (names hold no NUL: FORMAT.md).
        let mut names = Vec::new();
        for (n, _) in xattrs {
            names.extend_from_slice(n);
            names.push(0);
        }
        reply_xattr(reply, size, &names)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let st = self.state();
        match st.inodes.get((u64::from(ino) as usize).wrapping_sub(1)) {
            Some(Inode::Entry { entry, .. }) if entry.kind == EntryKind::File => {
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
            }
            Some(_) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut st = self.state();
        let st = &mut *st;
        let entry = match st.inodes.get((u64::from(ino) as usize).wrapping_sub(1)) {
            Some(Inode::Entry { entry, .. }) if entry.kind == EntryKind::File => entry.clone(),
            Some(_) => return reply.error(Errno::EISDIR),
            None => return reply.error(Errno::ENOENT),
        };
        st.buf.clear();
        match st
            .access
            .read_file_at(&entry, offset, size as usize, &mut st.buf)
        {
            Ok(()) => reply.data(&st.buf),
            Err(e) => reply.error(self.eio(&e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.state();
        match self.open_dir(&mut st, u64::from(ino)) {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.state().open_dirs.remove(&u64::from(fh));
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let ino = u64::from(ino);
        let mut st = self.state();
        let parent = self.parent_of(&st, ino);
        // Row `i` (`.`, `..`, then the entries) has offset `i + 1`: where the
        // next call resumes. Only rows from `offset` on are built, so a big
        // directory read in many calls costs its size, not its size squared.
        let mut add = |i: usize, child: u64, kind: FileType, name: &[u8]| {
            (i as u64) >= offset
                && reply.add(INodeNo(child), i as u64 + 1, kind, OsStr::from_bytes(name))
        };
        let dots = [(ino, &b"."[..]), (parent, &b".."[..])];
        for (i, (child, name)) in dots.into_iter().enumerate() {
            if add(i, child, FileType::Directory, name) {
                return reply.ok();
            }
        }
        match self.dir_listing(&mut st, ino, u64::from(fh)) {
            Err(e) => return reply.error(e),
            Ok(None) => {
                let Some(Inode::Virtual(dir)) = st.inodes.get(ino as usize - 1) else {
                    return reply.error(Errno::ENOENT);
                };
                if let VNode::Dir(entries) = &self.layout.nodes[*dir] {
                    for (i, (name, c)) in entries.iter().enumerate() {
                        let kind = match self.layout.nodes[*c] {
                            VNode::Link(_) => FileType::Symlink,
                            _ => FileType::Directory,
                        };
                        if add(i + 2, *c as u64 + 1, kind, name.as_bytes()) {
                            break;
                        }
                    }
                }
            }
            Ok(Some(entries)) => {
                let skip = (offset as usize).saturating_sub(2);
                for (i, e) in entries.iter().enumerate().skip(skip) {
                    let child = Self::entry_ino(&mut st, ino, e);
                    if add(i + 2, child, file_type(e.kind), &e.name) {
                        break;
                    }
                }
            }
        }
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_engine::random_access::CacheLimits;
    use cairn_engine::Repository;

    fn entry(name: &str, kind: EntryKind, children: Option<Vec<DirEntry>>) -> DirEntry {
        DirEntry {
            name: name.as_bytes().to_vec(),
            kind,
            mode: 0o755,
            uid: 0,
            gid: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            inode: 0,
            size: 0,
            target: None,
            content: None,
            children,
            extras: Default::default(),
        }
    }

    /// The kernel decodes FUSE's 32-bit device numbers as `new_decode_dev`
    /// does: minor's low byte, 12 bits of major, minor's upper 12 bits.
    #[test]
    fn device_numbers_reach_the_kernel_in_its_encoding() {
        assert_eq!(kernel_dev(libc::makedev(1, 3)), 0x103);
        assert_eq!(kernel_dev(libc::makedev(259, 0x10001)), 0x1001_0301);
        assert_eq!(kernel_dev(libc::makedev(0xfff, 0xff)), 0xf_ffff);
    }

    #[test]
    fn an_inline_listing_is_shared_not_copied_per_call() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::init_local(tmp.path(), Repository::default_config()).unwrap();
        let access = RandomAccess::open(&repo, CacheLimits::default()).unwrap();
        let meta = VirtualMeta {
            uid: 0,
            gid: 0,
            mtime: UNIX_EPOCH,
        };
        let fs = SnapshotFs::new(Layout::new(&[], true), Vec::new(), access, meta);
        let files = (0..100)
            .map(|i| entry(&format!("f{i}"), EntryKind::File, None))
            .collect();
        let dir = entry("d", EntryKind::Dir, Some(files));
        let mut st = fs.state();
        let ino = SnapshotFs::entry_ino(&mut st, 1, &dir);
        let a = fs.listing(&mut st, ino).unwrap().unwrap();
        let b = fs.listing(&mut st, ino).unwrap().unwrap();
        assert_eq!(a.len(), 100);
        assert!(Arc::ptr_eq(&a, &b), "the inline listing was copied");
        // An open handle pins the listing; a released one is forgotten.
        let fh = fs.open_dir(&mut st, ino).unwrap();
        assert_ne!(fh, 0);
        let c = fs.dir_listing(&mut st, ino, fh).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        assert_eq!(fs.open_dir(&mut st, 1).unwrap(), 0, "virtual root");
        st.open_dirs.remove(&fh);
        assert!(st.open_dirs.is_empty());
    }
}
