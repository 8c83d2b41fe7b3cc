//! File system operations on paths of any length (docs/long-paths.md).
//!
//! The kernel refuses a path of `PATH_MAX` (4096) bytes or more in one
//! system call (ENAMETOOLONG), but a tree can be deeper than that. [`Dirs`]
//! performs each operation the backup walker, the restore target and
//! `restore --verify` need on a path:
//!
//! - a path of at most [`SHORT_PATH`] bytes (nearly every path) goes to the
//!   kernel whole, exactly as before: no extra system call;
//! - a longer one is split into its parent directory, reached by a chain of
//!   directory handles each opened relative to the one before through at
//!   most [`STEP`] bytes of path, and its last name, used with the
//!   directory-relative call (`openat`, `mkdirat`, `renameat`, ...).
//!
//! The chain is kept from call to call: a depth-first walk opens each deep
//! directory once, not once per entry. Each handle is opened the way a
//! whole-path lookup walks its components (a symlink among the parent's
//! components is followed, as the kernel follows one inside a whole path);
//! the last name is treated exactly as the whole-path call treats it
//! (`AT_SYMLINK_NOFOLLOW` where the short path used `lstat`, `lchown` or
//! `O_NOFOLLOW`). Every operation that removes or renames an entry drops
//! the handles at or below it, so a handle never outlives what it named.
//!
//! Extended attributes have no directory-relative system call before Linux
//! 6.13; for a long path they are read and set through the kernel's name of
//! the parent handle, `/proc/self/fd/N/name`, with the `l*xattr` calls
//! (which do not follow a symlink at `name`).

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, AT_FDCWD};
use nix::sys::stat::{Mode, SFlag};

/// Paths of at most this many bytes are used whole. Leaves room under
/// `PATH_MAX` for a temporary name beside the longest such path.
pub const SHORT_PATH: usize = 3072;

/// Most bytes of path one directory-relative lookup walks.
pub const STEP: usize = 3072;

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// [`Dirs::canonicalize`] with handles of its own.
pub fn canonicalize(p: &Path) -> io::Result<PathBuf> {
    Dirs::new().canonicalize(p)
}

/// Whether `p` is used through directory handles.
pub fn is_long(p: &Path) -> bool {
    p.as_os_str().len() > SHORT_PATH
}

/// Whether `q` names `p` or one of its ancestors.
fn within(q: &[u8], p: &[u8]) -> bool {
    p.starts_with(q) && (p.len() == q.len() || p[q.len()] == b'/' || q.ends_with(b"/"))
}

/// `p` (trailing slashes ignored) as its parent directory and last name.
fn split(p: &[u8]) -> (&[u8], &[u8]) {
    let end = p
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(p.len(), |i| i + 1);
    let p = &p[..end];
    match p.iter().rposition(|&b| b == b'/') {
        None => (b".", p),
        Some(i) => {
            let parent = p[..i].iter().rposition(|&b| b != b'/').map_or(0, |j| j + 1);
            if parent == 0 {
                (b"/", &p[i + 1..])
            } else {
                (&p[..parent], &p[i + 1..])
            }
        }
    }
}

/// A directory handle owned for an operation on two paths, or the working
/// directory.
struct Base(Option<OwnedFd>);

impl Base {
    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_ref().map_or(AT_FDCWD, |f| f.as_fd())
    }
}

/// The directory handles that reach long paths (see the module doc).
#[derive(Default)]
pub struct Dirs {
    /// Open directories, each with its path; each entry's path lies below
    /// the previous one's and was opened relative to it through at most
    /// [`STEP`] bytes (the first relative to the working directory).
    chain: Vec<(Vec<u8>, OwnedFd)>,
}

impl Dirs {
    pub fn new() -> Self {
        Dirs::default()
    }

    /// The directory handle and name to use for `p`: the working directory
    /// and `p` itself when it is short.
    fn at<'a>(&'a mut self, p: &'a Path) -> io::Result<(BorrowedFd<'a>, &'a OsStr)> {
        if !is_long(p) {
            return Ok((AT_FDCWD, p.as_os_str()));
        }
        let (parent, name) = split(p.as_os_str().as_bytes());
        Ok((self.dir(parent)?, OsStr::from_bytes(name)))
    }

    /// [`at`](Self::at) with a handle of its own, for an operation on two
    /// paths.
    fn owned_at(&mut self, p: &Path) -> io::Result<(Base, OsString)> {
        if !is_long(p) {
            return Ok((Base(None), p.as_os_str().to_owned()));
        }
        let (fd, name) = self.at(p)?;
        Ok((Base(Some(fd.try_clone_to_owned()?)), name.to_owned()))
    }

    /// A handle on directory `p`, opened through the chain.
    fn dir(&mut self, p: &[u8]) -> io::Result<BorrowedFd<'_>> {
        while self.chain.last().is_some_and(|(q, _)| !within(q, p)) {
            self.chain.pop();
        }
        while self.chain.last().is_none_or(|(q, _)| q.len() != p.len()) {
            // Reopen from the shallowest handle within one step, so that the
            // chain stays about (path length / STEP) handles long.
            match self
                .chain
                .iter()
                .position(|(q, _)| p.len() - q.len() <= STEP)
            {
                Some(i) => self.chain.truncate(i + 1),
                None if p.len() <= STEP => self.chain.clear(),
                None => {}
            }
            let (base, mut from) = match self.chain.last() {
                Some((q, fd)) => (fd.as_fd(), q.len()),
                None => (AT_FDCWD, 0),
            };
            if from > 0 {
                while p.get(from) == Some(&b'/') {
                    from += 1;
                }
            }
            let end = if p.len() - from <= STEP {
                p.len()
            } else {
                match p[from..=from + STEP].iter().rposition(|&b| b == b'/') {
                    Some(i) if i > 0 => from + i,
                    _ => return Err(errno(Errno::ENAMETOOLONG)),
                }
            };
            let fd = nix::fcntl::openat(
                base,
                OsStr::from_bytes(&p[from..end]),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(errno)?;
            self.chain.push((p[..end].to_vec(), fd));
        }
        Ok(self.chain.last().map_or(AT_FDCWD, |(_, fd)| fd.as_fd()))
    }

    /// Drops the handles on `p` and below it: `p` was removed or replaced.
    fn forget(&mut self, p: &Path) {
        let p = p.as_os_str().as_bytes();
        if let Some(i) = self.chain.iter().position(|(q, _)| within(p, q)) {
            self.chain.truncate(i);
        }
    }

    /// `lstat`: never follows a symlink at `p`.
    pub fn lstat(&mut self, p: &Path) -> io::Result<Metadata> {
        if !is_long(p) {
            return fs::symlink_metadata(p);
        }
        let (fd, name) = self.at(p)?;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let f = nix::fcntl::openat(fd, name, flags, Mode::empty()).map_err(errno)?;
        File::from(f).metadata()
    }

    /// `stat`: follows a symlink at `p`.
    pub fn metadata(&mut self, p: &Path) -> io::Result<Metadata> {
        if !is_long(p) {
            return fs::metadata(p);
        }
        self.open(p, OFlag::O_PATH, 0)?.metadata()
    }

    /// The names in directory `p` (without `.` and `..`), in the order the
    /// file system gives them; an entry that cannot be read is an `Err`.
    pub fn read_dir(&mut self, p: &Path) -> io::Result<Vec<io::Result<OsString>>> {
        if !is_long(p) {
            return Ok(fs::read_dir(p)?.map(|e| e.map(|e| e.file_name())).collect());
        }
        let (fd, name) = self.at(p)?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let d = nix::fcntl::openat(fd, name, flags, Mode::empty()).map_err(errno)?;
        let mut dir = nix::dir::Dir::from_fd(d).map_err(errno)?;
        Ok(dir
            .iter()
            .filter_map(|e| match e {
                Ok(e) => {
                    let n = e.file_name().to_bytes();
                    (n != b"." && n != b"..").then(|| Ok(OsString::from_vec(n.to_vec())))
                }
                Err(err) => Some(Err(errno(err))),
            })
            .collect())
    }

    /// Whether directory `p` has no entry (it is not listed further).
    pub fn dir_is_empty(&mut self, p: &Path) -> io::Result<bool> {
        if !is_long(p) {
            return Ok(fs::read_dir(p)?.next().is_none());
        }
        let (fd, name) = self.at(p)?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let d = nix::fcntl::openat(fd, name, flags, Mode::empty()).map_err(errno)?;
        let mut dir = nix::dir::Dir::from_fd(d).map_err(errno)?;
        for e in dir.iter() {
            let n = e.map_err(errno)?;
            if !matches!(n.file_name().to_bytes(), b"." | b"..") {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Opens `p` with `flags` (`O_CLOEXEC` added) and `mode` for a new file.
    pub fn open(&mut self, p: &Path, flags: OFlag, mode: u32) -> io::Result<File> {
        let (fd, name) = self.at(p)?;
        let flags = flags | OFlag::O_CLOEXEC;
        let f = nix::fcntl::openat(fd, name, flags, Mode::from_bits_truncate(mode as _))
            .map_err(errno)?;
        Ok(File::from(f))
    }

    /// The target of symlink `p`.
    pub fn read_link(&mut self, p: &Path) -> io::Result<PathBuf> {
        if !is_long(p) {
            return fs::read_link(p);
        }
        let (fd, name) = self.at(p)?;
        Ok(nix::fcntl::readlinkat(fd, name).map_err(errno)?.into())
    }

    /// Calls `f` with a path naming `p` for the `l*xattr` calls: `p` itself,
    /// or for a long path its parent handle's `/proc/self/fd` name and its
    /// last name.
    pub fn with_xattr_path<T>(
        &mut self,
        p: &Path,
        f: impl FnOnce(&Path) -> io::Result<T>,
    ) -> io::Result<T> {
        if !is_long(p) {
            return f(p);
        }
        let (fd, name) = self.at(p)?;
        let mut via = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        via.push(name);
        f(&via)
    }

    /// Creates directory `p` and whichever of its parents are missing, like
    /// `fs::create_dir_all`: an existing directory on the way, or a symlink
    /// to one, is used as it is (a path argument is followed).
    pub fn create_dir_all(&mut self, p: &Path) -> io::Result<()> {
        if !is_long(p) {
            return fs::create_dir_all(p);
        }
        match self.mkdir(p, 0o777) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.is_dir_followed(p, e),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (parent, _) = split(p.as_os_str().as_bytes());
                self.create_dir_all(Path::new(OsStr::from_bytes(parent)))?;
                match self.mkdir(p, 0o777) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        self.is_dir_followed(p, e)
                    }
                    r => r,
                }
            }
            Err(e) => Err(e),
        }
    }

    /// `Ok` if `p`, a symlink at it followed, is a directory; `exists` (the
    /// error that found something at `p`) otherwise.
    fn is_dir_followed(&mut self, p: &Path, exists: io::Error) -> io::Result<()> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY;
        match self.open(p, flags, 0) {
            Ok(_) => Ok(()),
            Err(_) => Err(exists),
        }
    }

    /// The absolute path of `p` with every symlink resolved and no `.` or
    /// `..` left, like `fs::canonicalize` (which fails on a long path, or
    /// on a short one whose result is long): such a path is resolved name
    /// by name, each looked up through the chain of handles.
    pub fn canonicalize(&mut self, p: &Path) -> io::Result<PathBuf> {
        if !is_long(p) {
            match fs::canonicalize(p) {
                Err(e) if e.raw_os_error() == Some(Errno::ENAMETOOLONG as i32) => {}
                r => return r,
            }
        }
        // The kernel's limit on symlinks followed in one lookup.
        const MAX_LINKS: usize = 40;
        let mut out = if p.is_absolute() {
            PathBuf::from("/")
        } else {
            std::env::current_dir()?
        };
        let mut todo: Vec<OsString> = Vec::new();
        let push = |todo: &mut Vec<OsString>, q: &Path| {
            let at = todo.len();
            todo.extend(q.components().filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n.to_owned()),
                std::path::Component::ParentDir => Some(OsString::from("..")),
                _ => None,
            }));
            todo[at..].reverse();
        };
        push(&mut todo, p);
        let mut links = 0;
        while let Some(name) = todo.pop() {
            if name == ".." {
                out.pop();
                continue;
            }
            let next = out.join(&name);
            if !self.lstat(&next)?.is_symlink() {
                out = next;
                continue;
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(errno(Errno::ELOOP));
            }
            let target = self.read_link(&next)?;
            if target.is_absolute() {
                out = PathBuf::from("/");
            }
            push(&mut todo, &target);
        }
        Ok(out)
    }

    /// Creates directory `p` (not its parents).
    pub fn mkdir(&mut self, p: &Path, mode: u32) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        nix::sys::stat::mkdirat(fd, name, Mode::from_bits_truncate(mode as _)).map_err(errno)
    }

    /// Unlinks non-directory `p` (a symlink itself, never its target).
    pub fn remove_file(&mut self, p: &Path) -> io::Result<()> {
        self.forget(p);
        let (fd, name) = self.at(p)?;
        nix::unistd::unlinkat(fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir).map_err(errno)
    }

    /// Removes empty directory `p`.
    pub fn remove_dir(&mut self, p: &Path) -> io::Result<()> {
        self.forget(p);
        let (fd, name) = self.at(p)?;
        nix::unistd::unlinkat(fd, name, nix::unistd::UnlinkatFlags::RemoveDir).map_err(errno)
    }

    /// Removes directory `p` with everything in it; a symlink inside is
    /// unlinked, never followed.
    pub fn remove_dir_all(&mut self, p: &Path) -> io::Result<()> {
        self.forget(p);
        if !is_long(p) {
            // std's removal works relative to directory handles below `p`,
            // so its depth does not matter.
            return fs::remove_dir_all(p);
        }
        for name in self.read_dir(p)? {
            let child = p.join(name?);
            match self.lstat(&child) {
                Ok(m) if m.is_dir() => self.remove_dir_all(&child)?,
                Ok(_) => self.remove_file(&child)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        self.remove_dir(p)
    }

    /// Renames `from` to `to`, replacing a non-directory at `to` without
    /// following it.
    pub fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.forget(from);
        self.forget(to);
        let (fd1, n1) = self.owned_at(from)?;
        let (fd2, n2) = self.at(to)?;
        nix::fcntl::renameat(fd1.fd(), n1.as_os_str(), fd2, n2).map_err(errno)
    }

    /// Makes `to` another name of file `from` (a symlink at `from` is
    /// linked itself, not followed).
    pub fn hard_link(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (fd1, n1) = self.owned_at(from)?;
        let (fd2, n2) = self.at(to)?;
        nix::unistd::linkat(
            fd1.fd(),
            n1.as_os_str(),
            fd2,
            n2,
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(errno)
    }

    /// Creates symlink `p` pointing to `target`.
    pub fn symlink(&mut self, target: &OsStr, p: &Path) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        nix::unistd::symlinkat(target, fd, name).map_err(errno)
    }

    /// Creates FIFO or device node `p`.
    pub fn mknod(&mut self, p: &Path, kind: SFlag, mode: u32, rdev: u64) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        let mode = Mode::from_bits_truncate(mode as _);
        nix::sys::stat::mknodat(fd, name, kind, mode, rdev as _).map_err(errno)
    }

    /// Sets the owner of `p` (a symlink itself, never its target).
    pub fn lchown(&mut self, p: &Path, uid: u32, gid: u32) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        nix::unistd::fchownat(
            fd,
            name,
            Some(uid.into()),
            Some(gid.into()),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(errno)
    }

    /// Sets the permission bits of `p`, which the caller checked is no
    /// symlink (Linux cannot change a symlink's mode).
    pub fn chmod(&mut self, p: &Path, mode: u32) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        nix::sys::stat::fchmodat(
            fd,
            name,
            Mode::from_bits_truncate(mode as _),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(errno)
    }

    /// Sets the access and modification times of `p` to `t` (a symlink's
    /// own times, never its target's).
    pub fn set_times(&mut self, p: &Path, t: filetime::FileTime) -> io::Result<()> {
        let (fd, name) = self.at(p)?;
        let ts = nix::sys::time::TimeSpec::new(t.unix_seconds(), t.nanoseconds() as _);
        nix::sys::stat::utimensat(
            fd,
            name,
            &ts,
            &ts,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .map_err(errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Creates directories with 200-byte names under `root` until the path
    /// is longer than `len`; returns the deepest one. Built with `Dirs`
    /// itself: std cannot reach that deep.
    fn deep(dirs: &mut Dirs, root: &Path, len: usize) -> PathBuf {
        let mut p = root.to_path_buf();
        let mut i = 0;
        while p.as_os_str().len() <= len {
            p.push(format!("{i:0>200}"));
            dirs.mkdir(&p, 0o755).unwrap();
            i += 1;
        }
        p
    }

    #[test]
    fn splits_parent_and_name() {
        assert_eq!(split(b"/a/b"), (&b"/a"[..], &b"b"[..]));
        assert_eq!(split(b"/a//b/"), (&b"/a"[..], &b"b"[..]));
        assert_eq!(split(b"/b"), (&b"/"[..], &b"b"[..]));
        assert_eq!(split(b"b"), (&b"."[..], &b"b"[..]));
        assert!(within(b"/a", b"/a/b") && within(b"/a", b"/a") && !within(b"/a", b"/ab"));
    }

    #[test]
    fn every_operation_works_past_path_max() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = Dirs::new();
        let bottom = deep(&mut d, tmp.path(), 9000);
        assert!(fs::symlink_metadata(&bottom).is_err(), "std reaches it");
        let f = bottom.join("f");
        let mut w = d
            .open(&f, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL, 0o640)
            .unwrap();
        w.write_all(b"deep").unwrap();
        drop(w);
        let mut s = String::new();
        d.open(&f, OFlag::O_RDONLY, 0)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "deep");
        d.chmod(&f, 0o600).unwrap();
        let t = filetime::FileTime::from_unix_time(1_500_000_000, 7);
        d.set_times(&f, t).unwrap();
        let m = d.lstat(&f).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (m.mode() & 0o777, m.mtime(), m.mtime_nsec()),
            (0o600, 1_500_000_000, 7)
        );
        let l = bottom.join("l");
        d.symlink(OsStr::new("f"), &l).unwrap();
        assert!(d.lstat(&l).unwrap().is_symlink());
        assert_eq!(d.read_link(&l).unwrap(), Path::new("f"));
        d.hard_link(&f, &bottom.join("h")).unwrap();
        d.rename(&bottom.join("h"), &bottom.join("g")).unwrap();
        assert_eq!(d.lstat(&bottom.join("g")).unwrap().ino(), m.ino());
        let mut names: Vec<_> = d
            .read_dir(&bottom)
            .unwrap()
            .into_iter()
            .map(|n| n.unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["f", "g", "l"]);
        let x = d.with_xattr_path(&f, |p| xattr::list(p).map(|l| l.count()));
        assert!(x.is_ok() || x.unwrap_err().raw_os_error() == Some(nix::libc::ENOTSUP));
        // Removing the whole deep tree from the top, then reusing its name.
        let top = tmp.path().join(format!("{:0>200}", 0));
        d.remove_dir_all(&top).unwrap();
        assert!(fs::symlink_metadata(&top).is_err());
        let again = deep(&mut d, tmp.path(), 4200);
        assert_eq!(d.read_dir(&again).unwrap().len(), 0);
    }

    #[test]
    fn long_paths_are_created_with_parents_and_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(tmp.path()).unwrap();
        let mut d = Dirs::new();
        let mut want = root.clone();
        for i in 0..30 {
            want.push(format!("{i:0>200}"));
        }
        d.create_dir_all(&want).unwrap();
        assert!(d.lstat(&want).unwrap().is_dir());
        // Again: everything exists.
        d.create_dir_all(&want).unwrap();
        // A file where a directory goes.
        let file = want.join("f");
        d.open(&file, OFlag::O_WRONLY | OFlag::O_CREAT, 0o600)
            .unwrap();
        let e = d.create_dir_all(&file.join("x")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ENOTDIR));
        assert!(d.create_dir_all(&file).is_err());
        // A symlink to a directory deep down is followed, `.` and `..`
        // resolved, both by create_dir_all and canonicalize.
        let link = root.join("link");
        let mut shallow = root.clone();
        for i in 0..5 {
            shallow.push(format!("{i:0>200}"));
        }
        std::os::unix::fs::symlink(&shallow, &link).unwrap();
        let mut via = link.clone();
        for i in 5..30 {
            via.push(format!("{i:0>200}"));
        }
        for i in 0..20 {
            via.push(format!("{i:0>199}"));
        }
        via.push(".");
        via.push("..");
        via.push("tail");
        d.create_dir_all(&via).unwrap();
        let mut resolved = want.clone();
        for i in 0..19 {
            resolved.push(format!("{i:0>199}"));
        }
        resolved.push("tail");
        assert!(d.lstat(&resolved).unwrap().is_dir());
        assert_eq!(canonicalize(&via).unwrap(), resolved);
        assert_eq!(canonicalize(&link).unwrap(), shallow, "a short path");
        // `metadata` follows a symlink at a long path's end, `lstat` not.
        let up = want.join("up");
        d.symlink(OsStr::new(".."), &up).unwrap();
        use std::os::unix::fs::MetadataExt;
        let parent = d.lstat(want.parent().unwrap()).unwrap();
        assert_eq!(d.metadata(&up).unwrap().ino(), parent.ino());
        assert!(d.lstat(&up).unwrap().is_symlink());
        let loop_ = root.join("loop");
        std::os::unix::fs::symlink("loop", &loop_).unwrap();
        let mut looped = want.clone();
        looped.push("..");
        let e = canonicalize(&loop_.join(looped.strip_prefix("/").unwrap()));
        assert!(e.is_err());
        // A relative long path resolves against the working directory.
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(&resolved, &cwd);
        assert_eq!(canonicalize(&rel).unwrap(), resolved);
        // A short path whose resolution is long.
        // (A symlink holds less than PATH_MAX: two of them, each half way.)
        let mut mid = root.clone();
        for i in 0..14 {
            mid.push(format!("{i:0>200}"));
        }
        d.symlink(pathdiff(&want, &mid).as_os_str(), &mid.join("s2"))
            .unwrap();
        std::os::unix::fs::symlink(&mid, root.join("s1")).unwrap();
        let short = root.join("s1/s2");
        assert!(fs::canonicalize(&short).is_err(), "std resolves it");
        assert_eq!(canonicalize(&short).unwrap(), want);
    }

    /// `to` relative to directory `from` (both absolute, canonical).
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let common = from
            .components()
            .zip(to.components())
            .take_while(|(a, b)| a == b)
            .count();
        let mut out = PathBuf::new();
        for _ in from.components().skip(common) {
            out.push("..");
        }
        for c in to.components().skip(common) {
            out.push(c);
        }
        out
    }

    #[test]
    fn a_replaced_directory_is_not_reached_through_an_old_handle() {
        let tmp = tempfile::tempdir().unwrap();
        let mut d = Dirs::new();
        let bottom = deep(&mut d, tmp.path(), 5000);
        d.open(&bottom.join("old"), OFlag::O_WRONLY | OFlag::O_CREAT, 0o600)
            .unwrap();
        let parent = bottom.parent().unwrap();
        d.rename(&bottom, &parent.join("moved")).unwrap();
        d.mkdir(&bottom, 0o755).unwrap();
        assert!(d.read_dir(&bottom).unwrap().is_empty());
        assert!(d.lstat(&bottom.join("old")).is_err());
    }
}
