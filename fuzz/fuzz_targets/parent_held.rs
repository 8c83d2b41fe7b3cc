//! The parent check's record (a host's local note): a note the decoder
//! accepts has exactly one encoding, the one it was read from.
#![no_main]
use cairn_format::parent_held::{decode_parent_held, encode_parent_held};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = decode_parent_held(data) {
        let again = encode_parent_held(entries.iter().map(|(f, ids)| (f, &ids[..])));
        assert_eq!(again, data);
    }
});
