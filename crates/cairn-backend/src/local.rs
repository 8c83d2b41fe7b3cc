//! [`LocalBackend`]: a repository stored as a directory tree on a local filesystem.
//!
//! Each key is a file under the root (`containers/00/0000000000000001` is
//! `<root>/containers/00/0000000000000001`). Two top-level names are reserved
//! and never hold objects: `tmp/` (temporary files of in-flight writes) and
//! `locks/` (lock files).
//!
//! Crash safety: [`Backend::write_atomic`] writes a unique temporary file in
//! `tmp/`, `fsync`s it, creates (and makes durable) any missing parent
//! directory of the target, `rename`s the file into place and `fsync`s the
//! target's directory. A crash at any point leaves either the old state or
//! the complete new object, plus perhaps a stray temporary that
//! [`Backend::clean_temporaries`] removes. Deletes are made durable the same
//! way (the directory is `fsync`ed).
//!
//! Locks are `flock(2)` locks on `locks/<name>`, taken on a freshly opened
//! file each time, so two locks in one process conflict exactly like two locks
//! in two processes.

use crate::{truncated, validate_key, validate_lock_name, validate_prefix};
use cairn_core::error::IoContext;
use cairn_core::{Backend, Error, LockGuard, LockMode, Result};
use fs4::fs_std::FileExt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const TMP_DIR: &str = "tmp";
const LOCKS_DIR: &str = "locks";

/// A repository in a local directory. Cheap to clone (it is just the path).
#[derive(Clone, Debug)]
pub struct LocalBackend {
    root: PathBuf,
    /// Whether writes and deletes are made durable (`fsync`); off only
    /// for [`LocalBackend::scratch`].
    durable: bool,
}

impl LocalBackend {
    /// Opens an existing directory. Fails if `root` is missing or not a directory.
    pub fn open(root: &Path) -> Result<Self> {
        let meta = fs::metadata(root).ctx(|| format!("opening repository {}", root.display()))?;
        if !meta.is_dir() {
            return Err(Error::invalid(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        Ok(LocalBackend {
            root: root.to_path_buf(),
            durable: true,
        })
    }

    /// A directory for scratch objects that nothing needs after a crash
    /// (the simulator's index and snapshots, spilled out of RAM): the same
    /// atomic writes and create-if-absent, without any `fsync`.
    pub fn scratch(root: &Path) -> Result<Self> {
        let mut b = Self::create(root)?;
        b.durable = false;
        Ok(b)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if self.durable {
            sync_dir_io(dir)
        } else {
            Ok(())
        }
    }

    /// Creates the directory (and missing ancestors) if needed and opens it.
    /// An existing directory is fine; whether it already holds a repository
    /// is for the caller to decide.
    pub fn create(root: &Path) -> Result<Self> {
        match fs::metadata(root) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(Error::invalid(format!(
                    "{} exists and is not a directory",
                    root.display()
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(root)
                    .ctx(|| format!("creating repository directory {}", root.display()))?;
                if let Some(parent) = root.parent() {
                    let parent = if parent.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        parent
                    };
                    sync_dir(parent)?;
                }
            }
            Err(e) => {
                return Err(Error::io(
                    format!("creating repository {}", root.display()),
                    e,
                ))
            }
        }
        Self::open(root)
    }

    /// The repository directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file path of an object key (validated, reserved names rejected).
    pub fn object_path(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        let first = key.split('/').next().unwrap_or_default();
        if first == TMP_DIR || first == LOCKS_DIR {
            return Err(Error::invalid(format!(
                "invalid object key {key:?}: `{first}/` is reserved"
            )));
        }
        Ok(self.root.join(key))
    }

    fn open_object(&self, key: &str) -> Result<(File, u64)> {
        let path = self.object_path(key)?;
        let file = File::open(&path).map_err(|e| self.read_err(key, e))?;
        let meta = file.metadata().map_err(|e| self.read_err(key, e))?;
        if meta.is_dir() {
            return Err(Error::NotFound(format!("{key} (is a directory)")));
        }
        Ok((file, meta.len()))
    }

    fn read_err(&self, key: &str, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound {
            Error::NotFound(format!("object {key} in {}", self.root.display()))
        } else {
            Error::io(format!("reading {key} in {}", self.root.display()), e)
        }
    }

    pub(crate) fn write_err(&self, key: &str, e: io::Error) -> Error {
        let full = e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(28);
        let context = if full {
            format!("writing {key} in {}: disk full", self.root.display())
        } else {
            format!("writing {key} in {}", self.root.display())
        };
        Error::io(context, e)
    }

    /// Creates a new, uniquely named temporary file in `tmp/`.
    pub(crate) fn temp_file(&self) -> io::Result<(PathBuf, File)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = self.root.join(TMP_DIR);
        fs::create_dir_all(&dir)?;
        loop {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let name = format!(
                "{}-{}-{nanos:08x}.tmp",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            );
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok((path, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes sure `dir` (inside the root) exists, fsyncing the parent of
    /// every directory it creates so the new entries survive a crash.
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        if dir.is_dir() {
            return Ok(());
        }
        let mut missing = Vec::new();
        let mut cur = dir;
        while !cur.is_dir() {
            missing.push(cur.to_path_buf());
            match cur.parent() {
                Some(p) if cur != self.root => cur = p,
                _ => break,
            }
        }
        for d in missing.iter().rev() {
            match fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => continue,
                Err(e) => return Err(e),
            }
            if let Some(parent) = d.parent() {
                self.sync_dir(parent)?;
            }
        }
        Ok(())
    }

    /// Writes `data` to a fresh temporary, fsyncs it and makes sure the
    /// target's directory exists; then `publish(tmp, parent)` puts it in
    /// place. The temporary is removed if anything fails (and, when
    /// `always_remove`, afterwards too: a hard link leaves it behind).
    fn via_temp<T>(
        &self,
        target: &Path,
        data: &[u8],
        always_remove: bool,
        publish: impl FnOnce(&Path, &Path) -> io::Result<T>,
    ) -> io::Result<T> {
        let (tmp, mut file) = self.temp_file()?;
        let result = (|| {
            file.write_all(data)?;
            let parent = self.close_temp(file, target)?;
            publish(&tmp, parent)
        })();
        if always_remove || result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// A written temporary made ready to publish as `target`: made durable
    /// and closed, and `target`'s directory made to exist, which is
    /// returned.
    pub(crate) fn close_temp<'t>(&'t self, file: File, target: &'t Path) -> io::Result<&'t Path> {
        if self.durable {
            file.sync_all()?;
        }
        drop(file);
        let parent = target.parent().unwrap_or(&self.root);
        self.ensure_dir(parent)?;
        Ok(parent)
    }

    /// Create-if-absent's publish step: the closed temporary `tmp`
    /// hard-linked as `target` in `parent` (`false` if an entry is there:
    /// `link(2)` never replaces one), and the new entry made durable.
    pub(crate) fn link_new(&self, tmp: &Path, target: &Path, parent: &Path) -> io::Result<bool> {
        match fs::hard_link(tmp, target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(e),
        }
        self.sync_dir(parent)?;
        Ok(true)
    }

    fn write_inner(&self, target: &Path, data: &[u8]) -> io::Result<()> {
        self.via_temp(target, data, false, |tmp, parent| {
            fs::rename(tmp, target)?;
            self.sync_dir(parent)
        })
    }

    /// Create-if-absent: the durable temporary is hard-linked to the target
    /// name, and `link(2)` fails with `EEXIST` rather than replace an existing
    /// entry, so of two racing creators exactly one wins (unlike `rename`).
    fn create_inner(&self, target: &Path, data: &[u8]) -> io::Result<bool> {
        // A writer that holds the lock may remove our temporary (it cleans
        // leftovers of interrupted writes) between its creation and the
        // link: then the link fails with `NotFound`, and the write is redone
        // unless the target appeared meanwhile.
        let mut attempts = 0;
        loop {
            match self.create_once(target, data) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                    if fs::symlink_metadata(target).is_ok() {
                        return Ok(false);
                    }
                    attempts += 1;
                }
                r => return r,
            }
        }
    }

    fn create_once(&self, target: &Path, data: &[u8]) -> io::Result<bool> {
        self.via_temp(target, data, true, |tmp, parent| {
            self.link_new(tmp, target, parent)
        })
    }

    fn list_dir(&self, dir_key: &str, prefix: &str, out: &mut Vec<String>) -> Result<()> {
        let dir = if dir_key.is_empty() {
            self.root.clone()
        } else {
            self.root.join(dir_key.trim_end_matches('/'))
        };
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(()),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        for entry in entries {
            let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // not a name cairn writes
            };
            if dir_key.is_empty() && (name == TMP_DIR || name == LOCKS_DIR) {
                continue;
            }
            let key = format!("{dir_key}{name}");
            let file_type = entry
                .file_type()
                .ctx(|| format!("listing {}", dir.display()))?;
            if file_type.is_dir() {
                let sub = format!("{key}/");
                // Descend only where keys starting with `prefix` can live.
                if sub.starts_with(prefix) || prefix.starts_with(&sub) {
                    self.list_dir(&sub, prefix, out)?;
                }
            } else if key.starts_with(prefix) {
                out.push(key);
            }
        }
        Ok(())
    }
}

/// `fsync`s a directory so that entries created, renamed or removed in it are durable.
fn sync_dir(dir: &Path) -> Result<()> {
    sync_dir_io(dir).ctx(|| format!("syncing directory {}", dir.display()))
}

#[cfg(unix)]
fn sync_dir_io(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir_io(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Holds a `flock` for as long as it lives; closing the file releases it.
struct LocalLock {
    file: File,
    path: PathBuf,
}

impl Drop for LocalLock {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.file);
    }
}

impl LockGuard for LocalLock {
    /// The file goes while the lock is still held: whoever opens the name
    /// afterwards gets a new file, free, which is what a prober of a gone
    /// session's lock should find.
    fn release_removing(self: Box<Self>) {
        let _ = fs::remove_file(&self.path);
    }
}

impl Backend for LocalBackend {
    fn read(&self, key: &str) -> Result<Vec<u8>> {
        let (mut file, size) = self.open_object(key)?;
        let mut buf = Vec::with_capacity(size as usize);
        file.read_to_end(&mut buf)
            .map_err(|e| self.read_err(key, e))?;
        Ok(buf)
    }

    fn read_at(&self, key: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
        let (file, size) = self.open_object(key)?;
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(truncated(key, offset, len, size));
        }
        // Positioned reads (pread, no separate seek) into the buffer's
        // spare capacity: it is never zeroed first, only written (a hot
        // path: every chunk a volume or mount reads comes through here).
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            match rustix::io::pread(&file, rustix::buffer::spare_capacity(&mut buf), at) {
                Ok(0) => return Err(truncated(key, offset, len, size)),
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(self.read_err(key, e.into())),
            }
        }
        // The capacity may exceed what was asked.
        buf.truncate(len);
        Ok(buf)
    }

    fn read_at_into(&self, key: &str, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        if buf.capacity() < len {
            *buf = self.read_at(key, offset, len)?;
            return Ok(());
        }
        // The buffer's memory is reused as it is (already touched: no page
        // faults); only bytes past its current length are zeroed first.
        buf.resize(len, 0);
        self.read_at_slice(key, offset, buf)
    }

    fn read_at_slice(&self, key: &str, offset: u64, out: &mut [u8]) -> Result<()> {
        let len = out.len();
        let (file, size) = self.open_object(key)?;
        if offset.checked_add(len as u64).is_none_or(|end| end > size) {
            return Err(truncated(key, offset, len, size));
        }
        let mut done = 0;
        while done < len {
            match rustix::io::pread(&file, &mut out[done..], offset + done as u64) {
                Ok(0) => return Err(truncated(key, offset, len, size)),
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(self.read_err(key, e.into())),
            }
        }
        Ok(())
    }

    fn prefetch(&self, key: &str, offset: u64, len: u64) -> bool {
        let Ok((file, _)) = self.open_object(key) else {
            return false;
        };
        // The kernel starts reading the range into the page cache and
        // returns at once (`POSIX_FADV_WILLNEED`).
        rustix::fs::fadvise(
            &file,
            offset,
            std::num::NonZeroU64::new(len),
            rustix::fs::Advice::WillNeed,
        )
        .is_ok()
    }

    fn read_tail(&self, key: &str, len: usize) -> Result<(u64, Vec<u8>)> {
        let (file, size) = self.open_object(key)?;
        let take = (len as u64).min(size);
        let mut buf = vec![0; take as usize];
        file.read_exact_at(&mut buf, size - take).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                truncated(key, size - take, take as usize, size)
            } else {
                self.read_err(key, e)
            }
        })?;
        Ok((size, buf))
    }

    fn size(&self, key: &str) -> Result<u64> {
        let path = self.object_path(key)?;
        let meta = fs::metadata(&path).map_err(|e| self.read_err(key, e))?;
        if meta.is_dir() {
            return Err(Error::NotFound(format!("{key} (is a directory)")));
        }
        Ok(meta.len())
    }

    fn exists(&self, key: &str) -> Result<bool> {
        let path = self.object_path(key)?;
        match fs::metadata(&path) {
            Ok(meta) => Ok(!meta.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.read_err(key, e)),
        }
    }

    fn write_atomic(&self, key: &str, data: &[u8]) -> Result<()> {
        let target = self.object_path(key)?;
        self.write_inner(&target, data)
            .map_err(|e| self.write_err(key, e))
    }

    fn create_new(&self, key: &str, data: &[u8]) -> Result<bool> {
        let target = self.object_path(key)?;
        self.create_inner(&target, data)
            .map_err(|e| self.write_err(key, e))
    }

    fn create_streamed(
        &self,
        key: &str,
    ) -> Result<Option<Box<dyn cairn_core::StreamedObject + '_>>> {
        Ok(Some(Box::new(crate::local_streamed::LocalStreamed::new(
            self, key,
        )?)))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.object_path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {
                let parent = path.parent().unwrap_or(&self.root);
                self.sync_dir(parent)
                    .ctx(|| format!("syncing directory {}", parent.display()))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(
                format!("deleting {key} in {}", self.root.display()),
                e,
            )),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        validate_prefix(prefix)?;
        let first = prefix.split('/').next().unwrap_or_default();
        if prefix.contains('/') && (first == TMP_DIR || first == LOCKS_DIR) {
            return Ok(Vec::new());
        }
        let dir_key = match prefix.rfind('/') {
            Some(i) => &prefix[..=i],
            None => "",
        };
        let mut out = Vec::new();
        self.list_dir(dir_key, prefix, &mut out)?;
        out.sort();
        Ok(out)
    }

    fn lock(&self, name: &str, mode: LockMode, wait: bool) -> Result<Box<dyn LockGuard>> {
        validate_lock_name(name)?;
        let dir = self.root.join(LOCKS_DIR);
        let path = dir.join(name);
        let ctx = || format!("locking {}", path.display());
        fs::create_dir_all(&dir).ctx(ctx)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ctx(ctx)?;
        if wait {
            loop {
                let r = match mode {
                    LockMode::Shared => FileExt::lock_shared(&file),
                    LockMode::Exclusive => FileExt::lock_exclusive(&file),
                };
                match r {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io(ctx(), e)),
                }
            }
        } else {
            let got = match mode {
                LockMode::Shared => FileExt::try_lock_shared(&file),
                LockMode::Exclusive => FileExt::try_lock_exclusive(&file),
            }
            .ctx(ctx)?;
            if !got {
                return Err(Error::Locked(format!("{} is held", path.display())));
            }
        }
        Ok(Box::new(LocalLock { file, path }))
    }

    /// One look at `tmp/`: any entry at all.
    fn has_temporaries(&self) -> Result<bool> {
        let dir = self.root.join(TMP_DIR);
        match fs::read_dir(&dir) {
            Ok(mut entries) => Ok(entries.next().is_some()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("looking into {}", dir.display()), e)),
        }
    }

    fn clean_temporaries(&self) -> Result<usize> {
        let dir = self.root.join(TMP_DIR);
        let ctx = || format!("cleaning temporaries in {}", dir.display());
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(Error::io(ctx(), e)),
        };
        let mut removed = 0;
        for entry in entries {
            let entry = entry.ctx(ctx)?;
            let path = entry.path();
            let r = if entry.file_type().ctx(ctx)?.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            match r {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("removing {}", path.display()), e)),
            }
        }
        Ok(removed)
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_full_context_names_the_key() {
        let b = LocalBackend {
            root: PathBuf::from("/repo"),
            durable: true,
        };
        let msg = b
            .write_err("containers/00/01", io::Error::from_raw_os_error(28))
            .to_string();
        assert!(
            msg.starts_with("writing containers/00/01 in /repo: disk full:"),
            "{msg}"
        );
        let msg = b
            .write_err("config", io::Error::from_raw_os_error(5))
            .to_string();
        assert!(!msg.contains("disk full"), "{msg}");
    }
}
