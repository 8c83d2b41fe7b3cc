//! Destor text traces.
//!
//! The format Destor's trace-driven mode reads (`read_trace_phase` in
//! Destor's `read_trace.c`; `docs/traces.md` § Destor). Per file:
//!
//! ```text
//! file start <n>          n = byte length of the path on the next line
//! <path>
//! <40 hex digits> <size>  one line per chunk: SHA-1 fingerprint, bytes
//! ...
//! file end
//! ```
//!
//! and after the last file a final `stream end` line (the reference traces
//! have no newline after it). `n` is the path's length, not a chunk count:
//! the reference traces say `file start 13` before `dir/file0.dat`. Hex
//! digits may be either case; lines may end in `\r\n`.
//!
//! Mapping: `FileStart { name: path, meta: TraceMeta::default() }` (Destor
//! records no metadata and the file size is not known before its chunks, so
//! `meta.size` is 0 rather than buffering the file), one `Chunk` per line
//! with a 20-byte fingerprint and `stored_size == size`, `FileEnd`.
//!
//! The reader is stricter than Destor (which `assert`s and `atoi`s): every
//! line must have exactly the expected shape, the path line's length must
//! equal `n`, and only empty lines may follow `stream end`. A missing
//! `file end` or `stream end` (a truncated trace) is an error, so a trace cut
//! anywhere before its final line never reads as complete. Errors are
//! `Error::Corrupt { what: "<name> line N (byte offset O)", .. }` where `O`
//! is the offset of the start of line `N` (1-based).

use std::io::Read;

use cairn_core::{Error, Fingerprint, Result, TraceChunk, TraceEvent, TraceMeta, TraceSource};

use super::{read_error, show_bytes, ByteStream, Line, MAX_NAME_LEN};

/// Width of a Destor fingerprint (SHA-1) in bytes.
pub const DESTOR_FP_LEN: usize = 20;

/// Longest chunk line accepted (40 hex + space + a `u32` is 51 bytes).
const MAX_CHUNK_LINE: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Expecting `file start <n>` or `stream end`.
    BetweenFiles,
    /// Expecting a chunk line or `file end`.
    InFile,
    /// `stream end` was read and checked.
    Done,
}

/// Streams a Destor text trace as [`TraceEvent`]s.
pub struct DestorReader<R> {
    src: ByteStream<R>,
    name: String,
    /// Number (1-based) and start offset of the line last read.
    line_no: u64,
    line_start: u64,
    line: Vec<u8>,
    state: State,
    /// The message of the error that stopped reading, repeated afterwards.
    failed: Option<String>,
}

impl<R: Read> DestorReader<R> {
    /// Reads a Destor trace from `r`; `name` names it in messages.
    pub fn new(r: R, name: impl Into<String>) -> Self {
        DestorReader {
            src: ByteStream::new(r, false),
            name: name.into(),
            line_no: 0,
            line_start: 0,
            line: Vec::new(),
            state: State::BetweenFiles,
            failed: None,
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corrupt(
            format!(
                "{} line {} (byte offset {})",
                self.name, self.line_no, self.line_start
            ),
            detail,
        )
    }

    /// Reads the next line of at most `max` bytes into `self.line` (without
    /// `\n` and a final `\r`); a longer line is an error.
    fn next_line(&mut self, max: usize) -> Result<Line> {
        let got = self.next_line_raw(max)?;
        if got == Line::TooLong {
            return Err(self.corrupt(format!(
                "line longer than {max} bytes: `{}`",
                show_bytes(&self.line)
            )));
        }
        Ok(got)
    }

    /// Like [`Self::next_line`] but returns [`Line::TooLong`].
    fn next_line_raw(&mut self, max: usize) -> Result<Line> {
        self.line_no += 1;
        self.line_start = self.src.offset();
        let got = self
            .src
            .read_line(&mut self.line, max)
            .map_err(|e| read_error(&self.name, e))?;
        if matches!(got, Line::Complete | Line::Unterminated) && self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(got)
    }

    fn between_files(&mut self) -> Result<Option<TraceEvent>> {
        if self.next_line(MAX_CHUNK_LINE)? == Line::Eof {
            return Err(self.corrupt("unexpected end of input: missing `stream end`"));
        }
        if self.line == b"stream end" {
            return self.stream_end();
        }
        let Some(count) = self.line.strip_prefix(b"file start ") else {
            return Err(self.corrupt(format!(
                "expected `file start <name length>` or `stream end`, found `{}`",
                show_bytes(&self.line)
            )));
        };
        let name_len = match parse_decimal(count) {
            Some(n) if n <= MAX_NAME_LEN as u64 => n as usize,
            Some(n) => {
                return Err(self.corrupt(format!(
                    "name length {n} exceeds the limit of {MAX_NAME_LEN} bytes"
                )))
            }
            None => {
                return Err(self.corrupt(format!(
                    "`file start` must be followed by the name length in decimal, found `{}`",
                    show_bytes(count)
                )))
            }
        };
        // The path line: exactly `name_len` bytes (plus an optional `\r`),
        // then a newline: more lines must follow.
        match self.next_line_raw(name_len + 1)? {
            Line::Complete => {}
            Line::Eof | Line::Unterminated => {
                return Err(self.corrupt(format!(
                    "unexpected end of input in the file name (announced {name_len} bytes)"
                )))
            }
            Line::TooLong => {
                return Err(self.corrupt(format!(
                    "file name is longer than the {name_len} bytes `file start` announced"
                )))
            }
        }
        if self.line.len() != name_len {
            return Err(self.corrupt(format!(
                "file name is {} bytes but `file start` announced {name_len}",
                self.line.len()
            )));
        }
        self.state = State::InFile;
        Ok(Some(TraceEvent::FileStart {
            name: std::mem::take(&mut self.line),
            meta: TraceMeta::default(),
        }))
    }

    /// After `stream end`: only empty lines, then the end of input.
    fn stream_end(&mut self) -> Result<Option<TraceEvent>> {
        loop {
            match self.next_line(MAX_CHUNK_LINE)? {
                Line::Eof => break,
                _ if self.line.is_empty() => continue,
                _ => {
                    return Err(self.corrupt(format!(
                        "data after `stream end`: `{}`",
                        show_bytes(&self.line)
                    )))
                }
            }
        }
        self.state = State::Done;
        Ok(None)
    }

    fn in_file(&mut self) -> Result<Option<TraceEvent>> {
        if self.next_line(MAX_CHUNK_LINE)? == Line::Eof {
            return Err(self.corrupt("unexpected end of input inside a file: missing `file end`"));
        }
        if self.line == b"file end" {
            self.state = State::BetweenFiles;
            return Ok(Some(TraceEvent::FileEnd));
        }
        let chunk = self.parse_chunk()?;
        Ok(Some(TraceEvent::Chunk(chunk)))
    }

    fn parse_chunk(&self) -> Result<TraceChunk> {
        let line = &self.line[..];
        let shape_error = || {
            self.corrupt(format!(
                "expected `<40 hex digits> <size>` or `file end`, found `{}`",
                show_bytes(line)
            ))
        };
        if line.len() < 2 * DESTOR_FP_LEN + 2 || line[2 * DESTOR_FP_LEN] != b' ' {
            return Err(shape_error());
        }
        let mut fp = [0u8; DESTOR_FP_LEN];
        for (i, pair) in line[..2 * DESTOR_FP_LEN].chunks_exact(2).enumerate() {
            match (hex_digit(pair[0]), hex_digit(pair[1])) {
                (Some(hi), Some(lo)) => fp[i] = hi << 4 | lo,
                _ => return Err(shape_error()),
            }
        }
        let size_text = &line[2 * DESTOR_FP_LEN + 1..];
        let size = match parse_decimal(size_text) {
            Some(s) => u32::try_from(s)
                .map_err(|_| self.corrupt(format!("chunk size {s} does not fit in 32 bits")))?,
            None => {
                return Err(self.corrupt(format!(
                    "chunk size must be a decimal number, found `{}`",
                    show_bytes(size_text)
                )))
            }
        };
        Ok(TraceChunk {
            fp: Fingerprint::from_slice(&fp),
            size,
            stored_size: size,
        })
    }
}

impl<R: Read + Send> TraceSource for DestorReader<R> {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        if let Some(msg) = &self.failed {
            return Err(super::after_error(&self.name, msg));
        }
        let r = match self.state {
            State::BetweenFiles => self.between_files(),
            State::InFile => self.in_file(),
            State::Done => Ok(None),
        };
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A non-empty run of ASCII digits as `u64`; `None` on anything else or on
/// overflow.
fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &c| {
        if c.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(c - b'0'))
        } else {
            None
        }
    })
}
