//! One reading of an etcd cluster: what the poller asks of the etcd source each poll.
//!
//! Every endpoint is asked its `Status`, concurrently, each with its round trip, and after
//! it its `GET /version`: the only answer that holds the cluster version (`etcdcluster`, the
//! version the members agreed to speak, which stays behind the members' own during a rolling
//! upgrade until the last one runs the new version), and which etcd answers without auth.
//! `/version` is not asked of an endpoint whose versions the caller gives as known: they
//! change only when a member restarts into another etcd (the poller says when to ask again).
//! When `Status` is refused to the configured user (etcd 3.6.0–3.6.9 answer it to root
//! only), that endpoint's `/health` is asked instead, so that the reading still says whether
//! the member has a leader, and says which fact it could not read. The facts of the whole
//! cluster (members, alarms, Patroni's keys, the leader key's lease) come from one
//! endpoint: the first that says it is the leader, as soon as it says so; else, once every
//! endpoint answered or failed, the best of the others.
//!
//! The alarms are read from that endpoint's status (`errors[]` lists them), not asked: etcd
//! serves an alarm GET as a Raft proposal, an entry in every member's WAL each poll. They are
//! asked only of a source whose status was refused to the user.
//!
//! One member's requests go one after the other, the members' at once: then each member is
//! asked over one pooled keep-alive connection, where concurrent requests to it would open a
//! connection each and keep them between polls, about 16 KiB of buffers apiece (measured at
//! 1000 clusters: 6 connections and 189 MiB resident with the status and `/version`, the
//! member list and the range asked at once; 3 and 140 MiB one after the other).
//!
//! When no endpoint knows a leader, the member list and the keys are read from the chosen
//! member's own copy (serializable), which it serves without a leader; an alarm GET and the
//! lease are then not asked, since etcd would only hold those requests until the deadline
//! waiting for a leader (7 s on 3.4.23, measured). Every fact keeps its own `Result`: the
//! caller says which facts could not be read and why. No judgement here (quorum, lag): that
//! is the snapshot's.

use std::future::Future;
use std::pin::Pin;

use futures::future::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use url::Url;

use super::client::{EtcdClient, Timed};
use super::error::EtcdError;
use super::model::{
    parse_patroni_keys, Alarm, EndpointStatus, Health, LeaseTimeToLive, MemberList, PatroniKeys,
    Versions,
};
use crate::error_kind::ErrorKind;

/// One reading of a cluster: each endpoint's own answer, and the cluster's facts.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdReading {
    /// One per endpoint asked, in the order given.
    pub endpoints: Vec<EndpointReading>,
    /// `None` when no endpoint answered at all (nothing else was asked).
    pub facts: Option<ClusterFacts>,
}

/// What one endpoint said of itself.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointReading {
    pub endpoint: Url,
    pub status: Result<Timed<EndpointStatus>, EtcdError>,
    /// `/health`, asked only when `status` was refused to the user (`auth`, `forbidden`).
    pub health: Option<Result<Health, EtcdError>>,
    /// `GET /version`, asked beside `status`: the member's own version and the cluster's;
    /// the caller's known versions when not asked (`versions_asked` false).
    pub versions: Result<Versions, EtcdError>,
    /// Whether `versions` was asked in this reading.
    pub versions_asked: bool,
}

impl EndpointReading {
    /// Whether the member says it has a leader: from its status, else from its health;
    /// `None` when it said neither.
    pub fn knows_leader(&self) -> Option<bool> {
        match (&self.status, &self.health) {
            (Ok(status), _) => Some(status.value.leader.is_some()),
            (Err(_), Some(Ok(health))) => Some(health.healthy),
            _ => None,
        }
    }

    /// The member's own etcd version: from its status, else from `/version` (which etcd
    /// answers to anyone, where `Status` is refused); `None` when it said neither.
    pub fn server_version(&self) -> Option<&str> {
        match (&self.status, &self.versions) {
            (Ok(status), _) => Some(status.value.version.as_str()),
            (Err(_), Ok(versions)) => Some(versions.server.as_str()),
            (Err(_), Err(_)) => None,
        }
        .filter(|version| !version.is_empty())
    }

    /// The cluster version the member answered on `/version`; `None` when it did not answer
    /// or has not agreed on one yet (a member that just started).
    pub fn cluster_version(&self) -> Option<&str> {
        self.versions.as_ref().ok()?.cluster_decided()
    }

    /// Whether the member says it is the leader itself.
    pub fn is_leader(&self) -> bool {
        self.status
            .as_ref()
            .is_ok_and(|status| status.value.is_leader())
    }
}

/// The facts of the whole cluster, as one endpoint gave them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFacts {
    /// The endpoint asked.
    pub source: Url,
    /// Whether the source knew a leader, so that the member list and keys were read
    /// linearizably (through the leader); when false they are the source's own copy.
    pub linearizable: bool,
    pub members: Result<MemberList, EtcdError>,
    /// From the source's status; when that was refused, asked; `None`: neither (refused,
    /// and no leader known to ask through).
    pub alarms: Option<Result<Vec<Alarm>, EtcdError>>,
    /// The prefix Patroni's keys were asked under; `None`: not asked.
    pub prefix: Option<String>,
    /// Patroni's keys under the prefix; `None`: not asked (the cluster's scope is not known
    /// yet).
    pub keys: Option<Result<PatroniKeys, EtcdError>>,
    /// The lease of the `leader` key. `None`: not asked (no leader known, the keys could not
    /// be read, there is no leader key, or it has no lease).
    pub leader_lease: Option<Result<LeaseTimeToLive, EtcdError>>,
}

/// How well an endpoint can serve the cluster's facts; higher is better.
fn rank(reading: &EndpointReading) -> Option<u8> {
    if reading.is_leader() {
        return Some(3);
    }
    match (&reading.status, reading.knows_leader()) {
        (Ok(_), Some(true)) => Some(2),
        (Err(_), Some(true)) => Some(1),
        (_, Some(false)) => Some(0),
        (_, None) => None,
    }
}

/// One reading of the cluster behind `endpoints`, with Patroni's keys under `prefix`
/// ([`super::patroni_prefix`]); without a prefix (the cluster's scope is not known) the
/// keys are not asked. `prefix` is awaited only when the keys are due, after the statuses:
/// a caller that learns the scope meanwhile (from the first `GET /cluster`) still gets the
/// keys in the same reading. Every request ends by `deadline` (or the client's timeout,
/// when that comes first); so does the reading, but for the parsing.
///
/// `/version` is not asked of the endpoints `known_versions` names: their versions are given.
pub async fn read_cluster(
    client: &EtcdClient,
    endpoints: &[Url],
    follow_up_to: usize,
    known_versions: &[(Url, Versions)],
    prefix: impl Future<Output = Option<String>> + Send,
    deadline: Instant,
) -> EtcdReading {
    let known = |endpoint: &Url| {
        known_versions
            .iter()
            .find(|(known, _)| same_endpoint(known, endpoint))
            .map(|(_, versions)| versions)
    };
    let prefix = prefix.boxed().shared();
    type FactsFuture<'a> = Pin<Box<dyn Future<Output = ClusterFacts> + Send + 'a>>;
    let mut pending: FuturesUnordered<_> = endpoints
        .iter()
        .enumerate()
        .map(|(index, endpoint)| async move {
            (
                index,
                read_endpoint(client, endpoint, known(endpoint), deadline).await,
            )
        })
        .collect();
    let mut readings: Vec<Option<EndpointReading>> = vec![None; endpoints.len()];
    let mut facts_started: Option<FactsFuture<'_>> = None;
    let mut facts: Option<ClusterFacts> = None;
    while !pending.is_empty() {
        tokio::select! {
            Some((index, reading)) = pending.next() => {
                if facts_started.is_none() && reading.is_leader() {
                    let source = Source { leader_known: true, ..Source::of(&reading) };
                    facts_started = Some(Box::pin(read_facts(client, source, prefix.clone(), deadline)));
                }
                readings[index] = Some(reading);
            }
            done = async { facts_started.as_mut().expect("guarded by the condition").await },
                if facts_started.is_some() && facts.is_none() => {
                facts = Some(done);
            }
        }
    }
    let readings: Vec<EndpointReading> = readings.into_iter().flatten().collect();
    let facts = match (facts, facts_started) {
        (Some(facts), _) => Some(facts),
        (None, Some(started)) => Some(started.await),
        (None, None) => {
            // The best endpoint, the first of equals.
            let best = readings
                .iter()
                .filter_map(|reading| rank(reading).map(|rank| (rank, reading)))
                .fold(
                    None,
                    |best: Option<(u8, &EndpointReading)>, (rank, reading)| match best {
                        Some((best_rank, _)) if best_rank >= rank => best,
                        _ => Some((rank, reading)),
                    },
                );
            match best {
                Some((rank, reading)) => {
                    let source = Source {
                        leader_known: rank >= 1,
                        ..Source::of(reading)
                    };
                    Some(read_facts(client, source, prefix, deadline).await)
                }
                None => None,
            }
        }
    };
    let listed = facts.as_ref().map_or_else(Vec::new, |facts| {
        unasked_listed_endpoints(facts, endpoints, follow_up_to)
    });
    let mut readings = readings;
    readings.extend(
        futures::future::join_all(
            listed
                .iter()
                .map(|endpoint| read_endpoint(client, endpoint, known(endpoint), deadline)),
        )
        .await,
    );
    EtcdReading {
        endpoints: readings,
        facts,
    }
}

/// The client URLs (each member's first, http or https) of the members the member list
/// names that are not among `asked`, at most `up_to`.
///
/// Why in the same reading: with one configured endpoint (the README's quick start), a
/// reading that asked only it could not see a majority, and `status`, which reads once, said
/// "quorum not visible" of a healthy cluster; the poller's next poll asks them anyway.
fn unasked_listed_endpoints(facts: &ClusterFacts, asked: &[Url], up_to: usize) -> Vec<Url> {
    let Ok(list) = &facts.members else {
        return Vec::new();
    };
    let mut unasked: Vec<Url> = Vec::new();
    for text in list.members.iter().filter_map(|m| m.client_urls.first()) {
        if unasked.len() == up_to {
            break;
        }
        // The usual case, a member asked under the URL it lists, needs no parse: a poll
        // parsed every listed URL before, 0.5 % of the exporter's CPU at 1 000 clusters.
        if asked.iter().any(|known| written_as(known, text)) {
            continue;
        }
        let Some(url) = client_url(text) else {
            continue;
        };
        if !asked
            .iter()
            .chain(&unasked)
            .any(|known| same_endpoint(known, &url))
        {
            unasked.push(url);
        }
    }
    unasked
}

/// The client URL of each member `list` names (its first), when it is an http or https URL.
pub fn listed_client_urls(list: &MemberList) -> Vec<Url> {
    list.members
        .iter()
        .filter_map(|member| client_url(member.client_urls.first()?))
        .collect()
}

/// A member's client URL as etcd lists it, when it is an http or https URL.
fn client_url(text: &str) -> Option<Url> {
    Url::parse(text)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
}

/// Whether `text` is `url` as written (but for a trailing `/`): then it reaches the same
/// place ([`same_endpoint`]) without being parsed.
fn written_as(url: &Url, text: &str) -> bool {
    url.as_str().trim_end_matches('/') == text.trim_end_matches('/')
}

/// Two endpoint URLs that reach the same place (`http://h:2379` and `http://h:2379/`).
pub fn same_endpoint(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// One endpoint's status and versions (asked unless `known`), and its health when the
/// status was refused to the user.
async fn read_endpoint(
    client: &EtcdClient,
    endpoint: &Url,
    known: Option<&Versions>,
    deadline: Instant,
) -> EndpointReading {
    // One request after another: each member is asked over one pooled connection (see the
    // module's doc).
    let status = client.status(endpoint, deadline).await;
    let versions = match known {
        Some(versions) => Ok(versions.clone()),
        None => client.version(endpoint, deadline).await,
    };
    let health = match &status {
        Err(error) if matches!(error.kind(), ErrorKind::Auth | ErrorKind::Forbidden) => {
            Some(client.health(endpoint, deadline).await)
        }
        _ => None,
    };
    EndpointReading {
        endpoint: endpoint.clone(),
        status,
        health,
        versions,
        versions_asked: known.is_none(),
    }
}

/// The endpoint the cluster's facts are read from, and what its reading already told.
struct Source {
    endpoint: Url,
    leader_known: bool,
    /// The alarms its status listed; `None` when its status was not read.
    alarms: Option<Vec<Alarm>>,
}

impl Source {
    fn of(reading: &EndpointReading) -> Source {
        Source {
            endpoint: reading.endpoint.clone(),
            leader_known: reading.knows_leader() == Some(true),
            alarms: reading
                .status
                .as_ref()
                .ok()
                .map(|status| status.value.alarms()),
        }
    }
}

/// The cluster's facts from `source`: linearizable reads and the leader's lease when a leader
/// is known; the source's own copy of members and keys otherwise. The alarms are its status's,
/// asked only when that was refused and a leader is known.
async fn read_facts(
    client: &EtcdClient,
    source: Source,
    prefix: impl Future<Output = Option<String>>,
    deadline: Instant,
) -> ClusterFacts {
    let Source {
        endpoint: source,
        leader_known,
        alarms: listed_alarms,
    } = source;
    let members = client.member_list(&source, leader_known, deadline).await;
    let alarms = match listed_alarms {
        Some(alarms) => Some(Ok(alarms)),
        None if leader_known => Some(client.alarms(&source, deadline).await),
        None => None,
    };
    let (keys, leader_lease, prefix) = {
        let prefix = tokio::time::timeout_at(deadline, prefix)
            .await
            .ok()
            .flatten();
        let keys = match prefix.as_deref() {
            Some(prefix) => Some(
                client
                    .range_prefix(&source, prefix.as_bytes(), !leader_known, deadline)
                    .await
                    .map(|range| parse_patroni_keys(prefix, &range)),
            ),
            None => None,
        };
        let lease = match &keys {
            Some(Ok(keys)) if leader_known => keys
                .leader
                .as_ref()
                .map(|leader| leader.lease)
                .filter(|lease| *lease != 0),
            _ => None,
        };
        let leader_lease = match lease {
            Some(lease) => Some(client.lease_time_to_live(&source, lease, deadline).await),
            None => None,
        };
        (keys, leader_lease, prefix)
    };
    ClusterFacts {
        source,
        prefix,
        linearizable: leader_known,
        members,
        alarms,
        keys,
        leader_lease,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::*;
    use crate::etcd::fake::{FakeEtcd, Reply};
    use crate::etcd::{ClientSettings, LeaseTimeToLive};
    use crate::fixture;

    const PREFIX: &str = "/service/capdemo/";

    fn client() -> EtcdClient {
        EtcdClient::new(ClientSettings::default(), Duration::from_secs(5)).unwrap()
    }

    /// One reading of `endpoints` by a plain client, Patroni's prefix known from the start.
    async fn read_with_prefix(endpoints: &[Url], deadline: Instant) -> EtcdReading {
        let prefix = std::future::ready(Some(PREFIX.to_owned()));
        read_cluster(&client(), endpoints, 0, &[], prefix, deadline).await
    }

    /// [`read_with_prefix`] of every fake, within 5 s.
    async fn read_fakes(fakes: &[FakeEtcd]) -> EtcdReading {
        let endpoints: Vec<Url> = fakes.iter().map(FakeEtcd::url).collect();
        read_with_prefix(&endpoints, Instant::now() + Duration::from_secs(5)).await
    }

    /// A fake serving the captured answers of the folder of `status` (`etcd-3.4/`: 3.4.23,
    /// `etcd-3.5.1/`: 3.5.1), with `status` as its status.
    async fn member(status: &str) -> FakeEtcd {
        let (folder, _) = status.split_once('/').unwrap();
        let fake = FakeEtcd::start("127.0.0.1").await;
        fake.route("/v3/maintenance/status", Reply::ok(fixture(status)));
        for (path, file) in [
            ("/v3/cluster/member/list", "member-list.json"),
            ("/v3/maintenance/alarm", "alarm-none.json"),
            ("/v3/kv/range", "range-patroni.json"),
            ("/v3/lease/timetolive", "timetolive-leader.json"),
            ("/health", "health.json"),
            ("/version", "version.json"),
        ] {
            fake.route(path, Reply::ok(fixture(&format!("{folder}/{file}"))));
        }
        fake
    }

    /// What each captured folder's answers say: Patroni's leader, the lease of its key, the
    /// member's and the cluster's version.
    const CAPTURES: [(&str, &str, LeaseTimeToLive, &str, &str); 2] = [
        (
            "etcd-3.4",
            "pg2",
            LeaseTimeToLive {
                id: 8_115_383_331_663_444_237,
                ttl: 28,
                granted_ttl: 30,
            },
            "3.4.23",
            "3.4.0",
        ),
        (
            "etcd-3.5.1",
            "pg-1",
            LeaseTimeToLive {
                id: 1_643_147_722_957_577_482,
                ttl: 23,
                granted_ttl: 30,
            },
            "3.5.1",
            "3.5.0",
        ),
    ];

    /// The paths asked of `fake`, sorted (the order of the endpoints is not fixed).
    fn asked(fake: &FakeEtcd) -> Vec<String> {
        let mut paths: Vec<String> = fake.requests().into_iter().map(|r| r.path).collect();
        paths.sort();
        paths
    }

    #[tokio::test]
    async fn each_member_is_asked_over_one_connection() {
        // A reading that asks everything (the versions too): a member's requests go one
        // after the other, so that each member holds one pooled connection between polls,
        // not one per request that was running at once.
        let fakes = [
            member("etcd-3.4/status-e1.json").await,
            member("etcd-3.4/status-e2.json").await,
            member("etcd-3.4/status-e3.json").await,
        ];
        let reading = read_fakes(&fakes).await;
        let facts = reading.facts.as_ref().unwrap();
        assert_eq!(facts.source, fakes[0].url(), "e1 leads");
        assert!(facts.members.is_ok() && facts.leader_lease.as_ref().is_some_and(Result::is_ok));
        assert_eq!(
            asked(&fakes[0]),
            [
                "/v3/cluster/member/list",
                "/v3/kv/range",
                "/v3/lease/timetolive",
                "/v3/maintenance/status",
                "/version"
            ]
        );
        for fake in &fakes {
            let connections: BTreeSet<std::net::SocketAddr> =
                fake.requests().iter().map(|request| request.peer).collect();
            assert_eq!(connections.len(), 1, "{:?}", fake.requests());
        }
    }

    /// A listed URL written as the endpoint asked is passed over unparsed; one written
    /// otherwise is parsed and still the same endpoint; at most `up_to` are given.
    #[test]
    fn the_listed_endpoints_not_asked_are_those_that_reach_elsewhere() {
        let url = |text: &str| Url::parse(text).unwrap();
        let mut list =
            crate::etcd::parse_member_list(&fixture("etcd-3.5/member-list.json")).unwrap();
        let facts = |list: &MemberList| ClusterFacts {
            source: url("https://10.0.0.11:2379"),
            linearizable: true,
            members: Ok(list.clone()),
            alarms: None,
            prefix: None,
            keys: None,
            leader_lease: None,
        };
        let asked = [
            url("https://10.0.0.11:2379"),
            url("https://10.0.0.12:2379/"),
        ];
        assert!(written_as(&asked[0], "https://10.0.0.11:2379/"));
        assert!(!written_as(&asked[0], "HTTPS://10.0.0.11:2379"));
        let unasked = unasked_listed_endpoints(&facts(&list), &asked, 9);
        assert_eq!(unasked, [url("https://10.0.0.13:2379")]);
        assert!(unasked_listed_endpoints(&facts(&list), &asked, 0).is_empty());
        list.members[0].client_urls = vec!["HTTPS://10.0.0.11:2379".into()];
        list.members[1].client_urls = vec!["http://10.0.0.12:2379".into()];
        assert_eq!(
            unasked_listed_endpoints(&facts(&list), &asked, 9),
            [url("http://10.0.0.12:2379"), url("https://10.0.0.13:2379")]
        );
        assert_eq!(
            unasked_listed_endpoints(&facts(&list), &asked, 1),
            [url("http://10.0.0.12:2379")]
        );
    }

    #[tokio::test]
    async fn the_members_listed_are_asked_in_the_same_reading() {
        // One endpoint configured (the README's quick start), a follower: the member list it
        // gives names the two others, asked in this reading too, each once.
        let fakes = [
            member("etcd-3.4/status-e1.json").await,
            member("etcd-3.4/status-e2.json").await,
            member("etcd-3.4/status-e3.json").await,
        ];
        let mut list = String::from_utf8(fixture("etcd-3.4/member-list.json")).unwrap();
        for (index, fake) in fakes.iter().enumerate() {
            let url = fake.url().as_str().trim_end_matches('/').to_owned();
            // A trailing slash on one: the same endpoint all the same.
            let url = if index == 1 { format!("{url}/") } else { url };
            list = list.replace(&format!("http://127.0.0.1{}:2379", index + 1), &url);
        }
        for fake in &fakes {
            fake.route("/v3/cluster/member/list", Reply::ok(list.clone()));
        }
        let read = |up_to: usize| {
            let configured = [fakes[1].url()];
            async move {
                let prefix = std::future::ready(Some(PREFIX.to_owned()));
                let deadline = Instant::now() + Duration::from_secs(5);
                read_cluster(&client(), &configured, up_to, &[], prefix, deadline).await
            }
        };
        let asked_endpoints = |reading: &EtcdReading| -> Vec<Url> {
            reading
                .endpoints
                .iter()
                .map(|e| e.endpoint.clone())
                .collect()
        };

        let followed = read(128).await;
        // The configured one first, then the list's others in its order (e3, e1).
        assert_eq!(
            asked_endpoints(&followed),
            [fakes[1].url(), fakes[2].url(), fakes[0].url()]
        );
        assert!(followed.endpoints.iter().all(|e| e.status.is_ok()));
        assert_eq!(
            followed.endpoints.iter().filter(|e| e.is_leader()).count(),
            1,
            "e1 says it leads"
        );
        for fake in [&fakes[0], &fakes[2]] {
            assert_eq!(asked(fake), ["/v3/maintenance/status", "/version"]);
        }
        assert_eq!(fakes[1].count("/v3/maintenance/status"), 1);

        let alone = read(0).await;
        assert_eq!(asked_endpoints(&alone), [fakes[1].url()]);
        assert_eq!(alone.facts.as_ref().unwrap().source, fakes[1].url());
        let capped = read(1).await;
        assert_eq!(
            asked_endpoints(&capped),
            [fakes[1].url(), fakes[2].url()],
            "at most up_to more"
        );
    }

    #[tokio::test]
    async fn the_leader_gives_the_cluster_facts() {
        for capture in CAPTURES {
            the_leader_gives_the_cluster_facts_of(capture).await;
        }
    }

    async fn the_leader_gives_the_cluster_facts_of(
        (folder, leader, lease, server, cluster): (&str, &str, LeaseTimeToLive, &str, &str),
    ) {
        // The leader listed last: the facts still come from it.
        let fakes = [
            member(&format!("{folder}/status-e2.json")).await,
            member(&format!("{folder}/status-e3.json")).await,
            member(&format!("{folder}/status-e1.json")).await,
        ];
        let reading = read_fakes(&fakes).await;
        let order: Vec<Url> = reading
            .endpoints
            .iter()
            .map(|e| e.endpoint.clone())
            .collect();
        let given: Vec<Url> = fakes.iter().map(FakeEtcd::url).collect();
        assert_eq!(order, given, "in the order given");
        assert!(reading
            .endpoints
            .iter()
            .all(|e| e.status.is_ok() && e.health.is_none()));
        let leaders: Vec<bool> = reading
            .endpoints
            .iter()
            .map(EndpointReading::is_leader)
            .collect();
        assert_eq!(leaders, [false, false, true]);
        let facts = reading.facts.as_ref().unwrap();
        assert_eq!(facts.source, fakes[2].url());
        assert!(facts.linearizable);
        assert_eq!(facts.members.as_ref().unwrap().members.len(), 3);
        assert_eq!(facts.alarms, Some(Ok(vec![])));
        let keys = facts.keys.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(keys.leader.as_ref().unwrap().name, leader, "{folder}");
        assert_eq!(facts.leader_lease, Some(Ok(lease)), "{folder}");
        assert_eq!(asked(&fakes[0]), ["/v3/maintenance/status", "/version"]);
        assert_eq!(asked(&fakes[1]), ["/v3/maintenance/status", "/version"]);
        assert_eq!(
            asked(&fakes[2]),
            [
                "/v3/cluster/member/list",
                "/v3/kv/range",
                "/v3/lease/timetolive",
                "/v3/maintenance/status",
                "/version",
            ]
        );
        for endpoint in &reading.endpoints {
            assert_eq!(endpoint.server_version(), Some(server));
            assert_eq!(endpoint.cluster_version(), Some(cluster));
        }
        assert_eq!(reading.clone(), reading);
    }

    #[tokio::test]
    async fn a_refused_status_falls_back_to_health() {
        // etcd 3.6.0–3.6.9: Status for root only.
        let fakes = [
            member("etcd-3.4/status-e1.json").await,
            member("etcd-3.4/status-e1.json").await,
        ];
        for fake in &fakes {
            fake.route(
                "/v3/maintenance/status",
                Reply::Answer(403, fixture("etcd-3.6/auth-status-permission-denied.json")),
            );
        }
        fakes[1].route(
            "/health",
            Reply::Answer(503, fixture("etcd-3.6/health-no-leader.json")),
        );
        let reading = read_fakes(&fakes).await;
        for endpoint in &reading.endpoints {
            assert_eq!(
                endpoint.status.as_ref().unwrap_err().kind(),
                ErrorKind::Forbidden
            );
        }
        assert_eq!(reading.endpoints[0].knows_leader(), Some(true));
        assert_eq!(reading.endpoints[1].knows_leader(), Some(false));
        assert_eq!(
            reading.endpoints[1]
                .health
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap()
                .reason,
            "RAFT NO LEADER"
        );
        let facts = reading.facts.unwrap();
        assert_eq!(facts.source, fakes[0].url(), "the one that has a leader");
        assert!(
            facts.linearizable
                && facts.keys.as_ref().is_some_and(Result::is_ok)
                && facts.leader_lease.is_some()
        );
        assert_eq!(
            asked(&fakes[1]),
            ["/health", "/v3/maintenance/status", "/version"]
        );
        // No status to list the alarms: asked of the source, as the only way left.
        assert_eq!(facts.alarms, Some(Ok(vec![])));
        assert!(asked(&fakes[0]).contains(&"/v3/maintenance/alarm".to_owned()));
        // The member's version still read, from `/version` (asked without the token).
        assert_eq!(reading.endpoints[0].server_version(), Some("3.4.23"));
    }

    #[tokio::test]
    async fn known_versions_are_given_not_asked() {
        let fakes = [
            member("etcd-3.4/status-e1.json").await,
            member("etcd-3.4/status-e2.json").await,
        ];
        let endpoints: Vec<Url> = fakes.iter().map(FakeEtcd::url).collect();
        let given = Versions {
            server: "3.4.22".into(),
            cluster: "3.4.0".into(),
        };
        let known = [(endpoints[0].clone(), given.clone())];
        let prefix = std::future::ready(Some(PREFIX.to_owned()));
        let deadline = Instant::now() + Duration::from_secs(5);
        let reading = read_cluster(&client(), &endpoints, 0, &known, prefix, deadline).await;
        assert_eq!(
            (fakes[0].count("/version"), fakes[1].count("/version")),
            (0, 1)
        );
        let [first, second] = &reading.endpoints[..] else {
            panic!("{reading:?}")
        };
        assert_eq!((&first.versions, first.versions_asked), (&Ok(given), false));
        assert!(second.versions.is_ok() && second.versions_asked);
    }

    #[tokio::test]
    async fn the_alarms_are_the_ones_the_status_lists_and_no_alarm_get_is_sent() {
        // Captured from one cluster each, its quota reached: the status and the alarm GET.
        for folder in ["etcd-3.4", "etcd-3.5.1"] {
            let fake = member(&format!("{folder}/alarm-nospace-status.json")).await;
            fake.route(
                "/v3/maintenance/alarm",
                Reply::ok(fixture(&format!("{folder}/alarm-nospace.json"))),
            );
            let reading = read_fakes(std::slice::from_ref(&fake)).await;
            let facts = reading.facts.unwrap();
            let asked_for =
                crate::etcd::parse_alarms(&fixture(&format!("{folder}/alarm-nospace.json")))
                    .unwrap();
            assert_eq!(asked_for.len(), 1, "{folder}");
            assert_eq!(facts.alarms, Some(Ok(asked_for)), "{folder}");
            assert_eq!(fake.count("/v3/maintenance/alarm"), 0, "{folder}");
        }
    }

    #[tokio::test]
    async fn the_cluster_version_lags_the_members_in_a_rolling_upgrade() {
        let fakes = [
            member("etcd-3.4/status-e1.json").await,
            member("etcd-3.4/status-e2.json").await,
            member("etcd-3.4/status-e3.json").await,
        ];
        // The first member upgraded to 3.5 and restarted: the cluster speaks 3.4 until the
        // last member runs 3.5. The third one just started and has not learned it yet.
        fakes[0].route(
            "/version",
            Reply::ok(br#"{"etcdserver":"3.5.21","etcdcluster":"3.4.0"}"#.to_vec()),
        );
        fakes[2].route(
            "/version",
            Reply::ok(br#"{"etcdserver":"3.4.23","etcdcluster":"not_decided"}"#.to_vec()),
        );
        let endpoints: Vec<Url> = fakes.iter().map(FakeEtcd::url).collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        let reading = read_cluster(
            &client(),
            &endpoints,
            0,
            &[],
            std::future::ready(None),
            deadline,
        )
        .await;
        let clusters: Vec<Option<&str>> = reading
            .endpoints
            .iter()
            .map(EndpointReading::cluster_version)
            .collect();
        assert_eq!(clusters, [Some("3.4.0"), Some("3.4.0"), None]);
        // The member's own version is its Status's, which answered.
        assert_eq!(reading.endpoints[0].server_version(), Some("3.4.23"));
    }

    #[tokio::test]
    async fn a_version_that_fails_costs_nothing_else() {
        let fake = member("etcd-3.4/status-e1.json").await;
        fake.route(
            "/version",
            Reply::Answer(404, b"404 page not found".to_vec()),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        let reading = read_with_prefix(&[fake.url()], deadline).await;
        let endpoint = &reading.endpoints[0];
        assert_eq!(
            endpoint.versions.as_ref().unwrap_err().kind(),
            ErrorKind::HttpStatus
        );
        assert_eq!(endpoint.cluster_version(), None);
        assert_eq!(endpoint.server_version(), Some("3.4.23"));
        assert!(endpoint.status.is_ok() && endpoint.is_leader());
        assert!(reading
            .facts
            .is_some_and(|facts| facts.keys.is_some_and(|keys| keys.is_ok())));
    }

    #[tokio::test]
    async fn without_a_leader_the_own_copy_is_read_and_nothing_waits_for_one() {
        for (folder, leader, ..) in CAPTURES {
            without_a_leader_the_own_copy_is_read_of(folder, leader).await;
        }
    }

    async fn without_a_leader_the_own_copy_is_read_of(folder: &str, leader: &str) {
        let status = format!("{folder}/no-quorum-status-e1.json");
        let fakes = [member(&status).await, member(&status).await];
        // What the real member answers a linearizable request after 7 s, never asked
        // (3.5 answers even the linearizable member list so, 3.4 ignored the field).
        fakes[0].route("/v3/maintenance/alarm", Reply::Hang);
        fakes[0].route("/v3/lease/timetolive", Reply::Hang);
        fakes[0].route(
            "/v3/kv/range",
            Reply::ok(fixture(&format!(
                "{folder}/no-quorum-range-serializable.json"
            ))),
        );
        let endpoints: Vec<Url> = fakes.iter().map(FakeEtcd::url).collect();
        let started = Instant::now();
        let reading = read_with_prefix(&endpoints, started + Duration::from_secs(5)).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let facts = reading.facts.unwrap();
        assert_eq!(facts.source, endpoints[0]);
        assert!(!facts.linearizable);
        // The alarms the member's own status listed (none), the lease not asked.
        assert_eq!((facts.alarms, facts.leader_lease), (Some(Ok(vec![])), None));
        assert_eq!(facts.keys.unwrap().unwrap().leader.unwrap().name, leader);
        let bodies: Vec<(String, String)> = fakes[0]
            .requests()
            .into_iter()
            .filter(|r| r.path != "/v3/maintenance/status")
            .map(|r| (r.path, r.body))
            .collect();
        assert!(bodies.contains(&("/v3/cluster/member/list".into(), "{}".into())));
        assert!(bodies
            .iter()
            .any(|(path, body)| path == "/v3/kv/range" && body.contains(r#""serializable":true"#)));
    }

    #[tokio::test]
    async fn a_hung_member_costs_its_own_status_only() {
        let leader = member("etcd-3.4/status-e1.json").await;
        let hung = member("etcd-3.4/status-e2.json").await;
        hung.route("/v3/maintenance/status", Reply::Hang);
        let endpoints = [hung.url(), leader.url()];
        let started = Instant::now();
        let deadline = started + Duration::from_millis(1500);
        let reading = read_with_prefix(&endpoints, deadline).await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(4),
            "{took:?}"
        );
        assert_eq!(
            reading.endpoints[0].status.as_ref().unwrap_err().kind(),
            ErrorKind::Timeout
        );
        let facts = reading.facts.unwrap();
        assert_eq!(facts.source, endpoints[1]);
        assert!(facts.keys.as_ref().is_some_and(Result::is_ok) && facts.members.is_ok());
        assert!(matches!(facts.leader_lease, Some(Ok(_))));
    }

    #[tokio::test]
    async fn nothing_is_asked_of_a_cluster_that_never_answered() {
        let closed: Vec<Url> = (0..2)
            .map(|_| {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap()
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        let reading = read_with_prefix(&closed, deadline).await;
        assert_eq!(reading.facts, None);
        assert!(reading
            .endpoints
            .iter()
            .all(
                |e| e.status.as_ref().unwrap_err().kind() == ErrorKind::Refused
                    && e.knows_leader().is_none()
            ));
    }
}
