//! Pre-chunked input: the events a chunk trace holds.
//!
//! A trace replaces the filesystem walker and the chunker: it names files and
//! lists each file's chunks as (fingerprint, size, stored size) in stream
//! order. External traces (Destor text traces, FSL hashfiles) carry only
//! files and chunks; cairn's own traces also carry directories, symlinks and
//! metadata, so replaying one reproduces a real backup's chunk stream exactly.

use crate::error::Result;
use crate::ids::Fingerprint;

/// One chunk of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceChunk {
    pub fp: Fingerprint,
    /// Logical (uncompressed) bytes.
    pub size: u32,
    /// Bytes after local compression; equal to `size` when the trace does
    /// not know (a compression ratio of 0 in FSL traces, Destor traces).
    pub stored_size: u32,
}

/// File or directory metadata as recorded in directory listings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceMeta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime_ns: i64,
    /// Bytes, as the trace records it (may differ from the chunk sum if the
    /// file changed while it was traced).
    pub size: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// Enter a directory (`name` is one path component).
    DirStart {
        name: Vec<u8>,
        meta: TraceMeta,
    },
    DirEnd,
    /// A file begins. `name` is one component for cairn traces; external
    /// traces put their whole recorded path here (it may contain `/`).
    FileStart {
        name: Vec<u8>,
        meta: TraceMeta,
    },
    Chunk(TraceChunk),
    FileEnd,
    Symlink {
        name: Vec<u8>,
        meta: TraceMeta,
        target: Vec<u8>,
    },
}

/// A stream of trace events; `Ok(None)` at the end. Errors name the input
/// and the byte offset where it is malformed.
pub trait TraceSource: Send {
    fn next_event(&mut self) -> Result<Option<TraceEvent>>;

    /// What is being read, for messages (`gen0.trace`).
    fn describe(&self) -> String;
}
