//! `GET /patroni`: a member's own view of itself, from its running PostgreSQL.

use std::borrow::Cow;

use serde::Deserialize;

use super::role::{MemberRole, MemberState};
use super::tags::{tags_from_json, MemberTags};
use super::timestamp::parse_timestamp;
use crate::patroni::PatroniError;

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

/// `GET /patroni`: the member's own view of itself, read from its running Postgres.
///
/// Unlike `/cluster`, this does not come from the DCS, so it tells the truth when Raft has
/// lost quorum: a leader that demoted itself says `replica` here while `/cluster` still
/// calls it leader.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemberStatus {
    /// A Postgres state, or `unknown` when Postgres runs but the query failed.
    pub state: Option<MemberState>,
    /// Normalised role: Patroni 3.x says `master`, 4.x says `primary`; both become
    /// [`MemberRole::Primary`].
    pub role: Option<MemberRole>,
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
    /// A replica's `streaming` or `in archive recovery`.
    pub replication_state: Option<MemberState>,
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
    /// `patroni_version` as Patroni's own `/metrics` encodes it (3.3.8 -> 30308); `None` when
    /// the version is absent or not `major.minor.patch` (see [`encode_patroni_version`]).
    pub patroni_version_number: Option<u32>,
    pub patroni_scope: Option<String>,
    pub patroni_name: Option<String>,
}

impl MemberStatus {
    /// Whether the member says it is the writable primary.
    #[cfg(test)]
    pub fn reports_primary(&self) -> bool {
        self.role == Some(MemberRole::Primary)
    }
}

/// The wire shape of `GET /patroni`, converted into [`MemberStatus`].
///
/// The texts read only to be converted (state, role, timestamps) are borrowed from the body
/// where they lie (`Cow`: a string with escapes is still copied), not each made a `String`
/// and dropped: three `/patroni` per poll of every cluster.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawMemberStatus<'a> {
    state: Option<MemberState>,
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    server_version: Option<u64>,
    timeline: Option<u64>,
    #[serde(borrow)]
    postmaster_start_time: Option<Cow<'a, str>>,
    #[serde(borrow)]
    xlog: Option<RawXlog<'a>>,
    replication_state: Option<MemberState>,
    sync_standby: bool,
    quorum_standby: bool,
    pause: bool,
    pending_restart: bool,
    dcs_last_seen: Option<u64>,
    patroni: Option<RawPatroniInfo>,
    #[serde(deserialize_with = "tags_from_json")]
    tags: MemberTags,
    watchdog_failed: bool,
    failsafe_mode_is_active: bool,
    #[serde(borrow)]
    scheduled_restart: Option<RawScheduledRestart<'a>>,
    replication: Vec<RawReplicationPeer>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawScheduledRestart<'a> {
    #[serde(borrow)]
    schedule: Option<Cow<'a, str>>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawReplicationPeer {
    application_name: Option<String>,
    state: Option<String>,
    sync_state: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawXlog<'a> {
    location: Option<u64>,
    received_location: Option<u64>,
    replayed_location: Option<u64>,
    #[serde(borrow)]
    replayed_timestamp: Option<Cow<'a, str>>,
    paused: bool,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawPatroniInfo {
    version: Option<String>,
    scope: Option<String>,
    name: Option<String>,
}

/// Parses `GET /patroni`.
///
/// # Errors
/// [`PatroniError::Json`] when the body is not JSON of the documented shape.
pub fn parse_member_status(body: &[u8]) -> Result<MemberStatus, PatroniError> {
    let raw: RawMemberStatus<'_> = serde_json::from_slice(body)?;
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
        role: raw.role.as_deref().map(MemberRole::reported),
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
        patroni_version_number: patroni.version.as_deref().and_then(encode_patroni_version),
        patroni_version: patroni.version,
        patroni_scope: patroni.scope,
        patroni_name: patroni.name,
    })
}

/// Patroni's own `/metrics` says `patroni_version` as each dotted part padded to two digits
/// and joined (`''.join(x.zfill(2) for x in version.split('.'))` in api.py): 3.3.8 -> 030308,
/// read by Prometheus as 30308. Dashboards written for it (the Charmed PostgreSQL one reads
/// its template variables from this series) need the same number. Only a plain
/// `major.minor.patch` with parts below 100 is encoded: a longer or non-numeric version
/// (`4.1.0.dev0`, `4.0.0rc1`) or a part of three digits would give Patroni a number that does
/// not order like the version, so it gives none here.
pub(super) fn encode_patroni_version(version: &str) -> Option<u32> {
    let mut parts = version.split('.');
    let mut number = 0;
    for _ in 0..3 {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        number = number * 100 + part.parse::<u32>().ok()?;
    }
    parts.next().is_none().then_some(number)
}
