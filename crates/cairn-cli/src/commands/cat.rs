//! `cairn cat`: one file of a snapshot to standard output.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use cairn_engine::catalog::SnapshotFilter;
use cairn_engine::read::Reader;
use cairn_engine::Repository;

use crate::repo_open::read_lock;
use crate::snapshot_args::{position, resolve_at, FilterArgs};

#[derive(Args, Debug)]
pub struct CatArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
    pub snapshot: String,
    /// The file, from the snapshot's root (a leading `/` is optional).
    pub path: OsString,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// `path`: already a snapshot path ([`snapshot_os_path`]).
pub fn cat(
    repo: &Repository,
    snapshot: &str,
    path: &str,
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    if path.is_empty() {
        bail!("cat needs a file path inside the snapshot, e.g. /dir/file");
    }
    let _reading = read_lock(repo)?;
    let (snap, sub) = resolve_at(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let path = position(&mut reader, &snap, sub.as_deref(), Some(path))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    reader.cat(&snap.record, &path, &mut out)?;
    out.flush().context("writing to standard output")?;
    Ok(ExitCode::SUCCESS)
}
