//! Walks the backing tree: every regular file once per inode (a hard link
//! met again is skipped), symlinks never followed.

use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cairn_core::{Error, Result};

/// A regular file of the backing tree.
pub struct BackingFile {
    /// Path below the tree's root.
    pub rel: PathBuf,
    pub path: PathBuf,
    pub meta: Metadata,
}

/// Calls `visit` for each regular file below `root`, the first name of
/// each inode only, in name order per directory.
pub fn regular_files(root: &Path, visit: &mut dyn FnMut(BackingFile) -> Result<()>) -> Result<()> {
    let mut seen = HashSet::new();
    walk_dir(root, Path::new(""), &mut seen, visit)
}

fn walk_dir(
    dir: &Path,
    rel: &Path,
    seen: &mut HashSet<u64>,
    visit: &mut dyn FnMut(BackingFile) -> Result<()>,
) -> Result<()> {
    let read = |e| Error::io(format!("listing {}", dir.display()), e);
    let mut names: Vec<_> = fs::read_dir(dir)
        .map_err(read)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .map_err(read)?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            // Removed since the listing: nothing to visit.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let rel = rel.join(&name);
        if meta.is_dir() {
            walk_dir(&path, &rel, seen, visit)?;
        } else if meta.is_file() && seen.insert(meta.ino()) {
            visit(BackingFile { rel, path, meta })?;
        }
    }
    Ok(())
}
