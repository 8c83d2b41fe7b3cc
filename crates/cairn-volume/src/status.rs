//! `cairn volume status`: logical and physical space, optimized and
//! unoptimized files and bytes, and the savings rate as Windows reports it
//! (`SavingsRate`: saved bytes over logical bytes).

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use cairn_core::{Error, Result};

use crate::backing::allocated_bytes;
use crate::job_state::Jobs;
use crate::volume::Volume;
use crate::walk;

/// The volume's figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// Sum of the files' lengths (each inode once).
    pub logical_bytes: u64,
    /// What the volume occupies: the backing files' allocated bytes, the
    /// chunk store's and the stream-map table's.
    pub physical_bytes: u64,
    pub optimized_files: u64,
    pub unoptimized_files: u64,
    /// Logical bytes of the optimized files.
    pub optimized_bytes: u64,
    pub unoptimized_bytes: u64,
    /// Bytes the backing files occupy.
    pub backing_bytes: u64,
    /// Bytes the chunk store occupies on disk.
    pub store_bytes: u64,
    /// Bytes the stream-map table occupies on disk.
    pub state_bytes: u64,
    /// `logical - physical` (0 when the volume takes more than its files).
    pub saved_bytes: u64,
    /// `saved / logical`, 0 for an empty volume.
    pub savings_rate: f64,
    /// Each job's state, progress and last result: the mount daemon's
    /// (an offline `status` shows every job idle, with no last result).
    #[serde(default)]
    pub jobs: Jobs,
}

/// Measures the open volume.
pub fn status(vol: &Volume) -> Result<Status> {
    let mut s = Status::default();
    walk::regular_files(&vol.dir().files(), &mut |f| {
        let len = f.meta.len();
        s.logical_bytes += len;
        s.backing_bytes += allocated_bytes(&f.meta);
        if vol
            .table()
            .contains(std::os::unix::fs::MetadataExt::ino(&f.meta))
        {
            s.optimized_files += 1;
            s.optimized_bytes += len;
        } else {
            s.unoptimized_files += 1;
            s.unoptimized_bytes += len;
        }
        Ok(())
    })?;
    s.store_bytes = disk_usage(&vol.dir().store())?;
    s.state_bytes = disk_usage(&vol.dir().state())?;
    s.physical_bytes = s.backing_bytes + s.store_bytes + s.state_bytes;
    s.saved_bytes = s.logical_bytes.saturating_sub(s.physical_bytes);
    if s.logical_bytes > 0 {
        s.savings_rate = s.saved_bytes as f64 / s.logical_bytes as f64;
    }
    Ok(s)
}

/// Allocated bytes of everything below `dir` (directories included).
pub(crate) fn disk_usage(dir: &Path) -> Result<u64> {
    let io = |e| Error::io(format!("measuring {}", dir.display()), e);
    let mut total = 0;
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let meta = entry.metadata().map_err(io)?;
        total += allocated_bytes(&meta);
        if meta.is_dir() {
            total += disk_usage(&entry.path())?;
        }
    }
    Ok(total)
}
