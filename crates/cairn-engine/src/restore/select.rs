//! Restore selection: which entries of a snapshot `restore --include`,
//! `--exclude` (and their any-case forms `--iinclude`, `--iexclude`) and
//! `restore --verify` take. The patterns are backup's (`crate::patterns`
//! compiles both); the semantics are restic's restore:
//!
//! - `--exclude`: an entry matching any exclude pattern is skipped with
//!   everything below it;
//! - `--include`: only entries matching an include pattern are taken, a
//!   matching directory with its whole subtree (minus the excluded), plus
//!   the directories needed to reach them ("parents"). Without an include
//!   pattern everything not excluded is taken.
//!
//! Every entry is matched by its snapshot path made absolute (`tree/docs` is
//! `/tree/docs`), so `tree/docs` and `/tree/docs` name the same entry. An
//! anchored pattern (leading `/`) is also tried against the entry's original
//! absolute path, found through the snapshot's source paths (`/home/me/tree`
//! backed up as `tree`): `--exclude /home/me/tree/cache` works in restore as
//! in backup. A pattern also matches the path it spells literally, so a
//! name holding glob characters (`a[1].txt`) is reachable as written.
//!
//! A restore re-rooted at a subfolder ([`RestoreSelection::within`], restic's
//! `restore ID:sub`) matches patterns against paths relative to the
//! subfolder, as restic does: `--include /a` is `sub/a`. An anchored pattern
//! is still also tried against the backed-up path (`/home/me/tree/sub/a`).
//!
//! A directory is a parent only if something below it is taken, which needs
//! a look below it: [`Plan::new`] walks the listings once before the restore
//! (skipping excluded subtrees) and records the parents, and the totals of
//! what will be restored (for the progress display).

use std::collections::{HashMap, HashSet};

use globset::{GlobSet, GlobSetBuilder};

use cairn_core::{Error, Result};
use cairn_format::dir::{DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;

use super::start::Start;
use crate::patterns::{clean_pattern, compile};
use crate::read::{join, Reader};

/// One kind of pattern list (the includes or the excludes).
#[derive(Clone, Debug, Default)]
struct Patterns {
    /// Every glob, tried against `/` + the snapshot path.
    all: GlobSet,
    /// The anchored globs, also tried against the original absolute path.
    anchored: GlobSet,
    /// The patterns as paths (clean, no leading `/`), each with whether it
    /// ignores case: a path equal to one matches it.
    literals: Vec<(String, bool)>,
    /// As given, for messages.
    shown: Vec<String>,
}

struct PatternsBuilder {
    all: GlobSetBuilder,
    anchored: GlobSetBuilder,
    literals: Vec<(String, bool)>,
    shown: Vec<String>,
}

impl Default for PatternsBuilder {
    fn default() -> Self {
        PatternsBuilder {
            all: GlobSetBuilder::new(),
            anchored: GlobSetBuilder::new(),
            literals: Vec::new(),
            shown: Vec::new(),
        }
    }
}

impl PatternsBuilder {
    fn add(&mut self, pattern: &str, case_insensitive: bool, flag: &str) -> Result<()> {
        let glob = compile(pattern, case_insensitive, flag)?;
        let clean = clean_pattern(pattern);
        if clean.starts_with('/') {
            self.anchored.add(glob.clone());
        }
        self.all.add(glob);
        self.literal(&clean, case_insensitive);
        self.shown.push(pattern.to_string());
        Ok(())
    }

    fn literal(&mut self, clean: &str, case_insensitive: bool) {
        let lit = clean.trim_start_matches('/');
        let lit = if case_insensitive {
            lit.to_lowercase()
        } else {
            lit.to_string()
        };
        self.literals.push((lit, case_insensitive));
    }

    fn build(&self, flag: &str) -> Result<Patterns> {
        let err = |e: globset::Error| Error::invalid(format!("{flag} patterns: {e}"));
        Ok(Patterns {
            all: self.all.build().map_err(err)?,
            anchored: self.anchored.build().map_err(err)?,
            literals: self.literals.clone(),
            shown: self.shown.clone(),
        })
    }
}

impl Patterns {
    fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    fn matches(&self, at: &At) -> bool {
        let lit = |(p, ci): &(String, bool)| {
            if *ci {
                *p == at.rel.to_lowercase()
            } else {
                *p == at.rel
            }
        };
        self.all.is_match(&at.abs)
            || at.orig.as_ref().is_some_and(|o| self.anchored.is_match(o))
            || self.literals.iter().any(lit)
    }
}

/// An entry's path in the forms patterns are matched against.
struct At<'a> {
    /// The snapshot path (`tree/docs/a.txt`).
    rel: &'a str,
    /// `/` + `rel`.
    abs: String,
    /// The path it was backed up from, if its source is known.
    orig: Option<String>,
}

/// What a restore takes from a snapshot. The default takes everything.
#[derive(Clone, Debug, Default)]
pub struct RestoreSelection {
    include: Option<Patterns>,
    exclude: Patterns,
    /// The snapshot path the restore is re-rooted at (`""`: the root); see
    /// [`RestoreSelection::within`].
    root: String,
}

/// Builds a [`RestoreSelection`]; each pattern is checked as it is added.
#[derive(Default)]
pub struct RestoreSelectionBuilder {
    include: Option<PatternsBuilder>,
    exclude: PatternsBuilder,
}

impl RestoreSelection {
    pub fn builder() -> RestoreSelectionBuilder {
        RestoreSelectionBuilder::default()
    }

    /// Only the entry at `path` (a snapshot path, taken literally) and what
    /// is below it; `None` or an empty path: everything.
    pub fn path(path: Option<&str>) -> RestoreSelection {
        let clean = clean_pattern(path.unwrap_or(""));
        let clean = clean.trim_matches('/');
        if clean.is_empty() {
            return RestoreSelection::default();
        }
        let mut b = PatternsBuilder::default();
        b.literal(clean, false);
        b.shown.push(clean.to_string());
        RestoreSelection {
            include: Some(b.build("include").expect("no globs to build")),
            exclude: Patterns::default(),
            root: String::new(),
        }
    }

    /// This selection re-rooted at snapshot path `path` (restic's
    /// `restore ID:sub`): a directory's contents are restored directly into
    /// the target, which gets the directory's metadata; a file, symlink or
    /// special entry is restored as `target/<name>`. Patterns are then
    /// relative to the directory (for a single entry: to its parent).
    /// `""` or `/` is the snapshot's root.
    pub fn within(mut self, path: &str) -> RestoreSelection {
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        self.root = comps.join("/");
        self
    }

    /// The snapshot path the restore starts at (`""`: the root).
    pub fn root_path(&self) -> &str {
        &self.root
    }

    /// Whether this selection's patterns take every entry (of the snapshot,
    /// or of the subtree it is re-rooted at).
    pub fn is_everything(&self) -> bool {
        self.include.is_none() && self.exclude.is_empty()
    }
}

impl RestoreSelectionBuilder {
    /// Adds an `--include` (`--iinclude` with `case_insensitive`) pattern.
    pub fn include(&mut self, pattern: &str, case_insensitive: bool) -> Result<&mut Self> {
        self.include
            .get_or_insert_with(PatternsBuilder::default)
            .add(pattern, case_insensitive, "include")?;
        Ok(self)
    }

    /// Adds an `--exclude` (`--iexclude` with `case_insensitive`) pattern.
    pub fn exclude(&mut self, pattern: &str, case_insensitive: bool) -> Result<&mut Self> {
        self.exclude.add(pattern, case_insensitive, "exclude")?;
        Ok(self)
    }

    pub fn build(&self) -> Result<RestoreSelection> {
        Ok(RestoreSelection {
            include: self
                .include
                .as_ref()
                .map(|b| b.build("include"))
                .transpose()?,
            exclude: self.exclude.build("exclude")?,
            root: String::new(),
        })
    }
}

/// How an entry is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Not taken, nor anything below it.
    Skip,
    /// Taken, with everything below it that is not excluded.
    Whole,
    /// A directory taken only as the way to entries below it: only its
    /// taken children are restored, and `--delete` leaves it alone.
    Parent,
}

/// A selection applied to one snapshot: the parents, and the totals.
pub(crate) struct Plan<'s> {
    sel: &'s RestoreSelection,
    /// Top-level entry name -> the absolute path it was backed up from
    /// (names shared by two sources are left out: ambiguous).
    sources: HashMap<String, String>,
    /// The snapshot path in front of the walk's paths ([`Start::base`]).
    base: String,
    parents: HashSet<String>,
    /// Regular files and their bytes that the restore takes.
    pub files: u64,
    pub bytes: u64,
}

impl<'s> Plan<'s> {
    /// Resolves `sel` against `snap`, walking from `start` (read for
    /// `sel`): walks the listings unless the selection takes the whole
    /// snapshot. Fails, before anything is created, if include patterns
    /// match nothing.
    pub(crate) fn new(
        reader: &mut Reader,
        snap: &SnapshotRecord,
        sel: &'s RestoreSelection,
        start: &Start,
    ) -> Result<Plan<'s>> {
        let mut plan = Plan {
            sel,
            sources: sources(snap),
            base: start.base.clone(),
            parents: HashSet::new(),
            files: snap.stats.files,
            bytes: snap.stats.logical_bytes,
        };
        // The record's totals are the whole snapshot's.
        if sel.is_everything() && sel.root.is_empty() {
            return Ok(plan);
        }
        plan.files = 0;
        plan.bytes = 0;
        let root = start.entries.clone();
        let top = if sel.include.is_some() {
            Scope::Parent
        } else {
            Scope::Whole
        };
        let any = plan.look(reader, "", root, top);
        if let Some(inc) = &sel.include {
            if !any {
                let place = if sel.root.is_empty() {
                    "the snapshot".to_string()
                } else {
                    sel.root.clone()
                };
                return Err(Error::NotFound(format!(
                    "nothing in {place} matches --include {}",
                    inc.shown.join(", ")
                )));
            }
        }
        Ok(plan)
    }

    /// The scope of root entries: the root is whole unless includes pick
    /// from it.
    pub(crate) fn root(&self) -> Scope {
        if self.sel.include.is_some() {
            Scope::Parent
        } else {
            Scope::Whole
        }
    }

    /// How the entry at snapshot path `rel` is taken, inside a directory
    /// taken as `parent`.
    pub(crate) fn scope(&self, rel: &str, parent: Scope) -> Scope {
        match self.decide(rel, parent) {
            Some(true) => Scope::Whole,
            Some(false) if self.parents.contains(rel) => Scope::Parent,
            _ => Scope::Skip,
        }
    }

    /// `None`: excluded; `Some(true)`: taken whole; `Some(false)`: not
    /// matched by an include pattern (a parent, if anything below is taken).
    fn decide(&self, rel: &str, parent: Scope) -> Option<bool> {
        if self.sel.is_everything() {
            return Some(true);
        }
        let at = self.at(rel);
        if self.sel.exclude.matches(&at) {
            return None;
        }
        Some(match &self.sel.include {
            None => true,
            Some(_) if parent == Scope::Whole => true,
            Some(inc) => inc.matches(&at),
        })
    }

    fn at<'r>(&self, rel: &'r str) -> At<'r> {
        let full = if self.base.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.base)
        };
        let (top, rest) = full.split_once('/').unwrap_or((&full, ""));
        let orig = self.sources.get(top).map(|src| {
            if rest.is_empty() {
                src.clone()
            } else {
                format!("{}/{rest}", src.trim_end_matches('/'))
            }
        });
        At {
            rel,
            abs: format!("/{rel}"),
            orig,
        }
    }

    /// Walks `entries` (in a directory taken as `scope`), recording parents
    /// and totals; `true` if anything below is taken. An unreadable listing
    /// is walked past here: the restore reports it.
    fn look(
        &mut self,
        reader: &mut Reader,
        prefix: &str,
        entries: Vec<DirEntry>,
        scope: Scope,
    ) -> bool {
        let mut any = false;
        for e in entries {
            let rel = join(prefix, &e.name);
            let Some(taken) = self.decide(&rel, scope) else {
                continue;
            };
            match e.kind {
                EntryKind::Dir => {
                    let inner = if taken { Scope::Whole } else { Scope::Parent };
                    let below = match reader.children(&e) {
                        Ok(children) => self.look(reader, &rel, children, inner),
                        Err(_) => false,
                    };
                    if !taken && below {
                        self.parents.insert(rel);
                    }
                    any |= taken || below;
                }
                EntryKind::File if taken => {
                    any = true;
                    self.files += 1;
                    self.bytes += e.size;
                }
                _ => any |= taken,
            }
        }
        any
    }
}

/// The snapshot's top-level names and the source paths they came from.
fn sources(snap: &SnapshotRecord) -> HashMap<String, String> {
    let mut map: HashMap<String, Option<String>> = HashMap::new();
    for p in &snap.paths {
        if !p.starts_with('/') {
            continue;
        }
        let Some(name) = p
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        map.entry(name.to_string())
            .and_modify(|v| *v = None)
            .or_insert_with(|| Some(p.clone()));
    }
    map.into_iter().filter_map(|(k, v)| Some((k, v?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan<'a>(sel: &'a RestoreSelection, paths: &[&str]) -> Plan<'a> {
        let snap_paths: Vec<String> = paths.iter().map(|s| s.to_string()).collect();
        let mut sources = HashMap::new();
        for p in snap_paths {
            sources.insert(p.rsplit('/').next().unwrap().to_string(), p);
        }
        Plan {
            sel,
            sources,
            base: String::new(),
            parents: HashSet::new(),
            files: 0,
            bytes: 0,
        }
    }

    fn sel(inc: &[&str], exc: &[&str]) -> RestoreSelection {
        let mut b = RestoreSelection::builder();
        for p in inc {
            b.include(p, false).unwrap();
        }
        for p in exc {
            b.exclude(p, false).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn relative_absolute_and_source_paths_name_the_same_entry() {
        for pattern in ["tree/docs", "/tree/docs", "/home/me/tree/docs", "docs"] {
            let s = sel(&[pattern], &[]);
            let p = plan(&s, &["/home/me/tree"]);
            assert_eq!(
                p.scope("tree/docs", Scope::Parent),
                Scope::Whole,
                "{pattern}"
            );
            assert_eq!(
                p.scope("tree/data", Scope::Parent),
                Scope::Skip,
                "{pattern}"
            );
            // Below a taken directory everything is taken.
            assert_eq!(p.scope("tree/docs/a", Scope::Whole), Scope::Whole);
        }
    }

    #[test]
    fn unanchored_patterns_never_match_above_the_snapshot() {
        // `home` is a component of the source path, not of the snapshot.
        let s = sel(&[], &["home"]);
        let p = plan(&s, &["/home/me/tree"]);
        assert_eq!(p.scope("tree/docs", Scope::Whole), Scope::Whole);
        let s = sel(&[], &["*.log"]);
        let p = plan(&s, &["/home/me/tree"]);
        assert_eq!(p.scope("tree/x/a.log", Scope::Whole), Scope::Skip);
        assert_eq!(p.scope("tree/x/a.txt", Scope::Whole), Scope::Whole);
    }

    #[test]
    fn literal_paths_with_glob_characters_match() {
        let s = sel(&["tree/a[1].txt"], &[]);
        let p = plan(&s, &[]);
        assert_eq!(p.scope("tree/a[1].txt", Scope::Parent), Scope::Whole);
        let s = RestoreSelection::path(Some("tree/*"));
        let p = plan(&s, &[]);
        assert_eq!(p.scope("tree/*", Scope::Parent), Scope::Whole);
        assert_eq!(p.scope("tree/a", Scope::Parent), Scope::Skip);
        assert!(RestoreSelection::path(Some("/")).is_everything());
    }

    #[test]
    fn exclude_wins_and_case_insensitive_forms_ignore_case() {
        let s = sel(&["tree"], &["tree/docs/*.txt"]);
        let p = plan(&s, &[]);
        assert_eq!(p.scope("tree/docs/a.txt", Scope::Whole), Scope::Skip);
        assert_eq!(p.scope("tree/docs/a.bin", Scope::Whole), Scope::Whole);
        let mut b = RestoreSelection::builder();
        b.include("TREE/Docs", true).unwrap();
        b.exclude("*.TXT", true).unwrap();
        let s = b.build().unwrap();
        let p = plan(&s, &[]);
        assert_eq!(p.scope("tree/docs", Scope::Parent), Scope::Whole);
        assert_eq!(p.scope("tree/docs/x.txt", Scope::Whole), Scope::Skip);
    }

    #[test]
    fn bad_patterns_are_refused_naming_the_flag() {
        let e = RestoreSelection::builder()
            .include("[abc", false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("include"), "{e}");
        let e = RestoreSelection::builder()
            .exclude("", false)
            .err()
            .unwrap();
        assert!(e.to_string().contains("exclude"), "{e}");
    }
}
