//! `cairn stats`: repository statistics.

use std::process::ExitCode;

use anyhow::Result;

use cairn_engine::Repository;

use crate::encryption::read_lock;
use crate::globals::Globals;
use crate::output::bytes;

pub fn run(cli: &Globals, repo: &Repository) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let s = cairn_engine::stats::stats(repo)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("snapshots:              {}", s.snapshots);
    println!("logical bytes:          {}", bytes(s.logical_bytes));
    println!("stored after dedup:     {}", bytes(s.stored_bytes));
    println!("stored after compress:  {}", bytes(s.compressed_bytes));
    println!(
        "container files:        {} in {} containers",
        bytes(s.container_bytes),
        s.containers
    );
    println!("dedup ratio (global):   {:.2}x", s.dedup_ratio);
    println!("compression (local):    {:.2}x", s.compression_ratio);
    println!("total compression:      {:.2}x", s.total_compression);
    let d = &s.on_disk;
    println!(
        "on disk:                {} = data {} + metadata {} + index {} + filter {} + snapshots {} + other {}",
        bytes(d.total),
        bytes(d.data),
        bytes(d.metadata),
        bytes(d.index),
        bytes(d.filter),
        bytes(d.snapshots),
        bytes(d.other)
    );
    println!(
        "total compression, all bytes on disk: {:.2}x",
        s.on_disk_total_compression
    );
    println!(
        "chunks:                 {} referenced, {} unique ({} data, {} tree, {} listing)",
        s.chunks, s.unique_chunks, s.data_chunks, s.tree_chunks, s.meta_chunks
    );
    let c = &s.counters;
    println!(
        "lookups (all backups):  {} cache hits, {} bloom negatives, {} index page reads, {} prefetches",
        c.cache_hits, c.bloom_negatives, c.index_page_reads, c.prefetches
    );
    println!(
        "index RAM per chunk:    {:.2} bytes",
        s.index_ram_bytes_per_chunk
    );
    println!(
        "last backup:            {:.2}s ({:.1} MB/s)",
        s.last_backup_seconds, s.last_backup_mb_per_s
    );
    let phases: Vec<String> = s
        .last_backup_phases
        .iter()
        .filter(|(k, _)| k.as_str() != "total")
        .map(|(k, v)| format!("{k} {v:.2}s"))
        .collect();
    if !phases.is_empty() {
        println!("  per phase:            {}", phases.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
