//! Merkle-tree recipe nodes (`003_ea5fccc485a97c5d.txt` §2).
//!
//! A file (or any blob, such as a directory listing) is a tree of
//! fingerprints: its content chunks are the L0 leaves; an L1 chunk lists
//! consecutive L0 fingerprints; an Ln chunk lists L(n-1) fingerprints, up to
//! one root. Lp nodes are stored in containers like data chunks, tagged with
//! their level, so physical GC can enumerate live fingerprints level by level.
//! Each child carries the logical bytes beneath it, so a reader can seek to a
//! file offset without visiting the other subtrees.
//!
//! ```text
//! offset  size      field
//! 0       1         node format version u8 (= 1)
//! 1       1         level u8 (>= 1; children are at level - 1)
//! 2       4         child count u32 (>= 1)
//! 6       count*(w+8) children: fingerprint [w] | logical size u64
//! ```
//!
//! The fingerprint width `w` is the repository's; it is not stored. Nodes are
//! identified by the hash of these bytes, so the encoding is canonical: no
//! trailing bytes, no slack.

use cairn_core::{Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, put_u32, put_u64, Reader};

/// The node format version this build writes and the newest it reads.
pub const TREE_NODE_VERSION: u8 = 1;

const VERSION_OFFSET: usize = 0;
const LEVEL_OFFSET: usize = VERSION_OFFSET + 1;
const COUNT_OFFSET: usize = LEVEL_OFFSET + 1;
/// Bytes before the first child.
pub const TREE_NODE_HEADER_LEN: usize = COUNT_OFFSET + 4;
const CHILD_SIZE_LEN: usize = 8;

/// A child of a tree node: its fingerprint and the logical bytes under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildRef {
    pub fp: Fingerprint,
    pub size: u64,
}

/// An Ln recipe node (n >= 1) listing its level n-1 children in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeNode {
    pub level: u8,
    pub children: Vec<ChildRef>,
}

impl TreeNode {
    /// Logical bytes under this node (the sum of the children's sizes).
    pub fn size(&self) -> u64 {
        self.children
            .iter()
            .fold(0u64, |acc, c| acc.saturating_add(c.size))
    }
}

/// Encoded bytes of one child.
pub const fn child_ref_len(fp_width: usize) -> usize {
    fp_width + CHILD_SIZE_LEN
}

/// Encoded bytes of a node with `children` children.
pub const fn tree_node_len(children: usize, fp_width: usize) -> usize {
    TREE_NODE_HEADER_LEN + children * child_ref_len(fp_width)
}

/// Most children a node of at most `max_node_len` bytes can hold (at least 2,
/// so a tree always narrows toward its root).
pub fn max_fanout(max_node_len: usize, fp_width: usize) -> usize {
    (max_node_len.saturating_sub(TREE_NODE_HEADER_LEN) / child_ref_len(fp_width)).max(2)
}

/// The most logical bytes a blob whose root is at `level` can hold with
/// `fp_width`-byte fingerprints: a chunk's raw length is a `u32` (container
/// descriptors), so a level 0 blob holds at most `u32::MAX` bytes and a
/// node, itself a chunk, at most `(u32::MAX - header) / (w + 8)` children.
/// Capped at `i64::MAX`, the largest file size (an `off_t`).
pub fn max_blob_size(level: u8, fp_width: usize) -> u64 {
    let chunk = u64::from(u32::MAX);
    let fanout = (chunk - TREE_NODE_HEADER_LEN as u64) / child_ref_len(fp_width) as u64;
    let mut max = chunk;
    for _ in 0..level {
        max = max.saturating_mul(fanout);
    }
    max.min(i64::MAX as u64)
}

/// Appends the encoding of `node` to `out`. The fingerprint width is taken
/// from the children (all must have the same width).
pub fn encode_tree_node(node: &TreeNode, out: &mut Vec<u8>) {
    debug_assert!(node.level >= 1, "tree nodes are level 1 or above");
    debug_assert!(!node.children.is_empty(), "tree node without children");
    debug_assert!(
        node.children
            .windows(2)
            .all(|w| w[0].fp.len() == w[1].fp.len()),
        "mixed fingerprint widths in a tree node"
    );
    let w = node.children.first().map_or(0, |c| c.fp.len());
    out.reserve(tree_node_len(node.children.len(), w));
    out.push(TREE_NODE_VERSION);
    out.push(node.level);
    put_u32(out, node.children.len() as u32);
    for c in &node.children {
        out.extend_from_slice(c.fp.as_bytes());
        put_u64(out, c.size);
    }
}

/// Decodes a node whose fingerprints are `fp_width` bytes wide.
pub fn decode_tree_node(bytes: &[u8], fp_width: usize) -> Result<TreeNode> {
    const WHAT: &str = "tree node";
    check_fp_width(WHAT, fp_width)?;
    let mut r = Reader::new(WHAT, bytes);
    let version = r.u8("version")?;
    if version > TREE_NODE_VERSION {
        return Err(Error::UnsupportedVersion {
            what: WHAT.into(),
            found: version.into(),
            supported: TREE_NODE_VERSION.into(),
        });
    }
    if version == 0 {
        return Err(Error::corrupt(WHAT, "version 0 is not a valid version"));
    }
    let level = r.u8("level")?;
    if level == 0 {
        return Err(Error::corrupt(WHAT, "level 0 (tree nodes are L1 or above)"));
    }
    let count = r.u32("child count")?;
    if count == 0 {
        return Err(Error::corrupt(
            WHAT,
            format!("L{level} node with no children"),
        ));
    }
    let expected = (count as u64) * child_ref_len(fp_width) as u64;
    if expected != r.remaining() as u64 {
        return Err(r.corrupt(format!(
            "{count} children of width {fp_width} need {expected} bytes, {} present",
            r.remaining()
        )));
    }
    // `count` is bounded by the bytes present, so the allocation is too.
    let mut children = Vec::with_capacity(count as usize);
    let mut total = 0u64;
    for i in 0..count {
        let fp = r.fp(fp_width, "child fingerprint")?;
        let size = r.u64("child size")?;
        total = total
            .checked_add(size)
            .ok_or_else(|| r.corrupt(format!("child {i}: total size overflows u64")))?;
        children.push(ChildRef { fp, size });
    }
    r.finish()?;
    Ok(TreeNode { level, children })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{check_mutations, MutationRun};
    use proptest::prelude::*;

    fn node(w: usize, n: usize) -> TreeNode {
        TreeNode {
            level: 2,
            children: (0..n)
                .map(|i| ChildRef {
                    fp: Fingerprint::from_slice(&vec![i as u8 + 1; w]),
                    size: 1000 + i as u64,
                })
                .collect(),
        }
    }

    #[test]
    fn round_trip() {
        let n = node(20, 3);
        let mut out = vec![0xaa];
        encode_tree_node(&n, &mut out);
        assert_eq!(out[0], 0xaa, "encode appends");
        assert_eq!(out.len() - 1, tree_node_len(3, 20));
        assert_eq!(decode_tree_node(&out[1..], 20).unwrap(), n);
        assert_eq!(n.size(), 3003);
    }

    #[test]
    fn every_prefix_and_extension_is_rejected() {
        let mut out = Vec::new();
        encode_tree_node(&node(8, 2), &mut out);
        for cut in 0..out.len() {
            assert!(decode_tree_node(&out[..cut], 8)
                .unwrap_err()
                .is_corruption());
        }
        out.push(0);
        assert!(decode_tree_node(&out, 8).is_err());
    }

    #[test]
    fn structural_errors() {
        let mut out = Vec::new();
        encode_tree_node(&node(8, 2), &mut out);
        let mut b = out.clone();
        b[LEVEL_OFFSET] = 0;
        assert!(decode_tree_node(&b, 8)
            .unwrap_err()
            .to_string()
            .contains("level 0"));
        let mut b = out.clone();
        b[VERSION_OFFSET] = 2;
        assert!(matches!(
            decode_tree_node(&b, 8),
            Err(Error::UnsupportedVersion { found: 2, .. })
        ));
        b[VERSION_OFFSET] = 0;
        assert!(decode_tree_node(&b, 8).unwrap_err().is_corruption());
        let mut b = out.clone();
        b[COUNT_OFFSET] = 3;
        assert!(decode_tree_node(&b, 8).is_err());
        // Wrong width: count mismatch.
        assert!(decode_tree_node(&out, 7).is_err());
        assert!(decode_tree_node(&out, 0).is_err());
        assert!(decode_tree_node(&out, 33).is_err());
        // No children.
        assert!(decode_tree_node(&[1, 1, 0, 0, 0, 0], 8).is_err());
        // Sizes overflowing u64.
        let mut big = node(4, 2);
        big.children[0].size = u64::MAX;
        let mut b = Vec::new();
        encode_tree_node(&big, &mut b);
        assert!(decode_tree_node(&b, 4)
            .unwrap_err()
            .to_string()
            .contains("overflows"));
    }

    #[test]
    fn fanout() {
        assert_eq!(max_fanout(tree_node_len(100, 32), 32), 100);
        assert_eq!(max_fanout(0, 32), 2);
    }

    /// Mutated valid nodes never panic the decoder, and whatever decodes
    /// re-encodes to the same bytes (one encoding per node).
    #[test]
    fn mutated_nodes_decode_canonically_or_not_at_all() {
        let valid = (
            1usize..=32,
            1u8..=255,
            proptest::collection::vec((any::<[u8; 32]>(), 0u64..(1 << 40)), 1..16),
        )
            .prop_map(|(w, level, kids)| {
                let children = kids
                    .iter()
                    .map(|(b, size)| ChildRef {
                        fp: Fingerprint::from_slice(&b[..w]),
                        size: *size,
                    })
                    .collect();
                let mut out = Vec::new();
                encode_tree_node(&TreeNode { level, children }, &mut out);
                (w, out)
            });
        let run = MutationRun {
            name: "tree node",
            cases: 512,
            min_decoded_pct: 60,
        };
        check_mutations(
            run,
            valid,
            |_| {},
            |w, bytes| {
                let Ok(n) = decode_tree_node(bytes, *w) else {
                    return Ok(false);
                };
                let mut out = Vec::new();
                encode_tree_node(&n, &mut out);
                prop_assert_eq!(&out[..], bytes);
                Ok(true)
            },
        );
    }

    proptest! {
        #[test]
        fn prop_round_trip(
            w in 1usize..=32,
            level in 1u8..=255,
            kids in proptest::collection::vec((any::<[u8; 32]>(), 0u64..(1 << 40)), 1..64),
        ) {
            let n = TreeNode {
                level,
                children: kids.iter().map(|(b, s)| ChildRef { fp: Fingerprint::from_slice(&b[..w]), size: *s }).collect(),
            };
            let mut out = Vec::new();
            encode_tree_node(&n, &mut out);
            prop_assert_eq!(decode_tree_node(&out, w).unwrap(), n);
        }

        #[test]
        fn prop_never_panics_and_is_canonical(bytes in proptest::collection::vec(any::<u8>(), 0..200), w in 0usize..40) {
            if let Ok(n) = decode_tree_node(&bytes, w) {
                let mut out = Vec::new();
                encode_tree_node(&n, &mut out);
                prop_assert_eq!(out, bytes);
            }
        }
    }
}
