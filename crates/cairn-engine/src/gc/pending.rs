//! The containers a collection is deleting (object `gc-pending`): written
//! after their live chunks' copies are durable and before the index stops
//! naming them, removed once they are gone. While it exists the listed
//! containers are garbage: backups do not deduplicate against them (a
//! chunk met again is stored again, never resurrected), `check` counts
//! them as reclaimable, and the next collection finishes their deletion
//! first (docs/gc.md, "Crash safety").
//!
//! Format: an envelope (magic `CAIRNGCP`, version 1) around the ids as
//! little-endian u64s, ascending.

use cairn_core::{Backend, ContainerId, Result};
use cairn_format::envelope::{open_ids, seal_ids};

pub const KEY: &str = "gc-pending";
const MAGIC: [u8; 8] = *b"CAIRNGCP";
const VERSION: u32 = 1;

pub fn encode(ids: &[ContainerId]) -> Vec<u8> {
    seal_ids(&MAGIC, VERSION, ids.iter().map(|id| id.0))
}

pub fn decode(bytes: &[u8]) -> Result<Vec<ContainerId>> {
    Ok(open_ids(&MAGIC, VERSION, "gc pending list", bytes)?
        .into_iter()
        .map(ContainerId)
        .collect())
}

/// The containers being deleted (none when no collection was interrupted).
pub fn read(backend: &dyn Backend) -> Result<Vec<ContainerId>> {
    match backend.read(KEY) {
        Ok(b) => decode(&b),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

pub fn write(backend: &dyn Backend, ids: &[ContainerId]) -> Result<()> {
    backend.write_atomic(KEY, &encode(ids))
}

pub fn clear(backend: &dyn Backend) -> Result<()> {
    match backend.delete(KEY) {
        Err(e) if e.is_not_found() => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden bytes: the pending list's format is pinned.
    #[test]
    fn pending_list_bytes_are_stable() {
        let b = encode(&[ContainerId(1), ContainerId(0x0102)]);
        assert_eq!(&b[..8], b"CAIRNGCP");
        assert_eq!(b.len(), 8 + 4 + 8 + 16 + 4);
        assert_eq!(
            &b[20..36],
            &[1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            decode(&b).unwrap(),
            vec![ContainerId(1), ContainerId(0x0102)]
        );
        let mut bad = b.clone();
        bad[21] ^= 1;
        assert!(decode(&bad).unwrap_err().is_corruption());
    }
}
