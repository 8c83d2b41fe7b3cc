//! `cairn forget`: remove snapshots by id or by a retention policy (docs/gc.md).

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;

use cairn_engine::catalog;
use cairn_engine::catalog::short_id as short;
use cairn_engine::forget::{self, GroupBy, Retention};
use cairn_engine::Repository;

use super::gc::{gc_options, print_gc, run_gc, GcTuning};
use crate::globals::Globals;
use crate::snapshot_args::FilterArgs;

#[derive(Args, Debug, Clone)]
pub struct ForgetArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Snapshot ids (unique prefixes) to remove; or give a policy instead.
    pub snapshots: Vec<String>,
    /// Keep the N newest snapshots (of each group).
    #[arg(long, default_value_t = 0)]
    pub keep_last: u32,
    /// Keep the newest snapshot of each of the N newest hours with one.
    #[arg(long, default_value_t = 0)]
    pub keep_hourly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_daily: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_weekly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_monthly: u32,
    #[arg(long, default_value_t = 0)]
    pub keep_yearly: u32,
    /// Keep snapshots younger than this, counted from the newest of the
    /// group: e.g. 1y6m, 14d, 36h (years of 365 days, months of 30).
    #[arg(long, value_name = "DURATION", value_parser = forget::parse_within)]
    pub keep_within: Option<i64>,
    /// Keep snapshots with this tag (repeatable).
    #[arg(long)]
    pub keep_tag: Vec<String>,
    /// Group snapshots by these fields before applying the policy: any of
    /// host, paths, tags, comma-separated (empty: one group).
    #[arg(long, value_name = "FIELDS", default_value_t = GroupBy::default(), value_parser = GroupBy::parse)]
    pub group_by: GroupBy,
    /// Show what would be removed and why; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run a garbage collection after removing the snapshots.
    #[arg(long)]
    pub prune: bool,
    /// The policy applies to these snapshots only; ids must match too.
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub tuning: GcTuning,
}

fn retention(a: &ForgetArgs) -> Retention {
    Retention {
        last: a.keep_last,
        hourly: a.keep_hourly,
        daily: a.keep_daily,
        weekly: a.keep_weekly,
        monthly: a.keep_monthly,
        yearly: a.keep_yearly,
        within_ns: a.keep_within,
        tags: a.keep_tag.clone(),
    }
}

/// The snapshots `forget` was given by id (or `latest`), each once. An id
/// naming a record that no longer decodes is removed too (with a warning):
/// that is the way out for a damaged record, which otherwise blocks
/// `latest`. Its time is unknown (shown as 0), and it cannot be checked
/// against a filter, so a filter refuses it.
fn named_for_forget(
    repo: &Repository,
    specs: &[String],
    filter: &catalog::SnapshotFilter,
) -> Result<Vec<forget::Decision>> {
    let mut out: Vec<forget::Decision> = Vec::new();
    for spec in specs {
        let (id, time_unix_ns) = match crate::snapshot_args::resolve(repo, spec, filter) {
            Ok(s) => (s.id, s.record.time_unix_ns),
            Err(e) if spec != "latest" && filter.is_empty() && is_corruption(&e) => {
                let id = catalog::match_id(&**repo.backend(), spec)?;
                eprintln!(
                    "cairn: warning: snapshot record {} is unreadable ({e:#}); removing it",
                    short(&id)
                );
                (id, 0)
            }
            Err(e) => return Err(e),
        };
        if !out.iter().any(|d| d.id == id) {
            out.push(forget::Decision {
                id,
                time_unix_ns,
                group: String::new(),
                keep: false,
                reasons: Vec::new(),
            });
        }
    }
    Ok(out)
}

/// Whether `e` is the engine's corruption error (a record that does not
/// decode or authenticate).
fn is_corruption(e: &anyhow::Error) -> bool {
    e.downcast_ref::<cairn_core::Error>()
        .is_some_and(|e| e.is_corruption() || e.is_authentication())
}

pub fn run(cli: &Globals, repo: &Repository, a: &ForgetArgs) -> Result<ExitCode> {
    let policy = retention(a);
    let filter = a.filter.filter()?;
    let group_by = a.group_by;
    let gc_opts = a
        .prune
        .then(|| gc_options(&a.tuning, a.dry_run))
        .transpose()?;
    if a.snapshots.is_empty() && policy.is_empty() {
        bail!(
            "give snapshot ids or a policy (--keep-last, --keep-daily, ...): nothing would be kept"
        );
    }
    if !a.snapshots.is_empty() && !policy.is_empty() {
        bail!("give snapshot ids or a policy, not both");
    }
    // Shared with backups: forgetting never stops one.
    let lock = repo.lock_forget(a.tuning.wait)?;
    let decisions = if a.snapshots.is_empty() {
        let (all, bad) = catalog::list_filtered(&**repo.backend(), &filter)?;
        for (id, e) in &bad {
            eprintln!(
                "cairn: warning: snapshot {} is unreadable ({e}); the policy leaves it alone",
                short(id)
            );
        }
        forget::plan(&all, &policy, group_by)
    } else {
        named_for_forget(repo, &a.snapshots, &filter)?
    };
    let remove: Vec<String> = decisions
        .iter()
        .filter(|d| !d.keep)
        .map(|d| d.id.clone())
        .collect();
    let tally = forget::tally(repo, &remove)?;
    if !a.dry_run {
        forget::remove(repo, &lock, &remove)?;
    }
    // The collection takes the writer lock itself, for Merge and Commit.
    drop(lock);
    if !cli.json && !cli.quiet {
        let mut group = None;
        for d in &decisions {
            if group != Some(&d.group) && !d.group.is_empty() {
                println!("group {}", d.group);
                group = Some(&d.group);
            }
            println!(
                "  {:6}  {}  {}  {}",
                if d.keep { "keep" } else { "remove" },
                short(&d.id),
                crate::local_time::human_time(d.time_unix_ns),
                d.reasons.join(", ")
            );
        }
        println!(
            "{} snapshots kept, {} {}",
            tally.kept,
            tally.removed,
            if a.dry_run {
                "would be removed"
            } else {
                "removed"
            }
        );
    }
    let pruned = match gc_opts {
        Some(mut opts) => {
            if a.dry_run {
                // Plan as if the removal had happened.
                opts.assume_forgotten = remove.clone();
            }
            // An interrupted collection says what it did; the records
            // removed before it are committed too.
            Some(run_gc(cli, repo, &opts).map_err(
                |e| match e.downcast_ref::<cairn_core::Error>() {
                    Some(cairn_core::Error::Interrupted(what)) if !a.dry_run => {
                        anyhow::Error::new(cairn_core::Error::Interrupted(format!(
                            "{} snapshot record(s) were removed; {what}",
                            remove.len()
                        )))
                    }
                    _ => e,
                },
            )?)
        }
        None => None,
    };
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "dry_run": a.dry_run,
                "decisions": decisions,
                "removed": if a.dry_run { Vec::new() } else { remove },
                "kept_count": tally.kept,
                "removed_count": tally.removed,
                "gc": pruned,
            }))?
        );
    } else if !cli.quiet {
        if let Some(r) = &pruned {
            print_gc(r);
        }
    }
    Ok(ExitCode::SUCCESS)
}
