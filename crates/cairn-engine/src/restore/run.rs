//! The state of one restore run ([`Run`]): where it writes, what it has
//! done so far ([`RestoreSummary`]), the directories whose metadata is
//! applied at the end, the batch being planned and the hard links placed
//! once every file is written. Every failed entry passes through
//! [`Run::settle`]: a full target file system stops the restore, anything
//! else is recorded and the restore goes on.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::DirEntry;

use super::select::Plan;
use super::target::{self, Overwrite, Placed, Target};
use super::{batch, EntryLogFn, RestoreSummary};
use crate::progress::Progress;
use crate::read::Reader;

/// A hard-link group: the device and inode its names shared when backed up.
pub(super) type LinkGroup = (u64, u64);

/// The hard-link group of file entry `e`, if it has other names.
pub(super) fn link_group(e: &DirEntry) -> Option<LinkGroup> {
    e.extras.hard_link.map(|h| (h.dev, e.inode))
}

/// The state of one restore run.
pub(super) struct Run<'a> {
    pub(super) target: &'a Target,
    pub(super) progress: &'a Progress,
    pub(super) plan: &'a Plan<'a>,
    pub(super) sum: RestoreSummary,
    /// Directories whose recorded metadata is applied at the end.
    pub(super) dirs: Vec<(PathBuf, DirEntry)>,
    /// Files planned and not yet written.
    pub(super) batch: batch::Batch,
    /// The hard-link groups (device, inode) whose first selected name was
    /// met; their later names go to `later_links`.
    pub(super) link_groups: HashSet<LinkGroup>,
    /// Per hard-link group, the first name this restore wrote (new or
    /// replaced). Invariant: only such a name is ever a link source, so a
    /// later name is never linked to a file the restore kept (which may be
    /// a hard link to a file outside the target, or hold other bytes).
    pub(super) link_sources: HashMap<LinkGroup, PathBuf>,
    /// Later names of hard-link groups (dest, entry), placed once every
    /// file is written ([`Reader::place_links`](crate::read::Reader)).
    pub(super) later_links: Vec<(PathBuf, DirEntry)>,
    pub(super) log: Option<&'a mut EntryLogFn>,
}

impl Run<'_> {
    /// The target stands for directory `dir` (a restore re-rooted at a
    /// subfolder): it gets `dir`'s metadata at the end, as every restored
    /// directory does, unless it existed and `--overwrite never` keeps its
    /// own. A target that is a symlink to a directory (the user's path is
    /// followed) gives the metadata to that directory, never the symlink.
    pub(super) fn adopt_root(&mut self, root: &Path, dir: DirEntry, existed: bool) -> Result<()> {
        if existed && self.target.opts.overwrite == Overwrite::Never {
            self.sum.skipped += 1;
            return Ok(());
        }
        let real = if self.target.opts.dry_run {
            root.to_path_buf()
        } else {
            std::fs::canonicalize(root).ctx(|| format!("resolving {}", root.display()))?
        };
        self.target.open_dir_for_filling(&real);
        self.sum.dirs += 1;
        self.dirs.push((real, dir));
        Ok(())
    }

    /// Makes `dest` another name of `source`, a file this restore wrote.
    pub(super) fn place_link(&mut self, dest: &Path, e: &DirEntry, source: &Path) -> Result<()> {
        match self.target.place_hard_link(dest, e, source) {
            Ok(placed) => {
                self.log(dest, &placed);
                if self.sum.count(placed, dest, e.size) {
                    self.sum.files += 1;
                    self.sum.hard_links += 1;
                }
                self.progress.files_done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(err) => self.settle(err, dest),
        }
    }

    /// Counts file `e` that was placed at `dest` (or skipped, or refused);
    /// a written member of a hard-link group becomes the group's link
    /// source unless it has one.
    pub(super) fn placed_file(&mut self, placed: Placed, dest: &Path, e: &DirEntry) {
        let size = e.size;
        if let (Some(group), Placed::New | Placed::Replaced) = (link_group(e), &placed) {
            self.link_sources
                .entry(group)
                .or_insert_with(|| dest.to_path_buf());
        }
        self.log(dest, &placed);
        if placed == Placed::Skipped {
            self.progress.bytes_done.fetch_add(size, Ordering::Relaxed);
        }
        if self.sum.count(placed, dest, size) {
            self.sum.files += 1;
        }
        self.progress.files_done.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn log(&mut self, dest: &Path, placed: &Placed) {
        if let (Some(log), false) = (&mut self.log, *placed == Placed::NonEmptyDir) {
            log(dest, placed);
        }
    }

    /// An entry failed: a full file system becomes the fatal error, anything
    /// else is recorded and the restore goes on.
    pub(super) fn settle(&mut self, err: Error, dest: &Path) -> Result<()> {
        match target::full_disk(err, dest) {
            Ok(fatal) => Err(fatal),
            Err(err) => {
                self.sum.errors.push(format!("{}: {err}", dest.display()));
                Ok(())
            }
        }
    }
}

impl Reader {
    /// Places the later names of hard-link groups once every first name
    /// was written. A name whose group has a link source (a name this
    /// restore wrote) becomes a link to it; in a group without one (every
    /// name so far was kept by `--overwrite`, or failed) the next name is
    /// written with its own content and, once written, is the source of
    /// the names after it. Rounds repeat until every name is placed: each
    /// round places every name of a group with a source, or writes (or
    /// settles) one more name of it.
    pub(super) fn place_links(&mut self, run: &mut Run) -> Result<()> {
        let mut pending = std::mem::take(&mut run.later_links);
        while !pending.is_empty() {
            let mut writing = HashSet::new();
            let mut waiting = Vec::new();
            for (dest, e) in pending {
                let group = link_group(&e).unwrap_or_default();
                if let Some(source) = run.link_sources.get(&group).cloned() {
                    run.place_link(&dest, &e, &source)?;
                } else if writing.insert(group) {
                    let r = self.write_file(&e, &dest, run);
                    r.or_else(|err| run.settle(err, &dest))?;
                    if run.batch.full() {
                        self.flush(run)?;
                    }
                } else {
                    waiting.push((dest, e));
                }
            }
            self.flush(run)?;
            pending = waiting;
        }
        Ok(())
    }
}

impl RestoreSummary {
    /// Counts a placed file or symlink of `size` bytes; `true` if it was
    /// written (the caller counts it as a file or symlink).
    pub(super) fn count(&mut self, placed: Placed, dest: &Path, size: u64) -> bool {
        match placed {
            Placed::New => self.new += 1,
            Placed::Replaced => self.replaced += 1,
            Placed::Skipped => {
                self.skipped += 1;
                return false;
            }
            Placed::NonEmptyDir => {
                self.errors.push(format!(
                    "{} is a non-empty directory; pass --delete to replace it",
                    dest.display()
                ));
                return false;
            }
        }
        self.bytes += size;
        true
    }
}
