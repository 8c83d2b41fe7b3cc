//! `tag`: change the tags of a snapshot by replacing its record.
//!
//! A snapshot record is an immutable object named by the hash of its bytes
//! (`catalog`), the root of the mark phase of garbage collection
//! (`003_ea5fccc485a97c5d.txt` §3). A tag change therefore writes a new
//! record (same tree root, time, host, paths and statistics; new tags;
//! `original` naming the replaced record's id) and then deletes the old
//! one, under the writer lock so no backup, `forget` or collection commits
//! in between.
//!
//! Crash safety: the new record is made durable (atomic write) before the
//! old one is deleted. A crash between the two leaves both records: two
//! snapshots of the same tree, the old tags and the new. Nothing is lost
//! (both name data that is still there, and a collection keeps what either
//! names); the leftover is recognisable because the new record's `original`
//! names it, and `cairn forget ID` removes it.
//!
//! Beside a running collection: the new record names the same tree root as
//! the old, so a collection that marked from the old record has marked
//! everything the new one needs, and one that sees the new record as
//! committed during its run keeps what it reaches.

use cairn_core::{Error, Result};

use crate::catalog::{self, SnapshotInfo};
use crate::repo::{Repository, WriteLock};

/// A tag operation: replace the tags (`set`), or add and remove some.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagChange {
    /// The new tag list (`Some(vec![])` clears every tag).
    pub set: Option<Vec<String>>,
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// Why a tag is not acceptable, if it is not.
fn tag_error(t: &str) -> Option<&'static str> {
    if t.trim().is_empty() {
        Some("is empty")
    } else if t.contains(',') {
        Some("contains ','")
    } else if t.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    }
}

impl TagChange {
    /// Checks the operation: at least one of set/add/remove; `set` not
    /// combined with the others (as restic); every tag valid.
    pub fn validate(&self) -> Result<()> {
        if self.set.is_none() && self.add.is_empty() && self.remove.is_empty() {
            return Err(Error::invalid(
                "no tag operation: give --set, --add or --remove",
            ));
        }
        if self.set.is_some() && !(self.add.is_empty() && self.remove.is_empty()) {
            return Err(Error::invalid(
                "--set replaces every tag: it cannot be combined with --add or --remove",
            ));
        }
        let all = self
            .set
            .iter()
            .flatten()
            .chain(&self.add)
            .chain(&self.remove);
        for t in all {
            if let Some(why) = tag_error(t) {
                return Err(Error::invalid(format!("tag {t:?} {why}")));
            }
        }
        Ok(())
    }

    /// The tags after the change, in their original order, new ones
    /// appended, without repeats.
    pub fn apply(&self, tags: &[String]) -> Vec<String> {
        let start = self.set.as_deref().unwrap_or(tags);
        let mut out: Vec<String> = Vec::new();
        for t in start.iter().chain(&self.add) {
            if !out.contains(t) && !self.remove.contains(t) {
                out.push(t.clone());
            }
        }
        out
    }
}

/// The outcome for one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retagged {
    pub old_id: String,
    /// The replacing record; `None` when the tags were already as asked
    /// (nothing written).
    pub new_id: Option<String>,
    pub tags: Vec<String>,
}

/// Replaces `snap`'s record by one with the changed tags. The new record
/// is written first, then the old deleted (see the module doc for a crash
/// in between).
pub fn retag(
    repo: &Repository,
    _lock: &WriteLock,
    snap: &SnapshotInfo,
    change: &TagChange,
) -> Result<Retagged> {
    change.validate()?;
    let tags = change.apply(&snap.record.tags);
    if tags == snap.record.tags {
        return Ok(Retagged {
            old_id: snap.id.clone(),
            new_id: None,
            tags,
        });
    }
    let mut record = snap.record.clone();
    record.tags = tags.clone();
    // `original` differs from the old record's (it names the old id), so
    // the new id never equals the old one even if the tags return to an
    // earlier state.
    record.original = Some(snap.id.clone());
    let backend = &**repo.backend();
    let new_id = catalog::commit(backend, &record)?;
    catalog::remove(backend, &snap.id)?;
    Ok(Retagged {
        old_id: snap.id.clone(),
        new_id: Some(new_id),
        tags,
    })
}
