//! `cairn stats` as text: every figure says what it counts, in which unit,
//! and whether it is logical (what the snapshots hold), referenced (the
//! distinct data they use) or stored (what the containers hold, unreferenced
//! data included until a garbage collection). docs/everyday.md, "stats".

use cairn_engine::stats::RepoStats;

use crate::output::bytes;

/// The lines `cairn stats` prints.
pub fn lines(s: &RepoStats) -> Vec<String> {
    let d = &s.on_disk;
    let c = &s.counters;
    let mut out = vec![
        format!("snapshots:                                   {}", s.snapshots),
        "referenced by the snapshots:".to_string(),
        format!(
            "  logical (file content, each snapshot whole): {}",
            bytes(s.logical_bytes)
        ),
        format!(
            "  unique data, before compression:           {} in {} data chunks",
            bytes(s.referenced_unique_bytes),
            s.referenced_data_chunks
        ),
        format!(
            "  unique data, as stored (compressed):       {}",
            bytes(s.referenced_compressed_bytes)
        ),
        "stored in the repository:".to_string(),
        format!(
            "  data chunks, before compression:           {} (unreferenced or duplicate until gc: {})",
            bytes(s.stored_bytes),
            bytes(s.unreferenced_bytes)
        ),
        format!(
            "  data chunks, as stored (compressed):       {}",
            bytes(s.compressed_bytes)
        ),
        format!(
            "  container files:                           {} in {} containers",
            bytes(s.container_bytes),
            s.containers
        ),
        format!(
            "  on disk, all objects:                      {} = data {} + metadata {} + index {} + filter {} + snapshots {} + other {}",
            bytes(d.total),
            bytes(d.data),
            bytes(d.metadata),
            bytes(d.index),
            bytes(d.filter),
            bytes(d.snapshots),
            bytes(d.other)
        ),
        match &s.newest_restore {
            Some(e) => format!(
                "newest snapshot's restore:                   {} container reads for {} ({:.2} per MB; speed factor {:.2} MB per read)",
                e.container_reads,
                bytes(e.bytes),
                e.reads_per_mb(),
                e.speed_factor()
            ),
            None => "newest snapshot's restore:                   no snapshots".to_string(),
        },
        format!(
            "dedup ratio (logical / unique):              {:.2}x",
            s.dedup_ratio
        ),
        format!(
            "compression ratio (unique / compressed):     {:.2}x",
            s.compression_ratio
        ),
        format!(
            "total ratio (logical / unique compressed):   {:.2}x",
            s.total_compression
        ),
        format!(
            "total ratio (logical / all bytes on disk):   {:.2}x",
            s.on_disk_total_compression
        ),
        format!(
            "chunk references in the snapshots:           {} (data, tree and listing chunks, with repeats)",
            s.chunks
        ),
        format!(
            "distinct chunks stored:                      {} ({} data, {} tree, {} listing)",
            s.unique_chunks, s.data_chunks, s.tree_chunks, s.meta_chunks
        ),
        format!(
            "index lookups, all backups:                  {} cache hits, {} Bloom filter negatives, {} index page reads, {} prefetches",
            c.cache_hits, c.bloom_negatives, c.index_page_reads, c.prefetches
        ),
        format!(
            "index memory per indexed chunk:              {:.2} bytes",
            s.index_ram_bytes_per_chunk
        ),
        format!(
            "newest backup:                               {:.2} s ({:.1} MB/s of logical bytes)",
            s.last_backup_seconds, s.last_backup_mb_per_s
        ),
    ];
    let phases: Vec<String> = s
        .last_backup_phases
        .iter()
        .filter(|(k, _)| k.as_str() != "total")
        .map(|(k, v)| format!("{k} {v:.2} s"))
        .collect();
    if !phases.is_empty() {
        out.push(format!(
            "  seconds per phase:                         {}",
            phases.join(", ")
        ));
    }
    out
}
