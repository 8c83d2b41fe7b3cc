//! `cairn volume gc`: garbage collection of a volume's chunk store with
//! the live stream maps as roots (docs/volume.md, "Garbage collection").
//! `commands/volume.rs` gets the report from the mount daemon or runs the
//! job offline (the volume opened, its lock held) and calls [`print`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use cairn_engine::gc::Collector;
use serde::Deserialize;
use serde_json::{Map, Value};

use cairn_volume::GcOptions;

use crate::globals::{Globals, PasswordArgs};
use crate::output::bytes;

/// `cairn volume gc`.
#[derive(Args, Debug)]
pub struct GcArgs {
    /// The volume directory.
    pub dir: PathBuf,
    /// Plan only: commit, forget, copy and delete nothing (the estimate
    /// counts a snapshot holding both live and dead stream maps as kept).
    #[arg(long)]
    pub dry_run: bool,
    /// The store's collector: lgc (logical), pgc (physical) or pgc+
    /// (default); see docs/gc.md.
    #[arg(long, value_parser = crate::values::choice::<Collector>(&Collector::NAMES), help_heading = "Advanced")]
    pub collector: Option<Collector>,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// The job's options from the command line.
pub fn options(a: &GcArgs) -> GcOptions<'static> {
    GcOptions {
        collector: a.collector,
        dry_run: a.dry_run,
        ..Default::default()
    }
}

/// The mount daemon's request options (docs/FORMAT.md, "Control socket").
pub fn request(a: &GcArgs) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(c) = a.collector {
        m.insert("collector".into(), Value::from(c.name()));
    }
    if a.dry_run {
        m.insert("dry_run".into(), Value::from(true));
    }
    m
}

/// What the printed lines need of a report (the JSON of
/// `cairn_volume::GcReport`, offline or from the daemon).
#[derive(Deserialize)]
struct Printed {
    roots: u64,
    root_bytes: u64,
    snapshots_forgotten: u64,
    collector: String,
    reclaimed_bytes: i64,
    containers_deleted: u64,
    containers_written: u64,
    chunks_after: u64,
    copied_bytes: u64,
    seconds: f64,
    collection: PrintedCollection,
    #[serde(default)]
    cancelled: Option<String>,
}

#[derive(Deserialize)]
struct PrintedCollection {
    fell_back: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    damaged: Vec<String>,
}

/// Prints a collection's report (`--json`: as it is).
pub fn print(cli: &Globals, a: &GcArgs, json: &Value) -> Result<ExitCode> {
    let report = Printed::deserialize(json)?;
    // Cancelled before step 1: nothing ran (no collector named).
    if let Some(why) = report
        .cancelled
        .as_ref()
        .filter(|_| report.collector.is_empty())
    {
        eprintln!("cairn: warning: collection stopped before it began, {why}");
        if cli.json {
            println!("{}", serde_json::to_string_pretty(json)?);
        }
        return Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE));
    }
    if let Some(why) = &report.cancelled {
        // Cancelled during the collection, which finished.
        eprintln!("cairn: note: {why}");
    }
    let collection = &report.collection;
    if let Some(why) = &collection.fell_back {
        eprintln!("cairn: note: using PGC instead of PGC+: {why}");
    }
    for w in &collection.warnings {
        eprintln!("cairn: warning: {w}");
    }
    for d in &collection.damaged {
        eprintln!(
            "cairn: warning: {d}; the container was left in place (run `cairn check --read-data` \
             on DIR/store)"
        );
    }
    if cli.json {
        println!("{}", serde_json::to_string_pretty(json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if cli.quiet {
        return Ok(ExitCode::SUCCESS);
    }
    let forgotten = if a.dry_run { "would forget" } else { "forgot" };
    println!(
        "{} stream maps as roots ({}); {forgotten} {} older job snapshots",
        report.roots,
        bytes(report.root_bytes),
        report.snapshots_forgotten
    );
    let reclaimed = bytes(report.reclaimed_bytes.max(0) as u64);
    if a.dry_run {
        println!(
            "dry run ({}): would reclaim about {reclaimed}; nothing was changed",
            report.collector
        );
    } else {
        println!(
            "collected ({}): reclaimed {reclaimed}, {} containers deleted, {} written \
             ({} of live chunks copied), {} chunks left, in {:.1} s",
            report.collector,
            report.containers_deleted,
            report.containers_written,
            bytes(report.copied_bytes),
            report.chunks_after,
            report.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}
