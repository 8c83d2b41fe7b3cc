//! `cairn stats`: repository statistics.

use std::process::ExitCode;

use anyhow::Result;

use cairn_engine::Repository;

use crate::globals::Globals;
use crate::repo_open::read_lock;

pub fn run(cli: &Globals, repo: &Repository) -> Result<ExitCode> {
    let _reading = read_lock(repo)?;
    let s = cairn_engine::stats::stats(repo)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    for line in crate::report::stats::lines(&s) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
