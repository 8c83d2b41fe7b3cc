//! A partly optimized file as the engine's backup should record it
//! (docs/volume.md, "Incremental optimization"): the chunks of its stream
//! map that still hold the file's bytes, kept as they are and never read,
//! and the ranges between them (recalled granules, an appended tail, the
//! cut chunk of a truncate) read through the content state and chunked
//! anew. 004's write path: "incremental dedup will later optimize the new
//! data"; only what was written since the file was optimized is read.
//!
//! A chunk of the stream map is *kept* when all of it lies below `valid`
//! and no recalled range touches it; every other chunk, and everything
//! past the stream map, is *read*. A read range therefore starts and ends
//! on a boundary of the old chunks (or at the file's end), so the kept
//! chunks around it stay chunks of the new recipe, and the engine chunks a
//! read range on its own (`backup::file_content::Piece::Read`). Used by
//! the optimization job (a recalled file's new stream map) and by volume
//! snapshots (a partly recalled file recorded mostly unread).

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use cairn_engine::backup::file_content::{FileSource, Piece, StoredChunk};
use cairn_engine::random_access::Leaf;

use crate::content::Content;
use crate::inode_locks::InodeLocks;
use crate::ranges::RangeSet;
use crate::state::{Entry, StreamMapTable};
use crate::volume::{same_file, Volume};
use crate::volume_content::VolumeContent;

/// Largest read of a file under its inode lock at once.
const READ_PIECE: usize = 1 << 20;

/// One part of a spliced file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Span {
    /// These leaves of the stream map (indexes into its leaf list),
    /// kept unread.
    Keep(std::ops::Range<usize>),
    /// The file's bytes `[start, end)`, read and chunked anew.
    Read(u64, u64),
}

/// Splits a file of `len` bytes, whose stream map has `leaves` (its data
/// chunks in order, from offset 0), `valid` and `recalled` ranges as its
/// entry says, into kept chunks and ranges to read (module doc). The spans
/// cover `[0, len)` exactly, in order.
pub fn plan(leaves: &[Leaf], valid: u64, recalled: &RangeSet, len: u64) -> Vec<Span> {
    // The leaves that start before the file's end (they are in order).
    let leaves = &leaves[..leaves.partition_point(|l| l.start < len)];
    let mut spans = Vec::new();
    let mut keep_from: Option<usize> = None;
    let mut read_from: Option<u64> = None;
    for (i, leaf) in leaves.iter().enumerate() {
        let (start, end) = (leaf.start, leaf.end());
        let clean = end <= valid.min(len) && recalled.gaps(start, end) == [(start, end)];
        if clean {
            if let Some(r) = read_from.take() {
                spans.push(Span::Read(r, start));
            }
            keep_from.get_or_insert(i);
        } else {
            if let Some(k) = keep_from.take() {
                spans.push(Span::Keep(k..i));
            }
            read_from.get_or_insert(start);
        }
    }
    if let Some(k) = keep_from {
        spans.push(Span::Keep(k..leaves.len()));
    }
    let covered = spans.last().map_or(0, |s| match s {
        Span::Keep(r) => leaves[r.end - 1].end(),
        Span::Read(_, e) => *e,
    });
    let tail_from = read_from.unwrap_or(covered);
    if tail_from < len {
        spans.push(Span::Read(tail_from, len));
    }
    spans
}

/// The bytes a plan reads (its `Read` spans).
pub fn bytes_read(spans: &[Span]) -> u64 {
    spans
        .iter()
        .map(|s| match s {
            Span::Read(a, b) => b - a,
            Span::Keep(_) => 0,
        })
        .sum()
}

/// How a backup of the backing tree (the optimization's ingest, a volume
/// snapshot) gets the bytes of the volume's optimized files: the lookup
/// both `FileContent` hooks share.
pub struct VolumeSources {
    table: Arc<StreamMapTable>,
    content: Arc<VolumeContent>,
    locks: Arc<InodeLocks>,
}

/// An optimized file's source for a backup.
pub struct Sourced {
    pub source: FileSource,
    /// Every byte is its stream map's: the stream map itself, unread.
    pub whole: bool,
    /// Bytes the source will read (0 when whole).
    pub bytes_read: u64,
}

impl VolumeSources {
    pub fn new(vol: &Volume) -> cairn_core::Result<Self> {
        Ok(VolumeSources {
            table: vol.table().clone(),
            content: vol.content()?,
            locks: vol.locks().clone(),
        })
    }

    /// The source of the file `file` (stat'ed as `meta`): `None` for a
    /// plain file (read from the backing tree); its stream map when every
    /// byte is the stream map's; else pieces ([`file_source`]).
    pub fn source(&self, file: &File, meta: &Metadata) -> io::Result<Option<Sourced>> {
        let Some(entry) = self.table.get(meta.ino()).filter(|e| same_file(e, meta)) else {
            return Ok(None);
        };
        if entry.recalled.is_empty() && entry.valid == meta.len() && entry.blob.size == meta.len() {
            return Ok(Some(Sourced {
                source: FileSource::Stored(entry.blob),
                whole: true,
                bytes_read: 0,
            }));
        }
        let (source, bytes_read) = file_source(
            &self.content,
            &self.locks,
            meta.ino(),
            file,
            &entry,
            meta.len(),
        )?;
        Ok(Some(Sourced {
            source,
            whole: false,
            bytes_read,
        }))
    }
}

/// The file `ino` (open as `file`, `len` bytes long, optimized as `entry`)
/// as pieces for the engine's backup, and how many bytes they will read.
pub fn file_source(
    content: &Arc<VolumeContent>,
    locks: &Arc<InodeLocks>,
    ino: u64,
    file: &File,
    entry: &Entry,
    len: u64,
) -> io::Result<(FileSource, u64)> {
    let leaves = content.stream_map_leaves(entry).map_err(io::Error::other)?;
    let spans = plan(&leaves, entry.valid, &entry.recalled, len);
    let read = bytes_read(&spans);
    let mut pieces = Vec::with_capacity(spans.len());
    for span in spans {
        pieces.push(match span {
            Span::Keep(r) => Piece::Stored(
                leaves[r]
                    .iter()
                    .map(|l| StoredChunk {
                        fp: l.fp,
                        size: l.size,
                    })
                    .collect(),
            ),
            Span::Read(start, end) => Piece::Read(Box::new(Assembled {
                content: content.clone(),
                locks: locks.clone(),
                ino,
                file: file.try_clone()?,
                pos: start,
                end,
            })),
        });
    }
    Ok((FileSource::Pieces(pieces), read))
}

/// A range of a partly optimized file's bytes, as the mount serves them,
/// read under the file's inode lock a piece at a time.
pub struct Assembled {
    pub content: Arc<VolumeContent>,
    pub locks: Arc<InodeLocks>,
    pub ino: u64,
    pub file: File,
    pub pos: u64,
    /// Where to stop (`u64::MAX`: at the file's end).
    pub end: u64,
}

impl Read for Assembled {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len().min(READ_PIECE) as u64).min(self.end.saturating_sub(self.pos)) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = {
            let _guard = self.locks.read(self.ino);
            self.content
                .read_at(self.ino, &self.file, self.pos, &mut buf[..n])?
        };
        self.pos += got as u64;
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::Fingerprint;

    /// Leaves of the given sizes from offset 0.
    fn leaves(sizes: &[u64]) -> Vec<Leaf> {
        let mut at = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let l = Leaf {
                    fp: Fingerprint::from_slice(&[i as u8; 32]),
                    start: at,
                    size,
                };
                at += size;
                l
            })
            .collect()
    }

    /// Checks that the spans cover `[0, len)` in order.
    fn assert_covers(spans: &[Span], l: &[Leaf], len: u64) {
        let mut at = 0;
        for s in spans {
            match s {
                Span::Keep(r) => {
                    assert!(!r.is_empty());
                    assert_eq!(l[r.start].start, at, "{spans:?}");
                    at = l[r.end - 1].end();
                }
                Span::Read(a, b) => {
                    assert_eq!(*a, at, "{spans:?}");
                    assert!(b > a);
                    at = *b;
                }
            }
        }
        assert_eq!(at, len, "{spans:?}");
    }

    #[test]
    fn an_untouched_file_is_kept_whole() {
        let l = leaves(&[10, 20, 30]);
        let spans = plan(&l, 60, &RangeSet::new(), 60);
        assert_eq!(spans, vec![Span::Keep(0..3)]);
        assert_eq!(bytes_read(&spans), 0);
    }

    #[test]
    fn a_recalled_range_reads_the_chunks_it_touches() {
        let l = leaves(&[10, 20, 30, 40]);
        // [15, 35) touches the chunks at [10, 30) and [30, 60).
        let r = RangeSet::from_ranges([(15, 35)]);
        let spans = plan(&l, 100, &r, 100);
        assert_eq!(
            spans,
            vec![Span::Keep(0..1), Span::Read(10, 60), Span::Keep(3..4)]
        );
        assert_covers(&spans, &l, 100);
    }

    #[test]
    fn an_append_reads_only_the_new_tail() {
        let l = leaves(&[10, 20]);
        let spans = plan(&l, 30, &RangeSet::new(), 50);
        assert_eq!(spans, vec![Span::Keep(0..2), Span::Read(30, 50)]);
    }

    #[test]
    fn a_truncate_reads_the_cut_chunk() {
        let l = leaves(&[10, 20, 30]);
        // Truncated to 25: valid 25, the chunk [10, 30) is cut.
        let spans = plan(&l, 25, &RangeSet::new(), 25);
        assert_eq!(spans, vec![Span::Keep(0..1), Span::Read(10, 25)]);
        // Truncated at a boundary, then extended by 5 zeros.
        let spans = plan(&l, 30, &RangeSet::new(), 35);
        assert_eq!(spans, vec![Span::Keep(0..2), Span::Read(30, 35)]);
        // Truncated to 30 of 60 and nothing else: the tail chunks go.
        let spans = plan(&l, 30, &RangeSet::new(), 30);
        assert_eq!(spans, vec![Span::Keep(0..2)]);
    }

    #[test]
    fn spans_always_cover_the_file() {
        let mut rng = cairn_core::rng::SplitMix64::new(5);
        for _ in 0..2000 {
            let n = 1 + rng.next_u64() % 12;
            let sizes: Vec<u64> = (0..n).map(|_| 1 + rng.next_u64() % 50).collect();
            let l = leaves(&sizes);
            let blob: u64 = sizes.iter().sum();
            let valid = rng.next_u64() % (blob + 1);
            let len = valid + rng.next_u64() % 40;
            let mut r = RangeSet::new();
            for _ in 0..rng.next_u64() % 3 {
                let a = rng.next_u64() % (valid + 1);
                let b = (a + 1 + rng.next_u64() % 30).min(valid);
                if b > a {
                    r.insert(a, b);
                }
            }
            let spans = plan(&l, valid, &r, len);
            assert_covers(&spans, &l, len);
            for s in &spans {
                if let Span::Keep(k) = s {
                    for leaf in &l[k.clone()] {
                        assert!(leaf.end() <= valid);
                        assert!(r.gaps(leaf.start, leaf.end()) == [(leaf.start, leaf.end())]);
                    }
                }
            }
        }
    }
}
