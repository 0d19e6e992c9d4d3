//! Pure parsers of etcd's JSON gateway answers and of the keys Patroni writes under its
//! prefix. No I/O: every function takes the bytes of a body.
//!
//! The gateway's JSON is proto3's: field names as in `rpc.proto` (`cluster_id`, but `dbSize`),
//! 64-bit integers as decimal **strings**, bytes (keys, values) as base64, enums by name, and
//! every zero value **omitted** (no `leader` means no leader, no `isLearner` means false, an
//! empty alarm list is `{}`). [`lenient`] reads such an integer whether it comes as a string
//! or a number, and a missing one as 0.

use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;

use super::error::EtcdError;

/// Reading proto3 JSON integers: a decimal string (what etcd sends for 64-bit fields), a
/// number (what a hand-written or future answer may send), `null` or nothing (zero).
mod lenient {
    use serde::de::{Deserializer, Error, Visitor};

    /// Reads a number or a string that holds one, straight from the parser. By hand: serde's
    /// `#[serde(untagged)]` enum of the three buffers every value and tries each variant in
    /// turn, building an error for each that fails; the gateway writes every 64-bit integer
    /// as a string, so that cost was paid for nearly every field of every answer.
    struct Integer;

    impl<'de> Visitor<'de> for Integer {
        type Value = Option<i128>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("an integer, or a string that holds one")
        }

        fn visit_u64<E: Error>(self, value: u64) -> Result<Self::Value, E> {
            Ok(Some(value.into()))
        }

        fn visit_i64<E: Error>(self, value: i64) -> Result<Self::Value, E> {
            Ok(Some(value.into()))
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<Self::Value, E> {
            text.trim()
                .parse::<i128>()
                .map(Some)
                .map_err(|_| E::custom(format!("{text:?} is not an integer")))
        }

        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(Integer)
        }
    }

    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i128>, D::Error> {
        deserializer.deserialize_option(Integer)
    }

    /// An unsigned 64-bit integer; missing or `null` is 0.
    pub fn u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let value = read(deserializer)?.unwrap_or(0);
        u64::try_from(value)
            .map_err(|_| serde::de::Error::custom(format!("{value} is out of range for u64")))
    }

    /// A signed 64-bit integer; missing or `null` is 0.
    pub fn i64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
        let value = read(deserializer)?.unwrap_or(0);
        i64::try_from(value)
            .map_err(|_| serde::de::Error::custom(format!("{value} is out of range for i64")))
    }
}

/// The header of every answer: which cluster and member answered, at which store revision
/// and Raft term.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ResponseHeader {
    #[serde(deserialize_with = "lenient::u64")]
    pub cluster_id: u64,
    #[serde(deserialize_with = "lenient::u64")]
    pub member_id: u64,
    #[serde(deserialize_with = "lenient::i64")]
    pub revision: i64,
    #[serde(deserialize_with = "lenient::u64")]
    pub raft_term: u64,
}

/// `POST /v3/maintenance/status`: one member's own view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct EndpointStatus {
    pub header: ResponseHeader,
    /// The member's etcd version (`3.4.23`).
    pub version: String,
    /// Size of the backend file, bytes.
    #[serde(rename = "dbSize", deserialize_with = "lenient::u64")]
    pub db_size: u64,
    /// Bytes of the backend logically in use (the rest is free pages, until a defrag).
    #[serde(rename = "dbSizeInUse", deserialize_with = "lenient::u64")]
    pub db_size_in_use: u64,
    /// The leader's member ID as this member knows it; `None` when it knows none (etcd
    /// omits the field, its zero value).
    #[serde(deserialize_with = "nonzero_u64")]
    pub leader: Option<u64>,
    /// The Raft index committed.
    #[serde(rename = "raftIndex", deserialize_with = "lenient::u64")]
    pub raft_index: u64,
    /// The Raft index applied to the store.
    #[serde(rename = "raftAppliedIndex", deserialize_with = "lenient::u64")]
    pub raft_applied_index: u64,
    /// The Raft term (also in the header; kept since 3.4 for older clients).
    #[serde(rename = "raftTerm", deserialize_with = "lenient::u64")]
    pub raft_term: u64,
    /// `etcdserver: no leader` when there is none, and one line per active alarm.
    pub errors: Vec<String>,
    #[serde(rename = "isLearner")]
    pub is_learner: bool,
    /// 3.6+: the version of the data file.
    #[serde(rename = "storageVersion", deserialize_with = "nonempty_string")]
    pub storage_version: Option<String>,
    /// 3.6+: `--quota-backend-bytes` as configured; `None` before 3.6 and when it is not
    /// set (etcd's default quota, 2 GiB, applies then).
    #[serde(rename = "dbSizeQuota", deserialize_with = "nonzero_u64")]
    pub db_size_quota: Option<u64>,
    /// 3.6+: whether a downgrade is in progress, and to which version.
    #[serde(rename = "downgradeInfo")]
    pub downgrade: Option<DowngradeInfo>,
}

impl EndpointStatus {
    /// The active alarms, as the member lists them in `errors[]`: one line per alarm in the
    /// protobuf text form of etcd's `AlarmMember` (`memberID:1655852451512655655
    /// alarm:NOSPACE `, captured from 3.4.23 and 3.5.1), beside `etcdserver: no leader`.
    ///
    /// Why from here and not from `POST /v3/maintenance/alarm`: etcd serves an alarm GET as a
    /// Raft proposal (each one moved a 3.4.23 member's `raftIndex` by one, an entry in every
    /// member's WAL), while the status lists the same alarms from the member's applied store,
    /// which every member holds whole (alarms are raised through Raft). Lines that name no
    /// alarm, and `NONE`, are left out.
    pub fn alarms(&self) -> Vec<Alarm> {
        self.errors
            .iter()
            .filter_map(|line| {
                let mut member_id = None;
                let mut alarm = None;
                for field in line.split_whitespace() {
                    match field.split_once(':') {
                        Some(("memberID", id)) => member_id = id.parse::<u64>().ok(),
                        Some(("alarm", name)) if !name.is_empty() && name != "NONE" => {
                            alarm = Some(AlarmType::named(name));
                        }
                        _ => {}
                    }
                }
                Some(Alarm {
                    member_id: member_id.unwrap_or(0),
                    alarm: alarm?,
                })
            })
            .collect()
    }

    /// Whether the member that answered says it is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader.is_some() && self.leader == Some(self.header.member_id)
    }
}

/// 3.6+: `downgradeInfo` of a status answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DowngradeInfo {
    pub enabled: bool,
    #[serde(rename = "targetVersion")]
    pub target_version: String,
}

fn nonzero_u64<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(Some(lenient::u64(deserializer)?).filter(|value| *value != 0))
}

fn nonempty_string<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.filter(|text| !text.is_empty()))
}

/// One member of `POST /v3/cluster/member/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Member {
    #[serde(rename = "ID", deserialize_with = "lenient::u64")]
    pub id: u64,
    /// Empty for a member added but not started yet.
    pub name: String,
    #[serde(rename = "peerURLs")]
    pub peer_urls: Vec<String>,
    /// Empty for a member added but not started yet.
    #[serde(rename = "clientURLs")]
    pub client_urls: Vec<String>,
    #[serde(rename = "isLearner")]
    pub is_learner: bool,
}

/// `POST /v3/cluster/member/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct MemberList {
    pub header: ResponseHeader,
    pub members: Vec<Member>,
}

/// The kind of an active alarm.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlarmType {
    /// The backend reached its quota: the cluster takes no more writes (Patroni's leader key
    /// cannot be renewed).
    NoSpace,
    /// A member's data was found corrupt.
    Corrupt,
    /// A type this exporter does not know, as etcd named or numbered it.
    Other(String),
}

impl<'de> Deserialize<'de> for AlarmType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Name(String),
            Number(i64),
        }
        Ok(match Repr::deserialize(deserializer)? {
            Repr::Name(name) => AlarmType::named(&name),
            Repr::Number(1) => AlarmType::NoSpace,
            Repr::Number(2) => AlarmType::Corrupt,
            Repr::Number(number) => AlarmType::Other(number.to_string()),
        })
    }
}

impl AlarmType {
    /// The alarm etcd names `name` (`NONE` is [`AlarmType::Other`]; callers leave it out).
    fn named(name: &str) -> AlarmType {
        match name {
            "NOSPACE" => AlarmType::NoSpace,
            "CORRUPT" => AlarmType::Corrupt,
            other => AlarmType::Other(other.to_owned()),
        }
    }
}

/// One active alarm of `POST /v3/maintenance/alarm` `{"action":"GET"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alarm {
    /// The member that raised it.
    pub member_id: u64,
    pub alarm: AlarmType,
}

/// One key of a `POST /v3/kv/range` answer, decoded from base64.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// How many times the key was written since it was created.
    pub version: i64,
    /// The lease the key is attached to; 0 for none.
    pub lease: i64,
}

/// `POST /v3/kv/range`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeAnswer {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    /// How many keys are in the range (more than `kvs` when the answer was limited).
    pub count: i64,
    pub more: bool,
}

/// `POST /v3/lease/timetolive`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseTimeToLive {
    #[serde(rename = "ID", deserialize_with = "lenient::i64")]
    pub id: i64,
    /// Seconds left; -1 when the lease has expired or never existed.
    #[serde(rename = "TTL", deserialize_with = "lenient::i64")]
    pub ttl: i64,
    /// The TTL the lease was granted (or last renewed) with, seconds; 0 once expired.
    #[serde(rename = "grantedTTL", deserialize_with = "lenient::i64")]
    pub granted_ttl: i64,
}

impl LeaseTimeToLive {
    /// Whether the lease still exists.
    pub fn is_alive(&self) -> bool {
        self.ttl >= 0
    }
}

/// `GET /health`: whether the member has a leader and can serve (3.5+ also say why not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// Empty when healthy, and always on 3.4 (`RAFT NO LEADER`, `ALARM NOSPACE` on 3.5+).
    pub reason: String,
}

/// `GET /version`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Versions {
    /// The member's own version.
    #[serde(rename = "etcdserver")]
    pub server: String,
    /// The cluster version (the lowest of its members', `major.minor.0`); empty before the
    /// cluster agreed on one.
    #[serde(rename = "etcdcluster")]
    pub cluster: String,
}

impl Versions {
    /// What etcd answers for the cluster version before its members agreed on one.
    pub const NOT_DECIDED: &'static str = "not_decided";

    /// The cluster version, once the members agreed on one.
    pub fn cluster_decided(&self) -> Option<&str> {
        Some(self.cluster.as_str()).filter(|v| !v.is_empty() && *v != Versions::NOT_DECIDED)
    }
}

/// The body of a refused gateway request: `{"error": .., "code": N, "message": ..}` (3.4,
/// 3.5; 3.6+ drop `error`). `code` is the gRPC status code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct GatewayError {
    pub code: i64,
    pub message: String,
    pub error: String,
}

impl GatewayError {
    /// What the server said: `message`, else `error`.
    pub fn text(&self) -> &str {
        if self.message.is_empty() {
            &self.error
        } else {
            &self.message
        }
    }
}

/// gRPC status codes the exporter tells apart.
pub mod grpc_code {
    pub const INVALID_ARGUMENT: i64 = 3;
    pub const PERMISSION_DENIED: i64 = 7;
    pub const UNAVAILABLE: i64 = 14;
    pub const UNAUTHENTICATED: i64 = 16;
}

/// A JSON object read as `T`: every answer of etcd's gateway is an object (serde would also
/// read a struct from an array).
fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, EtcdError> {
    // Every answer of the gateway is an object: read it straight into `T`, in one pass with
    // no tree of values in between. Anything else is read whole only to name what it is.
    if body.trim_ascii_start().first() == Some(&b'{') {
        return Ok(serde_json::from_slice(body)?);
    }
    let other = serde_json::from_slice::<serde_json::Value>(body)?;
    Err(EtcdError::Decode(format!(
        "expected a JSON object, got {}",
        json_type(&other)
    )))
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A status answer.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not a status document.
pub fn parse_status(body: &[u8]) -> Result<EndpointStatus, EtcdError> {
    from_json(body)
}

/// A member list answer.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not a member list.
pub fn parse_member_list(body: &[u8]) -> Result<MemberList, EtcdError> {
    from_json(body)
}

/// An alarm GET answer: the active alarms (entries of type `NONE` left out).
///
/// # Errors
/// [`EtcdError::Json`] when the body is not an alarm answer.
pub fn parse_alarms(body: &[u8]) -> Result<Vec<Alarm>, EtcdError> {
    #[derive(Deserialize)]
    struct RawAlarm {
        #[serde(rename = "memberID", default, deserialize_with = "lenient::u64")]
        member_id: u64,
        /// Missing means `NONE` (proto3 omits the zero value).
        #[serde(default)]
        alarm: Option<AlarmType>,
    }
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        alarms: Vec<RawAlarm>,
    }
    let answer: Answer = from_json(body)?;
    Ok(answer
        .alarms
        .into_iter()
        .filter_map(|raw| match raw.alarm {
            None => None,
            Some(AlarmType::Other(name)) if name == "NONE" || name == "0" => None,
            Some(alarm) => Some(Alarm {
                member_id: raw.member_id,
                alarm,
            }),
        })
        .collect())
}

/// A lease TimeToLive answer.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not a TimeToLive answer.
pub fn parse_lease_time_to_live(body: &[u8]) -> Result<LeaseTimeToLive, EtcdError> {
    from_json(body)
}

/// A `/version` answer.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not a version document.
pub fn parse_versions(body: &[u8]) -> Result<Versions, EtcdError> {
    from_json(body)
}

/// A `/health` answer (200 or 503): `{"health":"true"}`, with `reason` on 3.5+.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not JSON of that shape, [`EtcdError::Decode`] when
/// `health` is neither `"true"` nor `"false"`.
pub fn parse_health(body: &[u8]) -> Result<Health, EtcdError> {
    #[derive(Deserialize)]
    struct Answer {
        health: serde_json::Value,
        #[serde(default)]
        reason: Option<String>,
    }
    let answer: Answer = from_json(body)?;
    let healthy = match &answer.health {
        serde_json::Value::String(text) if text == "true" => true,
        serde_json::Value::String(text) if text == "false" => false,
        serde_json::Value::Bool(value) => *value,
        other => return Err(EtcdError::Decode(format!("health is {other}"))),
    };
    Ok(Health {
        healthy,
        reason: answer.reason.unwrap_or_default(),
    })
}

/// The token of a `POST /v3/auth/authenticate` answer, kept as a [`crate::secret::Secret`].
///
/// # Errors
/// [`EtcdError::Json`] when the body is not JSON, [`EtcdError::Decode`] when it holds no
/// token.
pub fn parse_token(body: &[u8]) -> Result<crate::secret::Secret, EtcdError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        token: String,
    }
    let answer: Answer = from_json(body)?;
    if answer.token.is_empty() {
        return Err(EtcdError::Decode("authenticate answered no token".into()));
    }
    Ok(crate::secret::Secret::new(answer.token))
}

/// The body of a refused request, when it is the gateway's error document.
pub fn parse_gateway_error(body: &[u8]) -> Option<GatewayError> {
    let error: GatewayError = serde_json::from_slice(body).ok()?;
    (error.code != 0 || !error.text().is_empty()).then_some(error)
}

/// A range answer, keys and values decoded from base64.
///
/// # Errors
/// [`EtcdError::Json`] when the body is not a range answer, [`EtcdError::Decode`] when a key
/// or value is not base64.
pub fn parse_range(body: &[u8]) -> Result<RangeAnswer, EtcdError> {
    /// Key and value as the body holds them: base64 has no escapes, so they are borrowed.
    #[derive(Deserialize)]
    #[serde(default)]
    #[derive(Default)]
    struct RawKeyValue<'a> {
        #[serde(borrow)]
        key: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        value: std::borrow::Cow<'a, str>,
        #[serde(deserialize_with = "lenient::i64")]
        create_revision: i64,
        #[serde(deserialize_with = "lenient::i64")]
        mod_revision: i64,
        #[serde(deserialize_with = "lenient::i64")]
        version: i64,
        #[serde(deserialize_with = "lenient::i64")]
        lease: i64,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Raw<'a> {
        header: ResponseHeader,
        #[serde(borrow)]
        kvs: Vec<RawKeyValue<'a>>,
        #[serde(deserialize_with = "lenient::i64")]
        count: i64,
        more: bool,
    }
    let raw: Raw = from_json(body)?;
    let decode = |field: &str, text: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|error| EtcdError::Decode(format!("a {field} is not base64 ({error})")))
    };
    let kvs = raw
        .kvs
        .into_iter()
        .map(|kv| {
            Ok(KeyValue {
                key: decode("key", &kv.key)?,
                value: decode("value", &kv.value)?,
                create_revision: kv.create_revision,
                mod_revision: kv.mod_revision,
                version: kv.version,
                lease: kv.lease,
            })
        })
        .collect::<Result<Vec<_>, EtcdError>>()?;
    Ok(RangeAnswer {
        header: raw.header,
        kvs,
        count: raw.count,
        more: raw.more,
    })
}

/// The `range_end` of a prefix: the prefix with its last byte incremented, bytes of 0xff
/// dropped first (etcd's `GetPrefixRangeEnd`); `[0]` (every key from `prefix` on) when the
/// prefix is all 0xff or empty.
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Patroni's prefix for a cluster: `/<namespace>/<scope>/`, slashes collapsed as Patroni
/// does (`namespace` is `/service/` by default, with or without its slashes).
pub fn patroni_prefix(namespace: &str, scope: &str) -> String {
    let joined = format!("/{namespace}/{scope}/");
    let mut prefix = String::with_capacity(joined.len());
    for character in joined.chars() {
        if !(character == '/' && prefix.ends_with('/')) {
            prefix.push(character);
        }
    }
    prefix
}

/// The keys Patroni keeps for one cluster, read from a range over its prefix.
///
/// Nothing here judges them; a key that cannot be read as Patroni writes it is kept with
/// what could be read and a note in `notes`, never failing the whole parse.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PatroniKeys {
    /// The store revision the range was read at.
    pub revision: i64,
    /// `leader`: who holds the leader lock.
    pub leader: Option<LeaderKey>,
    /// `members/<name>`, in key order.
    pub members: Vec<MemberKey>,
    /// `sync`: the synchronous standbys as the leader published them.
    pub sync: Option<SyncKey>,
    /// `failsafe`: member name → `api_url`, written by the leader while failsafe mode is on.
    pub failsafe: Option<BTreeMap<String, String>>,
    /// `config`: the dynamic configuration.
    pub config: Option<ConfigKey>,
    /// `history`: the timeline history, one JSON array per switch (`[timeline, lsn,
    /// reason, timestamp, new leader]`).
    pub history: Option<Vec<serde_json::Value>>,
    /// `initialize`: the cluster's system identifier.
    pub initialize: Option<String>,
    /// `status`: the leader's last published position (`optime`, bytes).
    pub status: Option<StatusKey>,
    /// `failover`: a scheduled failover or switchover, as written (`{}` when none).
    pub failover: Option<serde_json::Value>,
    /// Keys under the prefix that are none of the above (relative to the prefix).
    pub other_keys: Vec<String>,
    /// What could not be read, one line per key.
    pub notes: Vec<String>,
}

/// The `leader` key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderKey {
    /// The leader's member name.
    pub name: String,
    /// The lease the key is attached to (Patroni's TTL); 0 when none.
    pub lease: i64,
    pub create_revision: i64,
    pub mod_revision: i64,
}

/// A `members/<name>` key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberKey {
    pub name: String,
    /// The member's own lease (its `ttl`); 0 when none.
    pub lease: i64,
    pub mod_revision: i64,
    pub conn_url: Option<String>,
    pub api_url: Option<String>,
    pub state: Option<String>,
    pub role: Option<String>,
    pub timeline: Option<u64>,
    /// The WAL position the member published (bytes).
    pub xlog_location: Option<u64>,
    pub receive_lsn: Option<u64>,
    pub replay_lsn: Option<u64>,
    pub replication_state: Option<String>,
    /// Patroni's version.
    pub version: Option<String>,
    /// `tags`, as written.
    pub tags: Option<serde_json::Value>,
    /// Why some of the value could not be read; `None` when all of it could.
    pub note: Option<String>,
}

/// The `sync` key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncKey {
    pub leader: Option<String>,
    /// Comma-separated names, as Patroni writes them.
    pub sync_standby: Option<String>,
    /// Patroni 4's quorum commit (`quorum`).
    pub quorum: Option<u64>,
}

/// The `config` key: the fields that say how long the leader key lives and whether failsafe
/// and synchronous modes are on (the rest, PostgreSQL's parameters, is not read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigKey {
    pub ttl: Option<u64>,
    pub loop_wait: Option<u64>,
    pub retry_timeout: Option<u64>,
    pub synchronous_mode: Option<bool>,
    pub failsafe_mode: Option<bool>,
}

/// The `status` key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusKey {
    pub optime: Option<u64>,
}

/// A JSON value that is a non-negative integer, or a string of one (Patroni writes both).
fn json_u64(value: &serde_json::Value) -> Option<u64> {
    match value {
        serde_json::Value::Number(number) => number.as_u64(),
        serde_json::Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

fn json_string(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(text) => Some(text.clone()),
        _ => None,
    }
}

/// The keys of `range` under `prefix`, read as Patroni writes them.
pub fn parse_patroni_keys(prefix: &str, range: &RangeAnswer) -> PatroniKeys {
    let mut keys = PatroniKeys {
        revision: range.header.revision,
        ..PatroniKeys::default()
    };
    for kv in &range.kvs {
        let Some(relative) = kv.key.strip_prefix(prefix.as_bytes()) else {
            continue;
        };
        let relative = String::from_utf8_lossy(relative).into_owned();
        let text = String::from_utf8_lossy(&kv.value);
        let json = || serde_json::from_slice::<serde_json::Value>(&kv.value);
        match relative.as_str() {
            "leader" => {
                keys.leader = Some(LeaderKey {
                    name: text.into_owned(),
                    lease: kv.lease,
                    create_revision: kv.create_revision,
                    mod_revision: kv.mod_revision,
                });
            }
            "initialize" => keys.initialize = Some(text.into_owned()),
            "sync" => match json() {
                Ok(value) if value.is_object() => {
                    keys.sync = Some(SyncKey {
                        leader: value.get("leader").and_then(json_string),
                        sync_standby: value.get("sync_standby").and_then(json_string),
                        quorum: value.get("quorum").and_then(json_u64),
                    });
                }
                _ => keys.notes.push("sync: not a JSON object".into()),
            },
            "failsafe" => match json() {
                Ok(serde_json::Value::Object(map)) => {
                    let mut failsafe = BTreeMap::new();
                    for (name, url) in map {
                        match json_string(&url) {
                            Some(url) => {
                                failsafe.insert(name, url);
                            }
                            None => keys
                                .notes
                                .push(format!("failsafe: the api_url of {name:?} is not a string")),
                        }
                    }
                    keys.failsafe = Some(failsafe);
                }
                _ => keys.notes.push("failsafe: not a JSON object".into()),
            },
            "config" => match parse_config_key(&kv.value) {
                Some(config) => keys.config = Some(config),
                None => keys.notes.push("config: not a JSON object".into()),
            },
            "history" => match json() {
                Ok(serde_json::Value::Array(rows)) => keys.history = Some(rows),
                _ => keys.notes.push("history: not a JSON array".into()),
            },
            "status" => match json() {
                Ok(value) if value.is_object() => {
                    keys.status = Some(StatusKey {
                        optime: value.get("optime").and_then(json_u64),
                    });
                }
                _ => keys.notes.push("status: not a JSON object".into()),
            },
            "failover" => match json() {
                Ok(value) => keys.failover = Some(value),
                Err(_) if kv.value.is_empty() => keys.failover = Some(serde_json::Value::Null),
                Err(_) => keys.notes.push("failover: not JSON".into()),
            },
            _ => match relative.strip_prefix("members/") {
                Some(name) if !name.is_empty() && !name.contains('/') => {
                    keys.members.push(parse_member_key(name, kv));
                }
                _ => keys.other_keys.push(relative),
            },
        }
    }
    for member in &keys.members {
        if let Some(note) = &member.note {
            keys.notes.push(format!("members/{}: {note}", member.name));
        }
    }
    keys
}

/// The `config` key's fields; `None` when the value is not a JSON object. A field of another
/// type reads as absent.
fn parse_config_key(value: &[u8]) -> Option<ConfigKey> {
    use patroni_field::{Flag, Number};
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default)]
        ttl: Number,
        #[serde(default)]
        loop_wait: Number,
        #[serde(default)]
        retry_timeout: Number,
        #[serde(default)]
        synchronous_mode: Flag,
        #[serde(default)]
        failsafe_mode: Flag,
    }
    if let Ok(fields) = from_json::<Fields>(value) {
        return Some(ConfigKey {
            ttl: fields.ttl.ok(),
            loop_wait: fields.loop_wait.ok(),
            retry_timeout: fields.retry_timeout.ok(),
            synchronous_mode: fields.synchronous_mode.ok(),
            failsafe_mode: fields.failsafe_mode.ok(),
        });
    }
    // Not an object of fields (a field named twice included: the last counts).
    let serde_json::Value::Object(object) = serde_json::from_slice(value).ok()? else {
        return None;
    };
    let number = |field: &str| object.get(field).and_then(json_u64);
    let flag = |field: &str| object.get(field).and_then(serde_json::Value::as_bool);
    Some(ConfigKey {
        ttl: number("ttl"),
        loop_wait: number("loop_wait"),
        retry_timeout: number("retry_timeout"),
        synchronous_mode: flag("synchronous_mode"),
        failsafe_mode: flag("failsafe_mode"),
    })
}

/// A `members/<name>` key: what can be read of its JSON value, and a note for the rest.
///
/// Read straight into [`patroni_field`]'s fields (a member key per member per poll, most of
/// an etcd cluster's parsing); only a value that is not an object of fields is read whole, to
/// say what it is.
fn parse_member_key(name: &str, kv: &KeyValue) -> MemberKey {
    use patroni_field::{Number, Text};
    #[derive(Deserialize)]
    struct Fields {
        #[serde(default)]
        conn_url: Text,
        #[serde(default)]
        api_url: Text,
        #[serde(default)]
        state: Text,
        #[serde(default)]
        role: Text,
        #[serde(default)]
        replication_state: Text,
        #[serde(default)]
        version: Text,
        #[serde(default)]
        timeline: Number,
        #[serde(default)]
        xlog_location: Number,
        #[serde(default)]
        receive_lsn: Number,
        #[serde(default)]
        replay_lsn: Number,
        #[serde(default, deserialize_with = "patroni_field::present")]
        tags: Option<serde_json::Value>,
    }
    let mut member = MemberKey {
        name: name.to_owned(),
        lease: kv.lease,
        mod_revision: kv.mod_revision,
        ..MemberKey::default()
    };
    let fields = match from_json::<Fields>(&kv.value) {
        Ok(fields) => fields,
        Err(error) => {
            member.note = Some(match serde_json::from_slice(&kv.value) {
                // An object read as fields fails only on a field named twice.
                Ok(serde_json::Value::Object(_)) => match error {
                    EtcdError::Json(error) => format!("not read ({error})"),
                    other => format!("not read ({other})"),
                },
                Ok(_) => "not a JSON object".into(),
                Err(error) => format!("not JSON ({error})"),
            });
            return member;
        }
    };
    let mut wrong = Vec::new();
    member.conn_url = fields.conn_url.read("conn_url", &mut wrong);
    member.api_url = fields.api_url.read("api_url", &mut wrong);
    member.state = fields.state.read("state", &mut wrong);
    member.role = fields.role.read("role", &mut wrong);
    member.replication_state = fields
        .replication_state
        .read("replication_state", &mut wrong);
    member.version = fields.version.read("version", &mut wrong);
    member.timeline = fields.timeline.read("timeline", &mut wrong);
    member.xlog_location = fields.xlog_location.read("xlog_location", &mut wrong);
    member.receive_lsn = fields.receive_lsn.read("receive_lsn", &mut wrong);
    member.replay_lsn = fields.replay_lsn.read("replay_lsn", &mut wrong);
    member.tags = fields.tags;
    if !wrong.is_empty() {
        member.note = Some(format!("unexpected type of {}", wrong.join(", ")));
    }
    member
}

/// One field of a JSON object Patroni wrote, read straight from the parser: absent (or
/// `null`), of the type expected, or of another type (skipped without building it, and
/// named in the key's note). By hand: serde's `Option<T>` fails the whole object on one field
/// of the wrong type, and `serde_json::Value` builds every field of every key each poll.
mod patroni_field {
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    /// What one field held.
    #[derive(Debug, Default, PartialEq)]
    pub(super) enum Field<T> {
        #[default]
        Absent,
        Read(T),
        WrongType,
    }

    impl<T> Field<T> {
        /// The value; `None` when absent or of another type.
        pub(super) fn ok(self) -> Option<T> {
            match self {
                Field::Read(value) => Some(value),
                Field::Absent | Field::WrongType => None,
            }
        }

        /// The value; `None` when absent or of another type, which adds `name` to `wrong`.
        pub(super) fn read(self, name: &str, wrong: &mut Vec<String>) -> Option<T> {
            match self {
                Field::Absent => None,
                Field::Read(value) => Some(value),
                Field::WrongType => {
                    wrong.push(name.to_owned());
                    None
                }
            }
        }
    }

    /// A string field.
    pub(super) type Text = Field<String>;
    /// A non-negative integer field, or a string that holds one (Patroni writes both).
    pub(super) type Number = Field<u64>;
    /// A JSON `true` or `false`.
    pub(super) type Flag = Field<bool>;

    /// What a scalar can be read as.
    trait Scalar: Sized {
        fn of_str(text: &str) -> Option<Self>;
        fn of_u64(value: u64) -> Option<Self>;
        fn of_bool(_: bool) -> Option<Self> {
            None
        }
    }

    impl Scalar for bool {
        fn of_str(_: &str) -> Option<bool> {
            None
        }
        fn of_u64(_: u64) -> Option<bool> {
            None
        }
        fn of_bool(value: bool) -> Option<bool> {
            Some(value)
        }
    }

    impl Scalar for String {
        fn of_str(text: &str) -> Option<String> {
            Some(text.to_owned())
        }
        fn of_u64(_: u64) -> Option<String> {
            None
        }
    }

    impl Scalar for u64 {
        fn of_str(text: &str) -> Option<u64> {
            text.trim().parse().ok()
        }
        fn of_u64(value: u64) -> Option<u64> {
            Some(value)
        }
    }

    struct FieldVisitor<T>(std::marker::PhantomData<T>);

    impl<'de, T: Scalar> Visitor<'de> for FieldVisitor<T> {
        type Value = Field<T>;

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("any JSON value")
        }
        fn visit_str<E>(self, text: &str) -> Result<Field<T>, E> {
            Ok(T::of_str(text).map_or(Field::WrongType, Field::Read))
        }
        fn visit_u64<E>(self, value: u64) -> Result<Field<T>, E> {
            Ok(T::of_u64(value).map_or(Field::WrongType, Field::Read))
        }
        fn visit_i64<E>(self, value: i64) -> Result<Field<T>, E> {
            Ok(u64::try_from(value)
                .ok()
                .and_then(T::of_u64)
                .map_or(Field::WrongType, Field::Read))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Field<T>, E> {
            Ok(Field::WrongType)
        }
        fn visit_bool<E>(self, value: bool) -> Result<Field<T>, E> {
            Ok(T::of_bool(value).map_or(Field::WrongType, Field::Read))
        }
        fn visit_unit<E>(self) -> Result<Field<T>, E> {
            Ok(Field::Absent)
        }
        fn visit_none<E>(self) -> Result<Field<T>, E> {
            Ok(Field::Absent)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field<T>, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Field::WrongType)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field<T>, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Field::WrongType)
        }
    }

    impl<'de, T: Scalar> Deserialize<'de> for Field<T> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_any(FieldVisitor(std::marker::PhantomData))
        }
    }

    /// A field kept as written, `null` included (`Some(Value::Null)`: present but null).
    pub(super) fn present<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<serde_json::Value>, D::Error> {
        serde_json::Value::deserialize(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    /// Every fixture folder: the answers captured from real etcd 3.4.23 and 3.5.1, and those
    /// written by hand from the source of 3.5, 3.6 and 3.7.
    const VERSIONS: [&str; 5] = ["etcd-3.4", "etcd-3.5.1", "etcd-3.5", "etcd-3.6", "etcd-3.7"];
    /// The folders of real answers (e1 the leader, Patroni 4.1.5's keys under /service/capdemo/).
    const CAPTURED: [&str; 2] = ["etcd-3.4", "etcd-3.5.1"];
    /// The folders written by hand (etcd-b the leader, a learner, Patroni 3.3.11's keys under
    /// /service/batman/).
    const WRITTEN: [&str; 3] = ["etcd-3.5", "etcd-3.6", "etcd-3.7"];

    fn at(version: &str, file: &str) -> Vec<u8> {
        fixture(&format!("{version}/{file}"))
    }

    #[test]
    fn status_of_the_captured_3_4_cluster() {
        let leader = parse_status(&at("etcd-3.4", "status-e1.json")).unwrap();
        assert_eq!(leader.header.cluster_id, 1_447_350_856_367_944_436);
        assert_eq!(leader.header.member_id, 9_472_030_171_395_453_087);
        assert_eq!(leader.header.revision, 56);
        assert_eq!(leader.header.raft_term, 2);
        assert_eq!(leader.version, "3.4.23");
        assert_eq!((leader.db_size, leader.db_size_in_use), (40960, 40960));
        assert_eq!(leader.leader, Some(9_472_030_171_395_453_087));
        assert_eq!((leader.raft_index, leader.raft_applied_index), (73, 73));
        assert!(leader.is_leader() && !leader.is_learner && leader.errors.is_empty());
        assert_eq!(
            (leader.storage_version.clone(), leader.db_size_quota),
            (None, None),
            "3.4 has neither"
        );
        for follower in ["status-e2.json", "status-e3.json"] {
            let follower = parse_status(&at("etcd-3.4", follower)).unwrap();
            assert_eq!(follower.leader, leader.leader);
            assert!(!follower.is_leader());
        }
        // e2 and e3 stopped: e1 answers at once, without a leader.
        let alone = parse_status(&at("etcd-3.4", "no-quorum-status-e1.json")).unwrap();
        assert_eq!(alone.leader, None);
        assert!(!alone.is_leader());
        assert_eq!(alone.errors, ["etcdserver: no leader"]);
        let full = parse_status(&at("etcd-3.4", "alarm-nospace-status.json")).unwrap();
        assert_eq!(full.errors, ["memberID:1655852451512655655 alarm:NOSPACE "]);
        assert_eq!(full.db_size, 573_440);
        let read_only = parse_status(&at("etcd-3.4", "auth-status-read-only-user.json")).unwrap();
        assert_eq!(read_only.leader, Some(16_070_565_572_053_692_374));
    }

    #[test]
    fn status_of_every_version() {
        for version in VERSIONS {
            let statuses: Vec<EndpointStatus> = (1..=3)
                .map(|n| parse_status(&at(version, &format!("status-e{n}.json"))).unwrap())
                .collect();
            let leaders: Vec<bool> = statuses.iter().map(EndpointStatus::is_leader).collect();
            let expected = if CAPTURED.contains(&version) {
                [true, false, false]
            } else {
                [false, true, false]
            };
            assert_eq!(leaders, expected, "{version}");
            assert!(statuses
                .iter()
                .all(|s| s.leader.is_some() && s.errors.is_empty()));
            assert!(statuses[0].version.starts_with(&version[5..]), "{version}");
            let alone = parse_status(&at(version, "no-quorum-status-e1.json")).unwrap();
            assert_eq!(alone.leader, None, "{version}");
            assert_eq!(alone.errors, ["etcdserver: no leader"], "{version}");
        }
        let v35 = parse_status(&at("etcd-3.5", "status-e3.json")).unwrap();
        assert_eq!((v35.raft_index, v35.raft_applied_index), (1041, 1040));
        assert_eq!(
            (v35.storage_version, v35.db_size_quota, v35.downgrade),
            (None, None, None)
        );
        let v36 = parse_status(&at("etcd-3.6", "status-e2.json")).unwrap();
        assert_eq!(v36.storage_version.as_deref(), Some("3.6.0"));
        assert_eq!(v36.db_size_quota, Some(8 << 30));
        assert_eq!(v36.downgrade, Some(DowngradeInfo::default()));
        let v37 = parse_status(&at("etcd-3.7", "status-e1.json")).unwrap();
        assert_eq!(
            v37.downgrade,
            Some(DowngradeInfo {
                enabled: true,
                target_version: "3.6.0".into()
            })
        );
    }

    #[test]
    fn member_lists() {
        for file in [
            "member-list.json",
            "one-down-member-list.json",
            "auth-member-list-read-only-user.json",
        ] {
            let list = parse_member_list(&at("etcd-3.4", file)).unwrap();
            let names: Vec<&str> = list.members.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, ["e3", "e1", "e2"], "{file}");
            assert_eq!(list.members[1].id, 9_472_030_171_395_453_087);
            assert_eq!(list.members[1].client_urls, ["http://127.0.0.11:2379"]);
            assert_eq!(list.members[1].peer_urls, ["http://127.0.0.11:2380"]);
            assert!(list.members.iter().all(|m| !m.is_learner));
        }
        for version in WRITTEN {
            let list = parse_member_list(&at(version, "member-list.json")).unwrap();
            assert_eq!(list.members.len(), 4, "{version}");
            let learner = &list.members[3];
            assert!(
                learner.is_learner && learner.name.is_empty() && learner.client_urls.is_empty()
            );
            assert_eq!(learner.id, 4_418_502_263_717_153_003);
            assert!(list.members[..3]
                .iter()
                .all(|m| !m.is_learner && !m.name.is_empty()));
        }
    }

    #[test]
    fn a_status_lists_the_alarms_an_alarm_get_answers() {
        // Captured from one cluster each, its quota reached, both answers.
        for folder in ["etcd-3.4", "etcd-3.5.1"] {
            let status = parse_status(&at(folder, "alarm-nospace-status.json")).unwrap();
            let asked = parse_alarms(&at(folder, "alarm-nospace.json")).unwrap();
            assert_eq!(asked.len(), 1, "{folder}");
            assert_eq!(status.alarms(), asked, "{folder}");
        }
        for version in VERSIONS {
            let status = parse_status(&at(version, "status-e1.json")).unwrap();
            assert_eq!(status.alarms(), [], "{version}");
            let alone = parse_status(&at(version, "no-quorum-status-e1.json")).unwrap();
            assert_eq!(alone.alarms(), [], "{version}: `no leader` is no alarm");
        }
        let lines = |errors: &[&str]| EndpointStatus {
            errors: errors.iter().map(|line| (*line).to_owned()).collect(),
            ..parse_status(&at("etcd-3.4", "status-e1.json")).unwrap()
        };
        let odd = lines(&[
            "etcdserver: no leader",
            "memberID:7 alarm:CORRUPT ",
            "alarm:NOSPACE memberID:8",
            "memberID:9  alarm:SOMETHING",
            "memberID:10 alarm:NONE ",
            "memberID:x alarm:NOSPACE",
            "memberID:11 alarm:",
            "",
        ]);
        let alarm = |member_id, alarm| Alarm { member_id, alarm };
        assert_eq!(
            odd.alarms(),
            [
                alarm(7, AlarmType::Corrupt),
                alarm(8, AlarmType::NoSpace),
                alarm(9, AlarmType::Other("SOMETHING".into())),
                alarm(0, AlarmType::NoSpace),
            ]
        );
    }

    #[test]
    fn alarms_of_every_version() {
        for version in VERSIONS {
            assert_eq!(parse_alarms(&at(version, "alarm-none.json")).unwrap(), []);
        }
        assert_eq!(
            parse_alarms(&at("etcd-3.4", "alarm-nospace.json")).unwrap(),
            [Alarm {
                member_id: 1_655_852_451_512_655_655,
                alarm: AlarmType::NoSpace
            }]
        );
        for version in WRITTEN {
            let alarms = parse_alarms(&at(version, "alarm-active.json")).unwrap();
            let types: Vec<&AlarmType> = alarms.iter().map(|a| &a.alarm).collect();
            assert_eq!(
                types,
                [&AlarmType::NoSpace, &AlarmType::Corrupt],
                "{version}"
            );
        }
        // Numbered enums, an unknown type, and NONE entries (dropped).
        let odd = br#"{"alarms":[{"memberID":"1","alarm":1},{"memberID":"2","alarm":"SOMETHING"},{"memberID":"3","alarm":"NONE"},{"memberID":"4"}]}"#;
        assert_eq!(
            parse_alarms(odd).unwrap(),
            [
                Alarm {
                    member_id: 1,
                    alarm: AlarmType::NoSpace
                },
                Alarm {
                    member_id: 2,
                    alarm: AlarmType::Other("SOMETHING".into())
                }
            ]
        );
    }

    #[test]
    fn the_real_patroni_keys_of_3_4() {
        let range = parse_range(&at("etcd-3.4", "range-patroni.json")).unwrap();
        assert_eq!((range.count, range.kvs.len(), range.more), (10, 10, false));
        assert_eq!(range.header.revision, 56);
        let keys = parse_patroni_keys("/service/capdemo/", &range);
        assert_eq!(keys.revision, 56);
        assert_eq!(
            keys.leader,
            Some(LeaderKey {
                name: "pg2".into(),
                lease: 8_115_383_331_663_444_237,
                create_revision: 40,
                mod_revision: 40
            })
        );
        let names: Vec<&str> = keys.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["pg1", "pg2"]);
        let replica = &keys.members[0];
        assert_eq!(replica.role.as_deref(), Some("replica"));
        assert_eq!(replica.state.as_deref(), Some("running"));
        assert_eq!(
            replica.api_url.as_deref(),
            Some("http://127.0.0.21:8008/patroni")
        );
        assert_eq!(
            replica.conn_url.as_deref(),
            Some("postgres://127.0.0.21:5432/postgres")
        );
        assert_eq!(replica.timeline, Some(2));
        assert_eq!(replica.xlog_location, Some(50_332_512));
        assert_eq!(replica.replay_lsn, Some(50_332_512));
        assert_eq!(replica.replication_state.as_deref(), Some("streaming"));
        assert_eq!(replica.version.as_deref(), Some("4.1.5"));
        assert_eq!(replica.lease, 842_351_408_436_800_016);
        assert_eq!(replica.note, None);
        assert_eq!(keys.members[1].role.as_deref(), Some("primary"));
        assert_eq!(keys.members[1].lease, keys.leader.as_ref().unwrap().lease);
        assert_eq!(
            keys.sync,
            Some(SyncKey {
                leader: Some("pg2".into()),
                sync_standby: Some("pg1".into()),
                quorum: Some(0)
            })
        );
        let failsafe = keys.failsafe.as_ref().unwrap();
        assert_eq!(failsafe["pg1"], "http://127.0.0.21:8008/patroni");
        assert_eq!(failsafe.len(), 2);
        let config = keys.config.as_ref().unwrap();
        assert_eq!(
            (config.ttl, config.loop_wait, config.retry_timeout),
            (Some(30), Some(10), Some(10))
        );
        assert_eq!(
            (config.synchronous_mode, config.failsafe_mode),
            (Some(true), Some(true))
        );
        let history = keys.history.as_ref().unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0][4], "pg2");
        assert_eq!(keys.initialize.as_deref(), Some("7713377781243908433"));
        assert_eq!(
            keys.status,
            Some(StatusKey {
                optime: Some(50_332_512)
            })
        );
        assert_eq!(keys.failover, Some(serde_json::json!({})));
        assert!(
            keys.other_keys.is_empty() && keys.notes.is_empty(),
            "{keys:?}"
        );
        // The same keys read with the read-only user's token.
        let with_token = parse_range(&at("etcd-3.4", "auth-range-with-token.json")).unwrap();
        assert_eq!(
            parse_patroni_keys("/service/capdemo/", &with_token).members,
            keys.members
        );
        // Without a leader, the member's own copy.
        let own = parse_range(&at("etcd-3.4", "no-quorum-range-serializable.json")).unwrap();
        assert_eq!(
            parse_patroni_keys("/service/capdemo/", &own)
                .leader
                .unwrap()
                .name,
            "pg2"
        );
    }

    /// A member key's JSON object read as a tree of values, field by field: what
    /// [`parse_member_key`] must read.
    fn member_of_object(
        mut member: MemberKey,
        object: &serde_json::Map<String, serde_json::Value>,
    ) -> MemberKey {
        let mut wrong = Vec::new();
        let mut string = |field: &str| match object.get(field) {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => {
                let text = json_string(value);
                if text.is_none() {
                    wrong.push(field.to_owned());
                }
                text
            }
        };
        member.conn_url = string("conn_url");
        member.api_url = string("api_url");
        member.state = string("state");
        member.role = string("role");
        member.replication_state = string("replication_state");
        member.version = string("version");
        let mut number = |field: &str| match object.get(field) {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => {
                let number = json_u64(value);
                if number.is_none() {
                    wrong.push(field.to_owned());
                }
                number
            }
        };
        member.timeline = number("timeline");
        member.xlog_location = number("xlog_location");
        member.receive_lsn = number("receive_lsn");
        member.replay_lsn = number("replay_lsn");
        member.tags = object.get("tags").cloned();
        if !wrong.is_empty() {
            member.note = Some(format!("unexpected type of {}", wrong.join(", ")));
        }
        member
    }

    /// The `config` key's fields, whatever else it holds; a field of another type reads as
    /// absent, a field named twice as its last value, and a value that is no object as none.
    #[test]
    fn the_config_key_reads_its_fields_only() {
        let config = |text: &str| parse_config_key(text.as_bytes());
        assert_eq!(
            config(
                r#"{"ttl":"30","loop_wait":10,"postgresql":{"parameters":{"x":[1,{"y":null}]}},"failsafe_mode":false}"#
            ),
            Some(ConfigKey {
                ttl: Some(30),
                loop_wait: Some(10),
                failsafe_mode: Some(false),
                ..ConfigKey::default()
            })
        );
        assert_eq!(
            config(r#"{"ttl":true,"retry_timeout":-1,"synchronous_mode":"on"}"#),
            Some(ConfigKey::default())
        );
        assert_eq!(
            config(r#"{"ttl":20,"synchronous_mode":true,"ttl":40}"#),
            Some(ConfigKey {
                ttl: Some(40),
                synchronous_mode: Some(true),
                ..ConfigKey::default()
            })
        );
        assert_eq!(config("[1]"), None);
        assert_eq!(config("{"), None);
    }

    /// A member key read field by field reads as the whole JSON object does: every captured
    /// and written member key, and values of every odd shape (numbers as strings, negative,
    /// fractional, nested, `null`); a field named twice is named in the note.
    #[test]
    fn a_member_key_reads_as_its_json_object() {
        let mut values: Vec<Vec<u8>> = Vec::new();
        for version in VERSIONS {
            let range = parse_range(&at(version, "range-patroni.json")).unwrap();
            values.extend(range.kvs.into_iter().map(|kv| kv.value));
        }
        for odd in [
            r#"{"api_url":"http://h:8008/patroni","timeline":"7","xlog_location":" 12 "}"#,
            r#"{"timeline":-1,"receive_lsn":1.5,"replay_lsn":true,"role":3,"state":null}"#,
            r#"{"conn_url":["a"],"version":{"v":1},"tags":null,"extra":{"deep":[1,{"x":2}]}}"#,
            r#"{"tags":{"nosync":true},"replication_state":"streaming","timeline":18446744073709551615}"#,
            r#"{"timeline":"x","api_url":""}"#,
            "{}",
        ] {
            values.push(odd.as_bytes().to_vec());
        }
        for value in values {
            let kv = KeyValue {
                value: value.clone(),
                lease: 5,
                mod_revision: 9,
                ..KeyValue::default()
            };
            let expected = match serde_json::from_slice::<serde_json::Value>(&value) {
                Ok(serde_json::Value::Object(object)) => member_of_object(
                    MemberKey {
                        name: "m".into(),
                        lease: 5,
                        mod_revision: 9,
                        ..MemberKey::default()
                    },
                    &object,
                ),
                _ => continue,
            };
            assert_eq!(
                parse_member_key("m", &kv),
                expected,
                "{}",
                String::from_utf8_lossy(&value)
            );
        }
        let twice = KeyValue {
            value: br#"{"role":"replica","role":"primary"}"#.to_vec(),
            ..KeyValue::default()
        };
        let member = parse_member_key("m", &twice);
        assert_eq!(member.role, None);
        assert!(
            member
                .note
                .as_deref()
                .unwrap()
                .contains("duplicate field `role`"),
            "{member:?}"
        );
    }

    #[test]
    fn patroni_keys_of_every_written_version() {
        for version in WRITTEN {
            let range = parse_range(&at(version, "range-patroni.json")).unwrap();
            let keys = parse_patroni_keys(&patroni_prefix("/service/", "batman"), &range);
            assert_eq!(keys.leader.as_ref().unwrap().name, "pg-b", "{version}");
            assert_eq!(keys.members.len(), 3);
            assert_eq!(
                keys.members[2].tags,
                Some(serde_json::json!({"nosync": true}))
            );
            assert_eq!(keys.members[2].receive_lsn, Some(67_108_992));
            assert_eq!(keys.history.as_ref().unwrap().len(), 2);
            assert!(
                keys.notes.is_empty() && keys.other_keys.is_empty(),
                "{keys:?}"
            );
            // Another cluster's prefix sees none of them.
            let other = parse_patroni_keys("/service/robin/", &range);
            assert_eq!(other.leader, None);
            assert!(other.members.is_empty() && other.other_keys.is_empty());
        }
    }

    #[test]
    fn lease_time_to_live() {
        let alive = parse_lease_time_to_live(&at("etcd-3.4", "timetolive-leader.json")).unwrap();
        assert_eq!(
            (alive.id, alive.ttl, alive.granted_ttl),
            (8_115_383_331_663_444_237, 28, 30)
        );
        assert!(alive.is_alive());
        let gone = parse_lease_time_to_live(&at("etcd-3.4", "timetolive-expired.json")).unwrap();
        assert_eq!((gone.id, gone.ttl, gone.granted_ttl), (1, -1, 0));
        assert!(!gone.is_alive());
        for version in VERSIONS {
            let alive = parse_lease_time_to_live(&at(version, "timetolive-leader.json")).unwrap();
            assert!(
                alive.is_alive() && alive.ttl <= alive.granted_ttl,
                "{version}"
            );
            let gone = parse_lease_time_to_live(&at(version, "timetolive-expired.json")).unwrap();
            assert!(!gone.is_alive(), "{version}");
        }
    }

    #[test]
    fn health_and_version() {
        let healthy = Health {
            healthy: true,
            reason: String::new(),
        };
        for version in VERSIONS {
            assert_eq!(parse_health(&at(version, "health.json")).unwrap(), healthy);
        }
        for file in ["no-quorum-health.json", "alarm-nospace-health.json"] {
            assert!(!parse_health(&at("etcd-3.4", file)).unwrap().healthy);
        }
        assert!(
            parse_health(&at("etcd-3.4", "one-down-health.json"))
                .unwrap()
                .healthy
        );
        let no_leader = parse_health(&at("etcd-3.6", "health-no-leader.json")).unwrap();
        assert_eq!(
            (no_leader.healthy, no_leader.reason.as_str()),
            (false, "RAFT NO LEADER")
        );
        assert!(parse_health(br#"{"health":"maybe"}"#).is_err());
        assert!(parse_health(br#"{"reason":""}"#).is_err());
        let versions = parse_versions(&at("etcd-3.4", "version.json")).unwrap();
        assert_eq!(
            (versions.server.as_str(), versions.cluster.as_str()),
            ("3.4.23", "3.4.0")
        );
        for (version, server, cluster) in [
            ("etcd-3.5", "3.5.21", "3.5.0"),
            ("etcd-3.6", "3.6.5", "3.6.0"),
            ("etcd-3.7", "3.7.1", "3.7.0"),
        ] {
            let versions = parse_versions(&at(version, "version.json")).unwrap();
            assert_eq!(versions.server, server, "{version}");
            assert_eq!(versions.cluster_decided(), Some(cluster), "{version}");
        }
        // A rolling upgrade: the member runs 3.5, the cluster still speaks 3.4.
        let upgrading =
            parse_versions(br#"{"etcdserver":"3.5.21","etcdcluster":"3.4.0"}"#).unwrap();
        assert_eq!(
            (upgrading.server.as_str(), upgrading.cluster_decided()),
            ("3.5.21", Some("3.4.0"))
        );
        // A member that just started, before the cluster version is decided.
        let undecided =
            parse_versions(br#"{"etcdserver":"3.4.23","etcdcluster":"not_decided"}"#).unwrap();
        assert_eq!(undecided.cluster_decided(), None);
        assert_eq!(
            parse_versions(br#"{"etcdserver":"3.4.23"}"#)
                .unwrap()
                .cluster_decided(),
            None
        );
        assert!(parse_versions(br#"["3.4.23"]"#).is_err());
    }

    #[test]
    fn auth_answers_of_every_version() {
        let token = parse_token(&at("etcd-3.4", "auth-authenticate.json")).unwrap();
        assert_eq!(token.expose(), "PApneuFHyOgeHoRk.97");
        assert!(!format!("{token:?}").contains("PApneu"));
        for version in VERSIONS {
            parse_token(&at(version, "auth-authenticate.json")).unwrap();
            let expect = |file: &str, code: i64, text: &str| {
                let error = parse_gateway_error(&at(version, file)).unwrap();
                assert_eq!((error.code, error.text()), (code, text), "{version}/{file}");
            };
            expect(
                "auth-range-invalid-token.json",
                16,
                "etcdserver: invalid auth token",
            );
            expect(
                "auth-range-no-token.json",
                3,
                "etcdserver: user name is empty",
            );
            expect(
                "auth-range-permission-denied.json",
                7,
                "etcdserver: permission denied",
            );
        }
        let denied =
            parse_gateway_error(&at("etcd-3.6", "auth-status-permission-denied.json")).unwrap();
        assert_eq!(
            (denied.code, denied.error.as_str()),
            (7, ""),
            "3.6 has no `error` field"
        );
        let wrong =
            parse_gateway_error(&at("etcd-3.4", "auth-authenticate-wrong-password.json")).unwrap();
        assert!(wrong.text().contains("authentication failed"));
        for (file, code) in [
            ("no-quorum-range.json", 14),
            ("no-quorum-timetolive.json", 14),
            ("no-quorum-alarm.json", 2),
            ("error-invalid-argument.json", 3),
        ] {
            assert_eq!(
                parse_gateway_error(&at("etcd-3.4", file)).unwrap().code,
                code,
                "{file}"
            );
        }
        // A token is not an error, nor is an answer.
        assert_eq!(parse_gateway_error(&at("etcd-3.4", "status-e1.json")), None);
        assert_eq!(parse_gateway_error(b"Not Found\n"), None);
        assert!(parse_token(br#"{"header":{}}"#).is_err());
    }

    // The answers of a real etcd 3.5.1 (tests/fixtures/etcd-3.5.1/README.md), the same
    // requests and states as the 3.4.23 capture: e1 the leader, Patroni 4.1.5's keys.

    const E1_3_5_1: u64 = 17_669_177_873_671_192_148;

    #[test]
    fn status_of_the_captured_3_5_1_cluster() {
        let leader = parse_status(&at("etcd-3.5.1", "status-e1.json")).unwrap();
        assert_eq!(leader.header.cluster_id, 2_982_515_330_687_764_251);
        assert_eq!(leader.header.member_id, E1_3_5_1);
        assert_eq!((leader.header.revision, leader.header.raft_term), (42, 2));
        assert_eq!(leader.version, "3.5.1");
        assert_eq!((leader.db_size, leader.db_size_in_use), (40960, 40960));
        assert_eq!(leader.leader, Some(E1_3_5_1));
        assert_eq!(
            (
                leader.raft_term,
                leader.raft_index,
                leader.raft_applied_index
            ),
            (2, 51, 51)
        );
        assert!(leader.is_leader() && !leader.is_learner && leader.errors.is_empty());
        assert_eq!(
            (
                leader.storage_version,
                leader.db_size_quota,
                leader.downgrade
            ),
            (None, None, None),
            "3.5 has none of 3.6's fields"
        );
        for (file, member) in [
            ("status-e2.json", 4_370_638_900_422_186_701),
            ("status-e3.json", 16_787_734_565_015_463_059),
            ("one-down-status-e2.json", 4_370_638_900_422_186_701),
        ] {
            let follower = parse_status(&at("etcd-3.5.1", file)).unwrap();
            assert_eq!(follower.header.member_id, member, "{file}");
            assert_eq!(follower.leader, Some(E1_3_5_1), "{file}");
            assert!(!follower.is_leader());
        }
        let one_down = parse_status(&at("etcd-3.5.1", "one-down-status-e1.json")).unwrap();
        assert!(one_down.is_leader() && one_down.errors.is_empty());
        assert_eq!((one_down.raft_index, one_down.header.revision), (55, 45));
        // e2 and e3 stopped: e1 answers at once, without a leader.
        let alone = parse_status(&at("etcd-3.5.1", "no-quorum-status-e1.json")).unwrap();
        assert_eq!((alone.leader, alone.raft_term), (None, 2));
        assert_eq!(alone.errors, ["etcdserver: no leader"]);
        let full = parse_status(&at("etcd-3.5.1", "alarm-nospace-status.json")).unwrap();
        assert_eq!(
            full.errors,
            ["memberID:17273037450157618244 alarm:NOSPACE "]
        );
        assert_eq!((full.db_size, full.db_size_in_use), (262_144, 258_048));
        // 3.5.1 answers Status to the read-only user, and to a request without a token.
        for file in [
            "auth-status-read-only-user.json",
            "auth-status-no-token.json",
        ] {
            let status = parse_status(&at("etcd-3.5.1", file)).unwrap();
            assert_eq!(
                (status.leader, status.raft_term),
                (Some(E1_3_5_1), 3),
                "{file}"
            );
            assert_eq!(status.db_size_in_use, 32768, "{file}");
        }
    }

    #[test]
    fn member_lists_of_the_captured_3_5_1_cluster() {
        for file in ["member-list.json", "one-down-member-list.json"] {
            let list = parse_member_list(&at("etcd-3.5.1", file)).unwrap();
            let names: Vec<&str> = list.members.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, ["e2", "e3", "e1"], "{file}");
            assert_eq!(list.members[2].id, E1_3_5_1);
            assert_eq!(list.members[2].client_urls, ["http://127.0.0.11:2379"]);
            assert_eq!(list.members[2].peer_urls, ["http://127.0.0.11:2380"]);
            assert!(list.members.iter().all(|m| !m.is_learner));
        }
        // `member add --learner`, not started: listed with `isLearner`, no name, no client URL.
        for file in [
            "learner-member-list.json",
            "auth-member-list-read-only-user.json",
        ] {
            let list = parse_member_list(&at("etcd-3.5.1", file)).unwrap();
            let names: Vec<&str> = list.members.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, ["e2", "", "e3", "e1"], "{file}");
            let learner = &list.members[1];
            assert!(learner.is_learner && learner.client_urls.is_empty());
            assert_eq!(learner.id, 7_376_150_625_180_525_582);
            assert_eq!(learner.peer_urls, ["http://127.0.0.14:2380"]);
            assert_eq!(list.members.iter().filter(|m| m.is_learner).count(), 1);
        }
    }

    #[test]
    fn alarms_of_the_captured_3_5_1_cluster() {
        // 3.5.1 sends the header with no alarm (3.4.23 sent `{}`); the read-only user may ask.
        for file in ["alarm-none.json", "auth-alarm-read-only-user.json"] {
            assert_eq!(parse_alarms(&at("etcd-3.5.1", file)).unwrap(), [], "{file}");
        }
        assert_eq!(
            parse_alarms(&at("etcd-3.5.1", "alarm-nospace.json")).unwrap(),
            [Alarm {
                member_id: 17_273_037_450_157_618_244,
                alarm: AlarmType::NoSpace
            }]
        );
    }

    #[test]
    fn the_real_patroni_keys_of_3_5_1() {
        let range = parse_range(&at("etcd-3.5.1", "range-patroni.json")).unwrap();
        assert_eq!((range.count, range.kvs.len(), range.more), (10, 10, false));
        let keys = parse_patroni_keys("/service/capdemo/", &range);
        assert_eq!(keys.revision, 42);
        let leader = LeaderKey {
            name: "pg-1".into(),
            lease: 1_643_147_722_957_577_482,
            create_revision: 31,
            mod_revision: 31,
        };
        assert_eq!(keys.leader, Some(leader.clone()));
        let names: Vec<&str> = keys.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["pg-0", "pg-1"]);
        let replica = &keys.members[0];
        assert_eq!(
            (replica.role.as_deref(), replica.state.as_deref()),
            (Some("replica"), Some("running"))
        );
        assert_eq!(
            replica.api_url.as_deref(),
            Some("http://127.0.0.21:8008/patroni")
        );
        assert_eq!(replica.timeline, Some(2));
        assert_eq!(
            (
                replica.xlog_location,
                replica.receive_lsn,
                replica.replay_lsn
            ),
            (Some(11_534_776), Some(11_534_776), Some(11_534_776))
        );
        assert_eq!(replica.replication_state.as_deref(), Some("streaming"));
        assert_eq!(replica.version.as_deref(), Some("4.1.5"));
        assert_eq!(replica.lease, 1_643_147_722_957_577_477);
        assert_eq!(replica.note, None);
        assert_eq!(keys.members[1].role.as_deref(), Some("primary"));
        assert_eq!(keys.members[1].lease, leader.lease);
        assert_eq!(
            keys.sync,
            Some(SyncKey {
                leader: Some("pg-1".into()),
                sync_standby: Some("pg-0".into()),
                quorum: Some(0)
            })
        );
        let failsafe = keys.failsafe.as_ref().unwrap();
        assert_eq!(failsafe["pg-0"], "http://127.0.0.21:8008/patroni");
        assert_eq!(failsafe.len(), 2);
        let config = keys.config.as_ref().unwrap();
        assert_eq!(
            (config.ttl, config.loop_wait, config.retry_timeout),
            (Some(30), Some(10), Some(10))
        );
        let history = keys.history.as_ref().unwrap();
        assert_eq!(
            (history.len(), &history[0][4]),
            (1, &serde_json::json!("pg-1"))
        );
        assert_eq!(keys.initialize.as_deref(), Some("7713473966397211881"));
        assert_eq!(
            keys.status,
            Some(StatusKey {
                optime: Some(11_534_776)
            })
        );
        assert_eq!(keys.failover, Some(serde_json::json!({})));
        assert!(
            keys.other_keys.is_empty() && keys.notes.is_empty(),
            "{keys:?}"
        );
        // Read later (revision 45) with the read-only user's token, and without a leader
        // from e1's own copy: the same leader key.
        for file in [
            "auth-range-with-token.json",
            "no-quorum-range-serializable.json",
        ] {
            let later = parse_range(&at("etcd-3.5.1", file)).unwrap();
            let later = parse_patroni_keys("/service/capdemo/", &later);
            assert_eq!(later.revision, 45, "{file}");
            assert_eq!(later.leader.as_ref(), Some(&leader), "{file}");
            assert_eq!(later.members[0].xlog_location, Some(11_534_880), "{file}");
        }
    }

    #[test]
    fn lease_health_and_version_of_3_5_1() {
        for file in [
            "timetolive-leader.json",
            "auth-timetolive-read-only-user.json",
        ] {
            let alive = parse_lease_time_to_live(&at("etcd-3.5.1", file)).unwrap();
            assert_eq!(
                (alive.id, alive.ttl, alive.granted_ttl),
                (1_643_147_722_957_577_482, 23, 30),
                "{file}"
            );
        }
        let gone = parse_lease_time_to_live(&at("etcd-3.5.1", "timetolive-expired.json")).unwrap();
        assert_eq!((gone.id, gone.ttl, gone.granted_ttl), (1, -1, 0));
        assert!(!gone.is_alive());
        // 3.5 always sends `reason` ("" when healthy), 3.4.23 never did.
        for (file, healthy, reason) in [
            ("health.json", true, ""),
            ("one-down-health.json", true, ""),
            ("no-quorum-health.json", false, "RAFT NO LEADER"),
            ("alarm-nospace-health.json", false, "ALARM NOSPACE"),
        ] {
            let health = parse_health(&at("etcd-3.5.1", file)).unwrap();
            assert_eq!(
                (health.healthy, health.reason.as_str()),
                (healthy, reason),
                "{file}"
            );
        }
        let versions = parse_versions(&at("etcd-3.5.1", "version.json")).unwrap();
        assert_eq!(
            (versions.server.as_str(), versions.cluster_decided()),
            ("3.5.1", Some("3.5.0"))
        );
    }

    #[test]
    fn auth_and_refusals_of_3_5_1() {
        let token = parse_token(&at("etcd-3.5.1", "auth-authenticate.json")).unwrap();
        assert_eq!(token.expose(), "cSyNNYTfjgRaDAmu.69");
        // 3.5.1 sends `error`, `code`, `message` (3.4.23: `error`, `message`, `code`).
        for (file, code, text) in [
            (
                "auth-authenticate-wrong-password.json",
                3,
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            ("no-quorum-range.json", 14, "etcdserver: request timed out"),
            (
                "no-quorum-member-list.json",
                14,
                "etcdserver: request timed out",
            ),
            ("no-quorum-timetolive.json", 14, "etcdserver: no leader"),
            ("no-quorum-alarm.json", 2, "context deadline exceeded"),
            (
                "error-invalid-argument.json",
                3,
                "illegal base64 data at input byte 0",
            ),
        ] {
            let error = parse_gateway_error(&at("etcd-3.5.1", file)).unwrap();
            assert_eq!((error.code, error.text()), (code, text), "{file}");
            assert_eq!(error.error, text, "{file}: 3.5 still has `error`");
        }
        assert_eq!(
            parse_gateway_error(&at("etcd-3.5.1", "status-e1.json")),
            None
        );
        assert_eq!(
            parse_gateway_error(&at("etcd-3.5.1", "alarm-none.json")),
            None
        );
    }

    #[test]
    fn hostile_answers_are_errors_not_panics() {
        for garbage in [&b""[..], b"null", b"[]", b"{", b"\xff\xfe", b"\"status\""] {
            assert!(parse_status(garbage).is_err(), "{garbage:?}");
            assert!(parse_member_list(garbage).is_err(), "{garbage:?}");
            assert!(parse_range(garbage).is_err(), "{garbage:?}");
            assert!(parse_alarms(garbage).is_err(), "{garbage:?}");
            assert!(parse_lease_time_to_live(garbage).is_err(), "{garbage:?}");
            assert!(parse_health(garbage).is_err(), "{garbage:?}");
        }
        // Wrong types and out-of-range integers.
        for body in [
            &br#"{"dbSize":"lots"}"#[..],
            br#"{"dbSize":-1}"#,
            br#"{"leader":{"id":1}}"#,
            br#"{"header":{"member_id":"18446744073709551616"}}"#,
            br#"{"errors":"etcdserver: no leader"}"#,
            br#"{"isLearner":"yes"}"#,
        ] {
            assert!(
                parse_status(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // Numbers where etcd sends strings are read; zero values may be missing.
        let numbers = parse_status(br#"{"dbSize":5,"leader":0,"raftIndex":"7"}"#).unwrap();
        assert_eq!(
            (numbers.db_size, numbers.leader, numbers.raft_index),
            (5, None, 7)
        );
        assert_eq!(parse_status(b"{}").unwrap(), EndpointStatus::default());
        let bad_key = br#"{"kvs":[{"key":"%%%","value":""}]}"#;
        assert!(matches!(parse_range(bad_key), Err(EtcdError::Decode(_))));
        let bad_revision = br#"{"kvs":[{"key":"","mod_revision":"x"}]}"#;
        assert!(parse_range(bad_revision).is_err());
        assert_eq!(parse_range(b"{}").unwrap(), RangeAnswer::default());
    }

    fn range_of(pairs: &[(&str, &[u8])]) -> RangeAnswer {
        RangeAnswer {
            kvs: pairs
                .iter()
                .map(|(key, value)| KeyValue {
                    key: key.as_bytes().to_vec(),
                    value: value.to_vec(),
                    ..KeyValue::default()
                })
                .collect(),
            ..RangeAnswer::default()
        }
    }

    #[test]
    fn a_malformed_key_does_not_fail_the_others() {
        let range = range_of(&[
            ("/service/x/leader", b"pg1"),
            (
                "/service/x/members/pg1",
                br#"{"role":"primary","timeline":"7","xlog_location":true,"api_url":3}"#,
            ),
            ("/service/x/members/pg2", b"not json"),
            ("/service/x/members/pg3", b"[1,2]"),
            (
                "/service/x/members/pg4",
                br#"{"role":"replica","surprise":{"a":1}}"#,
            ),
            ("/service/x/members/", b"{}"),
            ("/service/x/sync", b"[]"),
            (
                "/service/x/failsafe",
                br#"{"pg1":"http://a/patroni","pg2":5}"#,
            ),
            ("/service/x/config", br#"{"ttl":"30","loop_wait":"ten"}"#),
            ("/service/x/history", b"{}"),
            ("/service/x/status", br#"{"optime":"12"}"#),
            ("/service/x/failover", b""),
            ("/service/x/optime/leader", b"100"),
            ("/service/y/leader", b"other"),
        ]);
        let keys = parse_patroni_keys("/service/x/", &range);
        assert_eq!(keys.leader.as_ref().unwrap().name, "pg1");
        let names: Vec<&str> = keys.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["pg1", "pg2", "pg3", "pg4"]);
        let pg1 = &keys.members[0];
        assert_eq!(
            (pg1.role.as_deref(), pg1.timeline),
            (Some("primary"), Some(7))
        );
        assert_eq!((pg1.xlog_location, pg1.api_url.as_deref()), (None, None));
        assert_eq!(
            pg1.note.as_deref(),
            Some("unexpected type of api_url, xlog_location")
        );
        assert!(keys.members[1]
            .note
            .as_deref()
            .unwrap()
            .starts_with("not JSON"));
        assert_eq!(keys.members[2].note.as_deref(), Some("not a JSON object"));
        assert_eq!(
            (keys.members[3].role.as_deref(), &keys.members[3].note),
            (Some("replica"), &None)
        );
        assert_eq!(keys.sync, None);
        assert_eq!(keys.failsafe.as_ref().unwrap().len(), 1);
        let config = keys.config.as_ref().unwrap();
        assert_eq!((config.ttl, config.loop_wait), (Some(30), None));
        assert_eq!(keys.history, None);
        assert_eq!(keys.status, Some(StatusKey { optime: Some(12) }));
        assert_eq!(keys.failover, Some(serde_json::Value::Null));
        assert_eq!(keys.other_keys, ["members/", "optime/leader"]);
        assert_eq!(
            keys.notes,
            [
                "sync: not a JSON object",
                "failsafe: the api_url of \"pg2\" is not a string",
                "history: not a JSON array",
                "members/pg1: unexpected type of api_url, xlog_location",
                "members/pg2: not JSON (expected ident at line 1 column 2)",
                "members/pg3: not a JSON object",
            ]
        );
    }

    #[test]
    fn prefixes() {
        assert_eq!(patroni_prefix("/service/", "batman"), "/service/batman/");
        assert_eq!(patroni_prefix("service", "batman"), "/service/batman/");
        assert_eq!(patroni_prefix("//a//", "b/"), "/a/b/");
        assert_eq!(prefix_range_end(b"/service/capdemo/"), b"/service/capdemo0");
        assert_eq!(prefix_range_end(b"a\xff"), b"b");
        assert_eq!(prefix_range_end(b"\xff\xff"), b"\0");
        assert_eq!(prefix_range_end(b""), b"\0");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
                let _ = parse_status(&body);
                let _ = parse_member_list(&body);
                let _ = parse_alarms(&body);
                let _ = parse_lease_time_to_live(&body);
                let _ = parse_health(&body);
                let _ = parse_gateway_error(&body);
                if let Ok(range) = parse_range(&body) {
                    let _ = parse_patroni_keys("/service/x/", &range);
                }
            }

            #[test]
            fn any_member_value_is_kept(value in proptest::collection::vec(any::<u8>(), 0..256)) {
                let range = range_of(&[("/p/members/m", &value)]);
                let keys = parse_patroni_keys("/p/", &range);
                prop_assert_eq!(keys.members.len(), 1);
            }
        }
    }
}
