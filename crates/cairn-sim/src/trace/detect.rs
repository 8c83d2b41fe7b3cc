//! Trace format detection and opening a trace file by path.
//!
//! [`detect`] looks only at content: the cairn magic `CAIRNTRC`, the FSL
//! magic `0xDEADDEAD` (little-endian), or a Destor trace's first line
//! (`file start ` or, for a trace of no files, `stream end`). File names and
//! extensions are never consulted. [`open_trace`] opens a file, detects its
//! format unless one is given, and returns the matching reader boxed.

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

/// Opens the trace at `path` in `format`, or in the format [`detect`]
/// finds. The reader is named after the file name in its messages.
pub fn open_trace(path: &Path, format: Option<TraceFormat>) -> Result<Box<dyn TraceSource>> {
    let mut file = File::open(path)
        .map_err(|e| Error::io(format!("cannot open trace {}", path.display()), e))?;
    let mut head = Vec::with_capacity(DETECT_LEN);
    (&mut file)
        .take(DETECT_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(format!("cannot read trace {}", path.display()), e))?;
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
    open_reader(
        Cursor::new(head).chain(file),
        super::display_name(path),
        format,
    )
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
