//! The `cairn` command: parses arguments, opens the repository, runs one
//! engine operation, prints human or JSON output. Every failure is one line on
//! stderr and a non-zero exit: 1 for errors, 3 for a backup that completed but
//! skipped unreadable paths (the snapshot holds everything else), 130 for a
//! command that writes and was interrupted (Ctrl-C or SIGTERM): it stops at
//! its next safe point and says what it had committed.

/// mimalloc keeps freed memory for reuse: restore and backup allocate and
/// free a container-sized buffer per container, which the system allocator
/// hands back to the kernel each time (a fresh mapping, page faults, zeroed
/// pages) and so spent more time than the copy itself.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the same position in the option
/// enums of mimalloc 2 and 3, `mimalloc.h`): how long freed memory stays
/// resident, in milliseconds.
const MIMALLOC_PURGE_DELAY: libc::c_int = 15;
/// A backup's purge delay (mimalloc 2's default).
const BACKUP_PURGE_DELAY_MS: libc::c_long = 10;
/// A simulation's: freed pages go back at once.
const SIM_PURGE_DELAY_MS: libc::c_long = 0;

#[allow(unsafe_code)]
extern "C" {
    /// From the mimalloc library the `mimalloc` crate links in.
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
}

/// mimalloc 3 gives freed memory back to the kernel only after 1 s. A
/// backup frees container buffers, compressed chunks and sealed copies at
/// hundreds of MiB per second, so that second of garbage stayed resident
/// (a 4 GiB stdin backup peaked 50-70 MiB higher, `bench/README.md`,
/// `memory`): a backup purges after 10 ms. Other commands keep the 1 s,
/// which restores need (10 ms made a 1 GiB restore about 15% slower).
/// A simulation frees whole generations' tables (the in-memory index
/// part, the index merge's runs) and is measured by its peak per unique
/// chunk (issue 35): it purges at once, which lowered the 10-generation
/// DDFS run's peak from 751-760 to 470 MiB and its wall time from 20 to
/// 18 s (docs/simulation.md, "Memory"). A `MIMALLOC_PURGE_DELAY` in the
/// environment is left to decide.
#[allow(unsafe_code)]
fn tune_allocator(command: Option<&str>) {
    let delay = match command {
        Some("backup") => BACKUP_PURGE_DELAY_MS,
        Some("sim") => SIM_PURGE_DELAY_MS,
        _ => return,
    };
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option, which mimalloc reads atomically;
        // no memory is touched.
        unsafe { mi_option_set(MIMALLOC_PURGE_DELAY, delay) };
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        without_transparent_huge_pages();
    }
}

/// A simulation's tables are a few MiB each, spread over mimalloc's arena,
/// which it asks the kernel to back with transparent huge pages: a 2 MiB
/// page made resident for a few KiB in use. Turned off for the process
/// (mimalloc's own `allow_thp=0` does the same, but only when set before
/// its arena exists), the 10-generation DDFS run with the in-memory part
/// bounded peaked at 98 MiB instead of 110 (docs/simulation.md,
/// "Memory"), its speed unchanged. Existing mappings follow at their next
/// page fault. A backup too: an incremental backup into S3 is a short
/// process whose every huge page is zeroed whole at its first touch (the
/// kernel's page clearing was 28% of eight writers' cairn CPU in a
/// profile); without them it took 0.12 s of CPU instead of 0.15
/// (bench/README.md, "Fewer requests, the machine's ceiling").
#[allow(unsafe_code)]
fn without_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes
    // a flag of this process; a kernel without it returns an error, ignored.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

mod backup_select;
mod cli;
mod commands;
mod exit_codes;
mod globals;
mod key_cache_hook;
mod local_time;
mod ls_columns;
mod mount;
mod output;
mod progress;
mod repo_config;
mod repo_location;
mod repo_open;
mod report;
mod restore_cache;
mod snapshot_args;
mod values;

use std::process::ExitCode;

use clap::FromArgMatches;

use exit_codes::EXIT_INTERRUPTED;

/// Commands that write to a repository: an interrupt asks them to stop at
/// a safe point (`cairn_engine::interrupt`), so that they unwind, release
/// their locks (on object storage, leases the next writer would otherwise
/// wait out) and say what was committed. The others keep the default
/// action: a reader killed mid-way leaves nothing to account for.
const WRITING_COMMANDS: &[&str] = &[
    "init", "backup", "copy", "repair", "forget", "fastcopy", "gc", "key", "tag",
];

/// Ctrl-C and SIGTERM set the engine's interruption flag once the command
/// took a lock to write; before that (a password prompt, waiting for a
/// lock) nothing is written and they end it at once, as does a second one
/// (the kernel releases local locks; an S3 lease then expires on its own).
fn install_interrupt_handler() {
    let installed = ctrlc::set_handler(|| {
        if !cairn_engine::interrupt::armed() {
            eprintln!("cairn: interrupted: nothing committed (nothing was written yet)");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        if cairn_engine::interrupt::requested() {
            eprintln!("cairn: interrupted again: stopping at once");
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        cairn_engine::interrupt::request();
    });
    if let Err(e) = installed {
        eprintln!("cairn: warning: Ctrl-C will end the command at once: {e}");
    }
}

/// The interruption a command stopped at, if that is how it ended.
fn interruption(e: &anyhow::Error) -> Option<&cairn_core::Error> {
    e.chain()
        .filter_map(|c| c.downcast_ref::<cairn_core::Error>())
        .find(|e| e.is_interrupted())
}

/// What to add to a "not a repository" error: how to create one.
fn how_to_create(e: &anyhow::Error) -> String {
    e.chain()
        .filter_map(|c| c.downcast_ref::<cairn_core::Error>())
        .find_map(|e| match e {
            cairn_core::Error::NotARepository(path) => Some(format!(
                " (create one with `cairn init --repo {}`)",
                path.display()
            )),
            _ => None,
        })
        .unwrap_or_default()
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// SIGPIPE ends the process quietly when it comes from standard output or
/// error, and is ignored otherwise.
///
/// Rust ignores SIGPIPE, so a write to a closed pipe (`cairn snapshots |
/// head -1`) returns EPIPE and `println!` panics; a command whose output
/// goes nowhere should end at that write like any Unix filter, whichever of
/// its output paths wrote. But the same signal is raised by a write into a
/// network connection the peer reset (hyper's vectored writes do not ask
/// the kernel to spare it): an S3 store going down mid-backup must give an
/// error the client retries or reports, not a silent death that leaves the
/// repository's lease behind. The kernel sends the signal to the thread
/// whose write failed, so the handler asks, without blocking, whether
/// standard output or error is the broken one (POLLERR or POLLHUP on a
/// pipe whose reader left) and only then dies of SIGPIPE with the default
/// action; otherwise it returns and the write fails with EPIPE.
/// A blocked SIGPIPE (inherited signal mask) would bring EPIPE back for
/// standard output, hence the unblocking.
#[allow(unsafe_code)]
fn install_sigpipe_handler() {
    extern "C" fn on_sigpipe(_: libc::c_int) {
        // SAFETY: `poll` on a local array, `signal` and `raise` are
        // async-signal-safe and have no memory-safety preconditions.
        unsafe {
            let mut fds = [1, 2].map(|fd| libc::pollfd {
                fd,
                events: 0,
                revents: 0,
            });
            let broken = libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) > 0
                && fds
                    .iter()
                    .any(|f| f.revents & (libc::POLLERR | libc::POLLHUP) != 0);
            if broken {
                // Delivered as soon as the handler returns: the process
                // ends as killed by SIGPIPE.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
        }
    }
    // SAFETY: called first in `main`, before any thread exists; the handler
    // is async-signal-safe, and `sigprocmask` on a local, initialised set
    // has no memory-safety preconditions.
    unsafe {
        libc::signal(
            libc::SIGPIPE,
            on_sigpipe as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

fn main() -> ExitCode {
    install_sigpipe_handler();
    let mut definition = cli::command();
    // Parsed in place, not on a clone: copying and dropping the whole
    // command tree was 3% of an incremental backup's CPU (bench/README.md,
    // "writer-cpu.sh").
    let matches = definition
        .try_get_matches_from_mut(std::env::args_os())
        .unwrap_or_else(|e| {
            exit_codes::exit_on_usage_error(cli::explain_misplaced_option(&definition, e))
        });
    let mut cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => exit_codes::exit_on_usage_error(e),
    };
    cli::settle_repository_options(&mut definition, &matches, &mut cli);
    tune_allocator(matches.subcommand_name());
    local_time::show_in_utc(cli.globals.utc);
    if let Some((_, m)) = matches
        .subcommand()
        .filter(|(name, _)| ["backup", "trace", "sim", "init"].contains(name))
    {
        cli.globals.given_init_flags = m
            .ids()
            .filter(|id| {
                m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(|id| id.as_str().to_string())
            .collect();
    }
    if matches
        .subcommand_name()
        .is_some_and(|name| WRITING_COMMANDS.contains(&name))
    {
        install_interrupt_handler();
    }
    match commands::run(cli) {
        // Interrupted after its last safe point: the command finished.
        Ok(_) if cairn_engine::interrupt::requested() => {
            eprintln!("cairn: interrupted: the command had already finished; what it reported is committed");
            ExitCode::from(EXIT_INTERRUPTED)
        }
        Ok(code) => code,
        // A closed pipe (`cairn ls | head`) is the reader's choice, not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => match interruption(&e) {
            // Stopped at a safe point: the line says what was committed.
            Some(interrupted) => {
                eprintln!("cairn: {interrupted}");
                ExitCode::from(EXIT_INTERRUPTED)
            }
            None => {
                eprintln!(
                    "cairn: error: {}{}",
                    output::one_line(&e),
                    how_to_create(&e)
                );
                ExitCode::from(1)
            }
        },
    }
}
