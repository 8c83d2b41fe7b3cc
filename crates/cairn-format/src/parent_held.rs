//! The parent check's record: a local note (never in the store) in which a
//! host's backups keep, for each file of several chunks, the containers that
//! held the file's recipe nodes and data chunks when a backup last looked
//! them up (the engine's `backup/parent_held.rs` says how it is used and why
//! that is safe). Layout (little-endian; `docs/FORMAT.md`, "Local notes"):
//!
//! ```text
//! note  := "CAIRNPH1" | count u32 | entry × count
//! entry := fp_len u8 | content root fingerprint [fp_len]
//!        | n u16 | container id u64 × n (strictly ascending)
//! ```
//!
//! The version is the magic's last byte. Entries are written in ascending
//! fingerprint order, so one record has one encoding. A note is derived
//! data: a reader that cannot decode one treats it as no record.

use cairn_core::{ContainerId, Error, Fingerprint, Result};

use crate::bytes::{check_fp_width, put_u32, put_u64, Reader};

pub const PARENT_HELD_MAGIC: [u8; 8] = *b"CAIRNPH1";

/// Most containers one entry may name (the width of its count).
pub const MAX_CONTAINERS_PER_ENTRY: usize = u16::MAX as usize;

/// Smallest encoded entry: a one-byte fingerprint and no container.
const MIN_ENTRY_LEN: usize = 1 + 1 + 2;

/// One content root and the containers its nodes and chunks were found in.
pub type HeldEntry = (Fingerprint, Box<[ContainerId]>);

/// Encodes `entries` as a note. Each entry's ids must be strictly ascending
/// and at most [`MAX_CONTAINERS_PER_ENTRY`]; entries are sorted here.
pub fn encode_parent_held<'a>(
    entries: impl IntoIterator<Item = (&'a Fingerprint, &'a [ContainerId])>,
) -> Vec<u8> {
    let mut entries: Vec<_> = entries.into_iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = Vec::with_capacity(12 + entries.len() * 60);
    out.extend_from_slice(&PARENT_HELD_MAGIC);
    put_u32(&mut out, entries.len() as u32);
    for (root, ids) in entries {
        debug_assert!(ids.len() <= MAX_CONTAINERS_PER_ENTRY);
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids not ascending");
        let fp = root.as_bytes();
        out.push(fp.len() as u8);
        out.extend_from_slice(fp);
        out.extend_from_slice(&(ids.len() as u16).to_le_bytes());
        for id in ids {
            put_u64(&mut out, id.0);
        }
    }
    out
}

/// The entries of note `b`, whole and exactly, in their order.
pub fn decode_parent_held(b: &[u8]) -> Result<Vec<HeldEntry>> {
    const WHAT: &str = "parent check record";
    let mut r = Reader::new(WHAT, b);
    let magic = r.take(8, "magic")?;
    if magic != PARENT_HELD_MAGIC {
        return Err(Error::corrupt(
            WHAT,
            format!("bad magic \"{}\"", crate::bytes::show_magic(magic)),
        ));
    }
    let count = r.u32("entry count")? as usize;
    if count > r.remaining() / MIN_ENTRY_LEN {
        return Err(r.corrupt(format!(
            "entry count {count} exceeds what {} bytes can hold",
            r.remaining()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let width = r.u8("fingerprint width")? as usize;
        check_fp_width(WHAT, width)?;
        let root = r.fp(width, "content root")?;
        // At most 65,535 ids: a bounded allocation whatever the bytes say.
        let n = r.u16("container count")?;
        let ids = (0..n)
            .map(|_| r.u64("container id").map(ContainerId))
            .collect::<Result<Box<[ContainerId]>>>()?;
        if !ids.windows(2).all(|w| w[0] < w[1]) {
            return Err(r.corrupt("container ids not strictly ascending"));
        }
        if out
            .last()
            .is_some_and(|(last, _): &HeldEntry| last.as_bytes() >= root.as_bytes())
        {
            return Err(r.corrupt("entries not in ascending fingerprint order"));
        }
        out.push((root, ids));
    }
    r.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fp(b: u8) -> Fingerprint {
        Fingerprint::from_slice(&[b; 32])
    }

    #[test]
    fn a_record_round_trips_sorted_and_rejects_damage() {
        let a = [ContainerId(3), ContainerId(9)];
        let bytes = encode_parent_held([(&fp(2), &[][..]), (&fp(1), &a[..])]);
        let back = decode_parent_held(&bytes).unwrap();
        assert_eq!(back, vec![(fp(1), a.into()), (fp(2), [].into())]);
        for cut in 0..bytes.len() {
            assert!(decode_parent_held(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_parent_held(&longer).is_err());
        let mut foreign = bytes.clone();
        foreign[0] ^= 1;
        assert!(decode_parent_held(&foreign).is_err());
    }

    #[test]
    fn out_of_order_ids_and_entries_are_refused() {
        let ids = [ContainerId(1), ContainerId(2)];
        let mut bytes = encode_parent_held([(&fp(1), &ids[..])]);
        // Swap the two ids' low bytes: 2, 1.
        let at = bytes.len() - 16;
        bytes[at] = 2;
        bytes[at + 8] = 1;
        let e = decode_parent_held(&bytes).unwrap_err().to_string();
        assert!(e.contains("ascending"), "{e}");

        let mut two = encode_parent_held([(&fp(1), &[][..]), (&fp(2), &[][..])]);
        // Make the second root equal to the first.
        let second = 12 + 1 + 32 + 2 + 1;
        two[second..second + 32].fill(1);
        let e = decode_parent_held(&two).unwrap_err().to_string();
        assert!(e.contains("order"), "{e}");
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut bytes = PARENT_HELD_MAGIC.to_vec();
        bytes.extend(u32::MAX.to_le_bytes());
        let e = decode_parent_held(&bytes).unwrap_err().to_string();
        assert!(e.contains("entry count"), "{e}");
    }

    proptest! {
        #[test]
        fn any_record_round_trips(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 1..=32),
                proptest::collection::btree_set(any::<u64>(), 0..6),
                0..12,
            )
        ) {
            let entries: Vec<HeldEntry> = entries
                .into_iter()
                .map(|(k, ids)| (Fingerprint::from_slice(&k), ids.into_iter().map(ContainerId).collect()))
                .collect();
            let bytes = encode_parent_held(entries.iter().map(|(f, ids)| (f, &ids[..])));
            let mut want = entries.clone();
            want.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            prop_assert_eq!(decode_parent_held(&bytes).unwrap(), want);
        }
    }
}
