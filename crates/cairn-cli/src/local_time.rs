//! Times for people: the local time zone (the `TZ` variable, else the
//! system's), or UTC with the global `--utc`; the zone is always shown
//! (`2026-11-25 12:40:02 CET`). JSON keeps UTC RFC 3339
//! ([`crate::output::time`]). The zone database is `jiff`'s (the system's
//! tzdb; a POSIX `TZ` string such as `XYZ-3` needs none).

use std::sync::atomic::{AtomicBool, Ordering};

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Set once by `main` from `--utc`, before any output.
static IN_UTC: AtomicBool = AtomicBool::new(false);

/// Show human times in UTC instead of the local zone.
pub fn show_in_utc(yes: bool) {
    IN_UTC.store(yes, Ordering::Relaxed);
}

/// The zone human times are shown in.
fn zone() -> TimeZone {
    if IN_UTC.load(Ordering::Relaxed) {
        TimeZone::UTC
    } else {
        // An unreadable zone setting falls back to UTC (shown as such).
        TimeZone::try_system().unwrap_or(TimeZone::UTC)
    }
}

/// `unix_ns` as a person reads it: date, time to the second, and the zone
/// (its abbreviation, or its offset where it has none). A time outside
/// what the calendar code handles falls back to the UTC form.
pub fn human_time(unix_ns: i64) -> String {
    match Timestamp::from_nanosecond(i128::from(unix_ns)) {
        Ok(ts) => ts
            .to_zoned(zone())
            .strftime("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => crate::output::time(unix_ns),
    }
}

/// The width of [`human_time`]'s output for table columns (zone names vary;
/// this fits the usual three to five letters).
pub const HUMAN_TIME_WIDTH: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_is_shown_with_its_name() {
        show_in_utc(true);
        assert_eq!(human_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            human_time(951_782_400_000_000_000),
            "2000-02-29 00:00:00 UTC"
        );
    }
}
