//! Directory listing decoder, every fingerprint width.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&w, rest)) = data.split_first() {
        let _ = cairn_format::dir::decode_dir(rest, (w as usize % 33).max(1));
    }
});
