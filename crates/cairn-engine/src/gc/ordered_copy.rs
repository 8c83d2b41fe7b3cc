//! The ordered copy of re-layout (`relayout.rs`, issue 34): the chunks a
//! collection copies are planned while containers are judged and written
//! afterwards in the heads' restore order (`sweep::CopyWriter`), fetched
//! by coalesced range reads a window at a time.

use std::collections::HashMap;
use std::ops::Range;

use cairn_core::{ContainerId, FpMap};
use cairn_format::container::{chunk_file_range, ContainerMeta, Descriptor};

/// Keys below this are positions in the heads' walk; a copied chunk no
/// head uses takes a key above it, in scan order.
pub const UNORDERED: u64 = 1 << 62;

/// One chunk the ordered copy will write.
pub(super) struct Planned {
    pub key: u64,
    pub source: ContainerId,
    pub d: Descriptor,
}

/// The chunks a re-layout copy decided to write, written only once every
/// source has been judged (`CopyWriter::flush_layout`).
pub(super) struct Layout<'o> {
    pub order: &'o FpMap<u64>,
    pub next_unordered: u64,
    pub chunks: Vec<Planned>,
    /// Metadata of every source container.
    pub metas: HashMap<ContainerId, ContainerMeta>,
    pub ordered: u64,
}

impl<'o> Layout<'o> {
    pub fn new(order: &'o FpMap<u64>) -> Self {
        Layout {
            order,
            next_unordered: UNORDERED,
            chunks: Vec::new(),
            metas: HashMap::new(),
            ordered: 0,
        }
    }

    pub fn push(&mut self, source: ContainerId, d: &Descriptor) {
        let key = match self.order.get(&d.fp) {
            Some(k) => {
                self.ordered += 1;
                *k
            }
            None => {
                self.next_unordered += 1;
                self.next_unordered
            }
        };
        self.chunks.push(Planned { key, source, d: *d });
    }
}

/// A range of a container file read, and its bytes.
pub(super) type RangeRead = (Range<u64>, Vec<u8>);

/// Where in the window's buffers one planned chunk's stored bytes lie.
pub(super) struct Fetched {
    /// Per source: its ranges read (file offsets) and their bytes.
    pub ranges: HashMap<ContainerId, Vec<RangeRead>>,
}

/// Coalesces the file ranges of `ds` (one source) into reads: runs of
/// chunks closer than `gap` bytes share one read.
pub(super) fn coalesce(meta: &ContainerMeta, ds: &mut [&Descriptor], gap: u64) -> Vec<Range<u64>> {
    ds.sort_by_key(|d| d.offset);
    let mut out: Vec<Range<u64>> = Vec::new();
    for d in ds.iter() {
        let r = chunk_file_range(meta, d);
        match out.last_mut() {
            Some(last) if r.start <= last.end + gap => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

impl Fetched {
    /// The stored bytes of `d` (of `meta`) among the ranges read.
    pub fn stored<'b>(&'b self, meta: &ContainerMeta, d: &Descriptor) -> Option<&'b [u8]> {
        let r = chunk_file_range(meta, d);
        let (have, bytes) = self
            .ranges
            .get(&meta.id)?
            .iter()
            .find(|(have, _)| have.start <= r.start && r.end <= have.end)?;
        let at = (r.start - have.start) as usize;
        bytes.get(at..at + (r.end - r.start) as usize)
    }
}

/// The gap in the heads' order past which two copied chunks belong to
/// distant regions of the heads: about one container's worth of their
/// chunks (`heads` chunks over the containers `metas` describe). The
/// ordered copy seals a container at least half full at such a gap rather
/// than fill it with a region the next restore area will not read.
pub fn region_jump(heads: u64, metas: &[ContainerMeta]) -> u64 {
    region_jump_of(heads, &metas.iter().collect::<Vec<_>>())
}

/// [`region_jump`] over borrowed metadata sections.
pub fn region_jump_of(heads: u64, metas: &[&ContainerMeta]) -> u64 {
    let chunks: u64 = metas.iter().map(|m| m.descriptors.len() as u64).sum();
    let per_container = chunks / (metas.len() as u64).max(1);
    per_container.max(1).min(heads.max(1))
}
