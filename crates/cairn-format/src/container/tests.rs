use super::*;
use crate::bytes::{set_u32, set_u64};
use crate::compress::{compress, decompress};
use crate::testutil::{check_mutations, MutationRun};
use cairn_core::CompressionConfig;
use proptest::prelude::*;

fn fp(w: usize, seed: u8) -> Fingerprint {
    let v: Vec<u8> = (0..w)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
        .collect();
    Fingerprint::from_slice(&v)
}

fn small(id: u64) -> Vec<u8> {
    let mut w = ContainerWriter::new(ContainerId(id), 4, 1 << 20);
    w.push(
        fp(4, 1),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        5,
        b"hello",
    );
    w.push(
        fp(4, 2),
        ChunkKind::Tree,
        1,
        CompressionCodec::None,
        3,
        b"abc",
    );
    w.push(fp(4, 3), ChunkKind::Meta, 0, CompressionCodec::None, 0, b"");
    w.finish()
}

/// Recomputes metadata, trailer and header checksums after a test edits fields.
fn reseal(b: &mut [u8]) {
    let n = b.len();
    let t0 = n - CONTAINER_TRAILER_LEN;
    let meta_off = get_u64(&b[t0..], TR_META_OFFSET_OFFSET) as usize;
    let meta_len = get_u64(&b[t0..], TR_META_LEN_OFFSET) as usize;
    if meta_off.checked_add(meta_len).is_some_and(|e| e <= t0) {
        let c = crc32c::crc32c(&b[meta_off..meta_off + meta_len]);
        set_u32(&mut b[t0..], TR_META_CRC_OFFSET, c);
    }
    let c = crc32c::crc32c(&b[t0..t0 + TR_CRC_OFFSET]);
    set_u32(&mut b[t0..], TR_CRC_OFFSET, c);
    let c = crc32c::crc32c(&b[..HDR_CRC_OFFSET]);
    set_u32(b, HDR_CRC_OFFSET, c);
}

fn meta_start(b: &[u8]) -> usize {
    get_u64(&b[b.len() - CONTAINER_TRAILER_LEN..], TR_META_OFFSET_OFFSET) as usize
}

fn err_text(b: &[u8]) -> String {
    decode_container(b).unwrap_err().to_string()
}

#[test]
fn round_trip_and_stored_chunk() {
    let bytes = small(42);
    assert_eq!(bytes.len(), encoded_len(3, 8, 4));
    let m = decode_container(&bytes).unwrap();
    assert_eq!(m.id, ContainerId(42));
    assert_eq!(m.fp_width, 4);
    assert_eq!(m.data_offset, CONTAINER_HEADER_LEN as u64);
    assert_eq!(m.data_len, 8);
    assert_eq!(m.file_size, bytes.len() as u64);
    assert_eq!(m.descriptors.len(), 3);
    assert_eq!(m.descriptors[1].kind, ChunkKind::Tree);
    assert_eq!(m.descriptors[1].level, 1);
    let payloads: Vec<&[u8]> = m
        .descriptors
        .iter()
        .map(|d| stored_chunk(&bytes, &m, d).unwrap())
        .collect();
    assert_eq!(payloads, vec![&b"hello"[..], b"abc", b""]);
    assert_eq!(chunk_file_range(&m, &m.descriptors[1]), 37..40);
    // A stored chunk past the bytes given (a short read) is an error.
    assert!(stored_chunk(&bytes[..36], &m, &m.descriptors[0]).is_err());
    let mut bogus = m.descriptors[0];
    bogus.offset = 6;
    assert!(stored_chunk(&bytes, &m, &bogus).is_err());
}

#[test]
fn empty_container_is_valid() {
    let bytes = ContainerWriter::new(ContainerId(7), 32, 4 << 20).finish();
    assert_eq!(bytes.len(), MIN_CONTAINER_LEN);
    let m = decode_container(&bytes).unwrap();
    assert!(m.descriptors.is_empty());
}

#[test]
fn tail_decoding_at_every_tail_length() {
    let bytes = small(9);
    let full = decode_container(&bytes).unwrap();
    let size = bytes.len() as u64;
    let mut need = None;
    for len in 0..=bytes.len() {
        match decode_tail(size, &bytes[bytes.len() - len..]).unwrap() {
            TailDecode::Meta(m) => assert_eq!(m, full),
            TailDecode::NeedTail(n) => {
                assert!(len < n && n as u64 <= size, "len {len} need {n}");
                if len >= CONTAINER_TRAILER_LEN {
                    need = Some(n);
                }
            }
        }
    }
    assert_eq!(need, Some(bytes.len() - meta_start(&bytes)));
    assert!(decode_tail(3, &bytes).is_err());
}

#[test]
fn tail_does_not_read_data() {
    let mut bytes = small(9);
    bytes[CONTAINER_HEADER_LEN] ^= 1;
    assert!(matches!(
        decode_tail(bytes.len() as u64, &bytes).unwrap(),
        TailDecode::Meta(_)
    ));
    assert!(err_text(&bytes).contains("data checksum mismatch"));
}

#[test]
fn every_prefix_is_rejected() {
    let bytes = small(1);
    for cut in 0..bytes.len() {
        let p = &bytes[..cut];
        assert!(
            decode_container(p).unwrap_err().is_corruption(),
            "cut {cut}"
        );
        assert!(decode_tail(cut as u64, p).is_err(), "tail cut {cut}");
    }
}

#[test]
fn every_bit_flip_is_detected() {
    let bytes = small(1);
    for i in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        assert!(decode_container(&b).is_err(), "flip of bit {i} undetected");
    }
}

#[test]
fn structural_errors_behind_valid_checksums() {
    let good = small(5);
    let ms = meta_start(&good);
    let d0 = ms + META_COUNT_LEN; // first descriptor
    let t0 = good.len() - CONTAINER_TRAILER_LEN;

    let mut b = good.clone();
    b[d0 + 4 + DESC_KIND_OFFSET] = 9;
    reseal(&mut b);
    assert!(
        err_text(&b).contains("unknown chunk kind 9"),
        "{}",
        err_text(&b)
    );

    let mut b = good.clone();
    b[d0 + 4 + DESC_CODEC_OFFSET] = 7;
    reseal(&mut b);
    assert!(err_text(&b).contains("unknown codec 7"));

    let mut b = good.clone();
    set_u32(&mut b[d0 + 4..], DESC_OFFSET_OFFSET, 6);
    reseal(&mut b);
    assert!(err_text(&b).contains("outside"));

    let mut b = good.clone();
    set_u32(&mut b[d0 + 4..], DESC_RAW_LEN_OFFSET, 6);
    reseal(&mut b);
    assert!(err_text(&b).contains("raw length"));

    let mut b = good.clone();
    set_u32(&mut b, ms, 2);
    reseal(&mut b);
    assert!(err_text(&b).contains("trailer says 3"));

    let mut b = good.clone();
    set_u32(&mut b[t0..], TR_COUNT_OFFSET, 2);
    reseal(&mut b);
    assert!(err_text(&b).contains("descriptors of width"));

    let mut b = good.clone();
    set_u64(&mut b, HDR_ID_OFFSET, 6);
    reseal(&mut b);
    assert!(err_text(&b).contains("trailer id"));

    let mut b = good.clone();
    b[HDR_FP_WIDTH_OFFSET] = 5;
    reseal(&mut b);
    assert!(err_text(&b).contains("header fingerprint width 5"));

    for w in [0u8, 33] {
        let mut b = good.clone();
        b[t0 + TR_FP_WIDTH_OFFSET] = w;
        reseal(&mut b);
        assert!(err_text(&b).contains("width"), "{}", err_text(&b));
    }

    let mut b = good.clone();
    b[t0 + TR_RESERVED_OFFSET] = 1;
    reseal(&mut b);
    assert!(err_text(&b).contains("reserved"));

    let mut b = good.clone();
    b[HDR_RESERVED2_OFFSET] = 1;
    reseal(&mut b);
    assert!(err_text(&b).contains("reserved"));

    let mut b = good.clone();
    set_u64(&mut b[t0..], TR_DATA_OFFSET_OFFSET, 0);
    reseal(&mut b);
    assert!(err_text(&b).contains("data section offset"));

    let mut b = good.clone();
    set_u64(&mut b[t0..], TR_META_OFFSET_OFFSET, ms as u64 + 1);
    reseal(&mut b);
    assert!(err_text(&b).contains("does not follow"));

    let mut b = good.clone();
    set_u64(&mut b[t0..], TR_META_LEN_OFFSET, u64::MAX);
    reseal(&mut b);
    assert!(decode_container(&b).unwrap_err().is_corruption());

    let mut b = good.clone();
    b[0] = b'X';
    assert!(err_text(&b).contains("bad magic"));
    let mut b = good.clone();
    b[t0 + TR_MAGIC_OFFSET] = b'X';
    assert!(err_text(&b).contains("bad trailer magic"));
}

#[test]
fn newer_versions_are_unsupported() {
    let good = small(5);
    let t0 = good.len() - CONTAINER_TRAILER_LEN;
    let mut b = good.clone();
    set_u32(&mut b, HDR_VERSION_OFFSET, 2);
    reseal(&mut b);
    assert!(matches!(
        decode_container(&b),
        Err(Error::UnsupportedVersion { found: 2, .. })
    ));
    let mut b = good.clone();
    set_u32(&mut b[t0..], TR_VERSION_OFFSET, 2);
    reseal(&mut b);
    assert!(matches!(
        decode_tail(b.len() as u64, &b[t0..]),
        Err(Error::UnsupportedVersion { found: 2, .. })
    ));
    set_u32(&mut b[t0..], TR_VERSION_OFFSET, 0);
    reseal(&mut b);
    assert!(decode_container(&b).unwrap_err().is_corruption());
}

#[test]
fn would_fit_tracks_capacity() {
    let cap = encoded_len(2, 100, 8);
    let mut w = ContainerWriter::new(ContainerId(1), 8, cap);
    assert!(
        w.would_fit(10 * cap),
        "empty writer accepts an oversize chunk"
    );
    w.push(
        fp(8, 1),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        60,
        &[0; 60],
    );
    assert!(w.would_fit(40));
    assert!(!w.would_fit(41));
    w.push(
        fp(8, 2),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        40,
        &[0; 40],
    );
    assert_eq!(w.encoded_len(), cap);
    assert!(!w.would_fit(0));
    assert_eq!((w.len(), w.data_len(), w.is_empty()), (2, 100, false));
    assert_eq!(w.finish().len(), cap);
}

#[test]
fn finish_into_reuses_and_reset_renames() {
    let mut w = ContainerWriter::new(ContainerId(3), 4, 1 << 20);
    let mut out = vec![1, 2, 3];
    w.push(
        fp(4, 1),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        5,
        b"hello",
    );
    w.push(
        fp(4, 2),
        ChunkKind::Tree,
        1,
        CompressionCodec::None,
        3,
        b"abc",
    );
    w.push(fp(4, 3), ChunkKind::Meta, 0, CompressionCodec::None, 0, b"");
    w.finish_into(&mut out);
    assert_eq!(out, small(3));
    assert!(w.is_empty() && w.data_len() == 0 && w.id() == ContainerId(3));
    w.reset(ContainerId(4));
    w.push(
        fp(4, 1),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        5,
        b"hello",
    );
    w.push(
        fp(4, 2),
        ChunkKind::Tree,
        1,
        CompressionCodec::None,
        3,
        b"abc",
    );
    w.push(fp(4, 3), ChunkKind::Meta, 0, CompressionCodec::None, 0, b"");
    assert_eq!(w.descriptors().len(), 3);
    w.finish_into(&mut out);
    assert_eq!(out, small(4));
}

#[test]
#[should_panic(expected = "width mismatch")]
fn push_rejects_wrong_width() {
    let mut w = ContainerWriter::new(ContainerId(1), 8, 1024);
    w.push(
        fp(4, 1),
        ChunkKind::Data,
        0,
        CompressionCodec::None,
        1,
        b"x",
    );
}

fn codec_strategy() -> impl Strategy<Value = CompressionCodec> {
    prop_oneof![
        Just(CompressionCodec::None),
        Just(CompressionCodec::Zstd),
        Just(CompressionCodec::Lz4),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn prop_round_trip(
        id in any::<u64>(),
        width in 1usize..=32,
        chunks in proptest::collection::vec(
            (any::<[u8; 32]>(), 0u8..3, any::<u8>(), codec_strategy(),
             prop_oneof![proptest::collection::vec(any::<u8>(), 0..600),
                         proptest::collection::vec(0u8..2, 0..2000)]),
            0..12),
    ) {
        let mut w = ContainerWriter::new(ContainerId(id), width, 1 << 20);
        // Data chunks first, then metadata chunks (tree nodes, listings),
        // each in push order: the order the container lists them.
        let (mut raws, mut last) = (Vec::new(), Vec::new());
        let mut stored = Vec::new();
        for (fpb, kind, level, codec, raw) in &chunks {
            let cfg = CompressionConfig { codec: *codec, level: 1, min_savings_pct: 5 };
            let used = compress(&cfg, raw, &mut stored);
            let f = Fingerprint::from_slice(&fpb[..width]);
            let kind = ChunkKind::from_u8(*kind).unwrap();
            w.push(f, kind, *level, used, raw.len() as u32, &stored);
            if kind == ChunkKind::Data && *level == 0 { &mut raws } else { &mut last }.push(raw.clone());
        }
        raws.extend(last);
        let expected = w.descriptors().to_vec();
        let bytes = w.finish();
        let m = decode_container(&bytes).unwrap();
        prop_assert_eq!(&m.descriptors, &expected);
        // Listed in data-section order, metadata chunks after every data chunk.
        for pair in m.descriptors.windows(2) {
            prop_assert_eq!(pair[0].offset + pair[0].stored_len, pair[1].offset);
        }
        let first_meta = m.descriptors.iter().position(|d| d.kind != ChunkKind::Data || d.level > 0);
        if let Some(i) = first_meta {
            prop_assert!(m.descriptors[i..].iter().all(|d| d.kind != ChunkKind::Data || d.level > 0));
        }
        prop_assert_eq!(m.id, ContainerId(id));
        let mut out = Vec::new();
        for (d, raw) in m.descriptors.iter().zip(&raws) {
            let s = stored_chunk(&bytes, &m, d).unwrap();
            decompress(d.codec, s, d.raw_len as usize, &mut out).unwrap();
            prop_assert_eq!(&out, raw);
        }
        match decode_tail(bytes.len() as u64, &bytes[bytes.len() - metadata_len(m.descriptors.len(), width) - CONTAINER_TRAILER_LEN..]).unwrap() {
            TailDecode::Meta(t) => prop_assert_eq!(t, m),
            TailDecode::NeedTail(n) => prop_assert!(false, "needed {}", n),
        }
    }

    #[test]
    fn prop_byte_changes_are_detected(pos in any::<prop::sample::Index>(), x in 1u8..=255) {
        let mut b = small(77);
        let i = pos.index(b.len());
        b[i] ^= x;
        prop_assert!(decode_container(&b).is_err());
    }

    #[test]
    fn prop_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), extra in 0u64..1000) {
        let _ = decode_container(&bytes);
        let _ = decode_tail(bytes.len() as u64 + extra, &bytes);
    }

    #[test]
    fn prop_mutated_tails_never_panic(pos in any::<prop::sample::Index>(), x in any::<u8>(), reseal_it in any::<bool>()) {
        let mut b = small(77);
        let i = pos.index(b.len());
        b[i] = x;
        if reseal_it {
            reseal(&mut b);
        }
        let _ = decode_container(&b);
        let _ = decode_tail(b.len() as u64, &b);
    }
}

/// Mutated valid containers never panic the decoders. What decodes is
/// canonical (writing its chunks again gives the same bytes, but the
/// reserved ones), every chunk it lists lies within the file, and the tail
/// decoder agrees with the whole-file decoder.
#[test]
fn mutated_containers_decode_canonically_or_not_at_all() {
    let valid = (
        any::<u64>(),
        1usize..=32,
        proptest::collection::vec(
            (
                any::<[u8; 32]>(),
                0u8..3,
                0u8..3,
                proptest::collection::vec(any::<u8>(), 0..64),
            ),
            0..6,
        ),
    )
        .prop_map(|(id, width, chunks)| {
            let mut w = ContainerWriter::new(ContainerId(id), width, 1 << 20);
            for (fpb, kind, level, stored) in &chunks {
                let kind = ChunkKind::from_u8(*kind).unwrap();
                let f = Fingerprint::from_slice(&fpb[..width]);
                w.push(
                    f,
                    kind,
                    *level,
                    CompressionCodec::None,
                    stored.len() as u32,
                    stored,
                );
            }
            ((), w.finish())
        });
    // Repairs the checksums a mutation broke (the data section's too),
    // when the bytes are long enough to hold a header and a trailer.
    let reseal_if_whole = |b: &mut [u8]| {
        if b.len() < CONTAINER_HEADER_LEN + CONTAINER_TRAILER_LEN {
            return;
        }
        let t0 = b.len() - CONTAINER_TRAILER_LEN;
        let data_len = get_u64(&b[t0..], TR_DATA_LEN_OFFSET) as usize;
        if data_len <= t0 - CONTAINER_HEADER_LEN {
            let c = crc32c::crc32c(&b[CONTAINER_HEADER_LEN..CONTAINER_HEADER_LEN + data_len]);
            set_u32(&mut b[t0..], TR_DATA_CRC_OFFSET, c);
        }
        reseal(b);
    };
    let run = MutationRun {
        name: "container",
        cases: 512,
        min_decoded_pct: 20,
    };
    check_mutations(run, valid, reseal_if_whole, |(), bytes| {
        let _ = decode_tail(bytes.len() as u64, bytes);
        let Ok(m) = decode_container(bytes) else {
            return Ok(false);
        };
        let mut w = ContainerWriter::new(m.id, m.fp_width, 1 << 20);
        for d in &m.descriptors {
            let stored = stored_chunk(bytes, &m, d);
            prop_assert!(stored.is_ok(), "{:?}: {:?}", d, stored);
            w.push(d.fp, d.kind, d.level, d.codec, d.raw_len, stored.unwrap());
        }
        // Readers accept chunks in any order (docs/FORMAT.md) and the
        // decoder does not check that payloads are packed without gaps or
        // overlaps; the writer packs them, data chunks first, so only a
        // container laid out that way can come out of it byte for byte.
        let is_meta = |d: &Descriptor| d.kind != ChunkKind::Data || d.level > 0;
        let writer_layout = m.descriptors.windows(2).all(|p| {
            (!is_meta(&p[0]) || is_meta(&p[1])) && p[0].offset + p[0].stored_len == p[1].offset
        }) && m.descriptors.first().is_none_or(|d| d.offset == 0);
        if writer_layout {
            let mut again = w.finish();
            prop_assert_eq!(again.len(), bytes.len());
            let t0 = bytes.len() - CONTAINER_TRAILER_LEN;
            let reserved = [
                HDR_RESERVED1_OFFSET..HDR_RESERVED1_OFFSET + HDR_RESERVED1_LEN,
                HDR_RESERVED2_OFFSET..HDR_RESERVED2_OFFSET + HDR_RESERVED2_LEN,
                t0 + TR_RESERVED_OFFSET..t0 + TR_RESERVED_OFFSET + TR_RESERVED_LEN,
            ];
            for r in reserved {
                again[r.clone()].copy_from_slice(&bytes[r]);
            }
            reseal(&mut again);
            prop_assert_eq!(&again[..], bytes);
        }
        match decode_tail(bytes.len() as u64, bytes) {
            Ok(TailDecode::Meta(t)) => prop_assert_eq!(t, m),
            other => prop_assert!(false, "the tail decoder disagrees: {:?}", other),
        }
        Ok(true)
    });
}

/// A container described without payloads has exactly the metadata the
/// encoded container with the same chunks decodes to (but the data checksum).
#[test]
fn sparse_meta_equals_encoded_meta() {
    use cairn_core::{ChunkKind, CompressionCodec, ContainerId, Fingerprint};
    let mut full = ContainerWriter::new(ContainerId(9), 20, 1 << 20);
    let mut sparse = ContainerWriter::new(ContainerId(9), 20, 1 << 20);
    for i in 0..50u32 {
        let fp = Fingerprint::from_slice(&[i as u8; 20]);
        let payload = vec![i as u8; 100 + i as usize * 7];
        full.push(
            fp,
            ChunkKind::Data,
            0,
            CompressionCodec::Zstd,
            4096,
            &payload,
        );
        sparse.push_absent(
            fp,
            ChunkKind::Data,
            0,
            CompressionCodec::Zstd,
            4096,
            payload.len() as u32,
        );
    }
    assert!(sparse.is_sparse() && !full.is_sparse());
    assert_eq!(full.data_len(), sparse.data_len());
    assert_eq!(full.encoded_len(), sparse.encoded_len());
    let bytes = full.finish();
    let mut decoded = decode_container(&bytes).unwrap();
    let meta = sparse.into_meta();
    decoded.data_crc = 0;
    assert_eq!(meta, decoded);
}

/// A metadata section encoded alone is byte for byte the one a container
/// file holds, and decodes back; a section of the wrong length or with a
/// payload past the data is refused.
#[test]
fn metadata_section_alone_matches_the_file_and_round_trips() {
    let b = small(9);
    let meta = decode_container(&b).unwrap();
    let mut alone = Vec::new();
    encode_metadata(&meta.descriptors, &mut alone);
    let start = meta_start(&b);
    assert_eq!(alone, b[start..start + alone.len()]);
    let n = meta.descriptors.len() as u32;
    let back = decode_metadata("c", &alone, n, 4, meta.data_len).unwrap();
    assert_eq!(back, meta.descriptors);
    assert!(decode_metadata("c", &alone[..alone.len() - 1], n, 4, meta.data_len).is_err());
    assert!(decode_metadata("c", &alone, n, 4, 0).is_err());
}
