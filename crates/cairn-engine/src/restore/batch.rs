//! Restoring several files from one plan. The files of a restore are
//! planned in restore order into one batch until the plan is full
//! (`policy::plan_full`: the rule the simulator closes its plans by too),
//! so the restore policy looks ahead across file ends. This is the restore
//! of one backup stream that `002_c5d78fa3332f6f9f.txt` §2 evaluates:
//! with a plan per file, a tree of small files would read a container
//! once per file that uses it, since no look-ahead policy would know the
//! next file needs the same container.
//!
//! The extractor hands out the batch's chunks in order; [`Writer`] moves
//! through the files as their steps go by, writing each into its temporary
//! and renaming it into place when its last step is written. A chunk that
//! cannot be read fails its file only: the files done before it stay, and
//! the batch goes on from the next file with a fresh plan.
//!
//! ```text
//! add(file):  verdict (skip / refuse) -> counted now, nothing planned;
//!             else plan its recipe onto the batch's steps
//! flush():    first <- 0
//!             loop: extract steps of files[first..] into Writer
//!                   ok  -> finish the open file; done
//!                   err -> finish the files whose steps all went by;
//!                          the file holding the failed step fails;
//!                          first <- the file after it
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::{BlobRef, DirEntry};

use super::target::{FileWriter, Opened, Target};
use super::Run;
use crate::read::plan;
use crate::read::policy::{plan_full, PlanStep};
use crate::read::Reader;

/// Files planned together, with their steps.
#[derive(Default)]
pub(super) struct Batch {
    files: Vec<BatchFile>,
    steps: Vec<PlanStep>,
}

struct BatchFile {
    entry: DirEntry,
    dest: PathBuf,
    /// Its steps in [`Batch::steps`].
    steps: Range<usize>,
}

impl Batch {
    pub(super) fn full(&self) -> bool {
        plan_full(self.steps.len(), self.files.len())
    }
}

impl Reader {
    /// Plans file `e` (content `blob`) into the run's batch, to be written
    /// to `dest` when the batch is flushed.
    pub(super) fn plan_file(
        &mut self,
        e: &DirEntry,
        blob: &BlobRef,
        dest: &Path,
        run: &mut Run,
    ) -> Result<()> {
        let steps = &mut run.batch.steps;
        let from = steps.len();
        if let Err(err) = plan::plan_blob(&self.store, self.meta.as_mut(), blob, steps) {
            steps.truncate(from);
            return Err(err);
        }
        let to = steps.len();
        run.batch.files.push(BatchFile {
            entry: e.clone(),
            dest: dest.to_path_buf(),
            steps: from..to,
        });
        Ok(())
    }

    /// Writes every file of the run's batch. `Err` only for a fatal error
    /// (a full target file system); a file that fails is recorded.
    pub(super) fn flush(&mut self, run: &mut Run) -> Result<()> {
        let batch = std::mem::take(&mut run.batch);
        let mut first = 0;
        while first < batch.files.len() {
            let files = &batch.files[first..];
            let base = files[0].steps.start;
            let mut w = Writer {
                files,
                at: base,
                cur: 0,
                open: Open::Not,
                fatal: None,
                run: &mut *run,
            };
            let r = self
                .extract
                .extract(&self.store, &batch.steps[base..], &mut |step, bytes| {
                    w.chunk(step, bytes)
                });
            match r {
                Ok(()) => return w.close_through(batch.steps.len()),
                Err(err) => {
                    if let Some(fatal) = w.fatal.take() {
                        return Err(fatal);
                    }
                    // The steps before `at` were written: their files are done.
                    let at = w.at;
                    w.close_through(at)?;
                    // A step failed before the batch's end, so its file is there.
                    let failed = w.cur;
                    let reported = matches!(w.open, Open::Discard);
                    w.open = Open::Not;
                    if !reported {
                        w.run.settle(err, &files[failed].dest)?;
                    }
                    first += failed + 1;
                }
            }
        }
        Ok(())
    }
}

/// The file the writer is in.
enum Open<'t> {
    /// Not opened yet.
    Not,
    Writing(Box<FileWriter<'t>>),
    /// Not written (decided against at open, or failed): its steps go by.
    Discard,
}

/// Writes the batch's steps, in order, into their files.
struct Writer<'b, 'r> {
    files: &'b [BatchFile],
    /// Index in the batch's steps of the next step to write.
    at: usize,
    /// The file holding step `at`; `files.len()` once all are done.
    cur: usize,
    open: Open<'r>,
    /// A full file system: the restore stops.
    fatal: Option<Error>,
    run: &'b mut Run<'r>,
}

impl<'r> Writer<'_, 'r> {
    fn target(&self) -> &'r Target {
        self.run.target
    }

    fn chunk(&mut self, step: &PlanStep, bytes: &[u8]) -> Result<()> {
        self.close_through(self.at)
            .map_err(|fatal| self.stop(fatal))?;
        let f = &self.files[self.cur];
        if matches!(self.open, Open::Not) {
            self.run.progress.set_current(f.dest.display());
            self.open = match self.target().open_file(&f.dest, &f.entry) {
                Ok(Opened::Writing(w)) => Open::Writing(w),
                Ok(Opened::Decided(placed)) => {
                    // Something appeared there since it was planned.
                    self.run.placed_file(placed, &f.dest, &f.entry);
                    Open::Discard
                }
                Err(err) => {
                    self.run.settle(err, &f.dest).map_err(|e| self.stop(e))?;
                    Open::Discard
                }
            };
        }
        if bytes.len() as u64 != step.size {
            return Err(Error::corrupt(
                format!("recipe of {}", f.dest.display()),
                format!(
                    "chunk {} recorded as {} bytes holds {}",
                    step.fp,
                    step.size,
                    bytes.len()
                ),
            ));
        }
        if let Open::Writing(w) = &mut self.open {
            if let Err(err) =
                std::io::Write::write_all(w, bytes).ctx(|| format!("writing {}", f.dest.display()))
            {
                self.open = Open::Discard;
                self.run.settle(err, &f.dest).map_err(|e| self.stop(e))?;
            }
        }
        self.run
            .progress
            .bytes_done
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.at += 1;
        Ok(())
    }

    /// Records a fatal error; the error handed back stops the extraction.
    fn stop(&mut self, fatal: Error) -> Error {
        self.fatal = Some(fatal);
        Error::invalid("restore stopped")
    }

    /// Finishes every file whose steps all lie before step `at` (a file
    /// with none is written empty), leaving `cur` at the file holding `at`
    /// (past the last file when `at` is the batch's end).
    fn close_through(&mut self, at: usize) -> Result<()> {
        while self.cur < self.files.len() && self.files[self.cur].steps.end <= at {
            let f = &self.files[self.cur];
            let open = std::mem::replace(&mut self.open, Open::Not);
            let placed = match open {
                Open::Writing(w) => Some(w.finish()),
                Open::Not => Some(self.target().place_file(&f.dest, &f.entry, &mut |_| Ok(()))),
                Open::Discard => None,
            };
            match placed {
                Some(Ok(placed)) => self.run.placed_file(placed, &f.dest, &f.entry),
                Some(Err(err)) => self.run.settle(err, &f.dest)?,
                None => {}
            }
            self.cur += 1;
        }
        Ok(())
    }
}
