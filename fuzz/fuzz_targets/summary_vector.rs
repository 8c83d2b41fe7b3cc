//! Summary Vector (Bloom filter) checkpoint decoder.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cairn_engine::index::summary_vector::SummaryVector::from_checkpoint(data);
});
