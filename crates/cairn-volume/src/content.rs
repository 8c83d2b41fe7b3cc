//! The seam between the FUSE layer (which serves the backing tree: names,
//! directories, metadata, and the bytes of plain files) and the volume's
//! content state (which files are optimized, which ranges were recalled).
//!
//! Every method is called with the file's inode lock held
//! ([`crate::inode_locks::InodeLocks`]): shared around `read_at` (reads of
//! one file may run at once, so an implementation's state is behind its
//! own locks), exclusive around the others, so an optimization switching
//! the file never interleaves with a read, write or truncate of it.

use std::fs::File;
use std::io;

/// Where a regular file's bytes come from. `ino` is the backing file's
/// inode number (stable across renames, shared by hard links); `file` is an
/// open handle on the backing file, whose length is always the file's
/// logical size.
pub trait Content: Send + Sync {
    /// Reads into `buf` the bytes at `offset` (fewer only at the end of the
    /// file), from the stream map where the file is optimized and the
    /// range not recalled, else from `file`.
    fn read_at(&self, ino: u64, file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize>;

    /// Called before `len` bytes are written at `offset` into `file`: makes
    /// that range hold the file's current bytes (recalls it from the chunk
    /// store when optimized, durably, 004's write path) so that the write
    /// then goes to the backing file.
    fn prepare_write(&self, ino: u64, file: &File, offset: u64, len: u64) -> io::Result<()>;

    /// Called after the backing file's length was set to `new_size` (an
    /// explicit truncate, or `O_TRUNC`): bytes past it are gone, and bytes
    /// a later extension adds read as zeros, never as old content.
    fn truncated(&self, ino: u64, file: &File, new_size: u64) -> io::Result<()>;

    /// The last name of `ino` was removed and no open handle holds it: its
    /// stream map (if any) stops being a root for garbage collection.
    fn released(&self, ino: u64) -> io::Result<()>;

    /// Whether `file`'s bytes are all in the backing file right now, so the
    /// FUSE layer may let the kernel serve it directly (passthrough) while
    /// it stays open.
    fn is_plain(&self, ino: u64) -> bool;
}

/// Every file plain: the backing tree served as it is (a volume with
/// nothing optimized, and the FUSE layer's tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct Plain;

impl Content for Plain {
    fn read_at(&self, _ino: u64, file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        read_full_at(file, offset, buf)
    }

    fn prepare_write(&self, _ino: u64, _file: &File, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    fn truncated(&self, _ino: u64, _file: &File, _new_size: u64) -> io::Result<()> {
        Ok(())
    }

    fn released(&self, _ino: u64) -> io::Result<()> {
        Ok(())
    }

    fn is_plain(&self, _ino: u64) -> bool {
        true
    }
}

/// `pread` until `buf` is full or the file ends.
pub fn read_full_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn plain_reads_the_backing_file_to_its_end() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"hello, volume").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(Plain.read_at(1, &f, 7, &mut buf).unwrap(), 6);
        assert_eq!(&buf[..6], b"volume");
        assert!(Plain.is_plain(1));
    }
}
