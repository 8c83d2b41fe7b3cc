//! cairn-engine: the deduplicating storage engine.
//!
//! The module tree follows the data flow of docs/ARCHITECTURE.md: a backup
//! runs sources through chunking, fingerprinting, DDFS's accelerated segment
//! filtering (`dedup`), stream-informed container packing (`backup::stream`)
//! and Merkle-tree recipes (`backup::tree_builder`), then commits a snapshot
//! (`catalog`). Restore walks recipes through a restore cache; `check`
//! verifies; `stats` reports.

pub mod backup;
pub mod canonical;
pub mod catalog;
pub mod check;
pub mod codec;
pub mod config;
pub mod container_log;
pub mod dedup;
pub mod index;
pub mod keys;
pub mod meta_store;
pub mod reachability;
pub mod repair;
pub mod repair_snapshots;
pub mod repo;
pub mod restore;
pub mod stats;
pub mod warnings;

pub use backup::{backup, BackupOptions, BackupOutcome, Progress, Source};
pub use config::RepoConfig;
pub use repo::{DeleteLock, ReadLock, Repository, WriteLock};
