//! The chunk readers of one content state: a small pool of
//! [`RandomAccess`] readers of the volume's chunk store sharing one
//! decoded-chunk cache ([`SharedChunks`]), so reads on several FUSE
//! threads and the read-ahead workers (`crate::read_ahead`) decode chunks
//! in parallel, and a chunk decoded by any of them serves all.
//!
//! The cache is bounded: [`CHUNK_CACHE_BYTES`] of decoded chunks (004: "a
//! cache for decompressed data", important for hotspots), plus one chunk
//! per reader while it is being decoded or copied out.

use std::sync::Arc;

use parking_lot::Mutex;

use cairn_core::Result;
use cairn_engine::random_access::{CacheLimits, RandomAccess, SharedChunks};

/// Bytes of decoded chunks the pool keeps (shared by all its readers):
/// room for the read-ahead window of several sequential readers
/// (`crate::read_ahead::WINDOW`) and the hot chunks of random ones.
pub const CHUNK_CACHE_BYTES: usize = 64 << 20;

/// Readers in the pool: the FUSE request threads and the read-ahead
/// workers each find a free one most of the time.
const READERS: usize = 6;

/// The pool. Each reader is behind its own mutex (its tree-node and
/// container-metadata caches are its own); the chunk cache is shared.
pub struct ChunkReaders {
    readers: Vec<Mutex<RandomAccess>>,
    chunks: Arc<SharedChunks>,
}

impl ChunkReaders {
    pub fn open(repo: &cairn_engine::Repository) -> Result<Self> {
        let chunks = SharedChunks::new(CHUNK_CACHE_BYTES);
        let readers = (0..READERS)
            .map(|_| {
                RandomAccess::open_shared(repo, CacheLimits::default(), chunks.clone())
                    .map(Mutex::new)
            })
            .collect::<Result<_>>()?;
        Ok(ChunkReaders { readers, chunks })
    }

    /// Reopens every reader on the store as it is now (a reader finds only
    /// the chunks its locator knew when it was opened). The decoded chunks
    /// stay: a chunk is named by its content, so a cached one is never
    /// stale.
    pub fn refresh(&self, repo: &cairn_engine::Repository) -> Result<()> {
        for r in &self.readers {
            let fresh =
                RandomAccess::open_shared(repo, CacheLimits::default(), self.chunks.clone())?;
            *r.lock() = fresh;
        }
        Ok(())
    }

    /// Runs `f` with a reader: the first free one (so a lone sequential
    /// reader keeps using the first), else waits for the one this
    /// thread's id picks.
    pub fn with_reader<R>(&self, f: impl FnOnce(&mut RandomAccess) -> R) -> R {
        for r in &self.readers {
            if let Some(mut reader) = r.try_lock() {
                return f(&mut reader);
            }
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&std::thread::current().id(), &mut h);
        let i = (std::hash::Hasher::finish(&h) as usize) % self.readers.len();
        f(&mut self.readers[i].lock())
    }

    /// Bytes of decoded chunks cached now.
    pub fn cached_bytes(&self) -> usize {
        self.chunks.bytes()
    }
}
