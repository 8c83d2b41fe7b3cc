//! The local directory's [`StreamedObject`]: an object written piece by
//! piece into a fresh temporary under `tmp/` and published like
//! [`LocalBackend::create_new`] publishes a whole one (the temporary
//! `fsync`ed, hard-linked to its name, which fails rather than replace an
//! existing object, and the directory `fsync`ed). Until `create` nothing
//! exists under the key; a writer dropped or killed before it leaves only
//! its temporary, which a drop removes and `clean_temporaries` removes
//! after a crash.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;

use cairn_core::streamed::{patch_range, StreamedObject};
use cairn_core::{Error, Result};

use crate::LocalBackend;

/// Appended bytes are written to the file in runs of this size.
const FLUSH_AT: usize = 1 << 20;

pub(crate) struct LocalStreamed<'a> {
    backend: &'a LocalBackend,
    key: String,
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
    /// Appended bytes not yet written to `file`; they follow `flushed`.
    pending: Vec<u8>,
    flushed: u64,
}

impl<'a> LocalStreamed<'a> {
    pub(crate) fn new(backend: &'a LocalBackend, key: &str) -> Result<Self> {
        let target = backend.object_path(key)?;
        let (tmp, file) = backend.temp_file().map_err(|e| backend.write_err(key, e))?;
        Ok(LocalStreamed {
            backend,
            key: key.to_string(),
            target,
            tmp,
            file: Some(file),
            pending: Vec::new(),
            flushed: 0,
        })
    }

    fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("the file is open until create")
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let file = self.file.as_mut().expect("the file is open until create");
            file.write_all(&self.pending)?;
            self.flushed += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(())
    }

    fn err(&self, e: io::Error) -> Error {
        self.backend.write_err(&self.key, e)
    }

    fn publish(&mut self) -> io::Result<bool> {
        self.flush()?;
        let file = self.file.take().expect("the file is open until create");
        let parent = self.backend.close_temp(file, &self.target)?;
        self.backend
            .link_new(&self.tmp, &self.target, parent)
            .map_err(|e| match e.kind() {
                // Only a writer alone cleans `tmp/` (`Repository::lock_writer`),
                // so this is another process that took the repository's
                // lock as if this one had died.
                io::ErrorKind::NotFound => io::Error::new(
                    e.kind(),
                    "its temporary file was removed by another process before it was published",
                ),
                _ => e,
            })
    }
}

impl StreamedObject for LocalStreamed<'_> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= FLUSH_AT {
            self.flush().map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        patch_range(offset, bytes.len(), self.len(), &self.key)?;
        // The part in `pending` is overwritten there, the rest in the file.
        let split = (self.flushed.saturating_sub(offset) as usize).min(bytes.len());
        let (in_file, in_pending) = bytes.split_at(split);
        if !in_file.is_empty() {
            self.file()
                .write_all_at(in_file, offset)
                .map_err(|e| self.err(e))?;
        }
        if !in_pending.is_empty() {
            let at = (offset + split as u64 - self.flushed) as usize;
            self.pending[at..at + in_pending.len()].copy_from_slice(in_pending);
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.flushed + self.pending.len() as u64
    }

    fn create(mut self: Box<Self>) -> Result<bool> {
        self.publish().map_err(|e| self.err(e))
    }
}

impl Drop for LocalStreamed<'_> {
    /// The temporary goes whether the object was published (a hard link
    /// left it behind) or not.
    fn drop(&mut self) {
        self.file.take();
        let _ = fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use cairn_core::Backend;

    use crate::LocalBackend;

    /// The temporary is the only trace of a writer before `create`, and
    /// none is left after `create` or a drop; a writer's pieces reach the
    /// file as they come, not at `create`.
    #[test]
    fn a_streamed_object_lives_in_one_temporary_until_published() {
        let dir = tempfile::tempdir().unwrap();
        let b = LocalBackend::create(dir.path()).unwrap();
        let mut w = cairn_core::create_streamed(&b, "index/00000001").unwrap();
        w.append(&vec![1u8; 3 << 20]).unwrap();
        assert!(b.has_temporaries().unwrap());
        let tmp: Vec<_> = std::fs::read_dir(dir.path().join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .collect();
        assert_eq!(
            tmp,
            vec![3 << 20],
            "appended bytes are written as they come"
        );
        assert!(w.create().unwrap());
        assert!(!b.has_temporaries().unwrap());

        let mut dropped = cairn_core::create_streamed(&b, "index/00000002").unwrap();
        dropped.append(b"x").unwrap();
        drop(dropped);
        assert!(!b.has_temporaries().unwrap());
        assert!(!b.exists("index/00000002").unwrap());
    }
}
