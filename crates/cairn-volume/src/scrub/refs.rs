//! What the stream maps reference: a count per chunk (which chunks get a
//! second copy), and, once the scrub knows which chunks are lost, the
//! files and byte ranges that need them (docs/volume.md, "Scrub").
//!
//! A chunk counts once for every place a stream map needs it: each
//! occurrence in an entry's recipe whose byte range still belongs to the
//! file from the stream map (below `valid`, outside the recalled ranges).
//! Recipe tree nodes count like data chunks: a file needs them to reach its
//! data. Memory: one entry per distinct referenced chunk, 64 bytes (a
//! 33-byte fingerprint and a 24-byte [`Referenced`], padded) plus the hash
//! table's slack (one control byte, an eighth left free, up to twice as
//! many slots just after it grows): 73 to 146 bytes a chunk.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use cairn_core::{ContainerId, FpMap, FpSet, Result};
use cairn_engine::chunk_repair::{RecipeChunk, RecipeWalker};

use super::Pace;
use crate::ranges::RangeSet;
use crate::scheduler::Cancelled;
use crate::state::Entry;
use crate::volume::Volume;
use crate::walk;

/// What the scrub learnt of one referenced chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// Not met in any readable container (yet).
    Not,
    /// Sound, in this container of the store.
    Sound(ContainerId),
    /// Met damaged (and not met sound elsewhere).
    Damaged,
}

/// A referenced chunk: how many times the stream maps need it, and what
/// the scan of the store found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Referenced {
    pub count: u32,
    pub seen: Seen,
}

/// The references of every stream map, and the inodes whose recipe could
/// not be walked to the end (a tree node unreadable).
pub(super) struct References {
    pub chunks: FpMap<Referenced>,
    pub unwalkable: HashSet<u64>,
}

/// The byte ranges of `entry`'s file that come from its stream map.
fn live_ranges(entry: &Entry) -> Vec<(u64, u64)> {
    entry.recalled.gaps(0, entry.valid)
}

/// Whether `[c.offset, c.offset + c.size)` meets one of `live`.
fn needed(c: &RecipeChunk, live: &[(u64, u64)]) -> bool {
    let end = c.offset.saturating_add(c.size.max(1));
    live.iter().any(|&(s, e)| c.offset < e && s < end)
}

/// Counts the references of every entry of the stream-map table, paced
/// before each entry: a cancel stops the count (`Ok(Err)`).
pub(super) fn count(
    vol: &Volume,
    pace: Pace<'_>,
) -> Result<std::result::Result<References, Cancelled>> {
    let mut walker = RecipeWalker::open(vol.repo())?;
    let mut refs = References {
        chunks: FpMap::default(),
        unwalkable: HashSet::new(),
    };
    for entry in vol.table().all() {
        if let Err(c) = pace() {
            return Ok(Err(c));
        }
        let live = live_ranges(&entry);
        let walked = walker.walk(&entry.blob, &mut |c| {
            if needed(&c, &live) {
                let r = refs.chunks.entry(c.fp).or_insert(Referenced {
                    count: 0,
                    seen: Seen::Not,
                });
                r.count = r.count.saturating_add(1);
            }
        });
        if walked.is_err() {
            refs.unwalkable.insert(entry.identity.ino);
        }
    }
    Ok(Ok(refs))
}

/// A file the scrub could not repair: its path below `DIR/files`, and the
/// byte ranges of it that read from lost chunks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffectedFile {
    pub path: String,
    pub ino: u64,
    /// `[start, end)` byte ranges, sorted and merged.
    pub ranges: Vec<(u64, u64)>,
    /// The lost chunks (fingerprints in hex); a recipe that cannot be
    /// walked names its unreadable tree node and counts from there on.
    pub chunks: Vec<String>,
}

/// The files whose live bytes need a chunk of `lost`, or whose recipe
/// cannot be walked (their whole stream-map range is affected from the
/// first node that failed), in path order. Paced before each entry; a
/// cancel does not stop it (the report must name every affected file):
/// pacing stops and the cancel is returned beside the files.
pub(super) fn affected(
    vol: &Volume,
    lost: &FpSet,
    pace: Pace<'_>,
) -> Result<(Vec<AffectedFile>, Option<Cancelled>)> {
    let mut walker = RecipeWalker::open(vol.repo())?;
    let mut by_ino: BTreeMap<u64, (RangeSet, Vec<String>)> = BTreeMap::new();
    let mut cancelled = None;
    for entry in vol.table().all() {
        if cancelled.is_none() {
            cancelled = pace().err();
        }
        let live = live_ranges(&entry);
        let mut hit = RangeSet::new();
        let mut names = Vec::new();
        let mut last_end = 0;
        let walked = walker.walk(&entry.blob, &mut |c| {
            last_end = c.offset;
            if lost.contains(&c.fp) && needed(&c, &live) {
                for &(s, e) in &live {
                    let (s, e) = (s.max(c.offset), e.min(c.offset + c.size));
                    if s < e {
                        hit.insert(s, e);
                    }
                }
                let name = c.fp.to_string();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        });
        if let Err(e) = walked {
            // Everything from the node that failed to the end is unreadable.
            for &(s, e) in &live {
                let s = s.max(last_end);
                if s < e {
                    hit.insert(s, e);
                }
            }
            names.push(format!("recipe unreadable: {e}"));
        }
        if !hit.is_empty() {
            by_ino.insert(entry.identity.ino, (hit, names));
        }
    }
    if by_ino.is_empty() {
        return Ok((Vec::new(), cancelled));
    }
    let mut out = Vec::new();
    walk::regular_files(&vol.dir().files(), &mut |f| {
        use std::os::unix::fs::MetadataExt;
        if let Some((ranges, chunks)) = by_ino.remove(&f.meta.ino()) {
            out.push(AffectedFile {
                path: f.rel.to_string_lossy().into_owned(),
                ino: f.meta.ino(),
                ranges: ranges.ranges().to_vec(),
                chunks,
            });
        }
        Ok(())
    })?;
    // Entries whose file recovery would drop (none after `open`): named by
    // inode alone.
    for (ino, (ranges, chunks)) in by_ino {
        out.push(AffectedFile {
            path: format!("<inode {ino}>"),
            ino,
            ranges: ranges.ranges().to_vec(),
            chunks,
        });
    }
    Ok((out, cancelled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;

    fn chunk(offset: u64, size: u64) -> RecipeChunk {
        RecipeChunk {
            fp: Fingerprint::from_slice(&[1; 32]),
            level: 0,
            offset,
            size,
        }
    }

    /// The memory per referenced chunk the module doc states.
    #[test]
    fn an_entry_is_64_bytes() {
        assert_eq!(std::mem::size_of::<(Fingerprint, Referenced)>(), 64);
    }

    #[test]
    fn a_chunk_is_needed_only_where_it_meets_the_live_ranges() {
        let live = [(0, 100), (200, 300)];
        assert!(needed(&chunk(50, 10), &live));
        assert!(needed(&chunk(90, 200), &live));
        assert!(!needed(&chunk(100, 100), &live));
        assert!(!needed(&chunk(300, 10), &live));
    }
}
