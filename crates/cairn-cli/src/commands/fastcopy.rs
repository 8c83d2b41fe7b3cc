//! `cairn fastcopy`: a new snapshot naming the same tree as another.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use cairn_engine::catalog::{self, short_id as short};
use cairn_engine::forget;
use cairn_engine::Repository;

use crate::globals::Globals;
use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug)]
pub struct FastcopyArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    pub snapshot: String,
    /// Tags of the copy (default: the source's).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Wait for a running backup instead of failing at once.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

pub fn run(
    cli: &Globals,
    repo: &Repository,
    spec: &str,
    tags: &[String],
    wait: bool,
    filter: &catalog::SnapshotFilter,
) -> Result<ExitCode> {
    let lock = repo.lock_writer(wait)?;
    let source = crate::snapshot_args::resolve(repo, spec, filter)?;
    let copy = forget::fastcopy(repo, &lock, &source, tags.to_vec())?;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "snapshot_id": copy.id,
                "fastcopy_of": source.id,
            }))?
        );
    } else if !cli.quiet {
        println!(
            "snapshot {} is a fastcopy of {}",
            short(&copy.id),
            short(&source.id)
        );
    }
    Ok(ExitCode::SUCCESS)
}
