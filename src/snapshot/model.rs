//! The data of a snapshot: what each request answered or why it failed, per member and per
//! Raft node, and the counters kept across polls.
//!
//! Why a module of its own: the judgements (quorum, split views, voters, witnesses, failover,
//! standby) read these types and [`ClusterSnapshot`](super::cluster::ClusterSnapshot) holds
//! their results; with the data below them all, every import in this folder runs one way, down,
//! and none back up to `mod.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::address::Host;
use crate::error_kind::ErrorKind;
use crate::patroni::{
    ApiUrl, ClockOffset, ClusterView, ComparedView, DynamicConfig, Member, MemberRole,
    MemberStatus, PatroniError,
};
use crate::raft::{RaftState, RaftStatus};

/// Which source a poll error came from: the `source` label of
/// `patroni_exporter_poll_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    Cluster,
    Member,
    History,
    Config,
    /// `/liveness` and `/readiness`.
    Probe,
    Failsafe,
    Raft,
    Etcd,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Cluster => "cluster",
            Source::Member => "member",
            Source::History => "history",
            Source::Config => "config",
            Source::Probe => "probe",
            Source::Failsafe => "failsafe",
            Source::Raft => "raft",
            Source::Etcd => "etcd",
        }
    }
}

/// A failed request, reduced to what is exported and logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The error kind: the `kind` label.
    pub kind: ErrorKind,
    /// The human-readable cause, for logs and the status command.
    pub message: String,
}

impl Failure {
    /// Whether a request was sent at all: false when the exporter's own policy refused to
    /// contact the host (an `api_url` not on an allowed host), which says nothing of the
    /// member itself.
    pub fn request_sent(&self) -> bool {
        self.kind.request_sent()
    }
}

impl From<&PatroniError> for Failure {
    fn from(error: &PatroniError) -> Failure {
        Failure {
            kind: error.kind(),
            message: error.describe(),
        }
    }
}

impl From<&crate::etcd::EtcdError> for Failure {
    fn from(error: &crate::etcd::EtcdError) -> Failure {
        Failure {
            kind: error.kind(),
            message: error.describe(),
        }
    }
}

impl From<&crate::raft::RaftError> for Failure {
    fn from(error: &crate::raft::RaftError) -> Failure {
        Failure {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// A member as `/cluster` lists it (or listed it, for a remembered member), with the
/// answers of its own `/patroni` and `/cluster`.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberSnapshot {
    pub member: Member,
    /// The member's own view; `Err` when it did not answer (or has no usable `api_url`).
    pub own_view: Result<MemberStatus, Failure>,
    /// The DCS as the member's own Raft replica shows it (its `/cluster`, and its `/config`
    /// when read); `None` when it was not asked.
    pub dcs_view: Option<Result<MemberDcsView, Failure>>,
    /// `None` while the member is listed in the `/cluster` the exporter reads; for a member
    /// remembered after it left that view, the Unix time of the first poll that missed it.
    pub left_dcs_at: Option<f64>,
    /// The member's clock against the exporter's, from the `Date` of its `/patroni` answer in
    /// this poll; `None` when it did not answer. Exported, and the clock skew's input.
    pub clock: Option<ClockOffset>,
    /// [`MemberSnapshot::clock`], else the last poll's measure whose `/patroni` answered (a
    /// clock drifts by milliseconds a day). Only for the replay lag's correction
    /// ([`ClusterSnapshot::replay_lag_seconds`](super::ClusterSnapshot::replay_lag_seconds)),
    /// whose docs say so: never exported, so no gauge shows a remembered offset as current.
    pub last_clock: Option<ClockOffset>,
    /// How long its `GET /patroni` took in this poll (the same request Patroni's members send
    /// one another with a 2 s timeout); `None` when it did not answer.
    pub round_trip: Option<Duration>,
    /// Its `GET /liveness` (is its HA loop running?) and `GET /readiness`, as last asked
    /// (one member per poll, in rotation); `None` until one answered.
    pub probes: Probes,
    /// When its facts asked in rotation (`probes`, its `/config`) were answered.
    pub read_at: MemberReadTimes,
}

/// A fact of the cluster that a poll does not always read, exported from its last read: the
/// `fact` label of `patroni_exporter_fact_read_timestamp_seconds`, which says when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClusterFact {
    /// The reader's `GET /config` (every few polls): `patroni_config_*`, failover readiness.
    Config,
    /// The reader's `GET /history` (when the timeline moves): `patroni_cluster_history_entries`,
    /// `patroni_cluster_last_failover_timestamp_seconds`.
    History,
    /// The Raft voter set, kept from the last poll in which a node answered:
    /// `patroni_raft_voters`, the quorum verdict's majority, `patroni_raft_node_info`.
    RaftVoters,
    /// etcd's voting members, kept from the last member list read: `patroni_etcd_members`,
    /// the etcd quorum verdict's majority.
    EtcdMembers,
    /// The etcd members' `GET /version` (asked again every few polls, and every poll while
    /// the members' versions change): `patroni_etcd_member_info`'s `cluster_version`.
    EtcdVersions,
}

impl ClusterFact {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterFact::Config => "config",
            ClusterFact::History => "history",
            ClusterFact::RaftVoters => "raft_voters",
            ClusterFact::EtcdMembers => "etcd_members",
            ClusterFact::EtcdVersions => "etcd_versions",
        }
    }
}

/// When the facts of a cluster that a poll does not always read were last read: the
/// `polled_at_seconds` of the poll that read them (equal to this snapshot's when this poll
/// read them); `None` when the value is not exported (never read, or the last read failed
/// and nothing is kept).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ClusterReadTimes {
    pub config: Option<f64>,
    pub history: Option<f64>,
    pub raft_voters: Option<f64>,
    pub etcd_members: Option<f64>,
    pub etcd_versions: Option<f64>,
}

impl ClusterReadTimes {
    /// Each fact with its read time, those read at least once.
    pub fn each(&self) -> impl Iterator<Item = (ClusterFact, f64)> {
        [
            (ClusterFact::Config, self.config),
            (ClusterFact::History, self.history),
            (ClusterFact::RaftVoters, self.raft_voters),
            (ClusterFact::EtcdMembers, self.etcd_members),
            (ClusterFact::EtcdVersions, self.etcd_versions),
        ]
        .into_iter()
        .filter_map(|(fact, at)| Some((fact, at?)))
    }
}

/// A fact of one member asked in rotation (one member per poll), exported from its last
/// answer: the `fact` label of `patroni_exporter_member_fact_read_timestamp_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberFact {
    /// Its own `GET /config`, compared in its DCS view (`patroni_member_dcs_view_differs`
    /// `{field="config"}`); the cluster's when it is the member the exporter reads.
    Config,
    /// `GET /liveness`: `patroni_member_liveness`.
    Liveness,
    /// `GET /readiness`: `patroni_member_readiness`.
    Readiness,
}

impl MemberFact {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberFact::Config => "config",
            MemberFact::Liveness => "liveness",
            MemberFact::Readiness => "readiness",
        }
    }
}

/// When a member's facts asked in rotation were last answered, as [`ClusterReadTimes`]:
/// `None` while the value is not exported (never answered, the last request failed, or its
/// `/cluster` was not read so its `/config` is compared with nothing).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemberReadTimes {
    pub config: Option<f64>,
    pub liveness: Option<f64>,
    pub readiness: Option<f64>,
}

impl MemberReadTimes {
    /// Each fact with its read time, those answered.
    pub fn each(&self) -> impl Iterator<Item = (MemberFact, f64)> {
        [
            (MemberFact::Config, self.config),
            (MemberFact::Liveness, self.liveness),
            (MemberFact::Readiness, self.readiness),
        ]
        .into_iter()
        .filter_map(|(fact, at)| Some((fact, at?)))
    }
}

/// The health endpoints of a member, as last answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Probes {
    /// `GET /liveness` answered 200 (`true`) or 503 (`false`).
    pub liveness: Option<bool>,
    /// `GET /readiness` answered 200 or 503.
    pub readiness: Option<bool>,
}

impl MemberSnapshot {
    /// Whether the member's own view contradicts `/cluster`: a leader in `/cluster` that does
    /// not say `primary` (or `standby_leader`) itself, or a non-leader that says `primary`.
    ///
    /// `None` when the member did not answer: no view, no contradiction to judge.
    pub fn role_mismatch(&self) -> Option<bool> {
        let own = self.own_view.as_ref().ok()?;
        let reported = own.role.as_ref()?;
        let dcs_says_leader = self.member.role.is_leader();
        let says_leader = match self.member.role {
            MemberRole::StandbyLeader => *reported == MemberRole::StandbyLeader,
            _ => *reported == MemberRole::Primary,
        };
        let says_any_leader = reported.says_leader();
        Some(if dcs_says_leader {
            !says_leader
        } else {
            says_any_leader
        })
    }
}

/// The answer (or failure) of one Raft node's status query.
#[derive(Debug, Clone, PartialEq)]
pub struct RaftNodeSnapshot {
    /// The address queried, `host:port`: the `node` label.
    pub node: String,
    pub status: Result<RaftStatus, Failure>,
    /// How long the status query took in this poll; `None` when it failed, and through
    /// `--raft.command` (whose run time is mostly the program's start).
    pub round_trip: Option<Duration>,
}

impl RaftNodeSnapshot {
    /// The node's own id (`self` in its status), falling back to the address queried: the
    /// name under which its partners list it, whatever address reached it.
    pub fn identity(&self) -> &str {
        match &self.status {
            Ok(status) if !status.self_node.is_empty() => &status.self_node,
            _ => &self.node,
        }
    }
}

/// The Raft leader the exporter believes in: the single node in state leader that has a
/// quorum. `None` while there is none (or, transiently, several).
pub fn effective_raft_leader(nodes: &[RaftNodeSnapshot]) -> Option<&str> {
    let mut leaders = nodes.iter().filter(|node| {
        node.status
            .as_ref()
            .is_ok_and(|status| status.state == RaftState::Leader && status.has_quorum)
    });
    let leader = leaders.next()?;
    if leaders.next().is_some() {
        return None;
    }
    Some(leader.identity())
}

/// The hosts a member is reached at: its `host` and its `api_url`'s host, normalised as the
/// host policy compares them.
pub fn member_hosts(member: &Member) -> Vec<Host> {
    let api_host = member
        .api_url
        .as_ref()
        .and_then(ApiUrl::url)
        .and_then(Host::of_url);
    member
        .host
        .as_deref()
        .and_then(|host| Host::parse(host).ok())
        .into_iter()
        .chain(api_host)
        .collect()
}

/// The parts of one member's `GET /cluster` (and `GET /config`) that are compared. The
/// positions and lags are left out: they change with every loop of every member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcsView {
    /// Members holding the leader key, sorted.
    pub leaders: Vec<String>,
    /// Each member with a key and its timeline (as its key says), sorted by member: what
    /// [`DcsView::members`] lists too.
    pub timelines: Vec<(String, Option<u64>)>,
}

impl DcsView {
    /// Every member with a key, sorted. Read off `timelines`, not kept beside it: three
    /// views per poll of every cluster, each a vector and a copy of every name.
    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.timelines.iter().map(|(name, _)| name.as_str())
    }

    /// The view of the `/cluster` the exporter read whole.
    pub fn of(view: &ClusterView) -> DcsView {
        DcsView::of_members(
            view.members
                .iter()
                .map(|m| (m.name.clone(), m.is_leader(), m.timeline)),
        )
    }

    /// The view of a member's own `/cluster`, read as far as it is compared.
    pub fn of_compared(view: ComparedView) -> DcsView {
        DcsView::of_members(
            view.members
                .into_iter()
                .map(|m| (m.name, m.role.is_leader(), m.timeline)),
        )
    }

    /// From each member's name, whether it holds the leader key, and its timeline.
    fn of_members(members: impl Iterator<Item = (String, bool, Option<u64>)>) -> DcsView {
        let mut leaders = Vec::new();
        let mut timelines: Vec<(String, Option<u64>)> = members
            .map(|(name, leads, timeline)| {
                if leads {
                    leaders.push(name.clone());
                }
                (name, timeline)
            })
            .collect();
        timelines.sort();
        leaders.sort();
        DcsView { leaders, timelines }
    }
}

/// What one member's own `GET /cluster` and `GET /config` said, as far as they were read.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberDcsView {
    pub view: DcsView,
    /// Its `GET /config`, when read (asked one member per poll, in rotation).
    pub config: Option<DynamicConfig>,
}

/// Counters kept by the poller across polls and copied into every snapshot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Counters {
    /// Leader changes seen in `/cluster` (a different member holding the leader key).
    pub leader_changes: u64,
    /// DCS leader changes (a different Raft node as the quorum-holding leader, a different
    /// etcd member as the leader all answering members agree on).
    pub dcs_leader_changes: u64,
    /// DCS quorum verdicts of `lost` that followed a `confirmed` one (with any `not visible`
    /// polls in between).
    pub dcs_quorum_losses: u64,
    /// Failed requests by source and error kind.
    pub poll_errors: BTreeMap<(Source, ErrorKind), u64>,
    /// Polls that could not start on time because the previous one was still running.
    pub polls_skipped: u64,
    /// Changes of the dynamic configuration (`GET /config`) seen between two polls.
    pub config_changes: u64,
    /// Polls in which more than one member said it is primary (or standby leader).
    pub multiple_primaries_polls: u64,
}

/// The source cluster's leader position, copied from the source's latest snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePosition {
    /// The member that said it is primary.
    pub leader: String,
    /// Its WAL position by its own word (`xlog.location` of its `GET /patroni`), in bytes.
    pub wal_bytes: u64,
    /// When the source's poll that read it finished (Unix time).
    pub polled_at_seconds: f64,
}

/// A standby cluster's configured source (`standby_of:` in `--config.file`) and what the
/// source's latest snapshot said when this one was published.
#[derive(Debug, Clone, PartialEq)]
pub struct StandbySource {
    /// The source cluster's scope.
    pub scope: String,
    /// `None` when the source is not polled yet, or has no single primary with a position.
    pub position: Option<SourcePosition>,
}

/// A captured `/cluster` with the captured `/patroni` of each member (`{i}` in `member_path`
/// is the member's index), for the unit tests of the judgements.
#[cfg(test)]
pub(crate) fn captured(
    cluster_path: &str,
    member_path: &str,
) -> (ClusterView, Vec<MemberSnapshot>) {
    let cluster = crate::patroni::parse_cluster(&crate::fixture(cluster_path)).unwrap();
    let members = cluster
        .members
        .iter()
        .enumerate()
        .map(|(i, member)| MemberSnapshot {
            member: member.clone(),
            own_view: Ok(crate::patroni::parse_member_status(&crate::fixture(
                &member_path.replace("{i}", &i.to_string()),
            ))
            .unwrap()),
            dcs_view: None,
            left_dcs_at: None,
            clock: None,
            last_clock: None,
            round_trip: None,
            probes: Probes::default(),
            read_at: MemberReadTimes::default(),
        })
        .collect();
    (cluster, members)
}

#[cfg(test)]
mod tests {
    use super::DcsView;
    use crate::patroni::{parse_cluster, parse_compared_view};

    /// Every captured `/cluster` (3.3.8 and 4.1.5, in every state captured), with its path.
    fn captured_clusters() -> Vec<(String, Vec<u8>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut found = Vec::new();
        let mut dirs = vec![root.join("patroni-3.3.8"), root.join("patroni-4.1.5")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    dirs.push(path);
                } else if name.contains("cluster") && name.ends_with(".json") {
                    found.push((path.display().to_string(), std::fs::read(&path).unwrap()));
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn a_members_view_read_as_compared_is_the_view_read_whole() {
        let captured = captured_clusters();
        assert!(captured.len() >= 30, "{} captured /cluster", captured.len());
        let mut with_leader = 0;
        for (path, body) in &captured {
            let whole = DcsView::of(&parse_cluster(body).unwrap_or_else(|e| panic!("{path}: {e}")));
            let compared = parse_compared_view(body).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(DcsView::of_compared(compared), whole, "{path}");
            with_leader += usize::from(!whole.leaders.is_empty());
        }
        assert!(
            with_leader > captured.len() / 2,
            "most captures have a leader"
        );
    }

    #[test]
    fn the_compared_view_refuses_what_the_whole_view_refuses_of_its_fields() {
        for body in [
            r#"{"members": [{"role": "leader", "state": "running"}]}"#,
            r#"{"members": [{"name": "a", "state": "running"}]}"#,
            r#"{"members": [{"name": "a", "role": "leader"}]}"#,
            r#"{"members": [{"name": "a", "role": "leader", "state": "running", "timeline": "2"}]}"#,
            r#"{"members": [{"name": 1, "role": "leader", "state": "running"}]}"#,
            r#"{"scope": "s"}"#,
            "garbage",
        ] {
            assert!(parse_cluster(body.as_bytes()).is_err(), "{body}");
            assert!(parse_compared_view(body.as_bytes()).is_err(), "{body}");
        }
        let odd = r#"{"scope": "s", "members": [{"name": "a", "role": "standby_leader",
            "state": "in archive recovery", "timeline": 3, "api_url": "not a url", "tags": 5}]}"#;
        let compared = parse_compared_view(odd.as_bytes()).unwrap();
        assert_eq!(compared.scope.as_deref(), Some("s"));
        assert_eq!(DcsView::of_compared(compared).leaders, ["a"]);
    }
}
