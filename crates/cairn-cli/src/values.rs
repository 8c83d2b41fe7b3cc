//! The typed values of the command line: clap parses each policy, size and
//! duration option into the engine's own type while it reads the command
//! line, so a misspelled name or size is a usage error (exit 2) naming the
//! valid values, before any password is asked, key derived or store
//! contacted, and no command body parses an option again.
//!
//! The names come from the engine types (their `NAMES` consts) and the
//! values from their own `FromStr`; the defaults the options show and use
//! are the engine's too (its `Default` impls and `DEFAULT_*` consts, through
//! `Display` or [`size_text`]). The engine crates know nothing of clap:
//! this module is the adapter.

use std::str::FromStr;

use clap::builder::{PossibleValuesParser, TypedValueParser};

/// A parser for the engine choice `T`: clap checks the name against `names`
/// (the engine's list, shown as `[possible values: ...]` in help and in the
/// error), then `T`'s own `FromStr` makes the value.
pub fn choice<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

/// A parser accepting exactly `names`, kept as text (for a choice the
/// engine keeps as a name, such as `--lookup-device`).
pub fn one_of(names: &'static [&'static str]) -> PossibleValuesParser {
    PossibleValuesParser::new(names)
}

/// A size such as `8KiB`, `4MiB` or `4096` that fits 32 bits, in bytes.
pub fn size32(s: &str) -> Result<u32, String> {
    crate::output::parse_size(s).map_err(|e| e.to_string())
}

/// A size such as `64MiB` or `1GiB`, in bytes.
pub fn size(s: &str) -> Result<u64, String> {
    crate::output::parse_size_u64(s).map_err(|e| e.to_string())
}

/// `bytes` as a size option is written: in the largest binary unit that
/// holds it exactly (`8KiB`, `64MiB`, `1GiB`), else in bytes. [`size`]
/// reads it back to `bytes`.
pub fn size_text(bytes: u64) -> String {
    const UNITS: [(u32, &str); 3] = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in UNITS {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The default of a size option, written once in the engine as a number of
/// bytes: `default_value = size_default!(ENGINE_CONST)` shows and uses it as
/// [`size_text`] writes it (clap needs a `'static` text, made once per call
/// site).
macro_rules! size_default {
    ($bytes:expr) => {{
        static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        TEXT.get_or_init(|| $crate::values::size_text(u64::from($bytes)))
            .as_str()
    }};
}
pub(crate) use size_default;

#[cfg(test)]
mod tests {
    use std::fmt::Display;

    use super::*;

    /// Every name of `names` parses as `T` through the parser the options
    /// use and displays as itself (so a default shown by `Display` is one
    /// clap accepts).
    fn round_trips<T>(names: &'static [&'static str])
    where
        T: FromStr + Display + Clone + Send + Sync + 'static,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        let cmd = clap::Command::new("t");
        for name in names {
            let v: T = choice::<T>(names)
                .parse_ref(&cmd, None, std::ffi::OsStr::new(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(v.to_string(), *name);
        }
        assert!(choice::<T>(names)
            .parse_ref(&cmd, None, std::ffi::OsStr::new("no-such-name"))
            .is_err());
    }

    #[test]
    fn every_engine_name_round_trips_through_its_parser_and_display() {
        use cairn_core::{ChunkerKind, CompressionCodec, FingerprintAlgo};
        use cairn_engine::config::{IndexKind, LookupStrategy};
        round_trips::<ChunkerKind>(&ChunkerKind::NAMES);
        round_trips::<FingerprintAlgo>(&FingerprintAlgo::NAMES);
        round_trips::<CompressionCodec>(&CompressionCodec::NAMES);
        round_trips::<IndexKind>(&IndexKind::NAMES);
        round_trips::<LookupStrategy>(&LookupStrategy::NAMES);
        round_trips::<cairn_engine::DedupMode>(&cairn_engine::DedupMode::NAMES);
        round_trips::<cairn_engine::read::PolicyKind>(&cairn_engine::read::PolicyKind::NAMES);
        round_trips::<cairn_engine::restore::Overwrite>(&cairn_engine::restore::Overwrite::NAMES);
        round_trips::<cairn_engine::gc::Collector>(&cairn_engine::gc::Collector::NAMES);
        round_trips::<cairn_crypto::Encryption>(&cairn_crypto::Encryption::NAMES);
        round_trips::<cairn_sim::trace::TraceFormat>(&cairn_sim::trace::TraceFormat::NAMES);
        round_trips::<cairn_sim::workload::WorkloadKind>(&cairn_sim::workload::WorkloadKind::NAMES);
        round_trips::<cairn_sim::experiment::Experiment>(&cairn_sim::experiment::Experiment::NAMES);
        round_trips::<cairn_sim::experiment::PlotFormat>(&cairn_sim::experiment::PlotFormat::NAMES);
        for n in cairn_sim::device::DeviceClass::BUILTIN_NAMES {
            assert!(cairn_sim::device::DeviceClass::by_name(n).is_some(), "{n}");
        }
    }

    #[test]
    fn every_engine_default_is_one_of_its_names() {
        let defaults = [
            (
                cairn_core::ChunkerKind::default().to_string(),
                &cairn_core::ChunkerKind::NAMES[..],
            ),
            (
                cairn_engine::read::PolicyKind::default().to_string(),
                &cairn_engine::read::PolicyKind::NAMES[..],
            ),
            (
                cairn_engine::gc::Collector::default().to_string(),
                &cairn_engine::gc::Collector::NAMES[..],
            ),
            (
                cairn_crypto::Encryption::default().to_string(),
                &cairn_crypto::Encryption::NAMES[..],
            ),
            (
                cairn_sim::experiment::PlotFormat::default().to_string(),
                &cairn_sim::experiment::PlotFormat::NAMES[..],
            ),
        ];
        for (default, names) in defaults {
            assert!(names.contains(&default.as_str()), "{default}");
        }
    }

    #[test]
    fn sizes_parse_and_defaults_read_back() {
        assert_eq!(size32("8KiB").unwrap(), 8192);
        assert!(size32("8 bananas").is_err());
        assert!(size32("8GiB").is_err());
        assert_eq!(size("64MiB").unwrap(), 64 << 20);
        for bytes in [8192, 4 << 20, 64 << 20, 1 << 30, 3 << 30, 1000, 0] {
            assert_eq!(size(&size_text(bytes)).unwrap(), bytes);
        }
        assert_eq!(size_text(64 << 20), "64MiB");
        assert_eq!(size_text(1 << 30), "1GiB");
        assert_eq!(size_default!(8192u32), "8KiB");
    }
}
