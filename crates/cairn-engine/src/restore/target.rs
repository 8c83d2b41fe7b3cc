//! The target side of a restore: every change a restore makes to the
//! directory it restores into goes through [`Target`], which enforces the
//! rule "a restore touches nothing outside its target".
//!
//! Invariants (see `docs/restore-target.md` for the user-facing rules):
//!
//! - **No writing through an existing inode.** A regular file is written to a
//!   fresh temporary (`.cairn-restore-…`, `O_CREAT|O_EXCL`, mode 0600) in its
//!   destination directory, flushed, given its mode, owner (best effort) and
//!   mtime through the open handle, and only then renamed over the
//!   destination. A pre-existing hard link, file or symlink at the destination
//!   is thereby replaced, never written through or followed. Symlinks are
//!   created under a temporary name and renamed into place the same way.
//! - **A failed entry leaves the old destination as it was** and removes its
//!   temporary ([`TempGuard`]).
//! - **No pre-existing symlink is ever followed.** Every inspection uses
//!   `symlink_metadata`; a directory the restore must enter is created with
//!   `create_dir` (never `create_dir_all`) one component at a time, and a
//!   symlink (or file) found where a directory must be is unlinked (the link
//!   itself, never what it points to) and replaced by a real directory.
//! - **Nothing non-empty is deleted unless asked.** An existing non-empty
//!   directory where the snapshot has a file or symlink is only removed with
//!   `--delete`; `fs::remove_dir_all` does not follow symlinks (it unlinks
//!   them; tested below), so only entries inside the target disappear.
//! - **A full target file system is one fatal error** ([`full_disk`]): the
//!   caller stops the whole restore instead of failing file after file.
//!
//! Paths handed to [`Target`] are always `target root / snapshot names`,
//! whose directory components were each checked or created by
//! [`Target::prepare_dir`] during this restore. A process that concurrently
//! swaps a checked directory for a symlink is not defended against: a path
//! up to `long_path::SHORT_PATH` bytes is handed to the kernel whole, a
//! longer one is reached through directory handles opened along it
//! ([`crate::long_path`]), with the same treatment of its last name.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::DirEntry;

use crate::long_path::Dirs;

use super::temp::{create_temp, Sink, TempGuard};
pub use super::temp::{full_disk, is_full_disk, TEMP_PREFIX};

/// What to do with an entry that already exists in the target where the
/// snapshot has an entry of the same name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overwrite {
    /// Replace existing files and symlinks (by rename) and empty directories;
    /// a non-empty directory only with `delete`.
    #[default]
    Always,
    /// Replace only a file whose size or mtime differs from the snapshot's
    /// (or a symlink whose target differs); otherwise as `Always`.
    IfChanged,
    /// Leave every existing entry as it is (counted as skipped); existing
    /// directories are still descended into.
    Never,
    /// Replace an existing non-directory only when the snapshot entry's
    /// mtime is later than its own (otherwise skip it); otherwise as
    /// `Always`.
    IfNewer,
}

impl Overwrite {
    pub const ALL: [Overwrite; 4] = [
        Overwrite::Always,
        Overwrite::IfChanged,
        Overwrite::IfNewer,
        Overwrite::Never,
    ];
    /// The names [`std::str::FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 4] = ["always", "if-changed", "if-newer", "never"];

    pub fn name(self) -> &'static str {
        match self {
            Overwrite::Always => "always",
            Overwrite::IfChanged => "if-changed",
            Overwrite::IfNewer => "if-newer",
            Overwrite::Never => "never",
        }
    }
}

impl std::fmt::Display for Overwrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Overwrite {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Overwrite::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown --overwrite mode {s:?} (always, if-changed, if-newer or never)"
                ))
            })
    }
}

/// How a restore treats what is already in its target.
#[derive(Clone, Debug, Default)]
pub struct RestoreOptions {
    pub overwrite: Overwrite,
    /// Remove entries of restored directories that the snapshot does not
    /// have, and allow replacing a non-empty directory by a file or symlink.
    pub delete: bool,
    /// Decide everything as a restore would and count it, but change
    /// nothing in the target (`restore --dry-run`).
    pub dry_run: bool,
}

/// The outcome of placing one file or symlink.
#[derive(Debug, PartialEq, Eq)]
pub enum Placed {
    /// Written where nothing was.
    New,
    /// Written in place of an existing entry.
    Replaced,
    /// An existing entry was left as it is (`--overwrite never|if-changed`).
    Skipped,
    /// A non-empty directory is in the way and `delete` is off; nothing changed.
    NonEmptyDir,
}

/// The state of a directory the restore is about to fill.
#[derive(Debug, PartialEq, Eq)]
pub enum DirState {
    /// Created by this restore (nothing was there).
    Created,
    /// A symlink, file or other non-directory was there; it was unlinked and
    /// a directory created.
    Replaced,
    /// A real directory was already there.
    Existing,
    /// Something else is there and `--overwrite never` keeps it: the snapshot
    /// subtree is not restored (and the existing entry is not followed).
    Skipped,
}

/// What is at a destination path right now (never following a symlink).
enum Existing {
    Nothing,
    /// A file, symlink, fifo, socket or device: `rename` replaces it.
    NonDir(fs::Metadata),
    EmptyDir,
    NonEmptyDir,
}

/// Restores into one target directory under [`RestoreOptions`].
pub struct Target {
    pub opts: RestoreOptions,
    /// Test hook: bytes the simulated file system still accepts; writing
    /// more fails with ENOSPC. Always `None` outside tests.
    capacity: Option<Cell<u64>>,
    /// What was restored with less than was recorded ("path: what"):
    /// extended attributes the target refused. The restore goes on.
    pub(crate) warnings: RefCell<Vec<String>>,
    /// Reaches destinations longer than the kernel takes whole.
    dirs: RefCell<Dirs>,
    /// Dry run only: the directories the restore would create (or put in
    /// place of a non-directory). Invariant: nothing below them is ever
    /// inspected, since in a real restore they would be empty when filled
    /// (and a symlink they would replace must not be followed).
    virtual_dirs: RefCell<HashSet<PathBuf>>,
}

impl Target {
    pub fn new(opts: RestoreOptions) -> Self {
        Target {
            opts,
            capacity: None,
            warnings: RefCell::default(),
            dirs: RefCell::default(),
            virtual_dirs: RefCell::default(),
        }
    }

    /// A target whose files fail with ENOSPC after `bytes` bytes in total.
    #[cfg(test)]
    pub(crate) fn with_capacity(opts: RestoreOptions, bytes: u64) -> Self {
        Target {
            opts,
            capacity: Some(Cell::new(bytes)),
            warnings: RefCell::default(),
            dirs: RefCell::default(),
            virtual_dirs: RefCell::default(),
        }
    }

    /// The file system operations on destinations (`crate::long_path`).
    /// Borrowed for one call at a time.
    pub(crate) fn dirs(&self) -> RefMut<'_, Dirs> {
        self.dirs.borrow_mut()
    }

    /// Whether this is a dry run (nothing in the target changes).
    pub fn dry_run(&self) -> bool {
        self.opts.dry_run
    }

    /// Dry run: whether `dest` lies in a directory the restore would have
    /// created, so that nothing is there.
    fn in_virtual_dir(&self, dest: &Path) -> bool {
        self.opts.dry_run && self.virtual_dirs.borrow().contains(parent(dest))
    }

    /// Creates the target root with its parents (following a symlink, as
    /// for any path argument). A dry run creates nothing: a missing root
    /// is a directory it would create.
    pub fn prepare_root(&self, root: &Path) -> Result<()> {
        if self.opts.dry_run {
            if fs::metadata(root).is_err() {
                self.virtual_dirs.borrow_mut().insert(root.to_path_buf());
            }
            return Ok(());
        }
        Dirs::new()
            .create_dir_all(root)
            .ctx(|| format!("creating {}", root.display()))
    }

    /// Whether directory `dir` exists in the target as it is now (false
    /// in a dry run for a directory it would create).
    pub fn exists_now(&self, dir: &Path) -> bool {
        !self.opts.dry_run || !self.virtual_dirs.borrow().contains(dir)
    }

    /// Makes an existing directory writable by its owner while the restore
    /// fills it (its recorded mode is applied at the end). Not in a dry run.
    pub fn open_dir_for_filling(&self, dest: &Path) {
        if !self.opts.dry_run {
            let _ = self.dirs().chmod(dest, 0o700);
        }
    }

    fn existing(&self, dest: &Path) -> Result<Existing> {
        if self.in_virtual_dir(dest) {
            return Ok(Existing::Nothing);
        }
        let found = self.dirs().lstat(dest);
        match found {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Existing::Nothing),
            Err(e) => Err(Error::io(format!("inspecting {}", dest.display()), e)),
            Ok(m) if m.is_dir() => {
                let empty = self.dirs().dir_is_empty(dest);
                Ok(if empty.ctx(|| format!("reading {}", dest.display()))? {
                    Existing::EmptyDir
                } else {
                    Existing::NonEmptyDir
                })
            }
            Ok(m) => Ok(Existing::NonDir(m)),
        }
    }

    /// Makes `dest` a real directory the restore may fill, per the rules in
    /// the module doc. Never follows a symlink at `dest`.
    pub fn prepare_dir(&self, dest: &Path) -> Result<DirState> {
        let found = if self.in_virtual_dir(dest) {
            Err(io::ErrorKind::NotFound.into())
        } else {
            self.dirs().lstat(dest)
        };
        let replaced = match found {
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io(format!("inspecting {}", dest.display()), e)),
            Ok(m) if m.is_dir() => return Ok(DirState::Existing),
            Ok(_) if self.opts.overwrite == Overwrite::Never => return Ok(DirState::Skipped),
            Ok(_) if self.opts.dry_run => true,
            Ok(_) => {
                // Unlinks a symlink itself, never its target.
                let r = self.dirs().remove_file(dest);
                r.ctx(|| format!("replacing {}", dest.display()))?;
                true
            }
        };
        if self.opts.dry_run {
            self.virtual_dirs.borrow_mut().insert(dest.to_path_buf());
            return Ok(if replaced {
                DirState::Replaced
            } else {
                DirState::Created
            });
        }
        let r = self.dirs().mkdir(dest, 0o777);
        r.ctx(|| format!("creating {}", dest.display()))?;
        Ok(if replaced {
            DirState::Replaced
        } else {
            DirState::Created
        })
    }

    /// Decides what to do at `dest` for snapshot entry `e` before anything
    /// is written. `Ok(None)`: go ahead and write.
    fn decide(&self, dest: &Path, e: &DirEntry) -> Result<(Option<Placed>, Existing)> {
        let existing = self.existing(dest)?;
        let verdict = match (&existing, self.opts.overwrite) {
            (Existing::Nothing, _) if self.opts.dry_run => Some(Placed::New),
            (Existing::Nothing, _) => None,
            (_, Overwrite::Never) => Some(Placed::Skipped),
            (Existing::NonDir(m), Overwrite::IfChanged) if self.unchanged(dest, m, e) => {
                Some(Placed::Skipped)
            }
            (Existing::NonDir(m), Overwrite::IfNewer) if !newer(e, m) => Some(Placed::Skipped),
            (Existing::NonEmptyDir, _) if !self.opts.delete => Some(Placed::NonEmptyDir),
            // A dry run stops here: what the write would do, without it.
            _ if self.opts.dry_run => Some(would_place(&existing)),
            _ => None,
        };
        Ok((verdict, existing))
    }

    /// Writes a regular file at `dest`: `fill` writes its content into a
    /// fresh temporary, which gets `e`'s mode, owner (best effort) and mtime
    /// and is then renamed over `dest`. On any failure `dest` is as it was
    /// and the temporary is gone.
    pub fn place_file(
        &self,
        dest: &Path,
        e: &DirEntry,
        fill: &mut dyn FnMut(&mut dyn Write) -> Result<()>,
    ) -> Result<Placed> {
        match self.open_file(dest, e)? {
            Opened::Decided(v) => Ok(v),
            Opened::Writing(mut w) => {
                fill(&mut w)?;
                w.finish()
            }
        }
    }

    /// What placing entry `e` at `dest` would do without writing it:
    /// `Some` when it is decided already (skipped, or refused because a
    /// non-empty directory is in the way), `None` when it will be written.
    pub fn verdict(&self, dest: &Path, e: &DirEntry) -> Result<Option<Placed>> {
        Ok(self.decide(dest, e)?.0)
    }

    /// [`place_file`](Self::place_file) in two halves, for a restore that
    /// writes several files from one plan: the temporary is created now,
    /// filled through the returned writer, and renamed into place by
    /// [`FileWriter::finish`]; dropping the writer unfinished removes it.
    pub fn open_file<'t>(&'t self, dest: &Path, e: &DirEntry) -> Result<Opened<'t>> {
        let (verdict, existing) = self.decide(dest, e)?;
        if let Some(v) = verdict {
            return Ok(Opened::Decided(v));
        }
        let (tmp, file) = self.create_temp_file(parent(dest))?;
        let guard = self.guard(tmp);
        let out = BufWriter::with_capacity(
            (e.size as usize).clamp(4 << 10, 1 << 20),
            Sink {
                file,
                capacity: self.capacity.as_ref(),
                extents: e.extras.extents.clone(),
                data: 0,
            },
        );
        Ok(Opened::Writing(Box::new(FileWriter {
            target: self,
            dest: dest.to_path_buf(),
            entry: e.clone(),
            existing,
            out,
            guard,
        })))
    }

    /// Creates symlink `dest -> e.target` under a temporary name (with owner
    /// and mtime) and renames it over `dest`.
    pub fn place_symlink(&self, dest: &Path, e: &DirEntry) -> Result<Placed> {
        let (verdict, existing) = self.decide(dest, e)?;
        if let Some(v) = verdict {
            return Ok(v);
        }
        let link_to = OsStr::from_bytes(e.target.as_deref().unwrap_or_default());
        let dir = parent(dest);
        let tmp = create_temp(dir, |p| self.dirs().symlink(link_to, p))
            .ctx(|| format!("creating symlink {}", dest.display()))?
            .0;
        let guard = self.guard(tmp);
        let tmp = guard.path();
        let _ = self.dirs().lchown(tmp, e.uid, e.gid);
        self.set_xattrs(tmp, dest, e);
        let r = self.dirs().set_times(tmp, mtime(e));
        r.ctx(|| format!("setting times of {}", dest.display()))?;
        self.commit(guard, dest, existing)
    }

    /// Creates FIFO or device `dest` for `e` under a temporary name (with
    /// owner, mode, attributes and mtime) and renames it over `dest`.
    pub fn place_special(&self, dest: &Path, e: &DirEntry) -> Result<Placed> {
        let (verdict, existing) = self.decide(dest, e)?;
        if let Some(v) = verdict {
            return Ok(v);
        }
        let tmp = create_temp(parent(dest), |p| {
            crate::file_kinds::make_special(&mut self.dirs(), p, e)
        })
        .ctx(|| format!("creating {} {}", e.kind.name(), dest.display()))?
        .0;
        let guard = self.guard(tmp);
        let tmp = guard.path();
        let _ = self.dirs().lchown(tmp, e.uid, e.gid);
        // chmod does not open the node; the temporary is no symlink.
        let r = self.dirs().chmod(tmp, e.mode & 0o7777);
        r.ctx(|| format!("setting mode of {}", dest.display()))?;
        self.set_xattrs(tmp, dest, e);
        let r = self.dirs().set_times(tmp, mtime(e));
        r.ctx(|| format!("setting times of {}", dest.display()))?;
        self.commit(guard, dest, existing)
    }

    /// Makes `dest` another name of the already restored file `first`
    /// (a hard link under a temporary name, renamed over `dest`). The
    /// caller guarantees that this restore wrote `first` (the run's link
    /// sources): a kept file may be a link to a file outside the target.
    pub fn place_hard_link(&self, dest: &Path, e: &DirEntry, first: &Path) -> Result<Placed> {
        let existing = self.existing(dest)?;
        // Whether `dest` already is that link. A dry run wrote no `first`:
        // a real restore would have renamed a fresh inode there, which no
        // existing name can share.
        let already_linked = if self.opts.dry_run {
            false
        } else {
            let first_meta = self.dirs().lstat(first);
            let first_meta = first_meta.ctx(|| {
                format!(
                    "inspecting {}, the first name of {}",
                    first.display(),
                    dest.display()
                )
            })?;
            if !first_meta.is_file() {
                return Err(Error::invalid(format!(
                    "{} (its first name) is not a restored file",
                    first.display()
                )));
            }
            matches!(&existing, Existing::NonDir(m)
                if m.ino() == first_meta.ino() && m.dev() == first_meta.dev())
        };
        let verdict = match (&existing, self.opts.overwrite) {
            (Existing::Nothing, _) if self.opts.dry_run => Some(Placed::New),
            (Existing::Nothing, _) => None,
            _ if already_linked => Some(Placed::Skipped),
            (_, Overwrite::Never) => Some(Placed::Skipped),
            (Existing::NonDir(m), Overwrite::IfNewer) if !newer(e, m) => Some(Placed::Skipped),
            (Existing::NonEmptyDir, _) if !self.opts.delete => Some(Placed::NonEmptyDir),
            _ if self.opts.dry_run => Some(would_place(&existing)),
            _ => None,
        };
        if let Some(v) = verdict {
            return Ok(v);
        }
        let tmp = create_temp(parent(dest), |p| self.dirs().hard_link(first, p))
            .ctx(|| format!("linking {} to {}", dest.display(), first.display()))?
            .0;
        self.commit(self.guard(tmp), dest, existing)
    }

    /// Sets `e`'s extended attributes on `path` (the temporary of `dest`);
    /// refusals become warnings.
    fn set_xattrs(&self, path: &Path, dest: &Path, e: &DirEntry) {
        if e.extras.xattrs.is_empty() {
            return;
        }
        let refused = crate::file_kinds::apply_xattrs(&mut self.dirs(), path, e);
        for why in refused {
            self.warnings
                .borrow_mut()
                .push(format!("{}: {why}", dest.display()));
        }
    }

    /// Moves a finished temporary over `dest`, first removing a directory in
    /// the way (empty, or non-empty with `delete`; `decide` refused the rest).
    fn commit(&self, guard: TempGuard<'_>, dest: &Path, existing: Existing) -> Result<Placed> {
        let placed = match existing {
            Existing::Nothing => Placed::New,
            Existing::NonDir(_) => Placed::Replaced,
            Existing::EmptyDir => {
                let r = self.dirs().remove_dir(dest);
                r.ctx(|| format!("replacing {}", dest.display()))?;
                Placed::Replaced
            }
            Existing::NonEmptyDir => {
                // Does not follow symlinks inside (it unlinks them).
                let r = self.dirs().remove_dir_all(dest);
                r.ctx(|| format!("replacing {}", dest.display()))?;
                Placed::Replaced
            }
        };
        // `rename` replaces a file or symlink at `dest` without following it.
        let r = self.dirs().rename(guard.path(), dest);
        r.ctx(|| format!("renaming into {}", dest.display()))?;
        guard.disarm();
        Ok(placed)
    }

    /// `--delete`: removes the entries of directory `dir` whose names are not
    /// in `keep` (the snapshot's listing). Returns the number removed (a
    /// directory with its contents counts once); failures go to `errors`.
    pub fn prune(&self, dir: &Path, keep: &HashSet<&[u8]>, errors: &mut Vec<String>) -> u64 {
        let listed = self.dirs().read_dir(dir);
        let entries = match listed {
            Ok(it) => it,
            Err(e) => {
                errors.push(format!("{}: reading for --delete: {e}", dir.display()));
                return 0;
            }
        };
        let mut removed = 0;
        for entry in entries {
            let name = match entry {
                Ok(n) => n,
                Err(e) => {
                    errors.push(format!("{}: reading for --delete: {e}", dir.display()));
                    continue;
                }
            };
            if keep.contains(name.as_bytes()) {
                continue;
            }
            let p = dir.join(&name);
            if self.opts.dry_run {
                removed += 1;
                continue;
            }
            let found = self.dirs().lstat(&p);
            let r = match found {
                // Never follows a symlink: a linked directory loses the link only.
                Ok(m) if m.is_dir() => self.dirs().remove_dir_all(&p),
                Ok(_) => self.dirs().remove_file(&p),
                Err(e) => Err(e),
            };
            match r {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => errors.push(format!("{}: removing (--delete): {e}", p.display())),
            }
        }
        removed
    }
}

/// A file [`Target::open_file`] either decided about or began writing.
pub enum Opened<'t> {
    Decided(Placed),
    Writing(Box<FileWriter<'t>>),
}

/// A file being restored: its temporary, open for writing. `finish` gives it
/// its metadata and renames it over the destination; dropping it unfinished
/// removes the temporary and leaves the destination as it was.
pub struct FileWriter<'t> {
    target: &'t Target,
    dest: PathBuf,
    /// The entry: owner, mode, mtime, extended attributes, the logical
    /// size (a sparse file is extended to it) and the content size.
    entry: DirEntry,
    existing: Existing,
    out: BufWriter<Sink<'t>>,
    guard: TempGuard<'t>,
}

impl Write for FileWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl FileWriter<'_> {
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flushes the content, sets owner (best effort), mode and mtime through
    /// the open handle, and renames the temporary over the destination.
    pub fn finish(self) -> Result<Placed> {
        let dest = &self.dest;
        let e = &self.entry;
        let what = || format!("writing {}", dest.display());
        let mut out = self.out;
        out.flush().ctx(what)?;
        let sink = out.into_inner().map_err(|e| e.into_error()).ctx(what)?;
        // The temporary is dropped (removed) with `self` on this error.
        crate::file_kinds::content_bytes_match(e, sink.data)?;
        let file = sink.file;
        if sink.extents.is_some() {
            // The holes after the last extent: a length, not data.
            file.set_len(e.size).ctx(what)?;
        }
        // Ownership first: chown clears set-id bits, chmod then restores them.
        let _ = std::os::unix::fs::fchown(&file, Some(e.uid), Some(e.gid));
        file.set_permissions(fs::Permissions::from_mode(e.mode & 0o7777))
            .ctx(|| format!("setting mode of {}", dest.display()))?;
        self.target.set_xattrs(self.guard.path(), dest, e);
        let mtime = mtime(e);
        filetime::set_file_handle_times(&file, Some(mtime), Some(mtime))
            .ctx(|| format!("setting times of {}", dest.display()))?;
        drop(file);
        self.target.commit(self.guard, dest, self.existing)
    }
}

impl Target {
    /// Whether an existing non-directory already matches `e` for
    /// `--overwrite if-changed`: a regular file of the same size and mtime
    /// (seconds and nanoseconds), or a symlink with the same target.
    fn unchanged(&self, dest: &Path, m: &fs::Metadata, e: &DirEntry) -> bool {
        use cairn_format::dir::EntryKind;
        match e.kind {
            EntryKind::File => {
                m.is_file()
                    && m.len() == e.size
                    && (m.mtime() as i128) * 1_000_000_000 + m.mtime_nsec() as i128
                        == e.mtime_ns as i128
            }
            EntryKind::Symlink => {
                m.file_type().is_symlink()
                    && self.dirs().read_link(dest).is_ok_and(|t| {
                        t.as_os_str().as_bytes() == e.target.as_deref().unwrap_or_default()
                    })
            }
            EntryKind::Dir => false,
            EntryKind::Fifo => m.file_type().is_fifo(),
            EntryKind::Socket => m.file_type().is_socket(),
            EntryKind::CharDevice => {
                m.file_type().is_char_device() && Some(m.rdev()) == e.extras.rdev
            }
            EntryKind::BlockDevice => {
                m.file_type().is_block_device() && Some(m.rdev()) == e.extras.rdev
            }
        }
    }

    /// A guard that removes temporary `tmp` unless disarmed.
    fn guard(&self, tmp: PathBuf) -> TempGuard<'_> {
        TempGuard {
            path: Some(tmp),
            dirs: &self.dirs,
        }
    }

    /// `O_CREAT|O_EXCL|O_WRONLY`, mode 0600: never opens an existing inode.
    fn create_temp_file(&self, dir: &Path) -> Result<(PathBuf, fs::File)> {
        use nix::fcntl::OFlag;
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
        create_temp(dir, |p| self.dirs().open(p, flags, 0o600))
            .ctx(|| format!("creating a temporary file in {}", dir.display()))
    }

    /// Ownership (best effort: only root may give files away), mode, mtime
    /// and extended attributes of a directory this restore created or
    /// entered, unless it is no longer a real directory (then it is left
    /// alone: these calls would follow a symlink). Refused attributes are
    /// returned.
    pub(crate) fn apply_dir_meta(&self, p: &Path, e: &DirEntry) -> Result<Vec<String>> {
        if self.opts.dry_run {
            return Ok(Vec::new());
        }
        let m = self.dirs().lstat(p);
        if !m.ctx(|| format!("inspecting {}", p.display()))?.is_dir() {
            return Err(Error::invalid(
                "replaced by something else during the restore",
            ));
        }
        let mut d = self.dirs();
        let _ = d.lchown(p, e.uid, e.gid);
        d.chmod(p, e.mode & 0o7777)
            .ctx(|| format!("setting mode of {}", p.display()))?;
        d.set_times(p, mtime(e))
            .ctx(|| format!("setting times of {}", p.display()))?;
        Ok(crate::file_kinds::apply_xattrs(&mut d, p, e))
    }
}

/// What writing over `existing` counts as (the write itself not done:
/// a dry run).
fn would_place(existing: &Existing) -> Placed {
    match existing {
        Existing::Nothing => Placed::New,
        _ => Placed::Replaced,
    }
}

/// `--overwrite if-newer`: whether snapshot entry `e` is newer (a later
/// mtime, to the nanosecond) than the existing entry `m`.
fn newer(e: &DirEntry, m: &fs::Metadata) -> bool {
    let existing_ns = (m.mtime() as i128) * 1_000_000_000 + m.mtime_nsec() as i128;
    e.mtime_ns as i128 > existing_ns
}

pub(crate) fn mtime(e: &DirEntry) -> filetime::FileTime {
    filetime::FileTime::from_unix_time(
        e.mtime_ns.div_euclid(1_000_000_000),
        e.mtime_ns.rem_euclid(1_000_000_000) as u32,
    )
}

/// The directory a destination lives in (the restore never places the
/// target root itself, so there always is one).
fn parent(dest: &Path) -> &Path {
    dest.parent().unwrap_or(Path::new("."))
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
