//! `commit`: what committing a small backup costs in a small and in a large
//! repository. A backup's commit writes the index; with index deltas it
//! writes what the backup added, not the whole index, so the cost should
//! not grow with the repository (issue 9's acceptance: a repository of
//! >= 1 M indexed chunks against one of 1/10 the size).
//!
//! Each repository (fixed 256-byte chunks, so a million chunks are 256 MiB)
//! is filled by one backup of unique random bytes on the local disk, then
//! `--backups` small backups of `--new` new chunks each are committed into
//! it. Reported per size: the best commit time of
//! the small backups (commit phase: seal, index, checkpoint, snapshot), the
//! mean bytes the commit wrote under `index/` and `bloom/` (deterministic,
//! unlike time), and the ratio large/small of both.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use cairn_core::ChunkerConfig;
use cairn_engine::{BackupOptions, Repository, Source};

/// Bytes per chunk: the repository uses fixed-size chunks this small, so a
/// million indexed chunks cost 256 MiB of data.
const CHUNK: usize = 256;

/// Backs up one file of `count` new chunks (unique random bytes, seeded by
/// `first`); returns the commit seconds and the bytes the commit wrote
/// under `index/` and `bloom/`.
fn backup(repo: &Path, data: &Path, first: u64, count: u64) -> Result<(f64, u64)> {
    let file = data.join("chunks");
    let mut bytes = vec![0u8; count as usize * CHUNK];
    blake3::Hasher::new()
        .update(&first.to_le_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    std::fs::write(&file, &bytes)?;
    drop(bytes);
    let before = derived_files(repo)?;
    let r = Repository::open_local(repo)?;
    let lock = r.lock_writer(false)?;
    let outcome = cairn_engine::backup(
        &r,
        &lock,
        BackupOptions {
            sources: vec![Source::Path(file.clone())],
            host: Some("cairn-bench".into()),
            ..Default::default()
        },
    )?;
    std::fs::remove_file(&file)?;
    let after = derived_files(repo)?;
    let written = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(_, (len, _))| len)
        .sum();
    Ok((outcome.phases.commit_seconds, written))
}

/// Files under `index/` and `bloom/`: name -> (length, modification time).
fn derived_files(repo: &Path) -> Result<HashMap<String, (u64, std::time::SystemTime)>> {
    let mut out = HashMap::new();
    for dir in ["index", "bloom"] {
        let Ok(entries) = std::fs::read_dir(repo.join(dir)) else {
            continue;
        };
        for e in entries {
            let e = e?;
            let m = e.metadata()?;
            out.insert(
                format!("{dir}/{}", e.file_name().to_string_lossy()),
                (m.len(), m.modified()?),
            );
        }
    }
    Ok(out)
}

struct SizeResult {
    indexed: u64,
    /// The index file after the fill: what a commit rewrote before deltas.
    index_file_bytes: u64,
    fill_seconds: f64,
    best_commit_seconds: f64,
    mean_commit_bytes: f64,
}

fn measure(dir: &Path, indexed: u64, new: u64, backups: u64) -> Result<SizeResult> {
    let repo = dir.join(format!("repo-{indexed}"));
    let _ = std::fs::remove_dir_all(&repo);
    let mut config = Repository::default_config();
    config.chunker = ChunkerConfig::Fixed { size: CHUNK as u32 };
    Repository::init_local(&repo, config)
        .with_context(|| format!("creating {}", repo.display()))?;
    let t = std::time::Instant::now();
    backup(&repo, dir, 0, indexed)?;
    let fill_seconds = t.elapsed().as_secs_f64();
    let index_file_bytes = derived_files(&repo)?
        .iter()
        .filter(|(k, _)| k.starts_with("index/"))
        .map(|(_, (len, _))| *len)
        .max()
        .unwrap_or(0);
    let mut best = f64::INFINITY;
    let mut bytes = 0u64;
    for b in 0..backups {
        let (secs, written) = backup(&repo, dir, indexed + b * new, new)?;
        best = best.min(secs);
        bytes += written;
    }
    let _ = std::fs::remove_dir_all(&repo);
    Ok(SizeResult {
        indexed,
        index_file_bytes,
        fill_seconds,
        best_commit_seconds: best,
        mean_commit_bytes: bytes as f64 / backups.max(1) as f64,
    })
}

pub fn run(args: &[String]) -> Result<serde_json::Value> {
    let mut large = 1_000_000u64;
    let mut new = 1_000u64;
    let mut backups = 5u64;
    let mut dir = std::env::temp_dir();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().context("missing value");
        match a.as_str() {
            "--chunks" => large = value()?.parse()?,
            "--new" => new = value()?.parse()?,
            "--backups" => backups = value()?.parse()?,
            "--dir" => dir = value()?.into(),
            other => anyhow::bail!("commit: unknown option {other}"),
        }
    }
    std::fs::create_dir_all(&dir)?;
    let small = measure(&dir, large / 10, new, backups)?;
    let big = measure(&dir, large, new, backups)?;
    println!(
        "commit of a {new}-chunk backup ({backups} backups each; best time, mean bytes written to index/ and bloom/)"
    );
    println!(
        "{:>12} {:>10} {:>14} {:>14} {:>16}",
        "indexed", "fill s", "index file", "commit s", "commit bytes"
    );
    for r in [&small, &big] {
        println!(
            "{:>12} {:>10.2} {:>14} {:>14.4} {:>16.0}",
            r.indexed,
            r.fill_seconds,
            r.index_file_bytes,
            r.best_commit_seconds,
            r.mean_commit_bytes
        );
    }
    let time_ratio = big.best_commit_seconds / small.best_commit_seconds.max(1e-9);
    let bytes_ratio = big.mean_commit_bytes / small.mean_commit_bytes.max(1.0);
    println!("large/small: commit time {time_ratio:.2}x, commit bytes {bytes_ratio:.2}x");
    let row = |r: &SizeResult| {
        json!({
            "indexed_chunks": r.indexed,
            "index_file_bytes": r.index_file_bytes,
            "fill_seconds": r.fill_seconds,
            "best_commit_seconds": r.best_commit_seconds,
            "mean_commit_bytes": r.mean_commit_bytes,
        })
    };
    Ok(json!({
        "benchmark": "commit",
        "new_chunks_per_backup": new,
        "backups": backups,
        "small": row(&small),
        "large": row(&big),
        "commit_time_ratio": time_ratio,
        "commit_bytes_ratio": bytes_ratio,
    }))
}
