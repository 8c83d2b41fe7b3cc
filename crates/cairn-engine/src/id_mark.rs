//! The container-id mark and the id slots: how writers running together
//! take container ids that no one else is ever handed
//! (docs/concurrency.md, "Container ids in slots").
//!
//! Ids are claimed in *slots* of [`BLOCK`] ids: slot `k` holds ids
//! `[k * BLOCK, (k + 1) * BLOCK)` and is claimed by creating the object
//! `id-slots/<k>` with `create_new`: of two writers that try one slot,
//! exactly one creates it, so no lock is taken (the `ids` lock this
//! replaces cost a lease write, a listing and a delete per claim and, with
//! eight writers on object storage, made them queue for seconds). A
//! claim that loses a slot tries the next one.
//!
//! The mark (object `container-ids`) is where a writer starts looking:
//! raised after each claim to the end of the slots claimed, without a
//! lock, so two writers raising it at once may leave it below a slot
//! claimed (it is a hint: the next claim from it loses that slot and moves
//! on). One past every id ever handed out is the higher of the mark and
//! the end of the highest slot ([`slots_end`], a listing: `check` and a
//! writer that finds no mark). A writer that finds no mark (a repository
//! from before it, a lost object) also lists `containers/`, whose ids may
//! predate the slots. Like the index, both can be lost and rebuilt; the
//! slots only ever grow (one small object per claim, one per backup).
//!
//! Format: the mark and each slot are an envelope (magic `CAIRNCID`,
//! version 1) around one little-endian u64: the mark, or the slot's end.

use cairn_core::{Backend, ContainerId, Error, Result};
use cairn_format::envelope::{open, seal};

pub const KEY: &str = "container-ids";
const MAGIC: [u8; 8] = *b"CAIRNCID";
const VERSION: u32 = 1;
/// Ids in one slot: 256 MiB of 4 MiB containers per claim.
pub const BLOCK: u64 = 64;
/// Where the claimed slots are, one object each.
pub const SLOTS: &str = "id-slots/";

/// The object that claims slot `k`.
pub fn slot_key(k: u64) -> String {
    format!("{SLOTS}{k:016x}")
}

/// The slot a key of [`SLOTS`] names.
pub fn parse_slot(key: &str) -> Option<u64> {
    // Named like an index generation: 16 hex digits after the prefix.
    crate::object_names::parse_generation(key, SLOTS)
}

/// Claims slot `k`: whether this call created it (`false`: someone
/// else holds it).
pub fn claim_slot(backend: &dyn Backend, k: u64) -> Result<bool> {
    backend.create_new(&slot_key(k), &encode(ContainerId((k + 1) * BLOCK)))
}

/// One past every id of every slot claimed (0 when none is), from one
/// listing of [`SLOTS`].
pub fn slots_end(backend: &dyn Backend) -> Result<u64> {
    Ok(backend
        .list(SLOTS)?
        .iter()
        .filter_map(|k| parse_slot(k))
        .max()
        .map_or(0, |k| (k + 1) * BLOCK))
}

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
