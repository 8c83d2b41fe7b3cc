//! The primary volume of `004_62bf1a5ddd5ed253.txt` (Primary Data
//! Deduplication, El-Shimi et al.): an everyday file system whose cold files
//! are deduplicated in place by background jobs and stay readable and
//! writable. Design, layout and the crash-safety argument: `docs/volume.md`.
//!
//! The namespace and metadata of every file are those of a *backing tree*
//! (a plain directory); a file's content comes either from its backing file
//! (not optimized, or a recalled range) or from its stream map, a recipe in
//! the volume's chunk store (a cairn repository). The FUSE layer serves the
//! backing tree and asks [`content::Content`] for every regular file's
//! bytes; the optimization, garbage-collection and scrub jobs change what
//! that answers, one file at a time, under [`inode_locks::InodeLocks`].

pub mod content;
pub mod fuse;
pub mod inode_locks;

pub mod backing;
pub mod chunk_readers;
pub mod copy_fallback;
pub mod daemon;
pub mod gc;
pub mod job_state;
pub mod layout;
pub mod optimize;
pub mod partitions;
pub mod policy;
pub mod ranges;
pub mod read_ahead;
pub mod scheduler;
pub mod scrub;
pub mod snapshot;
pub mod space;
pub mod splice;
pub mod state;
pub mod status;
pub mod volume;
pub mod volume_content;
pub mod walk;

pub use gc::{gc, GcOptions, GcReport};
pub use optimize::{optimize, OptimizeOptions, OptimizeReport};
pub use policy::Policy;
pub use scrub::{scrub, ScrubOptions, ScrubReport};
pub use status::{status, Status};
pub use volume::{StoreEncryption, Volume, VolumeSettings};
pub use volume_content::VolumeContent;
