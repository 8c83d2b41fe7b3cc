//! Repository config decoder; a decoded config re-encodes to one that decodes equal.
#![no_main]
use cairn_engine::RepoConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = RepoConfig::decode(data) {
        assert_eq!(RepoConfig::decode(&c.encode()).unwrap(), c);
    }
});
