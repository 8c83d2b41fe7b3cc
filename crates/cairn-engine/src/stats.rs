//! Repository-wide statistics: DDFS's global compression (dedup), local
//! compression and total compression (§5.1), chunk counts, the lookup and
//! I/O counters summed over every backup, and fingerprint-index RAM per
//! indexed chunk.

use std::collections::HashMap;

use serde::Serialize;

use cairn_core::{ChunkKind, CountersSnapshot, Result};

use crate::catalog;
use crate::config::IndexKind;
use crate::index::disk_index::DiskIndex;
use crate::index::frugal::cuckoo::CuckooTable;
use crate::index::frugal::FrugalConfig;
use crate::index::summary_vector::SummaryVector;
use crate::keys;
use crate::repo::Repository;

#[derive(Debug, Serialize)]
pub struct RepoStats {
    pub snapshots: u64,
    /// Bytes of file content over all snapshots (before dedup).
    pub logical_bytes: u64,
    /// Raw bytes of the distinct data chunks stored (after dedup, before compression).
    pub stored_bytes: u64,
    /// Bytes of those chunks as stored (after local compression).
    pub compressed_bytes: u64,
    /// Bytes of all container files (with metadata sections and recipe chunks).
    pub container_bytes: u64,
    /// Global compression: logical / stored.
    pub dedup_ratio: f64,
    /// Local compression: stored / compressed.
    pub compression_ratio: f64,
    /// Total compression: logical / compressed (= dedup_ratio * compression_ratio).
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
    let mut kinds: HashMap<ChunkKind, u64> = HashMap::new();
    let (mut stored, mut compressed, mut container_bytes, mut unique) = (0, 0, 0, 0);
    let ids = repo.log.ids()?;
    for &id in &ids {
        let meta = repo.log.read_meta(id)?;
        container_bytes += meta.file_size;
        for d in &meta.descriptors {
            unique += 1;
            *kinds.entry(d.kind).or_default() += 1;
            if d.kind == ChunkKind::Data {
                stored += d.raw_len as u64;
                compressed += d.stored_len as u64;
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
            .read(&keys::bloom(disk.generation()))
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
    let last = snaps.last().map(|s| &s.record.stats);
    let last_secs = last.map_or(0.0, |s| s.duration_ns as f64 / 1e9);
    Ok(RepoStats {
        snapshots: snaps.len() as u64,
        logical_bytes: logical,
        stored_bytes: stored,
        compressed_bytes: compressed,
        container_bytes,
        dedup_ratio: ratio(logical, stored),
        compression_ratio: ratio(stored, compressed),
        total_compression: ratio(logical, compressed),
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
    })
}
