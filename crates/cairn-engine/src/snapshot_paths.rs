//! A path a person types, turned into a position in one snapshot's tree.
//!
//! Two forms name the same entry (docs/restore-select.md, "Paths"):
//!
//! - the snapshot path, as `ls` prints it (`/docs/a.txt` or `docs/a.txt`,
//!   from the snapshot's root);
//! - the path the entry was backed up from, as `snapshots` prints the
//!   sources (`/home/me/docs/a.txt` for a backup of `/home/me/docs`).
//!
//! The second form is mapped through the snapshot's source paths: a source
//! sits in the tree under its base name (`docs`), under all its directories
//! (`home/me/docs`, when two sources share a base name), or, for a backup of
//! `/`, at the root itself (older snapshots of `/` hold it as `root`); see
//! `backup/layout.rs`. Each reading is tried in that order after the
//! snapshot path itself, and the first one present in the tree wins. A path
//! present in no reading is returned as the snapshot path, so the caller's
//! "not found" names what the user typed.

use cairn_core::{Error, Result};
use cairn_format::snapshot::SnapshotRecord;

use crate::read::Reader;

/// The components of a user's path: empty ones and `.` dropped, `..`
/// refused (there is no working directory inside a snapshot to resolve it
/// against).
pub fn components(path: &str) -> Result<Vec<&str>> {
    let mut out = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(Error::invalid(format!(
                    "path {path:?}: `..` is not supported inside a snapshot; \
                     give the path from the snapshot root, e.g. /dir/file"
                )))
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Where a source (one of a snapshot's `sources`, its record's `paths`)
/// may sit in the snapshot's tree, for each source path that is a prefix
/// of `comps`: (the source's possible place, the rest of
/// `comps` below it), most likely first. Sources that are not file system
/// paths (`<stdin:name>`) are skipped.
pub fn source_readings<'p>(
    sources: &[String],
    comps: &[&'p str],
) -> Vec<(Vec<String>, Vec<&'p str>)> {
    let mut out = Vec::new();
    for source in sources {
        if !source.starts_with('/') {
            continue;
        }
        let Ok(src) = components(source) else {
            continue;
        };
        if comps.len() < src.len() || comps[..src.len()] != src[..] {
            continue;
        }
        let rest = comps[src.len()..].to_vec();
        let whole: Vec<String> = src.iter().map(|c| c.to_string()).collect();
        match src.last() {
            Some(base) => {
                out.push((vec![base.to_string()], rest.clone()));
                out.push((whole, rest));
            }
            None => {
                // A backup of `/`: its entries at the root; before that
                // rule, under `root`.
                out.push((Vec::new(), rest.clone()));
                out.push((vec!["root".to_string()], rest));
            }
        }
    }
    out
}

/// The snapshot path (components joined by `/`, no leading `/`; `""` is the
/// root) that `path` names in `snap`; see the module doc.
pub fn resolve(reader: &mut Reader, snap: &SnapshotRecord, path: &str) -> Result<String> {
    let comps = components(path)?;
    let literal = comps.join("/");
    if literal.is_empty() || exists(reader, snap, &literal)? {
        return Ok(literal);
    }
    if path.starts_with('/') {
        for (place, rest) in source_readings(&snap.paths, &comps) {
            let joined: Vec<&str> = place.iter().map(String::as_str).chain(rest).collect();
            let candidate = joined.join("/");
            if candidate == literal {
                continue;
            }
            if candidate.is_empty() || exists(reader, snap, &candidate)? {
                return Ok(candidate);
            }
        }
    }
    Ok(literal)
}

/// Whether snapshot path `path` names an entry; a damaged listing is an
/// error, a missing name is `false`.
fn exists(reader: &mut Reader, snap: &SnapshotRecord, path: &str) -> Result<bool> {
    match reader.find(snap, path) {
        Ok(found) => Ok(found.is_some() || path.is_empty()),
        Err(Error::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `spec` split into the snapshot (an id prefix or `latest`) and the
/// subfolder after a `:` (restic's `ID:subfolder`), if any.
pub fn split_spec(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once(':') {
        Some((id, sub)) => (id, Some(sub)),
        None => (spec, None),
    }
}

/// `path` taken inside `base`: `base/path`, with `base`'s leading `/` (if
/// any) kept, since it tells [`resolve`] to try the backed-up paths too.
pub fn join_base(base: &str, path: &str) -> String {
    let lead = if base.starts_with('/') { "/" } else { "" };
    let base = base.trim_matches('/');
    let path = path.trim_matches('/');
    match (base.is_empty(), path.is_empty()) {
        (true, _) => format!("{lead}{path}"),
        (_, true) => format!("{lead}{base}"),
        _ => format!("{lead}{base}/{path}"),
    }
}

/// [`resolve`] in the first of `snaps` that holds the entry (`diff`'s two
/// snapshots: the path may exist in only one of them); `None` when none
/// does.
pub fn resolve_in_any(
    reader: &mut Reader,
    snaps: &[&SnapshotRecord],
    path: &str,
) -> Result<Option<String>> {
    for snap in snaps {
        let p = resolve(reader, snap, path)?;
        if exists(reader, snap, &p)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(paths: &[&str]) -> Vec<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn source_paths_read_as_base_name_whole_path_or_root() {
        let s = snap(&["/home/me/docs", "<stdin:db>", "/"]);
        let comps = components("/home/me/docs/a/b.txt").unwrap();
        let r = source_readings(&s, &comps);
        assert_eq!(r[0], (vec!["docs".to_string()], vec!["a", "b.txt"]));
        assert_eq!(r[1].0, ["home", "me", "docs"]);
        // `/` is a prefix of everything: the root, then the old `root`.
        assert_eq!(r[2], (vec![], vec!["home", "me", "docs", "a", "b.txt"]));
        assert_eq!(r[3].0, ["root"]);
        assert_eq!(r.len(), 4);
        assert!(source_readings(&s, &components("/etc").unwrap())
            .iter()
            .all(|(p, _)| p.is_empty() || p == &["root"]));
    }

    #[test]
    fn dot_dot_is_refused_and_specs_split_at_the_colon() {
        assert!(components("/a/../b").is_err());
        assert_eq!(components("//a/./b/").unwrap(), ["a", "b"]);
        assert_eq!(split_spec("latest:/docs"), ("latest", Some("/docs")));
        assert_eq!(split_spec("ab12"), ("ab12", None));
        assert_eq!(join_base("/docs/", "/a"), "/docs/a");
        assert_eq!(join_base("docs/", "/a"), "docs/a");
        assert_eq!(join_base("", "a"), "a");
        assert_eq!(join_base("docs", ""), "docs");
    }
}
