//! `cairn check`: verify the repository.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::Args;

use cairn_engine::{Progress, Repository};

use crate::globals::Globals;
use crate::output::bytes;
use crate::progress::Display;
use crate::repo_open::read_lock;

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub repository: crate::globals::RepoArgs,
    /// Also read every container and rehash every chunk.
    #[arg(long)]
    pub read_data: bool,
}

pub fn run(cli: &Globals, repo: &Repository, read_data: bool) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let progress = Arc::new(Progress::default());
    let display = Display::start_with(
        progress.clone(),
        !cli.quiet && !cli.json,
        "check",
        crate::progress::Unit::Items,
    );
    let report = cairn_engine::check::check_with_progress(repo, read_data, &progress);
    drop(display);
    let report = report?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for n in &report.notes {
            eprintln!("cairn: note: {n}");
        }
        for p in &report.problems {
            let mut line = format!("cairn: damage: {}", p.message);
            if let Some(c) = &p.container {
                line += &format!(" [container {c}]");
            }
            if !p.snapshots.is_empty() {
                let s: Vec<&str> = p.snapshots.iter().map(|s| &s[..8.min(s.len())]).collect();
                line += &format!(" [snapshots {}]", s.join(","));
            }
            if !p.paths.is_empty() {
                let paths: Vec<&str> = p.paths.iter().take(5).map(String::as_str).collect();
                line += &format!(
                    " [paths {}{}]",
                    paths.join(", "),
                    if p.paths.len() > 5 { ", ..." } else { "" }
                );
            }
            eprintln!("{line}");
        }
        if !cli.quiet {
            println!(
                "checked {} snapshots, {} containers, {} indexed chunks{}",
                report.snapshots,
                report.containers,
                report.indexed_chunks,
                if read_data {
                    format!(", {} chunks rehashed", report.chunks_verified)
                } else {
                    String::new()
                }
            );
            if report.reclaimable_containers > 0 {
                println!(
                    "{} containers ({}) are referenced by no snapshot and reclaimable",
                    report.reclaimable_containers,
                    bytes(report.reclaimable_bytes)
                );
            }
            if report.is_clean() {
                println!("no problems found");
            }
        }
    }
    if report.is_clean() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(anyhow!("check found {} problem(s)", report.problems.len()))
    }
}
