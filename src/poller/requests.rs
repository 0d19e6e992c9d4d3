//! The requests of a poll: how a Raft node is asked for its status (natively or through
//! `--raft.command`), and what a member is asked at its `api_url`.
//!
//! Why apart from the poll loop: every request goes out under a permit of the poll
//! (`max_concurrency`), at most [`REQUESTS_PER_MEMBER_AT_ONCE`] to one member, and only to
//! hosts the policy allows; keeping the requests in one place keeps these rules in one place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use url::Url;

use futures::future::{join_all, BoxFuture, RemoteHandle};
use futures::stream::FuturesUnordered;
use futures::FutureExt;

use super::deadline::Deadline;
use super::members::MemberMemory;
use super::placement::{Placement, MAX_MEMBERS};
use crate::config::{ApiUrlPolicy, ClusterConfig, Collector, RaftSettings};
use crate::patroni::{self, ClusterView, ComparedView, DynamicConfig, PatroniClient, PatroniError};
use crate::raft::{self, QueryLimits, RaftKey, RaftStatus};
use crate::snapshot::{Failure, RaftNodeSnapshot};

/// A Raft node's status and the round trip of its query (`None` through `--raft.command`).
type RaftAnswer = Result<(RaftStatus, Option<Duration>), Failure>;

/// Raft status queries in flight, answered in the order they end.
pub(super) type RaftQueries = FuturesUnordered<BoxFuture<'static, RaftNodeSnapshot>>;

/// A queried node's snapshot: its status, and its query's round trip when it answered.
fn node_snapshot(node: String, answer: RaftAnswer) -> RaftNodeSnapshot {
    match answer {
        Ok((status, round_trip)) => RaftNodeSnapshot {
            node,
            status: Ok(status),
            round_trip,
        },
        Err(failure) => RaftNodeSnapshot {
            node,
            status: Err(failure),
            round_trip: None,
        },
    }
}

/// How one cluster's Raft nodes are asked for their status.
#[derive(Clone)]
pub(super) enum RaftQuery {
    /// The native client, with the key derived once from the password.
    Native {
        key: Option<Arc<RaftKey>>,
        limits: QueryLimits,
    },
    /// An external program (`--raft.command`), for sites that allow only the packaged tool.
    Command {
        argv: Vec<String>,
        password: Option<crate::secret::Secret>,
        timeout: Duration,
    },
}
impl RaftQuery {
    /// The node's status, and the round trip of a native query. A command's run time is not
    /// one: it is mostly the program's start (a Python interpreter's, for `syncobj_admin`).
    async fn status(&self, node: &str) -> Result<(RaftStatus, Option<Duration>), raft::RaftError> {
        match self {
            RaftQuery::Native { key, limits } => {
                raft::query_status_timed(node, key.as_deref(), limits)
                    .await
                    .map(|(status, round_trip)| (status, Some(round_trip)))
            }
            RaftQuery::Command {
                argv,
                password,
                timeout,
            } => {
                // Boxed: a child process's future would size every native query by it.
                Box::pin(raft::run_status_command(
                    argv,
                    node,
                    password.as_ref().map(|p| p.expose().as_bytes()),
                    *timeout,
                ))
                .await
                .map(|status| (status, None))
            }
        }
    }
}
pub(super) async fn raft_query(
    settings: &RaftSettings,
    timeout: Duration,
) -> anyhow::Result<RaftQuery> {
    if let Some(argv) = &settings.command {
        return Ok(RaftQuery::Command {
            argv: argv.clone(),
            password: settings.password.clone(),
            timeout,
        });
    }
    let key = match &settings.password {
        Some(password) => Some(RaftKey::shared(password.expose().as_bytes()).await?),
        None => None,
    };
    Ok(RaftQuery::Native {
        key,
        limits: QueryLimits {
            timeout,
            ..QueryLimits::default()
        },
    })
}
/// The requests of one poll in flight at once to one member's REST API: one.
///
/// Why one: Patroni 3.3.9, 4.0.8, 4.1.1 and later ([`crate::patroni::Feature::RestThreadPool`])
/// serve their REST API from a fixed pool of worker threads (`restapi.thread_pool_size`,
/// default and minimum 5, plus one: `patroni/api.py`), and the
/// same pool serves the members' own leader race (`GET /patroni`, 2 s deadline:
/// `fetch_node_status`), failsafe's `POST /failsafe`, HAProxy's health checks and the
/// watcher: every worker an exporter holds is one they wait for, times the number of
/// exporters. Before, a thread per request, accepted by one thread with a backlog of
/// `restapi.request_queue_size` (5): a burst of connections overflowed it when Patroni was
/// busy (measured on a loaded 2-core machine, 7 exporters polling one 4.1.5 cluster every 2 s
/// with all of a member's requests at once: 7 listen overflows in 90 s, `nstat
/// TcpExtListenOverflows`, 7 requests timed out at 1 s). A member's requests of a poll go one
/// after the other, its own `/patroni` first, within the poll's deadline.
pub(super) const REQUESTS_PER_MEMBER_AT_ONCE: usize = 1;

/// One semaphore per member REST base (scheme, host, port: [`patroni::base_text`]), for one
/// poll.
#[derive(Default)]
pub(super) struct MemberLimits(Mutex<HashMap<String, MemberLimit>>);

/// A member's semaphore, and whether this poll asked for it.
struct MemberLimit {
    semaphore: Arc<Semaphore>,
    used: bool,
}

impl MemberLimits {
    /// The limit of the member at `url` (its REST base or any URL of it).
    fn of(&self, url: &Url) -> Arc<Semaphore> {
        let mut limits = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let base = patroni::base_text(url);
        if let Some(limit) = limits.get_mut(base) {
            limit.used = true;
            return Arc::clone(&limit.semaphore);
        }
        let semaphore = Arc::new(Semaphore::new(REQUESTS_PER_MEMBER_AT_ONCE));
        let limit = MemberLimit {
            semaphore: Arc::clone(&semaphore),
            used: true,
        };
        limits.insert(base.to_owned(), limit);
        semaphore
    }

    /// A poll begins: the members of the last poll keep their semaphores (the same members,
    /// poll after poll: a key and a semaphore allocated for each were two allocations per
    /// member and poll), unless a request of that poll still holds one; the members the last
    /// poll did not ask are forgotten, so the map holds no more than one poll's members.
    pub(super) fn start_poll(&mut self) {
        self.0
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|_, limit| {
                let idle = Arc::strong_count(&limit.semaphore) == 1
                    && limit.semaphore.available_permits() == REQUESTS_PER_MEMBER_AT_ONCE;
                std::mem::take(&mut limit.used) && idle
            });
    }
}

/// What [`Requests::fetch_reader_documents`] read: `/history`, `/config`, `/failsafe`.
pub(super) type ReaderDocuments = (
    Option<Result<Vec<patroni::HistoryEntry>, PatroniError>>,
    Option<Result<patroni::DynamicConfig, PatroniError>>,
    Option<Result<Vec<String>, PatroniError>>,
);

/// Which of the reader's `/history` and `/config` a poll asks: its collector is on, and it is
/// due ([`super::cadence`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReaderDue {
    pub(super) history: bool,
    pub(super) config: bool,
}

/// What a health endpoint answered: 200 (`true`) or 503 (`false`).
pub(super) type ProbeAnswer = Result<bool, PatroniError>;

/// What one member answered: its own `/patroni`, and its `/cluster` and `/config` when
/// asked (`None` when not).
pub(super) struct MemberAnswers {
    pub(super) own: Result<patroni::OwnAnswer, Failure>,
    /// Its own `/cluster`, as far as views are compared.
    pub(super) cluster: Option<Result<ComparedView, Failure>>,
    pub(super) config: Option<Result<patroni::DynamicConfig, PatroniError>>,
    /// `/liveness`, and `/readiness` when it was asked too.
    pub(super) probes: Option<(ProbeAnswer, Option<ProbeAnswer>)>,
}

/// What to ask a member besides its own `/patroni`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Wants {
    /// Its own `/cluster` (not the reader's: its view is the one already read).
    pub(super) cluster: bool,
    /// Its own `/config` (the rotation's member, unless it is the reader).
    pub(super) config: bool,
    /// `/liveness` (the rotation's member).
    pub(super) probes: bool,
    /// `/readiness` as well: the rotation's member on every
    /// [`READINESS_EVERY_TURNS`](super::members::READINESS_EVERY_TURNS)th turn, or when its
    /// last answer is unknown.
    pub(super) readiness: bool,
}
/// The name of the member of `members` whose REST base is `base`.
pub(super) fn member_at(members: &[patroni::Member], base: &Url) -> Option<String> {
    let base = patroni::base_text(base);
    members
        .iter()
        .find(|m| {
            m.api_url
                .as_ref()
                .and_then(patroni::ApiUrl::url)
                .is_some_and(|url| patroni::base_text(url) == base)
        })
        .map(|m| m.name.clone())
}

/// A member's own `/patroni`, started in round one.
type OwnStatus = Result<patroni::OwnAnswer, PatroniError>;

/// The remembered members' own `/patroni`, started in round one beside `/cluster` by their
/// `api_url` ([`Requests::start_statuses`]): round two takes each answer, and drops (ends)
/// those of members that `/cluster` no longer names there.
pub(super) type EarlyStatuses = HashMap<Url, RemoteHandle<OwnStatus>>;

/// What the requests of one poll are made with, borrowed from the poller for a round: the
/// cluster's configuration, the clients, the hosts the policy allows, the poll's permits and
/// per-member limits, and its deadline.
pub(super) struct Requests<'a> {
    pub(super) config: &'a ClusterConfig,
    pub(super) client: &'a Arc<PatroniClient>,
    pub(super) raft: Option<&'a RaftQuery>,
    pub(super) policy: &'a ApiUrlPolicy,
    /// Bounds the requests of a poll in flight at once (`max_concurrency`).
    pub(super) permits: &'a Arc<Semaphore>,
    /// Bounds the requests of a poll in flight at once to one member.
    pub(super) member_limits: &'a MemberLimits,
    /// When the requests of the poll must have ended.
    pub(super) deadline: Deadline,
    /// Ask every member the rotating requests (`/config`, `/liveness`, `/readiness`): `status`.
    pub(super) ask_everything: bool,
}

impl Requests<'_> {
    /// Every member's requests of this poll, at once: its own `/patroni`, its `/cluster` (but
    /// the `reader`'s, already read) and, for the member whose turn it is (`rotated`), a voter
    /// found this poll, or every member in `status`, its `/config` and probes; a member's
    /// `/readiness` when its turn came round or its last answer is unknown (`members`). A
    /// member's own `/patroni` started in round one (`early`) is taken, not asked again.
    pub(super) async fn fetch_members(
        &self,
        everyone: &[&patroni::Member],
        placements: &[Placement],
        (reader, rotated): (Option<&str>, Option<&str>),
        members: &MemberMemory,
        mut early: EarlyStatuses,
    ) -> Vec<MemberAnswers> {
        let on = |collector| self.config.identity.collectors.enabled(collector);
        let readiness_turn = members.readiness_turn(everyone.len());
        let started: Vec<Option<RemoteHandle<OwnStatus>>> = everyone
            .iter()
            .map(|member| {
                let api_url = member.api_url.as_ref().and_then(patroni::ApiUrl::url);
                api_url.and_then(|url| early.remove(url))
            })
            .collect();
        // The rest end here: `/cluster` no longer names a member at their URL.
        drop(early);
        join_all(
            everyone
                .iter()
                .zip(placements)
                .zip(started)
                .map(|((member, place), own)| {
                    let is_reader = reader == Some(member.name.as_str());
                    let is_rotated = self.ask_everything
                        || *place == Placement::FoundVoter
                        || rotated == Some(member.name.as_str());
                    let probes = is_rotated && on(Collector::Probes);
                    let wants = Wants {
                        cluster: !is_reader && on(Collector::Views),
                        config: is_rotated
                            && !is_reader
                            && on(Collector::Views)
                            && on(Collector::Config),
                        probes,
                        readiness: probes
                            && (self.ask_everything
                                || readiness_turn
                                || members.probes_of(&member.name).readiness.is_none()),
                    };
                    self.fetch_member(member, wants, own)
                }),
        )
        .await
    }

    /// `/history`, `/config` and (only while failsafe mode is on: Patroni answers 502
    /// otherwise) `/failsafe` of the member that answered `/cluster` (`preferred`), each
    /// when its collector is on and, for the first two, when due ([`super::cadence`]); `None`
    /// for a document not asked. `/failsafe` follows the cluster's `config` as last read.
    pub(super) async fn fetch_reader_documents(
        &self,
        preferred: Option<&Url>,
        due: ReaderDue,
        config: Option<&DynamicConfig>,
    ) -> ReaderDocuments {
        let on = |collector| self.config.identity.collectors.enabled(collector);
        let failsafe_on =
            on(Collector::Failsafe) && config.is_some_and(|config| config.failsafe_mode);
        tokio::join!(
            self.ask_preferred(preferred.filter(|_| due.history), |base| {
                self.client.history(base)
            }),
            self.ask_preferred(preferred.filter(|_| due.config), |base| {
                self.client.dynamic_config(base)
            }),
            self.ask_preferred(preferred.filter(|_| failsafe_on), |base| {
                self.client.failsafe_members(base)
            }),
        )
    }

    /// One request to `base` under a permit of the poll; `None` without a base.
    pub(super) async fn ask_preferred<'a, T, F>(
        &'a self,
        base: Option<&'a Url>,
        request: impl FnOnce(&'a Url) -> F,
    ) -> Option<Result<T, PatroniError>>
    where
        F: std::future::Future<Output = Result<T, PatroniError>>,
    {
        let base = base?;
        let limit = self.member_limits.of(base);
        Some(self.limited(&limit, || request(base)).await)
    }

    /// `request` under the member's `limit` and a permit of the poll, by the deadline
    /// ([`limited`]).
    fn limited<'s, T: 's, F>(
        &'s self,
        limit: &'s Semaphore,
        start: impl FnOnce() -> F + 's,
    ) -> impl std::future::Future<Output = Result<T, PatroniError>> + 's
    where
        F: std::future::Future<Output = Result<T, PatroniError>> + 's,
    {
        limited(self.deadline, limit, self.permits, start)
    }

    /// Starts the own `/patroni` of each of the `remembered` members (listed or departed in
    /// the last poll) whose `api_url` the policy allows, but the one at `reader` (the
    /// first `/cluster` candidate, whose `/cluster` goes first): each runs on its own under
    /// the member's limit and a permit of the poll, by the poll's deadline, so that round
    /// two does not wait for `/cluster` to start them.
    pub(super) fn start_statuses<'m>(
        &self,
        remembered: impl Iterator<Item = &'m patroni::Member>,
        reader: Option<&Url>,
    ) -> EarlyStatuses {
        let reader = reader.map(patroni::base_text);
        remembered
            .filter_map(|member| {
                let api_url = self.member_api_url(member).ok()?;
                if reader == Some(patroni::base_text(api_url)) {
                    return None;
                }
                let limit = self.member_limits.of(api_url);
                let (client, permits, deadline) = (
                    Arc::clone(self.client),
                    Arc::clone(self.permits),
                    self.deadline,
                );
                let url = api_url.clone();
                let (request, answer) = async move {
                    limited(deadline, &limit, &permits, || client.member_status(&url)).await
                }
                .remote_handle();
                tokio::spawn(request);
                Some((api_url.clone(), answer))
            })
            .collect()
    }

    /// Asks a member (listed or remembered) at its `api_url`: its own `/patroni` first (or
    /// takes the one `started` in round one: [`Requests::start_statuses`]), then,
    /// if it answered, what `wants` names of `/cluster`, `/config`, `/liveness` and
    /// `/readiness`, [`REQUESTS_PER_MEMBER_AT_ONCE`] at a time. A member that cannot be
    /// reached (connect failed, or timeout) is not asked the rest: each would wait for the same
    /// timeout, and the poll would overrun. The rest then carry that same failure, as they
    /// did when every request was sent.
    pub(super) async fn fetch_member(
        &self,
        member: &patroni::Member,
        wants: Wants,
        started: Option<RemoteHandle<OwnStatus>>,
    ) -> MemberAnswers {
        let api_url = match self.member_api_url(member) {
            Ok(url) => url,
            Err(failure) => {
                return MemberAnswers {
                    own: Err(failure.clone()),
                    cluster: wants.cluster.then(|| Err(failure.clone())),
                    config: None,
                    probes: None,
                }
            }
        };
        let limit = self.member_limits.of(api_url);
        let own = match started {
            Some(own) => own.await,
            None => {
                self.limited(&limit, || self.client.member_status(api_url))
                    .await
            }
        };
        if let Err(unreachable @ (PatroniError::Connect(_) | PatroniError::Timeout(_))) = &own {
            let failure = Failure::from(unreachable);
            return MemberAnswers {
                own: Err(failure.clone()),
                cluster: wants.cluster.then_some(Err(failure)),
                config: wants.config.then(|| Err(unreachable.clone())),
                probes: wants.probes.then(|| {
                    let readiness = wants.readiness.then(|| Err(unreachable.clone()));
                    (Err(unreachable.clone()), readiness)
                }),
            };
        }
        let own = own.map_err(|e| Failure::from(&e));
        let base = &patroni::base_of(api_url);
        let cluster = async {
            if !wants.cluster {
                return None;
            }
            let answer = self
                .limited(&limit, || self.checked_compared_view(base))
                .await;
            Some(answer.map_err(|e| Failure::from(&e)))
        };
        // `/config` and the probes are asked of one member a poll (the rotated one): boxed,
        // their futures take room in that member's alone.
        let config = async {
            if !wants.config {
                return None;
            }
            Some(Box::pin(self.limited(&limit, || self.client.dynamic_config(base))).await)
        };
        let probes = async {
            if !wants.probes {
                return None;
            }
            let readiness = async {
                if !wants.readiness {
                    return None;
                }
                Some(
                    self.limited(&limit, || self.client.probe(base, "readiness"))
                        .await,
                )
            };
            Some(
                Box::pin(async {
                    tokio::join!(
                        self.limited(&limit, || self.client.probe(base, "liveness")),
                        readiness
                    )
                })
                .await,
            )
        };
        let (cluster, config, probes) = tokio::join!(cluster, config, probes);
        MemberAnswers {
            own,
            cluster,
            config,
            probes,
        }
    }

    /// A member's `api_url`, if valid and allowed by the policy.
    fn member_api_url<'m>(&self, member: &'m patroni::Member) -> Result<&'m Url, Failure> {
        let Some(api_url) = member.api_url.as_ref().and_then(patroni::ApiUrl::url) else {
            return Err(Failure {
                kind: crate::error_kind::ErrorKind::Decode,
                message: format!("member {} has no valid api_url", member.name),
            });
        };
        if !self.policy.allows_url(api_url) {
            return Err(Failure::from(&PatroniError::ApiUrlNotAllowed(format!(
                "{api_url} of member {} (allow its host with --patroni.allow-api-url-hosts)",
                member.name
            ))));
        }
        Ok(api_url)
    }

    /// One status query per target, each ending by the poll's deadline. Targets exist only
    /// when Raft is polled (the target lists are empty without Raft settings), so none is
    /// dropped. The queries own what they use, so that round one's can still run while the
    /// poller learns from `/cluster`, and end in round two.
    pub(super) fn raft_queries(&self, targets: Vec<String>) -> RaftQueries {
        let Some(query) = self.raft else {
            return RaftQueries::new();
        };
        targets
            .into_iter()
            .map(|node| {
                let (query, permits, deadline) =
                    (query.clone(), Arc::clone(self.permits), self.deadline);
                async move {
                    let _permit = permits.acquire().await;
                    let answer = match deadline.raft(query.status(&node)).await {
                        Some(answer) => answer,
                        None => Err(raft::RaftError::Timeout {
                            addr: node.clone(),
                            timeout: deadline.length(),
                        }),
                    };
                    node_snapshot(node, answer.map_err(|error| Failure::from(&error)))
                }
                .boxed()
            })
            .collect()
    }

    /// `GET {base}/cluster` as a `/cluster` candidate, by the poll's deadline and under the
    /// member's limit (its own `/patroni` may have started: [`Requests::start_statuses`]),
    /// but without a permit of the poll: it is the poll's first request.
    pub(super) async fn candidate_cluster(&self, base: &Url) -> Result<ClusterView, PatroniError> {
        let limit = self.member_limits.of(base);
        self.deadline
            .rest(async {
                let _member_permit = limit.acquire().await;
                self.checked_cluster(base).await
            })
            .await
    }

    /// `GET {base}/cluster`, refused when it names another cluster or too many members.
    pub(super) async fn checked_cluster(&self, base: &Url) -> Result<ClusterView, PatroniError> {
        let view = self.client.cluster(base).await?;
        self.check(view.scope.as_deref(), view.members.len())?;
        Ok(view)
    }

    /// A member's own `GET {base}/cluster` as far as views are compared, checked alike.
    async fn checked_compared_view(&self, base: &Url) -> Result<ComparedView, PatroniError> {
        let view = self.client.compared_view(base).await?;
        self.check(view.scope.as_deref(), view.members.len())?;
        Ok(view)
    }

    /// A `/cluster` that names another cluster (`scope`) is an error, never a silent mix of
    /// two clusters; so is one with more than [`MAX_MEMBERS`] members.
    fn check(&self, scope: Option<&str>, members: usize) -> Result<(), PatroniError> {
        match (&self.config.identity.expected_scope, scope) {
            (Some(expected), Some(got)) if expected != got => Err(PatroniError::ScopeMismatch {
                expected: expected.clone(),
                got: got.to_owned(),
            }),
            _ if members > MAX_MEMBERS => Err(PatroniError::Decode(format!(
                "/cluster lists {members} members, more than {MAX_MEMBERS}"
            ))),
            _ => Ok(()),
        }
    }
}

/// The request `start` makes, under a permit of the member (`limit`), then one of the poll
/// (`permits`): in this order, so that no poll permit is held while waiting for a member's.
/// Ends by the poll's `deadline`, the wait for the permits included.
///
/// It takes the request as a function that makes it once the permits are held, and is a
/// plain function rather than an `async fn`: a future passed by value into an `async fn`
/// or `async move` block is stored twice (as the argument, and as the value being awaited),
/// so the request's future would be held twice in each such layer ([`Deadline::rest`]).
fn limited<'a, T: 'a, F>(
    deadline: Deadline,
    limit: &'a Semaphore,
    permits: &'a Semaphore,
    start: impl FnOnce() -> F + 'a,
) -> impl std::future::Future<Output = Result<T, PatroniError>> + 'a
where
    F: std::future::Future<Output = Result<T, PatroniError>> + 'a,
{
    deadline.rest(async move {
        let _member_permit = limit.acquire().await;
        let _permit = permits.acquire().await;
        start().await
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::deadline::tests::heavy_request;

    /// A member asked poll after poll keeps its semaphore; one not asked in a poll is
    /// forgotten; one whose semaphore a request of the last poll still holds gets a new one.
    #[test]
    fn member_limits_last_while_their_members_are_asked() {
        let url = |host: &str| Url::parse(&format!("http://{host}:8008/patroni")).unwrap();
        let mut limits = MemberLimits::default();
        let a = limits.of(&url("a"));
        assert!(
            Arc::ptr_eq(&a, &limits.of(&url("a"))),
            "one per member in a poll"
        );
        let (b, c) = (limits.of(&url("b")), limits.of(&url("c")));
        let held = Arc::clone(&c);
        drop((a, b, c));
        limits.start_poll();
        let a_again = limits.of(&url("a"));
        let _ = limits.of(&url("c"));
        assert_eq!(limits.0.lock().unwrap().len(), 3, "a and b kept, c renewed");
        assert!(
            !Arc::ptr_eq(&held, &limits.of(&url("c"))),
            "c was still held"
        );
        drop(a_again);
        limits.start_poll(); // b was not asked in the poll before: forgotten
        let names = |limits: &MemberLimits| {
            let mut names: Vec<String> = limits.0.lock().unwrap().keys().cloned().collect();
            names.sort();
            names
        };
        assert_eq!(names(&limits), ["http://a:8008", "http://c:8008"]);
        drop(held);
        limits.start_poll();
        assert!(names(&limits).is_empty(), "none asked in the last poll");
    }

    #[tokio::test]
    async fn a_limited_request_is_held_once() {
        let alone = std::mem::size_of_val(&heavy_request());
        let (limit, permits) = (Semaphore::new(1), Semaphore::new(1));
        let deadline = Deadline::of_poll(Duration::from_secs(2));
        let request = limited(deadline, &limit, &permits, heavy_request);
        // An `async fn` taking the request by value held it two to four times (15 KB for
        // a member's requests before): here the permits' and the timer's room beside one.
        assert!(
            std::mem::size_of_val(&request) < alone + 1024,
            "{} bytes for a request of {alone}",
            std::mem::size_of_val(&request)
        );
        assert!(matches!(request.await, Ok(7)));
        assert_eq!(
            permits.available_permits(),
            1,
            "the poll's permit is given back"
        );
    }
}
