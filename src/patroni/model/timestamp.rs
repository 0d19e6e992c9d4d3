//! Patroni's timestamps: RFC 3339, or with a space for the `T` (as PostgreSQL prints them).

use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

/// Parses Patroni's timestamps into Unix seconds: ISO 8601 as in `/history`
/// (`2026-11-22T01:46:46.246825+00:00`) or Python's `str(datetime)` as in `/patroni`
/// (`2026-11-22 01:46:11.074677+00:00`).
pub fn parse_timestamp(text: &str) -> Option<f64> {
    let with_space = format_description!(
        version = 2,
        "[year]-[month]-[day] [hour]:[minute]:[second][optional [.[subsecond]]][offset_hour sign:mandatory]:[offset_minute]"
    );
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .or_else(|_| OffsetDateTime::parse(text, &with_space))
        .ok()?;
    // Whole microseconds (Patroni's resolution) divided once, as Python's `timedelta.total_seconds()`
    // does: the value is then the very number Patroni's own /metrics shows (nanoseconds since
    // 1970 exceed f64's 53 bits, and `nanos as f64 / 1e9` was off in the 7th decimal).
    Some((parsed.unix_timestamp_nanos() / 1_000) as f64 / 1e6)
}
