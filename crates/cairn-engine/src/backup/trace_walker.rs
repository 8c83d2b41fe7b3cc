//! Replays a chunk trace as walker events: the trace stands in for the
//! filesystem and the chunker, and everything after (dedup, packing, recipes,
//! commit) is the same code a real backup runs.
//!
//! cairn's own traces carry directory events and pass through unchanged.
//! External traces (Destor, FSL) name files by whole paths in stream order;
//! they are listed, in that order, in one directory named after the trace,
//! each under `<8-digit index> <path with '/' as '%2F'>` so names are unique,
//! valid and sorted exactly in trace order.

use cairn_core::{TraceChunk, TraceEvent, TraceMeta, TraceSource};

use super::events::{EntryMeta, EntryState, Event, EventSink};

/// Chunks per `Event::Fingerprinted` batch.
const BATCH_CHUNKS: usize = 4096;

fn meta(m: &TraceMeta) -> EntryMeta {
    EntryMeta {
        mode: if m.mode == 0 { 0o100644 } else { m.mode },
        uid: m.uid,
        gid: m.gid,
        mtime_ns: m.mtime_ns,
        size: m.size,
        ..EntryMeta::default()
    }
}

fn flat_name(index: u64, name: &[u8]) -> Vec<u8> {
    let mut out = format!("{index:08} ").into_bytes();
    for &b in name {
        match b {
            b'/' => out.extend_from_slice(b"%2F"),
            0 => out.extend_from_slice(b"%00"),
            b'%' => out.extend_from_slice(b"%25"),
            _ => out.push(b),
        }
    }
    out
}

/// Walks `src`; a malformed trace ends the walk with the error in `errors`
/// (the backup then fails: a trace is all-or-nothing input).
pub(crate) fn walk_trace(
    src: &mut dyn TraceSource,
    name: &str,
    flat: bool,
    tx: &mut EventSink,
    errors: &mut Vec<String>,
) -> Result<(), ()> {
    let mut send = |ev: Event| tx.send(ev);
    let dir_meta = EntryMeta {
        mode: 0o040755,
        uid: 0,
        gid: 0,
        ..EntryMeta::default()
    };
    if flat {
        send(Event::DirStart {
            name: name.as_bytes().to_vec(),
            meta: dir_meta,
            state: EntryState::New,
            parent_entries: 0,
        })?;
    }
    let mut batch: Vec<TraceChunk> = Vec::with_capacity(BATCH_CHUNKS);
    let mut files = 0u64;
    let mut in_file = false;
    loop {
        let ev = match src.next_event() {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => {
                errors.push(format!("trace {}: {e}", src.describe()));
                return Err(());
            }
        };
        match ev {
            TraceEvent::Chunk(c) => {
                if !in_file {
                    errors.push(format!("trace {}: chunk outside a file", src.describe()));
                    return Err(());
                }
                batch.push(c);
                if batch.len() == BATCH_CHUNKS {
                    send(Event::Fingerprinted(std::mem::take(&mut batch)))?;
                    batch.reserve(BATCH_CHUNKS);
                }
            }
            TraceEvent::FileStart { name, meta: m } => {
                files += 1;
                in_file = true;
                let name = if flat { flat_name(files, &name) } else { name };
                send(Event::FileStart {
                    name,
                    meta: meta(&m),
                    state: EntryState::New,
                })?;
            }
            TraceEvent::FileEnd => {
                if !batch.is_empty() {
                    send(Event::Fingerprinted(std::mem::take(&mut batch)))?;
                }
                in_file = false;
                send(Event::FileEnd { ok: true })?;
            }
            TraceEvent::DirStart { name, meta: m } => send(Event::DirStart {
                name,
                meta: meta(&m),
                state: EntryState::New,
                parent_entries: 0,
            })?,
            TraceEvent::DirEnd => send(Event::DirEnd)?,
            TraceEvent::Symlink {
                name,
                meta: m,
                target,
            } => {
                let name = if flat {
                    files += 1;
                    flat_name(files, &name)
                } else {
                    name
                };
                send(Event::Symlink {
                    name,
                    meta: meta(&m),
                    target,
                })?
            }
        }
    }
    if in_file {
        if !batch.is_empty() {
            send(Event::Fingerprinted(std::mem::take(&mut batch)))?;
        }
        send(Event::FileEnd { ok: true })?;
    }
    if flat {
        send(Event::DirEnd)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_names_are_unique_valid_and_ordered() {
        let a = flat_name(1, b"/home/u/x");
        let b = flat_name(2, b"a%b\0");
        assert_eq!(a, b"00000001 %2Fhome%2Fu%2Fx");
        assert_eq!(b, b"00000002 a%25b%00");
        assert!(a < b);
        assert!(cairn_format::dir::name_error(&a).is_none());
    }
}
