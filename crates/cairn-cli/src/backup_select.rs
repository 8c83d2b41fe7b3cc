//! `cairn backup`'s selection flags: turns `--exclude`, `--iexclude`,
//! `--exclude-file`, `--exclude-if-present`, `--exclude-caches`,
//! `--exclude-larger-than`, `--one-file-system` and `--files-from` into the
//! engine's [`Selection`] and source list, and prints `--dry-run`'s report.
//! Parsing only: what is left out is decided by the engine
//! (`cairn_engine::backup::select`); command-line behaviour, no paper's.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::json;

use cairn_engine::{Selection, Source};

use crate::globals::Globals;
use crate::output::bytes;

/// The options choosing what a backup reads (flattened into `backup`).
#[derive(Args, Debug)]
pub struct SelectArgs {
    /// Leave out entries matching PATTERN (repeatable): `*`, `?`, `[...]`
    /// within a name, `**` across directories; without `/` it matches any
    /// entry's name, with a leading `/` the whole absolute path. A path
    /// given to back up is never left out. See docs/backup-selection.md.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// As --exclude, ignoring case.
    #[arg(long, value_name = "PATTERN")]
    pub iexclude: Vec<String>,
    /// Read --exclude patterns from FILE, one a line (blank lines and
    /// lines starting with `#` ignored); repeatable.
    #[arg(long, value_name = "FILE")]
    pub exclude_file: Vec<PathBuf>,
    /// As --exclude-file, the patterns ignoring case.
    #[arg(long, value_name = "FILE")]
    pub iexclude_file: Vec<PathBuf>,
    /// Leave out every directory holding an entry named NAME (repeatable).
    #[arg(long, value_name = "NAME")]
    pub exclude_if_present: Vec<String>,
    /// Leave out directories holding a valid CACHEDIR.TAG file.
    #[arg(long)]
    pub exclude_caches: bool,
    /// Leave out files larger than SIZE (e.g. 10MiB).
    #[arg(long, value_name = "SIZE", value_parser = crate::values::size)]
    pub exclude_larger_than: Option<u64>,
    /// Do not cross into other file systems mounted below a path.
    #[arg(long)]
    pub one_file_system: bool,
    /// Also back up the paths listed in FILE, one a line (blank lines and
    /// lines starting with `#` ignored); repeatable.
    #[arg(long, value_name = "FILE")]
    pub files_from: Vec<PathBuf>,
}

/// The selection the flags describe; every pattern and file is checked here,
/// before anything is read or created.
pub fn selection(a: &SelectArgs) -> Result<Arc<Selection>> {
    let mut b = Selection::builder();
    for p in &a.exclude {
        b.pattern(p, false)?;
    }
    for p in &a.iexclude {
        b.pattern(p, true)?;
    }
    for f in &a.exclude_file {
        b.pattern_file(f, false)?;
    }
    for f in &a.iexclude_file {
        b.pattern_file(f, true)?;
    }
    for n in &a.exclude_if_present {
        b.if_present(n)?;
    }
    b.exclude_caches(a.exclude_caches)
        .larger_than(a.exclude_larger_than)
        .one_file_system(a.one_file_system);
    Ok(Arc::new(b.build()?))
}

/// The positional paths followed by those listed in `--files-from` files:
/// one path a line, taken as written (only the line ending is removed, so
/// names may hold spaces); blank lines and lines starting with `#` ignored.
pub fn paths(given: &[PathBuf], a: &SelectArgs) -> Result<Vec<PathBuf>> {
    let mut out = given.to_vec();
    for f in &a.files_from {
        let text = std::fs::read(f)
            .map_err(|e| anyhow!("cannot read --files-from {}: {e}", f.display()))?;
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            out.push(PathBuf::from(OsStr::from_bytes(line)));
        }
    }
    Ok(out)
}

/// `backup --dry-run`: walks like a backup, prints what it would read and
/// what it leaves out. `repo`: the repository path, only looked at (never
/// opened or created) so that it is left out of a source holding it, as a
/// real backup does.
pub fn dry_run(
    cli: &Globals,
    repo: &Path,
    sources: &[Source],
    selection: Arc<Selection>,
) -> Result<ExitCode> {
    let out = cairn_engine::dry_run(sources, selection, Some(repo))?;
    for s in &out.skipped {
        eprintln!("cairn: warning: skipped {s}");
    }
    for n in &out.notices {
        eprintln!("cairn: note: {n}");
    }
    if cli.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "dry_run": true,
                "files": out.files,
                "dirs": out.dirs,
                "symlinks": out.symlinks,
                "bytes": out.bytes,
                "excluded": out.excluded.len(),
                "excluded_paths": out.excluded,
                "skipped": out.skipped,
            }))?
        );
    } else if !cli.quiet {
        for e in &out.excluded {
            println!("excluded {e}");
        }
        println!(
            "dry run: would back up {} files, {} dirs, {} symlinks, {}; {} excluded",
            out.files,
            out.dirs,
            out.symlinks,
            bytes(out.bytes),
            out.excluded.len()
        );
    }
    if out.skipped.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "cairn: error: {} path(s) could not be read; a backup would hold everything else",
            out.skipped.len()
        );
        Ok(ExitCode::from(crate::exit_codes::EXIT_INCOMPLETE))
    }
}
