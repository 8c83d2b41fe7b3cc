//! Backing-tree metadata as the kernel's FUSE client sees it: a backing
//! `stat` as a [`FileAttr`], device numbers in FUSE's 32-bit encoding, and
//! system-call errors as the errno the kernel passes on.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};
use rustix::fs::Stat;

/// How long the kernel may trust an entry or attributes it was given.
/// Every change to the backing tree goes through the mount, and the kernel
/// updates its own copy after a write or truncate, so this only bounds how
/// late a change made by a background job (ctime of a switched file) is
/// seen.
pub(super) const TTL: Duration = Duration::from_secs(1);

/// The kind of file a `st_mode` describes.
pub(super) fn file_type(mode: u32) -> FileType {
    match mode & libc_mode::S_IFMT {
        libc_mode::S_IFDIR => FileType::Directory,
        libc_mode::S_IFLNK => FileType::Symlink,
        libc_mode::S_IFIFO => FileType::NamedPipe,
        libc_mode::S_IFSOCK => FileType::Socket,
        libc_mode::S_IFCHR => FileType::CharDevice,
        libc_mode::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// The `st_mode` file-type bits (the values every Linux ABI shares).
pub(super) mod libc_mode {
    pub const S_IFMT: u32 = 0o170000;
    pub const S_IFSOCK: u32 = 0o140000;
    pub const S_IFLNK: u32 = 0o120000;
    pub const S_IFREG: u32 = 0o100000;
    pub const S_IFBLK: u32 = 0o060000;
    pub const S_IFDIR: u32 = 0o040000;
    pub const S_IFCHR: u32 = 0o020000;
    pub const S_IFIFO: u32 = 0o010000;
    pub const S_ISGID: u32 = 0o2000;
}

fn system_time(secs: i64, nsec: u64) -> SystemTime {
    let nsec = Duration::from_nanos(nsec.min(999_999_999));
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nsec
    }
}

/// The attributes of backing file `st`, served as FUSE inode `ino`.
// The field types of `struct stat` differ between architectures: the casts
// are identities on some.
#[allow(clippy::unnecessary_cast)]
pub(super) fn to_attr(ino: u64, st: &Stat) -> FileAttr {
    let mtime = system_time(st.st_mtime as i64, st.st_mtime_nsec as u64);
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: system_time(st.st_atime as i64, st.st_atime_nsec as u64),
        mtime,
        ctime: system_time(st.st_ctime as i64, st.st_ctime_nsec as u64),
        crtime: mtime,
        kind: file_type(st.st_mode as u32),
        perm: (st.st_mode as u32 & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: kernel_dev(st.st_rdev as u64),
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

/// A device number (`st_rdev`) in the 32-bit encoding FUSE hands the
/// kernel: minor's low 8 bits, 12 bits of major, minor's upper 12 bits.
pub(super) fn kernel_dev(rdev: u64) -> u32 {
    let (major, minor) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & 0xfff00) << 12)
}

/// The inverse of [`kernel_dev`]: a device number the kernel sent (mknod).
pub(super) fn backing_dev(dev: u32) -> u64 {
    let major = (dev & 0xfff00) >> 8;
    let minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    rustix::fs::makedev(major, minor)
}

/// A failed system call's errno, for the kernel.
pub(super) fn errno(e: rustix::io::Errno) -> Errno {
    Errno::from_i32(e.raw_os_error())
}

/// An I/O error's errno (`EIO` when it carries none, as a content error
/// from the chunk store may).
pub(super) fn io_errno(e: io::Error) -> Errno {
    match e.raw_os_error() {
        Some(n) if n > 0 => Errno::from_i32(n),
        _ => Errno::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip_through_the_fuse_encoding() {
        for (major, minor) in [(1, 3), (259, 0x10001), (0xfff, 0xff), (8, 0)] {
            let dev = rustix::fs::makedev(major, minor);
            assert_eq!(backing_dev(kernel_dev(dev)), dev, "{major}:{minor}");
        }
        assert_eq!(kernel_dev(rustix::fs::makedev(1, 3)), 0x103);
    }

    #[test]
    fn times_before_the_epoch_keep_their_nanoseconds() {
        let t = system_time(-2, 500_000_000);
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_millis(1500)
        );
    }
}
