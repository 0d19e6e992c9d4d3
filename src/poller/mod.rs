//! One background task per cluster: ask the sources, build a [`ClusterSnapshot`], publish it.
//!
//! Why a task per cluster: every request is bounded by the cluster's timeout, but a cluster
//! whose members all hang still takes that long; polling clusters independently keeps one
//! dead cluster from delaying another. Within a poll, `/cluster` is asked first (it names
//! the members and their hosts), then every member's `/patroni`, `/history` and every Raft
//! node are asked concurrently, so a poll costs about two request round trips; and every
//! request ends by the poll's deadline ([`deadline`]), so a poll never outlasts its interval.
//!
//! Every member is also asked its own `/cluster` (its Raft replica's view), and members that
//! left the view are still asked for a while ([`members`]): one member's `/cluster` cannot
//! show an isolated primary or a replica that diverged.
//!
//! The poller is also the only place with memory across polls, each fact kept by the part
//! that learns it: the URLs learned from `api_url`s and the last scope ([`discovery`]), the
//! member hosts and the members that left the view ([`members`]), the voters named and
//! counted (so Raft nodes are still queried and judged when no node answers: [`voters`]),
//! the cluster's `/config` and last `/history` ([`cadence`]), and the counters of leader
//! changes and quorum losses ([`changes`]). Discovery is in [`discovery`], the requests in
//! [`requests`], when the reader's `/history` and `/config` are due in [`cadence`], the start
//! gate and the polls' phases in [`start`]; every judgement is made in [`crate::snapshot`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::{watch, Semaphore};
use tokio::time::MissedTickBehavior;

use crate::config::{ApiUrlPolicy, ClusterConfig, Collector};
use crate::patroni::{self, ClientPool, PatroniClient, PatroniError};
use crate::snapshot::{
    ClusterSnapshot, Counters, DcsView, Encoding, Failure, Publisher, RaftNodeSnapshot, Source,
};

mod cadence;
mod changes;
pub mod deadline;
mod discovery;
mod members;
mod placement;
mod record;
mod requests;
pub mod start;
mod voters;
use cadence::Cadence;
use changes::ChangeMemory;
use deadline::Deadline;
use discovery::Discovery;
use members::{unix_now, MemberMemory};
use placement::Placement;
pub use placement::MAX_MEMBERS;
use record::{MemberContext, PollRecord};
use requests::{member_at, raft_query, MemberLimits, RaftQueries, RaftQuery};
pub use start::StartGate;
use start::{intervals_skipped, phase, Entry};
use voters::VoterMemory;

/// What carries over from one poll to the next.
#[derive(Debug, Default)]
struct PollMemory {
    /// Where `/cluster` is read, the URLs and scope it taught.
    discovery: Discovery,
    /// The Raft voters named and counted, and what is known of them.
    voters: VoterMemory,
    /// The last leaders and verdict, to count their changes.
    changes: ChangeMemory,
    /// When the reader's `/history` and `/config` are asked, and the last of each read.
    cadence: Cadence,
    /// Members across polls: who left the view (still asked), each member's `/config`.
    members: MemberMemory,
    counters: Counters,
    /// The last error kind per target, to log changes rather than every failure.
    failing: BTreeMap<String, crate::error_kind::ErrorKind>,
}

/// The poller of one cluster.
pub struct ClusterPoller {
    slot: usize,
    config: ClusterConfig,
    client: Arc<PatroniClient>,
    /// Where `client` came from, and a reload's client comes from.
    clients: ClientPool,
    raft: Option<RaftQuery>,
    memory: PollMemory,
    /// Which `api_url`s (and member hosts) may be contacted.
    policy: ApiUrlPolicy,
    /// Bounds the requests of a poll in flight at once (`max_concurrency`).
    permits: Arc<Semaphore>,
    /// Bounds the requests of a poll in flight at once to one member.
    member_limits: MemberLimits,
    /// The time a poll may take: the interval, or what `status` has left ([`deadline`]).
    budget: std::time::Duration,
    /// When the requests of the current poll must have ended.
    deadline: Deadline,
    /// Ask every member the rotating requests (`/config`, `/liveness`, `/readiness`) in
    /// every poll: for `status`, whose single poll must see everything.
    ask_everything: bool,
    /// Shared with the other pollers of the fleet: bounds the first polls in flight at once.
    start_gate: Option<StartGate>,
}

impl ClusterPoller {
    /// Prepares the poller of the cluster in `slot`: builds its HTTP client and derives its
    /// Raft key (PBKDF2, ~10 ms, done once per distinct password rather than per query).
    ///
    /// # Errors
    /// When the HTTP client cannot be built (e.g. an unreadable CA file).
    pub async fn new(slot: usize, config: ClusterConfig) -> anyhow::Result<ClusterPoller> {
        ClusterPoller::with_clients(slot, config, &ClientPool::default()).await
    }

    /// [`ClusterPoller::new`], with its HTTP client from `clients` (the fleet's pool, shared
    /// by the clusters with the same request settings).
    ///
    /// # Errors
    /// As [`ClusterPoller::new`].
    pub async fn with_clients(
        slot: usize,
        config: ClusterConfig,
        clients: &ClientPool,
    ) -> anyhow::Result<ClusterPoller> {
        let policy = ApiUrlPolicy::for_cluster(&config)?;
        let client = clients.client(&config.rest, config.poll.timeout).await?;
        let permits = Arc::new(Semaphore::new(config.poll.max_concurrency.max(1)));
        let raft = match &config.identity.raft {
            None => None,
            Some(settings) => Some(raft_query(settings, config.poll.timeout).await?),
        };
        let budget = config.poll.interval;
        Ok(ClusterPoller {
            slot,
            config,
            client,
            clients: clients.clone(),
            raft,
            memory: PollMemory::default(),
            policy,
            permits,
            member_limits: MemberLimits::default(),
            budget,
            deadline: Deadline::of_poll(budget),
            ask_everything: false,
            start_gate: None,
        })
    }

    /// Makes the first poll of each run ([`ClusterPoller::run_until`]) wait for `gate`,
    /// shared by the pollers of a fleet, so that they do not all poll at once.
    #[must_use]
    pub fn through(mut self, gate: StartGate) -> ClusterPoller {
        self.start_gate = Some(gate);
        self
    }

    /// Makes every poll ask every member what a poll otherwise asks one member in turn
    /// (`/config`, `/liveness`, `/readiness`): for a single poll that must be complete.
    #[must_use]
    pub fn asking_everything(mut self) -> ClusterPoller {
        self.ask_everything = true;
        self
    }

    /// Makes every poll end within `budget` rather than within the poll interval: for
    /// `status`, whose deadline is its `--timeout`.
    #[must_use]
    pub fn within(mut self, budget: std::time::Duration) -> ClusterPoller {
        self.budget = budget;
        self
    }

    /// A poller for a new configuration of the same cluster (SIGHUP): new clients and keys
    /// (files are read again), but the counters carry over so `*_total` series do not reset
    /// on a reload. When only request settings changed ([`ClusterConfig::same_cluster`]),
    /// the whole memory carries over too: without it, the series of the requests asked in
    /// turn and of members that left the view would vanish until asked again.
    ///
    /// # Errors
    /// As [`ClusterPoller::new`]; the caller keeps the old poller then.
    pub async fn reconfigured(&mut self, config: ClusterConfig) -> anyhow::Result<ClusterPoller> {
        let mut poller = ClusterPoller::with_clients(self.slot, config, &self.clients).await?;
        if poller.config.same_cluster(&self.config) {
            poller.memory = std::mem::take(&mut self.memory);
            poller.policy = std::mem::take(&mut self.policy);
        } else {
            poller.memory.counters = self.memory.counters.clone();
        }
        poller.start_gate = self.start_gate.clone();
        Ok(poller)
    }

    /// Polls every interval until `shutdown` turns true. A poll never overlaps the previous
    /// one: a poll that overruns makes the next start late, and the missed ticks are counted.
    ///
    /// The first poll starts at once (or, with a [`StartGate`], as soon as the gate lets it
    /// through); the second after between half and one and a half intervals from then, at a
    /// phase that depends on the slot ([`phase`]), so that the polls of a large fleet are
    /// spread evenly over the interval instead of all starting together.
    pub async fn run<E: Encoding>(
        mut self,
        publisher: Publisher<E>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        self.run_until(&publisher, async move {
            let _ = shutdown.changed().await;
        })
        .await;
    }

    /// Polls as [`run`] does, publishing each snapshot through `publisher`, until `stop` completes
    /// (checked between polls; a poll is bounded by its timeouts); the poller can then be
    /// [`reconfigured`]. One poll without a store: [`poll_once`].
    ///
    /// It borrows the poller rather than taking it: a future that owned it would hold a
    /// second copy beside the caller's variable in every idle poller's task (1.2 KB each).
    ///
    /// [`run`]: ClusterPoller::run
    /// [`reconfigured`]: ClusterPoller::reconfigured
    /// [`poll_once`]: ClusterPoller::poll_once
    pub async fn run_until<E: Encoding>(
        &mut self,
        publisher: &Publisher<E>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let interval = self.config.poll.interval;
        tokio::pin!(stop);
        let mut ticker: Option<tokio::time::Interval> = None;
        let mut last_tick: Option<tokio::time::Instant> = None;
        loop {
            let snapshot = match ticker.as_mut() {
                Some(ticker) => {
                    // Stop (shutdown or reload) wins over a tick that is due at the same moment.
                    let tick = tokio::select! {
                        biased;
                        _ = &mut stop => return,
                        tick = ticker.tick() => tick,
                    };
                    // Counted when the next poll starts, into its snapshot: only then is it
                    // known which deadlines the ticker skipped.
                    if let Some(last) = last_tick.replace(tick) {
                        self.memory.counters.polls_skipped +=
                            intervals_skipped(last, tick, interval);
                    }
                    // Boxed: a poll's future is large (every request of a poll, joined), and
                    // inline it would size every idle poller's task by it, between polls too.
                    Box::pin(self.poll_once()).await
                }
                None => {
                    // Waiting for the start gate (not part of the poll) stops on `stop`.
                    let entry = match self.start_gate.clone() {
                        Some(gate) => tokio::select! {
                            biased;
                            _ = &mut stop => return,
                            entry = gate.enter() => entry,
                        },
                        None => Entry::ungated(),
                    };
                    let started = tokio::time::Instant::now();
                    let snapshot = entry.during(Box::pin(self.poll_once())).await;
                    let second = started + interval.mul_f64(0.5 + phase(self.slot));
                    let mut every = tokio::time::interval_at(second, interval);
                    every.set_missed_tick_behavior(MissedTickBehavior::Skip);
                    ticker = Some(every);
                    snapshot
                }
            };
            publisher.publish(snapshot);
        }
    }

    /// One complete poll of the cluster, in two rounds of requests, ended by its deadline
    /// ([`deadline`]): a request still running then fails as a timeout.
    ///
    /// Round one asks `/cluster` (its candidates hedged) and, at the same time, the Raft
    /// nodes already known (the configured ones, else the configured REST hosts on the Raft
    /// port, plus the member hosts and partners remembered from the last poll). What they name
    /// is learned at once: the partners of an authenticated status become trusted hosts
    /// ([`ApiUrlPolicy`]). Round two asks every member's `/patroni`, `/history`, and the Raft
    /// nodes that round one named for the first time, while round one's Raft queries that are
    /// still running end. So one `--patroni.url` and the Raft password find every member and
    /// every voter in the first poll, and a hung Raft node does not hold the members back.
    pub async fn poll_once(&mut self) -> ClusterSnapshot {
        let started = Instant::now();
        self.member_limits.clear();
        self.deadline = Deadline::of_poll(self.budget);
        let first_targets = self.raft_targets_known();
        let mut first_queries = self.raft_queries(first_targets.clone());
        let (cluster_answer, mut raft_nodes) = self.round_one(&mut first_queries).await;
        let (cluster, cluster_failure) = self.settle_cluster(cluster_answer);
        self.learn_raft(&raft_nodes);

        let listed = cluster
            .as_ref()
            .map(|view| view.members.clone())
            .unwrap_or_default();
        let polled_at = unix_now();
        let departed: Vec<(patroni::Member, f64)> = match &cluster {
            Some(view) => self.memory.members.departed_after(view, polled_at),
            None => Vec::new(),
        };
        let history_base = self.memory.discovery.preferred().cloned();
        let second_targets = self.raft_targets_new(cluster.as_ref(), &first_targets);

        // The member whose `/cluster` the exporter read: its view is not asked again.
        let reader = cluster
            .as_ref()
            .and(history_base.as_ref())
            .and_then(|base| member_at(&listed, base));
        let known: Vec<&patroni::Member> = listed
            .iter()
            .chain(departed.iter().map(|(m, _)| m))
            .collect();
        let found = match &cluster {
            Some(_) => self.unlisted_voters(&known),
            None => Vec::new(),
        };
        let names: Vec<&str> = known.iter().map(|m| m.name.as_str()).collect();
        let rotated = self.memory.members.next_rotated(&names);
        let placements = Placement::of_poll(listed.len(), &departed, found.len());
        let everyone: Vec<&patroni::Member> = known.into_iter().chain(&found).collect();
        let member_answers = self.fetch_members(&everyone, &placements, reader.as_deref(), rotated);
        // `/history` and `/config` from the member that answered `/cluster`, if one did and
        // they are due.
        let preferred = cluster.as_ref().and(history_base.as_ref());
        let on = |collector| self.config.identity.collectors.enabled(collector);
        let (due, timeline) = self.memory.cadence.due(
            cluster.as_ref(),
            (on(Collector::History), on(Collector::Config)),
            self.ask_everything,
        );
        let mut raft_queries = self.raft_queries(second_targets);
        raft_queries.extend(first_queries);
        let (member_answers, (history, dynamic_config, failsafe), later_nodes) = tokio::join!(
            member_answers,
            self.fetch_reader_documents(preferred, due),
            raft_queries.collect::<Vec<_>>()
        );

        // The reader's documents first: a change of its configuration forgets the other
        // members' copies, and a copy read in this poll (below) must survive it.
        let read = (preferred.is_some() && due.history)
            .then(|| self.settle(Source::History, "history", history));
        let history = preferred.and_then(|_| self.memory.cadence.history_of_poll(read, timeline));
        let failsafe_members = self.settle(Source::Failsafe, "failsafe", failsafe);
        self.settle_dynamic_config(dynamic_config, reader.as_deref());
        let read_view = cluster.as_ref().map(DcsView::of);
        let known_names: BTreeSet<String> = names.iter().map(|&n| n.to_owned()).collect();
        let context = MemberContext {
            scope: cluster.as_ref().and_then(|view| view.scope.as_deref()),
            known_names: &known_names,
            reader: reader.as_deref(),
            read_view: read_view.as_ref(),
        };
        let mut members = Vec::with_capacity(listed.len());
        let mut departed_members = Vec::with_capacity(departed.len());
        for ((member, answers), place) in everyone.into_iter().zip(member_answers).zip(placements) {
            let Some(snapshot) = self.record_member(member, answers, place, &context) else {
                continue;
            };
            match place {
                Placement::Listed => members.push(snapshot),
                Placement::Departed(_) | Placement::FoundVoter => departed_members.push(snapshot),
            }
        }
        raft_nodes.extend(later_nodes);
        self.judge(PollRecord {
            started,
            cluster,
            cluster_failure,
            members,
            departed: departed_members,
            raft_nodes,
            history,
            failsafe_members,
            read_view,
        })
    }

    /// Round one: `/cluster`, and the first Raft answers. It ends once `/cluster` is settled
    /// and a Raft node answered (its partners are what round two learns from), or every
    /// query ended, or half the poll's time passed: the queries still running (a hung node)
    /// end in round two, without holding the members back.
    async fn round_one(
        &self,
        raft_queries: &mut RaftQueries,
    ) -> (discovery::ClusterAnswer, Vec<RaftNodeSnapshot>) {
        let cluster = self.fetch_cluster_answer();
        tokio::pin!(cluster);
        let mut raft_nodes: Vec<RaftNodeSnapshot> = Vec::new();
        let cluster_answer = loop {
            tokio::select! {
                answer = &mut cluster => break answer,
                Some(node) = raft_queries.next(), if !raft_queries.is_empty() => raft_nodes.push(node),
            }
        };
        let learn_until = self.deadline.halfway();
        while !raft_queries.is_empty() && !raft_nodes.iter().any(|node| node.status.is_ok()) {
            tokio::select! {
                Some(node) = raft_queries.next() => raft_nodes.push(node),
                () = tokio::time::sleep_until(learn_until) => break,
            }
        }
        (cluster_answer, raft_nodes)
    }

    /// Counts and logs the outcome of a request that may not have been made (`None`);
    /// returns the document when it was read.
    fn settle<T>(
        &mut self,
        source: Source,
        target: &str,
        answer: Option<Result<T, PatroniError>>,
    ) -> Option<T> {
        match answer? {
            Ok(document) => {
                self.note(source, target, None);
                Some(document)
            }
            Err(error) => {
                self.note(source, target, Some(&Failure::from(&error)));
                None
            }
        }
    }

    /// The `scope` label: what Patroni said last, else what was configured, else the first URL.
    fn scope(&self) -> String {
        self.memory
            .discovery
            .scope()
            .map_or_else(|| self.config.name(), str::to_owned)
    }

    /// Counts a failure and logs when a target starts failing, changes its error or recovers.
    fn note(&mut self, source: Source, target: &str, failure: Option<&Failure>) {
        let scope = self.scope();
        match failure {
            Some(failure) => {
                *self
                    .memory
                    .counters
                    .poll_errors
                    .entry((source, failure.kind))
                    .or_default() += 1;
                let previous = self.memory.failing.insert(target.to_owned(), failure.kind);
                if previous != Some(failure.kind) {
                    tracing::warn!(%scope, source = source.as_str(), %target, kind = failure.kind.as_label(), error = %failure.message, "poll failed");
                }
            }
            None => {
                if self.memory.failing.remove(target).is_some() {
                    tracing::info!(%scope, source = source.as_str(), %target, "recovered");
                }
            }
        }
    }
}
