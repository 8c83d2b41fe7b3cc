//! The size rules of directory entries (issue 30, defect 3): a regular file
//! has content unless it is empty, its content holds exactly its size (a
//! sparse file: its extents' bytes), no size exceeds the largest file size,
//! and no content size exceeds what its tree's level can address. Each
//! rule is checked on both sides: the encoder refuses (`InvalidInput`) and
//! the decoder rejects bytes written without the check (`Corrupt`), in the
//! columnar version 3 and the row-wise version 2.

use super::*;
use crate::extras::Extent;
use cairn_core::Fingerprint;

const W: usize = 32;

fn file(name: &str, size: u64, content: Option<(u8, u64)>) -> DirEntry {
    DirEntry {
        name: name.as_bytes().to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        mtime_ns: 1_700_000_000_000_000_000,
        ctime_ns: 0,
        inode: 7,
        size,
        target: None,
        content: content.map(|(level, size)| BlobRef {
            root: Fingerprint::from_slice(&[5; W]),
            level,
            size,
        }),
        children: None,
        extras: Default::default(),
    }
}

/// `e` as version 3 and version 2 listing bytes, written without checks.
fn unchecked(e: &DirEntry) -> [Vec<u8>; 2] {
    let mut v3 = vec![3];
    crate::dir_columns::put_listing(std::slice::from_ref(e), &mut v3);
    let mut v2 = vec![2];
    crate::dir_rows::put_entries(std::slice::from_ref(e), &mut v2);
    [v3, v2]
}

/// Asserts that the encoder refuses `e` and the decoder rejects its bytes,
/// both saying `why`.
#[track_caller]
fn refused(e: DirEntry, why: &str) {
    let err = encode_dir(std::slice::from_ref(&e), &mut Vec::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    assert!(err.to_string().contains(why), "{err}");
    for bytes in unchecked(&e) {
        let err = decode_dir(&bytes, W).unwrap_err();
        assert!(err.is_corruption(), "version {}: {err}", bytes[0]);
        assert!(err.to_string().contains(why), "{err}");
    }
}

/// Asserts that `e` round-trips through both versions.
#[track_caller]
fn accepted(e: DirEntry) {
    let mut out = Vec::new();
    encode_dir(std::slice::from_ref(&e), &mut out).unwrap();
    assert_eq!(decode_dir(&out, W).unwrap(), std::slice::from_ref(&e));
    for bytes in unchecked(&e) {
        assert_eq!(decode_dir(&bytes, W).unwrap(), std::slice::from_ref(&e));
    }
}

#[test]
fn a_non_empty_file_without_content_is_corrupt() {
    refused(file("f", 100, None), "file of 100 bytes without content");
    refused(file("f", 1 << 63, None), "above the largest file size");
    accepted(file("empty", 0, None));
    accepted(file("f", 100, Some((0, 100))));
}

#[test]
fn a_file_holds_exactly_its_content() {
    refused(
        file("f", 100, Some((0, 99))),
        "file of 100 bytes with 99 bytes",
    );
    refused(
        file("f", 100, Some((1, 101))),
        "file of 100 bytes with 101 bytes",
    );
}

#[test]
fn sizes_stay_within_what_a_tree_level_can_address() {
    let chunk = u64::from(u32::MAX);
    accepted(file("f", chunk, Some((0, chunk))));
    refused(file("f", chunk + 1, Some((0, chunk + 1))), "level 0 tree");
    let fanout = (chunk - 6) / (W as u64 + 8);
    let l1 = chunk * fanout;
    accepted(file("f", l1, Some((1, l1))));
    refused(file("f", l1 + 1, Some((1, l1 + 1))), "level 1 tree");
    // From level 2 on only the largest file size bounds it.
    let largest = i64::MAX as u64;
    accepted(file("f", largest, Some((2, largest))));
    refused(
        file("f", largest + 1, Some((2, largest + 1))),
        "above the largest file size",
    );
    assert_eq!(crate::tree::max_blob_size(0, W), chunk);
    assert_eq!(crate::tree::max_blob_size(1, W), l1);
    assert_eq!(crate::tree::max_blob_size(9, 1), largest);
}

#[test]
fn a_sparse_file_holds_its_extents_bytes() {
    let mut sparse = file("s", 1 << 20, Some((0, 10)));
    sparse.extras.extents = Some(vec![Extent {
        offset: 4096,
        len: 10,
    }]);
    accepted(sparse.clone());
    // All holes: no content at all.
    let mut holes = file("h", 1 << 20, None);
    holes.extras.extents = Some(Vec::new());
    accepted(holes);
    sparse.content = None;
    refused(sparse, "extents hold 10 bytes but the content holds 0");
}
