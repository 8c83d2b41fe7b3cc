//! Reads a blob (file content or directory listing) by walking its Merkle
//! tree depth-first, left to right: L0 chunks come out in content order.
//! Every node's level and every child's size are checked against what the
//! parent recorded, so a damaged or mismatched node cannot go unnoticed.

use cairn_core::{Error, Fingerprint, Result};
use cairn_format::dir::BlobRef;
use cairn_format::tree::decode_tree_node;

use super::cache::{ChunkStore, RestoreCache};

pub struct BlobReader<'a> {
    pub store: &'a ChunkStore,
    pub cache: &'a mut dyn RestoreCache,
    buf: Vec<u8>,
    fp_width: usize,
}

impl<'a> BlobReader<'a> {
    pub fn new(store: &'a ChunkStore, cache: &'a mut dyn RestoreCache) -> Self {
        BlobReader {
            store,
            cache,
            buf: Vec::new(),
            fp_width: store.fp_width(),
        }
    }

    /// Calls `sink` with each data chunk of the blob, in order.
    pub fn for_each_chunk(
        &mut self,
        blob: &BlobRef,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let got = self.walk(blob.root, blob.level, sink)?;
        if got != blob.size {
            return Err(size_mismatch(&blob.root, blob.size, got));
        }
        Ok(())
    }

    fn walk(
        &mut self,
        fp: Fingerprint,
        level: u8,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<u64> {
        self.cache.read_chunk(&fp, self.store, &mut self.buf)?;
        if level == 0 {
            sink(&self.buf)?;
            return Ok(self.buf.len() as u64);
        }
        let node = decode_tree_node(&self.buf, self.fp_width)?;
        if node.level != level {
            return Err(Error::corrupt(
                format!("tree node {fp}"),
                format!("has level {}, its parent expects {level}", node.level),
            ));
        }
        let mut total = 0;
        for c in node.children {
            let got = self.walk(c.fp, level - 1, sink)?;
            if got != c.size {
                return Err(size_mismatch(&c.fp, c.size, got));
            }
            total += got;
        }
        Ok(total)
    }

    /// Reads a whole blob into memory (directory listings).
    pub fn read_all(&mut self, blob: &BlobRef) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(blob.size.min(1 << 24) as usize);
        self.for_each_chunk(blob, &mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })?;
        Ok(out)
    }
}

fn size_mismatch(fp: &Fingerprint, want: u64, got: u64) -> Error {
    Error::corrupt(
        format!("tree under {fp}"),
        format!("recorded size {want} bytes, content holds {got}"),
    )
}
