//! Index delta decoder: envelope, counts checked against the bytes present,
//! ordered lists; a delta that decodes re-encodes to the same bytes.
#![no_main]
use cairn_format::index_delta::{decode_index_delta, encode_index_delta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = decode_index_delta(data) {
        let again = encode_index_delta(&d).expect("a decoded delta encodes");
        assert_eq!(again, data, "one encoding per delta");
    }
});
