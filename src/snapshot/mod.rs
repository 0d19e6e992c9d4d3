//! The immutable result of one poll of one cluster, and the store `/metrics` reads it from.
//!
//! Why snapshots: a scrape must never wait for a slow member, and a member that left the
//! cluster must vanish from the output. So the poller builds a complete [`ClusterSnapshot`]
//! off to the side and swaps it in whole; the encoder reads whatever is current. Nothing in
//! a snapshot changes after it is published, so no lock is held while encoding.
//!
//! The judgements an operator cares about (is there a quorum, does a member contradict the
//! DCS view) are computed here as pure functions of the snapshot, so they are tested without
//! networks and the encoder only maps values to metric names.
//!
//! The data types are in [`model`] and [`cluster`], below and above the judgements that read
//! them: no file here imports from this one.

mod cluster;
mod dcs;
mod etcd;
mod failover;
mod member_settings;
mod model;
mod quorum;
mod split;
mod standby;
mod store;
mod voters;
mod witness;
pub use cluster::ClusterSnapshot;
pub use dcs::{DcsKind, DcsSnapshot, RaftSnapshot};
pub use etcd::{EtcdEvidence, EtcdQuorum, EtcdSnapshot, KeyContent, ViewAgainstKeys};
pub use failover::{
    human_bytes, Exclusion, ExclusionReason, FailoverReadiness, MemberReadiness, PollFacts,
};
pub use member_settings::{InForce, SettingSource, PATRONI_REST_THREAD_POOL_SIZE};
pub use model::{
    effective_raft_leader, member_hosts, ClusterFact, ClusterReadTimes, Counters, DcsView, Failure,
    MemberDcsView, MemberFact, MemberReadTimes, MemberSnapshot, Probes, RaftNodeSnapshot, Source,
    SourcePosition, StandbySource,
};
pub use quorum::{QuorumAssessment, QuorumEvidence, QuorumVerdict, Unanswered};
pub use split::{
    answered_views, primaries, says_primary, MemberViewDiff, ViewComparison, ViewField,
};
pub use standby::{standby_leader_archive_recovery, standby_leader_streaming};
#[cfg(any(test, feature = "testkit"))]
pub use store::WholeSnapshot;
pub use store::{ClusterId, Encoding, Publisher, SnapshotStore};
pub use voters::{CountedVoters, NodeVoterSet, VoterSetComparison};
pub use witness::{VoterFacts, VoterKind, VoterKinds};

#[cfg(test)]
pub(crate) use model::captured;
