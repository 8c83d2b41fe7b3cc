//! cairn trace format: golden bytes (the example in `docs/traces.md`),
//! round trips of every event variant (proptest), writer validation, and
//! detection of truncation and bit flips.

use std::io::Cursor;

use cairn_core::{Error, Fingerprint, TraceChunk, TraceEvent, TraceMeta};
use proptest::prelude::*;

use super::{assert_corrupt_at_most, read_all, read_bytes};
use crate::trace::{CairnTraceReader, CairnTraceWriter, TraceFormat};

pub(crate) fn write_trace(fp_width: usize, events: &[TraceEvent]) -> Vec<u8> {
    let mut w = CairnTraceWriter::new(Vec::new(), fp_width).unwrap();
    for ev in events {
        w.write_event(ev).unwrap();
    }
    w.finish().unwrap()
}

fn chunk(fp: &[u8], size: u32, stored_size: u32) -> TraceEvent {
    TraceEvent::Chunk(TraceChunk {
        fp: Fingerprint::from_slice(fp),
        size,
        stored_size,
    })
}

/// The example trace of `docs/traces.md`.
pub(crate) fn golden_events() -> Vec<TraceEvent> {
    vec![
        TraceEvent::DirStart {
            name: b"d".to_vec(),
            meta: TraceMeta {
                mode: 0o40755,
                uid: 1,
                gid: 2,
                mtime_ns: 3,
                size: 4,
            },
        },
        TraceEvent::FileStart {
            name: b"f".to_vec(),
            meta: TraceMeta {
                mode: 0o100644,
                uid: 0,
                gid: 0,
                mtime_ns: -1,
                size: 300,
            },
        },
        chunk(&[1, 2, 3, 4], 300, 300),
        chunk(&[0xaa, 0xbb, 0xcc, 0xdd], 200, 100),
        TraceEvent::FileEnd,
        TraceEvent::Symlink {
            name: b"l".to_vec(),
            meta: TraceMeta::default(),
            target: b"f".to_vec(),
        },
        TraceEvent::DirEnd,
    ]
}

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn golden_bytes() {
    let mut want = unhex(
        "43414952 4e545243 01000000 04 000000
         01 01 64 ed8301 01 02 0300000000000000 04
         03 01 66 a48302 00 00 ffffffffffffffff ac02
         04 01020304 ac02
         05 aabbccdd c801 64
         06
         07 01 6c 00 00 00 0000000000000000 00 01 66
         02
         ff 0700000000000000",
    );
    let crc = crc32c::crc32c(&want);
    want.extend_from_slice(&crc.to_le_bytes());
    let got = write_trace(4, &golden_events());
    assert_eq!(got, want, "\ngot  {got:02x?}\nwant {want:02x?}");
    assert_eq!(
        read_bytes(&got, TraceFormat::Cairn).unwrap(),
        golden_events()
    );
    let r = CairnTraceReader::new(Cursor::new(got), "g").unwrap();
    assert_eq!(r.fp_width(), 4);
}

#[test]
fn every_truncation_and_bit_flip_is_detected() {
    let bytes = write_trace(4, &golden_events());
    for cut in 0..bytes.len() {
        let r = read_bytes(&bytes[..cut], TraceFormat::Cairn);
        assert_corrupt_at_most(&r, cut as u64, &format!("cut at {cut}"));
    }
    for bit in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        assert!(
            read_bytes(&b, TraceFormat::Cairn).is_err(),
            "flip of bit {bit} went undetected"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let e = read_bytes(&longer, TraceFormat::Cairn).unwrap_err();
    assert!(e.to_string().contains("trailing bytes"), "{e}");
}

#[test]
fn header_checks() {
    let good = write_trace(4, &[]);
    assert_eq!(good.len(), 16 + 13);
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        read_bytes(&b, TraceFormat::Cairn).unwrap_err()
    };
    assert!(with(&|b| b[0] = b'X').to_string().contains("bad magic"));
    assert!(matches!(
        with(&|b| b[8] = 2),
        Error::UnsupportedVersion {
            found: 2,
            supported: 1,
            ..
        }
    ));
    assert!(with(&|b| b[8] = 0).to_string().contains("version 0"));
    assert!(with(&|b| b[12] = 0)
        .to_string()
        .contains("fingerprint width 0"));
    assert!(with(&|b| b[12] = 33)
        .to_string()
        .contains("fingerprint width 33"));
    assert!(with(&|b| b[14] = 1).to_string().contains("reserved"));
}

#[test]
fn structural_errors_in_the_stream() {
    // Hand-built records after a valid header; the checksum is never reached.
    let header = &write_trace(4, &[])[..16];
    // Tag, then an empty name and all-zero metadata (13 bytes).
    let start = |tag: u8, then: &[u8]| {
        let mut v = vec![tag];
        v.extend_from_slice(&[0; 13]);
        v.extend_from_slice(then);
        v
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0x04, 1, 2, 3, 4, 1], "a chunk outside a file"),
        (vec![0x02], "DirEnd without an open directory"),
        (vec![0x06], "FileEnd without an open file"),
        (start(0x03, &[0x03]), "cannot start inside a file"),
        (start(0x03, &[0x02]), "DirEnd inside a file"),
        (start(0x01, &[0xff]), "1 directories are still open"),
        (start(0x03, &[0xff]), "a file is still open"),
        (vec![0x09], "unknown record tag 0x09"),
        (vec![0x01, 0x80, 0x00], "non-canonical varint"),
        (vec![0x01, 0xff, 0xff, 0x7f], "exceeds the limit 65536"),
        (
            start(0x03, &[0x04, 1, 2, 3, 4, 0x80, 0x80, 0x80, 0x80, 0x10]),
            "exceeds the limit",
        ),
    ];
    for (records, want) in cases {
        let mut b = header.to_vec();
        b.extend_from_slice(&records);
        let r = read_bytes(&b, TraceFormat::Cairn);
        assert_corrupt_at_most(&r, b.len() as u64, want);
        let msg = r.unwrap_err().to_string();
        assert!(msg.contains(want), "`{msg}` lacks `{want}`");
    }
    // A tag-0x05 record whose stored size equals its size is non-canonical.
    let mut b = header.to_vec();
    b.extend_from_slice(&start(0x03, &[0x05, 1, 2, 3, 4, 7, 7]));
    let msg = read_bytes(&b, TraceFormat::Cairn).unwrap_err().to_string();
    assert!(msg.contains("must be tag 0x04"), "{msg}");
}

#[test]
fn writer_rejects_malformed_streams() {
    let w = || CairnTraceWriter::new(Vec::new(), 4).unwrap();
    let invalid = |r: cairn_core::Result<()>| {
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    };
    assert!(CairnTraceWriter::new(Vec::new(), 0).is_err());
    assert!(CairnTraceWriter::new(Vec::new(), 33).is_err());
    invalid(w().write_event(&chunk(&[1, 2, 3, 4], 1, 1)));
    invalid(w().write_event(&TraceEvent::DirEnd));
    invalid(w().write_event(&TraceEvent::FileEnd));
    let mut in_file = w();
    in_file
        .write_event(&TraceEvent::FileStart {
            name: b"f".to_vec(),
            meta: TraceMeta::default(),
        })
        .unwrap();
    invalid(in_file.write_event(&chunk(&[1, 2, 3], 1, 1)));
    invalid(in_file.write_event(&TraceEvent::DirEnd));
    invalid(in_file.write_event(&TraceEvent::Symlink {
        name: b"l".to_vec(),
        meta: TraceMeta::default(),
        target: vec![],
    }));
    assert!(matches!(in_file.finish(), Err(Error::InvalidInput(_))));
    let mut long = w();
    invalid(long.write_event(&TraceEvent::DirStart {
        name: vec![b'x'; crate::trace::MAX_NAME_LEN + 1],
        meta: TraceMeta::default(),
    }));
    let mut open_dir = w();
    open_dir
        .write_event(&TraceEvent::DirStart {
            name: b"d".to_vec(),
            meta: TraceMeta::default(),
        })
        .unwrap();
    assert!(matches!(open_dir.finish(), Err(Error::InvalidInput(_))));
}

/// A tree of entries that flattens to a well-nested event stream.
#[derive(Clone, Debug)]
enum Node {
    File(Vec<u8>, TraceMeta, Vec<([u8; 32], u32, Option<u32>)>),
    Link(Vec<u8>, TraceMeta, Vec<u8>),
    Dir(Vec<u8>, TraceMeta, Vec<Node>),
}

fn flatten(nodes: &[Node], w: usize, out: &mut Vec<TraceEvent>) {
    for n in nodes {
        match n {
            Node::File(name, meta, chunks) => {
                out.push(TraceEvent::FileStart {
                    name: name.clone(),
                    meta: *meta,
                });
                for (fp, size, stored) in chunks {
                    out.push(chunk(&fp[..w], *size, stored.unwrap_or(*size)));
                }
                out.push(TraceEvent::FileEnd);
            }
            Node::Link(name, meta, target) => out.push(TraceEvent::Symlink {
                name: name.clone(),
                meta: *meta,
                target: target.clone(),
            }),
            Node::Dir(name, meta, children) => {
                out.push(TraceEvent::DirStart {
                    name: name.clone(),
                    meta: *meta,
                });
                flatten(children, w, out);
                out.push(TraceEvent::DirEnd);
            }
        }
    }
}

fn meta() -> impl Strategy<Value = TraceMeta> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<i64>(),
        any::<u64>(),
    )
        .prop_map(|(mode, uid, gid, mtime_ns, size)| TraceMeta {
            mode,
            uid,
            gid,
            mtime_ns,
            size,
        })
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..12)
}

fn events() -> impl Strategy<Value = (usize, Vec<TraceEvent>)> {
    let chunk = (any::<[u8; 32]>(), any::<u32>(), any::<Option<u32>>());
    let leaf = prop_oneof![
        (name(), meta(), proptest::collection::vec(chunk, 0..5))
            .prop_map(|(n, m, c)| Node::File(n, m, c)),
        (name(), meta(), name()).prop_map(|(n, m, t)| Node::Link(n, m, t)),
    ];
    let tree = leaf.prop_recursive(4, 48, 5, |inner| {
        (name(), meta(), proptest::collection::vec(inner, 0..5))
            .prop_map(|(n, m, c)| Node::Dir(n, m, c))
    });
    (1..=32usize, proptest::collection::vec(tree, 0..5)).prop_map(|(w, nodes)| {
        let mut out = Vec::new();
        flatten(&nodes, w, &mut out);
        (w, out)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trips_every_event_variant((w, evs) in events()) {
        let bytes = write_trace(w, &evs);
        let mut r = CairnTraceReader::new(Cursor::new(bytes), "p").unwrap();
        prop_assert_eq!(r.fp_width(), w);
        prop_assert_eq!(read_all(&mut r).unwrap(), evs);
    }

    #[test]
    fn truncation_and_a_bit_flip_are_detected(
        (w, evs) in events(),
        cut in any::<prop::sample::Index>(),
        bit in any::<prop::sample::Index>(),
    ) {
        let bytes = write_trace(w, &evs);
        let cut = cut.index(bytes.len());
        let r = read_bytes(&bytes[..cut], TraceFormat::Cairn);
        prop_assert!(r.is_err());
        let bit = bit.index(bytes.len() * 8);
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(read_bytes(&b, TraceFormat::Cairn).is_err(), "bit {} undetected", bit);
    }
}
