//! `GET /config`: the cluster's dynamic configuration, as Patroni keeps it in the DCS.
//!
//! Why the values are *effective* rather than raw: `/config` holds only the keys someone set
//! (`patronictl edit-config`, the bootstrap `dcs:` section); Patroni fills in the rest from
//! its defaults. An operator asking "what is `maximum_lag_on_failover` right now?" wants the
//! value Patroni acts on, so absent keys take Patroni's defaults here, and values are read
//! the way Patroni reads them (`parse_bool` accepts `on`/`yes`/`1`, `synchronous_mode` may be
//! the string `quorum` from 4.0, integers may be strings). A document that is not a JSON
//! object is a decode error; a single unreadable value falls back to the default, as it does
//! in Patroni (`GlobalConfig.get_int`).

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::PatroniError;

/// Patroni's defaults (`patroni/config.py`, `patroni/global_config.py`, 3.x and 4.x alike).
const DEFAULT_TTL: u64 = 30;
const DEFAULT_LOOP_WAIT: u64 = 10;
const DEFAULT_RETRY_TIMEOUT: u64 = 10;
const DEFAULT_MAXIMUM_LAG_ON_FAILOVER: u64 = 1_048_576;
const DEFAULT_SYNCHRONOUS_NODE_COUNT: u64 = 1;

/// How a primary replicates synchronously (`synchronous_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynchronousMode {
    /// Asynchronous replication (the default).
    Off,
    /// `synchronous_mode: true`: `synchronous_node_count` named synchronous standbys.
    On,
    /// `synchronous_mode: quorum` (Patroni 4.0+): quorum commit, `ANY n (...)`.
    Quorum,
}

impl SynchronousMode {
    pub const ALL: [SynchronousMode; 3] = [
        SynchronousMode::Off,
        SynchronousMode::On,
        SynchronousMode::Quorum,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SynchronousMode::Off => "off",
            SynchronousMode::On => "on",
            SynchronousMode::Quorum => "quorum",
        }
    }

    /// Whether only synchronous (or quorum) standbys may be promoted automatically.
    pub fn is_synchronous(self) -> bool {
        self != SynchronousMode::Off
    }
}

/// The effective dynamic configuration of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicConfig {
    pub ttl_seconds: u64,
    pub loop_wait_seconds: u64,
    pub retry_timeout_seconds: u64,
    /// A replica further behind the leader than this (bytes) is not promoted.
    pub maximum_lag_on_failover_bytes: u64,
    pub synchronous_mode: SynchronousMode,
    pub synchronous_mode_strict: bool,
    pub synchronous_node_count: u64,
    /// With failsafe on, a leader that loses the DCS stays primary while it reaches every
    /// member over REST (Patroni 3.0+).
    pub failsafe_mode: bool,
    /// With it on, a replica behind the cluster's timeline is not promoted.
    pub check_timeline: bool,
}

impl Default for DynamicConfig {
    fn default() -> DynamicConfig {
        DynamicConfig {
            ttl_seconds: DEFAULT_TTL,
            loop_wait_seconds: DEFAULT_LOOP_WAIT,
            retry_timeout_seconds: DEFAULT_RETRY_TIMEOUT,
            maximum_lag_on_failover_bytes: DEFAULT_MAXIMUM_LAG_ON_FAILOVER,
            synchronous_mode: SynchronousMode::Off,
            synchronous_mode_strict: false,
            synchronous_node_count: DEFAULT_SYNCHRONOUS_NODE_COUNT,
            failsafe_mode: false,
            check_timeline: false,
        }
    }
}

/// Parses `GET /config` into the effective values.
///
/// # Errors
/// [`PatroniError::Json`] when the body is not a JSON object ("expected a JSON object").
pub fn parse_dynamic_config(body: &[u8]) -> Result<DynamicConfig, PatroniError> {
    let settings: Settings = serde_json::from_slice(body)?;
    let defaults = DynamicConfig::default();
    let int = |key: &str, default: u64| settings.get(key).and_then(config_int).unwrap_or(default);
    let flag = |key: &str| settings.get(key).and_then(parse_bool).unwrap_or(false);
    Ok(DynamicConfig {
        ttl_seconds: int("ttl", defaults.ttl_seconds),
        loop_wait_seconds: int("loop_wait", defaults.loop_wait_seconds),
        retry_timeout_seconds: int("retry_timeout", defaults.retry_timeout_seconds),
        maximum_lag_on_failover_bytes: int(
            "maximum_lag_on_failover",
            defaults.maximum_lag_on_failover_bytes,
        ),
        synchronous_mode: synchronous_mode(settings.get("synchronous_mode")),
        synchronous_mode_strict: flag("synchronous_mode_strict"),
        synchronous_node_count: int("synchronous_node_count", defaults.synchronous_node_count)
            .max(1),
        failsafe_mode: flag("failsafe_mode"),
        check_timeline: flag("check_timeline"),
    })
}

/// The top-level keys of `/config` read here.
const KEYS: [&str; 9] = [
    "ttl",
    "loop_wait",
    "retry_timeout",
    "maximum_lag_on_failover",
    "synchronous_mode",
    "synchronous_mode_strict",
    "synchronous_node_count",
    "failsafe_mode",
    "check_timeline",
];

/// The values of [`KEYS`] in `/config`, as JSON, each the last one written under its key (as
/// Python's `json` keeps it); `None` when absent.
///
/// Read key by key rather than into a `serde_json::Value` (or a derived struct): the document
/// is mostly `postgresql.parameters`, which is skipped unread instead of built into maps and
/// strings that are dropped at once (about 40 allocations per read, in every poll of every
/// cluster that reads it), and a key written twice keeps its last value instead of failing
/// as a derived struct's duplicate field does. Anything but an object is refused.
struct Settings([Option<Value>; KEYS.len()]);

impl Settings {
    fn get(&self, key: &str) -> Option<&Value> {
        let index = KEYS.iter().position(|known| *known == key)?;
        self.0[index].as_ref()
    }
}

/// A key of `/config` as its index in [`KEYS`] (`None`: another key), matched where it lies
/// in the body: no key is copied (serde's `Cow<str>` would copy every one).
struct Key(Option<usize>);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(Key(KEYS.iter().position(|known| *known == key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Settings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Settings, D::Error> {
        struct SettingsVisitor;
        impl<'de> Visitor<'de> for SettingsVisitor {
            type Value = Settings;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Settings, A::Error> {
                let mut values: [Option<Value>; KEYS.len()] = Default::default();
                while let Some(Key(index)) = map.next_key()? {
                    match index {
                        Some(index) => values[index] = Some(map.next_value()?),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Settings(values))
            }
        }
        deserializer.deserialize_map(SettingsVisitor)
    }
}

/// `quorum` (any case) is quorum commit; anything `parse_bool` calls true is on.
fn synchronous_mode(value: Option<&Value>) -> SynchronousMode {
    match value {
        Some(Value::String(text)) if text.eq_ignore_ascii_case("quorum") => SynchronousMode::Quorum,
        Some(value) if parse_bool(value) == Some(true) => SynchronousMode::On,
        _ => SynchronousMode::Off,
    }
}

/// An integer as Patroni's `parse_int` reads one: a JSON number or a numeric string; `None`
/// for anything else (negative values included: none of these settings can be negative).
fn config_int(value: &Value) -> Option<u64> {
    match value {
        Value::Number(number) => number
            .as_u64()
            .or_else(|| number.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Patroni's `parse_bool`: `str(value).lower()` in `on/true/yes/1` or `off/false/no/0`.
fn parse_bool(value: &Value) -> Option<bool> {
    let text = match value {
        Value::Bool(flag) => return Some(*flag),
        Value::String(text) => text.to_ascii_lowercase(),
        Value::Number(number) => number.to_string(),
        _ => return None,
    };
    match text.as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn captured_config_4_1_5() {
        let config = parse_dynamic_config(&fixture("patroni-4.1.5/01-config.json")).unwrap();
        assert_eq!(
            config,
            DynamicConfig {
                ttl_seconds: 30,
                loop_wait_seconds: 10,
                retry_timeout_seconds: 10,
                maximum_lag_on_failover_bytes: 1_048_576,
                synchronous_mode: SynchronousMode::On,
                synchronous_mode_strict: false,
                synchronous_node_count: 2,
                failsafe_mode: false,
                check_timeline: false,
            }
        );
    }

    #[test]
    fn absent_keys_take_patronis_defaults() {
        assert_eq!(
            parse_dynamic_config(b"{}").unwrap(),
            DynamicConfig::default()
        );
    }

    #[test]
    fn values_are_read_as_patroni_reads_them() {
        let config = parse_dynamic_config(
            br#"{"synchronous_mode": "Quorum", "failsafe_mode": "on", "check_timeline": 1,
                 "maximum_lag_on_failover": "2048", "ttl": "bad", "synchronous_node_count": 0,
                 "synchronous_mode_strict": "yes"}"#,
        )
        .unwrap();
        assert_eq!(config.synchronous_mode, SynchronousMode::Quorum);
        assert!(config.failsafe_mode);
        assert!(config.check_timeline);
        assert!(config.synchronous_mode_strict);
        assert_eq!(config.maximum_lag_on_failover_bytes, 2048);
        assert_eq!(
            config.ttl_seconds, 30,
            "an unreadable value keeps the default"
        );
        assert_eq!(
            config.synchronous_node_count, 1,
            "Patroni never uses fewer than 1"
        );
        let off = parse_dynamic_config(br#"{"synchronous_mode": "off"}"#).unwrap();
        assert_eq!(off.synchronous_mode, SynchronousMode::Off);
    }

    #[test]
    fn the_last_of_a_key_written_twice_counts_and_other_keys_are_skipped_unread() {
        let config = parse_dynamic_config(
            br#"{"ttl": 20, "postgresql": {"parameters": {"ttl": 99, "max_connections": "100"},
                 "use_pg_rewind": true}, "slots": [{"ttl": 1}], "ttl": "45", "loop_wait": null}"#,
        )
        .unwrap();
        assert_eq!(config.ttl_seconds, 45);
        assert_eq!(config.loop_wait_seconds, 10, "null keeps the default");
        // a key written with escapes is the same key
        let escaped = parse_dynamic_config(br#"{"t\u0074l": 50}"#).unwrap();
        assert_eq!(escaped.ttl_seconds, 50);
        assert_eq!(
            parse_dynamic_config(br#"{"postgresql": {"parameters": [1, 2}}"#)
                .unwrap_err()
                .kind(),
            crate::error_kind::ErrorKind::Decode,
            "a skipped value is still read as JSON"
        );
    }

    #[test]
    fn a_document_that_is_not_an_object_is_refused() {
        for body in [&b"[]"[..], b"null", b"\"ttl\"", b"{", b""] {
            assert_eq!(
                parse_dynamic_config(body).unwrap_err().kind(),
                crate::error_kind::ErrorKind::Decode
            );
        }
    }
}
