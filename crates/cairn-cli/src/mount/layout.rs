//! The top of a mounted repository (docs/mount.md): virtual directories that
//! name each snapshot by id, by time, by tag and by host, built once from
//! the snapshot list when the mount starts.
//!
//! ```text
//! /ids/<short id>/            every snapshot (8 hex digits; the full id if two share them)
//! /snapshots/<time>/          by time, oldest first; `-1`, `-2`.. when a second repeats
//! /snapshots/latest -> <time> the newest
//! /tags/<tag>/<time>/         snapshots carrying the tag, and `latest`
//! /hosts/<host>/<time>/       snapshots taken on the host, and `latest`
//! ```
//!
//! A tag or host that cannot be a file name (empty, `.`, `..`, `/` or NUL in
//! it) has no directory; the mount reports it once.

use std::collections::{BTreeMap, HashMap};

use cairn_engine::catalog::SnapshotInfo;

/// One node of the virtual tree. Nodes are numbered by their index in
/// [`Layout::nodes`]; node 0 is the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VNode {
    /// A directory: its entries by name, each a node index.
    Dir(Vec<(String, usize)>),
    /// A symlink to a sibling (`latest`).
    Link(String),
    /// The root directory of snapshot `i` (an index into the list).
    Snapshot(usize),
}

#[derive(Debug)]
pub struct Layout {
    pub nodes: Vec<VNode>,
    /// Tags and hosts left out because they are no valid file name.
    pub skipped: Vec<String>,
    /// Whether the `latest` links exist: not while a snapshot record is
    /// unreadable (its time is unknown, so it may be the newest).
    with_latest: bool,
}

/// Directory names of each snapshot by time: the snapshot's UTC second,
/// with `-1`, `-2`.. for later snapshots of the same second. `snaps` is
/// oldest first, so names keep their order.
pub fn time_names(snaps: &[SnapshotInfo]) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    snaps
        .iter()
        .map(|s| {
            let base = crate::output::time(s.record.time_unix_ns);
            let n = seen.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                base
            } else {
                format!("{base}-{}", *n - 1)
            }
        })
        .collect()
}

/// Directory names by id: the short id, or the full id when another
/// snapshot shares the short one.
fn id_names(snaps: &[SnapshotInfo]) -> Vec<String> {
    let short = |id: &str| id[..8.min(id.len())].to_string();
    let mut count: HashMap<String, usize> = HashMap::new();
    for s in snaps {
        *count.entry(short(&s.id)).or_insert(0) += 1;
    }
    snaps
        .iter()
        .map(|s| match count[&short(&s.id)] {
            1 => short(&s.id),
            _ => s.id.clone(),
        })
        .collect()
}

fn valid_name(n: &str) -> bool {
    cairn_format::dir::name_error(n.as_bytes()).is_none()
}

impl Layout {
    /// The tree of `snaps` (oldest first); `with_latest`: whether the
    /// by-time directories get a `latest` link to their newest snapshot.
    pub fn new(snaps: &[SnapshotInfo], with_latest: bool) -> Self {
        let mut l = Layout {
            nodes: vec![VNode::Dir(Vec::new())],
            skipped: Vec::new(),
            with_latest,
        };
        let times = time_names(snaps);
        let ids = id_names(snaps);
        let all: Vec<usize> = (0..snaps.len()).collect();

        let by_id = ids
            .iter()
            .enumerate()
            .map(|(i, name)| (name.clone(), l.push(VNode::Snapshot(i))))
            .collect();
        let ids_dir = l.push(VNode::Dir(by_id));
        let snapshots_dir = l.by_time(&all, &times);

        let mut tags: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut hosts: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, s) in snaps.iter().enumerate() {
            for t in &s.record.tags {
                tags.entry(t).or_default().push(i);
            }
            hosts.entry(&s.record.host).or_default().push(i);
        }
        let tags_dir = l.groups("tag", tags, &times);
        let hosts_dir = l.groups("host", hosts, &times);

        l.nodes[0] = VNode::Dir(vec![
            ("hosts".into(), hosts_dir),
            ("ids".into(), ids_dir),
            ("snapshots".into(), snapshots_dir),
            ("tags".into(), tags_dir),
        ]);
        l
    }

    fn push(&mut self, n: VNode) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    /// A directory of the snapshots `members` (oldest first) by time name,
    /// plus `latest` when it has any.
    fn by_time(&mut self, members: &[usize], times: &[String]) -> usize {
        let mut entries: Vec<(String, usize)> = members
            .iter()
            .map(|&i| (times[i].clone(), self.push(VNode::Snapshot(i))))
            .collect();
        if let (Some(&newest), true) = (members.last(), self.with_latest) {
            let link = self.push(VNode::Link(times[newest].clone()));
            entries.push(("latest".into(), link));
        }
        self.push(VNode::Dir(entries))
    }

    /// `tags/` or `hosts/`: one [`Self::by_time`] directory per group name.
    fn groups(
        &mut self,
        what: &str,
        groups: BTreeMap<&str, Vec<usize>>,
        times: &[String],
    ) -> usize {
        let mut entries = Vec::new();
        for (name, members) in groups {
            if !valid_name(name) {
                self.skipped.push(format!("{what} {name:?}"));
                continue;
            }
            entries.push((name.to_string(), self.by_time(&members, times)));
        }
        self.push(VNode::Dir(entries))
    }

    /// The entry `name` of directory node `dir`.
    pub fn child(&self, dir: usize, name: &str) -> Option<usize> {
        match &self.nodes[dir] {
            VNode::Dir(entries) => entries.iter().find(|(n, _)| n == name).map(|(_, i)| *i),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_format::snapshot::{BlobRefRecord, SnapshotRecord};

    fn snap(id: &str, secs: i64, host: &str, tags: &[&str]) -> SnapshotInfo {
        let record = SnapshotRecord {
            time_unix_ns: secs * 1_000_000_000 + 5,
            host: host.into(),
            paths: vec!["/x".into()],
            tags: tags.iter().map(|t| t.to_string()).collect(),
            root: BlobRefRecord {
                root: "00".into(),
                level: 0,
                size: 0,
            },
            stats: Default::default(),
            next_container: 0,
            fastcopy_of: None,
            original: None,
        };
        SnapshotInfo {
            id: id.into(),
            record,
        }
    }

    /// The path of every node reachable from the root, with what it is.
    fn paths(l: &Layout) -> Vec<String> {
        fn walk(l: &Layout, n: usize, prefix: &str, out: &mut Vec<String>) {
            match &l.nodes[n] {
                VNode::Dir(entries) => {
                    for (name, c) in entries {
                        walk(l, *c, &format!("{prefix}/{name}"), out);
                    }
                }
                VNode::Link(t) => out.push(format!("{prefix} -> {t}")),
                VNode::Snapshot(i) => out.push(format!("{prefix} = {i}")),
            }
        }
        let mut out = Vec::new();
        walk(l, 0, "", &mut out);
        out
    }

    #[test]
    fn names_every_snapshot_by_id_time_tag_and_host() {
        let snaps = [
            snap("aaaaaaaa11", 0, "h1", &["daily"]),
            snap("bbbbbbbb22", 60, "h2", &["daily", "keep"]),
            snap("aaaaaaaa33", 60, "h1", &["bad/tag"]),
        ];
        let l = Layout::new(&snaps, true);
        let t0 = "1970-01-01T00:00:00Z";
        let t1 = "1970-01-01T00:01:00Z";
        let t2 = "1970-01-01T00:01:00Z-1";
        let want = [
            format!("/hosts/h1/{t0} = 0"),
            format!("/hosts/h1/{t2} = 2"),
            format!("/hosts/h1/latest -> {t2}"),
            format!("/hosts/h2/{t1} = 1"),
            format!("/hosts/h2/latest -> {t1}"),
            "/ids/aaaaaaaa11 = 0".into(),
            "/ids/bbbbbbbb = 1".into(),
            "/ids/aaaaaaaa33 = 2".into(),
            format!("/snapshots/{t0} = 0"),
            format!("/snapshots/{t1} = 1"),
            format!("/snapshots/{t2} = 2"),
            format!("/snapshots/latest -> {t2}"),
            format!("/tags/daily/{t0} = 0"),
            format!("/tags/daily/{t1} = 1"),
            format!("/tags/daily/latest -> {t1}"),
            format!("/tags/keep/{t1} = 1"),
            format!("/tags/keep/latest -> {t1}"),
        ];
        assert_eq!(paths(&l), want);
        assert_eq!(l.skipped, ["tag \"bad/tag\""]);
        let snapshots = l.child(0, "snapshots").unwrap();
        assert_eq!(l.nodes[l.child(snapshots, t2).unwrap()], VNode::Snapshot(2));
        assert_eq!(l.child(snapshots, "nope"), None);
        // Without `latest` (a record is unreadable): the same minus the links.
        let without: Vec<String> = want
            .iter()
            .filter(|p| !p.contains("/latest"))
            .cloned()
            .collect();
        assert_eq!(paths(&Layout::new(&snaps, false)), without);
    }

    #[test]
    fn an_empty_repository_has_empty_directories() {
        let l = Layout::new(&[], true);
        assert!(paths(&l).is_empty());
        let VNode::Dir(top) = &l.nodes[0] else {
            panic!("root is a directory")
        };
        let names: Vec<&str> = top.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["hosts", "ids", "snapshots", "tags"]);
    }
}
