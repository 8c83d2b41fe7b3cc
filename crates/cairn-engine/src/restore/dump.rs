//! `cairn dump`: one entry of a snapshot to a byte stream. A regular file is
//! written as its bytes; a directory (or the whole snapshot) as a tar
//! archive of its subtree, built with the `tar` crate: one entry per
//! directory, file and symlink, named by its snapshot path (`tree/docs/a`,
//! so extracting it anywhere recreates the snapshot's layout), with its
//! permission bits, owner ids and mtime. Names too long for the header go in
//! GNU long-name records (the crate's); an mtime with a fraction of a second
//! or before 1970 also goes in a pax `mtime` record ahead of the entry, which
//! GNU tar and bsdtar restore to the nanosecond.
//!
//! File data is streamed chunk by chunk (verified, through the restore
//! policy) into the archive after a header that already holds the recorded
//! size; a file whose chunks do not add up to that size fails the dump
//! rather than leave a misaligned archive.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use cairn_core::error::IoContext;
use cairn_core::{Error, Result};
use cairn_format::dir::{DirEntry, EntryKind};
use cairn_format::snapshot::SnapshotRecord;
use tar::{Builder, EntryType, Header};

use crate::read::Reader;

/// What `dump` wrote.
#[derive(Debug, PartialEq, Eq)]
pub enum Dumped {
    /// The bytes of one file.
    File { bytes: u64 },
    /// A tar archive of this many entries.
    Tar { entries: u64 },
}

const TAR_BLOCK: u64 = 512;

impl Reader {
    /// Writes the entry at `path` (`""` or `/`: the whole snapshot) to `out`:
    /// a file's bytes, or a tar archive of a directory.
    pub fn dump(
        &mut self,
        snap: &SnapshotRecord,
        path: &str,
        out: &mut dyn Write,
    ) -> Result<Dumped> {
        let (prefix, entries) = match self.find_named(snap, path)? {
            None => (PathBuf::new(), self.root_entries(snap)?),
            Some((_, e)) if e.kind == EntryKind::File => {
                let n = self.for_each_logical(&e, &mut |c| {
                    out.write_all(c).ctx(|| "writing to standard output".into())
                })?;
                return Ok(Dumped::File { bytes: n });
            }
            Some((_, e)) if e.kind != EntryKind::Dir => {
                return Err(Error::invalid(format!(
                    "{path} is a {}; dump writes a file's bytes or a directory's archive",
                    e.kind.name()
                )))
            }
            Some((name, mut e)) => {
                let children = self.take_children(&mut e)?;
                let mut w = TarWriter::new(out);
                w.entry(self, &name, &e)?;
                self.dump_children(&name, children, &mut w)?;
                return w.finish();
            }
        };
        let mut w = TarWriter::new(out);
        self.dump_children(&prefix, entries, &mut w)?;
        w.finish()
    }

    fn dump_children(
        &mut self,
        prefix: &Path,
        entries: Vec<DirEntry>,
        w: &mut TarWriter,
    ) -> Result<()> {
        for mut e in entries {
            let name = prefix.join(OsStr::from_bytes(&e.name));
            if e.kind == EntryKind::Dir {
                let children = self.take_children(&mut e)?;
                w.entry(self, &name, &e)?;
                self.dump_children(&name, children, w)?;
            } else {
                w.entry(self, &name, &e)?;
            }
        }
        Ok(())
    }
}

struct TarWriter<'o> {
    tar: Builder<&'o mut dyn Write>,
    entries: u64,
    /// The first name archived of each hard-link group (device, inode):
    /// later names become tar link entries to it.
    links: std::collections::HashMap<(u64, u64), std::path::PathBuf>,
}

impl<'o> TarWriter<'o> {
    fn new(out: &'o mut dyn Write) -> Self {
        TarWriter {
            tar: Builder::new(out),
            entries: 0,
            links: Default::default(),
        }
    }

    fn finish(mut self) -> Result<Dumped> {
        self.tar.finish().ctx(|| "writing the archive".into())?;
        Ok(Dumped::Tar {
            entries: self.entries,
        })
    }

    /// Appends one entry; a file's content is read through `reader`.
    fn entry(&mut self, reader: &mut Reader, name: &Path, e: &DirEntry) -> Result<()> {
        let ctx = || format!("archiving {}", name.display());
        if e.kind == EntryKind::Socket {
            // tar has no socket type (GNU tar skips them too).
            return Ok(());
        }
        let mut h = Header::new_gnu();
        h.set_mode(e.mode & 0o7777);
        h.set_uid(e.uid.into());
        h.set_gid(e.gid.into());
        h.set_mtime(e.mtime_ns.div_euclid(1_000_000_000).max(0) as u64);
        h.set_size(0);
        if let Some(pax) = pax_mtime(e.mtime_ns) {
            let mut x = Header::new_ustar();
            x.set_entry_type(EntryType::XHeader);
            x.set_path("PaxHeaders/entry").ctx(ctx)?;
            x.set_size(pax.len() as u64);
            x.set_mode(0o644);
            x.set_cksum();
            self.tar.append(&x, pax.as_slice()).ctx(ctx)?;
        }
        // The hard-link group of a file recorded with one (and an inode).
        let group = e
            .extras
            .hard_link
            .filter(|_| e.inode != 0)
            .map(|l| (l.dev, e.inode));
        match e.kind {
            EntryKind::Dir => {
                h.set_entry_type(EntryType::Directory);
                self.tar
                    .append_data(&mut h, name, std::io::empty())
                    .ctx(ctx)?;
            }
            EntryKind::Symlink => {
                h.set_entry_type(EntryType::Symlink);
                let target = e.target.as_deref().unwrap_or_default();
                self.tar
                    .append_link(&mut h, name, OsStr::from_bytes(target))
                    .ctx(ctx)?;
            }
            EntryKind::Fifo
            | EntryKind::CharDevice
            | EntryKind::BlockDevice
            | EntryKind::Socket => {
                h.set_entry_type(match e.kind {
                    EntryKind::Fifo => EntryType::Fifo,
                    EntryKind::CharDevice => EntryType::Char,
                    _ => EntryType::Block,
                });
                if let Some(rdev) = e.extras.rdev {
                    h.set_device_major(nix::sys::stat::major(rdev) as u32)
                        .ctx(ctx)?;
                    h.set_device_minor(nix::sys::stat::minor(rdev) as u32)
                        .ctx(ctx)?;
                }
                self.tar
                    .append_data(&mut h, name, std::io::empty())
                    .ctx(ctx)?;
            }
            EntryKind::File if group.is_some_and(|g| self.links.contains_key(&g)) => {
                // A later name of a hard-linked file: a link to the first.
                let first = group.and_then(|g| self.links.get(&g)).cloned();
                h.set_entry_type(EntryType::Link);
                self.tar
                    .append_link(&mut h, name, first.unwrap_or_default())
                    .ctx(ctx)?;
            }
            EntryKind::File => {
                if let Some(g) = group {
                    self.links.insert(g, name.to_path_buf());
                }
                h.set_entry_type(EntryType::Regular);
                h.set_size(e.size);
                // The header with the recorded size, then the data as it is
                // read, then the padding to a whole block.
                self.tar
                    .append_data(&mut h, name, std::io::empty())
                    .ctx(ctx)?;
                let out = self.tar.get_mut();
                let mut n = 0u64;
                {
                    reader.for_each_logical(e, &mut |c| {
                        n += c.len() as u64;
                        if n > e.size {
                            return Err(Error::corrupt(
                                format!("file {}", name.display()),
                                format!("content longer than its recorded {} bytes", e.size),
                            ));
                        }
                        out.write_all(c).ctx(ctx)
                    })?;
                }
                if n != e.size {
                    return Err(Error::corrupt(
                        format!("file {}", name.display()),
                        format!("{n} bytes of content, {} recorded", e.size),
                    ));
                }
                let pad = (TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK;
                out.write_all(&[0u8; TAR_BLOCK as usize][..pad as usize])
                    .ctx(ctx)?;
            }
        }
        self.entries += 1;
        Ok(())
    }
}

/// A pax `mtime` record for an mtime the header cannot hold (a fraction of
/// a second, or before 1970); `None` when whole non-negative seconds.
fn pax_mtime(ns: i64) -> Option<Vec<u8>> {
    if ns >= 0 && ns % 1_000_000_000 == 0 {
        return None;
    }
    let abs = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    let value = format!("{sign}{}.{:09}", abs / 1_000_000_000, abs % 1_000_000_000);
    Some(pax_record("mtime", &value))
}

/// One pax record: `"<len> <key>=<value>\n"`, where `<len>` counts the
/// whole record including its own digits.
fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    format!("{len} {key}={value}\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_records_count_their_own_length() {
        for (k, v) in [("mtime", "1.5"), ("mtime", "1234567890.123456789")] {
            let r = pax_record(k, v);
            let s = String::from_utf8(r.clone()).unwrap();
            let n: usize = s.split(' ').next().unwrap().parse().unwrap();
            assert_eq!(n, r.len(), "{s:?}");
        }
        assert_eq!(pax_record("a", "bcd"), b"8 a=bcd\n".to_vec());
        // 9 + 1 digit would be 10, which has two digits: the length is 11.
        assert_eq!(pax_record("a", "bcdef"), b"11 a=bcdef\n".to_vec());
        assert_eq!(pax_mtime(2_000_000_000), None);
        assert_eq!(
            pax_mtime(-1_000_000_001),
            Some(pax_record("mtime", "-1.000000001"))
        );
    }
}
