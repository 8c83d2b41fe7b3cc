//! Walks the backing tree: every regular file once per inode (a hard link
//! met again is skipped), symlinks never followed; or, for recovery, only
//! the files whose inodes it asks for, found by the directory entries'
//! inode numbers without a `stat` of every other file.

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

/// Calls `visit` for each regular file below `root` whose inode `wanted`
/// accepts, the first name of each inode only. A directory entry's inode
/// number (`d_ino`) and type (`d_type`) pick the files, so only those are
/// `stat`ed. Where a file system reports a `d_ino` other than the file's
/// `st_ino` (some stacked ones), a file can be missed: a caller that must
/// find every wanted file walks with [`regular_files`] for the rest.
pub fn regular_files_among(
    root: &Path,
    wanted: &dyn Fn(u64) -> bool,
    visit: &mut dyn FnMut(BackingFile) -> Result<()>,
) -> Result<()> {
    let mut seen = HashSet::new();
    walk_dir_among(root, Path::new(""), wanted, &mut seen, visit)
}

fn walk_dir_among(
    dir: &Path,
    rel: &Path,
    wanted: &dyn Fn(u64) -> bool,
    seen: &mut HashSet<u64>,
    visit: &mut dyn FnMut(BackingFile) -> Result<()>,
) -> Result<()> {
    let read = |e| Error::io(format!("listing {}", dir.display()), e);
    for e in fs::read_dir(dir).map_err(read)? {
        let e = e.map_err(read)?;
        let kind = match e.file_type() {
            Ok(k) => k,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(Error::io(format!("reading {}", e.path().display()), err)),
        };
        let rel = rel.join(e.file_name());
        if kind.is_dir() {
            walk_dir_among(&e.path(), &rel, wanted, seen, visit)?;
        } else if kind.is_file() && wanted(e.ino()) {
            let path = e.path();
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => return Err(Error::io(format!("reading {}", path.display()), err)),
            };
            if meta.is_file() && seen.insert(meta.ino()) {
                visit(BackingFile { rel, path, meta })?;
            }
        }
    }
    Ok(())
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
