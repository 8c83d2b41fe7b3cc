//! Extraction: serves each plan step's chunk from the containers the policy
//! holds, reading the ones it asks for, and decompresses and verifies every
//! chunk against its fingerprint on the way out (a damaged container is
//! detected at the chunk it damages).
//!
//! The index is derived data: when the container it names is gone, damaged
//! or lacks the chunk, the containers' own metadata decide where the chunk
//! is (`ChunkStore::locate_in_containers`), and that read goes through the
//! policy too.

use std::collections::HashMap;

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};

use super::cache::ChunkStore;
use super::policy::{Access, PlanStep, PolicyRun, PolicyStats, RestorePolicy};
use crate::container_log::LoadedContainer;

struct Held {
    c: LoadedContainer,
    pos: FpMap<usize>,
}

pub struct Extractor {
    run: PolicyRun,
    held: HashMap<ContainerId, Held>,
}

impl Extractor {
    pub fn new(policy: Box<dyn RestorePolicy>) -> Self {
        Extractor {
            run: PolicyRun::new(policy),
            held: HashMap::new(),
        }
    }

    pub fn stats(&self) -> PolicyStats {
        self.run.stats()
    }

    /// Writes the verified raw bytes of `step`'s chunk into `out`.
    pub fn fetch(
        &mut self,
        store: &ChunkStore,
        step: &PlanStep,
        window: &[PlanStep],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let (id, access) = self.run.resolve(step, window, |fp| store.locate(fp))?;
        let id = match self.admit(store, id, access) {
            Ok(()) if self.holds(id, &step.fp) => id,
            // Gone, damaged, or not holding the chunk: ask the containers.
            first => {
                let Ok(other) = store.locate_in_containers(&step.fp, Some(id)) else {
                    first?;
                    return Err(missing_here(&step.fp));
                };
                let access = self.run.access(other, window);
                self.admit(store, other, access)?;
                other
            }
        };
        let h = &self.held[&id];
        let i = *h.pos.get(&step.fp).ok_or_else(|| missing_here(&step.fp))?;
        store.extract(&h.c, &h.c.meta.descriptors[i], out)
    }

    fn holds(&self, id: ContainerId, fp: &Fingerprint) -> bool {
        self.held.get(&id).is_some_and(|h| h.pos.contains_key(fp))
    }

    /// Applies the policy's decision for container `id`: evictions, then
    /// the read. A container the policy holds but whose earlier read failed
    /// is read again.
    fn admit(&mut self, store: &ChunkStore, id: ContainerId, access: Access) -> Result<()> {
        if let Access::Read { evict } = &access {
            for v in evict {
                self.held.remove(v);
            }
        }
        if self.held.contains_key(&id) {
            return Ok(());
        }
        let c = store.log.read(id)?;
        let pos: FpMap<usize> = c
            .meta
            .descriptors
            .iter()
            .enumerate()
            .map(|(i, d)| (d.fp, i))
            .collect();
        let fps = c.meta.descriptors.iter().map(|d| d.fp).collect();
        self.run.admitted(id, c.meta.file_size, fps);
        self.held.insert(id, Held { c, pos });
        Ok(())
    }
}

fn missing_here(fp: &Fingerprint) -> Error {
    Error::corrupt(
        "repository",
        format!("index places chunk {fp} in a container that does not hold it"),
    )
}
