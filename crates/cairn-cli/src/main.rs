//! The `cairn` command: parses arguments, opens the repository, runs one
//! engine operation, prints human or JSON output. Every failure is one line on
//! stderr and a non-zero exit: 1 for errors, 3 for a backup that completed but
//! skipped unreadable paths (the snapshot holds everything else).

mod args;
mod commands;
mod output;
mod progress;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cairn: error: {}", output::one_line(&e));
            ExitCode::from(1)
        }
    }
}
