//! The state of one restore run ([`Run`]): where it writes, what it has
//! done so far ([`RestoreSummary`]), the directories whose metadata is
//! applied at the end, the batch being planned and the hard links placed
//! once every file is written. Every failed entry passes through
//! [`Run::settle`]: a full target file system stops the restore, anything
//! else is recorded and the restore goes on.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cairn_core::{Error, Result};
use cairn_format::dir::DirEntry;

use super::select::Plan;
use super::target::{self, Placed, Target};
use super::{batch, EntryLogFn, RestoreSummary};
use crate::backup::Progress;

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
    /// The first restored name of each hard-link group (device, inode).
    pub(super) links: std::collections::HashMap<(u64, u64), PathBuf>,
    /// Later names (dest, entry, first name), linked once every file is
    /// written.
    pub(super) later_links: Vec<(PathBuf, DirEntry, PathBuf)>,
    pub(super) log: Option<&'a mut EntryLogFn>,
}

impl Run<'_> {
    /// Links the later names of hard-linked files to their first names.
    pub(super) fn place_links(&mut self) -> Result<()> {
        for (dest, e, first) in std::mem::take(&mut self.later_links) {
            match self.target.place_hard_link(&dest, &e, &first) {
                Ok(placed) => {
                    if self.sum.count(placed, &dest, e.size) {
                        self.sum.files += 1;
                        self.sum.hard_links += 1;
                    }
                    self.progress.files_done.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => self.settle(err, &dest)?,
            }
        }
        Ok(())
    }

    /// Counts a file that was placed (or skipped, or refused).
    pub(super) fn placed_file(&mut self, placed: Placed, dest: &Path, size: u64) {
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

impl RestoreSummary {
    /// Counts a placed file or symlink of `size` bytes; `true` if it was
    /// written (the caller counts it as a file or symlink).
    pub(super) fn count(&mut self, placed: Placed, dest: &Path, size: u64) -> bool {
        match placed {
            Placed::New => {}
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
