//! Simulated restore of one generation: its data chunks in trace order (the
//! order a real restore plans them in), each served by a held container or
//! else located in the canonical copy's container, through the same restore
//! policy the real restore runs (`cairn_engine::restore::policy`; today the
//! container LRU of `002_c5d78fa3332f6f9f.txt` §2). Counts
//! container reads and the speed factor (MB restored per container read);
//! each read is charged to the device model at the container's size.

use cairn_core::{ContainerId, FpMap, Result, TraceEvent, TraceSource};
use cairn_engine::container_log::ContainerStore;
use cairn_engine::meta_store::MetaOnlyStore;
use cairn_engine::restore::policy::{Access, ContainerLru, PlanStep, PolicyRun};

use crate::device::{DeviceModel, Stage};

#[derive(Debug, Default, Clone, Copy)]
pub struct RestoreResult {
    pub bytes: u64,
    pub containers_read: u64,
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
    capacity: usize,
) -> Result<RestoreResult> {
    let mut place: FpMap<ContainerId> = FpMap::default();
    for id in store.ids()? {
        if let Some(meta) = store.peek(id) {
            for d in &meta.descriptors {
                cairn_engine::canonical::place(&mut place, d.fp, id);
            }
        }
    }
    // The real restore's policy and resolution (`restore::policy`), over
    // metadata only: a read is charged to the device model.
    let mut run = PolicyRun::new(Box::new(ContainerLru::new(capacity)));
    let mut r = RestoreResult::default();
    let mut offset = 0;
    while let Some(ev) = src.next_event()? {
        let c = match ev {
            TraceEvent::Chunk(c) => c,
            TraceEvent::FileStart { .. } => {
                offset = 0;
                continue;
            }
            _ => continue,
        };
        r.bytes += c.size as u64;
        let step = PlanStep {
            fp: c.fp,
            size: c.size as u64,
            offset,
        };
        offset += c.size as u64;
        if run.held(&c.fp).is_none() && !place.contains_key(&c.fp) {
            continue;
        }
        let (id, access) = run.resolve(&step, &[], |fp| Ok(place[fp]))?;
        if let Access::Read { .. } = access {
            let meta = store.peek(id).expect("placed containers exist");
            r.containers_read += 1;
            model.charge(Stage::ContainerRead, meta.file_size);
            let fps = meta.descriptors.iter().map(|d| d.fp).collect();
            run.admitted(id, meta.file_size, fps);
        }
    }
    Ok(r)
}
