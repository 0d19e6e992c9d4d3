//! Families that compare what the members and the Raft nodes each say: members out of the
//! DCS view, primaries by their own word, diverging DCS views and voter sets
//! (`snapshot::split` makes the judgements; this maps them to names).

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, flag, FamilyWriter};
use super::labels::{member_labels, member_named, node_named, scope, ScopeLabels};
use super::raft_families::raft_parts;
use crate::snapshot::{ClusterSnapshot, ViewField};

declare_families! {
    MEMBER_IN_DCS: cached_gauge("patroni_member_in_dcs", "1 when the member is listed in the GET /cluster the exporter reads; 0 for a member out of that view that still answers: remembered after it left (for 2 x ttl + loop_wait, and as long as it says primary, its liveness fails or its own GET /cluster still lists it), or found as a Raft voter without a member.");
    MEMBER_LEFT_DCS_TIMESTAMP_SECONDS: cached_gauge("patroni_member_left_dcs_timestamp_seconds", "Unix time of the first poll whose GET /cluster no longer listed this remembered member (patroni_member_in_dcs 0).");
    CLUSTER_PRIMARIES: cached_gauge("patroni_cluster_primaries", "Members, listed or remembered, that say primary (or standby_leader) in their own GET /patroni; more than 1: two servers accept writes. Compare patroni_cluster_leaders, the DCS view's count.");
    CLUSTER_MULTIPLE_PRIMARIES_POLLS: counter("patroni_cluster_multiple_primaries_polls", "Polls in which more than one member said it is primary (or standby_leader): catches a window shorter than the scrape interval.");
    CLUSTER_DCS_VIEWS: cached_gauge("patroni_cluster_dcs_views", "Distinct DCS views (leader, member set, timelines, config) among the members whose own GET /cluster answered in the last poll; 1 when they agree. A member whose view was not read (patroni_member_dcs_view_read 0) is not counted: 1 says the members agree only when every member's view was read.");
    MEMBER_DCS_VIEW_READ: cached_gauge("patroni_member_dcs_view_read", "1 when the member's own GET /cluster answered in the last poll (its view is compared in patroni_cluster_dcs_views), 0 when it was not read (timed out, failed, the member did not answer, or it was not asked: its api_url is not on an allowed host): its view is unknown, counted neither as agreeing nor as differing. Absent without the views collector.");
    MEMBER_DCS_VIEW_DIFFERS: cached_gauge("patroni_member_dcs_view_differs", "1 when the member's own GET /cluster (or GET /config, field config) differs in this field from the view most members share.");
    RAFT_VOTER_SETS: cached_gauge("patroni_raft_voter_sets", "Distinct voter sets (a node and its partners) among the Raft nodes that answered; 1 when they agree.");
    RAFT_VOTER_SET_DIFFERS: cached_gauge("patroni_raft_voter_set_differs", "1 when the node's voter set (itself and its partners) differs from the one most nodes have.");
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &MEMBER_IN_DCS,
        snapshots.iter().flat_map(|s| {
            let listed = s.members.iter().map(move |m| (member_labels(s, m), 1.0));
            listed.chain(s.departed.iter().map(move |m| (member_labels(s, m), 0.0)))
        }),
    )?;
    writer.write(
        &MEMBER_LEFT_DCS_TIMESTAMP_SECONDS,
        snapshots.iter().flat_map(|s| {
            s.departed
                .iter()
                .filter_map(move |m| Some((member_labels(s, m), m.left_dcs_at?)))
        }),
    )?;
    writer.write(
        &CLUSTER_PRIMARIES,
        snapshots
            .iter()
            .filter(|s| s.cluster.is_some() || !s.departed.is_empty())
            .map(|s| (scope(s), s.primaries().len() as f64)),
    )?;
    writer.write(
        &CLUSTER_MULTIPLE_PRIMARIES_POLLS,
        snapshots
            .iter()
            .map(|s| (scope(s), s.counters.multiple_primaries_polls)),
    )?;
    writer.write(
        &CLUSTER_DCS_VIEWS,
        nonzero_counts(snapshots.iter(), |s| s.views.distinct as u64),
    )?;
    writer.write(
        &MEMBER_DCS_VIEW_READ,
        snapshots.iter().flat_map(|s| {
            let read = s.views.members.iter().map(|m| (m.member.as_str(), 1.0));
            let unread = s.views.unread.iter().map(|m| (m.as_str(), 0.0));
            read.chain(unread)
                .map(move |(member, value)| (member_named(s, member), value))
        }),
    )?;
    writer.write(
        &MEMBER_DCS_VIEW_DIFFERS,
        snapshots.iter().flat_map(|s| {
            s.views.members.iter().flat_map(move |m| {
                ViewField::ALL
                    .into_iter()
                    .filter(move |field| *field != ViewField::Config || m.config_known)
                    .map(move |field| {
                        (
                            member_named(s, &m.member).field(field.as_str()),
                            flag(m.differs.contains(&field)),
                        )
                    })
            })
        }),
    )?;
    writer.write(
        &RAFT_VOTER_SETS,
        raft_parts(snapshots)
            .filter(|(_, r)| r.voter_sets.distinct > 0)
            .map(|(s, r)| (scope(s), r.voter_sets.distinct as f64)),
    )?;
    writer.write(
        &RAFT_VOTER_SET_DIFFERS,
        raft_parts(snapshots).flat_map(|(s, r)| {
            r.voter_sets
                .nodes
                .iter()
                .map(move |n| (node_named(s, &n.node), flag(n.differs)))
        }),
    )
}

/// Per cluster, `count` where it is above 0; 0 means there was nothing to count (no member
/// or node answered), so no sample rather than a fake zero.
pub(super) fn nonzero_counts<'a>(
    clusters: impl Iterator<Item = &'a Arc<ClusterSnapshot>>,
    count: impl Fn(&ClusterSnapshot) -> u64,
) -> impl Iterator<Item = (ScopeLabels<'a>, f64)> {
    clusters.filter_map(move |s| match count(s) {
        0 => None,
        n => Some((scope(s), n as f64)),
    })
}
