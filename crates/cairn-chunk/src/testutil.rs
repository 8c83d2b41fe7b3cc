//! Test helpers: deterministic random bytes and a reader with random short
//! reads.

use std::io::{self, ErrorKind, Read};

use cairn_core::rng::SplitMix64;

/// The workspace's deterministic generator (`cairn_core::rng`), with a
/// range helper.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform-ish in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

/// `len` pseudo-random bytes determined by `seed`.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Returns between 1 and `max_read` bytes per call, chosen at random, and
/// optionally fails every other call with `Interrupted`.
pub struct ShortReader<'a> {
    data: &'a [u8],
    rng: Rng,
    max_read: usize,
    interrupt: bool,
    calls: u64,
}

impl<'a> ShortReader<'a> {
    pub fn new(data: &'a [u8], seed: u64, max_read: usize) -> Self {
        ShortReader {
            data,
            rng: Rng::new(seed),
            max_read: max_read.max(1),
            interrupt: false,
            calls: 0,
        }
    }

    pub fn interrupting(mut self) -> Self {
        self.interrupt = true;
        self
    }
}

impl Read for ShortReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.interrupt && self.calls & 1 == 0 {
            return Err(io::Error::new(ErrorKind::Interrupted, "signal"));
        }
        let n = self
            .rng
            .range(1, self.max_read)
            .min(buf.len())
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}
