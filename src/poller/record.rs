//! Recording a poll: each answer settled into the poller's memory and counters, each member
//! made a [`MemberSnapshot`], then the judgements of the whole poll ([`ClusterPoller::judge`]).
//!
//! Why apart from the requests: what a poll asks and what it makes of the answers change for
//! different reasons; here is only the second, in the order the memory needs it (the reader's
//! configuration before the other members' copies, the members before the voters' kinds).

use std::collections::BTreeSet;
use std::time::Instant;

use super::discovery::without_aliases;
use super::members::{unix_now, DcsTiming};
use super::placement::Placement;
use super::requests::MemberAnswers;
use super::voters::VoterMemory;
use super::ClusterPoller;
use crate::address::Host;
use crate::config::Collector;
use crate::patroni::{self, ClusterView, DynamicConfig, HistoryEntry, PatroniError};
use crate::snapshot::{
    answered_views, primaries, ClusterSnapshot, DcsView, FailoverReadiness, Failure, MemberDcsView,
    MemberSnapshot, PollFacts, Probes, QuorumAssessment, RaftNodeSnapshot, Source, ViewComparison,
    VoterKinds, VoterSetComparison,
};

/// What every member's record reads besides its own answers.
pub(super) struct MemberContext<'a> {
    /// The scope `/cluster` named in this poll.
    pub(super) scope: Option<&'a str>,
    /// The names of the members listed or remembered.
    pub(super) known_names: &'a BTreeSet<String>,
    /// The member whose `/cluster` the exporter read.
    pub(super) reader: Option<&'a str>,
    /// That `/cluster`, as a view.
    pub(super) read_view: Option<&'a DcsView>,
}

/// One poll's answers, recorded: what the judgements are made from.
pub(super) struct PollRecord {
    pub(super) started: Instant,
    pub(super) cluster: Option<ClusterView>,
    pub(super) cluster_failure: Option<Failure>,
    pub(super) members: Vec<MemberSnapshot>,
    pub(super) departed: Vec<MemberSnapshot>,
    pub(super) raft_nodes: Vec<RaftNodeSnapshot>,
    pub(super) history: Option<Vec<HistoryEntry>>,
    pub(super) failsafe_members: Option<Vec<String>>,
    pub(super) read_view: Option<DcsView>,
}

impl ClusterPoller {
    /// The reader's `/config` (`None` when not asked in this poll): told to the cadence,
    /// counted when it changed, kept as the cluster's and the reader's own copy.
    pub(super) fn settle_dynamic_config(
        &mut self,
        answer: Option<Result<DynamicConfig, PatroniError>>,
        reader: Option<&str>,
    ) {
        self.memory
            .cadence
            .config_read(answer.as_ref().map(Result::is_ok));
        let Some(config) = self.settle(Source::Config, "config", answer) else {
            return;
        };
        if let Some(reader) = reader {
            self.memory
                .members
                .record_config(reader, config.clone(), true);
        }
        if self.memory.cadence.keep_config(config) {
            self.memory.counters.config_changes += 1;
        }
    }

    /// One member's answers settled (counted, logged, remembered) into its snapshot; `None`
    /// for a voter found this poll that is no member of this cluster (its REST API is
    /// elsewhere, or it names another cluster or a member already known).
    pub(super) fn record_member(
        &mut self,
        member: &patroni::Member,
        answers: MemberAnswers,
        place: Placement,
        context: &MemberContext<'_>,
    ) -> Option<MemberSnapshot> {
        let mut member = member.clone();
        if place == Placement::FoundVoter {
            member.name = found_voter_name(&mut self.memory.voters, &member, &answers, context)?;
        }
        let name = member.name.clone();
        self.note(
            Source::Member,
            &format!("member {name}"),
            answers.own.as_ref().err(),
        );
        if let Some(answer) = &answers.cluster {
            self.note(
                Source::Cluster,
                &format!("view of {name}"),
                answer.as_ref().err(),
            );
        }
        if let Some(answer) = answers.config {
            if let Some(config) =
                self.settle(Source::Config, &format!("config of {name}"), Some(answer))
            {
                if self.memory.cadence.config() != Some(&config) {
                    // an edit the reader's copy has not seen yet, or a member that differs
                    self.memory.cadence.config_differs();
                }
                self.memory.members.record_config(&name, config, false);
            }
        }
        if let Some((liveness, readiness)) = answers.probes {
            let liveness = self.settle(
                Source::Probe,
                &format!("liveness of {name}"),
                Some(liveness),
            );
            // Not asked in this poll: the last answer stands ([`READINESS_EVERY_TURNS`]).
            let readiness = match readiness {
                Some(answer) => {
                    self.settle(Source::Probe, &format!("readiness of {name}"), Some(answer))
                }
                None => self.memory.members.probes_of(&name).readiness,
            };
            self.memory.members.record_probes(
                &name,
                Probes {
                    liveness,
                    readiness,
                },
            );
        }
        let (own_view, clock, round_trip) = match answers.own {
            Ok(own) => (Ok(own.status), own.clock, Some(own.round_trip)),
            Err(failure) => (Err(failure), None, None),
        };
        // The reader's view is the one already read; every other member's is its own.
        let view = match (context.read_view, context.reader == Some(name.as_str())) {
            (Some(read), true) => Some(Ok(read.clone())),
            _ => answers
                .cluster
                .map(|answer| answer.map(|view| DcsView::of(&view))),
        };
        let config = self.memory.members.config_of(&name);
        Some(MemberSnapshot {
            member,
            own_view,
            clock,
            round_trip,
            probes: self.memory.members.probes_of(&name),
            dcs_view: view.map(|answer| {
                answer.map(|view| MemberDcsView {
                    view,
                    config: config.cloned(),
                })
            }),
            left_dcs_at: match place {
                Placement::Departed(at) => Some(at),
                Placement::Listed | Placement::FoundVoter => None,
            },
        })
    }

    /// The poll's record absorbed into the memory (departed members, voters, counters) and
    /// judged: the snapshot to publish.
    pub(super) fn judge(&mut self, record: PollRecord) -> ClusterSnapshot {
        let PollRecord {
            started,
            cluster,
            cluster_failure,
            members,
            mut departed,
            raft_nodes,
            history,
            failsafe_members,
            read_view,
        } = record;
        let timing = DcsTiming::of(self.memory.cadence.config());
        self.memory.members.settle(&mut departed, timing);
        let raft_nodes = without_aliases(raft_nodes);
        for node in &raft_nodes {
            let target = format!("raft {}", node.node);
            self.note(Source::Raft, &target, node.status.as_ref().err());
        }
        self.learn_raft(&raft_nodes);
        if let Some(view) = &cluster {
            self.memory.discovery.remember(view, &self.policy);
        }
        let voter_sets = VoterSetComparison::compare(&raft_nodes);
        let quorum =
            QuorumAssessment::assess_with(&raft_nodes, self.memory.voters.counted(), &voter_sets);
        // Without the views collector only the read view is known: nothing to compare.
        let views = if self.config.identity.collectors.enabled(Collector::Views) {
            ViewComparison::compare(
                &answered_views(members.iter().chain(&departed)),
                read_view.as_ref(),
            )
        } else {
            ViewComparison::default()
        };
        let failover = FailoverReadiness::of_poll(PollFacts {
            cluster: cluster.as_ref(),
            members: &members,
            config: self.memory.cadence.config(),
            views: &views,
            quorum: self.raft.is_some().then_some(&quorum),
        });
        if primaries(members.iter().chain(&departed)).len() > 1 {
            self.memory.counters.multiple_primaries_polls += 1;
        }
        self.memory.voters.count(&raft_nodes, &voter_sets);
        let voter_kinds = match &self.config.identity.raft {
            Some(settings) => self.memory.voters.judge_kinds(
                &raft_nodes,
                members.iter().chain(&departed),
                settings.port,
            ),
            None => VoterKinds::default(),
        };
        self.memory.changes.count(
            &mut self.memory.counters,
            cluster.as_ref(),
            self.raft.is_some().then_some((&raft_nodes[..], &quorum)),
        );

        ClusterSnapshot {
            scope: self.scope(),
            polled_at_seconds: unix_now(),
            poll_duration: started.elapsed(),
            cluster,
            cluster_failure,
            members,
            departed,
            failsafe_members,
            views,
            voter_sets,
            history,
            config: self.memory.cadence.config().cloned(),
            failover,
            raft_nodes,
            voter_kinds,
            raft_enabled: self.raft.is_some(),
            quorum,
            counters: self.memory.counters.clone(),
            standby_source: None,
            member_settings: self.config.member_settings,
        }
    }
}

/// A voter found this poll: whether its REST API answered is remembered (by its host),
/// and it is a member by the name it gives itself, if it names itself as a member of this
/// cluster not known under another name; `None` otherwise. A voter whose REST API is
/// elsewhere is no news (the Raft metrics have it), so its failures are not counted either.
fn found_voter_name(
    voters: &mut VoterMemory,
    voter: &patroni::Member,
    answers: &MemberAnswers,
    context: &MemberContext<'_>,
) -> Option<String> {
    if let Some(host) = voter
        .host
        .as_deref()
        .and_then(|host| Host::parse(host).ok())
    {
        voters.note_rest(host, answers.own.is_ok());
    }
    let status = &answers.own.as_ref().ok()?.status;
    let same_scope = match (context.scope, &status.patroni_scope) {
        (Some(expected), Some(got)) => expected == got,
        _ => true,
    };
    status
        .patroni_name
        .clone()
        .filter(|name| same_scope && !context.known_names.contains(name))
}
