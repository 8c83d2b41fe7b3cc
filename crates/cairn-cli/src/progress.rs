//! A progress display on a terminal, nothing otherwise. It polls the
//! engine's atomic progress counters from a background thread so the engine
//! never waits on the display. Until the total is known it is a spinner
//! with what is done so far (no empty bar); then a bar with the bytes (or
//! items) done of the total, the rate and ETA. Files done (of the total, when
//! known) and the current file or item follow, cut to the terminal width.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cairn_engine::Progress;
use indicatif::{ProgressBar, ProgressStyle};

/// What the bar measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes of `bytes_done` of `bytes_total`; files counted beside it.
    Bytes,
    /// Items of `files_done` of `files_total` (`check`: containers and
    /// snapshots); bytes read shown beside it.
    Items,
}

pub struct Display {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Display {
    /// Starts a byte display if stderr is a terminal and `enabled`.
    pub fn start(progress: Arc<Progress>, enabled: bool, verb: &'static str) -> Display {
        Self::start_with(progress, enabled, verb, Unit::Bytes)
    }

    /// Starts a display of `unit` if stderr is a terminal and `enabled`.
    pub fn start_with(
        progress: Arc<Progress>,
        enabled: bool,
        verb: &'static str,
        unit: Unit,
    ) -> Display {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return Display { stop, handle: None };
        }
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let (known, unknown) = styles(unit);
            // Styled before its first draw: `ProgressBar::new` alone would
            // draw its default full-width bar once.
            let bar = ProgressBar::new(0).with_style(unknown).with_prefix(verb);
            let mut styled_known = false;
            while !s.load(Ordering::Relaxed) {
                let (done, total) = match unit {
                    Unit::Bytes => (&progress.bytes_done, &progress.bytes_total),
                    Unit::Items => (&progress.files_done, &progress.files_total),
                };
                let total = total.load(Ordering::Relaxed);
                if total > 0 && !styled_known {
                    bar.set_style(known.clone());
                    bar.set_length(total);
                    styled_known = true;
                }
                bar.set_position(done.load(Ordering::Relaxed));
                bar.set_message(message(&progress, unit));
                bar.tick();
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Display {
            stop,
            handle: Some(handle),
        }
    }

    pub fn active(&self) -> bool {
        self.handle.is_some()
    }
}

/// The styles once the total is known, and before.
fn styles(unit: Unit) -> (ProgressStyle, ProgressStyle) {
    let (known, unknown) = match unit {
        Unit::Bytes => (
            "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {wide_msg}",
            "{spinner} {prefix} {bytes} {bytes_per_sec} {elapsed} {wide_msg}",
        ),
        Unit::Items => (
            "{prefix} [{bar:30}] {pos}/{len} ETA {eta} {wide_msg}",
            "{spinner} {prefix} {pos} {elapsed} {wide_msg}",
        ),
    };
    let style = |t: &str| {
        ProgressStyle::with_template(t)
            .expect("valid template")
            .progress_chars("=> ")
    };
    (style(known), style(unknown))
}

/// Files done (of the total when known) or bytes read, then the current
/// file or item.
fn message(p: &Progress, unit: Unit) -> String {
    let current = p.current.lock().clone();
    let counts = match unit {
        Unit::Bytes => {
            let done = p.files_done.load(Ordering::Relaxed);
            match p.files_total.load(Ordering::Relaxed) {
                0 => format!("{done} files"),
                total => format!("{done}/{total} files"),
            }
        }
        Unit::Items => {
            let read = p.bytes_done.load(Ordering::Relaxed);
            if read == 0 {
                String::new()
            } else {
                format!("{} read", indicatif::HumanBytes(read))
            }
        }
    };
    match (counts.is_empty(), current.is_empty()) {
        (_, true) => counts,
        (true, false) => current,
        (false, false) => format!("{counts}  {current}"),
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The totals of a backup of `paths`, found in the background by the same
/// walk and selection a `--dry-run` makes (`repo` is not descended into):
/// excluded entries are not counted, so the bar ends at its total. Files
/// unchanged since the parent snapshot count: the backup counts them done
/// without reading them.
pub fn estimate_backup(
    paths: Vec<std::path::PathBuf>,
    selection: Arc<cairn_engine::Selection>,
    repo: std::path::PathBuf,
    progress: Arc<Progress>,
) {
    std::thread::spawn(move || {
        let sources: Vec<_> = paths.into_iter().map(cairn_engine::Source::Path).collect();
        // A walk that fails here fails the backup too, which says why.
        if let Ok(o) = cairn_engine::dry_run(&sources, selection, Some(&repo)) {
            progress.set_totals(o.files, o.bytes);
        }
    });
}

/// Sums file sizes under `paths` in the background, for the ETA.
pub fn estimate_total(paths: Vec<std::path::PathBuf>, progress: Arc<Progress>) {
    std::thread::spawn(move || {
        use cairn_engine::long_path::Dirs;
        // Through directory handles, as the backup walks: any depth.
        fn walk(dirs: &mut Dirs, p: &std::path::Path, total: &mut u64) {
            let Ok(m) = dirs.lstat(p) else {
                return;
            };
            if m.is_file() {
                *total += m.len();
            } else if m.is_dir() {
                if let Ok(names) = dirs.read_dir(p) {
                    for n in names.into_iter().flatten() {
                        walk(dirs, &p.join(n), total);
                    }
                }
            }
        }
        let mut total = 0;
        let mut dirs = Dirs::new();
        for p in &paths {
            walk(&mut dirs, p, &mut total);
        }
        progress.bytes_total.store(total.max(1), Ordering::Relaxed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shows_counts_and_the_current_file() {
        let p = Progress::default();
        assert_eq!(message(&p, Unit::Bytes), "0 files");
        p.set_totals(3, 100);
        p.files_done.store(1, Ordering::Relaxed);
        p.set_current("out/tree/a.txt");
        assert_eq!(message(&p, Unit::Bytes), "1/3 files  out/tree/a.txt");
        p.set_current("container 0000002a");
        assert_eq!(message(&p, Unit::Items), "container 0000002a");
        p.bytes_done.store(2048, Ordering::Relaxed);
        assert_eq!(
            message(&p, Unit::Items),
            "2.00 KiB read  container 0000002a"
        );
    }
}
