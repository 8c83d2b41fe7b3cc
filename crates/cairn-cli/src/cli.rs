//! The `cairn` command line: the global options and the list of commands.
//! Each command's own options are its `Args` struct, in its file under
//! `commands/`; `commands::run` dispatches. The repository options
//! (`RepoArgs`) belong to the commands that open a repository, and may
//! also be written before the command name; [`settle_repository_options`]
//! decides which are in force.

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Parser, Subcommand};

use crate::commands::{
    analyze, backup, cat, check, completions, copy, diff, dump, experiment, fastcopy, find, forget,
    gc, init, key, ls, man, mount, repair, restore, sim, snapshots, tag, trace, unlock,
};
use crate::globals::{Globals, PasswordArgs, RepoArgs};
use crate::repo_location::S3Args;

#[derive(Parser, Debug)]
#[command(
    name = "cairn",
    version,
    about = "Deduplicating backups: DDFS-style dedup, Merkle-tree recipes, verified restores",
    after_help = "Repository options (--repo, --password-file, --password-command, S3 and \
                  metadata-cache options) are listed by each command that opens a repository \
                  (`cairn COMMAND --help`); they may also come before the command name: \
                  `cairn --repo R COMMAND ...`."
)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,

    /// The repository options written before the command name (hidden in
    /// `cairn --help` by [`command`]: each command that opens a repository
    /// lists them).
    #[command(flatten)]
    pub repository: RepoArgs,

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
    Backup(Box<backup::BackupArgs>),
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
    Stats(RepoArgs),
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

impl Command {
    /// The repository options given with the command, or `None` for a
    /// command that opens no repository (and does not accept them).
    pub fn repository(&self) -> Option<&RepoArgs> {
        use crate::commands::key::KeyCommand;
        use crate::commands::repair::RepairCommand;
        Some(match self {
            Command::Init(a) => &a.repository,
            Command::Copy(a) => &a.repository,
            Command::Backup(a) => &a.repository,
            Command::Snapshots(a) => &a.repository,
            Command::Ls(a) => &a.repository,
            Command::Restore(a) => &a.repository,
            Command::Cat(a) => &a.repository,
            Command::Mount(a) => &a.repository,
            Command::Dump(a) => &a.repository,
            Command::Stats(repository) => repository,
            Command::Check(a) => &a.repository,
            Command::Repair(
                RepairCommand::Index { repository, .. }
                | RepairCommand::Snapshots { repository, .. },
            ) => repository,
            Command::Forget(a) => &a.repository,
            Command::Fastcopy(a) => &a.repository,
            Command::Gc(a) => &a.repository,
            Command::Diff(a) => &a.repository,
            Command::Find(a) => &a.repository,
            Command::Tag(a) => &a.repository,
            Command::Key(
                KeyCommand::List(repository)
                | KeyCommand::Add { repository, .. }
                | KeyCommand::Remove { repository, .. }
                | KeyCommand::Passwd { repository, .. },
            ) => repository,
            Command::Unlock(a) => &a.repository,
            Command::Lock(a) => &a.repository,
            Command::Trace(_)
            | Command::Sim(_)
            | Command::Analyze(_)
            | Command::Experiment(_)
            | Command::Completions(_)
            | Command::Man(_) => return None,
            // A volume's store is found in its directory, never by --repo;
            // its commands take the password options themselves.
            Command::Volume(_) => return None,
        })
    }
}

/// The argument ids of the repository options (`RepoArgs`, `S3Args`).
fn repository_option_ids() -> Vec<String> {
    RepoArgs::augment_args(clap::Command::new("repository"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

/// The command line's definition. The repository options before the
/// command name are hidden from `cairn --help`: they do not apply to every
/// command, and each command that takes them lists them in its help.
pub fn command() -> clap::Command {
    let ids = repository_option_ids();
    <Cli as clap::CommandFactory>::command().mut_args(|a| {
        if ids.iter().any(|id| a.get_id() == id.as_str()) {
            a.hide(true)
        } else {
            a
        }
    })
}

fn on_command_line(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// Fills the repository options of `cli.globals` (what the commands read)
/// from the two places they may be written. Each option is taken from
/// after the command name if given there, else from before it if given
/// there, else from after it again (its environment variable or default):
/// `cairn --repo A backup --repo B` works on B, as the later of two
/// settings of one option does elsewhere. A command that opens no
/// repository gets a usage error (exit 2) for a repository option before
/// its name (after it, clap already refused it); the environment's are
/// kept and unused.
pub fn settle_repository_options(
    definition: &mut clap::Command,
    matches: &ArgMatches,
    cli: &mut Cli,
) {
    // The options of `key add` or `repair index` are in the matches of the
    // innermost subcommand.
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    let settled = match cli.command.repository() {
        Some(after) => merged(&cli.repository, matches, after, leaf),
        None => {
            refuse_repository_options(definition, matches);
            cli.repository.clone()
        }
    };
    cli.globals.set_repository(settled);
}

/// The options in force, one by one: `after`'s if given on the command
/// line after the command name, else `before`'s if given before it, else
/// `after`'s (environment or default).
fn merged(
    before: &RepoArgs,
    before_matches: &ArgMatches,
    after: &RepoArgs,
    after_matches: &ArgMatches,
) -> RepoArgs {
    let pick = |id: &str| {
        if on_command_line(before_matches, id) && !on_command_line(after_matches, id) {
            before
        } else {
            after
        }
    };
    RepoArgs {
        repo: pick("repo").repo.clone(),
        password: PasswordArgs {
            password_file: pick("password_file").password.password_file.clone(),
            password_command: pick("password_command").password.password_command.clone(),
        },
        s3: S3Args {
            s3_endpoint: pick("s3_endpoint").s3.s3_endpoint.clone(),
            s3_path_style: pick("s3_path_style").s3.s3_path_style,
            s3_uploads: pick("s3_uploads").s3.s3_uploads,
            s3_downloads: pick("s3_downloads").s3.s3_downloads,
            s3_lease_secs: pick("s3_lease_secs").s3.s3_lease_secs,
            s3_timeout: pick("s3_timeout").s3.s3_timeout,
            cache_dir: pick("cache_dir").s3.cache_dir.clone(),
            no_cache: pick("no_cache").s3.no_cache,
        },
    }
}

/// A usage error (exit 2) for a repository option written before the name
/// of a command that opens no repository (`cairn --repo R sim`), where it
/// would be ignored.
fn refuse_repository_options(definition: &mut clap::Command, matches: &ArgMatches) {
    let Some(name) = matches.subcommand_name() else {
        return;
    };
    let given = repository_option_ids()
        .into_iter()
        .find(|id| on_command_line(matches, id));
    if let Some(id) = given {
        let e = definition.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--{} does not apply to `cairn {name}`: it opens no repository",
                id.replace('_', "-")
            ),
        );
        crate::exit_codes::exit_on_usage_error(e);
    }
}

/// clap's error for a repository option written after the name of a
/// command that opens no repository (`cairn sim --repo R`), which it knows
/// only as an unexpected argument (and may answer with a look-alike such as
/// `--restore`), becomes the error `cairn --repo R sim` gets; written
/// between `key` or `repair` and their subcommand, it becomes a pointer to
/// where it goes. Any other error is returned as it is.
pub fn explain_misplaced_option(definition: &clap::Command, e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let repository = RepoArgs::augment_args(clap::Command::new("repository"));
    let option = if let Some(long) = arg.strip_prefix("--") {
        let long = long.split('=').next().unwrap_or(long);
        repository
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
    } else {
        let short = arg.strip_prefix('-').and_then(|s| s.chars().next());
        repository
            .get_arguments()
            .find(|a| a.get_short().is_some() && a.get_short() == short)
    };
    let Some(long) = option.and_then(|a| a.get_long()) else {
        return e;
    };
    // Which command it followed: the command line parsed again, passing
    // over what clap refused.
    let reparsed = definition
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(std::env::args_os());
    let Some(name) = reparsed
        .as_ref()
        .ok()
        .and_then(|m| m.subcommand_name().map(str::to_string))
    else {
        return e;
    };
    let takes_it = |c: &clap::Command| c.get_arguments().any(|a| a.get_id() == "repo");
    let Some(command) = definition.find_subcommand(&name) else {
        return e;
    };
    let message = if takes_it(command) {
        return e;
    } else if command.get_subcommands().any(takes_it) {
        // `cairn key --repo R list`: the options belong to `list`.
        format!(
            "--{long} goes after the subcommand of `cairn {name}` \
             (`cairn {name} SUBCOMMAND --{long} ...`) or before `{name}`"
        )
    } else {
        format!("--{long} does not apply to `cairn {name}`: it opens no repository")
    };
    definition
        .clone()
        .error(ErrorKind::ArgumentConflict, message)
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    use super::*;

    /// The repository options the command would read for `args`.
    fn settled(args: &[&str]) -> String {
        let mut definition = command();
        let matches = definition
            .clone()
            .try_get_matches_from(std::iter::once("cairn").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let mut cli = Cli::from_arg_matches(&matches).unwrap();
        settle_repository_options(&mut definition, &matches, &mut cli);
        let g = &cli.globals;
        format!(
            "{:?} {:?} {:?} {:?}",
            g.repository.repo,
            g.repository.password.password_file,
            g.repository.password.password_command,
            g.repository.s3
        )
    }

    #[test]
    fn the_definition_is_consistent() {
        command().debug_assert();
    }

    /// Each option given before the command name reaches the command as if
    /// given after it (a field read from another option's position would
    /// not); given in both places, the one after the name wins.
    #[test]
    fn repository_options_work_before_and_after_the_command_name() {
        let options: [&[&str]; 11] = [
            &["--repo", "/r1"],
            &["--password-file", "/p1"],
            &["--password-command", "echo 1"],
            &["--s3-endpoint", "http://one"],
            &["--s3-path-style"],
            &["--s3-uploads", "3"],
            &["--s3-downloads", "5"],
            &["--s3-lease-secs", "30"],
            &["--s3-timeout", "7"],
            &["--cache-dir", "/c1"],
            &["--no-cache"],
        ];
        assert_eq!(options.len(), repository_option_ids().len());
        let none = settled(&["stats"]);
        for option in options {
            let after = settled(&[&["stats"], option].concat());
            assert_ne!(after, none, "{option:?}");
            assert_eq!(settled(&[option, &["stats"]].concat()), after, "{option:?}");
            if option.len() == 2 {
                let other = [option[0], "80"];
                assert_eq!(
                    settled(&[option, &["stats"], &other].concat()),
                    settled(&["stats", other[0], other[1]]),
                    "{option:?}"
                );
            }
        }
        // The nested commands take them after their own name.
        assert_eq!(
            settled(&["--repo", "/a", "key", "add", "--repo", "/b"]),
            settled(&["key", "add", "--repo", "/b"])
        );
        assert_eq!(
            settled(&["--repo", "/a", "repair", "index"]),
            settled(&["repair", "index", "--repo", "/a"])
        );
    }

    /// The commands that open no repository do not take the options.
    #[test]
    fn commands_without_a_repository_do_not_list_repository_options() {
        let definition = command();
        for name in [
            "trace",
            "sim",
            "analyze",
            "experiment",
            "completions",
            "man",
        ] {
            let sub = definition.find_subcommand(name).unwrap();
            let ids = repository_option_ids();
            assert!(
                !sub.get_arguments()
                    .any(|a| ids.iter().any(|id| a.get_id() == id.as_str())),
                "{name}"
            );
        }
    }
}
