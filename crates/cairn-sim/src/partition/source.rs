//! Filling a [`Dataset`] from trace events: any trace the simulator reads
//! (`crate::trace::open_trace`: Destor, FSL, cairn) or a synthetic
//! [`Workload`]'s generations.
//!
//! Paths: cairn traces nest `DirStart`/`DirEnd` around one-component file
//! names; Destor and FSL traces put the whole recorded path in `FileStart`.
//! Both become `dir/.../name`. With several input streams (trace files,
//! generations) every path is prefixed with its stream's name, so the
//! streams are disjoint sub-trees; with one there is no prefix.

use std::path::PathBuf;

use cairn_core::{Error, Result, TraceEvent, TraceSource};

use super::Dataset;
use crate::workload::Workload;

/// Reads every event of `src` into `ds` as files of `stream`, each path
/// prefixed with `prefix` (none if empty). Returns the chunks read.
///
/// Malformed nesting (a chunk outside a file, a file inside a file, a
/// `DirEnd` or `FileEnd` without its start) is an error naming the input.
pub fn add_source(
    ds: &mut Dataset,
    stream: u32,
    prefix: &str,
    src: &mut dyn TraceSource,
) -> Result<u64> {
    let mut dirs: Vec<String> = Vec::new();
    if !prefix.is_empty() {
        dirs.push(prefix.to_string());
    }
    let base = dirs.len();
    let mut file: Option<u32> = None;
    let mut chunks = 0u64;
    let bad =
        |src: &dyn TraceSource, what: &str| Error::invalid(format!("{}: {what}", src.describe()));
    while let Some(ev) = src.next_event()? {
        match ev {
            TraceEvent::DirStart { name, .. } => {
                if file.is_some() {
                    return Err(bad(src, "directory starts inside a file"));
                }
                dirs.push(String::from_utf8_lossy(&name).into_owned());
            }
            TraceEvent::DirEnd => {
                if file.is_some() || dirs.len() <= base {
                    return Err(bad(src, "directory end without a directory start"));
                }
                dirs.pop();
            }
            TraceEvent::FileStart { name, .. } => {
                if file.is_some() {
                    return Err(bad(src, "file starts inside a file"));
                }
                let name = String::from_utf8_lossy(&name);
                let path = if dirs.is_empty() {
                    name.into_owned()
                } else {
                    format!("{}/{name}", dirs.join("/"))
                };
                file = Some(ds.add_file(stream, &path)?);
            }
            TraceEvent::Chunk(c) => {
                let Some(f) = file else {
                    return Err(bad(src, "chunk outside a file"));
                };
                ds.add_chunk(f, c)?;
                chunks += 1;
            }
            TraceEvent::FileEnd => {
                if file.take().is_none() {
                    return Err(bad(src, "file end without a file start"));
                }
            }
            TraceEvent::Symlink { .. } => {}
        }
    }
    Ok(chunks)
}

/// Stream names for `names`: unique (a repeated name gets `#i`).
fn unique_names(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            if seen.insert(n.clone()) {
                n
            } else {
                let m = format!("{n}#{i}");
                seen.insert(m.clone());
                m
            }
        })
        .collect()
}

/// One dataset of the traces at `paths`, one input stream per file (named
/// after the file), format detected from content.
pub fn load_traces(paths: &[PathBuf]) -> Result<Dataset> {
    let names = unique_names(
        paths
            .iter()
            .map(|p| crate::trace::display_name(p))
            .collect(),
    );
    let mut ds = Dataset::new();
    let several = paths.len() > 1;
    for (path, name) in paths.iter().zip(names) {
        let mut src = crate::trace::open_trace(path, None)?;
        let stream = ds.add_stream(name.clone())?;
        add_source(&mut ds, stream, if several { &name } else { "" }, &mut *src)?;
    }
    Ok(ds)
}

/// One dataset of every generation of `w`, one input stream per generation
/// (`gen-000`, ...).
pub fn load_workload(w: &dyn Workload) -> Result<Dataset> {
    let mut ds = Dataset::new();
    let several = w.generations() > 1;
    for g in 0..w.generations() {
        let name = format!("gen-{g:03}");
        let stream = ds.add_stream(name.clone())?;
        let mut src = w.generation(g);
        add_source(&mut ds, stream, if several { &name } else { "" }, &mut *src)?;
    }
    Ok(ds)
}
