//! `cairn dump`: a file or a directory (as tar) of a snapshot to standard output.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use cairn_engine::read::Reader;
use cairn_engine::Repository;

use crate::repo_open::read_lock;
use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
    pub snapshot: String,
    /// Path inside the snapshot (default: the whole snapshot).
    pub path: Option<OsString>,
    /// Archive format for a directory (tar is the only one).
    #[arg(long, default_value = "tar", value_parser = ["tar"])]
    pub archive: String,
    #[command(flatten)]
    pub filter: FilterArgs,
}

pub fn dump(
    repo: &Repository,
    snapshot: &str,
    path: Option<&str>,
    filter: &cairn_engine::catalog::SnapshotFilter,
) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let (snap, sub) = crate::snapshot_args::resolve_at(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let path = crate::snapshot_args::position(&mut reader, &snap, sub.as_deref(), path)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    reader.dump(&snap.record, &path, &mut out)?;
    out.flush().context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}
