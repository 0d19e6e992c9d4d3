//! "If the leader dies now, will Patroni promote someone?": failover readiness.
//!
//! Why this is computed here and not read from Patroni: no endpoint of Patroni says it. The
//! answer is Patroni's own rule, applied to what the poller read in one poll. Patroni 3.3.8
//! and 4.1.5 decide it alike (`Ha.is_failover_possible`, `Ha.get_failover_candidates`,
//! `_MemberStatus.failover_limitation` in `patroni/ha.py`; `Tags.nofailover` in
//! `patroni/tags.py`). A member other than the leader is a candidate when
//! * it answers its own `GET /patroni` (Patroni asks the same URL), and its PostgreSQL runs;
//! * it is not tagged `nofailover` (a `failover_priority` of 0 or less counts as the tag);
//! * its watchdog has not failed;
//! * in synchronous mode, once the primary has named synchronous standbys, it is one of them
//!   (`sync_standby`, or `quorum_standby` in 4.x quorum mode);
//! * it is within `maximum_lag_on_failover` bytes of the leader's WAL position;
//! * with `check_timeline` on, it is not behind the cluster's timeline;
//! * and, before any of that, the DCS (Raft or etcd) has a quorum: a promotion starts by writing the
//!   leader key ([`FailoverReadiness::without_dcs_quorum`], applied by the poller when the
//!   quorum verdict is *lost*).
//!
//! Two differences from Patroni, both on the side of telling the operator earlier: the lag is
//! measured against the leader's live WAL position (its own `/patroni`) where Patroni uses the
//! position the leader last wrote to the DCS (up to `loop_wait` older); and in 4.x quorum
//! mode the number of votes the quorum needs is not checked (the `/sync` key's quorum is not
//! served by the REST API). Maintenance mode (`pause`) stops automatic failover whatever the
//! candidates; it has its own gauge, `patroni_cluster_paused`.

use crate::patroni::{ClusterView, DynamicConfig, MemberState, MemberStatus};

use super::dcs::DcsKind;
use super::model::MemberSnapshot;
use super::quorum::QuorumVerdict;
use super::split::ViewComparison;

/// Why a member would not be promoted. Each is a value of the `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExclusionReason {
    /// Its own `GET /patroni` did not answer (Patroni: "not reachable").
    Unreachable,
    /// The exporter may not ask it (its `api_url` host is not allowed): unknown, not down.
    Unknown,
    /// It answers, but its PostgreSQL is not running.
    NotRunning,
    /// Tagged `nofailover` (or `failover_priority` <= 0).
    Nofailover,
    /// `watchdog_failed` in its `/patroni`.
    Watchdog,
    /// Synchronous mode is on and it is not a synchronous (or quorum) standby.
    NotSync,
    /// Further behind the leader than `maximum_lag_on_failover`.
    Lag,
    /// `check_timeline` is on and its timeline is behind the cluster's.
    Timeline,
    /// The Raft DCS has lost its quorum (verdict lost): nobody can take the leader key.
    DcsQuorum,
    /// Its own `/cluster` differs from the other members' in who leads or who is a member:
    /// its Raft replica is stale or diverged, so it cannot take the leader key.
    DcsView,
}

impl ExclusionReason {
    pub const ALL: [ExclusionReason; 10] = [
        ExclusionReason::Unreachable,
        ExclusionReason::Unknown,
        ExclusionReason::NotRunning,
        ExclusionReason::Nofailover,
        ExclusionReason::Watchdog,
        ExclusionReason::NotSync,
        ExclusionReason::Lag,
        ExclusionReason::Timeline,
        ExclusionReason::DcsQuorum,
        ExclusionReason::DcsView,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExclusionReason::Unreachable => "unreachable",
            ExclusionReason::Unknown => "unknown",
            ExclusionReason::NotRunning => "not_running",
            ExclusionReason::Nofailover => "nofailover",
            ExclusionReason::Watchdog => "watchdog",
            ExclusionReason::NotSync => "not_sync",
            ExclusionReason::Lag => "lag",
            ExclusionReason::Timeline => "timeline",
            ExclusionReason::DcsQuorum => "dcs_quorum",
            ExclusionReason::DcsView => "dcs_view",
        }
    }
}

/// One reason, with the numbers that make it (for `status` and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub reason: ExclusionReason,
    /// Human-readable detail, e.g. `lag 40 MiB > maximum_lag_on_failover 1 MiB`.
    pub detail: String,
}

/// The readiness of one member that does not hold the leader key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberReadiness {
    pub name: String,
    /// Empty when the member is a candidate.
    pub exclusions: Vec<Exclusion>,
    /// Bytes behind the leader's WAL position, when both are known.
    pub lag_bytes: Option<u64>,
}

impl MemberReadiness {
    pub fn eligible(&self) -> bool {
        self.exclusions.is_empty()
    }
}

/// Failover readiness of a cluster, in `/cluster`'s member order, leaders left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FailoverReadiness {
    pub members: Vec<MemberReadiness>,
    /// The WAL a failover right now would lose, in bytes (`data_at_risk`).
    pub data_at_risk_bytes: Option<u64>,
}

impl FailoverReadiness {
    /// The number of members Patroni would accept as the new leader right now.
    pub fn candidates(&self) -> usize {
        self.members.iter().filter(|m| m.eligible()).count()
    }

    /// Judges every member but the leader(s), with `config` (Patroni's defaults when the
    /// dynamic configuration is not known).
    pub fn assess(
        cluster: &ClusterView,
        members: &[MemberSnapshot],
        config: Option<&DynamicConfig>,
    ) -> FailoverReadiness {
        let defaults = DynamicConfig::default();
        let config = config.unwrap_or(&defaults);
        let leader = members.iter().find(|m| m.member.is_leader());
        let leader_wal = leader
            .and_then(|m| m.own_view.as_ref().ok())
            .and_then(|own| own.wal_flush_bytes);
        let cluster_timeline = cluster.leader_timeline().or_else(|| {
            leader
                .and_then(|m| m.own_view.as_ref().ok())
                .and_then(|own| own.timeline)
        });
        // Patroni restricts candidates to sync standbys only once the primary named some
        // (`sync_mode_is_active`: the `/sync` key is not empty).
        let sync_active = config.synchronous_mode.is_synchronous()
            && cluster.members.iter().any(|m| m.role.is_sync());
        let context = Context {
            config,
            leader_wal,
            cluster_timeline,
            sync_active,
        };
        let readiness: Vec<MemberReadiness> = members
            .iter()
            .filter(|m| !m.member.is_leader())
            .map(|m| context.judge(m))
            .collect();
        FailoverReadiness {
            data_at_risk_bytes: data_at_risk(&readiness, members, sync_active, leader_wal),
            members: readiness,
        }
    }
}

/// The WAL a failover right now would lose: the leader's position minus the *received*
/// position of the best member Patroni could promote were it not for its lag (excluded by
/// nothing, or only by `maximum_lag_on_failover`: then Patroni refuses, and that is the
/// data a forced failover would lose). The received position, not the replayed one: a
/// promoted replica replays what it received before it opens.
///
/// In synchronous mode (active: the primary named its synchronous standbys) the best
/// member is a synchronous standby, which holds every transaction the primary acknowledged
/// as committed; what it lacks has not been acknowledged to any client. So it is 0 then.
/// (Unless `synchronous_commit` is `local` or `off`: Patroni's guarantee, and this one,
/// assume at least `remote_write`.)
///
/// `None` without a leader position or such a member.
fn data_at_risk(
    readiness: &[MemberReadiness],
    members: &[MemberSnapshot],
    sync_active: bool,
    leader_wal: Option<u64>,
) -> Option<u64> {
    leader_wal?;
    let promotable = readiness.iter().filter(|m| {
        m.exclusions
            .iter()
            .all(|exclusion| exclusion.reason == ExclusionReason::Lag)
    });
    let best = promotable.min_by_key(|m| m.lag_bytes.unwrap_or(u64::MAX))?;
    let synchronous = members
        .iter()
        .any(|m| m.member.name == best.name && m.member.role.is_sync());
    if sync_active && synchronous {
        return Some(0);
    }
    best.lag_bytes
}

impl FailoverReadiness {
    /// The readiness when the DCS (of `dcs`'s kind) has lost its quorum (the verdict is *lost*, on
    /// evidence): a replica is promoted only by writing the leader key, which needs the
    /// quorum, so every member is excluded whatever else it is like. (With failsafe mode the
    /// leader may stay primary; nobody can replace it either.) A verdict of *not visible* is
    /// not evidence, and leaves the readiness as Patroni's member rule judges it.
    pub fn without_dcs_quorum(mut self, dcs: DcsKind) -> FailoverReadiness {
        let detail = format!(
            "the {} DCS has no quorum: nobody can take the leader key",
            dcs.title()
        );
        for member in &mut self.members {
            member.exclusions.push(Exclusion {
                reason: ExclusionReason::DcsQuorum,
                detail: detail.clone(),
            });
        }
        self
    }
}

/// What one poll learned that failover readiness depends on.
pub struct PollFacts<'a> {
    /// The `/cluster` the exporter read; no readiness without it.
    pub cluster: Option<&'a ClusterView>,
    pub members: &'a [MemberSnapshot],
    pub config: Option<&'a DynamicConfig>,
    pub views: &'a ViewComparison,
    /// The members whose view diverged in the previous poll ([`ViewComparison::diverged_members`]);
    /// `None` when there was none (a first poll, `status`'s only one).
    pub diverged_before: Option<&'a [String]>,
    /// The DCS's kind and quorum verdict, when the DCS is watched.
    pub dcs: Option<(DcsKind, QuorumVerdict)>,
}

impl FailoverReadiness {
    /// Failover readiness with every fact of the poll: Patroni's member rule, then the DCS
    /// facts that override it (a member on a diverged replica, a DCS without quorum).
    pub fn of_poll(facts: PollFacts<'_>) -> FailoverReadiness {
        let Some(cluster) = facts.cluster else {
            return FailoverReadiness::default();
        };
        let readiness = FailoverReadiness::assess(cluster, facts.members, facts.config)
            .without_diverged_views(facts.views, facts.diverged_before);
        match facts.dcs {
            Some((kind, QuorumVerdict::Lost)) => readiness.without_dcs_quorum(kind),
            _ => readiness,
        }
    }

    /// Excludes the members whose own DCS view differs from the others' in the leader or
    /// the member set in this poll and in the one before (`diverged_before`; in this poll
    /// alone when there was none before): a member whose DCS replica is stale or on another
    /// side of a split acts on a DCS the majority does not share, and cannot write the leader
    /// key there.
    ///
    /// Why two polls: the members' `/cluster` answers of one poll are read at different
    /// instants, so a key written between two of them (a member that joins, a new leader)
    /// makes one view differ for one poll without any replica being stale. Excluding on that
    /// made the candidates read 0 for a poll while a member rejoined (the membership
    /// scenario, under load); a stale replica stays different, and is excluded one poll later.
    /// Without a poll before (the first, or `status`'s only one) there is no telling them
    /// apart, and a view that differs is taken for what it shows.
    pub fn without_diverged_views(
        mut self,
        views: &ViewComparison,
        diverged_before: Option<&[String]>,
    ) -> FailoverReadiness {
        for member in &mut self.members {
            let before = diverged_before.map_or(true, |names| names.contains(&member.name));
            if views.diverged(&member.name) && before {
                member.exclusions.push(Exclusion {
                    reason: ExclusionReason::DcsView,
                    detail: "its own /cluster differs from the other members' (leader or members) in two polls running: its DCS replica is stale".into(),
                });
            }
        }
        self
    }
}

struct Context<'a> {
    config: &'a DynamicConfig,
    leader_wal: Option<u64>,
    cluster_timeline: Option<u64>,
    sync_active: bool,
}

impl Context<'_> {
    fn judge(&self, snapshot: &MemberSnapshot) -> MemberReadiness {
        let name = snapshot.member.name.clone();
        let own = match &snapshot.own_view {
            Ok(own) => own,
            Err(failure) => {
                let (reason, detail) = if failure.request_sent() {
                    (
                        ExclusionReason::Unreachable,
                        format!("its API is unreachable ({})", failure.kind),
                    )
                } else {
                    (
                        ExclusionReason::Unknown,
                        "not asked (its api_url host is not allowed)".to_owned(),
                    )
                };
                return MemberReadiness {
                    name,
                    exclusions: vec![Exclusion { reason, detail }],
                    lag_bytes: None,
                };
            }
        };
        let lag_bytes = self.lag_bytes(snapshot, own);
        let mut exclusions = Vec::new();
        let mut exclude = |reason, detail: String| exclusions.push(Exclusion { reason, detail });
        if own.state != Some(MemberState::Running) {
            let state = own.state.as_ref().map_or("unknown", MemberState::as_str);
            exclude(
                ExclusionReason::NotRunning,
                format!("PostgreSQL is {state}"),
            );
        }
        if own.tags.nofailover {
            exclude(
                ExclusionReason::Nofailover,
                format!(
                    "tagged nofailover (failover_priority {})",
                    own.tags.failover_priority
                ),
            );
        }
        if own.watchdog_failed {
            exclude(ExclusionReason::Watchdog, "watchdog failed".into());
        }
        if self.sync_active && !snapshot.member.role.is_sync() {
            exclude(
                ExclusionReason::NotSync,
                format!(
                    "{} in synchronous_mode {}",
                    snapshot.member.role,
                    self.config.synchronous_mode.as_str()
                ),
            );
        }
        let limit = self.config.maximum_lag_on_failover_bytes;
        if let Some(lag) = lag_bytes.filter(|lag| *lag > limit) {
            exclude(
                ExclusionReason::Lag,
                format!(
                    "lag {} > maximum_lag_on_failover {}",
                    human_bytes(lag),
                    human_bytes(limit)
                ),
            );
        }
        if self.config.check_timeline {
            // Patroni: `not st.timeline or st.timeline < cluster_timeline`.
            match (own.timeline, self.cluster_timeline) {
                (Some(mine), Some(cluster)) if mine >= cluster && mine > 0 => {}
                (mine, cluster) => exclude(
                    ExclusionReason::Timeline,
                    format!(
                        "timeline {} behind the cluster's {}",
                        mine.map_or("unknown".into(), |t| t.to_string()),
                        cluster.map_or("unknown".into(), |t| t.to_string())
                    ),
                ),
            }
        }
        MemberReadiness {
            name,
            exclusions,
            lag_bytes,
        }
    }

    /// Bytes behind the leader: the leader's live position minus the member's furthest
    /// received or replayed one (Patroni's `wal_position`); `/cluster`'s own `lag` when the
    /// leader's position is not known.
    fn lag_bytes(&self, snapshot: &MemberSnapshot, own: &MemberStatus) -> Option<u64> {
        let position = own.wal_received_bytes.max(own.wal_replayed_bytes);
        match (self.leader_wal, position) {
            (Some(leader), Some(mine)) => Some(leader.saturating_sub(mine)),
            _ => snapshot.member.lag.as_ref().and_then(|lag| lag.bytes()),
        }
    }
}

/// `40 MiB`, `1 MiB`, `512 B`: what an operator reads in `status`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::patroni::{parse_dynamic_config, MemberRole};
    use crate::snapshot::Failure;

    use crate::snapshot::captured;

    /// The healthy 4.1.5 capture: postgresql-0 leads, 1 and 2 are sync standbys.
    fn healthy_4_1_5() -> (ClusterView, Vec<MemberSnapshot>) {
        captured(
            "patroni-4.1.5/01-cluster-from-m0.json",
            "patroni-4.1.5/01-patroni-m{i}.json",
        )
    }

    fn config() -> DynamicConfig {
        parse_dynamic_config(&fixture("patroni-4.1.5/01-config.json")).unwrap()
    }

    fn reasons(readiness: &FailoverReadiness, name: &str) -> Vec<ExclusionReason> {
        readiness
            .members
            .iter()
            .find(|m| m.name == name)
            .unwrap()
            .exclusions
            .iter()
            .map(|e| e.reason)
            .collect()
    }

    /// Asserts that member `name` would not be promoted, for `reason` alone.
    fn assert_excluded_for(readiness: &FailoverReadiness, name: &str, reason: ExclusionReason) {
        assert_eq!(reasons(readiness, name), [reason], "{name}");
    }

    fn own(members: &mut [MemberSnapshot], index: usize) -> &mut MemberStatus {
        members[index].own_view.as_mut().unwrap()
    }

    #[test]
    fn healthy_cluster_has_both_replicas_as_candidates() {
        let (cluster, members) = healthy_4_1_5();
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 2);
        let names: Vec<_> = readiness.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["postgresql-1", "postgresql-2"],
            "the leader is left out"
        );
        assert_eq!(readiness.members[0].lag_bytes, Some(0));
    }

    #[test]
    fn captured_3_3_8_cluster_has_two_candidates() {
        let (cluster, members) = captured(
            "patroni-3.3.8/cluster.json",
            "patroni-3.3.8/patroni-m{i}.json",
        );
        let readiness = FailoverReadiness::assess(&cluster, &members, None);
        assert_eq!(readiness.candidates(), 2);
    }

    #[test]
    fn nofailover_on_both_replicas_leaves_no_candidate() {
        let (cluster, mut members) = healthy_4_1_5();
        own(&mut members, 1).tags.nofailover = true;
        own(&mut members, 2).tags.nofailover = true;
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 0);
        assert_excluded_for(&readiness, "postgresql-2", ExclusionReason::Nofailover);
    }

    #[test]
    fn unreachable_and_unknown_are_told_apart() {
        let (cluster, mut members) = healthy_4_1_5();
        members[1].own_view = Err(Failure {
            kind: crate::error_kind::ErrorKind::Timeout,
            message: "timeout after 1s".into(),
        });
        members[2].own_view = Err(Failure {
            kind: crate::error_kind::ErrorKind::ApiUrlNotAllowed,
            message: "not allowed".into(),
        });
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 0);
        assert_excluded_for(&readiness, "postgresql-1", ExclusionReason::Unreachable);
        assert_excluded_for(&readiness, "postgresql-2", ExclusionReason::Unknown);
    }

    #[test]
    fn lag_beyond_the_limit_excludes_and_says_by_how_much() {
        let (cluster, mut members) = healthy_4_1_5();
        let leader_wal = own(&mut members, 0).wal_flush_bytes.unwrap();
        let behind = leader_wal - 40 * 1024 * 1024;
        own(&mut members, 2).wal_received_bytes = Some(behind);
        own(&mut members, 2).wal_replayed_bytes = Some(behind);
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 1);
        let member = &readiness.members[1];
        assert_eq!(member.exclusions[0].reason, ExclusionReason::Lag);
        assert_eq!(
            member.exclusions[0].detail,
            "lag 40 MiB > maximum_lag_on_failover 1 MiB"
        );
        // Exactly at the limit is still a candidate (Patroni: `lag > maximum_lag_on_failover`).
        let at_limit = leader_wal - 1_048_576;
        own(&mut members, 2).wal_received_bytes = Some(at_limit);
        own(&mut members, 2).wal_replayed_bytes = Some(at_limit);
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 2);
    }

    #[test]
    fn synchronous_mode_admits_only_sync_standbys_once_there_are_some() {
        let (mut cluster, mut members) = healthy_4_1_5();
        members[2].member.role = "replica".into();
        cluster.members[2].role = "replica".into();
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_excluded_for(&readiness, "postgresql-2", ExclusionReason::NotSync);
        assert_eq!(readiness.candidates(), 1);
        // Asynchronous: every replica qualifies.
        let asynchronous = DynamicConfig::default();
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&asynchronous));
        assert_eq!(readiness.candidates(), 2);
        // Synchronous mode but no sync standby named yet: Patroni does not restrict.
        for member in cluster
            .members
            .iter_mut()
            .chain(members.iter_mut().map(|m| &mut m.member))
        {
            if member.role.as_str() == "sync_standby" {
                member.role = "replica".into();
            }
        }
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 2);
    }

    #[test]
    fn watchdog_stopped_postgres_and_timeline_each_exclude() {
        let (cluster, mut members) = healthy_4_1_5();
        own(&mut members, 1).watchdog_failed = true;
        own(&mut members, 2).state = Some("stopped".into());
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_excluded_for(&readiness, "postgresql-1", ExclusionReason::Watchdog);
        assert_excluded_for(&readiness, "postgresql-2", ExclusionReason::NotRunning);

        let (cluster, mut members) = healthy_4_1_5();
        let mut checking = config();
        checking.check_timeline = true;
        own(&mut members, 0).timeline = Some(2);
        let mut cluster = cluster;
        cluster.members[0].timeline = Some(2);
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&checking));
        assert_eq!(readiness.candidates(), 0);
        assert_eq!(
            readiness.members[0].exclusions[0].detail,
            "timeline 1 behind the cluster's 2"
        );
        // Without check_timeline the same cluster has its two candidates.
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config()));
        assert_eq!(readiness.candidates(), 2);
    }

    /// A state captured on the real cluster by tests/e2e/capture-states.sh.
    fn captured_state(
        version: &str,
        state: &str,
    ) -> (ClusterView, Vec<MemberSnapshot>, DynamicConfig) {
        let dir = format!("patroni-{version}/states/{state}");
        let (cluster, members) = captured(
            &format!("{dir}/cluster.json"),
            &format!("{dir}/patroni-m{{i}}.json"),
        );
        let config = parse_dynamic_config(&fixture(&format!("{dir}/config.json"))).unwrap();
        (cluster, members, config)
    }

    #[test]
    fn every_captured_state_gets_the_candidates_patroni_would_take() {
        use ExclusionReason::{Nofailover, NotSync};
        let both = ["3.3.8", "4.1.5"];
        // (state, versions, expected reasons of postgresql-1 and postgresql-2)
        type Case<'a> = (&'a str, &'a [&'a str], [&'a [ExclusionReason]; 2]);
        let cases: &[Case] = &[
            ("healthy", &both, [&[], &[]]),
            ("async", &both, [&[], &[]]),
            ("pending-restart", &both, [&[], &[]]),
            ("replay-paused", &both, [&[], &[]]),
            ("scheduled-restart", &both, [&[], &[]]),
            ("failsafe-active", &both, [&[], &[]]),
            ("failsafe-active-late", &both, [&[], &[]]),
            ("quorum", &["4.1.5"], [&[], &[]]),
            ("quorum-any1", &["4.1.5"], [&[], &[]]),
            (
                "nofailover-all-replicas",
                &both,
                [&[Nofailover], &[Nofailover]],
            ),
            // postgresql-1: failover_priority 0; postgresql-2: nofailover and nosync, so
            // a plain replica while synchronous_mode is on.
            ("tags", &both, [&[Nofailover], &[Nofailover, NotSync]]),
        ];
        for (state, versions, expected) in cases {
            for version in *versions {
                let (cluster, members, config) = captured_state(version, state);
                let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config));
                for (index, want) in expected.iter().enumerate() {
                    let name = format!("postgresql-{}", index + 1);
                    assert_eq!(
                        reasons(&readiness, &name),
                        *want,
                        "{version} {state} {name}"
                    );
                }
                let candidates = expected.iter().filter(|want| want.is_empty()).count();
                assert_eq!(readiness.candidates(), candidates, "{version} {state}");
            }
        }
    }

    #[test]
    fn captured_signals_are_read() {
        for version in ["3.3.8", "4.1.5"] {
            let (_, members, _) = captured_state(version, "replay-paused");
            let paused: Vec<bool> = members
                .iter()
                .map(|m| m.own_view.as_ref().unwrap().wal_replay_paused)
                .collect();
            assert_eq!(paused, [false, true, false], "{version}");

            let (_, members, config) = captured_state(version, "failsafe-active");
            assert!(config.failsafe_mode, "{version}");
            let leader = members[0].own_view.as_ref().unwrap();
            assert!(
                leader.failsafe_active,
                "{version}: the leader runs in failsafe mode"
            );
            assert_eq!(
                leader.role.as_ref().map(MemberRole::as_str),
                Some("primary"),
                "{version}: and stays primary"
            );

            let (_, members, _) = captured_state(version, "scheduled-restart");
            let scheduled: Vec<bool> = members
                .iter()
                .map(|m| {
                    m.own_view
                        .as_ref()
                        .unwrap()
                        .scheduled_restart_seconds
                        .is_some()
                })
                .collect();
            assert_eq!(scheduled, [false, true, false], "{version}");

            let (cluster, members, _) = captured_state(version, "pending-restart");
            assert!(
                cluster.members.iter().all(|m| m.pending_restart),
                "{version}"
            );
            assert!(members
                .iter()
                .all(|m| m.own_view.as_ref().unwrap().pending_restart));

            let (cluster, members, _) = captured_state(version, "tags");
            let m2 = members[2].own_view.as_ref().unwrap();
            assert!(m2.tags.nofailover && m2.tags.nosync && m2.tags.noloadbalance);
            assert!(m2.tags.nostream, "{version}");
            assert_eq!(
                cluster.members[2].tags, m2.tags,
                "/cluster lists the same tags"
            );
            assert!(members[0].own_view.as_ref().unwrap().tags.clonefrom);
            assert_eq!(
                members[1].own_view.as_ref().unwrap().tags.failover_priority,
                0
            );
            let leader = members[0].own_view.as_ref().unwrap();
            let streaming: Vec<&str> = leader
                .replication
                .iter()
                .map(|p| p.application_name.as_str())
                .collect();
            assert_eq!(
                streaming,
                ["postgresql-1"],
                "{version}: nostream does not stream"
            );

            let (_, _, config) = captured_state(version, "async");
            assert_eq!(
                config.synchronous_mode,
                crate::patroni::SynchronousMode::Off
            );
        }
        let (_, members, config) = captured_state("4.1.5", "quorum-any1");
        assert_eq!(
            config.synchronous_mode,
            crate::patroni::SynchronousMode::Quorum
        );
        let leader = members[0].own_view.as_ref().unwrap();
        assert!(leader
            .replication
            .iter()
            .all(|p| p.sync_state == "quorum" && p.is_synchronous()));
    }

    #[test]
    fn a_lost_dcs_quorum_leaves_no_candidate() {
        let (cluster, members, config) = captured_state("4.1.5", "failsafe-active");
        let readiness = FailoverReadiness::assess(&cluster, &members, Some(&config));
        assert_eq!(readiness.candidates(), 2, "the members themselves are fine");
        let readiness = readiness.without_dcs_quorum(DcsKind::Raft);
        assert_eq!(readiness.candidates(), 0);
        assert_excluded_for(&readiness, "postgresql-1", ExclusionReason::DcsQuorum);
    }

    #[test]
    fn a_view_that_differs_excludes_only_in_two_polls_running() {
        use super::super::split::{MemberViewDiff, ViewField};
        let (cluster, members) = healthy_4_1_5();
        let differs = |fields: Vec<ViewField>| ViewComparison {
            distinct: 2,
            members: vec![MemberViewDiff {
                member: "postgresql-1".into(),
                differs: fields,
                config_known: true,
            }],
            unread: Vec::new(),
        };
        let judged = |views: &ViewComparison, before: &[String]| {
            FailoverReadiness::assess(&cluster, &members, Some(&config()))
                .without_diverged_views(views, Some(before))
        };
        let member_set = differs(vec![ViewField::Members]);
        // One poll after one that agreed: a key written between two members' answers.
        assert_eq!(judged(&member_set, &[]).candidates(), 2);
        assert_eq!(member_set.diverged_members(), ["postgresql-1"]);
        // No poll before (the first, `status`'s only one): what it shows.
        let first = FailoverReadiness::assess(&cluster, &members, Some(&config()))
            .without_diverged_views(&member_set, None);
        assert_excluded_for(&first, "postgresql-1", ExclusionReason::DcsView);
        // Two polls running: excluded, as for the leader.
        let twice = judged(&member_set, &member_set.diverged_members());
        assert_eq!(twice.candidates(), 1);
        assert_excluded_for(&twice, "postgresql-1", ExclusionReason::DcsView);
        let leader = differs(vec![ViewField::Leader]);
        assert_excluded_for(
            &judged(&leader, &["postgresql-1".into()]),
            "postgresql-1",
            ExclusionReason::DcsView,
        );
        // Another member's divergence before, or a timeline or config difference: no exclusion.
        assert_eq!(
            judged(&member_set, &["postgresql-2".into()]).candidates(),
            2
        );
        let minor = differs(vec![ViewField::Timelines, ViewField::Config]);
        assert!(minor.diverged_members().is_empty());
        assert_eq!(judged(&minor, &["postgresql-1".into()]).candidates(), 2);
    }

    #[test]
    fn bytes_read_as_an_operator_reads_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1_048_576), "1 MiB");
        assert_eq!(human_bytes(1_572_864), "1.5 MiB");
        assert_eq!(human_bytes(40 * 1024 * 1024), "40 MiB");
    }

    #[test]
    fn data_at_risk_is_what_the_best_replica_has_not_received() {
        const MIB: u64 = 1 << 20;
        let lagging = |state: &str, behind: [u64; 2]| {
            let (cluster, mut members, config) = captured_state("4.1.5", state);
            let leader = members[0]
                .own_view
                .as_ref()
                .unwrap()
                .wal_flush_bytes
                .unwrap();
            for (member, behind) in members[1..].iter_mut().zip(behind) {
                let own = member.own_view.as_mut().unwrap();
                own.wal_received_bytes = Some(leader - behind);
                own.wal_replayed_bytes = Some(leader - behind);
            }
            FailoverReadiness::assess(&cluster, &members, Some(&config))
        };
        // Asynchronous: the best of the two replicas, by its received position.
        assert_eq!(lagging("async", [0, 0]).data_at_risk_bytes, Some(0));
        assert_eq!(
            lagging("async", [3 * MIB / 4, MIB / 2]).data_at_risk_bytes,
            Some(MIB / 2)
        );
        // Both further behind than maximum_lag_on_failover (1 MiB): Patroni promotes nobody,
        // and a forced failover would lose what the better one lacks.
        let refused = lagging("async", [40 * MIB, 50 * MIB]);
        assert_eq!(refused.candidates(), 0);
        assert_eq!(refused.data_at_risk_bytes, Some(40 * MIB));
        // Synchronous mode with synchronous standbys: nothing acknowledged is at risk.
        assert_eq!(
            lagging("healthy", [MIB / 4, MIB / 4]).data_at_risk_bytes,
            Some(0)
        );
    }
}
