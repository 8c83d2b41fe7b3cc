//! The text a restore prints about what it did, and what `restore
//! --dry-run` would do (docs/restore-target.md).

use std::path::Path;

use cairn_engine::restore::RestoreSummary;

use crate::output::bytes;

/// The lines of `restore --dry-run`: what a restore with the same options
/// would write (new), replace, skip and delete, with the totals. The words
/// match what `restore -v` prints per entry.
pub fn dry_run_lines(sum: &RestoreSummary, target: &Path) -> Vec<String> {
    vec![
        format!(
            "dry run: would restore {} files, {} dirs, {} symlinks ({}) to {}",
            sum.files,
            sum.dirs,
            sum.symlinks,
            bytes(sum.bytes),
            target.display()
        ),
        format!(
            "{} new, {} replaced, {} skipped, {} deleted; nothing was changed",
            sum.new, sum.replaced, sum.skipped, sum.deleted
        ),
    ]
}
