//! `backup -v`: one line per file and directory with its state against
//! the parent snapshot, in restic's words (`new`, `changed`,
//! `unmodified`); `-vv` adds its size, the chunks read and the bytes it
//! added to the repository.

use std::io::Write;
use std::sync::Arc;

use cairn_engine::backup::events::{EntryLog, EntryReport};

use crate::output::{bytes, display_name};

/// The engine's entry log for verbosity `verbose` (the count of `-v`), or
/// `None` when nothing is listed (no `-v`, or `--quiet`/`--json`).
pub fn entry_log(verbose: u8, silent: bool) -> Option<EntryLog> {
    if verbose == 0 || silent {
        return None;
    }
    let detailed = verbose > 1;
    Some(Arc::new(move |r: &EntryReport| {
        let line = entry_line(r, detailed);
        // One write per line: streams backing up several sources at once
        // never interleave inside a line.
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }))
}

/// One entry's line: state, then path (directories end in `/`); with
/// `detailed`, the size and, for a file that was read, its chunks and the
/// bytes it added.
pub fn entry_line(r: &EntryReport, detailed: bool) -> String {
    let mut line = format!("{:<10} {}", r.state.name(), display_name(&r.path));
    if detailed {
        if r.dir {
            line.push_str(&format!("  (listing {})", bytes(r.size)));
        } else if r.chunks > 0 {
            line.push_str(&format!(
                "  ({}, {} chunks, {} added)",
                bytes(r.size),
                r.chunks,
                bytes(r.added_bytes)
            ));
        } else {
            line.push_str(&format!("  ({})", bytes(r.size)));
        }
    }
    line
}
