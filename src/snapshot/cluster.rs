//! The snapshot of one poll of one cluster, and the judgements that read the whole of it
//! (replication lag in seconds, clock skew against the Raft leader's host, where the Raft
//! leader runs).

use std::sync::Arc;
use std::time::Duration;

use crate::address::Host;
use crate::patroni::{ClusterView, DynamicConfig, HistoryEntry};

use super::dcs::DcsSnapshot;
use super::failover::FailoverReadiness;
use super::model::{
    effective_raft_leader, member_hosts, ClusterReadTimes, Counters, Failure, MemberSnapshot,
    StandbySource,
};
use super::split::{primaries, ViewComparison};
use super::witness::VoterKind;

/// Everything one poll of one cluster learned. Immutable once published.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterSnapshot {
    /// The `scope` label: what `/cluster` reported, else the configured or last known name.
    pub scope: String,
    /// Unix time at which the poll finished.
    pub polled_at_seconds: f64,
    pub poll_duration: Duration,
    /// `/cluster` as answered in this poll; `None` when no member answered it.
    pub cluster: Option<ClusterView>,
    /// Why `/cluster` could not be read from any member (the last error), when it could not.
    pub cluster_failure: Option<Failure>,
    /// The members of `cluster`, in its order, with their own views.
    pub members: Vec<MemberSnapshot>,
    /// Members that left `cluster` recently and are still asked (for the cluster's `ttl`,
    /// or as long as they say they are primary), by name.
    pub departed: Vec<MemberSnapshot>,
    /// The members of the failsafe topology (`GET /failsafe` of the member the exporter
    /// reads), while failsafe mode is on; `None` when not read.
    pub failsafe_members: Option<Vec<String>>,
    /// Every member's own DCS view compared.
    pub views: ViewComparison,
    /// `/history` as last read (asked when the timeline moves, and every few minutes):
    /// `read_at.history` says when; `None` when it was not read, or its last read failed.
    pub history: Option<Arc<[HistoryEntry]>>,
    /// The dynamic configuration (`/config`) as last read; it comes from the DCS, so it is
    /// as old as the DCS view. `None` until it was read once. Read every few polls:
    /// `read_at.config` says when.
    pub config: Option<DynamicConfig>,
    /// When the facts a poll does not always read (`config`, `history`, the DCS's voter set)
    /// were read: what is served between two reads is exported with its age.
    pub read_at: ClusterReadTimes,
    /// Who Patroni would promote if the leader died now; empty without `/cluster`.
    pub failover: FailoverReadiness,
    /// What the DCS said of itself, by kind; [`DcsSnapshot::Unwatched`] when only the REST
    /// API is watched.
    pub dcs: DcsSnapshot,
    pub counters: Counters,
    /// For a standby cluster whose source is configured (`standby_of`), the source's leader
    /// position when this snapshot was published ([`standby`](super::standby)); `None` otherwise.
    pub standby_source: Option<StandbySource>,
    /// What `--patroni.config-file` says of the members' Raft timing and REST pool; `None`
    /// without one. Which of it a member honours is its release's matter
    /// ([`super::member_settings`]).
    pub member_settings: Option<crate::config::MemberSettings>,
}

impl ClusterSnapshot {
    /// The member names holding the leader key in `/cluster`.
    pub fn leader_names(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| m.member.is_leader())
            .map(|m| m.member.name.as_str())
            .collect()
    }

    /// Listed and remembered members alike: everyone whose own word counts.
    pub fn members_and_departed(&self) -> impl Iterator<Item = &MemberSnapshot> {
        self.members.iter().chain(&self.departed)
    }

    /// The members that say they are primary (or standby leader) in their own `/patroni`,
    /// listed or remembered.
    pub fn primaries(&self) -> Vec<&MemberSnapshot> {
        primaries(self.members_and_departed())
    }

    /// The primary: the one member that says so in its own `/patroni`, else the DCS leader.
    fn primary(&self) -> Option<&MemberSnapshot> {
        match self.primaries()[..] {
            [one] => Some(one),
            _ => self.members.iter().find(|m| m.member.is_leader()),
        }
    }

    /// The leader's WAL position by its own word (`/patroni` of the DCS leader).
    fn leader_wal(&self) -> Option<u64> {
        self.members
            .iter()
            .find(|m| m.member.is_leader())?
            .own_view
            .as_ref()
            .ok()?
            .wal_flush_bytes
    }

    /// Replication lag in seconds, as operators read it: on a replica that is behind (it
    /// received more than it replayed, or replayed less than the leader's position), the
    /// time since the last transaction it replayed committed on the primary; 0 on a replica
    /// that is not behind. `None` for the leader, for a member that did not answer, and before
    /// a replica replayed any transaction.
    ///
    /// The flaw of any "time since last replayed transaction": on a primary that commits
    /// nothing, WAL without transactions (a checkpoint) leaves the replica "behind" and the
    /// value grows with the primary's idle time until the replica replays it (milliseconds
    /// when healthy). `patroni_member_lag_bytes` is the measure that has no such flaw.
    ///
    /// The replayed transaction's time was stamped by the primary's clock: a primary `s`
    /// seconds ahead makes "now − that time" read `s` short (PostgreSQL's own
    /// `now() - pg_last_xact_replay_timestamp()` has the same flaw: docs/failure-modes.md, "Lag
    /// in seconds"). So the value is corrected by the primary's clock offset, but
    /// only when that offset is larger than its error bars: a whole-second `Date` header would
    /// otherwise add ±0.5 s of noise to every healthy cluster.
    pub fn replay_lag_seconds(&self, member: &MemberSnapshot) -> Option<f64> {
        if member.member.is_leader() {
            return None;
        }
        let own = member.own_view.as_ref().ok()?;
        let replayed = own.wal_replayed_bytes?;
        let committed_at = own.replayed_timestamp_seconds?;
        let received_more = own.wal_received_bytes.is_some_and(|r| r > replayed);
        let leader_ahead = self.leader_wal().is_some_and(|leader| leader > replayed);
        if received_more || leader_ahead {
            let primary_ahead = self.primary_clock_offset_seconds().unwrap_or(0.0);
            Some((self.polled_at_seconds + primary_ahead - committed_at).max(0.0))
        } else {
            Some(0.0)
        }
    }

    /// How far the primary's clock is ahead of the exporter's, when that is more than the
    /// measure's error bars; `None` when it is within them or unknown. The primary is the one
    /// member that says so, else the DCS leader. Its last measure stands when its `/patroni`
    /// failed in this poll ([`MemberSnapshot::last_clock`]): else one timed-out request of a
    /// primary whose clock is ahead makes every replica's lag read that much short for a poll
    /// (seen in the e2e next-outage lab, 8 s).
    fn primary_clock_offset_seconds(&self) -> Option<f64> {
        let primary = self.primary()?;
        let offset = primary.last_clock?;
        (offset.seconds.abs() > offset.error_seconds).then_some(offset.seconds)
    }

    /// How far the primary's clock is ahead of the clock of the Raft leader's host (negative:
    /// behind), from the `Date` headers of both members' answers. Patroni's Raft KV stamps a
    /// key's expiry with the writer's clock and expires it on the Raft leader's
    /// (`dcs/raft.py`, `KVStoreTTL`): a primary behind the Raft leader by `s` sees its leader
    /// key expire `s` early. 0 when the primary runs the Raft leader; `None` when either is
    /// unknown (no single primary, no Raft leader, or no member on the Raft leader's host).
    pub fn leader_clock_skew_seconds(&self) -> Option<f64> {
        let primary = self.primary()?;
        let (_, on_raft_host) = self.member_on_raft_leader_host()?;
        if on_raft_host.member.name == primary.member.name {
            return Some(0.0);
        }
        Some(primary.clock?.seconds - on_raft_host.clock?.seconds)
    }

    /// Whether the Raft leader runs on another host than the primary (the one member that says
    /// so, else the DCS leader): then every DCS write of the primary crosses the network to
    /// the Raft leader's host, and a slow link there delays the leader key's renewal
    /// (canonical/postgresql-operator #1358). pysyncobj 0.3.16+ can move the leadership back
    /// on purpose (`syncobj_admin -transfer`). `None` without a single primary or Raft leader,
    /// and when no member and no witness is on the Raft leader's host.
    pub fn raft_leader_away_from_primary(&self) -> Option<bool> {
        let primary = self.primary()?;
        let raft = self.dcs.raft()?;
        let raft_leader = effective_raft_leader(&raft.nodes)?;
        if raft.voter_kinds.kind_of(raft_leader) == Some(VoterKind::Witness) {
            return Some(true);
        }
        // Unknown when no member is on the leader's host: REST and Raft on other addresses.
        let (raft_host, _) = self.member_on_raft_leader_host()?;
        Some(!member_hosts(&primary.member).contains(&raft_host))
    }

    /// The Raft leader's host (normalised) and a member, listed or remembered, on it; `None`
    /// without a Raft leader or without a member on its host.
    fn member_on_raft_leader_host(&self) -> Option<(Host, &MemberSnapshot)> {
        let raft_leader = effective_raft_leader(&self.dcs.raft()?.nodes)?;
        let raft_host = Host::of_node(raft_leader).ok()?;
        let member = self
            .members_and_departed()
            .find(|m| member_hosts(&m.member).contains(&raft_host))?;
        Some((raft_host, member))
    }

    /// Unix time of the newest `/history` entry.
    pub fn last_failover_seconds(&self) -> Option<f64> {
        self.history
            .as_ref()?
            .iter()
            .filter_map(|entry| entry.timestamp_seconds)
            .reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;
    use crate::raft::parse_admin_text;
    use crate::snapshot::{
        captured, QuorumAssessment, QuorumEvidence, QuorumVerdict, RaftNodeSnapshot, RaftSnapshot,
        Unanswered, VoterKinds,
    };
    use std::collections::BTreeSet;

    fn node(addr: &str, text: &str) -> RaftNodeSnapshot {
        RaftNodeSnapshot {
            node: addr.to_owned(),
            round_trip: None,
            status: Ok(parse_admin_text(text).unwrap()),
        }
    }

    /// The Raft part of a snapshot with these nodes (and nothing judged of them).
    fn raft_of(nodes: Vec<RaftNodeSnapshot>) -> DcsSnapshot {
        DcsSnapshot::Raft(RaftSnapshot {
            nodes,
            ..RaftSnapshot::default()
        })
    }

    fn down(addr: &str) -> RaftNodeSnapshot {
        RaftNodeSnapshot {
            node: addr.to_owned(),
            round_trip: None,
            status: Err(Failure {
                kind: ErrorKind::Connect,
                message: "refused".into(),
            }),
        }
    }

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn healthy_cluster_has_quorum() {
        let nodes: Vec<_> = (0..3)
            .map(|i| {
                node(
                    &format!("127.0.0.1{}:2222", i + 1),
                    &fixture(&format!("patroni-3.3.8/syncobj_admin-status-m{i}.txt")),
                )
            })
            .collect();
        let quorum = QuorumAssessment::assess(&nodes, &BTreeSet::new());
        assert_eq!(quorum.voters, 3);
        assert_eq!(quorum.with_quorum, 3);
        assert_eq!(quorum.leaders_claiming, 1);
        assert_eq!(quorum.evidence, QuorumEvidence::Leader);
        assert!(effective_raft_leader(&nodes).is_some());
    }

    #[test]
    fn stale_leader_without_quorum_is_not_a_quorum() {
        // The survivor 3 s after two of three members died still calls itself leader.
        let nodes = vec![
            down("127.0.0.11:2222"),
            node(
                "127.0.0.12:2222",
                &fixture("patroni-4.1.5/03-syncobj_admin-status-survivor-t+3s.txt"),
            ),
            down("127.0.0.13:2222"),
        ];
        let quorum = QuorumAssessment::assess(&nodes, &BTreeSet::new());
        assert_eq!(quorum.voters, 3);
        assert_eq!(quorum.evidence, QuorumEvidence::NoQuorum);
        assert_eq!(quorum.verdict(), QuorumVerdict::Lost);
        assert_eq!(effective_raft_leader(&nodes), None);
    }

    #[test]
    fn nothing_reachable_is_not_a_quorum() {
        // Nobody ever answered: refusals are no evidence (a wrong --raft.port looks alike).
        let quorum = QuorumAssessment::assess(&[down("a:1"), down("b:1")], &BTreeSet::new());
        assert_eq!(quorum.verdict(), QuorumVerdict::NotVisible);
        assert_eq!(quorum.voters, 2);
        assert_eq!(quorum.unanswered(Unanswered::Error), 2);
    }

    /// The captured healthy 4.1.5 cluster (sync mode) with each member's own view.
    fn captured_healthy(polled_at: f64) -> ClusterSnapshot {
        let dir = "patroni-4.1.5/states/healthy";
        let (cluster, members) = captured(
            &format!("{dir}/cluster.json"),
            &format!("{dir}/patroni-m{{i}}.json"),
        );
        ClusterSnapshot {
            scope: "pg-test".into(),
            polled_at_seconds: polled_at,
            cluster: Some(cluster),
            members,
            ..ClusterSnapshot::default()
        }
    }

    /// The healthy capture, polled `seconds` after member 1's last replayed transaction.
    fn polled_after_replay(seconds: f64) -> ClusterSnapshot {
        let replayed_at = captured_healthy(0.0).members[1]
            .own_view
            .as_ref()
            .unwrap()
            .replayed_timestamp_seconds
            .unwrap();
        captured_healthy(replayed_at + seconds)
    }

    #[test]
    fn replay_lag_in_seconds_counts_only_while_behind() {
        let mut snapshot = polled_after_replay(600.0);
        // Caught up: 0 however long ago the last transaction was (an idle primary).
        assert_eq!(snapshot.replay_lag_seconds(&snapshot.members[1]), Some(0.0));
        assert_eq!(snapshot.replay_lag_seconds(&snapshot.members[0]), None);
        // Received more than it replayed: the age of the last replayed transaction.
        let own = snapshot.members[1].own_view.as_mut().unwrap();
        own.wal_received_bytes = own.wal_replayed_bytes.map(|r| r + 8192);
        let lag = snapshot.replay_lag_seconds(&snapshot.members[1]).unwrap();
        assert!((lag - 600.0).abs() < 1e-6, "{lag}");
    }

    #[test]
    fn replay_lag_in_seconds_is_corrected_by_a_primary_clock_offset_beyond_its_error() {
        use crate::patroni::ClockOffset;
        let mut snapshot = polled_after_replay(60.0);
        let own = snapshot.members[1].own_view.as_mut().unwrap();
        own.wal_received_bytes = own.wal_replayed_bytes.map(|r| r + 8192);
        let primary = snapshot
            .members
            .iter()
            .position(|m| m.member.is_leader())
            .unwrap();
        // Its last measure: its /patroni may have failed in this poll (no `clock`).
        let lag_with_primary_offset = |snapshot: &mut ClusterSnapshot, seconds: f64| {
            snapshot.members[primary].last_clock = Some(ClockOffset {
                seconds,
                error_seconds: 0.52,
            });
            snapshot.replay_lag_seconds(&snapshot.members[1]).unwrap()
        };
        // The primary 8 s ahead stamped the transaction 8 s late: 8 s more lag than it reads.
        let lag = lag_with_primary_offset(&mut snapshot, 8.0);
        assert!((lag - 68.0).abs() < 1e-6, "{lag}");
        let lag = lag_with_primary_offset(&mut snapshot, -8.0);
        assert!((lag - 52.0).abs() < 1e-6, "{lag}");
        // Within the error bars of a whole-second Date header: no correction.
        let lag = lag_with_primary_offset(&mut snapshot, 0.45);
        assert!((lag - 60.0).abs() < 1e-6, "{lag}");
    }

    #[test]
    fn raft_leader_away_from_the_primarys_host() {
        let mut snapshot = captured_healthy(0.0);
        // No Raft leader known: unknown.
        assert_eq!(snapshot.raft_leader_away_from_primary(), None);
        // The Raft leader on member 1's host, the primary is member 0.
        snapshot.dcs = raft_of(vec![node(
            "127.0.0.12:2222",
            &fixture("patroni-3.3.8/syncobj_admin-status-m1.txt"),
        )]);
        assert_eq!(snapshot.raft_leader_away_from_primary(), Some(true));
        // On the primary's host.
        snapshot.dcs = raft_of(vec![node(
            "127.0.0.11:2222",
            &fixture("patroni-3.3.8/syncobj_admin-status-m1.txt")
                .replace("127.0.0.12:2222", "127.0.0.11:2222"),
        )]);
        assert_eq!(snapshot.raft_leader_away_from_primary(), Some(false));
        // On a host no member has: unknown, unless that voter is a witness.
        snapshot.dcs = raft_of(vec![node(
            "127.0.0.20:2224",
            &fixture("patroni-3.3.8/syncobj_admin-status-m1.txt")
                .replace("127.0.0.12:2222", "127.0.0.20:2224"),
        )]);
        assert_eq!(snapshot.raft_leader_away_from_primary(), None);
        if let DcsSnapshot::Raft(raft) = &mut snapshot.dcs {
            raft.voter_kinds = VoterKinds {
                voters: vec![("127.0.0.20:2224".into(), VoterKind::Witness)],
            };
        }
        assert_eq!(snapshot.raft_leader_away_from_primary(), Some(true));
    }

    #[test]
    fn clock_skew_is_the_primary_against_the_raft_leaders_host() {
        use crate::patroni::ClockOffset;
        let mut snapshot = captured_healthy(0.0);
        let offsets = [8.2, -0.1, 0.3];
        for (member, seconds) in snapshot.members.iter_mut().zip(offsets) {
            member.clock = Some(ClockOffset {
                seconds,
                error_seconds: 0.6,
            });
        }
        // No Raft leader known: no skew.
        assert_eq!(snapshot.leader_clock_skew_seconds(), None);
        // The Raft leader on member 1's host, the primary (member 0) 8.3 s ahead of it.
        snapshot.dcs = raft_of(vec![node(
            "127.0.0.12:2222",
            &fixture("patroni-3.3.8/syncobj_admin-status-m1.txt"),
        )]);
        assert_eq!(snapshot.dcs.leader(), Some("127.0.0.12:2222"));
        let skew = snapshot.leader_clock_skew_seconds().unwrap();
        assert!((skew - 8.3).abs() < 1e-9, "{skew}");
        // The primary runs the Raft leader: no skew between them, whatever the clocks.
        snapshot.dcs = raft_of(vec![node(
            "127.0.0.11:2222",
            &fixture("patroni-3.3.8/syncobj_admin-status-m1.txt")
                .replace("127.0.0.12:2222", "127.0.0.11:2222"),
        )]);
        assert_eq!(snapshot.leader_clock_skew_seconds(), Some(0.0));
    }
}
