//! Second copies of popular chunks (docs/volume.md, "Scrub"; docs/FORMAT.md,
//! "Volume"): containers in `DIR/copies/`, in the store's container format
//! and, for an encrypted store, sealed with its keys, with ids and an id
//! mark of their own. There is no separate table: the copies' metadata
//! sections are the table (fingerprint -> copy container), read and
//! verified whole at every scrub, so it cannot disagree with the copies.
//!
//! A copy container is kept while every chunk in it is sound, still
//! wanted (referenced more than the threshold) and not held by another
//! kept container. Otherwise it is *stale*: its wanted chunks are copied
//! again from the store's sound primaries into new containers, and it is
//! deleted only at the end of the scrub, after those are durable (and
//! after the repairs, which may still read a sound chunk from it).

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_core::{ContainerId, Error, Fingerprint, FpMap, Result};
use cairn_engine::chunk_repair::{self, StoredChunk};
use cairn_engine::container_log::ContainerStore;

use super::refs::References;
use super::ScrubReport;
use crate::copy_fallback::COPIES_DIR;
use crate::scheduler::Cancelled;
use crate::volume::Volume;

pub(super) struct Copies {
    log: Arc<dyn ContainerStore>,
    /// Every sound copy, in whichever container (stale ones too, until
    /// they are deleted): the repair source.
    sound: FpMap<ContainerId>,
    /// Chunks with a copy in a kept container.
    kept: FpMap<ContainerId>,
    stale: BTreeSet<ContainerId>,
    /// Copies made this run, not yet written.
    pending: Vec<StoredChunk>,
    pending_bytes: usize,
    /// Copies queued this run.
    made: u64,
}

impl Copies {
    /// Opens `DIR/copies/` (created if absent) and verifies every copy:
    /// which chunks have a sound copy, which containers are stale. Paced
    /// before each container: a cancel stops the verification there and
    /// is returned beside what it found so far.
    pub(super) fn open(
        vol: &Volume,
        refs: &References,
        copies_above: u64,
        report: &mut ScrubReport,
        pace: super::Pace<'_>,
    ) -> Result<(Self, Option<Cancelled>)> {
        let repo = vol.repo();
        let log = chunk_repair::open_side_store(repo, &vol.dir().root().join(COPIES_DIR), true)?;
        let mut copies = Copies {
            log,
            sound: FpMap::default(),
            kept: FpMap::default(),
            stale: BTreeSet::new(),
            pending: Vec::new(),
            pending_bytes: 0,
            made: 0,
        };
        for id in copies.log.ids()? {
            if let Err(c) = pace() {
                return Ok((copies, Some(c)));
            }
            let scanned = match chunk_repair::scan_container(repo, &*copies.log, id) {
                Ok(s) => s,
                Err(e) if e.is_corruption() || e.is_not_found() => {
                    report.copies_damaged += 1;
                    copies.stale.insert(id);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut keep = true;
            for (c, damage) in &scanned.chunks {
                report.copies_verified += 1;
                if damage.is_some() {
                    report.copies_damaged += 1;
                    keep = false;
                    continue;
                }
                copies.sound.insert(c.fp, id);
                let wanted = refs
                    .chunks
                    .get(&c.fp)
                    .is_some_and(|r| u64::from(r.count) > copies_above);
                if !wanted || copies.kept.contains_key(&c.fp) {
                    keep = false;
                }
            }
            if keep {
                for (c, _) in &scanned.chunks {
                    copies.kept.insert(c.fp, id);
                }
            } else {
                copies.stale.insert(id);
            }
        }
        Ok((copies, None))
    }

    /// Whether `fp` has a copy that stays.
    pub(super) fn has_kept(&self, fp: &Fingerprint) -> bool {
        self.kept.contains_key(fp)
    }

    /// Copies made this run.
    pub(super) fn made(&self) -> u64 {
        self.made
    }

    /// Chunks with a copy that stays.
    pub(super) fn kept_count(&self) -> u64 {
        self.kept.len() as u64
    }

    /// Queues a sound chunk's copy (once); written once a container's
    /// worth is queued, or by [`Copies::flush`].
    pub(super) fn add(&mut self, vol: &Volume, chunk: StoredChunk) -> Result<()> {
        if self.pending.iter().any(|c| c.fp == chunk.fp) {
            return Ok(());
        }
        self.made += 1;
        self.pending_bytes += chunk.stored.len();
        self.pending.push(chunk);
        if self.pending_bytes >= vol.repo().config.container_size as usize {
            self.flush(vol)?;
        }
        Ok(())
    }

    /// Writes the queued copies into a new container (durable on return).
    pub(super) fn flush(&mut self, vol: &Volume) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let id = chunk_repair::append_chunks(vol.repo(), &*self.log, &self.pending)?;
        for c in self.pending.drain(..) {
            self.kept.insert(c.fp, id);
            self.sound.insert(c.fp, id);
        }
        self.pending_bytes = 0;
        Ok(())
    }

    /// A verified copy of `fp`, if one is sound (read again now: a copy
    /// damaged since the scan is not used).
    pub(super) fn get(&self, vol: &Volume, fp: &Fingerprint) -> Result<Option<StoredChunk>> {
        if let Some(c) = self.pending.iter().find(|c| c.fp == *fp) {
            return Ok(Some(c.clone()));
        }
        let Some(&id) = self.sound.get(fp) else {
            return Ok(None);
        };
        let found = chunk_repair::scan_container(vol.repo(), &*self.log, id).map(|s| {
            s.chunks
                .into_iter()
                .find(|(c, damage)| c.fp == *fp && damage.is_none())
                .map(|(c, _)| c)
        });
        match found {
            Ok(c) => Ok(c),
            Err(e) if e.is_corruption() || e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the stale copy containers (their wanted chunks were copied
    /// again before this is called); returns how many.
    pub(super) fn drop_stale(&mut self) -> Result<u64> {
        if !self.pending.is_empty() {
            return Err(Error::invalid(
                "copies are pending: flush them before dropping stale ones",
            ));
        }
        for &id in &self.stale {
            self.log.delete(id)?;
        }
        Ok(std::mem::take(&mut self.stale).len() as u64)
    }
}
