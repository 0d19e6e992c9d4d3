//! Recording a poll: each answer settled into the owners of the poller's memory and its
//! counters, each member made a [`MemberSnapshot`], then the judgements of the whole poll
//! ([`Recorder::judge`]).
//!
//! Why apart from the requests: what a poll asks and what it makes of the answers change for
//! different reasons; here is only the second, in the order the memory needs it (the reader's
//! configuration before the other members' copies, the members before the voters' kinds).
//! A [`Recorder`] borrows each owner it writes to by name, so what a poll's record touches
//! is read from one struct, not from the poller as a whole.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::time::Instant;

use super::cadence::{Cadence, TimedHistory};
use super::changes::ChangeMemory;
use super::discovery::{learn_raft, without_aliases, Discovery};
use super::etcd::{learn_hosts, EtcdMemory};
use super::members::{DcsTiming, MemberMemory};
use super::placement::Placement;
use super::requests::{MemberAnswers, ProbeAnswer, ReaderDocuments};
use super::tally::Tally;
use super::voters::VoterMemory;
use crate::address::Host;
use crate::config::{ApiUrlPolicy, ClusterConfig, Collector};
use crate::etcd::EtcdReading;
use crate::patroni::{self, ClusterView, DynamicConfig, PatroniError};
use crate::snapshot::{
    member_hosts, primaries, ClusterSnapshot, DcsSnapshot, DcsView, EtcdSnapshot,
    FailoverReadiness, Failure, MemberDcsView, MemberSnapshot, PollFacts, QuorumAssessment,
    RaftNodeSnapshot, RaftSnapshot, Source, ViewComparison, VoterSetComparison,
};
use crate::snapshot::{ClusterReadTimes, MemberReadTimes};

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
    /// The etcd reading, on a cluster on etcd.
    pub(super) etcd: Option<EtcdReading>,
    /// `/history` as last read, and the time of the poll that read it.
    pub(super) history: Option<TimedHistory>,
    pub(super) failsafe_members: Option<Vec<String>>,
    pub(super) read_view: Option<DcsView>,
}

/// The owners a poll's answers are recorded into, each borrowed by name for the recording.
pub(super) struct Recorder<'a> {
    /// The `scope` label of this poll's logs (the one known when the poll started).
    pub(super) scope: &'a str,
    /// Unix time at which this poll's requests ended: the snapshot's `polled_at_seconds`, and
    /// the read time of what this poll read (a value served later carries it).
    pub(super) polled_at: f64,
    pub(super) config: &'a ClusterConfig,
    pub(super) tally: &'a mut Tally,
    pub(super) discovery: &'a mut Discovery,
    pub(super) members: &'a mut MemberMemory,
    pub(super) voters: &'a mut VoterMemory,
    pub(super) etcd: &'a mut EtcdMemory,
    /// Whether etcd is read over an authenticated channel: then the `api_url`s of the member
    /// keys are trusted hosts (else only for requests without credentials).
    pub(super) etcd_authenticated: bool,
    pub(super) cadence: &'a mut Cadence,
    pub(super) changes: &'a mut ChangeMemory,
    /// The members whose view diverged in the last poll (`None` before the first): a
    /// `dcs_view` exclusion needs two.
    pub(super) diverged_views: &'a mut Option<Vec<String>>,
    pub(super) policy: &'a mut ApiUrlPolicy,
}

impl Recorder<'_> {
    /// Counts and logs the outcome of a request that may not have been made (`None`);
    /// returns the document when it was read.
    fn settle<T>(
        &mut self,
        source: Source,
        target: impl Display,
        answer: Option<Result<T, PatroniError>>,
    ) -> Option<T> {
        self.tally.settle(self.scope, source, target, answer)
    }

    /// Counts a failure and logs when a target starts failing, changes its error or recovers.
    fn note(&mut self, source: Source, target: impl Display, failure: Option<&Failure>) {
        self.tally.note(self.scope, source, target, failure);
    }

    /// The `reader`'s `/config` (`None` when not asked in this poll): told to the cadence,
    /// which keeps it as the cluster's, and counted when it changed. A change forgets the
    /// other members' copies (an old copy is no evidence of a split); the reader's own
    /// copy is the cadence's from now on, so the rotation's older one is dropped.
    fn reader_config(
        &mut self,
        answer: Option<Result<DynamicConfig, PatroniError>>,
        reader: Option<&str>,
    ) {
        self.cadence.config_read(answer.as_ref().map(Result::is_ok));
        let Some(config) = self.settle(Source::Config, "config", answer) else {
            return;
        };
        if self.cadence.keep_config(config, reader, self.polled_at) {
            self.tally.counters.config_changes += 1;
            self.members.forget_configs();
        } else if let Some(reader) = reader {
            self.members.forget_config(reader);
        }
    }

    /// The reader's documents of this poll settled, first of all the records (a change of its
    /// configuration forgets the other members' copies, and a copy read in this poll must
    /// survive it): `/config` ([`Recorder::reader_config`]), `/failsafe`, and `/history`,
    /// the one read now or else the last one read, with the time of the poll that read it
    /// (`None` without a reader: `has_reader`), with `timeline` the highest in this poll's
    /// `/cluster`.
    pub(super) fn reader_documents(
        &mut self,
        (history, config, failsafe): ReaderDocuments,
        has_reader: bool,
        reader: Option<&str>,
        timeline: Option<u64>,
    ) -> (Option<TimedHistory>, Option<Vec<String>>) {
        // Asked (`Some`) only when there is a reader and it was due.
        let asked = history.is_some();
        let read = self.settle(Source::History, "history", history);
        let read = asked.then_some(read);
        let history = has_reader
            .then(|| self.cadence.history_of_poll(read, timeline, self.polled_at))
            .flatten();
        let failsafe_members = self.settle(Source::Failsafe, "failsafe", failsafe);
        self.reader_config(config, reader);
        (history, failsafe_members)
    }

    /// Every member asked in this poll recorded ([`Recorder::member`]), in the order asked
    /// (`everyone`, with their `answers` and `placements`): the listed members' snapshots,
    /// and the departed members' and found voters'.
    pub(super) fn members(
        &mut self,
        everyone: Vec<&patroni::Member>,
        answers: Vec<MemberAnswers>,
        placements: Vec<Placement>,
        context: &MemberContext<'_>,
    ) -> (Vec<MemberSnapshot>, Vec<MemberSnapshot>) {
        let mut members = Vec::with_capacity(everyone.len());
        let mut departed = Vec::new();
        for ((member, answers), place) in everyone.into_iter().zip(answers).zip(placements) {
            let Some(snapshot) = self.member(member, answers, place, context) else {
                continue;
            };
            match place {
                Placement::Listed => members.push(snapshot),
                Placement::Departed(_) | Placement::FoundVoter => departed.push(snapshot),
            }
        }
        (members, departed)
    }

    /// One member's answers settled (counted, logged, remembered) into its snapshot; `None`
    /// for a voter found this poll that is no member of this cluster (its REST API is
    /// elsewhere, or it names another cluster or a member already known).
    pub(super) fn member(
        &mut self,
        member: &patroni::Member,
        answers: MemberAnswers,
        place: Placement,
        context: &MemberContext<'_>,
    ) -> Option<MemberSnapshot> {
        let mut member = member.clone();
        if place == Placement::FoundVoter {
            member.name = found_voter_name(self.voters, &member, &answers, context)?;
        }
        let name = member.name.as_str();
        self.note(
            Source::Member,
            format_args!("member {name}"),
            answers.own.as_ref().err(),
        );
        if let Some(answer) = &answers.cluster {
            self.note(
                Source::Cluster,
                format_args!("view of {name}"),
                answer.as_ref().err(),
            );
        }
        if let Some(answer) = answers.config {
            if let Some(config) = self.settle(
                Source::Config,
                format_args!("config of {name}"),
                Some(answer),
            ) {
                if self.cadence.config() != Some(&config) {
                    // an edit the reader's copy has not seen yet, or a member that differs
                    self.cadence.config_differs();
                }
                self.members.record_config(name, config, self.polled_at);
            }
        }
        // Asked in rotation: a request not asked in this poll keeps its last outcome.
        for request in ["view of", "config of", "liveness of", "readiness of"] {
            self.tally.keep(format_args!("{request} {name}"));
        }
        if let Some(probes) = answers.probes {
            self.probes(name, probes);
        }
        let (own_view, clock, round_trip) = match answers.own {
            Ok(own) => {
                self.members.record_clock(name, own.clock);
                (Ok(own.status), own.clock, Some(own.round_trip))
            }
            Err(failure) => (Err(failure), None, None),
        };
        let last_clock = clock.or_else(|| self.members.clock_of(name));
        // The reader's view is the one already read; every other member's is its own.
        let view = match (context.read_view, context.reader == Some(name)) {
            (Some(read), true) => Some(Ok(read.clone())),
            _ => answers
                .cluster
                .map(|answer| answer.map(DcsView::of_compared)),
        };
        // Its own copy from the rotation, else the cluster's when it was read from it.
        let config = self
            .members
            .config_of(name)
            .or_else(|| self.cadence.config_read_from(name));
        let dcs_view = view.map(|answer| {
            answer.map(|view| MemberDcsView {
                view,
                config: config.map(|(config, _)| config.clone()),
            })
        });
        // Its `/config` is served (compared) only beside a view read in this poll.
        let compared = matches!(dcs_view, Some(Ok(_)));
        let read_at = MemberReadTimes {
            config: config.filter(|_| compared).map(|(_, at)| at),
            ..self.members.read_times_of(name)
        };
        let probes = self.members.probes_of(name);
        Some(MemberSnapshot {
            member,
            own_view,
            clock,
            last_clock,
            round_trip,
            probes,
            read_at,
            dcs_view,
            left_dcs_at: match place {
                Placement::Departed(at) => Some(at),
                Placement::Listed | Placement::FoundVoter => None,
            },
        })
    }

    /// The member `name`'s `/liveness` and, when asked, `/readiness` settled and remembered.
    fn probes(&mut self, name: &str, (liveness, readiness): (ProbeAnswer, Option<ProbeAnswer>)) {
        let liveness = self.settle(
            Source::Probe,
            format_args!("liveness of {name}"),
            Some(liveness),
        );
        // Not asked in this poll: the last answer stands ([`READINESS_EVERY_TURNS`]).
        let readiness = readiness.map(|answer| {
            self.settle(
                Source::Probe,
                format_args!("readiness of {name}"),
                Some(answer),
            )
        });
        self.members
            .record_probes(name, liveness, readiness, self.polled_at);
    }

    /// The poll's record absorbed into the memory (departed members, voters, counters) and
    /// judged: the snapshot to publish.
    pub(super) fn judge(mut self, record: PollRecord) -> ClusterSnapshot {
        let PollRecord {
            started,
            cluster,
            cluster_failure,
            members,
            mut departed,
            raft_nodes,
            etcd,
            history,
            failsafe_members,
            read_view,
        } = record;
        let timing = DcsTiming::of(self.cadence.config());
        self.members.settle(&mut departed, timing);
        let (dcs, dcs_read_at) = match etcd {
            Some(reading) => self.etcd_part(reading, members.iter().chain(&departed)),
            None => self.raft_part(raft_nodes, members.iter().chain(&departed)),
        };
        // Every target of this poll is noted (the DCS's last).
        self.tally.end_poll();
        if let Some(view) = &cluster {
            // The departed members kept are asked in the next poll as they were: their hosts
            // count as listed, so that a voter removed from Raft (a scale-down) is not refused
            // as api_url_not_allowed once its key expires and until the memory lets it go.
            self.policy.learned.keep_listed(|| {
                view.members
                    .iter()
                    .chain(departed.iter().map(|snapshot| &snapshot.member))
                    .flat_map(member_hosts)
                    .collect()
            });
            self.discovery.remember(view, self.policy);
        }
        // Without the views collector only the read view is known: nothing to compare.
        let views = if self.config.identity.collectors.enabled(Collector::Views) {
            ViewComparison::of_members(members.iter().chain(&departed), read_view.as_ref())
        } else {
            ViewComparison::default()
        };
        let failover = FailoverReadiness::of_poll(PollFacts {
            cluster: cluster.as_ref(),
            members: &members,
            config: self.cadence.config(),
            views: &views,
            diverged_before: self.diverged_views.as_deref(),
            dcs: dcs.kind().zip(dcs.verdict()),
        });
        *self.diverged_views = Some(views.diverged_members());
        if primaries(members.iter().chain(&departed)).len() > 1 {
            self.tally.counters.multiple_primaries_polls += 1;
        }
        self.changes
            .count(&mut self.tally.counters, cluster.as_ref(), &dcs);

        ClusterSnapshot {
            scope: self.discovery.scope_label(self.config),
            polled_at_seconds: self.polled_at,
            poll_duration: started.elapsed(),
            cluster,
            cluster_failure,
            members,
            departed,
            failsafe_members,
            views,
            read_at: ClusterReadTimes {
                config: self.cadence.config_read_at(),
                history: history.as_ref().map(|(_, at)| *at),
                ..dcs_read_at
            },
            history: history.map(|(entries, _)| entries),
            config: self.cadence.config().cloned(),
            failover,
            dcs,
            counters: self.tally.counters.clone(),
            standby_source: None,
            member_settings: self.config.member_settings,
        }
    }
}

impl Recorder<'_> {
    /// The etcd reading of this poll settled (each endpoint's and fact's failure counted and
    /// logged) and judged: the DCS part of the snapshot. What etcd named is remembered for
    /// the next poll: its members, and (over an authenticated channel) the hosts of the
    /// member keys' `api_url`s, trusted as an authenticated Raft status's voters are. With
    /// the DCS part, when the voting members it judged from were listed.
    fn etcd_part<'m>(
        &mut self,
        reading: EtcdReading,
        members: impl Iterator<Item = &'m MemberSnapshot>,
    ) -> (DcsSnapshot, ClusterReadTimes) {
        for endpoint in &reading.endpoints {
            let target = endpoint.endpoint.as_str().trim_end_matches('/');
            let failure = endpoint.status.as_ref().err().map(Failure::from);
            self.note(
                Source::Etcd,
                format_args!("etcd {target}"),
                failure.as_ref(),
            );
        }
        if let Some(facts) = &reading.facts {
            let asked = [
                ("etcd members", facts.members.as_ref().err()),
                (
                    "etcd alarms",
                    facts.alarms.as_ref().and_then(|a| a.as_ref().err()),
                ),
                (
                    "etcd keys",
                    facts.keys.as_ref().and_then(|k| k.as_ref().err()),
                ),
                (
                    "etcd leader lease",
                    facts.leader_lease.as_ref().and_then(|l| l.as_ref().err()),
                ),
            ];
            for (target, error) in asked {
                self.note(Source::Etcd, target, error.map(Failure::from).as_ref());
            }
        }
        learn_hosts(self.policy, self.etcd, &reading, self.etcd_authenticated);
        let etcd_versions = self.etcd.versions_read_at(&reading, self.polled_at);
        self.etcd.learn_versions(&reading, self.polled_at);
        let snapshot =
            EtcdSnapshot::judge(reading, self.etcd.voters, self.etcd.keys.as_ref(), members);
        // This poll's member list, else the one remembered (what the judgement used).
        let read_at = ClusterReadTimes {
            etcd_members: match snapshot.listed_voters() {
                Some(_) => Some(self.polled_at),
                None => self.etcd.voters_read_at(),
            },
            etcd_versions,
            ..ClusterReadTimes::default()
        };
        self.etcd.learn(&snapshot, self.polled_at);
        (DcsSnapshot::Etcd(Box::new(snapshot)), read_at)
    }

    /// The Raft nodes' answers of this poll settled (counted, logged, the voters they name
    /// learned) and judged: the DCS part of the snapshot; [`DcsSnapshot::Unwatched`] when
    /// the cluster's Raft is not polled. `members` (listed and remembered) tell which voters
    /// are witnesses. With the DCS part, when the voter set it judged from was read.
    fn raft_part<'m>(
        &mut self,
        raft_nodes: Vec<RaftNodeSnapshot>,
        members: impl Iterator<Item = &'m MemberSnapshot>,
    ) -> (DcsSnapshot, ClusterReadTimes) {
        let raft_nodes = without_aliases(raft_nodes);
        for node in &raft_nodes {
            let target = &node.node;
            self.note(
                Source::Raft,
                format_args!("raft {target}"),
                node.status.as_ref().err(),
            );
        }
        let settings = self.config.identity.dcs.raft();
        learn_raft(self.voters, self.policy, settings, &raft_nodes);
        let voter_sets = VoterSetComparison::compare(&raft_nodes);
        let quorum = QuorumAssessment::assess_with(&raft_nodes, self.voters.counted(), &voter_sets);
        // This poll's voter set, else the one remembered (what the verdict judged).
        let read_at = ClusterReadTimes {
            raft_voters: if voter_sets.counted.voters.is_empty() {
                self.voters.counted_read_at()
            } else {
                Some(self.polled_at)
            },
            ..ClusterReadTimes::default()
        };
        self.voters.count(&raft_nodes, &voter_sets, self.polled_at);
        let Some(settings) = settings else {
            return (DcsSnapshot::Unwatched, ClusterReadTimes::default());
        };
        let voter_kinds = self.voters.judge_kinds(&raft_nodes, members, settings.port);
        let raft = RaftSnapshot {
            nodes: raft_nodes,
            voter_sets,
            voter_kinds,
            quorum,
        };
        (DcsSnapshot::Raft(raft), read_at)
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
