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
    /// The member's tags as the DCS holds them (`/cluster` lists them from Patroni 2.0).
    #[serde(default, deserialize_with = "tags_from_json")]
    pub tags: MemberTags,
}

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
fn tags_from_json<'de, D>(deserializer: D) -> Result<MemberTags, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(match value {
        serde_json::Value::Object(map) => MemberTags::from_map(&map),
        _ => MemberTags::default(),
    })
}

/// One standby as the leader's PostgreSQL sees it (`replication` in the leader's
/// `GET /patroni`, from `pg_stat_replication`). It does not come from the DCS, so it stays
/// true while `/cluster` is frozen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationPeer {
    /// The standby's `application_name`: its member name.
    pub application_name: String,
    /// `streaming`, `catchup`, `startup`, ...
    pub state: String,
    /// `async`, `potential`, `sync` or `quorum`.
    pub sync_state: String,
}

impl ReplicationPeer {
    pub fn is_streaming(&self) -> bool {
        self.state == "streaming"
    }

    /// Whether the leader's PostgreSQL waits for this standby on commit.
    pub fn is_synchronous(&self) -> bool {
        matches!(self.sync_state.as_str(), "sync" | "quorum")
    }
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
    /// Maintenance mode (`pause`).
    pub paused: bool,
    pub pending_restart: bool,
    /// `xlog.paused`: WAL replay paused on a replica (`pg_wal_replay_pause()`).
    pub wal_replay_paused: bool,
    /// The effective tags (configured merged with dynamic ones).
    pub tags: MemberTags,
    /// The watchdog is required by the configuration but not healthy: Patroni will not
    /// promote this member.
    pub watchdog_failed: bool,
    /// The member runs in failsafe mode: it lost the DCS but every member answered its
    /// `POST /failsafe`, so it kept (or keeps following) the leader without a DCS.
    pub failsafe_active: bool,
    /// Unix time of a scheduled restart of this member.
    pub scheduled_restart_seconds: Option<f64>,
    /// The leader's `pg_stat_replication`, empty on replicas.
    pub replication: Vec<ReplicationPeer>,
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
    #[serde(default, deserialize_with = "tags_from_json")]
    tags: MemberTags,
    #[serde(default)]
    watchdog_failed: bool,
    #[serde(default)]
    failsafe_mode_is_active: bool,
    #[serde(default)]
    scheduled_restart: Option<RawScheduledRestart>,
    #[serde(default)]
    replication: Vec<RawReplicationPeer>,
}

#[derive(Deserialize)]
struct RawScheduledRestart {
    #[serde(default)]
    schedule: Option<String>,
}

#[derive(Deserialize)]
struct RawReplicationPeer {
    #[serde(default)]
    application_name: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    sync_state: Option<String>,
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
    #[serde(default)]
    paused: bool,
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
        paused: false,
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
        wal_replay_paused: xlog.paused,
        tags: raw.tags,
        watchdog_failed: raw.watchdog_failed,
        failsafe_active: raw.failsafe_mode_is_active,
        scheduled_restart_seconds: raw
            .scheduled_restart
            .and_then(|restart| restart.schedule)
            .as_deref()
            .and_then(parse_timestamp),
        replication: raw
            .replication
            .into_iter()
            .filter_map(|peer| {
                Some(ReplicationPeer {
                    application_name: peer.application_name?,
                    state: peer.state.unwrap_or_default(),
                    sync_state: peer.sync_state.unwrap_or_default(),
                })
            })
            .collect(),
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

    use crate::fixture;

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
    fn tags_are_read_as_patroni_reads_them() {
        let status = |tags: &str| {
            parse_member_status(format!(r#"{{"state": "running", "tags": {tags}}}"#).as_bytes())
                .unwrap()
                .tags
        };
        let none = status("{}");
        assert_eq!(
            (none.any, none.nofailover, none.failover_priority),
            (false, false, 1)
        );
        let priority_zero = status(r#"{"failover_priority": 0}"#);
        assert!(
            priority_zero.nofailover,
            "failover_priority 0 means nofailover"
        );
        assert_eq!(priority_zero.failover_priority, 0);
        let overridden = status(r#"{"nofailover": false, "failover_priority": "0"}"#);
        assert!(
            !overridden.nofailover,
            "the boolean tag wins over the priority"
        );
        let truthy = status(
            r#"{"nofailover": "false", "nosync": 1, "noloadbalance": true, "clonefrom": true,
                "nostream": true, "replicatefrom": "postgresql-1"}"#,
        );
        assert!(
            truthy.nofailover,
            "Python's bool(\"false\") is true, as in Patroni"
        );
        assert_eq!(truthy.failover_priority, 0);
        assert!(truthy.nosync && truthy.noloadbalance && truthy.clonefrom && truthy.nostream);
        assert_eq!(truthy.replicatefrom.as_deref(), Some("postgresql-1"));
        assert_eq!(
            status("[1]"),
            MemberTags::default(),
            "tags that are not an object"
        );
    }

    #[test]
    fn member_signals_of_patroni_4_are_read() {
        let status = parse_member_status(
            br#"{"state": "running", "role": "replica", "watchdog_failed": true,
                 "failsafe_mode_is_active": true,
                 "scheduled_restart": {"schedule": "2026-11-23T15:00:00+00:00"},
                 "xlog": {"received_location": 5, "replayed_location": 4, "paused": true}}"#,
        )
        .unwrap();
        assert!(status.watchdog_failed && status.failsafe_active && status.wal_replay_paused);
        assert_eq!(status.scheduled_restart_seconds, Some(1_795_446_000.0));
        let leader = parse_member_status(&fixture("patroni-4.1.5/01-patroni-m0.json")).unwrap();
        assert_eq!(leader.replication.len(), 2);
        assert!(leader
            .replication
            .iter()
            .all(|p| p.is_streaming() && p.is_synchronous()));
        assert_eq!(leader.replication[0].application_name, "postgresql-2");
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
                crate::patroni::parse_dynamic_config(body).map(|_| ()),
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
