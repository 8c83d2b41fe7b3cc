//! Streaming: cut any `Read` into batches of complete chunks.
//!
//! A [`ChunkReader`] owns one look-ahead buffer of at least four maximum chunk
//! sizes (and at least 1 MiB), allocated once. Before each boundary search it
//! makes sure at least `max_size()` unconsumed bytes are buffered (or the
//! input has ended), so the chunker can always decide; it compacts the buffer
//! (moving the < `max_size()` unconsumed bytes to the front) only when the
//! space left after the read position cannot hold `max_size()` bytes, so the
//! copying is bounded by a third of the input. Short reads and
//! `ErrorKind::Interrupted` are handled.
//!
//! Chunks are delivered in caller-owned, reused [`ChunkBatch`]es: one byte
//! vector holding the chunks back to back plus their end offsets, so a batch
//! of hundreds of chunks costs no allocation once the vectors have grown.
//! Cut points are those of the chunker on the whole input: chunkers are
//! stateless between chunks and always see `max_size()` bytes of look-ahead,
//! so the split into reads cannot change them (a property test checks this).

use std::io::{self, ErrorKind, Read};

use cairn_core::Chunker;

/// Complete chunks stored back to back: chunk `i` is
/// `data[ends[i - 1]..ends[i]]` (with `ends[-1] = 0`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkBatch {
    pub data: Vec<u8>,
    pub ends: Vec<usize>,
}

impl ChunkBatch {
    pub fn new() -> Self {
        ChunkBatch::default()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Chunk `i`; panics if `i >= len()`.
    pub fn chunk(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }

    /// The chunks in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(s, e)| &self.data[s..e])
    }

    /// Total bytes of all chunks.
    pub fn bytes(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Appends one chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        self.data.extend_from_slice(chunk);
        self.ends.push(self.data.len());
    }
}

/// Cuts a `Read` into chunks, a batch at a time.
pub struct ChunkReader<R: Read> {
    reader: R,
    chunker: Box<dyn Chunker>,
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    eof: bool,
    target: usize,
    bytes_read: u64,
}

impl<R: Read> ChunkReader<R> {
    /// A reader delivering batches of about `target_batch_bytes` (at least one
    /// chunk each).
    pub fn new(reader: R, chunker: Box<dyn Chunker>, target_batch_bytes: usize) -> Self {
        Self::with_buffer(reader, chunker, target_batch_bytes, Vec::new())
    }

    /// Like [`new`](Self::new), reusing `buf` (from [`into_buffer`](Self::into_buffer)
    /// of an earlier reader) as the look-ahead buffer: a walk over many
    /// small files then allocates and zeroes one buffer, not one per file.
    pub fn with_buffer(
        reader: R,
        chunker: Box<dyn Chunker>,
        target_batch_bytes: usize,
        mut buf: Vec<u8>,
    ) -> Self {
        let cap = chunker.max_size().saturating_mul(4).max(1 << 20);
        buf.resize(cap, 0);
        ChunkReader {
            reader,
            chunker,
            buf,
            start: 0,
            end: 0,
            eof: false,
            target: target_batch_bytes,
            bytes_read: 0,
        }
    }

    /// Clears `batch` and fills it with the next complete chunks (at least
    /// one, about `target_batch_bytes` in total: it stops after the chunk that
    /// reaches the target). Returns `Ok(false)` with an empty batch at end of
    /// input.
    pub fn next_batch(&mut self, batch: &mut ChunkBatch) -> io::Result<bool> {
        batch.clear();
        loop {
            self.fill()?;
            let avail = &self.buf[self.start..self.end];
            if avail.is_empty() {
                break;
            }
            let n = match self.chunker.next_boundary(avail, self.eof) {
                Some(n) if n > 0 && n <= avail.len() => n,
                other => {
                    return Err(io::Error::other(format!(
                        "chunker returned {other:?} for {} bytes (eof {})",
                        avail.len(),
                        self.eof
                    )))
                }
            };
            batch.push(&avail[..n]);
            self.start += n;
            if batch.bytes() >= self.target {
                break;
            }
        }
        Ok(!batch.is_empty())
    }

    /// Bytes read from the underlying reader so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Gives back the underlying reader (buffered bytes are lost).
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// Gives back the look-ahead buffer for the next reader.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// Ensures `max_size()` unconsumed bytes are buffered, or eof is reached.
    fn fill(&mut self) -> io::Result<()> {
        let need = self.chunker.max_size();
        if self.eof || self.end - self.start >= need {
            return Ok(());
        }
        if self.buf.len() - self.start < need {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < need {
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.end += n;
                    self.bytes_read += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Chunks a whole in-memory buffer: clears `out` and pushes the end offset of
/// every chunk (the last is `data.len()`; nothing for empty `data`).
pub fn cut_points(chunker: &mut dyn Chunker, data: &[u8], out: &mut Vec<usize>) {
    out.clear();
    let mut pos = 0;
    while pos < data.len() {
        let n = chunker
            .next_boundary(&data[pos..], true)
            .expect("a chunker always cuts non-empty data at eof");
        assert!(
            n > 0 && n <= data.len() - pos,
            "chunker returned an out-of-range length"
        );
        pos += n;
        out.push(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{random_bytes, ShortReader};
    use crate::{FastCdcChunker, FixedChunker};

    #[test]
    fn batch_accessors() {
        let mut b = ChunkBatch::new();
        assert!(b.is_empty());
        assert_eq!(b.bytes(), 0);
        b.push(b"abc");
        b.push(b"de");
        b.push(b"");
        b.push(b"f");
        assert_eq!(b.len(), 4);
        assert_eq!(b.chunk(0), b"abc");
        assert_eq!(b.chunk(1), b"de");
        assert_eq!(b.chunk(3), b"f");
        let all: Vec<&[u8]> = b.iter().collect();
        assert_eq!(all, [&b"abc"[..], b"de", b"", b"f"]);
        assert_eq!(b.bytes(), 6);
        b.clear();
        assert!(b.is_empty() && b.data.is_empty());
    }

    #[test]
    fn reader_batches_and_eof() {
        let data = random_bytes(7, 300_000);
        let mut r = ChunkReader::new(&data[..], Box::new(FixedChunker::new(1000)), 10_000);
        let mut b = ChunkBatch::new();
        let mut total = 0;
        let mut batches = 0;
        while r.next_batch(&mut b).unwrap() {
            assert!(!b.is_empty());
            assert!(b.bytes() >= 10_000 || total + b.bytes() == data.len());
            assert_eq!(&data[total..total + b.bytes()], &b.data[..]);
            total += b.bytes();
            batches += 1;
        }
        assert!(b.is_empty());
        assert_eq!(total, data.len());
        assert_eq!(batches, 30);
        assert_eq!(r.bytes_read(), data.len() as u64);
        assert!(!r.next_batch(&mut b).unwrap());
    }

    #[test]
    fn empty_input_gives_no_batch() {
        let mut r = ChunkReader::new(&[][..], Box::new(FixedChunker::new(10)), 0);
        let mut b = ChunkBatch::new();
        b.push(b"stale");
        assert!(!r.next_batch(&mut b).unwrap());
        assert!(b.is_empty());
    }

    #[test]
    fn errors_propagate_and_interrupts_retry() {
        let data = random_bytes(8, 50_000);
        let reader = ShortReader::new(&data, 9, 700).interrupting();
        let mut r = ChunkReader::new(reader, Box::new(FastCdcChunker::new(256, 1024, 4096)), 0);
        let mut b = ChunkBatch::new();
        let mut out = Vec::new();
        while r.next_batch(&mut b).unwrap() {
            assert_eq!(b.len(), 1);
            out.extend_from_slice(&b.data);
        }
        assert_eq!(out, data);

        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(ErrorKind::PermissionDenied, "nope"))
            }
        }
        let mut r = ChunkReader::new(Failing, Box::new(FixedChunker::new(10)), 0);
        let e = r.next_batch(&mut b).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    }
}
