//! The options every command sees (`--json`, `--quiet`, `--verbose`,
//! `--utc`) and those of the repository it works on, as the commands read
//! them. Below the commands: the shared modules (repository opening,
//! output) take a `&Globals`, never the whole command line.
//!
//! The repository options are parsed as [`RepoArgs`], which only the
//! commands that open a repository carry (and the top level, for `cairn
//! --repo R COMMAND`); `cli::settle_repository_options` copies the
//! options in force into the `Globals` the command reads.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

use crate::repo_location::S3Args;

#[derive(Args, Debug, Clone, Default)]
pub struct Globals {
    /// Machine-readable JSON on standard output.
    #[arg(long, global = true)]
    pub json: bool,

    /// No progress bar and no summary lines (errors and warnings still go to stderr).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// More detail: one line per file and directory in backup (new,
    /// changed or unmodified; -vv adds size, chunks and bytes added) and
    /// per file in restore (new, replaced or skipped), per-snapshot
    /// statistics in `snapshots`. Internal figures: `--stats`, `--json`.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Show times in UTC instead of the local time zone (`TZ`, else the
    /// system's). JSON times are always UTC.
    #[arg(long, global = true)]
    pub utc: bool,

    /// The repository options in force, wherever they were written
    /// (`cli::settle_repository_options`).
    #[arg(skip)]
    pub repository: RepoArgs,

    /// The settings given on the command line of `backup`, `trace` or `sim`
    /// (argument ids), filled in by `main` from clap's value sources.
    #[arg(skip)]
    pub given_init_flags: Vec<String>,
}

impl Globals {
    /// Makes `options` the password sources the command reads.
    pub fn set_password(&mut self, options: PasswordArgs) {
        self.repository.password = options;
    }

    /// Makes `options` the repository options the command reads.
    pub fn set_repository(&mut self, options: RepoArgs) {
        self.repository = options;
    }

    /// `--repo` in force.
    pub fn repo(&self) -> Option<&std::path::Path> {
        self.repository.repo.as_deref()
    }

    /// The S3 and metadata-cache options in force.
    pub fn s3(&self) -> &S3Args {
        &self.repository.s3
    }
}

/// The options of the repository a command opens, under the headings
/// "Repository", "S3 repositories" and "Metadata cache": flattened into
/// the options of every command that opens one (not global, so the
/// commands that open none do not list them and clap refuses them there),
/// and into the top level for `cairn --repo R COMMAND`. The commands read
/// them through [`Globals`].
#[derive(Args, Debug, Clone, Default)]
pub struct RepoArgs {
    /// Repository directory (created by `init`, or by `backup --init`),
    /// or an S3 bucket prefix: s3:https://HOST[:PORT]/BUCKET/PREFIX, s3://BUCKET/PREFIX.
    #[arg(short, long, env = "CAIRN_REPO", help_heading = "Repository")]
    pub repo: Option<PathBuf>,

    #[command(flatten)]
    pub password: PasswordArgs,

    #[command(flatten)]
    pub s3: S3Args,
}

/// Where the password of an encrypted repository comes from, besides
/// `CAIRN_PASSWORD`, the unlocked-key cache and the prompt: part of
/// [`RepoArgs`], and of the `volume` commands (a volume's chunk store is
/// a repository).
#[derive(Args, Debug, Clone, Default)]
pub struct PasswordArgs {
    /// Read the repository password from the first line of PATH (an
    /// encrypted repository only; see docs/security.md).
    // An empty CAIRN_PASSWORD_FILE counts as unset (`repo_open::password`),
    // so clap must accept the empty value its default path parser refuses.
    #[arg(
        long,
        env = "CAIRN_PASSWORD_FILE",
        help_heading = "Repository",
        value_name = "PATH",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub password_file: Option<PathBuf>,

    /// Run COMMAND with `sh -c` and read the repository password from the
    /// first line of its output (as CAIRN_PASSWORD_COMMAND; after
    /// --password-file and CAIRN_PASSWORD).
    #[arg(long, help_heading = "Repository", value_name = "COMMAND")]
    pub password_command: Option<String>,
}
