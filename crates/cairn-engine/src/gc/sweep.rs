//! Select and Copy (`003_ea5fccc485a97c5d.txt` §3.1 steps 4-5, §3.4), and
//! the commit that follows them.
//!
//! - **Select**: each container's liveness is the share of its chunks that
//!   are live instances; containers are cleaned mostly-dead first until the
//!   reclaim target is met ("select containers below a liveness threshold
//!   set dynamically based on our target goal for space to reclaim").
//!   PGC+ has no Live Instance filter: it walks containers backwards with a
//!   Dead filter and corrects the live count by the Analysis duplicate
//!   counter (§3.4 "Dynamic Duplicate Estimation").
//! - **Copy**: live chunks of the selected containers are copied, verified,
//!   into new containers. LGC and PGC go forward and copy live instances;
//!   PGC+ goes backwards over *every* container and clears a chunk's live
//!   bit at its first (newest) sight, copied or kept, so older copies are
//!   dead ("Dynamic Duplicate Removal").
//! - **Commit**: new containers are durable when written; then the index
//!   forgets the chunks of deleted containers and points moved chunks at
//!   their copies; only then do the old containers go, with readers locked
//!   out.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use cairn_core::{ContainerId, Error, FpMap, FpSet, Result};
use cairn_format::container::{ContainerMeta, ContainerWriter, Descriptor};
use cairn_format::index::IndexEntry;

use super::filters::{LiveFilter, Phv};
use super::ordered_copy::{self, Fetched, Layout, RegionBreaks};
use super::reservation::Reservation;
use crate::codec::ChunkCodec;
use crate::container_log::ContainerStore;
use crate::index::overlay::IndexUpdate;

/// One container's tally after Select.
#[derive(Clone, Debug)]
pub struct Tally {
    pub id: ContainerId,
    pub chunks: u64,
    /// Estimated live chunks (unique live for PGC+).
    pub live: f64,
    pub stored_bytes: u64,
    pub file_bytes: u64,
    /// Chunks the pass could judge (all, or the sampled ones).
    pub judged: u64,
    /// Stored bytes of the judged chunks, and of those found live (for
    /// PGC+ scaled to the unique live ones). The plan's byte estimates are
    /// weighted by these, not by chunk counts: chunk sizes vary, and the
    /// run copies bytes.
    pub judged_stored: u64,
    pub live_stored: f64,
    /// Every chunk was judged and none is live (LGC, PGC: no live instance;
    /// PGC+: no live bit). Exact, never an estimate: Bloom filters only err
    /// towards live, the perfect hash is exact. Such a container is deleted
    /// before any copy, with no new bytes but a small index change.
    pub all_dead: bool,
}

/// The bytes on disk of the containers `ids` (ascending) among `tallies`.
pub fn file_bytes_of(tallies: &[Tally], ids: &[ContainerId]) -> u64 {
    tallies
        .iter()
        .filter(|t| ids.binary_search(&t.id).is_ok())
        .map(|t| t.file_bytes)
        .sum()
}

impl Tally {
    pub fn new(id: ContainerId) -> Self {
        Tally {
            id,
            chunks: 0,
            live: 0.0,
            stored_bytes: 0,
            file_bytes: 0,
            judged: 0,
            judged_stored: 0,
            live_stored: 0.0,
            all_dead: false,
        }
    }

    /// Estimated stored bytes of its live chunks: what cleaning it copies.
    /// Unjudged, it counts as all live (as [`liveness`](Self::liveness)).
    pub fn live_stored_bytes(&self) -> f64 {
        if self.judged == 0 || self.judged_stored == 0 {
            return self.stored_bytes as f64 * self.liveness();
        }
        let share = (self.live_stored / self.judged_stored as f64).clamp(0.0, 1.0);
        self.stored_bytes as f64 * share
    }

    /// Estimated bytes its live chunks take once copied into new
    /// containers: their stored bytes plus their share of the container's
    /// other bytes (descriptors, header), per chunk.
    pub fn copy_file_bytes(&self) -> f64 {
        let overhead = self.file_bytes.saturating_sub(self.stored_bytes) as f64;
        let per_chunk = overhead / self.chunks.max(1) as f64;
        self.live_stored_bytes() + per_chunk * self.chunks as f64 * self.liveness()
    }

    pub fn liveness(&self) -> f64 {
        if self.judged == 0 {
            return 1.0;
        }
        (self.live / self.judged as f64).clamp(0.0, 1.0)
    }

    /// Estimated bytes cleaning it frees: its file less what the copies
    /// of its live chunks take.
    pub fn dead_bytes(&self) -> f64 {
        (self.file_bytes as f64 - self.copy_file_bytes()).max(0.0)
    }
}

/// Containers chosen for cleaning, mostly dead first, until `percent` of
/// the estimated dead bytes are covered (never beyond `limit_chunks`
/// chunks, focused cleaning's memory bound). Returns the chosen ids and
/// the liveness threshold (the liveness of the last one chosen).
pub fn select(tallies: &[Tally], percent: f64, limit_chunks: u64) -> (Vec<ContainerId>, f64) {
    let total_dead: f64 = tallies.iter().map(Tally::dead_bytes).sum();
    let goal = total_dead * (percent / 100.0).clamp(0.0, 1.0);
    let mut order: Vec<&Tally> = tallies
        .iter()
        .filter(|t| t.judged > 0 && t.liveness() < 1.0)
        .collect();
    order.sort_by(|a, b| a.liveness().total_cmp(&b.liveness()).then(a.id.cmp(&b.id)));
    let mut chosen = Vec::new();
    let (mut got, mut chunks, mut threshold) = (0.0, 0u64, 0.0);
    for t in order {
        if goal <= 0.0 || got >= goal {
            break;
        }
        if chunks + t.chunks > limit_chunks && !chosen.is_empty() {
            break;
        }
        chosen.push(t.id);
        got += t.dead_bytes();
        chunks += t.chunks;
        threshold = t.liveness();
    }
    chosen.sort();
    (chosen, threshold)
}

/// PGC+ Select (§3.4): containers backwards, a Dead filter counting dead
/// duplicates; unique live = live - (analysis duplicates - dead duplicates).
pub fn tally_plus(
    meta: &ContainerMeta,
    file_bytes: u64,
    live: &Phv,
    analysis_dups: u64,
    dead: &mut LiveFilter,
) -> Tally {
    let (mut live_n, mut dead_dups) = (0u64, 0u64);
    let (mut stored, mut live_stored) = (0u64, 0u64);
    for d in &meta.descriptors {
        stored += u64::from(d.stored_len);
        if live.get(&d.fp, 0) {
            live_n += 1;
            live_stored += u64::from(d.stored_len);
        } else if dead.contains(&d.fp) {
            dead_dups += 1;
        } else {
            dead.insert(&d.fp);
        }
    }
    let live_dups = analysis_dups.saturating_sub(dead_dups);
    let unique_live = live_n.saturating_sub(live_dups);
    Tally {
        id: meta.id,
        chunks: meta.descriptors.len() as u64,
        live: unique_live as f64,
        stored_bytes: stored,
        file_bytes,
        judged: meta.descriptors.len() as u64,
        judged_stored: stored,
        // The duplicates' bytes are not known one by one: the live bytes
        // scaled to the unique live chunks.
        live_stored: live_stored as f64 * unique_live as f64 / live_n.max(1) as f64,
        all_dead: live_n == 0,
    }
}

/// What the copy phase did.
#[derive(Debug, Default)]
pub struct Copied {
    /// Chunk -> the new container holding its copy.
    pub moved: FpMap<ContainerId>,
    pub chunks: u64,
    pub stored_bytes: u64,
    pub containers_written: u64,
    pub written_bytes: u64,
    /// Containers cleaned: every live chunk is copied, they may go.
    pub cleaned: Vec<ContainerId>,
    /// Selected containers left in place: a live chunk in them was damaged.
    pub damaged: Vec<String>,
    pub stopped_by_time: bool,
    /// The copy stopped at an interruption (`interrupt.rs`): the open
    /// container was not written, nothing may be committed.
    pub interrupted: bool,
    /// Re-layout: range reads that fetched the planned chunks.
    pub range_reads: u64,
}

/// Writes copied chunks into new containers.
pub struct CopyWriter<'a> {
    log: &'a dyn ContainerStore,
    codec: &'a ChunkCodec,
    fp_width: usize,
    capacity: usize,
    /// The collection's reserved ids, and the next one to take. Counted
    /// here, not by the log: a commit between Merge and the copies (whole
    /// dead containers first) moves the log's next id past the reservation.
    reserved: Option<(Reservation, ContainerId)>,
    open: Option<ContainerWriter>,
    raw: Vec<u8>,
    /// Re-layout (`relayout.rs`): chunks are planned as containers are
    /// judged and written in the heads' order at the end.
    layout: Option<Layout<'a>>,
    pub out: Copied,
}

impl<'a> CopyWriter<'a> {
    /// `reserved`: the ids the copies take (the collection's reservation);
    /// `None` when the caller holds the writer lock (ids from the log).
    pub fn new(
        log: &'a dyn ContainerStore,
        codec: &'a ChunkCodec,
        fp_width: usize,
        capacity: usize,
        reserved: Option<Reservation>,
    ) -> Self {
        CopyWriter {
            log,
            codec,
            fp_width,
            capacity,
            reserved: reserved.map(|r| (r, r.start)),
            open: None,
            raw: Vec::new(),
            layout: None,
            out: Copied::default(),
        }
    }

    /// Writes the copies in the order `order` gives (re-layout): each
    /// chunk's stored bytes are fetched once every container is judged.
    pub fn with_layout(mut self, order: &'a FpMap<u64>) -> Self {
        self.layout = Some(Layout::new(order));
        self
    }

    /// Copied chunks written in the heads' order, and the range reads
    /// that fetched the planned chunks.
    pub fn layout_counts(&self) -> (u64, u64) {
        self.layout
            .as_ref()
            .map_or((0, 0), |l| (l.ordered, self.out.range_reads))
    }

    /// Copies chunk `d` of the loaded container `(bytes, meta)`, verified
    /// against its fingerprint first: damage is never copied forward.
    fn copy(&mut self, bytes: &[u8], meta: &ContainerMeta, d: &Descriptor) -> Result<()> {
        let stored = cairn_format::container::stored_chunk(bytes, meta, d)?;
        self.copy_stored(stored, meta, d)
    }

    /// [`Self::copy`] of a chunk's stored bytes alone.
    fn copy_stored(&mut self, stored: &[u8], meta: &ContainerMeta, d: &Descriptor) -> Result<()> {
        self.codec
            .decode_stored_verified(stored, meta, d, &mut self.raw)?;
        if self
            .open
            .as_ref()
            .is_some_and(|w| !w.would_fit(stored.len()))
        {
            self.seal_open()?;
        }
        let w = match &mut self.open {
            Some(w) => w,
            None => {
                let id = match &mut self.reserved {
                    Some((_, next)) => {
                        let id = *next;
                        next.0 += 1;
                        id
                    }
                    None => self.log.allocate()?,
                };
                if self.reserved.is_some_and(|(r, _)| id >= r.end) {
                    // Cannot happen (the reservation holds one id per
                    // container judged, plus one); if it did, a backup
                    // could be writing this id: stop before writing.
                    return Err(Error::invalid(format!(
                        "garbage collection ran out of reserved container ids at {id}; \
                         nothing was deleted, run it again"
                    )));
                }
                self.open
                    .insert(ContainerWriter::new(id, self.fp_width, self.capacity))
            }
        };
        w.push(d.fp, d.kind, d.level, d.codec, d.raw_len, stored);
        self.out.moved.insert(d.fp, w.id());
        self.out.chunks += 1;
        self.out.stored_bytes += stored.len() as u64;
        Ok(())
    }

    /// Writes what is planned and the open container (durable when this
    /// returns).
    pub fn seal(&mut self) -> Result<()> {
        self.flush_layout()?;
        self.seal_open()
    }

    fn seal_open(&mut self) -> Result<()> {
        if let Some(w) = self.open.take() {
            self.out.written_bytes += w.encoded_len() as u64;
            self.log.append(w)?;
            self.out.containers_written += 1;
        }
        Ok(())
    }

    /// Writes the planned chunks in key order (re-layout): a window of
    /// about four containers' worth at a time, each source's chunks in the
    /// window fetched in coalesced range reads, then verified and copied.
    /// A source whose chunk is damaged stays (taken out of `cleaned`), as
    /// [`Self::clean`] leaves it: none of its chunks not yet written is.
    fn flush_layout(&mut self) -> Result<()> {
        let Some(mut layout) = self.layout.take() else {
            return Ok(());
        };
        let mut plan = std::mem::take(&mut layout.chunks);
        plan.sort_by_key(|p| p.key);
        let window = 4 * self.capacity.max(1) as u64;
        let mut breaks = RegionBreaks::new(layout.order.len() as u64, layout.metas.values());
        let mut damaged: HashSet<ContainerId> = HashSet::new();
        let mut start = 0;
        while start < plan.len() {
            if crate::interrupt::requested() {
                self.out.interrupted = true;
                break;
            }
            let mut end = start;
            let mut bytes = 0u64;
            while end < plan.len() && (end == start || bytes < window) {
                bytes += u64::from(plan[end].d.stored_len);
                end += 1;
            }
            let part = &plan[start..end];
            let mut by_source: HashMap<ContainerId, Vec<&Descriptor>> = HashMap::new();
            for p in part.iter().filter(|p| !damaged.contains(&p.source)) {
                by_source.entry(p.source).or_default().push(&p.d);
            }
            let mut fetched = Fetched {
                ranges: HashMap::new(),
            };
            for (source, mut ds) in by_source {
                let meta = &layout.metas[&source];
                let mut got = Vec::new();
                for r in ordered_copy::coalesce(meta, &mut ds, 64 << 10) {
                    self.out.range_reads += 1;
                    match self.log.read_range(meta, r.clone()) {
                        Ok(bytes) => got.push((r, bytes)),
                        Err(e) if e.is_corruption() => {
                            self.out.damaged.push(format!("container {source}: {e}"));
                            damaged.insert(source);
                            break;
                        }
                        Err(e) => return Err(e),
                    }
                }
                fetched.ranges.insert(source, got);
            }
            for p in part {
                if damaged.contains(&p.source) {
                    self.out.moved.remove(&p.d.fp);
                    continue;
                }
                let open = self.open.as_ref().map_or(0, ContainerWriter::encoded_len);
                if breaks.breaks(p.key, open, self.capacity) {
                    self.seal_open()?;
                }
                let meta = &layout.metas[&p.source];
                let copied = match fetched.stored(meta, &p.d) {
                    Some(stored) => self.copy_stored(stored, meta, &p.d),
                    None => Err(Error::corrupt(
                        format!("container {}", p.source),
                        format!("chunk {} lies outside the bytes read", p.d.fp),
                    )),
                };
                if let Err(e) = copied {
                    if !e.is_corruption() {
                        return Err(e);
                    }
                    self.out.moved.remove(&p.d.fp);
                    self.out
                        .damaged
                        .push(format!("container {}: {e}", p.source));
                    damaged.insert(p.source);
                }
            }
            start = end;
        }
        self.out.cleaned.retain(|id| !damaged.contains(id));
        self.layout = Some(layout);
        Ok(())
    }

    /// Copies the chunks of container `id` that `live` says to keep and
    /// records the container as cleaned; on damage to a live chunk the
    /// container stays (its sound chunks already copied are harmless
    /// duplicates, the newest copy wins).
    pub fn clean(
        &mut self,
        id: ContainerId,
        mut live: impl FnMut(&Descriptor) -> bool,
    ) -> Result<()> {
        if let Some(layout) = &mut self.layout {
            // Planned now, fetched and verified when written; a source
            // found damaged then is taken back out of `cleaned`.
            let meta = super::meta_of(self.log, id)?;
            for d in &meta.descriptors {
                if live(d) && !self.out.moved.contains_key(&d.fp) {
                    layout.push(id, d);
                    // Placeholder: the copy's container is known when written.
                    self.out.moved.insert(d.fp, ContainerId(0));
                }
            }
            layout.metas.insert(id, meta);
            self.out.cleaned.push(id);
            return Ok(());
        }
        let c = super::whole_container(self.log, id)?;
        for d in &c.meta.descriptors {
            if !live(d) || self.out.moved.contains_key(&d.fp) {
                continue;
            }
            if let Err(e) = self.copy(&c.bytes, &c.meta, d) {
                if e.is_corruption() {
                    self.out.damaged.push(format!("container {id}: {e}"));
                    return Ok(());
                }
                return Err(e);
            }
        }
        self.out.cleaned.push(id);
        Ok(())
    }

    /// Copies the chunks of container `id` that `want` names, whatever
    /// their liveness (resurrected chunks, §3.5); damage is an error.
    pub fn copy_matching(
        &mut self,
        id: ContainerId,
        want: impl Fn(&Descriptor) -> bool,
    ) -> Result<()> {
        let c = super::whole_container(self.log, id)?;
        for d in &c.meta.descriptors {
            if want(d) && !self.out.moved.contains_key(&d.fp) {
                self.copy(&c.bytes, &c.meta, d)?;
            }
        }
        Ok(())
    }
}

/// LGC/PGC Copy (§3.1 step 5): selected containers in ascending order,
/// live instances copied.
pub fn copy_forward(
    w: &mut CopyWriter<'_>,
    selected: &[ContainerId],
    instances: &LiveFilter,
    deadline: Option<Instant>,
    tick: &dyn Fn(),
) -> Result<()> {
    for &id in selected {
        if crate::interrupt::requested() {
            w.out.interrupted = true;
            return Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            w.out.stopped_by_time = true;
            break;
        }
        w.clean(id, |d| instances.contains_instance(&d.fp, id))?;
        tick();
    }
    w.seal()
}

/// PGC+ Copy (§3.4): every container from the newest down; a live chunk's
/// bit is cleared at its first sight (copied from a selected container, or
/// kept in an unselected one), so every older copy is dead.
pub fn copy_backward(
    w: &mut CopyWriter<'_>,
    all: &[ContainerId],
    selected: &HashSet<ContainerId>,
    live: &mut Phv,
    deadline: Option<Instant>,
    tick: &dyn Fn(),
) -> Result<u64> {
    let mut unselected_reads = 0;
    for &id in all.iter().rev() {
        if crate::interrupt::requested() {
            w.out.interrupted = true;
            return Ok(unselected_reads);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            w.out.stopped_by_time = true;
            break;
        }
        if selected.contains(&id) {
            w.clean(id, |d| {
                let keep = live.get(&d.fp, 0);
                if keep {
                    live.clear(&d.fp, 0);
                }
                keep
            })?;
        } else {
            let meta = super::meta_of(w.log, id)?;
            unselected_reads += 1;
            for d in &meta.descriptors {
                live.clear(&d.fp, 0);
            }
        }
        tick();
    }
    w.seal()?;
    Ok(unselected_reads)
}

/// Calls its argument with every index entry; returns the count.
pub type EachEntry<'a> = &'a mut dyn FnMut(&mut dyn FnMut(&IndexEntry)) -> Result<u64>;

/// The index change of a collection: entries that name a cleaned
/// container are forgotten unless their chunk was copied, in which case
/// they name the copy. `entries` is every index entry (one sequential
/// pass); an entry naming another container is left alone (a backup that
/// ran beside the collection may have stored the chunk again). Also
/// returns the forgotten chunks with the container they were in, and how
/// many entries name each container.
pub fn index_update(
    entries: EachEntry<'_>,
    cleaned: &[ContainerId],
    moved: &FpMap<ContainerId>,
) -> Result<(IndexUpdate, FpMap<ContainerId>, HashMap<ContainerId, u64>)> {
    let gone: HashSet<ContainerId> = cleaned.iter().copied().collect();
    let mut doomed = FpMap::default();
    let mut puts = Vec::new();
    let mut named: HashMap<ContainerId, u64> = HashMap::new();
    entries(&mut |e| {
        *named.entry(e.container).or_insert(0) += 1;
        if gone.contains(&e.container) {
            match moved.get(&e.fp) {
                Some(c) => puts.push(IndexEntry {
                    fp: e.fp,
                    container: *c,
                }),
                None => {
                    doomed.insert(e.fp, e.container);
                }
            }
        }
    })?;
    puts.sort_by_key(|e| e.fp);
    let mut removes: Vec<_> = doomed.keys().copied().collect();
    removes.sort();
    Ok((IndexUpdate::new(puts, removes), doomed, named))
}

/// A chunk about to leave the index may still have an older copy in a
/// container that stays (a dead duplicate the collection did not clean):
/// the index then names that copy instead, so every chunk stored anywhere
/// stays indexed (the perfect hash of the next collection is built over
/// the index, and must know every fingerprint it will meet). `keep` are
/// the staying containers that hold chunks the index names elsewhere.
/// Returns the metadata sections read.
pub fn keep_survivors(
    log: &dyn ContainerStore,
    update: &mut IndexUpdate,
    keep: &[ContainerId],
) -> Result<u64> {
    if update.removes.is_empty() || keep.is_empty() {
        return Ok(0);
    }
    let leaving: FpSet = update.removes.iter().copied().collect();
    let mut newest: FpMap<ContainerId> = FpMap::default();
    let mut reads = 0;
    for &id in keep {
        let meta = super::meta_of(log, id)?;
        reads += 1;
        for d in &meta.descriptors {
            if leaving.contains(&d.fp) {
                crate::canonical::place(&mut newest, d.fp, id);
            }
        }
    }
    if newest.is_empty() {
        return Ok(reads);
    }
    // Removals apply before puts: the entry ends up naming the survivor.
    update.puts.extend(
        newest
            .into_iter()
            .map(|(fp, container)| IndexEntry { fp, container }),
    );
    Ok(reads)
}

/// A tally of `chunks` chunks of `bytes` bytes, `live` of them live,
/// every one judged (unit tests of selection).
#[cfg(test)]
pub(super) fn test_tally(id: u64, chunks: u64, live: f64, bytes: u64) -> Tally {
    Tally {
        id: ContainerId(id),
        chunks,
        live,
        stored_bytes: bytes,
        file_bytes: bytes,
        judged: chunks,
        judged_stored: bytes,
        live_stored: bytes as f64 * live / chunks as f64,
        all_dead: live == 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_tally as t;

    #[test]
    fn select_takes_mostly_dead_first_until_the_goal() {
        let ts = vec![
            t(1, 10, 9.0, 1000), // 10% dead: 100
            t(2, 10, 0.0, 1000), // all dead: 1000
            t(3, 10, 5.0, 1000), // half: 500
            t(4, 10, 10.0, 1000),
        ];
        // Dead total 1600; 60% = 960: the dead one alone nearly, then the half one.
        let (s, th) = select(&ts, 60.0, u64::MAX);
        assert_eq!(s, vec![ContainerId(2)]);
        assert_eq!(th, 0.0);
        let (s, th) = select(&ts, 90.0, u64::MAX);
        assert_eq!(s, vec![ContainerId(2), ContainerId(3)]);
        assert_eq!(th, 0.5);
        let (s, _) = select(&ts, 100.0, u64::MAX);
        assert_eq!(s.len(), 3, "a fully live container is never selected");
        let (s, _) = select(&ts, 100.0, 15);
        assert_eq!(s, vec![ContainerId(2)], "the chunk limit bounds the choice");
        assert!(select(&ts, 0.0, u64::MAX).0.is_empty());
    }
}
