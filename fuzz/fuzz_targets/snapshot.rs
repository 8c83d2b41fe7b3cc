//! Snapshot record decoder; a decoded record re-encodes to one that decodes equal.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = cairn_format::snapshot::decode_snapshot(data) {
        let again = cairn_format::snapshot::encode_snapshot(&r);
        assert_eq!(cairn_format::snapshot::decode_snapshot(&again).unwrap(), r);
    }
});
