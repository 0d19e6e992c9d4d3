//! The judgement of one poll, for humans and scripts: what is wrong, in plain words, and
//! how bad it is (Nagios plugin levels).
//!
//! Pure functions of a [`ClusterSnapshot`], so every wording and every exit code is tested
//! on fake clusters without a network.

use super::model::{member_row, raft_row};
pub use super::model::{
    ClusterReport, EtcdRow, ExcludedMember, FailoverReport, LagCell, Level, MemberRow, Problem,
    RaftRow, StandbyReport,
};
use crate::etcd::{AlarmType, EndpointStatus, EtcdError};
use crate::patroni::{Feature, PatroniRelease};
use crate::patroni::{MemberRole, MemberState};
use crate::raft::RaftState;
use crate::snapshot::ClusterSnapshot;
use crate::snapshot::{EtcdSnapshot, QuorumVerdict, RaftSnapshot, VoterKind};

impl ClusterReport {
    /// Builds the report of one poll.
    pub fn from_snapshot(snapshot: &ClusterSnapshot) -> ClusterReport {
        let members: Vec<MemberRow> = snapshot.members.iter().map(member_row).collect();
        let raft = snapshot.dcs.raft();
        let etcd = snapshot.dcs.etcd();
        let raft_nodes: Vec<RaftRow> = raft
            .into_iter()
            .flat_map(|r| {
                r.nodes
                    .iter()
                    .map(|node| raft_row(node, r.voter_kinds.kind_of(&node.node)))
            })
            .collect();
        let quorum_confirmed_by = raft
            .into_iter()
            .flat_map(|r| &r.nodes)
            .filter(|node| node.status.as_ref().is_ok_and(|status| status.has_quorum))
            .map(|node| node.node.clone())
            .collect();
        let problems = problems(snapshot);
        let level = problems
            .iter()
            .map(|problem| problem.level)
            .max()
            .unwrap_or(Level::Ok);
        ClusterReport {
            scope: snapshot.scope.clone(),
            level,
            rest_reachable: snapshot.cluster.is_some(),
            leaders: snapshot
                .leader_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            timeline: snapshot
                .cluster
                .as_ref()
                .and_then(|view| view.leader_timeline()),
            paused: snapshot.cluster.as_ref().is_some_and(|view| view.pause),
            raft_quorum: raft.map(|r| r.quorum.verdict().as_str().to_owned()),
            raft_quorum_evidence: raft.map(|r| r.quorum.describe()),
            raft_quorum_margin: raft.and_then(|r| r.quorum.margin),
            raft_voters: raft.map_or(0, |r| r.quorum.voters),
            quorum_confirmed_by,
            members,
            raft_nodes,
            etcd_quorum: etcd.map(|e| e.quorum.verdict.as_str().to_owned()),
            etcd_quorum_evidence: etcd.map(|e| e.quorum.describe()),
            etcd_quorum_margin: etcd.and_then(|e| e.quorum.margin),
            etcd_members: etcd.map(etcd_rows).unwrap_or_default(),
            failover: FailoverReport::from_snapshot(snapshot),
            standby: StandbyReport::from_snapshot(snapshot),
            problems,
        }
    }
}

/// States of a member that are not a problem.
fn healthy_state(role: &MemberRole, state: &MemberState) -> bool {
    if *role == MemberRole::StandbyLeader {
        // a standby leader is a replica of its source: `streaming` in /cluster (Patroni 3.0+)
        state.is_serving()
    } else if role.is_leader() {
        *state == MemberState::Running
    } else {
        state.is_serving()
    }
}

fn problems(snapshot: &ClusterSnapshot) -> Vec<Problem> {
    let mut problems = Problems::default();
    if rest_problems(snapshot, &mut problems).is_break() {
        return problems.0;
    }
    if let Some(raft) = snapshot.dcs.raft() {
        raft_problems(raft, &mut problems);
    }
    if let Some(etcd) = snapshot.dcs.etcd() {
        etcd_problems(etcd, &mut problems);
    }
    member_problems(snapshot, &mut problems);
    readiness_problems(snapshot, &mut problems);
    split_problems(snapshot, &mut problems);
    margin_problems(snapshot, &mut problems);
    failover_problems(snapshot, &mut problems);
    standby_problems(snapshot, &mut problems);
    problems
        .0
        .sort_by_key(|problem| std::cmp::Reverse(problem.level));
    problems.0
}

/// A standby leader that does not stream from its source: it replays only what reaches the
/// archive, or nothing, and the lag to the source grows.
fn standby_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let Some(standby) = StandbyReport::from_snapshot(snapshot) else {
        return;
    };
    let (Some(leader), Some(false)) = (&standby.standby_leader, standby.streaming) else {
        return;
    };
    let how = if standby.archive_recovery == Some(true) {
        "it replays from the archive only"
    } else {
        "it neither streams nor replays from an archive"
    };
    let source = standby
        .source_scope
        .as_deref()
        .map_or(String::new(), |scope| format!(" ({scope})"));
    problems.say(
        Level::Warning,
        format!("standby leader {leader} does not stream from its source{source}: {how}"),
    );
}

/// Members whose `GET /readiness` answered 503, with what readiness means on their version:
/// from Patroni 4.1.0 a replica must also stream and be within `maximum_lag_on_failover` (not
/// backported: 3.3.x and 4.0.x keep the old meaning, [`Feature::ReadinessWantsStreaming`]).
fn readiness_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    for member in &snapshot.members {
        if member.probes.readiness != Some(false) {
            continue;
        }
        let version = member
            .own_view
            .as_ref()
            .ok()
            .and_then(|own| own.patroni_version.as_deref());
        let meaning = match (version, PatroniRelease::of(member)) {
            (Some(version), Some(release))
                if Feature::ReadinessWantsStreaming.in_release(release) =>
            {
                format!(": on Patroni {version} a replica is ready only while its PostgreSQL runs, it streams and its lag is within maximum_lag_on_failover (unless failsafe mode is active)")
            }
            (Some(version), Some(_)) => format!(
                ": on Patroni {version} a replica is ready whenever its PostgreSQL runs and the DCS answers"
            ),
            _ => String::new(),
        };
        problems.say(
            Level::Warning,
            format!(
                "{} is not ready (GET /readiness 503){meaning}",
                member.member.name
            ),
        );
    }
}

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn say(&mut self, level: Level, message: impl Into<String>) {
        self.0.push(Problem {
            level,
            message: message.into(),
        });
    }
}

/// What the DCS view (`/cluster`) says: no answer, no or several leaders, pause. Breaks when
/// nothing at all answered: then nothing more is claimed.
fn rest_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) -> std::ops::ControlFlow<()> {
    let Some(view) = &snapshot.cluster else {
        let why = snapshot
            .cluster_failure
            .as_ref()
            .map(|failure| format!(" (last error: {})", failure.message))
            .unwrap_or_default();
        let raft_answered = snapshot
            .dcs
            .raft()
            .is_some_and(|raft| raft.nodes.iter().any(|node| node.status.is_ok()));
        let etcd_answered = snapshot.dcs.etcd().map(|etcd| etcd.quorum.answering > 0);
        if etcd_answered == Some(false) {
            problems.say(Level::Unknown, format!("nothing reachable: no member answered GET /cluster{why} and no etcd member answered"));
            return std::ops::ControlFlow::Break(());
        }
        if !raft_answered && etcd_answered.is_none() {
            // From here the cluster cannot be told apart from a network problem of the
            // checker's own.
            problems.say(Level::Unknown, format!("nothing reachable: no member answered GET /cluster{why} and no Raft node answered"));
            return std::ops::ControlFlow::Break(());
        }
        problems.say(
            Level::Critical,
            format!("no member answered GET /cluster{why}"),
        );
        return std::ops::ControlFlow::Continue(());
    };
    let leaders = snapshot.leader_names();
    match leaders.len() {
        0 => problems.say(Level::Critical, "no leader in the DCS view"),
        1 => {}
        n => problems.say(
            Level::Critical,
            format!("{n} leaders in the DCS view: {}", leaders.join(", ")),
        ),
    }
    if view.pause {
        problems.say(
            Level::Warning,
            "maintenance mode: automatic failover is paused",
        );
    }
    std::ops::ControlFlow::Continue(())
}

/// The etcd endpoints, one row each.
fn etcd_rows(etcd: &EtcdSnapshot) -> Vec<EtcdRow> {
    etcd.endpoints
        .iter()
        .zip(&etcd.endpoint_members)
        .map(|(reading, member)| {
            let status = reading.status.as_ref().ok().map(|status| &status.value);
            EtcdRow {
                endpoint: reading.endpoint.as_str().trim_end_matches('/').to_owned(),
                member: member.clone(),
                reachable: reading.knows_leader().is_some(),
                error: reading.status.as_ref().err().map(EtcdError::kind),
                leader: status.map(EndpointStatus::is_leader),
                has_leader: reading.knows_leader(),
                learner: status.map(|status| status.is_learner),
                term: status.map(|status| status.raft_term),
                raft_index: status.map(|status| status.raft_index),
                applied_index: status.map(|status| status.raft_applied_index),
                db_size_bytes: status.map(|status| status.db_size),
                version: status.map(|status| status.version.clone()),
            }
        })
        .collect()
}

/// What etcd says: the quorum verdict with its evidence and margin, members that do not
/// answer, alarms, facts that could not be read, and members whose own view of the DCS is
/// stale against Patroni's keys.
fn etcd_problems(etcd: &EtcdSnapshot, problems: &mut Problems) {
    let quorum = &etcd.quorum;
    match quorum.verdict {
        QuorumVerdict::Confirmed if quorum.margin == Some(0) => problems.say(
            Level::Warning,
            "the etcd quorum has no margin: one more member down loses it",
        ),
        QuorumVerdict::Confirmed => {}
        QuorumVerdict::Lost => problems.say(
            Level::Critical,
            format!(
                "etcd quorum lost: {}; Patroni cannot write its leader key: the primary demotes unless failsafe mode keeps it, and nobody can take over",
                quorum.describe()
            ),
        ),
        QuorumVerdict::NotVisible => problems.say(
            Level::Warning,
            format!(
                "etcd quorum not visible from here (neither confirmed nor lost): {}",
                quorum.describe()
            ),
        ),
    }
    etcd_member_problems(etcd, problems);
    etcd_fact_problems(etcd, problems);
}

/// Each etcd member that does not answer, answers only `/health`, or knows no leader while
/// the cluster has one.
fn etcd_member_problems(etcd: &EtcdSnapshot, problems: &mut Problems) {
    let quorum = &etcd.quorum;
    for (reading, member) in etcd.endpoints.iter().zip(&etcd.endpoint_members) {
        let endpoint = reading.endpoint.as_str().trim_end_matches('/');
        let name = member
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        match (&reading.status, &reading.health) {
            (Err(error), None) | (Err(_), Some(Err(error))) => problems.say(
                Level::Warning,
                format!("etcd member {endpoint} unreachable: {}", error.describe()),
            ),
            (Err(error), Some(Ok(_))) => problems.say(
                Level::Warning,
                format!(
                    "etcd member {endpoint}: Status refused ({}), judged from /health only",
                    error.describe()
                ),
            ),
            (Ok(status), _)
                if status.value.leader.is_none() && quorum.verdict == QuorumVerdict::Confirmed =>
            {
                problems.say(
                    Level::Warning,
                    format!(
                        "etcd member {endpoint}{name} knows no leader while the cluster has one"
                    ),
                )
            }
            (Ok(_), _) => {}
        }
    }
}

/// What the cluster's facts say: alarms, what could not be read, a prefix without Patroni's
/// keys, and members whose own view of the DCS is stale against them.
fn etcd_fact_problems(etcd: &EtcdSnapshot, problems: &mut Problems) {
    let Some(facts) = &etcd.facts else {
        return;
    };
    if let Some(Ok(alarms)) = &facts.alarms {
        for alarm in alarms {
            let what = match alarm.alarm {
                AlarmType::NoSpace => "NOSPACE: the database reached its quota and etcd refuses writes (Patroni's keys are not updated, a new leader key cannot be written)".to_owned(),
                AlarmType::Corrupt => "CORRUPT: a member's data was found corrupt".to_owned(),
                AlarmType::Other(ref name) => name.clone(),
            };
            problems.say(
                Level::Critical,
                format!(
                    "etcd alarm {what}, raised by {}",
                    etcd.member_name(alarm.member_id)
                ),
            );
        }
    }
    let unread = [
        ("member list", facts.members.as_ref().err()),
        (
            "alarms",
            facts.alarms.as_ref().and_then(|a| a.as_ref().err()),
        ),
        (
            "Patroni's keys",
            facts.keys.as_ref().and_then(|k| k.as_ref().err()),
        ),
        (
            "leader key's lease",
            facts.leader_lease.as_ref().and_then(|l| l.as_ref().err()),
        ),
    ];
    for (fact, error) in unread {
        if let Some(error) = error {
            problems.say(
                Level::Warning,
                format!("could not read etcd's {fact}: {}", error.describe()),
            );
        }
    }
    if let Some(Ok(keys)) = &facts.keys {
        if keys.members.is_empty() {
            problems.say(
                Level::Warning,
                format!(
                    "no Patroni member key in etcd under {} (is --etcd.namespace Patroni's namespace?): the DCS content cannot be compared",
                    facts.prefix.as_deref().unwrap_or_default()
                ),
            );
        }
    }
    for view in etcd.views.iter().filter(|view| view.stale) {
        problems.say(
            Level::Warning,
            format!(
                "{}'s view of the DCS is stale: its GET /cluster disagrees with Patroni's keys read from etcd (its watch of etcd is behind, zalando/patroni #3359)",
                view.member
            ),
        );
    }
}

/// What the Raft statuses say: the quorum verdict with its evidence, leadership, and each
/// node that does not answer or has no quorum while the cluster has one.
fn raft_problems(raft: &RaftSnapshot, problems: &mut Problems) {
    let quorum = &raft.quorum;
    match quorum.verdict() {
        QuorumVerdict::Confirmed => {}
        QuorumVerdict::Lost => problems.say(
            Level::Critical,
            format!("Raft quorum lost: {}", quorum.describe()),
        ),
        QuorumVerdict::NotVisible => problems.say(
            Level::Warning,
            format!(
                "Raft quorum not visible from here (neither confirmed nor lost): {}",
                quorum.describe()
            ),
        ),
    }
    // Only when every voter answers is "none leads" a fact rather than a blind spot.
    if quorum.confirmed() && quorum.all_voters_answer() && quorum.leaders_claiming == 0 {
        // has_quorum is TCP connectivity to a majority, not an elected leader: without a
        // leader, Patroni's DCS writes fail although the voters are connected.
        problems.say(
            Level::Critical,
            "no Raft leader: the voters are connected but none leads, DCS writes fail",
        );
    }
    if quorum.leaders_claiming > 1 {
        let claimants: Vec<&str> = raft
            .nodes
            .iter()
            .filter(|node| {
                node.status
                    .as_ref()
                    .is_ok_and(|status| status.state == RaftState::Leader)
            })
            .map(|node| node.node.as_str())
            .collect();
        problems.say(
            Level::Critical,
            format!(
                "split Raft leadership: {} claim to lead",
                claimants.join(", ")
            ),
        );
    }
    for node in &raft.nodes {
        match &node.status {
            Err(failure) => problems.say(
                Level::Warning,
                match raft.voter_kinds.kind_of(&node.node) {
                    Some(VoterKind::Witness) => format!(
                        "Raft witness {} unreachable (a voter that runs only Raft): {}",
                        node.node, failure.message
                    ),
                    _ => format!("Raft node {} unreachable: {}", node.node, failure.message),
                },
            ),
            Ok(status) if quorum.confirmed() && !status.has_quorum => problems.say(
                Level::Warning,
                format!(
                    "Raft node {} reports no quorum while the cluster has one",
                    node.node
                ),
            ),
            Ok(_) => {}
        }
    }
}

/// What each member says of itself against the DCS view: a contradicted role, an API that
/// does not answer, an unhealthy state, another timeline than the leader's.
fn member_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let leader_timeline = snapshot
        .cluster
        .as_ref()
        .and_then(|view| view.leader_timeline());
    for member in &snapshot.members {
        let m = &member.member;
        if let (Some(true), Ok(own)) = (member.role_mismatch(), &member.own_view) {
            let reported = own.role.as_ref().map_or("?", MemberRole::as_str);
            let frozen = if m.is_leader() {
                ": the DCS view is frozen"
            } else {
                ""
            };
            problems.say(
                Level::Warning,
                format!(
                    "{} is {} in the DCS view but reports itself as {reported}{frozen}",
                    m.name, m.role
                ),
            );
        }
        match &member.own_view {
            Err(failure) if !failure.request_sent() => problems.say(
                Level::Warning,
                format!(
                    "{} not asked: {} (its host is not trusted: give the Raft password, whose statuses name the voters' hosts, or --patroni.allow-api-url-hosts)",
                    m.name, failure.message
                ),
            ),
            Err(failure) => problems.say(
                Level::Warning,
                format!("{} API unreachable: {}", m.name, failure.message),
            ),
            Ok(_) => {}
        }
        if !healthy_state(&m.role, &m.state) {
            problems.say(Level::Warning, format!("{} is {}", m.name, m.state));
        }
        if let (Some(expected), Some(timeline)) = (leader_timeline, m.timeline) {
            if timeline != expected {
                problems.say(
                    Level::Warning,
                    format!(
                        "{} is on timeline {timeline}, the leader on {expected}",
                        m.name
                    ),
                );
            }
        }
    }
}

/// What comparing every member and node shows: several primaries by their own word (the
/// old one may be out of the DCS view already), diverging DCS views, disagreeing voters.
fn split_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let mut primaries = snapshot.primaries();
    primaries.sort_by(|a, b| a.member.name.cmp(&b.member.name));
    if primaries.len() > 1 {
        let named: Vec<String> = primaries
            .iter()
            .map(|m| match m.left_dcs_at {
                Some(left) => format!(
                    "{} (out of the DCS for {:.0} s)",
                    m.member.name,
                    (snapshot.polled_at_seconds - left).max(0.0)
                ),
                None if snapshot.departed.contains(m) => {
                    format!("{} (out of the DCS view)", m.member.name)
                }
                None => m.member.name.clone(),
            })
            .collect();
        let count = if primaries.len() == 2 {
            "TWO".to_owned()
        } else {
            primaries.len().to_string()
        };
        problems.say(
            Level::Critical,
            format!(
                "{count} PRIMARIES: {}: each says primary in its own GET /patroni; both may take writes",
                join_and(&named)
            ),
        );
    }
    if snapshot.views.distinct > 1 {
        problems.say(
            Level::Warning,
            format!(
                "the members' DCS views differ ({} views): {} (their Raft replicas disagree with the others')",
                snapshot.views.distinct,
                snapshot.views.describe_differences().join(", ")
            ),
        );
    }
    let voter_sets = snapshot.dcs.raft().map(|raft| &raft.voter_sets);
    if let Some(voter_sets) = voter_sets.filter(|sets| sets.disagree()) {
        problems.say(
            Level::Warning,
            format!(
                "the Raft nodes disagree on the voter set: {}",
                voter_sets.describe_differences().join("; ")
            ),
        );
    }
}

/// How close the next outage is: a quorum with nothing to spare, a stalled HA loop, clocks
/// that shorten the leader key's lifetime.
fn margin_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let quorum = snapshot.dcs.raft().map(|raft| &raft.quorum);
    if quorum.is_some_and(|quorum| quorum.confirmed() && quorum.margin == Some(0)) {
        problems.say(
            Level::Warning,
            "the Raft quorum has no margin: one more voter down loses it",
        );
    }
    for m in snapshot.members_and_departed() {
        // 503 from /liveness: the REST thread answers, the HA loop has not run for ttl
        // (2 x ttl on a replica).
        if m.probes.liveness == Some(false) {
            problems.say(
                Level::Warning,
                format!(
                    "{}: GET /liveness fails while its REST API answers: its HA loop is stalled",
                    m.member.name
                ),
            );
        }
    }
    let Some(skew) = snapshot.leader_clock_skew_seconds() else {
        return;
    };
    let config = snapshot.config.clone().unwrap_or_default();
    let limit = clock_skew_limit_seconds(config.ttl_seconds, config.loop_wait_seconds);
    if skew.abs() > limit {
        problems.say(
            Level::Warning,
            format!(
                "the primary's clock is {:.1} s {} the Raft leader's host: the leader key lives {:.1} s {} than ttl (limit {limit:.1} s)",
                skew.abs(),
                if skew < 0.0 { "behind" } else { "ahead of" },
                skew.abs(),
                if skew < 0.0 { "shorter" } else { "longer" },
            ),
        );
    }
}

/// The clock skew between the primary's host and the Raft leader's host that is worth a
/// warning: a quarter of `ttl - loop_wait`, the slack between two renewals of the leader
/// key. Patroni requires `ttl >= loop_wait + 2 * retry_timeout` (so that a leader whose
/// renewal fails demotes before its key expires); the slack is at least two retry_timeouts
/// and a skew of a quarter of it eats half a retry_timeout. The same threshold is in the
/// shipped rule `PatroniLeaderClockSkew`.
pub fn clock_skew_limit_seconds(ttl: u64, loop_wait: u64) -> f64 {
    ttl.saturating_sub(loop_wait) as f64 / 4.0
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A leader that nobody could replace: the next leader failure would be an outage. And
/// failsafe mode, which keeps a primary without the DCS.
fn failover_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let Some(view) = &snapshot.cluster else {
        return;
    };
    let in_failsafe: Vec<&str> = snapshot
        .members
        .iter()
        .filter(|m| m.own_view.as_ref().is_ok_and(|own| own.failsafe_active))
        .map(|m| m.member.name.as_str())
        .collect();
    if !in_failsafe.is_empty() {
        problems.say(
            Level::Warning,
            format!(
                "failsafe mode active on {}: the DCS is unreachable; the primary stays only while every member answers it",
                in_failsafe.join(", ")
            ),
        );
    }
    let Some(readiness) = FailoverReport::from_snapshot(snapshot) else {
        return;
    };
    if view.members.len() > 1 && view.leaders().count() == 1 && readiness.candidates.is_empty() {
        let excluded: Vec<String> = readiness
            .excluded
            .iter()
            .map(|m| format!("{} ({})", m.member, m.reasons.join(", ")))
            .collect();
        problems.say(
            Level::Warning,
            format!(
                "no failover candidate: if the leader dies now, nobody is promoted; excluded: {}",
                excluded.join(", ")
            ),
        );
    }
}

/// The worst level of several clusters.
pub fn overall(reports: &[ClusterReport]) -> Level {
    reports
        .iter()
        .map(|report| report.level)
        .max()
        .unwrap_or(Level::Unknown)
}

#[cfg(test)]
mod standby_tests {
    use super::*;
    use crate::snapshot::{captured, StandbySource};

    /// A capture of tests/e2e/standby.sh, with pg-test configured as its source.
    fn report(version: &str, state: &str) -> ClusterReport {
        let dir = format!("patroni-{version}/states/{state}");
        let (cluster, members) = captured(
            &format!("{dir}/cluster.json"),
            &format!("{dir}/patroni-m{{i}}.json"),
        );
        let snapshot = ClusterSnapshot {
            scope: "pg-dr".into(),
            cluster: Some(cluster),
            members,
            standby_source: Some(StandbySource::new("pg-test", None)),
            ..ClusterSnapshot::default()
        };
        ClusterReport::from_snapshot(&snapshot)
    }

    #[test]
    fn a_streaming_standby_cluster_is_ok_and_names_its_source() {
        for version in ["3.3.8", "4.1.5"] {
            let report = report(version, "standby");
            // (failover readiness is not judged here: only the standby's own problems count)
            assert!(
                !report
                    .problems
                    .iter()
                    .any(|p| p.message.contains("standby")),
                "{version}: {:?}",
                report.problems
            );
            let standby = report.standby.as_ref().unwrap();
            assert_eq!(standby.source_scope.as_deref(), Some("pg-test"));
            assert_eq!(standby.standby_leader.as_deref(), Some("dr-0"));
            assert_eq!(standby.streaming, Some(true));
            assert_eq!(standby.lag_bytes, None, "the source was not polled");
            let text = super::super::render::text(&[report], super::super::render::Colour(false));
            assert!(
                text.contains("Standby cluster of pg-test: standby leader dr-0 streaming, lag to the source -"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_standby_leader_that_does_not_stream_is_a_warning() {
        let report = report("3.3.8", "standby-not-streaming");
        assert!(report.problems.iter().any(|p| p.message
            == "standby leader dr-0 does not stream from its source (pg-test): it neither streams nor replays from an archive"));
    }
}

#[cfg(test)]
mod readiness_tests {
    use super::*;
    use crate::snapshot::captured;

    /// A captured healthy cluster whose member 1 answered `GET /readiness` 503.
    fn report(cluster: &str, own: &str) -> ClusterReport {
        let (cluster, mut members) = captured(cluster, own);
        members[1].probes.readiness = Some(false);
        for (index, member) in members.iter_mut().enumerate() {
            if index != 1 {
                member.probes.readiness = Some(true);
            }
        }
        let snapshot = ClusterSnapshot {
            scope: "pg-test".into(),
            cluster: Some(cluster),
            members,
            ..ClusterSnapshot::default()
        };
        ClusterReport::from_snapshot(&snapshot)
    }

    fn readiness_messages(report: &ClusterReport) -> Vec<(Level, &str)> {
        report
            .problems
            .iter()
            .filter(|p| p.message.contains("not ready"))
            .map(|p| (p.level, p.message.as_str()))
            .collect()
    }

    #[test]
    fn a_member_not_ready_is_named_with_what_readiness_means_on_its_version() {
        let old = report(
            "patroni-3.3.8/cluster.json",
            "patroni-3.3.8/patroni-m{i}.json",
        );
        assert_eq!(
            readiness_messages(&old),
            [(Level::Warning, "postgresql-1 is not ready (GET /readiness 503): on Patroni 3.3.8 a replica is ready whenever its PostgreSQL runs and the DCS answers")]
        );
        let new = report(
            "patroni-4.1.5/01-cluster-from-m0.json",
            "patroni-4.1.5/01-patroni-m{i}.json",
        );
        assert_eq!(
            readiness_messages(&new),
            [(Level::Warning, "postgresql-1 is not ready (GET /readiness 503): on Patroni 4.1.5 a replica is ready only while its PostgreSQL runs, it streams and its lag is within maximum_lag_on_failover (unless failsafe mode is active)")]
        );
    }

    /// The 4.1.0 change is on neither maintenance branch (REL_3_3 at 3.3.11, REL_4_0 at
    /// 4.0.10 keep the old `do_GET_readiness`): the newest 3.3 and 4.0 releases keep the old
    /// meaning.
    #[test]
    fn readiness_meaning_by_maintenance_line() {
        for (version, streams) in [
            ("3.3.11", false),
            ("4.0.7", false),
            ("4.0.10", false),
            ("4.1.0", true),
            ("4.1.4", true),
            ("4.2.0", true),
        ] {
            let (cluster, mut members) = captured(
                "patroni-4.1.5/01-cluster-from-m0.json",
                "patroni-4.1.5/01-patroni-m{i}.json",
            );
            for member in &mut members {
                member.own_view.as_mut().unwrap().patroni_version = Some(version.into());
                member.probes.readiness = Some(true);
            }
            members[1].probes.readiness = Some(false);
            let report = ClusterReport::from_snapshot(&ClusterSnapshot {
                scope: "pg-test".into(),
                cluster: Some(cluster),
                members,
                ..ClusterSnapshot::default()
            });
            let messages = readiness_messages(&report);
            assert_eq!(messages.len(), 1, "{version}");
            assert_eq!(
                messages[0].1.contains("it streams"),
                streams,
                "{version}: {}",
                messages[0].1
            );
            assert!(messages[0].1.contains(&format!("on Patroni {version} ")));
        }
    }
}
