//! The DCS part of a snapshot: what the cluster's DCS said of itself in one poll, by kind.
//!
//! Why one part with a kind rather than fields per DCS: every REST judgement (split views,
//! failover readiness, two primaries, data at risk) is true of any DCS, and needs from the DCS
//! only a few generic facts: its quorum verdict, the margin before it is lost, and who leads
//! it. Those are read here ([`DcsSnapshot::verdict`], [`DcsSnapshot::margin`],
//! [`DcsSnapshot::leader`]); what only one kind has (Raft's voters and witnesses, etcd's
//! alarms and Patroni's keys) stays inside that kind's part, for its own families.

use super::etcd::EtcdSnapshot;
use super::model::{effective_raft_leader, RaftNodeSnapshot};
use super::quorum::{QuorumAssessment, QuorumVerdict};
use super::voters::VoterSetComparison;
use super::witness::VoterKinds;

/// Which DCS a cluster runs on: the `dcs` label of the DCS-generic families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DcsKind {
    /// Patroni's built-in Raft (pysyncobj).
    Raft,
    /// etcd v3.
    Etcd,
}

impl DcsKind {
    /// The `dcs` label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            DcsKind::Raft => "raft",
            DcsKind::Etcd => "etcd",
        }
    }

    /// The DCS as a person names it in a sentence ("the Raft DCS has no quorum").
    pub const fn title(self) -> &'static str {
        match self {
            DcsKind::Raft => "Raft",
            DcsKind::Etcd => "etcd",
        }
    }
}

/// What the DCS said of itself in one poll; [`DcsSnapshot::Unwatched`] when the cluster is
/// watched through REST only (`--raft.disabled`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum DcsSnapshot {
    #[default]
    Unwatched,
    Raft(RaftSnapshot),
    /// Boxed: an etcd reading (every endpoint's status, the member list and Patroni's
    /// keys) is several times a Raft part, and a fleet's Raft clusters should not pay for it.
    Etcd(Box<EtcdSnapshot>),
}

/// The Raft DCS in one poll: every node's status and the judgements made of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RaftSnapshot {
    /// Raft nodes queried in this poll, sorted by address.
    pub nodes: Vec<RaftNodeSnapshot>,
    /// Every answering Raft node's voter set compared.
    pub voter_sets: VoterSetComparison,
    /// What each counted voter is: a member's node or a witness ([`witness`](super::witness)).
    pub voter_kinds: VoterKinds,
    pub quorum: QuorumAssessment,
}

impl DcsSnapshot {
    /// The DCS's kind; `None` when it is not watched.
    pub fn kind(&self) -> Option<DcsKind> {
        match self {
            DcsSnapshot::Unwatched => None,
            DcsSnapshot::Raft(_) => Some(DcsKind::Raft),
            DcsSnapshot::Etcd(_) => Some(DcsKind::Etcd),
        }
    }

    /// The Raft part, on a cluster whose Raft is polled.
    pub fn raft(&self) -> Option<&RaftSnapshot> {
        match self {
            DcsSnapshot::Raft(raft) => Some(raft),
            _ => None,
        }
    }

    /// The etcd part, on a cluster on etcd.
    pub fn etcd(&self) -> Option<&EtcdSnapshot> {
        match self {
            DcsSnapshot::Etcd(etcd) => Some(etcd),
            _ => None,
        }
    }

    /// The quorum verdict of the DCS, whatever its kind; `None` when it is not watched.
    pub fn verdict(&self) -> Option<QuorumVerdict> {
        match self {
            DcsSnapshot::Unwatched => None,
            DcsSnapshot::Raft(raft) => Some(raft.quorum.verdict()),
            DcsSnapshot::Etcd(etcd) => Some(etcd.quorum.verdict),
        }
    }

    /// How many more DCS members can fail before the quorum is lost (negative once lost);
    /// `None` when not known.
    pub fn margin(&self) -> Option<i64> {
        match self {
            DcsSnapshot::Unwatched => None,
            DcsSnapshot::Raft(raft) => raft.quorum.margin,
            DcsSnapshot::Etcd(etcd) => etcd.quorum.margin,
        }
    }

    /// The DCS leader the exporter believes in (a Raft node's id, an etcd member's name);
    /// `None` while there is none, or several.
    pub fn leader(&self) -> Option<&str> {
        match self {
            DcsSnapshot::Unwatched => None,
            DcsSnapshot::Raft(raft) => effective_raft_leader(&raft.nodes),
            DcsSnapshot::Etcd(etcd) => etcd.quorum.leader.as_deref(),
        }
    }
}
