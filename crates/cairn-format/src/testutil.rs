//! Test support shared by the decoders' property tests (this crate's, and
//! other crates' with the `test-support` feature): mutations of valid
//! encodings and a fixed-seed runner that counts how many mutated cases
//! still decoded.
//!
//! Uniformly random bytes fail at a decoder's magic number, so a property
//! test fed only with them never reaches its round-trip or canonical
//! assertion. [`check_mutations`] instead starts from valid encodings (a
//! strategy of generated values put through the encoder), applies one
//! [`Mutation`] to each (or none, so the valid path is part of every run),
//! optionally repairs the checksums the mutation broke so that structural
//! checks behind them are reached, and hands the bytes to a check that
//! decodes them and asserts the decoder's contract when they decode. It
//! then asserts that a minimum share of the cases decoded: the contract's
//! assertions provably ran. The run uses a fixed seed, so the share is the
//! same on every run and a threshold below it cannot flake.

use std::cell::Cell;
use std::fmt::Debug;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// A position as a fraction of an encoding's length, so that one mutation
/// applies to an encoding of any length.
#[derive(Clone, Copy, Debug)]
pub struct Pos(pub u32);

impl Pos {
    /// The offset in an encoding of `len` bytes (`len > 0`): below `len`.
    fn of(self, len: usize) -> usize {
        ((len as u64 * u64::from(self.0)) >> 32) as usize
    }
}

/// One change to an encoding.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// The valid encoding as it is.
    Keep,
    /// Flips one bit.
    Flip { at: Pos, bit: u8 },
    /// Overwrites one byte.
    Set { at: Pos, byte: u8 },
    /// Keeps only a prefix.
    Truncate { at: Pos },
    /// Appends bytes.
    Extend { tail: Vec<u8> },
    /// Removes up to `len` bytes from `at`.
    Delete { at: Pos, len: usize },
    /// Inserts bytes at `at`.
    Insert { at: Pos, bytes: Vec<u8> },
    /// Copies up to `len` bytes from `from` over the bytes at `to` (a
    /// splice of the encoding with itself: plausible fields in wrong places).
    Splice { from: Pos, to: Pos, len: usize },
    /// Overwrites a little-endian field of `width` bytes at `at` with a
    /// value a length or count field finds hard: 0, 1, the encoding's own
    /// length, all ones, or an arbitrary value.
    Field {
        at: Pos,
        width: usize,
        value: FieldValue,
    },
}

/// The value [`Mutation::Field`] writes.
#[derive(Clone, Debug)]
pub enum FieldValue {
    Zero,
    One,
    EncodingLen,
    AllOnes,
    Any(u64),
}

fn position() -> impl Strategy<Value = Pos> {
    any::<u32>().prop_map(Pos)
}

/// Mutations, the unchanged encoding among them (one case in eight).
pub fn mutation() -> impl Strategy<Value = Mutation> {
    let small_bytes = || proptest::collection::vec(any::<u8>(), 1..16);
    let field_value = prop_oneof![
        Just(FieldValue::Zero),
        Just(FieldValue::One),
        Just(FieldValue::EncodingLen),
        Just(FieldValue::AllOnes),
        any::<u64>().prop_map(FieldValue::Any),
    ];
    prop_oneof![
        2 => Just(Mutation::Keep),
        2 => (position(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        2 => (position(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        1 => position().prop_map(|at| Mutation::Truncate { at }),
        1 => small_bytes().prop_map(|tail| Mutation::Extend { tail }),
        1 => (position(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => (position(), small_bytes()).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (position(), position(), 1usize..40)
            .prop_map(|(from, to, len)| Mutation::Splice { from, to, len }),
        4 => (position(), prop_oneof![Just(1usize), Just(2), Just(4), Just(8)], field_value)
            .prop_map(|(at, width, value)| Mutation::Field { at, width, value }),
    ]
}

impl Mutation {
    /// `valid` with this mutation applied.
    pub fn apply(&self, valid: &[u8]) -> Vec<u8> {
        let mut b = valid.to_vec();
        let n = b.len();
        // An index into the encoding, or None when it is empty.
        let pos = |at: &Pos| (n > 0).then(|| at.of(n));
        match self {
            Mutation::Keep => {}
            Mutation::Flip { at, bit } => {
                if let Some(i) = pos(at) {
                    b[i] ^= 1 << bit;
                }
            }
            Mutation::Set { at, byte } => {
                if let Some(i) = pos(at) {
                    b[i] = *byte;
                }
            }
            Mutation::Truncate { at } => b.truncate(pos(at).unwrap_or(0)),
            Mutation::Extend { tail } => b.extend_from_slice(tail),
            Mutation::Delete { at, len } => {
                if let Some(i) = pos(at) {
                    b.drain(i..(i + len).min(n));
                }
            }
            Mutation::Insert { at, bytes } => {
                let i = pos(at).unwrap_or(0);
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Splice { from, to, len } => {
                if let (Some(f), Some(t)) = (pos(from), pos(to)) {
                    let len = (*len).min(n - f).min(n - t);
                    b.copy_within(f..f + len, t);
                }
            }
            Mutation::Field { at, width, value } => {
                if let Some(i) = pos(at) {
                    let v = match value {
                        FieldValue::Zero => 0,
                        FieldValue::One => 1,
                        FieldValue::EncodingLen => n as u64,
                        FieldValue::AllOnes => u64::MAX,
                        FieldValue::Any(v) => *v,
                    };
                    let end = (i + width).min(n);
                    b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
                }
            }
        }
        b
    }
}

/// What [`check_mutations`] runs and demands.
pub struct MutationRun {
    /// Names the decoder in failure messages.
    pub name: &'static str,
    pub cases: u32,
    /// Minimum share, in percent, of the cases that must decode.
    pub min_decoded_pct: u32,
}

/// Runs `run.cases` fixed-seed cases: a valid encoding from `valid` (with
/// the context the decoder needs, e.g. a fingerprint width), one
/// [`mutation`], then in half of the cases `reseal` (which repairs the
/// checksums over the mutated bytes; pass a no-op when there are none),
/// then `check`, which decodes and returns `Ok(true)` when the bytes
/// decoded (after asserting the decoder's contract on the result),
/// `Ok(false)` when they were refused. Fails on the first failed assertion
/// and when fewer than `run.min_decoded_pct` percent of the cases decoded.
pub fn check_mutations<C: Debug + Clone>(
    run: MutationRun,
    valid: impl Strategy<Value = (C, Vec<u8>)>,
    reseal: impl Fn(&mut [u8]),
    check: impl Fn(&C, &[u8]) -> Result<bool, TestCaseError>,
) {
    let config = Config {
        cases: run.cases,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let (tried, decoded, mutated_decoded) = (Cell::new(0u32), Cell::new(0u32), Cell::new(0u32));
    let result = runner.run(
        &(valid, mutation(), any::<bool>()),
        |((ctx, bytes), m, reseal_it)| {
            let mut b = m.apply(&bytes);
            if reseal_it {
                reseal(&mut b);
            }
            tried.set(tried.get() + 1);
            if check(&ctx, &b)? {
                decoded.set(decoded.get() + 1);
                if b != bytes {
                    mutated_decoded.set(mutated_decoded.get() + 1);
                }
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{}: {e}", run.name);
    }
    let (tried, decoded) = (tried.get(), decoded.get());
    eprintln!(
        "{}: {decoded} of {tried} cases decoded ({} of them mutated)",
        run.name,
        mutated_decoded.get()
    );
    assert!(
        u64::from(decoded) * 100 >= u64::from(run.min_decoded_pct) * u64::from(tried),
        "{}: only {decoded} of {tried} cases decoded (at least {}% must, so that the \
         contract's assertions run)",
        run.name,
        run.min_decoded_pct
    );
}

/// Repairs an envelope (`magic | version | payload_len | payload | crc32c`)
/// after a mutation: the length field says what the bytes hold and the
/// checksum matches, so the payload's own checks are reached.
pub fn reseal_envelope(b: &mut [u8]) {
    use crate::envelope::{ENVELOPE_HEADER_LEN, ENVELOPE_OVERHEAD};
    if b.len() < ENVELOPE_OVERHEAD {
        return;
    }
    let payload_len = (b.len() - ENVELOPE_OVERHEAD) as u64;
    b[ENVELOPE_HEADER_LEN - 8..ENVELOPE_HEADER_LEN].copy_from_slice(&payload_len.to_le_bytes());
    reseal_trailing_crc(b);
}

/// Rewrites the last four bytes as the crc32c of the bytes before them.
pub fn reseal_trailing_crc(b: &mut [u8]) {
    if b.len() < 4 {
        return;
    }
    let n = b.len() - 4;
    let crc = crc32c::crc32c(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;

    #[test]
    fn mutations_stay_in_bounds_on_short_encodings() {
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        for len in 0..6 {
            let valid: Vec<u8> = (0..len).collect();
            for _ in 0..200 {
                let m = mutation().new_tree(&mut runner).unwrap().current();
                let _ = m.apply(&valid);
            }
        }
    }

    #[test]
    fn field_writes_little_endian_and_clips_at_the_end() {
        let at = Pos(0);
        let m = Mutation::Field {
            at,
            width: 4,
            value: FieldValue::EncodingLen,
        };
        assert_eq!(m.apply(&[9; 6]), vec![6, 0, 0, 0, 9, 9]);
        let m = Mutation::Field {
            at: Pos(u32::MAX),
            width: 8,
            value: FieldValue::AllOnes,
        };
        assert_eq!(m.apply(&[0; 3]), vec![0, 0, 0xff]);
    }
}
