//! Index file decoders: header, then every page the header announces (as
//! far as the input reaches), by decode and by in-page lookup.
#![no_main]
use cairn_core::Fingerprint;
use cairn_format::index::{
    decode_index_header, decode_index_page, index_page_offset, lookup_in_page,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = decode_index_header(data) else {
        return;
    };
    for p in 0..h.page_count.min(64) {
        let off = index_page_offset(&h, p) as usize;
        let Some(page) = data.get(off..off.saturating_add(h.page_size)) else {
            break;
        };
        let _ = decode_index_page(page, &h, p);
        let fp = Fingerprint::from_slice(&vec![0xab; h.fp_width.clamp(1, 32)]);
        let _ = lookup_in_page(page, &h, p, &fp);
    }
});
