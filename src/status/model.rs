//! What `status` says, as data: the report of one cluster (rows, problems, levels) that the
//! text and JSON renderings print. Judging what is a problem is [`super::report`]'s work;
//! this module only gives the answers their shape.

use serde::{Deserialize, Serialize};

use crate::error_kind::ErrorKind;
use crate::patroni::{Lag, MemberRole};
use crate::snapshot::{
    standby_leader_archive_recovery, standby_leader_streaming, ClusterSnapshot, MemberSnapshot,
    RaftNodeSnapshot, VoterKind,
};

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
    pub api_error: Option<ErrorKind>,
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
    /// What the voter is to the cluster (`member`, `witness`, `unknown`); `None` for a node
    /// queried that is not a voter.
    pub kind: Option<String>,
    pub reachable: bool,
    pub error: Option<ErrorKind>,
    pub state: Option<String>,
    pub term: Option<i64>,
    pub has_quorum: Option<bool>,
    pub leader: Option<String>,
    pub commit_index: Option<i64>,
    pub applied_index: Option<i64>,
    pub partners_connected: Option<usize>,
    pub partners: Option<i64>,
}

/// An etcd endpoint row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EtcdRow {
    pub endpoint: String,
    /// The member's name (from its status and the member list).
    pub member: Option<String>,
    pub reachable: bool,
    pub error: Option<ErrorKind>,
    /// Whether it is the leader, knows a leader, is a learner (from its status; from
    /// `/health` only `has_leader`).
    pub leader: Option<bool>,
    pub has_leader: Option<bool>,
    pub learner: Option<bool>,
    pub term: Option<u64>,
    pub raft_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub db_size_bytes: Option<u64>,
    pub version: Option<String>,
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
    /// How many more voters can fail before the quorum is lost; `None` when not visible.
    pub raft_quorum_margin: Option<i64>,
    pub raft_voters: u64,
    /// Nodes that report `has_quorum`.
    pub quorum_confirmed_by: Vec<String>,
    pub members: Vec<MemberRow>,
    pub raft_nodes: Vec<RaftRow>,
    /// On a cluster on etcd: its quorum verdict, the evidence in words and the margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_quorum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_quorum_evidence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_quorum_margin: Option<i64>,
    /// On a cluster on etcd: one row per endpoint asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub etcd_members: Vec<EtcdRow>,
    /// Who Patroni would promote if the leader died now; `None` without `/cluster`.
    pub failover: Option<FailoverReport>,
    /// A standby cluster, or a cluster configured with `standby_of`; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyReport>,
    pub problems: Vec<Problem>,
}

/// A standby cluster and its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandbyReport {
    /// The configured source (`standby_of`), when configured.
    pub source_scope: Option<String>,
    /// The member that says standby_leader, and whether it streams from the source.
    pub standby_leader: Option<String>,
    pub streaming: Option<bool>,
    pub archive_recovery: Option<bool>,
    /// The source leader's position minus the standby leader's replayed one.
    pub lag_bytes: Option<u64>,
}

impl StandbyReport {
    pub(super) fn from_snapshot(snapshot: &ClusterSnapshot) -> Option<StandbyReport> {
        let source_scope = snapshot.standby_source.as_ref().map(|s| s.scope.clone());
        if source_scope.is_none() && snapshot.is_standby_cluster() != Some(true) {
            return None;
        }
        let leader = snapshot.standby_leader();
        Some(StandbyReport {
            source_scope,
            standby_leader: leader.map(|m| m.member.name.clone()),
            streaming: leader.and_then(standby_leader_streaming),
            archive_recovery: leader.and_then(standby_leader_archive_recovery),
            lag_bytes: snapshot.standby_lag_bytes(),
        })
    }
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
    pub(super) fn from_snapshot(snapshot: &ClusterSnapshot) -> Option<FailoverReport> {
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

pub(super) fn member_row(member: &MemberSnapshot) -> MemberRow {
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
        role: m.role.to_string(),
        state: m.state.to_string(),
        timeline: m.timeline,
        lag_mb,
        api_up: member.own_view.is_ok(),
        api_error: member.own_view.as_ref().err().map(|failure| failure.kind),
        reported_role_mismatch: match member.role_mismatch() {
            Some(true) => member
                .own_view
                .as_ref()
                .ok()
                .and_then(|own| own.role.as_ref().map(MemberRole::to_string)),
            _ => None,
        },
    }
}

pub(super) fn raft_row(node: &RaftNodeSnapshot, kind: Option<VoterKind>) -> RaftRow {
    let kind = kind.map(|kind| kind.as_str().to_owned());
    match &node.status {
        Ok(status) => RaftRow {
            node: node.node.clone(),
            kind,
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
            kind,
            reachable: false,
            error: Some(failure.kind),
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
