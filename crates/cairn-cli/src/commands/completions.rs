//! `cairn completions SHELL`: a shell completion script.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the completion script for `shell` to standard output.
pub fn run(mut cmd: clap::Command, shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut cmd, "cairn", &mut out);
    Ok(ExitCode::SUCCESS)
}
