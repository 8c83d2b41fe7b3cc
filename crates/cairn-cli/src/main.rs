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
mod copy_commands;
mod encryption;
mod gc_commands;
mod generate;
mod mount;
mod output;
mod progress;
mod repair_commands;
mod repo_location;
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

/// Restores the default action of SIGPIPE (terminate quietly) and unblocks
/// it. Rust ignores SIGPIPE, so a write to a closed pipe (`cairn snapshots |
/// head -1`) returns EPIPE and `println!` panics; with the default action the
/// process ends at that write like any Unix filter, whichever command and
/// whichever of its output paths wrote. Nothing is left half-done by that:
/// every repository change is a temporary renamed into place and locks are
/// `flock`s the kernel releases, and commands print only after committing.
/// A blocked SIGPIPE (inherited signal mask) would bring EPIPE back, hence
/// the unblocking.
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: called first in `main`, before any thread exists; `signal`
    // with SIG_DFL and `sigprocmask` on a local, initialised set have no
    // memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

fn main() -> ExitCode {
    default_sigpipe();
    let matches = args::Cli::command().get_matches();
    let mut cli = match args::Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Some((_, m)) = matches
        .subcommand()
        .filter(|(name, _)| ["backup", "trace", "sim", "init"].contains(name))
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
