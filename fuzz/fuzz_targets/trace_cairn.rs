//! Cairn trace reader: reading events to the end (or the first error) never panics.
#![no_main]
use cairn_sim::trace::{open_reader, TraceFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = open_reader(
        std::io::Cursor::new(data.to_vec()),
        "fuzz",
        TraceFormat::Cairn,
    ) else {
        return;
    };
    for _ in 0..100_000 {
        match r.next_event() {
            Ok(Some(_)) => {}
            _ => break,
        }
    }
});
