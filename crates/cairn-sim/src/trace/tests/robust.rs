//! Robustness: every truncation of a small trace in each format is an error
//! naming an offset (never a panic, never a silently shorter trace), and
//! random corruption or garbage never panics (proptest).

use proptest::prelude::*;

use super::cairn_fmt::{golden_events, write_trace};
use super::fsl_enc::{encode_fsl, sample_files, VAR};
use super::{assert_corrupt_at_most, read_bytes, testdata};
use crate::trace::{FslChunking, TraceFormat};

fn small_destor() -> Vec<u8> {
    b"file start 5\nd/f.x\n\
      A5AEC7978306D03BF38B2FFC80A4DF5A51C9BC70 16138\n\
      9F19950499DD251DE512148239292D22E255ACCB 11166\n\
      file end\n\
      file start 1\ng\n\
      9D3C7DEC00A61F933D6C51E370EB9A0A96263AE6 3370\n\
      file end\n\
      stream end"
        .to_vec()
}

/// Cuts `bytes` at every `step`-th position (and at its end) and expects an
/// error naming an offset no later than the cut below `complete_at`, and a
/// successful read from `complete_at` on.
fn every_cut(bytes: &[u8], format: TraceFormat, complete_at: usize, step: usize) {
    let cuts = (0..=bytes.len()).step_by(step).chain([bytes.len()]);
    for cut in cuts {
        let r = read_bytes(&bytes[..cut], format);
        if cut < complete_at {
            assert_corrupt_at_most(&r, cut as u64, &format!("{format} cut at {cut}"));
        } else {
            assert!(r.is_ok(), "{format} cut at {cut}: {r:?}");
        }
    }
}

#[test]
fn destor_truncation_at_every_position() {
    let b = small_destor();
    assert_eq!(read_bytes(&b, TraceFormat::Destor).unwrap().len(), 7);
    every_cut(&b, TraceFormat::Destor, b.len(), 1);
    // With a final newline, dropping just the newline is still complete.
    let mut nl = b.clone();
    nl.push(b'\n');
    every_cut(&nl, TraceFormat::Destor, b.len(), 1);
}

#[test]
fn fsl_truncation_at_every_position() {
    for v in [5, 6, 7] {
        let b = encode_fsl(v, &VAR, 48, &sample_files());
        every_cut(&b, TraceFormat::Fsl, b.len(), 1);
    }
    let fixed = FslChunking::Fixed { chunk_size: 8192 };
    let mut files = sample_files();
    files.truncate(1);
    let b = encode_fsl(7, &fixed, 48, &files);
    every_cut(&b, TraceFormat::Fsl, b.len(), 1);
}

#[test]
fn cairn_truncation_at_every_position() {
    let b = write_trace(4, &golden_events());
    every_cut(&b, TraceFormat::Cairn, b.len(), 1);
}

#[test]
fn reference_traces_truncated() {
    let fsl = std::fs::read(testdata().join("fsl/gen0.hash")).unwrap();
    every_cut(&fsl, TraceFormat::Fsl, fsl.len(), 1);
    let destor = std::fs::read(testdata().join("destor/gen0.trace")).unwrap();
    // Every 37th position (coprime with the 47/48-byte chunk lines), then
    // every position of the last 200 bytes.
    every_cut(&destor, TraceFormat::Destor, destor.len(), 37);
    let tail = destor.len() - 200;
    for cut in tail..destor.len() {
        let r = read_bytes(&destor[..cut], TraceFormat::Destor);
        assert_corrupt_at_most(&r, cut as u64, &format!("destor cut at {cut}"));
    }
}

/// Reads to the end or the first error; only a panic fails.
fn read_never_panics(bytes: &[u8], format: TraceFormat) {
    let _ = read_bytes(bytes, format);
}

fn corrupt(mut bytes: Vec<u8>, edits: &[(prop::sample::Index, u8)]) -> Vec<u8> {
    let len = bytes.len();
    for (i, v) in edits {
        bytes[i.index(len)] = *v;
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn corrupted_destor_never_panics(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        read_never_panics(&corrupt(small_destor(), &edits), TraceFormat::Destor);
    }

    #[test]
    fn corrupted_fsl_never_panics(
        version in 5u32..=7,
        fixed in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        body_edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
    ) {
        let chunking = if fixed { FslChunking::Fixed { chunk_size: 4096 } } else { VAR };
        let b = encode_fsl(version, &chunking, 48, &sample_files());
        // Edits anywhere, plus edits aimed at the (small) part after the
        // 8296-byte header, where the structure is.
        let mut b = corrupt(b, &edits);
        let head = crate::trace::fsl::FSL_HEADER_LEN;
        let body = corrupt(b.split_off(head), &body_edits);
        b.extend(body);
        read_never_panics(&b, TraceFormat::Fsl);
    }

    #[test]
    fn corrupted_cairn_never_panics(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let b = write_trace(4, &golden_events());
        read_never_panics(&corrupt(b, &edits), TraceFormat::Cairn);
    }

    #[test]
    fn garbage_after_a_valid_start_never_panics(
        tail in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut destor = b"file start 1\nx\n".to_vec();
        destor.extend_from_slice(&tail);
        read_never_panics(&destor, TraceFormat::Destor);

        let mut fsl = encode_fsl(7, &VAR, 48, &[]);
        fsl[8] = 3; // three files, then garbage
        fsl.extend_from_slice(&tail);
        read_never_panics(&fsl, TraceFormat::Fsl);

        let mut cairn = write_trace(8, &[]);
        cairn.truncate(16);
        cairn.extend_from_slice(&tail);
        read_never_panics(&cairn, TraceFormat::Cairn);

        read_never_panics(&tail, TraceFormat::Destor);
        read_never_panics(&tail, TraceFormat::Fsl);
        read_never_panics(&tail, TraceFormat::Cairn);
    }
}
