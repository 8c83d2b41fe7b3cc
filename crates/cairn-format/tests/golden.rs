//! Golden bytes: fixed objects encoded through the public API must equal the
//! annotated hex below, byte for byte, and must decode back to the same
//! values. These pin `docs/FORMAT.md` (each constant names its section); a
//! change here is a format change and needs a version bump, not an edit.
//!
//! The hex was produced by an encoder written independently from FORMAT.md
//! (`tests/golden/gen_golden.py`, which prints the constants at the end of
//! this file verbatim), so it checks the spec as much as the code.
//! Syntax: whitespace-separated hex, `# comment` to end of line, and `00*N`
//! for a run of N zero bytes. Codec `none` everywhere, so nothing depends on
//! the zstd or lz4 version.

use cairn_core::{ChunkKind, CompressionCodec, ContainerId, Fingerprint};
use cairn_format::container::{
    decode_container, decode_tail, stored_chunk, ContainerWriter, TailDecode,
};
use cairn_format::dir::{
    decode_dir, encode_dir, BlobRef, DirEntry, EntryKind, Extent, Extras, HardLink,
};
use cairn_format::envelope::{open, seal};
use cairn_format::frugal_log::{decode_segment, encode_segment, SegmentHeader, REMOVAL};
use cairn_format::index::{
    decode_index_header, decode_index_page, encode_index, entry_order, index_page_offset, page_of,
    IndexEntry, IndexHeader,
};
use cairn_format::index_delta::{decode_index_delta, encode_index_delta, IndexDelta};
use cairn_format::parent_held::{decode_parent_held, encode_parent_held};
use cairn_format::snapshot::{decode_snapshot, encode_snapshot, SnapshotRecord, SnapshotStats};
use cairn_format::summary_vector::{
    decode_summary_vector, encode_summary_vector, SummaryVectorCheckpoint,
};
use cairn_format::tree::{decode_tree_node, encode_tree_node, ChildRef, TreeNode};

fn parse(golden: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in golden.lines() {
        let code = line.split('#').next().unwrap_or("");
        for tok in code.split_whitespace() {
            if let Some((byte, n)) = tok.split_once('*') {
                let b = u8::from_str_radix(byte, 16).expect("run byte");
                out.extend(std::iter::repeat_n(b, n.parse().expect("run length")));
            } else {
                assert!(tok.len() % 2 == 0, "odd hex token {tok}");
                for i in (0..tok.len()).step_by(2) {
                    out.push(u8::from_str_radix(&tok[i..i + 2], 16).expect("hex"));
                }
            }
        }
    }
    out
}

/// Asserts equality and, on mismatch, shows the first differing offset.
fn assert_bytes(name: &str, actual: &[u8], golden: &str) {
    let expected = parse(golden);
    if actual != expected.as_slice() {
        let at = actual
            .iter()
            .zip(&expected)
            .position(|(a, b)| a != b)
            .unwrap_or(actual.len().min(expected.len()));
        panic!(
            "{name}: bytes differ from golden at offset {at} (lengths {} vs {})\nactual:   {}\n",
            actual.len(),
            expected.len(),
            actual
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
    }
}

fn fp(b: u8) -> Fingerprint {
    Fingerprint::from_slice(&[b; 8])
}

const MTIME: i64 = 1_700_000_000_000_000_000;

fn tree_node() -> TreeNode {
    TreeNode {
        level: 1,
        children: vec![
            ChildRef {
                fp: fp(0x11),
                size: 5,
            },
            ChildRef {
                fp: fp(0x22),
                size: 6,
            },
        ],
    }
}

fn tree_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    encode_tree_node(&tree_node(), &mut out);
    out
}

fn dir_entries() -> Vec<DirEntry> {
    vec![
        DirEntry {
            name: b"hello.txt".to_vec(),
            kind: EntryKind::File,
            mode: 0o100644,
            uid: 1000,
            gid: 1000,
            mtime_ns: MTIME,
            ctime_ns: 0,
            inode: 0,
            size: 11,
            target: None,
            content: Some(BlobRef {
                root: fp(0xc3),
                level: 1,
                size: 11,
            }),
            children: None,
            extras: Default::default(),
        },
        DirEntry {
            name: b"link".to_vec(),
            kind: EntryKind::Symlink,
            mode: 0o120777,
            uid: 1000,
            gid: 1000,
            mtime_ns: MTIME,
            ctime_ns: 0,
            inode: 0,
            size: 9,
            target: Some(b"hello.txt".to_vec()),
            content: None,
            children: None,
            extras: Default::default(),
        },
    ]
}

/// The version 2 fixture: the version 1 entries with change times and
/// inodes, plus a directory whose one-entry listing is inline.
fn dir_entries_v2() -> Vec<DirEntry> {
    let mut v = dir_entries();
    for (e, inode) in v.iter_mut().zip([42, 43]) {
        e.ctime_ns = MTIME + 1;
        e.inode = inode;
    }
    let empty = DirEntry {
        name: b"e".to_vec(),
        kind: EntryKind::File,
        mode: 0o100644,
        uid: 1000,
        gid: 1000,
        mtime_ns: MTIME,
        ctime_ns: MTIME + 1,
        inode: 45,
        size: 0,
        target: None,
        content: None,
        children: None,
        extras: Default::default(),
    };
    v.push(DirEntry {
        name: b"sub".to_vec(),
        kind: EntryKind::Dir,
        mode: 0o40755,
        inode: 44,
        size: 30,
        target: None,
        content: None,
        children: Some(vec![empty.clone()]),
        extras: Default::default(),
        ..empty
    });
    v
}

fn snapshot() -> SnapshotRecord {
    SnapshotRecord {
        next_container: 0,
        fastcopy_of: None,
        original: None,
        time_unix_ns: MTIME,
        host: "h".into(),
        paths: vec!["/data".into()],
        tags: vec![],
        root: BlobRef {
            root: fp(0xd4),
            level: 0,
            size: 120,
        }
        .into(),
        stats: SnapshotStats {
            logical_bytes: 11,
            files: 1,
            dirs: 1,
            symlinks: 1,
            chunks: 3,
            new_chunks: 3,
            new_raw_bytes: 49,
            new_stored_bytes: 49,
            containers_written: 1,
            duration_ns: 1000,
            skipped_paths: 0,
            // Fields added after this record was written decode as zero.
            data_chunks: 0,
            new_data_chunks: 0,
            new_data_raw_bytes: 0,
            new_data_stored_bytes: 0,
            rewritten_data_chunks: 0,
            rewritten_data_raw_bytes: 0,
            rewritten_data_stored_bytes: 0,
            rewrite: String::new(),
            counters: Default::default(),
            phases: Default::default(),
            parent: String::new(),
            files_new: 0,
            files_changed: 0,
            files_unmodified: 0,
            unmodified_bytes: 0,
            listings_complete: false,
            files_changed_while_read: 0,
        },
    }
}

/// FORMAT.md "Envelope".
#[test]
fn golden_envelope() {
    let bytes = seal(b"CAIRNCFG", 1, b"{}");
    assert_bytes("envelope", &bytes, ENVELOPE);
    assert_eq!(
        open(b"CAIRNCFG", 1, "config", &parse(ENVELOPE)).unwrap(),
        (1, &b"{}"[..])
    );
}

/// FORMAT.md "Tree node".
#[test]
fn golden_tree_node() {
    assert_bytes("tree node", &tree_bytes(), TREE_NODE);
    assert_eq!(decode_tree_node(&parse(TREE_NODE), 8).unwrap(), tree_node());
}

/// FORMAT.md "Container" (header, data section, metadata section, trailer).
#[test]
fn golden_container() {
    let tree = tree_bytes();
    let chunks: [(u8, ChunkKind, u8, &[u8]); 3] = [
        (0x11, ChunkKind::Data, 0, b"hello"),
        (0x22, ChunkKind::Data, 0, b"world!"),
        (0xc3, ChunkKind::Tree, 1, &tree),
    ];
    // The chunks pushed in the order given (indices into `chunks`).
    let container = |order: [usize; 3]| {
        let mut w = ContainerWriter::new(ContainerId(0x2a), 8, 4 << 20);
        for (b, kind, level, bytes) in order.map(|i| chunks[i]) {
            let len = bytes.len() as u32;
            w.push(fp(b), kind, level, CompressionCodec::None, len, bytes);
        }
        w
    };
    let w = container([0, 1, 2]);
    let expected_desc = w.descriptors().to_vec();
    assert_bytes("container", &w.finish(), CONTAINER);
    // Metadata chunks are laid after the data chunks whatever the order
    // they come in (the tail read that finds the descriptors holds them).
    let w = container([2, 0, 1]);
    assert_eq!(w.descriptors(), expected_desc);
    assert_bytes("container, tree node pushed first", &w.finish(), CONTAINER);

    let golden = parse(CONTAINER);
    let meta = decode_container(&golden).unwrap();
    assert_eq!(meta.id, ContainerId(0x2a));
    assert_eq!(meta.descriptors, expected_desc);
    assert_eq!(
        stored_chunk(&golden, &meta, &meta.descriptors[1]).unwrap(),
        b"world!"
    );
    assert_eq!(
        stored_chunk(&golden, &meta, &meta.descriptors[2]).unwrap(),
        &tree[..]
    );
    // Metadata (4 + 3 * 23 bytes) plus trailer (72) is the tail one read needs.
    let n = golden.len() as u64;
    assert_eq!(
        decode_tail(n, &golden[golden.len() - 144..]).unwrap(),
        TailDecode::NeedTail(145)
    );
    assert_eq!(
        decode_tail(n, &golden[golden.len() - 145..]).unwrap(),
        TailDecode::Meta(meta)
    );
}

/// FORMAT.md "Directory listing": the version 3 (columnar) encoding.
#[test]
fn golden_dir() {
    let mut out = Vec::new();
    encode_dir(&dir_entries_v2(), &mut out).unwrap();
    assert_bytes("directory listing", &out, DIR);
    assert_eq!(decode_dir(&parse(DIR), 8).unwrap(), dir_entries_v2());
}

/// A version 2 listing (row-wise, written before version 3) keeps
/// decoding: decode-only.
#[test]
fn golden_dir_v2() {
    assert_eq!(decode_dir(&parse(DIR_V2), 8).unwrap(), dir_entries_v2());
    assert_eq!(
        decode_dir(&parse(DIR_EXTRAS_V2), 8).unwrap(),
        dir_entries_extras()
    );
}

/// A version 1 listing (written before issue 12) keeps decoding: decode-only.
#[test]
fn golden_dir_v1() {
    assert_eq!(decode_dir(&parse(DIR_V1), 8).unwrap(), dir_entries());
}

/// FORMAT.md "Directory listing", special files and extras (flag 8): each
/// new kind, and a sparse, hard-linked file with an extended attribute.
fn dir_entries_extras() -> Vec<DirEntry> {
    let base = DirEntry {
        name: Vec::new(),
        kind: EntryKind::Fifo,
        mode: 0,
        uid: 0,
        gid: 0,
        mtime_ns: MTIME,
        ctime_ns: MTIME + 1,
        inode: 0,
        size: 0,
        target: None,
        content: None,
        children: None,
        extras: Default::default(),
    };
    let special = |name: &str, kind, mode, inode, rdev| DirEntry {
        name: name.as_bytes().to_vec(),
        kind,
        mode,
        inode,
        extras: Extras {
            rdev,
            ..Extras::default()
        },
        ..base.clone()
    };
    vec![
        special("blk", EntryKind::BlockDevice, 0o60660, 50, Some(0x0801)),
        special("dev", EntryKind::CharDevice, 0o20666, 51, Some(0x0103)),
        special("fifo", EntryKind::Fifo, 0o10644, 52, None),
        special("sock", EntryKind::Socket, 0o140755, 53, None),
        DirEntry {
            name: b"sparse".to_vec(),
            kind: EntryKind::File,
            mode: 0o100644,
            inode: 54,
            size: 1 << 20,
            content: Some(BlobRef {
                root: fp(0xc3),
                level: 0,
                size: 8,
            }),
            extras: Extras {
                xattrs: vec![(b"user.k".to_vec(), b"v".to_vec())],
                hard_link: Some(HardLink {
                    dev: 2049,
                    nlink: 2,
                }),
                extents: Some(vec![
                    Extent {
                        offset: 4096,
                        len: 4,
                    },
                    Extent {
                        offset: 65536,
                        len: 4,
                    },
                ]),
                ..Extras::default()
            },
            ..base.clone()
        },
    ]
}

#[test]
fn golden_dir_extras() {
    let mut out = Vec::new();
    encode_dir(&dir_entries_extras(), &mut out).unwrap();
    assert_bytes("directory listing with extras", &out, DIR_EXTRAS);
    assert_eq!(
        decode_dir(&parse(DIR_EXTRAS), 8).unwrap(),
        dir_entries_extras()
    );
}

/// FORMAT.md "Snapshot record". A decode-only fixture: a version-1 record
/// written without the later `stats.counters` object must keep decoding (to
/// zero counters). The encoder's bytes are pinned by
/// [`golden_snapshot_encoding`].
#[test]
fn golden_snapshot() {
    let golden = parse(SNAPSHOT);
    assert_eq!(decode_snapshot(&golden).unwrap(), snapshot());
    let again = encode_snapshot(&snapshot());
    assert_eq!(again, encode_snapshot(&snapshot()), "deterministic");
    assert_eq!(decode_snapshot(&again).unwrap(), snapshot());
    assert_eq!(&again[..8], b"CAIRNSNP");
}

/// A record with every optional field present and every statistic non-zero
/// (the fixture of [`golden_snapshot_encoding`]).
fn snapshot_every_field() -> SnapshotRecord {
    let mut r = snapshot();
    r.next_container = 0x40;
    r.fastcopy_of = Some("fa".repeat(32));
    r.original = Some("5e".repeat(32));
    r.tags = vec!["daily".into(), "keep".into()];
    r.time_unix_ns = -5;
    r.stats.data_chunks = 2;
    r.stats.new_data_chunks = 1;
    r.stats.new_data_raw_bytes = 11;
    r.stats.new_data_stored_bytes = 10;
    r.stats.rewritten_data_chunks = 4;
    r.stats.rewritten_data_raw_bytes = 40;
    r.stats.rewritten_data_stored_bytes = 30;
    r.stats.rewrite = "lbw:window=8".into();
    r.stats.parent = "ab".repeat(32);
    r.stats.files_new = 1;
    r.stats.files_changed = 2;
    r.stats.files_unmodified = 3;
    r.stats.unmodified_bytes = 4;
    r.stats.listings_complete = true;
    r.stats.files_changed_while_read = 5;
    r.stats.counters.lookups = 7;
    r.stats.phases = [("hash".to_string(), 0.25), ("total".to_string(), 1.5)]
        .into_iter()
        .collect();
    r
}

/// FORMAT.md "Snapshot record": the encoder's exact bytes. A record's id
/// is the BLAKE3 of these bytes, so field order, number formatting and
/// which fields are omitted when empty are all pinned here, byte for byte.
/// The one hole is the `counters` object (a `cairn_core::CountersSnapshot`
/// that gains a key whenever the engine gains a counter): it is spliced in
/// from its own serialization at `{counters}`, and only its first key is
/// pinned.
#[test]
fn golden_snapshot_encoding() {
    let record = snapshot_every_field();
    let counters = serde_json::to_string(&record.stats.counters).unwrap();
    assert!(counters.starts_with(r#"{"lookups":7,"#), "{counters}");
    let payload = SNAPSHOT_ENCODING_JSON
        .lines()
        .map(str::trim)
        .collect::<String>()
        .replace("{counters}", &counters);
    let bytes = encode_snapshot(&record);
    // The envelope: magic, version 1, payload length, then the JSON.
    assert_eq!(&bytes[..12], b"CAIRNSNP\x01\0\0\0");
    assert_eq!(
        &bytes[12..20],
        &(payload.len() as u64).to_le_bytes(),
        "payload length"
    );
    let json = std::str::from_utf8(&bytes[20..bytes.len() - 4]).unwrap();
    assert_eq!(json, payload);
    assert_eq!(bytes, seal(b"CAIRNSNP", 1, payload.as_bytes()));
    assert_eq!(decode_snapshot(&bytes).unwrap(), record);
}

/// The payload [`golden_snapshot_encoding`] pins, split into lines (joined
/// without the indentation) for reading.
const SNAPSHOT_ENCODING_JSON: &str = r#"
    {"time_unix_ns":-5,"host":"h","paths":["/data"],"tags":["daily","keep"],
    "root":{"root":"d4d4d4d4d4d4d4d4","level":0,"size":120},
    "stats":{"logical_bytes":11,"files":1,"dirs":1,"symlinks":1,"chunks":3,"new_chunks":3,
    "data_chunks":2,"new_data_chunks":1,"new_data_raw_bytes":11,"new_data_stored_bytes":10,
    "new_raw_bytes":49,"new_stored_bytes":49,"rewritten_data_chunks":4,
    "rewritten_data_raw_bytes":40,"rewritten_data_stored_bytes":30,"rewrite":"lbw:window=8",
    "containers_written":1,"duration_ns":1000,"skipped_paths":0,
    "parent":"abababababababababababababababababababababababababababababababab",
    "files_new":1,"files_changed":2,"files_unmodified":3,"unmodified_bytes":4,
    "listings_complete":true,"files_changed_while_read":5,
    "counters":{counters},"phases":{"hash":0.25,"total":1.5}},
    "next_container":64,
    "fastcopy_of":"fafafafafafafafafafafafafafafafafafafafafafafafafafafafafafafafa",
    "original":"5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"}
"#;

/// FORMAT.md "Snapshot record", `original`: a retagged record names the
/// record it replaced, after `next_container`; a record without it encodes
/// with no such key (so ids of existing records do not change).
#[test]
fn golden_snapshot_original() {
    let id = "5e".repeat(32);
    let json = format!(
        r#"{{"time_unix_ns":5,"host":"h","paths":["/data"],"tags":["keep"],"root":{{"root":"d4d4","level":0,"size":120}},"stats":{{}},"next_container":2,"original":"{id}"}}"#
    );
    let rec = decode_snapshot(&seal(b"CAIRNSNP", 1, json.as_bytes())).unwrap();
    assert_eq!(rec.original.as_deref(), Some(id.as_str()));
    assert_eq!(rec.tags, vec!["keep"]);

    let payload = |r: &SnapshotRecord| {
        let bytes = encode_snapshot(r);
        let (_, p) = open(b"CAIRNSNP", 1, "snapshot", &bytes).unwrap();
        String::from_utf8(p.to_vec()).unwrap()
    };
    let plain = payload(&snapshot());
    assert!(!plain.contains("original"), "{plain}");
    assert!(plain.ends_with(r#""next_container":0}"#), "{plain}");
    let mut retagged = snapshot();
    retagged.original = Some(id.clone());
    let tail = format!(r#""next_container":0,"original":"{id}"}}"#);
    assert!(payload(&retagged).ends_with(&tail));
    assert_eq!(
        decode_snapshot(&encode_snapshot(&retagged)).unwrap(),
        retagged
    );
}

/// FORMAT.md "Fingerprint index".
#[test]
fn golden_index() {
    let header = IndexHeader {
        fp_width: 8,
        page_size: 256,
        page_count: 2,
        entry_count: 3,
        covered_below: ContainerId(0x2b),
    };
    let mut entries: Vec<IndexEntry> = [0x11, 0x22, 0xc3]
        .iter()
        .map(|&b| IndexEntry {
            fp: fp(b),
            container: ContainerId(0x2a),
        })
        .collect();
    entries.sort_by_key(|e| entry_order(&e.fp));
    assert_bytes("index", &encode_index(&header, &entries).unwrap(), INDEX);

    let golden = parse(INDEX);
    assert_eq!(decode_index_header(&golden).unwrap(), header);
    let page = |p: u64| {
        let off = index_page_offset(&header, p) as usize;
        decode_index_page(&golden[off..off + 256], &header, p).unwrap()
    };
    for p in 0..2 {
        let want: Vec<IndexEntry> = entries
            .iter()
            .filter(|e| page_of(&e.fp, 2) == p)
            .copied()
            .collect();
        assert_eq!(page(p), want, "page {p}");
    }
}

/// FORMAT.md "Index delta".
#[test]
fn golden_index_delta() {
    let delta = IndexDelta {
        fp_width: 8,
        base_generation: 3,
        seq: 2,
        covered_below: ContainerId(0x2e),
        removes_below: ContainerId(u64::MAX),
        removes: vec![fp(0xc3)],
        // Given out of order: the encoder sorts.
        puts: vec![
            IndexEntry {
                fp: fp(0x22),
                container: ContainerId(0x2d),
            },
            IndexEntry {
                fp: fp(0x11),
                container: ContainerId(0x2c),
            },
        ],
    };
    assert_bytes(
        "index delta",
        &encode_index_delta(&delta).unwrap(),
        INDEX_DELTA,
    );
    let decoded = decode_index_delta(&parse(INDEX_DELTA)).unwrap();
    assert_eq!(decoded.puts[0].fp, fp(0x11));
    assert_eq!(decoded.removes, delta.removes);
    assert_eq!((decoded.seq, decoded.covered_below), (2, ContainerId(0x2e)));
    assert_eq!(decoded.removes_below, ContainerId(u64::MAX));
    // Version 2: the removals are conditional (a collection's, written
    // beside backups).
    let conditional = IndexDelta {
        removes_below: ContainerId(0x28),
        ..delta
    };
    assert_bytes(
        "index delta v2",
        &encode_index_delta(&conditional).unwrap(),
        INDEX_DELTA_V2,
    );
    let decoded = decode_index_delta(&parse(INDEX_DELTA_V2)).unwrap();
    assert_eq!(decoded.removes_below, ContainerId(0x28));
}

/// FORMAT.md "Repository layout", `bloom/`: the Summary Vector checkpoint.
#[test]
fn golden_summary_vector() {
    let c = SummaryVectorCheckpoint {
        covered_below: ContainerId(0x2e),
        hashes: 7,
        inserted: 3,
        words: vec![0x0102030405060708, 0x8000000000000001],
    };
    assert_bytes("summary vector", &encode_summary_vector(&c), SUMMARY_VECTOR);
    assert_eq!(decode_summary_vector(&parse(SUMMARY_VECTOR)).unwrap(), c);
}

/// docs/frugal-index.md: a segment of the frugal index's chunk log.
#[test]
fn golden_frugal_log_segment() {
    let records = vec![(fp(0x11), ContainerId(0x2a)), (fp(0x22), ContainerId(0x2b))];
    assert_bytes("frugal log", &encode_segment(8, 5, &records), FRUGAL_LOG);
    let (h, back) = decode_segment("golden", &parse(FRUGAL_LOG)).unwrap();
    assert_eq!(
        h,
        SegmentHeader {
            width: 8,
            first: 5,
            count: 2,
            removals: false,
        }
    );
    assert_eq!(back, records);
}

/// docs/frugal-index.md: a segment holding a removal is version 2.
#[test]
fn golden_frugal_log_segment_with_a_removal() {
    let records = vec![(fp(0x11), REMOVAL), (fp(0x11), ContainerId(0x30))];
    assert_bytes(
        "frugal log removal",
        &encode_segment(8, 9, &records),
        FRUGAL_LOG_REMOVAL,
    );
    let (h, back) = decode_segment("golden", &parse(FRUGAL_LOG_REMOVAL)).unwrap();
    assert_eq!(
        h,
        SegmentHeader {
            width: 8,
            first: 9,
            count: 2,
            removals: true,
        }
    );
    assert_eq!(back, records);
}

/// FORMAT.md "Local notes": the parent check's record, entries sorted.
#[test]
fn golden_parent_held() {
    let ids = [ContainerId(0x2a), ContainerId(0x102)];
    let entries = [(fp(0x22), &ids[..]), (fp(0x11), &[][..])];
    assert_bytes(
        "parent check record",
        &encode_parent_held(entries.iter().map(|(f, i)| (f, *i))),
        PARENT_HELD,
    );
    let back = decode_parent_held(&parse(PARENT_HELD)).unwrap();
    assert_eq!(back, vec![(fp(0x11), [].into()), (fp(0x22), ids.into())]);
}

const ENVELOPE: &str = r#"
    434149524e434647                         # magic "CAIRNCFG"
    01000000                                 # version 1
    0200000000000000                         # payload_len 2
    7b7d                                     # payload '{}'
    94d31fa3                                 # crc32c of the above
"#;

const TREE_NODE: &str = r#"
    01                                       # node format version 1
    01                                       # level 1
    02000000                                 # child count 2
    1111111111111111                         # child 0 fingerprint
    0500000000000000                         # child 0 size 5
    2222222222222222                         # child 1 fingerprint
    0600000000000000                         # child 1 size 6
"#;

const CONTAINER: &str = r#"
    434149524e435452                         # header: magic "CAIRNCTR"
    01000000                                 # header: version 1
    08                                       # header: fingerprint width 8
    000000                                   # header: reserved
    2a00000000000000                         # header: container id 0x2a
    00000000                                 # header: reserved
    fb884b47                                 # header: crc32c of header bytes 0..28
    68656c6c6f                               # data: chunk 0 payload (5 bytes)
    776f726c6421                             # data: chunk 1 payload (6 bytes)
    0101020000001111111111111111050000000000000022222222222222220600000000000000 # data: chunk 2 payload (38 bytes)
    03000000                                 # metadata: descriptor count 3
    1111111111111111                         # descriptor 0: fingerprint
    000000                                   # descriptor 0: kind 0, level 0, codec 0 (none)
    00000000                                 # descriptor 0: offset 0 in data section
    05000000                                 # descriptor 0: stored_len 5
    05000000                                 # descriptor 0: raw_len 5
    2222222222222222                         # descriptor 1: fingerprint
    000000                                   # descriptor 1: kind 0, level 0, codec 0 (none)
    05000000                                 # descriptor 1: offset 5 in data section
    06000000                                 # descriptor 1: stored_len 6
    06000000                                 # descriptor 1: raw_len 6
    c3c3c3c3c3c3c3c3                         # descriptor 2: fingerprint
    010100                                   # descriptor 2: kind 1, level 1, codec 0 (none)
    0b000000                                 # descriptor 2: offset 11 in data section
    26000000                                 # descriptor 2: stored_len 38
    26000000                                 # descriptor 2: raw_len 38
    2a00000000000000                         # trailer: container id 0x2a
    2000000000000000                         # trailer: data section offset 32
    3100000000000000                         # trailer: data section length 49
    5100000000000000                         # trailer: metadata offset 81
    4900000000000000                         # trailer: metadata length 73
    03000000                                 # trailer: chunk count 3
    c27880b0                                 # trailer: data crc32c
    8addfdae                                 # trailer: metadata crc32c
    08                                       # trailer: fingerprint width 8
    000000                                   # trailer: reserved
    01000000                                 # trailer: version 1
    434149524e454e44                         # trailer: magic "CAIRNEND"
    152734d6                                 # trailer: crc32c of trailer bytes 0..68
"#;

const DIR_V2: &str = r#"
    02                                       # listing format version 2
    03                                       # entry count 3 (varint)
    09                                       # entry 0: name length 9
    68656c6c6f2e747874                       # entry 0: name "hello.txt"
    0002                                     # entry 0: kind 0 (file), flags 2 (content)
    a48302                                   # entry 0: mode 0o100644 (varint)
    e807                                     # entry 0: uid 1000 (varint)
    e807                                     # entry 0: gid 1000 (varint)
    00002a36fe9c9717                         # entry 0: mtime_ns 1700000000000000000
    01002a36fe9c9717                         # entry 0: ctime_ns 1700000000000000001
    2a                                       # entry 0: inode 42 (varint)
    0b                                       # entry 0: size 11 (varint)
    c3c3c3c3c3c3c3c3                         # entry 0: content root fingerprint
    01                                       # entry 0: content root level 1
    0b                                       # entry 0: content size 11 (varint)
    04                                       # entry 1: name length 4
    6c696e6b                                 # entry 1: name "link"
    0201                                     # entry 1: kind 2 (symlink), flags 1 (target)
    ffc302                                   # entry 1: mode 0o120777
    e807                                     # entry 1: uid 1000
    e807                                     # entry 1: gid 1000
    00002a36fe9c9717                         # entry 1: mtime_ns
    01002a36fe9c9717                         # entry 1: ctime_ns
    2b                                       # entry 1: inode 43
    09                                       # entry 1: size 9
    09                                       # entry 1: target length 9
    68656c6c6f2e747874                       # entry 1: target "hello.txt"
    03                                       # entry 2: name length 3
    737562                                   # entry 2: name "sub"
    0104                                     # entry 2: kind 1 (directory), flags 4 (inline listing)
    ed8301                                   # entry 2: mode 0o40755
    e807                                     # entry 2: uid 1000
    e807                                     # entry 2: gid 1000
    00002a36fe9c9717                         # entry 2: mtime_ns
    01002a36fe9c9717                         # entry 2: ctime_ns
    2c                                       # entry 2: inode 44
    1e                                       # entry 2: size 30 (bytes of its inline listing)
    01                                       # entry 2, inline listing: entry count 1
    01                                       # entry 2.0: name length 1
    65                                       # entry 2.0: name "e"
    0000                                     # entry 2.0: kind 0 (file), flags 0 (empty: no content)
    a48302                                   # entry 2.0: mode 0o100644
    e807                                     # entry 2.0: uid 1000
    e807                                     # entry 2.0: gid 1000
    00002a36fe9c9717                         # entry 2.0: mtime_ns
    01002a36fe9c9717                         # entry 2.0: ctime_ns
    2d                                       # entry 2.0: inode 45
    00                                       # entry 2.0: size 0
"#;

const DIR: &str = r#"
    03                                       # listing format version 3 (columnar)
    0a                                       # shape column: 10 bytes
    03                                       #   entry count 3
    0002                                     #   entry 0: kind 0 (file), flags 2 (content)
    0201                                     #   entry 1: kind 2 (symlink), flags 1 (target)
    0104                                     #   entry 2: kind 1 (directory), flags 4 (inline listing)
    01                                       #   entry 2's inline listing: entry count 1
    0000                                     #   entry 2.0: kind 0 (file), flags 0 (empty)
    15                                       # names column: 21 bytes
    09 68656c6c6f2e747874                    #   "hello.txt"
    04 6c696e6b                              #   "link"
    03 737562                                #   "sub"
    01 65                                    #   "e"
    1c                                       # attributes column: 28 bytes (mode, uid, gid varints)
    a48302 e807 e807                         #   entry 0: 0o100644, 1000, 1000
    ffc302 e807 e807                         #   entry 1: 0o120777
    ed8301 e807 e807                         #   entry 2: 0o40755
    a48302 e807 e807                         #   entry 2.0: 0o100644
    04                                       # sizes column: 4 bytes
    0b 09 1e 00                              #   11, 9, 30, 0
    0a                                       # targets column: 10 bytes
    09 68656c6c6f2e747874                    #   entry 1: "hello.txt"
    00                                       # extras column: empty
    01                                       # contents column: 1 byte
    01                                       #   entry 0: root level 1 (content size = size)
    08                                       # fingerprints column: 8 bytes
    c3c3c3c3c3c3c3c3                         #   entry 0: content root
    20                                       # mtimes column: 32 bytes
    00002a36fe9c9717 00002a36fe9c9717        #   1700000000000000000 each
    00002a36fe9c9717 00002a36fe9c9717
    0c                                       # ctimes column: 12 bytes (zigzag deltas)
    8280d0e2c6bfce972f                       #   entry 0: +1700000000000000001
    00 00 00                                 #   the others: +0
    04                                       # inodes column: 4 bytes (zigzag deltas)
    54 02 02 02                              #   42, then +1 each: 43, 44, 45
"#;

const DIR_V1: &str = r#"
    01                                       # listing format version 1
    02                                       # entry count 2 (varint)
    09                                       # entry 0: name length 9
    68656c6c6f2e747874                       # entry 0: name "hello.txt"
    0002                                     # entry 0: kind 0 (file), flags 2 (content)
    a4810000                                 # entry 0: mode 0o100644
    e8030000                                 # entry 0: uid 1000
    e8030000                                 # entry 0: gid 1000
    00002a36fe9c9717                         # entry 0: mtime_ns 1700000000000000000
    0b00000000000000                         # entry 0: size 11
    c3c3c3c3c3c3c3c3                         # entry 0: content root fingerprint
    01                                       # entry 0: content root level 1
    0b00000000000000                         # entry 0: content size 11
    04                                       # entry 1: name length 4
    6c696e6b                                 # entry 1: name "link"
    0201                                     # entry 1: kind 2 (symlink), flags 1 (target)
    ffa10000                                 # entry 1: mode 0o120777
    e8030000                                 # entry 1: uid 1000
    e8030000                                 # entry 1: gid 1000
    00002a36fe9c9717                         # entry 1: mtime_ns 1700000000000000000
    0900000000000000                         # entry 1: size 9
    09                                       # entry 1: target length 9
    68656c6c6f2e747874                       # entry 1: target "hello.txt"
"#;

const SNAPSHOT: &str = r#"
    434149524e534e50                         # magic "CAIRNSNP"
    01000000                                 # version 1
    3f01000000000000                         # payload_len 319
    7b2274696d655f756e69785f6e73223a313730303030303030303030303030303030302c22686f7374223a2268222c227061746873223a5b222f64617461225d2c2274616773223a5b5d2c22726f6f74223a7b22726f6f74223a2264346434643464346434643464346434222c226c6576656c223a302c2273697a65223a3132307d2c227374617473223a7b226c6f676963616c5f6279746573223a31312c2266696c6573223a312c2264697273223a312c2273796d6c696e6b73223a312c226368756e6b73223a332c226e65775f6368756e6b73223a332c226e65775f7261775f6279746573223a34392c226e65775f73746f7265645f6279746573223a34392c22636f6e7461696e6572735f7772697474656e223a312c226475726174696f6e5f6e73223a313030302c22736b69707065645f7061746873223a307d7d # JSON payload
    7a43230b                                 # crc32c of the above
"#;

const INDEX: &str = r#"
    434149524e494458                         # header: magic "CAIRNIDX"
    02000000                                 # header: version 2
    08000000                                 # header: fingerprint width 8, reserved
    00010000                                 # header: page size 256
    00000000                                 # header: reserved
    0200000000000000                         # header: data page count 2
    0300000000000000                         # header: entry count 3
    2b00000000000000                         # header: covered_below 0x2b
    77b295f4                                 # header: crc32c of header bytes 0..48
    00*204                                   # header page padding
    0000000000000000                         # page 0: page number
    02000000                                 # page 0: entry count 2
    c3c3c3c3c3c3c3c3                         # page 0: entry fingerprint
    2a00000000000000                         # page 0: entry container 0x2a
    2222222222222222                         # page 0: entry fingerprint
    2a00000000000000                         # page 0: entry container 0x2a
    00*208                                   # page 0: padding
    14ba0f42                                 # page 0: crc32c of page bytes 0..252
    0100000000000000                         # page 1: page number
    01000000                                 # page 1: entry count 1
    1111111111111111                         # page 1: entry fingerprint
    2a00000000000000                         # page 1: entry container 0x2a
    00*224                                   # page 1: padding
    f182ed9a                                 # page 1: crc32c of page bytes 0..252
"#;

const INDEX_DELTA: &str = r#"
    434149524e495844                         # magic "CAIRNIXD"
    01000000                                 # version 1
    4500000000000000                         # payload_len 69
    08                                       # payload: fp_width 8
    0300000000000000                         # payload: base_generation 3
    02000000                                 # payload: seq 2
    2e00000000000000                         # payload: covered_below 0x2e
    01000000                                 # payload: remove_count 1
    02000000                                 # payload: put_count 2
    c3c3c3c3c3c3c3c3                         # payload: removed fingerprint
    1111111111111111                         # payload: put 0 fingerprint
    2c00000000000000                         # payload: put 0 container 0x2c
    2222222222222222                         # payload: put 1 fingerprint
    2d00000000000000                         # payload: put 1 container 0x2d
    24039c50                                 # crc32c of the above
"#;

const INDEX_DELTA_V2: &str = r#"
    434149524e495844                         # magic "CAIRNIXD"
    02000000                                 # version 2
    4d00000000000000                         # payload_len 77
    08                                       # payload: fp_width 8
    0300000000000000                         # payload: base_generation 3
    02000000                                 # payload: seq 2
    2e00000000000000                         # payload: covered_below 0x2e
    2800000000000000                         # payload: removes_below 0x28
    01000000                                 # payload: remove_count 1
    02000000                                 # payload: put_count 2
    c3c3c3c3c3c3c3c3                         # payload: removed fingerprint
    1111111111111111                         # payload: put 0 fingerprint
    2c00000000000000                         # payload: put 0 container 0x2c
    2222222222222222                         # payload: put 1 fingerprint
    2d00000000000000                         # payload: put 1 container 0x2d
    5686de84                                 # crc32c of the above
"#;

const SUMMARY_VECTOR: &str = r#"
    434149524e424c4d                         # magic "CAIRNBLM"
    02000000                                 # version 2
    3000000000000000                         # payload_len 48
    2e00000000000000                         # payload: covered_below 0x2e
    07000000                                 # payload: hashes 7
    00000000                                 # payload: reserved
    0300000000000000                         # payload: inserted 3
    0200000000000000                         # payload: word_count 2
    0807060504030201                         # payload: word 0
    0100000000000080                         # payload: word 1
    9c21798a                                 # crc32c of the above
"#;

const FRUGAL_LOG: &str = r#"
    43464c47                                 # magic "CFLG"
    01                                       # version 1
    08                                       # fingerprint width 8
    0000                                     # reserved
    05000000                                 # first record position 5
    02000000                                 # record count 2
    1111111111111111                         # record 5: fingerprint
    2a00000000000000                         # record 5: container 0x2a
    2222222222222222                         # record 6: fingerprint
    2b00000000000000                         # record 6: container 0x2b
    80255f89                                 # crc32c of the above
"#;

const FRUGAL_LOG_REMOVAL: &str = r#"
    43464c47                                 # magic "CFLG"
    02                                       # version 2 (holds removals)
    08                                       # fingerprint width 8
    0000                                     # reserved
    09000000                                 # first record position 9
    02000000                                 # record count 2
    1111111111111111                         # record 9: fingerprint
    ffffffffffffffff                         # record 9: removal (container u64::MAX)
    1111111111111111                         # record 10: fingerprint
    3000000000000000                         # record 10: container 0x30
    a3412925                                 # crc32c of the above
"#;
const DIR_EXTRAS: &str = r#"
    03                                       # listing format version 3 (columnar)
    0b                                       # shape column: 11 bytes
    05                                       #   entry count 5
    0508                                     #   "blk": kind 5 (block device), flags 8 (extras)
    0408                                     #   "dev": kind 4 (char device), flags 8
    0300                                     #   "fifo": kind 3 (fifo), flags 0
    0600                                     #   "sock": kind 6 (socket), flags 0
    001a                                     #   "sparse": kind 0 (file), flags 2|8|16 (content, extras, content size)
    19                                       # names column: 25 bytes
    03 626c6b 03 646576                      #   "blk", "dev"
    04 6669666f 04 736f636b                  #   "fifo", "sock"
    06 737061727365                          #   "sparse"
    17                                       # attributes column: 23 bytes
    b0c301 00 00                             #   0o60660, uid 0, gid 0
    b643 00 00                               #   0o20666
    a423 00 00                               #   0o10644
    ed8303 00 00                             #   0o140755
    a48302 00 00                             #   0o100644
    07                                       # sizes column: 7 bytes
    00 00 00 00 808040                       #   0, 0, 0, 0, 1 MiB
    00                                       # targets column: empty
    26                                       # extras column: 38 bytes
    04 03028110                              #   "blk": 4 bytes: tag 3 (rdev), length 2, 0x801
    04 03028302                              #   "dev": tag 3 (rdev), 0x103
    1b                                       #   "sparse": 27 bytes:
    01 0a 01 06 757365722e6b 01 76           #     tag 1 (xattrs), length 10: 1 attribute, "user.k" = "v"
    02 03 8110 02                            #     tag 2 (hard link), length 3: device 2049, 2 links
    80 08 02 8020 04 fcdf03 04               #     tag 128 (extents), length 8: 2 extents, [4096, +4), gap 61436, [65536, +4)
    02                                       # contents column: 2 bytes
    00 08                                    #   "sparse": root level 0, content size 8 (flag 16)
    08                                       # fingerprints column: 8 bytes
    c3c3c3c3c3c3c3c3                         #   "sparse": content root
    28                                       # mtimes column: 40 bytes
    00002a36fe9c9717 00002a36fe9c9717 00002a36fe9c9717 00002a36fe9c9717 00002a36fe9c9717
    0d                                       # ctimes column: 13 bytes
    8280d0e2c6bfce972f 00 00 00 00           #   +1700000000000000001, then +0
    05                                       # inodes column: 5 bytes
    64 02 02 02 02                           #   50, then +1 each
"#;

const DIR_EXTRAS_V2: &str = r#"
    02                                       # listing format version 2
    05                                       # entry count 5 (varint)
    03                                       # entry 0: name length 3
    626c6b                                   # entry 0: name "blk"
    0508                                     # entry 0: kind 5 (block device), flags 8
    b0c301                                   # entry 0: mode 0o60660 (varint)
    0000                                     # entry 0: uid 0, gid 0 (varints)
    00002a36fe9c9717                         # entry 0: mtime_ns
    01002a36fe9c9717                         # entry 0: ctime_ns
    32                                       # entry 0: inode 50 (varint)
    00                                       # entry 0: size 0
    04                                       # entry 0: extras length 4
    03028110                                 # entry 0: tag 3 (rdev), length 2, rdev 0x801
    03                                       # entry 1: name length 3
    646576                                   # entry 1: name "dev"
    0408                                     # entry 1: kind 4 (char device), flags 8
    b643                                     # entry 1: mode 0o20666 (varint)
    0000                                     # entry 1: uid 0, gid 0 (varints)
    00002a36fe9c9717                         # entry 1: mtime_ns
    01002a36fe9c9717                         # entry 1: ctime_ns
    33                                       # entry 1: inode 51 (varint)
    00                                       # entry 1: size 0
    04                                       # entry 1: extras length 4
    03028302                                 # entry 1: tag 3 (rdev), length 2, rdev 0x103
    04                                       # entry 2: name length 4
    6669666f                                 # entry 2: name "fifo"
    0300                                     # entry 2: kind 3 (fifo), flags 0
    a423                                     # entry 2: mode 0o10644 (varint)
    0000                                     # entry 2: uid 0, gid 0 (varints)
    00002a36fe9c9717                         # entry 2: mtime_ns
    01002a36fe9c9717                         # entry 2: ctime_ns
    34                                       # entry 2: inode 52 (varint)
    00                                       # entry 2: size 0
    04                                       # entry 3: name length 4
    736f636b                                 # entry 3: name "sock"
    0600                                     # entry 3: kind 6 (socket), flags 0
    ed8303                                   # entry 3: mode 0o140755 (varint)
    0000                                     # entry 3: uid 0, gid 0 (varints)
    00002a36fe9c9717                         # entry 3: mtime_ns
    01002a36fe9c9717                         # entry 3: ctime_ns
    35                                       # entry 3: inode 53 (varint)
    00                                       # entry 3: size 0
    06                                       # entry 4: name length 6
    737061727365                             # entry 4: name "sparse"
    000a                                     # entry 4: kind 0 (file), flags 10 (content, extras)
    a48302                                   # entry 4: mode 0o100644 (varint)
    0000                                     # entry 4: uid 0, gid 0 (varints)
    00002a36fe9c9717                         # entry 4: mtime_ns
    01002a36fe9c9717                         # entry 4: ctime_ns
    36                                       # entry 4: inode 54 (varint)
    808040                                   # entry 4: size 1048576 (varint)
    c3c3c3c3c3c3c3c3                         # entry 4: content root fingerprint
    00                                       # entry 4: content root level 0
    08                                       # entry 4: content size 8 (the extents' bytes)
    1b                                       # entry 4: extras length 27
    010a                                     # entry 4: tag 1 (xattrs), length 10
    0106757365722e6b0176                     # entry 4: 1 xattr: name "user.k", value "v"
    0203                                     # entry 4: tag 2 (hard link), length 3
    811002                                   # entry 4: dev 2049, nlink 2
    8008                                     # entry 4: tag 128 (extents), length 8
    02802004fcdf0304                         # entry 4: 2 extents: gap 4096 len 4, gap 61436 len 4
"#;

const PARENT_HELD: &str = r#"
    434149524e504831                         # magic "CAIRNPH1" (version 1)
    02000000                                 # entry count 2
    081111111111111111                       # entry 0: fingerprint width 8, content root 11..11
    0000                                     # entry 0: container count 0
    082222222222222222                       # entry 1: fingerprint width 8, content root 22..22
    0200                                     # entry 1: container count 2
    2a00000000000000                         # entry 1: container 0x2a
    0201000000000000                         # entry 1: container 0x102
"#;
