//! Frugal index chunk-log segment decoders: the whole-segment decoder
//! (checksum, header, size) and the header alone (read before ranged reads).
#![no_main]
use cairn_format::frugal_log::{decode_segment, decode_segment_header, encode_segment};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_segment_header("fuzz", data);
    if let Ok((h, records)) = decode_segment("fuzz", data) {
        assert_eq!(encode_segment(h.width, h.first, &records), data);
    }
});
