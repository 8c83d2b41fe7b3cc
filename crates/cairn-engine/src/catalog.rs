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
    decode_record(id, &bytes)
}

/// Decodes snapshot `id`'s record, naming it in a corruption error.
fn decode_record(id: &str, bytes: &[u8]) -> Result<SnapshotRecord> {
    decode_snapshot(bytes).map_err(|e| match e {
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
/// those reads were over a third of an incremental backup's CPU. A
/// handle's first listing starts from the snapshot summary
/// (`catalog_summary.rs`), so it too reads only the records written since.
#[derive(Default)]
pub struct RecordMemo(parking_lot::Mutex<MemoState>);

#[derive(Default)]
struct MemoState {
    /// Records by id, with their bytes as stored (for the summary).
    records: std::collections::HashMap<String, (SnapshotRecord, std::sync::Arc<[u8]>)>,
    /// Whether the summary was read (once per handle).
    summary_read: bool,
    /// Records read one by one since the summary was read or written.
    read_alone: usize,
}

impl RecordMemo {
    /// Whether this handle's listings read [`catalog_summary::STALE_AFTER`]
    /// records that the summary did not hold, so a new one would save the
    /// next process those reads.
    ///
    /// [`catalog_summary::STALE_AFTER`]: crate::catalog_summary::STALE_AFTER
    pub fn summary_due(&self) -> bool {
        self.0.lock().read_alone >= crate::catalog_summary::STALE_AFTER
    }

    /// Writes every record held as the new snapshot summary.
    pub fn write_summary(&self, backend: &dyn Backend) -> Result<()> {
        let entries: Vec<crate::catalog_summary::Entry> = {
            let m = self.0.lock();
            m.records
                .iter()
                .map(|(id, (_, bytes))| (id.clone(), bytes.clone()))
                .collect()
        };
        crate::catalog_summary::write(backend, &entries)?;
        self.0.lock().read_alone = 0;
        Ok(())
    }

    /// Takes in the summary's records that verify against their ids,
    /// once per handle.
    fn read_summary(&self, backend: &dyn Backend) -> Result<()> {
        if std::mem::replace(&mut self.0.lock().summary_read, true) {
            return Ok(());
        }
        let mut found = Vec::new();
        for (id, bytes) in crate::catalog_summary::read(backend)? {
            if id_of(backend, &bytes) != id {
                continue;
            }
            if let Ok(record) = decode_snapshot(&bytes) {
                found.push((id, (record, bytes)));
            }
        }
        self.0.lock().records.extend(found);
        Ok(())
    }
}

/// [`list`] through `memo`: records it holds are not read again; records
/// that fail to load are not remembered, and records no longer listed
/// (forgotten) are dropped, so a long-lived handle holds only the
/// snapshots that exist.
pub fn list_memoized(
    backend: &dyn Backend,
    memo: &RecordMemo,
) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    memo.read_summary(backend)?;
    let listed = list_with(backend, |id| {
        if let Some((r, _)) = memo.0.lock().records.get(id) {
            return Ok(r.clone());
        }
        let bytes = load_bytes(backend, id)?;
        let record = decode_record(id, &bytes)?;
        let mut m = memo.0.lock();
        m.records
            .insert(id.to_string(), (record.clone(), bytes.into()));
        m.read_alone += 1;
        Ok(record)
    })?;
    let kept: std::collections::HashSet<&str> = listed.0.iter().map(|s| s.id.as_str()).collect();
    memo.0
        .lock()
        .records
        .retain(|id, _| kept.contains(id.as_str()));
    Ok(listed)
}

/// Every listed record through `load`, a window of
/// [`Backend::read_parallelism`] at a time: on object storage each record
/// not held is a round trip, and one after another they were most of the
/// time a backup took to take the writer lock.
fn list_with(
    backend: &dyn Backend,
    load: impl Fn(&str) -> Result<SnapshotRecord> + Sync,
) -> Result<(Vec<SnapshotInfo>, Unreadable)> {
    let ids: Vec<String> = backend
        .list(object_names::SNAPSHOTS)?
        .into_iter()
        .filter_map(|k| k.strip_prefix(object_names::SNAPSHOTS).map(str::to_string))
        .collect();
    let loaded = crate::blocking_map::blocking_map(&ids, backend.read_parallelism(), |id| load(id));
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for (id, result) in ids.into_iter().zip(loaded) {
        match result {
            Ok(record) => good.push(SnapshotInfo { id, record }),
            // Forgotten since it was listed (`forget` runs beside others).
            Err(e) if e.is_not_found() => {}
            Err(e) => bad.push((id, e)),
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
#[path = "catalog_tests.rs"]
pub(crate) mod tests;
