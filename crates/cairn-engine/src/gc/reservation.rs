//! The container ids a running collection copies into (object `gc-ids`):
//! written at Merge, under the writer lock, before the writer lock is
//! released for the long phases (`003_ea5fccc485a97c5d.txt` §3.5: ingest
//! goes on while GC runs).
//!
//! - Every writer's next id is at least the reservation's end
//!   ([`crate::repo`]'s id floor), so a backup running beside the
//!   collection never picks an id the collection writes.
//! - A backup that commits meanwhile raises the index's coverage mark over
//!   the reserved range without indexing it: the collection's commit
//!   indexes its copies. Copies left by a collection that died are sound
//!   duplicates of chunks the index names elsewhere (the next Merge points
//!   the index at one when a pending delete retires the original); the
//!   next Merge replaces the reservation.
//!
//! Format: an envelope (magic `CAIRNGCI`, version 1) around two
//! little-endian u64s, the first reserved id and one past the last.

use cairn_core::{Backend, ContainerId, Error, Result};
use cairn_format::envelope::{open, seal};

pub const KEY: &str = "gc-ids";
const MAGIC: [u8; 8] = *b"CAIRNGCI";
const VERSION: u32 = 1;

/// Ids `start..end`, reserved for one collection's copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub start: ContainerId,
    pub end: ContainerId,
}

impl Reservation {
    pub fn contains(&self, id: ContainerId) -> bool {
        self.start <= id && id < self.end
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(16);
        payload.extend_from_slice(&self.start.0.to_le_bytes());
        payload.extend_from_slice(&self.end.0.to_le_bytes());
        seal(&MAGIC, VERSION, &payload)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (_, payload) = open(&MAGIC, VERSION, "gc id reservation", bytes)?;
        let word = |i: usize| {
            payload
                .get(i * 8..i * 8 + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        match (payload.len(), word(0), word(1)) {
            (16, Some(start), Some(end)) if start <= end => Ok(Reservation {
                start: ContainerId(start),
                end: ContainerId(end),
            }),
            _ => Err(Error::corrupt(
                "gc id reservation",
                format!(
                    "{} bytes is not an ascending pair of 8-byte ids",
                    payload.len()
                ),
            )),
        }
    }
}

/// The reservation in force, if a collection is running or died.
pub fn read(backend: &dyn Backend) -> Result<Option<Reservation>> {
    match backend.read(KEY) {
        Ok(b) => Reservation::decode(&b).map(Some),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn write(backend: &dyn Backend, r: &Reservation) -> Result<()> {
    backend.write_atomic(KEY, &r.encode())
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

    /// Golden bytes: the on-disk format of docs/FORMAT.md.
    #[test]
    fn encoding_is_stable() {
        let r = Reservation {
            start: ContainerId(0x10),
            end: ContainerId(0x2a),
        };
        let bytes = r.encode();
        assert_eq!(&bytes[..8], b"CAIRNGCI");
        let payload = &bytes[bytes.len() - 16 - 4..bytes.len() - 4];
        assert_eq!(
            payload,
            &[0x10, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(Reservation::decode(&bytes).unwrap(), r);
        assert!(r.contains(ContainerId(0x10)) && !r.contains(ContainerId(0x2a)));
    }

    #[test]
    fn damage_is_an_error() {
        let mut bytes = Reservation {
            start: ContainerId(1),
            end: ContainerId(2),
        }
        .encode();
        let n = bytes.len();
        bytes[n - 6] ^= 1;
        assert!(Reservation::decode(&bytes).unwrap_err().is_corruption());
        assert!(Reservation::decode(&bytes[..n - 3]).is_err());
    }
}
