//! One stream-map entry (docs/volume.md, "What a file's bytes are") and its
//! byte layout in the table (docs/FORMAT.md, "Volume").

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::UNIX_EPOCH;

use cairn_core::{Error, Fingerprint, Result};
use cairn_format::dir::BlobRef;

use crate::ranges::RangeSet;

/// Layout version of an encoded entry (its first byte).
const ENTRY_VERSION: u8 = 1;
/// Flag bit: the identity's birth time is known.
const FLAG_BIRTH: u8 = 1;
/// Flag bit: the switch's times are recorded, not yet known restored.
const FLAG_TIMES: u8 = 2;

/// Which file an entry belongs to: its inode number and, where the file
/// system records one, its birth time, so a file that later gets the same
/// inode number is never read through the old file's stream map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub ino: u64,
    /// Nanoseconds since the epoch (`statx`'s `stx_btime`); `None` where
    /// the file system does not report it.
    pub birth_ns: Option<i64>,
}

impl Identity {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> Self {
        let birth_ns = meta
            .created()
            .ok()
            .map(|t| match t.duration_since(UNIX_EPOCH) {
                Ok(d) => d.as_nanos() as i64,
                Err(e) => -(e.duration().as_nanos() as i64),
            });
        Identity {
            ino: meta.ino(),
            birth_ns,
        }
    }
}

/// An optimized file: its bytes are `blob`'s below `valid` outside the
/// `recalled` ranges, and the backing file's everywhere else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub identity: Identity,
    /// The stream map: the file's recipe in the chunk store.
    pub blob: BlobRef,
    /// Leading bytes of `blob` that still belong to the file; never above
    /// `blob.size` (a truncate lowers it, nothing raises it).
    pub valid: u64,
    /// Ranges written since the switch: the backing file's bytes. Always
    /// inside `[0, valid)` (ranges past `valid` are the backing file's anyway).
    pub recalled: RangeSet,
    /// The file's access and modification times (ns since the epoch) when
    /// it was switched, while the switch has not yet put them back after
    /// its punch: recovery puts them back (docs/volume.md, step 6).
    pub times_pending: Option<FileTimes>,
}

/// A file's access and modification times, ns since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTimes {
    pub atime_ns: i64,
    pub mtime_ns: i64,
}

impl Entry {
    /// A freshly switched file: all of `blob` valid, nothing recalled.
    pub fn new(identity: Identity, blob: BlobRef) -> Self {
        Entry {
            identity,
            blob,
            valid: blob.size,
            recalled: RangeSet::new(),
            times_pending: None,
        }
    }

    /// Whether no byte comes from the stream map any more: every byte of
    /// `[0, valid)` was recalled (or `valid` is 0), so the file is plain.
    pub fn is_spent(&self) -> bool {
        self.recalled.covers(0, self.valid)
    }

    /// Lowers `valid` to `len` (the backing file's length) and drops
    /// recalled ranges past it.
    pub fn clip(&mut self, len: u64) {
        self.valid = self.valid.min(len);
        self.recalled.clip(self.valid);
    }

    /// The entry's bytes in the table: docs/FORMAT.md, "Volume".
    pub fn encode(&self) -> Vec<u8> {
        let fp = self.blob.root.as_bytes();
        let ranges = self.recalled.ranges();
        let mut out = Vec::with_capacity(44 + fp.len() + 16 * ranges.len());
        out.push(ENTRY_VERSION);
        let mut flags = 0;
        if self.identity.birth_ns.is_some() {
            flags |= FLAG_BIRTH;
        }
        if self.times_pending.is_some() {
            flags |= FLAG_TIMES;
        }
        out.push(flags);
        out.push(self.blob.level);
        out.push(fp.len() as u8);
        out.extend_from_slice(fp);
        out.extend_from_slice(&self.blob.size.to_le_bytes());
        out.extend_from_slice(&self.valid.to_le_bytes());
        out.extend_from_slice(&self.identity.ino.to_le_bytes());
        out.extend_from_slice(&self.identity.birth_ns.unwrap_or(0).to_le_bytes());
        if let Some(t) = self.times_pending {
            out.extend_from_slice(&t.atime_ns.to_le_bytes());
            out.extend_from_slice(&t.mtime_ns.to_le_bytes());
        }
        out.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
        for &(s, e) in ranges {
            out.extend_from_slice(&s.to_le_bytes());
            out.extend_from_slice(&e.to_le_bytes());
        }
        out
    }

    /// Decodes [`Entry::encode`]'s bytes, checking every rule the encoder
    /// keeps (a damaged table is an error, never a wrong file).
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::corrupt("stream-map entry", why);
        let mut r = Reader(bytes);
        if r.u8()? != ENTRY_VERSION {
            return Err(bad("unknown entry version"));
        }
        let flags = r.u8()?;
        if flags & !(FLAG_BIRTH | FLAG_TIMES) != 0 {
            return Err(bad("unknown flags"));
        }
        let level = r.u8()?;
        let fp_len = r.u8()? as usize;
        if fp_len == 0 || fp_len > cairn_core::MAX_FINGERPRINT_LEN {
            return Err(bad("fingerprint length out of range"));
        }
        let root = Fingerprint::from_slice(r.take(fp_len)?);
        let size = r.u64()?;
        let valid = r.u64()?;
        let ino = r.u64()?;
        let birth = r.u64()? as i64;
        let times_pending = if flags & FLAG_TIMES != 0 {
            Some(FileTimes {
                atime_ns: r.u64()? as i64,
                mtime_ns: r.u64()? as i64,
            })
        } else {
            None
        };
        let n = r.u32()? as usize;
        let mut ranges = Vec::with_capacity(n.min(bytes.len() / 16));
        for _ in 0..n {
            ranges.push((r.u64()?, r.u64()?));
        }
        if !r.0.is_empty() {
            return Err(bad("trailing bytes"));
        }
        if valid > size {
            return Err(bad("valid past the stream map's end"));
        }
        let recalled = RangeSet::from_ranges(ranges.iter().copied());
        if recalled.ranges() != ranges.as_slice() || ranges.last().is_some_and(|r| r.1 > valid) {
            return Err(bad("recalled ranges not sorted, merged and below valid"));
        }
        Ok(Entry {
            identity: Identity {
                ino,
                birth_ns: (flags & FLAG_BIRTH != 0).then_some(birth),
            },
            blob: BlobRef { root, level, size },
            valid,
            recalled,
            times_pending,
        })
    }
}

/// A cursor over an entry's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::corrupt("stream-map entry", "truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Entry {
        let mut e = Entry::new(
            Identity {
                ino: 0x0102,
                birth_ns: Some(7),
            },
            BlobRef {
                root: Fingerprint::from_slice(&[0xab; 4]),
                level: 2,
                size: 300,
            },
        );
        e.valid = 200;
        e.recalled.insert(16, 32);
        e
    }

    /// The layout of docs/FORMAT.md, byte for byte.
    #[test]
    fn golden_bytes() {
        let bytes = sample().encode();
        let want: Vec<u8> = [
            &[1u8, 1, 2, 4][..],
            &[0xab; 4],
            &300u64.to_le_bytes(),
            &200u64.to_le_bytes(),
            &0x0102u64.to_le_bytes(),
            &7u64.to_le_bytes(),
            &1u32.to_le_bytes(),
            &16u64.to_le_bytes(),
            &32u64.to_le_bytes(),
        ]
        .concat();
        assert_eq!(bytes, want);
        assert_eq!(Entry::decode(&bytes).unwrap(), sample());
    }

    /// Flag bit 1: the pending times follow the birth time.
    #[test]
    fn golden_bytes_with_pending_times() {
        let mut e = sample();
        e.identity.birth_ns = None;
        e.times_pending = Some(FileTimes {
            atime_ns: -1,
            mtime_ns: 9,
        });
        let bytes = e.encode();
        let want: Vec<u8> = [
            &[1u8, 2, 2, 4][..],
            &[0xab; 4],
            &300u64.to_le_bytes(),
            &200u64.to_le_bytes(),
            &0x0102u64.to_le_bytes(),
            &0u64.to_le_bytes(),
            &(-1i64).to_le_bytes(),
            &9i64.to_le_bytes(),
            &1u32.to_le_bytes(),
            &16u64.to_le_bytes(),
            &32u64.to_le_bytes(),
        ]
        .concat();
        assert_eq!(bytes, want);
        assert_eq!(Entry::decode(&bytes).unwrap(), e);
    }

    #[test]
    fn damaged_entries_are_refused() {
        let good = sample().encode();
        for cut in 0..good.len() {
            assert!(Entry::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut past_valid = good.clone();
        // valid (bytes 16..24 after a 4-byte fingerprint) above size 300.
        past_valid[16..24].copy_from_slice(&301u64.to_le_bytes());
        assert!(Entry::decode(&past_valid).is_err());
        let mut unmerged = sample();
        unmerged.recalled = RangeSet::new();
        let mut bytes = unmerged.encode();
        bytes.truncate(bytes.len() - 4);
        bytes.extend_from_slice(&2u32.to_le_bytes());
        for (s, e) in [(0u64, 8u64), (8, 16)] {
            bytes.extend_from_slice(&s.to_le_bytes());
            bytes.extend_from_slice(&e.to_le_bytes());
        }
        assert!(Entry::decode(&bytes).is_err(), "touching ranges unmerged");
    }
}
