//! Merkle-tree recipes (`003_ea5fccc485a97c5d.txt` §2): a blob's content is a
//! sequence of L0 chunks; L1 nodes list L0 fingerprints and sizes, L2 nodes
//! list L1 nodes, and so on up to a single root. Nodes are chunks themselves
//! (kind `Tree`, tagged with their level), stored and deduplicated like data.
//!
//! Node boundaries are content-defined on the children: a node closes after a
//! child whose mixed fingerprint has its low bits zero (average fan-out
//! `fanout_avg`), bounded by `fanout_min`/`fanout_max`. An edit therefore
//! changes only the nodes on the path from the edited leaf to the root, and
//! identical subtrees of different files or generations deduplicate.

use cairn_core::{mix64, Fingerprint, Result};
use cairn_format::dir::BlobRef;
use cairn_format::tree::{encode_tree_node, ChildRef, TreeNode};

use crate::config::TreeConfig;

/// Stores an encoded tree node of `level` and returns its fingerprint.
pub trait NodeSink {
    fn store_node(&mut self, level: u8, bytes: &[u8]) -> Result<Fingerprint>;
}

pub struct TreeBuilder {
    /// `levels[i]` accumulates the children of the next level-(i+1) node.
    levels: Vec<Vec<ChildRef>>,
    mask: u64,
    min: usize,
    max: usize,
    scratch: Vec<u8>,
}

impl TreeBuilder {
    pub fn new(cfg: &TreeConfig) -> Self {
        TreeBuilder {
            levels: Vec::new(),
            mask: cfg.fanout_avg as u64 - 1,
            min: cfg.fanout_min as usize,
            max: cfg.fanout_max as usize,
            scratch: Vec::new(),
        }
    }

    /// Appends an L0 chunk.
    pub fn push_leaf(&mut self, fp: Fingerprint, size: u64, sink: &mut dyn NodeSink) -> Result<()> {
        self.push_at(0, ChildRef { fp, size }, sink)
    }

    fn push_at(&mut self, li: usize, child: ChildRef, sink: &mut dyn NodeSink) -> Result<()> {
        if self.levels.len() <= li {
            self.levels.resize_with(li + 1, Vec::new);
        }
        let boundary = mix64(child.fp.prefix_u64()) & self.mask == 0;
        self.levels[li].push(child);
        let n = self.levels[li].len();
        if (boundary && n >= self.min) || n >= self.max {
            self.close(li, sink)?;
        }
        Ok(())
    }

    fn close(&mut self, li: usize, sink: &mut dyn NodeSink) -> Result<()> {
        let children = std::mem::take(&mut self.levels[li]);
        let size = children.iter().map(|c| c.size).sum();
        let node = TreeNode {
            level: (li + 1) as u8,
            children,
        };
        self.scratch.clear();
        encode_tree_node(&node, &mut self.scratch);
        let fp = sink.store_node(node.level, &self.scratch)?;
        // Reuse the children allocation for the next node of this level.
        let mut v = node.children;
        v.clear();
        self.levels[li] = v;
        self.push_at(li + 1, ChildRef { fp, size }, sink)
    }

    /// Closes every open node and returns the root, or `None` for an empty blob.
    pub fn finish(mut self, sink: &mut dyn NodeSink) -> Result<Option<BlobRef>> {
        let mut li = 0;
        while li < self.levels.len() {
            let above_empty = self.levels[li + 1..].iter().all(|l| l.is_empty());
            match self.levels[li].len() {
                0 if above_empty => return Ok(None),
                0 => {}
                1 if above_empty => {
                    let c = &self.levels[li][0];
                    return Ok(Some(BlobRef {
                        root: c.fp,
                        level: li as u8,
                        size: c.size,
                    }));
                }
                _ => self.close(li, sink)?,
            }
            li += 1;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_format::tree::decode_tree_node;
    use std::collections::HashMap;

    #[derive(Default)]
    struct MemSink {
        nodes: HashMap<Fingerprint, Vec<u8>>,
    }

    impl NodeSink for MemSink {
        fn store_node(&mut self, _level: u8, bytes: &[u8]) -> Result<Fingerprint> {
            let fp = Fingerprint::from_slice(blake3::hash(bytes).as_bytes());
            self.nodes.insert(fp, bytes.to_vec());
            Ok(fp)
        }
    }

    fn leaf(i: u64) -> Fingerprint {
        Fingerprint::from_slice(blake3::hash(&i.to_le_bytes()).as_bytes())
    }

    fn leaves_under(sink: &MemSink, root: &BlobRef, out: &mut Vec<Fingerprint>) {
        fn walk(sink: &MemSink, fp: Fingerprint, level: u8, out: &mut Vec<Fingerprint>) {
            if level == 0 {
                out.push(fp);
                return;
            }
            let node = decode_tree_node(&sink.nodes[&fp], 32).unwrap();
            assert_eq!(node.level, level);
            for c in node.children {
                walk(sink, c.fp, level - 1, out);
            }
        }
        walk(sink, root.root, root.level, out);
    }

    fn build(cfg: &TreeConfig, leaves: &[u64], sink: &mut MemSink) -> Option<BlobRef> {
        let mut b = TreeBuilder::new(cfg);
        for &i in leaves {
            b.push_leaf(leaf(i), 100, sink).unwrap();
        }
        b.finish(sink).unwrap()
    }

    #[test]
    fn tree_reproduces_leaves_in_order() {
        let cfg = TreeConfig {
            fanout_avg: 4,
            fanout_min: 2,
            fanout_max: 8,
        };
        for n in [0u64, 1, 2, 7, 100, 1000] {
            let mut sink = MemSink::default();
            let leaves: Vec<u64> = (0..n).collect();
            let root = build(&cfg, &leaves, &mut sink);
            if n == 0 {
                assert!(root.is_none());
                continue;
            }
            let root = root.unwrap();
            assert_eq!(root.size, n * 100);
            assert_eq!(root.level == 0, n == 1);
            let mut got = Vec::new();
            leaves_under(&sink, &root, &mut got);
            assert_eq!(got, leaves.iter().map(|&i| leaf(i)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn an_insertion_rewrites_only_a_few_nodes() {
        let cfg = TreeConfig {
            fanout_avg: 8,
            fanout_min: 2,
            fanout_max: 64,
        };
        let base: Vec<u64> = (0..5000).collect();
        let mut edited = base.clone();
        edited.insert(2500, 999_999);
        let mut a = MemSink::default();
        build(&cfg, &base, &mut a);
        let mut b = MemSink::default();
        build(&cfg, &edited, &mut b);
        let new_nodes = b.nodes.keys().filter(|k| !a.nodes.contains_key(k)).count();
        assert!(new_nodes <= 8, "{new_nodes} new nodes of {}", b.nodes.len());
    }
}
