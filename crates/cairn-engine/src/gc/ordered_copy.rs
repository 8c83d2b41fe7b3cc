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
const UNORDERED: u64 = 1 << 62;

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

/// Where the ordered copy starts a new container: at a gap in the heads'
/// order past which two copied chunks belong to distant regions of the
/// heads (about one container's worth of their chunks), once the open
/// container is at least half full, rather than fill it with a region the
/// next restore area will not read.
pub(super) struct RegionBreaks {
    jump: u64,
    last: Option<u64>,
}

impl RegionBreaks {
    /// For heads of `heads` chunks copied from the containers `metas`
    /// describes (their mean chunk count is a container's worth).
    pub fn new<'m>(heads: u64, metas: impl IntoIterator<Item = &'m ContainerMeta>) -> Self {
        let (mut chunks, mut containers) = (0u64, 0u64);
        for m in metas {
            chunks += m.descriptors.len() as u64;
            containers += 1;
        }
        let per_container = chunks / containers.max(1);
        RegionBreaks {
            jump: per_container.max(1).min(heads.max(1)),
            last: None,
        }
    }

    /// Whether the chunk of `key`, the next one written, starts a new
    /// container when the open one holds `open_bytes` of `capacity`.
    pub fn breaks(&mut self, key: u64, open_bytes: usize, capacity: usize) -> bool {
        let far = self.last.is_some_and(|k| key.saturating_sub(k) > self.jump);
        self.last = Some(key);
        far && open_bytes >= capacity / 2
    }
}
