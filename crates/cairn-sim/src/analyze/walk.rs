//! The file walk of `cairn analyze` and the two partitionings of
//! `004_62bf1a5ddd5ed253.txt` ("Efficient partitioning strategies"): by file
//! type (the lowercased extension) and by file path (directory subtrees).
//!
//! Path partitions follow `004`'s "partition by directory sub-trees (each
//! partition <= 10% of total bytes)": walking down from each given path, the
//! first directory whose whole subtree holds at most `share` of all bytes is
//! one partition; a directory that is larger is split into its
//! subdirectories, and the files directly in it form one more partition
//! (`dir/ (own files)`), however large. A file given directly is its own
//! partition.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use cairn_core::{Error, Result};

use super::{AnalyzeOptions, MAX_NOTES};

/// One regular file to read.
pub(super) struct FileEntry {
    pub path: PathBuf,
    /// Size at walk time (the study counts what it reads).
    pub size: u64,
    /// Index into [`Tree::type_labels`].
    pub type_part: u32,
    /// Index into [`Tree::path_labels`].
    pub path_part: u32,
    /// Index of the directory holding the file (in the walk's order).
    pub dir: u32,
}

/// The walk's result.
pub(super) struct Tree {
    pub files: Vec<FileEntry>,
    pub type_labels: Vec<String>,
    pub path_labels: Vec<String>,
    pub notes: Vec<String>,
    pub notes_total: u64,
    pub non_regular: u64,
    pub truncated: bool,
}

impl Tree {
    pub(super) fn note(&mut self, path: &Path, what: impl std::fmt::Display) {
        self.notes_total += 1;
        if self.notes.len() < MAX_NOTES {
            self.notes.push(format!("{}: {what}", path.display()));
        }
    }
}

/// A directory seen by the walk; parents come before their children.
struct Dir {
    path: PathBuf,
    parent: Option<u32>,
    /// A given path that is a file: the "directory" is the file itself.
    is_file: bool,
    /// Bytes of the files directly in it, then of its whole subtree.
    bytes: u64,
}

/// Walks `paths` (names sorted, depth first; a directory's own files before
/// its subdirectories) and assigns every file its partitions.
pub(super) fn walk(paths: &[PathBuf], opts: &AnalyzeOptions) -> Result<Tree> {
    let mut tree = Tree {
        files: Vec::new(),
        type_labels: Vec::new(),
        path_labels: Vec::new(),
        notes: Vec::new(),
        notes_total: 0,
        non_regular: 0,
        truncated: false,
    };
    let mut dirs: Vec<Dir> = Vec::new();
    let mut types: HashMap<String, u32> = HashMap::new();
    let limit = opts.max_files.unwrap_or(u64::MAX);
    let excluded = |name: &std::ffi::OsStr| opts.exclude_names.iter().any(|x| name == x.as_str());

    'roots: for root in paths {
        let meta =
            fs::metadata(root).map_err(|e| Error::io(format!("analyze {}", root.display()), e))?;
        if meta.is_file() {
            if tree.files.len() as u64 >= limit {
                tree.truncated = true;
                break;
            }
            dirs.push(Dir {
                path: root.clone(),
                parent: None,
                is_file: true,
                bytes: 0,
            });
            let dir = dirs.len() as u32 - 1;
            add_file(&mut tree, &mut types, root.clone(), meta.len(), dir);
            continue;
        }
        if !meta.is_dir() {
            tree.non_regular += 1;
            continue;
        }
        dirs.push(Dir {
            path: root.clone(),
            parent: None,
            is_file: false,
            bytes: 0,
        });
        let mut stack = vec![dirs.len() as u32 - 1];
        while let Some(d) = stack.pop() {
            let path = dirs[d as usize].path.clone();
            let mut entries =
                match fs::read_dir(&path).and_then(|it| it.collect::<Result<Vec<_>, _>>()) {
                    Ok(v) => v,
                    Err(e) => {
                        tree.note(&path, e);
                        continue;
                    }
                };
            entries.sort_by_key(|e| e.file_name());
            let mut subdirs = Vec::new();
            for entry in entries {
                if excluded(&entry.file_name()) {
                    continue;
                }
                let p = entry.path();
                let ft = match entry.file_type() {
                    Ok(t) => t,
                    Err(e) => {
                        tree.note(&p, e);
                        continue;
                    }
                };
                if ft.is_dir() {
                    dirs.push(Dir {
                        path: p,
                        parent: Some(d),
                        is_file: false,
                        bytes: 0,
                    });
                    subdirs.push(dirs.len() as u32 - 1);
                } else if ft.is_file() {
                    if tree.files.len() as u64 >= limit {
                        tree.truncated = true;
                        break 'roots;
                    }
                    match entry.metadata() {
                        Ok(m) => add_file(&mut tree, &mut types, p, m.len(), d),
                        Err(e) => tree.note(&p, e),
                    }
                } else {
                    tree.non_regular += 1;
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
    }
    assign_path_partitions(&mut tree, &mut dirs, opts.path_partition_share);
    Ok(tree)
}

fn add_file(tree: &mut Tree, types: &mut HashMap<String, u32>, path: PathBuf, size: u64, dir: u32) {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_else(|| "(none)".to_string());
    let next = types.len() as u32;
    let type_part = *types.entry(ext.clone()).or_insert_with(|| {
        tree.type_labels.push(ext);
        next
    });
    tree.files.push(FileEntry {
        path,
        size,
        type_part,
        path_part: 0,
        dir,
    });
}

/// Sets every file's `path_part` (see the module doc).
fn assign_path_partitions(tree: &mut Tree, dirs: &mut [Dir], share: f64) {
    for f in &tree.files {
        dirs[f.dir as usize].bytes += f.size;
    }
    // Children come after their parents: a reverse pass sums subtrees.
    for d in (0..dirs.len()).rev() {
        if let Some(p) = dirs[d].parent {
            dirs[p as usize].bytes += dirs[d].bytes;
        }
    }
    let total: u64 = tree.files.iter().map(|f| f.size).sum();
    let limit = share * total as f64;
    // subtree[d]: the directory whose subtree is d's partition, if any.
    let mut subtree: Vec<Option<u32>> = Vec::with_capacity(dirs.len());
    for (d, dir) in dirs.iter().enumerate() {
        let inherited = dir.parent.and_then(|p| subtree[p as usize]);
        subtree.push(inherited.or(((dir.bytes as f64) <= limit).then_some(d as u32)));
    }
    // Partition keys: (directory, whole subtree?).
    let mut ids: HashMap<(u32, bool), u32> = HashMap::new();
    for f in &mut tree.files {
        let key = match subtree[f.dir as usize] {
            Some(a) => (a, true),
            None => (f.dir, false),
        };
        let next = ids.len() as u32;
        f.path_part = *ids.entry(key).or_insert_with(|| {
            let dir = &dirs[key.0 as usize];
            let shown = dir.path.display();
            tree.path_labels.push(match (dir.is_file, key.1) {
                (true, _) => shown.to_string(),
                (false, true) => format!("{shown}/"),
                (false, false) => format!("{shown}/ (own files)"),
            });
            next
        });
    }
}
