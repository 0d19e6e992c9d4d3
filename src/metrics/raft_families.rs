//! Families from the Raft status of each pysyncobj node, and the quorum judged from them.

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, families, flag, info, one_hot, per_value, FamilyWriter};
use super::labels::{member_labels, node_labels, node_named, scope};
use crate::raft::RaftStatus;
use crate::snapshot::{ClusterSnapshot, QuorumEvidence, RaftSnapshot, Unanswered};

declare_families! {
    RAFT_CLUSTER_QUORUM: cached_gauge("patroni_raft_cluster_quorum", "The quorum verdict: 1 confirmed (a leader or a majority of voters report has_quorum, or a follower does and is connected to its leader), 0 lost (every voter that answers reports no quorum, or a majority refuse connections), -1 not visible from this exporter (neither). The best of several exporters is their max.");
    RAFT_QUORUM_EVIDENCE: cached_gauge("patroni_raft_quorum_evidence", "1 for the evidence the quorum verdict rests on (leader, majority, follower: confirmed; no_quorum, refused: lost; not_visible), 0 for the others.");
    RAFT_VOTERS: cached_gauge("patroni_raft_voters", "Voters in the Raft configuration: the voters the answering nodes name (each itself and its partners), else those of the last poll with an answer (patroni_exporter_fact_read_timestamp_seconds{fact=\"raft_voters\"} says when), else the nodes queried.");
    RAFT_VOTERS_ANSWERING: cached_gauge("patroni_raft_voters_answering", "Voters whose Raft status the exporter read in the last poll.");
    RAFT_VOTERS_WITH_QUORUM: cached_gauge("patroni_raft_voters_with_quorum", "Answering voters that report has_quorum.");
    RAFT_VOTERS_UNANSWERED: cached_gauge("patroni_raft_voters_unanswered", "Voters that gave no status in the last poll, by reason: refused (nothing listens: the process is down), timeout, auth (the Raft password was refused), error.");
    RAFT_CLUSTER_LEADERS: cached_gauge("patroni_raft_cluster_leaders", "Raft nodes currently in state leader (more than 1 for long: split leadership).");
    RAFT_WITNESSES: cached_gauge("patroni_raft_witnesses", "Voters that run only Raft (stereo mode's watcher: no Patroni member has their host and no REST API answers there): they vote but hold no data and are never promoted. A witness stays one while it is down.");
    RAFT_NODE_INFO: cached_gauge("patroni_raft_node_info", "1 per voter, labelled with what it is to the cluster: member (a member's host), witness (runs only Raft), unknown (no member has its host and it is not known to be a witness, e.g. a removed member's voter).");
    RAFT_LEADER_AWAY_FROM_PRIMARY: cached_gauge("patroni_raft_leader_away_from_primary", "1 when the Raft leader runs on another host than the primary (or on a witness), 0 when on the primary's host; absent without a single primary or Raft leader. Every DCS write of the primary then crosses to that host.");
    MEMBER_RAFT_TIMING: cached_gauge("patroni_member_raft_timing_seconds", "The pysyncobj timing in force on the member's Raft node, by setting (min_timeout, max_timeout, connection_timeout, append_entries_period, connection_retry_time, leader_fallback_timeout, the keys of Patroni's raft: section), and where the value comes from: config_file (Patroni >= 4.2.0 passes the --patroni.config-file's raft: keys to pysyncobj), pysyncobj_default (older Patroni ignores them, or the file does not set it), no_config_file (Patroni >= 4.2.0 and no --patroni.config-file: the default, assumed). PATRONI_RAFT_* environment variables are not visible to the exporter. Absent when the member's own GET /patroni did not answer (its version is unknown).");
    RAFT_LEADER_CHANGES: counter("patroni_raft_leader_changes", "Raft leader changes seen by the poller (a different quorum-holding leader).");
    RAFT_QUORUM_LOSSES: counter("patroni_raft_quorum_losses", "Quorum verdicts of lost (0) that followed a confirmed one (1), not-visible polls in between ignored.");
    RAFT_UP: cached_gauge("patroni_raft_up", "1 if the node's Raft status query succeeded in the last poll.");
    RAFT_STATUS_ROUND_TRIP_SECONDS: cached_gauge("patroni_raft_status_round_trip_seconds", "How long the node's status query took in the last poll: connect, key exchange when there is a password, and the status reply (2 network round trips without a password, 3 with one, plus the node's own delay in answering); absent when it failed or through --raft.command. Compare with the node's patroni_raft_connection_timeout_seconds.");
    RAFT_CONNECTION_TIMEOUT: cached_gauge("patroni_raft_connection_timeout_seconds", "pysyncobj's connectionTimeout in force on the node (that of the member on its host, patroni_member_raft_timing_seconds{setting=\"connection_timeout\"}): a Raft connection that receives nothing for this long is dropped, and a connect that takes longer fails. 3.5 s (pysyncobj's default) unless Patroni >= 4.2.0 sets raft.connection_timeout. Absent for a node no answering member runs on (a witness). Compare patroni_raft_status_round_trip_seconds with it.");
    RAFT_HAS_QUORUM: cached_gauge("patroni_raft_has_quorum", "The node's has_quorum: it is connected to a majority of voters (derived from partner statuses for pysyncobj < 0.3.11).");
    RAFT_STATE: cached_gauge("patroni_raft_state", "1 for the node's Raft state (follower, candidate, leader), 0 for the others.");
    RAFT_TERM: cached_gauge("patroni_raft_term", "The node's current Raft term (raft_term).");
    RAFT_COMMIT_INDEX: cached_gauge("patroni_raft_commit_index", "The node's Raft commit index (commit_idx).");
    RAFT_LAST_APPLIED_INDEX: cached_gauge("patroni_raft_last_applied_index", "The node's last applied Raft log index (last_applied).");
    RAFT_LEADER_COMMIT_INDEX: cached_gauge("patroni_raft_leader_commit_index", "The leader's commit index as last heard by the node (leader_commit_idx); absent before it heard from a leader.");
    RAFT_LOG_ENTRIES: cached_gauge("patroni_raft_log_entries", "Entries in the node's Raft log after compaction (log_len).");
    RAFT_PARTNERS: cached_gauge("patroni_raft_partners", "Other voting nodes in the node's configuration (partner_nodes_count).");
    RAFT_READONLY_NODES: cached_gauge("patroni_raft_readonly_nodes", "Read-only nodes connected to the node (readonly_nodes_count).");
    RAFT_UPTIME_SECONDS: cached_gauge("patroni_raft_uptime_seconds", "Seconds since the node's Raft object was created.");
    RAFT_SELF_CODE_VERSION: cached_gauge("patroni_raft_self_code_version", "Highest replicated code version in the node's code (self_code_version).");
    RAFT_ENABLED_CODE_VERSION: cached_gauge("patroni_raft_enabled_code_version", "Cluster-wide enabled code version (enabled_code_version).");
    RAFT_PARTNER_CONNECTED: cached_gauge("patroni_raft_partner_connected", "1 when the node has a TCP connection to the partner (partner_node_status 2). TCP state, not liveness: a hung partner can stay connected.");
    RAFT_MATCH_INDEX: cached_gauge("patroni_raft_match_index", "Highest log index known replicated to the partner (match_idx). Filled when the node becomes leader and never cleared: stale on an ex-leader.");
    RAFT_NEXT_INDEX: cached_gauge("patroni_raft_next_index", "Next log index to send to the partner (next_node_idx). Filled when the node becomes leader and never cleared: stale on an ex-leader.");
    RAFT_LEADER: cached_gauge("patroni_raft_leader", "1 for the node this node believes leads; absent when it knows none. An isolated follower can keep naming a dead leader.");
    RAFT_INFO: cached_gauge("patroni_raft_info", "1 per reachable node, labelled with its pysyncobj version.");
}

const RAFT_STATES: &[&str] = &["follower", "candidate", "leader"];

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    let raft = || raft_parts(snapshots);
    writer.write(
        &RAFT_CLUSTER_QUORUM,
        raft().map(|(s, r)| (scope(s), r.quorum.verdict().gauge_value())),
    )?;
    writer.write(
        &RAFT_QUORUM_EVIDENCE,
        per_value(raft(), QuorumEvidence::ALL, |(s, r), evidence| {
            (
                scope(s).evidence(evidence.as_str()),
                flag(r.quorum.evidence == evidence),
            )
        }),
    )?;
    writer.write(
        &RAFT_VOTERS,
        raft()
            .filter(|(_, r)| r.quorum.voters > 0)
            .map(|(s, r)| (scope(s), r.quorum.voters as f64)),
    )?;
    writer.write(
        &RAFT_VOTERS_ANSWERING,
        raft().map(|(s, r)| (scope(s), r.quorum.answering as f64)),
    )?;
    writer.write(
        &RAFT_VOTERS_WITH_QUORUM,
        raft().map(|(s, r)| (scope(s), r.quorum.with_quorum as f64)),
    )?;
    writer.write(
        &RAFT_VOTERS_UNANSWERED,
        per_value(raft(), Unanswered::ALL, |(s, r), reason| {
            (
                scope(s).reason(reason.as_str()),
                r.quorum.unanswered(reason) as f64,
            )
        }),
    )?;
    writer.write(
        &RAFT_CLUSTER_LEADERS,
        raft().map(|(s, r)| (scope(s), r.quorum.leaders_claiming as f64)),
    )?;
    writer.write(
        &RAFT_WITNESSES,
        raft().map(|(s, r)| (scope(s), r.voter_kinds.witnesses().count() as f64)),
    )?;
    writer.write(
        &RAFT_NODE_INFO,
        raft()
            .flat_map(|(s, r)| {
                r.voter_kinds
                    .voters
                    .iter()
                    .map(move |(node, kind)| node_named(s, node).kind(kind.as_str()))
            })
            .map(info),
    )?;
    writer.write(
        &RAFT_LEADER_AWAY_FROM_PRIMARY,
        raft().filter_map(|(s, _)| Some((scope(s), flag(s.raft_leader_away_from_primary()?)))),
    )?;
    writer.write(
        &MEMBER_RAFT_TIMING,
        raft().flat_map(|(s, _)| {
            s.members_and_departed().flat_map(move |m| {
                s.raft_timing_of(m)
                    .into_iter()
                    .flatten()
                    .map(move |(setting, value)| {
                        (
                            member_labels(s, m)
                                .setting(setting.key())
                                .source(value.source.as_str()),
                            value.value,
                        )
                    })
            })
        }),
    )?;
    writer.write(
        &RAFT_LEADER_CHANGES,
        raft().map(|(s, _)| (scope(s), s.counters.dcs_leader_changes)),
    )?;
    writer.write(
        &RAFT_QUORUM_LOSSES,
        raft().map(|(s, _)| (scope(s), s.counters.dcs_quorum_losses)),
    )?;
    encode_nodes(writer, snapshots)
}

/// Every cluster whose Raft is polled, with its Raft part.
pub(super) fn raft_parts(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, &RaftSnapshot)> {
    snapshots
        .iter()
        .filter_map(|s| Some((s.as_ref(), s.dcs.raft()?)))
}

fn encode_nodes(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    let nodes =
        || raft_parts(snapshots).flat_map(|(s, r)| r.nodes.iter().map(move |node| (s, node)));
    let answered = || nodes().filter_map(|(s, node)| Some((s, node, node.status.as_ref().ok()?)));
    let number = |value: fn(&RaftStatus) -> Option<f64>| {
        answered().filter_map(move |(s, node, status)| Some((node_labels(s, node), value(status)?)))
    };

    writer.write(
        &RAFT_UP,
        nodes().map(|(s, node)| (node_labels(s, node), flag(node.status.is_ok()))),
    )?;
    writer.write(
        &RAFT_STATUS_ROUND_TRIP_SECONDS,
        nodes()
            .filter_map(|(s, node)| Some((node_labels(s, node), node.round_trip?.as_secs_f64()))),
    )?;
    writer.write(
        &RAFT_CONNECTION_TIMEOUT,
        nodes().filter_map(|(s, node)| {
            Some((node_labels(s, node), s.node_connection_timeout(node)?.value))
        }),
    )?;
    writer.write(
        &RAFT_HAS_QUORUM,
        number(|status| Some(flag(status.has_quorum))),
    )?;
    writer.write(
        &RAFT_STATE,
        answered().flat_map(|(s, node, status)| {
            one_hot(status.state.as_str(), RAFT_STATES)
                .map(move |(state, value)| (node_labels(s, node).state(state), value))
        }),
    )?;
    families! {
        writer, number;
        RAFT_TERM, |status| Some(status.raft_term as f64);
        RAFT_COMMIT_INDEX, |status| Some(status.commit_idx as f64);
        RAFT_LAST_APPLIED_INDEX, |status| Some(status.last_applied as f64);
        RAFT_LEADER_COMMIT_INDEX, |status| status.leader_commit_idx.map(|index| index as f64);
        RAFT_LOG_ENTRIES, |status| Some(status.log_len as f64);
        RAFT_PARTNERS, |status| Some(status.partner_nodes_count as f64);
        RAFT_READONLY_NODES, |status| Some(status.readonly_nodes_count as f64);
        RAFT_UPTIME_SECONDS, |status| Some(status.uptime_seconds as f64);
        RAFT_SELF_CODE_VERSION, |status| Some(status.self_code_version as f64);
        RAFT_ENABLED_CODE_VERSION, |status| Some(status.enabled_code_version as f64);
    }
    writer.write(
        &RAFT_PARTNER_CONNECTED,
        answered().flat_map(|(s, node, status)| {
            status.partners.iter().map(move |partner| {
                (
                    node_labels(s, node).partner(&partner.node),
                    flag(partner.connected()),
                )
            })
        }),
    )?;
    let per_partner = |select: fn(&RaftStatus) -> &[(String, i64)]| {
        answered().flat_map(move |(s, node, status)| {
            select(status)
                .iter()
                .map(move |(partner, index)| (node_labels(s, node).partner(partner), *index as f64))
        })
    };
    writer.write(&RAFT_MATCH_INDEX, per_partner(|status| &status.match_idx))?;
    writer.write(&RAFT_NEXT_INDEX, per_partner(|status| &status.next_idx))?;
    writer.write(
        &RAFT_LEADER,
        answered()
            .filter_map(|(s, node, status)| {
                Some(node_labels(s, node).leader(status.leader.as_deref()?))
            })
            .map(info),
    )?;
    writer.write(
        &RAFT_INFO,
        answered()
            .map(|(s, node, status)| node_labels(s, node).version(&status.version))
            .map(info),
    )
}
