//! FSL hashfiles, versions 5, 6 and 7.
//!
//! The binary traces of the FSL trace sets (Homes, MacOS snapshots) as the
//! FSL `libhashfile` library (Tarasov et al., Stony Brook FSL, GPLv3; files
//! `libhashfile.h`, `libhashfile.c`, and the `fs-hasher` tool that writes
//! them) defines them. What this reader relies on, learned from those sources
//! (no code taken):
//!
//! - Everything is little-endian and `__attribute__((packed))`.
//! - Header (`struct header_v4`, used by v5..v7) is 8296 bytes: magic
//!   `0xDEADDEAD` u32, version u32, file count u64, root path char[4096],
//!   chunk count u64, chunking method u32 (1 fixed, 2 variable), a 44-byte
//!   union of chunking parameters (fixed: chunk size u32; variable: algorithm
//!   u32 (1 random, 2 simple, 3 Rabin), a 32-byte union of per-algorithm
//!   parameters, min and max chunk size u32), hashing method u32, hash size
//!   in bits u32, system id char[4096], start and end time u64 (seconds),
//!   total bytes u64. (`docs/traces.md` lists every offset.)
//! - Each file is a 96-byte `struct file_header_v4` (size, 512-byte blocks,
//!   uid u32, gid u32, mode u64, atime, mtime, ctime (seconds), hard links,
//!   device, inode, chunk count u64, path length u32, link-target length
//!   u32), then the path (not NUL-terminated), then the link target; the
//!   writer stores a target only for symlinks (`S_ISLNK`), with its length,
//!   and `fs-hasher` records no chunks for symlinks.
//! - Chunk records follow the file header. With variable chunking: v5 `u64
//!   size | hash`, v6 `u64 size | hash | u8 cratio`, v7 `u32 size | hash | u8
//!   cratio`. With fixed chunking no size is stored: every chunk is the
//!   configured size except the last, which is `file size − (n−1) × chunk
//!   size`, capped at the chunk size (libhashfile's rule, kept here).
//! - The hash is `hash size / 8` bytes (48-bit MD5 prefixes in the public
//!   traces, so 6-byte fingerprints).
//! - `cratio` is the chunk's compression ratio in tenths: `fs-hasher`
//!   computes `floor(10 × raw / zlib-compressed)` saturated at 255, and
//!   writes 10 when compression is off (`hf-stat` prints the byte as
//!   "Compression Ratio (tenth)"); 0 means unknown (v5 files read as 0).
//!   So `stored_size = min(size, floor(10 × size / cratio))` (at least 1 for
//!   a non-empty chunk) when `cratio > 10`, and `stored_size = size` when
//!   `cratio` is 0 or at most 10 (a store keeps incompressible chunks raw).
//! - The header's file and chunk counts are rewritten when the writer
//!   closes; libhashfile stops after `files` files. This reader also
//!   requires the per-file chunk counts to sum to the header's chunk count
//!   and no bytes after the last file, so a truncated or unclosed hashfile
//!   is an error rather than a shorter trace.
//!
//! Mapping: `FileStart { name: path, meta }` with `meta` = mode, uid, gid,
//! mtime (seconds × 10⁹, saturating) and the recorded size, the chunks,
//! `FileEnd`; a symlink (`S_ISLNK(mode)` or a non-empty target) is one
//! `Symlink { name, meta, target }` event. Errors are `Error::Corrupt { what:
//! <name>, detail }` with the byte offset and the file/chunk number (1-based)
//! in `detail`.

use std::io::Read;

use cairn_core::{Error, Fingerprint, Result, TraceChunk, TraceEvent, TraceMeta, TraceSource};

use super::{read_error, show_bytes, ByteStream, MAX_NAME_LEN};

/// `0xDEADDEAD`, little-endian, at offset 0.
pub const FSL_MAGIC: u32 = 0xDEAD_DEAD;
/// Size of the v5..v7 header (`struct header_v4`).
pub const FSL_HEADER_LEN: usize = 8296;
/// Size of the v5..v7 per-file header (`struct file_header_v4`).
pub const FSL_FILE_HEADER_LEN: usize = 96;
/// Length of the root path and system id fields.
const FSL_STR_LEN: usize = 4096;

const S_IFMT: u32 = 0o170_000;
const S_IFLNK: u32 = 0o120_000;

/// The chunking recorded in an FSL header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FslChunking {
    /// Fixed-size chunks; sizes are not stored per chunk.
    Fixed { chunk_size: u32 },
    /// Content-defined chunks (`algo`: 1 random, 2 simple match, 3 Rabin).
    Variable {
        algo: u32,
        min_size: u32,
        max_size: u32,
    },
}

/// The global header of an FSL hashfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FslHeader {
    pub version: u32,
    pub files: u64,
    pub chunks: u64,
    /// Where the scan started (NUL padding removed).
    pub root_path: Vec<u8>,
    pub chunking: FslChunking,
    /// 1 MD5, 2 SHA-256, 3 MD5-48, 4 Murmur, 5 MD5-64, 6 SHA-1.
    pub hash_method: u32,
    pub hash_bits: u32,
    /// `uname` of the scanning host (NUL padding removed).
    pub sysid: Vec<u8>,
    pub start_time: u64,
    pub end_time: u64,
    /// Sum of the chunk sizes as the writer counted them.
    pub bytes: u64,
}

impl FslHeader {
    /// Fingerprint width in bytes.
    pub fn hash_len(&self) -> usize {
        (self.hash_bits / 8) as usize
    }
}

/// The file whose chunks are being read.
struct CurrentFile {
    /// 1-based, for messages.
    index: u64,
    chunks: u64,
    done: u64,
    size: u64,
}

enum State {
    BetweenFiles,
    InFile(CurrentFile),
    Done,
}

/// Streams an FSL hashfile (v5..v7) as [`TraceEvent`]s.
pub struct FslReader<R> {
    src: ByteStream<R>,
    name: String,
    header: FslHeader,
    files_read: u64,
    chunks_read: u64,
    state: State,
    /// The message of the error that stopped reading, repeated afterwards.
    failed: Option<String>,
}

fn le_u32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// A NUL-padded C string field without its padding.
fn c_string(b: &[u8]) -> Vec<u8> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    b[..end].to_vec()
}

impl<R: Read> FslReader<R> {
    /// Reads and checks the header of an FSL hashfile; `name` names it in
    /// messages.
    pub fn new(r: R, name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let mut src = ByteStream::new(r, false);
        let mut h = vec![0u8; FSL_HEADER_LEN];
        let got = src.read_full(&mut h).map_err(|e| read_error(&name, e))?;
        let corrupt = |d: String| Error::corrupt(name.clone(), d);
        if got < 8 {
            return Err(corrupt(format!(
                "truncated header at byte {got}: {FSL_HEADER_LEN} bytes needed"
            )));
        }
        let magic = le_u32(&h, 0);
        if magic != FSL_MAGIC {
            return Err(corrupt(format!(
                "bad magic {magic:#010x} at byte 0 (an FSL hashfile starts with 0xdeaddead)"
            )));
        }
        let version = le_u32(&h, 4);
        match version {
            5..=7 => {}
            0 => return Err(corrupt("version 0 at byte 4".into())),
            1..=4 => {
                return Err(Error::invalid(format!(
                    "{name}: FSL hashfile version {version} is not supported \
                     (this reader handles versions 5, 6 and 7)"
                )))
            }
            _ => {
                return Err(Error::UnsupportedVersion {
                    what: format!("FSL hashfile {name}"),
                    found: version,
                    supported: 7,
                })
            }
        }
        if got < FSL_HEADER_LEN {
            return Err(corrupt(format!(
                "truncated header at byte {got}: {FSL_HEADER_LEN} bytes needed"
            )));
        }
        let params = 4124;
        let chunking = match le_u32(&h, 4120) {
            1 => {
                let chunk_size = le_u32(&h, params);
                if chunk_size == 0 {
                    return Err(corrupt(format!(
                        "fixed chunking with chunk size 0 at byte {params}"
                    )));
                }
                FslChunking::Fixed { chunk_size }
            }
            2 => FslChunking::Variable {
                algo: le_u32(&h, params),
                min_size: le_u32(&h, params + 36),
                max_size: le_u32(&h, params + 40),
            },
            m => {
                return Err(corrupt(format!(
                    "unknown chunking method {m} at byte 4120 (1 fixed, 2 variable)"
                )))
            }
        };
        let hash_bits = le_u32(&h, 4172);
        if !(8..=256).contains(&hash_bits) || hash_bits & 7 != 0 {
            return Err(corrupt(format!(
                "hash size {hash_bits} bits at byte 4172 is not a whole number of bytes in 1..=32"
            )));
        }
        let header = FslHeader {
            version,
            files: le_u64(&h, 8),
            root_path: c_string(&h[16..16 + FSL_STR_LEN]),
            chunks: le_u64(&h, 4112),
            chunking,
            hash_method: le_u32(&h, 4168),
            hash_bits,
            sysid: c_string(&h[4176..4176 + FSL_STR_LEN]),
            start_time: le_u64(&h, 8272),
            end_time: le_u64(&h, 8280),
            bytes: le_u64(&h, 8288),
        };
        Ok(FslReader {
            src,
            name,
            header,
            files_read: 0,
            chunks_read: 0,
            state: State::BetweenFiles,
            failed: None,
        })
    }

    /// The hashfile's global header.
    pub fn header(&self) -> &FslHeader {
        &self.header
    }

    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::corrupt(self.name.clone(), detail)
    }

    /// Reads exactly `buf.len()` bytes or reports `what` as truncated.
    fn read_exact(&mut self, buf: &mut [u8], what: impl FnOnce() -> String) -> Result<()> {
        let start = self.src.offset();
        let got = self
            .src
            .read_full(buf)
            .map_err(|e| read_error(&self.name, e))?;
        if got < buf.len() {
            return Err(self.corrupt(format!(
                "truncated in {} at byte {}: {} bytes from byte {start} needed, {got} present",
                what(),
                start + got as u64,
                buf.len()
            )));
        }
        Ok(())
    }

    fn read_name(&mut self, len: u32, what: &str, file: u64, header_at: u64) -> Result<Vec<u8>> {
        if len as usize > MAX_NAME_LEN {
            return Err(self.corrupt(format!(
                "{what} length {len} of file {file} (header at byte {header_at}) exceeds the \
                 limit of {MAX_NAME_LEN} bytes"
            )));
        }
        let mut v = vec![0u8; len as usize];
        self.read_exact(&mut v, || format!("the {what} of file {file}"))?;
        Ok(v)
    }

    fn next_file(&mut self) -> Result<Option<TraceEvent>> {
        self.state = State::BetweenFiles;
        if self.files_read == self.header.files {
            return self.finish();
        }
        let index = self.files_read + 1;
        let at = self.src.offset();
        let mut fh = [0u8; FSL_FILE_HEADER_LEN];
        let files = self.header.files;
        self.read_exact(&mut fh, || format!("the header of file {index} of {files}"))?;
        self.files_read = index;
        let size = le_u64(&fh, 0);
        let uid = le_u32(&fh, 16);
        let gid = le_u32(&fh, 20);
        let mode = le_u64(&fh, 24);
        let mtime = le_u64(&fh, 40);
        let chunks = le_u64(&fh, 80);
        let path_len = le_u32(&fh, 88);
        let target_len = le_u32(&fh, 92);
        let Ok(mode) = u32::try_from(mode) else {
            return Err(self.corrupt(format!(
                "file {index} (header at byte {at}) has mode {mode:#x}, beyond 32 bits"
            )));
        };
        let remaining = self.header.chunks - self.chunks_read;
        if chunks > remaining {
            return Err(self.corrupt(format!(
                "file {index} (header at byte {at}) has {chunks} chunks but the hashfile header \
                 leaves {remaining} of {}",
                self.header.chunks
            )));
        }
        let path = self.read_name(path_len, "path", index, at)?;
        let target = self.read_name(target_len, "link target", index, at)?;
        let meta = TraceMeta {
            mode,
            uid,
            gid,
            // `time_t` stored in a u64: reinterpret, then scale saturating.
            mtime_ns: (mtime as i64).saturating_mul(1_000_000_000),
            size,
        };
        if mode & S_IFMT == S_IFLNK || !target.is_empty() {
            if chunks != 0 {
                return Err(self.corrupt(format!(
                    "symlink `{}` (file {index}, header at byte {at}) has {chunks} chunks",
                    show_bytes(&path)
                )));
            }
            return Ok(Some(TraceEvent::Symlink {
                name: path,
                meta,
                target,
            }));
        }
        self.state = State::InFile(CurrentFile {
            index,
            chunks,
            done: 0,
            size,
        });
        Ok(Some(TraceEvent::FileStart { name: path, meta }))
    }

    fn next_chunk(&mut self, mut f: CurrentFile) -> Result<Option<TraceEvent>> {
        if f.done == f.chunks {
            self.state = State::BetweenFiles;
            return Ok(Some(TraceEvent::FileEnd));
        }
        let v = self.header.version;
        let hash_len = self.header.hash_len();
        let size_len = match self.header.chunking {
            FslChunking::Fixed { .. } => 0,
            FslChunking::Variable { .. } if v >= 7 => 4,
            FslChunking::Variable { .. } => 8,
        };
        let ratio_len = usize::from(v >= 6);
        let mut rec = [0u8; 8 + 32 + 1];
        let rec = &mut rec[..size_len + hash_len + ratio_len];
        let at = self.src.offset();
        let (c, i) = (f.done + 1, f.index);
        self.read_exact(rec, || format!("chunk {c} of file {i}"))?;
        let size = match (size_len, &self.header.chunking) {
            (4, _) => u64::from(le_u32(rec, 0)),
            (8, _) => le_u64(rec, 0),
            (_, FslChunking::Fixed { chunk_size }) => {
                let cs = u64::from(*chunk_size);
                if f.done + 1 < f.chunks {
                    cs
                } else {
                    // libhashfile: the tail, or a full chunk if the recorded
                    // size is too small (unsigned underflow) or too large.
                    (f.done)
                        .checked_mul(cs)
                        .and_then(|before| f.size.checked_sub(before))
                        .map_or(cs, |tail| tail.min(cs))
                }
            }
            (_, FslChunking::Variable { .. }) => 0,
        };
        let Ok(size) = u32::try_from(size) else {
            return Err(self.corrupt(format!(
                "chunk {c} of file {i} (at byte {at}) has size {size}, beyond 32 bits"
            )));
        };
        let hash = &rec[size_len..size_len + hash_len];
        let cratio = if ratio_len == 1 {
            rec[rec.len() - 1]
        } else {
            0
        };
        let chunk = TraceChunk {
            fp: Fingerprint::from_slice(hash),
            size,
            stored_size: stored_size(size, cratio),
        };
        f.done += 1;
        self.chunks_read += 1;
        self.state = State::InFile(f);
        Ok(Some(TraceEvent::Chunk(chunk)))
    }

    /// After the last file: the chunk total must match and no bytes remain.
    fn finish(&mut self) -> Result<Option<TraceEvent>> {
        let at = self.src.offset();
        if self.chunks_read != self.header.chunks {
            return Err(self.corrupt(format!(
                "the files hold {} chunks but the header says {} (end of the last file at \
                 byte {at})",
                self.chunks_read, self.header.chunks
            )));
        }
        if !self.src.at_eof().map_err(|e| read_error(&self.name, e))? {
            return Err(self.corrupt(format!(
                "unexpected data at byte {at}, after the last of {} files",
                self.header.files
            )));
        }
        self.state = State::Done;
        Ok(None)
    }
}

/// Bytes after compression from FSL's compression ratio in tenths.
pub fn stored_size(size: u32, cratio: u8) -> u32 {
    if cratio <= 10 {
        return size;
    }
    let s = u64::from(size) * 10 / u64::from(cratio);
    // `s <= size` since cratio > 10; keep non-empty chunks non-empty.
    (s as u32).max(size.min(1))
}

impl<R: Read + Send> TraceSource for FslReader<R> {
    fn next_event(&mut self) -> Result<Option<TraceEvent>> {
        if let Some(msg) = &self.failed {
            return Err(super::after_error(&self.name, msg));
        }
        let r = match std::mem::replace(&mut self.state, State::Done) {
            State::BetweenFiles => self.next_file(),
            State::InFile(f) => self.next_chunk(f),
            State::Done => Ok(None),
        };
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
