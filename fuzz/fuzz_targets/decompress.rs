//! Chunk payload decompression for every codec: never more than raw_len out.
#![no_main]
use cairn_core::CompressionCodec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let raw_len = (sel as usize) * 257;
    for codec in [
        CompressionCodec::None,
        CompressionCodec::Zstd,
        CompressionCodec::Lz4,
    ] {
        let mut out = Vec::new();
        if cairn_format::compress::decompress(codec, rest, raw_len, &mut out).is_ok() {
            assert_eq!(out.len(), raw_len);
        }
    }
});
