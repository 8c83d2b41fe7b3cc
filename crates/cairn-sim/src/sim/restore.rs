//! Simulated restore of one generation: its data chunks in trace order (the
//! order a real restore plans them in, in plans spanning files closed by
//! the same rule), each served by a held container or
//! else located in the canonical copy's container, through the same restore
//! policy the real restore runs (`cairn_engine::read::policy`, one of the
//! five of `002_c5d78fa3332f6f9f.txt` §2). Counts
//! container reads and the speed factor (MB restored per container read);
//! each read is charged to the device model at the container's size.

use cairn_core::{ContainerId, FpMap, Result, TraceEvent, TraceSource};
use cairn_engine::container_log::ContainerStore;
use cairn_engine::meta_store::MetaOnlyStore;
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

pub fn simulate(
    src: &mut dyn TraceSource,
    store: &MetaOnlyStore,
    model: &DeviceModel,
    cache: CacheOptions,
    unit: u64,
) -> Result<RestoreResult> {
    let mut place: FpMap<ContainerId> = FpMap::default();
    for id in store.ids()? {
        if let Some(meta) = store.peek(id)? {
            for d in &meta.descriptors {
                cairn_engine::canonical::place(&mut place, d.fp, id);
            }
        }
    }
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
                // Chunks no container holds (none in a complete trace) are
                // not planned.
                if place.contains_key(&c.fp) {
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
    place: &FpMap<ContainerId>,
    store: &MetaOnlyStore,
    model: &DeviceModel,
    r: &mut RestoreResult,
) -> Result<()> {
    r.containers_read += run.run_described(plan, &mut |fp, chunks| {
        let id = place[fp];
        let meta = store.peek(id)?.expect("placed containers exist");
        model.charge(Stage::ContainerRead, meta.file_size);
        ContainerChunk::of_container(&meta, chunks);
        Ok((id, meta.file_size))
    })?;
    Ok(())
}
