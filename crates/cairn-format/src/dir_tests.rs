use super::*;
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
        size: 12345,
        target: None,
        content: Some(BlobRef {
            root: fp(w, 7),
            level: 1,
            size: 12345,
        }),
    }
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
    assert_eq!(out, [DIR_VERSION, 0]);
    assert!(decode_dir(&out, 32).unwrap().is_empty());
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

/// Encodes entries without validation (to build corrupt listings).
fn encode_raw(entries: &[DirEntry]) -> Vec<u8> {
    let mut out = vec![DIR_VERSION];
    put_varint(&mut out, entries.len() as u64);
    for e in entries {
        let mut one = Vec::new();
        let mut ok = e.clone();
        ok.name = b"x".to_vec();
        let (tgt, cnt) = (ok.target.take(), ok.content.take());
        ok.kind = EntryKind::File;
        encode_dir(&[ok], &mut one).unwrap();
        // Skip version, count (1 byte), name_len + name "x" (2 bytes).
        put_varint(&mut out, e.name.len() as u64);
        out.extend_from_slice(&e.name);
        out.push(e.kind as u8);
        let flags = if tgt.is_some() { 1 } else { 0 } | if cnt.is_some() { 2 } else { 0 };
        out.push(flags);
        out.extend_from_slice(&one[2 + 2 + 2..]);
        if let Some(t) = tgt {
            put_varint(&mut out, t.len() as u64);
            out.extend_from_slice(&t);
        }
        if let Some(c) = cnt {
            out.extend_from_slice(c.root.as_bytes());
            out.push(c.level);
            put_u64(&mut out, c.size);
        }
    }
    out
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

    let mut b = encode_raw(&[file("a", 4)]);
    b[4] = 3; // kind
    assert!(decode_dir(&b, 4)
        .unwrap_err()
        .to_string()
        .contains("unknown kind 3"));
    let mut b = encode_raw(&[file("a", 4)]);
    b[5] |= 4; // flags
    assert!(decode_dir(&b, 4)
        .unwrap_err()
        .to_string()
        .contains("unknown flags"));
    let mut b = encode_raw(&[file("a", 4)]);
    b[0] = 2;
    assert!(matches!(
        decode_dir(&b, 4),
        Err(Error::UnsupportedVersion { found: 2, .. })
    ));
    b[0] = 0;
    assert!(decode_dir(&b, 4).unwrap_err().is_corruption());
    // A huge count is rejected before allocating.
    assert!(decode_dir(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f], 4).is_err());
    // Wrong fingerprint width.
    assert!(decode_dir(&encode_raw(&good), 5).is_err());
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
        proptest::collection::vec(any::<u8>(), 0..20),
        proptest::option::of((any::<[u8; 32]>(), any::<u8>(), any::<u64>())),
    )
        .prop_filter_map(
            "valid name",
            move |(name, kind, (mode, uid, gid, mtime_ns, size), tgt, content)| {
                if name_error(&name).is_some() {
                    return None;
                }
                let kind = EntryKind::from_u8(kind).unwrap();
                let link = kind == EntryKind::Symlink;
                Some(DirEntry {
                    name,
                    kind,
                    mode,
                    uid,
                    gid,
                    mtime_ns,
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
                })
            },
        )
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn prop_round_trip((w, entries) in listing_strategy()) {
        let mut out = Vec::new();
        encode_dir(&entries, &mut out).unwrap();
        prop_assert_eq!(decode_dir(&out, w).unwrap(), entries);
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
        if let Ok(decoded) = decode_dir(&out, w) {
            let mut again = Vec::new();
            encode_dir(&decoded, &mut again).unwrap();
            prop_assert_eq!(again, out);
        }
    }
}
