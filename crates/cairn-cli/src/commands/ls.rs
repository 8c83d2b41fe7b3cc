//! `cairn ls`: list the entries of a snapshot.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use cairn_engine::catalog::SnapshotFilter;
use cairn_engine::names::name_text;
use cairn_engine::read::Reader;
use cairn_engine::Repository;

use crate::globals::Globals;
use crate::output::{display_name, kind_name, mode_string, time};
use crate::repo_open::read_lock;
use crate::snapshot_args::{position, resolve_at, FilterArgs};

#[derive(Args, Debug)]
pub struct LsArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
    pub snapshot: String,
    /// Path inside the snapshot to list (default: everything); a
    /// leading `/` is the snapshot's root.
    pub path: Option<OsString>,
    /// The long listing (restic's `ls -l`): type and permissions,
    /// size (a device's major, minor), time, path. cairn's `ls` always
    /// lists so; the flag is taken for restic users' habits.
    #[arg(short = 'l', long = "long")]
    pub _long: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

pub fn ls(
    cli: &Globals,
    repo: &Repository,
    snapshot: &str,
    path: Option<&str>,
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let (snap, sub) = resolve_at(repo, snapshot, filter)?;
    let mut reader = Reader::open(repo, Default::default())?;
    let path = position(&mut reader, &snap, sub.as_deref(), path)?;
    let mut rows = Vec::new();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    reader.walk(&snap.record, &path, &mut |w| {
        let e = &w.entry;
        let kind = kind_name(e.kind);
        if cli.json {
            rows.push(json!({
                "path": w.path, "type": kind, "size": e.size, "mode": e.mode & 0o7777,
                "uid": e.uid, "gid": e.gid, "mtime": time(e.mtime_ns), "mtime_ns": e.mtime_ns,
                "target": e.target.as_deref().map(|t| name_text(t).into_owned()),
            }));
        } else {
            let target = e
                .target
                .as_ref()
                .map(|t| format!(" -> {}", name_text(t)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{} {:>12} {} {}{}",
                mode_string(kind, e.mode),
                crate::ls_columns::size_column(e),
                crate::local_time::human_time(e.mtime_ns),
                display_name(&w.path),
                display_name(&target)
            );
        }
        Ok(())
    })?;
    if cli.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
