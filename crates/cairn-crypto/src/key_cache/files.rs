//! The file store, for where the kernel keyring is refused: one file per
//! entry, `SCOPE.REPO_ID`, mode 0600, in a directory of mode 0700 owned by
//! this uid on a tmpfs (`$XDG_RUNTIME_DIR/cairn-keys`, else
//! `/dev/shm/cairn-keys-UID`, or `CAIRN_KEY_CACHE_DIR`).
//!
//! The directory must be on a tmpfs: an entry lives in memory and
//! never reaches a disk (swap aside, as for any process memory). Nothing
//! removes a file when its time is up except the next read of it, which
//! finds it expired and deletes it; `lock` deletes at once, and a reboot
//! empties the tmpfs.

use std::ffi::OsString;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::statfs::{statfs, TMPFS_MAGIC};
use zeroize::Zeroizing;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};

/// The directory of this uid's entries.
pub struct FileStore {
    dir: PathBuf,
}

/// The largest entry file read back (see `keyring::MAX_ENTRY`).
const MAX_ENTRY: u64 = 256;

fn file_name(scope: &str, repo_id: &str) -> String {
    format!("{scope}.{repo_id}")
}

impl FileStore {
    /// The store in `dir` (default: see the module doc), created if
    /// missing; refused unless it is a private directory of this uid on a
    /// tmpfs.
    pub fn open(dir: Option<OsString>) -> Result<FileStore> {
        let uid = nix::unistd::getuid().as_raw();
        let dir = match dir {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
                Some(run) => Path::new(&run).join("cairn-keys"),
                None => PathBuf::from(format!("/dev/shm/cairn-keys-{uid}")),
            },
        };
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
        }
        let meta = fs::symlink_metadata(&dir).ctx(|| dir.display().to_string())?;
        let refuse = |why: &str| {
            Err(Error::invalid(format!(
                "cannot keep unlocked keys in {}: {why}",
                dir.display()
            )))
        };
        if !meta.is_dir() {
            return refuse("it is not a directory");
        }
        if meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return refuse("it must belong to this user with mode 0700");
        }
        let fs_type = statfs(&dir)
            .map_err(|e| Error::io(format!("statfs {}", dir.display()), e.into()))?
            .filesystem_type();
        if fs_type != TMPFS_MAGIC {
            return refuse("it is not on a tmpfs, and a cached key must never reach a disk");
        }
        Ok(FileStore { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn put(&self, scope: &str, repo_id: &str, payload: &[u8]) -> Result<()> {
        let path = self.dir.join(file_name(scope, repo_id));
        let tmp = self.dir.join(format!(
            ".{}.{}",
            file_name(scope, repo_id),
            std::process::id()
        ));
        let _ = fs::remove_file(&tmp);
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&tmp)
            .and_then(|mut f| f.write_all(payload))
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io(format!("writing {}", path.display()), e));
        }
        Ok(())
    }

    pub(super) fn get(&self, scope: &str, repo_id: &str) -> Option<Zeroizing<Vec<u8>>> {
        let path = self.dir.join(file_name(scope, repo_id));
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(path)
            .ok()?;
        let meta = file.metadata().ok()?;
        // Another user's file, or one others could read, is not an entry.
        if meta.uid() != nix::unistd::getuid().as_raw() || meta.mode() & 0o077 != 0 {
            return None;
        }
        let mut out = Zeroizing::new(Vec::with_capacity(MAX_ENTRY as usize));
        (&mut file).take(MAX_ENTRY + 1).read_to_end(&mut out).ok()?;
        (out.len() as u64 <= MAX_ENTRY).then_some(out)
    }

    pub(super) fn forget(&self, scope: &str, repo_id: &str) -> Result<bool> {
        let path = self.dir.join(file_name(scope, repo_id));
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("removing {}", path.display()), e)),
        }
    }

    pub(super) fn forget_all(&self, scope: &str) -> Result<usize> {
        let prefix = file_name(scope, "");
        let mut removed = 0;
        let entries = fs::read_dir(&self.dir).ctx(|| self.dir.display().to_string())?;
        for entry in entries {
            let entry = entry.ctx(|| self.dir.display().to_string())?;
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                fs::remove_file(entry.path()).ctx(|| entry.path().display().to_string())?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
