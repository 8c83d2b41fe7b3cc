//! I/O and decision counters. Every layer reports into one shared
//! [`Counters`]; `--json` stats, the experiments and the device model read a
//! [`CountersSnapshot`] of it.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// Live counters, shared by reference between threads.
        #[derive(Debug, Default)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: AtomicU64, )*
        }

        /// A point-in-time copy of [`Counters`], serializable.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct CountersSnapshot {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            pub fn snapshot(&self) -> CountersSnapshot {
                CountersSnapshot { $( $name: self.$name.load(Relaxed), )* }
            }
        }

        impl CountersSnapshot {
            /// Field-wise `self - earlier`, for per-run deltas.
            pub fn since(&self, earlier: &CountersSnapshot) -> CountersSnapshot {
                CountersSnapshot { $( $name: self.$name.saturating_sub(earlier.$name), )* }
            }

            /// Field-wise sum, for totals over several runs.
            pub fn plus(&self, other: &CountersSnapshot) -> CountersSnapshot {
                CountersSnapshot { $( $name: self.$name + other.$name, )* }
            }
        }
    };
}

counters! {
    /// Chunks looked up by the dedup path.
    lookups,
    /// Lookups answered "new" by the Summary Vector (Bloom filter) alone.
    bloom_negatives,
    /// Lookups answered by the locality cache (LPC).
    cache_hits,
    /// On-disk index pages read.
    index_page_reads,
    /// Lookups that found the fingerprint in the index (memory or disk part).
    index_hits,
    /// Bloom hits that the index did not confirm (false positives).
    bloom_false_positives,
    /// Container metadata sections read into the locality cache.
    prefetches,
    /// Container metadata sections read for any reason (prefetch, check, replay).
    container_meta_reads,
    /// Whole-container (data section) reads.
    containers_read,
    /// Single-chunk range reads of a container (recipe nodes and directory
    /// listings at restore).
    chunk_reads,
    /// Range reads of a container's data section covering several chunks
    /// (restore fetching only the chunks it needs of a container).
    container_range_reads,
    /// Containers written (sealed and made durable).
    containers_written,
    /// Chunks written into containers.
    chunks_written,
    /// Summary Vector membership tests.
    bloom_tests,
    /// Summary Vector inserts (chunks decided new while the filter is in use).
    bloom_inserts,
    /// Locality-cache probes before any disk access (eager's cache step,
    /// lazy's pre-lookup).
    cache_probes,
    /// Lazy lookup: locality-ring entries walked by post-lookups
    /// (`000_d04706aa48332137.txt` eq. (4), the ring and rank accesses).
    post_lookup_visits,
    /// Lazy lookup: second cache probes of buffered fingerprints during post-lookup.
    post_lookup_probes,
    /// Lazy lookup: buffered fingerprints a post-lookup found in the cache.
    post_lookup_hits,
    /// Lazy lookup: buffered fingerprints resolved by a batched index page read.
    lazy_disk_resolved,
    /// Bytes read from the backend.
    bytes_read,
    /// Bytes written to the backend.
    bytes_written,
    /// Backend read operations.
    read_ops,
    /// Backend write operations.
    write_ops,
}

impl Counters {
    pub fn add(&self, field: &AtomicU64, n: u64) {
        field.fetch_add(n, Relaxed);
    }
}

#[inline]
pub fn bump(field: &AtomicU64, n: u64) {
    field.fetch_add(n, Relaxed);
}
