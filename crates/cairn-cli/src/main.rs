//! The `cairn` command: parses arguments, opens the repository, runs one
//! engine operation, prints human or JSON output. Every failure is one line on
//! stderr and a non-zero exit: 1 for errors, 3 for a backup that completed but
//! skipped unreadable paths (the snapshot holds everything else).

mod args;
mod commands;
mod output;
mod progress;
mod repair_commands;
mod sim_commands;

use std::process::ExitCode;

use clap::Parser;

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        // A closed pipe (`cairn ls | head`) is the reader's choice, not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn: error: {}", output::one_line(&e));
            ExitCode::from(1)
        }
    }
}
