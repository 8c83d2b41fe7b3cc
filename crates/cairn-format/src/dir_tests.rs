use super::*;
use crate::dir_entry::FLAG_CONTENT_SIZE;
use cairn_core::Fingerprint;
use proptest::prelude::*;

fn fp(w: usize, b: u8) -> Fingerprint {
    Fingerprint::from_slice(&vec![b; w])
}

fn file(name: &str, w: usize) -> DirEntry {
    DirEntry {
        name: name.as_bytes().to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        uid: 1000,
        gid: 1000,
        mtime_ns: 1_700_000_000_123_456_789,
        ctime_ns: 1_700_000_001_000_000_000,
        inode: 4242,
        size: 12345,
        target: None,
        content: Some(BlobRef {
            root: fp(w, 7),
            level: 1,
            size: 12345,
        }),
        children: None,
        extras: Default::default(),
    }
}

fn inline_dir(name: &str, children: Vec<DirEntry>, w: usize) -> DirEntry {
    let mut d = file(name, w);
    d.kind = EntryKind::Dir;
    d.mode = 0o40755;
    d.content = None;
    d.children = Some(children);
    d
}

fn sample(w: usize) -> Vec<DirEntry> {
    let mut d = file("dir", w);
    d.kind = EntryKind::Dir;
    d.mode = 0o40755;
    let mut empty = file("empty", w);
    empty.size = 0;
    empty.content = None;
    let mut link = file("link", w);
    link.kind = EntryKind::Symlink;
    link.mode = 0o120777;
    link.target = Some(b"../target".to_vec());
    link.content = None;
    link.mtime_ns = -5;
    vec![file("a.txt", w), d, empty, link]
}

#[test]
fn round_trip() {
    let entries = sample(32);
    let mut out = vec![9];
    encode_dir(&entries, &mut out).unwrap();
    assert_eq!(out[0], 9, "encode appends");
    assert_eq!(decode_dir(&out[1..], 32).unwrap(), entries);
    let mut out = Vec::new();
    encode_dir(&[], &mut out).unwrap();
    // The version, a shape column holding the count 0, ten empty columns.
    let mut empty = vec![DIR_VERSION, 1, 0];
    empty.extend([0; 10]);
    assert_eq!(out, empty);
    assert!(decode_dir(&out, 32).unwrap().is_empty());
}

#[test]
fn inline_listings_nest_and_round_trip() {
    let inner = inline_dir("inner", vec![inline_dir("e", vec![], 8), file("x", 8)], 8);
    let entries = vec![file("a", 8), inline_dir("d", vec![inner, file("y", 8)], 8)];
    let mut out = Vec::new();
    encode_dir(&entries, &mut out).unwrap();
    assert_eq!(decode_dir(&out, 8).unwrap(), entries);
}

fn nested(depth: usize) -> Vec<DirEntry> {
    let mut entries = vec![file("leaf", 4)];
    for _ in 0..depth {
        entries = vec![inline_dir("d", entries, 4)];
    }
    entries
}

#[test]
fn inline_nesting_is_bounded() {
    let mut out = Vec::new();
    encode_dir(&nested(MAX_INLINE_DEPTH), &mut out).unwrap();
    assert_eq!(decode_dir(&out, 4).unwrap(), nested(MAX_INLINE_DEPTH));
    let deep = nested(MAX_INLINE_DEPTH + 1);
    let e = encode_dir(&deep, &mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("nested deeper"), "{e}");
    let e = decode_dir(&encode_raw(&deep), 4).unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains("nested deeper"),
        "{e}"
    );
}

/// Version 1 listings (fixed-width fields, no ctime or inode) still decode.
#[test]
fn version_1_listings_decode() {
    let mut v1 = vec![1, 1, 1, b'a', 0, 2];
    for x in [0o100644u32, 1000, 1000] {
        v1.extend_from_slice(&x.to_le_bytes());
    }
    v1.extend_from_slice(&7i64.to_le_bytes());
    v1.extend_from_slice(&5u64.to_le_bytes());
    v1.extend_from_slice(&[9; 4]);
    v1.push(0);
    v1.extend_from_slice(&5u64.to_le_bytes());
    let got = decode_dir(&v1, 4).unwrap();
    assert_eq!(got.len(), 1);
    let e = &got[0];
    assert_eq!((e.mode, e.uid, e.mtime_ns, e.size), (0o100644, 1000, 7, 5));
    assert_eq!((e.ctime_ns, e.inode), (0, 0));
    assert_eq!(e.content.unwrap().size, 5);
    // Flag 4 (inline listing) did not exist in version 1.
    v1[5] |= 4;
    assert!(decode_dir(&v1, 4)
        .unwrap_err()
        .to_string()
        .contains("unknown flags"));
}

#[test]
fn every_prefix_and_extension_is_rejected() {
    let mut out = Vec::new();
    encode_dir(&sample(6), &mut out).unwrap();
    for cut in 0..out.len() {
        assert!(
            decode_dir(&out[..cut], 6).unwrap_err().is_corruption(),
            "cut {cut}"
        );
    }
    out.push(0);
    assert!(decode_dir(&out, 6)
        .unwrap_err()
        .to_string()
        .contains("trailing"));
}

#[test]
fn encoder_rejects_invalid_entries() {
    let bad_names: [&[u8]; 6] = [b"", b".", b"..", b"a/b", b"a\0", b"/"];
    for n in bad_names {
        let mut e = file("x", 4);
        e.name = n.to_vec();
        let mut out = vec![1, 2];
        let err = encode_dir(&[e], &mut out).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{n:?}: {err}");
        assert_eq!(out, [1, 2], "output untouched on error");
    }
    let mut out = Vec::new();
    assert!(encode_dir(&[file("b", 4), file("a", 4)], &mut out).is_err());
    let e = encode_dir(&[file("a", 4), file("a", 4)], &mut out).unwrap_err();
    assert!(e.to_string().contains("duplicate"));
    let mut link = file("l", 4);
    link.kind = EntryKind::Symlink;
    assert!(encode_dir(std::slice::from_ref(&link), &mut out).is_err()); // no target, has content
    link.target = Some(b"t".to_vec());
    assert!(encode_dir(std::slice::from_ref(&link), &mut out).is_err()); // has content
    let mut f = file("f", 4);
    f.target = Some(b"t".to_vec());
    assert!(encode_dir(&[f], &mut out).is_err());
    // Mixed fingerprint widths.
    assert!(encode_dir(&[file("a", 4), file("b", 5)], &mut out).is_err());
    assert!(out.is_empty());
}

/// Encodes entries (version 3) without validation, to build corrupt listings.
fn encode_raw(entries: &[DirEntry]) -> Vec<u8> {
    let mut out = vec![DIR_VERSION];
    crate::dir_columns::put_listing(entries, &mut out);
    out
}

/// Encodes entries as version 2 (row-wise), as builds before version 3 did.
fn encode_v2(entries: &[DirEntry]) -> Vec<u8> {
    let mut out = vec![2];
    crate::dir_rows::put_entries(entries, &mut out);
    out
}

/// Listings written before version 3 keep decoding to the same entries.
#[test]
fn version_2_listings_decode() {
    let inner = inline_dir("inner", vec![inline_dir("e", vec![], 8), file("x", 8)], 8);
    let entries = vec![file("a", 8), inline_dir("d", vec![inner, file("y", 8)], 8)];
    assert_eq!(decode_dir(&encode_v2(&entries), 8).unwrap(), entries);
    assert_eq!(decode_dir(&encode_v2(&sample(8)), 8).unwrap(), sample(8));
    let e = decode_dir(&encode_v2(&[file("b", 4), file("a", 4)]), 4).unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains("not sorted"),
        "{e}"
    );
}

/// Where each column's bytes start in a version 3 listing whose column
/// lengths all fit one varint byte.
fn column_starts(b: &[u8]) -> Vec<usize> {
    let mut at = 1;
    let mut starts = Vec::new();
    for _ in 0..11 {
        assert!(b[at] < 0x80);
        starts.push(at + 1);
        at += 1 + b[at] as usize;
    }
    assert_eq!(at, b.len());
    starts
}

/// Flag 16 carries a content size exactly when it differs from the size.
#[test]
fn content_size_is_stored_only_when_it_differs() {
    let mut f = file("f", 4);
    let same = encode_raw(std::slice::from_ref(&f));
    // A content size differing from the size: a sparse file's.
    f.content.as_mut().unwrap().size = 7;
    f.extras.extents = Some(vec![Extent { offset: 0, len: 7 }]);
    let differs = encode_raw(std::slice::from_ref(&f));
    assert_eq!(decode_dir(&differs, 4).unwrap(), vec![f.clone()]);
    assert!(differs.len() > same.len());
    // Flag 16 on an entry whose sizes are equal: not canonical.
    let mut b = same.clone();
    b[4] |= FLAG_CONTENT_SIZE;
    let contents = column_starts(&b)[6] - 1;
    assert_eq!(b[contents], 1, "contents column length: the level alone");
    b[contents] = 3;
    b.insert(contents + 2, 0xb9);
    b.insert(contents + 3, 0x60); // 12345, the size itself
    let e = decode_dir(&b, 4).unwrap_err();
    assert!(e.to_string().contains("equals the size"), "{e}");
    // Flag 16 without content.
    let mut empty = file("e", 4);
    empty.content = None;
    let mut b = encode_raw(&[empty]);
    b[4] |= FLAG_CONTENT_SIZE;
    let e = decode_dir(&b, 4).unwrap_err();
    assert!(
        e.to_string().contains("content size without content"),
        "{e}"
    );
}

/// Two backups of a copied tree (every ctime and inode new) share the bytes
/// of the names, attributes, sizes and fingerprints columns: the columns
/// that change sit together at the end, after the fingerprints.
#[test]
fn a_copy_changes_only_the_trailing_columns() {
    let before = sample(32);
    let mut after = before.clone();
    for (i, e) in after.iter_mut().enumerate() {
        e.ctime_ns += 1_000_000_007;
        e.inode = 900_000 + i as u64 * 3;
    }
    let (a, b) = (encode_raw(&before), encode_raw(&after));
    let same = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let ctimes = column_starts(&a)[9] - 1;
    assert!(same >= ctimes, "common prefix {same}, ctimes at {ctimes}");
}

#[test]
fn decoder_rejects_invalid_listings() {
    let good = sample(4);
    assert_eq!(decode_dir(&encode_raw(&good), 4).unwrap(), good);
    let check = |entries: &[DirEntry], needle: &str| {
        let e = decode_dir(&encode_raw(entries), 4).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains(needle), "{e}");
    };
    check(&[file("b", 4), file("a", 4)], "not sorted");
    check(&[file("a", 4), file("a", 4)], "duplicate");
    check(&[file("..", 4)], ". or ..");
    check(&[file("a/b", 4)], "'/'");
    let mut link = file("l", 4);
    link.kind = EntryKind::Symlink;
    check(std::slice::from_ref(&link), "without a target");
    link.target = Some(vec![]);
    check(std::slice::from_ref(&link), "with content");

    // Version, shape column length, entry count, then kind and flags.
    let mut b = encode_raw(&[file("a", 4)]);
    b[3] = 7; // kind
    assert!(decode_dir(&b, 4)
        .unwrap_err()
        .to_string()
        .contains("unknown kind 7"));
    let mut b = encode_raw(&[file("a", 4)]);
    b[4] |= 32; // flags
    assert!(decode_dir(&b, 4)
        .unwrap_err()
        .to_string()
        .contains("unknown flags"));
    let mut b = encode_raw(&[file("a", 4)]);
    b[0] = 4;
    assert!(matches!(
        decode_dir(&b, 4),
        Err(Error::UnsupportedVersion { found: 4, .. })
    ));
    b[0] = 0;
    assert!(decode_dir(&b, 4).unwrap_err().is_corruption());
    let mut f = file("f", 4);
    f.children = Some(vec![]);
    // Kinds are named as a person reads them, not as the Rust enum's Debug.
    check(
        std::slice::from_ref(&f),
        "entry 0 (\"f\"): file entry with an inline listing",
    );
    let mut c = file("c", 4);
    c.kind = EntryKind::CharDevice;
    c.content = None;
    c.target = Some(b"x".to_vec());
    check(
        std::slice::from_ref(&c),
        "char device entry with a link target",
    );
    let mut d = inline_dir("d", vec![], 4);
    d.content = file("x", 4).content;
    check(
        std::slice::from_ref(&d),
        "both a listing blob and an inline listing",
    );
    check(
        &[inline_dir("d", vec![file("b", 4), file("a", 4)], 4)],
        "not sorted",
    );
    // A huge count is rejected before allocating.
    assert!(decode_dir(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f], 4).is_err());
    let mut huge = vec![DIR_VERSION, 5, 0xff, 0xff, 0xff, 0xff, 0x0f];
    huge.extend([0; 10]);
    let e = decode_dir(&huge, 4).unwrap_err();
    assert!(e.to_string().contains("cannot fit"), "{e}");
    // Wrong fingerprint width.
    assert_ne!(decode_dir(&encode_raw(&good), 5).ok(), Some(good.clone()));
    assert!(decode_dir(&encode_raw(&good), 0).is_err());
}

fn entry_strategy(w: usize) -> impl Strategy<Value = DirEntry> {
    (
        proptest::collection::vec(
            any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0),
            1..12,
        ),
        0u8..3,
        any::<(u32, u32, u32, i64, u64)>(),
        any::<(i64, u64)>(),
        proptest::collection::vec(any::<u8>(), 0..20),
        proptest::option::of((any::<[u8; 32]>(), any::<u8>(), any::<u64>())),
    )
        .prop_filter_map(
            "valid name",
            move |(
                name,
                kind,
                (mode, uid, gid, mtime_ns, size),
                (ctime_ns, inode),
                tgt,
                content,
            )| {
                if name_error(&name).is_some() {
                    return None;
                }
                let kind = EntryKind::from_u8(kind).unwrap();
                let link = kind == EntryKind::Symlink;
                let mut e = DirEntry {
                    name,
                    kind,
                    mode,
                    uid,
                    gid,
                    mtime_ns,
                    ctime_ns,
                    inode,
                    size,
                    target: link.then_some(tgt),
                    content: if link {
                        None
                    } else {
                        content.map(|(b, level, size)| BlobRef {
                            root: Fingerprint::from_slice(&b[..w]),
                            level,
                            size,
                        })
                    },
                    children: None,
                    extras: Default::default(),
                };
                fit_sizes(&mut e, w);
                Some(e)
            },
        )
}

/// Makes a generated entry's sizes obey the size rules (`dir_size_tests`):
/// at most `i64::MAX`, content within its level's reach, and a file's
/// content holding exactly its size.
fn fit_sizes(e: &mut DirEntry, w: usize) {
    e.size &= i64::MAX as u64;
    match &mut e.content {
        Some(c) => {
            c.size = c.size.min(crate::tree::max_blob_size(c.level, w));
            if e.kind == EntryKind::File {
                e.size = c.size;
            }
        }
        None if e.kind == EntryKind::File => e.size = 0,
        None => {}
    }
}

fn listing_strategy() -> impl Strategy<Value = (usize, Vec<DirEntry>)> {
    (1usize..=32).prop_flat_map(|w| {
        proptest::collection::vec(entry_strategy(w), 0..16).prop_map(move |mut v| {
            v.sort_by(|a, b| a.name.cmp(&b.name));
            v.dedup_by(|a, b| a.name == b.name);
            (w, v)
        })
    })
}

/// Mutated valid listings never panic the decoder, and what decodes
/// re-encodes to the same bytes (within one version: a mutated version
/// byte may make a valid version-1 listing, which re-encodes as version 2).
#[test]
fn mutated_listings_decode_canonically_or_not_at_all() {
    let valid = listing_strategy().prop_map(|(w, entries)| {
        let mut out = Vec::new();
        encode_dir(&entries, &mut out).unwrap();
        (w, out)
    });
    let run = crate::testutil::MutationRun {
        name: "directory listing",
        cases: 512,
        min_decoded_pct: 30,
    };
    crate::testutil::check_mutations(
        run,
        valid,
        |_| {},
        |w, bytes| {
            let Ok(decoded) = decode_dir(bytes, *w) else {
                return Ok(false);
            };
            if bytes[0] == DIR_VERSION {
                let mut again = Vec::new();
                encode_dir(&decoded, &mut again).unwrap();
                prop_assert_eq!(&again[..], bytes);
            }
            Ok(true)
        },
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prop_round_trip((w, entries) in listing_strategy()) {
        let mut out = Vec::new();
        encode_dir(&entries, &mut out).unwrap();
        prop_assert_eq!(decode_dir(&out, w).unwrap(), entries);
    }

    #[test]
    fn prop_version_2_round_trip((w, entries) in listing_strategy()) {
        prop_assert_eq!(decode_dir(&encode_v2(&entries), w).unwrap(), entries);
    }

    #[test]
    fn prop_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), w in 0usize..40) {
        let _ = decode_dir(&bytes, w);
    }

    #[test]
    fn prop_mutations_never_panic_and_stay_canonical(
        (w, entries) in listing_strategy(),
        pos in any::<prop::sample::Index>(),
        x in any::<u8>(),
    ) {
        let mut out = Vec::new();
        encode_dir(&entries, &mut out).unwrap();
        let i = pos.index(out.len());
        out[i] = x;
        // A mutated version byte may make a valid version 1 listing, which
        // re-encodes as version 2: canonical only within one version.
        if let (Ok(decoded), true) = (decode_dir(&out, w), out[0] == DIR_VERSION) {
            let mut again = Vec::new();
            encode_dir(&decoded, &mut again).unwrap();
            prop_assert_eq!(again, out);
        }
    }
}
