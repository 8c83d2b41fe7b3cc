//! The container-id mark (object `container-ids`): one past every container
//! id ever handed to a writer. Writers take ids in blocks
//! (docs/concurrency.md, "Container ids in blocks"): under the `ids` lock a
//! writer reads the mark, writes it [`BLOCK`] ids higher, and then hands
//! out the ids in between without asking anyone, so writers running
//! together never pick one id, and after any crash every container present
//! (committed or orphaned) has an id below the mark. The next writer starts
//! there without listing `containers/`, which on object storage costs a
//! request per 1,000 containers.
//!
//! The mark only rises. A collection takes the ids of its copies the same
//! way, as one block of the size it needs (`gc/reservation.rs`). At most a
//! block's unused ids are skipped when a writer ends or crashes. A missing
//! or damaged mark (a repository from before it, a lost object) costs one
//! listing, after which it is written again: like the index, it can be
//! lost and rebuilt.
//!
//! Format: an envelope (magic `CAIRNCID`, version 1) around one
//! little-endian u64.

use cairn_core::{Backend, ContainerId, Error, Result};
use cairn_format::envelope::{open, seal};

pub const KEY: &str = "container-ids";
const MAGIC: [u8; 8] = *b"CAIRNCID";
const VERSION: u32 = 1;
/// Ids in one writer's block: 256 MiB of 4 MiB containers per claim.
pub const BLOCK: u64 = 64;

pub fn encode(mark: ContainerId) -> Vec<u8> {
    seal(&MAGIC, VERSION, &mark.0.to_le_bytes())
}

pub fn decode(bytes: &[u8]) -> Result<ContainerId> {
    let (_, payload) = open(&MAGIC, VERSION, "container id mark", bytes)?;
    let word: [u8; 8] = payload.try_into().map_err(|_| {
        Error::corrupt(
            "container id mark",
            format!("{} bytes is not one 8-byte id", payload.len()),
        )
    })?;
    Ok(ContainerId(u64::from_le_bytes(word)))
}

/// The mark, `None` when there is none or it is damaged (then the caller
/// lists the containers). Other errors (the store unreachable) are errors.
pub fn read(backend: &dyn Backend) -> Result<Option<ContainerId>> {
    match backend.read(KEY) {
        Ok(bytes) => Ok(decode(&bytes).ok()),
        Err(e) if e.is_not_found() || e.is_corruption() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The mark as [`read`] finds it, except that a damaged mark is an error
/// (`check` reports it) instead of `None`.
pub fn read_checked(backend: &dyn Backend) -> Result<Option<ContainerId>> {
    match backend.read(KEY) {
        Ok(bytes) => decode(&bytes).map(Some),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn write(backend: &dyn Backend, mark: ContainerId) -> Result<()> {
    backend.write_atomic(KEY, &encode(mark))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_and_damage() {
        let b = encode(ContainerId(0x0102));
        // magic | version u32 | payload length u64 | id u64 | CRC-32C
        let golden: [u8; 32] = [
            0x43, 0x41, 0x49, 0x52, 0x4e, 0x43, 0x49, 0x44, 0x01, 0x00, 0x00, 0x00, 0x08, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x56, 0xbf, 0xa2, 0x8c,
        ];
        assert_eq!(b, golden);
        assert_eq!(decode(&b).unwrap(), ContainerId(0x0102));
        let mut bad = b.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(decode(&bad).is_err());
        assert!(decode(&seal(&MAGIC, VERSION, &[1, 2, 3])).is_err());
    }
}
