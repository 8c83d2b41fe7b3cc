//! `cairn find`: paths matching a glob in snapshots.

use std::ffi::OsString;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use cairn_core::error::IoContext;
use cairn_engine::catalog::{self, short_id as short, SnapshotFilter, SnapshotInfo};
use cairn_engine::find::{Finder, Pattern};
use cairn_engine::read::Reader;
use cairn_engine::Repository;

use super::diff::entry_json;
use crate::globals::Globals;
use crate::output::{bytes, display_name, kind_name};
use crate::repo_open::read_lock;
use crate::snapshot_args::resolve_all;

use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug)]
pub struct FindArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    pub pattern: OsString,
    /// Match letters in any case.
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Search only this snapshot (repeatable; id prefix or `latest`).
    #[arg(long = "snapshot", short = 's', value_name = "ID")]
    pub snapshots: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// The snapshots to search: the given ones (each once, in the order
/// given), or every readable one the filter lets through, oldest first.
/// Also whether some record could not be read.
fn find_targets(
    repo: &Repository,
    specs: &[String],
    filter: &SnapshotFilter,
) -> Result<(Vec<SnapshotInfo>, bool)> {
    if specs.is_empty() {
        let (all, bad) = catalog::list_filtered(&**repo.backend(), filter)?;
        for (id, e) in &bad {
            eprintln!(
                "cairn: warning: snapshot {} unreadable, not searched: {e}",
                short(id)
            );
        }
        return Ok((all, !bad.is_empty()));
    }
    Ok((resolve_all(repo, specs, filter)?, false))
}

pub fn run(
    cli: &Globals,
    repo: &Repository,
    (pattern, ignore_case): (&str, bool),
    specs: &[String],
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    // Bad input first: a pattern error needs no repository access.
    let pattern = Pattern::with_case(pattern, ignore_case)?;
    let _reading = read_lock(repo)?;
    let (targets, damaged) = find_targets(repo, specs, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let mut finder = Finder::new(&mut reader, pattern);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut rows = Vec::new();
    for snap in &targets {
        finder.search(&snap.record, &mut |path, e| {
            if cli.json {
                let mut row = entry_json(e);
                row["snapshot"] = json!(snap.id);
                row["short_id"] = json!(short(&snap.id));
                row["path"] = json!(path);
                rows.push(row);
            } else {
                writeln!(
                    out,
                    "{}  {:<7} {:>12}  {}  {}",
                    short(&snap.id),
                    kind_name(e.kind),
                    bytes(e.size),
                    crate::local_time::human_time(e.mtime_ns),
                    display_name(path)
                )
                .ctx(|| "writing to standard output".into())?;
            }
            Ok(())
        })?;
    }
    if cli.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    }
    out.flush()?;
    let st = finder.stats();
    if !cli.quiet && !cli.json {
        eprintln!(
            "{} matches in {} snapshots ({} listings read, {} shared subtrees reused)",
            st.matches, st.snapshots, st.listings_read, st.listings_reused
        );
    }
    Ok(if damaged {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
