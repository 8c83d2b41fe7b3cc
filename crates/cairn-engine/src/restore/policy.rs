//! The restore-policy seam: given the plan (the restore's chunks in order,
//! each with the container holding it), a policy decides which containers
//! are read and which are kept (`002_c5d78fa3332f6f9f.txt` §2). It decides
//! over container ids only, so the real restore (which then reads, verifies
//! and writes the bytes) and the simulator (which charges the device model)
//! run the same policy and count the same container reads.
//!
//! [`ContainerLru`] is the first policy: "container-based caching", an LRU of
//! whole containers. Chunk LRU, forward assembly, ALACC and Belady plug in
//! behind [`RestorePolicy`] (issue 10); the look-ahead `window` is there for
//! them.

use std::collections::{BTreeMap, HashMap};

use cairn_core::{ContainerId, Fingerprint};
use serde::Serialize;

/// One data chunk of the restore, in restore order. Its container is
/// resolved when the step comes up ([`PolicyRun::resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanStep {
    pub fp: Fingerprint,
    /// Raw bytes.
    pub size: u64,
    /// Where the chunk goes in its file.
    pub offset: u64,
}

/// What a policy decided for the next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The container is held: no read.
    Hit,
    /// Read the step's container (and hold it), first dropping these.
    Read { evict: Vec<ContainerId> },
}

/// What a policy did over a restore.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PolicyStats {
    pub policy: String,
    pub container_reads: u64,
    /// Bytes of the containers read (their file sizes).
    pub bytes_read: u64,
    /// Most containers held at once.
    pub peak_containers: u64,
}

pub trait RestorePolicy: Send {
    /// The next step's chunk is to be read from `container`; `window` holds
    /// the steps after it that the plan knows (possibly none).
    fn access(&mut self, container: ContainerId, window: &[PlanStep]) -> Access;

    /// The container of the last `Read` was read, `size` bytes.
    fn read_done(&mut self, size: u64);

    fn stats(&self) -> PolicyStats;
}

/// LRU over whole containers (002 §2 "container-based caching"): a miss
/// reads the container and keeps it, evicting the least recently used one
/// when `capacity` containers are held.
pub struct ContainerLru {
    capacity: usize,
    held: HashMap<ContainerId, u64>,
    lru: BTreeMap<u64, ContainerId>,
    tick: u64,
    stats: PolicyStats,
}

impl ContainerLru {
    pub fn new(capacity: usize) -> Self {
        ContainerLru {
            capacity: capacity.max(1),
            held: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            stats: PolicyStats {
                policy: "container-lru".into(),
                ..Default::default()
            },
        }
    }
}

impl RestorePolicy for ContainerLru {
    fn access(&mut self, id: ContainerId, _window: &[PlanStep]) -> Access {
        self.tick += 1;
        if let Some(old) = self.held.insert(id, self.tick) {
            self.lru.remove(&old);
            self.lru.insert(self.tick, id);
            return Access::Hit;
        }
        self.lru.insert(self.tick, id);
        let mut evict = Vec::new();
        while self.held.len() > self.capacity {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            self.held.remove(&victim);
            evict.push(victim);
        }
        self.stats.container_reads += 1;
        self.stats.peak_containers = self.stats.peak_containers.max(self.held.len() as u64);
        Access::Read { evict }
    }

    fn read_done(&mut self, size: u64) {
        self.stats.bytes_read += size;
    }

    fn stats(&self) -> PolicyStats {
        self.stats.clone()
    }
}

/// The policy plus which chunks the held containers hold: the one place
/// where a step's container is resolved, for the real restore and the
/// simulator alike. A chunk in a held container is served from it (any
/// copy is verified on the way out); otherwise `locate` names the canonical
/// copy (the index, or the containers' metadata when the index is
/// damaged).
pub struct PolicyRun {
    policy: Box<dyn RestorePolicy>,
    by_fp: cairn_core::FpMap<ContainerId>,
    held_fps: HashMap<ContainerId, Vec<Fingerprint>>,
}

impl PolicyRun {
    pub fn new(policy: Box<dyn RestorePolicy>) -> Self {
        PolicyRun {
            policy,
            by_fp: Default::default(),
            held_fps: HashMap::new(),
        }
    }

    /// The container that serves `step`, and whether it must be read.
    pub fn resolve(
        &mut self,
        step: &PlanStep,
        window: &[PlanStep],
        locate: impl FnOnce(&Fingerprint) -> cairn_core::Result<ContainerId>,
    ) -> cairn_core::Result<(ContainerId, Access)> {
        let id = match self.by_fp.get(&step.fp) {
            Some(&id) => id,
            None => locate(&step.fp)?,
        };
        Ok((id, self.access(id, window)))
    }

    /// Asks the policy about `id` directly (a fallback container).
    pub fn access(&mut self, id: ContainerId, window: &[PlanStep]) -> Access {
        let a = self.policy.access(id, window);
        if let Access::Read { evict } = &a {
            for victim in evict {
                self.forget(*victim);
            }
        }
        a
    }

    /// Container `id` (`size` bytes, holding `fps`) was read and is held.
    pub fn admitted(&mut self, id: ContainerId, size: u64, fps: Vec<Fingerprint>) {
        self.policy.read_done(size);
        for fp in &fps {
            self.by_fp.insert(*fp, id);
        }
        self.held_fps.insert(id, fps);
    }

    /// Whether a held container holds `fp`, and which.
    pub fn held(&self, fp: &Fingerprint) -> Option<ContainerId> {
        self.by_fp.get(fp).copied()
    }

    fn forget(&mut self, id: ContainerId) {
        for fp in self.held_fps.remove(&id).unwrap_or_default() {
            if self.by_fp.get(&fp) == Some(&id) {
                self.by_fp.remove(&fp);
            }
        }
    }

    pub fn stats(&self) -> PolicyStats {
        self.policy.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_reads_once_per_residency_and_evicts_the_least_recent() {
        let mut p = ContainerLru::new(2);
        let mut reads = Vec::new();
        for c in [1, 2, 1, 3, 2, 1] {
            if let Access::Read { evict } = p.access(ContainerId(c), &[]) {
                reads.push((c, evict));
            }
        }
        // 1, 2 read; 1 hit; 3 evicts 2; 2 evicts 1; 1 evicts 3.
        assert_eq!(
            reads,
            vec![
                (1, vec![]),
                (2, vec![]),
                (3, vec![ContainerId(2)]),
                (2, vec![ContainerId(1)]),
                (1, vec![ContainerId(3)]),
            ]
        );
        assert_eq!(p.stats().container_reads, 5);
        assert_eq!(p.stats().peak_containers, 2);
    }
}
