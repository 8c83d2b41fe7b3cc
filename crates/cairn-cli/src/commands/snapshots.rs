//! `cairn snapshots`: the snapshots the filter lets through, oldest first,
//! as one table or one table per group (`--group-by host,paths,tags`), in
//! human or JSON form. Source paths are shown as stored: absolute.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use cairn_engine::catalog::{self, clean_path, short_id, GroupBy, SnapshotInfo};
use cairn_engine::Repository;

use crate::globals::Globals;
use crate::output::{bytes, time};
use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug)]
pub struct SnapshotsArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Group the listing by these fields: any of host, paths, tags
    /// (comma-separated), e.g. `--group-by host,paths`.
    #[arg(long, value_name = "FIELDS", value_parser = GroupBy::parse)]
    pub group_by: Option<GroupBy>,
    /// Only the N newest snapshots of each group (host and paths, or
    /// the --group-by fields).
    #[arg(long, value_name = "N")]
    pub latest: Option<usize>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

fn paths_of(s: &SnapshotInfo) -> Vec<String> {
    s.record.paths.iter().map(|p| clean_path(p)).collect()
}

fn snapshot_json(s: &SnapshotInfo) -> Value {
    let r = &s.record;
    json!({
        "id": s.id,
        "short_id": short_id(&s.id),
        "time": time(r.time_unix_ns),
        "time_unix_ns": r.time_unix_ns,
        "host": r.host,
        "paths": paths_of(s),
        "tags": r.tags,
        "logical_bytes": r.stats.logical_bytes,
        "files": r.stats.files,
        "dirs": r.stats.dirs,
        "chunks": r.stats.chunks,
        "new_chunks": r.stats.new_chunks,
        "new_stored_bytes": r.stats.new_stored_bytes,
    })
}

fn print_table(cli: &Globals, snaps: &[SnapshotInfo]) {
    let w = crate::local_time::HUMAN_TIME_WIDTH;
    println!(
        "{:<10} {:<w$} {:<12} {:>12}  paths",
        "id", "time", "host", "size"
    );
    for s in snaps {
        let r = &s.record;
        println!(
            "{:<10} {:<w$} {:<12} {:>12}  {}{}",
            short_id(&s.id),
            crate::local_time::human_time(r.time_unix_ns),
            r.host,
            bytes(r.stats.logical_bytes),
            paths_of(s).join(" "),
            if r.tags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", r.tags.join(","))
            }
        );
        if cli.verbose > 0 {
            let st = &r.stats;
            println!(
                "{:<10} {} files, {} dirs, {} symlinks; {} added to the repository ({} new of {} chunks){}",
                "",
                st.files,
                st.dirs,
                st.symlinks,
                bytes(st.new_stored_bytes),
                st.new_chunks,
                st.chunks,
                r.fastcopy_of
                    .as_deref()
                    .map(|o| format!("; fastcopy of {}", short_id(o)))
                    .unwrap_or_default()
            );
        }
    }
}

pub fn snapshots(
    cli: &Globals,
    repo: &Repository,
    group_by: Option<GroupBy>,
    latest: Option<usize>,
    filter: &FilterArgs,
) -> Result<ExitCode> {
    let filter = filter.filter()?;
    let (mut snaps, bad) = catalog::list_filtered(&**repo.backend(), &filter)?;
    if let Some(n) = latest {
        snaps = catalog::latest_per_group(snaps, group_by.unwrap_or_default(), n);
    }
    for (id, e) in &bad {
        eprintln!("cairn: warning: snapshot {} unreadable: {e}", short_id(id));
    }
    match group_by {
        None if cli.json => {
            let v: Vec<_> = snaps.iter().map(snapshot_json).collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        None => print_table(cli, &snaps),
        Some(by) => {
            let groups = catalog::group(snaps, by);
            if cli.json {
                let v: Vec<Value> = groups
                    .iter()
                    .map(|(key, members)| {
                        json!({
                            "group_key": key,
                            "snapshots": members.iter().map(snapshot_json).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                for (i, (key, members)) in groups.iter().enumerate() {
                    if i > 0 {
                        println!();
                    }
                    let key = key.to_string();
                    if key.is_empty() {
                        println!("all snapshots:");
                    } else {
                        println!("snapshots for {key}:");
                    }
                    print_table(cli, members);
                    println!(
                        "{} snapshot{}",
                        members.len(),
                        if members.len() == 1 { "" } else { "s" }
                    );
                }
            }
        }
    }
    Ok(if bad.is_empty() || filter.skip_damaged {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
