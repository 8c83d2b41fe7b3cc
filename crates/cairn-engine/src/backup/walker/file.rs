//! The walker's regular files: against the parent snapshot (kept
//! unread when unchanged), through the `FileContent` hook (stored or read
//! from elsewhere), else read and chunked here or on the reader pool
//! (`read_ahead.rs`).

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use cairn_format::dir::{BlobRef, DirEntry, EntryKind};

use super::super::events::{EntryMeta, EntryState, Event};
use super::super::file_content::{FileSource, Piece};
use super::super::parent::unchanged;
use super::super::read_ahead::{PendingFile, Pool, READ_AHEAD_MIN_BYTES};
use super::{ReadFailure, Walker};
use crate::file_kinds::{data_extents, ExtentReader};

impl Walker {
    /// Sends the regular file at `path` (named `name`, stat'ed as `meta`;
    /// `before` its entry in the parent snapshot).
    pub(super) fn walk_file(
        &mut self,
        path: &Path,
        name: Vec<u8>,
        meta: Metadata,
        before: Option<DirEntry>,
    ) -> Result<(), ()> {
        // Extended attributes are read below unless the file is
        // unchanged: setting or removing one moves ctime, so a file
        // whose ctime equals its parent entry's has the parent's.
        let mut now = Self::stat_meta(&meta);
        // Against the parent: unmodified is decided below (or here for
        // a later hard-link name, which is never read).
        let state = match &before {
            Some(b) if b.kind == EntryKind::File => EntryState::Changed,
            _ => EntryState::New,
        };
        if let Some(h) = now.extras.hard_link {
            if self.linked.contains(&(h.dev, now.inode)) {
                // A later name as the parent recorded it is unmodified,
                // like its first name: not new on every backup.
                let state = match (&before, &self.parent) {
                    (Some(b), Some((tree, _))) if unchanged(b, &now, &tree.trust) => {
                        self.files.unmodified += 1;
                        EntryState::Unmodified
                    }
                    (Some(b), _) if b.kind == EntryKind::File => {
                        self.files.changed += 1;
                        EntryState::Changed
                    }
                    _ => EntryState::New,
                };
                self.add_xattrs(path, &mut now);
                let mut e = super::super::entry(name, EntryKind::File, &now);
                e.size = now.size;
                self.progress.files_done.fetch_add(1, Ordering::Relaxed);
                return self.send(Event::Linked(e, state));
            }
        }
        match before {
            Some(b)
                if self
                    .parent
                    .as_ref()
                    .is_some_and(|(t, _)| unchanged(&b, &now, &t.trust))
                    && self.parent_holds(&b) =>
            {
                self.link_sent(&now);
                self.files.unmodified += 1;
                self.files.unmodified_bytes += now.size;
                self.progress
                    .bytes_done
                    .fetch_add(now.size, Ordering::Relaxed);
                self.progress.files_done.fetch_add(1, Ordering::Relaxed);
                now.extras.xattrs = b.extras.xattrs;
                let mut e = super::super::entry(name, EntryKind::File, &now);
                e.size = now.size;
                e.content = b.content;
                // The parent's extents go with its content.
                e.extras.extents = b.extras.extents;
                return self.send(Event::Kept(e));
            }
            Some(b) if b.kind == cairn_format::dir::EntryKind::File => self.files.changed += 1,
            _ => {}
        }
        self.add_xattrs(path, &mut now);
        let file = match self.dirs.open(path, nix::fcntl::OFlag::O_RDONLY, 0) {
            Ok(f) => f,
            Err(e) => {
                self.skip(path, e);
                return Ok(());
            }
        };
        let source = match self.file_content.as_ref().map(|h| h.source(&file, &meta)) {
            Some(Ok(source)) => source,
            Some(Err(e)) => {
                self.skip(path, e);
                return Ok(());
            }
            None => None,
        };
        if let Some(FileSource::Stored(blob)) = source {
            if blob.size != meta.len() {
                self.skip(path, "its stored content is not its length");
                return Ok(());
            }
            return self.send_stored(name, now, blob, &meta);
        }
        // Only a file with fewer blocks than bytes can have holes (the
        // test cp and tar make): the others cost no SEEK_DATA/SEEK_HOLE.
        if !self.dry_run
            && source.is_none()
            && !self.holes_as_data
            && meta.blocks().saturating_mul(512) < meta.len()
        {
            now.extras.extents = data_extents(&file, meta.len());
        }
        let extents = now.extras.extents.clone();
        let hard_link = now.extras.hard_link.map(|_| now.clone());
        self.send(Event::FileStart {
            name,
            meta: now,
            state,
        })?;
        // A large file goes to the reader pool (`read_ahead.rs`), unless
        // it is hard-linked: a later name must find its first one sent.
        if let Some(FileSource::Read(reader)) = source {
            let read = self.read_content(reader);
            return self.file_end(path, &file, &meta, read, hard_link);
        }
        if let Some(FileSource::Pieces(pieces)) = source {
            let read = self.read_pieces(pieces);
            return self.file_end(path, &file, &meta, read, hard_link);
        }
        if self.read_threads > 0
            && !self.dry_run
            && hard_link.is_none()
            && meta.len() >= READ_AHEAD_MIN_BYTES
        {
            if let Ok(job_file) = file.try_clone() {
                let pool = self.pool.get_or_insert_with(|| {
                    Pool::new(
                        self.read_threads,
                        self.chunker.clone(),
                        self.recycle.clone(),
                        self.progress.clone(),
                        self.read_ns.clone(),
                    )
                });
                let rx = pool.submit(job_file, extents);
                self.ahead.push_file(PendingFile {
                    rx,
                    path: path.to_path_buf(),
                    file,
                    before: meta,
                });
                return self.pump(false);
            }
        }
        let read = match &extents {
            Some(x) => self.read_content(ExtentReader::new(&file, x)),
            None => self.read_content(&file),
        };
        self.file_end(path, &file, &meta, read, hard_link)
    }

    /// Sends a file given as pieces: stored chunks as they are, each read
    /// piece chunked on its own (`read_content` starts a fresh chunker).
    fn read_pieces(&mut self, pieces: Vec<Piece>) -> Result<(), ReadFailure> {
        for piece in pieces {
            match piece {
                Piece::Stored(chunks) => {
                    let bytes: u64 = chunks.iter().map(|c| c.size).sum();
                    self.progress.bytes_done.fetch_add(bytes, Ordering::Relaxed);
                    self.send(Event::StoredChunks(chunks))
                        .map_err(|()| ReadFailure::Closed)?;
                }
                Piece::Read(reader) => self.read_content(reader)?,
            }
        }
        Ok(())
    }

    /// Ends a file read on this thread: checked against its metadata
    /// before (`file_read`), its hard-link group marked sent, `FileEnd`.
    fn file_end(
        &mut self,
        path: &Path,
        file: &std::fs::File,
        meta: &Metadata,
        read: Result<(), ReadFailure>,
        hard_link: Option<EntryMeta>,
    ) -> Result<(), ()> {
        let read = match read {
            Ok(()) => Ok(()),
            Err(ReadFailure::Io(e)) => Err(e),
            Err(ReadFailure::Closed) => return Err(()),
        };
        let ok = self.file_read(path, file, meta, read);
        if let (true, Some(m)) = (ok, hard_link) {
            self.link_sent(&m);
        }
        self.send(Event::FileEnd { ok })
    }

    /// Sends a file whose bytes are all `blob`'s (`FileSource::Stored`),
    /// unread, as an unchanged file's parent content is.
    fn send_stored(
        &mut self,
        name: Vec<u8>,
        now: EntryMeta,
        blob: BlobRef,
        meta: &Metadata,
    ) -> Result<(), ()> {
        self.link_sent(&now);
        self.progress
            .bytes_done
            .fetch_add(meta.len(), Ordering::Relaxed);
        self.progress.files_done.fetch_add(1, Ordering::Relaxed);
        let mut e = super::super::entry(name, EntryKind::File, &now);
        e.size = now.size;
        e.content = Some(blob);
        self.send(Event::Kept(e))
    }
}
