//! The exit codes of `cairn` besides 0 (success), 1 (an error) and 2 (a
//! usage error): listed in docs/cli.md. A usage error is printed as one
//! line, like every other error.

/// Exit code of a backup that committed a snapshot but skipped paths.
pub(crate) const EXIT_INCOMPLETE: u8 = 3;

/// Exit code of an interrupted command (128 + SIGINT, as shells report it).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Exit code of a usage error: an unknown option, a missing argument, a
/// value outside an option's list.
pub(crate) const EXIT_USAGE: i32 = 2;

/// Ends the process for a command line clap refused: help and version are
/// printed as clap prints them (exit 0); an error becomes one line,
/// `cairn: error: ...` with clap's hints on that line, and exit 2.
pub(crate) fn exit_on_usage_error(e: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit()
    }
    eprintln!("cairn: error: {}", one_line(&e.render().to_string()));
    std::process::exit(EXIT_USAGE)
}

/// clap's multi-line error text as one line: the message, the values or
/// arguments it lists and any tip, without the usage and help pointers.
fn one_line(text: &str) -> String {
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .collect();
    let joined = parts.join(" ");
    let joined = joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string();
    format!("{joined} (see --help)")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn clap_errors_become_one_line() {
        let text = "error: invalid value 'rot13' for '--encryption <ALGORITHM>'\n  [possible values: aes-256-gcm, none]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(text),
            "invalid value 'rot13' for '--encryption <ALGORITHM>' [possible values: aes-256-gcm, none] (see --help)"
        );
        let text = "error: the following required arguments were not provided:\n  --target <TARGET>\n\nUsage: cairn restore --target <TARGET> <SNAPSHOT>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(text),
            "the following required arguments were not provided: --target <TARGET> (see --help)"
        );
    }
}
