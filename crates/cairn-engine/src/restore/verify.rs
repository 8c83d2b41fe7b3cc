//! `restore --verify`: after a restore, every regular file the selection
//! takes is read back from the target and compared with the snapshot: kind,
//! size, permission bits, mtime (to the nanosecond) and content.
//!
//! Content is compared by fingerprint at the snapshot's own chunk
//! boundaries: the file's recipe is planned (its tree nodes read through the
//! metadata cache, no data container read), then for each recorded chunk
//! `(offset, size, fingerprint)` the target's bytes at that place are hashed
//! with the repository's fingerprint and compared. This checks what landed
//! on disk without reading the repository's data a second time (reading
//! and decoding the chunks again would cost as much as the restore), and
//! without assuming that chunking the target file again reproduces the
//! stored boundaries (a chunker's settings or a trace-made snapshot need
//! not). A fingerprint match is the same evidence that deduplication
//! already trusts.
//!
//! Every selected file is checked, whether this restore wrote it or left an
//! existing one in place (`--overwrite never`, `if-changed`): the question
//! is whether the target now holds the snapshot. Ownership is not compared
//! (only root can restore it). Directories and symlinks are not compared.

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use cairn_core::Result;
use cairn_format::dir::{DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use serde::Serialize;

use super::select::{Plan, RestoreSelection, Scope};
use super::start::Start;
use crate::long_path::Dirs;
use crate::progress::Progress;
use crate::read::{join, plan, Reader};

/// What a verification found.
#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    /// Regular files compared.
    pub files: u64,
    /// Their bytes read back.
    pub bytes: u64,
    /// One line per file that differs: `path: what differs`.
    pub mismatches: Vec<String>,
}

struct Run<'a> {
    plan: &'a Plan<'a>,
    progress: &'a Progress,
    report: VerifyReport,
    buf: Vec<u8>,
    /// Reaches files deeper than the kernel takes whole.
    dirs: Dirs,
}

impl Reader {
    /// Compares the files `sel` takes of `snap` with those under `root`.
    /// Mismatches are reported, not returned as errors; `Err` only if the
    /// snapshot itself cannot be read.
    pub fn verify(
        &mut self,
        snap: &SnapshotRecord,
        root: &Path,
        sel: &RestoreSelection,
        progress: &Progress,
    ) -> Result<VerifyReport> {
        // From where the restore started: the root, or the subfolder whose
        // contents are the target's.
        let start = Start::read(self, snap, sel.root_path())?;
        let plan = Plan::new(self, snap, sel, &start)?;
        progress.set_totals(plan.files, plan.bytes);
        let entries = start.entries;
        let mut run = Run {
            plan: &plan,
            progress,
            report: VerifyReport::default(),
            buf: Vec::new(),
            dirs: Dirs::new(),
        };
        self.verify_children("", entries, root, plan.root(), &mut run);
        Ok(run.report)
    }

    fn verify_children(
        &mut self,
        prefix: &str,
        entries: Vec<DirEntry>,
        dir: &Path,
        scope: Scope,
        run: &mut Run,
    ) {
        for e in entries {
            let rel = join(prefix, &e.name);
            let s = run.plan.scope(&rel, scope);
            if s == Scope::Skip {
                continue;
            }
            let dest = dir.join(OsStr::from_bytes(&e.name));
            match e.kind {
                EntryKind::Dir => match self.children(&e) {
                    Ok(children) => self.verify_children(&rel, children, &dest, s, run),
                    Err(err) => run
                        .report
                        .mismatches
                        .push(format!("{}: listing unreadable: {err}", dest.display())),
                },
                EntryKind::File => {
                    run.progress.set_current(dest.display());
                    let reasons = self.verify_file(&e, &dest, run);
                    run.report.files += 1;
                    run.progress.files_done.fetch_add(1, Ordering::Relaxed);
                    if !reasons.is_empty() {
                        run.report.mismatches.push(format!(
                            "{}: {}",
                            dest.display(),
                            reasons.join("; ")
                        ));
                    }
                }
                EntryKind::Symlink | EntryKind::Socket => {}
                EntryKind::Fifo | EntryKind::CharDevice | EntryKind::BlockDevice => {
                    if let Some(why) = verify_special(&mut run.dirs, &e, &dest) {
                        run.report
                            .mismatches
                            .push(format!("{}: {why}", dest.display()));
                    }
                }
            }
        }
    }

    /// What differs between snapshot file `e` and the file at `dest`.
    fn verify_file(&mut self, e: &DirEntry, dest: &Path, run: &mut Run) -> Vec<String> {
        let m = match run.dirs.lstat(dest) {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return vec!["missing".into()],
            Err(err) => return vec![format!("cannot inspect: {err}")],
        };
        if !m.file_type().is_file() {
            return vec!["not a regular file".into()];
        }
        let mut reasons = Vec::new();
        if m.mode() & 0o7777 != e.mode & 0o7777 {
            reasons.push(format!(
                "mode {:04o}, the snapshot has {:04o}",
                m.mode() & 0o7777,
                e.mode & 0o7777
            ));
        }
        let want = (
            e.mtime_ns.div_euclid(1_000_000_000),
            e.mtime_ns.rem_euclid(1_000_000_000),
        );
        if (m.mtime(), m.mtime_nsec()) != want {
            reasons.push(format!(
                "mtime {}.{:09}, the snapshot has {}.{:09}",
                m.mtime(),
                m.mtime_nsec(),
                want.0,
                want.1
            ));
        }
        if m.len() != e.size {
            reasons.push(format!(
                "size {} bytes, the snapshot has {}",
                m.len(),
                e.size
            ));
        } else if let Some(why) = self.compare_content(e, dest, &m, run) {
            reasons.push(why);
        }
        reasons
    }

    /// Hashes the file's bytes at the snapshot's chunk boundaries; `None`
    /// if every chunk's fingerprint matches.
    fn compare_content(
        &mut self,
        e: &DirEntry,
        dest: &Path,
        m: &fs::Metadata,
        run: &mut Run,
    ) -> Option<String> {
        let blob = e.content.as_ref()?;
        let mut steps = std::mem::take(&mut self.steps);
        steps.clear();
        let r = plan::plan_blob(&self.store, self.meta.as_mut(), blob, &mut steps);
        let why = match r {
            Err(err) => Some(format!("cannot read its recipe: {err}")),
            Ok(()) => (|| {
                let mut f = match run.dirs.open(dest, nix::fcntl::OFlag::O_RDONLY, 0) {
                    Ok(f) => f,
                    Err(err) => return Some(format!("cannot open: {err}")),
                };
                // The path may have been swapped since the lstat.
                match f.metadata() {
                    Ok(fm) if fm.ino() == m.ino() && fm.dev() == m.dev() => {}
                    _ => return Some("replaced while being verified".into()),
                }
                for s in &steps {
                    run.buf.resize(s.size as usize, 0);
                    if let Err(err) = read_data(&mut f, e, s.offset, &mut run.buf) {
                        return Some(format!("cannot read at byte {}: {err}", s.offset));
                    }
                    run.report.bytes += s.size;
                    run.progress.bytes_done.fetch_add(s.size, Ordering::Relaxed);
                    if self.store.codec.fingerprint(&run.buf) != s.fp {
                        return Some(format!(
                            "content differs in bytes {}..{}",
                            s.offset,
                            s.offset + s.size
                        ));
                    }
                }
                match &e.extras.extents {
                    Some(ext) => holes_are_zero(&f, ext, e.size),
                    None => None,
                }
            })(),
        };
        self.steps = steps;
        why
    }
}

/// Reads content bytes `[offset, offset + buf.len())` of file `e` from
/// `f`: read in order, or for a sparse file at its extents' offsets.
fn read_data(f: &mut fs::File, e: &DirEntry, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let Some(ext) = &e.extras.extents else {
        return f.read_exact(buf);
    };
    let mut at = 0usize;
    for (off, len) in cairn_format::extras::logical_ranges(ext, offset, buf.len() as u64) {
        f.read_exact_at(&mut buf[at..at + len as usize], off)?;
        at += len as usize;
    }
    Ok(())
}

/// Whether the holes of a restored sparse file read as zeros: only the
/// data the file system reports inside them is read.
fn holes_are_zero(f: &fs::File, ext: &[cairn_format::dir::Extent], size: u64) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let found = crate::file_kinds::data_extents(f, size).unwrap_or_else(|| {
        vec![cairn_format::dir::Extent {
            offset: 0,
            len: size,
        }]
    });
    let mut buf = vec![0u8; 64 << 10];
    for d in found {
        // The parts of data region `d` outside every recorded extent.
        let mut pos = d.offset;
        let mut gaps = Vec::new();
        for x in ext
            .iter()
            .filter(|x| x.end() > d.offset && x.offset < d.end())
        {
            if x.offset > pos {
                gaps.push((pos, x.offset));
            }
            pos = pos.max(x.end());
        }
        if pos < d.end() {
            gaps.push((pos, d.end()));
        }
        for (mut lo, hi) in gaps {
            while lo < hi {
                let n = ((hi - lo) as usize).min(buf.len());
                if let Err(err) = f.read_exact_at(&mut buf[..n], lo) {
                    return Some(format!("cannot read at byte {lo}: {err}"));
                }
                if buf[..n].iter().any(|&b| b != 0) {
                    return Some(format!("bytes in a hole near byte {lo} are not zero"));
                }
                lo += n as u64;
            }
        }
    }
    None
}

/// What differs between FIFO or device `e` and what is at `dest`.
fn verify_special(dirs: &mut Dirs, e: &DirEntry, dest: &Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let m = match dirs.lstat(dest) {
        Ok(m) => m,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Some("missing".into()),
        Err(err) => return Some(format!("cannot inspect: {err}")),
    };
    let ft = m.file_type();
    let same_kind = match e.kind {
        EntryKind::Fifo => ft.is_fifo(),
        EntryKind::CharDevice => ft.is_char_device(),
        _ => ft.is_block_device(),
    };
    if !same_kind {
        return Some(format!("not a {}", e.kind.name()));
    }
    if e.kind.is_device() && Some(m.rdev()) != e.extras.rdev {
        return Some(format!("device number {:#x} differs", m.rdev()));
    }
    if m.mode() & 0o7777 != e.mode & 0o7777 {
        return Some(format!(
            "mode {:04o}, the snapshot has {:04o}",
            m.mode() & 0o7777,
            e.mode & 0o7777
        ));
    }
    None
}
