//! Discovery: which member answers `/cluster`, and which Raft nodes to ask.
//!
//! Why it learns: one `--patroni.url` and the Raft password must find every member and every
//! voter. `/cluster` names the members and their hosts; an authenticated Raft status names
//! the voters, whose hosts then become trusted ([`ApiUrlPolicy`]). `/cluster` alone never
//! directs connections to a host nobody trusted.
//!
//! [`ApiUrlPolicy`]: crate::config::ApiUrlPolicy

use std::collections::BTreeSet;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;
use url::Url;

use super::placement::MAX_MEMBERS;
use super::requests::Requests;
use super::tally::Tally;
use super::voters::VoterMemory;
use crate::address::Host;
use crate::config::{ApiUrlPolicy, ClusterConfig, RaftSettings};
use crate::patroni::{self, ClusterView};
use crate::snapshot::{self, Failure, RaftNodeSnapshot, Source};

/// `/cluster` candidates are asked a timeout's this fraction apart while none answered.
pub(super) const HEDGE_SPLIT: u32 = 4;

/// What asking `/cluster` gave: the failed attempts in order, and who answered.
pub(super) struct ClusterAnswer {
    pub(super) attempts: Vec<(Url, Failure)>,
    pub(super) answered: Option<(Url, ClusterView)>,
}
/// Drops a node queried under another address (a configured REST host that is a VIP or a
/// name) when the same node also answered under its own id, so that each voter appears
/// once; sorted by address.
pub(super) fn without_aliases(mut raft_nodes: Vec<RaftNodeSnapshot>) -> Vec<RaftNodeSnapshot> {
    let answered_ids: BTreeSet<String> = raft_nodes
        .iter()
        .filter(|node| node.status.as_ref().is_ok_and(|s| s.self_node == node.node))
        .map(|node| node.node.clone())
        .collect();
    raft_nodes.retain(|node| match &node.status {
        Ok(status) => status.self_node == node.node || !answered_ids.contains(&status.self_node),
        Err(_) => true,
    });
    raft_nodes.sort_by(|a, b| a.node.cmp(&b.node));
    raft_nodes
}
/// `host:port`, with brackets for IPv6 literals.
pub(super) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Where `/cluster` was read and what it taught, across polls.
#[derive(Debug, Default)]
pub(super) struct Discovery {
    /// The base URL asked `/cluster` first: the last one that answered, unless the one
    /// asked first before it was merely slower ([`Discovery::answered`]).
    first_choice: Option<Url>,
    /// The base URL whose `/cluster` the last poll read (`None`: none answered).
    read_from: Option<Url>,
    /// REST bases learned from the members' `api_url`s (those the policy allows).
    learned_urls: Vec<Url>,
    /// The scope `/cluster` named last.
    scope: Option<String>,
}

impl Discovery {
    /// The URLs to ask `/cluster`, in order and each once: the first choice, the
    /// `configured` ones, the learned ones.
    pub(super) fn candidates(&self, configured: &[Url]) -> Vec<Url> {
        let mut candidates: Vec<Url> = Vec::new();
        for url in self
            .first_choice
            .iter()
            .chain(configured)
            .chain(&self.learned_urls)
        {
            if !candidates.contains(url) {
                candidates.push(url.clone());
            }
        }
        candidates
    }

    /// Remembers which URL answered `/cluster` in this poll (`None`: none did), and which
    /// of them `failed`. The first choice moves to the one that answered only when the first
    /// choice failed (or none answered: then the configured order again). A first choice
    /// that was merely slower than a hedged candidate stays first: on a loaded machine the
    /// fastest member changes from poll to poll, and following it would read a different
    /// member's view each time, an isolated member's frozen one among them (the partition
    /// lab saw the configured member's view left for the isolated old leader's that way).
    pub(super) fn answered(&mut self, url: Option<Url>, failed: &[&Url]) {
        let first_failed = self
            .first_choice
            .as_ref()
            .is_some_and(|u| failed.contains(&u));
        if url.is_none() || self.first_choice.is_none() || first_failed {
            self.first_choice.clone_from(&url);
        }
        self.read_from = url;
    }

    /// The base URL whose `/cluster` the last poll read, if one answered.
    pub(super) fn read_from(&self) -> Option<&Url> {
        self.read_from.as_ref()
    }

    /// Learns from this poll's `/cluster`: its scope, and the members' REST bases that
    /// `policy` allows.
    pub(super) fn remember(&mut self, view: &ClusterView, policy: &ApiUrlPolicy) {
        if let Some(scope) = &view.scope {
            if self.scope.as_deref() != Some(scope.as_str()) {
                self.scope = Some(scope.clone());
            }
        }
        let allowed = || {
            view.members
                .iter()
                .filter_map(|m| m.api_url.as_ref().and_then(patroni::ApiUrl::url))
                .filter(|url| policy.allows_url(url))
        };
        // Built again only when they changed: the same members name the same bases poll
        // after poll, and each base is a URL copied and rewritten.
        let unchanged = allowed()
            .map(patroni::base_text)
            .eq(self.learned_urls.iter().map(patroni::base_text));
        if !unchanged {
            self.learned_urls = allowed().map(patroni::base_of).collect();
        }
    }

    /// The cluster's scope when known: the configured one, else what `/cluster` named last.
    /// `None` before either (the URL stands in for it in the label, not in etcd's keys).
    pub(super) fn known_scope<'a>(&'a self, config: &'a ClusterConfig) -> Option<&'a str> {
        config
            .identity
            .expected_scope
            .as_deref()
            .or(self.scope.as_deref())
    }

    /// The `scope` label: what Patroni said last, else what was `config`ured, else the
    /// first URL.
    pub(super) fn scope_label(&self, config: &ClusterConfig) -> String {
        self.scope
            .as_deref()
            .map_or_else(|| config.name(), str::to_owned)
    }

    /// Logs and counts (under the `scope` label) the failed `/cluster` attempts, and remembers
    /// who answered.
    pub(super) fn settle(
        &mut self,
        answer: ClusterAnswer,
        tally: &mut Tally,
        scope: &str,
    ) -> (Option<ClusterView>, Option<Failure>) {
        let mut last_failure = None;
        let mut failed = Vec::new();
        for (url, failure) in &answer.attempts {
            tally.note(
                scope,
                Source::Cluster,
                format_args!("cluster {url}"),
                Some(failure),
            );
            last_failure = Some(failure.clone());
            failed.push(url);
        }
        match answer.answered {
            Some((url, view)) => {
                tally.note(scope, Source::Cluster, format_args!("cluster {url}"), None);
                self.answered(Some(url), &failed);
                (Some(view), None)
            }
            None => {
                self.answered(None, &failed);
                (None, last_failure)
            }
        }
    }
}

/// Asks `/cluster` of the `candidates` ([`Discovery::candidates`]), hedged: the next
/// candidate is asked when the ones in flight have not answered within a [`HEDGE_SPLIT`]th
/// of the timeout, or at once when one failed; the first good answer wins and the others
/// are dropped. So hung candidates cost a stagger each rather than a timeout each. It only
/// borrows, so that it runs alongside the first Raft queries; what it learned is recorded
/// by [`Discovery::settle`].
pub(super) async fn ask_cluster(requests: &Requests<'_>, candidates: Vec<Url>) -> ClusterAnswer {
    let stagger = requests.config.poll.timeout / HEDGE_SPLIT;
    let mut waiting = candidates.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let mut next_start = Instant::now();
    let mut attempts = Vec::new();
    loop {
        let more = waiting.len() > 0;
        tokio::select! {
            Some((url, answer)) = in_flight.next() => match answer {
                Ok(view) => {
                    return ClusterAnswer {
                        attempts,
                        answered: Some((url, view)),
                    }
                }
                Err(error) => {
                    attempts.push((url, Failure::from(&error)));
                    next_start = Instant::now();
                }
            },
            () = tokio::time::sleep_until(next_start), if more => {
                if let Some(url) = waiting.next() {
                    in_flight.push(async move {
                        let answer = requests.candidate_cluster(&url).await;
                        (url, answer)
                    });
                }
                next_start = Instant::now() + stagger;
            },
            else => break,
        }
    }
    ClusterAnswer {
        attempts,
        answered: None,
    }
}

/// Learns the voters the answering nodes name: they are queried from now on, and their
/// hosts join the `policy` (trusted when the statuses were decrypted with the password of
/// `raft`). Kept when no node answered, so that a cluster that comes back is found through
/// them.
pub(super) fn learn_raft(
    voters: &mut VoterMemory,
    policy: &mut ApiUrlPolicy,
    raft: Option<&RaftSettings>,
    raft_nodes: &[RaftNodeSnapshot],
) {
    let Some(named) = voters.learn_named(raft_nodes) else {
        return;
    };
    let authenticated = raft.is_some_and(RaftSettings::authenticated);
    policy.learn_raft_hosts(named, authenticated);
}

/// Where a poll looks for Raft nodes, and for voters that no member listed: read from the
/// configuration, the hosts the policy trusts and the voters remembered.
pub(super) struct Targets<'a> {
    pub(super) config: &'a ClusterConfig,
    pub(super) policy: &'a ApiUrlPolicy,
    pub(super) voters: &'a VoterMemory,
}

impl Targets<'_> {
    /// The Raft nodes known before this poll's answers: the configured ones (then only
    /// those: the operator's list is the word); else the hosts of the configured REST URLs
    /// and the member hosts of the last `/cluster` on the Raft port, plus every voter the
    /// answers of the last poll named (which finds voters whose REST API is down);
    /// `listed_hosts` are the member hosts of the last `/cluster`.
    pub(super) fn raft_targets_known(&self, listed_hosts: &[String]) -> Vec<String> {
        let Some(settings) = self.config.identity.dcs.raft() else {
            return Vec::new();
        };
        if !settings.nodes.is_empty() {
            return settings.nodes.iter().take(MAX_MEMBERS).cloned().collect();
        }
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        let configured = self
            .config
            .identity
            .patroni_urls
            .iter()
            .filter_map(Url::host_str);
        nodes.extend(configured.map(|host| join_host_port(host, settings.port)));
        nodes.extend(self.member_raft_nodes(listed_hosts));
        nodes.extend(self.voters.named().cloned());
        // Bounded: a hostile reply must not fan out into thousands of connections.
        nodes.into_iter().take(MAX_MEMBERS).collect()
    }
    /// The Raft nodes this poll's answers named: the voters named by every status, and the
    /// member hosts of this poll's `/cluster`; none when Raft nodes are configured.
    pub(super) fn raft_targets_named(&self, cluster: Option<&ClusterView>) -> Vec<String> {
        let Some(settings) = self.config.identity.dcs.raft() else {
            return Vec::new();
        };
        if !settings.nodes.is_empty() {
            return Vec::new();
        }
        let mut nodes: BTreeSet<String> = self.voters.named().cloned().collect();
        if let Some(view) = cluster {
            let hosts: Vec<String> = view.members.iter().filter_map(|m| m.host.clone()).collect();
            nodes.extend(self.member_raft_nodes(&hosts));
        }
        nodes.into_iter().take(MAX_MEMBERS).collect()
    }
    /// The Raft nodes of [`raft_targets_named`](Self::raft_targets_named) that round one did
    /// not ask (`asked`), within [`MAX_MEMBERS`] in all.
    pub(super) fn raft_targets_new(
        &self,
        cluster: Option<&ClusterView>,
        asked: &[String],
    ) -> Vec<String> {
        self.raft_targets_named(cluster)
            .into_iter()
            .filter(|node| !asked.contains(node))
            .take(MAX_MEMBERS.saturating_sub(asked.len()))
            .collect()
    }
    /// Member hosts (from a `/cluster` document) on the Raft port, only those that a
    /// trusted source named as well ([`ApiUrlPolicy::allows_raft_query`]): `/cluster` alone
    /// must not direct connections, and with a Raft password the query is encrypted with a
    /// key derived from it, material for an offline guess in a stranger's hands.
    fn member_raft_nodes(&self, hosts: &[String]) -> Vec<String> {
        let Some(settings) = self.config.identity.dcs.raft() else {
            return Vec::new();
        };
        let with_password = settings.authenticated();
        hosts
            .iter()
            .filter(|host| {
                let Ok(host) = Host::parse(host) else {
                    return false;
                };
                if with_password {
                    self.policy.allows_host(&host)
                } else {
                    self.policy.allows_raft_query(&host)
                }
            })
            .map(|host| join_host_port(host, settings.port))
            .collect()
    }
    /// The voters whose host no member in `known` (listed or remembered) has, as members to
    /// ask at the scheme and port of the URL that answered `/cluster` (`preferred`); named
    /// `voter <host>` until their own `/patroni` names them.
    ///
    /// Why: a member whose HA loop stalls leaves `/cluster` (nothing renews its key) while
    /// its Raft node still votes and its REST API still answers; an exporter that starts
    /// then, or `status`, which polls once, finds it only this way. Only voters from an
    /// authenticated Raft status are asked (their hosts are then trusted: [`ApiUrlPolicy`]);
    /// one whose REST API did not answer rests for the cluster's `ttl` ([`VoterMemory`]).
    pub(super) fn unlisted_voters(
        &self,
        known: &[&patroni::Member],
        preferred: Option<&Url>,
        ttl: Duration,
    ) -> Vec<patroni::Member> {
        let raft = self.config.identity.dcs.raft();
        let authenticated = raft.is_some_and(RaftSettings::authenticated);
        let Some(base) = preferred.filter(|_| authenticated) else {
            return Vec::new();
        };
        let known_hosts: BTreeSet<Host> = known
            .iter()
            .flat_map(|member| snapshot::member_hosts(member))
            .collect();
        let voter_hosts = self.voters.unlisted_hosts(&known_hosts, ttl);
        voter_hosts
            .into_iter()
            .take(MAX_MEMBERS.saturating_sub(known.len()))
            .filter_map(|host| {
                let mut url = base.clone();
                match &host {
                    Host::Name(name) => url.set_host(Some(name)).ok()?,
                    Host::Ip(ip) => url.set_ip_host(*ip).ok()?,
                    // A URL cannot say which interface (the url crate takes no zone id).
                    Host::Scoped { .. } => return None,
                }
                let api_url = url.join("patroni").ok()?;
                self.policy.allows_url(&api_url).then(|| patroni::Member {
                    name: format!("voter {host}"),
                    api_url: Some(api_url.into()),
                    host: Some(host.to_string()),
                    ..patroni::Member::default()
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(host: &str) -> Url {
        Url::parse(&format!("http://{host}:8008/")).unwrap()
    }

    #[test]
    fn the_first_choice_moves_only_when_it_failed() {
        let (one, two, three) = (url("127.0.0.11"), url("127.0.0.12"), url("127.0.0.13"));
        let configured = [two.clone(), one.clone(), three.clone()];
        let mut discovery = Discovery::default();
        discovery.answered(Some(two.clone()), &[]);
        assert_eq!(discovery.candidates(&configured)[0], two);
        // the first choice was slower than a hedged candidate: read from the other, ask it
        // first again
        discovery.answered(Some(three.clone()), &[]);
        assert_eq!(discovery.read_from(), Some(&three));
        assert_eq!(
            discovery.candidates(&configured),
            [two.clone(), one.clone(), three.clone()]
        );
        // the first choice failed: the one that answered is asked first
        discovery.answered(Some(three.clone()), &[&two]);
        assert_eq!(discovery.candidates(&configured)[0], three);
        // none answered: the configured order again
        discovery.answered(None, &[&three, &two, &one]);
        assert_eq!(discovery.read_from(), None);
        assert_eq!(discovery.candidates(&configured), configured);
    }

    /// The bases learned follow the members' allowed `api_url`s, in their order, and are
    /// built again only when those changed.
    #[test]
    fn the_learned_bases_follow_the_listed_api_urls() {
        let mut config = ClusterConfig::default();
        config.identity.allow_api_url_hosts = vec!["127.0.0.0/24".into()];
        let policy = ApiUrlPolicy::for_cluster(&config).unwrap();
        let view = |urls: &[&str]| ClusterView {
            scope: Some("pg".into()),
            members: urls
                .iter()
                .enumerate()
                .map(|(i, &u)| patroni::Member {
                    name: format!("m{i}"),
                    api_url: Some(u.into()),
                    ..patroni::Member::default()
                })
                .collect(),
            pause: false,
            scheduled_switchover: None,
        };
        let learned = |d: &Discovery| {
            d.learned_urls
                .iter()
                .map(Url::to_string)
                .collect::<Vec<_>>()
        };
        let mut discovery = Discovery::default();
        let first = view(&[
            "http://127.0.0.11:8008/patroni",
            "http://10.1.1.1:8008/patroni",
            "http://127.0.0.12:8008/patroni",
        ]);
        discovery.remember(&first, &policy);
        assert_eq!(
            learned(&discovery),
            ["http://127.0.0.11:8008/", "http://127.0.0.12:8008/"]
        );
        assert_eq!(discovery.scope.as_deref(), Some("pg"));
        let kept = discovery.learned_urls.as_ptr();
        discovery.remember(&first, &policy);
        assert_eq!(
            discovery.learned_urls.as_ptr(),
            kept,
            "the same bases: not built again"
        );
        // a member moved to another port, one left
        discovery.remember(&view(&["http://127.0.0.11:8009/patroni"]), &policy);
        assert_eq!(learned(&discovery), ["http://127.0.0.11:8009/"]);
        discovery.remember(&view(&[]), &policy);
        assert!(learned(&discovery).is_empty());
    }

    #[test]
    fn host_port() {
        assert_eq!(join_host_port("127.0.0.11", 2222), "127.0.0.11:2222");
        assert_eq!(join_host_port("::1", 2222), "[::1]:2222");
    }
}
