//! `cairn volume snapshot DIR [--tag TAG]...`: the volume's files recorded
//! as a snapshot in its chunk store, optimized files by their stream maps
//! unread (docs/volume.md, "Snapshots"). `commands/volume.rs` gets the
//! report from the mount daemon or runs the job offline and calls
//! [`print`]; a file that could not be read makes the exit 3, as an
//! incomplete `backup` does.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::{Map, Value};

use cairn_volume::snapshot::{SnapshotOptions, SnapshotReport};

use crate::globals::{Globals, PasswordArgs};
use crate::output::bytes;

/// `cairn volume snapshot`.
#[derive(Args, Debug)]
pub struct SnapshotArgs {
    /// The volume directory.
    pub dir: PathBuf,
    /// A tag for the snapshot besides `volume-snapshot`. Repeatable.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// The job's options from the command line.
pub fn options(a: &SnapshotArgs) -> SnapshotOptions {
    SnapshotOptions {
        tags: a.tags.clone(),
        ..Default::default()
    }
}

/// The mount daemon's request options (docs/FORMAT.md, "Control socket").
pub fn request(a: &SnapshotArgs) -> Map<String, Value> {
    let mut m = Map::new();
    if !a.tags.is_empty() {
        m.insert("tags".into(), Value::from(a.tags.clone()));
    }
    m
}

pub fn print(cli: &Globals, a: &SnapshotArgs, report: &SnapshotReport) -> Result<ExitCode> {
    if cli.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else if !cli.quiet {
        println!(
            "snapshot {} of volume {}: {} optimized files ({}) recorded by their stream \
             maps, {} partly optimized ({} of them read), {} new in the chunk store, in {:.1} s",
            &report.snapshot[..8.min(report.snapshot.len())],
            a.dir.display(),
            report.files_by_stream_map,
            bytes(report.bytes_by_stream_map),
            report.files_assembled,
            bytes(report.bytes_assembled),
            bytes(report.new_bytes),
            report.seconds
        );
    }
    for path in &report.skipped {
        eprintln!("cairn: warning: not in the snapshot: {path}");
    }
    if let Some(why) = &report.cancelled {
        // The snapshot is whole: only its pacing stopped.
        eprintln!("cairn: note: {why}");
    }
    if report.skipped.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE))
    }
}
