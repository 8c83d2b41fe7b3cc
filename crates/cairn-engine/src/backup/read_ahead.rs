//! Reading ahead (issue 12, "per-file throughput"): the larger files of one
//! stream are read and chunked on a small pool of threads while the walker
//! goes on listing, stat'ing and reading the small files after them.
//!
//! The stream still receives every event in walk order, so the chunks of a
//! stream keep the order SISL packs them in (`003_ea5fccc485a97c5d.txt` §2,
//! DDFS §4.2) and a backup's containers do not depend on thread timing. The
//! walker holds what it may not send yet in a queue ([`Ahead`]) behind the
//! oldest file still being read, and forwards that file's chunk batches as
//! they come.
//!
//! Bounds: at most [`READ_AHEAD_FILES`] files outstanding per stream and
//! about [`READ_AHEAD_BUFFERED_BYTES`] of content queued behind them; past
//! either, the walker waits for the oldest file. That wait cannot deadlock:
//! jobs are taken in submission order, so the oldest outstanding file always
//! has a thread reading it, and a reader only ever waits for the walker,
//! which is then receiving from exactly that file.
//!
//! Small files (below [`READ_AHEAD_MIN_BYTES`]) are read on the walker's own
//! thread: for them a hand-off costs more than the read.

use std::collections::VecDeque;
use std::fs::{File, Metadata};
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use cairn_chunk::{ChunkBatch, ChunkReader, ChunkerSpec};
use cairn_format::extras::Extent;

use super::events::{Event, BATCH_BYTES};
use crate::file_kinds::ExtentReader;
use crate::pipe::{bounded, Receiver, Sender, TryRecvError};
use crate::progress::Progress;

/// Files at least this large are read on the pool.
pub const READ_AHEAD_MIN_BYTES: u64 = 1 << 20;
/// Files outstanding (submitted, not yet all sent on) per stream.
pub const READ_AHEAD_FILES: usize = 4;
/// Content queued in walk order behind the oldest outstanding file.
pub const READ_AHEAD_BUFFERED_BYTES: usize = 16 << 20;
/// Chunk batches a reader may get ahead of the walker within one file.
const PIECES_PER_FILE: usize = 2;

/// What a reader sends for one file: its batches, then how the read ended.
pub(crate) enum Piece {
    Data(ChunkBatch),
    Done(std::io::Result<()>),
}

struct Job {
    file: File,
    extents: Option<Vec<Extent>>,
    out: Sender<Piece>,
}

/// The reader threads of one stream.
pub(crate) struct Pool {
    jobs: Option<Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    pub fn new(
        threads: usize,
        chunker: ChunkerSpec,
        recycle: Receiver<ChunkBatch>,
        progress: Arc<Progress>,
        read_ns: Arc<AtomicU64>,
    ) -> Self {
        // Never full while at most READ_AHEAD_FILES are outstanding.
        let (jobs, rx) = bounded::<Job>(READ_AHEAD_FILES + 1);
        let threads = (0..threads.max(1))
            .map(|_| {
                let (rx, recycle) = (rx.clone(), recycle.clone());
                let (progress, read_ns) = (progress.clone(), read_ns.clone());
                let chunker = chunker.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    for job in rx.iter() {
                        buf = read_file(job, &chunker, buf, &recycle, &progress, &read_ns);
                    }
                })
            })
            .collect();
        Pool {
            jobs: Some(jobs),
            threads,
        }
    }

    /// Starts reading `file` (only the `extents` of a sparse one); its
    /// pieces arrive on the returned receiver.
    pub fn submit(&self, file: File, extents: Option<Vec<Extent>>) -> Receiver<Piece> {
        let (out, rx) = bounded(PIECES_PER_FILE);
        let job = Job { file, extents, out };
        if let Some(jobs) = &self.jobs {
            // A send fails only once every reader has exited (a panic):
            // the receiver then reports the file as ended without `Done`.
            let _ = jobs.send(job);
        }
        rx
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Reads one job to its end; returns the look-ahead buffer for the next.
fn read_file(
    job: Job,
    chunker: &ChunkerSpec,
    buf: Vec<u8>,
    recycle: &Receiver<ChunkBatch>,
    progress: &Progress,
    read_ns: &AtomicU64,
) -> Vec<u8> {
    let Job { file, extents, out } = job;
    let chunker = chunker.build();
    let (result, buf) = match &extents {
        Some(x) => {
            let mut cr =
                ChunkReader::with_buffer(ExtentReader::new(&file, x), chunker, BATCH_BYTES, buf);
            (
                send_batches(&mut cr, &out, recycle, progress, read_ns),
                cr.into_buffer(),
            )
        }
        None => {
            let mut cr = ChunkReader::with_buffer(&file, chunker, BATCH_BYTES, buf);
            (
                send_batches(&mut cr, &out, recycle, progress, read_ns),
                cr.into_buffer(),
            )
        }
    };
    if let Some(r) = result {
        let _ = out.send(Piece::Done(r));
    }
    buf
}

/// Sends `cr`'s batches; `None` if the walker stopped listening.
fn send_batches<R: Read>(
    cr: &mut ChunkReader<R>,
    out: &Sender<Piece>,
    recycle: &Receiver<ChunkBatch>,
    progress: &Progress,
    read_ns: &AtomicU64,
) -> Option<std::io::Result<()>> {
    loop {
        let mut batch = recycle.try_recv().unwrap_or_else(|_| ChunkBatch::new());
        let t = Instant::now();
        let more = match cr.next_batch(&mut batch) {
            Ok(more) => more,
            Err(e) => return Some(Err(e)),
        };
        read_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if batch.is_empty() {
            return Some(Ok(()));
        }
        progress
            .bytes_done
            .fetch_add(batch.bytes() as u64, Ordering::Relaxed);
        out.send(Piece::Data(batch)).ok()?;
        if !more {
            return Some(Ok(()));
        }
    }
}

/// A file being read on the pool, in its place in the walk.
pub(crate) struct PendingFile {
    pub rx: Receiver<Piece>,
    pub path: PathBuf,
    /// Its handle and its stat before the read, for the check after it.
    pub file: File,
    pub before: Metadata,
}

/// What the walker holds back, in walk order.
pub(crate) enum Held {
    Event(Event),
    File(PendingFile),
}

/// The walker's queue behind the oldest outstanding file.
#[derive(Default)]
pub(crate) struct Ahead {
    pub queue: VecDeque<Held>,
    pub files: usize,
    pub bytes: usize,
}

impl Ahead {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn push_event(&mut self, ev: Event) {
        if let Event::Data(b) = &ev {
            self.bytes += b.bytes();
        }
        self.queue.push_back(Held::Event(ev));
    }

    pub fn push_file(&mut self, f: PendingFile) {
        self.files += 1;
        self.queue.push_back(Held::File(f));
    }

    /// Whether the walker must wait for the oldest file before going on.
    pub fn over_bounds(&self) -> bool {
        self.files > READ_AHEAD_FILES || self.bytes > READ_AHEAD_BUFFERED_BYTES
    }
}

/// The next piece of the oldest file: waiting for it if `wait`, else
/// `Err(())` when none has come yet. A reader gone without `Done` (it
/// panicked) ends the file as failed.
pub(crate) fn next_piece(rx: &Receiver<Piece>, wait: bool) -> Result<Piece, ()> {
    let gone = || Piece::Done(Err(std::io::Error::other("the reading thread stopped")));
    if wait {
        return Ok(rx.recv().unwrap_or_else(|_| gone()));
    }
    match rx.try_recv() {
        Ok(p) => Ok(p),
        Err(TryRecvError::Empty) => Err(()),
        Err(TryRecvError::Disconnected) => Ok(gone()),
    }
}
