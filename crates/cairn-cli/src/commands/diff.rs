//! `cairn diff`: compare two snapshots (`find.rs` and `tag.rs` search and
//! relabel them). The engine does the work (`cairn_engine::diff`; the
//! Merkle shortcuts of `003_ea5fccc485a97c5d.txt` §2 are described there);
//! this module resolves snapshot arguments, takes the locks and prints
//! human or JSON output (README, "JSON output").

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Value};

use cairn_core::error::IoContext;
use cairn_engine::catalog::SnapshotFilter;
use cairn_engine::diff::{diff_at, Change, ChangeKind, DiffOptions};
use cairn_engine::read::Reader;
use cairn_engine::Repository;
use cairn_format::dir::DirEntry;

use crate::globals::Globals;
use crate::output::{bytes, display_name, kind_name, time};
use crate::repo_open::read_lock;
use crate::snapshot_args::{resolve_at, FilterArgs};

use cairn_engine::catalog::short_id as short;

#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot id (a unique prefix of at least 4 hex digits) or `latest`.
    pub old: String,
    pub new: String,
    /// Compare only this path (a leading `/` is the snapshot's root).
    pub path: Option<OsString>,
    /// Also report changes of mode, owner, group or mtime alone.
    #[arg(long)]
    pub metadata: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// A symlink target as text (escaped when not UTF-8, `cairn_engine::names`).
fn lossy(b: &[u8]) -> String {
    cairn_engine::names::name_text(b).into_owned()
}

pub fn entry_json(e: &DirEntry) -> Value {
    json!({
        "type": kind_name(e.kind), "size": e.size, "mode": e.mode & 0o7777,
        "uid": e.uid, "gid": e.gid, "mtime": time(e.mtime_ns), "mtime_ns": e.mtime_ns,
        "target": e.target.as_deref().map(lossy),
    })
}

fn change_name(k: ChangeKind) -> (&'static str, &'static str) {
    match k {
        ChangeKind::Added => ("added", "+"),
        ChangeKind::Removed => ("removed", "-"),
        ChangeKind::Modified => ("modified", "M"),
        ChangeKind::Metadata => ("metadata", "U"),
    }
}

/// One human line: symbol, kind, size (old -> new when both), path.
fn change_line(c: &Change) -> String {
    let (_, sym) = change_name(c.kind);
    let e = c.new.as_ref().or(c.old.as_ref()).expect("a side");
    let size = match (&c.old, &c.new, c.kind) {
        (_, _, ChangeKind::Metadata) => format!("({})", c.fields.join(",")),
        (Some(a), Some(b), _) if a.size != b.size => {
            format!("{} -> {}", bytes(a.size), bytes(b.size))
        }
        _ if e.kind == cairn_format::dir::EntryKind::Dir => String::new(),
        _ => bytes(e.size),
    };
    format!(
        "{sym} {:<7} {:>26}  {}",
        kind_name(e.kind),
        size,
        display_name(&c.path)
    )
}

pub fn run(
    cli: &Globals,
    repo: &Repository,
    [old, new]: [&String; 2],
    path: Option<&str>,
    metadata: bool,
    filter: &SnapshotFilter,
) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let (a, sub_a) = resolve_at(repo, old, filter)?;
    let (b, sub_b) = resolve_at(repo, new, filter)?;
    if sub_a != sub_b {
        bail!("diff compares the same folder of both snapshots: give ID:subfolder on both or neither, with the same subfolder");
    }
    let joined = sub_a.map(|s| cairn_engine::snapshot_paths::join_base(&s, path.unwrap_or("")));
    let path = joined.as_deref().or(path);
    let mut reader = Reader::open(repo, Default::default())?;
    // The path as the snapshots hold it (for the JSON `path`); a path in
    // neither is diff_at's error.
    let resolved = match path {
        Some(p) => {
            cairn_engine::snapshot_paths::resolve_in_any(&mut reader, &[&b.record, &a.record], p)?
        }
        None => None,
    };
    let path = resolved.as_deref().or(path);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut rows = Vec::new();
    let sum = diff_at(
        &mut reader,
        &a.record,
        &b.record,
        path.unwrap_or(""),
        DiffOptions { metadata },
        &mut |c| {
            if cli.json {
                rows.push(json!({
                    "path": c.path,
                    "change": change_name(c.kind).0,
                    "type": kind_name(c.new.as_ref().or(c.old.as_ref()).expect("a side").kind),
                    "old": c.old.as_ref().map(entry_json),
                    "new": c.new.as_ref().map(entry_json),
                    "fields": c.fields,
                }));
            } else {
                writeln!(out, "{}", change_line(&c)).ctx(|| "writing to standard output".into())?;
            }
            Ok(())
        },
    )?;
    if cli.json {
        let mut v = json!({
            "old": a.id, "new": b.id, "changes": rows, "summary": sum,
        });
        if let Some(p) = path {
            v["path"] = json!(p);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else if !cli.quiet {
        writeln!(
            out,
            "{} -> {}: {} added, {} removed, {} modified{}; +{} -{} \
             ({} listings read, {} unchanged subtrees skipped)",
            short(&a.id),
            short(&b.id),
            sum.added,
            sum.removed,
            sum.modified,
            if metadata {
                format!(", {} metadata only", sum.metadata)
            } else {
                String::new()
            },
            bytes(sum.bytes_added),
            bytes(sum.bytes_removed),
            sum.listings_read,
            sum.subtrees_skipped,
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
