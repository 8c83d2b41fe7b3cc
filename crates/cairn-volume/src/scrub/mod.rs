//! The scrub job (docs/volume.md, "Scrub"): reads every chunk of the
//! volume's store and verifies it, keeps a second copy of the chunks the
//! stream maps reference more than a threshold number of times, repairs
//! damaged chunks from a sound copy, and names the files (and byte ranges)
//! that read from what cannot be repaired.
//!
//! Paper 004 lists data scrubbing among the volume's background jobs.
//! Keeping chunks referenced more than 100 times twice follows Windows
//! Server Data Deduplication's documented behaviour (Microsoft, "Data
//! Deduplication overview" and "Advanced Data Deduplication settings":
//! the scrubbing job; popular chunks, "hotspots", referenced over 100
//! times are duplicated); the threshold is [`ScrubOptions::copies_above`].
//!
//! ```text
//! scrub:
//!   1 count, per chunk, the references of every stream map   (refs.rs)
//!   2 verify every copy in DIR/copies/; stale ones marked     (copies.rs)
//!   3 read every container of the store, verify every chunk;
//!     sound chunks referenced > N times without a copy: copied
//!   4 per container with damaged chunks (writer lock held):
//!       a fresh container = its sound chunks + each damaged chunk's
//!       sound copy (from DIR/copies/, or another container of the store);
//!       durable, then indexed; chunks with no sound copy forgotten
//!       by the index; then the damaged container deleted
//!     referenced chunks in no readable container: from their copy too
//!   5 the files whose live bytes need a lost chunk, with the ranges
//!   6 stale copy containers deleted (their wanted chunks copied anew)
//! ```
//!
//! Crash safety: every container (repair or copy) is written whole and
//! durable before anything names it, and nothing is deleted before what
//! replaces it is durable and indexed. A crash after a repaired container
//! is indexed but before the damaged one is deleted leaves both (the index
//! names the new one; a reader never sees the damaged chunk): the next
//! scrub finds the damaged container again and repeats its repair; the
//! duplicates are garbage for the store's collection.
//!
//! Pacing: with a [`Pacer`] (`ScrubOptions::pacer`; the mount daemon gives
//! it one) the scrub paces before each container it verifies (copies in 2,
//! the store in 3) and before each repair (4). A cancel stops it there:
//! what it verified counts in the report and the copies it queued are
//! written (6); the repairs it did stay, each whole (a repair is one
//! container written, indexed, then the damaged one deleted, as above);
//! it repairs nothing after the cancel, looks for no missing chunk when it
//! did not verify the whole store, and deletes no stale copy container
//! (its chunks may still be the only sound copy a later repair needs).
//! The report's `cancelled` says why and where; the next scrub starts
//! over. Steps 1 and 5 (walks of the recipes) pace before each stream
//! map: a cancel in 1 stops the scrub with nothing done; one in 5 stops
//! only the pacing (the report names every affected file).

mod copies;
mod refs;

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use cairn_core::{ContainerId, Error, Fingerprint, FpSet, Result};
use cairn_engine::chunk_repair::{self, StoredChunk};

use crate::optimize::FailMode;
use crate::scheduler::{Cancelled, Pacer};
use crate::volume::Volume;
use copies::Copies;
use refs::{References, Seen};

pub use crate::copy_fallback::COPIES_DIR;
pub use refs::AffectedFile;

/// The scrub's pacing, called before each unit (a container verified, a
/// repair, a stream map walked): `Err` when the scheduler cancels.
type Pace<'a> = &'a dyn Fn() -> std::result::Result<(), Cancelled>;

/// Chunks referenced more than this many times get a second copy by
/// default: Windows Server Data Deduplication's documented hotspot
/// threshold (100).
pub const DEFAULT_COPIES_ABOVE: u64 = 100;

/// How a scrub runs.
#[derive(Clone, Debug)]
pub struct ScrubOptions {
    /// Chunks the stream maps reference more than this many times are kept
    /// twice.
    pub copies_above: u64,
    /// A test hook: stop after the first repaired container is written and
    /// indexed, before the damaged one is deleted.
    pub fail_after_repair_write: Option<FailMode>,
    /// The job's pacing handle from the scheduler; `None`: unpaced.
    pub pacer: Option<Arc<Pacer>>,
}

impl Default for ScrubOptions {
    fn default() -> Self {
        ScrubOptions {
            copies_above: DEFAULT_COPIES_ABOVE,
            fail_after_repair_write: None,
            pacer: None,
        }
    }
}

/// What a scrub found and did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScrubReport {
    /// Containers of the store read whole.
    pub containers_verified: u64,
    /// Chunks of the store decompressed and rehashed.
    pub chunks_verified: u64,
    /// Bytes of the store read.
    pub bytes_verified: u64,
    /// Distinct chunks the stream maps reference.
    pub referenced_chunks: u64,
    /// Chunks found damaged in the store, and chunks the stream maps
    /// reference that no readable container holds.
    pub damaged_chunks: u64,
    /// Of those, repaired from a sound copy.
    pub repaired_chunks: u64,
    /// Of those, with no sound copy: forgotten by the index (a later
    /// optimization that meets the same bytes stores them again).
    pub lost_chunks: u64,
    /// Damaged containers replaced: `(old, new)` (`None`: nothing in it was
    /// sound or repairable).
    pub replaced_containers: Vec<(String, Option<String>)>,
    /// Containers whose metadata could not be read, with the reason (their
    /// chunks the stream maps need were restored from copies where they
    /// could be; `cairn repair index` on the store forgets the rest).
    pub unreadable_containers: Vec<(String, String)>,
    /// The threshold this run used.
    pub copies_above: u64,
    /// Chunks with a second copy after the run.
    pub copies_kept: u64,
    /// Second copies written this run.
    pub copies_made: u64,
    /// Copies read and verified.
    pub copies_verified: u64,
    /// Copies (or copy containers) found damaged: dropped, and made again
    /// from the primary where it is sound.
    pub copies_damaged: u64,
    /// Copy containers deleted (damaged, or holding chunks no longer
    /// popular).
    pub copy_containers_dropped: u64,
    /// Files that read from a lost chunk, with the ranges.
    pub affected_files: Vec<AffectedFile>,
    /// Why the scheduler stopped the scrub early, and where (the counts
    /// above cover what it reached); `None`: it ran to the end.
    #[serde(default)]
    pub cancelled: Option<String>,
    pub seconds: f64,
}

impl ScrubReport {
    /// Whether the store is whole as far as the scrub looked: nothing
    /// lost, every container readable, every damaged chunk found repaired.
    pub fn is_clean(&self) -> bool {
        self.lost_chunks == 0
            && self.unreadable_containers.is_empty()
            && self.affected_files.is_empty()
            && self.unrepaired_chunks() == 0
    }

    /// Damaged chunks found but neither repaired nor lost: left for the
    /// next scrub by a cancel before their repair.
    pub fn unrepaired_chunks(&self) -> u64 {
        self.damaged_chunks
            .saturating_sub(self.repaired_chunks + self.lost_chunks)
    }
}

/// A container of the store with damaged chunks.
struct Damaged {
    id: ContainerId,
    fps: Vec<Fingerprint>,
}

/// Scrubs the volume. The caller has it open: offline, or the mount
/// daemon, whose job runner runs no other job meanwhile.
pub fn scrub(vol: &Volume, opts: &ScrubOptions) -> Result<ScrubReport> {
    let started = Instant::now();
    let repo = vol.repo();
    let mut report = ScrubReport {
        copies_above: opts.copies_above,
        ..Default::default()
    };
    let pace = || opts.pacer.as_ref().map_or(Ok(()), |p| p.pace());
    let stopped = |c: Cancelled, at: &str| format!("{c}; stopped {at}");
    // 1, 2.
    let mut refs = match refs::count(vol, &pace)? {
        Ok(refs) => refs,
        Err(c) => {
            // Nothing verified, copied or repaired yet.
            report.cancelled = Some(stopped(c, "while counting the stream maps' references"));
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
    };
    report.referenced_chunks = refs.chunks.len() as u64;
    let (mut copies, in_copies) = Copies::open(vol, &refs, opts.copies_above, &mut report, &pace)?;
    let mut cancelled = in_copies.map(|c| stopped(c, "while verifying the second copies"));
    // 3.
    let mut damaged = Vec::new();
    if cancelled.is_none() {
        let c = verify_store(
            vol,
            opts,
            &mut refs,
            &mut copies,
            &mut report,
            &mut damaged,
            &pace,
        )?;
        cancelled = c.map(|c| stopped(c, "while verifying the store"));
    }
    report.damaged_chunks = damaged.iter().map(|d| d.fps.len() as u64).sum();
    // 4.
    let mut lost = FpSet::default();
    if cancelled.is_none() {
        // Only a scan of the whole store knows which chunks it lacks.
        let missing: Vec<Fingerprint> = refs
            .chunks
            .iter()
            .filter(|(_, r)| r.seen == Seen::Not)
            .map(|(fp, _)| *fp)
            .collect();
        report.damaged_chunks += missing.len() as u64;
        let mut stop = || match opts.fail_after_repair_write {
            None => Ok(()),
            Some(FailMode::Error) => Err(Error::Interrupted(
                "test stop after a repaired container was written and indexed".into(),
            )),
            Some(FailMode::Abort) => std::process::abort(),
        };
        // A repair deletes a container the mount's readers may name: reads
        // that fail meanwhile wait for the readers' refresh and retry, as
        // during a collection. Each repair marks and refreshes on its own
        // (the refresh made when the repair ends, even on error), so a
        // read never waits across a pause.
        for d in &damaged {
            if let Err(c) = pace() {
                cancelled = Some(stopped(c, "before repairing a damaged container"));
                break;
            }
            let _readers = crate::gc::Refresh::start(vol)?;
            let lock = repo.lock_writer(true)?;
            let new = repair_container(
                vol,
                opts.copies_above,
                &lock,
                d,
                &refs,
                &mut copies,
                &mut lost,
                &mut stop,
            )
            .map_err(|e| with_context(e, d.id))?;
            report
                .replaced_containers
                .push((d.id.to_string(), new.map(|n| n.to_string())));
            report.repaired_chunks += d.fps.iter().filter(|fp| !lost.contains(fp)).count() as u64;
        }
        if cancelled.is_none() && !missing.is_empty() {
            match pace() {
                Err(c) => {
                    cancelled = Some(stopped(c, "before restoring missing chunks"));
                }
                Ok(()) => {
                    let _readers = crate::gc::Refresh::start(vol)?;
                    let lock = repo.lock_writer(true)?;
                    let mut restored = Vec::new();
                    for fp in &missing {
                        match copies.get(vol, fp)? {
                            Some(c) => restored.push(c),
                            None => {
                                lost.insert(*fp);
                            }
                        }
                    }
                    report.repaired_chunks += restored.len() as u64;
                    if !restored.is_empty() {
                        chunk_repair::rewrite_chunks(repo, &lock, &restored, &[], &[], &mut stop)?;
                    }
                }
            }
        }
    }
    report.cancelled = cancelled;
    report.lost_chunks = lost.len() as u64;
    // 5.
    if !lost.is_empty() || !refs.unwalkable.is_empty() {
        let (files, c) = refs::affected(vol, &lost, &pace)?;
        report.affected_files = files;
        if let (None, Some(c)) = (&report.cancelled, c) {
            report.cancelled = Some(format!(
                "{c}; cancelled while naming the affected files, which were named unpaced"
            ));
        }
    }
    // 6. After a cancel the copies queued are still written (they are of
    // chunks verified sound), but no stale container is dropped.
    copies.flush(vol)?;
    if report.cancelled.is_none() {
        report.copy_containers_dropped = copies.drop_stale()?;
    }
    report.copies_kept = copies.kept_count();
    report.copies_made = copies.made();
    if !report.replaced_containers.is_empty()
        || report.repaired_chunks > 0
        || report.copies_made > 0
    {
        // Readers of the content state learn the new containers and copies.
        vol.content()?.refresh(repo)?;
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Step 3: every container of the store, every chunk verified; copies of
/// popular sound chunks queued; the containers with damaged chunks into
/// `damaged`. Paced before each container: a cancel stops it there.
fn verify_store(
    vol: &Volume,
    opts: &ScrubOptions,
    refs: &mut References,
    copies: &mut Copies,
    report: &mut ScrubReport,
    damaged: &mut Vec<Damaged>,
    pace: Pace<'_>,
) -> Result<Option<Cancelled>> {
    let repo = vol.repo();
    for id in repo.log.ids()? {
        if let Err(c) = pace() {
            return Ok(Some(c));
        }
        let scanned = match chunk_repair::scan_container(repo, &*repo.log, id) {
            Ok(s) => s,
            Err(e) if e.is_corruption() || e.is_not_found() => {
                report
                    .unreadable_containers
                    .push((id.to_string(), e.to_string()));
                continue;
            }
            Err(e) => return Err(e),
        };
        report.containers_verified += 1;
        report.bytes_verified += scanned.bytes;
        let mut bad = Vec::new();
        for (chunk, damage) in scanned.chunks {
            report.chunks_verified += 1;
            let r = refs.chunks.get_mut(&chunk.fp);
            if damage.is_some() {
                if let Some(r) = r {
                    if r.seen == Seen::Not {
                        r.seen = Seen::Damaged;
                    }
                }
                bad.push(chunk.fp);
                continue;
            }
            let Some(r) = r else { continue };
            r.seen = Seen::Sound(id);
            if u64::from(r.count) > opts.copies_above && !copies.has_kept(&chunk.fp) {
                copies.add(vol, chunk)?;
            }
        }
        if !bad.is_empty() {
            damaged.push(Damaged { id, fps: bad });
        }
    }
    Ok(None)
}

/// Step 4 for one container: its sound chunks and the sound copies of its
/// damaged ones into a fresh container, indexed; the lost ones forgotten;
/// then the container deleted. Returns the fresh container.
#[allow(clippy::too_many_arguments)]
fn repair_container(
    vol: &Volume,
    copies_above: u64,
    lock: &cairn_engine::WriteLock,
    d: &Damaged,
    refs: &References,
    copies: &mut Copies,
    lost: &mut FpSet,
    stop: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<ContainerId>> {
    let repo = vol.repo();
    let scanned = chunk_repair::scan_container(repo, &*repo.log, d.id)?;
    let mut chunks = Vec::new();
    let mut forget = Vec::new();
    for (chunk, damage) in scanned.chunks {
        if damage.is_none() {
            chunks.push(chunk);
            continue;
        }
        let referenced = refs.chunks.get(&chunk.fp);
        match sound_copy(vol, &chunk.fp, referenced.map(|r| r.seen), d.id, copies)? {
            Some(good) => {
                if referenced.is_some_and(|r| u64::from(r.count) > copies_above)
                    && !copies.has_kept(&good.fp)
                {
                    copies.add(vol, good.clone())?;
                }
                chunks.push(good);
            }
            None => {
                forget.push(chunk.fp);
                lost.insert(chunk.fp);
            }
        }
    }
    chunk_repair::rewrite_chunks(repo, lock, &chunks, &forget, &[d.id], stop)
}

/// A sound copy of damaged chunk `fp` of container `at`: from the copies,
/// else from another container of the store the scan found it sound in.
fn sound_copy(
    vol: &Volume,
    fp: &Fingerprint,
    seen: Option<Seen>,
    at: ContainerId,
    copies: &Copies,
) -> Result<Option<StoredChunk>> {
    if let Some(c) = copies.get(vol, fp)? {
        return Ok(Some(c));
    }
    let Some(Seen::Sound(other)) = seen else {
        return Ok(None);
    };
    if other == at {
        return Ok(None);
    }
    let repo = vol.repo();
    Ok(chunk_repair::scan_container(repo, &*repo.log, other)
        .ok()
        .and_then(|s| {
            s.chunks
                .into_iter()
                .find(|(c, damage)| c.fp == *fp && damage.is_none())
                .map(|(c, _)| c)
        }))
}

fn with_context(e: Error, id: ContainerId) -> Error {
    match e {
        Error::Interrupted(_) => e,
        Error::Corrupt { what, detail } => Error::Corrupt {
            what: format!("{what} (repairing container {id})"),
            detail,
        },
        e => e,
    }
}
