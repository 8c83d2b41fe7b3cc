//! The options every command sees (`--json`, `--quiet`, `--verbose`) and
//! those of the repository it works on, as the commands read them. Below
//! the commands: the shared modules (repository opening, output) take a
//! `&Globals`, never the whole command line.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct Globals {
    /// Repository directory (created by `init`, or by `backup --init`),
    /// or an S3 bucket prefix: s3:https://HOST[:PORT]/BUCKET/PREFIX, s3://BUCKET/PREFIX.
    #[arg(
        short,
        long,
        env = "CAIRN_REPO",
        global = true,
        help_heading = "Repository"
    )]
    pub repo: Option<PathBuf>,

    #[command(flatten)]
    pub s3: crate::repo_location::S3Args,

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

    /// Read the repository password from the first line of PATH (an
    /// encrypted repository only; see docs/security.md).
    // An empty CAIRN_PASSWORD_FILE counts as unset (`encryption::password`),
    // so clap must accept the empty value its default path parser refuses.
    #[arg(
        long,
        env = "CAIRN_PASSWORD_FILE",
        global = true,
        help_heading = "Repository",
        value_name = "PATH",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub password_file: Option<PathBuf>,

    /// Run COMMAND with `sh -c` and read the repository password from the
    /// first line of its output (as CAIRN_PASSWORD_COMMAND; after
    /// --password-file and CAIRN_PASSWORD).
    #[arg(
        long,
        global = true,
        help_heading = "Repository",
        value_name = "COMMAND"
    )]
    pub password_command: Option<String>,

    /// The settings given on the command line of `backup`, `trace` or `sim`
    /// (argument ids), filled in by `main` from clap's value sources.
    #[arg(skip)]
    pub given_init_flags: Vec<String>,
}
