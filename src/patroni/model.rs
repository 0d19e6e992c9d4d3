//! Typed views of Patroni's REST answers and the pure parsers that build them.
//!
//! The parsers take bytes and return values: no I/O, so every shape Patroni has been seen to
//! produce (3.x and 4.x, during switchover, failover and quorum loss) is tested against the
//! real captures in `tests/fixtures/`.
//!
//! Why the types are lenient in some places and strict in others:
//! * Fields that differ between versions or states are optional (`timeline` is missing for a
//!   stopped member, `receive_lag` exists only from 4.1, `lag` is the string `unknown` when
//!   a member has not reported an LSN). Unknown role and state strings are kept as seen,
//!   never dropped: an exporter that hides a value it does not know hides an incident.
//! * The fields that identify a member (`name`, `role`, `state`) and the types of the numbers
//!   are strict: a document that breaks them is not Patroni's, and is reported as a decode
//!   error rather than half-exported.

use serde::Deserialize;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::OffsetDateTime;

use super::PatroniError;

/// `GET /cluster`: the cluster as the DCS (here: the local Raft replica) describes it.
///
/// Without Raft quorum this is a *frozen* copy of the last replicated state, served with
/// status 200: it must never be read as proof of health on its own.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterView {
    /// The cluster name; Patroni adds it to the document (absent only in very old versions).
    #[serde(default)]
    pub scope: Option<String>,
    /// Members whose DCS key exists, sorted by name by Patroni.
    pub members: Vec<Member>,
    /// Present (and true) only in maintenance mode.
    #[serde(default)]
    pub pause: bool,
    /// A scheduled switchover, if any; only its presence is used.
    #[serde(default)]
    pub scheduled_switchover: Option<serde_json::Value>,
}

/// One entry of `/cluster`'s `members`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Member {
    pub name: String,
    /// `leader`, `standby_leader`, `sync_standby`, `quorum_standby` (4.0+), `replica`, or any
    /// value a future Patroni invents.
    pub role: String,
    /// The Postgres state, or for replicas the replication state (`streaming`,
    /// `in archive recovery`).
    pub state: String,
    /// URL of the member's own `GET /patroni`.
    #[serde(default)]
    pub api_url: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub port: Option<u32>,
    /// Missing (or null) while the member is stopped or shutting down.
    #[serde(default)]
    pub timeline: Option<u64>,
    /// Bytes behind the leader (up to 4.0: `last_lsn - xlog_location`; 4.1: the write lag).
    #[serde(default)]
    pub lag: Option<Lag>,
    /// Patroni 4.1+ only.
    #[serde(default)]
    pub receive_lag: Option<Lag>,
    /// Patroni 4.1+ only.
    #[serde(default)]
    pub replay_lag: Option<Lag>,
    #[serde(default)]
    pub pending_restart: bool,
}

/// A lag as Patroni reports it: bytes, or the string `unknown`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Lag {
    Bytes(u64),
    Text(String),
}

impl Lag {
    /// The lag in bytes, or `None` when Patroni does not know it.
    pub fn bytes(&self) -> Option<u64> {
        match self {
            Lag::Bytes(bytes) => Some(*bytes),
            Lag::Text(_) => None,
        }
    }
}

impl Member {
    /// Whether `/cluster` names this member as the holder of the leader key.
    pub fn is_leader(&self) -> bool {
        is_leader_role(&self.role)
    }
}

/// `leader` and `standby_leader` hold the leader key (the latter in a standby cluster).
pub fn is_leader_role(role: &str) -> bool {
    matches!(role, "leader" | "standby_leader")
}

/// Synchronous standbys, in the old (`sync_standby`) and the quorum commit (`quorum_standby`) modes.
pub fn is_sync_role(role: &str) -> bool {
    matches!(role, "sync_standby" | "quorum_standby")
}

impl ClusterView {
    /// The members that hold the leader key according to the DCS view.
    pub fn leaders(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|member| member.is_leader())
    }

    /// The leader's timeline, when exactly one leader reports one.
    pub fn leader_timeline(&self) -> Option<u64> {
        let mut leaders = self.leaders();
        let leader = leaders.next()?;
        if leaders.next().is_some() {
            return None;
        }
        leader.timeline
    }
}

/// `GET /patroni`: the member's own view of itself, read from its running Postgres.
///
/// Unlike `/cluster`, this does not come from the DCS, so it tells the truth when Raft has
/// lost quorum: a leader that demoted itself says `replica` here while `/cluster` still
/// calls it leader.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberStatus {
    /// A Postgres state, or `unknown` when Postgres runs but the query failed.
    pub state: Option<String>,
    /// Normalised role: Patroni 3.x says `master`, 4.x says `primary`; both become `primary`.
    pub role: Option<String>,
    pub server_version: Option<u64>,
    pub timeline: Option<u64>,
    /// Unix time at which the postmaster started.
    pub postmaster_start_time_seconds: Option<f64>,
    /// The primary's WAL position (`xlog.location`), in bytes.
    pub wal_flush_bytes: Option<u64>,
    /// A replica's received WAL position, in bytes.
    pub wal_received_bytes: Option<u64>,
    /// A replica's replayed WAL position, in bytes.
    pub wal_replayed_bytes: Option<u64>,
    /// Unix time of the last replayed transaction (null when nothing was replayed yet).
    pub replayed_timestamp_seconds: Option<f64>,
    pub replication_state: Option<String>,
    pub sync_standby: bool,
    pub quorum_standby: bool,
    pub paused: bool,
    pub pending_restart: bool,
    /// Unix time of the member's last successful DCS read. With Raft it keeps advancing
    /// without quorum (the read is local), so it is not a quorum indicator.
    pub dcs_last_seen_seconds: Option<u64>,
    pub patroni_version: Option<String>,
    pub patroni_scope: Option<String>,
    pub patroni_name: Option<String>,
}

impl MemberStatus {
    /// Whether the member says it is the writable primary.
    #[cfg(test)]
    pub fn reports_primary(&self) -> bool {
        self.role.as_deref() == Some("primary")
    }
}

/// The wire shape of `GET /patroni`, converted into [`MemberStatus`].
#[derive(Deserialize)]
struct RawMemberStatus {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    server_version: Option<u64>,
    #[serde(default)]
    timeline: Option<u64>,
    #[serde(default)]
    postmaster_start_time: Option<String>,
    #[serde(default)]
    xlog: Option<RawXlog>,
    #[serde(default)]
    replication_state: Option<String>,
    #[serde(default)]
    sync_standby: bool,
    #[serde(default)]
    quorum_standby: bool,
    #[serde(default)]
    pause: bool,
    #[serde(default)]
    pending_restart: bool,
    #[serde(default)]
    dcs_last_seen: Option<u64>,
    #[serde(default)]
    patroni: Option<RawPatroniInfo>,
}

#[derive(Deserialize)]
struct RawXlog {
    #[serde(default)]
    location: Option<u64>,
    #[serde(default)]
    received_location: Option<u64>,
    #[serde(default)]
    replayed_location: Option<u64>,
    #[serde(default)]
    replayed_timestamp: Option<String>,
}

#[derive(Deserialize)]
struct RawPatroniInfo {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// One line of `GET /history`: `[parent_timeline, switch_lsn, reason, timestamp?, new_leader?]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The timeline that *ended* at this switch.
    pub timeline: u64,
    /// WAL position of the switch, in bytes.
    pub switch_lsn: u64,
    pub reason: String,
    /// Unix time of the switch (absent in histories written by old versions).
    pub timestamp_seconds: Option<f64>,
    /// The member that became leader (since Patroni 3.0).
    pub new_leader: Option<String>,
}

/// Parses `GET /cluster`.
///
/// # Errors
/// [`PatroniError::Decode`] when the body is not JSON of the documented shape.
pub fn parse_cluster(body: &[u8]) -> Result<ClusterView, PatroniError> {
    serde_json::from_slice(body).map_err(|error| PatroniError::Decode(error.to_string()))
}

/// Parses `GET /patroni`.
///
/// # Errors
/// [`PatroniError::Decode`] when the body is not JSON of the documented shape.
pub fn parse_member_status(body: &[u8]) -> Result<MemberStatus, PatroniError> {
    let raw: RawMemberStatus =
        serde_json::from_slice(body).map_err(|error| PatroniError::Decode(error.to_string()))?;
    let xlog = raw.xlog.unwrap_or(RawXlog {
        location: None,
        received_location: None,
        replayed_location: None,
        replayed_timestamp: None,
    });
    let patroni = raw.patroni.unwrap_or(RawPatroniInfo {
        version: None,
        scope: None,
        name: None,
    });
    Ok(MemberStatus {
        state: raw.state,
        role: raw.role.map(normalize_reported_role),
        server_version: raw.server_version,
        timeline: raw.timeline,
        postmaster_start_time_seconds: raw
            .postmaster_start_time
            .as_deref()
            .and_then(parse_timestamp),
        wal_flush_bytes: xlog.location,
        wal_received_bytes: xlog.received_location,
        wal_replayed_bytes: xlog.replayed_location,
        replayed_timestamp_seconds: xlog.replayed_timestamp.as_deref().and_then(parse_timestamp),
        replication_state: raw.replication_state,
        sync_standby: raw.sync_standby,
        quorum_standby: raw.quorum_standby,
        paused: raw.pause,
        pending_restart: raw.pending_restart,
        dcs_last_seen_seconds: raw.dcs_last_seen,
        patroni_version: patroni.version,
        patroni_scope: patroni.scope,
        patroni_name: patroni.name,
    })
}

/// Patroni 3.x calls the primary `master`; 4.x calls it `primary`. Everything else is kept.
fn normalize_reported_role(role: String) -> String {
    if role == "master" {
        "primary".to_owned()
    } else {
        role
    }
}

/// Parses `GET /history`.
///
/// # Errors
/// [`PatroniError::Decode`] when the body is not an array of 3 to 5 element arrays with the
/// documented types.
pub fn parse_history(body: &[u8]) -> Result<Vec<HistoryEntry>, PatroniError> {
    let rows: Vec<Vec<serde_json::Value>> =
        serde_json::from_slice(body).map_err(|error| PatroniError::Decode(error.to_string()))?;
    rows.iter().map(|row| parse_history_row(row)).collect()
}

fn parse_history_row(row: &[serde_json::Value]) -> Result<HistoryEntry, PatroniError> {
    let invalid = || PatroniError::Decode(format!("invalid history entry: {row:?}"));
    if !(3..=5).contains(&row.len()) {
        return Err(invalid());
    }
    let timeline = row[0].as_u64().ok_or_else(invalid)?;
    let switch_lsn = row[1].as_u64().ok_or_else(invalid)?;
    let reason = row[2].as_str().ok_or_else(invalid)?.to_owned();
    let timestamp_seconds = match row.get(3) {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => {
            Some(parse_timestamp(value.as_str().ok_or_else(invalid)?).ok_or_else(invalid)?)
        }
    };
    let new_leader = match row.get(4) {
        None | Some(serde_json::Value::Null) => None,
        Some(value) => Some(value.as_str().ok_or_else(invalid)?.to_owned()),
    };
    Ok(HistoryEntry {
        timeline,
        switch_lsn,
        reason,
        timestamp_seconds,
        new_leader,
    })
}

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
    Some(parsed.unix_timestamp_nanos() as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> Vec<u8> {
        let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&full).unwrap_or_else(|error| panic!("{full}: {error}"))
    }

    #[test]
    fn cluster_3_3_8_healthy() {
        let view = parse_cluster(&fixture("patroni-3.3.8/cluster.json")).unwrap();
        assert_eq!(view.scope.as_deref(), Some("pg-test"));
        assert_eq!(view.members.len(), 3);
        assert_eq!(
            view.leaders().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["postgresql-0"]
        );
        assert_eq!(view.leader_timeline(), Some(1));
        let replica = &view.members[1];
        assert_eq!(replica.role, "sync_standby");
        assert_eq!(replica.state, "streaming");
        assert_eq!(replica.lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.receive_lag, None);
        assert_eq!(
            replica.api_url.as_deref(),
            Some("http://127.0.0.12:8008/patroni")
        );
        assert!(view.members[0].lag.is_none());
        assert!(!view.pause);
    }

    #[test]
    fn cluster_4_1_5_has_receive_and_replay_lag() {
        let view = parse_cluster(&fixture("patroni-4.1.5/01-cluster-from-m0.json")).unwrap();
        let replica = &view.members[2];
        assert_eq!(replica.receive_lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.replay_lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.timeline, Some(1));
    }

    #[test]
    fn cluster_during_switchover_has_unknown_lag_and_no_timeline() {
        let view = parse_cluster(&fixture(
            "patroni-4.1.5/02-cluster-right-after-switchover.json",
        ))
        .unwrap();
        let old_leader = &view.members[0];
        assert_eq!(old_leader.role, "replica");
        assert_eq!(old_leader.state, "stopped");
        assert_eq!(old_leader.timeline, None);
        assert_eq!(old_leader.lag.as_ref().and_then(Lag::bytes), None);
        assert_eq!(old_leader.lag, Some(Lag::Text("unknown".into())));
        assert_eq!(view.leaders().next().unwrap().name, "postgresql-1");
    }

    #[test]
    fn every_captured_cluster_document_parses() {
        for dir in ["patroni-3.3.8", "patroni-4.1.5"] {
            let base = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
            for entry in std::fs::read_dir(&base).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if !name.ends_with(".json") {
                    continue;
                }
                let body = std::fs::read(&path).unwrap();
                if name.contains("cluster") {
                    let view = parse_cluster(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(!view.members.is_empty(), "{name}");
                } else if name.contains("patroni") {
                    let status =
                        parse_member_status(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(status.role.is_some(), "{name}");
                } else if name.contains("history") {
                    parse_history(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }

    #[test]
    fn quorum_loss_view_is_frozen_but_member_tells_the_truth() {
        // The survivor 60 s after losing quorum: /cluster still shows it as leader...
        let view = parse_cluster(&fixture("patroni-4.1.5/03-cluster-survivor-t+60s.json")).unwrap();
        let survivor = view
            .members
            .iter()
            .find(|m| m.name == "postgresql-1")
            .unwrap();
        assert!(survivor.is_leader());
        // ...while its own /patroni says it demoted itself.
        let own =
            parse_member_status(&fixture("patroni-4.1.5/03-patroni-survivor-t+60s.json")).unwrap();
        assert_eq!(own.role.as_deref(), Some("replica"));
        assert!(!own.reports_primary());
    }

    #[test]
    fn member_status_3_3_8_master_is_normalized() {
        let status = parse_member_status(&fixture("patroni-3.3.8/patroni-m0.json")).unwrap();
        assert_eq!(status.role.as_deref(), Some("primary"));
        assert_eq!(status.patroni_version.as_deref(), Some("3.3.8"));
        assert!(status.wal_flush_bytes.is_some());
    }

    #[test]
    fn member_status_replica_3_3_8() {
        let status = parse_member_status(&fixture("patroni-3.3.8/patroni-m1.json")).unwrap();
        assert_eq!(status.role.as_deref(), Some("replica"));
        assert_eq!(status.state.as_deref(), Some("running"));
        assert_eq!(status.server_version, Some(150018));
        assert_eq!(status.wal_received_bytes, Some(67109008));
        assert_eq!(status.wal_replayed_bytes, Some(67109008));
        assert!(status.sync_standby);
        assert_eq!(status.replication_state.as_deref(), Some("streaming"));
        assert_eq!(status.dcs_last_seen_seconds, Some(1795312530));
        assert_eq!(status.patroni_name.as_deref(), Some("postgresql-1"));
        let start = status.postmaster_start_time_seconds.unwrap();
        // 2026-11-22 01:55:20.449452+00:00
        assert!((start - 1_795_312_520.449_452).abs() < 1e-3, "{start}");
        assert!(status.replayed_timestamp_seconds.is_some());
    }

    #[test]
    fn member_status_4_1_5_primary() {
        let status = parse_member_status(&fixture("patroni-4.1.5/01-patroni-m0.json")).unwrap();
        assert_eq!(status.role.as_deref(), Some("primary"));
        assert_eq!(status.wal_flush_bytes, Some(67108952));
        assert_eq!(status.timeline, Some(1));
    }

    #[test]
    fn history_after_recovery() {
        let history =
            parse_history(&fixture("patroni-4.1.5/04-history-after-recovery.json")).unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1].timeline, 2);
        assert_eq!(history[1].switch_lsn, 100663456);
        assert_eq!(history[1].new_leader.as_deref(), Some("postgresql-1"));
        // 2026-11-22T01:47:58.846824+00:00
        assert!((history[1].timestamp_seconds.unwrap() - 1_795_312_078.846_824).abs() < 1e-3);
        assert!(parse_history(&fixture("patroni-3.3.8/history.json"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn history_of_old_versions_has_three_elements() {
        let history = parse_history(br#"[[1, 25165984, "no recovery target specified"]]"#).unwrap();
        assert_eq!(history[0].timestamp_seconds, None);
        assert_eq!(history[0].new_leader, None);
    }

    #[test]
    fn unknown_roles_and_states_are_kept() {
        let body = br#"{"scope":"x","members":[{"name":"a","role":"future_role","state":"creating replica"}]}"#;
        let view = parse_cluster(body).unwrap();
        assert_eq!(view.members[0].role, "future_role");
        assert_eq!(view.members[0].state, "creating replica");
    }

    #[test]
    fn hostile_documents_are_decode_errors() {
        let deep = "[".repeat(100_000);
        for body in [
            b"not json".to_vec(),
            b"\xff\xfe{}".to_vec(),
            br#"{"members": "nope"}"#.to_vec(),
            br#"{"members":[{"name":"a","role":"leader","state":"running","timeline":-1}]}"#
                .to_vec(),
            br#"{"members":[{"name":"a","role":"leader","state":"running","lag":1e400}]}"#.to_vec(),
            br#"{"members":[{"name":"a","role":7,"state":"running"}]}"#.to_vec(),
            deep.into_bytes(),
        ] {
            assert!(matches!(parse_cluster(&body), Err(PatroniError::Decode(_))));
        }
        assert!(parse_history(br#"[[1]]"#).is_err());
        assert!(parse_history(br#"[["x", 1, "r"]]"#).is_err());
        assert!(parse_member_status(br#"{"server_version": "15"}"#).is_err());
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        // serde_json refuses duplicate struct fields, which keeps a confused or hostile peer
        // from choosing which of two values the exporter believes.
        let body = br#"{"members":[],"members":[]}"#;
        assert!(parse_cluster(body).is_err());
    }

    /// Property tests of every Patroni decoder (a bounded number of cases, run in CI; the
    /// `fuzz/` targets run the same decoders for longer). Whatever the bytes, a parser
    /// returns a value or a `Decode` error: it never panics, and never takes long.
    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        fn fixtures() -> Vec<Vec<u8>> {
            let mut all = Vec::new();
            for dir in ["patroni-3.3.8", "patroni-4.1.5"] {
                let base = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
                let mut paths: Vec<_> = std::fs::read_dir(&base)
                    .unwrap()
                    .map(|entry| entry.unwrap().path())
                    .filter(|path| path.extension().is_some_and(|e| e == "json"))
                    .collect();
                paths.sort();
                all.extend(paths.iter().map(|path| std::fs::read(path).unwrap()));
            }
            all
        }

        fn all_parsers(body: &[u8]) {
            for result in [
                parse_cluster(body).map(|_| ()),
                parse_member_status(body).map(|_| ()),
                parse_history(body).map(|_| ()),
            ] {
                if let Err(error) = result {
                    assert!(matches!(error, PatroniError::Decode(_)), "{error:?}");
                }
            }
        }

        /// Any JSON value, a few levels deep, with the keys Patroni uses.
        fn json() -> impl Strategy<Value = serde_json::Value> {
            let key = prop_oneof![
                Just("members".to_owned()),
                Just("name".to_owned()),
                Just("role".to_owned()),
                Just("state".to_owned()),
                Just("timeline".to_owned()),
                Just("lag".to_owned()),
                Just("api_url".to_owned()),
                Just("xlog".to_owned()),
                Just("location".to_owned()),
                Just("patroni".to_owned()),
                Just("postmaster_start_time".to_owned()),
                "[a-z_]{1,12}",
            ];
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<u64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                ".{0,24}".prop_map(serde_json::Value::from),
                Just(serde_json::Value::from("2026-11-22 01:46:11.074677+00:00")),
            ];
            leaf.prop_recursive(4, 64, 8, move |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..6)
                        .prop_map(serde_json::Value::Array),
                    proptest::collection::btree_map(key.clone(), inner, 0..8)
                        .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
                all_parsers(&body);
            }

            #[test]
            fn mutated_captures_never_panic(
                index in any::<usize>(),
                edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                cut in any::<usize>(),
            ) {
                let all = fixtures();
                let mut body = all[index % all.len()].clone();
                for (position, byte) in edits {
                    let position = position % body.len();
                    body[position] = byte;
                }
                let cut = cut % (body.len() + 1);
                all_parsers(&body);
                all_parsers(&body[..cut]);
            }

            #[test]
            fn arbitrary_json_never_panics(value in json()) {
                all_parsers(&serde_json::to_vec(&value).unwrap());
                let wrapped = serde_json::json!({"scope": "s", "members": [value]});
                all_parsers(&serde_json::to_vec(&wrapped).unwrap());
            }

            #[test]
            fn timestamps_never_panic(text in ".{0,40}") {
                let _ = parse_timestamp(&text);
            }

            #[test]
            fn valid_members_round_trip(
                name in "[a-z0-9-]{1,20}",
                role in "[a-z_]{1,16}",
                state in "[a-z ]{1,16}",
                timeline in proptest::option::of(any::<u64>()),
                lag in proptest::option::of(any::<u64>()),
            ) {
                let body = serde_json::json!({"scope": "s", "members": [
                    {"name": name, "role": role, "state": state, "timeline": timeline, "lag": lag}
                ]});
                let view = parse_cluster(&serde_json::to_vec(&body).unwrap()).unwrap();
                let member = &view.members[0];
                prop_assert_eq!(&member.name, &name);
                prop_assert_eq!(&member.role, &role);
                prop_assert_eq!(member.timeline, timeline);
                prop_assert_eq!(member.lag.as_ref().and_then(Lag::bytes), lag);
            }
        }
    }
}
