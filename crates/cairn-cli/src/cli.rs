//! The `cairn` command line: the global options and the list of commands.
//! Each command's own options are its `Args` struct, in its file under
//! `commands/`; `commands::run` dispatches.

use clap::{Parser, Subcommand};

use crate::commands::{
    analyze, backup, cat, check, completions, copy, diff, dump, experiment, fastcopy, find, forget,
    gc, init, key, ls, man, mount, repair, restore, sim, snapshots, tag, trace, unlock,
};
use crate::globals::Globals;

#[derive(Parser, Debug)]
#[command(
    name = "cairn",
    version,
    about = "Deduplicating backups: DDFS-style dedup, Merkle-tree recipes, verified restores"
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a repository with the given algorithms (stored in its config).
    Init(init::InitCommandArgs),
    /// Copy snapshots into another repository (a directory or S3) that
    /// shares this one's identity, moving only the chunks it lacks; create
    /// the destination first with `cairn init --from-repo SRC
    /// --copy-chunker-params`. See docs/copy.md.
    Copy(copy::CopyArgs),
    /// Back up paths (each its own stream) or standard input.
    Backup(backup::BackupArgs),
    /// List snapshots, oldest first (those matching --host/--tag/--path).
    Snapshots(snapshots::SnapshotsArgs),
    /// List the entries of a snapshot.
    Ls(ls::LsArgs),
    /// Restore a snapshot (or one subtree of it) into a directory.
    ///
    /// A restore touches nothing outside its target: each file is written to
    /// a temporary and renamed into place (a hard link or symlink already at
    /// its name is replaced, never written through or followed), and a
    /// symlink where a directory goes is replaced by a real directory.
    /// A full target file system stops the restore with one error.
    /// See docs/restore-target.md.
    Restore(restore::RestoreArgs),
    /// Write one file of a snapshot to standard output.
    Cat(cat::CatArgs),
    /// Serve the snapshots as a read-only FUSE file system at MOUNTPOINT
    /// (by id, time, tag and host; docs/mount.md) until Ctrl-C, SIGTERM or
    /// `fusermount -u MOUNTPOINT`.
    Mount(mount::MountArgs),
    /// Write a file of a snapshot to standard output, or a directory (`/`
    /// or no PATH: the whole snapshot) as a tar archive with modes, owners,
    /// mtimes and symlinks. See docs/restore-select.md.
    Dump(dump::DumpArgs),
    /// Repository statistics: dedup, compression, counters, index RAM.
    Stats,
    /// Record what a backup of PATH would ingest as a cairn chunk trace
    /// (fingerprint, size and compressed size of every chunk, plus the
    /// directory tree), so a dataset can be studied without keeping it.
    Trace(trace::TraceArgs),
    /// Replay chunk traces or a synthetic workload, one generation each,
    /// through a simulated repository; one row per generation.
    Sim(sim::SimArgs),
    /// Dataset study (primary-dedup paper): savings vs chunk size, basic vs
    /// regression chunking, duplicate bytes by reference count, global vs
    /// partitioned dedup.
    Analyze(analyze::AnalyzeArgs),
    /// Run a reproduction experiment; prints a table (or --json) and writes
    /// CSV and a plot. Available: index-io (index I/O per lookup scheme), index-ram (index
    /// RAM per chunk and throughput, DDFS vs the primary-dedup cuckoo index),
    /// eager-vs-lazy and ring-size (fingerprint lookup per device class),
    /// partition (partitioned dedup with reconciliation, primary-dedup paper),
    /// restore (restore caches and rewriting). See docs/experiments/.
    Experiment(experiment::ExperimentArgs),
    /// Verify the repository; exit non-zero if anything is damaged.
    Check(check::CheckArgs),
    /// Rebuild derived data after damage (`check` says which to run).
    #[command(subcommand)]
    Repair(repair::RepairCommand),
    /// Remove snapshots, by id or by a retention policy (restic's rules:
    /// docs/gc.md). Their data goes at the next `gc` (or with --prune).
    Forget(forget::ForgetArgs),
    /// A new snapshot naming the same tree as SNAPSHOT: constant
    /// time, nothing written but the record.
    ///
    /// `--tag` names the copy's tags, so the tag filter is `--filter-tag` here.
    #[command(mut_arg("filter_tag", |a| a.long("filter-tag")))]
    Fastcopy(fastcopy::FastcopyArgs),
    /// Garbage collection: find the chunks no snapshot needs and reclaim
    /// their space (mark, select, copy forward, commit, delete; docs/gc.md).
    #[command(alias = "prune")]
    Gc(gc::GcArgs),
    /// What changed from snapshot OLD to NEW: added (+), removed (-),
    /// modified (M) and, with --metadata, metadata-only (U) changes.
    /// Unchanged subtrees and files are recognised by their fingerprints
    /// and never read.
    Diff(diff::DiffArgs),
    /// Paths matching a glob in every snapshot (or the given ones):
    /// `*` and `?` stay within a name, `**` crosses directories; a pattern
    /// without `/` matches names, one with `/` whole paths.
    Find(find::FindArgs),
    /// Change the tags of snapshots. Each changed snapshot gets a new id
    /// (records are named by their content): the new record is written,
    /// then the old one deleted.
    Tag(tag::TagArgs),
    /// The key files of an encrypted repository: list, add, remove, passwd.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Take the password once and keep the repository's key unlocked for
    /// DURATION (kernel keyring, or a tmpfs file; docs/security.md): until
    /// then commands need no password.
    Unlock(unlock::UnlockArgs),
    /// Forget the unlocked key of --repo (or of every repository: --all) at once.
    Lock(unlock::LockArgs),
    /// Print a shell completion script for SHELL to standard output, e.g.
    /// `cairn completions bash > /etc/bash_completion.d/cairn`.
    Completions(completions::CompletionsArgs),
    /// Write man pages (cairn.1 and one cairn-COMMAND.1 per subcommand) into DIR.
    Man(man::ManArgs),
    /// A primary volume (docs/volume.md): files deduplicated in place
    /// after they cool down. create, optimize, status.
    #[command(subcommand)]
    Volume(crate::commands::volume::VolumeCommand),
}

/// The commands that open no repository: the repository options (global,
/// so that `cairn --repo R backup` and `cairn backup --repo R` both work)
/// are refused on their command line, where they would be ignored.
pub const NO_REPOSITORY: [&str; 6] = [
    "trace",
    "sim",
    "analyze",
    "experiment",
    "completions",
    "man",
];

/// The argument ids of the repository options (`Globals`, `S3Args`).
pub const REPOSITORY_OPTIONS: [&str; 11] = [
    "repo",
    "password_file",
    "password_command",
    "s3_endpoint",
    "s3_path_style",
    "s3_uploads",
    "s3_downloads",
    "s3_lease_secs",
    "s3_timeout",
    "cache_dir",
    "no_cache",
];

/// The command line's definition.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// A usage error (exit 2) if a command of [`NO_REPOSITORY`] was given a
/// repository option on the command line.
pub fn refuse_repository_options(cmd: &mut clap::Command, matches: &clap::ArgMatches) {
    let Some((name, sub)) = matches.subcommand() else {
        return;
    };
    if !NO_REPOSITORY.contains(&name) {
        return;
    }
    let given = REPOSITORY_OPTIONS.iter().find(|id| {
        [matches, sub]
            .iter()
            .any(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
    });
    if let Some(id) = given {
        let e = cmd.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--{} does not apply to `cairn {name}`: it opens no repository",
                id.replace('_', "-")
            ),
        );
        crate::exit_codes::exit_on_usage_error(e);
    }
}
