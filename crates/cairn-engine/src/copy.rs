//! `cairn copy` (issue 14, `docs/copy.md`): snapshots of one repository
//! copied into another that shares its *identity* (fingerprint function,
//! so the stored trees name their chunks the same way in both), moving only
//! the chunks the destination lacks, as they are stored (compressed), and
//! the snapshot records byte for byte.
//!
//! Per snapshot, oldest first, under the source's reader lock and the
//! destination's writer lock:
//!
//! 1. skipped if the destination holds a record of the same name (names
//!    are a hash of the record, keyed by the shared key when encrypted);
//! 2. its tree is walked in the source (`reachability`; sound subtrees once
//!    per run), every chunk it reaches taken once, in walk order;
//! 3. each chunk is looked up in the destination through the backup's own
//!    dedup path (DDFS §4.4 eager lookup: locality cache, Summary Vector,
//!    index, every hit confirmed), so what the destination holds, including
//!    the orphan containers of an interrupted copy (replayed at open), is
//!    not moved again;
//! 4. the missing ones are grouped by source container and read whole or
//!    by ranges as a restore reads (`read/fetch.rs`), verified against
//!    their fingerprints, and packed with their kind, level and codec into
//!    destination containers (tree nodes and listings laid last as the
//!    container writer does), uploaded in parallel;
//! 5. commit as a backup commits: containers durable, the index entries,
//!    then the record (the commit point).
//!
//! Progress (`crate::Progress`, polled by the CLI's display): the snapshots
//! to copy are the items (`files_total`, `files_done` as each commits), the
//! stored bytes moved (or, in a dry run, that would move) are
//! `bytes_done`, and `current` names the snapshot and the chunks looked up.
//!
//! A failure stops the copy: the snapshots committed before it stay, the
//! containers written for the failed one are orphans that the next run's
//! open replays (their chunks are then found, not copied again).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Fingerprint, FpSet, Result};
use cairn_format::container::ContainerWriter;
use cairn_format::dir::BlobRef;
use serde::Serialize;

use crate::blocking_map::blocking_map;
use crate::catalog::{self, SnapshotInfo};
use crate::codec::ChunkCodec;
use crate::dedup::eager::Eager;
use crate::dedup::{Decision, Dedup, Location, LookupStrategy};
use crate::index::overlay::IndexUpdate;
use crate::reachability::{At, Reachability, Visitor};
use crate::read::cache::{ChunkStore, MetaChunks, RestoreCache};
use crate::read::fetch::{Fetch, Known};
use crate::Progress;
use crate::{index, ReadLock, Repository, WriteLock};

/// Fingerprints a walk gathers before they are looked up and moved.
const BATCH: usize = 8192;
/// Fingerprinted to compare two repositories' fingerprint functions.
const PROBE: &[u8] = b"cairn copy: identity probe";

/// How two repositories relate, as far as copying goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Same fingerprints, chunker and tree shape: copied data deduplicates
    /// with later backups into the destination.
    Same,
    /// Same fingerprints, other chunking: a copy is sound, but later
    /// backups into the destination cut files differently and share little
    /// with what was copied. The text says what differs.
    SameFingerprints(String),
}

/// Whether chunks of `src` can move into `dest` as stored: their
/// fingerprint functions must agree (a tree names its children by
/// fingerprint, and every read verifies a chunk against it).
pub fn identity(src: &Repository, dest: &Repository) -> Result<Identity> {
    let (a, b) = (ChunkCodec::for_repo(src), ChunkCodec::for_repo(dest));
    if a.fp_width() != b.fp_width() || a.fingerprint(PROBE) != b.fingerprint(PROBE) {
        let why = match (src.keys().is_some(), dest.keys().is_some()) {
            (true, true) => "the two encrypted repositories have different master keys",
            (false, false) => "the repositories use different fingerprint algorithms or widths",
            _ => "one repository is encrypted and the other is not",
        };
        return Err(Error::invalid(format!(
            "cannot copy: {why}, so their chunks are named differently; create the \
             destination with `cairn init --copy-identity-from SOURCE`"
        )));
    }
    let seed = |r: &Repository| r.keys().map(|k| *k.chunker_seed());
    let mut differs = Vec::new();
    if src.config.chunker != dest.config.chunker || seed(src) != seed(dest) {
        differs.push("chunker");
    }
    if src.config.tree != dest.config.tree {
        differs.push("tree fan-out");
    }
    Ok(if differs.is_empty() {
        Identity::Same
    } else {
        Identity::SameFingerprints(differs.join(" and "))
    })
}

#[derive(Clone, Copy, Debug, Default)]
pub struct CopyOptions {
    /// Walk and look up, report what would move, write nothing.
    pub dry_run: bool,
}

/// One selected snapshot's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct CopiedSnapshot {
    pub id: String,
    pub time_unix_ns: i64,
    pub host: String,
    pub paths: Vec<String>,
    /// The destination held it already.
    pub skipped: bool,
    /// Chunks (of every kind) moved for it, and their stored bytes.
    pub chunks: u64,
    pub stored_bytes: u64,
}

/// What a copy did (or, dry, would do).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CopyReport {
    pub snapshots: Vec<CopiedSnapshot>,
    /// Distinct chunks the walks reached, and how many the destination held.
    pub chunks_reached: u64,
    pub chunks_present: u64,
    pub chunks_copied: u64,
    pub stored_bytes_copied: u64,
    pub containers_read: u64,
    pub containers_written: u64,
    pub dry_run: bool,
    /// What the destination's index open repaired or found (one line each).
    pub notices: Vec<String>,
}

/// Copies `snapshots` of `src` into `dest` (oldest first), as the module
/// doc says. The locks prove the caller holds them. `progress` is told of
/// each snapshot before it is copied.
pub fn copy(
    src: &Repository,
    _read: &ReadLock,
    dest: &Repository,
    _write: &WriteLock,
    snapshots: &[SnapshotInfo],
    opts: CopyOptions,
    watch: CopyWatch,
) -> Result<CopyReport> {
    let CopyWatch {
        on_snapshot,
        progress,
    } = watch;
    identity(src, dest)?;
    let mut order: Vec<&SnapshotInfo> = snapshots.iter().collect();
    order.sort_by(|a, b| (a.record.time_unix_ns, &a.id).cmp(&(b.record.time_unix_ns, &b.id)));
    let held: std::collections::HashSet<String> = catalog::list(&**dest.backend())?
        .0
        .into_iter()
        .map(|s| s.id)
        .collect();
    let mut run = Run::open(src, dest, opts, progress)?;
    // Byte for byte: a record keeps its name (same naming key). Read
    // first, so the totals (the snapshots to move) are known.
    let records = order
        .into_iter()
        .map(|info| {
            let bytes = catalog::load_bytes(&**src.backend(), &info.id)?;
            let name = catalog::id_for(&**dest.backend(), &bytes);
            Ok((info, bytes, name))
        })
        .collect::<Result<Vec<_>>>()?;
    let to_copy = records.iter().filter(|(_, _, n)| !held.contains(n)).count();
    progress.set_totals(to_copy as u64, 0);
    for (info, bytes, name) in records {
        let mut done = CopiedSnapshot {
            id: info.id.clone(),
            time_unix_ns: info.record.time_unix_ns,
            host: info.record.host.clone(),
            paths: info.record.paths.clone(),
            skipped: held.contains(&name),
            chunks: 0,
            stored_bytes: 0,
        };
        if !done.skipped {
            on_snapshot(info);
            progress.set_current(format_args!("snapshot {}", catalog::short_id(&info.id)));
            let before = (run.report.chunks_copied, run.report.stored_bytes_copied);
            run.snapshot(info, &bytes)?;
            done.chunks = run.report.chunks_copied - before.0;
            done.stored_bytes = run.report.stored_bytes_copied - before.1;
            progress.files_done.fetch_add(1, Ordering::Relaxed);
        }
        run.report.snapshots.push(done);
    }
    Ok(run.report)
}

/// What a copy tells its caller as it goes.
pub struct CopyWatch<'p> {
    /// Called as each snapshot to move starts (not for those skipped).
    pub on_snapshot: &'p dyn Fn(&SnapshotInfo),
    /// Counters a display polls (module doc).
    pub progress: &'p Progress,
}

/// One copy run's state: the source's reader, the destination's dedup
/// state and open container.
struct Run<'a> {
    src: &'a Repository,
    dest: &'a Repository,
    opts: CopyOptions,
    store: ChunkStore,
    meta: MetaChunks,
    walker: Reachability,
    dedup: Dedup,
    lookup: Eager,
    /// Every chunk the walks reached so far (each handled once per run).
    seen: FpSet,
    /// Entries of the destination's index already committed by this run.
    committed: FpSet,
    open: Option<ContainerWriter>,
    /// Closed containers waiting to be uploaded.
    full: Vec<ContainerWriter>,
    report: CopyReport,
    progress: &'a Progress,
}

impl<'a> Run<'a> {
    fn open(
        src: &'a Repository,
        dest: &'a Repository,
        opts: CopyOptions,
        progress: &'a Progress,
    ) -> Result<Self> {
        let store = ChunkStore::new(
            src.log.clone(),
            crate::read::open_locator(src)?,
            ChunkCodec::for_repo(src),
        );
        let warnings = crate::warnings::Warnings::default();
        let opened = index::open_for_write(
            dest.backend().clone(),
            dest.counters.clone(),
            &*dest.log,
            &dest.config.index,
            &warnings,
        )?;
        let dedup = Dedup::new(
            opened,
            dest.log.clone(),
            dest.counters.clone(),
            dest.config.index.cache_containers as usize,
            dest.config.index.locality_cache,
        );
        Ok(Run {
            src,
            dest,
            opts,
            store,
            meta: MetaChunks::new(64),
            walker: Reachability::new(src.config.fp_width()),
            dedup,
            lookup: Eager::default(),
            seen: FpSet::default(),
            committed: FpSet::default(),
            open: None,
            full: Vec::new(),
            report: CopyReport {
                dry_run: opts.dry_run,
                notices: warnings.take(),
                ..Default::default()
            },
            progress,
        })
    }

    /// An interruption stops here (`interrupt.rs`), between batches and
    /// before a snapshot's commit, saying which snapshots are committed.
    fn safe_point(&self) -> Result<()> {
        crate::interrupt::check(|| {
            let copied = self.report.snapshots.iter().filter(|s| !s.skipped).count();
            format!(
                "{copied} snapshot(s) copied and committed before it; the snapshot being \
                 copied was not written (the containers already written are reused by the \
                 next copy)"
            )
        })
    }

    /// Steps 2-5 for one snapshot.
    fn snapshot(&mut self, info: &SnapshotInfo, record: &[u8]) -> Result<()> {
        let root = BlobRef::try_from(&info.record.root)?;
        let mut gather = Gather {
            run: self,
            batch: Vec::with_capacity(BATCH),
            error: None,
        };
        let mut walker = std::mem::replace(&mut gather.run.walker, Reachability::new(0));
        walker.walk_snapshot(&info.id, &root, &mut gather);
        gather.run.walker = walker;
        if gather.error.is_none() {
            let batch = std::mem::take(&mut gather.batch);
            if let Err(e) = gather.run.transfer(&batch) {
                gather.error = Some(e);
            }
        }
        if let Some(e) = gather.error {
            return Err(e);
        }
        if self.opts.dry_run {
            return Ok(());
        }
        self.close_open();
        self.upload(0)?;
        self.safe_point()?;
        let covered = self.dest.log.next_id();
        let puts: Vec<_> = self
            .dedup
            .memory_entries()
            .into_iter()
            .filter(|e| !self.committed.contains(&e.fp))
            .collect();
        self.committed.extend(puts.iter().map(|e| e.fp));
        self.dedup.commit_index(
            &**self.dest.backend(),
            IndexUpdate::puts(puts),
            covered,
            self.dest.config.fp_width(),
            self.dest.config.index.page_size as usize,
        )?;
        catalog::commit_bytes(&**self.dest.backend(), record)?;
        Ok(())
    }

    /// Steps 3-4 for a batch of fingerprints reached by the walk.
    fn transfer(&mut self, fps: &[Fingerprint]) -> Result<()> {
        self.safe_point()?;
        if fps.is_empty() {
            return Ok(());
        }
        self.report.chunks_reached += fps.len() as u64;
        let at = self
            .progress
            .current
            .lock()
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        self.progress.set_current(format_args!(
            "{at}: {} chunks looked up",
            self.report.chunks_reached
        ));
        let mut decisions = Vec::with_capacity(fps.len());
        self.lookup.submit(&self.dedup, fps, &mut decisions)?;
        let mut missing: BTreeMap<ContainerId, Vec<Fingerprint>> = BTreeMap::new();
        for (fp, d) in fps.iter().zip(&decisions) {
            match d {
                Decision::Decided(Location::New) => {
                    missing.entry(self.store.locate(fp)?).or_default().push(*fp);
                }
                Decision::Decided(_) => self.report.chunks_present += 1,
                Decision::Pending(_) => unreachable!("eager lookup decides at once"),
            }
        }
        let groups: Vec<(ContainerId, Vec<Fingerprint>)> = missing.into_iter().collect();
        let threads = self.src.log.read_parallelism().max(1);
        // A window of containers in memory at once (fetched in parallel).
        for window in groups.chunks(threads * 2) {
            let fetches = self.plan(window, threads)?;
            if self.opts.dry_run {
                for f in &fetches {
                    for &i in &f.wanted {
                        let stored = f.known.meta.descriptors[i].stored_len as u64;
                        self.report.chunks_copied += 1;
                        self.report.stored_bytes_copied += stored;
                        self.progress
                            .bytes_done
                            .fetch_add(stored, Ordering::Relaxed);
                    }
                }
                continue;
            }
            let fetched = blocking_map(&fetches, threads, |f| f.read_stored(&self.store));
            self.report.containers_read += fetches.len() as u64;
            for (f, chunks) in fetches.iter().zip(fetched) {
                for (&i, stored) in f.wanted.iter().zip(chunks) {
                    let stored = stored?;
                    self.pack(&f.known, i, &stored)?;
                }
            }
            self.upload(self.dest.log.write_parallelism().max(1))?;
        }
        Ok(())
    }

    /// The reads of one window: each container's metadata section (read in
    /// parallel), the wanted chunks' positions in it. A chunk the index
    /// places in a container that lacks it is found through the
    /// containers' own metadata (the index is derived data).
    fn plan(
        &self,
        window: &[(ContainerId, Vec<Fingerprint>)],
        threads: usize,
    ) -> Result<Vec<Fetch>> {
        let metas = blocking_map(window, threads, |(id, _)| self.src.log.read_meta(*id));
        let mut fetches: BTreeMap<ContainerId, Fetch> = BTreeMap::new();
        let mut elsewhere = Vec::new();
        for ((id, fps), meta) in window.iter().zip(metas) {
            let known = match meta {
                Ok(m) => Arc::new(Known::new(m)),
                Err(e) if e.is_not_found() || crate::index::is_damage(&e) => {
                    elsewhere.extend(fps.iter().map(|fp| (*fp, *id)));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut wanted = Vec::new();
            for fp in fps {
                match known.position(fp) {
                    Some(i) => wanted.push(i),
                    None => elsewhere.push((*fp, *id)),
                }
            }
            fetches.insert(*id, Fetch { known, wanted });
        }
        for (fp, stale) in elsewhere {
            let id = self.store.locate_in_containers(&fp, Some(stale))?;
            let f = match fetches.entry(id) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(Fetch {
                    known: Arc::new(Known::new(self.src.log.read_meta(id)?)),
                    wanted: Vec::new(),
                }),
            };
            let i = f.known.position(&fp).ok_or_else(|| {
                Error::corrupt(
                    "source repository",
                    format!("chunk {fp} is in no container"),
                )
            })?;
            f.wanted.push(i);
        }
        Ok(fetches
            .into_values()
            .filter(|f| !f.wanted.is_empty())
            .collect())
    }

    /// Puts chunk `i` of `known` (its stored bytes, verified) into the open
    /// destination container, closing it first when full.
    fn pack(&mut self, known: &Known, i: usize, stored: &[u8]) -> Result<()> {
        let d = known.meta.descriptors[i];
        if self
            .open
            .as_ref()
            .is_some_and(|w| !w.would_fit(stored.len()))
        {
            self.close_open();
        }
        if self.open.is_none() {
            let id = self.dest.log.allocate()?;
            self.dedup.container_opened(id);
            self.open = Some(ContainerWriter::new(
                id,
                self.dest.config.fp_width(),
                self.dest.config.container_size as usize,
            ));
        }
        let w = self.open.as_mut().expect("opened above");
        w.push(d.fp, d.kind, d.level, d.codec, d.raw_len, stored);
        self.report.chunks_copied += 1;
        self.report.stored_bytes_copied += stored.len() as u64;
        self.progress
            .bytes_done
            .fetch_add(stored.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn close_open(&mut self) {
        if let Some(w) = self.open.take() {
            let fps = w.descriptors().iter().map(|d| d.fp).collect();
            self.dedup.container_closed(w.id(), fps);
            self.full.push(w);
        }
    }

    /// Uploads the closed containers once at least `at_least` wait (0: all
    /// of them), that many at once; each is durable when this returns.
    fn upload(&mut self, at_least: usize) -> Result<()> {
        if self.full.is_empty() || self.full.len() < at_least {
            return Ok(());
        }
        let writers = std::mem::take(&mut self.full);
        let ids: Vec<ContainerId> = writers.iter().map(ContainerWriter::id).collect();
        let slots: Vec<parking_lot::Mutex<Option<ContainerWriter>>> = writers
            .into_iter()
            .map(|w| parking_lot::Mutex::new(Some(w)))
            .collect();
        let threads = self.dest.log.write_parallelism().max(1);
        let results = blocking_map(&slots, threads, |slot| {
            let w = slot.lock().take().expect("each container is uploaded once");
            self.dest.log.append(w)
        });
        for (id, r) in ids.into_iter().zip(results) {
            r?;
            self.dedup.container_sealed(id);
            self.report.containers_written += 1;
        }
        Ok(())
    }
}

/// The walk's visitor: every chunk reached, once, into batches moved as
/// they fill; listings and tree nodes read from the source (verified).
struct Gather<'r, 'a> {
    run: &'r mut Run<'a>,
    batch: Vec<Fingerprint>,
    /// The first failure: the walk runs out without doing more.
    error: Option<Error>,
}

impl Gather<'_, '_> {
    fn reach(&mut self, fp: &Fingerprint) {
        if self.error.is_some() || !self.run.seen.insert(*fp) {
            return;
        }
        self.batch.push(*fp);
        if self.batch.len() >= BATCH {
            let batch = std::mem::take(&mut self.batch);
            if let Err(e) = self.run.transfer(&batch) {
                self.error = Some(e);
            }
        }
    }
}

impl Visitor for Gather<'_, '_> {
    fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
        self.reach(fp);
        self.error.is_none()
    }

    fn read(&mut self, fp: &Fingerprint, _level: u8, at: At<'_>) -> Option<Vec<u8>> {
        if self.error.is_some() {
            return None;
        }
        let mut out = Vec::new();
        match self.run.meta.read_chunk(fp, &self.run.store, &mut out) {
            Ok(()) => {
                self.reach(fp);
                Some(out)
            }
            Err(e) => {
                self.damage(e.to_string(), Some(fp), at);
                None
            }
        }
    }

    fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
        if self.error.is_none() {
            self.error = Some(Error::corrupt(
                format!(
                    "source snapshot {} at {}",
                    catalog::short_id(at.snapshot),
                    at.path
                ),
                message,
            ));
        }
    }
}
