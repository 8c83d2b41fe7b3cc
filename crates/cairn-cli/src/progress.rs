//! A progress bar on a terminal (bytes done, rate, ETA when the total is
//! known), nothing otherwise. It polls the engine's atomic progress counters
//! from a background thread so the engine never waits on the display.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cairn_engine::Progress;
use indicatif::{ProgressBar, ProgressStyle};

pub struct Display {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Display {
    /// Starts a bar if stderr is a terminal and `enabled`.
    pub fn start(progress: Arc<Progress>, enabled: bool, verb: &'static str) -> Display {
        let stop = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return Display { stop, handle: None };
        }
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let bar = ProgressBar::new(0);
            let known = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> ");
            let unknown =
                ProgressStyle::with_template("{prefix} {bytes} {bytes_per_sec} {elapsed}")
                    .expect("valid template");
            bar.set_prefix(verb);
            bar.set_style(unknown.clone());
            let mut styled_known = false;
            while !s.load(Ordering::Relaxed) {
                let total = progress.bytes_total.load(Ordering::Relaxed);
                if total > 0 && !styled_known {
                    bar.set_style(known.clone());
                    bar.set_length(total);
                    styled_known = true;
                }
                bar.set_position(progress.bytes_done.load(Ordering::Relaxed));
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

impl Drop for Display {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sums file sizes under `paths` in the background, for the ETA.
pub fn estimate_total(paths: Vec<std::path::PathBuf>, progress: Arc<Progress>) {
    std::thread::spawn(move || {
        fn walk(p: &std::path::Path, total: &mut u64) {
            let Ok(m) = std::fs::symlink_metadata(p) else {
                return;
            };
            if m.is_file() {
                *total += m.len();
            } else if m.is_dir() {
                if let Ok(rd) = std::fs::read_dir(p) {
                    for e in rd.flatten() {
                        walk(&e.path(), total);
                    }
                }
            }
        }
        let mut total = 0;
        for p in &paths {
            walk(p, &mut total);
        }
        progress.bytes_total.store(total.max(1), Ordering::Relaxed);
    });
}
