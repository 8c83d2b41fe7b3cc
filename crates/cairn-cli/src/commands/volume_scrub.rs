//! `cairn volume scrub DIR [--copies-above N]`: verifies every chunk of
//! the volume's store, keeps second copies of popular chunks, repairs
//! damaged chunks from them (docs/volume.md, "Scrub"). What it cannot
//! repair is one `cairn: damage:` line per affected file on stderr, and
//! exit 1; `--json` prints the whole report on stdout.

use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use cairn_volume::scrub::{AffectedFile, DEFAULT_COPIES_ABOVE};
use serde_json::{Map, Value};

use cairn_volume::{ScrubOptions, ScrubReport};

use crate::globals::{Globals, PasswordArgs};
use crate::output::bytes;

/// `cairn volume scrub`.
#[derive(Args, Debug)]
pub struct ScrubArgs {
    /// The volume directory.
    pub dir: std::path::PathBuf,
    /// Keep a second copy of every chunk the files reference more than N
    /// times (100: Windows Server Data Deduplication's threshold for its
    /// "hotspot" chunks).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_COPIES_ABOVE)]
    pub copies_above: u64,
    #[command(flatten)]
    pub password: PasswordArgs,
}

/// Byte ranges as `a-b, c-d` (`b`, `d` exclusive).
fn ranges(f: &AffectedFile) -> String {
    let parts: Vec<String> = f.ranges.iter().map(|(s, e)| format!("{s}-{e}")).collect();
    parts.join(", ")
}

/// The job's options from the command line.
pub fn options(a: &ScrubArgs) -> ScrubOptions {
    ScrubOptions {
        copies_above: a.copies_above,
        ..Default::default()
    }
}

/// The mount daemon's request options (docs/FORMAT.md, "Control socket").
pub fn request(a: &ScrubArgs) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("copies_above".into(), Value::from(a.copies_above));
    m
}

/// Prints a scrub's report (offline or from the daemon): damage lines on
/// stderr and an error if any is left.
pub fn print(cli: &Globals, report: &ScrubReport) -> Result<ExitCode> {
    if cli.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    }
    for f in &report.affected_files {
        eprintln!(
            "cairn: damage: {}: bytes {} unreadable (lost chunk {})",
            f.path,
            ranges(f),
            f.chunks.join(", ")
        );
    }
    for (id, why) in &report.unreadable_containers {
        eprintln!("cairn: damage: container {id} unreadable: {why}");
    }
    if !cli.json && !cli.quiet {
        println!(
            "scrubbed {} chunks in {} containers ({}): {} damaged, {} repaired, {} lost",
            report.chunks_verified,
            report.containers_verified,
            bytes(report.bytes_verified),
            report.damaged_chunks,
            report.repaired_chunks,
            report.lost_chunks
        );
        println!(
            "second copies of chunks referenced more than {} times: {} kept, {} made, {} damaged copies replaced",
            report.copies_above, report.copies_kept, report.copies_made, report.copies_damaged
        );
        if report.is_clean() && report.cancelled.is_none() {
            println!("no problems left");
        }
    }
    if let Some(why) = &report.cancelled {
        eprintln!(
            "cairn: warning: scrub stopped early, {why}; what it verified and repaired stays, \
             the next scrub starts over"
        );
    }
    if !report.is_clean() {
        Err(anyhow!(
            "scrub left damage: {} chunk(s) lost, {} file(s) affected, {} container(s) \
             unreadable, {} damaged chunk(s) not yet repaired",
            report.lost_chunks,
            report.affected_files.len(),
            report.unreadable_containers.len(),
            report.unrepaired_chunks()
        ))
    } else if report.cancelled.is_some() {
        Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}
