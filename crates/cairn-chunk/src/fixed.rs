//! Fixed-size chunking: every chunk is `size` bytes except a stream's last.
//!
//! The content-independent baseline: DDFS (`001_3652cceaf162c5a1.txt` §5.4)
//! contrasts its content-based segments with Venti's fixed aligned blocks,
//! which lose nearly all duplicates once data shifts (global compression 1.01
//! vs 6.39 on their engineering dataset). cairn keeps it for comparison runs.

use cairn_core::Chunker;

/// Cuts every `size` bytes.
#[derive(Clone, Debug)]
pub struct FixedChunker {
    size: usize,
}

impl FixedChunker {
    /// Panics if `size` is zero.
    pub fn new(size: usize) -> Self {
        assert!(size > 0, "fixed chunk size must be positive");
        FixedChunker { size }
    }

    pub fn size(&self) -> usize {
        self.size
    }
}

impl Chunker for FixedChunker {
    fn next_boundary(&mut self, data: &[u8], eof: bool) -> Option<usize> {
        if data.len() >= self.size {
            Some(self.size)
        } else if eof && !data.is_empty() {
            Some(data.len())
        } else {
            None
        }
    }

    fn min_size(&self) -> usize {
        self.size
    }

    fn max_size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_every_size_bytes() {
        let mut c = FixedChunker::new(10);
        let data = [7u8; 25];
        assert_eq!(c.next_boundary(&data, false), Some(10));
        assert_eq!(c.next_boundary(&data[..9], false), None);
        assert_eq!(c.next_boundary(&data[..9], true), Some(9));
        assert_eq!(c.next_boundary(&[], true), None);
        let mut out = Vec::new();
        crate::cut_points(&mut c, &data, &mut out);
        assert_eq!(out, [10, 20, 25]);
    }
}
