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
    let meta = file.metadata()?;
    for (start, end) in punch_ranges(entry, meta.len(), meta.blksize()) {
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

/// The byte ranges [`punch_stream_map_ranges`] frees in a backing file of
/// `len` bytes on a file system of `block`-byte blocks. A range that ends
/// at the end of the file is carried to the end of its last block: a punch
/// frees only whole blocks, and the file's partial last block (bytes past
/// `len` are no file's) would otherwise stay allocated in every file.
fn punch_ranges(entry: &Entry, len: u64, block: u64) -> Vec<(u64, u64)> {
    let mut ranges = entry.recalled.gaps(0, entry.valid);
    if let Some(last) = ranges.last_mut() {
        if last.1 >= len && block > 0 {
            last.1 = last.1.div_ceil(block) * block;
        }
    }
    ranges
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranges::RangeSet;
    use crate::state::Identity;
    use cairn_core::Fingerprint;
    use cairn_format::dir::BlobRef;

    fn entry(valid: u64, recalled: &[(u64, u64)]) -> Entry {
        Entry {
            identity: Identity {
                ino: 1,
                birth_ns: None,
            },
            blob: BlobRef {
                root: Fingerprint::from_slice(&[1; 32]),
                level: 0,
                size: valid,
            },
            valid,
            recalled: RangeSet::from_ranges(recalled.iter().copied()),
            times_pending: None,
        }
    }

    #[test]
    fn the_partial_last_block_is_freed_but_never_bytes_past_valid() {
        // A 40,000-byte file: the punch reaches its last block's end.
        assert_eq!(
            punch_ranges(&entry(40_000, &[]), 40_000, 4096),
            [(0, 40_960)]
        );
        // A recalled tail: the punch stops where the recalled range starts.
        assert_eq!(
            punch_ranges(&entry(40_000, &[(32_768, 40_000)]), 40_000, 4096),
            [(0, 32_768)]
        );
        // Bytes appended past `valid` are the backing file's: untouched.
        assert_eq!(
            punch_ranges(&entry(40_000, &[]), 50_000, 4096),
            [(0, 40_000)]
        );
        assert_eq!(
            punch_ranges(&entry(65_536, &[]), 65_536, 4096),
            [(0, 65_536)]
        );
    }
}
