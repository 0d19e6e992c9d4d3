//! The judgement of one poll, for humans and scripts: what is wrong, in plain words, and
//! how bad it is (Nagios plugin levels).
//!
//! Pure functions of a [`ClusterSnapshot`], so every wording and every exit code is tested
//! on fake clusters without a network.

use serde::{Deserialize, Serialize};

use crate::patroni::{is_leader_role, Lag};
use crate::raft::RaftState;
use crate::snapshot::QuorumVerdict;
use crate::snapshot::{ClusterSnapshot, MemberSnapshot, RaftNodeSnapshot};

/// Nagios plugin levels, ordered by how bad they are for the exit code (UNKNOWN is worse
/// than OK and WARNING but, by convention, less than CRITICAL for the exit status 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Ok,
    Warning,
    Unknown,
    Critical,
}

impl Level {
    /// The exit status of the Nagios plugin convention.
    pub fn exit_code(self) -> u8 {
        match self {
            Level::Ok => 0,
            Level::Warning => 1,
            Level::Critical => 2,
            Level::Unknown => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warning => "WARNING",
            Level::Critical => "CRITICAL",
            Level::Unknown => "UNKNOWN",
        }
    }
}

/// One problem, in plain words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub level: Level,
    pub message: String,
}

/// A member row, like the cluster CLI's `list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberRow {
    pub member: String,
    pub host: Option<String>,
    /// Role in `/cluster` (the DCS view).
    pub role: String,
    pub state: String,
    pub timeline: Option<u64>,
    /// Lag in MiB rounded, as patronictl's "Lag in MB"; `None` for the leader.
    pub lag_mb: Option<LagCell>,
    /// Whether the member's own `/patroni` answered.
    pub api_up: bool,
    /// Why it did not.
    pub api_error: Option<String>,
    /// The role the member reports itself, when it contradicts the DCS view.
    pub reported_role_mismatch: Option<String>,
}

/// A lag cell: MiB, or `unknown`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LagCell {
    MiB(u64),
    Unknown(String),
}

/// A Raft node row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RaftRow {
    pub node: String,
    pub reachable: bool,
    pub error: Option<String>,
    pub state: Option<String>,
    pub term: Option<i64>,
    pub has_quorum: Option<bool>,
    pub leader: Option<String>,
    pub commit_index: Option<i64>,
    pub applied_index: Option<i64>,
    pub partners_connected: Option<usize>,
    pub partners: Option<i64>,
}

/// Everything `status` says about one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    pub scope: String,
    pub level: Level,
    pub rest_reachable: bool,
    pub leaders: Vec<String>,
    pub timeline: Option<u64>,
    pub paused: bool,
    /// The quorum verdict (`confirmed`, `lost`, `not visible`); `None` when Raft is not
    /// polled.
    pub raft_quorum: Option<String>,
    /// The evidence of the verdict in words ("3 of 3 voters answer, 3 report has_quorum (a
    /// leader reports has_quorum)").
    pub raft_quorum_evidence: Option<String>,
    pub raft_voters: u64,
    /// Nodes that report `has_quorum`.
    pub quorum_confirmed_by: Vec<String>,
    pub members: Vec<MemberRow>,
    pub raft_nodes: Vec<RaftRow>,
    /// Who Patroni would promote if the leader died now; `None` without `/cluster`.
    pub failover: Option<FailoverReport>,
    pub problems: Vec<Problem>,
}

/// Failover readiness in words: the candidates and, for the others, why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverReport {
    pub candidates: Vec<String>,
    pub excluded: Vec<ExcludedMember>,
    /// The WAL a failover right now would lose, when known.
    pub data_at_risk_bytes: Option<u64>,
}

/// A member that would not be promoted, with every reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExcludedMember {
    pub member: String,
    /// The `reason` labels (`lag`, `nofailover`, ...).
    pub reasons: Vec<String>,
    /// The same, with their numbers ("lag 40 MiB > maximum_lag_on_failover 1 MiB").
    pub details: Vec<String>,
}

impl FailoverReport {
    fn from_snapshot(snapshot: &ClusterSnapshot) -> Option<FailoverReport> {
        snapshot.cluster.as_ref()?;
        let readiness = &snapshot.failover;
        Some(FailoverReport {
            data_at_risk_bytes: readiness.data_at_risk_bytes,
            candidates: readiness
                .members
                .iter()
                .filter(|m| m.eligible())
                .map(|m| m.name.clone())
                .collect(),
            excluded: readiness
                .members
                .iter()
                .filter(|m| !m.eligible())
                .map(|m| ExcludedMember {
                    member: m.name.clone(),
                    reasons: m
                        .exclusions
                        .iter()
                        .map(|e| e.reason.as_str().to_owned())
                        .collect(),
                    details: m.exclusions.iter().map(|e| e.detail.clone()).collect(),
                })
                .collect(),
        })
    }
}

impl ClusterReport {
    /// Builds the report of one poll.
    pub fn from_snapshot(snapshot: &ClusterSnapshot) -> ClusterReport {
        let members: Vec<MemberRow> = snapshot.members.iter().map(member_row).collect();
        let raft_nodes: Vec<RaftRow> = snapshot.raft_nodes.iter().map(raft_row).collect();
        let quorum_confirmed_by = snapshot
            .raft_nodes
            .iter()
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
            raft_quorum: snapshot
                .raft_enabled
                .then(|| snapshot.quorum.verdict().as_str().to_owned()),
            raft_quorum_evidence: snapshot.raft_enabled.then(|| snapshot.quorum.describe()),
            raft_voters: snapshot.quorum.voters,
            quorum_confirmed_by,
            members,
            raft_nodes,
            failover: FailoverReport::from_snapshot(snapshot),
            problems,
        }
    }
}

fn member_row(member: &MemberSnapshot) -> MemberRow {
    let m = &member.member;
    let lag_mb = if m.is_leader() {
        None
    } else {
        m.lag.as_ref().map(|lag| match lag {
            Lag::Bytes(bytes) => LagCell::MiB(((*bytes as f64) / 1024.0 / 1024.0).round() as u64),
            Lag::Text(text) => LagCell::Unknown(text.clone()),
        })
    };
    MemberRow {
        member: m.name.clone(),
        host: m.host.clone(),
        role: m.role.clone(),
        state: m.state.clone(),
        timeline: m.timeline,
        lag_mb,
        api_up: member.own_view.is_ok(),
        api_error: member
            .own_view
            .as_ref()
            .err()
            .map(|failure| failure.kind.to_owned()),
        reported_role_mismatch: match member.role_mismatch() {
            Some(true) => member
                .own_view
                .as_ref()
                .ok()
                .and_then(|own| own.role.clone()),
            _ => None,
        },
    }
}

fn raft_row(node: &RaftNodeSnapshot) -> RaftRow {
    match &node.status {
        Ok(status) => RaftRow {
            node: node.node.clone(),
            reachable: true,
            error: None,
            state: Some(status.state.as_str().to_owned()),
            term: Some(status.raft_term),
            has_quorum: Some(status.has_quorum),
            leader: status.leader.clone(),
            commit_index: Some(status.commit_idx),
            applied_index: Some(status.last_applied),
            partners_connected: Some(status.partners.iter().filter(|p| p.connected()).count()),
            partners: Some(status.partner_nodes_count),
        },
        Err(failure) => RaftRow {
            node: node.node.clone(),
            reachable: false,
            error: Some(failure.kind.to_owned()),
            state: None,
            term: None,
            has_quorum: None,
            leader: None,
            commit_index: None,
            applied_index: None,
            partners_connected: None,
            partners: None,
        },
    }
}

/// States of a member that are not a problem.
fn healthy_state(role: &str, state: &str) -> bool {
    if is_leader_role(role) {
        state == "running"
    } else {
        matches!(state, "streaming" | "running" | "in archive recovery")
    }
}

fn problems(snapshot: &ClusterSnapshot) -> Vec<Problem> {
    let mut problems = Problems::default();
    if rest_problems(snapshot, &mut problems).is_break() {
        return problems.0;
    }
    if snapshot.raft_enabled {
        raft_problems(snapshot, &mut problems);
    }
    member_problems(snapshot, &mut problems);
    split_problems(snapshot, &mut problems);
    margin_problems(snapshot, &mut problems);
    failover_problems(snapshot, &mut problems);
    problems
        .0
        .sort_by_key(|problem| std::cmp::Reverse(problem.level));
    problems.0
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
        if snapshot.raft_nodes.iter().all(|node| node.status.is_err()) {
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

/// What the Raft statuses say: the quorum verdict with its evidence, leadership, and each
/// node that does not answer or has no quorum while the cluster has one.
fn raft_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    let quorum = &snapshot.quorum;
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
        let claimants: Vec<&str> = snapshot
            .raft_nodes
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
    for node in &snapshot.raft_nodes {
        match &node.status {
            Err(failure) => problems.say(
                Level::Warning,
                format!("Raft node {} unreachable: {}", node.node, failure.message),
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
            let reported = own.role.as_deref().unwrap_or("?");
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
    if snapshot.voter_sets.disagree() {
        problems.say(
            Level::Warning,
            format!(
                "the Raft nodes disagree on the voter set: {}",
                snapshot.voter_sets.describe_differences().join("; ")
            ),
        );
    }
}

/// How close the next outage is: a quorum with nothing to spare, a stalled HA loop, clocks
/// that shorten the leader key's lifetime.
fn margin_problems(snapshot: &ClusterSnapshot, problems: &mut Problems) {
    if snapshot.quorum.confirmed() && snapshot.quorum.margin == Some(0) {
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
