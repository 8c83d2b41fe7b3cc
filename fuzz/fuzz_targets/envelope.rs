//! Envelope framing (config, snapshot records, checkpoints).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for magic in [b"CAIRNCFG", b"CAIRNSNP", b"CAIRNBLM"] {
        let _ = cairn_format::envelope::open(magic, 2, "fuzz", data);
    }
});
