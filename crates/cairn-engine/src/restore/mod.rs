//! Restore: walk a snapshot's directory tree, read each file's chunks in
//! recipe order through a [`RestoreCache`], verify each chunk against its
//! fingerprint, and write files with their mode, mtime, ownership (where
//! permitted) and symlinks. Directory metadata is applied after their
//! contents. A damaged file is reported and the rest of the restore goes on.
//!
//! Every change to the target goes through [`target::Target`], which keeps a
//! restore inside its target: files are written to a temporary and renamed
//! into place (never written through an existing inode), no pre-existing
//! symlink is followed, a non-empty directory is only removed with
//! `--delete`, and a full target file system stops the restore with one
//! error (rules: `docs/restore-target.md`).
//!
//! ```text
//! restore(snapshot, target, selection, options):
//!     plan <- the selection resolved against the snapshot (select.rs):
//!             the parents of included entries, the totals
//!     for entry in root listing: visit(entry, target/name, scope)
//!     visit(entry, dest, scope):          (scope: skip / whole / parent)
//!         excluded, or neither included nor a parent -> nothing
//!         dir     -> mkdir, or enter an existing real directory;
//!                    --delete (whole directories only): remove what the
//!                    listing lacks;
//!                    for child in listing: visit(child); remember (dir, meta)
//!         file    -> plan its chunks into the batch (batch.rs); a full
//!                    batch is written: for each chunk of the batch's plan,
//!                    policy -> read/verify -> write into its file's temp;
//!                    a file's last chunk written -> set mode, owner,
//!                    mtime on temp; rename temp -> dest
//!         symlink -> temp symlink; owner, mtime; rename temp -> dest
//!         (an existing entry at dest: replaced, skipped or refused per options;
//!          ENOSPC/EDQUOT: stop everything)
//!     write the last batch
//!     for (dir, meta) in remembered, deepest first: set mode, owner, mtime
//! ```

mod batch;
pub mod blob_reader;
pub mod cache;
pub mod dump;
pub mod extract;
pub(crate) mod fetch;
pub mod plan;
pub mod policy;
mod run;
pub mod select;
pub mod target;
mod temp;
#[cfg(test)]
mod tests;
pub mod verify;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::{decode_dir, BlobRef, DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use crate::backup::Progress;
use crate::index::disk_index::DiskIndex;
use crate::repo::Repository;
use blob_reader::BlobReader;
use cache::{ChunkStore, Locator, MetaChunks, RestoreCache};
use extract::Extractor;
pub use policy::PolicyKind;
use policy::{PlanStep, PolicyStats};
use run::Run;
use select::{Plan, Scope};
pub use select::{RestoreSelection, RestoreSelectionBuilder};
use target::{DirState, Target};
pub use target::{Overwrite, Placed, RestoreOptions};

/// Which restore policy and how much memory (`--restore-policy`,
/// `--restore-cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    pub policy: PolicyKind,
    /// Raw chunk bytes the policy may hold.
    pub bytes: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            policy: PolicyKind::default(),
            bytes: policy::DEFAULT_CACHE_BYTES,
        }
    }
}

/// Container metadata sections kept by the planner's reader of directory
/// listings and recipe tree nodes (separate from the data policy's memory).
const METADATA_CACHE_CONTAINERS: usize = 16;

/// Entries of a directory whose recipe roots and listings are read ahead
/// at once (`Reader::prefetch_roots`).
const PREFETCH_ENTRIES: usize = 256;

/// Restore is plan, policy, extraction: `plan` flattens each file's recipe
/// into data-chunk steps (tree nodes and listings through `meta`), the
/// policy in `extract` decides which containers are read and kept, and
/// `extract` verifies and hands out every chunk.
pub struct Reader {
    pub store: ChunkStore,
    meta: Box<dyn RestoreCache>,
    extract: Extractor,
    steps: Vec<PlanStep>,
    log: Option<EntryLog>,
}

/// Told of each file and symlink a restore settles: its path in the
/// target and what happened there (`restore -v`; see [`Reader::log_entries`]).
pub type EntryLog = Box<EntryLogFn>;

/// What an [`EntryLog`] calls.
pub type EntryLogFn = dyn FnMut(&Path, &Placed) + Send;

/// What a restore did (or, in a dry run, would do). `files`, `dirs`,
/// `symlinks` and `bytes` count what was written (including replacements);
/// `new` what was written where nothing was; the other counts describe
/// entries that were already in the target.
#[derive(Debug, Default, Serialize)]
pub struct RestoreSummary {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
    /// Entries written where nothing was (files, directories, symlinks,
    /// FIFOs and devices, hard-link names).
    pub new: u64,
    /// Existing entries left as they were (`--overwrite never`, or unchanged
    /// files with `--overwrite if-changed`).
    pub skipped: u64,
    /// Existing entries replaced by a snapshot entry (a file, symlink or
    /// directory of another kind, or an older file).
    pub replaced: u64,
    /// Entries removed by `--delete` because the snapshot does not have
    /// them (a directory with its contents counts once).
    pub deleted: u64,
    /// FIFOs and device nodes created.
    pub specials: u64,
    /// Sockets in the snapshot, not created (docs/file-kinds.md).
    pub sockets: u64,
    /// Later names of hard-linked files restored as links to the first.
    pub hard_links: u64,
    /// Entries restored with less than was recorded, each with what is
    /// missing (e.g. an extended attribute the target refused).
    pub warnings: Vec<String>,
    /// Entries that could not be restored, each with the reason.
    pub errors: Vec<String>,
    /// What the restore policy did with the data chunks (container reads
    /// for directory listings and tree nodes are not included).
    pub policy: PolicyStats,
}

/// One entry found by a walk, with its path inside the snapshot.
/// A directory's inline listing is moved out of `entry` (its entries are
/// visited next).
pub struct Walked {
    pub path: String,
    pub entry: DirEntry,
}

/// The snapshot path of entry `name` inside directory `parent` (`""` = root),
/// a name that is not UTF-8 escaped (`crate::names`).
pub(crate) fn join(parent: &str, name: &[u8]) -> String {
    let n = crate::names::name_text(name);
    if parent.is_empty() {
        n.into_owned()
    } else {
        format!("{parent}/{n}")
    }
}

/// Index pages a reader keeps in memory: a reader locates every chunk it
/// touches, and on trees of many small files that is many lookups per page.
pub const INDEX_PAGE_CACHE_BYTES: usize = 32 << 20;

/// How a reader of `repo` locates chunks: the on-disk index, or, when it is
/// damaged, a map built from the containers' metadata sections (the index
/// is derived data; containers describe themselves).
pub(crate) fn open_locator(repo: &Repository) -> Result<Locator> {
    match DiskIndex::open(repo.backend().clone(), repo.counters.clone()) {
        Ok(index) => Ok(Locator::Disk(index.with_page_cache(INDEX_PAGE_CACHE_BYTES))),
        Err(e) if crate::index::is_damage(&e) => {
            Ok(Locator::Memory(cache::map_from_containers(&*repo.log)?))
        }
        Err(e) => Err(e),
    }
}

impl Reader {
    pub fn open(repo: &Repository, cache: CacheOptions) -> Result<Self> {
        Ok(Self::with_locator(repo, open_locator(repo)?, cache))
    }

    pub fn with_locator(repo: &Repository, locator: Locator, cache: CacheOptions) -> Self {
        Reader {
            store: ChunkStore::new(
                repo.log.clone(),
                locator,
                crate::codec::ChunkCodec::for_repo(repo),
            ),
            meta: Box::new(MetaChunks::new(METADATA_CACHE_CONTAINERS)),
            extract: Extractor::new(cache.policy, cache.bytes, repo.config.container_size as u64),
            steps: Vec::new(),
            log: None,
        }
    }

    /// Calls `log` for every file and symlink later restores write or
    /// leave as they were (not for entries that failed: those are in
    /// [`RestoreSummary::errors`]).
    pub fn log_entries(&mut self, log: EntryLog) {
        self.log = Some(log);
    }

    /// Reads listings and tree nodes (metadata, not through the policy).
    fn blob(&mut self) -> BlobReader<'_> {
        BlobReader::new(&self.store, self.meta.as_mut())
    }

    /// What the data policy did so far.
    pub fn policy_stats(&self) -> PolicyStats {
        self.extract.stats()
    }

    /// Reads and decodes a directory listing blob.
    pub fn read_listing(&mut self, blob: &BlobRef) -> Result<Vec<DirEntry>> {
        let bytes = self.blob().read_all(blob)?;
        decode_dir(&bytes, self.store.fp_width())
    }

    /// The entries of directory `dir`: its inline listing (a copy), or its
    /// listing blob read from the repository.
    pub fn children(&mut self, dir: &DirEntry) -> Result<Vec<DirEntry>> {
        match (&dir.children, &dir.content) {
            (Some(inline), _) => Ok(inline.clone()),
            (None, Some(blob)) => self.read_listing(blob),
            (None, None) => Ok(Vec::new()),
        }
    }

    /// Like [`Reader::children`], but moves an inline listing out of `dir`
    /// instead of copying it (`dir.children` is `None` afterwards).
    pub fn take_children(&mut self, dir: &mut DirEntry) -> Result<Vec<DirEntry>> {
        match dir.children.take() {
            Some(inline) => Ok(inline),
            None => self.children(dir),
        }
    }

    pub fn root_entries(&mut self, snap: &SnapshotRecord) -> Result<Vec<DirEntry>> {
        let root = BlobRef::try_from(&snap.root)?;
        self.read_listing(&root)
    }

    /// The entry at `path` (components separated by `/`, names as
    /// `crate::names` writes them); `None` for the root.
    pub fn find(&mut self, snap: &SnapshotRecord, path: &str) -> Result<Option<DirEntry>> {
        Ok(self.find_named(snap, path)?.map(|(_, e)| e))
    }

    /// [`Reader::find`], with the entry's path as the names' bytes.
    pub fn find_named(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
    ) -> Result<Option<(PathBuf, DirEntry)>> {
        let mut entries = self.root_entries(snap)?;
        let mut found: Option<DirEntry> = None;
        let mut named = PathBuf::new();
        let comps: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        for (i, comp) in comps.iter().enumerate() {
            // The name that is literally `comp` first, then an escaped one.
            let at = entries
                .iter()
                .position(|e| e.name == comp.as_bytes())
                .or_else(|| {
                    entries
                        .iter()
                        .position(|e| crate::names::text_names(comp, &e.name))
                })
                .ok_or_else(|| Error::NotFound(format!("{path} in the snapshot")))?;
            let e = entries.swap_remove(at);
            named.push(OsStr::from_bytes(&e.name));
            if i + 1 < comps.len() {
                if e.kind != EntryKind::Dir {
                    return Err(Error::NotFound(format!("{path} in the snapshot")));
                }
                entries = self.children(&e)?;
            } else {
                entries = Vec::new();
            }
            found = Some(e);
        }
        Ok(found.map(|e| (named, e)))
    }

    /// Visits every entry under `path` depth-first in name order.
    pub fn walk(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        let (prefix, entries) = match self.find(snap, path)? {
            None => (String::new(), self.root_entries(snap)?),
            Some(e) if e.kind == EntryKind::Dir => {
                let prefix = path.trim_matches('/').to_string();
                let children = self.children(&e)?;
                visit(Walked {
                    path: prefix.clone(),
                    entry: e,
                })?;
                (prefix, children)
            }
            Some(e) => {
                return visit(Walked {
                    path: path.trim_matches('/').to_string(),
                    entry: e,
                })
            }
        };
        self.walk_entries(&prefix, entries, visit)
    }

    fn walk_entries(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        visit: &mut dyn FnMut(Walked) -> Result<()>,
    ) -> Result<()> {
        for mut e in entries {
            let path = join(prefix, &e.name);
            let children = if e.kind == EntryKind::Dir {
                Some(self.take_children(&mut e)?)
            } else {
                None
            };
            visit(Walked {
                path: path.clone(),
                entry: e,
            })?;
            if let Some(c) = children {
                self.walk_entries(&path, c, visit)?;
            }
        }
        Ok(())
    }

    /// Streams the content of the file at `path` into `out`.
    pub fn cat(&mut self, snap: &SnapshotRecord, path: &str, out: &mut dyn Write) -> Result<u64> {
        let e = self
            .find(snap, path)?
            .ok_or_else(|| Error::invalid("cat needs a file path inside the snapshot"))?;
        if e.kind != EntryKind::File {
            return Err(Error::invalid(format!("{path} is not a regular file")));
        }
        self.for_each_logical(&e, &mut |c| {
            out.write_all(c).ctx(|| "writing to standard output".into())
        })
    }

    /// Restores the snapshot (or the subtree at `include`) under `target`
    /// with the default [`RestoreOptions`] (`--overwrite always`, no
    /// `--delete`).
    pub fn restore(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        include: Option<&str>,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        self.restore_with(snap, target, include, &RestoreOptions::default(), progress)
    }

    /// Restores the snapshot (or the subtree at `include`, a snapshot path
    /// taken literally) under `target`; see [`Reader::restore_selected`].
    pub fn restore_with(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        include: Option<&str>,
        opts: &RestoreOptions,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        let sel = RestoreSelection::path(include);
        self.restore_selected(snap, target, &sel, opts, progress)
    }

    /// Restores what `sel` takes of the snapshot under `target`, treating
    /// entries already in the target as `opts` says (see the
    /// [`target`](self::target) module). A failed entry is recorded in
    /// [`RestoreSummary::errors`] and the restore goes on; a full target file
    /// system stops it at once with one error. Sets the progress totals.
    pub fn restore_selected(
        &mut self,
        snap: &SnapshotRecord,
        target: &Path,
        sel: &RestoreSelection,
        opts: &RestoreOptions,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        self.restore_into(snap, target, sel, &Target::new(opts.clone()), progress)
    }

    pub(crate) fn restore_into(
        &mut self,
        snap: &SnapshotRecord,
        root: &Path,
        sel: &RestoreSelection,
        t: &Target,
        progress: &Progress,
    ) -> Result<RestoreSummary> {
        // Resolve what to restore before touching the target, so that
        // includes matching nothing create nothing.
        let plan = Plan::new(self, snap, sel)?;
        progress.set_totals(plan.files, plan.bytes);
        let root_entries = self.root_entries(snap)?;
        // The target itself is the user's path: created with its parents,
        // and followed if it is a symlink, like any path argument. Below it,
        // nothing pre-existing is followed.
        t.prepare_root(root)?;
        let mut log = self.log.take();
        let mut run = Run {
            log: log.as_deref_mut(),
            target: t,
            progress,
            plan: &plan,
            sum: RestoreSummary::default(),
            dirs: Vec::new(),
            batch: batch::Batch::default(),
            link_groups: Default::default(),
            link_sources: Default::default(),
            later_links: Vec::new(),
        };
        let top = plan.root();
        if t.opts.delete && top == Scope::Whole && t.exists_now(root) {
            let keep = root_entries.iter().map(|e| e.name.as_slice()).collect();
            run.sum.deleted += t.prune(root, &keep, &mut run.sum.errors);
        }
        let outcome = self
            .restore_children("", root_entries, root, top, &mut run)
            .and_then(|()| self.flush(&mut run))
            .and_then(|()| self.place_links(&mut run));
        // Deepest directories first, so a parent's mtime is set last. Done
        // even after a fatal error: it needs no space.
        for (path, e) in run.dirs.iter().rev() {
            match t.apply_dir_meta(path, e) {
                Err(err) => run.sum.errors.push(format!("{}: {err}", path.display())),
                Ok(refused) => {
                    for why in refused {
                        run.sum.warnings.push(format!("{}: {why}", path.display()));
                    }
                }
            }
        }
        run.sum.warnings.extend(t.warnings.take());
        let mut sum = run.sum;
        self.log = log;
        outcome?;
        sum.policy = self.extract.stats();
        Ok(sum)
    }

    /// Restores the entries of a directory (at snapshot path `prefix`, at
    /// `dir` in the target, taken as `scope`) that the selection takes.
    fn restore_children(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        dir: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let mut entries = entries.into_iter();
        let mut i = 0;
        while let Some(e) = entries.next() {
            if i % PREFETCH_ENTRIES == 0 {
                let window = std::iter::once(&e).chain(entries.as_slice());
                self.prefetch_roots(prefix, window.take(PREFETCH_ENTRIES), scope, run.plan);
            }
            i += 1;
            let rel = join(prefix, &e.name);
            let s = run.plan.scope(&rel, scope);
            if s == Scope::Skip {
                continue;
            }
            let dest = dir.join(OsStr::from_bytes(&e.name));
            self.restore_entry(e, &rel, &dest, s, run)?;
        }
        Ok(())
    }

    /// Reads ahead, in parallel where the store allows, the recipe trees
    /// and listings of the selected `entries` (the planner would read them
    /// one by one, a round trip each on object storage).
    fn prefetch_roots<'e>(
        &mut self,
        prefix: &str,
        entries: impl Iterator<Item = &'e DirEntry>,
        scope: Scope,
        plan: &Plan,
    ) {
        if self.store.log.read_parallelism() <= 1 {
            return;
        }
        let roots: Vec<(cairn_core::Fingerprint, u8)> = entries
            .filter(|e| plan.scope(&join(prefix, &e.name), scope) != Scope::Skip)
            .filter_map(|e| match (e.kind, &e.content) {
                // A one-chunk file's content is data: the policy reads it.
                (EntryKind::File, Some(b)) if b.level > 0 => Some((b.root, b.level)),
                (EntryKind::Dir, Some(b)) if e.children.is_none() => Some((b.root, b.level)),
                _ => None,
            })
            .collect();
        self.meta.prefetch(&roots, &self.store);
    }

    /// Restores one entry. `Err` only for a fatal error (a full target file
    /// system); anything else is recorded in the summary.
    fn restore_entry(
        &mut self,
        e: DirEntry,
        rel: &str,
        dest: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let r = match e.kind {
            EntryKind::Dir => return self.restore_dir(e, rel, dest, scope, run),
            EntryKind::File => self.restore_file(&e, dest, run),
            EntryKind::Symlink => run.target.place_symlink(dest, &e).map(|placed| {
                run.log(dest, &placed);
                if run.sum.count(placed, dest, 0) {
                    run.sum.symlinks += 1;
                }
            }),
            EntryKind::Socket => {
                run.sum.sockets += 1;
                Ok(())
            }
            EntryKind::Fifo | EntryKind::CharDevice | EntryKind::BlockDevice => {
                match run.target.place_special(dest, &e) {
                    Ok(placed) => {
                        if run.sum.count(placed, dest, 0) {
                            run.sum.specials += 1;
                        }
                        Ok(())
                    }
                    // Only root may create devices: restored where permitted.
                    Err(Error::Io { source, .. })
                        if source.raw_os_error() == Some(nix::libc::EPERM) =>
                    {
                        run.sum.warnings.push(format!(
                            "{}: {} not created: not permitted",
                            dest.display(),
                            e.kind.name()
                        ));
                        Ok(())
                    }
                    Err(err) => Err(err),
                }
            }
        };
        r.or_else(|err| run.settle(err, dest))?;
        if run.batch.full() {
            self.flush(run)?;
        }
        Ok(())
    }

    fn restore_dir(
        &mut self,
        mut e: DirEntry,
        rel: &str,
        dest: &Path,
        scope: Scope,
        run: &mut Run,
    ) -> Result<()> {
        let children = match self.take_children(&mut e) {
            Ok(c) => c,
            Err(err) => return run.settle(err, dest),
        };
        let state = match run.target.prepare_dir(dest) {
            Ok(s) => s,
            Err(err) => return run.settle(err, dest),
        };
        // An existing directory keeps its metadata under `--overwrite never`.
        let restore_meta = match state {
            DirState::Skipped => {
                run.sum.skipped += 1;
                return Ok(());
            }
            DirState::Existing if run.target.opts.overwrite == Overwrite::Never => {
                run.sum.skipped += 1;
                false
            }
            DirState::Replaced => {
                run.sum.replaced += 1;
                true
            }
            DirState::Created => {
                run.sum.new += 1;
                true
            }
            DirState::Existing => true,
        };
        // A parent holds entries the selection did not take: never pruned.
        if run.target.opts.delete && state == DirState::Existing && scope == Scope::Whole {
            let keep = children.iter().map(|c| c.name.as_slice()).collect();
            run.sum.deleted += run.target.prune(dest, &keep, &mut run.sum.errors);
        }
        if restore_meta {
            // Owner-writable while we fill it; the recorded mode is applied
            // afterwards. `dest` was just checked to be a real directory.
            run.target.open_dir_for_filling(dest);
            run.sum.dirs += 1;
            run.dirs.push((dest.to_path_buf(), e));
        }
        self.restore_children(rel, children, dest, scope, run)
    }

    /// A file with content joins the batch (written when it is flushed);
    /// an empty one, or one the target's state decides about, is settled
    /// now. A later name of a hard-link group waits for
    /// [`place_links`](Self::place_links).
    fn restore_file(&mut self, e: &DirEntry, dest: &Path, run: &mut Run) -> Result<()> {
        if let Some(group) = run::link_group(e) {
            if !run.link_groups.insert(group) {
                run.later_links.push((dest.to_path_buf(), e.clone()));
                return Ok(());
            }
        }
        self.write_file(e, dest, run)
    }

    /// Writes file `e` at `dest` with its own content (through the batch
    /// when it has any).
    fn write_file(&mut self, e: &DirEntry, dest: &Path, run: &mut Run) -> Result<()> {
        let placed = match &e.content {
            // `place_file` decides about what is at `dest` itself.
            None => run.target.place_file(dest, e, &mut |_| Ok(()))?,
            Some(b) => match run.target.verdict(dest, e)? {
                Some(placed) => placed,
                None => return self.plan_file(e, b, dest, run),
            },
        };
        run.placed_file(placed, dest, e);
        Ok(())
    }
}

impl Reader {
    /// Calls `sink` with each data chunk of a file's blob, in order,
    /// verified: plan, policy, extraction.
    pub fn for_each_chunk(
        &mut self,
        blob: &BlobRef,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut steps = std::mem::take(&mut self.steps);
        steps.clear();
        let r = self.extract_planned(blob, &mut steps, sink);
        self.steps = steps;
        r
    }

    fn extract_planned(
        &mut self,
        blob: &BlobRef,
        steps: &mut Vec<PlanStep>,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        plan::plan_blob(&self.store, self.meta.as_mut(), blob, steps)?;
        self.extract
            .extract(&self.store, steps, &mut |step, bytes| {
                if bytes.len() as u64 != step.size {
                    return Err(Error::corrupt(
                        format!("tree under {}", blob.root),
                        format!(
                            "chunk {} recorded as {} bytes holds {}",
                            step.fp,
                            step.size,
                            bytes.len()
                        ),
                    ));
                }
                sink(bytes)
            })
    }

    /// Plans a blob (its recipe nodes read and checked, levels and sizes)
    /// and hands each data chunk's fingerprint to `leaf` without reading
    /// the chunk: how `repair snapshots` finds files that reference chunks
    /// no container holds.
    /// The container the index (or, failing it, the containers' own
    /// metadata) places chunk `fp` in.
    pub(crate) fn locate(&self, fp: &cairn_core::Fingerprint) -> Result<cairn_core::ContainerId> {
        self.store.locate(fp)
    }

    pub fn for_each_leaf(
        &mut self,
        blob: &BlobRef,
        leaf: &mut dyn FnMut(&cairn_core::Fingerprint) -> Result<()>,
    ) -> Result<()> {
        let mut steps = std::mem::take(&mut self.steps);
        steps.clear();
        let r = plan::plan_blob(&self.store, self.meta.as_mut(), blob, &mut steps)
            .and_then(|()| steps.iter().try_for_each(|s| leaf(&s.fp)));
        self.steps = steps;
        r
    }

    /// Reads one chunk (any kind) through the metadata cache, verified.
    pub fn read_chunk(&mut self, fp: &cairn_core::Fingerprint, out: &mut Vec<u8>) -> Result<()> {
        self.meta.read_chunk(fp, &self.store, out)
    }
}
