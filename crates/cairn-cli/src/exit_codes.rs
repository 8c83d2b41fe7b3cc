//! The exit codes of `cairn` besides 0 (success), 1 (an error) and 2 (a
//! usage error, clap's): listed in docs/cli.md.

/// Exit code of a backup that committed a snapshot but skipped paths.
pub(crate) const EXIT_INCOMPLETE: u8 = 3;

/// Exit code of an interrupted command (128 + SIGINT, as shells report it).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
