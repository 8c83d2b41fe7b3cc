//! Builds a stream's tree from its walker's events: file content through
//! the stream (hash, dedup, pack) into Merkle recipes (`tree_builder.rs`,
//! `003_ea5fccc485a97c5d.txt` §2), and directory listings, stored as blobs
//! or inline in their parent's listing (FORMAT.md "Directory listing").

use cairn_chunk::ChunkBatch;
use cairn_core::counters::bump;
use cairn_core::{ChunkKind, Result};
use cairn_format::dir::{encode_dir, DirEntry, EntryKind, MAX_INLINE_DEPTH};

use super::events::{ContentLog, EntryLog, EntryMeta, EntryReport, EntryState, Event};
use super::stream::Stream;
use super::tree_builder::TreeBuilder;
use super::TreeCounts;

struct DirFrame {
    name: Vec<u8>,
    meta: EntryMeta,
    entries: Vec<DirEntry>,
    /// How deep the inline listings among `entries` nest (0: none).
    inline_height: usize,
    /// For `backup -v`: the walker's state (`Unmodified`: same metadata
    /// as in the parent), the parent listing's entry count, whether every
    /// entry so far was unmodified, and the stream's added bytes when the
    /// directory started.
    state: EntryState,
    parent_entries: usize,
    all_unmodified: bool,
    added_at_start: u64,
}

impl DirFrame {
    /// Its state against the parent once all its entries are in: a
    /// directory is unmodified when its metadata, its entry count and
    /// every entry are.
    fn final_state(&self) -> EntryState {
        match self.state {
            EntryState::Unmodified
                if self.all_unmodified && self.entries.len() == self.parent_entries =>
            {
                EntryState::Unmodified
            }
            EntryState::New => EntryState::New,
            _ => EntryState::Changed,
        }
    }
}

/// The snapshot path of entry `name` under the open directories `stack`.
fn path_of(stack: &[DirFrame], name: &[u8]) -> String {
    let mut p = String::new();
    for f in stack {
        p.push_str(&crate::names::name_text(&f.name));
        p.push('/');
    }
    p.push_str(&crate::names::name_text(name));
    p
}

/// Notes the state of an entry placed in the innermost open directory.
fn note(stack: &mut [DirFrame], state: EntryState) {
    if let Some(f) = stack.last_mut() {
        f.all_unmodified &= state == EntryState::Unmodified;
    }
}

/// A directory whose listing (inline subtrees included) encodes in at most
/// this many bytes is stored inline in its parent's listing instead of as a
/// blob of its own (FORMAT.md "Directory listing"). A tree of many small
/// directories thus becomes a few listing blobs, cut into content-defined
/// meta chunks like file content, so an unchanged region still deduplicates
/// while the per-directory chunk, descriptor and index entry are gone. Every
/// listing blob but the root holds more than this many bytes.
pub const INLINE_MAX_BYTES: usize = 64 * 1024;

struct OpenFile {
    name: Vec<u8>,
    meta: EntryMeta,
    tree: TreeBuilder,
    bytes: u64,
    state: EntryState,
    /// Data chunks read, and the stream's added bytes when it started.
    chunks: u64,
    added_at_start: u64,
}

pub fn entry(name: Vec<u8>, kind: EntryKind, m: &EntryMeta) -> DirEntry {
    DirEntry {
        name,
        kind,
        mode: m.mode,
        uid: m.uid,
        gid: m.gid,
        mtime_ns: m.mtime_ns,
        ctime_ns: m.ctime_ns,
        inode: m.inode,
        size: 0,
        target: None,
        content: None,
        children: None,
        extras: m.extras.clone(),
    }
}

/// Consumes a walker's events, storing content and building listings.
/// Returns the stream's top-level entry (`None` if it was skipped).
pub(super) fn consume(
    stream: &mut Stream,
    counts: &TreeCounts,
    rx: &crate::pipe::Receiver<Vec<Event>>,
    recycle: &crate::pipe::Sender<ChunkBatch>,
    log: Option<&EntryLog>,
    content_log: Option<&ContentLog>,
) -> Result<Option<DirEntry>> {
    let mut stack: Vec<DirFrame> = Vec::new();
    let mut file: Option<OpenFile> = None;
    let mut top: Option<DirEntry> = None;
    let mut fps = Vec::new();
    let mut links = crate::file_kinds::LinkGroups::default();
    let mut place = |e: DirEntry, stack: &mut Vec<DirFrame>| match stack.last_mut() {
        Some(f) => f.entries.push(e),
        None => top = Some(e),
    };
    for ev in rx.iter().flatten() {
        match ev {
            Event::DirStart {
                name,
                meta,
                state,
                parent_entries,
            } => stack.push(DirFrame {
                name,
                meta,
                entries: Vec::new(),
                inline_height: 0,
                state,
                parent_entries,
                all_unmodified: true,
                added_at_start: stream.added_bytes(),
            }),
            Event::DirEnd => {
                let f = stack.pop().expect("DirEnd matches a DirStart");
                let state = f.final_state();
                let report = log.map(|_| EntryReport {
                    path: path_of(&stack, &f.name) + "/",
                    dir: true,
                    state,
                    size: 0,
                    chunks: 0,
                    added_bytes: 0,
                });
                let added_at_start = f.added_at_start;
                let mut e = entry(f.name, EntryKind::Dir, &f.meta);
                // Encoded once: stored as a blob, or measured for inlining.
                // Either way the directory's size is its listing's bytes
                // on its own (FORMAT.md "Directory listing").
                let mut listing = Vec::new();
                encode_dir(&f.entries, &mut listing)?;
                e.size = listing.len() as u64;
                if listing.len() <= INLINE_MAX_BYTES && f.inline_height < MAX_INLINE_DEPTH {
                    e.children = Some(f.entries);
                    if let Some(parent) = stack.last_mut() {
                        parent.inline_height = parent.inline_height.max(f.inline_height + 1);
                    }
                } else {
                    e.content = stream.store_blob(&listing)?;
                }
                bump(&counts.dirs, 1);
                if let (Some(log), Some(mut r)) = (log, report) {
                    r.size = e.size;
                    r.added_bytes = stream.added_bytes() - added_at_start;
                    log(&r);
                }
                note(&mut stack, state);
                place(e, &mut stack);
            }
            Event::FileStart { name, meta, state } => {
                file = Some(OpenFile {
                    name,
                    meta,
                    tree: TreeBuilder::new(stream.tree_config()),
                    bytes: 0,
                    state,
                    chunks: 0,
                    added_at_start: stream.added_bytes(),
                })
            }
            Event::Fingerprinted(chunks) => {
                let f = file.as_mut().expect("chunks inside a file");
                fps.clear();
                fps.extend_from_slice(stream.store_fingerprinted(ChunkKind::Data, 0, &chunks)?);
                let mut bytes = 0;
                for (fp, c) in fps.iter().zip(&chunks) {
                    f.tree.push_leaf(*fp, c.size as u64, stream)?;
                    bytes += c.size as u64;
                }
                f.bytes += bytes;
                f.chunks += chunks.len() as u64;
                if let Some(told) = content_log {
                    told(bytes);
                }
            }
            Event::StoredChunks(chunks) => {
                let f = file.as_mut().expect("chunks inside a file");
                for c in &chunks {
                    f.tree.push_leaf(c.fp, c.size, stream)?;
                    f.bytes += c.size;
                }
                f.chunks += chunks.len() as u64;
            }
            Event::Data(batch) => {
                let f = file.as_mut().expect("Data inside a file");
                let chunks: Vec<&[u8]> = batch.iter().collect();
                fps.clear();
                fps.extend_from_slice(stream.store_chunks(ChunkKind::Data, 0, &chunks)?);
                let mut bytes = 0;
                for (fp, c) in fps.iter().zip(&chunks) {
                    f.tree.push_leaf(*fp, c.len() as u64, stream)?;
                    bytes += c.len() as u64;
                }
                f.bytes += bytes;
                f.chunks += chunks.len() as u64;
                drop(chunks);
                let _ = recycle.try_send(batch);
                if let Some(told) = content_log {
                    told(bytes);
                }
            }
            Event::FileEnd { ok } => {
                let f = file.take().expect("FileEnd matches a FileStart");
                let content = f.tree.finish(stream)?;
                if ok {
                    let mut e = entry(f.name, EntryKind::File, &f.meta);
                    // A sparse file's content is its data extents only.
                    e.size = match e.extras.extents {
                        Some(_) => f.meta.size,
                        None => f.bytes,
                    };
                    e.content = content;
                    bump(&counts.files, 1);
                    bump(&counts.logical_bytes, e.size);
                    links.first(&e);
                    if let Some(log) = log {
                        log(&EntryReport {
                            path: path_of(&stack, &e.name),
                            dir: false,
                            state: f.state,
                            size: e.size,
                            chunks: f.chunks,
                            added_bytes: stream.added_bytes() - f.added_at_start,
                        });
                    }
                    note(&mut stack, f.state);
                    place(e, &mut stack);
                } else {
                    // Dropped: its directory differs from the parent's.
                    note(&mut stack, EntryState::Changed);
                }
            }
            Event::Linked(mut e, state) => {
                links.fill(&mut e)?;
                bump(&counts.files, 1);
                bump(&counts.logical_bytes, e.size);
                if let Some(log) = log {
                    log(&EntryReport {
                        path: path_of(&stack, &e.name),
                        dir: false,
                        state,
                        size: e.size,
                        chunks: 0,
                        added_bytes: 0,
                    });
                }
                note(&mut stack, state);
                place(e, &mut stack);
            }
            Event::Kept(e) => {
                links.first(&e);
                match e.kind {
                    EntryKind::File => {
                        bump(&counts.files, 1);
                        bump(&counts.logical_bytes, e.size);
                        if let Some(log) = log {
                            log(&EntryReport {
                                path: path_of(&stack, &e.name),
                                dir: false,
                                state: EntryState::Unmodified,
                                size: e.size,
                                chunks: 0,
                                added_bytes: 0,
                            });
                        }
                    }
                    EntryKind::Symlink => bump(&counts.symlinks, 1),
                    EntryKind::Dir => {
                        if let Some(log) = log {
                            log(&EntryReport {
                                path: path_of(&stack, &e.name) + "/",
                                dir: true,
                                state: EntryState::Unmodified,
                                size: e.size,
                                chunks: 0,
                                added_bytes: 0,
                            });
                        }
                    }
                    _ => {}
                }
                place(e, &mut stack);
            }
            Event::Symlink { name, meta, target } => {
                let mut e = entry(name, EntryKind::Symlink, &meta);
                e.size = target.len() as u64;
                e.target = Some(target);
                bump(&counts.symlinks, 1);
                place(e, &mut stack);
            }
        }
    }
    Ok(top)
}
