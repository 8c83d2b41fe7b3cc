//! Container decoders: the whole-file decode and the metadata-only tail
//! decode must never panic, and agree on the metadata when both succeed.
#![no_main]
use cairn_format::container::{decode_container, decode_tail, TailDecode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = decode_container(data);
    let tail = decode_tail(data.len() as u64, data);
    if let (Ok(m), Ok(TailDecode::Meta(t))) = (&whole, &tail) {
        assert_eq!(m.descriptors, t.descriptors);
    }
    if let Ok(m) = whole {
        for d in &m.descriptors {
            let _ = cairn_format::container::stored_chunk(data, &m, d);
        }
    }
});
