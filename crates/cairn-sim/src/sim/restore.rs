//! Simulated restore of one generation: its data chunks in trace order, each
//! located in the container that holds it (the newest copy, as the index
//! resolves duplicates), read through a container-granularity LRU of a given
//! capacity (`002_c5d78fa3332f6f9f.txt` §2, container-based caching). Counts
//! container reads and the speed factor (MB restored per container read);
//! each read is charged to the device model at the container's size.

use std::collections::{BTreeMap, HashMap};

use cairn_core::{ContainerId, FpMap, Result, TraceEvent, TraceSource};
use cairn_engine::container_log::ContainerStore;
use cairn_engine::meta_store::MetaOnlyStore;

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
    let mut size: HashMap<ContainerId, u64> = HashMap::new();
    for id in store.ids()? {
        if let Some(meta) = store.peek(id) {
            size.insert(id, meta.file_size);
            for d in &meta.descriptors {
                cairn_engine::canonical::place(&mut place, d.fp, id);
            }
        }
    }
    let capacity = capacity.max(1);
    let mut cached: HashMap<ContainerId, u64> = HashMap::new();
    let mut lru: BTreeMap<u64, ContainerId> = BTreeMap::new();
    let mut tick = 0u64;
    let mut r = RestoreResult::default();
    while let Some(ev) = src.next_event()? {
        let TraceEvent::Chunk(c) = ev else { continue };
        r.bytes += c.size as u64;
        let Some(&id) = place.get(&c.fp) else {
            continue;
        };
        tick += 1;
        if let Some(old) = cached.insert(id, tick) {
            lru.remove(&old);
        } else {
            r.containers_read += 1;
            model.charge(Stage::ContainerRead, size[&id]);
            if cached.len() > capacity {
                if let Some((_, victim)) = lru.pop_first() {
                    cached.remove(&victim);
                }
            }
        }
        lru.insert(tick, id);
    }
    Ok(r)
}
