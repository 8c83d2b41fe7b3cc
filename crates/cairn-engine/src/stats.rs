//! Repository-wide statistics: DDFS's global compression (dedup), local
//! compression and total compression (§5.1), chunk counts, the lookup and
//! I/O counters summed over every backup, and fingerprint-index RAM per
//! indexed chunk.
//!
//! Two views of the data chunks, which differ until a garbage collection:
//! what the snapshots **reference** (found by walking every snapshot: the
//! distinct chunks, counted once each) and what the containers **store**
//! (every chunk in them, including those only forgotten snapshots used
//! and the duplicates that rewriting or deferred dedup stored again). The
//! ratios are taken over the referenced view, so that the logical bytes
//! (what the snapshots hold, counted per snapshot) are never below the
//! unique bytes they reference and the dedup ratio is never below 1.

use std::collections::HashMap;

use serde::Serialize;

use cairn_core::{ChunkKind, CountersSnapshot, Fingerprint, FpSet, Result};
use cairn_format::dir::BlobRef;

use crate::catalog;
use crate::config::IndexKind;
use crate::index::disk_index::DiskIndex;
use crate::index::frugal::cuckoo::CuckooTable;
use crate::index::frugal::FrugalConfig;
use crate::index::summary_vector::SummaryVector;
use crate::object_names;
use crate::reachability::{At, Reachability, Visitor};
use crate::repo::Repository;

#[derive(Debug, Serialize)]
pub struct RepoStats {
    pub snapshots: u64,
    /// Bytes of file content the snapshots hold, each snapshot counted in
    /// full (before dedup): what a restore of every snapshot would write.
    pub logical_bytes: u64,
    /// Raw bytes of the distinct data chunks the snapshots reference, each
    /// counted once (after dedup, before compression). Never above
    /// `logical_bytes`.
    pub referenced_unique_bytes: u64,
    /// Those chunks' bytes as stored (after local compression).
    pub referenced_compressed_bytes: u64,
    /// Distinct data chunks the snapshots reference.
    pub referenced_data_chunks: u64,
    /// Raw bytes of every data chunk in the containers (before compression),
    /// referenced or not: includes chunks only forgotten snapshots used and
    /// duplicates stored again, until a garbage collection.
    pub stored_bytes: u64,
    /// Bytes of those chunks as stored (after local compression).
    pub compressed_bytes: u64,
    /// Raw bytes of stored data chunks no snapshot references, or stored
    /// more than once (`stored_bytes - referenced_unique_bytes`): what a
    /// garbage collection can remove.
    pub unreferenced_bytes: u64,
    /// Bytes of all container files (with metadata sections and recipe chunks).
    pub container_bytes: u64,
    /// Global compression: logical / referenced unique (at least 1).
    pub dedup_ratio: f64,
    /// Local compression: referenced unique / referenced compressed.
    pub compression_ratio: f64,
    /// Total compression: logical / referenced compressed (= dedup_ratio *
    /// compression_ratio).
    pub total_compression: f64,
    /// Chunk references over all snapshots (data, tree and listing chunks).
    pub chunks: u64,
    /// Distinct chunks stored.
    pub unique_chunks: u64,
    pub data_chunks: u64,
    pub tree_chunks: u64,
    pub meta_chunks: u64,
    pub containers: u64,
    /// Fingerprints in the on-disk index.
    pub indexed_chunks: u64,
    /// Duplicate data chunks stored again by rewrite schemes over all
    /// snapshots (`002_c5d78fa3332f6f9f.txt`), and their raw bytes (part of
    /// `stored_bytes`: the dedup ratio is net of them).
    pub rewritten_chunks: u64,
    pub rewritten_bytes: u64,
    /// Summary Vector bytes per indexed chunk (the in-memory index part is empty at rest).
    pub index_ram_bytes_per_chunk: f64,
    #[serde(flatten)]
    pub counters: CountersSnapshot,
    /// Time spent and throughput of the newest backup.
    pub last_backup_seconds: f64,
    pub last_backup_mb_per_s: f64,
    /// Seconds per pipeline phase of the newest backup.
    pub last_backup_phases: std::collections::BTreeMap<String, f64>,
    /// Bytes of every object of the repository, by kind.
    pub on_disk: OnDisk,
    /// logical / all bytes on disk (metadata, index and filter included),
    /// beside `total_compression`, which counts data chunks only.
    pub on_disk_total_compression: f64,
    /// The newest snapshot's restore as the default restore policy would
    /// make it (`restore_estimate`): its container reads and their count
    /// per MB restored, the measure of its fragmentation (issue 34).
    pub newest_restore: Option<crate::restore_estimate::RestoreEstimate>,
    pub newest_container_reads_per_mb: f64,
}

/// Bytes the repository's objects occupy, by kind (lock files and
/// temporaries aside).
#[derive(Debug, Default, Serialize)]
pub struct OnDisk {
    /// Data chunks as stored (compressed).
    pub data: u64,
    /// The rest of the container files: directory listings, recipe nodes,
    /// metadata sections, headers (and in an encrypted repository the
    /// sealed blocks' nonces and tags).
    pub metadata: u64,
    /// The paged index (files and deltas) and the frugal index's log.
    pub index: u64,
    /// Summary Vector checkpoints.
    pub filter: u64,
    pub snapshots: u64,
    /// Config and garbage-collection state.
    pub other: u64,
    pub total: u64,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

pub fn stats(repo: &Repository) -> Result<RepoStats> {
    let (snaps, _) = catalog::list(&**repo.backend())?;
    let mut counters = CountersSnapshot::default();
    let mut logical = 0;
    let mut chunk_refs = 0;
    let (mut rewritten_chunks, mut rewritten_bytes) = (0, 0);
    for s in &snaps {
        rewritten_chunks += s.record.stats.rewritten_data_chunks;
        rewritten_bytes += s.record.stats.rewritten_data_raw_bytes;
        logical += s.record.stats.logical_bytes;
        chunk_refs += s.record.stats.chunks;
        counters = counters.plus(&s.record.stats.counters);
    }
    let referenced = referenced_data(repo, &snaps)?;
    let mut kinds: HashMap<ChunkKind, u64> = HashMap::new();
    let (mut stored, mut compressed, mut container_bytes, mut unique) = (0, 0, 0, 0);
    // Each referenced chunk's sizes, taken from its first stored copy.
    let mut referenced_sizes: HashMap<Fingerprint, (u64, u64)> = HashMap::new();
    let ids = repo.log.ids()?;
    let sealed = repo.keys().is_some();
    for &id in &ids {
        let meta = repo.log.read_meta(id)?;
        // Encrypted, a container takes its sealed size on disk.
        container_bytes += if sealed {
            repo.backend().stored_size(&object_names::container(id))?
        } else {
            meta.file_size
        };
        for d in &meta.descriptors {
            unique += 1;
            *kinds.entry(d.kind).or_default() += 1;
            if d.kind == ChunkKind::Data {
                stored += d.raw_len as u64;
                compressed += d.stored_len as u64;
                if referenced.contains(&d.fp) {
                    referenced_sizes
                        .entry(d.fp)
                        .or_insert((d.raw_len as u64, d.stored_len as u64));
                }
            }
        }
    }
    let disk = DiskIndex::open(repo.backend().clone(), repo.counters.clone())?;
    let indexed = disk.entry_count();
    // What the dedup path's filter occupies in RAM while a backup runs: the
    // Summary Vector as checkpointed, or a frugal table sized for the index.
    let bloom_bytes = match repo.config.index.kind {
        IndexKind::Paged => repo
            .backend()
            .read(&object_names::bloom(disk.generation()))
            .ok()
            .and_then(|b| SummaryVector::from_checkpoint(&b).ok())
            .map_or(0, |(sv, _)| sv.ram_bytes()),
        IndexKind::Frugal => {
            let f = FrugalConfig::default();
            CuckooTable::ram_bytes_for(
                (indexed as usize).max(f.expected_chunks),
                f.bucket_slots,
                f.max_load,
            ) as u64
        }
    };
    let (ref_unique, ref_compressed) = referenced_sizes
        .values()
        .fold((0, 0), |(r, c), (raw, st)| (r + raw, c + st));
    let on_disk = on_disk(repo, compressed, container_bytes)?;
    let newest_restore = snaps
        .last()
        .map(|s| crate::restore_estimate::estimate(repo, &s.record, Default::default()))
        .transpose()?;
    let last = snaps.last().map(|s| &s.record.stats);
    let last_secs = last.map_or(0.0, |s| s.duration_ns as f64 / 1e9);
    Ok(RepoStats {
        snapshots: snaps.len() as u64,
        logical_bytes: logical,
        referenced_unique_bytes: ref_unique,
        referenced_compressed_bytes: ref_compressed,
        referenced_data_chunks: referenced_sizes.len() as u64,
        stored_bytes: stored,
        compressed_bytes: compressed,
        unreferenced_bytes: stored.saturating_sub(ref_unique),
        container_bytes,
        dedup_ratio: ratio(logical, ref_unique),
        compression_ratio: ratio(ref_unique, ref_compressed),
        total_compression: ratio(logical, ref_compressed),
        chunks: chunk_refs,
        unique_chunks: unique,
        data_chunks: kinds.get(&ChunkKind::Data).copied().unwrap_or(0),
        tree_chunks: kinds.get(&ChunkKind::Tree).copied().unwrap_or(0),
        meta_chunks: kinds.get(&ChunkKind::Meta).copied().unwrap_or(0),
        containers: ids.len() as u64,
        indexed_chunks: indexed,
        rewritten_chunks,
        rewritten_bytes,
        index_ram_bytes_per_chunk: ratio(bloom_bytes, indexed),
        counters,
        last_backup_seconds: last_secs,
        last_backup_phases: last.map(|s| s.phases.clone()).unwrap_or_default(),
        last_backup_mb_per_s: if last_secs > 0.0 {
            last.map_or(0, |s| s.logical_bytes) as f64 / 1e6 / last_secs
        } else {
            0.0
        },
        on_disk_total_compression: ratio(logical, on_disk.total),
        on_disk,
        newest_container_reads_per_mb: newest_restore.map_or(0.0, |e| e.reads_per_mb()),
        newest_restore,
    })
}

/// The distinct data chunks the snapshots reference: every snapshot's
/// tree walked, each sound subtree once. A listing or recipe node that
/// cannot be read is an error (`cairn check` names it).
fn referenced_data(repo: &Repository, snaps: &[catalog::SnapshotInfo]) -> Result<FpSet> {
    struct Referenced {
        reader: crate::read::Reader,
        data: FpSet,
        error: Option<cairn_core::Error>,
    }
    impl Visitor for Referenced {
        fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
            self.data.insert(*fp);
            true
        }
        fn read(&mut self, fp: &Fingerprint, _level: u8, _at: At<'_>) -> Option<Vec<u8>> {
            let mut out = Vec::new();
            match self.reader.read_chunk(fp, &mut out) {
                Ok(()) => Some(out),
                Err(e) => {
                    self.error.get_or_insert(e);
                    None
                }
            }
        }
        fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
            self.error.get_or_insert(cairn_core::Error::corrupt(
                format!("snapshot {} at {}", at.snapshot, at.path),
                message,
            ));
        }
    }
    let mut v = Referenced {
        reader: crate::read::Reader::open(repo, Default::default())?,
        data: FpSet::default(),
        error: None,
    };
    let mut walk = Reachability::new(repo.config.fp_width());
    for s in snaps {
        walk.walk_snapshot(&s.id, &BlobRef::try_from(&s.record.root)?, &mut v);
        if let Some(e) = v.error.take() {
            return Err(e);
        }
    }
    Ok(v.data)
}

/// Sizes every object outside the container log (whose bytes the caller
/// summed from metadata already) and splits the container bytes into data
/// and the rest.
fn on_disk(repo: &Repository, data: u64, container_bytes: u64) -> Result<OnDisk> {
    let backend = repo.backend();
    let mut d = OnDisk {
        data,
        metadata: container_bytes.saturating_sub(data),
        ..OnDisk::default()
    };
    for key in backend.list("")? {
        if key.starts_with(object_names::CONTAINERS) {
            continue;
        }
        let size = match backend.stored_size(&key) {
            Ok(n) => n,
            // Removed since it was listed (a concurrent commit).
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        let slot = if key.starts_with(object_names::INDEX)
            || key.starts_with(crate::index::frugal::log::LOG_PREFIX)
        {
            &mut d.index
        } else if key.starts_with(object_names::BLOOM) {
            &mut d.filter
        } else if key.starts_with(object_names::SNAPSHOTS) {
            &mut d.snapshots
        } else {
            &mut d.other
        };
        *slot += size;
    }
    d.total = d.data + d.metadata + d.index + d.filter + d.snapshots + d.other;
    Ok(d)
}
