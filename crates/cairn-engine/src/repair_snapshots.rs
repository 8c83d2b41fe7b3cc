//! `repair snapshots`: rewrites every snapshot that references data no
//! container holds any more, keeping everything that is still whole, so the
//! rest of a damaged snapshot restores again and what was lost is named.
//!
//! ```text
//! repair_snapshots(ids or all, forget, dry_run, read_data):
//!     holds <- fingerprint -> container, from every readable container's
//!              metadata section (the containers are the truth; the index
//!              is derived data)
//!     for each snapshot:
//!         keep(entries):
//!             directory -> its listing readable? keep(children) : lost
//!             file      -> every recipe node readable and every data chunk
//!                          in `holds` (read_data: every chunk read and
//!                          verified)? kept as stored : lost
//!             symlink   -> kept
//!         nothing lost  -> unchanged
//!         else          -> a new snapshot of the kept tree: stored files
//!                          keep their content, directories get new
//!                          listings; same time, host and paths, tags plus
//!                          `repaired`; with forget the old record goes
//! ```
//!
//! A damaged file is dropped whole, not truncated: a file missing its middle
//! is more dangerous to restore than no file. Run `repair index --read-data`
//! first when containers may be damaged: it removes damaged chunks from the
//! containers' metadata, which is what this command trusts without
//! `--read-data`. The writer lock is held throughout.

use serde::Serialize;

use cairn_core::{ContainerId, Error, FpMap, Result};
use cairn_format::dir::{BlobRef, DirEntry, EntryKind};

use crate::backup::{backup, BackupOptions, Kept, RewriteOf, Source};
use crate::catalog::{self, SnapshotInfo};
use crate::read::cache::{map_from_containers, Locator};
use crate::read::{join, Reader};
use crate::repo::{Repository, WriteLock};

/// The tag every rewritten snapshot carries.
pub const REPAIRED_TAG: &str = "repaired";

pub struct RepairSnapshotsOptions {
    /// Snapshot ids or prefixes (or `latest`); empty means every snapshot.
    pub snapshots: Vec<String>,
    /// Remove the original record once its repaired copy is committed
    /// (and the record of a snapshot with nothing left to keep).
    pub forget: bool,
    /// Report what would change; write nothing.
    pub dry_run: bool,
    /// Read and verify every data chunk instead of trusting container metadata.
    pub read_data: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct SnapshotRepair {
    pub id: String,
    /// The repaired snapshot (absent in a dry run or when nothing is left).
    pub new_id: Option<String>,
    /// Paths dropped from the snapshot, each with the reason.
    pub lost: Vec<String>,
    /// The snapshot has nothing left to keep (its root listing is lost).
    pub nothing_left: bool,
    /// The original record was removed.
    pub forgotten: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct RepairSnapshotsReport {
    pub checked: u64,
    pub unchanged: u64,
    pub repaired: Vec<SnapshotRepair>,
    /// Snapshot records that could not be read at all, with the reason.
    pub unreadable_records: Vec<(String, String)>,
    pub dry_run: bool,
}

/// Rewrites the damaged snapshots; the caller holds the writer lock.
pub fn repair_snapshots(
    repo: &Repository,
    lock: &WriteLock,
    opts: &RepairSnapshotsOptions,
) -> Result<RepairSnapshotsReport> {
    let backend = &**repo.backend();
    let (mut all, unreadable) = catalog::list(backend)?;
    if !opts.snapshots.is_empty() {
        let mut chosen = Vec::new();
        for spec in &opts.snapshots {
            let info = catalog::resolve(backend, spec)?;
            if !chosen.iter().any(|c: &SnapshotInfo| c.id == info.id) {
                chosen.push(info);
            }
        }
        all = chosen;
    }
    let holds = map_from_containers(&*repo.log)?;
    let mut report = RepairSnapshotsReport {
        unreadable_records: unreadable
            .iter()
            .map(|(id, e)| (id.clone(), e.to_string()))
            .collect(),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    for snap in all {
        report.checked += 1;
        let mut reader =
            Reader::with_locator(repo, Locator::Memory(holds.clone()), Default::default());
        let mut scan = Scan {
            reader: &mut reader,
            holds: &holds,
            read_data: opts.read_data,
            lost: Vec::new(),
        };
        let kept = match scan.reader.root_entries(&snap.record) {
            Ok(entries) => Some(scan.keep("", entries)),
            Err(e) => {
                scan.lost.push(format!("/ (root listing: {e})"));
                None
            }
        };
        if scan.lost.is_empty() {
            report.unchanged += 1;
            continue;
        }
        let mut fix = SnapshotRepair {
            id: snap.id.clone(),
            lost: std::mem::take(&mut scan.lost),
            ..Default::default()
        };
        let kept = kept.filter(|k| !k.is_empty());
        fix.nothing_left = kept.is_none();
        if !opts.dry_run {
            if let Some(kept) = kept {
                let done = report
                    .repaired
                    .iter()
                    .filter(|r| r.new_id.is_some())
                    .count();
                fix.new_id = Some(rewrite(repo, lock, &snap, kept).map_err(|e| match e {
                    // The rewrites committed before this one stay.
                    Error::Interrupted(what) => Error::Interrupted(format!(
                        "{done} repaired snapshot(s) committed before it; for snapshot {}: {what}",
                        snap.id
                    )),
                    e => e,
                })?);
            }
            if opts.forget {
                catalog::remove(backend, &snap.id)?;
                fix.forgotten = true;
            }
        }
        report.repaired.push(fix);
    }
    Ok(report)
}

/// Commits a snapshot of `kept` in place of `snap`.
fn rewrite(
    repo: &Repository,
    lock: &WriteLock,
    snap: &SnapshotInfo,
    kept: Vec<Kept>,
) -> Result<String> {
    let mut tags = snap.record.tags.clone();
    if !tags.iter().any(|t| t == REPAIRED_TAG) {
        tags.push(REPAIRED_TAG.to_string());
    }
    let outcome = backup(
        repo,
        lock,
        BackupOptions {
            sources: kept.into_iter().map(Source::Kept).collect(),
            tags,
            host: Some(snap.record.host.clone()),
            rewrite_scheme: Some(crate::backup::rewrite::RewriteConfig::None),
            rewrite_of: Some(RewriteOf {
                time_unix_ns: snap.record.time_unix_ns,
                paths: snap.record.paths.clone(),
            }),
            ..Default::default()
        },
    )?;
    Ok(outcome.snapshot_id)
}

struct Scan<'a> {
    reader: &'a mut Reader,
    holds: &'a FpMap<ContainerId>,
    read_data: bool,
    lost: Vec<String>,
}

impl Scan<'_> {
    /// The entries of one directory that are still whole; the others are
    /// recorded in `lost`.
    fn keep(&mut self, prefix: &str, entries: Vec<DirEntry>) -> Vec<Kept> {
        let mut kept = Vec::with_capacity(entries.len());
        for mut e in entries {
            let path = join(prefix, &e.name);
            match e.kind {
                EntryKind::Dir => match self.reader.take_children(&mut e) {
                    Ok(children) => {
                        let children = self.keep(&path, children);
                        kept.push(Kept::Dir { entry: e, children });
                    }
                    Err(err) => self.lost.push(format!("{path}/ (directory: {err})")),
                },
                EntryKind::File => match e.content.as_ref().map(|b| self.whole(b)) {
                    Some(Err(err)) => self.lost.push(format!("{path} ({err})")),
                    _ => kept.push(Kept::Leaf(e)),
                },
                _ => kept.push(Kept::Leaf(e)),
            }
        }
        kept
    }

    /// Ok if every chunk of the blob can be restored.
    fn whole(&mut self, blob: &BlobRef) -> Result<()> {
        if self.read_data {
            return self.reader.for_each_chunk(blob, &mut |_| Ok(()));
        }
        let holds = self.holds;
        self.reader.for_each_leaf(blob, &mut |fp| {
            if holds.contains_key(fp) {
                Ok(())
            } else {
                Err(Error::NotFound(format!(
                    "chunk {fp}: no container holds it"
                )))
            }
        })
    }
}
