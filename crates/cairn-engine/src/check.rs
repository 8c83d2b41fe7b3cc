//! `check`: verifies that every snapshot is restorable without restoring it.
//!
//! 1. Every container's metadata section is read (one tail read each) and its
//!    checksum verified; with `--read-data` the whole container is read, its
//!    data checksum verified, and every chunk decompressed and rehashed.
//! 2. The index file is read page by page (each page checksummed); every entry
//!    must point at a container that holds the fingerprint, and every chunk of
//!    a container below the index's checkpoint must be indexed.
//! 3. Every snapshot record is loaded (its id is its hash) and its tree walked:
//!    every referenced chunk must be indexed, in a sound container, and (with
//!    `--read-data`) intact. Tree nodes and listings are read and decoded.
//!    Subtrees already verified are not walked twice.
//! 4. Containers no snapshot references are reported as reclaimable, not as
//!    errors (an interrupted backup leaves such orphans by design).
//!
//! Problems make `check` fail; notes do not. A repository where nothing was
//! ever committed (no snapshot record: the first backup or a copy into a
//! new repository was interrupted) has no index yet by design: the next
//! write indexes its containers, so that is a note, not damage. An index
//! missing beside committed snapshots was lost, and stays a problem.
//!
//! Each problem names the container involved and the snapshots and paths it
//! damages.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;

use serde::Serialize;

use cairn_core::{ContainerId, Fingerprint, FpMap, FpSet, Result};
use cairn_format::container::ContainerMeta;
use cairn_format::dir::BlobRef;

use crate::catalog;
use crate::config::IndexKind;
use crate::container_log::ContainerStore;
use crate::index::disk_index::DiskIndex;
use crate::index::frugal::log::{live_entries, open_partitions, LogRecord};
use crate::progress::Progress;
use crate::read::cache::Locator;
use crate::read::Reader;
use crate::repo::Repository;

#[derive(Debug, Default, Serialize)]
pub struct Problem {
    pub message: String,
    pub container: Option<String>,
    pub snapshots: BTreeSet<String>,
    pub paths: BTreeSet<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    pub snapshots: u64,
    pub containers: u64,
    pub indexed_chunks: u64,
    pub chunks_verified: u64,
    pub problems: Vec<Problem>,
    /// Conditions that are not damage (the derived data an interrupted
    /// first write never made); they do not fail the check.
    pub notes: Vec<String>,
    /// Containers no snapshot references (left by interrupted backups).
    pub reclaimable_containers: u64,
    pub reclaimable_bytes: u64,
}

impl CheckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Problems keyed by (message, container) so one damaged container touching
/// many files is one line with all of them.
#[derive(Default)]
struct Problems {
    map: BTreeMap<(String, Option<String>), Problem>,
}

impl Problems {
    fn add(
        &mut self,
        message: String,
        container: Option<ContainerId>,
        snap: Option<&str>,
        path: Option<&str>,
    ) {
        let c = container.map(|c| c.to_string());
        let p = self
            .map
            .entry((message.clone(), c.clone()))
            .or_insert_with(|| Problem {
                message,
                container: c,
                ..Default::default()
            });
        if let Some(s) = snap {
            p.snapshots.insert(s.to_string());
        }
        if let Some(path) = path {
            p.paths.insert(path.to_string());
        }
    }
}

struct Ctx<'a> {
    reader: Reader,
    index: FpMap<ContainerId>,
    metas: &'a HashMap<ContainerId, ContainerMeta>,
    /// Containers whose metadata could not be read.
    bad_containers: &'a HashMap<ContainerId, String>,
    /// Chunks found damaged by `--read-data`.
    bad_chunks: &'a FpMap<(ContainerId, String)>,
    problems: Problems,
    referenced: HashSet<ContainerId>,
    buf: Vec<u8>,
}

const MISSING_CONTAINER: &str = "container file is missing (the index and snapshots reference it; \
     `cairn repair index` drops it from the index so new backups store its chunks again)";
const NOT_HELD: &str = "index entries point at chunks this container does not hold \
     (`cairn repair index` rebuilds the index from the containers)";
/// What to run when data is lost: new backups then store it again.
const REPAIR_LOST: &str = "`cairn repair index` makes new backups store lost chunks again; \
     `cairn repair snapshots` rewrites the snapshots without the files that lost data";
/// How derived data (index, Summary Vector checkpoint) is repaired.
const REBUILD: &str = "rebuilt by the next backup or `cairn repair index`";

/// The frugal index's chunk logs (derived data, like the paged index):
/// every segment must verify, every indexed chunk must be live in a log,
/// and every live record must name a container that holds its chunk. A
/// record a later removal superseded may name a container since deleted,
/// and so may a live one naming a container no longer present (a writer
/// died between its log and its index delta and a collection reaped its
/// containers): opening the index leaves such records out of its table.
fn check_frugal_log(
    records: Result<Vec<Vec<LogRecord>>>,
    index: &FpMap<ContainerId>,
    holds: &HashMap<ContainerId, FpSet>,
    containers: &Containers,
    problems: &mut Problems,
) {
    const REBUILT: &str = "the next backup rebuilds it from the paged index";
    let logs = match records {
        Ok(r) => r,
        Err(e) => {
            problems.add(
                format!("frugal index unreadable ({REBUILT}): {e}"),
                None,
                None,
                None,
            );
            return;
        }
    };
    let logged: Vec<FpMap<ContainerId>> = logs.iter().map(|r| live_entries(r)).collect();
    let missing = index
        .keys()
        .filter(|fp| !logged.iter().any(|l| l.contains_key(*fp)))
        .count();
    if missing > 0 {
        problems.add(
            format!("frugal index lacks {missing} indexed chunks ({REBUILT})"),
            None,
            None,
            None,
        );
    }
    for (fp, id) in logged.iter().flatten() {
        if containers.bad.contains_key(id) || !containers.metas.contains_key(id) {
            continue;
        }
        if !holds.get(id).is_some_and(|h| h.contains(fp)) {
            problems.add(
                format!(
                    "frugal index records name chunks this container does not hold ({REBUILT})"
                ),
                Some(*id),
                None,
                None,
            );
        }
    }
}

/// The steps of the module doc, in order. Reads run in commit order
/// reversed (snapshots, then index, then containers): a concurrent backup
/// commits containers, then index, then snapshot, so everything a listed
/// snapshot or index entry references is already durable when it is listed.
pub fn check(repo: &Repository, read_data: bool) -> Result<CheckReport> {
    check_with_progress(repo, read_data, &Progress::default())
}

/// [`check`], counting in `progress` the containers read and snapshots
/// walked as items (`files_done` of `files_total`, known once the
/// containers are listed), container bytes read as `bytes_done`, and
/// naming the current container or snapshot.
pub fn check_with_progress(
    repo: &Repository,
    read_data: bool,
    progress: &Progress,
) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut problems = Problems::default();
    let snaps = load_snapshots(repo, &mut report, &mut problems)?;
    let index_read = read_index(repo, &mut problems);
    let containers = read_containers(
        repo,
        read_data,
        &mut report,
        &mut problems,
        (progress, snaps.len() as u64),
    )?;
    // Nothing committed yet: every derived object is still to be written.
    let nothing_committed = report.snapshots == 0;
    let index = index_map(
        index_read.entries,
        index_read.generation,
        &containers,
        nothing_committed,
        (&mut problems, &mut report.notes),
    );
    report.indexed_chunks = index.len() as u64;
    // Containers an interrupted collection is deleting are garbage whose
    // chunks the index may already have forgotten.
    let retiring = match crate::gc::pending::read(&**repo.backend()) {
        Ok(r) => r,
        Err(e) if e.is_corruption() => {
            problems.add(
                format!("{e} (the next `cairn gc` repairs it)"),
                None,
                None,
                None,
            );
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    let holds = index_against_containers(
        &index,
        &index_read.covered,
        &containers,
        &retiring,
        &mut problems,
    );
    if let Some(records) = index_read
        .frugal_records
        .filter(|_| !(nothing_committed && index_read.generation == 0))
    {
        check_frugal_log(records, &index, &holds, &containers, &mut problems);
    }
    let (referenced, problems) =
        walk_snapshots(repo, &snaps, index, &containers, problems, progress);
    for (id, meta) in &containers.metas {
        if !referenced.contains(id) {
            report.reclaimable_containers += 1;
            report.reclaimable_bytes += meta.file_size;
        }
    }
    report.problems = problems.map.into_values().collect();
    Ok(report)
}

/// Step 3's input: every snapshot record (unreadable ones are problems).
fn load_snapshots(
    repo: &Repository,
    report: &mut CheckReport,
    problems: &mut Problems,
) -> Result<Vec<catalog::SnapshotInfo>> {
    let (snaps, bad_snaps) = catalog::list(&**repo.backend())?;
    report.snapshots = (snaps.len() + bad_snaps.len()) as u64;
    for (id, e) in &bad_snaps {
        problems.add(
            format!(
                "snapshot record unreadable: {e} (`cairn forget {}` removes it; \
                 until then `latest` fails)",
                catalog::short_id(id)
            ),
            None,
            Some(id),
            None,
        );
    }
    Ok(snaps)
}

/// What step 2 read of the index, before the containers are known.
struct IndexRead {
    covered: crate::index::coverage::Coverage,
    generation: u64,
    entries: Result<Vec<cairn_format::index::IndexEntry>>,
    /// Each partition's records, in log order.
    frugal_records: Option<Result<Vec<Vec<LogRecord>>>>,
}

/// Step 2, reading: the index (file and deltas), its Summary Vector
/// checkpoint (verified here), and the frugal chunk log.
/// Reads of the index that a concurrent commit may start over.
const INDEX_READ_TRIES: u32 = 5;

fn read_index(repo: &Repository, problems: &mut Problems) -> IndexRead {
    // A writer that commits meanwhile writes a new generation and then
    // deletes the files of the one read here (its file, deltas and
    // checkpoint): a file listed a moment ago that is gone is not damage
    // when the index has moved on. Such a read is started again, a few
    // times at most (a writer commits once per backup).
    let open = || DiskIndex::open(repo.backend().clone(), repo.counters.clone());
    let moved_on = |generation: u64| open().is_ok_and(|d| d.generation() != generation);
    let mut tries = 0;
    let (covered, generation, base_covered, entries) = loop {
        tries += 1;
        let retry = |e: &cairn_core::Error| e.is_not_found() && tries < INDEX_READ_TRIES;
        match open() {
            Ok(d) => {
                // The checkpoint covers the generation's file; its deltas come on top.
                let (covered, generation) = (d.coverage(), d.generation());
                let base_covered = d.base_covered_below();
                match d.read_all() {
                    Err(e) if retry(&e) && moved_on(generation) => continue,
                    entries => break (covered, generation, base_covered, entries),
                }
            }
            Err(e) if retry(&e) => continue,
            Err(e) => break (Default::default(), 0, ContainerId(0), Err(e)),
        }
    };
    if repo.config.index.kind == IndexKind::Paged && generation > 0 {
        if let Err(e) = verify_checkpoint(repo, generation, base_covered).or_else(|e| {
            if e.is_not_found() && moved_on(generation) {
                Ok(())
            } else {
                Err(e)
            }
        }) {
            problems.add(
                format!("Summary Vector checkpoint damaged (derived data, {REBUILD}): {e}"),
                None,
                None,
                None,
            );
        }
    }
    // The frugal chunk log is written before the paged index, so read after
    // it, it covers at least what the index does.
    let frugal_records = (repo.config.index.kind == IndexKind::Frugal).then(|| {
        open_partitions(repo.backend(), 1)?
            .values()
            .map(|l| {
                let mut records = Vec::new();
                l.scan(&mut |r| records.push(r)).map(|_| records)
            })
            .collect()
    });
    IndexRead {
        covered,
        generation,
        entries,
        frugal_records,
    }
}

/// What step 1 found in the containers.
struct Containers {
    ids: Vec<ContainerId>,
    metas: HashMap<ContainerId, ContainerMeta>,
    /// Unreadable containers, with the reason.
    bad: HashMap<ContainerId, String>,
    /// Chunks `--read-data` found damaged, with their container.
    bad_chunks: FpMap<(ContainerId, String)>,
}

/// Step 1: every container's metadata section (with `read_data`, the whole
/// container and every chunk through the codec).
fn read_containers(
    repo: &Repository,
    read_data: bool,
    report: &mut CheckReport,
    problems: &mut Problems,
    (progress, snapshots): (&Progress, u64),
) -> Result<Containers> {
    let log: &dyn ContainerStore = &*repo.log;
    let ids = log.ids()?;
    report.containers = ids.len() as u64;
    // A writer starts from the mark without listing: a container at or
    // above it could have its id handed out again.
    let mark = match crate::id_mark::read_checked(&**repo.backend()) {
        Ok(mark) => mark,
        Err(e) if e.is_corruption() => {
            problems.add(
                format!(
                    "the container-id mark `{}` is damaged: {e} (derived data: the next \
                     backup lists the containers and writes it again, as does \
                     `cairn repair index`)",
                    crate::id_mark::KEY
                ),
                None,
                None,
                None,
            );
            None
        }
        Err(e) => return Err(e),
    };
    // The mark is a hint that two claims raising it at once may leave
    // below a slot claimed; the slots say what was handed out (`id_mark.rs`).
    let mark = mark
        .map(|m| crate::id_mark::slots_end(&**repo.backend()).map(|e| m.max(ContainerId(e))))
        .transpose()?;
    if let (Some(mark), Some(&top)) = (mark, ids.last()) {
        if top >= mark {
            problems.add(
                format!(
                    "the container-id mark ({mark}) is not above every container; \
                     run `cairn repair index` (or delete the object `{}`)",
                    crate::id_mark::KEY
                ),
                Some(top),
                None,
                None,
            );
        }
    }
    progress
        .files_total
        .store(ids.len() as u64 + snapshots, Ordering::Relaxed);
    let mut c = Containers {
        ids: ids.clone(),
        metas: HashMap::new(),
        bad: HashMap::new(),
        bad_chunks: FpMap::default(),
    };
    for &id in &ids {
        progress.set_current(format_args!("container {id}"));
        let meta = if read_data {
            log.read(id).map(|loaded| {
                progress
                    .bytes_done
                    .fetch_add(loaded.bytes.len() as u64, Ordering::Relaxed);
                if let Some(damage) = &loaded.damage {
                    problems.add(format!("container damaged: {damage}"), Some(id), None, None);
                }
                for d in &loaded.meta.descriptors {
                    if let Err(e) = verify_chunk(repo, &loaded.bytes, &loaded.meta, d) {
                        c.bad_chunks.insert(d.fp, (id, e));
                    }
                    report.chunks_verified += 1;
                }
                loaded.meta
            })
        } else {
            log.read_meta(id)
        };
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        match meta {
            Ok(m) => {
                c.metas.insert(id, m);
            }
            Err(e) => {
                problems.add(
                    format!("container unreadable: {e} ({REPAIR_LOST})"),
                    Some(id),
                    None,
                    None,
                );
                c.bad.insert(id, e.to_string());
            }
        }
    }
    for (fp, (id, e)) in &c.bad_chunks {
        problems.add(format!("chunk {fp} damaged: {e}"), Some(*id), None, None);
    }
    Ok(c)
}

/// Step 2, the map snapshots are walked with: the index's, or, when the
/// index is missing or damaged (derived data, reported once), the mapping a
/// rebuild would produce from the containers. An index missing where
/// nothing was committed is a note (`nothing_committed`: no snapshot record).
fn index_map(
    entries: Result<Vec<cairn_format::index::IndexEntry>>,
    generation: u64,
    containers: &Containers,
    nothing_committed: bool,
    (problems, notes): (&mut Problems, &mut Vec<String>),
) -> FpMap<ContainerId> {
    // No index generation at all while containers exist means the index
    // was deleted: derived data, like a damaged one.
    let entries = match entries {
        Ok(_) if generation == 0 && !containers.ids.is_empty() => Err(cairn_core::Error::NotFound(
            "no index file in index/".into(),
        )),
        other => other,
    };
    let mut index: FpMap<ContainerId> = FpMap::default();
    match entries {
        Ok(entries) => {
            for e in entries {
                index.insert(e.fp, e.container);
            }
        }
        Err(e) => {
            if e.is_not_found() && nothing_committed {
                notes.push(format!(
                    "no snapshot was committed yet and so there is no index: the {} \
                     container(s) present were left by an interrupted first backup or \
                     copy; the next backup or copy indexes them (and deduplicates \
                     against them), `cairn gc` reclaims them",
                    containers.ids.len()
                ));
            } else {
                let what = if e.is_not_found() {
                    "missing"
                } else {
                    "unreadable"
                };
                problems.add(
                    format!("index {what} (derived data, {REBUILD}): {e}"),
                    None,
                    None,
                    None,
                );
            }
            for (id, meta) in &containers.metas {
                for d in &meta.descriptors {
                    crate::canonical::place(&mut index, d.fp, *id);
                }
            }
        }
    }
    index
}

/// Step 2, comparing: every entry must name a container that holds its
/// chunk, and every chunk of a container the index covers must be indexed
/// (one it does not cover, a writer's next open replays). Returns what
/// each container holds.
fn index_against_containers(
    index: &FpMap<ContainerId>,
    covered: &crate::index::coverage::Coverage,
    containers: &Containers,
    retiring: &[ContainerId],
    problems: &mut Problems,
) -> HashMap<ContainerId, FpSet> {
    let mut holds: HashMap<ContainerId, FpSet> = HashMap::new();
    for (id, m) in &containers.metas {
        holds.insert(*id, m.descriptors.iter().map(|d| d.fp).collect());
    }
    for (fp, id) in index {
        if containers.bad.contains_key(id) {
            continue;
        }
        match holds.get(id) {
            None => problems.add(MISSING_CONTAINER.into(), Some(*id), None, None),
            Some(s) if !s.contains(fp) => problems.add(NOT_HELD.into(), Some(*id), None, None),
            Some(_) => {}
        }
    }
    for (id, m) in &containers.metas {
        if covered.covers(*id)
            && !retiring.contains(id)
            && m.descriptors.iter().any(|d| !index.contains_key(&d.fp))
        {
            problems.add(
                "container's chunks are missing from the index".into(),
                Some(*id),
                None,
                None,
            );
        }
    }
    holds
}

/// Step 3: walks every snapshot (`reachability`), reporting what is
/// missing or damaged against the snapshots and paths it damages. Returns
/// the containers the snapshots reference.
fn walk_snapshots(
    repo: &Repository,
    snaps: &[catalog::SnapshotInfo],
    index: FpMap<ContainerId>,
    containers: &Containers,
    problems: Problems,
    progress: &Progress,
) -> (HashSet<ContainerId>, Problems) {
    let mut ctx = Ctx {
        reader: Reader::with_locator(repo, Locator::Memory(index.clone()), Default::default()),
        index,
        metas: &containers.metas,
        bad_containers: &containers.bad,
        bad_chunks: &containers.bad_chunks,
        problems,
        referenced: HashSet::new(),
        buf: Vec::new(),
    };
    let mut reach = crate::reachability::Reachability::new(repo.config.fp_width());
    for s in snaps {
        progress.set_current(format_args!("snapshot {}", &s.id[..8.min(s.id.len())]));
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        match BlobRef::try_from(&s.record.root) {
            Ok(root) => {
                reach.walk_snapshot(&s.id, &root, &mut ctx);
            }
            Err(e) => ctx.problems.add(
                format!("snapshot root invalid: {e}"),
                None,
                Some(&s.id),
                None,
            ),
        }
    }
    (ctx.referenced, ctx.problems)
}

/// The Summary Vector checkpoint of the current index generation must be
/// present, decode (envelope checksum included) and cover what the index
/// covers.
fn verify_checkpoint(repo: &Repository, generation: u64, covered: ContainerId) -> Result<()> {
    let bytes = repo
        .backend()
        .read(&crate::object_names::bloom(generation))?;
    let (_, sv_covered) = crate::index::summary_vector::SummaryVector::from_checkpoint(&bytes)?;
    if sv_covered != covered {
        return Err(cairn_core::Error::corrupt(
            "summary vector checkpoint",
            format!("covers containers below {sv_covered}, the index below {covered}"),
        ));
    }
    Ok(())
}

/// Whether chunk `d` of a container (`bytes`, `meta`) decompresses and
/// matches its fingerprint; the reason if not (`check`, `repair index`).
pub(crate) fn verify_chunk(
    repo: &Repository,
    bytes: &[u8],
    meta: &ContainerMeta,
    d: &cairn_format::container::Descriptor,
) -> std::result::Result<(), String> {
    match crate::codec::ChunkCodec::for_repo(repo).check(bytes, meta, d) {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

impl Ctx<'_> {
    /// Checks that `fp` is indexed in a sound container; returns the container.
    fn locate(&mut self, fp: &Fingerprint, snap: &str, path: &str) -> Option<ContainerId> {
        let Some(&id) = self.index.get(fp) else {
            self.problems.add(
                format!("chunk {fp} is missing ({REPAIR_LOST})"),
                None,
                Some(snap),
                Some(path),
            );
            return None;
        };
        self.referenced.insert(id);
        if self.bad_containers.contains_key(&id) {
            self.problems.add(
                "container unreadable".into(),
                Some(id),
                Some(snap),
                Some(path),
            );
            return None;
        }
        if let Some((cid, e)) = self.bad_chunks.get(fp) {
            self.problems.add(
                format!("chunk {fp} damaged: {e}"),
                Some(*cid),
                Some(snap),
                Some(path),
            );
            return None;
        }
        match self.metas.get(&id) {
            // Already reported by the index cross-check; attribute it here.
            None => {
                self.problems
                    .add(MISSING_CONTAINER.into(), Some(id), Some(snap), Some(path));
                return None;
            }
            Some(m) if !m.descriptors.iter().any(|d| &d.fp == fp) => {
                self.problems
                    .add(NOT_HELD.into(), Some(id), Some(snap), Some(path));
                return None;
            }
            Some(_) => {}
        }
        Some(id)
    }

    /// Reads a tree/meta chunk; reports failure against `snap`/`path`.
    fn read(&mut self, fp: &Fingerprint, snap: &str, path: &str) -> Option<Vec<u8>> {
        let id = self.locate(fp, snap, path)?;
        let mut buf = std::mem::take(&mut self.buf);
        match self.reader.read_chunk(fp, &mut buf) {
            Ok(()) => Some(buf),
            Err(e) => {
                self.problems.add(
                    format!("chunk {fp} unreadable: {e}"),
                    Some(id),
                    Some(snap),
                    Some(path),
                );
                None
            }
        }
    }
}

/// `check` as a reachability visitor: data chunks must be indexed in a
/// sound container, listings and recipe nodes must read and verify; every
/// failure is reported against the snapshot and path that reach it.
impl crate::reachability::Visitor for Ctx<'_> {
    fn data(&mut self, fp: &Fingerprint, at: crate::reachability::At<'_>) -> bool {
        self.locate(fp, at.snapshot, at.path).is_some()
    }

    fn read(
        &mut self,
        fp: &Fingerprint,
        _level: u8,
        at: crate::reachability::At<'_>,
    ) -> Option<Vec<u8>> {
        Ctx::read(self, fp, at.snapshot, at.path)
    }

    fn damage(
        &mut self,
        message: String,
        fp: Option<&Fingerprint>,
        at: crate::reachability::At<'_>,
    ) {
        let container = fp.and_then(|f| self.index.get(f).copied());
        self.problems
            .add(message, container, Some(at.snapshot), Some(at.path));
    }
}
