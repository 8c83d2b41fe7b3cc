//! Chunk-trace readers: pre-chunked backup streams as [`TraceEvent`]s.
//!
//! Three formats feed the same [`TraceSource`] trait (`docs/traces.md` has
//! them byte by byte):
//!
//! - [`destor`]: Destor's text traces (`file start <n>` / path / `<sha1 hex>
//!   <size>` lines / `file end` / `stream end`);
//! - [`fsl`]: FSL hashfiles of versions 5, 6 and 7 (the format of the FSL
//!   Homes/MacOS snapshot traces, written by `libhashfile`);
//! - [`cairn`]: cairn's own versioned, checksummed binary trace, which also
//!   carries directories, symlinks and metadata, with a writer.
//!
//! [`detect`] tells the formats apart from their first bytes and opens a
//! trace file as a boxed [`TraceSource`].
//!
//! Every reader streams: it holds one line or one record at a time (names are
//! capped at [`MAX_NAME_LEN`] bytes), never the whole input, and never panics
//! on any input. Malformed input is `Error::Corrupt` naming the input and the
//! byte offset of the fault; an I/O failure is `Error::Io`.
//!
//! [`TraceEvent`]: cairn_core::TraceEvent
//! [`TraceSource`]: cairn_core::TraceSource

pub mod cairn;
pub mod destor;
pub mod detect;
pub mod fsl;
pub mod pipeline;

#[cfg(test)]
mod tests;

pub use cairn::{CairnTraceReader, CairnTraceWriter, CAIRN_TRACE_MAGIC, CAIRN_TRACE_VERSION};
pub use destor::DestorReader;
pub use detect::{detect, open_reader, open_trace, open_trace_as, TraceFormat};
pub use fsl::{FslChunking, FslHeader, FslReader};
pub use pipeline::Pipelined;

use std::io::{self, BufRead, BufReader, Read};

use cairn_core::Error;

/// The longest name (path, path component or symlink target) a trace may
/// hold. Longer lengths are reported as corruption instead of being
/// allocated; FSL's own limit is 4096 bytes.
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Buffer size of the readers' internal `BufReader`.
const READ_BUFFER: usize = 64 * 1024;

/// How a bounded line read ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// No bytes before the end of input.
    Eof,
    /// A line ended by `\n` (not included in the buffer).
    Complete,
    /// Bytes up to the end of input without a final `\n`.
    Unterminated,
    /// More than the allowed bytes without a `\n`; the buffer holds the
    /// first ones, the rest of the line is unread.
    TooLong,
}

/// A buffered byte source that counts the bytes consumed (so errors can name
/// offsets) and optionally keeps a running CRC-32C of them.
pub(crate) struct ByteStream<R> {
    inner: BufReader<R>,
    offset: u64,
    crc: Option<u32>,
}

impl<R: Read> ByteStream<R> {
    pub(crate) fn new(r: R, with_crc: bool) -> Self {
        ByteStream {
            inner: BufReader::with_capacity(READ_BUFFER, r),
            offset: 0,
            crc: with_crc.then_some(0),
        }
    }

    /// Bytes consumed so far (= the offset of the next byte).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// CRC-32C of the bytes consumed so far (0 if not tracked).
    pub(crate) fn crc(&self) -> u32 {
        self.crc.unwrap_or(0)
    }

    /// Records `bytes` (just taken out of the buffer) as consumed.
    fn account(&mut self, bytes: &[u8]) {
        if let Some(crc) = self.crc.as_mut() {
            *crc = crc32c::crc32c_append(*crc, bytes);
        }
        self.offset += bytes.len() as u64;
    }

    fn fill(&mut self) -> io::Result<&[u8]> {
        loop {
            match self.inner.fill_buf() {
                Ok(_) => return self.inner.fill_buf(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads until `buf` is full or the input ends; returns the bytes read.
    pub(crate) fn read_full(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let avail = self.fill()?;
            if avail.is_empty() {
                break;
            }
            let n = avail.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&avail[..n]);
            self.inner.consume(n);
            self.account(&buf[done..done + n]);
            done += n;
        }
        Ok(done)
    }

    /// True if no byte remains.
    pub(crate) fn at_eof(&mut self) -> io::Result<bool> {
        Ok(self.fill()?.is_empty())
    }

    /// Reads one `\n`-terminated line of at most `max` bytes into `out`
    /// (cleared first; the `\n` is consumed but not stored).
    pub(crate) fn read_line(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<Line> {
        out.clear();
        let mut any = false;
        loop {
            let avail = self.fill()?;
            if avail.is_empty() {
                return Ok(if any { Line::Unterminated } else { Line::Eof });
            }
            any = true;
            match avail.iter().position(|&b| b == b'\n') {
                Some(i) if out.len() + i <= max => {
                    let start = out.len();
                    out.extend_from_slice(&avail[..i]);
                    self.inner.consume(i + 1);
                    self.account(&out[start..]);
                    self.account(b"\n");
                    return Ok(Line::Complete);
                }
                found => {
                    let start = out.len();
                    let take = found.unwrap_or(avail.len()).min(max - start);
                    out.extend_from_slice(&avail[..take]);
                    self.inner.consume(take);
                    self.account(&out[start..]);
                    if out.len() >= max {
                        return Ok(Line::TooLong);
                    }
                }
            }
        }
    }
}

/// `Error::Io` for a failed read of `name`.
pub(crate) fn read_error(name: &str, e: io::Error) -> Error {
    Error::io(format!("reading trace {name}"), e)
}

/// The error every call after a reader's first error returns: a stream that
/// failed never resumes, and never ends as if complete.
pub(crate) fn after_error(name: &str, first: &str) -> Error {
    Error::corrupt(
        name,
        format!("reading stopped at an earlier error ({first})"),
    )
}

/// Renders bytes for a one-line message: printable ASCII as is, the rest
/// escaped, at most 60 bytes shown.
pub(crate) fn show_bytes(b: &[u8]) -> String {
    let mut s: String = b
        .iter()
        .take(60)
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect();
    if b.len() > 60 {
        s.push_str("...");
    }
    s
}

/// A short name for messages: the last path component of `path`.
pub(crate) fn display_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
