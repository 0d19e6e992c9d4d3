//! Families from a cluster's etcd: each member's own status, the cluster's facts (members,
//! alarms, Patroni's keys and the leader key's lease), the quorum judged from them, and which
//! members' own DCS views are stale against the keys.
//!
//! Not etcd's histograms or gRPC rates: etcd's own `/metrics` and etcd-mixin have them
//! (docs/metrics.md says which to scrape); these are what only the exporter can say of this
//! Patroni cluster.

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, flag, info, per_value, FamilyWriter};
use super::labels::{member_named, scope, EtcdEndpointLabels, ScopeLabels};
use crate::etcd::{AlarmType, EndpointReading};
use crate::snapshot::{ClusterSnapshot, EtcdEvidence, EtcdSnapshot};

declare_families! {
    ETCD_QUORUM_EVIDENCE: cached_gauge("patroni_etcd_quorum_evidence", "1 for the evidence the etcd quorum verdict (patroni_dcs_quorum{dcs=\"etcd\"}) rests on (leader: the leader says it leads; majority: a majority of voting members name one leader; health: Status refused to the exporter's user and a majority answer /health true; no_leader, refused: lost; not_visible), 0 for the others.");
    ETCD_MEMBERS: cached_gauge("patroni_etcd_members", "Voting members of the etcd cluster: its member list, else as many as last known (patroni_exporter_fact_read_timestamp_seconds{fact=\"etcd_members\"} says when), else the endpoints asked.");
    ETCD_LEARNERS: cached_gauge("patroni_etcd_learners", "Learners in etcd's member list: members that replicate but do not vote.");
    ETCD_MEMBERS_ANSWERING: cached_gauge("patroni_etcd_members_answering", "Voting etcd members whose Status (or, where Status is refused to the exporter's user, /health) answered in the last poll.");
    ETCD_LEADER_CHANGES: counter("patroni_etcd_leader_changes", "etcd leader changes seen by the poller (another member as the leader the answering members agree on).");
    ETCD_QUORUM_LOSSES: counter("patroni_etcd_quorum_losses", "etcd quorum verdicts of lost (0) that followed a confirmed one (1), not-visible polls in between ignored.");
    ETCD_ALARMS: cached_gauge("patroni_etcd_alarms", "etcd members with the alarm active (NOSPACE: the database reached its quota and etcd refuses writes: Patroni's keys are not updated and a new leader key cannot be written; CORRUPT). Absent when the alarms could not be read.");
    ETCD_LEADER_KEY_TTL_SECONDS: cached_gauge("patroni_etcd_leader_key_ttl_seconds", "Seconds left on the lease of Patroni's leader key in etcd (its ttl, renewed every loop_wait by the leader): a leader that stops renewing loses the key when it reaches 0. Absent without a leader key or when its lease could not be read.");
    ETCD_MEMBER_KEYS: cached_gauge("patroni_etcd_member_keys", "Patroni's member keys (members/<name>) under the cluster's prefix in etcd, as read directly from etcd.");
    ETCD_UNREADABLE: cached_gauge("patroni_etcd_unreadable", "1 when the exporter asked etcd for the fact (status: a member's Status, answered by /health instead; members, alarms, keys, leader_lease) and could not read it in the last poll (typically refused to its user), 0 when read; absent when not asked. Nothing is judged from a fact that could not be read.");
    ETCD_UP: cached_gauge("patroni_etcd_up", "1 if the etcd endpoint answered its Status (or, where Status is refused to the exporter's user, /health) in the last poll.");
    ETCD_MEMBER_INFO: cached_gauge("patroni_etcd_member_info", "1 per answering etcd endpoint, labelled with the member's name, its etcd version and the cluster version it answered on GET /version (the version the members agreed to speak: behind the members' own during a rolling upgrade; empty when not known).");
    ETCD_HAS_LEADER: cached_gauge("patroni_etcd_has_leader", "1 when the etcd member knows a leader (its Status names one; /health where Status is refused), 0 when it knows none.");
    ETCD_IS_LEADER: cached_gauge("patroni_etcd_is_leader", "1 when the etcd member is the leader by its own Status, 0 otherwise.");
    ETCD_IS_LEARNER: cached_gauge("patroni_etcd_is_learner", "1 when the etcd member is a learner (does not vote) by its own Status.");
    ETCD_RAFT_TERM: cached_gauge("patroni_etcd_raft_term", "The etcd member's Raft term (raftTerm of its Status).");
    ETCD_RAFT_INDEX: cached_gauge("patroni_etcd_raft_index", "The etcd member's committed Raft index (raftIndex of its Status).");
    ETCD_RAFT_APPLIED_INDEX: cached_gauge("patroni_etcd_raft_applied_index", "The etcd member's applied Raft index (raftAppliedIndex of its Status).");
    ETCD_DB_SIZE_BYTES: cached_gauge("patroni_etcd_db_size_bytes", "The etcd member's database size on disk (dbSize): what its quota (patroni_etcd_db_quota_bytes, 2 GiB by default) is compared with.");
    ETCD_DB_SIZE_IN_USE_BYTES: cached_gauge("patroni_etcd_db_size_in_use_bytes", "The part of the etcd member's database in use (dbSizeInUse); the rest is freed pages that a defragmentation returns.");
    ETCD_DB_QUOTA_BYTES: cached_gauge("patroni_etcd_db_quota_bytes", "The etcd member's backend quota (dbSizeQuota, reported by etcd 3.6 and later; absent before).");
    ETCD_STATUS_ROUND_TRIP_SECONDS: cached_gauge("patroni_etcd_status_round_trip_seconds", "How long the etcd member's Status took in the last poll; absent when it failed.");
    MEMBER_DCS_VIEW_STALE: cached_gauge("patroni_member_dcs_view_stale", "1 when the member's own GET /cluster names another leader or another member set than Patroni's keys read directly from etcd (through the leader, unchanged since the last poll): its watch of etcd is stale (zalando/patroni #3359); 0 when they agree. etcd only; absent when either could not be read.");
}

/// Every cluster on etcd, with its etcd part.
fn etcd_parts(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, &EtcdSnapshot)> {
    snapshots
        .iter()
        .filter_map(|s| Some((s.as_ref(), s.dcs.etcd()?)))
}

/// The endpoint's label: its URL as given, without the trailing `/` a URL's path adds.
fn endpoint_labels<'a>(
    s: &'a ClusterSnapshot,
    reading: &'a EndpointReading,
) -> EtcdEndpointLabels<'a> {
    scope(s).endpoint(reading.endpoint.as_str().trim_end_matches('/'))
}

/// The alarms always written (0 when none is active), and then any other one active.
const KNOWN_ALARMS: [&str; 2] = ["NOSPACE", "CORRUPT"];

fn alarm_name(alarm: &AlarmType) -> &str {
    match alarm {
        AlarmType::NoSpace => "NOSPACE",
        AlarmType::Corrupt => "CORRUPT",
        AlarmType::Other(name) => name,
    }
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    let etcd = || etcd_parts(snapshots);
    writer.write(
        &ETCD_QUORUM_EVIDENCE,
        per_value(etcd(), EtcdEvidence::ALL, |(s, e), evidence| {
            (
                scope(s).evidence(evidence.as_str()),
                flag(e.quorum.evidence == evidence),
            )
        }),
    )?;
    writer.write(
        &ETCD_MEMBERS,
        etcd()
            .filter(|(_, e)| e.quorum.voters > 0)
            .map(|(s, e)| (scope(s), e.quorum.voters as f64)),
    )?;
    writer.write(
        &ETCD_LEARNERS,
        etcd()
            .filter(|(_, e)| e.listed_voters().is_some())
            .map(|(s, e)| (scope(s), e.quorum.learners as f64)),
    )?;
    writer.write(
        &ETCD_MEMBERS_ANSWERING,
        etcd().map(|(s, e)| (scope(s), e.quorum.answering as f64)),
    )?;
    writer.write(
        &ETCD_LEADER_CHANGES,
        etcd().map(|(s, _)| (scope(s), s.counters.dcs_leader_changes)),
    )?;
    writer.write(
        &ETCD_QUORUM_LOSSES,
        etcd().map(|(s, _)| (scope(s), s.counters.dcs_quorum_losses)),
    )?;
    writer.write(&ETCD_ALARMS, etcd().flat_map(|(s, e)| alarms(s, e)))?;
    writer.write(
        &ETCD_LEADER_KEY_TTL_SECONDS,
        etcd().filter_map(|(s, e)| {
            let lease = e.facts.as_ref()?.leader_lease.as_ref()?.as_ref().ok()?;
            lease.is_alive().then(|| (scope(s), lease.ttl as f64))
        }),
    )?;
    writer.write(
        &ETCD_MEMBER_KEYS,
        etcd().filter_map(|(s, e)| {
            let keys = e.facts.as_ref()?.keys.as_ref()?.as_ref().ok()?;
            Some((scope(s), keys.members.len() as f64))
        }),
    )?;
    writer.write(&ETCD_UNREADABLE, etcd().flat_map(|(s, e)| unreadable(s, e)))?;
    encode_endpoints(writer, snapshots)?;
    writer.write(
        &MEMBER_DCS_VIEW_STALE,
        etcd().flat_map(|(s, e)| {
            e.views
                .iter()
                .map(move |view| (member_named(s, &view.member), flag(view.stale)))
        }),
    )
}

/// Per alarm, how many members raise it: the known ones always (0 when none), any other one
/// when active; nothing when the alarms could not be read.
fn alarms<'a>(
    s: &'a ClusterSnapshot,
    e: &'a EtcdSnapshot,
) -> impl Iterator<Item = (super::labels::AlarmLabels<'a>, f64)> + 'a {
    let active = e
        .facts
        .as_ref()
        .and_then(|facts| facts.alarms.as_ref()?.as_ref().ok());
    let others = active
        .into_iter()
        .flatten()
        .map(|alarm| alarm_name(&alarm.alarm))
        .filter(|name| !KNOWN_ALARMS.contains(name))
        .collect::<std::collections::BTreeSet<&str>>();
    active
        .map(|_| KNOWN_ALARMS.iter().copied().chain(others))
        .into_iter()
        .flatten()
        .map(move |name| {
            let count = active
                .into_iter()
                .flatten()
                .filter(|alarm| alarm_name(&alarm.alarm) == name)
                .count();
            (scope(s).alarm(name), count as f64)
        })
}

/// Per fact asked, whether it could not be read.
fn unreadable<'a>(
    s: &'a ClusterSnapshot,
    e: &'a EtcdSnapshot,
) -> impl Iterator<Item = (super::labels::FactLabels<'a>, f64)> + 'a {
    let labels: ScopeLabels<'a> = scope(s);
    let status_fell_back = e.endpoints.iter().any(|reading| reading.health.is_some());
    let status = (!e.endpoints.is_empty()).then_some(("status", status_fell_back));
    let facts = e.facts.as_ref();
    let members = facts.map(|f| ("members", f.members.is_err()));
    let alarms = facts.and_then(|f| Some(("alarms", f.alarms.as_ref()?.is_err())));
    let keys = facts.and_then(|f| Some(("keys", f.keys.as_ref()?.is_err())));
    let lease = facts.and_then(|f| Some(("leader_lease", f.leader_lease.as_ref()?.is_err())));
    [status, members, alarms, keys, lease]
        .into_iter()
        .flatten()
        .map(move |(fact, failed)| (labels.fact(fact), flag(failed)))
}

fn encode_endpoints(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    let endpoints =
        || etcd_parts(snapshots).flat_map(|(s, e)| e.endpoints.iter().map(move |r| (s, e, r)));
    let answered =
        || endpoints().filter_map(|(s, e, r)| Some((s, e, r, &r.status.as_ref().ok()?.value)));
    writer.write(
        &ETCD_UP,
        endpoints().map(|(s, _, r)| (endpoint_labels(s, r), flag(r.knows_leader().is_some()))),
    )?;
    writer.write(
        &ETCD_MEMBER_INFO,
        etcd_parts(snapshots)
            .flat_map(|(s, e)| {
                e.endpoints
                    .iter()
                    .zip(&e.endpoint_members)
                    .filter_map(move |(r, member)| {
                        r.knows_leader()?;
                        Some(
                            endpoint_labels(s, r)
                                .member(member.as_deref()?)
                                .version(r.server_version()?)
                                .cluster_version(r.cluster_version().unwrap_or_default()),
                        )
                    })
            })
            .map(info),
    )?;
    writer.write(
        &ETCD_HAS_LEADER,
        endpoints().filter_map(|(s, _, r)| Some((endpoint_labels(s, r), flag(r.knows_leader()?)))),
    )?;
    writer.write(
        &ETCD_IS_LEADER,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), flag(status.is_leader()))),
    )?;
    writer.write(
        &ETCD_IS_LEARNER,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), flag(status.is_learner))),
    )?;
    writer.write(
        &ETCD_RAFT_TERM,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), status.raft_term as f64)),
    )?;
    writer.write(
        &ETCD_RAFT_INDEX,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), status.raft_index as f64)),
    )?;
    writer.write(
        &ETCD_RAFT_APPLIED_INDEX,
        answered()
            .map(|(s, _, r, status)| (endpoint_labels(s, r), status.raft_applied_index as f64)),
    )?;
    writer.write(
        &ETCD_DB_SIZE_BYTES,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), status.db_size as f64)),
    )?;
    writer.write(
        &ETCD_DB_SIZE_IN_USE_BYTES,
        answered().map(|(s, _, r, status)| (endpoint_labels(s, r), status.db_size_in_use as f64)),
    )?;
    writer.write(
        &ETCD_DB_QUOTA_BYTES,
        answered().filter_map(|(s, _, r, status)| {
            Some((endpoint_labels(s, r), status.db_size_quota? as f64))
        }),
    )?;
    writer.write(
        &ETCD_STATUS_ROUND_TRIP_SECONDS,
        endpoints().filter_map(|(s, _, r)| {
            let status = r.status.as_ref().ok()?;
            Some((endpoint_labels(s, r), status.round_trip.as_secs_f64()))
        }),
    )
}
