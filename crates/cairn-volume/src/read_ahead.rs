//! Sequential read-ahead of optimized files: each read of an optimized
//! range is noted per inode; once three reads follow each other (a
//! sequential stream: random reads that land near each other by chance
//! rarely do it three times), the next [`WINDOW`] bytes of its stream map are
//! decoded into the shared chunk cache (`crate::chunk_readers`) by
//! background workers, so the reads that follow find their chunks decoded
//! (004 "Data path": the read path reads through a cache of decompressed
//! chunks; the read-ahead is this volume's own).
//!
//! Bounded: [`WORKERS`] threads, at most [`QUEUE`] pending jobs of
//! [`STEP`] bytes (a job that finds the queue full is dropped and asked for
//! again by the next read), and [`STREAMS`] inodes tracked. Read-ahead
//! never changes what a read returns: it only fills the cache, whose
//! chunks are named by their content; its failures are dropped (the read
//! that needs the chunk reports them).

use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use parking_lot::Mutex;

use cairn_format::dir::BlobRef;

use crate::chunk_readers::ChunkReaders;

/// Bytes decoded ahead of a sequential reader.
pub const WINDOW: u64 = 8 << 20;
/// Bytes one job decodes.
pub const STEP: u64 = 1 << 20;
/// Jobs waiting at most.
pub const QUEUE: usize = 16;
/// Background threads decoding ahead.
pub const WORKERS: usize = 2;
/// Inodes whose stream is tracked; past this the table starts over.
const STREAMS: usize = 64;
/// A read starting this close to where the stream's reads reached (before
/// or after: the kernel's requests for one stream arrive on several
/// threads, not always in order) continues the stream.
const SLACK: u64 = 256 << 10;
/// Reads that continue a stream before it is read ahead.
const HITS: u32 = 2;

/// One inode's stream: where its reads reached, and how far its stream
/// map was queued for decoding.
#[derive(Debug, Clone, Copy)]
struct Stream {
    next: u64,
    ahead: u64,
    /// Reads that continued it.
    hits: u32,
}

/// A range of a stream map to decode.
struct Job {
    blob: BlobRef,
    offset: u64,
    len: u64,
}

/// The stream table and the job queue; the workers end when it drops.
pub struct ReadAhead {
    streams: Mutex<HashMap<u64, Stream>>,
    jobs: SyncSender<Job>,
}

impl ReadAhead {
    /// Starts the workers, which decode through `readers`.
    pub fn start(readers: Arc<ChunkReaders>) -> std::io::Result<Self> {
        let (jobs, queue) = sync_channel::<Job>(QUEUE);
        let queue = Arc::new(std::sync::Mutex::new(queue));
        for i in 0..WORKERS {
            let queue = queue.clone();
            let readers = readers.clone();
            std::thread::Builder::new()
                .name(format!("cairn-read-ahead-{i}"))
                .spawn(move || work(&queue, &readers))?;
        }
        Ok(ReadAhead {
            streams: Mutex::new(HashMap::new()),
            jobs,
        })
    }

    /// A read of `[offset, end)` of `ino`, whose bytes below `valid` come
    /// from stream map `blob` (but for recalled ranges): continues or
    /// starts its stream, and queues what a continuing stream will read
    /// next.
    pub fn note(&self, ino: u64, blob: &BlobRef, valid: u64, offset: u64, end: u64) {
        let mut streams = self.streams.lock();
        let continues = streams
            .get(&ino)
            .is_some_and(|s| offset.saturating_add(SLACK) >= s.next && offset <= s.next + SLACK);
        if !continues {
            if streams.len() >= STREAMS && !streams.contains_key(&ino) {
                streams.clear();
            }
            streams.insert(
                ino,
                Stream {
                    next: end,
                    ahead: end,
                    hits: 0,
                },
            );
            return;
        }
        let s = streams.get_mut(&ino).expect("checked above");
        s.next = s.next.max(end);
        s.hits = s.hits.saturating_add(1);
        if s.hits < HITS {
            s.ahead = s.ahead.max(s.next);
            return;
        }
        let want = s.next.saturating_add(WINDOW).min(valid);
        let mut pos = s.ahead.max(s.next);
        while pos < want {
            let len = STEP.min(want - pos);
            let job = Job {
                blob: *blob,
                offset: pos,
                len,
            };
            match self.jobs.try_send(job) {
                Ok(()) => pos += len,
                // Full: the next read of the stream asks again.
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => break,
            }
        }
        s.ahead = pos;
    }

    /// Whether `ino` has a stream whose reads reached `next` (tests).
    #[cfg(test)]
    fn stream(&self, ino: u64) -> Option<(u64, u64)> {
        self.streams.lock().get(&ino).map(|s| (s.next, s.ahead))
    }
}

/// A worker: decodes queued ranges until the queue's sender is dropped.
fn work(queue: &std::sync::Mutex<Receiver<Job>>, readers: &ChunkReaders) {
    loop {
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        // A failure here is the read's to report, when it needs the chunk.
        let _ = readers.with_reader(|r| r.warm(&job.blob, job.offset, job.len));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob() -> BlobRef {
        BlobRef {
            root: cairn_core::Fingerprint::from_slice(&[0; 32]),
            level: 0,
            size: 1 << 30,
        }
    }

    /// A read-ahead whose workers never run: the queue is only filled.
    fn idle() -> (ReadAhead, Receiver<Job>) {
        let (jobs, queue) = sync_channel(QUEUE);
        let ra = ReadAhead {
            streams: Mutex::new(HashMap::new()),
            jobs,
        };
        (ra, queue)
    }

    #[test]
    fn a_third_sequential_read_queues_the_window_in_steps() {
        let (ra, queue) = idle();
        let b = blob();
        ra.note(7, &b, 1 << 30, 0, 64 << 10);
        ra.note(7, &b, 1 << 30, 64 << 10, 128 << 10);
        assert!(queue.try_recv().is_err(), "two reads are not a stream yet");
        ra.note(7, &b, 1 << 30, 128 << 10, 256 << 10);
        let jobs: Vec<(u64, u64)> = queue.try_iter().map(|j| (j.offset, j.len)).collect();
        assert_eq!(jobs.len() as u64, WINDOW / STEP);
        assert_eq!(jobs[0], (256 << 10, STEP));
        assert_eq!(ra.stream(7), Some((256 << 10, (256 << 10) + WINDOW)));
        // The next read queues only what the window gained.
        ra.note(7, &b, 1 << 30, 256 << 10, 384 << 10);
        let more: Vec<(u64, u64)> = queue.try_iter().map(|j| (j.offset, j.len)).collect();
        assert_eq!(more, [((256 << 10) + WINDOW, 128 << 10)]);
    }

    #[test]
    fn read_ahead_stops_at_valid_and_a_jump_starts_over() {
        let (ra, queue) = idle();
        let b = blob();
        ra.note(1, &b, 3 << 20, 0, 1 << 20);
        ra.note(1, &b, 3 << 20, 1 << 20, 3 << 19);
        ra.note(1, &b, 3 << 20, 3 << 19, 2 << 20);
        let jobs: Vec<(u64, u64)> = queue.try_iter().map(|j| (j.offset, j.len)).collect();
        assert_eq!(jobs, [(2 << 20, 1 << 20)]);
        ra.note(1, &b, 3 << 20, 100 << 20, (100 << 20) + 4096);
        assert!(queue.try_recv().is_err());
        assert_eq!(ra.stream(1), Some(((100 << 20) + 4096, (100 << 20) + 4096)));
    }

    #[test]
    fn a_full_queue_is_asked_again_by_the_next_read() {
        let (ra, queue) = idle();
        let b = blob();
        // Two streams fill the queue first (a window is 8 steps).
        for ino in [2, 3, 4] {
            ra.note(ino, &b, 1 << 30, 0, 4096);
            ra.note(ino, &b, 1 << 30, 4096, 6144);
            ra.note(ino, &b, 1 << 30, 6144, 8192);
        }
        assert_eq!(queue.try_iter().count(), QUEUE);
        assert_eq!(ra.stream(4), Some((8192, 8192)), "no room for stream 4");
        ra.note(4, &b, 1 << 30, 8192, 12288);
        let jobs: Vec<u64> = queue.try_iter().map(|j| j.offset).collect();
        assert_eq!(jobs.first(), Some(&12288));
    }
}
