//! A cluster's etcd, asked each poll beside its members: where (the configured endpoints and
//! the members etcd lists), with what (the client built from the settings), and what carries
//! over from one poll to the next (the voting members last counted, the listed endpoints,
//! what Patroni's keys said).
//!
//! Why apart from the REST requests: etcd is read in one piece ([`crate::etcd::read_cluster`])
//! that depends on nothing the members answer but the scope, so it starts with the poll and
//! runs beside both REST rounds, ending by the same deadline.

use std::time::Duration;

use futures::future::{FutureExt, RemoteHandle};
use tokio::sync::oneshot;
use tokio::time::Instant;
use url::Url;

use super::placement::MAX_MEMBERS;
use crate::address::Host;
use crate::config::{ApiUrlPolicy, EtcdSettings};
use crate::etcd::{self, same_endpoint, EtcdClient, EtcdReading, Versions};
use crate::http::Transports;
use crate::snapshot::{EtcdSnapshot, KeyContent};

/// How one cluster's etcd is asked.
#[derive(Debug, Clone)]
pub(super) struct EtcdQuery {
    client: EtcdClient,
    settings: EtcdSettings,
}

impl EtcdQuery {
    /// The client of `settings`, with the body cap `max_body_bytes` and `timeout`, on the
    /// transport of `transports` for its TLS set-up (the fleet's, shared by its clusters).
    /// Reads the TLS files on this thread.
    ///
    /// # Errors
    /// When a TLS file cannot be read or parsed.
    pub(super) fn new(
        settings: &EtcdSettings,
        max_body_bytes: usize,
        timeout: Duration,
        transports: &Transports,
    ) -> anyhow::Result<EtcdQuery> {
        let client_settings = etcd::ClientSettings {
            endpoints: settings.endpoints.clone(),
            tls: crate::http::TlsSettings {
                ca_file: settings.ca_file.clone(),
                cert_file: settings.cert_file.clone(),
                key_file: settings.key_file.clone(),
                ..crate::http::TlsSettings::default()
            },
            username: settings.username.clone(),
            password: settings.password.clone(),
            max_body_bytes,
        };
        Ok(EtcdQuery {
            client: EtcdClient::sharing(client_settings, timeout, transports)?,
            settings: settings.clone(),
        })
    }

    /// Starts this poll's reading, ending by `deadline`: every configured endpoint and every
    /// one etcd listed last poll (when [`EtcdSettings::follows_listed_endpoints`]), each
    /// once, at most [`MAX_MEMBERS`]; Patroni's keys under the prefix of the scope `scope`
    /// sends, once the statuses are in (a sender dropped: no keys). It runs on its own task;
    /// dropping the handle ends it.
    pub(super) fn start(
        &self,
        memory: &EtcdMemory,
        scope: oneshot::Receiver<String>,
        deadline: Instant,
    ) -> RemoteHandle<EtcdReading> {
        let mut endpoints: Vec<Url> = Vec::new();
        let listed = memory
            .listed
            .iter()
            .filter(|_| self.settings.follows_listed_endpoints());
        for url in self.settings.endpoints.iter().chain(listed) {
            if !endpoints.iter().any(|known| same_endpoint(known, url)) {
                endpoints.push(url.clone());
            }
        }
        endpoints.truncate(MAX_MEMBERS);
        // The members etcd lists that were not asked are asked in this reading too (the
        // first poll, `status`'s only one, a member added since).
        let follow_up_to = if self.settings.follows_listed_endpoints() {
            MAX_MEMBERS - endpoints.len()
        } else {
            0
        };
        let settings = self.settings.clone();
        let prefix = async move { Some(settings.prefix(&scope.await.ok()?)) };
        let client = self.client.clone();
        let known_versions = memory.versions_not_due();
        let (reading, handle) = async move {
            etcd::read_cluster(
                &client,
                &endpoints,
                follow_up_to,
                &known_versions,
                prefix,
                deadline,
            )
            .await
        }
        .remote_handle();
        tokio::spawn(reading);
        handle
    }

    /// Whether what etcd says came over an authenticated channel (its hosts are trusted).
    pub(super) fn authenticated(&self) -> bool {
        self.settings.authenticated()
    }
}

/// The hosts of the `api_url`s of the member keys `reading` read, learned into `policy`:
/// trusted when etcd was read over an authenticated channel, else followed only by a client
/// that sends no credentials (as a plain-text Raft status's voters). Nothing is learned from
/// a reading without keys. The URLs are parsed again only when they changed (`memory`): they
/// are the same poll after poll, and learned twice in most polls.
pub(super) fn learn_hosts(
    policy: &mut ApiUrlPolicy,
    memory: &mut EtcdMemory,
    reading: &EtcdReading,
    authenticated: bool,
) {
    let Some(Some(Ok(keys))) = reading.facts.as_ref().map(|facts| &facts.keys) else {
        return;
    };
    let api_urls = keys.members.iter().filter_map(|m| m.api_url.as_deref());
    let (known_urls, known_hosts) = &mut memory.api_hosts;
    if !api_urls.clone().eq(known_urls.iter().map(String::as_str)) {
        *known_urls = api_urls.clone().map(str::to_owned).collect();
        *known_hosts = api_urls
            .filter_map(|url| Host::of_url(&Url::parse(url).ok()?))
            .collect();
    }
    policy
        .learned
        .learn(known_hosts.iter().cloned(), authenticated);
}

/// What the poller remembers of a cluster's etcd between polls.
#[derive(Debug, Default)]
pub(super) struct EtcdMemory {
    /// Voting members of the last member list read (0: none read yet).
    pub(super) voters: usize,
    /// The Unix time of the poll that read that list: exported beside what is judged from
    /// `voters` ([`EtcdMemory::voters_read_at`]).
    voters_at: Option<f64>,
    /// The client URLs of the members etcd listed last, and the texts they were parsed
    /// from.
    pub(super) listed: Vec<Url>,
    listed_texts: Vec<String>,
    /// What Patroni's keys said last, read through a leader.
    pub(super) keys: Option<KeyContent>,
    /// The `api_url`s of the member keys last learned, and their hosts ([`learn_hosts`]).
    api_hosts: (Vec<String>, Vec<Host>),
    /// Each endpoint's `GET /version` last read, while it need not be asked again.
    versions: Vec<KnownVersions>,
}

/// An endpoint's `GET /version` as last read, and when.
#[derive(Debug, Clone)]
struct KnownVersions {
    endpoint: Url,
    versions: Versions,
    /// The Unix time of the poll that read it.
    read_at: f64,
    /// Polls since, that did not ask it.
    polls_since: u32,
}

/// How often an endpoint's `GET /version` is asked again while nothing says its versions
/// changed: every 12th poll (a minute at the default 5 s).
pub const VERSIONS_EVERY_POLLS: u32 = 12;

/// `3.5` of `3.5.21` or `3.5.0`.
fn major_minor(version: &str) -> Option<&str> {
    let mut dots = version.match_indices('.');
    let (_, _) = dots.next()?;
    Some(match dots.next() {
        Some((end, _)) => &version[..end],
        None => version,
    })
}

impl EtcdMemory {
    /// Learns from the judged snapshot of the poll of Unix time `at`: a member list and keys
    /// read replace the last; a poll that could not read them keeps what was known.
    pub(super) fn learn(&mut self, snapshot: &EtcdSnapshot, at: f64) {
        if let Some(voters) = snapshot.listed_voters() {
            self.voters = voters;
            self.voters_at = Some(at);
            // Parsed again only when the list names other URLs: it names the same poll
            // after poll.
            let texts = snapshot.listed_client_url_texts();
            if !texts
                .clone()
                .eq(self.listed_texts.iter().map(String::as_str))
            {
                self.listed_texts = texts.map(str::to_owned).collect();
                self.listed = snapshot.listed_endpoints();
                self.listed.truncate(MAX_MEMBERS);
            }
        }
        self.keys = snapshot.key_content();
    }

    /// Learns the versions `reading` read, and says which are due again: `/version` is asked
    /// of an endpoint in the next poll when it was not read (never, or it failed), when its
    /// status was refused (`/version` is then its only version), every
    /// [`VERSIONS_EVERY_POLLS`]th poll, and of every endpoint while a member's status names
    /// another version than its `/version` did (it restarted into another etcd) or the
    /// cluster version is behind a member's own (a rolling upgrade or a downgrade under way:
    /// etcd raises it when the last member runs the new version).
    pub(super) fn learn_versions(&mut self, reading: &EtcdReading, at: f64) {
        let mut learned = Vec::with_capacity(reading.endpoints.len());
        for endpoint in &reading.endpoints {
            let (Ok(status), Ok(versions)) = (&endpoint.status, &endpoint.versions) else {
                continue;
            };
            let own = status.value.version.as_str();
            let cluster = versions.cluster_decided().and_then(major_minor);
            if versions.server != own || cluster != major_minor(own) {
                self.versions.clear();
                return;
            }
            let known = if endpoint.versions_asked {
                KnownVersions {
                    endpoint: endpoint.endpoint.clone(),
                    versions: versions.clone(),
                    read_at: at,
                    polls_since: 0,
                }
            } else {
                let Some(index) = self
                    .versions
                    .iter()
                    .position(|known| same_endpoint(&known.endpoint, &endpoint.endpoint))
                else {
                    continue;
                };
                let known = self.versions.swap_remove(index);
                KnownVersions {
                    polls_since: known.polls_since + 1,
                    ..known
                }
            };
            // Served by the poll that read it and the 11 after; the 12th asks.
            if known.polls_since + 1 < VERSIONS_EVERY_POLLS {
                learned.push(known);
            }
        }
        self.versions = learned;
    }

    /// The versions of the endpoints `/version` need not be asked of in the next poll.
    pub(super) fn versions_not_due(&self) -> Vec<(Url, Versions)> {
        self.versions
            .iter()
            .map(|known| (known.endpoint.clone(), known.versions.clone()))
            .collect()
    }

    /// When the versions `reading` of the poll of Unix time `at` gives were read: the time of
    /// the poll that read the oldest of them (`at` for those it asked); `None` when it gives
    /// none. Before [`EtcdMemory::learn_versions`] learns the reading.
    pub(super) fn versions_read_at(&self, reading: &EtcdReading, at: f64) -> Option<f64> {
        reading
            .endpoints
            .iter()
            .filter(|endpoint| endpoint.versions.is_ok())
            .filter_map(|endpoint| match endpoint.versions_asked {
                true => Some(at),
                false => self
                    .versions
                    .iter()
                    .find(|known| same_endpoint(&known.endpoint, &endpoint.endpoint))
                    .map(|known| known.read_at),
            })
            .reduce(f64::min)
    }

    /// When the voting members the last poll judged from were listed: the Unix time of the
    /// poll that read the member list; `None` while none was read.
    pub(super) fn voters_read_at(&self) -> Option<f64> {
        self.voters_at.filter(|_| self.voters > 0)
    }
}

/// A poll's etcd reading: still running, or read. Round two waits for it up to half the
/// poll's time, so that the members' hosts Patroni's keys name are known to the first poll
/// (as round one waits for a Raft status); a reading still running then ends by the poll's
/// deadline beside round two.
pub(super) enum EtcdProgress {
    Running(RemoteHandle<EtcdReading>),
    Done(Box<EtcdReading>),
}

impl EtcdProgress {
    /// Waits for the reading until `until`.
    pub(super) async fn until(self, until: Instant) -> EtcdProgress {
        match self {
            EtcdProgress::Running(mut handle) => tokio::select! {
                reading = &mut handle => EtcdProgress::Done(Box::new(reading)),
                () = tokio::time::sleep_until(until) => EtcdProgress::Running(handle),
            },
            done @ EtcdProgress::Done(_) => done,
        }
    }
}

/// A poll's etcd reading and, until the first `/cluster` named it, the sender of the scope
/// its keys are read under; empty on a cluster that is not on etcd.
#[derive(Default)]
pub(super) struct EtcdPoll {
    pub(super) progress: Option<EtcdProgress>,
    pub(super) scope_sender: Option<oneshot::Sender<String>>,
}

impl EtcdPoll {
    /// The reading, once it ended (by the poll's deadline at the latest); `None` without one.
    pub(super) async fn finish(self) -> Option<EtcdReading> {
        match self.progress? {
            EtcdProgress::Running(handle) => Some(handle.await),
            EtcdProgress::Done(reading) => Some(*reading),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::{parse_member_list, ClusterFacts, EndpointReading, EtcdError};

    /// A judged snapshot whose member list was read (`true`: the captured 3-member list) or
    /// not.
    fn snapshot(list_read: bool) -> EtcdSnapshot {
        let members = if list_read {
            parse_member_list(&crate::fixture("etcd-3.5/member-list.json"))
        } else {
            Err(EtcdError::Timeout(Duration::from_secs(1)))
        };
        EtcdSnapshot {
            facts: Some(ClusterFacts {
                source: Url::parse("http://127.0.0.1:2379").unwrap(),
                linearizable: true,
                members,
                alarms: None,
                prefix: None,
                keys: None,
                leader_lease: None,
            }),
            ..EtcdSnapshot::default()
        }
    }

    /// The hosts of the member keys' `api_url`s are learned from every reading, and a URL
    /// that changed is parsed again: its new host allowed, the old one no longer named.
    #[test]
    fn the_member_keys_hosts_follow_their_api_urls() {
        let range = crate::etcd::parse_range(&crate::fixture("etcd-3.4/range-patroni.json"));
        let keys = crate::etcd::parse_patroni_keys("/service/capdemo/", &range.unwrap());
        let reading = |keys: &crate::etcd::PatroniKeys| EtcdReading {
            endpoints: Vec::new(),
            facts: Some(ClusterFacts {
                keys: Some(Ok(keys.clone())),
                ..snapshot(true).facts.unwrap()
            }),
        };
        let host = |text: &str| Host::of_url(&Url::parse(text).unwrap()).unwrap();
        let mut policy = ApiUrlPolicy::default();
        let mut memory = EtcdMemory::default();
        learn_hosts(&mut policy, &mut memory, &reading(&keys), true);
        assert!(policy.allows_host(&host("http://127.0.0.21:8008")));
        assert!(policy.allows_host(&host("http://127.0.0.22:8008")));
        assert!(!policy.allows_host(&host("http://127.0.0.23:8008")));
        let mut moved = keys.clone();
        moved.members[0].api_url = Some("http://127.0.0.23:8008/patroni".into());
        for _ in 0..2 {
            learn_hosts(&mut policy, &mut memory, &reading(&moved), true);
            assert!(policy.allows_host(&host("http://127.0.0.23:8008")));
            assert!(policy.allows_host(&host("http://127.0.0.22:8008")));
        }
        assert_eq!(memory.api_hosts.1.len(), 2);
        // A policy made again (a reload) learns the same hosts from the URLs remembered.
        let mut reloaded = ApiUrlPolicy::default();
        learn_hosts(&mut reloaded, &mut memory, &reading(&moved), false);
        let url = Url::parse("http://127.0.0.23:8008/patroni").unwrap();
        assert!(reloaded.allows_url(&url) && !reloaded.allows_host(&host(url.as_str())));
    }

    /// An endpoint's reading: its status answered (`Some(version)`) or refused, its
    /// `/version` answered (3.4.23 on 3.4.0) or timed out, asked or given.
    fn endpoint(n: u8, status: Option<&str>, answered: bool, asked: bool) -> EndpointReading {
        let fixture = crate::fixture("etcd-3.4/status-e1.json");
        EndpointReading {
            endpoint: Url::parse(&format!("http://127.0.0.{n}:2379")).unwrap(),
            status: match status {
                Some(version) => Ok(crate::etcd::Timed {
                    value: crate::etcd::EndpointStatus {
                        version: version.into(),
                        ..crate::etcd::parse_status(&fixture).unwrap()
                    },
                    round_trip: Duration::from_millis(1),
                }),
                None => Err(EtcdError::Forbidden("etcdserver: permission denied".into())),
            },
            health: None,
            versions: match answered {
                true => Ok(Versions {
                    server: "3.4.23".into(),
                    cluster: "3.4.0".into(),
                }),
                false => Err(EtcdError::Timeout(Duration::from_secs(1))),
            },
            versions_asked: asked,
        }
    }

    /// `/version` is asked again of an endpoint whose status was refused (its only version)
    /// or whose `/version` failed, not of the others; the time served is the oldest read.
    #[test]
    fn versions_are_due_again_when_refused_or_failed() {
        let known = |memory: &EtcdMemory| -> Vec<String> {
            let known = memory.versions_not_due().into_iter();
            known
                .map(|(url, _)| url.host_str().unwrap().to_owned())
                .collect()
        };
        let reading = |endpoints| EtcdReading {
            endpoints,
            facts: None,
        };
        let mut memory = EtcdMemory::default();
        let first = reading(vec![
            endpoint(1, Some("3.4.23"), true, true),
            endpoint(2, None, true, true),
            endpoint(3, Some("3.4.23"), false, true),
        ]);
        assert_eq!(memory.versions_read_at(&first, 10.0), Some(10.0));
        memory.learn_versions(&first, 10.0);
        assert_eq!(known(&memory), ["127.0.0.1"]);
        let second = reading(vec![
            endpoint(1, Some("3.4.23"), true, false),
            endpoint(2, None, true, true),
            endpoint(3, Some("3.4.23"), true, true),
        ]);
        assert_eq!(memory.versions_read_at(&second, 15.0), Some(10.0));
        memory.learn_versions(&second, 15.0);
        assert_eq!(known(&memory), ["127.0.0.1", "127.0.0.3"]);
        // An endpoint no longer asked is forgotten.
        let third = reading(vec![endpoint(3, Some("3.4.23"), true, false)]);
        memory.learn_versions(&third, 20.0);
        assert_eq!(known(&memory), ["127.0.0.3"]);
        assert_eq!(major_minor("3.5.21"), Some("3.5"));
        assert_eq!(major_minor("3.5"), Some("3.5"));
        assert_eq!(major_minor("3"), None);
    }

    /// The endpoints listed are learned from each list read, parsed again only when the
    /// list names other URLs.
    #[test]
    fn the_listed_endpoints_follow_the_member_list() {
        let mut memory = EtcdMemory::default();
        let hosts = |memory: &EtcdMemory| -> Vec<String> {
            memory
                .listed
                .iter()
                .map(|url| url.as_str().to_owned())
                .collect()
        };
        memory.learn(&snapshot(true), 5.0);
        let first = hosts(&memory);
        assert_eq!(first.len(), 3, "{first:?}");
        memory.learn(&snapshot(true), 10.0);
        assert_eq!(hosts(&memory), first);
        let mut moved = snapshot(true);
        if let Some(Ok(list)) = moved.facts.as_mut().map(|facts| &mut facts.members) {
            list.members[0].client_urls = vec!["https://10.0.0.21:2379".into()];
        }
        memory.learn(&moved, 15.0);
        assert_eq!(hosts(&memory)[0], "https://10.0.0.21:2379/");
        assert_eq!(hosts(&memory)[1..], first[1..]);
        memory.learn(&snapshot(false), 20.0);
        assert_eq!(
            hosts(&memory)[0],
            "https://10.0.0.21:2379/",
            "kept while unread"
        );
    }

    /// The voting members judged while the list is not read are the last list's, with the
    /// time of the poll that read it.
    #[test]
    fn the_voting_members_keep_the_time_of_the_poll_that_listed_them() {
        let mut memory = EtcdMemory::default();
        memory.learn(&snapshot(false), 5.0);
        assert_eq!(memory.voters_read_at(), None, "never listed: no time");
        memory.learn(&snapshot(true), 10.0);
        assert_eq!((memory.voters, memory.voters_read_at()), (3, Some(10.0)));
        memory.learn(&snapshot(false), 15.0);
        assert_eq!((memory.voters, memory.voters_read_at()), (3, Some(10.0)));
        memory.learn(&snapshot(true), 20.0);
        assert_eq!(memory.voters_read_at(), Some(20.0));
    }
}
