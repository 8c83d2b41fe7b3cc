//! `diff`, `find` and `tag`: compare snapshots, search them, relabel them.
//! The engine does the work (`cairn_engine::diff`, `find`, `tag`; the
//! Merkle shortcuts of `003_ea5fccc485a97c5d.txt` §2 are described there);
//! this module resolves snapshot arguments, takes the locks and prints
//! human or JSON output (README, "JSON output").

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use cairn_core::error::IoContext;
use cairn_engine::catalog::{self, SnapshotFilter, SnapshotInfo};
use cairn_engine::diff::{diff_at, Change, ChangeKind, DiffOptions};
use cairn_engine::find::{Finder, Pattern};
use cairn_engine::restore::Reader;
use cairn_engine::tag::{retag, TagChange};
use cairn_engine::Repository;
use cairn_format::dir::DirEntry;

use crate::args::{BrowseCommand, Cli};
use crate::commands::{kind_name, read_lock};
use crate::output::{bytes, display_name, time};
use crate::snapshot_args::{resolve_all, resolve_at, snapshot_os_path};

pub fn run(cli: &Cli, repo: &Repository, cmd: &BrowseCommand) -> Result<ExitCode> {
    match cmd {
        BrowseCommand::Diff {
            old,
            new,
            path,
            metadata,
            filter,
        } => {
            let path = path.as_deref().map(snapshot_os_path).transpose()?;
            let filter = filter.filter()?;
            diff_cmd(cli, repo, [old, new], path.as_deref(), *metadata, &filter)
        }
        BrowseCommand::Find {
            pattern,
            ignore_case,
            snapshots,
            filter,
        } => find_cmd(
            cli,
            repo,
            (&cairn_engine::names::os_pattern(pattern), *ignore_case),
            snapshots,
            &filter.filter()?,
        ),
        BrowseCommand::Tag {
            snapshots,
            add,
            remove,
            set,
            wait,
            filter,
        } => {
            let change = TagChange {
                // `--set ''` clears every tag.
                set: set
                    .as_ref()
                    .map(|s| s.iter().filter(|t| !t.is_empty()).cloned().collect()),
                add: add.clone(),
                remove: remove.clone(),
            };
            tag_cmd(cli, repo, snapshots, &change, *wait, &filter.filter()?)
        }
    }
}

use cairn_engine::catalog::short_id as short;

/// A symlink target as text (escaped when not UTF-8, `cairn_engine::names`).
fn lossy(b: &[u8]) -> String {
    cairn_engine::names::name_text(b).into_owned()
}

fn entry_json(e: &DirEntry) -> Value {
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

fn diff_cmd(
    cli: &Cli,
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

fn find_cmd(
    cli: &Cli,
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

fn tag_cmd(
    cli: &Cli,
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
