//! The restore plan: a blob's recipe flattened into its data chunks in
//! order, each with its size and offset in the file. Recipe tree nodes are
//! resolved here, through a metadata cache of their own, never through the
//! data policy: the policy (`policy.rs`) sees only data chunks, exactly the
//! stream a chunk trace records, so a simulated restore of the trace runs
//! the same policy over the same steps.
//!
//! Every node's level and every child's size are checked against what the
//! parent recorded, so a damaged or mismatched node cannot go unnoticed.

use cairn_core::{Error, Fingerprint, Result};
use cairn_format::dir::BlobRef;
use cairn_format::tree::decode_tree_node;

use super::cache::{ChunkStore, RestoreCache};
use super::policy::PlanStep;

/// Appends the data chunks of `blob` to `out`, in content order.
pub fn plan_blob(
    store: &ChunkStore,
    nodes: &mut dyn RestoreCache,
    blob: &BlobRef,
    out: &mut Vec<PlanStep>,
) -> Result<()> {
    plan_blob_noting_nodes(store, nodes, blob, out, None)
}

/// [`plan_blob`], also appending the fingerprints of the recipe's tree
/// nodes, in the order they were read, to `seen_nodes` when given.
pub fn plan_blob_noting_nodes(
    store: &ChunkStore,
    nodes: &mut dyn RestoreCache,
    blob: &BlobRef,
    out: &mut Vec<PlanStep>,
    seen_nodes: Option<&mut Vec<Fingerprint>>,
) -> Result<()> {
    if blob.level == 0 {
        out.push(PlanStep {
            fp: blob.root,
            size: blob.size,
            offset: 0,
        });
        return Ok(());
    }
    let mut w = Walk {
        store,
        nodes,
        buf: Vec::new(),
        offset: 0,
        out,
        seen_nodes,
    };
    w.node(blob.root, blob.level, blob.size)
}

struct Walk<'a> {
    store: &'a ChunkStore,
    nodes: &'a mut dyn RestoreCache,
    buf: Vec<u8>,
    offset: u64,
    out: &'a mut Vec<PlanStep>,
    seen_nodes: Option<&'a mut Vec<Fingerprint>>,
}

impl Walk<'_> {
    fn node(&mut self, fp: Fingerprint, level: u8, size: u64) -> Result<()> {
        self.nodes.read_chunk(&fp, self.store, &mut self.buf)?;
        if let Some(seen) = self.seen_nodes.as_mut() {
            seen.push(fp);
        }
        let node = decode_tree_node(&self.buf, self.store.fp_width())?;
        if node.level != level {
            return Err(Error::corrupt(
                format!("tree node {fp}"),
                format!("has level {}, its parent expects {level}", node.level),
            ));
        }
        let total: u64 = node.children.iter().map(|c| c.size).sum();
        if total != size {
            return Err(Error::corrupt(
                format!("tree under {fp}"),
                format!("recorded size {size} bytes, its children add up to {total}"),
            ));
        }
        if level > 1 {
            let below: Vec<(Fingerprint, u8)> =
                node.children.iter().map(|c| (c.fp, level - 1)).collect();
            self.nodes.prefetch(&below, self.store);
        }
        for c in node.children {
            if level == 1 {
                self.out.push(PlanStep {
                    fp: c.fp,
                    size: c.size,
                    offset: self.offset,
                });
                self.offset += c.size;
            } else {
                self.node(c.fp, level - 1, c.size)?;
            }
        }
        Ok(())
    }
}
