//! The `cairn` command: parses arguments, opens the repository, runs one
//! engine operation, prints human or JSON output. Every failure is one line on
//! stderr and a non-zero exit: 1 for errors, 3 for a backup that completed but
//! skipped unreadable paths (the snapshot holds everything else).

/// mimalloc keeps freed memory for reuse: restore and backup allocate and
/// free a container-sized buffer per container, which the system allocator
/// hands back to the kernel each time (a fresh mapping, page faults, zeroed
/// pages) and so spent more time than the copy itself.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod backup_select;
mod browse_commands;
mod commands;
mod gc_commands;
mod generate;
mod mount;
mod output;
mod progress;
mod repair_commands;
mod restore_commands;
mod sim_commands;
mod snapshot_args;
mod snapshots_cmd;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let matches = args::Cli::command().get_matches();
    let mut cli = match args::Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Some((_, m)) = matches
        .subcommand()
        .filter(|(name, _)| ["backup", "trace", "sim"].contains(name))
    {
        cli.given_init_flags = m
            .ids()
            .filter(|id| {
                m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.as_str().to_string())
            .collect();
    }
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
