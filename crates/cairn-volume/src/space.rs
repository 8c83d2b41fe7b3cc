//! What `statfs` (`df`) on a mounted volume reports: the volume's logical
//! use against the backing file system's physical free space.
//!
//! `statfs` has one set of figures, so the volume reports the view a user
//! of a deduplicated file system expects (Windows shows a deduplicated
//! volume's free space rising as files are optimized; VDO shows a logical
//! size above the physical one): **used** is what the files would take
//! unoptimized, **free** is the backing file system's free space (what can
//! still be written), and **size** is their sum. Physical figures are in
//! `cairn volume status`.
//!
//! The saving is computed from the stream-map table (no walk of the
//! backing tree): the stream-map bytes that still serve each optimized
//! file (`valid` minus the recalled ranges below it) take no backing space,
//! and the chunk store and the table take theirs, so
//! `saved = stream-map bytes - store bytes - table bytes` (never below 0).
//! It is recomputed at most every [`REFRESH`]: `df` is cheap, and a
//! figure up to that old is good enough for space reporting.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::fuse::{BackingSpace, Space, SpaceStats};
use crate::state::StreamMapTable;
use crate::status::disk_usage;
use crate::volume::Volume;

/// How long a computed saving is reported before it is computed again.
pub const REFRESH: Duration = Duration::from_secs(5);

/// The volume's `statfs`: logical use, physical free space.
pub struct VolumeSpace {
    table: Arc<StreamMapTable>,
    store: PathBuf,
    state: PathBuf,
    /// The last computed saving in bytes and when.
    saved: Mutex<Option<(Instant, u64)>>,
}

impl VolumeSpace {
    pub fn new(vol: &Volume) -> Self {
        VolumeSpace {
            table: vol.table().clone(),
            store: vol.dir().store(),
            state: vol.dir().state(),
            saved: Mutex::new(None),
        }
    }

    /// Bytes the volume saves now (see the module doc).
    pub fn saved_bytes(&self) -> io::Result<u64> {
        let mut slot = self.saved.lock();
        if let Some((at, saved)) = *slot {
            if at.elapsed() < REFRESH {
                return Ok(saved);
            }
        }
        let serving: u64 = self
            .table
            .all()
            .iter()
            .map(|e| {
                let recalled: u64 = e
                    .recalled
                    .ranges()
                    .iter()
                    .map(|&(s, end)| end.min(e.valid).saturating_sub(s))
                    .sum();
                e.valid.saturating_sub(recalled)
            })
            .sum();
        let overhead = disk_usage(&self.store).map_err(io::Error::other)?
            + disk_usage(&self.state).map_err(io::Error::other)?;
        let saved = serving.saturating_sub(overhead);
        *slot = Some((Instant::now(), saved));
        Ok(saved)
    }
}

impl Space for VolumeSpace {
    fn statfs(&self, backing_root: BorrowedFd<'_>) -> io::Result<SpaceStats> {
        let mut stats = BackingSpace.statfs(backing_root)?;
        let frsize = u64::from(stats.frsize.max(1));
        stats.blocks += self.saved_bytes()? / frsize;
        Ok(stats)
    }
}
