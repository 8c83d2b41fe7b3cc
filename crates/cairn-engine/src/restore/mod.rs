//! Restore: walk a snapshot's directory tree, read each file's chunks in
//! recipe order through a [`RestoreCache`], verify each chunk against its
//! fingerprint, and write files with their mode, mtime, ownership (where
//! permitted) and symlinks. Directory metadata is applied after their
//! contents. A damaged file is reported and the rest of the restore goes on.
//!
//! ```text
//! restore(snapshot, target, include):
//!     entry <- resolve include path in the snapshot tree (root if none)
//!     visit(entry, target/path):
//!         dir     -> mkdir; for child in listing: visit(child); remember (dir, meta)
//!         file    -> for chunk in tree(content): cache.read_chunk -> verify -> write
//!                    set mode, owner, mtime
//!         symlink -> symlink(target); owner, mtime
//!     for (dir, meta) in remembered, deepest first: set mode, owner, mtime
//! ```

pub mod blob_reader;
pub mod cache;

use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::{decode_dir, BlobRef, DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use crate::backup::Progress;
use crate::index::disk_index::DiskIndex;
use crate::repo::Repository;
use blob_reader::BlobReader;
use cache::{ChunkStore, ContainerLru, Locator, RestoreCache};

/// Default restore cache: 16 containers (64 MiB at the default container size).
pub const DEFAULT_CACHE_CONTAINERS: usize = 16;

pub struct Reader {
    pub store: ChunkStore,
    cache: Box<dyn RestoreCache>,
}

#[derive(Debug, Default, Serialize)]
pub struct RestoreSummary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
    /// Entries that could not be restored, each with the reason.
    pub errors: Vec<String>,
}

/// One entry found by a walk, with its path inside the snapshot.
pub struct Walked {
    pub path: String,
    pub entry: DirEntry,
}

/// The snapshot path of entry `name` inside directory `parent` (`""` = root).
pub(crate) fn join(parent: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if parent.is_empty() {
        n.into_owned()
    } else {
        format!("{parent}/{n}")
    }
}

impl Reader {
    pub fn open(repo: &Repository, cache_containers: usize) -> Result<Self> {
        let locator = match DiskIndex::open(repo.backend().clone(), repo.counters.clone()) {
            Ok(index) => Locator::Disk(index),
            // The index is derived data; containers describe themselves.
            Err(e) if crate::index::is_damage(&e) => {
                Locator::Memory(cache::map_from_containers(&*repo.log)?)
            }
            Err(e) => return Err(e),
        };
        Ok(Self::with_locator(repo, locator, cache_containers))
    }

    pub fn with_locator(repo: &Repository, locator: Locator, cache_containers: usize) -> Self {
        Reader {
            store: ChunkStore::new(repo.log.clone(), locator, repo.config.fingerprinter()),
            cache: Box::new(ContainerLru::new(cache_containers)),
        }
    }

    fn blob(&mut self) -> BlobReader<'_> {
        BlobReader::new(&self.store, self.cache.as_mut())
    }

    /// Reads a directory listing.
    pub fn read_dir(&mut self, content: Option<&BlobRef>) -> Result<Vec<DirEntry>> {
        let Some(b) = content else {
            return Ok(Vec::new());
        };
        let bytes = self.blob().read_all(b)?;
        decode_dir(&bytes, self.store.fingerprinter.width)
    }

    pub fn root_entries(&mut self, snap: &SnapshotRecord) -> Result<Vec<DirEntry>> {
        let root = BlobRef::try_from(&snap.root)?;
        self.read_dir(Some(&root))
    }

    /// The entry at `path` (components separated by `/`); `None` for the root.
    pub fn find(&mut self, snap: &SnapshotRecord, path: &str) -> Result<Option<DirEntry>> {
        let mut entries = self.root_entries(snap)?;
        let mut found: Option<DirEntry> = None;
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            let e = entries
                .into_iter()
                .find(|e| e.name == comp.as_bytes())
                .ok_or_else(|| Error::NotFound(format!("{path} in the snapshot")))?;
            if i + 1 < comps.len() {
                if e.kind != EntryKind::Dir {
                    return Err(Error::NotFound(format!("{path} in the snapshot")));
                }
                entries = self.read_dir(e.content.as_ref())?;
            } else {
                entries = Vec::new();
            }
            found = Some(e);
        }
        Ok(found)
    }

    /// Visits every entry under `path` depth-first in name order.
    pub fn walk(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        let (prefix, entries) = match self.find(snap, path)? {
            None => (String::new(), self.root_entries(snap)?),
            Some(e) if e.kind == EntryKind::Dir => {
                let prefix = path.trim_matches('/').to_string();
                let children = self.read_dir(e.content.as_ref())?;
                visit(Walked {
                    path: prefix.clone(),
                    entry: e,
                })?;
                (prefix, children)
            }
            Some(e) => {
                return visit(Walked {
                    path: path.trim_matches('/').to_string(),
                    entry: e,
                })
            }
        };
        self.walk_entries(&prefix, entries, visit)
    }

    fn walk_entries(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        for e in entries {
            let path = join(prefix, &e.name);
            let children = if e.kind == EntryKind::Dir {
                Some(self.read_dir(e.content.as_ref())?)
            } else {
                None
            };
            visit(Walked {
                path: path.clone(),
                entry: e,
            })?;
            if let Some(c) = children {
                self.walk_entries(&path, c, visit)?;
            }
        }
        Ok(())
    }

    /// Streams the content of the file at `path` into `out`.
    pub fn cat(&mut self, snap: &SnapshotRecord, path: &str, out: &mut dyn Write) -> Result<u64> {
        let e = self
            .find(snap, path)?
            .ok_or_else(|| Error::invalid("cat needs a file path inside the snapshot"))?;
        if e.kind != EntryKind::File {
            return Err(Error::invalid(format!("{path} is not a regular file")));
        }
        let mut n = 0;
        if let Some(b) = &e.content {
            self.blob().for_each_chunk(b, &mut |c| {
                n += c.len() as u64;
                out.write_all(c).ctx(|| "writing to standard output".into())
            })?;
        }
        Ok(n)
    }

    /// Restores the snapshot (or the subtree at `include`) under `target`.
    pub fn restore(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        include: Option<&str>,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        fs::create_dir_all(target).ctx(|| format!("creating {}", target.display()))?;
        let mut sum = RestoreSummary::default();
        let mut dirs: Vec<(PathBuf, DirEntry)> = Vec::new();
        match include
            .map(|p| p.trim_matches('/'))
            .filter(|p| !p.is_empty())
        {
            None => {
                for e in self.root_entries(snap)? {
                    let dest = target.join(std::ffi::OsStr::from_bytes(&e.name));
                    self.restore_entry(e, &dest, &mut sum, &mut dirs, progress);
                }
            }
            Some(p) => {
                let e = self
                    .find(snap, p)?
                    .ok_or_else(|| Error::NotFound(format!("{p} in the snapshot")))?;
                let dest = target.join(p);
                if let Some(parent) = dest.parent() {
                    fs::create_dir_all(parent).ctx(|| format!("creating {}", parent.display()))?;
                }
                self.restore_entry(e, &dest, &mut sum, &mut dirs, progress);
            }
        }
        // Deepest directories first, so a parent's mtime is set last.
        for (path, e) in dirs.iter().rev() {
            if let Err(err) = apply_meta(path, e) {
                sum.errors.push(format!("{}: {err}", path.display()));
            }
        }
        Ok(sum)
    }

    fn restore_entry(
        &mut self,
        e: DirEntry,
        dest: &Path,
        sum: &mut RestoreSummary,
        dirs: &mut Vec<(PathBuf, DirEntry)>,
        progress: &Progress,
    ) {
        let r = match e.kind {
            EntryKind::Dir => self.restore_dir(e, dest, sum, dirs, progress),
            EntryKind::File => self.restore_file(&e, dest, sum, progress).inspect_err(|_| {
                // Leave no half-written file that could pass for the real one.
                let _ = fs::remove_file(dest);
            }),
            EntryKind::Symlink => restore_symlink(&e, dest).map(|()| sum.symlinks += 1),
        };
        if let Err(err) = r {
            sum.errors.push(format!("{}: {err}", dest.display()));
        }
    }

    fn restore_dir(
        &mut self,
        e: DirEntry,
        dest: &Path,
        sum: &mut RestoreSummary,
        dirs: &mut Vec<(PathBuf, DirEntry)>,
        progress: &Progress,
    ) -> Result<()> {
        if fs::symlink_metadata(dest).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(dest).ctx(|| format!("replacing {}", dest.display()))?;
        }
        fs::create_dir_all(dest).ctx(|| format!("creating {}", dest.display()))?;
        // Owner-writable while we fill it; the recorded mode is applied afterwards.
        let _ = fs::set_permissions(dest, fs::Permissions::from_mode(0o700));
        let children = self.read_dir(e.content.as_ref())?;
        sum.dirs += 1;
        dirs.push((dest.to_path_buf(), e));
        for c in children {
            let d = dest.join(std::ffi::OsStr::from_bytes(&c.name));
            self.restore_entry(c, &d, sum, dirs, progress);
        }
        Ok(())
    }

    fn restore_file(
        &mut self,
        e: &DirEntry,
        dest: &Path,
        sum: &mut RestoreSummary,
        progress: &Progress,
    ) -> Result<()> {
        if fs::symlink_metadata(dest).is_ok_and(|m| !m.is_file()) {
            remove_any(dest)?;
        }
        let f = fs::File::create(dest).ctx(|| format!("creating {}", dest.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        if let Some(b) = &e.content {
            self.blob().for_each_chunk(b, &mut |c| {
                progress
                    .bytes_done
                    .fetch_add(c.len() as u64, Ordering::Relaxed);
                w.write_all(c).ctx(|| format!("writing {}", dest.display()))
            })?;
        }
        w.flush().ctx(|| format!("writing {}", dest.display()))?;
        drop(w);
        apply_meta(dest, e)?;
        sum.files += 1;
        sum.bytes += e.size;
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn remove_any(p: &Path) -> Result<()> {
    let m = fs::symlink_metadata(p).ctx(|| format!("inspecting {}", p.display()))?;
    if m.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
    .ctx(|| format!("replacing {}", p.display()))
}

fn restore_symlink(e: &DirEntry, dest: &Path) -> Result<()> {
    if fs::symlink_metadata(dest).is_ok() {
        remove_any(dest)?;
    }
    let target = std::ffi::OsStr::from_bytes(e.target.as_deref().unwrap_or_default());
    std::os::unix::fs::symlink(target, dest)
        .ctx(|| format!("creating symlink {}", dest.display()))?;
    let _ = std::os::unix::fs::lchown(dest, Some(e.uid), Some(e.gid));
    filetime::set_symlink_file_times(dest, mtime(e), mtime(e))
        .ctx(|| format!("setting times of {}", dest.display()))
}

fn mtime(e: &DirEntry) -> filetime::FileTime {
    filetime::FileTime::from_unix_time(
        e.mtime_ns.div_euclid(1_000_000_000),
        e.mtime_ns.rem_euclid(1_000_000_000) as u32,
    )
}

/// Ownership (best effort: only root may give files away), mode, mtime.
fn apply_meta(p: &Path, e: &DirEntry) -> Result<()> {
    let _ = std::os::unix::fs::lchown(p, Some(e.uid), Some(e.gid));
    fs::set_permissions(p, fs::Permissions::from_mode(e.mode & 0o7777))
        .ctx(|| format!("setting mode of {}", p.display()))?;
    filetime::set_file_times(p, mtime(e), mtime(e))
        .ctx(|| format!("setting times of {}", p.display()))
}

impl Reader {
    /// Reads one chunk (any kind) through the cache, verified.
    pub fn read_chunk(&mut self, fp: &cairn_core::Fingerprint, out: &mut Vec<u8>) -> Result<()> {
        self.cache.read_chunk(fp, &self.store, out)
    }
}
