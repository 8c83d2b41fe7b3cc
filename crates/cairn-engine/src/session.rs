//! Writer sessions (docs/concurrency.md, "A writer's session"): every
//! backup announces itself before it opens the index and ends its session
//! when it commits, so a garbage collection knows which writers may still
//! reference what it is about to delete, without a clock.
//!
//! A session is the object `sessions/<id>` plus the lock `session-<id>`,
//! held by the writer for its whole run. The lock only says when a
//! collection may stop waiting: the kernel (a local `flock`) or the lease's
//! expiry (object storage) releases it when the writer dies or stalls, and
//! a collection that takes it *reaps* the session. Safety rests on one
//! create-if-absent object instead, the commit marker
//! `sessions/<id>.end`:
//!
//! - the writer stages its record (`staged/<id>`), then creates the
//!   marker saying `commit`, then writes `snapshots/<snapshot id>`;
//! - a collection reaping the session creates the marker saying `reaped`.
//!
//! Exactly one of them creates it. If the collection did, the writer (if it
//! ever resumes) finds the marker taken and commits nothing; the marker
//! stays as a tombstone so that it never can. If the writer did, its
//! record is committed even if it dies now: the collection treats the
//! staged record as a root and writes the snapshot record from it. Every
//! staged record present is a root of every collection (`roots`), so a
//! writer paused between its marker and its record never commits a record
//! whose data a collection deleted.

use std::sync::Arc;

// Sessions create their objects with `create_new_or_own`: only this writer
// ever writes these bytes under these keys (a session's id and info, its
// `commit` marker), so finding them means its own create took effect.
use cairn_core::backend::create_new_or_own;
use cairn_core::{Backend, ContainerId, Error, LockGuard, LockMode, Result};
use cairn_format::snapshot::{encode_snapshot, SnapshotRecord};
use serde::{Deserialize, Serialize};

use crate::{catalog, object_names, Repository};

/// What `sessions/<id>` holds: who runs it, and the lowest container id
/// the writer can store into (every container it writes lies at or above
/// `floor`).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SessionInfo {
    pub version: u32,
    pub host: String,
    pub pid: u32,
    pub started_unix_ns: i64,
    pub floor: u64,
}

const COMMIT: &[u8] = b"commit";
const REAPED: &[u8] = b"reaped";

/// A running writer's session; dropping it without [`Session::commit`]
/// ends it (a failed backup).
pub struct Session {
    backend: Arc<dyn Backend>,
    id: String,
    lock: Option<Box<dyn LockGuard>>,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Session {
    /// Announces a writer: takes its lock, then creates its object. Call
    /// before opening the index: a collection that does not list this
    /// session must have changed the index before this writer reads it.
    pub fn begin(repo: &Repository) -> Result<Session> {
        let backend = repo.backend().clone();
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        for _ in 0..8 {
            let id = crate::repo::fresh_id();
            let lock =
                match backend.lock(&object_names::session_lock(&id), LockMode::Exclusive, false) {
                    Ok(l) => l,
                    Err(Error::Locked(_)) => continue,
                    Err(e) => return Err(e),
                };
            let info = SessionInfo {
                version: 1,
                host: host.clone(),
                pid: std::process::id(),
                started_unix_ns: now_ns(),
                floor: repo.log.floor()?.0,
            };
            let bytes = serde_json::to_vec(&info).expect("session info serializes");
            if create_new_or_own(&*backend, &object_names::session(&id), &bytes)? {
                return Ok(Session {
                    backend,
                    id,
                    lock: Some(lock),
                });
            }
        }
        Err(Error::invalid(
            "could not create a writer session: every name tried was taken",
        ))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The commit of a backup: stages `record`, takes the commit marker,
    /// writes the snapshot record and ends the session. Returns the
    /// snapshot's id. If a collection reaped the session first (it found
    /// the writer gone: a process paused past its lock lease), nothing is
    /// committed and the staged record is removed.
    pub fn commit(mut self, record: &SnapshotRecord) -> Result<String> {
        let bytes = encode_snapshot(record);
        let staged = object_names::staged(&self.id);
        let marker = object_names::session_end(&self.id);
        self.backend.write_atomic(&staged, &bytes)?;
        if !create_new_or_own(&*self.backend, &marker, COMMIT)? {
            let _ = self.backend.delete(&staged);
            return Err(Error::invalid(format!(
                "backup not committed: a garbage collection found this writer gone (paused \
                 past its lock lease?) and ended its session {}; data the backup used may be \
                 deleted. Run the backup again",
                self.id
            )));
        }
        // The commit point is passed: from here a collection that finds
        // this writer gone writes the record from the staged copy.
        let id = match catalog::commit_bytes(&*self.backend, &bytes) {
            Ok(id) => id,
            Err(e) => {
                // Undone while this writer still owns the session: the
                // staged copy first, so a marker left alone names nothing.
                if self.backend.delete(&staged).is_ok() {
                    let _ = self.backend.delete(&marker);
                }
                return Err(e);
            }
        };
        // What a failure leaves here (the staged copy, the session, the
        // marker) the next collection tidies (`survey`). The staged copy
        // and the session go at once (one round trip on object storage),
        // the marker after them: a marker saying `commit` left alone is
        // finished, while a session left without its marker would be
        // reaped and leave a tombstone for good. The lock goes beside the
        // marker (one round trip for both): with the session gone no
        // collection looks for it, and were the session left (its delete
        // failed), a collection reaping it finds the marker saying
        // `commit` and writes the same record again.
        let backend = &*self.backend;
        let _ = backend.delete_many(&[staged, object_names::session(&self.id)]);
        let lock = self.lock.take();
        std::thread::scope(|s| {
            if let Some(lock) = lock {
                s.spawn(move || lock.release_removing());
            }
            let _ = backend.delete(&marker);
        });
        Ok(id)
    }

    /// Removes the session's object, then releases its lock (removing
    /// the lock's file): from then on a collection does not wait for it.
    fn end(&mut self) -> Result<()> {
        let Some(lock) = self.lock.take() else {
            return Ok(());
        };
        let r = self
            .backend
            .delete(&object_names::session(&self.id))
            .and_then(|()| self.backend.delete(&object_names::session_end(&self.id)));
        lock.release_removing();
        r
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// What a collection found of the writers' sessions.
#[derive(Debug, Default)]
pub struct Sessions {
    /// Sessions whose writer still runs (its lock is held), with what
    /// they announced (`None`: the object could not be read).
    pub live: Vec<(String, Option<SessionInfo>)>,
    /// Sessions whose writer was gone, reaped (`reap`).
    pub reaped: usize,
}

impl Sessions {
    /// The lowest container id a live writer may store into: containers
    /// at or above it may belong to a backup not yet committed. A live
    /// session that cannot be read bounds nothing it could tell, so it
    /// bounds everything (id 0).
    pub fn floor(&self) -> Option<ContainerId> {
        self.live
            .iter()
            .map(|(_, info)| ContainerId(info.as_ref().map_or(0, |i| i.floor)))
            .min()
    }
}

fn read_info(backend: &dyn Backend, id: &str) -> Option<SessionInfo> {
    let bytes = backend.read(&object_names::session(id)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether the writer of session `id` claimed its commit: the marker
/// says so (an unreadable marker counts as a claim: its staged record, if
/// any, then stays a root and becomes a snapshot, which is safe).
fn claimed(backend: &dyn Backend, id: &str) -> Result<bool> {
    match backend.read(&object_names::session_end(id)) {
        Ok(b) => Ok(b != REAPED),
        Err(Error::NotFound(_)) => Ok(false),
        Err(e) if e.is_corruption() => Ok(true),
        Err(e) => Err(e),
    }
}

/// Finishes the commit of a writer that claimed it and is gone: the
/// snapshot record from its staged copy (the same bytes, so the same id
/// as the writer's own, should it write it too), then the staged copy and
/// the marker go.
fn finish_claimed(backend: &dyn Backend, id: &str) -> Result<()> {
    let staged = object_names::staged(id);
    match backend.read(&staged) {
        Ok(bytes) => {
            catalog::commit_bytes(backend, &bytes)?;
            backend.delete(&staged)?;
        }
        Err(Error::NotFound(_)) => {}
        Err(e) => return Err(e),
    }
    backend.delete(&object_names::session_end(id))
}

/// Ends session `id`, whose writer is gone (the caller holds its lock):
/// the commit marker decides whether its staged record becomes a snapshot
/// or goes.
fn reap(backend: &dyn Backend, id: &str) -> Result<()> {
    if !backend.create_new(&object_names::session_end(id), REAPED)? && claimed(backend, id)? {
        finish_claimed(backend, id)?;
    } else {
        // The writer never commits now (a `reaped` marker stays as a
        // tombstone): its staged record goes.
        backend.delete(&object_names::staged(id))?;
    }
    backend.delete(&object_names::session(id))
}

/// Whether the writer of session `id` still runs: its object exists and
/// its lock is held. A writer found gone is reaped.
pub fn still_running(backend: &dyn Backend, id: &str) -> Result<bool> {
    if !backend.exists(&object_names::session(id))? {
        return Ok(false);
    }
    match backend.lock(&object_names::session_lock(id), LockMode::Exclusive, false) {
        Ok(lock) => {
            reap(backend, id)?;
            lock.release_removing();
            Ok(false)
        }
        Err(Error::Locked(_)) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Lists the sessions, proving each writer alive or gone, and tidies what
/// gone writers left: a session whose lock can be taken is reaped; a
/// commit marker whose session ended is finished (`commit`) or kept as a
/// tombstone (`reaped`). Staged records stay: they are roots until their
/// writer or a reaping ends them.
pub fn survey(backend: &dyn Backend) -> Result<Sessions> {
    let mut out = Sessions::default();
    let keys = backend.list(object_names::SESSIONS)?;
    let mut sessions = std::collections::HashSet::new();
    let mut markers = Vec::new();
    for key in &keys {
        let Some(name) = key.strip_prefix(object_names::SESSIONS) else {
            continue;
        };
        match name.strip_suffix(object_names::SESSION_END_SUFFIX) {
            Some(id) => markers.push(id.to_string()),
            None => {
                sessions.insert(name.to_string());
            }
        }
    }
    for id in &sessions {
        if still_running(backend, id)? {
            out.live.push((id.clone(), read_info(backend, id)));
        } else {
            out.reaped += 1;
        }
    }
    for id in markers.iter().filter(|id| !sessions.contains(*id)) {
        if claimed(backend, id)? {
            finish_claimed(backend, id)?;
        }
    }
    out.live.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The lowest floor any session listed announced, alive or not (`None`:
/// no session): no running writer stores into a container below it. It
/// takes no session's lock and reaps nothing: a compaction calls it
/// (`compact.rs`), and for it a dead writer's floor only keeps a few
/// containers out of the new file's mark for a while. A session object
/// that cannot be read bounds everything (id 0).
pub fn lowest_floor(backend: &dyn Backend) -> Result<Option<ContainerId>> {
    let mut lowest = None;
    for key in backend.list(object_names::SESSIONS)? {
        let Some(name) = key.strip_prefix(object_names::SESSIONS) else {
            continue;
        };
        if name.ends_with(object_names::SESSION_END_SUFFIX) {
            continue;
        }
        let floor = match backend.read(&key) {
            Ok(bytes) => serde_json::from_slice::<SessionInfo>(&bytes).map_or(0, |i| i.floor),
            // Its writer ended between the listing and now.
            Err(Error::NotFound(_)) => continue,
            Err(e) if e.is_corruption() => 0,
            Err(e) => return Err(e),
        };
        let floor = ContainerId(floor);
        lowest = Some(lowest.map_or(floor, |l: ContainerId| l.min(floor)));
    }
    Ok(lowest)
}

/// The staged records present, as snapshot records: roots of a
/// collection, which must keep their data whole (a writer that claimed its
/// commit writes them as snapshots). One that cannot be read stops the
/// collection, as an unreadable snapshot record does.
pub fn staged_records(backend: &dyn Backend) -> Result<Vec<(String, SnapshotRecord)>> {
    let mut out = Vec::new();
    for key in backend.list(object_names::STAGED)? {
        let bytes = match backend.read(&key) {
            Ok(b) => b,
            // Its writer committed or gave up between the listing and now.
            Err(Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        };
        let record = cairn_format::snapshot::decode_snapshot(&bytes)
            .map_err(|e| Error::corrupt(key.clone(), e.to_string()))?;
        out.push((catalog::id_for(backend, &bytes), record));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_backend::MemBackend;

    fn repo() -> Repository {
        Repository::init(Arc::new(MemBackend::new()), Repository::default_config()).unwrap()
    }

    fn record() -> SnapshotRecord {
        catalog::tests::record(1, "h", &["/p"], &[])
    }

    #[test]
    fn a_committed_session_leaves_only_its_snapshot() {
        let repo = repo();
        let s = Session::begin(&repo).unwrap();
        let b = repo.backend();
        assert_eq!(b.list(object_names::SESSIONS).unwrap().len(), 1);
        let id = s.commit(&record()).unwrap();
        assert!(b.exists(&object_names::snapshot(&id)).unwrap());
        assert!(b.list(object_names::SESSIONS).unwrap().is_empty());
        assert!(b.list(object_names::STAGED).unwrap().is_empty());
    }

    #[test]
    fn a_live_session_is_kept_and_bounds_the_floor() {
        let repo = repo();
        let s = Session::begin(&repo).unwrap();
        let found = survey(&**repo.backend()).unwrap();
        assert_eq!(found.reaped, 0);
        assert_eq!(found.live.len(), 1);
        assert_eq!(found.live[0].0, s.id());
        assert_eq!(found.floor(), Some(repo.log.floor().unwrap()));
        drop(s);
        assert!(repo
            .backend()
            .list(object_names::SESSIONS)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_gone_writers_session_is_reaped_and_its_marker_stays_a_tombstone() {
        let repo = repo();
        let b = repo.backend();
        // A writer that died before its commit point: its object and
        // staged record, no lock held, no marker.
        b.write_atomic(&object_names::session("dead"), b"{}")
            .unwrap();
        b.write_atomic(&object_names::staged("dead"), b"x").unwrap();
        let found = survey(&**b).unwrap();
        assert_eq!(found.reaped, 1);
        assert!(found.live.is_empty());
        assert_eq!(found.floor(), None);
        assert_eq!(
            b.list(object_names::SESSIONS).unwrap(),
            vec![object_names::session_end("dead")]
        );
        assert_eq!(b.read(&object_names::session_end("dead")).unwrap(), REAPED);
        assert!(b.list(object_names::STAGED).unwrap().is_empty());
        // The tombstone is kept by later surveys.
        survey(&**b).unwrap();
        assert_eq!(b.list(object_names::SESSIONS).unwrap().len(), 1);
    }

    #[test]
    fn a_gone_writer_that_claimed_its_commit_gets_its_snapshot() {
        let repo = repo();
        let b = repo.backend();
        let bytes = encode_snapshot(&record());
        b.write_atomic(&object_names::session("w"), b"{}").unwrap();
        b.write_atomic(&object_names::staged("w"), &bytes).unwrap();
        assert!(b
            .create_new(&object_names::session_end("w"), COMMIT)
            .unwrap());
        assert_eq!(staged_records(&**b).unwrap().len(), 1, "a root meanwhile");
        survey(&**b).unwrap();
        let id = catalog::id_for(&**b, &bytes);
        assert!(b.exists(&object_names::snapshot(&id)).unwrap());
        assert!(b.list(object_names::SESSIONS).unwrap().is_empty());
        assert!(b.list(object_names::STAGED).unwrap().is_empty());
    }

    /// A create the store applied whose answer was lost is retried and
    /// finds the object there: its own bytes mean it is this writer's.
    #[test]
    fn a_retried_commit_marker_that_landed_is_the_writers_own() {
        let repo = repo();
        let s = Session::begin(&repo).unwrap();
        let b = repo.backend();
        assert!(b
            .create_new(&object_names::session_end(s.id()), COMMIT)
            .unwrap());
        let id = s.commit(&record()).unwrap();
        assert!(b.exists(&object_names::snapshot(&id)).unwrap());
        assert!(b.list(object_names::SESSIONS).unwrap().is_empty());
    }

    #[test]
    fn a_writer_whose_session_was_reaped_commits_nothing() {
        let repo = repo();
        let s = Session::begin(&repo).unwrap();
        let b = repo.backend();
        // A collection found it gone (a lease that lapsed while the writer
        // was paused) and took the marker first.
        assert!(b
            .create_new(&object_names::session_end(s.id()), REAPED)
            .unwrap());
        let err = s.commit(&record()).unwrap_err();
        assert!(err.to_string().contains("not committed"), "{err}");
        assert!(b.list(object_names::SNAPSHOTS).unwrap().is_empty());
        assert!(b.list(object_names::STAGED).unwrap().is_empty());
    }
}
