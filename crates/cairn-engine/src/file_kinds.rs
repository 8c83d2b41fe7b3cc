//! Files as they are on disk beyond bytes and mode: special files, extended
//! attributes, hard links and sparse files (docs/file-kinds.md).
//!
//! - Backup side: [`data_extents`] finds a file's data regions with
//!   `SEEK_DATA`/`SEEK_HOLE`; [`ExtentReader`] reads only them, as one
//!   stream (the stored content of a sparse file); [`read_xattrs`] lists an
//!   entry's extended attributes in canonical (sorted) order.
//! - Restore side: [`make_special`] creates a FIFO or device node,
//!   [`apply_xattrs`] sets attributes (best effort, counting refusals).
//! - Readers: [`Reader::for_each_logical`] hands out a file's logical bytes
//!   (zeros in the holes) for `cat`, `dump` and the tar archive.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use cairn_core::{Error, Result};
use cairn_format::dir::{DirEntry, EntryKind, Extent};

use crate::long_path::Dirs;
use crate::read::Reader;

/// The data regions of `file` (`size` bytes long) as the file system
/// reports them, or `None` when the file has no hole (or the file system
/// cannot tell): then it is read and stored whole.
pub fn data_extents(file: &File, size: u64) -> Option<Vec<Extent>> {
    if size == 0 {
        return None;
    }
    let found = seek_extents(file, size);
    // Seeking moved the file position; the caller reads from the start.
    nix::unistd::lseek(file.as_fd(), 0, nix::unistd::Whence::SeekSet).ok()?;
    found
}

fn seek_extents(file: &File, size: u64) -> Option<Vec<Extent>> {
    use nix::unistd::{lseek, Whence};
    let fd = file.as_fd();
    let mut out: Vec<Extent> = Vec::new();
    let mut pos: u64 = 0;
    while pos < size {
        let start = match lseek(fd, pos as i64, Whence::SeekData) {
            Ok(s) => s as u64,
            // ENXIO: no data at or after `pos`, the rest is a hole.
            Err(nix::errno::Errno::ENXIO) => break,
            Err(_) => return None,
        };
        if start >= size {
            break;
        }
        let end = match lseek(fd, start as i64, Whence::SeekHole) {
            Ok(e) => (e as u64).min(size),
            Err(_) => return None,
        };
        if end <= start {
            return None;
        }
        match out.last_mut() {
            Some(last) if last.end() == start => last.len += end - start,
            _ => out.push(Extent {
                offset: start,
                len: end - start,
            }),
        }
        pos = end;
    }
    if out.len() == 1 && out[0].offset == 0 && out[0].len == size {
        return None;
    }
    Some(out)
}

/// Reads a sparse file's data extents one after the other: the bytes a
/// sparse file's content blob holds. Past the file's current end (it
/// shrank while being read) it yields zeros, so the stream always has
/// exactly the extents' length and matches the recorded extents.
pub struct ExtentReader<'a> {
    file: &'a File,
    extents: &'a [Extent],
    /// Index of the current extent and bytes of it already read.
    at: usize,
    done: u64,
}

impl<'a> ExtentReader<'a> {
    pub fn new(file: &'a File, extents: &'a [Extent]) -> Self {
        ExtentReader {
            file,
            extents,
            at: 0,
            done: 0,
        }
    }
}

impl Read for ExtentReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(x) = self.extents.get(self.at) else {
                return Ok(0);
            };
            if self.done == x.len {
                self.at += 1;
                self.done = 0;
                continue;
            }
            let want = buf.len().min((x.len - self.done) as usize);
            let n = match self.file.read_at(&mut buf[..want], x.offset + self.done)? {
                0 => {
                    buf[..want].fill(0);
                    want
                }
                n => n,
            };
            self.done += n as u64;
            return Ok(n);
        }
    }
}

/// The extended attributes of `path` (not following a symlink), sorted by
/// name. A file system without them gives none; an attribute that vanishes
/// between listing and reading is left out.
pub fn read_xattrs(path: &Path) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    use std::os::unix::ffi::OsStrExt;
    let names = match xattr::list(path) {
        Ok(n) => n,
        Err(e) if unsupported(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for n in names {
        if let Some(v) = xattr::get(path, &n)? {
            out.push((n.as_bytes().to_vec(), v));
        }
    }
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

fn unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ENOTSUP) || e.kind() == io::ErrorKind::Unsupported
}

/// Sets `e`'s extended attributes on `path` (not following a symlink).
/// Returns the refusals ("name: why"): a file system or a process without
/// the right (`trusted.*` needs privilege) refuses some; the entry is
/// restored anyway.
pub fn apply_xattrs(dirs: &mut Dirs, path: &Path, e: &DirEntry) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let mut refused = Vec::new();
    for (name, value) in &e.extras.xattrs {
        let n = std::ffi::OsStr::from_bytes(name);
        if let Err(err) = dirs.with_xattr_path(path, |p| xattr::set(p, n, value)) {
            refused.push(format!(
                "extended attribute {}: {err}",
                String::from_utf8_lossy(name)
            ));
        }
    }
    refused
}

/// Creates FIFO or device node `path` for entry `e` with mode 0600 (the
/// caller applies the recorded mode afterwards). Sockets are not created:
/// a socket is only meaningful while a process listens on it.
pub fn make_special(dirs: &mut Dirs, path: &Path, e: &DirEntry) -> io::Result<()> {
    use nix::sys::stat::SFlag;
    let kind = match e.kind {
        EntryKind::Fifo => SFlag::S_IFIFO,
        EntryKind::CharDevice => SFlag::S_IFCHR,
        EntryKind::BlockDevice => SFlag::S_IFBLK,
        _ => return Err(io::Error::from_raw_os_error(nix::libc::EINVAL)),
    };
    let rdev = e.extras.rdev.unwrap_or(0);
    dirs.mknod(path, kind, 0o600, rdev)
}

/// The first stored name of each hard-link group of one backup stream, so
/// later names reuse its content ([`crate::backup`]'s `Event::Linked`).
#[derive(Default)]
pub(crate) struct LinkGroups {
    first: std::collections::HashMap<(u64, u64), DirEntry>,
}

impl LinkGroups {
    /// Records `e` if it is the first name of a group.
    pub(crate) fn first(&mut self, e: &DirEntry) {
        if let (EntryKind::File, Some(h)) = (e.kind, e.extras.hard_link) {
            self.first
                .entry((h.dev, e.inode))
                .or_insert_with(|| e.clone());
        }
    }

    /// Gives later name `e` its group's content, size and extents.
    pub(crate) fn fill(&self, e: &mut DirEntry) -> Result<()> {
        let key = e.extras.hard_link.map(|h| (h.dev, e.inode));
        let first = key.and_then(|k| self.first.get(&k)).ok_or_else(|| {
            Error::invalid(format!(
                "hard link {:?} before the first name of its file",
                String::from_utf8_lossy(&e.name)
            ))
        })?;
        e.content = first.content;
        e.size = first.size;
        e.extras.extents = first.extras.extents.clone();
        Ok(())
    }
}

/// Zeros handed out for holes, a block at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

impl Reader {
    /// Calls `sink` with file `e`'s logical bytes in order: its content,
    /// or for a sparse file its data extents with zeros in between and
    /// after. Returns the bytes handed out (the entry's size for a sound
    /// sparse file).
    pub fn for_each_logical(
        &mut self,
        e: &DirEntry,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<u64> {
        let Some(extents) = &e.extras.extents else {
            let mut n = 0;
            if let Some(b) = &e.content {
                self.for_each_chunk(b, &mut |c| {
                    n += c.len() as u64;
                    sink(c)
                })?;
            }
            return content_bytes_match(e, n).map(|()| n);
        };
        let zeros = |mut n: u64, sink: &mut dyn FnMut(&[u8]) -> Result<()>| {
            while n > 0 {
                let k = n.min(ZEROS.len() as u64);
                sink(&ZEROS[..k as usize])?;
                n -= k;
            }
            Ok::<(), Error>(())
        };
        // `pos`: logical bytes handed out; `data`: content bytes consumed.
        let (mut pos, mut data) = (0u64, 0u64);
        if let Some(b) = &e.content {
            self.for_each_chunk(b, &mut |mut c| {
                while !c.is_empty() {
                    let Some((off, len)) =
                        cairn_format::extras::logical_ranges(extents, data, c.len() as u64).next()
                    else {
                        return Err(Error::corrupt(
                            "sparse file",
                            "content longer than its extents",
                        ));
                    };
                    zeros(off - pos, sink)?;
                    sink(&c[..len as usize])?;
                    pos = off + len;
                    data += len;
                    c = &c[len as usize..];
                }
                Ok(())
            })?;
        }
        content_bytes_match(e, data)?;
        zeros(e.size.saturating_sub(pos), sink)?;
        Ok(e.size.max(pos))
    }
}

/// Defence in depth behind the listing decoder's size rules: a file whose
/// content gave `got` bytes where its entry promises another count (its
/// size, or for a sparse file the bytes of its data extents) is corrupt,
/// never handed out short (or long) as if it were whole.
pub(crate) fn content_bytes_match(e: &DirEntry, got: u64) -> Result<()> {
    let want = match e.extras.extents {
        Some(_) => e.data_size(),
        None => e.size,
    };
    if got == want {
        return Ok(());
    }
    Err(Error::corrupt(
        format!("file {:?}", String::from_utf8_lossy(&e.name)),
        format!("its content holds {got} bytes but its entry records {want}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    #[test]
    fn extents_of_a_sparse_file_and_its_data_stream() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let mut f = File::create(&p).unwrap();
        f.seek(SeekFrom::Start(1 << 20)).unwrap();
        f.write_all(b"middle").unwrap();
        f.set_len(4 << 20).unwrap();
        let f = File::open(&p).unwrap();
        let Some(ext) = data_extents(&f, 4 << 20) else {
            return crate::skip_or_fail("the temporary directory's file system reports no holes");
        };
        assert_eq!(ext.len(), 1);
        assert!(ext[0].offset <= 1 << 20 && ext[0].end() >= (1 << 20) + 6);
        let mut data = Vec::new();
        ExtentReader::new(&f, &ext).read_to_end(&mut data).unwrap();
        assert_eq!(data.len() as u64, ext[0].len);
        let at = ((1 << 20) - ext[0].offset) as usize;
        assert_eq!(&data[at..at + 6], b"middle");
    }

    #[test]
    fn a_dense_file_has_no_extents_and_reads_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d");
        std::fs::write(&p, vec![1u8; 10000]).unwrap();
        let mut f = File::open(&p).unwrap();
        assert_eq!(data_extents(&f, 10000), None);
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 10000);
    }

    #[test]
    fn reading_past_a_shrunk_end_gives_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, b"abc").unwrap();
        let f = File::open(&p).unwrap();
        let ext = [Extent { offset: 1, len: 5 }];
        let mut data = Vec::new();
        ExtentReader::new(&f, &ext).read_to_end(&mut data).unwrap();
        assert_eq!(data, b"bc\0\0\0");
    }
}
