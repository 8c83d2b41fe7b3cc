//! The temporaries a restore writes before renaming them into place
//! ([`create_temp`], removed on failure by [`TempGuard`]), the file sink
//! that writes a file's content (sparse extents, and the simulated capacity
//! of tests), and the full-disk rule: a full target file system is one
//! fatal error ([`full_disk`]). Used by the restore's target (`target.rs`).

use std::cell::{Cell, RefCell};
use std::collections::hash_map::RandomState;
use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_core::Error;

use crate::long_path::Dirs;

/// Prefix of the temporary names a restore writes before renaming.
pub const TEMP_PREFIX: &str = ".cairn-restore-";

/// A random-enough temporary name: pid, a process-wide counter and a
/// per-process random key; `create_new` settles any collision.
pub(super) fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    format!(
        "{TEMP_PREFIX}{:x}-{n:x}-{:08x}",
        std::process::id(),
        h.finish() as u32
    )
}

/// Creates a new entry under a fresh temporary name in `dir` with `make`,
/// retrying on a name collision. Returns the path and what `make` gave.
pub(super) fn create_temp<T>(
    dir: &Path,
    mut make: impl FnMut(&Path) -> io::Result<T>,
) -> io::Result<(PathBuf, T)> {
    let mut tries = 0;
    loop {
        let p = dir.join(temp_name());
        match make(&p) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
            Err(e) => return Err(e),
            Ok(t) => return Ok((p, t)),
        }
    }
}

/// Removes its temporary on drop unless disarmed after the rename.
pub(super) struct TempGuard<'t> {
    pub(super) path: Option<PathBuf>,
    pub(super) dirs: &'t RefCell<Dirs>,
}

impl TempGuard<'_> {
    pub(super) fn path(&self) -> &Path {
        self.path.as_deref().unwrap_or(Path::new(""))
    }

    pub(super) fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if let (Some(p), Ok(mut dirs)) = (self.path.take(), self.dirs.try_borrow_mut()) {
            // A regular file or a symlink: never a directory, never followed.
            let _ = dirs.remove_file(&p);
        }
    }
}

/// The file a restore writes, with the test-only simulated capacity.
pub(super) struct Sink<'a> {
    pub(super) file: fs::File,
    pub(super) capacity: Option<&'a Cell<u64>>,
    /// A sparse file's data extents: the content written is placed at
    /// their offsets, leaving holes between them.
    pub(super) extents: Option<Vec<cairn_format::dir::Extent>>,
    /// Content bytes written so far (checked against the entry when the
    /// file is finished).
    pub(super) data: u64,
}

impl Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(ext) = &self.extents {
            use std::os::unix::fs::FileExt;
            let mut at = 0usize;
            for (off, len) in cairn_format::extras::logical_ranges(ext, self.data, buf.len() as u64)
            {
                self.file.write_all_at(&buf[at..at + len as usize], off)?;
                at += len as usize;
            }
            if at != buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "content longer than the file's extents",
                ));
            }
            self.data += at as u64;
            return Ok(at);
        }
        if let Some(c) = self.capacity {
            let left = c.get();
            if left == 0 && !buf.is_empty() {
                return Err(io::Error::from_raw_os_error(28));
            }
            let n = self.file.write(&buf[..buf.len().min(left as usize)])?;
            c.set(left - n as u64);
            self.data += n as u64;
            return Ok(n);
        }
        let n = self.file.write(buf)?;
        self.data += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Whether `e` says the file system is full (ENOSPC) or the quota is
/// exhausted (EDQUOT).
pub fn is_full_disk(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) || matches!(e.raw_os_error(), Some(28) | Some(122))
}

/// If `err` is a full target file system, the one fatal error that stops
/// the restore ("target file system is full while writing PATH");
/// otherwise `err` unchanged.
pub fn full_disk(err: Error, dest: &Path) -> std::result::Result<Error, Error> {
    match err {
        Error::Io { source, .. } if is_full_disk(&source) => Ok(Error::io(
            format!(
                "target file system is full while writing {}",
                dest.display()
            ),
            source,
        )),
        other => Err(other),
    }
}
