//! cairn-format: the byte codecs of cairn's on-disk objects. No I/O.
//!
//! | module | object | paper |
//! |---|---|---|
//! | [`envelope`] | framing of small whole-file objects (config, snapshot, Bloom checkpoint) | DDFS §4.1 checkpoints |
//! | [`compress`](mod@compress) | per-chunk local compression, selective storage | `004` "selective compression" |
//! | [`container`] | container: header, data section, metadata section, trailer | DDFS §3.3, §4.2 |
//! | [`tree`] | Merkle-tree recipe nodes (L1..Ln) | `003` §2 |
//! | [`dir`] | directory listings | — |
//! | [`frugal_log`] | a segment of the frugal index's chunk-metadata log | `004` "log-structured organization" |
//! | [`summary_vector`] | Summary Vector (Bloom filter) checkpoint | DDFS §4.1 |
//! | [`snapshot`] | catalog record (JSON in an envelope) | — |
//! | [`index`] | the on-disk fingerprint index, a paged hash table | DDFS §4 "segment index" |
//! | [`index_delta`] | what one commit changed in the index (puts, removals) | DDFS §3.2 batched updates |
//! | [`parent_held`] | the parent check's record, a host's local note | — |
//!
//! All integers are little-endian. Every decoder takes untrusted bytes: it
//! never panics, never allocates from an unchecked length, and reports damage
//! as [`cairn_core::Error::Corrupt`] naming the object and the fault, and
//! newer versions as [`cairn_core::Error::UnsupportedVersion`].
//! `docs/FORMAT.md` documents every byte; `tests/golden.rs` pins it.

mod bytes;
pub mod compress;
pub mod container;
pub mod dir;
mod dir_columns;
mod dir_entry;
mod dir_rows;
pub mod envelope;
pub mod extras;
pub mod frugal_log;
pub mod index;
pub mod index_delta;
pub mod parent_held;
pub mod snapshot;
pub mod summary_vector;
#[cfg(any(test, feature = "test-support"))]
pub mod testutil;
pub mod tree;

pub use compress::{compress, decompress};
pub use container::{
    decode_container, decode_tail, stored_chunk, ContainerMeta, ContainerWriter, Descriptor,
    TailDecode, TAIL_READ_HINT,
};
pub use dir::{decode_dir, encode_dir, BlobRef, DirEntry, EntryKind};
pub use envelope::{open, seal};
pub use index::{
    decode_index_header, decode_index_page, encode_index, entries_per_page, index_page_offset,
    page_of, IndexEntry, IndexHeader,
};
pub use snapshot::{
    decode_snapshot, encode_snapshot, BlobRefRecord, SnapshotRecord, SnapshotStats,
};
pub use tree::{decode_tree_node, encode_tree_node, ChildRef, TreeNode};
