//! Families that say how close the next outage is: the quorum's margin, the data a failover
//! would lose now, lag in seconds, a stalled HA loop (liveness), the clocks that set the
//! leader key's lifetime, the REST round trips beside Patroni's own timeout for them, and who
//! is in the failsafe topology (the judgements are made in
//! `snapshot`; this maps them to names).

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, flag, FamilyWriter};
use super::labels::MemberLabels;
use super::labels::{member_labels, scope};
use super::raft_families::raft_parts;
use crate::snapshot::{ClusterSnapshot, MemberSnapshot};

declare_families! {
    RAFT_QUORUM_MARGIN: cached_gauge("patroni_raft_quorum_margin", "How many more voters can fail before the Raft quorum is lost: 1 on a healthy 3-voter cluster, 0 with one voter down, negative once lost. Absent when the quorum is not visible.");
    CLUSTER_FAILOVER_DATA_AT_RISK_BYTES: cached_gauge("patroni_cluster_failover_data_at_risk_bytes", "The WAL a failover right now would lose: the leader's position minus the received position of the best member Patroni could promote but for its lag; 0 with a synchronous standby in synchronous mode.");
    MEMBER_REPLAY_LAG_SECONDS: cached_gauge("patroni_member_replay_lag_seconds", "On a replica that is behind, seconds since the last transaction it replayed committed on the primary; 0 when not behind.");
    MEMBER_LIVENESS: cached_gauge("patroni_member_liveness", "1 when the member's GET /liveness answers 200 (its HA loop ran within ttl, 2 x ttl on a replica), 0 for 503. Asked one member per poll, in rotation: patroni_exporter_member_fact_read_timestamp_seconds{fact=\"liveness\"} says when.");
    MEMBER_READINESS: cached_gauge("patroni_member_readiness", "1 when the member's GET /readiness answers 200, 0 for 503. What it takes depends on the member's Patroni version (patroni_member_patroni_info): the leader is ready; a replica on 3.x and 4.0.x when its PostgreSQL runs and the DCS answers, from 4.1.0 only while it also streams and its lag is within maximum_lag_on_failover (unless failsafe mode is active). Asked one member per poll, in rotation, on every fourth turn (or while unknown): patroni_exporter_member_fact_read_timestamp_seconds{fact=\"readiness\"} says when.");
    MEMBER_CLOCK_OFFSET_SECONDS: cached_gauge("patroni_member_clock_offset_seconds", "How far the member's clock is ahead of the exporter's, from the Date header of its GET /patroni answer; error bars in patroni_member_clock_offset_error_seconds.");
    MEMBER_CLOCK_OFFSET_ERROR_SECONDS: cached_gauge("patroni_member_clock_offset_error_seconds", "Half the width of the interval patroni_member_clock_offset_seconds lies in: 0.5 s for the Date header's one-second resolution plus half the request's round trip.");
    MEMBER_REST_ROUND_TRIP_SECONDS: cached_gauge("patroni_member_rest_round_trip_seconds", "How long the member's GET /patroni took in the last poll, from the connect to the end of the body; absent when it did not answer. Patroni's members send one another the same request with a 2 s timeout (patroni_member_request_timeout_seconds).");
    MEMBER_REQUEST_TIMEOUT_SECONDS: cached_gauge("patroni_member_request_timeout_seconds", "The timeout Patroni gives the requests its members send one another: GET /patroni in the leader race and POST /failsafe while failsafe mode keeps a primary without the DCS. Fixed at 2 s in Patroni's source (patroni/ha.py), not configurable.");
    MEMBER_REST_THREAD_POOL_SIZE: cached_gauge("patroni_member_rest_thread_pool_size", "Patroni's restapi.thread_pool_size in force on the member: its REST API serves every request (the members' leader-race GET /patroni and POST /failsafe, health checks, exporters) from a pool of this + 1 workers. Patroni 3.3.9+, 4.0.8+, 4.1.1+ only (before, a thread per request: absent); at least 5 (Patroni raises a smaller value). source: config_file (--patroni.config-file sets it), patroni_default (5: the file does not), no_config_file (5, assumed: no --patroni.config-file). Absent when the member's own GET /patroni did not answer.");
    CLUSTER_LEADER_CLOCK_SKEW_SECONDS: cached_gauge("patroni_cluster_leader_clock_skew_seconds", "How far the primary's clock is ahead of the clock of the Raft leader's host (negative: behind): the leader key expires that much early (behind) or late (ahead). 0 when the primary runs the Raft leader.");
    MEMBER_FAILSAFE_TOPOLOGY: cached_gauge("patroni_member_failsafe_topology", "1 when the member is in the failsafe topology (GET /failsafe) that failsafe mode keeps the primary for, 0 when it is not; absent while failsafe mode is off.");
}

/// The timeout of the requests Patroni's members send one another: `GET /patroni` in the
/// leader race (`fetch_node_status`: `timeout=2, retries=0`) and `POST /failsafe`
/// (`call_failsafe_member`: `timeout=2, retries=1`), both hard-coded in `patroni/ha.py` of
/// 3.3.8 and 4.1.5. urllib3 applies it to the connect and to each read, not to the whole
/// request. A member whose REST answers take longer is counted unhealthy in the leader race,
/// and while the DCS is gone it cannot confirm the primary, which then demotes (patroni #3550).
pub const PATRONI_MEMBER_REQUEST_TIMEOUT_SECONDS: f64 = 2.0;

/// One value per member, listed or remembered, where `value` has one.
fn per_member<'a>(
    snapshots: &'a [Arc<ClusterSnapshot>],
    value: impl Fn(&MemberSnapshot) -> Option<f64> + Copy + 'a,
) -> impl Iterator<Item = (MemberLabels<'a>, f64)> + 'a {
    snapshots.iter().flat_map(move |s| {
        s.members_and_departed()
            .filter_map(move |m| Some((member_labels(s, m), value(m)?)))
    })
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &RAFT_QUORUM_MARGIN,
        raft_parts(snapshots).filter_map(|(s, r)| Some((scope(s), r.quorum.margin? as f64))),
    )?;
    writer.write(
        &CLUSTER_FAILOVER_DATA_AT_RISK_BYTES,
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.failover.data_at_risk_bytes? as f64))),
    )?;
    writer.write(
        &MEMBER_REPLAY_LAG_SECONDS,
        snapshots.iter().flat_map(|s| {
            s.members
                .iter()
                .filter_map(move |m| Some((member_labels(s, m), s.replay_lag_seconds(m)?)))
        }),
    )?;
    writer.write(
        &MEMBER_LIVENESS,
        per_member(snapshots, |m| m.probes.liveness.map(flag)),
    )?;
    writer.write(
        &MEMBER_READINESS,
        per_member(snapshots, |m| m.probes.readiness.map(flag)),
    )?;
    writer.write(
        &MEMBER_CLOCK_OFFSET_SECONDS,
        per_member(snapshots, |m| Some(m.clock?.seconds)),
    )?;
    writer.write(
        &MEMBER_CLOCK_OFFSET_ERROR_SECONDS,
        per_member(snapshots, |m| Some(m.clock?.error_seconds)),
    )?;
    writer.write(
        &MEMBER_REST_ROUND_TRIP_SECONDS,
        per_member(snapshots, |m| Some(m.round_trip?.as_secs_f64())),
    )?;
    writer.write(
        &MEMBER_REQUEST_TIMEOUT_SECONDS,
        snapshots
            .iter()
            .map(|s| (scope(s), PATRONI_MEMBER_REQUEST_TIMEOUT_SECONDS)),
    )?;
    writer.write(
        &MEMBER_REST_THREAD_POOL_SIZE,
        snapshots.iter().flat_map(|s| {
            s.members_and_departed().filter_map(move |m| {
                let size = s.rest_thread_pool_size_of(m)?;
                Some((member_labels(s, m).source(size.source.as_str()), size.value))
            })
        }),
    )?;
    writer.write(
        &CLUSTER_LEADER_CLOCK_SKEW_SECONDS,
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), s.leader_clock_skew_seconds()?))),
    )?;
    writer.write(
        &MEMBER_FAILSAFE_TOPOLOGY,
        snapshots.iter().flat_map(|s| {
            s.failsafe_members.iter().flat_map(move |topology| {
                s.members
                    .iter()
                    .map(move |m| (member_labels(s, m), flag(topology.contains(&m.member.name))))
            })
        }),
    )
}
