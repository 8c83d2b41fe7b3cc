//! Tests of the many-writers replay: hand-computed rounds, the invariants of
//! the module doc on a real workload and on random streams, and the stream
//! cutting rules.

use proptest::prelude::{prop_assert, prop_assert_eq, proptest, ProptestConfig};

use cairn_core::{Fingerprint, TraceChunk};

use super::*;
use crate::workload::{self, Workload};

fn fp(i: u64) -> Fingerprint {
    Fingerprint::from_slice(&(i + 1).to_le_bytes())
}

/// Chunk `i` of size `100 + i` (compressed: half).
fn chunk(i: u64) -> TraceChunk {
    let size = 100 + i as u32;
    TraceChunk {
        fp: fp(i),
        size,
        stored_size: size / 2,
    }
}

fn stream(ids: &[u64]) -> Vec<TraceChunk> {
    ids.iter().map(|&i| chunk(i)).collect()
}

fn replay(writers: usize, streams: &[Vec<TraceChunk>]) -> WritersReport {
    let mut r = Replay::new(writers).unwrap();
    for s in streams {
        r.push_stream(s);
    }
    r.finish()
}

fn bytes(ids: &[u64]) -> u64 {
    ids.iter().map(|&i| 100 + i).sum()
}

/// The invariants of the module doc.
fn check(r: &WritersReport) {
    let sum = |f: fn(&WriterRow) -> u64| r.per_writer.iter().map(f).sum::<u64>();
    assert_eq!(r.logical_bytes, sum(|w| w.logical_bytes));
    assert_eq!(r.chunks, sum(|w| w.chunks));
    assert_eq!(r.streams, sum(|w| w.streams));
    assert_eq!(
        r.logical_bytes,
        r.per_round.iter().map(|x| x.logical_bytes).sum::<u64>()
    );
    assert_eq!(r.before_reconciliation.bytes, sum(|w| w.stored_bytes));
    assert_eq!(r.before_reconciliation.chunks, sum(|w| w.stored_chunks));
    assert_eq!(r.after_reconciliation.bytes, sum(|w| w.kept_bytes));
    assert_eq!(r.after_reconciliation.chunks, sum(|w| w.kept_chunks));
    let b = &r.before_reconciliation;
    let a = &r.after_reconciliation;
    assert_eq!(b.bytes, a.bytes + r.lost_bytes);
    assert_eq!(b.chunks, a.chunks + r.lost_chunks);
    assert_eq!(
        b.compressed_bytes,
        a.compressed_bytes + r.lost_compressed_bytes
    );
    assert_eq!(*a, r.one_after_another);
    assert_eq!(
        r.lost_bytes,
        r.per_round.iter().map(|x| x.lost_bytes).sum::<u64>()
    );
    assert_eq!(
        r.one_after_another.bytes,
        r.per_round
            .iter()
            .map(|x| x.one_after_another_bytes)
            .sum::<u64>()
    );
    assert_eq!(r.rounds, r.streams.div_ceil(r.writers as u64));
}

#[test]
fn one_writer_loses_nothing() {
    let streams = vec![stream(&[1, 2, 3, 1]), stream(&[2, 3, 4]), stream(&[5, 4])];
    let r = replay(1, &streams);
    check(&r);
    assert_eq!(r.rounds, 3);
    assert_eq!(r.lost_chunks, 0);
    assert_eq!(r.lost_bytes, 0);
    assert_eq!(r.max_copies, 1);
    assert_eq!(r.before_reconciliation.chunks, 5);
    assert_eq!(r.before_reconciliation.bytes, bytes(&[1, 2, 3, 4, 5]));
    assert_eq!(r.logical_bytes, bytes(&[1, 2, 3, 1, 2, 3, 4, 5, 4]));
}

#[test]
fn identical_streams_store_each_new_chunk_once_per_writer() {
    for n in [2usize, 3, 8] {
        // Round 0: every writer backs up [1, 2, 3, 1]; round 1: [2, 3, 4, 5].
        let mut streams = vec![stream(&[1, 2, 3, 1]); n];
        streams.extend(vec![stream(&[2, 3, 4, 5]); n]);
        let r = replay(n, &streams);
        check(&r);
        assert_eq!(r.rounds, 2);
        let n64 = n as u64;
        assert_eq!(r.per_round[0].stored_bytes, n64 * bytes(&[1, 2, 3]));
        assert_eq!(r.per_round[1].stored_bytes, n64 * bytes(&[4, 5]));
        assert_eq!(r.before_reconciliation.chunks, n64 * 5);
        assert_eq!(r.before_reconciliation.bytes, n64 * bytes(&[1, 2, 3, 4, 5]));
        assert_eq!(r.after_reconciliation.chunks, 5);
        assert_eq!(r.after_reconciliation.bytes, bytes(&[1, 2, 3, 4, 5]));
        assert_eq!(r.lost_chunks, (n64 - 1) * 5);
        assert_eq!(r.max_copies, n64);
        // Every writer stored everything; the last one's copies are kept.
        for w in &r.per_writer {
            assert_eq!(w.stored_chunks, 5);
            let kept = if w.writer == n - 1 { 5 } else { 0 };
            assert_eq!(w.kept_chunks, kept);
        }
        assert_eq!(r.logical_bytes, n64 * bytes(&[1, 2, 3, 1, 2, 3, 4, 5]));
    }
}

#[test]
fn rounds_see_only_the_repository_as_of_their_start() {
    // Two writers: round 0 = [1, 2] and [2, 3]; round 1 = [3, 4] and [4].
    let streams = vec![
        stream(&[1, 2]),
        stream(&[2, 3]),
        stream(&[3, 4]),
        stream(&[4]),
    ];
    let r = replay(2, &streams);
    check(&r);
    assert_eq!(r.per_round[0].lost_bytes, bytes(&[2]));
    assert_eq!(r.per_round[1].lost_bytes, bytes(&[4]));
    assert_eq!(r.lost_chunks, 2);
    assert_eq!(r.after_reconciliation.bytes, bytes(&[1, 2, 3, 4]));
    assert_eq!(r.per_writer[0].stored_chunks, 3); // 1, 2, 4
    assert_eq!(r.per_writer[1].stored_chunks, 3); // 2, 3, 4
    assert_eq!(r.per_writer[1].kept_chunks, 3); // the newest copies of 2 and 4
    assert_eq!(r.per_writer[0].kept_chunks, 1);
}

#[test]
fn a_partial_last_round_and_no_streams() {
    let r = replay(4, &[stream(&[1]), stream(&[1, 2])]);
    check(&r);
    assert_eq!((r.rounds, r.lost_chunks), (1, 1));
    assert_eq!(r.per_writer[3].streams, 0);
    let r = replay(3, &[]);
    check(&r);
    assert_eq!(
        (
            r.rounds,
            r.logical_bytes,
            r.before_reconciliation.dedup_ratio
        ),
        (0, 0, 0.0)
    );
    assert!(Replay::new(0).is_err());
}

#[test]
fn a_size_conflict_counts_at_the_first_size() {
    let mut other = chunk(1);
    other.size = 7;
    let r = replay(2, &[stream(&[1]), vec![other]]);
    check(&r);
    assert_eq!(r.before_reconciliation.bytes, 2 * 101);
    assert_eq!(r.logical_bytes, 101 + 7);
}

fn generations(w: &dyn Workload, unit: Unit) -> Vec<Stream> {
    (0..w.generations())
        .flat_map(|g| split_streams(&mut *w.generation(g), &format!("gen{g}"), unit).unwrap())
        .collect()
}

#[test]
fn workload_streams_and_the_invariants() {
    let params: Vec<(String, String)> = [
        ("streams", "4"),
        ("generations", "6"),
        ("generation_bytes", "2MiB"),
        ("files_per_stream", "3"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let w = workload::from_name("ddfs", &params).unwrap();
    let top = generations(&*w, Unit::Top);
    assert_eq!(top.len(), 24);
    assert_eq!(top[1].name, "gen0/stream-001");
    assert_eq!(generations(&*w, Unit::File).len(), 72);
    let input = generations(&*w, Unit::Input);
    assert_eq!(input.len(), 6);
    let logical = |s: &[Stream]| -> u64 {
        s.iter()
            .flat_map(|s| &s.chunks)
            .map(|c| c.size as u64)
            .sum()
    };
    assert_eq!(logical(&top), logical(&input));
    let run = |n: usize, s: &[Stream]| {
        let mut r = Replay::new(n).unwrap();
        for s in s {
            r.push_stream(&s.chunks);
        }
        let r = r.finish();
        check(&r);
        r
    };
    // DDFS streams share no data: writers holding one stream each (N = 4,
    // round = generation) lose nothing.
    let by_stream = run(4, &top);
    assert_eq!(by_stream.lost_bytes, 0);
    // Successive generations in one round do: their new data overlaps.
    let by_generation = run(3, &input);
    assert!(by_generation.lost_bytes > 0);
    assert_eq!(
        by_generation.after_reconciliation,
        run(1, &input).before_reconciliation
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn invariants_hold_on_random_streams(
        writers in 1usize..6,
        streams in proptest::collection::vec(proptest::collection::vec(0u64..40, 0..30), 0..20),
    ) {
        let streams: Vec<Vec<TraceChunk>> = streams.iter().map(|s| stream(s)).collect();
        let r = replay(writers, &streams);
        check(&r);
        let one = replay(1, &streams);
        prop_assert_eq!(one.lost_bytes, 0);
        prop_assert_eq!(one.before_reconciliation, r.after_reconciliation);
        prop_assert!(r.before_reconciliation.bytes >= r.after_reconciliation.bytes);
    }
}
