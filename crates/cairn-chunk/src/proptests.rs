//! Property tests over every chunker: determinism, size bounds, lossless
//! concatenation, streaming == whole-buffer cut points under random short
//! reads, and resynchronisation after an insertion (content-defined only).
//! The content-defined chunkers run both with the fixed tables and with
//! tables derived from a chunker seed (an encrypted repository's).

use proptest::prelude::*;

use crate::testutil::{random_bytes, Rng, ShortReader};
use crate::{
    cut_points, ChunkBatch, ChunkReader, Chunker, FastCdcChunker, FixedChunker, GearTable,
    RabinChunker, RabinTables, RegressionChunker,
};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Fixed,
    Rabin,
    FastCdc,
    Regression,
    SeededRabin,
    SeededFastCdc,
    SeededRegression,
}

const ALL: [Kind; 7] = [
    Kind::Fixed,
    Kind::Rabin,
    Kind::FastCdc,
    Kind::Regression,
    Kind::SeededRabin,
    Kind::SeededFastCdc,
    Kind::SeededRegression,
];
const CDC: [Kind; 6] = [
    Kind::Rabin,
    Kind::FastCdc,
    Kind::Regression,
    Kind::SeededRabin,
    Kind::SeededFastCdc,
    Kind::SeededRegression,
];

/// The seed of the seeded kinds.
const SEED: [u8; 32] = *b"a repository's chunker seed.....";

/// Chunk size parameters: avg = 2^log_avg, min = avg / min_div (Rabin: at
/// least 64), max = avg * max_mul.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    min: usize,
    avg: usize,
    max: usize,
}

fn sizes(log_avg: u32, min_div: usize, max_mul: usize) -> Sizes {
    let avg = 1usize << log_avg;
    Sizes {
        min: (avg / min_div).max(1),
        avg,
        max: avg * max_mul,
    }
}

fn make(kind: Kind, s: Sizes) -> Box<dyn Chunker> {
    match kind {
        Kind::Fixed => Box::new(FixedChunker::new(s.avg)),
        Kind::Rabin => Box::new(RabinChunker::new(s.min.max(64), s.avg, s.max)),
        Kind::FastCdc => Box::new(FastCdcChunker::new(s.min, s.avg, s.max)),
        Kind::Regression => Box::new(RegressionChunker::new(s.min, s.avg, s.max)),
        Kind::SeededRabin => Box::new(RabinChunker::with_tables(
            s.min.max(64),
            s.avg,
            s.max,
            RabinTables::seeded(&SEED),
        )),
        Kind::SeededFastCdc => Box::new(FastCdcChunker::with_table(
            s.min,
            s.avg,
            s.max,
            GearTable::seeded(&SEED),
        )),
        Kind::SeededRegression => Box::new(RegressionChunker::with_tables(
            s.min,
            s.avg,
            s.max,
            RabinTables::seeded(&SEED),
        )),
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop::sample::select(ALL.to_vec())
}

fn cdc_kind() -> impl Strategy<Value = Kind> {
    prop::sample::select(CDC.to_vec())
}

/// Small chunks so that short inputs still hold many of them.
fn small_sizes() -> impl Strategy<Value = Sizes> {
    (
        6u32..=10,
        prop::sample::select(vec![1usize, 2, 4, 8]),
        1usize..=8,
    )
        .prop_map(|(l, d, m)| sizes(l, d, m))
}

fn cuts(kind: Kind, s: Sizes, data: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    cut_points(make(kind, s).as_mut(), data, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn chunks_are_bounded_lossless_and_deterministic(
        kind in kind(),
        s in small_sizes(),
        seed in any::<u64>(),
        len in 0usize..40_000,
    ) {
        let data = random_bytes(seed, len);
        let mut c = make(kind, s);
        let (min, max) = (c.min_size(), c.max_size());
        let mut ends = Vec::new();
        cut_points(c.as_mut(), &data, &mut ends);
        prop_assert_eq!(&ends, &cuts(kind, s, &data), "deterministic");
        let mut rebuilt = Vec::with_capacity(len);
        let mut start = 0;
        for (i, &end) in ends.iter().enumerate() {
            let n = end - start;
            prop_assert!(n <= max && n > 0, "chunk {} has {} bytes", i, n);
            if i + 1 < ends.len() {
                prop_assert!(n >= min, "chunk {} has {} < {} bytes", i, n, min);
            }
            rebuilt.extend_from_slice(&data[start..end]);
            start = end;
        }
        prop_assert_eq!(rebuilt, data);
    }

    #[test]
    fn low_entropy_input_is_handled(
        kind in kind(),
        s in small_sizes(),
        seed in any::<u64>(),
        len in 0usize..20_000,
    ) {
        // Runs of a few byte values: long stretches where the hash repeats.
        let mut rng = Rng::new(seed);
        let mut data = Vec::with_capacity(len);
        while data.len() < len {
            let b = (rng.next_u64() % 3) as u8;
            let run = rng.range(1, 2000).min(len - data.len());
            data.extend(std::iter::repeat_n(b, run));
        }
        let mut c = make(kind, s);
        let (min, max) = (c.min_size(), c.max_size());
        let mut ends = Vec::new();
        cut_points(c.as_mut(), &data, &mut ends);
        let mut start = 0;
        for (i, &end) in ends.iter().enumerate() {
            prop_assert!(end - start <= max);
            if i + 1 < ends.len() {
                prop_assert!(end - start >= min);
            }
            start = end;
        }
        prop_assert_eq!(start, len);
    }

    #[test]
    fn reader_matches_whole_buffer_cuts(
        kind in kind(),
        s in small_sizes(),
        seed in any::<u64>(),
        len in 0usize..60_000,
        max_read in 1usize..5000,
        target in 0usize..20_000,
        interrupt in any::<bool>(),
    ) {
        let data = random_bytes(seed, len);
        let expected = cuts(kind, s, &data);
        let mut reader = ShortReader::new(&data, seed ^ 1, max_read);
        if interrupt {
            reader = reader.interrupting();
        }
        let mut r = ChunkReader::new(reader, make(kind, s), target);
        let mut batch = ChunkBatch::new();
        let mut got = Vec::new();
        let mut offset = 0;
        while r.next_batch(&mut batch).unwrap() {
            prop_assert!(!batch.is_empty());
            prop_assert_eq!(&batch.data[..], &data[offset..offset + batch.bytes()]);
            got.extend(batch.ends.iter().map(|e| e + offset));
            offset += batch.bytes();
        }
        prop_assert!(batch.is_empty());
        prop_assert_eq!(got, expected);
        prop_assert_eq!(r.bytes_read(), len as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn boundaries_resynchronise_after_insertion(
        kind in cdc_kind(),
        log_avg in 10u32..=12,
        seed in any::<u64>(),
        pos_frac in 0.0f64..0.5,
        insert_len in 1usize..=16,
    ) {
        let s = sizes(log_avg, 4, 8);
        let data = random_bytes(seed, 256 << 10);
        let pos = (data.len() as f64 * pos_frac) as usize;
        let inserted = random_bytes(!seed, insert_len);
        let mut edited = Vec::with_capacity(data.len() + insert_len);
        edited.extend_from_slice(&data[..pos]);
        edited.extend_from_slice(&inserted);
        edited.extend_from_slice(&data[pos..]);

        let orig = cuts(kind, s, &data);
        let new = cuts(kind, s, &edited);
        // Original boundaries after the insertion point, and the first of
        // them that the edited stream also has (shifted).
        let first_after = orig.partition_point(|&e| e <= pos);
        let realign = (first_after..orig.len())
            .find(|&i| new.binary_search(&(orig[i] + insert_len)).is_ok());
        prop_assert!(realign.is_some(), "never re-aligned");
        let a = realign.unwrap();
        // Re-alignment needs a cut point that both streams reach eligible
        // (past the minimum size, under the same normalisation mask), so
        // the delay is roughly geometric: usually one or two chunks, rarely
        // ten or more (11 was seen once with FastCDC at a 1 KiB average,
        // whose regression seed is kept). 32 leaves that tail far behind
        // and still fails a chunker that re-aligns late or never.
        prop_assert!(
            a - first_after <= 32,
            "re-aligned only after {} chunks", a - first_after
        );
        let b = new.binary_search(&(orig[a] + insert_len)).unwrap();
        let shifted: Vec<usize> = orig[a..].iter().map(|e| e + insert_len).collect();
        prop_assert_eq!(&new[b..], &shifted[..]);
        // Before the edit the boundaries are untouched, except those of the
        // chunk whose look-ahead window reached the edit.
        let keep = orig.partition_point(|&e| e + s.max <= pos);
        prop_assert_eq!(&new[..keep], &orig[..keep]);
    }
}
