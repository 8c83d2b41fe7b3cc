//! `backup --dry-run`: walks the sources exactly as a backup would (the same
//! walker, the same [`Selection`]) and counts what it would read, without a
//! repository: nothing is opened, created or written, and files are not
//! opened either (their sizes come from their metadata). Command-line
//! behaviour, no paper's; see docs/backup-selection.md.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::pipe::bounded;

use cairn_chunk::{ChunkBatch, ChunkerSpec};
use cairn_core::{ChunkerConfig, Error, Result};

use super::events::Event;
use super::select::Selection;
use super::walker::{Source, Walker};
use crate::progress::Progress;

/// What a backup of the same sources with the same selection would read.
#[derive(Clone, Debug, Default)]
pub struct DryRunOutcome {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    /// Sum of the file sizes (the bytes a backup would read).
    pub bytes: u64,
    /// Entries left out, as "path: reason" (an excluded directory once).
    pub excluded: Vec<String>,
    /// Paths that could not be listed or stat'ed.
    pub skipped: Vec<String>,
    pub notices: Vec<String>,
}

/// Walks `sources` with `selection` and counts. `repository`: a directory
/// never descended into (the repository, if it lies below a source), as a
/// real backup does. Refuses what a real backup refuses before reading:
/// no sources, invalid or duplicate source names, a source that is not a
/// path (standard input cannot be measured without consuming it).
pub fn dry_run(
    sources: &[Source],
    selection: Arc<Selection>,
    repository: Option<&Path>,
) -> Result<DryRunOutcome> {
    super::check_sources(sources)?;
    if sources.iter().any(|s| !matches!(s, Source::Path(_))) {
        return Err(Error::invalid(
            "a dry run measures paths only (standard input would be consumed)",
        ));
    }
    let exclude = repository.and_then(|p| {
        use std::os::unix::fs::MetadataExt;
        let m = crate::long_path::Dirs::new().metadata(p);
        m.ok().map(|m| (m.dev(), m.ino()))
    });
    let mut out = DryRunOutcome::default();
    let mut any_top = false;
    for source in sources {
        let (tx, rx) = bounded::<Vec<Event>>(4);
        // The dry walker sends no data, so nothing is ever recycled.
        let (_recycle_tx, recycle_rx) = bounded::<ChunkBatch>(1);
        // Files are not opened, so nothing is chunked: no repository (and
        // no chunker seed) is needed.
        let mut w = Walker::new(
            ChunkerSpec::unseeded(&ChunkerConfig::default()),
            tx,
            recycle_rx,
            Arc::new(Progress::default()),
            exclude,
            Arc::new(AtomicU64::new(0)),
        );
        w.select(selection.clone()).dry_run(true);
        let top = std::thread::scope(|s| {
            // The walker (and with it the sender) is dropped when its
            // thread ends, which ends the count.
            let walker = s.spawn(move || {
                w.run(source);
                (w.skipped, w.notices, w.excluded)
            });
            let top = count(&mut out, rx);
            let (skipped, notices, excluded) = walker.join().expect("walker thread panicked");
            out.skipped.extend(skipped);
            out.notices.extend(notices);
            out.excluded.extend(excluded);
            top
        });
        any_top |= top;
    }
    if !any_top {
        return Err(Error::invalid(format!(
            "nothing would be backed up: {}",
            out.skipped
                .first()
                .map_or("no readable source", String::as_str)
        )));
    }
    Ok(out)
}

/// Counts one walker's events; returns whether it sent a top-level entry.
/// Depth tracking mirrors the real consumer: an entry at depth 0 is the
/// source itself.
fn count(out: &mut DryRunOutcome, rx: crate::pipe::Receiver<Vec<Event>>) -> bool {
    let mut depth = 0usize;
    let mut top = false;
    let mut pending = 0u64;
    for ev in rx.iter().flatten() {
        match ev {
            Event::DirStart { .. } => {
                top |= depth == 0;
                depth += 1;
            }
            Event::DirEnd => {
                depth -= 1;
                out.dirs += 1;
            }
            Event::FileStart { meta, .. } => pending = meta.size,
            Event::FileEnd { ok } => {
                if ok {
                    top |= depth == 0;
                    out.files += 1;
                    out.bytes += pending;
                }
            }
            Event::Symlink { .. } => {
                top |= depth == 0;
                out.symlinks += 1;
            }
            // Another name of a file counted already: nothing to read.
            Event::Linked(..) => {
                top |= depth == 0;
                out.files += 1;
            }
            // A FIFO, device or socket (nothing to read).
            Event::Kept(_) => top |= depth == 0,
            // Not sent by a dry walk of paths.
            Event::Data(_) | Event::Fingerprinted(_) | Event::StoredChunks(_) => {}
        }
    }
    top
}
