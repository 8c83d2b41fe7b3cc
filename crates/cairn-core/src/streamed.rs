//! Objects written in pieces and published whole: a large object (an index
//! generation, `cairn-engine`'s `disk_index.rs` merge) is produced page by
//! page and need not be held in memory whole before it is written.
//!
//! [`create_streamed`] hands out a [`StreamedObject`]: bytes are appended,
//! bytes already appended may be overwritten in place ([`StreamedObject::patch`],
//! for a header reserved at the front and filled in at the end), and
//! [`StreamedObject::create`] publishes the object if its key is absent, with
//! the same guarantees as [`Backend::create_new`]: nothing is visible under
//! the key before `create` returns, and then all of it. An object dropped
//! without `create` leaves nothing behind under its key.
//!
//! A backend streams if it overrides [`Backend::create_streamed`] (the local
//! directory: a temporary file written as the pieces come). Every other
//! backend gets [`Buffered`]: the pieces collected in memory and published
//! by [`create_new_or_own`], exactly as a whole-object create.

pub use crate::backend::StreamedObject;
use crate::backend::{create_new_or_own, Backend};
use crate::error::{Error, Result};

/// A [`StreamedObject`] for `key` on `backend`: the backend's own streaming
/// writer, else the pieces collected in memory.
pub fn create_streamed<'a>(
    backend: &'a dyn Backend,
    key: &str,
) -> Result<Box<dyn StreamedObject + 'a>> {
    match backend.create_streamed(key)? {
        Some(w) => Ok(w),
        None => Ok(Box::new(Buffered {
            backend,
            key: key.to_string(),
            bytes: Vec::new(),
        })),
    }
}

/// The pieces collected in memory, published whole by [`create_new_or_own`].
pub struct Buffered<'a> {
    backend: &'a dyn Backend,
    key: String,
    bytes: Vec<u8>,
}

impl StreamedObject for Buffered<'_> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let range = patch_range(offset, bytes.len(), self.bytes.len() as u64, &self.key)?;
        self.bytes[range].copy_from_slice(bytes);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn create(self: Box<Self>) -> Result<bool> {
        create_new_or_own(self.backend, &self.key, &self.bytes)
    }
}

/// The byte range a patch of `len` bytes at `offset` overwrites, refused
/// past `written` (a caller's error, not the store's).
pub fn patch_range(
    offset: u64,
    len: usize,
    written: u64,
    key: &str,
) -> Result<std::ops::Range<usize>> {
    let end = offset.checked_add(len as u64).filter(|end| *end <= written);
    match end {
        Some(end) => Ok(offset as usize..end as usize),
        None => Err(Error::invalid(format!(
            "patching {key} at {offset}+{len}: only {written} bytes written"
        ))),
    }
}

/// A backend layer's streamed object: `inner`'s, with `created` called
/// with the key, the object's length and `create`'s result before it is
/// returned (a layer that counts writes or remembers listings).
pub struct AfterCreate<'a, F: FnOnce(&str, u64, &Result<bool>) + 'a> {
    inner: Box<dyn StreamedObject + 'a>,
    key: String,
    created: F,
}

impl<'a, F: FnOnce(&str, u64, &Result<bool>) + 'a> AfterCreate<'a, F> {
    /// A layer's [`Backend::create_streamed`] over the inner backend's
    /// answer: `None` stays `None` (the caller then buffers, and the
    /// layer's `create_new` sees the object whole).
    pub fn wrap(
        inner: Option<Box<dyn StreamedObject + 'a>>,
        key: &str,
        created: F,
    ) -> Option<Box<dyn StreamedObject + 'a>> {
        let inner = inner?;
        Some(Box::new(AfterCreate {
            inner,
            key: key.to_string(),
            created,
        }))
    }
}

impl<'a, F: FnOnce(&str, u64, &Result<bool>) + 'a> StreamedObject for AfterCreate<'a, F> {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.inner.append(bytes)
    }

    fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.inner.patch(offset, bytes)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn create(self: Box<Self>) -> Result<bool> {
        let this = *self;
        let len = this.inner.len();
        let r = this.inner.create();
        (this.created)(&this.key, len, &r);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_ranges_stay_inside_what_was_written() {
        assert_eq!(patch_range(0, 4, 4, "k").unwrap(), 0..4);
        assert_eq!(patch_range(2, 2, 4, "k").unwrap(), 2..4);
        assert!(patch_range(3, 2, 4, "k").is_err());
        assert!(patch_range(u64::MAX, 2, 4, "k").is_err());
    }
}
