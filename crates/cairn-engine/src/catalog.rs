//! The snapshot catalog: one immutable object per snapshot,
//! `snapshots/<id>`, where the id is the BLAKE3 hash of the encoded record.
//! Writing the object (atomically, after everything it references is
//! durable) is what makes a snapshot exist; there is no other commit step.

use cairn_core::{Backend, Error, Result};
use cairn_format::snapshot::{decode_snapshot, encode_snapshot, SnapshotRecord};
use serde::Serialize;

use crate::object_names;

#[derive(Clone, Debug)]
pub struct SnapshotInfo {
    pub id: String,
    pub record: SnapshotRecord,
}

/// A record's id: the BLAKE3 hash of its bytes, keyed in an encrypted
/// repository (`Backend::naming_key`).
fn id_of(backend: &dyn Backend, bytes: &[u8]) -> String {
    match backend.naming_key() {
        Some(key) => blake3::keyed_hash(key, bytes),
        None => blake3::hash(bytes),
    }
    .to_hex()
    .to_string()
}

/// The id a record stored as `bytes` gets in `backend`.
pub fn id_for(backend: &dyn Backend, bytes: &[u8]) -> String {
    id_of(backend, bytes)
}

/// Snapshot `id`'s record as stored, verified against its id: what a
/// copy writes elsewhere byte for byte (decoding and encoding again need
/// not give the same bytes: the record's timings are floating point).
pub fn load_bytes(backend: &dyn Backend, id: &str) -> Result<Vec<u8>> {
    let bytes = backend.read(&object_names::snapshot(id))?;
    if id_of(backend, &bytes) != id {
        return Err(Error::corrupt(
            format!("snapshot {id}"),
            "content does not match its id",
        ));
    }
    Ok(bytes)
}

/// Commits a record given as its stored bytes (checked to decode) and
/// returns its id.
pub fn commit_bytes(backend: &dyn Backend, bytes: &[u8]) -> Result<String> {
    decode_snapshot(bytes)?;
    let id = id_of(backend, bytes);
    backend.write_atomic(&object_names::snapshot(&id), bytes)?;
    Ok(id)
}

/// Commits a snapshot record and returns its id.
pub fn commit(backend: &dyn Backend, record: &SnapshotRecord) -> Result<String> {
    let bytes = encode_snapshot(record);
    let id = id_of(backend, &bytes);
    backend.write_atomic(&object_names::snapshot(&id), &bytes)?;
    Ok(id)
}

/// Removes one snapshot record (the data it references stays until a
/// garbage collection finds it unreferenced).
pub fn remove(backend: &dyn Backend, id: &str) -> Result<()> {
    backend.delete(&object_names::snapshot(id))
}

/// Loads and verifies one snapshot by full id.
pub fn load(backend: &dyn Backend, id: &str) -> Result<SnapshotRecord> {
    let bytes = backend.read(&object_names::snapshot(id))?;
    if id_of(backend, &bytes) != id {
        return Err(Error::corrupt(
            format!("snapshot {id}"),
            "content does not match its id",
        ));
    }
    decode_snapshot(&bytes).map_err(|e| match e {
        Error::Corrupt { detail, .. } => Error::corrupt(format!("snapshot {id}"), detail),
        other => other,
    })
}

/// All snapshots, oldest first, plus the ones that failed to load.
/// Snapshot ids whose records could not be loaded, with the reason.
pub type Unreadable = Vec<(String, Error)>;

pub fn list(backend: &dyn Backend) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    list_with(backend, |id| load(backend, id))
}

/// Snapshot records a repository handle has loaded, by id
/// (`Repository::snapshots`). A record's id is the hash of its bytes and a
/// record never changes, so an id names one record for good: a handle
/// that lists the snapshots again (a backup does up to three times: the
/// container-id floor, its parent, the rewrite history) reads and
/// decrypts only the records it has not seen. With a thousand snapshots
/// those reads were over a third of an incremental backup's CPU.
#[derive(Default)]
pub struct RecordMemo(parking_lot::Mutex<std::collections::HashMap<String, SnapshotRecord>>);

/// [`list`] through `memo`: records it holds are not read again; records
/// that fail to load are not remembered, and records no longer listed
/// (forgotten) are dropped, so a long-lived handle holds only the
/// snapshots that exist.
pub fn list_memoized(
    backend: &dyn Backend,
    memo: &RecordMemo,
) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    let listed = list_with(backend, |id| {
        if let Some(r) = memo.0.lock().get(id) {
            return Ok(r.clone());
        }
        let record = load(backend, id)?;
        memo.0.lock().insert(id.to_string(), record.clone());
        Ok(record)
    })?;
    let kept: std::collections::HashSet<&str> = listed.0.iter().map(|s| s.id.as_str()).collect();
    memo.0.lock().retain(|id, _| kept.contains(id.as_str()));
    Ok(listed)
}

fn list_with(
    backend: &dyn Backend,
    mut load: impl FnMut(&str) -> Result<SnapshotRecord>,
) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for key in backend.list(object_names::SNAPSHOTS)? {
        let Some(id) = key.strip_prefix(object_names::SNAPSHOTS) else {
            continue;
        };
        match load(id) {
            Ok(record) => good.push(SnapshotInfo {
                id: id.to_string(),
                record,
            }),
            // Forgotten since it was listed (`forget` runs beside others).
            Err(e) if e.is_not_found() => {}
            Err(e) => bad.push((id.to_string(), e)),
        }
    }
    good.sort_by(|a, b| (a.record.time_unix_ns, &a.id).cmp(&(b.record.time_unix_ns, &b.id)));
    Ok((good, bad))
}

/// Resolves `latest` or a unique id prefix (at least 4 hex digits).
/// `latest` is an error while any snapshot record is unreadable (see
/// [`resolve_filtered`]).
pub fn resolve(backend: &dyn Backend, spec: &str) -> Result<SnapshotInfo> {
    resolve_filtered(backend, spec, &SnapshotFilter::default()).map(|(info, _)| info)
}

/// Resolves a unique id prefix (at least 4 hex digits, any case).
fn resolve_id(backend: &dyn Backend, spec: &str) -> Result<(SnapshotInfo, Unreadable)> {
    let id = match_id(backend, spec)?;
    let record = load(backend, &id)?;
    Ok((SnapshotInfo { id, record }, Vec::new()))
}

/// Which snapshots a command considers (restic's `--host`, `--tag`,
/// `--path`): a snapshot matches when it passes every non-empty part.
/// `latest` means the newest matching snapshot; an explicit id must name a
/// matching one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotFilter {
    /// The snapshot's host is one of these.
    pub hosts: Vec<String>,
    /// The snapshot carries every tag of at least one of these sets
    /// (`--tag a,b --tag c`: both a and b, or c); an empty set stands for
    /// "no tags at all".
    pub tags: Vec<Vec<String>>,
    /// The snapshot's source paths include every one of these (compared
    /// after [`clean_path`]; the caller makes them absolute).
    pub paths: Vec<String>,
    /// `latest` is the newest *readable* matching snapshot even when some
    /// record is unreadable (`--skip-damaged`). Off, an unreadable record
    /// makes `latest` an error: its time is unknown, so it may be the
    /// newest. Not a part of what [`matches`](Self::matches) compares.
    pub skip_damaged: bool,
}

impl SnapshotFilter {
    /// Whether the filter lets every snapshot through.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.tags.is_empty() && self.paths.is_empty()
    }

    pub fn matches(&self, r: &SnapshotRecord) -> bool {
        (self.hosts.is_empty() || self.hosts.contains(&r.host))
            && (self.tags.is_empty() || self.tags.iter().any(|set| set_matches(set, &r.tags)))
            && self.paths.iter().all(|p| {
                let want = clean_path(p);
                r.paths.iter().any(|have| clean_path(have) == want)
            })
    }
}

/// A tag set matches a snapshot carrying all its tags; the empty set (from
/// `--tag ''`) matches a snapshot without tags.
fn set_matches(set: &[String], tags: &[String]) -> bool {
    if set.is_empty() {
        tags.is_empty()
    } else {
        set.iter().all(|t| tags.contains(t))
    }
}

impl std::fmt::Display for SnapshotFilter {
    /// `host=a|b tag=x,y|z path=/p path=/q`, for messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.hosts.is_empty() {
            parts.push(format!("host={}", self.hosts.join("|")));
        }
        if !self.tags.is_empty() {
            let sets: Vec<String> = self
                .tags
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        "''".into()
                    } else {
                        s.join(",")
                    }
                })
                .collect();
            parts.push(format!("tag={}", sets.join("|")));
        }
        for p in &self.paths {
            parts.push(format!("path={p}"));
        }
        f.write_str(&parts.join(" "))
    }
}

/// A source path as shown and compared: repeated and trailing `/` and `.`
/// components removed (`..` is kept: resolving it lexically could name a
/// different directory when symlinks are involved). Names that are not
/// paths (`<stdin:NAME>`) come back unchanged.
pub fn clean_path(p: &str) -> String {
    if !p.contains('/') {
        return p.to_string();
    }
    let comps: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let body = comps.join("/");
    if p.starts_with('/') {
        format!("/{body}")
    } else if body.is_empty() {
        ".".to_string()
    } else {
        body
    }
}

/// The snapshots `filter` lets through, oldest first, plus every record
/// that failed to load (whether it would have matched is unknown).
pub fn list_filtered(
    backend: &dyn Backend,
    filter: &SnapshotFilter,
) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    let (mut all, bad) = list(backend)?;
    all.retain(|s| filter.matches(&s.record));
    Ok((all, bad))
}

/// Resolves `latest` or a unique id prefix within the snapshots `filter`
/// lets through: `latest` is the newest of them, and an id prefix must name
/// one of them. While any snapshot record is unreadable `latest` is an
/// error naming the records and the ways on (an unreadable record's time is
/// unknown, so it may be the newest), unless `filter.skip_damaged`: then
/// the unreadable records are returned with the newest readable snapshot,
/// and the caller must say that they were skipped.
pub fn resolve_filtered(
    backend: &dyn Backend,
    spec: &str,
    filter: &SnapshotFilter,
) -> Result<(SnapshotInfo, Unreadable)> {
    if spec == "latest" {
        let (all, bad) = list(backend)?;
        if !bad.is_empty() && !filter.skip_damaged {
            return Err(damaged_blocks_latest(&bad));
        }
        let any = !all.is_empty();
        let newest = all.into_iter().rfind(|s| filter.matches(&s.record));
        return match newest {
            Some(s) => Ok((s, bad)),
            // Some snapshot exists, so the filter is what left none.
            None if any => Err(Error::NotFound(format!("no snapshot matches {filter}"))),
            None => Err(match bad.first() {
                Some((id, e)) => Error::corrupt(format!("snapshot {id}"), e.to_string()),
                None => Error::NotFound("no snapshots in the repository".into()),
            }),
        };
    }
    let (info, bad) = resolve_id(backend, spec)?;
    if !filter.matches(&info.record) {
        return Err(Error::NotFound(format!(
            "snapshot {} does not match {filter}",
            short_id(&info.id)
        )));
    }
    Ok((info, bad))
}

/// Why `latest` cannot be resolved while records `bad` (not empty) are
/// unreadable: one line naming them, what went wrong with the first, and
/// the two ways on.
fn damaged_blocks_latest(bad: &Unreadable) -> Error {
    let ids: Vec<&str> = bad.iter().map(|(id, _)| short_id(id)).collect();
    let why = match &bad[0].1 {
        Error::Corrupt { detail, .. } => detail.clone(),
        other => other.to_string(),
    };
    let (records, them) = if ids.len() == 1 {
        ("record", "it")
    } else {
        ("records", "them")
    };
    Error::corrupt(
        format!("snapshot {records} {}", ids.join(", ")),
        format!(
            "unreadable ({why}), so the newest snapshot, `latest`, is unknown; \
             remove {them} with `cairn forget {}`, name a snapshot by id, \
             or pass --skip-damaged to use the newest readable snapshot",
            ids.join(" ")
        ),
    )
}

/// The full id of the one snapshot record whose id starts with `spec` (at
/// least 4 hex digits, any case), without reading the record: how
/// `forget` names a record that no longer decodes.
pub fn match_id(backend: &dyn Backend, spec: &str) -> Result<String> {
    if spec.len() < 4 || !spec.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::invalid(format!(
            "snapshot id {spec:?} must be 'latest' or at least 4 hex digits"
        )));
    }
    let spec = spec.to_ascii_lowercase();
    let matches: Vec<String> = backend
        .list(object_names::SNAPSHOTS)?
        .into_iter()
        .filter_map(|k| k.strip_prefix(object_names::SNAPSHOTS).map(str::to_string))
        .filter(|id| id.starts_with(&spec))
        .collect();
    match <[String; 1]>::try_from(matches) {
        Ok([id]) => Ok(id),
        Err(m) if m.is_empty() => Err(Error::NotFound(format!("snapshot {spec}"))),
        Err(m) => Err(Error::invalid(format!(
            "snapshot prefix {spec} is ambiguous ({} matches)",
            m.len()
        ))),
    }
}

/// The form of an id shown to people: its first 8 hex digits (any unique
/// prefix of at least 4 is accepted back).
pub fn short_id(id: &str) -> &str {
    &id[..SHORT_ID_LEN.min(id.len())]
}

/// Hex digits of a short id.
pub const SHORT_ID_LEN: usize = 8;

/// What snapshots are grouped by (`forget` before its rules apply,
/// `snapshots --group-by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupBy {
    pub host: bool,
    pub paths: bool,
    pub tags: bool,
}

impl Default for GroupBy {
    fn default() -> Self {
        GroupBy {
            host: true,
            paths: true,
            tags: false,
        }
    }
}

impl GroupBy {
    /// No field: every snapshot in one group.
    pub const NONE: GroupBy = GroupBy {
        host: false,
        paths: false,
        tags: false,
    };

    /// Parses `host,paths,tags` (any subset, comma-separated; empty: one group).
    pub fn parse(s: &str) -> Result<Self> {
        let mut g = GroupBy::NONE;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "host" => g.host = true,
                "paths" => g.paths = true,
                "tags" => g.tags = true,
                other => {
                    return Err(Error::invalid(format!(
                        "unknown field {other:?} to group by (host, paths, tags)"
                    )))
                }
            }
        }
        Ok(g)
    }

    /// The fields of `r` this grouping looks at (paths cleaned, paths and
    /// tags sorted, so their order in the record does not split groups).
    pub fn key(&self, r: &SnapshotRecord) -> GroupKey {
        let sorted = |v: Vec<String>| {
            let mut v = v;
            v.sort();
            v
        };
        GroupKey {
            host: self.host.then(|| r.host.clone()),
            paths: self
                .paths
                .then(|| sorted(r.paths.iter().map(|p| clean_path(p)).collect())),
            tags: self.tags.then(|| sorted(r.tags.clone())),
        }
    }
}

/// The fields as [`GroupBy::parse`] reads them (`host,paths`; empty for none).
impl std::fmt::Display for GroupBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields = [
            (self.host, "host"),
            (self.paths, "paths"),
            (self.tags, "tags"),
        ];
        let names: Vec<&str> = fields.iter().filter(|(on, _)| *on).map(|f| f.1).collect();
        f.write_str(&names.join(","))
    }
}

impl std::str::FromStr for GroupBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// The values a group of snapshots shares; `None` for a field not grouped by.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupKey {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

impl std::fmt::Display for GroupKey {
    /// `host=H paths=[a,b] tags=[t]` (the fields grouped by; empty for none).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(h) = &self.host {
            parts.push(format!("host={h}"));
        }
        if let Some(p) = &self.paths {
            parts.push(format!("paths=[{}]", p.join(",")));
        }
        if let Some(t) = &self.tags {
            parts.push(format!("tags=[{}]", t.join(",")));
        }
        f.write_str(&parts.join(" "))
    }
}

/// `snapshots` split into groups by `by`: groups in key order, each one's
/// members in the order given (oldest first for [`list`]'s output).
pub fn group(snapshots: Vec<SnapshotInfo>, by: GroupBy) -> Vec<(GroupKey, Vec<SnapshotInfo>)> {
    let mut groups: std::collections::BTreeMap<GroupKey, Vec<SnapshotInfo>> = Default::default();
    for s in snapshots {
        groups.entry(by.key(&s.record)).or_default().push(s);
    }
    groups.into_iter().collect()
}

/// The `n` newest snapshots of each group (`snapshots --latest N`, as
/// restic: by host and paths unless grouped otherwise), oldest first as
/// [`list`] gives them; `snapshots` is taken oldest first.
pub fn latest_per_group(snapshots: Vec<SnapshotInfo>, by: GroupBy, n: usize) -> Vec<SnapshotInfo> {
    let mut kept: Vec<SnapshotInfo> = group(snapshots, by)
        .into_iter()
        .flat_map(|(_, members)| {
            let skip = members.len().saturating_sub(n);
            members.into_iter().skip(skip)
        })
        .collect();
    kept.sort_by(|a, b| (a.record.time_unix_ns, &a.id).cmp(&(b.record.time_unix_ns, &b.id)));
    kept
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cairn_backend::MemBackend;
    use cairn_format::snapshot::BlobRefRecord;

    /// The memoized listing gives what a fresh one gives, reads each
    /// record once, drops forgotten ones and does not remember a record
    /// that failed to load.
    #[test]
    fn a_memoized_listing_reads_each_record_once() {
        let plan = cairn_backend::FaultPlan::new();
        let backend = cairn_backend::FaultBackend::new(MemBackend::new(), plan.clone());
        let memo = RecordMemo::default();
        let a = commit(&backend, &record(1, "h", &["/a"], &[])).unwrap();
        let b = commit(&backend, &record(2, "h", &["/b"], &[])).unwrap();
        let ids = |l: &(Vec<SnapshotInfo>, Unreadable)| {
            l.0.iter().map(|s| s.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&list_memoized(&backend, &memo).unwrap()),
            [a.clone(), b.clone()]
        );
        // Held in the memo: a read that would now fail is not made.
        plan.corrupt_reads_with_prefix(
            object_names::SNAPSHOTS,
            cairn_backend::CorruptAt::Start(0),
            1,
        );
        let again = list_memoized(&backend, &memo).unwrap();
        assert_eq!(ids(&again), [a.clone(), b.clone()]);
        assert!(again.1.is_empty());
        assert_eq!(
            list(&backend).unwrap().1.len(),
            2,
            "a fresh listing reads them"
        );
        // A new record that fails to load is reported, and not remembered.
        let c = commit(&backend, &record(3, "h", &["/c"], &[])).unwrap();
        let with_c = list_memoized(&backend, &memo).unwrap();
        assert_eq!(with_c.1.len(), 1);
        plan.clear_corruptions();
        assert_eq!(
            ids(&list_memoized(&backend, &memo).unwrap()),
            [a.clone(), b.clone(), c]
        );
        // A forgotten record is no longer listed, nor held.
        remove(&backend, &a).unwrap();
        assert_eq!(ids(&list_memoized(&backend, &memo).unwrap())[0], b);
        assert!(!memo.0.lock().contains_key(&a));
    }

    #[test]
    fn group_by_displays_as_it_parses() {
        for text in ["host,paths", "", "tags", "host,paths,tags"] {
            assert_eq!(GroupBy::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(GroupBy::default().to_string(), "host,paths");
    }

    /// A record of a tree that is never read (for catalog-level tests).
    pub(crate) fn record(t: i64, host: &str, paths: &[&str], tags: &[&str]) -> SnapshotRecord {
        SnapshotRecord {
            time_unix_ns: t,
            host: host.into(),
            paths: paths.iter().map(|s| s.to_string()).collect(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            root: BlobRefRecord {
                root: "00".into(),
                level: 0,
                size: 0,
            },
            stats: Default::default(),
            next_container: 0,
            fastcopy_of: None,
            original: None,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Four snapshots: (id, record), oldest first.
    fn repo() -> (MemBackend, Vec<String>) {
        let b = MemBackend::new();
        let ids = [
            record(1, "alpha", &["/data"], &["daily"]),
            record(2, "beta", &["/data", "/etc"], &["daily", "keep"]),
            record(3, "alpha", &["/etc/"], &["keep"]),
            record(4, "beta", &["/data/."], &[]),
        ]
        .iter()
        .map(|r| commit(&b, r).unwrap())
        .collect();
        (b, ids)
    }

    #[test]
    fn filter_parts_combine() {
        let r = record(0, "alpha", &["/data/", "/etc"], &["a", "b"]);
        let f = |hosts: &[&str], tags: &[&[&str]], paths: &[&str]| SnapshotFilter {
            hosts: strings(hosts),
            tags: tags.iter().map(|s| strings(s)).collect(),
            paths: strings(paths),
            skip_damaged: false,
        };
        assert!(f(&[], &[], &[]).matches(&r));
        assert!(f(&["beta", "alpha"], &[], &[]).matches(&r));
        assert!(!f(&["beta"], &[], &[]).matches(&r));
        assert!(f(&[], &[&["a", "b"]], &[]).matches(&r));
        assert!(!f(&[], &[&["a", "c"]], &[]).matches(&r));
        assert!(f(&[], &[&["a", "c"], &["b"]], &[]).matches(&r));
        assert!(f(&[], &[], &["/data", "/etc/"]).matches(&r));
        assert!(!f(&[], &[], &["/data", "/home"]).matches(&r));
        assert!(!f(&["alpha"], &[&["a"]], &["/home"]).matches(&r));
        // The empty tag set: snapshots without tags.
        assert!(!f(&[], &[&[]], &[]).matches(&r));
        assert!(f(&[], &[&[]], &[]).matches(&record(0, "x", &[], &[])));
    }

    #[test]
    fn paths_are_cleaned_for_display_and_comparison() {
        assert_eq!(clean_path("/a//b/./c/"), "/a/b/c");
        assert_eq!(clean_path("/"), "/");
        assert_eq!(clean_path("/a/../b"), "/a/../b");
        assert_eq!(clean_path("<stdin:db.sql>"), "<stdin:db.sql>");
    }

    #[test]
    fn latest_is_the_newest_of_the_filtered_group() {
        let (b, ids) = repo();
        let latest = |f: &SnapshotFilter| resolve_filtered(&b, "latest", f).map(|(s, _)| s.id);
        assert_eq!(latest(&SnapshotFilter::default()).unwrap(), ids[3]);
        let alpha = SnapshotFilter {
            hosts: strings(&["alpha"]),
            ..Default::default()
        };
        assert_eq!(latest(&alpha).unwrap(), ids[2]);
        let daily_keep = SnapshotFilter {
            tags: vec![strings(&["daily", "keep"])],
            ..Default::default()
        };
        assert_eq!(latest(&daily_keep).unwrap(), ids[1]);
        let data = SnapshotFilter {
            paths: strings(&["/data"]),
            ..Default::default()
        };
        assert_eq!(latest(&data).unwrap(), ids[3]);
        let none = SnapshotFilter {
            hosts: strings(&["gamma"]),
            ..Default::default()
        };
        let e = latest(&none).unwrap_err();
        assert!(matches!(e, Error::NotFound(_)), "{e}");
        assert!(e.to_string().contains("host=gamma"), "{e}");
        let (listed, _) = list_filtered(&b, &data).unwrap();
        let listed: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(listed, [&ids[0], &ids[1], &ids[3]]);
    }

    #[test]
    fn an_explicit_id_must_match_the_filter() {
        let (b, ids) = repo();
        let alpha = SnapshotFilter {
            hosts: strings(&["alpha"]),
            ..Default::default()
        };
        let short = short_id(&ids[0]).to_ascii_uppercase();
        assert_eq!(resolve_filtered(&b, &short, &alpha).unwrap().0.id, ids[0]);
        assert_eq!(resolve_filtered(&b, &ids[2], &alpha).unwrap().0.id, ids[2]);
        let e = resolve_filtered(&b, short_id(&ids[1]), &alpha).unwrap_err();
        assert!(e.to_string().contains("does not match host=alpha"), "{e}");
        assert!(resolve_filtered(&b, &ids[0][..3], &alpha).is_err());
        assert!(resolve_filtered(&b, "latex", &alpha).is_err());
    }

    #[test]
    fn groups_follow_the_chosen_fields() {
        let (b, ids) = repo();
        let (all, _) = list(&b).unwrap();
        let by_host = group(all.clone(), GroupBy::parse("host").unwrap());
        let shape: Vec<(String, Vec<&str>)> = by_host
            .iter()
            .map(|(k, m)| (k.to_string(), m.iter().map(|s| s.id.as_str()).collect()))
            .collect();
        assert_eq!(
            shape,
            [
                ("host=alpha".to_string(), vec![&*ids[0], &*ids[2]]),
                ("host=beta".to_string(), vec![&*ids[1], &*ids[3]]),
            ]
        );
        // `/data/.` and `/data` are the same source path.
        let by_paths = group(all.clone(), GroupBy::parse("paths").unwrap());
        assert_eq!(by_paths.len(), 3);
        assert_eq!(by_paths[0].0.to_string(), "paths=[/data]");
        assert_eq!(by_paths[0].1.len(), 2);
        let by_all = group(all.clone(), GroupBy::parse("host,paths,tags").unwrap());
        assert_eq!(by_all.len(), 4);
        assert_eq!(
            by_all[0].0,
            GroupKey {
                host: Some("alpha".into()),
                paths: Some(strings(&["/data"])),
                tags: Some(strings(&["daily"])),
            }
        );
        let one = group(all, GroupBy::parse("").unwrap());
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].0.to_string(), "");
        assert!(GroupBy::parse("host,colour").is_err());
    }
}
