//! `repair index`: rebuilds every piece of derived data (the paged index, its
//! Summary Vector checkpoint, the frugal chunk log) from the containers'
//! own metadata sections, the way DDFS §4.1 recovers the Summary Vector
//! from the segment index, one level further down.
//!
//! ```text
//! repair_index(read_data):
//!     for each container, ascending id:
//!         meta <- its metadata section (with read_data: the whole container,
//!                 every chunk decompressed and rehashed)
//!         unreadable -> lost container (reported; its chunks leave the index)
//!         damaged data (read_data) -> salvage: its sound chunks are copied
//!                 into a new container (durable before anything else
//!                 changes), the damaged ones are dropped
//!         else       -> entries += (fp, container) for each chunk
//!     delete index/, bloom/, the frugal log       (derived: safe to lose)
//!     write one index generation of entries (newest copy wins), covering
//!         every container allocated so far; its Summary Vector checkpoint
//!     delete the salvaged containers              (their replacements are
//!                                                  durable and indexed)
//! ```
//!
//! Salvage matters because a damaged chunk left listed in a container's
//! metadata section would keep deduplicating through the locality cache
//! (DDFS §4.3 loads whole sections): only removing it from every section
//! makes the next backup store it again.
//!
//! What is lost stays visible: chunks that were only in lost or damaged
//! containers are no longer indexed, so the next backup that meets them
//! stores them again, and `check` names the older snapshots that reference
//! them. The writer lock is held throughout; readers are never blocked (an
//! index missing for a moment is derived data, and they fall back to the
//! containers).

use serde::Serialize;

use cairn_core::{ContainerId, Result};
use cairn_format::container::ContainerWriter;
use cairn_format::index::IndexEntry;

use crate::check::verify_chunk;
use crate::index::disk_index::DiskIndex;
use crate::index::summary_vector::SummaryVector;
use crate::index::{frugal, write_checkpoint};
use crate::object_names;
use crate::repo::{Repository, WriteLock};

#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub containers: u64,
    pub indexed_chunks: u64,
    /// Containers whose metadata could not be read, with the reason.
    pub lost_containers: Vec<(String, String)>,
    /// Chunks left out of the index because `--read-data` found them damaged.
    pub damaged_chunks: u64,
    /// Containers with damaged data whose sound chunks were copied into a
    /// new container before they were deleted: `(old, new)`.
    pub salvaged_containers: Vec<(String, Option<String>)>,
    pub index_generation: u64,
}

/// Rebuilds the index, Summary Vector checkpoint and frugal log from the
/// containers; the caller holds the writer lock.
pub fn repair_index(repo: &Repository, lock: &WriteLock, read_data: bool) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    let mut entries = Vec::new();
    let mut salvaged = Vec::new();
    let ids = repo.log.ids()?;
    // The containers present decide here: a container-id mark left below
    // them (`id_mark.rs`) would hand their ids out again, so it is raised.
    if let Some(top) = ids.last() {
        repo.log.refresh_next_id(ContainerId(top.0 + 1))?;
    }
    for id in ids {
        // A safe point until the old index is deleted below.
        crate::interrupt::check(|| {
            "nothing changed: the index was not replaced (containers salvaged so far are \
             duplicates that the next repair or collection reclaims)"
                .into()
        })?;
        report.containers += 1;
        let found = if read_data {
            repo.log.read(id).and_then(|c| {
                let sound: Vec<_> = c
                    .meta
                    .descriptors
                    .iter()
                    .filter(|d| verify_chunk(repo, &c.bytes, &c.meta, d).is_ok())
                    .copied()
                    .collect();
                let damaged = c.meta.descriptors.len() - sound.len();
                report.damaged_chunks += damaged as u64;
                if damaged == 0 && c.data_ok {
                    return Ok((id, sound));
                }
                let new = salvage(repo, &c, &sound)?;
                report
                    .salvaged_containers
                    .push((id.to_string(), new.map(|n| n.to_string())));
                salvaged.push(id);
                Ok((
                    new.unwrap_or(id),
                    if new.is_some() { sound } else { Vec::new() },
                ))
            })
        } else {
            repo.log.read_meta(id).map(|m| (id, m.descriptors))
        };
        match found {
            Ok((at, descriptors)) => entries.extend(descriptors.into_iter().map(|d| IndexEntry {
                fp: d.fp,
                container: at,
            })),
            Err(e) if e.is_not_found() || crate::index::is_damage(&e) => {
                report.lost_containers.push((id.to_string(), e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }

    let backend = repo.backend();
    let last_generation = backend
        .list(object_names::INDEX)?
        .iter()
        .filter_map(|k| object_names::parse_generation(k, object_names::INDEX))
        .max()
        .unwrap_or(0);
    for prefix in [
        object_names::INDEX,
        object_names::BLOOM,
        frugal::log::LOG_PREFIX,
    ] {
        for key in backend.list(prefix)? {
            backend.delete(&key)?;
        }
    }
    // Every id below the allocation mark is covered: containers present were
    // read above, and lost ones must not be replayed.
    let covered = repo.log.next_id().max(ContainerId(1));
    let index = DiskIndex::open(backend.clone(), repo.counters.clone())?
        .with_generation_floor(last_generation);
    let cfg = &repo.config.index;
    let mut summary = SummaryVector::with_capacity(
        cfg.expected_chunks.max(entries.len() as u64 * 2),
        cfg.bloom_bits_per_chunk,
    );
    for e in &entries {
        summary.insert(&e.fp);
    }
    let generation = index.write_replacing(
        entries,
        covered,
        repo.config.fp_width(),
        cfg.page_size as usize,
    )?;
    write_checkpoint(&**backend, &summary, generation, covered)?;
    report.indexed_chunks = index.entry_count();
    report.index_generation = generation;
    // A restore may be reading a container about to go: wait for readers,
    // and keep new ones out until it is gone.
    let _readers_out = if salvaged.is_empty() {
        None
    } else {
        Some(repo.lock_out_readers(lock, true)?)
    };
    for id in salvaged {
        repo.log.delete(id)?;
    }
    Ok(report)
}

/// Copies the `sound` chunks of damaged container `c` into a new container
/// (written and durable when this returns); `None` if none is sound.
fn salvage(
    repo: &Repository,
    c: &crate::container_log::LoadedContainer,
    sound: &[cairn_format::container::Descriptor],
) -> Result<Option<ContainerId>> {
    if sound.is_empty() {
        return Ok(None);
    }
    let id = repo.log.allocate()?;
    let capacity = (repo.config.container_size as usize).max(c.bytes.len());
    let mut w = ContainerWriter::new(id, repo.config.fp_width(), capacity);
    for d in sound {
        let stored = cairn_format::container::stored_chunk(&c.bytes, &c.meta, d)?;
        w.push(d.fp, d.kind, d.level, d.codec, d.raw_len, stored);
    }
    repo.log.append(w)?;
    Ok(Some(id))
}
