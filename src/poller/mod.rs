//! One background task per cluster: ask the sources, build a [`ClusterSnapshot`], publish it.
//!
//! Why a task per cluster: every request is bounded by the cluster's timeout, but a cluster
//! whose members all hang still takes that long; polling clusters independently keeps one
//! dead cluster from delaying another. Within a poll, `/cluster` is asked first (it names
//! the members and their hosts), beside the own `/patroni` of the members the last poll
//! knew; then the rest of every member's requests, `/history` and every Raft node are asked
//! concurrently, so a poll costs about two request round trips; and every request ends by
//! the poll's deadline ([`deadline`]), so a poll never outlasts its interval.
//!
//! Every member is also asked its own `/cluster` (its Raft replica's view), and members that
//! left the view are still asked for a while ([`members`]): one member's `/cluster` cannot
//! show an isolated primary or a replica that diverged.
//!
//! The poller is also the only place with memory across polls, each fact kept once, by the
//! part that learns it: the URLs learned from `api_url`s and the last scope ([`discovery`]),
//! the member hosts, the members that left the view and each member's own `/config` and
//! probes ([`members`]), the voters named and counted (so Raft nodes are still queried and
//! judged when no node answers: [`voters`]), the cluster's `/config` (the reader's) and last
//! `/history` ([`cadence`]), the counters of leader changes and quorum losses ([`changes`]),
//! and the counters and last error of each target ([`tally`]). What the memory serves in
//! place of a measure of the poll carries the Unix time of the poll that read it, into the
//! snapshot ([`crate::snapshot::ClusterReadTimes`], [`crate::snapshot::MemberReadTimes`]), so
//! that no remembered value is exported as current.
//!
//! [`ClusterPoller::poll_once`] only orchestrates; each part works on borrows of the owners
//! it needs, so no part reaches into the poller: discovery ([`discovery`]: who answers
//! `/cluster`, which Raft nodes and voters to ask), the requests ([`requests`]: a
//! [`requests::Requests`] holds the clients, the poll's deadline, permits and limits), the
//! recording ([`record`]: a [`record::Recorder`] borrows the memories it writes to), when the
//! reader's `/history` and `/config` are due ([`cadence`]), the start gate and the polls'
//! phases ([`start`]); every judgement is made in [`crate::snapshot`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::{watch, Semaphore};
use tokio::time::MissedTickBehavior;

use crate::config::{ApiUrlPolicy, ClusterConfig, Collector, DcsSettings};
use crate::patroni::{self, ClientPool, PatroniClient};
use crate::snapshot::{ClusterSnapshot, DcsView, Encoding, Publisher, RaftNodeSnapshot};

mod cadence;
mod changes;
pub mod deadline;
mod discovery;
mod etcd;
mod members;
mod placement;
mod record;
mod requests;
pub mod start;
mod tally;
mod voters;
use cadence::Cadence;
// The cadence of the requests not made in every poll: the floor of `scripts/bench.sh fleet`
// (benches/floor.rs) asks on the same one.
pub use cadence::{CONFIG_EVERY_POLLS, HISTORY_REFRESH_POLLS};
use changes::ChangeMemory;
use deadline::Deadline;
use discovery::{learn_raft, Discovery, Targets};
pub use etcd::VERSIONS_EVERY_POLLS;
use etcd::{EtcdMemory, EtcdPoll, EtcdProgress, EtcdQuery};
pub use members::READINESS_EVERY_TURNS;
use members::{unix_now, DcsTiming, MemberMemory};
use placement::Placement;
pub use placement::MAX_MEMBERS;
use record::{MemberContext, PollRecord, Recorder};
use requests::{member_at, raft_query, MemberLimits, RaftQueries, RaftQuery, Requests};
pub use start::StartGate;
use start::{intervals_skipped, phase, Entry};
use tally::Tally;
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
    /// The members whose own view diverged in the last poll, `None` before the first
    /// (failover readiness's `dcs_view` needs it in two polls running).
    diverged_views: Option<Vec<String>>,
    /// When the reader's `/history` and `/config` are asked, and the last of each read.
    cadence: Cadence,
    /// Members across polls: who left the view (still asked), each member's `/config`.
    members: MemberMemory,
    /// The cluster's etcd, on a cluster on etcd: its members and what Patroni's keys said.
    etcd: EtcdMemory,
    /// The counters, and the last error of each target (to log changes, not every failure).
    tally: Tally,
}

/// The poller of one cluster.
pub struct ClusterPoller {
    slot: usize,
    config: ClusterConfig,
    client: Arc<PatroniClient>,
    /// Where `client` came from, and a reload's client comes from.
    clients: ClientPool,
    /// How the cluster's DCS is asked: its Raft nodes, its etcd, or not at all.
    dcs: DcsQuery,
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

/// What [`ClusterPoller::check_dcs_files`] built for a cluster's DCS: held, it keeps the
/// transport alive in the fleet's pool until the cluster's poller takes it.
#[derive(Debug)]
pub struct DcsTransport {
    _held: EtcdQuery,
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
        let dcs = match &config.identity.dcs {
            DcsSettings::Unwatched => DcsQuery::Unwatched,
            DcsSettings::Raft(settings) => {
                DcsQuery::Raft(raft_query(settings, config.poll.timeout).await?)
            }
            DcsSettings::Etcd(settings) => {
                // Reads the TLS files: on the blocking pool, off the workers that poll.
                let (settings, transports) = (settings.clone(), clients.transports().clone());
                let (max_body_bytes, timeout) = (config.rest.max_body_bytes, config.poll.timeout);
                let query = tokio::task::spawn_blocking(move || {
                    EtcdQuery::new(&settings, max_body_bytes, timeout, &transports)
                })
                .await
                .map_err(|error| anyhow::anyhow!("building the etcd client: {error}"))??;
                DcsQuery::Etcd(query)
            }
        };
        let budget = config.poll.interval;
        Ok(ClusterPoller {
            slot,
            config,
            client,
            clients: clients.clone(),
            dcs,
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

    /// Reads and parses the files `config`'s DCS settings name (etcd's CA, client certificate
    /// and key) as [`ClusterPoller::with_clients`] does, without a poller: so that a reload
    /// checks every file before it applies anything (the app's load; the REST client's files
    /// are [`ClientPool::client`]'s). The transport it builds comes from `clients` and is
    /// returned: whoever keeps it until the pollers are built lets them take it from the
    /// pool rather than build it again (a transport parses the system's roots). Reads on this
    /// thread: from async code, in `spawn_blocking`.
    ///
    /// # Errors
    /// When a file cannot be read or parsed, named.
    pub fn check_dcs_files(
        config: &ClusterConfig,
        clients: &ClientPool,
    ) -> anyhow::Result<Option<DcsTransport>> {
        match &config.identity.dcs {
            DcsSettings::Etcd(settings) => EtcdQuery::new(
                settings,
                config.rest.max_body_bytes,
                config.poll.timeout,
                clients.transports(),
            )
            .map(|query| Some(DcsTransport { _held: query })),
            DcsSettings::Unwatched | DcsSettings::Raft(_) => Ok(None),
        }
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
            // What the DCS named carries over; what the settings allow (and whether the
            // client now sends credentials) is the new settings' word.
            let learned = std::mem::take(&mut self.policy.learned);
            poller.policy = ApiUrlPolicy::reconfigured(&poller.config, learned)?;
        } else {
            poller.memory.tally.counters = self.memory.tally.counters.clone();
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
                        self.memory.tally.counters.polls_skipped +=
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
    /// Round one asks `/cluster` (its candidates hedged) and, at the same time, the own
    /// `/patroni` of the members remembered from the last poll (but the first candidate's,
    /// one request at a time to a member) and the Raft nodes already known (the configured
    /// ones, else the configured REST hosts on the Raft port, plus the member hosts and
    /// partners remembered from the last poll). What they name is learned at once: the
    /// partners of an authenticated status become trusted hosts ([`ApiUrlPolicy`]). Round
    /// two asks every member's `/patroni` not started yet and the rest of its requests,
    /// `/history`, and the Raft nodes that round one named for the first time, while round
    /// one's requests that are still running end. So one `--patroni.url` and the Raft password find every member and
    /// every voter in the first poll, and a hung Raft node does not hold the members back.
    pub async fn poll_once(&mut self) -> ClusterSnapshot {
        let started = self.begin_poll();
        let scope = self.memory.discovery.scope_label(&self.config);
        let mut etcd = self.start_etcd_reading();
        let first_targets = self
            .targets()
            .raft_targets_known(&self.memory.members.listed_hosts());
        let configured_urls = &self.config.identity.patroni_urls;
        let candidates = self.memory.discovery.candidates(configured_urls);
        let requests = self.requests();
        let early = requests.start_statuses(self.memory.members.remembered(), candidates.first());
        let mut first_queries = requests.raft_queries(first_targets.clone());
        let (cluster_answer, mut raft_nodes) =
            round_one(&requests, candidates, &mut first_queries).await;
        let tally = &mut self.memory.tally;
        let (mut cluster, cluster_failure) =
            self.memory.discovery.settle(cluster_answer, tally, &scope);
        self.memory.members.adopt_api_urls(cluster.as_mut());
        self.learn_between_rounds(&raft_nodes, &mut etcd, cluster.as_ref())
            .await;

        let listed: &[patroni::Member] = cluster.as_ref().map_or(&[], |view| &view.members);
        let departed: Vec<(patroni::Member, f64)> = match &cluster {
            Some(view) => self.memory.members.departed_after(view, unix_now()),
            None => Vec::new(),
        };
        let history_base = self.memory.discovery.read_from().cloned();
        let second_targets = self
            .targets()
            .raft_targets_new(cluster.as_ref(), &first_targets);

        // The member whose `/cluster` the exporter read: its view is not asked again.
        let reader = cluster
            .as_ref()
            .and(history_base.as_ref())
            .and_then(|base| member_at(listed, base));
        let known: Vec<&patroni::Member> = listed
            .iter()
            .chain(departed.iter().map(|(m, _)| m))
            .collect();
        let found = self.found_voters(cluster.as_ref(), &known, history_base.as_ref());
        let names: Vec<&str> = known.iter().map(|m| m.name.as_str()).collect();
        let rotated = self.memory.members.next_rotated(&names);
        let placements = Placement::of_poll(listed.len(), &departed, found.len());
        let everyone: Vec<&patroni::Member> = known.into_iter().chain(&found).collect();
        // `/history` and `/config` from the member that answered `/cluster`, if one did and
        // they are due.
        let preferred = cluster.as_ref().and(history_base.as_ref());
        let on = |collector| self.config.identity.collectors.enabled(collector);
        let (due, timeline) = self.memory.cadence.due(
            cluster.as_ref(),
            (on(Collector::History), on(Collector::Config)),
            self.ask_everything,
        );
        let requests = self.requests();
        let member_answers = requests.fetch_members(
            &everyone,
            &placements,
            (reader.as_deref(), rotated),
            &self.memory.members,
            early,
        );
        let mut raft_queries = requests.raft_queries(second_targets);
        raft_queries.extend(first_queries);
        let (member_answers, reader_documents, later_nodes) = tokio::join!(
            member_answers,
            requests.fetch_reader_documents(preferred, due, self.memory.cadence.config()),
            raft_queries.collect::<Vec<_>>()
        );

        let has_reader = preferred.is_some();
        let etcd = etcd.finish().await;
        let mut recorder = self.recorder(&scope, unix_now());
        let (history, failsafe_members) =
            recorder.reader_documents(reader_documents, has_reader, reader.as_deref(), timeline);
        let read_view = cluster.as_ref().map(DcsView::of);
        let known_names: BTreeSet<String> = names.iter().map(|&n| n.to_owned()).collect();
        let context = MemberContext {
            scope: cluster.as_ref().and_then(|view| view.scope.as_deref()),
            known_names: &known_names,
            reader: reader.as_deref(),
            read_view: read_view.as_ref(),
        };
        let (members, departed) = recorder.members(everyone, member_answers, placements, &context);
        raft_nodes.extend(later_nodes);
        recorder.judge(PollRecord {
            started,
            cluster,
            cluster_failure,
            members,
            departed,
            raft_nodes,
            etcd,
            history,
            failsafe_members,
            read_view,
        })
    }

    /// A poll begins: its per-member limits renewed and its deadline set; when it started.
    fn begin_poll(&mut self) -> Instant {
        let started = Instant::now();
        self.member_limits.start_poll();
        self.deadline = Deadline::of_poll(self.budget);
        started
    }

    /// On a cluster on etcd, this poll's reading started ([`EtcdQuery::start`]), with the
    /// sender of the scope when it is not known yet (the first `/cluster` names it).
    fn start_etcd_reading(&self) -> EtcdPoll {
        let DcsQuery::Etcd(query) = &self.dcs else {
            return EtcdPoll::default();
        };
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let sender = match self.memory.discovery.known_scope(&self.config) {
            Some(scope) => {
                let _ = sender.send(scope.to_owned());
                None
            }
            None => Some(sender),
        };
        let reading = query.start(&self.memory.etcd, receiver, self.deadline.at());
        EtcdPoll {
            progress: Some(EtcdProgress::Running(reading)),
            scope_sender: sender,
        }
    }

    /// Between the rounds, what the DCS named is learned for round two: the voters the Raft
    /// nodes of round one name ([`learn_raft`]); on etcd, the scope the first `/cluster`
    /// named is sent to the reading (its keys are read in this poll too), and the reading is
    /// waited for up to half the poll, so that the hosts of the member keys' `api_url`s are
    /// known ([`etcd::learn_hosts`]).
    async fn learn_between_rounds(
        &mut self,
        raft_nodes: &[RaftNodeSnapshot],
        etcd: &mut EtcdPoll,
        cluster: Option<&patroni::ClusterView>,
    ) {
        let raft = self.config.identity.dcs.raft();
        learn_raft(&mut self.memory.voters, &mut self.policy, raft, raft_nodes);
        if let Some(sender) = etcd.scope_sender.take() {
            if let Some(scope) = cluster.and_then(|view| view.scope.clone()) {
                let _ = sender.send(scope);
            }
        }
        let Some(progress) = etcd.progress.take() else {
            return;
        };
        let progress = progress.until(self.deadline.halfway()).await;
        if let (EtcdProgress::Done(reading), DcsQuery::Etcd(query)) = (&progress, &self.dcs) {
            etcd::learn_hosts(
                &mut self.policy,
                &mut self.memory.etcd,
                reading,
                query.authenticated(),
            );
        }
        etcd.progress = Some(progress);
    }

    /// What this poll's requests are made with, as the poller knows it now.
    fn requests(&self) -> Requests<'_> {
        Requests {
            config: &self.config,
            client: &self.client,
            raft: match &self.dcs {
                DcsQuery::Raft(query) => Some(query),
                _ => None,
            },
            policy: &self.policy,
            permits: &self.permits,
            member_limits: &self.member_limits,
            deadline: self.deadline,
            ask_everything: self.ask_everything,
        }
    }

    /// Where this poll looks for Raft nodes and unlisted voters, as the poller knows it now.
    fn targets(&self) -> Targets<'_> {
        Targets {
            config: &self.config,
            policy: &self.policy,
            voters: &self.memory.voters,
        }
    }

    /// The voters that no member in `known` runs, to ask as members at the scheme and port of
    /// `base` (the URL that answered `/cluster`); none when `/cluster` did not answer.
    fn found_voters(
        &self,
        cluster: Option<&patroni::ClusterView>,
        known: &[&patroni::Member],
        base: Option<&url::Url>,
    ) -> Vec<patroni::Member> {
        if cluster.is_none() {
            return Vec::new();
        }
        let ttl = DcsTiming::of(self.memory.cadence.config()).ttl;
        self.targets().unlisted_voters(known, base, ttl)
    }

    /// The owners this poll's answers are recorded into, logging under `scope`, for the poll
    /// whose requests ended at Unix time `polled_at` (when what it read was read).
    fn recorder<'a>(&'a mut self, scope: &'a str, polled_at: f64) -> Recorder<'a> {
        let memory = &mut self.memory;
        Recorder {
            scope,
            polled_at,
            config: &self.config,
            tally: &mut memory.tally,
            discovery: &mut memory.discovery,
            members: &mut memory.members,
            voters: &mut memory.voters,
            etcd: &mut memory.etcd,
            etcd_authenticated: matches!(&self.dcs, DcsQuery::Etcd(query) if query.authenticated()),
            cadence: &mut memory.cadence,
            changes: &mut memory.changes,
            diverged_views: &mut memory.diverged_views,
            policy: &mut self.policy,
        }
    }
}

/// How one cluster's DCS is asked.
enum DcsQuery {
    /// Not at all: REST only.
    Unwatched,
    /// Every Raft node's status.
    Raft(RaftQuery),
    /// The etcd cluster, in one reading per poll.
    Etcd(EtcdQuery),
}

/// Round one: `/cluster` asked of the `candidates`, and the first Raft answers. It ends once
/// `/cluster` is settled and a Raft node answered (its partners are what round two learns
/// from), or every query ended, or half the poll's time passed: the queries still running
/// (a hung node) end in round two, without holding the members back.
async fn round_one(
    requests: &Requests<'_>,
    candidates: Vec<url::Url>,
    raft_queries: &mut RaftQueries,
) -> (discovery::ClusterAnswer, Vec<RaftNodeSnapshot>) {
    let cluster = discovery::ask_cluster(requests, candidates);
    tokio::pin!(cluster);
    let mut raft_nodes: Vec<RaftNodeSnapshot> = Vec::new();
    let cluster_answer = loop {
        tokio::select! {
            answer = &mut cluster => break answer,
            Some(node) = raft_queries.next(), if !raft_queries.is_empty() => raft_nodes.push(node),
        }
    };
    let learn_until = requests.deadline.halfway();
    while !raft_queries.is_empty() && !raft_nodes.iter().any(|node| node.status.is_ok()) {
        tokio::select! {
            Some(node) = raft_queries.next() => raft_nodes.push(node),
            () = tokio::time::sleep_until(learn_until) => break,
        }
    }
    (cluster_answer, raft_nodes)
}
