//! Backup selection: which entries a walk leaves out (`--exclude`,
//! `--iexclude`, exclude files, `--exclude-if-present`, `--exclude-caches`,
//! `--exclude-larger-than`, `--one-file-system`). This is command-line
//! behaviour, not a paper's: the papers in `/work/shared/papers/` describe
//! what happens to the bytes once a file is chosen; this module decides which
//! files are chosen. docs/backup-selection.md is the user's description.
//!
//! Patterns are compiled by `crate::patterns` (restic-compatible, shared
//! with restore's `--include`/`--exclude`).
//!
//! The walker asks [`Selection::excluded_by_pattern`] before it stats an
//! entry, [`Selection::excluded_by_meta`] once it has the entry's metadata,
//! and [`Selection::excluded_dir`] once it has listed a directory. An
//! excluded directory is not descended into, so nothing below it is read or
//! counted. The sources themselves are never tested: a path given to
//! `backup` is always backed up.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use globset::{GlobSet, GlobSetBuilder};

use cairn_core::{Error, Result};

use crate::patterns::compile;

/// The name of the cache directory tag file and the line it starts with
/// (the Cache Directory Tagging convention).
pub const CACHEDIR_TAG: &str = "CACHEDIR.TAG";
pub const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// Why an entry was left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExcludeReason {
    /// Matched this pattern (quoted as the user wrote it, "(any case)"
    /// after an `--iexclude` one).
    Pattern(String),
    /// A directory holding a file of this name (`--exclude-if-present`).
    MarkerFile(String),
    /// A directory holding a valid `CACHEDIR.TAG` (`--exclude-caches`).
    CacheDir,
    /// A file larger than the limit (`--exclude-larger-than`), its size.
    Larger(u64),
    /// A directory on another file system than its source (`--one-file-system`).
    OtherFileSystem,
    /// Not one of the files a caller chose ([`SelectionBuilder::only_files`]).
    NotChosen,
}

impl std::fmt::Display for ExcludeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExcludeReason::Pattern(p) => write!(f, "matches {p}"),
            ExcludeReason::MarkerFile(n) => write!(f, "holds {n:?}"),
            ExcludeReason::CacheDir => write!(f, "holds a valid {CACHEDIR_TAG}"),
            ExcludeReason::Larger(n) => write!(f, "{n} bytes, over the size limit"),
            ExcludeReason::OtherFileSystem => write!(f, "on another file system"),
            ExcludeReason::NotChosen => write!(f, "not among the files chosen"),
        }
    }
}

/// What to leave out of a backup. The default leaves out nothing.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// The patterns as reported in exclusion reasons (as given, with
    /// "(any case)" after a case-insensitive one).
    patterns: Vec<String>,
    /// Compiled `patterns`, same order (index = pattern index).
    set: GlobSet,
    if_present: Vec<String>,
    exclude_caches: bool,
    larger_than: Option<u64>,
    one_file_system: bool,
    /// When set, every entry but a directory is left out unless its
    /// (device, inode) is here.
    only_files: Option<Arc<HashSet<(u64, u64)>>>,
}

/// Builds a [`Selection`]; every pattern is checked as it is added, so a bad
/// one is reported before anything is read or created.
pub struct SelectionBuilder {
    patterns: Vec<String>,
    set: GlobSetBuilder,
    if_present: Vec<String>,
    exclude_caches: bool,
    larger_than: Option<u64>,
    one_file_system: bool,
    only_files: Option<Arc<HashSet<(u64, u64)>>>,
}

impl Selection {
    pub fn builder() -> SelectionBuilder {
        SelectionBuilder::default()
    }

    /// Whether this selection can leave anything out.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
            && self.if_present.is_empty()
            && !self.exclude_caches
            && self.larger_than.is_none()
            && !self.one_file_system
            && self.only_files.is_none()
    }

    pub fn one_file_system(&self) -> bool {
        self.one_file_system
    }

    /// The first pattern (in the order given) matching `abs`, an absolute,
    /// lexically clean path. Called before the entry is stat'ed.
    pub fn excluded_by_pattern(&self, abs: &Path) -> Option<ExcludeReason> {
        if self.patterns.is_empty() {
            return None;
        }
        let first = self.set.matches(abs).into_iter().min()?;
        Some(ExcludeReason::Pattern(self.patterns[first].clone()))
    }

    /// Tests an entry's metadata: the size limit for files, the device for
    /// directories (`source_dev`: the device of the source being walked).
    pub fn excluded_by_meta(&self, meta: &Metadata, source_dev: u64) -> Option<ExcludeReason> {
        if let Some(only) = &self.only_files {
            if !meta.is_dir() && !only.contains(&(meta.dev(), meta.ino())) {
                return Some(ExcludeReason::NotChosen);
            }
        }
        if meta.is_file() {
            if let Some(limit) = self.larger_than {
                if meta.len() > limit {
                    return Some(ExcludeReason::Larger(meta.len()));
                }
            }
        }
        // Only directories lead into other file systems; a file on another
        // device below a source can only be the mount point of a file.
        if self.one_file_system && meta.dev() != source_dev {
            return Some(ExcludeReason::OtherFileSystem);
        }
        None
    }

    /// Tests a listed directory: `names` are its entries' names.
    pub fn excluded_dir(&self, dir: &Path, names: &[&OsStr]) -> Option<ExcludeReason> {
        for marker in &self.if_present {
            if names.iter().any(|n| n.as_bytes() == marker.as_bytes()) {
                return Some(ExcludeReason::MarkerFile(marker.clone()));
            }
        }
        if self.exclude_caches
            && names
                .iter()
                .any(|n| n.as_bytes() == CACHEDIR_TAG.as_bytes())
            && is_valid_cache_tag(&dir.join(CACHEDIR_TAG))
        {
            return Some(ExcludeReason::CacheDir);
        }
        None
    }
}

/// Whether `tag` is a regular file starting with the cache directory
/// signature. A symlink, a directory or an unreadable file is not a tag.
fn is_valid_cache_tag(tag: &Path) -> bool {
    // Rare (a directory holding a tag): a chain of its own for a long path.
    let mut dirs = crate::long_path::Dirs::new();
    match dirs.lstat(tag) {
        Ok(m) if m.is_file() => {}
        _ => return false,
    }
    let mut head = [0u8; CACHEDIR_SIGNATURE.len()];
    dirs.open(tag, nix::fcntl::OFlag::O_RDONLY, 0)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == CACHEDIR_SIGNATURE
}

impl Default for SelectionBuilder {
    fn default() -> Self {
        SelectionBuilder {
            patterns: Vec::new(),
            set: GlobSetBuilder::new(),
            if_present: Vec::new(),
            exclude_caches: false,
            larger_than: None,
            one_file_system: false,
            only_files: None,
        }
    }
}

impl SelectionBuilder {
    /// Adds one `--exclude` (or, with `case_insensitive`, `--iexclude`)
    /// pattern. An empty or malformed pattern is an error naming it.
    pub fn pattern(&mut self, pattern: &str, case_insensitive: bool) -> Result<&mut Self> {
        let glob = compile(pattern, case_insensitive, "exclude")?;
        self.set.add(glob);
        self.patterns.push(if case_insensitive {
            format!("{pattern:?} (any case)")
        } else {
            format!("{pattern:?}")
        });
        Ok(self)
    }

    /// Adds the patterns of an exclude file's text: one per line, surrounding
    /// white space trimmed, blank lines and lines starting with `#` ignored.
    /// `origin` names the file in errors (with the line number).
    pub fn pattern_lines(
        &mut self,
        text: &str,
        case_insensitive: bool,
        origin: &str,
    ) -> Result<&mut Self> {
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            self.pattern(line, case_insensitive)
                .map_err(|e| Error::invalid(format!("{origin}, line {}: {e}", i + 1)))?;
        }
        Ok(self)
    }

    /// Reads an exclude file (`--exclude-file`, `--iexclude-file`).
    pub fn pattern_file(&mut self, path: &Path, case_insensitive: bool) -> Result<&mut Self> {
        let text = std::fs::read(path).map_err(|e| {
            Error::invalid(format!("cannot read exclude file {}: {e}", path.display()))
        })?;
        let text = String::from_utf8(text)
            .map_err(|_| Error::invalid(format!("exclude file {} is not UTF-8", path.display())))?;
        self.pattern_lines(&text, case_insensitive, &path.display().to_string())
    }

    /// `--exclude-if-present NAME`: a plain file name, no `/`.
    pub fn if_present(&mut self, name: &str) -> Result<&mut Self> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Error::invalid(format!(
                "--exclude-if-present takes a file name, not {name:?}"
            )));
        }
        self.if_present.push(name.to_string());
        Ok(self)
    }

    pub fn exclude_caches(&mut self, yes: bool) -> &mut Self {
        self.exclude_caches = yes;
        self
    }

    pub fn larger_than(&mut self, limit: Option<u64>) -> &mut Self {
        self.larger_than = limit;
        self
    }

    pub fn one_file_system(&mut self, yes: bool) -> &mut Self {
        self.one_file_system = yes;
        self
    }

    /// Keeps, below the sources, only the directories and the entries whose
    /// (device, inode) is in `files` (a caller that picked its files by
    /// its own rules, such as a volume's optimization policy). Every name of
    /// a chosen inode is kept: pick one inode per file.
    pub fn only_files(&mut self, files: HashSet<(u64, u64)>) -> &mut Self {
        self.only_files = Some(Arc::new(files));
        self
    }

    pub fn build(&self) -> Result<Selection> {
        let set = self
            .set
            .build()
            .map_err(|e| Error::invalid(format!("exclude patterns: {e}")))?;
        Ok(Selection {
            patterns: self.patterns.clone(),
            set,
            if_present: self.if_present.clone(),
            exclude_caches: self.exclude_caches,
            larger_than: self.larger_than,
            one_file_system: self.one_file_system,
            only_files: self.only_files.clone(),
        })
    }
}

/// The absolute, lexically clean form of a source path (`.` and `..`
/// resolved by name, symlinks not followed): what anchored patterns are
/// matched against, with each entry's name appended below it.
pub fn absolute_clean(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
