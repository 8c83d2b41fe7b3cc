//! `cairn repair index|snapshots`: the commands that rebuild derived data
//! and rewrite snapshots that lost data (`docs/data-safety.md`).

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::snapshot_args::FilterArgs;
use cairn_engine::repair_snapshots::RepairSnapshotsOptions;
use cairn_engine::Repository;

use crate::globals::Globals;

#[derive(Subcommand, Debug)]
pub enum RepairCommand {
    /// Rebuild the index, its Summary Vector checkpoint and the frugal log
    /// from the containers' metadata sections. Chunks of lost or damaged
    /// containers leave the index, so the next backup stores them again.
    Index {
        #[command(flatten)]
        repository: crate::globals::RepoArgs,
        /// Read every container whole and leave damaged chunks out too.
        #[arg(long)]
        read_data: bool,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
    },
    /// Rewrite snapshots that reference lost data: files and directories
    /// that can no longer be restored are dropped (and listed), everything
    /// else is kept as stored. The new snapshot keeps the original's time,
    /// host and paths and is tagged `repaired`.
    Snapshots {
        #[command(flatten)]
        repository: crate::globals::RepoArgs,
        /// Snapshot ids, prefixes or `latest` (default: every snapshot).
        snapshots: Vec<String>,
        /// Remove each original snapshot record once its repaired copy is
        /// committed (and a snapshot with nothing left to keep).
        #[arg(long)]
        forget: bool,
        /// Show what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Read and verify every chunk instead of trusting container metadata.
        #[arg(long)]
        read_data: bool,
        /// Wait for a running backup instead of failing at once.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
}

pub fn repair_index(
    cli: &Globals,
    repo: &Repository,
    read_data: bool,
    wait: bool,
) -> Result<ExitCode> {
    let lock = repo.lock_writer(wait)?;
    let report = cairn_engine::repair::repair_index(repo, &lock, read_data)?;
    for (id, why) in &report.lost_containers {
        eprintln!("cairn: warning: container {id} is lost ({why}); its chunks left the index");
    }
    for (old, new) in &report.salvaged_containers {
        match new {
            Some(new) => eprintln!(
                "cairn: warning: container {old} had damaged chunks; its sound chunks were copied to container {new} and it was removed"
            ),
            None => eprintln!(
                "cairn: warning: container {old} held only damaged chunks and was removed"
            ),
        }
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !cli.quiet {
        println!(
            "index rebuilt from {} containers: {} chunks indexed{}{}",
            report.containers,
            report.indexed_chunks,
            if report.lost_containers.is_empty() {
                String::new()
            } else {
                format!(", {} containers lost", report.lost_containers.len())
            },
            if report.damaged_chunks > 0 {
                format!(", {} damaged chunks left out", report.damaged_chunks)
            } else {
                String::new()
            }
        );
        if !report.lost_containers.is_empty() || report.damaged_chunks > 0 {
            println!("new backups store lost chunks again; `cairn check` names the snapshots that lost data");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn repair_snapshots(
    cli: &Globals,
    repo: &Repository,
    opts: &RepairSnapshotsOptions,
    wait: bool,
) -> Result<ExitCode> {
    let lock = repo.lock_writer(wait)?;
    let report = cairn_engine::repair_snapshots::repair_snapshots(repo, &lock, opts)?;
    for (id, why) in &report.unreadable_records {
        eprintln!(
            "cairn: warning: snapshot record {} is unreadable ({why}); left as it is",
            cairn_engine::catalog::short_id(id)
        );
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if cli.quiet {
        return Ok(ExitCode::SUCCESS);
    }
    let would = if report.dry_run { "would be " } else { "" };
    for fix in &report.repaired {
        let short = cairn_engine::catalog::short_id(&fix.id);
        println!("snapshot {short}: {} paths lost", fix.lost.len());
        for p in &fix.lost {
            println!("  lost {p}");
        }
        match (&fix.new_id, fix.nothing_left) {
            (Some(new), _) => println!(
                "  repaired as snapshot {}",
                cairn_engine::catalog::short_id(new)
            ),
            (None, true) => println!("  nothing left to keep"),
            (None, false) => println!("  {would}rewritten without them"),
        }
        if fix.forgotten {
            println!("  original record removed");
        } else if opts.forget && report.dry_run {
            println!("  original record would be removed");
        }
    }
    println!(
        "{} snapshots checked: {} unchanged, {} {}repaired",
        report.checked,
        report.unchanged,
        report.repaired.len(),
        would
    );
    if !report.repaired.is_empty() && !opts.forget && !report.dry_run {
        println!("the original snapshots are kept; `--forget` removes them");
    }
    Ok(ExitCode::SUCCESS)
}

/// The snapshots `repair snapshots` is given, as full ids for the engine:
/// the specs resolved within the filter, or, with a filter and no specs,
/// every snapshot it lets through (empty: every snapshot).
pub fn snapshot_ids(
    repo: &Repository,
    specs: &[String],
    filter: &cairn_engine::catalog::SnapshotFilter,
) -> Result<Vec<String>> {
    if !specs.is_empty() {
        let snaps = crate::snapshot_args::resolve_all(repo, specs, filter)?;
        return Ok(snaps.into_iter().map(|s| s.id).collect());
    }
    if filter.is_empty() {
        return Ok(Vec::new());
    }
    let (snaps, _) = cairn_engine::catalog::list_filtered(&**repo.backend(), filter)?;
    if snaps.is_empty() {
        anyhow::bail!("no snapshot matches {filter}");
    }
    Ok(snaps.into_iter().map(|s| s.id).collect())
}
