//! The snapshot catalog: one immutable object per snapshot,
//! `snapshots/<id>`, where the id is the BLAKE3 hash of the encoded record.
//! Writing the object (atomically, after everything it references is
//! durable) is what makes a snapshot exist; there is no other commit step.

use cairn_core::{Backend, Error, Result};
use cairn_format::snapshot::{decode_snapshot, encode_snapshot, SnapshotRecord};

use crate::keys;

#[derive(Clone, Debug)]
pub struct SnapshotInfo {
    pub id: String,
    pub record: SnapshotRecord,
}

fn id_of(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Commits a snapshot record and returns its id.
pub fn commit(backend: &dyn Backend, record: &SnapshotRecord) -> Result<String> {
    let bytes = encode_snapshot(record);
    let id = id_of(&bytes);
    backend.write_atomic(&keys::snapshot(&id), &bytes)?;
    Ok(id)
}

/// Removes one snapshot record (the data it references stays until a
/// garbage collection finds it unreferenced).
pub fn remove(backend: &dyn Backend, id: &str) -> Result<()> {
    backend.delete(&keys::snapshot(id))
}

/// Loads and verifies one snapshot by full id.
pub fn load(backend: &dyn Backend, id: &str) -> Result<SnapshotRecord> {
    let bytes = backend.read(&keys::snapshot(id))?;
    if id_of(&bytes) != id {
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
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for key in backend.list(keys::SNAPSHOTS)? {
        let Some(id) = key.strip_prefix(keys::SNAPSHOTS) else {
            continue;
        };
        match load(backend, id) {
            Ok(record) => good.push(SnapshotInfo {
                id: id.to_string(),
                record,
            }),
            Err(e) => bad.push((id.to_string(), e)),
        }
    }
    good.sort_by(|a, b| (a.record.time_unix_ns, &a.id).cmp(&(b.record.time_unix_ns, &b.id)));
    Ok((good, bad))
}

/// Resolves `latest` or a unique id prefix (at least 4 hex digits).
pub fn resolve(backend: &dyn Backend, spec: &str) -> Result<SnapshotInfo> {
    resolve_reporting(backend, spec).map(|(info, _)| info)
}

/// Like [`resolve`], and also returns the unreadable records that `latest`
/// skipped: one damaged record does not disable `latest`, but a damaged
/// record may have been the newest, so the caller must say so.
pub fn resolve_reporting(backend: &dyn Backend, spec: &str) -> Result<(SnapshotInfo, Unreadable)> {
    if spec == "latest" {
        let (all, bad) = list(backend)?;
        let newest = all.into_iter().last().ok_or_else(|| match bad.first() {
            Some((id, e)) => Error::corrupt(format!("snapshot {id}"), e.to_string()),
            None => Error::NotFound("no snapshots in the repository".into()),
        })?;
        return Ok((newest, bad));
    }
    if spec.len() < 4 || !spec.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::invalid(format!(
            "snapshot id {spec:?} must be 'latest' or at least 4 hex digits"
        )));
    }
    let spec = spec.to_ascii_lowercase();
    let matches: Vec<String> = backend
        .list(keys::SNAPSHOTS)?
        .into_iter()
        .filter_map(|k| k.strip_prefix(keys::SNAPSHOTS).map(str::to_string))
        .filter(|id| id.starts_with(&spec))
        .collect();
    match matches.as_slice() {
        [] => Err(Error::NotFound(format!("snapshot {spec}"))),
        [id] => Ok((
            SnapshotInfo {
                id: id.clone(),
                record: load(backend, id)?,
            },
            Vec::new(),
        )),
        _ => Err(Error::invalid(format!(
            "snapshot prefix {spec} is ambiguous ({} matches)",
            matches.len()
        ))),
    }
}
