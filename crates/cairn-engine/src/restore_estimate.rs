//! The container reads a snapshot's restore is expected to make (issue 34:
//! `stats` shows them for the newest snapshot, `experiment relayout`
//! measures re-layout with them). The snapshot is planned as a restore
//! plans it (files in walk order, each recipe flattened into its data
//! chunks, plans spanning files closed by the restore's rule,
//! `policy::plan_full`), each chunk located through the index, and the
//! restore policy (`002_c5d78fa3332f6f9f.txt` §2, forward assembly by
//! default) run over the containers' metadata alone: no chunk is read.
//! The count is what `cairn sim`'s restore simulation reports for a
//! simulated repository, here for a real one.

use std::collections::hash_map::{Entry, HashMap};

use cairn_core::{ContainerId, Result};
use cairn_format::dir::{BlobRef, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use crate::read::policy::{plan_full, ContainerChunk, PlanStep, PolicyRun};
use crate::read::{CacheOptions, Reader};
use crate::repo::Repository;

/// What a restore of one snapshot would read.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct RestoreEstimate {
    /// Bytes of file data restored.
    pub bytes: u64,
    /// Containers read (each read once per time the policy fetches it).
    pub container_reads: u64,
}

impl RestoreEstimate {
    /// 002's speed factor: MB restored per container read.
    pub fn speed_factor(&self) -> f64 {
        if self.container_reads == 0 {
            return 0.0;
        }
        self.bytes as f64 / 1e6 / self.container_reads as f64
    }

    /// Container reads per MB restored (the inverse).
    pub fn reads_per_mb(&self) -> f64 {
        if self.bytes == 0 {
            return 0.0;
        }
        self.container_reads as f64 / (self.bytes as f64 / 1e6)
    }
}

/// The container reads of restoring `snap` whole with `cache`.
pub fn estimate(
    repo: &Repository,
    snap: &SnapshotRecord,
    cache: CacheOptions,
) -> Result<RestoreEstimate> {
    let mut reader = Reader::open(repo, cache)?;
    let mut blobs: Vec<BlobRef> = Vec::new();
    reader.walk(snap, "", &mut |w| {
        if w.entry.kind == EntryKind::File {
            if let Some(b) = w.entry.content {
                blobs.push(b);
            }
        }
        Ok(())
    })?;
    let mut run = PolicyRun::new(
        cache.policy,
        cache.bytes,
        u64::from(repo.config.container_size),
    );
    let mut metas: HashMap<ContainerId, (u64, Vec<ContainerChunk>)> = HashMap::new();
    let mut est = RestoreEstimate::default();
    let mut plan: Vec<PlanStep> = Vec::new();
    let mut file = Vec::new();
    let mut files = 0;
    for (i, blob) in blobs.iter().enumerate() {
        file.clear();
        reader.plan_steps(blob, &mut file)?;
        if !file.is_empty() {
            files += 1;
        }
        est.bytes += file.iter().map(|s| s.size).sum::<u64>();
        plan.append(&mut file);
        if i + 1 == blobs.len() || plan_full(plan.len(), files) {
            est.container_reads += run.run_described(&plan, &mut |fp, chunks| {
                let id = reader.locate(fp)?;
                let (size, held) = match metas.entry(id) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => {
                        let meta = repo.log.read_meta(id)?;
                        let mut held = Vec::new();
                        ContainerChunk::of_container(&meta, &mut held);
                        e.insert((meta.file_size, held))
                    }
                };
                chunks.clone_from(held);
                Ok((id, *size))
            })?;
            plan.clear();
            files = 0;
        }
    }
    Ok(est)
}
