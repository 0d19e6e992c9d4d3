//! A member's tags (`nofailover`, `failover_priority`, `nosync`, ...): read the same way in
//! `/cluster` (the DCS copy) and in a member's own `/patroni`, so they have a module of their
//! own that both endpoints use.

use serde::Deserialize;

/// A member's tags, read the way Patroni reads them (`patroni/tags.py`, 3.3 and 4.1 alike):
/// `nofailover` wins over `failover_priority`, and a `failover_priority` of 0 or less means
/// `nofailover`; the same pair exists for `nosync` and `sync_priority` (4.x). Boolean tags are
/// Python truthiness (`nofailover: "false"` is true to Patroni, and so here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTags {
    /// Whether any tag was given at all.
    pub any: bool,
    pub nofailover: bool,
    /// 0 when the member may not be promoted; 1 when no priority is set.
    pub failover_priority: i64,
    pub nosync: bool,
    pub noloadbalance: bool,
    pub clonefrom: bool,
    /// Patroni 4.0+: the member replicates from the archive only.
    pub nostream: bool,
    /// The member it streams from instead of the leader (cascading replication).
    pub replicatefrom: Option<String>,
}

impl Default for MemberTags {
    /// No tags: promotable, with Patroni's default priority of 1.
    fn default() -> MemberTags {
        MemberTags::from_map(&serde_json::Map::new())
    }
}

impl MemberTags {
    fn from_map(tags: &serde_json::Map<String, serde_json::Value>) -> MemberTags {
        let truthy = |name: &str| tags.get(name).is_some_and(python_truthy);
        let priority = |name: &str| tags.get(name).and_then(python_int);
        // `_bool_tag`: the boolean tag, when given, wins; else a priority <= 0 sets it.
        let bool_tag = |flag: &str, priority_name: &str| match tags.get(flag) {
            Some(value) => python_truthy(value),
            None => priority(priority_name).is_some_and(|p| p <= 0),
        };
        MemberTags {
            any: !tags.is_empty(),
            nofailover: bool_tag("nofailover", "failover_priority"),
            // `_priority_tag`: 0 when the boolean tag is truthy, else the priority or 1.
            failover_priority: if truthy("nofailover") {
                0
            } else {
                priority("failover_priority").unwrap_or(1)
            },
            nosync: bool_tag("nosync", "sync_priority"),
            noloadbalance: truthy("noloadbalance"),
            clonefrom: truthy("clonefrom"),
            nostream: truthy("nostream"),
            replicatefrom: tags
                .get("replicatefrom")
                .and_then(|value| value.as_str())
                .map(str::to_owned),
        }
    }
}

/// Python's `bool(value)` for JSON values.
fn python_truthy(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Null => false,
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64().is_some_and(|n| n != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// Patroni's `parse_int` for a tag: an integer or a string holding one.
fn python_int(value: &serde_json::Value) -> Option<i64> {
    match value {
        serde_json::Value::Number(number) => number.as_i64(),
        serde_json::Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Tags are advisory: a `tags` value that is not an object is read as no tags rather than
/// failing the whole document.
pub(super) fn tags_from_json<'de, D>(deserializer: D) -> Result<MemberTags, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(match value {
        serde_json::Value::Object(map) => MemberTags::from_map(&map),
        _ => MemberTags::default(),
    })
}
