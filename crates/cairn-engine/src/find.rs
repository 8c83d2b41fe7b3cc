//! `find`: the paths matching a glob, in every snapshot of a repository (or
//! the ones asked for), reading each distinct directory listing once.
//!
//! Snapshots of the same data share most of their tree: a listing is a
//! content-addressed blob (`003_ea5fccc485a97c5d.txt` §2), so an unchanged
//! directory is the same listing root in every snapshot that holds it. The
//! search keeps, per listing root, what it found beneath it (a small tree of
//! the matches, or "nothing"); when another snapshot reaches the same listing
//! it reuses that result instead of reading the subtree again, and still
//! reports the matches under that snapshot's id.
//!
//! Patterns are globs (`globset`): `*` and `?` stop at `/`, `**` crosses
//! directories, `\` escapes. A pattern without `/` is matched against entry
//! names; one with `/` against the whole path inside the snapshot. A leading
//! `/` stands for the snapshot's root: `/a` matches the top-level entry `a`
//! only, where `a` matches every entry named `a`; an anchored pattern may
//! also start with a path the snapshot was backed up from
//! (`/home/me/docs/*.txt` for a backup of `/home/me/docs`), read in each
//! snapshot where that source sits (`crate::snapshot_paths`). `find -i`
//! matches letters in any case. Whole-path matches depend
//! on where a listing sits, so for them the memo is keyed by listing root
//! and path; name matches by listing root alone.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use cairn_core::{Error, Fingerprint, Result};
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use globset::{Candidate, GlobBuilder, GlobMatcher};
use serde::Serialize;

use crate::read::{join, Reader};

/// A compiled `find` pattern.
#[derive(Clone, Debug)]
pub struct Pattern {
    glob: GlobMatcher,
    by_name: bool,
    /// As given (for the memo key and for reading it per snapshot).
    text: String,
    ignore_case: bool,
}

impl Pattern {
    /// [`Error::InvalidInput`] for an empty or malformed glob.
    pub fn new(pattern: &str) -> Result<Self> {
        Self::with_case(pattern, false)
    }

    /// [`Pattern::new`], matching letters in any case when `ignore_case`
    /// (`find -i`).
    pub fn with_case(pattern: &str, ignore_case: bool) -> Result<Self> {
        let trimmed = pattern.trim_start_matches('/');
        let trimmed = if trimmed.len() > 1 {
            trimmed.trim_end_matches('/')
        } else {
            trimmed
        };
        if trimmed.is_empty() {
            return Err(Error::invalid(format!(
                "pattern {pattern:?} matches no path (give a name or a glob)"
            )));
        }
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .case_insensitive(ignore_case)
            .build()
            .map_err(|e| Error::invalid(format!("invalid pattern {pattern:?}: {e}")))?;
        Ok(Pattern {
            glob: glob.compile_matcher(),
            by_name: !pattern.starts_with('/') && !trimmed.contains('/'),
            text: pattern.to_string(),
            ignore_case,
        })
    }

    /// This pattern as it reads in `snap`: an anchored pattern that starts
    /// with one of the snapshot's source paths (`/home/me/docs/*.txt`) is
    /// moved to where that source sits in the tree (`/docs/*.txt`), when
    /// the pattern's own leading directories are not in the tree
    /// (`crate::snapshot_paths`). Other patterns read as they are.
    fn in_snapshot(&self, reader: &mut Reader, snap: &SnapshotRecord) -> Result<Pattern> {
        if self.by_name || !self.text.starts_with('/') {
            return Ok(self.clone());
        }
        let Ok(comps) = crate::snapshot_paths::components(&self.text) else {
            return Ok(self.clone());
        };
        let mut readings = crate::snapshot_paths::source_readings(&snap.paths, &comps);
        // The longest source first: the most specific place.
        readings.sort_by_key(|(_, rest)| rest.len());
        for (place, rest) in readings {
            let at = place.join("/");
            let literal = comps[..comps.len() - rest.len()].join("/");
            if at == literal || rest.is_empty() {
                continue;
            }
            let found = at.is_empty()
                || match reader.find(snap, &at) {
                    Ok(e) => e.is_some(),
                    Err(Error::NotFound(_)) => false,
                    Err(e) => return Err(e),
                };
            if found {
                let moved = format!(
                    "/{}",
                    place
                        .iter()
                        .map(String::as_str)
                        .chain(rest)
                        .collect::<Vec<_>>()
                        .join("/")
                );
                return Pattern::with_case(&moved, self.ignore_case);
            }
        }
        Ok(self.clone())
    }

    /// Whether a pattern without `/` (matched against names).
    pub fn by_name(&self) -> bool {
        self.by_name
    }

    /// Whether the entry `name` at snapshot path `path` matches.
    pub fn matches(&self, path: &str, name: &[u8]) -> bool {
        // Names as text (escaped when not UTF-8, `crate::names`), like paths.
        let name = crate::names::name_text(name);
        let subject = if self.by_name {
            Path::new(name.as_ref())
        } else {
            Path::new(path)
        };
        self.glob.is_match_candidate(&Candidate::new(subject))
    }
}

/// What the search found under one listing: only entries that match or
/// lead to matches, in name order.
#[derive(Debug)]
struct Node {
    items: Vec<Item>,
}

#[derive(Debug)]
struct Item {
    name: Vec<u8>,
    /// The entry, when it matches itself.
    matched: Option<DirEntry>,
    /// Matches below it (directories only).
    below: Option<Arc<Node>>,
}

/// How much reading a search did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FindStats {
    /// Snapshots searched.
    pub snapshots: u64,
    /// Directory listings read.
    pub listings_read: u64,
    /// Subtrees answered from the memo (a listing already searched).
    pub listings_reused: u64,
    /// Matches reported (over all snapshots).
    pub matches: u64,
}

/// Searches snapshots for one pattern, remembering each listing's result
/// for the snapshots that follow.
pub struct Finder<'r> {
    reader: &'r mut Reader,
    pattern: Pattern,
    /// The pattern as it reads in the snapshot being searched
    /// ([`Pattern::in_snapshot`]).
    active: Pattern,
    /// The pattern's text in that snapshot, listing root and (for
    /// whole-path patterns) the listing's path -> matches beneath it,
    /// `None` for none.
    memo: HashMap<(String, Fingerprint, String), Option<Arc<Node>>>,
    stats: FindStats,
}

impl<'r> Finder<'r> {
    pub fn new(reader: &'r mut Reader, pattern: Pattern) -> Self {
        Finder {
            reader,
            active: pattern.clone(),
            pattern,
            memo: HashMap::new(),
            stats: FindStats::default(),
        }
    }

    pub fn stats(&self) -> &FindStats {
        &self.stats
    }

    /// Calls `found(path, entry)` for each match in `snap`, depth-first in
    /// name order (a directory before its contents).
    pub fn search(
        &mut self,
        snap: &SnapshotRecord,
        found: &mut dyn FnMut(&str, &DirEntry) -> Result<()>,
    ) -> Result<()> {
        self.stats.snapshots += 1;
        self.active = self.pattern.in_snapshot(self.reader, snap)?;
        let root = snap.root_ref()?;
        if let Some(node) = self.listing(&root, "")? {
            self.emit(&node, "", found)?;
        }
        Ok(())
    }

    /// The matches beneath one listing: from the memo, or read and searched.
    fn listing(&mut self, listing: &BlobRef, path: &str) -> Result<Option<Arc<Node>>> {
        // Same listing root: same entries, same subtrees (the Merkle
        // property); with a name pattern the result does not depend on the
        // path either.
        let key = (
            self.active.text.clone(),
            listing.root,
            if self.active.by_name {
                String::new()
            } else {
                path.to_string()
            },
        );
        if let Some(hit) = self.memo.get(&key) {
            self.stats.listings_reused += 1;
            return Ok(hit.clone());
        }
        self.stats.listings_read += 1;
        let entries = self.reader.read_listing(listing)?;
        let node = self.search_entries(entries, path)?;
        self.memo.insert(key, node.clone());
        Ok(node)
    }

    /// The matches among `entries` (the directory at `path`) and beneath
    /// them; an inline listing is searched in place, a listing blob through
    /// the memo.
    fn search_entries(&mut self, entries: Vec<DirEntry>, path: &str) -> Result<Option<Arc<Node>>> {
        let mut items = Vec::new();
        for mut e in entries {
            let child = join(path, &e.name);
            let below = match (&e.kind, e.children.take(), &e.content) {
                (EntryKind::Dir, Some(inline), _) => self.search_entries(inline, &child)?,
                (EntryKind::Dir, None, Some(c)) => self.listing(c, &child)?,
                _ => None,
            };
            let matched = self.active.matches(&child, &e.name);
            if matched || below.is_some() {
                items.push(Item {
                    name: e.name.clone(),
                    matched: matched.then_some(e),
                    below,
                });
            }
        }
        Ok((!items.is_empty()).then(|| Arc::new(Node { items })))
    }

    fn emit(
        &mut self,
        node: &Node,
        prefix: &str,
        found: &mut dyn FnMut(&str, &DirEntry) -> Result<()>,
    ) -> Result<()> {
        for item in &node.items {
            let path = join(prefix, &item.name);
            if let Some(e) = &item.matched {
                self.stats.matches += 1;
                found(&path, e)?;
            }
            if let Some(below) = &item.below {
                self.emit(below, &path, found)?;
            }
        }
        Ok(())
    }
}
