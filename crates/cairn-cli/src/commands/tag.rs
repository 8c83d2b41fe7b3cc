//! `cairn tag`: change the tags of snapshots.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;

use cairn_engine::catalog::{self, short_id as short, SnapshotFilter};
use cairn_engine::tag::{retag, TagChange};
use cairn_engine::Repository;

use crate::globals::Globals;
use crate::snapshot_args::resolve_all;

use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug)]
pub struct TagArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshots to change (id prefixes or `latest`); none given: every
    /// snapshot the filter (--host, --tag, --path; one is required then)
    /// lets through.
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    /// Add tags (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub add: Vec<String>,
    /// Remove tags (repeatable or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub remove: Vec<String>,
    /// Replace all tags (`--set ''` removes every tag).
    #[arg(long, value_delimiter = ',')]
    pub set: Option<Vec<String>>,
    /// Wait for a running backup instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

pub fn run(
    cli: &Globals,
    repo: &Repository,
    specs: &[String],
    change: &TagChange,
    wait: bool,
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    change.validate()?;
    if specs.is_empty() && filter.is_empty() {
        bail!("tag needs SNAPSHOT ids, or a filter (--host, --tag, --path) choosing the snapshots");
    }
    let lock = repo.lock_writer(wait)?;
    // Every argument resolves before anything changes.
    let snaps = if specs.is_empty() {
        let (all, bad) = catalog::list_filtered(&**repo.backend(), filter)?;
        for (id, e) in &bad {
            eprintln!(
                "cairn: warning: snapshot {} unreadable, tags not changed: {e}",
                short(id)
            );
        }
        if all.is_empty() {
            bail!("no snapshot matches the filter");
        }
        all
    } else {
        resolve_all(repo, specs, filter)?
    };
    let mut rows = Vec::new();
    for s in &snaps {
        let r = retag(repo, &lock, s, change)
            .with_context(|| format!("changing the tags of snapshot {}", short(&s.id)))?;
        if cli.json {
            rows.push(json!({ "old_id": r.old_id, "new_id": r.new_id, "tags": r.tags }));
        } else if !cli.quiet {
            let new = r.new_id.as_deref().map_or("unchanged", short);
            println!("{} -> {}  [{}]", short(&r.old_id), new, r.tags.join(","));
        }
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(ExitCode::SUCCESS)
}
