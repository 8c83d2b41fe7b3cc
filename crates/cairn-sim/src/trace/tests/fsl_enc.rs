//! A small FSL hashfile encoder for tests, and hand-made v5/v6/v7 files:
//! chunk record shapes, compression ratios, fixed chunking, symlinks, and
//! header/structure errors.
//!
//! The encoder appends the C structs' fields in declaration order (it does
//! not use the reader's offsets), so the 8296/96-byte sizes are checked
//! independently.

use cairn_core::{Error, Fingerprint, TraceChunk, TraceEvent, TraceMeta};

use super::{assert_corrupt_at_most, read_bytes};
use crate::trace::fsl::{stored_size, FSL_HEADER_LEN};
use crate::trace::{FslChunking, TraceFormat};

/// One file entry of a test hashfile.
#[derive(Clone, Debug, Default)]
pub(crate) struct FslFile {
    pub path: Vec<u8>,
    pub target: Vec<u8>,
    pub mode: u64,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u64,
    pub size: u64,
    /// (hash, size, cratio); size is ignored with fixed chunking.
    pub chunks: Vec<(Vec<u8>, u64, u8)>,
}

fn push_padded(out: &mut Vec<u8>, s: &[u8], len: usize) {
    out.extend_from_slice(s);
    out.resize(out.len() + len - s.len(), 0);
}

/// Encodes a hashfile as libhashfile's writer lays it out.
pub(crate) fn encode_fsl(
    version: u32,
    chunking: &FslChunking,
    hash_bits: u32,
    files: &[FslFile],
) -> Vec<u8> {
    let mut o = Vec::new();
    o.extend_from_slice(&0xDEAD_DEADu32.to_le_bytes());
    o.extend_from_slice(&version.to_le_bytes());
    o.extend_from_slice(&(files.len() as u64).to_le_bytes());
    push_padded(&mut o, b"/root", 4096);
    let chunks: u64 = files.iter().map(|f| f.chunks.len() as u64).sum();
    o.extend_from_slice(&chunks.to_le_bytes());
    let params_start;
    match chunking {
        FslChunking::Fixed { chunk_size } => {
            o.extend_from_slice(&1u32.to_le_bytes());
            params_start = o.len();
            o.extend_from_slice(&chunk_size.to_le_bytes());
        }
        FslChunking::Variable {
            algo,
            min_size,
            max_size,
        } => {
            o.extend_from_slice(&2u32.to_le_bytes());
            params_start = o.len();
            o.extend_from_slice(&algo.to_le_bytes());
            o.extend_from_slice(&[0x5a; 32]); // algorithm parameters (ignored)
            o.extend_from_slice(&min_size.to_le_bytes());
            o.extend_from_slice(&max_size.to_le_bytes());
        }
    }
    o.resize(params_start + 44, 0);
    o.extend_from_slice(&3u32.to_le_bytes()); // MD5-48
    o.extend_from_slice(&hash_bits.to_le_bytes());
    push_padded(&mut o, b"Linux test", 4096);
    o.extend_from_slice(&1_400_000_000u64.to_le_bytes());
    o.extend_from_slice(&1_400_000_100u64.to_le_bytes());
    let bytes: u64 = files
        .iter()
        .flat_map(|f| f.chunks.iter().map(|c| c.1))
        .sum();
    o.extend_from_slice(&bytes.to_le_bytes());
    assert_eq!(o.len(), FSL_HEADER_LEN);
    for f in files {
        let start = o.len();
        o.extend_from_slice(&f.size.to_le_bytes());
        o.extend_from_slice(&f.size.div_ceil(512).to_le_bytes()); // blocks
        o.extend_from_slice(&f.uid.to_le_bytes());
        o.extend_from_slice(&f.gid.to_le_bytes());
        o.extend_from_slice(&f.mode.to_le_bytes());
        o.extend_from_slice(&(f.mtime + 1).to_le_bytes()); // atime
        o.extend_from_slice(&f.mtime.to_le_bytes());
        o.extend_from_slice(&(f.mtime + 2).to_le_bytes()); // ctime
        o.extend_from_slice(&1u64.to_le_bytes()); // hard links
        o.extend_from_slice(&66u64.to_le_bytes()); // device
        o.extend_from_slice(&1234u64.to_le_bytes()); // inode
        o.extend_from_slice(&(f.chunks.len() as u64).to_le_bytes());
        o.extend_from_slice(&(f.path.len() as u32).to_le_bytes());
        o.extend_from_slice(&(f.target.len() as u32).to_le_bytes());
        assert_eq!(o.len() - start, 96);
        o.extend_from_slice(&f.path);
        o.extend_from_slice(&f.target);
        for (hash, size, cratio) in &f.chunks {
            assert_eq!(hash.len() * 8, hash_bits as usize);
            match (chunking, version) {
                (FslChunking::Fixed { .. }, _) => {}
                (_, 7) => o.extend_from_slice(&(*size as u32).to_le_bytes()),
                _ => o.extend_from_slice(&size.to_le_bytes()),
            }
            o.extend_from_slice(hash);
            if version >= 6 {
                o.push(*cratio);
            }
        }
    }
    o
}

pub(crate) const VAR: FslChunking = FslChunking::Variable {
    algo: 3,
    min_size: 2048,
    max_size: 65536,
};

fn h(n: u8) -> Vec<u8> {
    vec![n, 0xa0, 0xb0, 0xc0, 0xd0, n]
}

/// A regular file, an empty file, and a symlink.
pub(crate) fn sample_files() -> Vec<FslFile> {
    vec![
        FslFile {
            path: b"home/u/a.txt".to_vec(),
            mode: 0o100_644,
            uid: 501,
            gid: 20,
            mtime: 1_300_000_000,
            size: 12_000,
            chunks: vec![(h(1), 8000, 0), (h(2), 4000, 20), (h(1), 8000, 0)],
            ..Default::default()
        },
        FslFile {
            path: b"home/u/empty".to_vec(),
            mode: 0o100_600,
            ..Default::default()
        },
        FslFile {
            path: b"home/u/link".to_vec(),
            target: b"a.txt".to_vec(),
            mode: 0o120_777,
            uid: 501,
            mtime: 1_300_000_001,
            size: 5,
            ..Default::default()
        },
    ]
}

fn ck(n: u8, size: u32, stored: u32) -> TraceEvent {
    TraceEvent::Chunk(TraceChunk {
        fp: Fingerprint::from_slice(&h(n)),
        size,
        stored_size: stored,
    })
}

/// What `sample_files` reads as, given the version's cratio handling.
fn sample_events(has_ratio: bool) -> Vec<TraceEvent> {
    let meta = |mode, uid, gid, mtime: i64, size| TraceMeta {
        mode,
        uid,
        gid,
        mtime_ns: mtime * 1_000_000_000,
        size,
    };
    vec![
        TraceEvent::FileStart {
            name: b"home/u/a.txt".to_vec(),
            meta: meta(0o100_644, 501, 20, 1_300_000_000, 12_000),
        },
        ck(1, 8000, 8000),
        ck(2, 4000, if has_ratio { 2000 } else { 4000 }),
        ck(1, 8000, 8000),
        TraceEvent::FileEnd,
        TraceEvent::FileStart {
            name: b"home/u/empty".to_vec(),
            meta: meta(0o100_600, 0, 0, 0, 0),
        },
        TraceEvent::FileEnd,
        TraceEvent::Symlink {
            name: b"home/u/link".to_vec(),
            meta: meta(0o120_777, 501, 0, 1_300_000_001, 5),
            target: b"a.txt".to_vec(),
        },
    ]
}

#[test]
fn versions_5_6_7_read_the_same_files() {
    for v in [5, 6, 7] {
        let bytes = encode_fsl(v, &VAR, 48, &sample_files());
        let events = read_bytes(&bytes, TraceFormat::Fsl).unwrap();
        assert_eq!(events, sample_events(v >= 6), "version {v}");
    }
}

#[test]
fn record_sizes_per_version() {
    // One 6-byte hash chunk: v5 8+6, v6 8+6+1, v7 4+6+1 bytes.
    for (v, rec) in [(5, 14), (6, 15), (7, 11)] {
        let f = FslFile {
            path: b"f".to_vec(),
            chunks: vec![(h(9), 100, 10)],
            ..Default::default()
        };
        let bytes = encode_fsl(v, &VAR, 48, &[f]);
        assert_eq!(bytes.len(), FSL_HEADER_LEN + 96 + 1 + rec, "version {v}");
    }
}

#[test]
fn compression_ratio_in_tenths_maps_to_stored_size() {
    assert_eq!(stored_size(8000, 0), 8000); // unknown
    assert_eq!(stored_size(8000, 10), 8000); // 1.0
    assert_eq!(stored_size(8000, 5), 8000); // expands: kept raw
    assert_eq!(stored_size(8000, 20), 4000); // 2.0
    assert_eq!(stored_size(8000, 30), 2666); // 3.0
    assert_eq!(stored_size(8000, 255), 313); // >= 25.5
    assert_eq!(stored_size(3, 255), 1); // never empty
    assert_eq!(stored_size(0, 40), 0);
    assert_eq!(stored_size(u32::MAX, 11), 3_904_515_722);
}

#[test]
fn fixed_chunking_derives_sizes_like_libhashfile() {
    let fixed = FslChunking::Fixed { chunk_size: 4096 };
    let file = |size, n| FslFile {
        path: b"f".to_vec(),
        mode: 0o100_644,
        size,
        chunks: (0..n).map(|i| (vec![i; 4], 0, 0)).collect(),
        ..Default::default()
    };
    for (size, n, want) in [
        (10_000u64, 3u8, vec![4096u32, 4096, 1808]),
        (8192, 2, vec![4096, 4096]),
        (100, 1, vec![100]),
        (1000, 3, vec![4096, 4096, 4096]), // recorded size too small
        (99_999, 2, vec![4096, 4096]),     // recorded size too large
    ] {
        let bytes = encode_fsl(7, &fixed, 32, &[file(size, n)]);
        let sizes: Vec<u32> = read_bytes(&bytes, TraceFormat::Fsl)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                TraceEvent::Chunk(c) => Some(c.size),
                _ => None,
            })
            .collect();
        assert_eq!(sizes, want, "size {size}, {n} chunks");
    }
}

#[test]
fn header_and_structure_errors() {
    let good = encode_fsl(7, &VAR, 48, &sample_files());
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        read_bytes(&b, TraceFormat::Fsl)
    };
    let set32 =
        |b: &mut Vec<u8>, off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    let set64 =
        |b: &mut Vec<u8>, off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    let first_file = FSL_HEADER_LEN;

    let e = with(&|b| b[0] = 0).unwrap_err();
    assert!(e.to_string().contains("bad magic"), "{e}");
    let e = with(&|b| set32(b, 4, 4)).unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(_)) && e.to_string().contains("version 4"),
        "{e}"
    );
    let e = with(&|b| set32(b, 4, 8)).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedVersion { found: 8, .. }),
        "{e}"
    );
    let e = with(&|b| set32(b, 4120, 9)).unwrap_err();
    assert!(e.to_string().contains("unknown chunking method 9"), "{e}");
    for bits in [0, 12, 264] {
        let e = with(&|b| set32(b, 4172, bits)).unwrap_err();
        assert!(e.to_string().contains("hash size"), "{e}");
    }
    // Header says 4 files, 3 present: truncated at the end of the data.
    let r = with(&|b| set64(b, 8, 4));
    assert_corrupt_at_most(&r, good.len() as u64, "4 files");
    assert!(r.unwrap_err().to_string().contains("header of file 4 of 4"));
    // Header says 2 files: the third is trailing data.
    let e = with(&|b| set64(b, 8, 2)).unwrap_err();
    assert!(e.to_string().contains("unexpected data at byte"), "{e}");
    // Chunk total disagrees with the files.
    let e = with(&|b| set64(b, 4112, 4)).unwrap_err();
    assert!(
        e.to_string()
            .contains("hold 3 chunks but the header says 4"),
        "{e}"
    );
    let e = with(&|b| set64(b, 4112, 2)).unwrap_err();
    assert!(
        e.to_string()
            .contains("has 3 chunks but the hashfile header leaves 2"),
        "{e}"
    );
    // Mode beyond 32 bits, oversized path, symlink with chunks.
    let e = with(&|b| set64(b, first_file + 24, 1 << 40)).unwrap_err();
    assert!(e.to_string().contains("beyond 32 bits"), "{e}");
    let e = with(&|b| set32(b, first_file + 88, 1 << 20)).unwrap_err();
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
    let e = with(&|b| set64(b, first_file + 24, 0o120_777)).unwrap_err();
    assert!(e.to_string().contains("symlink `home/u/a.txt`"), "{e}");
    // v5/v6 chunk sizes beyond 32 bits.
    let mut f = sample_files();
    f[0].chunks[0].1 = 1 << 33;
    let e = read_bytes(&encode_fsl(6, &VAR, 48, &f), TraceFormat::Fsl).unwrap_err();
    assert!(e.to_string().contains("beyond 32 bits"), "{e}");
}

#[test]
fn wide_hashes_become_wide_fingerprints() {
    let f = FslFile {
        path: b"f".to_vec(),
        chunks: vec![(vec![7; 32], 10, 0)],
        ..Default::default()
    };
    let events = read_bytes(&encode_fsl(7, &VAR, 256, &[f]), TraceFormat::Fsl).unwrap();
    assert!(matches!(&events[1], TraceEvent::Chunk(c) if c.fp.as_bytes() == [7; 32]));
}
