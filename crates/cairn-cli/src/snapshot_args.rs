//! What the snapshot-taking commands share: the `--host`, `--tag` and
//! `--path` filter (flattened into each command; the matching itself is
//! `cairn_engine::catalog::SnapshotFilter`), resolving `latest` or an id
//! prefix within it (or restic's `ID:subfolder`), and paths inside a
//! snapshot as users type them (from the snapshot's root, or as backed up:
//! `cairn_engine::snapshot_paths`). See docs/snapshot-filters.md.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use cairn_engine::catalog::{self, SnapshotFilter, SnapshotInfo};
use cairn_engine::read::Reader;
use cairn_engine::{snapshot_paths, Repository};

/// Restic's snapshot filter: which snapshots `latest` chooses from, which
/// ids are accepted, and which snapshots are listed or searched.
#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Only snapshots of host HOST (repeatable: any of them).
    #[arg(long = "host", id = "filter_host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Only snapshots with tag TAG; `a,b` means both a and b (repeatable:
    /// any of the options; `--tag ''` means no tags).
    #[arg(long = "tag", id = "filter_tag", value_name = "TAG[,TAG..]")]
    pub tags: Vec<String>,
    /// Only snapshots whose backed-up paths include PATH (repeatable: all
    /// of them; relative paths are taken from the current directory).
    #[arg(long = "path", id = "filter_path", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// When a snapshot record is unreadable, let `latest` be the newest
    /// readable snapshot (with a warning) instead of failing: the damaged
    /// record may have been the newest
    #[arg(long)]
    pub skip_damaged: bool,
}

impl FilterArgs {
    /// The engine's filter: tag options split at commas, paths made absolute
    /// (snapshot records store absolute source paths).
    pub fn filter(&self) -> Result<SnapshotFilter> {
        let tags = self
            .tags
            .iter()
            .map(|t| {
                t.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .collect();
        let paths = self
            .paths
            .iter()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    bail!("--path needs a path");
                }
                let abs =
                    std::path::absolute(p).with_context(|| format!("--path {}", p.display()))?;
                Ok(cairn_engine::names::os_path(abs.as_os_str()))
            })
            .collect::<Result<_>>()?;
        Ok(SnapshotFilter {
            hosts: self.hosts.clone(),
            tags,
            paths,
            skip_damaged: self.skip_damaged,
        })
    }
}

/// Resolves `latest` (the newest snapshot `filter` lets through) or a
/// unique id prefix (which must pass the filter). An unreadable record
/// makes `latest` fail unless `--skip-damaged`; the records it then
/// skipped are reported once each (one may have been the newest).
/// `ID:subfolder` is refused here: only the browsing commands and
/// `restore` take it ([`resolve_at`]); the others act on whole snapshots.
pub fn resolve(repo: &Repository, spec: &str, filter: &SnapshotFilter) -> Result<SnapshotInfo> {
    if let (id, Some(sub)) = snapshot_paths::split_spec(spec) {
        bail!(
            "{spec:?}: `ID:subfolder` is taken by ls, cat, dump, diff and restore; this \
             command acts on whole snapshots: give {id} alone, without :{sub}"
        );
    }
    resolve_plain(repo, spec, filter)
}

fn resolve_plain(repo: &Repository, spec: &str, filter: &SnapshotFilter) -> Result<SnapshotInfo> {
    let (info, skipped) = catalog::resolve_filtered(&**repo.backend(), spec, filter)?;
    for (id, e) in &skipped {
        eprintln!(
            "cairn: warning: snapshot {} unreadable, skipped when resolving {spec:?}: {e}",
            catalog::short_id(id)
        );
    }
    Ok(info)
}

/// Resolves each spec once (repeats dropped, order kept).
pub fn resolve_all(
    repo: &Repository,
    specs: &[String],
    filter: &SnapshotFilter,
) -> Result<Vec<SnapshotInfo>> {
    let mut out: Vec<SnapshotInfo> = Vec::new();
    for spec in specs {
        let s = resolve(repo, spec, filter)?;
        if !out.iter().any(|o| o.id == s.id) {
            out.push(s);
        }
    }
    Ok(out)
}

/// Resolves restic's `ID:subfolder` (or a plain spec): the snapshot, and
/// the subfolder as typed (a snapshot path or a backed-up path).
pub fn resolve_at(
    repo: &Repository,
    spec: &str,
    filter: &SnapshotFilter,
) -> Result<(SnapshotInfo, Option<String>)> {
    let (id, sub) = snapshot_paths::split_spec(spec);
    let sub = sub.map(snapshot_path).transpose()?;
    Ok((resolve_plain(repo, id, filter)?, sub))
}

/// The snapshot path that `path` (from [`snapshot_path`]) names in `snap`,
/// inside subfolder `sub` when the snapshot was given as `ID:sub`: the
/// subfolder may be written either way the engine accepts
/// (`cairn_engine::snapshot_paths`), and `path` is then relative to it.
pub fn position(
    reader: &mut Reader,
    snap: &SnapshotInfo,
    sub: Option<&str>,
    path: Option<&str>,
) -> Result<String> {
    let path = path.unwrap_or("");
    Ok(match sub {
        None => snapshot_paths::resolve(reader, &snap.record, path)?,
        Some(sub) => {
            let base = snapshot_paths::resolve(reader, &snap.record, sub)?;
            snapshot_paths::join_base(&base, path)
        }
    })
}

/// A path argument inside a snapshot as the engine takes it
/// ([`snapshot_path`]); a component that is not UTF-8 is escaped as
/// listings' names are (`cairn_engine::names`).
pub fn snapshot_os_path(arg: &std::ffi::OsStr) -> Result<String> {
    snapshot_path(&cairn_engine::names::os_path(arg))
}

/// A path inside a snapshot as typed, checked before the repository is
/// opened: `.` and repeated `/` dropped, `..` refused rather than guessed
/// at. A leading `/` is kept: such a path is the snapshot path from the
/// root (`/docs/a` is `docs/a`) or the path an entry was backed up from
/// (`/home/me/docs/a`), which [`position`] tells apart in the snapshot.
pub fn snapshot_path(arg: &str) -> Result<String> {
    let comps = snapshot_paths::components(arg)?;
    let body = comps.join("/");
    Ok(if arg.starts_with('/') {
        format!("/{body}")
    } else {
        body
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_paths_are_rooted() {
        assert_eq!(snapshot_path("/docs/a").unwrap(), "/docs/a");
        assert_eq!(snapshot_path("docs/a").unwrap(), "docs/a");
        assert_eq!(snapshot_path("//docs/./a/").unwrap(), "/docs/a");
        assert_eq!(snapshot_path("/").unwrap(), "/");
        assert_eq!(snapshot_path("").unwrap(), "");
        assert!(snapshot_path("/docs/../etc").is_err());
    }

    #[test]
    fn tag_options_are_sets_and_paths_absolute() {
        let a = FilterArgs {
            hosts: vec!["h".into()],
            tags: vec!["a,b".into(), "c".into(), String::new()],
            paths: vec![PathBuf::from("rel/dir"), PathBuf::from("/abs")],
            skip_damaged: false,
        };
        let f = a.filter().unwrap();
        assert_eq!(f.hosts, ["h"]);
        assert_eq!(
            f.tags,
            vec![vec!["a".to_string(), "b".into()], vec!["c".into()], vec![]]
        );
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(f.paths[0], cwd.join("rel/dir").to_string_lossy());
        assert_eq!(f.paths[1], "/abs");
    }
}
