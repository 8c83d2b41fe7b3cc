use super::*;
use crate::dir::{decode_dir, encode_dir, BlobRef, DirEntry, EntryKind};
use cairn_core::Fingerprint;
use proptest::prelude::*;

fn entry(kind: EntryKind, extras: Extras) -> DirEntry {
    let data = extras
        .extents
        .as_ref()
        .map(|e| e.iter().map(|x| x.len).sum::<u64>());
    DirEntry {
        name: b"e".to_vec(),
        kind,
        mode: 0o644,
        uid: 0,
        gid: 0,
        mtime_ns: 1,
        ctime_ns: 2,
        inode: 3,
        size: if kind == EntryKind::File { 1 << 30 } else { 0 },
        target: None,
        content: match (kind, data) {
            (EntryKind::File, Some(0)) => None,
            (EntryKind::File, d) => Some(BlobRef {
                root: Fingerprint::from_slice(&[9; 8]),
                level: 0,
                size: d.unwrap_or(1 << 30),
            }),
            _ => None,
        },
        children: None,
        extras,
    }
}

fn round_trip(e: &DirEntry) -> Vec<u8> {
    let mut out = Vec::new();
    encode_dir(std::slice::from_ref(e), &mut out).unwrap();
    assert_eq!(decode_dir(&out, 8).unwrap(), vec![e.clone()]);
    out
}

fn encode_err(e: &DirEntry) -> String {
    let mut out = Vec::new();
    encode_dir(std::slice::from_ref(e), &mut out)
        .unwrap_err()
        .to_string()
}

#[test]
fn each_field_round_trips() {
    let x = Extras {
        xattrs: vec![
            (b"user.a".to_vec(), b"1".to_vec()),
            (b"user.b".to_vec(), vec![]),
        ],
        hard_link: Some(HardLink {
            dev: 2049,
            nlink: 3,
        }),
        extents: Some(vec![
            Extent {
                offset: 4096,
                len: 10,
            },
            Extent {
                offset: 1 << 20,
                len: 4096,
            },
        ]),
        other: vec![(7, b"later".to_vec())],
        ..Extras::default()
    };
    round_trip(&entry(EntryKind::File, x));
    let dev = Extras {
        rdev: Some(0x0103),
        ..Extras::default()
    };
    round_trip(&entry(EntryKind::CharDevice, dev.clone()));
    round_trip(&entry(EntryKind::BlockDevice, dev));
    round_trip(&entry(EntryKind::Fifo, Extras::default()));
    round_trip(&entry(EntryKind::Socket, Extras::default()));
    // A sparse file of holes only has no content.
    let holes = Extras {
        extents: Some(vec![]),
        ..Extras::default()
    };
    round_trip(&entry(EntryKind::File, holes));
}

#[test]
fn non_canonical_extras_are_refused() {
    let unsorted = Extras {
        xattrs: vec![(b"user.b".to_vec(), vec![]), (b"user.a".to_vec(), vec![])],
        ..Extras::default()
    };
    assert!(encode_err(&entry(EntryKind::File, unsorted)).contains("sorted"));
    let touching = Extras {
        extents: Some(vec![
            Extent { offset: 0, len: 5 },
            Extent { offset: 5, len: 5 },
        ]),
        ..Extras::default()
    };
    assert!(encode_err(&entry(EntryKind::File, touching)).contains("touch"));
    let whole = Extras {
        extents: Some(vec![Extent {
            offset: 0,
            len: 1 << 30,
        }]),
        ..Extras::default()
    };
    assert!(encode_err(&entry(EntryKind::File, whole)).contains("whole"));
    let mut wrong_data = entry(
        EntryKind::File,
        Extras {
            extents: Some(vec![Extent { offset: 8, len: 5 }]),
            ..Extras::default()
        },
    );
    wrong_data.content.as_mut().unwrap().size = 6;
    assert!(encode_err(&wrong_data).contains("content holds"));
    assert!(encode_err(&entry(EntryKind::CharDevice, Extras::default())).contains("device"));
    let single = Extras {
        hard_link: Some(HardLink { dev: 1, nlink: 1 }),
        ..Extras::default()
    };
    assert!(encode_err(&entry(EntryKind::File, single)).contains("link count"));
    let mut fifo = entry(EntryKind::Fifo, Extras::default());
    fifo.size = 3;
    assert!(encode_err(&fifo).contains("content"));
}

#[test]
fn decoder_refuses_what_the_encoder_would_not_write() {
    let e = entry(
        EntryKind::File,
        Extras {
            xattrs: vec![(b"user.a".to_vec(), b"x".to_vec())],
            hard_link: Some(HardLink { dev: 1, nlink: 2 }),
            ..Extras::default()
        },
    );
    round_trip(&e);
    // Row-wise (version 2) bytes, where the extras end the entry; the rules
    // are the same in every version. Swap the two fields: tags out of order.
    let mut good = vec![2];
    crate::dir_rows::put_entries(std::slice::from_ref(&e), &mut good);
    assert_eq!(decode_dir(&good, 8).unwrap(), vec![e.clone()]);
    let x = good.len() - e.extras_len();
    let mut bad = good.clone();
    let body = bad[x + 1..].to_vec();
    let xattr_field_len = 2 + body[1] as usize;
    let (a, b) = body.split_at(xattr_field_len);
    bad.truncate(x + 1);
    bad.extend_from_slice(b);
    bad.extend_from_slice(a);
    assert!(decode_dir(&bad, 8)
        .unwrap_err()
        .to_string()
        .contains("order"));
    // Flag 8 with an empty field list.
    let mut empty = good[..x].to_vec();
    empty.push(0);
    assert!(decode_dir(&empty, 8).is_err());
    // An unknown critical tag asks for a newer cairn.
    let mut critical = good[..x].to_vec();
    critical.extend_from_slice(&[3, 200, 1, 0]);
    assert!(matches!(
        decode_dir(&critical, 8),
        Err(cairn_core::Error::UnsupportedVersion { .. })
    ));
}

impl DirEntry {
    /// Bytes of this (last) entry's extras encoding, for the tests above.
    fn extras_len(&self) -> usize {
        let mut v = Vec::new();
        self.extras.encode(&mut v);
        v.len()
    }
}

#[test]
fn logical_ranges_split_at_extent_edges() {
    let ext = [
        Extent {
            offset: 100,
            len: 10,
        },
        Extent {
            offset: 1000,
            len: 5,
        },
    ];
    let all: Vec<_> = logical_ranges(&ext, 0, 15).collect();
    assert_eq!(all, vec![(100, 10), (1000, 5)]);
    let mid: Vec<_> = logical_ranges(&ext, 8, 4).collect();
    assert_eq!(mid, vec![(108, 2), (1000, 2)]);
    assert_eq!(logical_ranges(&ext, 15, 3).count(), 0);
}

fn extras_strategy() -> impl Strategy<Value = Extras> {
    (
        proptest::collection::btree_map(
            proptest::collection::vec(1u8..=255, 1..8),
            proptest::collection::vec(any::<u8>(), 0..8),
            0..4,
        ),
        proptest::option::of((any::<u64>(), 2u64..100)),
        proptest::option::of(proptest::collection::vec((1u64..1000, 1u64..1000), 0..5)),
        proptest::collection::btree_map(
            4u8..128,
            proptest::collection::vec(any::<u8>(), 0..4),
            0..2,
        ),
    )
        .prop_map(|(xattrs, link, ext, other)| Extras {
            xattrs: xattrs.into_iter().collect(),
            hard_link: link.map(|(dev, nlink)| HardLink { dev, nlink }),
            rdev: None,
            extents: ext.map(|v| {
                let mut end = 0;
                v.into_iter()
                    .map(|(gap, len)| {
                        let x = Extent {
                            offset: end + gap,
                            len,
                        };
                        end = x.end();
                        x
                    })
                    .collect()
            }),
            other: other.into_iter().collect(),
        })
}

proptest! {
    /// Every valid set of extras round-trips, and decoding then encoding
    /// gives the same bytes: one encoding per value.
    #[test]
    fn prop_extras_round_trip_canonically(x in extras_strategy()) {
        let e = entry(EntryKind::File, x);
        let bytes = round_trip(&e);
        let mut again = Vec::new();
        encode_dir(&decode_dir(&bytes, 8).unwrap(), &mut again).unwrap();
        prop_assert_eq!(bytes, again);
    }

    /// Any bytes in the extras: an error or a value that re-encodes to them.
    #[test]
    fn prop_decoded_extras_reencode_identically(tail in proptest::collection::vec(any::<u8>(), 0..40)) {
        let e = entry(EntryKind::Fifo, Extras {
            xattrs: vec![(b"user.x".to_vec(), vec![1])],
            ..Extras::default()
        });
        let good = round_trip(&e);
        let x = good.len() - e.extras_len();
        let mut bytes = good[..x].to_vec();
        crate::bytes::put_varint(&mut bytes, tail.len() as u64);
        bytes.extend_from_slice(&tail);
        if let Ok(d) = decode_dir(&bytes, 8) {
            let mut again = Vec::new();
            encode_dir(&d, &mut again).unwrap();
            prop_assert_eq!(bytes, again);
        }
    }
}
