//! The values the policy and size options accept, checked by clap while it
//! parses the command line: a misspelled name or size is a usage error
//! (exit 2) naming the valid values, before any password is asked, key
//! derived or store contacted. Each list holds the names the engine's own
//! parser accepts (the tests below keep them in step); the defaults stay
//! written once, on the options.

use clap::builder::PossibleValuesParser;

/// `--chunker` (`cairn_core::ChunkerConfig::from_name`).
pub const CHUNKERS: [&str; 4] = ["fastcdc", "rabin", "regression", "fixed"];
/// `--fingerprint` (`cairn_core::FingerprintAlgo::from_name`).
pub const FINGERPRINTS: [&str; 3] = ["blake3", "sha256", "sha1"];
/// `--compression` (`cairn_core::CompressionCodec::from_name`).
pub const COMPRESSIONS: [&str; 3] = ["zstd", "lz4", "none"];
/// `--index` (`cairn_engine::config::IndexKind::parse`).
pub const INDEXES: [&str; 2] = ["paged", "frugal"];
/// `--lookup` (`cairn_engine::config::LookupStrategy::parse`).
pub const LOOKUPS: [&str; 3] = ["eager", "lazy", "auto"];
/// `--lookup-device`: the device classes of a real repository's index.
pub const LOOKUP_DEVICES: [&str; 4] = ["hdd", "ssd", "optane", "pm"];
/// `backup --dedup` (`cairn_engine::DedupMode`).
pub const DEDUP_MODES: [&str; 2] = ["inline", "deferred"];
/// `--restore-policy` (`cairn_engine::read::PolicyKind`).
pub const RESTORE_POLICIES: [&str; 5] = ["container-lru", "chunk-lru", "faa", "alacc", "belady"];
/// `--collector` (`cairn_engine::gc::Collector::parse`).
pub const COLLECTORS: [&str; 3] = ["lgc", "pgc", "pgc+"];
/// `--encryption` (`cairn_crypto::Algorithm`, or none).
pub const ENCRYPTIONS: [&str; 3] = ["aes-256-gcm", "chacha20poly1305", "none"];

/// A parser accepting exactly `names`.
pub fn one_of(names: &'static [&'static str]) -> PossibleValuesParser {
    PossibleValuesParser::new(names)
}

/// A size such as `8KiB`, `4MiB` or `4096` that fits 32 bits, kept as
/// written (the commands convert it where they use it).
pub fn size32(s: &str) -> Result<String, String> {
    crate::output::parse_size(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

/// A size such as `64MiB` or `1GiB`, kept as written.
pub fn size(s: &str) -> Result<String, String> {
    crate::output::parse_size_u64(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_one_the_engine_accepts() {
        for n in CHUNKERS {
            cairn_core::ChunkerConfig::from_name(n, 8192).unwrap();
        }
        for n in FINGERPRINTS {
            cairn_core::FingerprintAlgo::from_name(n).unwrap();
        }
        for n in COMPRESSIONS {
            cairn_core::CompressionCodec::from_name(n).unwrap();
        }
        for n in INDEXES {
            cairn_engine::config::IndexKind::parse(n).unwrap();
        }
        for n in LOOKUPS {
            cairn_engine::config::LookupStrategy::parse(n).unwrap();
        }
        for n in LOOKUP_DEVICES {
            assert!(cairn_sim::device::DeviceClass::by_name(n).is_some(), "{n}");
        }
        for n in DEDUP_MODES {
            n.parse::<cairn_engine::DedupMode>().unwrap();
        }
        for n in RESTORE_POLICIES {
            n.parse::<cairn_engine::read::PolicyKind>().unwrap();
        }
        for n in COLLECTORS {
            cairn_engine::gc::Collector::parse(n).unwrap();
        }
        for n in ENCRYPTIONS.iter().filter(|n| **n != "none") {
            n.parse::<cairn_crypto::Algorithm>().unwrap();
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(size32("8KiB").unwrap(), "8KiB");
        assert!(size32("8 bananas").is_err());
        assert!(size("64MiB").is_ok());
    }
}
