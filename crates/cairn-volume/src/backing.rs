//! Operations on backing files: freeing the bytes a stream map holds
//! (punching holes), and what a file occupies on disk.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;

use rustix::fs::{fallocate, FallocateFlags};

use crate::state::{Entry, FileTimes};

/// Frees the backing bytes `entry` says come from its stream map:
/// `[0, valid)` outside the recalled ranges. The file's length never
/// changes (`FALLOC_FL_KEEP_SIZE`), so a crash at any point leaves a file
/// whose bytes there are either the old ones or zeros, both unread while
/// the entry exists; punching again is harmless. (docs/volume.md: a
/// truncate to 0 and extension would open a window where the length is
/// lost, which recovery could not tell from a real truncate.)
pub fn punch_stream_map_ranges(file: &File, entry: &Entry) -> io::Result<()> {
    for (start, end) in entry.recalled.gaps(0, entry.valid) {
        fallocate(
            file,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            start,
            end - start,
        )
        .map_err(io::Error::from)?;
    }
    Ok(())
}

/// Bytes the file occupies on disk (its allocated blocks).
pub fn allocated_bytes(meta: &Metadata) -> u64 {
    meta.blocks() * 512
}

/// Sets the access and modification times `meta` recorded back on `file`
/// (a punch updates them).
pub fn restore_times(file: &File, meta: &Metadata) -> io::Result<()> {
    set_times(file, times_of(meta))
}

/// A file's access and modification times as `meta` records them.
pub fn times_of(meta: &Metadata) -> FileTimes {
    let ns = |secs: i64, nsec: i64| secs.saturating_mul(1_000_000_000).saturating_add(nsec);
    FileTimes {
        atime_ns: ns(meta.atime(), meta.atime_nsec()),
        mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
    }
}

/// Sets `file`'s access and modification times.
pub fn set_times(file: &File, t: FileTimes) -> io::Result<()> {
    let ft = |ns: i64| {
        filetime::FileTime::from_unix_time(
            ns.div_euclid(1_000_000_000),
            ns.rem_euclid(1_000_000_000) as u32,
        )
    };
    filetime::set_file_handle_times(file, Some(ft(t.atime_ns)), Some(ft(t.mtime_ns)))
}

/// A file's modification and status-change times, ns since the epoch.
pub fn mtime_ctime_ns(meta: &Metadata) -> (i64, i64) {
    let ns = |secs: i64, nsec: i64| secs.saturating_mul(1_000_000_000).saturating_add(nsec);
    (
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
    )
}
