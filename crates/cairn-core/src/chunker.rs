//! The chunker trait: find the next cut point in a caller-owned buffer.
//!
//! Chunkers are stateless between chunks (each chunk's scan starts afresh at
//! its first byte), so a caller can keep one reused buffer holding at least
//! `max_size()` bytes of look-ahead and ask for boundaries one at a time; no
//! allocation happens per chunk.

pub trait Chunker: Send {
    /// Length of the chunk that starts at `data[0]`.
    ///
    /// Returns `None` when the boundary cannot be decided yet: `data` is shorter
    /// than `max_size()` and more input follows (`eof == false`). With
    /// `eof == true` it always returns `Some(n)` with `0 < n <= data.len()`
    /// for non-empty `data`. The result never exceeds `max_size()`, and is at
    /// least `min_size()` unless the input ends first.
    fn next_boundary(&mut self, data: &[u8], eof: bool) -> Option<usize>;

    fn min_size(&self) -> usize;

    fn max_size(&self) -> usize;
}
