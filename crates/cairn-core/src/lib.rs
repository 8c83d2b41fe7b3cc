//! cairn-core: the vocabulary shared by every cairn crate.
//!
//! Typed ids ([`Fingerprint`], [`ContainerId`]), the chunk kinds and tree levels
//! of the Merkle-tree recipes (`003_ea5fccc485a97c5d.txt` §2), the algorithm
//! configuration enums persisted in a repository's config, the traits at the
//! seams of the pipeline ([`Chunker`], [`Backend`]), the I/O counters every
//! layer reports into, and the one error type of the library crates.
//!
//! Dependencies point one way: this crate depends on nothing of cairn's.

pub mod backend;
pub mod chunker;
pub mod config;
pub mod counters;
pub mod error;
pub mod ids;
pub mod rng;
pub mod streamed;
pub mod time;
pub mod trace;

pub use backend::{Backend, LockGuard, LockMode, Salvaged};
pub use chunker::Chunker;
pub use config::{
    ChunkerConfig, ChunkerKind, CompressionCodec, CompressionConfig, FingerprintAlgo,
};
pub use counters::{Counters, CountersSnapshot};
pub use error::{Error, Result};
pub use ids::{
    mix64, BuildFpHasher, ChunkKind, ContainerId, Fingerprint, FpMap, FpSet, MAX_FINGERPRINT_LEN,
};
pub use streamed::{create_streamed, StreamedObject};
pub use trace::{TraceChunk, TraceEvent, TraceMeta, TraceSource};
