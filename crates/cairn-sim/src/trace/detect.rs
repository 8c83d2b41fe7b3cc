//! Trace format detection and opening a trace file by path.
//!
//! [`detect`] looks only at content: the cairn magic `CAIRNTRC`, the FSL
//! magic `0xDEADDEAD` (little-endian), or a Destor trace's first line
//! (`file start ` or, for a trace of no files, `stream end`). File names and
//! extensions are never consulted. [`open_trace`] opens a file, detects its
//! format unless one is given, and returns the matching reader boxed.
//!
//! A trace compressed whole with zstd or gzip (told by their magic
//! numbers) is read through a decompressor, detected and decoded as the
//! plain trace it holds: traces are large and kept compressed (issue 35).

use std::fmt;
use std::fs::File;
use std::io::{Cursor, Read};
use std::path::Path;
use std::str::FromStr;

use cairn_core::{Error, Result, TraceSource};

use super::cairn::{CairnTraceReader, CAIRN_TRACE_MAGIC};
use super::destor::DestorReader;
use super::fsl::{FslReader, FSL_MAGIC};

/// Bytes [`detect`] needs to decide (fewer are fine at the end of a file).
pub const DETECT_LEN: usize = 16;

/// The trace formats cairn reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Destor's text trace.
    Destor,
    /// FSL hashfile, versions 5..7.
    Fsl,
    /// cairn's own binary trace.
    Cairn,
}

impl TraceFormat {
    /// The names [`FromStr`] accepts (any case).
    pub const NAMES: [&'static str; 3] = ["destor", "fsl", "cairn"];

    /// The lowercase name used on command lines and in messages.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Destor => "destor",
            TraceFormat::Fsl => "fsl",
            TraceFormat::Cairn => "cairn",
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "destor" => Ok(TraceFormat::Destor),
            "fsl" => Ok(TraceFormat::Fsl),
            "cairn" => Ok(TraceFormat::Cairn),
            _ => Err(Error::invalid(format!(
                "unknown trace format `{s}` (expected destor, fsl or cairn)"
            ))),
        }
    }
}

/// The format of a trace whose first bytes are `first_bytes` (at least
/// [`DETECT_LEN`] of them unless the input is shorter), or `None`.
pub fn detect(first_bytes: &[u8]) -> Option<TraceFormat> {
    if first_bytes.starts_with(CAIRN_TRACE_MAGIC) {
        Some(TraceFormat::Cairn)
    } else if first_bytes.starts_with(&FSL_MAGIC.to_le_bytes()) {
        Some(TraceFormat::Fsl)
    } else if first_bytes.starts_with(b"file start ") || first_bytes.starts_with(b"stream end") {
        Some(TraceFormat::Destor)
    } else {
        None
    }
}

/// zstd's frame magic (RFC 8878 §3.1.1), little-endian on disk.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// gzip's member magic (RFC 1952 §2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The trace file at `path`, decompressed when it is a zstd or gzip
/// stream, and its first [`DETECT_LEN`] plain bytes (also still at the
/// front of the returned reader).
fn open_plain(path: &Path) -> Result<(Box<dyn Read + Send>, Vec<u8>)> {
    let ctx = |what: &str| format!("cannot {what} trace {}", path.display());
    let mut file = File::open(path).map_err(|e| Error::io(ctx("open"), e))?;
    let head = read_head(&mut file).map_err(|e| Error::io(ctx("read"), e))?;
    let raw = Cursor::new(head.clone()).chain(file);
    let mut plain: Box<dyn Read + Send> = if head.starts_with(&ZSTD_MAGIC) {
        Box::new(zstd::stream::read::Decoder::new(raw).map_err(|e| Error::io(ctx("read"), e))?)
    } else if head.starts_with(&GZIP_MAGIC) {
        Box::new(flate2::read::MultiGzDecoder::new(raw))
    } else {
        return Ok((Box::new(raw), head));
    };
    let head = read_head(&mut plain).map_err(|e| Error::io(ctx("decompress"), e))?;
    Ok((Box::new(Cursor::new(head.clone()).chain(plain)), head))
}

fn read_head(r: &mut dyn Read) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(DETECT_LEN);
    r.take(DETECT_LEN as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Opens the trace at `path` in `format`, or in the format [`detect`]
/// finds. The reader is named after the file name in its messages.
pub fn open_trace(path: &Path, format: Option<TraceFormat>) -> Result<Box<dyn TraceSource>> {
    open_trace_as(path, format).map(|(src, _)| src)
}

/// [`open_trace`], and the format it read the trace in (the one given, or
/// the one detected), so a caller that needs the format opens the file
/// (and starts its decompressor) once.
pub fn open_trace_as(
    path: &Path,
    format: Option<TraceFormat>,
) -> Result<(Box<dyn TraceSource>, TraceFormat)> {
    let (plain, head) = open_plain(path)?;
    let format = match format.or_else(|| detect(&head)) {
        Some(f) => f,
        None => {
            return Err(Error::invalid(format!(
                "{}: unknown trace format (not a Destor trace, an FSL hashfile or a cairn \
                 trace); name the format explicitly",
                path.display()
            )))
        }
    };
    Ok((
        open_reader(plain, super::display_name(path), format)?,
        format,
    ))
}

/// A reader of `format` over `r`; `name` names the input in messages.
pub fn open_reader<R: Read + Send + 'static>(
    r: R,
    name: impl Into<String>,
    format: TraceFormat,
) -> Result<Box<dyn TraceSource>> {
    Ok(match format {
        TraceFormat::Destor => Box::new(DestorReader::new(r, name)),
        TraceFormat::Fsl => Box::new(FslReader::new(r, name)?),
        TraceFormat::Cairn => Box::new(CairnTraceReader::new(r, name)?),
    })
}
