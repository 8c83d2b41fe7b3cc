//! Cutting one input (a trace file, a workload generation) into the backup
//! streams the writers are dealt.
//!
//! The input is read as `crate::partition::source` reads it (paths
//! `dir/.../name`, the same nesting checks), then its files are grouped by
//! [`Unit`]:
//!
//! * [`Unit::Top`] (default): the top-level entry of the path, its first
//!   component: a DDFS stream (`stream-NNN`, a file, or a directory of parts),
//!   a lineage (`lineage-NNNN/`), a top-level directory or file of a recorded
//!   tree. External traces (Destor, FSL) record whole paths; their first
//!   component (`home`, `dir`) usually makes the whole input one stream.
//! * [`Unit::File`]: every file.
//! * [`Unit::Input`]: the whole input (one host's snapshot, one generation).
//!
//! Streams come in the order their first file appears; a stream's chunks in
//! input order. A unit holding no chunk (an empty file or directory) is no
//! stream: it would only take a writer's turn.

use cairn_core::{Error, Result, TraceChunk, TraceSource};

use crate::partition::{source::add_source, Dataset};

/// What one backup stream is (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Top,
    File,
    Input,
}

impl Unit {
    pub const ALL: [Unit; 3] = [Unit::Top, Unit::File, Unit::Input];
    /// The names [`std::str::FromStr`] accepts, in the order of [`Self::ALL`].
    pub const NAMES: [&'static str; 3] = ["top", "file", "input"];

    pub fn name(self) -> &'static str {
        match self {
            Unit::Top => "top",
            Unit::File => "file",
            Unit::Input => "input",
        }
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Unit {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown writer unit {s:?} (accepted: {})",
                    Unit::NAMES.join(", ")
                ))
            })
    }
}

/// One backup stream: `input/key` and its chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    pub name: String,
    pub chunks: Vec<TraceChunk>,
}

/// Reads `src` (named `input`) and cuts it into streams by `unit`.
pub fn split_streams(src: &mut dyn TraceSource, input: &str, unit: Unit) -> Result<Vec<Stream>> {
    let mut ds = Dataset::new();
    let s = ds.add_stream(input)?;
    add_source(&mut ds, s, "", src)?;
    let key = |path: &str, file: usize| -> String {
        match unit {
            Unit::Top => path.split('/').next().unwrap_or("").to_string(),
            Unit::File => format!("{file}:{path}"),
            Unit::Input => String::new(),
        }
    };
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    let mut of_file = Vec::with_capacity(ds.files().len());
    let mut out: Vec<Stream> = Vec::new();
    for (i, f) in ds.files().iter().enumerate() {
        let k = key(&f.path, i);
        let next = out.len();
        let at = *index.entry(k).or_insert_with_key(|k| {
            let name = match unit {
                Unit::Top => format!("{input}/{k}"),
                Unit::File => format!("{input}/{}", f.path),
                Unit::Input => input.to_string(),
            };
            out.push(Stream {
                name,
                chunks: Vec::new(),
            });
            next
        });
        of_file.push(at);
    }
    for c in ds.chunks() {
        out[of_file[c.file as usize]].chunks.push(TraceChunk {
            fp: c.fp,
            size: c.size,
            stored_size: c.stored_size,
        });
    }
    out.retain(|s| !s.chunks.is_empty());
    Ok(out)
}
