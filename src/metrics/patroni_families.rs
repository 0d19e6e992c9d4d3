//! Families from the Patroni REST view, and the exporter's own poll health.

use std::fmt;
use std::sync::Arc;

use super::families::{flag, info, one_hot, FamilyWriter};
use super::labels::{member_labels, scope, MemberInfoLabels, MemberLabels, PollErrorLabels};
use crate::patroni::{ApiUrl, Lag, MemberStatus};
use crate::snapshot::{ClusterSnapshot, MemberSnapshot};

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
    writer.gauge(
        "patroni_exporter_poll_duration_seconds",
        "How long the last poll of the cluster took.",
        snapshots
            .iter()
            .map(|s| (scope(s), s.poll_duration.as_secs_f64())),
    )?;
    writer.gauge(
        "patroni_exporter_last_poll_timestamp_seconds",
        "Unix time at which the last poll of the cluster finished; the age of every cached value.",
        snapshots.iter().map(|s| (scope(s), s.polled_at_seconds)),
    )?;
    writer.counter(
        "patroni_exporter_poll_errors",
        "Failed requests while polling, by source (cluster, member, history, raft) and error kind.",
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
    writer.counter(
        "patroni_exporter_polls_skipped",
        "Poll intervals skipped because the previous poll was still running.",
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.polls_skipped)),
    )
}

fn encode_cluster(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.cached_gauge(
        "patroni_up",
        "1 if GET /cluster was answered by some member in the last poll.",
        snapshots
            .iter()
            .map(|s| (scope(s), flag(s.cluster.is_some()))),
    )?;
    let answered = || {
        snapshots
            .iter()
            .filter_map(|s| s.cluster.as_ref().map(|view| (s.as_ref(), view)))
    };
    writer.cached_gauge(
        "patroni_cluster_members",
        "Members listed by GET /cluster.",
        answered().map(|(s, view)| (scope(s), view.members.len() as f64)),
    )?;
    writer.cached_gauge(
        "patroni_cluster_leaders",
        "Members whose role in GET /cluster is leader or standby_leader (0: none, more than 1: split).",
        answered().map(|(s, view)| (scope(s), view.leaders().count() as f64)),
    )?;
    writer.cached_gauge(
        "patroni_cluster_sync_standbys",
        "Members whose role in GET /cluster is sync_standby or quorum_standby.",
        answered().map(|(s, view)| {
            (
                scope(s),
                view.members.iter().filter(|m| m.role.is_sync()).count() as f64,
            )
        }),
    )?;
    writer.cached_gauge(
        "patroni_cluster_paused",
        "1 when the cluster is in maintenance mode (automatic failover disabled).",
        answered().map(|(s, view)| (scope(s), flag(view.pause))),
    )?;
    writer.cached_gauge(
        "patroni_cluster_scheduled_switchover",
        "1 when a switchover is scheduled.",
        answered().map(|(s, view)| (scope(s), flag(view.scheduled_switchover.is_some()))),
    )?;
    writer.cached_gauge(
        "patroni_cluster_timeline",
        "The leader's timeline in GET /cluster; absent without exactly one leader reporting one.",
        answered().filter_map(|(s, view)| Some((scope(s), view.leader_timeline()? as f64))),
    )?;
    writer.counter(
        "patroni_cluster_leader_changes",
        "Leader changes seen by the poller in GET /cluster.",
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.leader_changes)),
    )?;
    writer.cached_gauge(
        "patroni_cluster_last_failover_timestamp_seconds",
        "Unix time of the newest GET /history entry (switchover, failover or re-promotion).",
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.last_failover_seconds()?))),
    )?;
    writer.cached_gauge(
        "patroni_cluster_history_entries",
        "Entries in GET /history (timeline switches, trimmed by Patroni to max_timelines_history).",
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.history.as_ref()?.len() as f64))),
    )
}

fn encode_members(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.cached_gauge(
        "patroni_member_info",
        "1 per member listed by GET /cluster, with its host and API URL.",
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
    writer.cached_gauge(
        "patroni_member_role",
        "1 for the member's role in GET /cluster, 0 for the other known roles.",
        all_members(snapshots).flat_map(|(s, m)| {
            one_hot(m.member.role.as_str(), KNOWN_ROLES)
                .map(move |(role, value)| (member_labels(s, m).role(role), value))
        }),
    )?;
    writer.cached_gauge(
        "patroni_member_state",
        "1 for the member's state in GET /cluster (Postgres or replication state), 0 for the other common states.",
        all_members(snapshots).flat_map(|(s, m)| {
            one_hot(m.member.state.as_str(), KNOWN_STATES).map(move |(state, value)| {
                (
                    member_labels(s, m).state(state),
                    value,
                )
            })
        }),
    )?;
    writer.cached_gauge(
        "patroni_member_timeline",
        "The member's timeline in GET /cluster; absent when not reported (e.g. stopped).",
        all_members(snapshots)
            .filter_map(|(s, m)| Some((member_labels(s, m), m.member.timeline? as f64))),
    )?;
    let lag = |select: fn(&crate::patroni::Member) -> Option<&Lag>| {
        all_members(snapshots).filter_map(move |(s, m)| {
            Some((member_labels(s, m), select(&m.member)?.bytes()? as f64))
        })
    };
    writer.cached_gauge(
        "patroni_member_lag_bytes",
        "Replication lag in bytes from GET /cluster; absent for the leader and when unknown.",
        lag(|m| m.lag.as_ref()),
    )?;
    writer.cached_gauge(
        "patroni_member_receive_lag_bytes",
        "Bytes of WAL not yet received by the member (Patroni 4.1+); absent when unknown.",
        lag(|m| m.receive_lag.as_ref()),
    )?;
    writer.cached_gauge(
        "patroni_member_replay_lag_bytes",
        "Bytes of WAL not yet replayed by the member (Patroni 4.1+); absent when unknown.",
        lag(|m| m.replay_lag.as_ref()),
    )?;
    writer.cached_gauge(
        "patroni_member_pending_restart",
        "1 when the member needs a restart to apply configuration changes.",
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
    writer.cached_gauge(
        "patroni_member_api_up",
        "1 if the member's own GET /patroni answered in the last poll, 0 if it failed. Absent for a member the exporter did not ask: its api_url is not on an allowed host (patroni_exporter_poll_errors_total{kind=\"api_url_not_allowed\"}).",
        asked_members(snapshots)
            .filter(|(_, m)| !matches!(&m.own_view, Err(failure) if !failure.request_sent()))
            .map(|(s, m)| (member_labels(s, m), flag(m.own_view.is_ok()))),
    )?;
    let own_views = || own_views(snapshots);
    writer.cached_gauge(
        "patroni_member_reported_role",
        "1 for the role the member reports about itself in GET /patroni (master is reported as primary), 0 for the other known roles.",
        own_views().flat_map(|(s, m, own)| {
            own.role.iter().flat_map(move |reported| {
                one_hot(reported.as_str(), KNOWN_REPORTED_ROLES).map(move |(role, value)| {
                    (
                        member_labels(s, m).role(role),
                        value,
                    )
                })
            })
        }),
    )?;
    writer.cached_gauge(
        "patroni_member_role_mismatch",
        "1 when the member's own view contradicts GET /cluster (a leader there that reports itself as replica, or the reverse): the sign of a frozen DCS view.",
        all_members(snapshots).filter_map(|(s, m)| Some((member_labels(s, m), flag(m.role_mismatch()?)))),
    )?;
    writer.cached_gauge(
        "patroni_member_postmaster_start_time_seconds",
        "Unix time at which the member's Postgres started.",
        own_numbers(snapshots, |own| own.postmaster_start_time_seconds),
    )?;
    writer.cached_gauge(
        "patroni_member_wal_position_bytes",
        "WAL position reported by the member: flush (primary), received and replayed (replicas).",
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
    writer.cached_gauge(
        "patroni_member_replayed_timestamp_seconds",
        "Unix time of the last transaction replayed by a replica.",
        own_numbers(snapshots, |own| own.replayed_timestamp_seconds),
    )?;
    writer.cached_gauge(
        "patroni_member_dcs_last_seen_timestamp_seconds",
        "Unix time of the member's last DCS read. With Raft it advances without quorum too: not a quorum indicator.",
        own_numbers(snapshots, |own| Some(own.dcs_last_seen_seconds? as f64)),
    )?;
    writer.cached_gauge(
        "patroni_member_server_version",
        "The member's Postgres server version number (e.g. 150018).",
        own_numbers(snapshots, |own| Some(own.server_version? as f64)),
    )?;
    writer.cached_gauge(
        "patroni_member_reported_timeline",
        "The timeline the member reports about itself in GET /patroni.",
        own_numbers(snapshots, |own| Some(own.timeline? as f64)),
    )?;
    writer.cached_gauge(
        "patroni_member_patroni_info",
        "1 per member, labelled with the Patroni version it runs.",
        own_views()
            .filter_map(|(s, m, own)| {
                Some(member_labels(s, m).version(own.patroni_version.as_deref()?))
            })
            .map(info),
    )?;
    writer.cached_gauge(
        "patroni_member_patroni_version",
        "The Patroni version the member runs, as Patroni's own patroni_version encodes it: major*10000 + minor*100 + patch (3.3.8 -> 30308). Absent when the version is not major.minor.patch.",
        own_numbers(snapshots, |own| Some(f64::from(own.patroni_version_number?))),
    )
}
