//! `cairn man --out DIR`: man pages (clap_mangen) generated from the clap
//! definition (`cli.rs` and `commands/`), so they cannot drift from the real
//! flags.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

use crate::globals::Globals;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory for the pages (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Writes `cairn.1` and one `cairn-SUB[-SUBSUB].1` per subcommand into `dir`.
pub fn man_pages(cli: &Globals, mut cmd: clap::Command, dir: &Path) -> Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Subcommands get their full names (`cairn-repair-index`) and the
    // global flags, as `--help` shows them.
    cmd.build();
    let mut written = 0;
    write_pages(&cmd, dir, &mut written)?;
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "directory": dir, "pages": written,
            }))?
        );
    } else if !cli.quiet {
        println!("wrote {written} man pages to {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut usize) -> Result<()> {
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name.to_uppercase())
        .render(&mut buf)
        .with_context(|| format!("rendering the man page of {name}"))?;
    std::fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    *written += 1;
    // A hidden command gets no page.
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}
