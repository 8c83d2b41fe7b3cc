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
//!         else       -> entries += (fp, container) for each sound chunk
//!     delete index/, bloom/, the frugal log       (derived: safe to lose)
//!     write one index generation of entries (newest copy wins), covering
//!         every container allocated so far; its Summary Vector checkpoint
//! ```
//!
//! What is lost stays visible: chunks that were only in lost or damaged
//! containers are no longer indexed, so the next backup that meets them
//! stores them again, and `check` names the older snapshots that reference
//! them. The writer lock is held throughout; readers are never blocked (an
//! index missing for a moment is derived data, and they fall back to the
//! containers).

use serde::Serialize;

use cairn_core::{ContainerId, Result};
use cairn_format::index::IndexEntry;

use crate::index::disk_index::DiskIndex;
use crate::index::summary_vector::SummaryVector;
use crate::index::{frugal, write_checkpoint};
use crate::keys;
use crate::repo::{Repository, WriteLock};

#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub containers: u64,
    pub indexed_chunks: u64,
    /// Containers whose metadata could not be read, with the reason.
    pub lost_containers: Vec<(String, String)>,
    /// Chunks left out of the index because `--read-data` found them damaged.
    pub damaged_chunks: u64,
    pub index_generation: u64,
}

/// Rebuilds the index, Summary Vector checkpoint and frugal log from the
/// containers; the caller holds the writer lock.
pub fn repair_index(repo: &Repository, _lock: &WriteLock, read_data: bool) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    let fingerprinter = repo.config.fingerprinter();
    let mut entries = Vec::new();
    for id in repo.log.ids()? {
        report.containers += 1;
        let meta = if read_data {
            repo.log.read(id).map(|c| {
                let sound: Vec<_> = c
                    .meta
                    .descriptors
                    .iter()
                    .filter(|d| {
                        let mut raw = Vec::new();
                        let ok = cairn_format::container::stored_chunk(&c.bytes, &c.meta, d)
                            .and_then(|s| {
                                cairn_format::compress::decompress(
                                    d.codec,
                                    s,
                                    d.raw_len as usize,
                                    &mut raw,
                                )
                            })
                            .is_ok()
                            && fingerprinter.of(&raw) == d.fp;
                        if !ok {
                            report.damaged_chunks += 1;
                        }
                        ok
                    })
                    .copied()
                    .collect();
                sound
            })
        } else {
            repo.log.read_meta(id).map(|m| m.descriptors)
        };
        match meta {
            Ok(descriptors) => entries.extend(descriptors.into_iter().map(|d| IndexEntry {
                fp: d.fp,
                container: id,
            })),
            Err(e) if e.is_not_found() || crate::index::is_damage(&e) => {
                report.lost_containers.push((id.to_string(), e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }

    let backend = repo.backend();
    for prefix in [keys::INDEX, keys::BLOOM, frugal::log::LOG_PREFIX] {
        for key in backend.list(prefix)? {
            backend.delete(&key)?;
        }
    }
    // Every id below the allocation mark is covered: containers present were
    // read above, and lost ones must not be replayed.
    let covered = repo.log.next_id().max(ContainerId(1));
    let index = DiskIndex::open(backend.clone(), repo.counters.clone())?;
    let cfg = &repo.config.index;
    let summary = SummaryVector::with_capacity(
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
    Ok(report)
}
