//! The kernel's read-ahead on the mount. The kernel reads ahead of a
//! sequential reader of a FUSE file system as of any other: by its
//! backing-device info's `read_ahead_kb` (128 KiB by default), so a reader
//! of an optimized file reaches the daemon as a stream of 128 KiB requests,
//! each waiting for the last. A FUSE request may carry 1 MiB (the session
//! negotiates `FUSE_MAX_PAGES`), and the kernel offers no larger
//! read-ahead at `init`; the device's `read_ahead_kb` in sysfs is where it
//! is raised (root only, as every write under `/sys/class/bdi`). Plain
//! files served by passthrough use the backing file system's read-ahead
//! and are not affected.

use std::io;
use std::path::Path;

/// Sets the read-ahead of the FUSE mount at `mountpoint` to `kib` KiB.
/// Must not touch the mount itself (no `stat` of it: the session may not be
/// serving yet), so the device number comes from `/proc/self/mountinfo`.
pub fn set(mountpoint: &Path, kib: u32) -> io::Result<()> {
    let dev = mount_device(mountpoint)?;
    let path = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    std::fs::write(&path, format!("{kib}\n"))
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// The `major:minor` of the newest mount at `mountpoint`.
fn mount_device(mountpoint: &Path) -> io::Result<String> {
    let want = mountpoint.canonicalize()?;
    let want = escape(&want.to_string_lossy());
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    // Fields: id, parent id, major:minor, root, mount point, ...; a later
    // line over the same point is the mount on top.
    table
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let dev = f.nth(2)?;
            let point = f.nth(1)?;
            (point == want).then(|| dev.to_string())
        })
        .next_back()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{want} is not in /proc/self/mountinfo"),
            )
        })
}

/// A path as `mountinfo` writes it: space, tab, newline and backslash as
/// octal escapes.
fn escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_escaped_as_mountinfo_writes_them() {
        assert_eq!(escape("/a b/c\\d"), "/a\\040b/c\\134d");
    }

    #[test]
    fn the_root_mount_is_found() {
        let dev = mount_device(Path::new("/")).unwrap();
        let (major, minor) = dev.split_once(':').unwrap();
        assert!(major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok());
    }
}
