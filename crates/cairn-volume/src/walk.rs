//! Walks the backing tree: every regular file once per inode (a hard link
//! met again is skipped), symlinks never followed, directories and files
//! told apart by their directory entries' types; or, for recovery, only
//! the files whose inodes it asks for, picked by the directory entries'
//! inode numbers, so no other file is `stat`ed.

use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::os::unix::fs::{DirEntryExt, MetadataExt};
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
    regular_files_among(root, &|_| true, visit)
}

/// [`regular_files`], only those whose inode `wanted` accepts. A directory
/// entry's inode number (`d_ino`) and type (`d_type`) pick the files, so
/// only those are `stat`ed. Where a file system reports a `d_ino` other
/// than the file's `st_ino` (some stacked ones), a file can be missed: a
/// caller that must find every wanted file walks with [`regular_files`]
/// for the rest.
pub fn regular_files_among(
    root: &Path,
    wanted: &dyn Fn(u64) -> bool,
    visit: &mut dyn FnMut(BackingFile) -> Result<()>,
) -> Result<()> {
    let mut seen = HashSet::new();
    walk_dir(root, Path::new(""), wanted, &mut seen, visit)
}

fn walk_dir(
    dir: &Path,
    rel: &Path,
    wanted: &dyn Fn(u64) -> bool,
    seen: &mut HashSet<u64>,
    visit: &mut dyn FnMut(BackingFile) -> Result<()>,
) -> Result<()> {
    let read = |e| Error::io(format!("listing {}", dir.display()), e);
    let mut entries: Vec<fs::DirEntry> = fs::read_dir(dir)
        .map_err(read)?
        .collect::<std::io::Result<_>>()
        .map_err(read)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Some(kind) = unless_gone(e.file_type(), &e.path())? else {
            continue;
        };
        let rel = rel.join(e.file_name());
        if kind.is_dir() {
            walk_dir(&e.path(), &rel, wanted, seen, visit)?;
        } else if kind.is_file() && wanted(e.ino()) {
            let path = e.path();
            let Some(meta) = unless_gone(fs::symlink_metadata(&path), &path)? else {
                continue;
            };
            if meta.is_file() && seen.insert(meta.ino()) {
                visit(BackingFile { rel, path, meta })?;
            }
        }
    }
    Ok(())
}

/// What asking about `path` gave: `None` when it was removed since the
/// listing (nothing to visit).
fn unless_gone<T>(asked: std::io::Result<T>, path: &Path) -> Result<Option<T>> {
    match asked {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_among_wanted_inodes_finds_just_those_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        for p in ["x", "a/y", "a/b/z", "a/b/w"] {
            fs::write(root.join(p), p).unwrap();
        }
        fs::hard_link(root.join("a/y"), root.join("a/b/y2")).unwrap();
        std::os::unix::fs::symlink(root.join("x"), root.join("a/link")).unwrap();
        let ino = |p: &str| fs::metadata(root.join(p)).unwrap().ino();
        let want: HashSet<u64> = [ino("a/y"), ino("a/b/z"), 1].into_iter().collect();
        let mut found = Vec::new();
        regular_files_among(root, &|i| want.contains(&i), &mut |f| {
            found.push(f.meta.ino());
            Ok(())
        })
        .unwrap();
        found.sort();
        let mut expect = vec![ino("a/y"), ino("a/b/z")];
        expect.sort();
        assert_eq!(
            found, expect,
            "each wanted file once, a hard link not again"
        );
        // The full walk finds the same files among all of them.
        let mut all = Vec::new();
        regular_files(root, &mut |f| {
            all.push(f.meta.ino());
            Ok(())
        })
        .unwrap();
        assert_eq!(all.len(), 4);
        assert!(expect.iter().all(|i| all.contains(i)));
    }
}
