//! Tree node decoder (Merkle recipe nodes), every fingerprint width.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&w, rest)) = data.split_first() {
        let _ = cairn_format::tree::decode_tree_node(rest, (w as usize % 33).max(1));
    }
});
