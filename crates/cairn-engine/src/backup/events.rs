//! What the walker hands to its stream: the events of a walk in walk order
//! ([`Event`]), the metadata they carry ([`EntryMeta`]), the batching
//! sender ([`EventSink`]) (the progress counters a display polls are
//! `crate::progress`)
//! ([`Progress`]).

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use cairn_chunk::ChunkBatch;
use cairn_core::TraceChunk;
use cairn_format::dir::{DirEntry, Extras};

use crate::pipe::Sender;

/// Bytes of input per chunk batch handed from the walker to the stream.
pub const BATCH_BYTES: usize = 1 << 20;

/// Events per message from the walker to its stream. A tree of small files
/// is mostly metadata events and one small `Data` batch per file; sent one
/// by one, each would wake the stream thread (a futex call on each side),
/// which cost a fifth of an unchanged re-backup's time.
pub const EVENT_BATCH: usize = 256;
/// Content bytes per message: a message is sent once its chunks reach this
/// much, so hashing and storing still overlap with reading.
pub const EVENT_BATCH_BYTES: usize = 256 << 10;

/// The walker's side of its channel: events are sent in messages of up to
/// [`EVENT_BATCH`] events or [`EVENT_BATCH_BYTES`] of content. Holding
/// chunk buffers back cannot stall the walk: it never waits for a recycled
/// buffer (it makes a new one when none has come back).
pub(crate) struct EventSink {
    tx: Sender<Vec<Event>>,
    pending: Vec<Event>,
    pending_bytes: usize,
}

impl EventSink {
    pub(crate) fn new(tx: Sender<Vec<Event>>) -> Self {
        EventSink {
            tx,
            pending: Vec::new(),
            pending_bytes: 0,
        }
    }

    /// Queues `ev`; `Err` once the stream has gone away.
    pub(crate) fn send(&mut self, ev: Event) -> Result<(), ()> {
        self.pending_bytes += match &ev {
            Event::Data(b) => b.bytes(),
            Event::Fingerprinted(c) => c.iter().map(|c| c.size as usize).sum(),
            _ => 0,
        };
        self.pending.push(ev);
        if self.pending_bytes >= EVENT_BATCH_BYTES || self.pending.len() >= EVENT_BATCH {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Sends what is queued.
    pub(crate) fn flush(&mut self) -> Result<(), ()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.pending_bytes = 0;
        let batch = std::mem::replace(&mut self.pending, Vec::with_capacity(EVENT_BATCH));
        self.tx.send(batch).map_err(|_| ())
    }
}

/// Per-entry metadata recorded in directory listings.
#[derive(Clone, Debug, Default)]
pub struct EntryMeta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime_ns: i64,
    /// 0 where there is none (streams, traces): never matches a parent's.
    pub ctime_ns: i64,
    /// 0 where there is none (streams, traces).
    pub inode: u64,
    pub size: u64,
    /// Extended attributes, hard-link group, device number, sparse extents.
    pub extras: Extras,
}

/// A `stat` time (seconds, nanoseconds) as ns since the epoch.
fn ns(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

impl EntryMeta {
    pub fn from_fs(m: &Metadata) -> Self {
        EntryMeta {
            mode: m.permissions().mode(),
            uid: m.uid(),
            gid: m.gid(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
            inode: m.ino(),
            size: m.len(),
            extras: Extras::default(),
        }
    }
}

pub enum Event {
    DirStart {
        name: Vec<u8>,
        meta: EntryMeta,
        /// Against the parent snapshot: `New` (not there), `Changed` (its
        /// metadata differs), or `Unmodified` when its metadata is the same
        /// (the receiver then calls it unmodified only if its entries are
        /// all unmodified and as many as `parent_entries`).
        state: EntryState,
        /// Entries of the parent snapshot's listing of this directory.
        parent_entries: usize,
    },
    DirEnd,
    FileStart {
        name: Vec<u8>,
        meta: EntryMeta,
        /// `New`, or `Changed` where the parent snapshot has a file of
        /// this name (an unmodified file is sent as [`Event::Kept`]).
        state: EntryState,
    },
    Data(ChunkBatch),
    /// Chunks known only by fingerprint and sizes (a trace).
    Fingerprinted(Vec<TraceChunk>),
    /// Data chunks already in the repository, the file's next ones
    /// (`FileSource::Pieces`): recorded unread, nothing looked up or stored.
    StoredChunks(Vec<crate::backup::file_content::StoredChunk>),
    /// An entry whose content is already stored (see [`Source::Kept`]), or
    /// that has none (a FIFO, device or socket).
    Kept(DirEntry),
    /// Another name of a file sent earlier in this walk (same hard-link
    /// group): the receiver gives it that file's content, unread. The
    /// state is this name's against the parent snapshot.
    Linked(DirEntry, EntryState),
    /// `ok == false`: reading failed part-way; the entry must be dropped.
    FileEnd {
        ok: bool,
    },
    Symlink {
        name: Vec<u8>,
        meta: EntryMeta,
        target: Vec<u8>,
    },
}

/// How an entry compares with the parent snapshot, in restic's words
/// (`backup -v`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryState {
    /// Not in the parent snapshot (or there is none).
    New,
    /// In the parent snapshot, and read again (a file) or different (a
    /// directory's metadata or entries).
    Changed,
    /// As in the parent snapshot: a file not read again, a directory whose
    /// metadata and entries are the same.
    Unmodified,
}

impl EntryState {
    pub fn name(self) -> &'static str {
        match self {
            EntryState::New => "new",
            EntryState::Changed => "changed",
            EntryState::Unmodified => "unmodified",
        }
    }
}

/// One file or directory a backup stored, as `backup -v` lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EntryReport {
    /// Its path in the snapshot (a name that is not UTF-8 escaped,
    /// `crate::names`), directories ending in `/`.
    pub path: String,
    pub dir: bool,
    pub state: EntryState,
    /// Content bytes (a file) or listing bytes (a directory).
    pub size: u64,
    /// Data chunks of a file's content this backup read (0 for a file not
    /// read again, or a directory).
    pub chunks: u64,
    /// Bytes this entry added to the repository (stored, after dedup and
    /// compression) by the time it ended: new chunks a lazy lookup decides
    /// later are not counted (the backup's total has them).
    pub added_bytes: u64,
}

/// Told of each file and directory a backup stores, in walk order per
/// source (`BackupOptions::entry_log`).
pub type EntryLog = std::sync::Arc<dyn Fn(&EntryReport) + Send + Sync>;

/// Told of the bytes of file content a stream read and stored (before
/// dedup), after each batch of chunks, on the stream's thread: a pause
/// there holds the whole pipeline, inside one large file as between files
/// (`BackupOptions::content_log`). Chunks kept unread (a parent's, a
/// `FileContent` hook's) are not counted.
pub type ContentLog = std::sync::Arc<dyn Fn(u64) + Send + Sync>;
