//! Restore: walk a snapshot's directory tree, read each file's chunks in
//! recipe order through a [`RestoreCache`], verify each chunk against its
//! fingerprint, and write files with their mode, mtime, ownership (where
//! permitted) and symlinks. Directory metadata is applied after their
//! contents. A damaged file is reported and the rest of the restore goes on.
//!
//! Every change to the target goes through [`target::Target`], which keeps a
//! restore inside its target: files are written to a temporary and renamed
//! into place (never written through an existing inode), no pre-existing
//! symlink is followed, a non-empty directory is only removed with
//! `--delete`, and a full target file system stops the restore with one
//! error (rules: `docs/restore-target.md`).
//!
//! ```text
//! restore(snapshot, target, selection, options):
//!     start <- the root listing, or the subfolder's (start.rs: `ID:sub`;
//!              the target then stands for the subfolder)
//!     plan <- the selection resolved against the start (select.rs):
//!             the parents of included entries, the totals
//!     for entry in start listing: visit(entry, target/name, scope)
//!     visit(entry, dest, scope):          (scope: skip / whole / parent)
//!         excluded, or neither included nor a parent -> nothing
//!         dir     -> mkdir, or enter an existing real directory;
//!                    --delete (whole directories only): remove what the
//!                    listing lacks;
//!                    for child in listing: visit(child); remember (dir, meta)
//!         file    -> plan its chunks into the batch (batch.rs); a full
//!                    batch is written: for each chunk of the batch's plan,
//!                    policy -> read/verify -> write into its file's temp;
//!                    a file's last chunk written -> set mode, owner,
//!                    mtime on temp; rename temp -> dest
//!         symlink -> temp symlink; owner, mtime; rename temp -> dest
//!         (an existing entry at dest: replaced, skipped or refused per options;
//!          ENOSPC/EDQUOT: stop everything)
//!     write the last batch
//!     for (dir, meta) in remembered, deepest first: set mode, owner, mtime
//! ```

mod batch;
pub mod dump;
mod run;
pub mod select;
mod start;
pub mod target;
mod temp;
#[cfg(test)]
mod tests;
pub mod verify;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cairn_core::{Error, Result};
use cairn_format::dir::{DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use crate::progress::Progress;
use crate::read::policy::PolicyStats;
use crate::read::{join, Reader};
use run::Run;
use select::{Plan, Scope};
pub use select::{RestoreSelection, RestoreSelectionBuilder};
use start::Start;
use target::{DirState, Target};
pub use target::{Overwrite, Placed, RestoreOptions};

/// Entries of a directory whose recipe roots and listings are read ahead
/// at once (`Reader::prefetch_roots`).
const PREFETCH_ENTRIES: usize = 256;

/// Told of each file and symlink a restore settles: its path in the
/// target and what happened there (`restore -v`; see
/// [`Reader::restore_logged`]). Not called for entries that failed: those
/// are in [`RestoreSummary::errors`].
pub type EntryLogFn = dyn FnMut(&Path, &Placed) + Send;

/// What a restore did (or, in a dry run, would do). `files`, `dirs`,
/// `symlinks` and `bytes` count what was written (including replacements);
/// `new` what was written where nothing was; the other counts describe
/// entries that were already in the target.
#[derive(Debug, Default, Serialize)]
pub struct RestoreSummary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
    /// Entries written where nothing was (files, directories, symlinks,
    /// FIFOs and devices, hard-link names).
    pub new: u64,
    /// Existing entries left as they were (`--overwrite never`, or unchanged
    /// files with `--overwrite if-changed`).
    pub skipped: u64,
    /// Existing entries replaced by a snapshot entry (a file, symlink or
    /// directory of another kind, or an older file).
    pub replaced: u64,
    /// Entries removed by `--delete` because the snapshot does not have
    /// them (a directory with its contents counts once).
    pub deleted: u64,
    /// FIFOs and device nodes created.
    pub specials: u64,
    /// Sockets in the snapshot, not created (docs/file-kinds.md).
    pub sockets: u64,
    /// Later names of hard-linked files restored as links to the first.
    pub hard_links: u64,
    /// Entries restored with less than was recorded, each with what is
    /// missing (e.g. an extended attribute the target refused).
    pub warnings: Vec<String>,
    /// Entries that could not be restored, each with the reason.
    pub errors: Vec<String>,
    /// What the restore policy did with the data chunks (container reads
    /// for directory listings and tree nodes are not included).
    pub policy: PolicyStats,
}

impl Reader {
    /// Restores the snapshot (or the subtree at `include`) under `target`
    /// with the default [`RestoreOptions`] (`--overwrite always`, no
    /// `--delete`).
    pub fn restore(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        include: Option<&str>,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        self.restore_with(snap, target, include, &RestoreOptions::default(), progress)
    }

    /// Restores the snapshot (or the subtree at `include`, a snapshot path
    /// taken literally) under `target`; see [`Reader::restore_selected`].
    pub fn restore_with(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        include: Option<&str>,
        opts: &RestoreOptions,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        let sel = RestoreSelection::path(include);
        self.restore_selected(snap, target, &sel, opts, progress)
    }

    /// Restores what `sel` takes of the snapshot under `target`, treating
    /// entries already in the target as `opts` says (see the
    /// [`target`](self::target) module). A failed entry is recorded in
    /// [`RestoreSummary::errors`] and the restore goes on; a full target file
    /// system stops it at once with one error. Sets the progress totals.
    pub fn restore_selected(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        sel: &RestoreSelection,
        opts: &RestoreOptions,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        self.restore_logged(snap, target, sel, opts, progress, None)
    }

    /// [`Reader::restore_selected`], telling `log` (when given) of every
    /// file and symlink it writes or leaves as it was.
    pub fn restore_logged(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        sel: &RestoreSelection,
        opts: &RestoreOptions,
        progress: &Progress,
        log: Option<&mut EntryLogFn>,
    ) -> Result<RestoreSummary> {
        self.restore_into(snap, target, sel, &Target::new(opts.clone()), progress, log)
    }

    pub(crate) fn restore_into(
        &mut self,
        snap: &SnapshotRecord,
        root: &Path,
        sel: &RestoreSelection,
        t: &Target,
        progress: &Progress,
        log: Option<&mut EntryLogFn>,
    ) -> Result<RestoreSummary> {
        // Resolve what to restore before touching the target, so that
        // includes matching nothing, or a missing subfolder, create nothing.
        let start = Start::read(self, snap, sel.root_path())?;
        let plan = Plan::new(self, snap, sel, &start)?;
        progress.set_totals(plan.files, plan.bytes);
        let root_existed = std::fs::metadata(root).is_ok();
        // The target itself is the user's path: created with its parents,
        // and followed if it is a symlink, like any path argument. Below it,
        // nothing pre-existing is followed.
        t.prepare_root(root)?;
        let mut run = Run {
            log,
            target: t,
            progress,
            plan: &plan,
            sum: RestoreSummary::default(),
            dirs: Vec::new(),
            batch: batch::Batch::default(),
            link_groups: Default::default(),
            link_sources: Default::default(),
            later_links: Vec::new(),
        };
        let top = plan.root();
        if let Some(dir) = start.dir {
            run.adopt_root(root, dir, root_existed)?;
        }
        if t.opts.delete && top == Scope::Whole && start.whole_listing && t.exists_now(root) {
            let keep = start.entries.iter().map(|e| e.name.as_slice()).collect();
            run.sum.deleted += t.prune(root, &keep, &mut run.sum.errors);
        }
        let outcome = self
            .restore_children("", start.entries, root, top, &mut run)
            .and_then(|()| self.flush(&mut run))
            .and_then(|()| self.place_links(&mut run));
        // Deepest directories first, so a parent's mtime is set last. Done
        // even after a fatal error: it needs no space.
        for (path, e) in run.dirs.iter().rev() {
            match t.apply_dir_meta(path, e) {
                Err(err) => run.sum.errors.push(format!("{}: {err}", path.display())),
                Ok(refused) => {
                    for why in refused {
                        run.sum.warnings.push(format!("{}: {why}", path.display()));
                    }
                }
            }
        }
        run.sum.warnings.extend(t.warnings.take());
        let mut sum = run.sum;
        outcome?;
        sum.policy = self.extract.stats();
        Ok(sum)
    }

    /// Restores the entries of a directory (at snapshot path `prefix`, at
    /// `dir` in the target, taken as `scope`) that the selection takes.
    fn restore_children(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        dir: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let mut entries = entries.into_iter();
        let mut i = 0;
        while let Some(e) = entries.next() {
            if i % PREFETCH_ENTRIES == 0 {
                let window = std::iter::once(&e).chain(entries.as_slice());
                self.prefetch_roots(prefix, window.take(PREFETCH_ENTRIES), scope, run.plan);
            }
            i += 1;
            let rel = join(prefix, &e.name);
            let s = run.plan.scope(&rel, scope);
            if s == Scope::Skip {
                continue;
            }
            let dest = dir.join(OsStr::from_bytes(&e.name));
            self.restore_entry(e, &rel, &dest, s, run)?;
        }
        Ok(())
    }

    /// Reads ahead, in parallel where the store allows, the recipe trees
    /// and listings of the selected `entries` (the planner would read them
    /// one by one, a round trip each on object storage).
    fn prefetch_roots<'e>(
        &mut self,
        prefix: &str,
        entries: impl Iterator<Item = &'e DirEntry>,
        scope: Scope,
        plan: &Plan,
    ) {
        if self.store.log.read_parallelism() <= 1 {
            return;
        }
        let roots: Vec<(cairn_core::Fingerprint, u8)> = entries
            .filter(|e| plan.scope(&join(prefix, &e.name), scope) != Scope::Skip)
            .filter_map(|e| match (e.kind, &e.content) {
                // A one-chunk file's content is data: the policy reads it.
                (EntryKind::File, Some(b)) if b.level > 0 => Some((b.root, b.level)),
                (EntryKind::Dir, Some(b)) if e.children.is_none() => Some((b.root, b.level)),
                _ => None,
            })
            .collect();
        self.meta.prefetch(&roots, &self.store);
    }

    /// Restores one entry. `Err` only for a fatal error (a full target file
    /// system); anything else is recorded in the summary.
    fn restore_entry(
        &mut self,
        e: DirEntry,
        rel: &str,
        dest: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let r = match e.kind {
            EntryKind::Dir => return self.restore_dir(e, rel, dest, scope, run),
            EntryKind::File => self.restore_file(&e, dest, run),
            EntryKind::Symlink => run.target.place_symlink(dest, &e).map(|placed| {
                run.log(dest, &placed);
                if run.sum.count(placed, dest, 0) {
                    run.sum.symlinks += 1;
                }
            }),
            EntryKind::Socket => {
                run.sum.sockets += 1;
                Ok(())
            }
            EntryKind::Fifo | EntryKind::CharDevice | EntryKind::BlockDevice => {
                match run.target.place_special(dest, &e) {
                    Ok(placed) => {
                        if run.sum.count(placed, dest, 0) {
                            run.sum.specials += 1;
                        }
                        Ok(())
                    }
                    // Only root may create devices: restored where permitted.
                    Err(Error::Io { source, .. })
                        if source.raw_os_error() == Some(nix::libc::EPERM) =>
                    {
                        run.sum.warnings.push(format!(
                            "{}: {} not created: not permitted",
                            dest.display(),
                            e.kind.name()
                        ));
                        Ok(())
                    }
                    Err(err) => Err(err),
                }
            }
        };
        r.or_else(|err| run.settle(err, dest))?;
        if run.batch.full() {
            self.flush(run)?;
        }
        Ok(())
    }

    fn restore_dir(
        &mut self,
        mut e: DirEntry,
        rel: &str,
        dest: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let children = match self.take_children(&mut e) {
            Ok(c) => c,
            Err(err) => return run.settle(err, dest),
        };
        let state = match run.target.prepare_dir(dest) {
            Ok(s) => s,
            Err(err) => return run.settle(err, dest),
        };
        // An existing directory keeps its metadata under `--overwrite never`.
        let restore_meta = match state {
            DirState::Skipped => {
                run.sum.skipped += 1;
                return Ok(());
            }
            DirState::Existing if run.target.opts.overwrite == Overwrite::Never => {
                run.sum.skipped += 1;
                false
            }
            DirState::Replaced => {
                run.sum.replaced += 1;
                true
            }
            DirState::Created => {
                run.sum.new += 1;
                true
            }
            DirState::Existing => true,
        };
        // A parent holds entries the selection did not take: never pruned.
        if run.target.opts.delete && state == DirState::Existing && scope == Scope::Whole {
            let keep = children.iter().map(|c| c.name.as_slice()).collect();
            run.sum.deleted += run.target.prune(dest, &keep, &mut run.sum.errors);
        }
        if restore_meta {
            // Owner-writable while we fill it; the recorded mode is applied
            // afterwards. `dest` was just checked to be a real directory.
            run.target.open_dir_for_filling(dest);
            run.sum.dirs += 1;
            run.dirs.push((dest.to_path_buf(), e));
        }
        self.restore_children(rel, children, dest, scope, run)
    }

    /// A file with content joins the batch (written when it is flushed);
    /// an empty one, or one the target's state decides about, is settled
    /// now. A later name of a hard-link group waits for
    /// [`place_links`](Self::place_links).
    fn restore_file(&mut self, e: &DirEntry, dest: &Path, run: &mut Run) -> Result<()> {
        if let Some(group) = run::link_group(e) {
            if !run.link_groups.insert(group) {
                run.later_links.push((dest.to_path_buf(), e.clone()));
                return Ok(());
            }
        }
        self.write_file(e, dest, run)
    }

    /// Writes file `e` at `dest` with its own content (through the batch
    /// when it has any).
    fn write_file(&mut self, e: &DirEntry, dest: &Path, run: &mut Run) -> Result<()> {
        let placed = match &e.content {
            // `place_file` decides about what is at `dest` itself.
            None => run.target.place_file(dest, e, &mut |_| Ok(()))?,
            Some(b) => match run.target.verdict(dest, e)? {
                Some(placed) => placed,
                None => return self.plan_file(e, b, dest, run),
            },
        };
        run.placed_file(placed, dest, e);
        Ok(())
    }
}
