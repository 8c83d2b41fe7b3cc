//! Reads one backup source — a file tree or a stream — on its own thread and
//! emits events in a fixed order (depth-first, entries sorted by name bytes)
//! with the file contents already cut into reused chunk batches. Reading and
//! chunking thus overlap with fingerprinting and dedup on the stream thread.
//!
//! Problems that lose one path (unreadable, vanished) become `Skipped`
//! warnings and the walk goes on; a file that changes while it is read is
//! stored as read and reported.
//!
//! Entries below a source that the backup's [`Selection`] leaves out are
//! never sent (and an excluded directory is never listed below): a pattern
//! is tested before the entry is stat'ed, the size and device limits on its
//! metadata, the marker files on the directory's listing. A dry run walks
//! the same way but sends files without opening them.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::pipe::{Receiver, Sender};

use cairn_chunk::{ChunkBatch, ChunkReader, ChunkerSpec};
use cairn_core::TraceSource;
use cairn_format::dir::{DirEntry, EntryKind, HardLink};

use crate::file_kinds::read_xattrs;
use crate::long_path::Dirs;

use super::parent::{dir_times_reliable, listing_unchanged, ParentTree};
use super::read_ahead::{next_piece, Ahead, Held, Piece, Pool};
use super::select::{absolute_clean, ExcludeReason, Selection};

use super::events::{EntryMeta, EntryState, Event, EventSink, BATCH_BYTES};
use super::file_content::FileContent;
use crate::progress::Progress;

mod file;

/// What a walker reads.
// One value per backup source: the size of the stored-entry variant is no cost.
#[allow(clippy::large_enum_variant)]
pub enum Source {
    Path(PathBuf),
    Stdin {
        name: String,
    },
    /// A chunk trace. `flat`: the trace names files by whole paths (Destor,
    /// FSL); they are listed in trace order in one directory named `name`.
    /// Otherwise the trace carries cairn's own directory events.
    Trace {
        name: String,
        source: parking_lot::Mutex<Box<dyn TraceSource>>,
        flat: bool,
    },
    /// Entries already stored in the repository (a snapshot being rewritten
    /// by `repair snapshots`): files and symlinks keep their stored content,
    /// directories get new listings of the entries kept below them.
    Kept(Kept),
}

/// A subtree of stored entries to carry into a new snapshot unchanged.
pub enum Kept {
    Dir {
        entry: DirEntry,
        children: Vec<Kept>,
    },
    /// A file or symlink whose stored content is reused as it is.
    Leaf(DirEntry),
}

impl Kept {
    pub fn name(&self) -> &[u8] {
        match self {
            Kept::Dir { entry, .. } | Kept::Leaf(entry) => &entry.name,
        }
    }
}

/// The top-level entry name of a source path: its file name, or for `.`,
/// `..` and the like the name of the directory it resolves to (`root` for `/`).
pub fn source_name(path: &Path) -> Vec<u8> {
    if let Some(n) = path.file_name() {
        return n.as_bytes().to_vec();
    }
    crate::long_path::canonicalize(path)
        .ok()
        .and_then(|c| c.file_name().map(|n| n.as_bytes().to_vec()))
        .unwrap_or_else(|| b"root".to_vec())
}

pub struct Walker {
    chunker: ChunkerSpec,
    tx: EventSink,
    recycle: Receiver<ChunkBatch>,
    progress: Arc<Progress>,
    /// Paths skipped with a reason, reported by the caller.
    pub skipped: Vec<String>,
    /// Non-fatal notices (special files).
    pub notices: Vec<String>,
    /// The repository lay below a source and was left out: the listing of
    /// its directory is then not complete (`listings_complete`).
    pub left_out_repository: bool,
    /// Files whose size, mtime or ctime after reading differ from before:
    /// stored as read, reported by the caller.
    pub changed_while_read: Vec<String>,
    /// Never descend into this directory (the repository itself).
    exclude: Option<(u64, u64)>,
    read_ns: Arc<AtomicU64>,
    /// What to leave out below each source.
    selection: Arc<Selection>,
    /// Entries left out by `selection`, as "path: reason".
    pub excluded: Vec<String>,
    /// Send files by their metadata alone, never opening them.
    dry_run: bool,
    /// Files with holes read whole, no extents recorded (`BackupOptions`).
    holes_as_data: bool,
    /// Where files' bytes come from when not all in the file system.
    file_content: Option<Arc<dyn FileContent>>,
    /// The parent snapshot's tree and its entry for this source: unchanged
    /// files keep their content unread (`super::parent`).
    parent: Option<(ParentTree, DirEntry)>,
    /// Files against the parent: changed, unchanged (and its bytes).
    pub files: FileCounts,
    /// The chunk reader's look-ahead buffer, kept from file to file.
    read_buf: Vec<u8>,
    /// Events and files held back behind a file still being read on the
    /// pool (`read_ahead.rs`). Declared before `pool`: dropped first, so
    /// readers blocked on a file nobody will receive stop.
    ahead: Ahead,
    /// Reader threads for large files, started on the first one.
    pool: Option<Pool>,
    /// How many reader threads the pool gets (0: read every file here).
    read_threads: usize,
    /// Per device: whether its directories' times may stand for their
    /// names (`parent::dir_times_reliable`).
    reliable_dev: std::collections::HashMap<u64, bool>,
    /// Hard-link groups (device, inode) whose first name was sent.
    linked: std::collections::HashSet<(u64, u64)>,
    /// Reaches paths longer than the kernel takes whole (`crate::long_path`).
    dirs: Dirs,
}

/// How the files of a walk compare with the parent snapshot.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileCounts {
    pub changed: u64,
    pub unmodified: u64,
    pub unmodified_bytes: u64,
}

impl std::ops::AddAssign for FileCounts {
    fn add_assign(&mut self, o: Self) {
        self.changed += o.changed;
        self.unmodified += o.unmodified;
        self.unmodified_bytes += o.unmodified_bytes;
    }
}

fn name_of(path: &Path) -> Vec<u8> {
    match path.file_name() {
        Some(n) => n.as_bytes().to_vec(),
        None => b"root".to_vec(),
    }
}

impl Walker {
    pub fn new(
        chunker: ChunkerSpec,
        tx: Sender<Vec<Event>>,
        recycle: Receiver<ChunkBatch>,
        progress: Arc<Progress>,
        exclude: Option<(u64, u64)>,
        read_ns: Arc<AtomicU64>,
    ) -> Self {
        Walker {
            chunker,
            tx: EventSink::new(tx),
            recycle,
            progress,
            skipped: Vec::new(),
            notices: Vec::new(),
            left_out_repository: false,
            changed_while_read: Vec::new(),
            exclude,
            read_ns,
            selection: Arc::default(),
            excluded: Vec::new(),
            dry_run: false,
            holes_as_data: false,
            file_content: None,
            parent: None,
            files: FileCounts::default(),
            read_buf: Vec::new(),
            linked: Default::default(),
            ahead: Ahead::default(),
            pool: None,
            // One core is left to the stream's hashing and packing: with a
            // reader per core, a 2-core backup of mostly duplicate data ran
            // 0.88x as fast as with no readers (bench/README.md, `backup`).
            read_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .saturating_sub(1)
                .clamp(1, 4),
            reliable_dev: Default::default(),
            dirs: Dirs::new(),
        }
    }

    /// Compares the files of a path source with `top`, the source's entry
    /// in the parent snapshot, read through `tree`.
    pub(crate) fn parent(&mut self, tree: ParentTree, top: DirEntry) -> &mut Self {
        self.parent = Some((tree, top));
        self
    }

    /// Leaves out what `selection` excludes below each source.
    pub fn select(&mut self, selection: Arc<Selection>) -> &mut Self {
        self.selection = selection;
        self
    }

    /// Walks without reading: files are sent as `FileStart` + `FileEnd`
    /// with their size in the metadata and no `Data`.
    pub fn dry_run(&mut self, yes: bool) -> &mut Self {
        self.dry_run = yes;
        self
    }

    /// Reads files with holes whole (zeros for the holes), recording no
    /// extents.
    pub fn holes_as_data(&mut self, yes: bool) -> &mut Self {
        self.holes_as_data = yes;
        self
    }

    /// Asks `hook` where each regular file's bytes come from.
    pub fn file_content(&mut self, hook: Option<Arc<dyn FileContent>>) -> &mut Self {
        self.file_content = hook;
        self
    }

    /// Walks `source`; returns early (quietly) if the receiver has gone away.
    pub fn run(&mut self, source: &Source) {
        let _ = match source {
            Source::Path(p) => {
                let before = self.parent.as_mut().map(|(_, top)| top.clone());
                self.walk_path(p, &absolute_clean(p), source_name(p), None, before)
            }
            Source::Stdin { name } => self.walk_stdin(name),
            Source::Trace { name, source, flat } => {
                let mut src = source.lock();
                super::trace_walker::walk_trace(
                    &mut **src,
                    name,
                    *flat,
                    &mut self.tx,
                    &mut self.skipped,
                )
            }
            Source::Kept(tree) => self.walk_kept(tree),
        };
        let _ = self.pump(true);
        self.ahead = Ahead::default();
        let _ = self.tx.flush();
    }

    /// Reads files of at least [`READ_AHEAD_MIN_BYTES`] on `threads`
    /// reader threads (0: every file on the walker's thread).
    pub fn read_ahead(&mut self, threads: usize) -> &mut Self {
        self.read_threads = threads;
        self
    }

    /// Sends what `ahead` holds, in order: without waiting, unless `all`
    /// (everything) or the queue is over its bounds (then it waits for the
    /// oldest file until it is back within them).
    fn pump(&mut self, all: bool) -> Result<(), ()> {
        loop {
            let wait = all || self.ahead.over_bounds();
            match self.ahead.queue.front() {
                None => return Ok(()),
                Some(Held::Event(_)) => {
                    if let Some(Held::Event(ev)) = self.ahead.queue.pop_front() {
                        if let Event::Data(b) = &ev {
                            self.ahead.bytes -= b.bytes();
                        }
                        self.tx.send(ev)?;
                    }
                }
                Some(Held::File(p)) => match next_piece(&p.rx, wait) {
                    Err(()) => return Ok(()),
                    Ok(Piece::Data(b)) => self.tx.send(Event::Data(b))?,
                    Ok(Piece::Done(r)) => {
                        if let Some(Held::File(p)) = self.ahead.queue.pop_front() {
                            self.ahead.files -= 1;
                            let ok = self.file_read(&p.path, &p.file, &p.before, r);
                            self.tx.send(Event::FileEnd { ok })?;
                        }
                    }
                },
            }
        }
    }

    /// Accounts for a file whose content was read (`read`: how the read
    /// ended); returns whether its entry is kept.
    fn file_read(
        &mut self,
        path: &Path,
        file: &File,
        before: &Metadata,
        read: std::io::Result<()>,
    ) -> bool {
        let ok = match read {
            Ok(()) => true,
            Err(e) => {
                self.skip(path, format!("read failed: {e}"));
                false
            }
        };
        // The stat before the read against one after it: ctime catches a
        // write that put size and mtime back.
        let times = |a: &Metadata| {
            (
                a.len(),
                a.mtime(),
                a.mtime_nsec(),
                a.ctime(),
                a.ctime_nsec(),
            )
        };
        if ok && file.metadata().is_ok_and(|a| times(&a) != times(before)) {
            self.changed_while_read.push(path.display().to_string());
        }
        self.progress.files_done.fetch_add(1, Ordering::Relaxed);
        ok
    }

    fn walk_kept(&mut self, node: &Kept) -> Result<(), ()> {
        match node {
            Kept::Leaf(e) => self.send(Event::Kept(e.clone())),
            Kept::Dir { entry, children } => {
                self.send(Event::DirStart {
                    name: entry.name.clone(),
                    // Carried whole from the parent snapshot.
                    state: EntryState::Unmodified,
                    parent_entries: children.len(),
                    meta: EntryMeta {
                        mode: entry.mode,
                        uid: entry.uid,
                        gid: entry.gid,
                        mtime_ns: entry.mtime_ns,
                        ctime_ns: entry.ctime_ns,
                        inode: entry.inode,
                        size: 0,
                        extras: entry.extras.clone(),
                    },
                })?;
                for c in children {
                    self.walk_kept(c)?;
                }
                self.send(Event::DirEnd)
            }
        }
    }

    /// Whether the parent's content of `b` is still whole in the repository.
    fn parent_holds(&mut self, b: &DirEntry) -> bool {
        match (&b.content, self.parent.as_mut()) {
            (None, _) => true,
            (Some(c), Some((tree, _))) => tree.stored(c),
            (Some(_), None) => false,
        }
    }

    /// `m` as recorded: with extended attributes, hard-link group and
    /// device number. Attributes that cannot be listed are reported and
    /// left out.
    fn meta_of(&mut self, path: &Path, m: &Metadata) -> EntryMeta {
        let mut meta = Self::stat_meta(m);
        self.add_xattrs(path, &mut meta);
        meta
    }

    /// Reads `path`'s extended attributes into `meta`.
    fn add_xattrs(&mut self, path: &Path, meta: &mut EntryMeta) {
        match self.dirs.with_xattr_path(path, read_xattrs) {
            Ok(x) => meta.extras.xattrs = x,
            Err(e) => self.notices.push(format!(
                "{}: extended attributes not recorded: {e}",
                path.display()
            )),
        }
    }

    /// What `m` alone says: everything [`meta_of`](Self::meta_of) records
    /// but the extended attributes.
    fn stat_meta(m: &Metadata) -> EntryMeta {
        let mut meta = EntryMeta::from_fs(m);
        if !m.is_dir() && m.nlink() > 1 {
            meta.extras.hard_link = Some(HardLink {
                dev: m.dev(),
                nlink: m.nlink(),
            });
        }
        let ft = m.file_type();
        if ft.is_char_device() || ft.is_block_device() {
            meta.extras.rdev = Some(m.rdev());
        }
        meta
    }

    /// Sends `ev` in walk order: behind whatever `ahead` holds.
    fn send(&mut self, ev: Event) -> Result<(), ()> {
        if self.ahead.is_empty() {
            return self.tx.send(ev);
        }
        self.ahead.push_event(ev);
        self.pump(false)
    }

    fn skip(&mut self, path: &Path, why: impl std::fmt::Display) {
        self.skipped.push(format!("{}: {why}", path.display()));
    }

    fn exclude(&mut self, path: &Path, why: ExcludeReason) {
        self.excluded.push(format!("{}: {why}", path.display()));
    }

    /// Walks one entry. `abs`: its absolute clean path (for patterns);
    /// `source_dev`: the device of the source it lies below, `None` for the
    /// source itself, which the selection never excludes; `before`: its
    /// entry in the parent snapshot.
    fn walk_path(
        &mut self,
        path: &Path,
        abs: &Path,
        name: Vec<u8>,
        source_dev: Option<u64>,
        before: Option<DirEntry>,
    ) -> Result<(), ()> {
        if source_dev.is_some() {
            if let Some(why) = self.selection.excluded_by_pattern(abs) {
                self.exclude(path, why);
                return Ok(());
            }
        }
        let meta = match self.dirs.lstat(path) {
            Ok(m) => m,
            Err(e) => {
                self.skip(path, e);
                return Ok(());
            }
        };
        let dev = source_dev.unwrap_or(meta.dev());
        if source_dev.is_some() {
            if let Some(why) = self.selection.excluded_by_meta(&meta, dev) {
                self.exclude(path, why);
                return Ok(());
            }
        }
        let ft = meta.file_type();
        if ft.is_dir() {
            if self.exclude == Some((meta.dev(), meta.ino())) {
                self.notices.push(format!(
                    "{}: not backing up the repository itself",
                    path.display()
                ));
                self.left_out_repository = true;
                return Ok(());
            }
            let now = Self::stat_meta(&meta);
            // An unchanged directory (`parent::listing_unchanged`) is not
            // read: its names are its parent listing's.
            let reuse = match (&before, &self.parent) {
                (Some(b), Some((tree, _))) => {
                    listing_unchanged(b, &now, &tree.trust) && self.dir_times_reliable(&meta, path)
                }
                _ => false,
            };
            let dir_state = match &before {
                None => EntryState::New,
                Some(b)
                    if b.kind == EntryKind::Dir
                        && (b.mode, b.uid, b.gid, b.mtime_ns)
                            == (now.mode, now.uid, now.gid, now.mtime_ns) =>
                {
                    EntryState::Unmodified
                }
                Some(_) => EntryState::Changed,
            };
            // Unchanged ctime: the parent's extended attributes stand.
            let parent_xattrs = before
                .as_ref()
                .filter(|_| reuse)
                .map(|b| b.extras.xattrs.clone());
            let mut earlier = match (before, self.parent.as_mut()) {
                (Some(b), Some((tree, _))) => tree.children(b),
                _ => Default::default(),
            };
            let parent_entries = earlier.len();
            let mut children: Vec<PathBuf> = if reuse {
                earlier
                    .keys()
                    .map(|n| path.join(std::ffi::OsStr::from_bytes(n)))
                    .collect()
            } else {
                match self.dirs.read_dir(path) {
                    Ok(rd) => {
                        let mut v = Vec::with_capacity(rd.len());
                        for ent in rd {
                            match ent {
                                Ok(n) => v.push(path.join(n)),
                                Err(e) => self.skip(path, e),
                            }
                        }
                        v
                    }
                    Err(e) => {
                        self.skip(path, e);
                        return Ok(());
                    }
                }
            };
            if source_dev.is_some() && !self.selection.is_empty() {
                let names: Vec<&std::ffi::OsStr> =
                    children.iter().filter_map(|c| c.file_name()).collect();
                if let Some(why) = self.selection.excluded_dir(path, &names) {
                    self.exclude(path, why);
                    return Ok(());
                }
            }
            children.sort_by_key(|p| name_of(p));
            let mut dir_meta = now;
            match parent_xattrs {
                Some(x) => dir_meta.extras.xattrs = x,
                None => self.add_xattrs(path, &mut dir_meta),
            }
            self.send(Event::DirStart {
                name,
                meta: dir_meta,
                state: dir_state,
                parent_entries,
            })?;
            for child in children {
                let n = name_of(&child);
                let child_abs = abs.join(std::ffi::OsStr::from_bytes(&n));
                let b = earlier.remove(&n);
                self.walk_path(&child, &child_abs, n, Some(dev), b)?;
            }
            self.send(Event::DirEnd)
        } else if ft.is_symlink() {
            match self.dirs.read_link(path) {
                Ok(t) => {
                    let meta = self.meta_of(path, &meta);
                    self.send(Event::Symlink {
                        name,
                        meta,
                        target: t.as_os_str().as_bytes().to_vec(),
                    })
                }
                Err(e) => {
                    self.skip(path, e);
                    Ok(())
                }
            }
        } else if ft.is_file() && self.dry_run {
            self.send(Event::FileStart {
                name,
                meta: EntryMeta::from_fs(&meta),
                state: EntryState::New,
            })?;
            self.progress
                .bytes_done
                .fetch_add(meta.len(), Ordering::Relaxed);
            self.progress.files_done.fetch_add(1, Ordering::Relaxed);
            self.send(Event::FileEnd { ok: true })
        } else if ft.is_file() {
            self.walk_file(path, name, meta, before)
        } else {
            let kind = if ft.is_fifo() {
                EntryKind::Fifo
            } else if ft.is_char_device() {
                EntryKind::CharDevice
            } else if ft.is_block_device() {
                EntryKind::BlockDevice
            } else if ft.is_socket() {
                EntryKind::Socket
            } else {
                self.skip(path, "unknown file type");
                return Ok(());
            };
            let now = self.meta_of(path, &meta);
            self.send(Event::Kept(super::entry(name, kind, &now)))
        }
    }

    /// Whether directories on `m`'s device keep their times as
    /// `parent::dir_times_reliable` needs (asked once per device).
    fn dir_times_reliable(&mut self, m: &Metadata, path: &Path) -> bool {
        *self
            .reliable_dev
            .entry(m.dev())
            .or_insert_with(|| dir_times_reliable(path))
    }

    /// Remembers that the first name of `m`'s hard-link group was sent.
    fn link_sent(&mut self, m: &EntryMeta) {
        if let Some(h) = m.extras.hard_link {
            self.linked.insert((h.dev, m.inode));
        }
    }

    fn walk_stdin(&mut self, name: &str) -> Result<(), ()> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        let meta = EntryMeta {
            mode: 0o100644,
            uid: 0,
            gid: 0,
            mtime_ns: now,
            ..EntryMeta::default()
        };
        self.send(Event::FileStart {
            name: name.as_bytes().to_vec(),
            meta,
            state: EntryState::New,
        })?;
        let stdin = std::io::stdin().lock();
        let ok = match self.read_content(stdin) {
            Ok(()) => true,
            Err(ReadFailure::Io(e)) => {
                self.skipped
                    .push(format!("standard input: read failed: {e}"));
                false
            }
            Err(ReadFailure::Closed) => return Err(()),
        };
        self.send(Event::FileEnd { ok })
    }

    fn read_content(&mut self, reader: impl Read) -> Result<(), ReadFailure> {
        let buf = std::mem::take(&mut self.read_buf);
        let mut cr = ChunkReader::with_buffer(reader, self.chunker.build(), BATCH_BYTES, buf);
        let r = self.read_chunks(&mut cr);
        self.read_buf = cr.into_buffer();
        r
    }

    fn read_chunks<R: Read>(&mut self, cr: &mut ChunkReader<R>) -> Result<(), ReadFailure> {
        loop {
            let mut batch = self
                .recycle
                .try_recv()
                .unwrap_or_else(|_| ChunkBatch::new());
            let t = Instant::now();
            let more = cr.next_batch(&mut batch).map_err(ReadFailure::Io)?;
            self.read_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if batch.is_empty() {
                return Ok(());
            }
            self.progress
                .bytes_done
                .fetch_add(batch.bytes() as u64, Ordering::Relaxed);
            self.send(Event::Data(batch))
                .map_err(|()| ReadFailure::Closed)?;
            if !more {
                return Ok(());
            }
        }
    }
}

enum ReadFailure {
    Io(std::io::Error),
    Closed,
}
