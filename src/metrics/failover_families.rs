//! Families that answer "can this cluster fail over right now?": the failover readiness, the
//! dynamic configuration it depends on, the member signals that exclude a member (tags,
//! watchdog, replay paused), failsafe mode, and the leader's own replication view.

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, families, flag, info, per_value, FamilyWriter};
use super::labels::{member_labels, member_named, scope};
use super::patroni_families::{own_numbers, own_views};
use crate::patroni::{DynamicConfig, MemberRole, MemberStatus, ReplicationPeer, SynchronousMode};
use crate::snapshot::{ClusterSnapshot, MemberSnapshot};

declare_families! {
    CLUSTER_FAILOVER_CANDIDATES: cached_gauge("patroni_cluster_failover_candidates", "Members Patroni would accept as the new leader if the leader failed now (its own rules: reachable, running, not nofailover, watchdog healthy, synchronous when synchronous mode is on, within maximum_lag_on_failover, timeline with check_timeline; none while the Raft DCS has lost its quorum). 0 with a leader up: nobody could replace it.");
    MEMBER_FAILOVER_ELIGIBLE: cached_gauge("patroni_member_failover_eligible", "1 when this member (not the leader) could be promoted now, 0 when not; see patroni_member_failover_excluded for why.");
    MEMBER_FAILOVER_EXCLUDED: cached_gauge("patroni_member_failover_excluded", "1 for each reason why this member would not be promoted now: unreachable, unknown (not asked), not_running, nofailover, watchdog, not_sync, lag, timeline, dcs_quorum (the Raft DCS lost its quorum: nobody can take the leader key), dcs_view (its own GET /cluster differs from the other members' in leader or members: its Raft replica is stale).");
    CONFIG_TTL_SECONDS: cached_gauge("patroni_config_ttl_seconds", "Dynamic configuration (GET /config, Patroni's default when unset; read every few polls, patroni_exporter_fact_read_timestamp_seconds{fact=\"config\"} says when): ttl, the leader key's lifetime.");
    CONFIG_LOOP_WAIT_SECONDS: cached_gauge("patroni_config_loop_wait_seconds", "Dynamic configuration: loop_wait, the pause between two HA cycles.");
    CONFIG_RETRY_TIMEOUT_SECONDS: cached_gauge("patroni_config_retry_timeout_seconds", "Dynamic configuration: retry_timeout, for DCS and PostgreSQL operations.");
    CONFIG_MAXIMUM_LAG_ON_FAILOVER_BYTES: cached_gauge("patroni_config_maximum_lag_on_failover_bytes", "Dynamic configuration: maximum_lag_on_failover, beyond which a replica is not promoted.");
    CONFIG_SYNCHRONOUS_MODE: cached_gauge("patroni_config_synchronous_mode", "Dynamic configuration: 1 for the synchronous_mode in force (off, on, quorum), 0 for the others.");
    CONFIG_SYNCHRONOUS_MODE_STRICT: cached_gauge("patroni_config_synchronous_mode_strict", "Dynamic configuration: 1 when synchronous_mode_strict is on (no commits without a synchronous standby).");
    CONFIG_SYNCHRONOUS_NODES: cached_gauge("patroni_config_synchronous_nodes", "Dynamic configuration: synchronous_node_count, the synchronous standbys the primary asks for (the name avoids the _count suffix of histograms).");
    CONFIG_FAILSAFE_MODE: cached_gauge("patroni_config_failsafe_mode", "Dynamic configuration: 1 when failsafe_mode is on (a leader that loses the DCS stays primary while it reaches every member over REST).");
    CONFIG_CHECK_TIMELINE: cached_gauge("patroni_config_check_timeline", "Dynamic configuration: 1 when check_timeline is on (replicas behind the cluster's timeline are not promoted).");
    CONFIG_CHANGES: counter("patroni_config_changes", "Changes of the dynamic configuration (GET /config) seen by the poller.");
    MEMBER_TAG: cached_gauge("patroni_member_tag", "The member's effective boolean tags from its own GET /patroni (nofailover also when failover_priority <= 0, nosync also when sync_priority <= 0), 1 when set.");
    MEMBER_FAILOVER_PRIORITY: cached_gauge("patroni_member_failover_priority", "The member's effective failover_priority tag (0 with nofailover; 1 when unset). Patroni prefers the highest among equally advanced candidates.");
    MEMBER_REPLICATEFROM: cached_gauge("patroni_member_replicatefrom", "1 for a member tagged replicatefrom, labelled with the member it streams from.");
    MEMBER_WATCHDOG_FAILED: cached_gauge("patroni_member_watchdog_failed", "1 when the member's watchdog is required but unhealthy (watchdog_failed): Patroni will not promote it.");
    MEMBER_FAILSAFE_ACTIVE: cached_gauge("patroni_member_failsafe_active", "1 when the member runs in failsafe mode (failsafe_mode_is_active): it lost the DCS and relies on reaching every member over REST.");
    MEMBER_WAL_REPLAY_PAUSED: cached_gauge("patroni_member_wal_replay_paused", "1 when WAL replay is paused on this replica (pg_wal_replay_pause()): it falls behind although it still receives WAL.");
    MEMBER_SCHEDULED_RESTART_TIMESTAMP_SECONDS: cached_gauge("patroni_member_scheduled_restart_timestamp_seconds", "Unix time of a restart scheduled on this member (patronictl restart --scheduled); absent when none.");
    LEADER_STREAMING_STANDBYS: cached_gauge("patroni_leader_streaming_standbys", "Standbys streaming from the leader, as the leader's PostgreSQL reports them (pg_stat_replication in its GET /patroni): true while GET /cluster is frozen.");
    LEADER_SYNCHRONOUS_STANDBYS: cached_gauge("patroni_leader_synchronous_standbys", "Standbys the leader's PostgreSQL waits for on commit (sync_state sync or quorum in pg_stat_replication).");
    MEMBER_SYNC_STATE_MISMATCH: cached_gauge("patroni_member_sync_state_mismatch", "1 when GET /cluster calls the member a synchronous (or quorum) standby but the leader's PostgreSQL does not replicate to it synchronously; 0 when they agree. Absent without the leader's own view.");
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    encode_readiness(writer, snapshots)?;
    encode_config(writer, snapshots)?;
    encode_member_signals(writer, snapshots)?;
    encode_leader_replication(writer, snapshots)
}

fn encode_readiness(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &CLUSTER_FAILOVER_CANDIDATES,
        snapshots
            .iter()
            .filter(|s| s.cluster.is_some())
            .map(|s| (scope(s), s.failover.candidates() as f64)),
    )?;
    let judged = || {
        snapshots.iter().flat_map(|s| {
            s.failover
                .members
                .iter()
                .map(move |member| (s.as_ref(), member))
        })
    };
    writer.write(
        &MEMBER_FAILOVER_ELIGIBLE,
        judged().map(|(s, m)| (member_named(s, &m.name), flag(m.eligible()))),
    )?;
    writer.write(
        &MEMBER_FAILOVER_EXCLUDED,
        judged().flat_map(|(s, m)| {
            m.exclusions
                .iter()
                .map(move |exclusion| member_named(s, &m.name).reason(exclusion.reason.as_str()))
                .map(info)
        }),
    )
}

fn encode_config(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    let configs = || {
        snapshots
            .iter()
            .filter_map(|s| Some((s.as_ref(), s.config.as_ref()?)))
    };
    let value = |select: fn(&DynamicConfig) -> f64| {
        configs().map(move |(s, config)| (scope(s), select(config)))
    };
    families! {
        writer, value;
        CONFIG_TTL_SECONDS, |c| c.ttl_seconds as f64;
        CONFIG_LOOP_WAIT_SECONDS, |c| c.loop_wait_seconds as f64;
        CONFIG_RETRY_TIMEOUT_SECONDS, |c| c.retry_timeout_seconds as f64;
        CONFIG_MAXIMUM_LAG_ON_FAILOVER_BYTES, |c| c.maximum_lag_on_failover_bytes as f64;
    }
    writer.write(
        &CONFIG_SYNCHRONOUS_MODE,
        per_value(configs(), SynchronousMode::ALL, |(s, config), mode| {
            (
                scope(s).mode(mode.as_str()),
                flag(config.synchronous_mode == mode),
            )
        }),
    )?;
    families! {
        writer, value;
        CONFIG_SYNCHRONOUS_MODE_STRICT, |c| flag(c.synchronous_mode_strict);
        CONFIG_SYNCHRONOUS_NODES, |c| c.synchronous_node_count as f64;
        CONFIG_FAILSAFE_MODE, |c| flag(c.failsafe_mode);
        CONFIG_CHECK_TIMELINE, |c| flag(c.check_timeline);
    }
    writer.write(
        &CONFIG_CHANGES,
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.config_changes)),
    )
}

/// Reads one boolean tag of a member's own view.
type TagReader = fn(&MemberStatus) -> bool;

/// Boolean tags, always exported for members that answer (0 when unset).
const BOOLEAN_TAGS: [(&str, TagReader); 5] = [
    ("nofailover", |own| own.tags.nofailover),
    ("nosync", |own| own.tags.nosync),
    ("noloadbalance", |own| own.tags.noloadbalance),
    ("clonefrom", |own| own.tags.clonefrom),
    ("nostream", |own| own.tags.nostream),
];

fn encode_member_signals(
    writer: &mut FamilyWriter,
    snapshots: &[Arc<ClusterSnapshot>],
) -> fmt::Result {
    let own_views = || own_views(snapshots);
    let own_flag = |select: fn(&MemberStatus) -> bool| {
        own_views().map(move |(s, m, own)| (member_labels(s, m), flag(select(own))))
    };
    writer.write(
        &MEMBER_TAG,
        own_views().flat_map(|(s, m, own)| {
            BOOLEAN_TAGS
                .iter()
                .map(move |(tag, select)| (member_labels(s, m).tag(tag), flag(select(own))))
        }),
    )?;
    writer.write(
        &MEMBER_FAILOVER_PRIORITY,
        own_views().map(|(s, m, own)| (member_labels(s, m), own.tags.failover_priority as f64)),
    )?;
    writer.write(
        &MEMBER_REPLICATEFROM,
        own_views()
            .filter_map(|(s, m, own)| {
                Some(member_labels(s, m).replicatefrom(own.tags.replicatefrom.as_deref()?))
            })
            .map(info),
    )?;
    writer.write(&MEMBER_WATCHDOG_FAILED, own_flag(|own| own.watchdog_failed))?;
    writer.write(&MEMBER_FAILSAFE_ACTIVE, own_flag(|own| own.failsafe_active))?;
    writer.write(
        &MEMBER_WAL_REPLAY_PAUSED,
        own_views()
            .filter(|(_, _, own)| {
                own.wal_received_bytes.is_some() || own.wal_replayed_bytes.is_some()
            })
            .map(|(s, m, own)| (member_labels(s, m), flag(own.wal_replay_paused))),
    )?;
    writer.write(
        &MEMBER_SCHEDULED_RESTART_TIMESTAMP_SECONDS,
        own_numbers(snapshots, |own| own.scheduled_restart_seconds),
    )
}

/// The leader's own view, when the member holding the leader key answered as primary.
fn leader_view(snapshot: &ClusterSnapshot) -> Option<&MemberStatus> {
    let leader: &MemberSnapshot = snapshot.members.iter().find(|m| m.member.is_leader())?;
    let own = leader.own_view.as_ref().ok()?;
    (own.role == Some(MemberRole::Primary)).then_some(own)
}

fn encode_leader_replication(
    writer: &mut FamilyWriter,
    snapshots: &[Arc<ClusterSnapshot>],
) -> fmt::Result {
    let leaders = || {
        snapshots
            .iter()
            .filter_map(|s| Some((s.as_ref(), leader_view(s)?)))
    };
    let standbys = |select: fn(&ReplicationPeer) -> bool| {
        leaders().map(move |(s, own)| {
            let selected = own.replication.iter().filter(|peer| select(peer));
            (scope(s), selected.count() as f64)
        })
    };
    writer.write(
        &LEADER_STREAMING_STANDBYS,
        standbys(ReplicationPeer::is_streaming),
    )?;
    writer.write(
        &LEADER_SYNCHRONOUS_STANDBYS,
        standbys(ReplicationPeer::is_synchronous),
    )?;
    writer.write(
        &MEMBER_SYNC_STATE_MISMATCH,
        snapshots.iter().flat_map(|s| {
            let leader = leader_view(s);
            s.members
                .iter()
                .filter(move |m| leader.is_some() && m.member.role.is_sync())
                .map(move |m| {
                    let confirmed = leader.is_some_and(|own| {
                        own.replication.iter().any(|peer| {
                            peer.application_name == m.member.name && peer.is_synchronous()
                        })
                    });
                    (member_labels(s, m), flag(!confirmed))
                })
        }),
    )
}
