//! Where each source of a backup sits in the snapshot tree.
//!
//! Each source is a top-level entry named by its base name (`~/docs` is
//! `docs`), as long as those names differ. When two sources share a base
//! name (`/a/data` and `/b/data`), the snapshot keeps the directories above
//! each path source instead, as restic does: `a/data` and `b/data` (common
//! leading directories shared: `/srv/a/data` and `/srv/b/data` give
//! `srv/a/data` and `srv/b/data`). A backup of `/` is the snapshot's root
//! itself (`/etc` is `etc`, not `root/etc`), so `/` must be the only
//! source; snapshots made before this rule hold it as `root` and stay
//! readable as they are (`crate::snapshot_paths` reads both). A `--stdin` stream (or a replayed
//! trace) stays at the top under its name. The directories above a source
//! are named as the file system resolves them (symlinks among them
//! followed) and carry their own mode, owner and times; their listings hold
//! only the sources below them.
//!
//! Refused before anything is read or created: an invalid name, the same
//! place twice, and a source inside another (`/a` with `/a/data`, or a
//! stream named like a directory above a path source).
//! Command-line behaviour, no paper's; docs/backup-selection.md.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use cairn_core::{Error, Result};
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};

use super::events::EntryMeta;
use super::walker::Source;

/// A source's place: the names from the snapshot root down to its entry.
/// Empty for a backup of `/`: its entry's listing is the root listing.
pub(crate) type Place = Vec<Vec<u8>>;

/// Whether `source` is the file system's root (`/`, or a path resolving
/// to it such as `/..`).
fn is_root(source: &Source) -> bool {
    match source {
        Source::Path(p) => absolute_components(p).is_empty(),
        _ => false,
    }
}

/// The place of every source, in order; see the module doc.
pub(crate) fn place(sources: &[Source]) -> Result<Vec<Place>> {
    if sources.is_empty() {
        return Err(Error::invalid(
            "nothing to back up: give at least one path or --stdin",
        ));
    }
    if sources.iter().any(is_root) {
        if sources.len() > 1 {
            return Err(Error::invalid(
                "source / holds every other source: give / alone",
            ));
        }
        return Ok(vec![Vec::new()]);
    }
    let names: Vec<Vec<u8>> = sources.iter().map(super::top_level_name).collect();
    for n in &names {
        if n.is_empty() || n.contains(&b'/') || n == b"." || n == b".." {
            return Err(Error::invalid(format!(
                "invalid name {:?} for a backup source",
                crate::names::name_text(n)
            )));
        }
    }
    let mut sorted = names.clone();
    sorted.sort();
    if sorted.windows(2).all(|w| w[0] != w[1]) {
        return Ok(names.into_iter().map(|n| vec![n]).collect());
    }
    let places: Vec<Place> = sources
        .iter()
        .zip(names)
        .map(|(s, n)| match s {
            Source::Path(p) => absolute_components(p),
            _ => vec![n],
        })
        .collect();
    for (i, a) in places.iter().enumerate() {
        for b in &places[i + 1..] {
            let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
            if long.starts_with(short) {
                let show = |p: &Place| {
                    p.iter()
                        .map(|c| crate::names::name_text(c).into_owned())
                        .collect::<Vec<_>>()
                        .join("/")
                };
                return Err(Error::invalid(if short == long {
                    format!("source /{} is given twice", show(short))
                } else {
                    format!(
                        "source /{} holds source /{}: give only the outer one",
                        show(short),
                        show(long)
                    )
                }));
            }
        }
    }
    Ok(places)
}

/// The names of the directories from `/` down to `p` itself: its parent
/// resolved, its own name as the walker names it.
fn absolute_components(p: &Path) -> Place {
    let resolve = |q: &Path| {
        crate::long_path::canonicalize(q)
            .or_else(|_| std::path::absolute(q))
            .unwrap_or_else(|_| q.to_path_buf())
    };
    let full: PathBuf = match p.file_name() {
        Some(name) => {
            let parent = p
                .parent()
                .filter(|q| !q.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            resolve(parent).join(name)
        }
        None => resolve(p),
    };
    full.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.as_bytes().to_vec()),
            _ => None,
        })
        .collect()
}

/// The root listing's entries: each source's top entry at its place, the
/// directories above them made from the file system (their listings
/// stored through `store`, which returns the blob of an encoded listing).
pub(crate) fn root_entries(
    placed: Vec<(Place, DirEntry)>,
    store: &mut dyn FnMut(&[DirEntry]) -> Result<BlobRef>,
) -> Result<Vec<DirEntry>> {
    level(PathBuf::from("/"), placed, store)
}

fn level(
    dir: PathBuf,
    placed: Vec<(Place, DirEntry)>,
    store: &mut dyn FnMut(&[DirEntry]) -> Result<BlobRef>,
) -> Result<Vec<DirEntry>> {
    let mut groups: BTreeMap<Vec<u8>, Vec<(Place, DirEntry)>> = BTreeMap::new();
    for (mut place, entry) in placed {
        let first = place.remove(0);
        groups.entry(first).or_default().push((place, entry));
    }
    let mut out = Vec::new();
    for (name, group) in groups {
        // `place` checked that no source lies inside another: a group is
        // one source at its end, or sources further down.
        if let [(rest, _)] = group.as_slice() {
            if rest.is_empty() {
                let (_, mut e) = group.into_iter().next().expect("one");
                e.name = name;
                out.push(e);
                continue;
            }
        }
        let path = dir.join(OsStr::from_bytes(&name));
        let children = level(path.clone(), group, store)?;
        let meta = crate::long_path::Dirs::new()
            .lstat(&path)
            .map(|m| EntryMeta::from_fs(&m))
            .unwrap_or(EntryMeta {
                mode: 0o040755,
                ..EntryMeta::default()
            });
        let mut e = super::entry(name, EntryKind::Dir, &meta);
        e.content = Some(store(&children)?);
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Source {
        Source::Path(PathBuf::from(p))
    }

    fn texts(places: &[Place]) -> Vec<String> {
        places
            .iter()
            .map(|p| {
                p.iter()
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect()
    }

    #[test]
    fn distinct_names_stay_at_the_top_and_equal_ones_keep_their_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        for d in ["a/data", "b/data", "c"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let r = root.to_str().unwrap().trim_start_matches('/');
        let at = |s: &str| format!("{}/{s}", root.display());
        // `/` is the root itself, and only alone.
        assert_eq!(place(&[path("/")]).unwrap(), vec![Place::new()]);
        assert!(place(&[path("/"), path(&at("c"))]).is_err());
        let p = place(&[path(&at("a/data")), path(&at("c"))]).unwrap();
        assert_eq!(texts(&p), ["data", "c"]);
        let p = place(&[
            path(&at("a/data")),
            path(&at("b/data")),
            Source::Stdin { name: "s".into() },
        ])
        .unwrap();
        assert_eq!(
            texts(&p),
            [format!("{r}/a/data"), format!("{r}/b/data"), "s".into()]
        );
        // Inside another, twice, a stream over a directory: refused.
        assert!(place(&[path(&at("a/data")), path(&at("b/data")), path(&at("a"))]).is_err());
        assert!(place(&[path(&at("a/data")), path(&at("a/data"))]).is_err());
        let first = r.split('/').next().unwrap().to_string();
        let clash = [
            path(&at("a/data")),
            path(&at("b/data")),
            Source::Stdin { name: first },
        ];
        assert!(place(&clash).is_err());
        assert!(place(&[]).is_err());
    }

    #[test]
    fn directories_above_sources_are_built_once_each() {
        let leaf = |n: &str| {
            let mut e = super::super::entry(n.into(), EntryKind::File, &EntryMeta::default());
            e.size = 1;
            e
        };
        let place = |s: &str| s.split('/').map(|c| c.as_bytes().to_vec()).collect();
        let placed = vec![
            (place("srv/a/data"), leaf("data")),
            (place("srv/b/data"), leaf("data")),
            (place("s"), leaf("s")),
        ];
        let mut stored = Vec::new();
        let top = root_entries(placed, &mut |l| {
            stored.push(
                l.iter()
                    .map(|e| String::from_utf8_lossy(&e.name).into_owned())
                    .collect::<Vec<_>>(),
            );
            Ok(BlobRef {
                root: cairn_core::Fingerprint::from_slice(&[stored.len() as u8; 32]),
                level: 0,
                size: 1,
            })
        })
        .unwrap();
        let names: Vec<&[u8]> = top.iter().map(|e| e.name.as_slice()).collect();
        assert_eq!(names, [&b"s"[..], b"srv"]);
        assert_eq!(top[1].kind, EntryKind::Dir);
        // a's listing, b's, then srv's.
        assert_eq!(stored, [vec!["data"], vec!["data"], vec!["a", "b"]]);
    }
}
