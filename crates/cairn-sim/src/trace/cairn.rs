//! cairn's own trace format: a versioned, checksummed event stream.
//!
//! Unlike Destor and FSL traces it carries every [`TraceEvent`] variant —
//! directories, symlinks, full [`TraceMeta`] — so replaying a trace taken
//! from a real backup reproduces that backup's chunk stream and tree. The
//! byte layout is specified in `docs/traces.md` § cairn trace:
//!
//! ```text
//! header   "CAIRNTRC" | version u32 = 1 | fp width u8 | 3 reserved bytes
//! records  tag u8 | body      (one per event, varints for sizes)
//! trailer  0xFF | event count u64 | CRC-32C u32 of every byte before it
//! ```
//!
//! The reader checks magic, version, the nesting of the events (chunks only
//! inside a file, `DirEnd` only closing an open directory, nothing left open
//! at the trailer), canonical varints, the event count and the checksum, and
//! that nothing follows the trailer. Events are returned as they are read, so
//! damage may be reported only at the end: a consumer may trust the stream
//! once `next_event` has returned `Ok(None)`. The writer enforces the same
//! rules with `Error::InvalidInput`.

use std::io::{Read, Write};

use cairn_core::{
    Error, Fingerprint, Result, TraceChunk, TraceEvent, TraceMeta, TraceSource, MAX_FINGERPRINT_LEN,
};

use super::{read_error, ByteStream, MAX_NAME_LEN};

/// The first 8 bytes of a cairn trace.
pub const CAIRN_TRACE_MAGIC: &[u8; 8] = b"CAIRNTRC";
/// The format version this build writes and the newest it reads.
pub const CAIRN_TRACE_VERSION: u32 = 1;
/// Header length.
pub const CAIRN_TRACE_HEADER_LEN: usize = 16;

const TAG_DIR_START: u8 = 0x01;
const TAG_DIR_END: u8 = 0x02;
const TAG_FILE_START: u8 = 0x03;
const TAG_CHUNK: u8 = 0x04;
const TAG_CHUNK_STORED: u8 = 0x05;
const TAG_FILE_END: u8 = 0x06;
const TAG_SYMLINK: u8 = 0x07;
const TAG_TRAILER: u8 = 0xFF;

/// Flush the writer's buffer once it holds this many bytes.
const WRITE_BUFFER: usize = 64 * 1024;

/// Where the event stream is structurally: shared by writer and reader.
#[derive(Clone, Copy, Debug, Default)]
struct Nesting {
    depth: u64,
    in_file: bool,
}

impl Nesting {
    /// Applies `tag`, or says why it cannot come here.
    fn apply(&mut self, tag: u8) -> std::result::Result<(), &'static str> {
        match tag {
            TAG_DIR_START | TAG_FILE_START | TAG_SYMLINK if self.in_file => {
                Err("a directory, file or symlink cannot start inside a file")
            }
            TAG_DIR_START => {
                self.depth += 1;
                Ok(())
            }
            TAG_DIR_END if self.in_file => Err("DirEnd inside a file"),
            TAG_DIR_END if self.depth == 0 => Err("DirEnd without an open directory"),
            TAG_DIR_END => {
                self.depth -= 1;
                Ok(())
            }
            TAG_FILE_START => {
                self.in_file = true;
                Ok(())
            }
            TAG_CHUNK | TAG_CHUNK_STORED if !self.in_file => Err("a chunk outside a file"),
            TAG_FILE_END if !self.in_file => Err("FileEnd without an open file"),
            TAG_FILE_END => {
                self.in_file = false;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Why the stream cannot end here, if it cannot.
    fn open_problem(&self) -> Option<String> {
        if self.in_file {
            Some("a file is still open (no FileEnd)".into())
        } else if self.depth > 0 {
            Some(format!(
                "{} directories are still open (no DirEnd)",
                self.depth
            ))
        } else {
            None
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_meta(out: &mut Vec<u8>, m: &TraceMeta) {
    put_varint(out, u64::from(m.mode));
    put_varint(out, u64::from(m.uid));
    put_varint(out, u64::from(m.gid));
    out.extend_from_slice(&m.mtime_ns.to_le_bytes());
    put_varint(out, m.size);
}

/// Writes a cairn trace. Events are buffered (64 KiB) and the trailer is
/// written by [`CairnTraceWriter::finish`]; a writer dropped without
/// `finish` leaves a trace that readers reject as truncated.
pub struct CairnTraceWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    crc: u32,
    fp_width: usize,
    events: u64,
    nesting: Nesting,
    failed: bool,
}

impl<W: Write> CairnTraceWriter<W> {
    /// Starts a trace whose chunk fingerprints are `fp_width` bytes (1..=32)
    /// and writes its header.
    pub fn new(w: W, fp_width: usize) -> Result<Self> {
        if !(1..=MAX_FINGERPRINT_LEN).contains(&fp_width) {
            return Err(Error::invalid(format!(
                "cairn trace fingerprint width {fp_width} is out of range 1..={MAX_FINGERPRINT_LEN}"
            )));
        }
        let mut buf = Vec::with_capacity(WRITE_BUFFER + 1024);
        buf.extend_from_slice(CAIRN_TRACE_MAGIC);
        buf.extend_from_slice(&CAIRN_TRACE_VERSION.to_le_bytes());
        buf.push(fp_width as u8);
        buf.extend_from_slice(&[0; 3]);
        Ok(CairnTraceWriter {
            out: w,
            buf,
            crc: 0,
            fp_width,
            events: 0,
            nesting: Nesting::default(),
            failed: false,
        })
    }

    fn flush_buf(&mut self) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        let r = self.out.write_all(&self.buf);
        self.buf.clear();
        r.map_err(|e| {
            self.failed = true;
            Error::io("writing cairn trace", e)
        })
    }

    fn check_name(what: &str, b: &[u8]) -> Result<()> {
        if b.len() > MAX_NAME_LEN {
            return Err(Error::invalid(format!(
                "cairn trace: {what} of {} bytes exceeds the limit of {MAX_NAME_LEN}",
                b.len()
            )));
        }
        Ok(())
    }

    /// Appends one event. Events must nest: chunks only between `FileStart`
    /// and `FileEnd`, `DirEnd` closing a `DirStart`; chunk fingerprints must
    /// have the trace's width.
    pub fn write_event(&mut self, ev: &TraceEvent) -> Result<()> {
        if self.failed {
            return Err(Error::invalid("cairn trace writer failed earlier"));
        }
        let tag = match ev {
            TraceEvent::DirStart { .. } => TAG_DIR_START,
            TraceEvent::DirEnd => TAG_DIR_END,
            TraceEvent::FileStart { .. } => TAG_FILE_START,
            TraceEvent::Chunk(c) if c.stored_size == c.size => TAG_CHUNK,
            TraceEvent::Chunk(_) => TAG_CHUNK_STORED,
            TraceEvent::FileEnd => TAG_FILE_END,
            TraceEvent::Symlink { .. } => TAG_SYMLINK,
        };
        match ev {
            TraceEvent::DirStart { name, .. } | TraceEvent::FileStart { name, .. } => {
                Self::check_name("name", name)?
            }
            TraceEvent::Symlink { name, target, .. } => {
                Self::check_name("name", name)?;
                Self::check_name("symlink target", target)?;
            }
            TraceEvent::Chunk(c) if c.fp.len() != self.fp_width => {
                return Err(Error::invalid(format!(
                    "cairn trace: chunk fingerprint of {} bytes in a trace of width {}",
                    c.fp.len(),
                    self.fp_width
                )))
            }
            _ => {}
        }
        let mut next = self.nesting;
        next.apply(tag)
            .map_err(|why| Error::invalid(format!("cairn trace: {why}")))?;
        self.nesting = next;
        self.buf.push(tag);
        match ev {
            TraceEvent::DirStart { name, meta } | TraceEvent::FileStart { name, meta } => {
                put_bytes(&mut self.buf, name);
                put_meta(&mut self.buf, meta);
            }
            TraceEvent::Symlink { name, meta, target } => {
                put_bytes(&mut self.buf, name);
                put_meta(&mut self.buf, meta);
                put_bytes(&mut self.buf, target);
            }
            TraceEvent::Chunk(c) => {
                self.buf.extend_from_slice(c.fp.as_bytes());
                put_varint(&mut self.buf, u64::from(c.size));
                if tag == TAG_CHUNK_STORED {
                    put_varint(&mut self.buf, u64::from(c.stored_size));
                }
            }
            TraceEvent::DirEnd | TraceEvent::FileEnd => {}
        }
        self.events += 1;
        if self.buf.len() >= WRITE_BUFFER {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Writes the trailer, flushes, and returns the inner writer. Fails if a
    /// file or directory is still open.
    pub fn finish(mut self) -> Result<W> {
        if self.failed {
            return Err(Error::invalid("cairn trace writer failed earlier"));
        }
        if let Some(why) = self.nesting.open_problem() {
            return Err(Error::invalid(format!("cairn trace cannot end: {why}")));
        }
        self.buf.push(TAG_TRAILER);
        self.buf.extend_from_slice(&self.events.to_le_bytes());
        self.flush_buf()?;
        let crc = self.crc;
        self.out
            .write_all(&crc.to_le_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|e| Error::io("writing cairn trace", e))?;
        Ok(self.out)
    }
}

/// Reads a cairn trace as [`TraceEvent`]s.
pub struct CairnTraceReader<R> {
    src: ByteStream<R>,
    name: String,
    fp_width: usize,
    events: u64,
    nesting: Nesting,
    done: bool,
    /// The message of the error that stopped reading, repeated afterwards.
    failed: Option<String>,
}

impl<R: Read> CairnTraceReader<R> {
    /// Reads and checks the header; `name` names the trace in messages.
    pub fn new(r: R, name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let mut src = ByteStream::new(r, true);
        let mut h = [0u8; CAIRN_TRACE_HEADER_LEN];
        let got = src.read_full(&mut h).map_err(|e| read_error(&name, e))?;
        let corrupt = |d: String| Error::corrupt(name.clone(), d);
        if got < 8 || &h[..8] != CAIRN_TRACE_MAGIC {
            return Err(corrupt(format!(
                "bad magic `{}` at byte 0 (a cairn trace starts with CAIRNTRC)",
                super::show_bytes(&h[..got.min(8)])
            )));
        }
        if got < 12 {
            return Err(corrupt(format!("truncated header at byte {got}")));
        }
        let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        if version == 0 {
            return Err(corrupt("version 0 at byte 8".into()));
        }
        if version > CAIRN_TRACE_VERSION {
            return Err(Error::UnsupportedVersion {
                what: format!("cairn trace {name}"),
                found: version,
                supported: CAIRN_TRACE_VERSION,
            });
        }
        if got < CAIRN_TRACE_HEADER_LEN {
            return Err(corrupt(format!("truncated header at byte {got}")));
        }
        let fp_width = usize::from(h[12]);
        if !(1..=MAX_FINGERPRINT_LEN).contains(&fp_width) {
            return Err(corrupt(format!(
                "fingerprint width {fp_width} at byte 12 is out of range 1..={MAX_FINGERPRINT_LEN}"
            )));
        }
        if h[13..16] != [0, 0, 0] {
            return Err(corrupt("reserved bytes 13..16 are not zero".into()));
        }
        Ok(CairnTraceReader {
            src,
            name,
            fp_width,
            events: 0,
            nesting: Nesting::default(),
            done: false,
            failed: None,
        })
    }

    /// Width in bytes of the trace's chunk fingerprints.
    pub fn fp_width(&self) -> usize {
        self.fp_width
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corrupt(self.name.clone(), detail)
    }

    /// Record number (1-based) of the record being read, for messages.
    fn record_no(&self) -> u64 {
        self.events + 1
    }

    fn read_exact(&mut self, buf: &mut [u8], field: &str) -> Result<()> {
        let got = self
            .src
            .read_full(buf)
            .map_err(|e| read_error(&self.name, e))?;
        if got < buf.len() {
            return Err(self.corrupt(format!(
                "truncated in the {field} of record {} at byte {}",
                self.record_no(),
                self.src.offset()
            )));
        }
        Ok(())
    }

    /// A canonical unsigned LEB128 varint of at most `max`.
    fn varint(&mut self, field: &str, max: u64) -> Result<u64> {
        let start = self.src.offset();
        let mut value: u64 = 0;
        for i in 0..10 {
            let mut b = [0u8; 1];
            self.read_exact(&mut b, field)?;
            let byte = b[0];
            if i == 9 && byte > 1 {
                return Err(self.corrupt(format!("{field} at byte {start}: varint overflows u64")));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                if byte == 0 && i > 0 {
                    return Err(
                        self.corrupt(format!("{field} at byte {start}: non-canonical varint"))
                    );
                }
                if value > max {
                    return Err(self.corrupt(format!(
                        "{field} {value} at byte {start} exceeds the limit {max}"
                    )));
                }
                return Ok(value);
            }
        }
        Err(self.corrupt(format!(
            "{field} at byte {start}: varint longer than 10 bytes"
        )))
    }

    fn bytes(&mut self, field: &str) -> Result<Vec<u8>> {
        let n = self.varint(&format!("{field} length"), MAX_NAME_LEN as u64)? as usize;
        let mut v = vec![0u8; n];
        self.read_exact(&mut v, field)?;
        Ok(v)
    }

    fn meta(&mut self) -> Result<TraceMeta> {
        let mode = self.varint("mode", u64::from(u32::MAX))? as u32;
        let uid = self.varint("uid", u64::from(u32::MAX))? as u32;
        let gid = self.varint("gid", u64::from(u32::MAX))? as u32;
        let mut t = [0u8; 8];
        self.read_exact(&mut t, "mtime")?;
        let size = self.varint("size", u64::MAX)?;
        Ok(TraceMeta {
            mode,
            uid,
            gid,
            mtime_ns: i64::from_le_bytes(t),
            size,
        })
    }

    fn chunk(&mut self, tag: u8) -> Result<TraceChunk> {
        let mut fp = [0u8; MAX_FINGERPRINT_LEN];
        let w = self.fp_width;
        self.read_exact(&mut fp[..w], "fingerprint")?;
        let size = self.varint("chunk size", u64::from(u32::MAX))? as u32;
        let stored_size = if tag == TAG_CHUNK_STORED {
            let at = self.src.offset();
            let s = self.varint("stored size", u64::from(u32::MAX))? as u32;
            if s == size {
                return Err(self.corrupt(format!(
                    "record {} at byte {at}: stored size equals size in a tag 0x05 record \
                     (must be tag 0x04)",
                    self.record_no()
                )));
            }
            s
        } else {
            size
        };
        Ok(TraceChunk {
            fp: Fingerprint::from_slice(&fp[..w]),
            size,
            stored_size,
        })
    }

    fn trailer(&mut self) -> Result<Option<TraceEvent>> {
        let at = self.src.offset() - 1;
        if let Some(why) = self.nesting.open_problem() {
            return Err(self.corrupt(format!("trailer at byte {at}, but {why}")));
        }
        let mut count = [0u8; 8];
        self.read_exact(&mut count, "trailer event count")?;
        let expected_crc = self.src.crc();
        let mut crc = [0u8; 4];
        self.read_exact(&mut crc, "trailer checksum")?;
        let count = u64::from_le_bytes(count);
        if count != self.events {
            return Err(self.corrupt(format!(
                "trailer at byte {at} counts {count} events, {} were read",
                self.events
            )));
        }
        let stored = u32::from_le_bytes(crc);
        if stored != expected_crc {
            return Err(self.corrupt(format!(
                "checksum mismatch: trailer at byte {at} stores {stored:#010x}, bytes hash to \
                 {expected_crc:#010x}"
            )));
        }
        if !self.src.at_eof().map_err(|e| read_error(&self.name, e))? {
            return Err(self.corrupt(format!(
                "trailing bytes after the trailer, at byte {}",
                self.src.offset()
            )));
        }
        self.done = true;
        Ok(None)
    }

    fn step(&mut self) -> Result<Option<TraceEvent>> {
        if self.done {
            return Ok(None);
        }
        let at = self.src.offset();
        let mut t = [0u8; 1];
        let got = self
            .src
            .read_full(&mut t)
            .map_err(|e| read_error(&self.name, e))?;
        if got == 0 {
            return Err(self.corrupt(format!(
                "truncated at byte {at}: no trailer after {} events",
                self.events
            )));
        }
        let tag = t[0];
        if tag == TAG_TRAILER {
            return self.trailer();
        }
        if !(TAG_DIR_START..=TAG_SYMLINK).contains(&tag) {
            return Err(self.corrupt(format!(
                "unknown record tag {tag:#04x} at byte {at} (record {})",
                self.record_no()
            )));
        }
        if let Err(why) = self.nesting.apply(tag) {
            return Err(self.corrupt(format!("record {} at byte {at}: {why}", self.record_no())));
        }
        let ev = match tag {
            TAG_DIR_START => TraceEvent::DirStart {
                name: self.bytes("name")?,
                meta: self.meta()?,
            },
            TAG_DIR_END => TraceEvent::DirEnd,
            TAG_FILE_START => TraceEvent::FileStart {
                name: self.bytes("name")?,
                meta: self.meta()?,
            },
            TAG_FILE_END => TraceEvent::FileEnd,
            TAG_SYMLINK => TraceEvent::Symlink {
                name: self.bytes("name")?,
                meta: self.meta()?,
                target: self.bytes("symlink target")?,
            },
            _ => TraceEvent::Chunk(self.chunk(tag)?),
        };
        self.events += 1;
        Ok(Some(ev))
    }
}

impl<R: Read + Send> TraceSource for CairnTraceReader<R> {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        if let Some(msg) = &self.failed {
            return Err(super::after_error(&self.name, msg));
        }
        let r = self.step();
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
