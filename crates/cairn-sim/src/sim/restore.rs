//! Simulated restore of one generation: its data chunks in trace order (the
//! order a real restore plans them in, in plans spanning files closed by
//! the same rule), each served by a held container or
//! else located in the canonical copy's container, through the same restore
//! policy the real restore runs (`cairn_engine::read::policy`, one of the
//! five of `002_c5d78fa3332f6f9f.txt` §2). Counts
//! container reads and the speed factor (MB restored per container read);
//! each read is charged to the device model at the container's size.

use std::path::PathBuf;
use std::sync::Arc;

use cairn_backend::LocalBackend;
use cairn_core::{
    ContainerId, Counters, Error, Fingerprint, FpMap, Result, TraceEvent, TraceSource,
};
use cairn_engine::container_log::ContainerStore;
use cairn_engine::index::disk_index::DiskIndex;
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_engine::object_names;
use cairn_engine::read::policy::{plan_full, ContainerChunk, PlanStep, PolicyRun, PolicyStats};
use cairn_engine::read::CacheOptions;

use crate::device::{DeviceModel, Stage};

#[derive(Debug, Default, Clone)]
pub struct RestoreResult {
    pub bytes: u64,
    pub containers_read: u64,
    /// What the policy did (reads, hits, its memory).
    pub policy: PolicyStats,
}

impl RestoreResult {
    pub fn speed_factor(&self) -> f64 {
        if self.containers_read == 0 {
            0.0
        } else {
            self.bytes as f64 / 1e6 / self.containers_read as f64
        }
    }
}

/// Where each stored chunk's canonical copy is, for the simulated
/// restores of one run.
pub enum Placement {
    /// Every container's metadata section placed in a map
    /// ([`PlacementMap`]): exact by construction, about 67 bytes of RAM per
    /// unique chunk. Runs with the containers' metadata in memory (the
    /// exactness guard's reference) and frugal-index runs use it.
    Map(PlacementMap),
    /// The repository's paged index, its objects in this scratch
    /// directory, read through a backend of their own (so its page reads
    /// are not charged to the device model: a real restore's locator is
    /// part of the index it already has, and the model charges container
    /// reads): no RAM per chunk (issue 35). The index resolves each
    /// fingerprint to its canonical copy as the map does (`canonical.rs`:
    /// its merges and the map both keep the highest container id), and it
    /// is looked up only when the policy reads a container (a miss), not
    /// per chunk.
    Index(LocalBackend),
}

impl Placement {
    /// A placement kept as a map.
    pub fn map() -> Self {
        Placement::Map(PlacementMap::default())
    }

    /// The placement as it is now, for one generation's restores, which
    /// run beside the next generation's backup (`sim/mod.rs`): that
    /// backup's commit may change where chunks are (a rewrite's copy has
    /// a higher container id) and replace the index's objects, and the
    /// restore must see the repository its generation left. `n` names
    /// the index's view. Give the result back with [`Placement::thaw`].
    pub fn freeze(&mut self, store: &MetaOnlyStore, n: usize) -> Result<Frozen> {
        match self {
            Placement::Map(m) => {
                m.update(store)?;
                Ok(Frozen::Map(std::mem::take(m)))
            }
            Placement::Index(objects) => IndexView::link(objects, n).map(Frozen::Index),
        }
    }

    /// Takes back the map a [`Placement::freeze`] lent (kept up to date
    /// from one restore to the next); a view of the index is removed. A
    /// map never given back (a failed restore) leaves an empty one, which
    /// the next freeze fills from every container.
    pub fn thaw(&mut self, frozen: Frozen) {
        if let (Placement::Map(m), Frozen::Map(f)) = (self, frozen) {
            *m = f;
        }
    }
}

/// A placement frozen for one generation's restores ([`Placement::freeze`]).
pub enum Frozen {
    Map(PlacementMap),
    Index(IndexView),
}

/// The index's objects (`index/`) as they were at one moment: hard links
/// in a directory of their own, removed on drop. A commit after that
/// moment writes new objects and deletes replaced ones but never changes
/// an object in place (every write is a whole object under its name,
/// renamed into place), so the links keep the bytes the restore must read.
pub struct IndexView {
    dir: PathBuf,
    backend: LocalBackend,
}

impl IndexView {
    fn link(objects: &LocalBackend, n: usize) -> Result<Self> {
        let root = objects.root();
        let dir = root.with_file_name(format!("index-view-{n}"));
        let shown = dir.display().to_string();
        let io = |what: &str, e: std::io::Error| Error::io(format!("{what} {shown}"), e);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io("removing", e))?;
        }
        let from = root.join(object_names::INDEX.trim_end_matches('/'));
        let to = dir.join(object_names::INDEX.trim_end_matches('/'));
        std::fs::create_dir_all(&to).map_err(|e| io("creating", e))?;
        let view = IndexView {
            backend: LocalBackend::scratch(&dir)?,
            dir,
        };
        if from.is_dir() {
            for entry in std::fs::read_dir(&from).map_err(|e| io("listing the index for", e))? {
                let entry = entry.map_err(|e| io("listing the index for", e))?;
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    std::fs::hard_link(entry.path(), to.join(entry.file_name()))
                        .map_err(|e| io("linking the index into", e))?;
                }
            }
        }
        Ok(view)
    }
}

impl Drop for IndexView {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A placement's view for one restore.
enum Locate<'a> {
    Map(&'a FpMap<ContainerId>),
    Index(Box<DiskIndex>),
}

impl Locate<'_> {
    /// Whether the restore plans `fp` (a chunk no container holds is not
    /// planned; none in a complete trace). The index is asked only when
    /// the chunk is read: every chunk is planned.
    fn plans(&self, fp: &Fingerprint) -> bool {
        match self {
            Locate::Map(m) => m.contains_key(fp),
            Locate::Index(_) => true,
        }
    }

    fn container(&self, fp: &Fingerprint) -> Result<ContainerId> {
        let found = match self {
            Locate::Map(m) => m.get(fp).copied(),
            Locate::Index(ix) => ix.lookup(fp)?,
        };
        found.ok_or_else(|| {
            Error::corrupt(
                "simulated repository",
                format!("chunk {fp} of the trace is in no container"),
            )
        })
    }
}

/// Pages of the index a restore keeps verified (it reads one per
/// container read at most).
const INDEX_PAGE_CACHE_BYTES: usize = 4 << 20;

/// Where each stored chunk's canonical copy is (`canonical::place` over
/// every container's metadata section), kept from one simulated restore to
/// the next: each brings it up to date with the containers written since
/// (a generation's few hundred instead of every section of the
/// repository, read again for every restore of every generation). A
/// container gone since (a re-layout's, a collection's) may have been some
/// chunk's only copy: the map is then rebuilt whole, so it always equals
/// one built from scratch.
#[derive(Default)]
pub struct PlacementMap {
    place: FpMap<ContainerId>,
    /// Containers whose sections are in `place`, ascending.
    placed: Vec<ContainerId>,
}

impl PlacementMap {
    fn update(&mut self, store: &MetaOnlyStore) -> Result<()> {
        let ids = store.ids()?;
        // Ids only grow, so the placed ones still present are a prefix of
        // `ids` exactly when none is gone.
        if ids.len() < self.placed.len() || ids[..self.placed.len()] != self.placed[..] {
            *self = PlacementMap::default();
        }
        for &id in &ids[self.placed.len()..] {
            if let Some(meta) = store.peek(id)? {
                for d in &meta.descriptors {
                    cairn_engine::canonical::place(&mut self.place, d.fp, id);
                }
            }
            self.placed.push(id);
        }
        Ok(())
    }
}

/// One simulated restore of `src`'s data chunks, located through
/// `placement` (frozen when the generation's backup ended).
pub fn simulate(
    src: &mut dyn TraceSource,
    store: &MetaOnlyStore,
    placement: &Frozen,
    model: &DeviceModel,
    cache: CacheOptions,
    unit: u64,
) -> Result<RestoreResult> {
    let place = match placement {
        Frozen::Map(m) => Locate::Map(&m.place),
        Frozen::Index(view) => Locate::Index(Box::new(
            DiskIndex::open(
                Arc::new(view.backend.clone()),
                Arc::new(Counters::default()),
            )?
            .with_page_cache(INDEX_PAGE_CACHE_BYTES),
        )),
    };
    // The real restore's policy (`read::policy`), over metadata only: a
    // read is charged to the device model. Plans span files and close by
    // the real restore's rule (`plan_full`, checked at each file's end).
    let mut run = PolicyRun::new(cache.policy, cache.bytes, unit);
    let mut r = RestoreResult::default();
    let mut plan: Vec<PlanStep> = Vec::new();
    let mut files = 0;
    let mut file_start = 0;
    loop {
        let ev = src.next_event()?;
        let end_of_file = matches!(ev, None | Some(TraceEvent::FileStart { .. }));
        if end_of_file {
            if plan.len() > file_start {
                files += 1;
            }
            if ev.is_none() || plan_full(plan.len(), files) {
                if !plan.is_empty() {
                    run_plan(&mut run, &plan, &place, store, model, &mut r)?;
                }
                plan.clear();
                files = 0;
            }
            file_start = plan.len();
        }
        match ev {
            None => break,
            Some(TraceEvent::Chunk(c)) => {
                r.bytes += c.size as u64;
                if place.plans(&c.fp) {
                    let offset = plan[file_start..]
                        .last()
                        .map_or(0, |s: &PlanStep| s.offset + s.size);
                    plan.push(PlanStep {
                        fp: c.fp,
                        size: c.size as u64,
                        offset,
                    });
                }
            }
            Some(_) => {}
        }
    }
    r.policy = run.stats();
    Ok(r)
}

/// One plan through the policy: each container read is counted and
/// charged to the device model at its size.
fn run_plan(
    run: &mut PolicyRun,
    plan: &[PlanStep],
    place: &Locate<'_>,
    store: &MetaOnlyStore,
    model: &DeviceModel,
    r: &mut RestoreResult,
) -> Result<()> {
    r.containers_read += run.run_described(plan, &mut |fp, chunks| {
        let id = place.container(fp)?;
        let meta = store.peek(id)?.expect("placed containers exist");
        model.charge(Stage::ContainerRead, meta.file_size);
        ContainerChunk::of_container(&meta, chunks);
        Ok((id, meta.file_size))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::config::CompressionCodec;
    use cairn_core::ChunkKind;
    use cairn_format::container::ContainerWriter;
    use proptest::prelude::*;

    fn fp(b: u8) -> Fingerprint {
        Fingerprint::from_slice(&[b; 20])
    }

    proptest! {
        /// Kept up to date step by step, through containers written and
        /// deleted, the placement always equals one built from scratch.
        #[test]
        fn an_updated_placement_equals_a_fresh_one(
            steps in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(0u8..30, 0..6).prop_map(Ok),
                    (0usize..8).prop_map(Err),
                ],
                1..40,
            ),
        ) {
            let store = MetaOnlyStore::new(Arc::new(Counters::default()));
            let mut kept = PlacementMap::default();
            for step in steps {
                match step {
                    Ok(fps) => {
                        let id = store.allocate().unwrap();
                        let mut w = ContainerWriter::new(id, 20, 1 << 20);
                        for b in fps {
                            w.push_absent(fp(b), ChunkKind::Data, 0, CompressionCodec::None, 10, 10);
                        }
                        store.append(w).unwrap();
                    }
                    Err(k) => {
                        let ids = store.ids().unwrap();
                        if !ids.is_empty() {
                            store.delete(ids[k % ids.len()]).unwrap();
                        }
                    }
                }
                kept.update(&store).unwrap();
                let mut fresh = PlacementMap::default();
                fresh.update(&store).unwrap();
                prop_assert_eq!(&kept.place, &fresh.place);
            }
        }
    }
}
