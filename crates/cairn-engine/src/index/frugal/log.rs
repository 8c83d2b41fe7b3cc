//! The on-disk chunk-metadata log (paper 004, "Log-structured organization"):
//! fixed-size records `(fingerprint, container id)` appended in order. A
//! record's position (a `u32`) is the 4-byte pointer the cuckoo table holds.
//!
//! Appends collect in a RAM write buffer and go to the backend as one
//! immutable segment object (`frugal/<first position, 10 digits>`) when the
//! buffer holds `segment_records` records or on [`ChunkLog::flush`]. The
//! segment layout is `cairn_format::frugal_log`.
//!
//! **Partitions** (004's partitioned sessions, docs/concurrency.md "Frugal
//! logs per writer"): a repository may hold several logs, each appended by
//! one writer at a time. Partition 0 is the log above; partition `k > 0`
//! names its segments `frugal/p<k>-<first position, 10 digits>`. Positions
//! are per log; [`open_partitions`] reads every log from one listing.
//!
//! A removal record (container id `REMOVAL`) says the fingerprint's earlier
//! records no longer count; removal records never enter the cuckoo table.
//!
//! Records are fixed-size, so a run of records is one `read_at`. The segment
//! checksum is verified when a segment is read whole (open, rebuild); a
//! range read cannot verify it (see `docs/frugal-index.md`).

use std::sync::Arc;

use cairn_core::{Backend, ContainerId, Error, Fingerprint, FpMap, Result};

/// Key prefix of the log's segments.
pub const LOG_PREFIX: &str = "frugal/";

use cairn_format::frugal_log::{
    decode_segment, decode_segment_header, encode_segment, holds_removal, REMOVAL,
};
pub use cairn_format::frugal_log::{
    SEGMENT_HEADER_LEN as HEADER_LEN, SEGMENT_TRAILER_LEN as TRAILER_LEN,
};

/// The key of partition `part`'s segment starting at record `first`.
pub fn segment_key(part: u32, first: u32) -> String {
    if part == 0 {
        format!("{LOG_PREFIX}{first:010}")
    } else {
        format!("{LOG_PREFIX}p{part}-{first:010}")
    }
}

/// The partition a key of `frugal/` belongs to (`None`: not a segment's
/// name; opening that partition then reports it).
fn partition_of(key: &str) -> Option<u32> {
    let name = key.strip_prefix(LOG_PREFIX)?;
    match name.strip_prefix('p') {
        None => Some(0),
        Some(rest) => rest.split_once('-')?.0.parse().ok().filter(|&k| k > 0),
    }
}

/// Whether `key` names a log's first segment (record 0, in any
/// partition): without it a partition fails its open as damaged.
pub fn is_first_segment(key: &str) -> bool {
    let Some(name) = key.strip_prefix(LOG_PREFIX) else {
        return false;
    };
    let position = match name.strip_prefix('p') {
        None => name,
        Some(rest) => rest.split_once('-').map_or("", |(_, p)| p),
    };
    position.parse::<u32>() == Ok(0)
}

/// Every partition's log, from one listing of `frugal/`, by partition.
/// A key that names no partition is damage of partition 0.
pub fn open_partitions(
    backend: &Arc<dyn Backend>,
    segment_records: usize,
) -> Result<std::collections::BTreeMap<u32, ChunkLog>> {
    let mut keys: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for key in backend.list(LOG_PREFIX)? {
        keys.entry(partition_of(&key).unwrap_or(0))
            .or_default()
            .push(key);
    }
    keys.into_iter()
        .map(|(part, keys)| {
            ChunkLog::open_keys(backend.clone(), part, &keys, segment_records).map(|l| (part, l))
        })
        .collect()
}

/// One log record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub pos: u32,
    pub fp: Fingerprint,
    pub container: ContainerId,
}

impl LogRecord {
    /// A removal: `fp`'s records before this one no longer count.
    pub fn is_removal(&self) -> bool {
        self.container == REMOVAL
    }
}

/// What `records` (in log order) index: a put counts until a later
/// removal of its fingerprint; of several live puts the canonical copy
/// wins. For `check`, which holds the whole log anyway; the table rebuild
/// computes the same with RAM for the removals only.
pub fn live_entries(records: &[LogRecord]) -> FpMap<ContainerId> {
    let mut live = FpMap::default();
    for r in records {
        if r.is_removal() {
            live.remove(&r.fp);
        } else {
            crate::canonical::place(&mut live, r.fp, r.container);
        }
    }
    live
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    first: u32,
    count: u32,
    /// Written as version 2: may hold removal records.
    removals: bool,
}

pub struct ChunkLog {
    backend: Arc<dyn Backend>,
    /// The partition (0: the first log).
    part: u32,
    fp_width: Option<usize>,
    segment_records: usize,
    /// Written segments, in position order (8 bytes of RAM each).
    segments: Vec<Segment>,
    /// Position of the first buffered record = records on disk.
    flushed: u32,
    buffer: Vec<(Fingerprint, ContainerId)>,
    /// Some record (on disk or buffered) is a removal.
    removals: bool,
}

fn corrupt(key: &str, detail: impl Into<String>) -> Error {
    Error::corrupt(format!("frugal index segment {key}"), detail)
}

fn what(key: &str) -> String {
    format!("frugal index segment {key}")
}

fn decode_record(width: usize, pos: u32, b: &[u8]) -> LogRecord {
    let (fp, container) = cairn_format::frugal_log::decode_record(width, b);
    LogRecord { pos, fp, container }
}

impl ChunkLog {
    /// An empty log of partition `part` (its first append starts it).
    pub fn empty(backend: Arc<dyn Backend>, part: u32, segment_records: usize) -> Self {
        ChunkLog {
            backend,
            part,
            fp_width: None,
            segment_records: segment_records.max(1),
            segments: Vec::new(),
            flushed: 0,
            buffer: Vec::new(),
            removals: false,
        }
    }

    /// Opens partition `part`'s log from its segments' `keys` (sorted):
    /// reads each header, checking that positions are contiguous.
    fn open_keys(
        backend: Arc<dyn Backend>,
        part: u32,
        keys: &[String],
        segment_records: usize,
    ) -> Result<Self> {
        let mut log = Self::empty(backend, part, segment_records);
        for key in keys {
            let key = key.as_str();
            let head = log.backend.read_at(key, 0, HEADER_LEN)?;
            let h = decode_segment_header(&what(key), &head)?;
            if key != segment_key(part, h.first) || h.first != log.flushed {
                return Err(corrupt(
                    key,
                    format!("starts at record {}, expected {}", h.first, log.flushed),
                ));
            }
            if *log.fp_width.get_or_insert(h.width) != h.width {
                return Err(corrupt(key, "fingerprint width differs from the log's"));
            }
            log.segments.push(Segment {
                first: h.first,
                count: h.count,
                removals: h.removals,
            });
            log.removals |= h.removals;
            log.flushed = h
                .first
                .checked_add(h.count)
                .ok_or_else(|| corrupt(key, "record count overflows"))?;
        }
        Ok(log)
    }

    /// The partition this log belongs to.
    pub fn partition(&self) -> u32 {
        self.part
    }

    fn record_len(&self) -> usize {
        self.fp_width.unwrap_or(0) + 8
    }

    /// Records appended (on disk + buffered).
    pub fn len(&self) -> u32 {
        self.flushed + self.buffer.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records on disk.
    pub fn flushed_len(&self) -> u32 {
        self.flushed
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn fp_width(&self) -> Option<usize> {
        self.fp_width
    }

    /// Records waiting in the write buffer.
    pub fn buffered_len(&self) -> usize {
        self.buffer.len()
    }

    /// Appends a record to the write buffer and returns its position.
    pub fn append(&mut self, fp: &Fingerprint, container: ContainerId) -> Result<u32> {
        if *self.fp_width.get_or_insert(fp.len()) != fp.len() {
            return Err(Error::invalid(format!(
                "fingerprint width {} differs from the frugal index's {}",
                fp.len(),
                self.fp_width.unwrap_or(0)
            )));
        }
        let pos = self.len();
        if pos > super::cuckoo::MAX_POINTER {
            return Err(Error::invalid("frugal index log is full (2^32-1 records)"));
        }
        self.buffer.push((*fp, container));
        Ok(pos)
    }

    /// Appends a removal record for `fp` and returns its position.
    pub fn append_removal(&mut self, fp: &Fingerprint) -> Result<u32> {
        let pos = self.append(fp, REMOVAL)?;
        self.removals = true;
        Ok(pos)
    }

    /// Whether any record, on disk or buffered, is a removal. A log only
    /// grows, so once true this stays true; without a removal every record
    /// is live.
    pub fn has_removals(&self) -> bool {
        self.removals
    }

    /// Whether the write buffer holds a whole segment (time to [`ChunkLog::flush`]).
    pub fn buffer_full(&self) -> bool {
        self.buffer.len() >= self.segment_records
    }

    /// Writes the buffered records as one segment (one write).
    pub fn flush(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let width = self.fp_width.expect("set by append");
        let count = self.buffer.len();
        let out = encode_segment(width, self.flushed, &self.buffer);
        self.backend
            .write_atomic(&segment_key(self.part, self.flushed), &out)?;
        self.segments.push(Segment {
            first: self.flushed,
            count: count as u32,
            removals: holds_removal(&self.buffer),
        });
        self.flushed += count as u32;
        self.buffer.clear();
        Ok(())
    }

    /// The record at `pos` if it is still in the write buffer (no I/O).
    pub fn buffered(&self, pos: u32) -> Option<LogRecord> {
        let i = pos.checked_sub(self.flushed)? as usize;
        self.buffer
            .get(i)
            .map(|&(fp, container)| LogRecord { pos, fp, container })
    }

    /// Reads the on-disk records `pos .. pos+k`, stopping at the end of
    /// `pos`'s segment, with one backend `read_at`. The first returned
    /// record is the one at `pos`.
    pub fn read_run(&self, pos: u32, k: usize) -> Result<Vec<LogRecord>> {
        if pos >= self.flushed {
            return Err(Error::invalid(format!(
                "frugal log position {pos} is not on disk"
            )));
        }
        let si = self.segments.partition_point(|s| s.first <= pos) - 1;
        let seg = self.segments[si];
        let end = (seg.first + seg.count).min(pos.saturating_add(k.max(1) as u32));
        let rl = self.record_len();
        let n = (end - pos) as usize;
        let key = segment_key(self.part, seg.first);
        let offset = (HEADER_LEN + (pos - seg.first) as usize * rl) as u64;
        let bytes = self.backend.read_at(&key, offset, n * rl)?;
        if bytes.len() != n * rl {
            return Err(corrupt(&key, "short read"));
        }
        let width = self.fp_width.expect("segments exist");
        Ok(bytes
            .chunks_exact(rl)
            .enumerate()
            .map(|(i, b)| decode_record(width, pos + i as u32, b))
            .collect())
    }

    /// Calls `f` for every record, on disk (each segment read whole and its
    /// checksum verified) then buffered. Returns the segments read.
    pub fn scan(&self, f: &mut dyn FnMut(LogRecord)) -> Result<u64> {
        self.scan_segments(false, f)
    }

    /// [`Self::scan`] of only the segments that may hold removals (and the
    /// buffer): every removal record, with the puts beside it.
    pub fn scan_removal_segments(&self, f: &mut dyn FnMut(LogRecord)) -> Result<u64> {
        self.scan_segments(true, f)
    }

    fn scan_segments(&self, only_removals: bool, f: &mut dyn FnMut(LogRecord)) -> Result<u64> {
        let mut reads = 0;
        for seg in self
            .segments
            .iter()
            .filter(|s| s.removals || !only_removals)
        {
            let key = segment_key(self.part, seg.first);
            let bytes = self.backend.read(&key)?;
            reads += 1;
            let (h, records) = decode_segment(&what(&key), &bytes)?;
            if h.first != seg.first || h.count != seg.count {
                return Err(corrupt(&key, "header does not match its size or position"));
            }
            for (i, (fp, container)) in records.into_iter().enumerate() {
                f(LogRecord {
                    pos: seg.first + i as u32,
                    fp,
                    container,
                });
            }
        }
        for (i, &(fp, container)) in self.buffer.iter().enumerate() {
            f(LogRecord {
                pos: self.flushed + i as u32,
                fp,
                container,
            });
        }
        Ok(reads)
    }
}
