//! The end of a collection's commit, beside running backups
//! (docs/concurrency.md, "A collection", steps 4-6; 003 §3.5's "write a
//! duplicate for safety", for every chunk a record written during the
//! collection reaches):
//!
//! 1. **Wait** for every writer session running after the condemnation
//!    (the pending list) was written: those may have deduplicated against
//!    the condemned containers before it. A session ends by committing or
//!    failing, or is reaped once its lock shows the writer gone
//!    (`session.rs`). Sessions that start later open an index that treats
//!    the condemned containers as absent, and are not waited for.
//! 2. **Rescue**: every record not among the roots Merge read (snapshot
//!    and staged records; one memoised walk) is walked, and every chunk it
//!    reaches whose only copy is condemned is copied into a new container.
//! 3. **Forget**: one index change, under the writer lock shared with
//!    backups, removes the doomed chunks' entries (only where they still
//!    name a container below the collection's bound, so a backup that
//!    stored one again meanwhile keeps its entry) and puts the rescued
//!    copies and the survivors.
//! 4. **Delete** the condemned containers, readers locked out, then the
//!    pending list.
//!
//! No step compares clocks. An interruption while waiting, or the end of
//! `--max-seconds`, leaves the pending list: the next collection judges
//! its containers again (their entries stay, so every record still reads).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_format::index::IndexEntry;

use super::commit::{self, Committed, Condemned, Merged};
use super::mark::{damage_at, stop, NodeReader};
use super::sweep::CopyWriter;
use super::GcProgress;
use crate::codec::ChunkCodec;
use crate::index::disk_index::DiskIndex;
use crate::index::overlay::IndexUpdate;
use crate::reachability::{At, Reachability, Visitor};
use crate::read::cache::{ChunkStore, Locator};
use crate::repo::{GcLock, Repository};
use crate::session;

/// The longest pause between two looks at the sessions being waited for.
const MAX_POLL: Duration = Duration::from_secs(1);

/// Waits until every session running now has ended or is reaped: true;
/// false when `deadline` came first.
fn wait_for_writers(
    repo: &Repository,
    progress: &dyn GcProgress,
    deadline: Option<Instant>,
) -> Result<bool> {
    let backend = &**repo.backend();
    let live = session::survey(backend)?.live;
    let who = |id: &str| match live.iter().find(|(l, _)| l == id) {
        Some((_, Some(info))) => format!("session {id}, host {} pid {}", info.host, info.pid),
        _ => format!("session {id}"),
    };
    let mut waiting: Vec<String> = live.iter().map(|(id, _)| id.clone()).collect();
    if waiting.is_empty() {
        return Ok(true);
    }
    progress.phase("wait for backups", waiting.len() as u64);
    // The survey just found each running: the first look again comes after
    // the first pause.
    let mut pause = Duration::from_millis(10);
    while !waiting.is_empty() {
        crate::interrupt::check(|| {
            format!(
                "garbage collection stopped while waiting for {} running backup(s) ({}); \
                 nothing was deleted, and the next collection judges the containers it had \
                 condemned again",
                waiting.len(),
                who(&waiting[0])
            )
        })?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
        let before = waiting.len();
        let mut still = Vec::with_capacity(before);
        for id in waiting {
            if session::still_running(backend, &id)? {
                still.push(id);
            }
        }
        progress.advance((before - still.len()) as u64);
        waiting = still;
    }
    Ok(true)
}

/// Finds, in records written since Merge, the chunks about to be forgotten.
struct Rescues<'r, 'a> {
    reader: &'r mut NodeReader<'a>,
    doomed: &'r FpMap<ContainerId>,
    found: FpMap<ContainerId>,
    error: Option<Error>,
}

impl Rescues<'_, '_> {
    fn note(&mut self, fp: &Fingerprint) {
        if let Some(c) = self.doomed.get(fp) {
            self.found.insert(*fp, *c);
        }
    }
}

impl Visitor for Rescues<'_, '_> {
    fn data(&mut self, fp: &Fingerprint, _at: At<'_>) -> bool {
        self.note(fp);
        true
    }

    fn read(&mut self, fp: &Fingerprint, _level: u8, at: At<'_>) -> Option<Vec<u8>> {
        self.note(fp);
        self.reader.read_or_stop(fp, at, &mut self.error)
    }

    fn damage(&mut self, message: String, _fp: Option<&Fingerprint>, at: At<'_>) {
        stop(&mut self.error, damage_at(message, at));
    }
}

/// Copies every doomed chunk a record written since Merge reaches; returns
/// the copies' entries.
fn rescue(
    repo: &Repository,
    merged: &Merged,
    doomed: &FpMap<ContainerId>,
    out: &mut Committed,
) -> Result<Vec<IndexEntry>> {
    let cfg = &repo.config;
    let old: HashSet<&str> = merged.roots.iter().map(|(id, _)| id.as_str()).collect();
    let fresh: Vec<_> = commit::live_roots(repo)?
        .into_iter()
        .filter(|(id, _)| !old.contains(id.as_str()))
        .collect();
    out.new_snapshots = fresh.len();
    if fresh.is_empty() || doomed.is_empty() {
        return Ok(Vec::new());
    }
    let codec = ChunkCodec::for_repo(repo);
    let store = ChunkStore::new(
        repo.log.clone(),
        Locator::Disk(DiskIndex::open(
            repo.backend().clone(),
            repo.counters.clone(),
        )?),
        codec.clone(),
    );
    let mut reader = NodeReader::new(&store);
    let mut v = Rescues {
        reader: &mut reader,
        doomed,
        found: FpMap::default(),
        error: None,
    };
    let mut walk = Reachability::new(cfg.fp_width());
    for (id, root) in &fresh {
        walk.walk_snapshot(id, root, &mut v);
    }
    if let Some(e) = v.error {
        return Err(e);
    }
    let found = v.found;
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_container: HashMap<ContainerId, HashSet<Fingerprint>> = HashMap::new();
    for (fp, c) in &found {
        by_container.entry(*c).or_default().insert(*fp);
    }
    let mut w = CopyWriter::new(
        &*repo.log,
        &codec,
        cfg.fp_width(),
        cfg.container_size as usize,
        None,
    );
    let mut ids: Vec<_> = by_container.keys().copied().collect();
    ids.sort();
    for id in ids {
        let want = &by_container[&id];
        w.copy_matching(id, |d| want.contains(&d.fp))?;
    }
    w.seal()?;
    out.resurrected = w.out.chunks;
    out.written_bytes = w.out.written_bytes;
    out.containers_written = w.out.containers_written;
    Ok(w.out
        .moved
        .iter()
        .map(|(fp, c)| IndexEntry {
            fp: *fp,
            container: *c,
        })
        .collect())
}

/// Steps 1-4 above for what [`commit::commit`] condemned; when `deadline`
/// (`--max-seconds`) passes during the wait, only step 1 ran: the
/// condemned containers are left (`Committed::left`).
pub(super) fn finish(
    repo: &Repository,
    gc: &GcLock,
    merged: &Merged,
    condemned: Condemned,
    progress: &dyn GcProgress,
    deadline: Option<Instant>,
) -> Result<Committed> {
    let cfg = &repo.config;
    let backend = repo.backend();
    let mut out = Committed {
        moved: condemned.moved,
        ..Default::default()
    };
    if !wait_for_writers(repo, progress, deadline)? {
        out.left = condemned.cleaned.len() as u64;
        return Ok(out);
    }
    let rescued = rescue(repo, merged, &condemned.doomed, &mut out)?;
    let kept: HashSet<Fingerprint> = rescued.iter().map(|e| e.fp).collect();
    let removes: Vec<Fingerprint> = condemned
        .doomed
        .keys()
        .filter(|fp| !kept.contains(*fp))
        .copied()
        .collect();
    out.removed = removes.len() as u64;
    out.moved += rescued.len() as u64;
    let writer = repo.lock_writer_for_gc(gc, true)?;
    let mut opened = repo.open_index(&writer, &Default::default())?;
    if !condemned.last {
        // Whole dead containers on what may be a full disk: a delta costs
        // the bytes of the change, a merged generation the whole index.
        opened.kind.prefer_deltas();
    }
    let mut puts = condemned.survivors;
    puts.extend(rescued);
    puts.extend(commit::puts_of(&commit::canonical_map(&opened.replayed)));
    opened.kind.commit(
        &**backend,
        IndexUpdate {
            puts,
            removes,
            removes_below: Some(merged.bound),
        },
        repo.log.next_id(),
        cfg.fp_width(),
        cfg.index.page_size as usize,
    )?;
    drop(writer);
    progress.phase("delete", condemned.cleaned.len() as u64);
    commit::delete_retired(repo, gc, &condemned.cleaned, progress)?;
    Ok(out)
}
