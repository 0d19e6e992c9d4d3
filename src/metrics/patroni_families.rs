//! Families from the Patroni REST view, and the exporter's own poll health.

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, flag, info, one_hot, FamilyWriter};
use super::labels::{member_labels, scope, MemberInfoLabels, MemberLabels, PollErrorLabels};
use crate::patroni::{ApiUrl, Lag, MemberStatus};
use crate::snapshot::{ClusterSnapshot, MemberSnapshot};

declare_families! {
    EXPORTER_POLL_DURATION_SECONDS: gauge("patroni_exporter_poll_duration_seconds", "How long the last poll of the cluster took.");
    EXPORTER_LAST_POLL_TIMESTAMP_SECONDS: gauge("patroni_exporter_last_poll_timestamp_seconds", "Unix time at which the last poll of the cluster finished; the age of every cached value.");
    EXPORTER_FACT_READ_TIMESTAMP_SECONDS: gauge("patroni_exporter_fact_read_timestamp_seconds", "Unix time of the poll that last read a fact a poll does not always read, whose last read is served in between: config (GET /config: patroni_config_*, failover readiness), history (GET /history: patroni_cluster_history_entries, _last_failover_timestamp_seconds), raft_voters (the Raft voter set, kept while no node answers: patroni_raft_voters, the quorum verdict), etcd_members (etcd's voting members, kept while the member list is not read: patroni_etcd_members, the etcd quorum verdict), etcd_versions (the etcd members' GET /version, asked every 12th poll and every poll while the members' versions change: patroni_etcd_member_info's cluster_version; the oldest endpoint's). Equal to patroni_exporter_last_poll_timestamp_seconds when the last poll read it; absent while nothing read is served.");
    EXPORTER_MEMBER_FACT_READ_TIMESTAMP_SECONDS: gauge("patroni_exporter_member_fact_read_timestamp_seconds", "Unix time of the poll that last read a member's fact asked in rotation, whose last answer is served in between: liveness (patroni_member_liveness), readiness (patroni_member_readiness), config (its own GET /config, compared in patroni_member_dcs_view_differs{field=\"config\"}). Equal to patroni_exporter_last_poll_timestamp_seconds when the last poll asked it; absent while nothing answered is served.");
    EXPORTER_POLL_ERRORS: counter("patroni_exporter_poll_errors", "Failed requests while polling, by source (cluster, member, history, raft) and error kind.");
    EXPORTER_POLLS_SKIPPED: counter("patroni_exporter_polls_skipped", "Poll intervals skipped because the previous poll was still running.");
    UP: cached_gauge("patroni_up", "1 if GET /cluster was answered by some member in the last poll.");
    CLUSTER_MEMBERS: cached_gauge("patroni_cluster_members", "Members listed by GET /cluster.");
    CLUSTER_LEADERS: cached_gauge("patroni_cluster_leaders", "Members whose role in GET /cluster is leader or standby_leader (0: none, more than 1: split).");
    CLUSTER_SYNC_STANDBYS: cached_gauge("patroni_cluster_sync_standbys", "Members whose role in GET /cluster is sync_standby or quorum_standby.");
    CLUSTER_PAUSED: cached_gauge("patroni_cluster_paused", "1 when the cluster is in maintenance mode (automatic failover disabled).");
    CLUSTER_SCHEDULED_SWITCHOVER: cached_gauge("patroni_cluster_scheduled_switchover", "1 when a switchover is scheduled.");
    CLUSTER_TIMELINE: cached_gauge("patroni_cluster_timeline", "The leader's timeline in GET /cluster; absent without exactly one leader reporting one.");
    CLUSTER_LEADER_CHANGES: counter("patroni_cluster_leader_changes", "Leader changes seen by the poller in GET /cluster.");
    CLUSTER_LAST_FAILOVER_TIMESTAMP_SECONDS: cached_gauge("patroni_cluster_last_failover_timestamp_seconds", "Unix time of the newest GET /history entry (switchover, failover or re-promotion). GET /history is read when the timeline moves: patroni_exporter_fact_read_timestamp_seconds{fact=\"history\"} says when.");
    CLUSTER_HISTORY_ENTRIES: cached_gauge("patroni_cluster_history_entries", "Entries in GET /history (timeline switches, trimmed by Patroni to max_timelines_history), as last read (patroni_exporter_fact_read_timestamp_seconds{fact=\"history\"}).");
    MEMBER_INFO: cached_gauge("patroni_member_info", "1 per member listed by GET /cluster, with its host and API URL.");
    MEMBER_ROLE: cached_gauge("patroni_member_role", "1 for the member's role in GET /cluster, 0 for the other known roles.");
    MEMBER_STATE: cached_gauge("patroni_member_state", "1 for the member's state in GET /cluster (Postgres or replication state), 0 for the other common states.");
    MEMBER_TIMELINE: cached_gauge("patroni_member_timeline", "The member's timeline in GET /cluster; absent when not reported (e.g. stopped).");
    MEMBER_LAG_BYTES: cached_gauge("patroni_member_lag_bytes", "Replication lag in bytes from GET /cluster; absent for the leader and when unknown.");
    MEMBER_RECEIVE_LAG_BYTES: cached_gauge("patroni_member_receive_lag_bytes", "Bytes of WAL not yet received by the member (Patroni 4.1+); absent when unknown.");
    MEMBER_REPLAY_LAG_BYTES: cached_gauge("patroni_member_replay_lag_bytes", "Bytes of WAL not yet replayed by the member (Patroni 4.1+); absent when unknown.");
    MEMBER_PENDING_RESTART: cached_gauge("patroni_member_pending_restart", "1 when the member needs a restart to apply configuration changes.");
    MEMBER_API_UP: cached_gauge("patroni_member_api_up", "1 if the member's own GET /patroni answered in the last poll, 0 if it failed. Absent for a member the exporter did not ask: its api_url is not on an allowed host (patroni_exporter_poll_errors_total{kind=\"api_url_not_allowed\"}).");
    MEMBER_REPORTED_ROLE: cached_gauge("patroni_member_reported_role", "1 for the role the member reports about itself in GET /patroni (master is reported as primary), 0 for the other known roles.");
    MEMBER_ROLE_MISMATCH: cached_gauge("patroni_member_role_mismatch", "1 when the member's own view contradicts GET /cluster (a leader there that reports itself as replica, or the reverse): the sign of a frozen DCS view.");
    MEMBER_POSTMASTER_START_TIME_SECONDS: cached_gauge("patroni_member_postmaster_start_time_seconds", "Unix time at which the member's Postgres started.");
    MEMBER_WAL_POSITION_BYTES: cached_gauge("patroni_member_wal_position_bytes", "WAL position reported by the member: flush (primary), received and replayed (replicas).");
    MEMBER_REPLAYED_TIMESTAMP_SECONDS: cached_gauge("patroni_member_replayed_timestamp_seconds", "Unix time of the last transaction replayed by a replica.");
    MEMBER_DCS_LAST_SEEN_TIMESTAMP_SECONDS: cached_gauge("patroni_member_dcs_last_seen_timestamp_seconds", "Unix time of the member's last DCS read. With Raft it advances without quorum too: not a quorum indicator.");
    MEMBER_SERVER_VERSION: cached_gauge("patroni_member_server_version", "The member's Postgres server version number (e.g. 150018).");
    MEMBER_REPORTED_TIMELINE: cached_gauge("patroni_member_reported_timeline", "The timeline the member reports about itself in GET /patroni.");
    MEMBER_PATRONI_INFO: cached_gauge("patroni_member_patroni_info", "1 per member, labelled with the Patroni version it runs.");
    MEMBER_PATRONI_VERSION: cached_gauge("patroni_member_patroni_version", "The Patroni version the member runs, as Patroni's own patroni_version encodes it: major*10000 + minor*100 + patch (3.3.8 -> 30308). Absent when the version is not major.minor.patch.");
}

/// Roles always exported (as 0 when not the member's), so that a role change is a value
/// change of existing series. A role outside this list is exported as seen, with value 1.
const KNOWN_ROLES: &[&str] = &[
    "leader",
    "standby_leader",
    "sync_standby",
    "quorum_standby",
    "replica",
];

/// States always exported, the common ones; rarer states (`initdb failed`, ...) are exported
/// as seen when they occur, so nothing is hidden and the series count stays small.
const KNOWN_STATES: &[&str] = &[
    "running",
    "streaming",
    "in archive recovery",
    "starting",
    "stopping",
    "stopped",
    "restarting",
    "crashed",
    "start failed",
    "creating replica",
];

/// Roles a member reports about itself (`/patroni`, normalised), always exported.
const KNOWN_REPORTED_ROLES: &[&str] = &["primary", "replica", "standby_leader"];

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    encode_exporter(writer, snapshots)?;
    encode_cluster(writer, snapshots)?;
    encode_members(writer, snapshots)?;
    encode_member_own_views(writer, snapshots)
}

/// Every (snapshot, member) pair, for per-member families.
pub(super) fn all_members(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, &MemberSnapshot)> {
    snapshots.iter().flat_map(|snapshot| {
        snapshot
            .members
            .iter()
            .map(move |member| (snapshot.as_ref(), member))
    })
}

/// Every (snapshot, member) pair of the members listed in `/cluster` and those remembered
/// after they left it: for the families read from a member's own `GET /patroni`.
fn asked_members(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, &MemberSnapshot)> {
    snapshots.iter().flat_map(|snapshot| {
        snapshot
            .members_and_departed()
            .map(move |member| (snapshot.as_ref(), member))
    })
}

/// Every member (listed or remembered) whose own `GET /patroni` answered, with that answer.
pub(super) fn own_views(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, &MemberSnapshot, &MemberStatus)> {
    asked_members(snapshots).filter_map(|(s, m)| Some((s, m, m.own_view.as_ref().ok()?)))
}

/// For each member whose own `GET /patroni` answered, `value` of that answer; no sample where
/// it is `None`.
pub(super) fn own_numbers(
    snapshots: &[Arc<ClusterSnapshot>],
    value: impl Fn(&MemberStatus) -> Option<f64>,
) -> impl Iterator<Item = (MemberLabels<'_>, f64)> {
    own_views(snapshots).filter_map(move |(s, m, own)| Some((member_labels(s, m), value(own)?)))
}

fn encode_exporter(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &EXPORTER_POLL_DURATION_SECONDS,
        snapshots
            .iter()
            .map(|s| (scope(s), s.poll_duration.as_secs_f64())),
    )?;
    writer.write(
        &EXPORTER_LAST_POLL_TIMESTAMP_SECONDS,
        snapshots.iter().map(|s| (scope(s), s.polled_at_seconds)),
    )?;
    writer.write(
        &EXPORTER_FACT_READ_TIMESTAMP_SECONDS,
        snapshots.iter().flat_map(|s| {
            s.read_at
                .each()
                .map(move |(fact, at)| (scope(s).fact(fact.as_str()), at))
        }),
    )?;
    writer.write(
        &EXPORTER_MEMBER_FACT_READ_TIMESTAMP_SECONDS,
        asked_members(snapshots).flat_map(|(s, m)| {
            m.read_at
                .each()
                .map(move |(fact, at)| (member_labels(s, m).fact(fact.as_str()), at))
        }),
    )?;
    writer.write(
        &EXPORTER_POLL_ERRORS,
        snapshots.iter().flat_map(|s| {
            s.counters
                .poll_errors
                .iter()
                .map(move |((source, kind), count)| {
                    (
                        PollErrorLabels {
                            scope: &s.scope,
                            source: source.as_str(),
                            kind: kind.as_label(),
                        },
                        *count,
                    )
                })
        }),
    )?;
    writer.write(
        &EXPORTER_POLLS_SKIPPED,
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.polls_skipped)),
    )
}

fn encode_cluster(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &UP,
        snapshots
            .iter()
            .map(|s| (scope(s), flag(s.cluster.is_some()))),
    )?;
    let answered = || {
        snapshots
            .iter()
            .filter_map(|s| s.cluster.as_ref().map(|view| (s.as_ref(), view)))
    };
    writer.write(
        &CLUSTER_MEMBERS,
        answered().map(|(s, view)| (scope(s), view.members.len() as f64)),
    )?;
    writer.write(
        &CLUSTER_LEADERS,
        answered().map(|(s, view)| (scope(s), view.leaders().count() as f64)),
    )?;
    writer.write(
        &CLUSTER_SYNC_STANDBYS,
        answered().map(|(s, view)| {
            (
                scope(s),
                view.members.iter().filter(|m| m.role.is_sync()).count() as f64,
            )
        }),
    )?;
    writer.write(
        &CLUSTER_PAUSED,
        answered().map(|(s, view)| (scope(s), flag(view.pause))),
    )?;
    writer.write(
        &CLUSTER_SCHEDULED_SWITCHOVER,
        answered().map(|(s, view)| (scope(s), flag(view.scheduled_switchover.is_some()))),
    )?;
    writer.write(
        &CLUSTER_TIMELINE,
        answered().filter_map(|(s, view)| Some((scope(s), view.leader_timeline()? as f64))),
    )?;
    writer.write(
        &CLUSTER_LEADER_CHANGES,
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.leader_changes)),
    )?;
    writer.write(
        &CLUSTER_LAST_FAILOVER_TIMESTAMP_SECONDS,
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.last_failover_seconds()?))),
    )?;
    writer.write(
        &CLUSTER_HISTORY_ENTRIES,
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.history.as_ref()?.len() as f64))),
    )
}

fn encode_members(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &MEMBER_INFO,
        all_members(snapshots).map(|(s, m)| {
            (
                MemberInfoLabels {
                    scope: &s.scope,
                    member: &m.member.name,
                    host: m.member.host.as_deref().unwrap_or(""),
                    api_url: m.member.api_url.as_ref().map_or("", ApiUrl::as_str),
                },
                1.0,
            )
        }),
    )?;
    writer.write(
        &MEMBER_ROLE,
        all_members(snapshots).flat_map(|(s, m)| {
            one_hot(m.member.role.as_str(), KNOWN_ROLES)
                .map(move |(role, value)| (member_labels(s, m).role(role), value))
        }),
    )?;
    writer.write(
        &MEMBER_STATE,
        all_members(snapshots).flat_map(|(s, m)| {
            one_hot(m.member.state.as_str(), KNOWN_STATES)
                .map(move |(state, value)| (member_labels(s, m).state(state), value))
        }),
    )?;
    writer.write(
        &MEMBER_TIMELINE,
        all_members(snapshots)
            .filter_map(|(s, m)| Some((member_labels(s, m), m.member.timeline? as f64))),
    )?;
    let lag = |select: fn(&crate::patroni::Member) -> Option<&Lag>| {
        all_members(snapshots).filter_map(move |(s, m)| {
            Some((member_labels(s, m), select(&m.member)?.bytes()? as f64))
        })
    };
    writer.write(&MEMBER_LAG_BYTES, lag(|m| m.lag.as_ref()))?;
    writer.write(&MEMBER_RECEIVE_LAG_BYTES, lag(|m| m.receive_lag.as_ref()))?;
    writer.write(&MEMBER_REPLAY_LAG_BYTES, lag(|m| m.replay_lag.as_ref()))?;
    writer.write(
        &MEMBER_PENDING_RESTART,
        all_members(snapshots).map(|(s, m)| {
            let own = m
                .own_view
                .as_ref()
                .map(|v| v.pending_restart)
                .unwrap_or(false);
            (member_labels(s, m), flag(m.member.pending_restart || own))
        }),
    )
}

fn encode_member_own_views(
    writer: &mut FamilyWriter,
    snapshots: &[Arc<ClusterSnapshot>],
) -> fmt::Result {
    writer.write(
        &MEMBER_API_UP,
        asked_members(snapshots)
            .filter(|(_, m)| !matches!(&m.own_view, Err(failure) if !failure.request_sent()))
            .map(|(s, m)| (member_labels(s, m), flag(m.own_view.is_ok()))),
    )?;
    let own_views = || own_views(snapshots);
    writer.write(
        &MEMBER_REPORTED_ROLE,
        own_views().flat_map(|(s, m, own)| {
            own.role.iter().flat_map(move |reported| {
                one_hot(reported.as_str(), KNOWN_REPORTED_ROLES)
                    .map(move |(role, value)| (member_labels(s, m).role(role), value))
            })
        }),
    )?;
    writer.write(
        &MEMBER_ROLE_MISMATCH,
        all_members(snapshots)
            .filter_map(|(s, m)| Some((member_labels(s, m), flag(m.role_mismatch()?)))),
    )?;
    writer.write(
        &MEMBER_POSTMASTER_START_TIME_SECONDS,
        own_numbers(snapshots, |own| own.postmaster_start_time_seconds),
    )?;
    writer.write(
        &MEMBER_WAL_POSITION_BYTES,
        own_views().flat_map(|(s, m, own)| {
            [
                ("flush", own.wal_flush_bytes),
                ("received", own.wal_received_bytes),
                ("replayed", own.wal_replayed_bytes),
            ]
            .into_iter()
            .filter_map(move |(kind, value)| Some((member_labels(s, m).kind(kind), value? as f64)))
        }),
    )?;
    writer.write(
        &MEMBER_REPLAYED_TIMESTAMP_SECONDS,
        own_numbers(snapshots, |own| own.replayed_timestamp_seconds),
    )?;
    writer.write(
        &MEMBER_DCS_LAST_SEEN_TIMESTAMP_SECONDS,
        own_numbers(snapshots, |own| Some(own.dcs_last_seen_seconds? as f64)),
    )?;
    writer.write(
        &MEMBER_SERVER_VERSION,
        own_numbers(snapshots, |own| Some(own.server_version? as f64)),
    )?;
    writer.write(
        &MEMBER_REPORTED_TIMELINE,
        own_numbers(snapshots, |own| Some(own.timeline? as f64)),
    )?;
    writer.write(
        &MEMBER_PATRONI_INFO,
        own_views()
            .filter_map(|(s, m, own)| {
                Some(member_labels(s, m).version(own.patroni_version.as_deref()?))
            })
            .map(info),
    )?;
    writer.write(
        &MEMBER_PATRONI_VERSION,
        own_numbers(snapshots, |own| {
            Some(f64::from(own.patroni_version_number?))
        }),
    )
}
