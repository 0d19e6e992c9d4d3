//! Standby clusters (Patroni's `standby_cluster:`, the cross-region DR setup): is this cluster
//! one, does its standby leader stream from its source, and how far behind the source's leader
//! is it.
//!
//! Why the pairing is made at publication, by the standby's poller: the lag needs the source
//! cluster's leader position, which another poller owns. The two pollers stay independent (a
//! dead source must not delay the standby's poll); when the standby's poll is done, its poller
//! publishes it through its [`Publisher`](super::Publisher), which reads the source's latest
//! *published* snapshot from the source's slot and copies the one number it needs
//! ([`SourcePosition`]) into the standby's snapshot before that snapshot is stored and encoded. So the judgement stays a pure function of one immutable snapshot,
//! the encoding kept with each snapshot (`metrics::EncodedCluster`) stays per cluster, and `status` pairs the
//! snapshots of one run the same way. The price: the source's position is as old as the
//! source's last poll (at most one poll interval), so under a write load the lag reads up to
//! one interval's WAL short; it is never read long. The position's age is kept
//! ([`SourcePosition::polled_at_seconds`]) and said in `docs/metrics.md`.
//!
//! The standby leader's own `GET /patroni` says `replication_state`: `streaming` while its
//! walreceiver streams from the source, `in archive recovery` when it only replays from the
//! archive (`restore_command` set), absent when it does neither (Patroni's
//! `postgresql.replication_state_from_parameters`, the same in 3.3.8 and 4.1.5).

use super::cluster::ClusterSnapshot;
use super::model::{MemberSnapshot, SourcePosition, StandbySource};
use crate::patroni::{MemberRole, MemberState};

impl SourcePosition {
    /// The position of the one member of `source` that says it is primary, when there is
    /// exactly one and it answered with a position. A source that is itself a standby
    /// cluster (a cascade) has no primary: its standby leader's replayed position is used.
    pub fn of(source: &ClusterSnapshot) -> Option<SourcePosition> {
        let primaries = source.primaries();
        let [leader] = primaries[..] else {
            return None;
        };
        let own = leader.own_view.as_ref().ok()?;
        let wal_bytes = match own.role {
            Some(MemberRole::StandbyLeader) => own.wal_replayed_bytes?,
            _ => own.wal_flush_bytes?,
        };
        Some(SourcePosition {
            leader: leader.member.name.clone(),
            wal_bytes,
            polled_at_seconds: source.polled_at_seconds,
        })
    }
}

impl StandbySource {
    /// Pairs with `source`, the source's latest snapshot if it was published.
    pub fn new(scope: &str, source: Option<&ClusterSnapshot>) -> StandbySource {
        StandbySource::at(scope, source.and_then(SourcePosition::of))
    }

    /// Pairs with the source whose leader's position is `position` (`None`: not polled yet,
    /// or without a single primary with a position).
    pub fn at(scope: &str, position: Option<SourcePosition>) -> StandbySource {
        StandbySource {
            scope: scope.to_owned(),
            position,
        }
    }
}

impl ClusterSnapshot {
    /// Whether this is a standby cluster: the member holding the leader key in `/cluster` is
    /// a `standby_leader`. `None` without `/cluster` or without a leader.
    pub fn is_standby_cluster(&self) -> Option<bool> {
        let leader = self.members.iter().find(|m| m.member.is_leader())?;
        Some(leader.member.role == MemberRole::StandbyLeader)
    }

    /// The members that say `standby_leader` in their own `GET /patroni`, listed or
    /// remembered.
    pub fn standby_leaders(&self) -> impl Iterator<Item = &MemberSnapshot> {
        self.members_and_departed().filter(|m| {
            m.own_view
                .as_ref()
                .is_ok_and(|own| own.role == Some(MemberRole::StandbyLeader))
        })
    }

    /// The one member that says `standby_leader`; `None` when none or several do.
    pub fn standby_leader(&self) -> Option<&MemberSnapshot> {
        let mut leaders = self.standby_leaders();
        match (leaders.next(), leaders.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    /// How far the standby leader's replayed position is behind the source's leader, in
    /// bytes (0 when it is ahead of the source's older reading). `None` when this cluster has
    /// no source configured, the source's position is unknown, or there is not exactly one
    /// standby leader with a replayed position.
    pub fn standby_lag_bytes(&self) -> Option<u64> {
        let source = self.standby_source.as_ref()?.position.as_ref()?;
        let replayed = self
            .standby_leader()?
            .own_view
            .as_ref()
            .ok()?
            .wal_replayed_bytes?;
        Some(source.wal_bytes.saturating_sub(replayed))
    }
}

/// Whether a standby leader streams from its source, by its own `replication_state`.
pub fn standby_leader_streaming(member: &MemberSnapshot) -> Option<bool> {
    let own = member.own_view.as_ref().ok()?;
    Some(own.replication_state == Some(MemberState::Streaming))
}

/// Whether a standby leader replays from the archive only (`in archive recovery`).
pub fn standby_leader_archive_recovery(member: &MemberSnapshot) -> Option<bool> {
    let own = member.own_view.as_ref().ok()?;
    Some(own.replication_state == Some(MemberState::InArchiveRecovery))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patroni::{Member, MemberStatus};
    use crate::snapshot::Probes;

    fn member(name: &str, dcs_role: &str, own: MemberStatus) -> MemberSnapshot {
        MemberSnapshot {
            member: Member {
                name: name.to_owned(),
                role: dcs_role.into(),
                ..Member::default()
            },
            own_view: Ok(own),
            dcs_view: None,
            left_dcs_at: None,
            clock: None,
            last_clock: None,
            round_trip: None,
            probes: Probes::default(),
            read_at: crate::snapshot::MemberReadTimes::default(),
        }
    }

    fn primary(wal: u64) -> MemberStatus {
        MemberStatus {
            role: Some("primary".into()),
            wal_flush_bytes: Some(wal),
            ..MemberStatus::default()
        }
    }

    fn standby_leader(replayed: u64, state: Option<&str>) -> MemberStatus {
        MemberStatus {
            role: Some("standby_leader".into()),
            wal_replayed_bytes: Some(replayed),
            wal_received_bytes: Some(replayed),
            replication_state: state.map(MemberState::from),
            ..MemberStatus::default()
        }
    }

    fn replica(replayed: u64) -> MemberStatus {
        MemberStatus {
            role: Some("replica".into()),
            wal_replayed_bytes: Some(replayed),
            ..MemberStatus::default()
        }
    }

    fn source() -> ClusterSnapshot {
        ClusterSnapshot {
            scope: "pg-main".into(),
            polled_at_seconds: 100.0,
            members: vec![
                member("main-0", "leader", primary(5_000)),
                member("main-1", "sync_standby", replica(4_000)),
            ],
            ..ClusterSnapshot::default()
        }
    }

    fn standby(replayed: u64, state: Option<&str>) -> ClusterSnapshot {
        ClusterSnapshot {
            scope: "pg-dr".into(),
            members: vec![
                member("dr-0", "standby_leader", standby_leader(replayed, state)),
                member("dr-1", "replica", replica(1)),
            ],
            ..ClusterSnapshot::default()
        }
    }

    #[test]
    fn a_cluster_led_by_a_standby_leader_is_a_standby_cluster() {
        assert_eq!(standby(0, None).is_standby_cluster(), Some(true));
        assert_eq!(source().is_standby_cluster(), Some(false));
        assert_eq!(ClusterSnapshot::default().is_standby_cluster(), None);
    }

    #[test]
    fn lag_is_the_source_leaders_position_minus_the_standby_leaders_replayed_one() {
        let mut dr = standby(3_000, Some("streaming"));
        assert_eq!(dr.standby_lag_bytes(), None, "no source configured");
        dr.standby_source = Some(StandbySource::new("pg-main", Some(&source())));
        let position = dr
            .standby_source
            .as_ref()
            .unwrap()
            .position
            .clone()
            .unwrap();
        assert_eq!(position.leader, "main-0");
        assert_eq!(position.polled_at_seconds, 100.0);
        assert_eq!(dr.standby_lag_bytes(), Some(2_000));
        // replayed past the source's (older) reading: 0, never negative
        let mut ahead = standby(6_000, Some("streaming"));
        ahead.standby_source = dr.standby_source.clone();
        assert_eq!(ahead.standby_lag_bytes(), Some(0));
    }

    #[test]
    fn a_standby_clusters_publisher_pairs_with_its_sources_slot() {
        use crate::snapshot::{ClusterId, Encoding, SnapshotStore};
        // What the store keeps of a publication is its encoding: here the pairing it saw.
        struct Lag {
            source: Option<String>,
            bytes: Option<u64>,
        }
        impl Encoding for Lag {
            fn encode(snapshot: &std::sync::Arc<ClusterSnapshot>) -> Lag {
                Lag {
                    source: snapshot.standby_source.as_ref().map(|s| s.scope.clone()),
                    bytes: snapshot.standby_lag_bytes(),
                }
            }
        }
        let store = SnapshotStore::<Lag>::default();
        let (main, dr) = (ClusterId::new("pg-main"), ClusterId::new("pg-dr"));
        store.arrange(&[main.clone(), dr.clone()]);
        let publisher = store.publisher(&dr, Some("pg-main")).unwrap();
        publisher.publish(standby(3_000, Some("streaming")));
        let unpaired = store.encoded_by_scope("pg-dr").unwrap();
        assert_eq!(unpaired.source.as_deref(), Some("pg-main"));
        assert_eq!(unpaired.bytes, None, "source not polled yet");
        store.publisher(&main, None).unwrap().publish(source());
        publisher.publish(standby(3_000, Some("streaming")));
        assert_eq!(store.encoded_by_scope("pg-dr").unwrap().bytes, Some(2_000));
    }

    #[test]
    fn no_lag_without_the_sources_single_primary() {
        let mut dr = standby(3_000, Some("streaming"));
        dr.standby_source = Some(StandbySource::new("pg-main", None));
        assert_eq!(dr.standby_lag_bytes(), None, "source not polled yet");
        let mut two = source();
        two.members[1] = member("main-1", "replica", primary(6_000));
        dr.standby_source = Some(StandbySource::new("pg-main", Some(&two)));
        assert_eq!(
            dr.standby_lag_bytes(),
            None,
            "two primaries: no single position"
        );
    }

    #[test]
    fn a_cascaded_source_gives_its_standby_leaders_replayed_position() {
        let upstream = standby(7_000, Some("streaming"));
        let mut dr = standby(3_000, Some("streaming"));
        dr.standby_source = Some(StandbySource::new("pg-dr", Some(&upstream)));
        assert_eq!(dr.standby_lag_bytes(), Some(4_000));
    }

    #[test]
    fn streaming_and_archive_recovery_by_the_standby_leaders_own_word() {
        let streaming = standby(0, Some("streaming"));
        let leader = streaming.standby_leaders().next().unwrap();
        assert_eq!(standby_leader_streaming(leader), Some(true));
        assert_eq!(standby_leader_archive_recovery(leader), Some(false));
        let archive = standby(0, Some("in archive recovery"));
        let leader = archive.standby_leaders().next().unwrap();
        assert_eq!(standby_leader_streaming(leader), Some(false));
        assert_eq!(standby_leader_archive_recovery(leader), Some(true));
        let neither = standby(0, None);
        let leader = neither.standby_leaders().next().unwrap();
        assert_eq!(standby_leader_streaming(leader), Some(false));
        assert_eq!(neither.standby_leaders().count(), 1);
    }
}

/// The captures of `tests/e2e/standby.sh` (`tests/fixtures/patroni-*/states/standby*`).
#[cfg(test)]
mod captured {
    use super::*;

    fn standby_cluster(version: &str, state: &str) -> ClusterSnapshot {
        let dir = format!("patroni-{version}/states/{state}");
        let (cluster, members) = crate::snapshot::captured(
            &format!("{dir}/cluster.json"),
            &format!("{dir}/patroni-m{{i}}.json"),
        );
        ClusterSnapshot {
            scope: cluster.scope.clone().unwrap_or_default(),
            cluster: Some(cluster),
            members,
            ..ClusterSnapshot::default()
        }
    }

    #[test]
    fn a_streaming_standby_leader_on_both_versions() {
        for version in ["3.3.8", "4.1.5"] {
            let dr = standby_cluster(version, "standby");
            assert_eq!(dr.is_standby_cluster(), Some(true), "{version}");
            let leaders: Vec<_> = dr.standby_leaders().collect();
            assert_eq!(leaders.len(), 1, "{version}");
            assert_eq!(leaders[0].member.name, "dr-0");
            assert_eq!(
                standby_leader_streaming(leaders[0]),
                Some(true),
                "{version}"
            );
            assert_eq!(
                dr.primaries().len(),
                1,
                "the standby leader counts as the primary"
            );
        }
    }

    #[test]
    fn the_source_primary_stopped_leaves_no_replication_state() {
        let dr = standby_cluster("3.3.8", "standby-not-streaming");
        let leader = dr.standby_leaders().next().unwrap();
        assert_eq!(
            leader.own_view.as_ref().unwrap().replication_state,
            None,
            "neither streaming nor in archive recovery: Patroni leaves the key out"
        );
        assert_eq!(standby_leader_streaming(leader), Some(false));
        assert_eq!(standby_leader_archive_recovery(leader), Some(false));
    }
}
