//! Which hosts the exporter contacts, and with what (the reasoning is in docs/security.md).

use std::collections::BTreeSet;

use url::Url;

use super::ClusterConfig;
use crate::address::{Host, Network};

/// Which hosts the exporter contacts, and with what.
///
/// `/cluster` is a document a member sends; if the exporter followed every `api_url` in it,
/// a compromised or confused member could make it send GETs (with the client certificate and
/// any basic auth) to any host it can reach. So an `api_url` is followed only to hosts the
/// exporter has reason to trust:
///
/// * hosts the operator named: a configured REST URL, a configured Raft node (flags,
///   `--config.file`, or Patroni's `raft.self_addr`/`partner_addrs`), a configured etcd
///   endpoint, an entry of
///   `--patroni.allow-api-url-hosts` (a host name, an IP, a CIDR such as `10.0.0.0/24`, or
///   `*` for any host);
/// * hosts the DCS vouched for over an authenticated channel ([`LearnedHosts::learn`] with
///   `authenticated`): the Raft voters named in a status decrypted with the cluster's Raft
///   password (only a holder of the password can produce it), or the `api_url`s of the member
///   keys read from etcd over TLS or with etcd credentials; as trustworthy as the operator's
///   configuration;
/// * hosts of voters named in a plain-text status (a Raft without password), but only while
///   the REST client carries no credentials (no basic auth, no client certificate): such a
///   document can come from anyone on the path, so it may direct a credential-free GET, never
///   a credential ([`ApiUrlPolicy::allows_url`]).
///
/// The member `host` fields of `/cluster` are never trusted by themselves: they come from the
/// same document. When any configured URL is https, http `api_url`s are refused (no
/// downgrade). The reasoning is in docs/security.md.
///
/// Two owners, because they change for different reasons: what the settings configure
/// ([`ConfiguredHosts`], rebuilt from the settings on every reload, so that credentials added
/// or removed by a reload are judged by the new settings at once) and what the poller learned
/// from the DCS ([`LearnedHosts`], carried over a reload of the same cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiUrlPolicy {
    configured: ConfiguredHosts,
    /// What the DCS named, carried over a reload of the same cluster.
    pub learned: LearnedHosts,
}

/// What the settings of a cluster allow: rebuilt from them on every reload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ConfiguredHosts {
    any_host: bool,
    hosts: BTreeSet<Host>,
    networks: Vec<Network>,
    https_only: bool,
    /// Whether the REST client sends credentials (basic auth or a client certificate).
    sends_credentials: bool,
}

/// The hosts a cluster's DCS named in the last poll that read it: what the poller learned,
/// not what the operator configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnedHosts {
    /// Named over an authenticated channel (a Raft status decrypted with the password; etcd
    /// read over TLS or with credentials).
    authenticated: BTreeSet<Host>,
    /// Named in plain-text Raft statuses.
    plain: BTreeSet<Host>,
    /// Hosts the DCS named before and no longer does, kept while `/cluster` still lists a
    /// member on them, or the poller still asks a member there that left it
    /// ([`LearnedHosts::keep_listed`]): a voter removed from Raft (as Charmed PostgreSQL does
    /// on a scale-down) leaves its member's key in `/cluster` until it expires, and then is
    /// remembered as departed for a `ttl`; that member is still asked, as it was, rather than
    /// refused. For `api_url`s only
    /// (never a Raft query), with the trust they had: authenticated, or plain.
    retired_authenticated: BTreeSet<Host>,
    retired_plain: BTreeSet<Host>,
}

impl LearnedHosts {
    /// Replaces the hosts learned with `hosts`, as named by the DCS in one poll;
    /// `authenticated` when the channel that named them was.
    pub fn learn(&mut self, hosts: impl IntoIterator<Item = Host>, authenticated: bool) {
        let hosts: BTreeSet<Host> = hosts.into_iter().collect();
        let (named, retired, other, other_retired) = if authenticated {
            (
                &mut self.authenticated,
                &mut self.retired_authenticated,
                &mut self.plain,
                &mut self.retired_plain,
            )
        } else {
            (
                &mut self.plain,
                &mut self.retired_plain,
                &mut self.authenticated,
                &mut self.retired_authenticated,
            )
        };
        retired.extend(named.difference(&hosts).cloned());
        retired.retain(|host| !hosts.contains(host));
        *named = hosts;
        other.clear();
        other_retired.clear();
    }

    /// Forgets the retired hosts on which no member is listed any more (`listed`: the hosts of
    /// `/cluster`'s members and of the departed members still asked: their `host` and their
    /// `api_url`'s host).
    /// `listed` is called only when a host is retired (seldom: a voter removed).
    pub fn keep_listed(&mut self, listed: impl FnOnce() -> BTreeSet<Host>) {
        if self.retired_authenticated.is_empty() && self.retired_plain.is_empty() {
            return;
        }
        let listed = listed();
        self.retired_authenticated
            .retain(|host| listed.contains(host));
        self.retired_plain.retain(|host| listed.contains(host));
    }
}

impl ApiUrlPolicy {
    /// The policy of a cluster: its configured hosts plus its allow list.
    ///
    /// # Errors
    /// When an allow-list entry is not a host, an IP, a CIDR or `*`.
    pub fn for_cluster(config: &ClusterConfig) -> anyhow::Result<ApiUrlPolicy> {
        let mut policy = ConfiguredHosts::default();
        for url in &config.identity.patroni_urls {
            policy.hosts.extend(Host::of_url(url));
            if url.scheme() == "https" {
                policy.https_only = true;
            }
        }
        if let Some(raft) = config.identity.dcs.raft() {
            // A node that names no host is refused by its query, not here.
            let hosts = raft
                .nodes
                .iter()
                .filter_map(|node| Host::of_node(node).ok());
            policy.hosts.extend(hosts);
        }
        if let Some(etcd) = config.identity.dcs.etcd() {
            policy
                .hosts
                .extend(etcd.endpoints.iter().filter_map(Host::of_url));
        }
        for entry in &config.identity.allow_api_url_hosts {
            policy.add_entry(entry)?;
        }
        policy.sends_credentials =
            config.rest.basic_auth.is_some() || config.rest.cert_file.is_some();
        Ok(ApiUrlPolicy {
            configured: policy,
            learned: LearnedHosts::default(),
        })
    }

    /// The policy of a reload of the same cluster: what `config` allows, and the hosts the
    /// DCS named to this one (`learned`), judged by `config`'s credentials from now on.
    ///
    /// # Errors
    /// As [`ApiUrlPolicy::for_cluster`].
    pub fn reconfigured(
        config: &ClusterConfig,
        learned: LearnedHosts,
    ) -> anyhow::Result<ApiUrlPolicy> {
        Ok(ApiUrlPolicy {
            learned,
            ..ApiUrlPolicy::for_cluster(config)?
        })
    }

    /// Replaces the hosts learned from Raft statuses with the hosts of `nodes` (`host:port`),
    /// as named by the statuses of one poll; `authenticated` when the statuses were
    /// decrypted with the cluster's Raft password.
    pub fn learn_raft_hosts<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = &'a str>,
        authenticated: bool,
    ) {
        let hosts = nodes
            .into_iter()
            .filter_map(|node| Host::of_node(node).ok());
        self.learned.learn(hosts, authenticated);
    }

    /// Whether `host` may receive a Raft `status` query: the operator named it or a Raft
    /// status did (with or without password). A host that only `/cluster` names is not
    /// asked: that document would otherwise direct connections to any host on the Raft port.
    pub fn allows_raft_query(&self, host: &Host) -> bool {
        self.allows_host(host) || self.learned.plain.contains(host)
    }

    /// Adds one allow-list entry: `*`, a CIDR, an IP or a host name.
    ///
    /// # Errors
    /// When a CIDR is malformed or the entry is empty or contains a scheme, path or port.
    pub fn add_entry(&mut self, entry: &str) -> anyhow::Result<()> {
        self.configured.add_entry(entry)
    }

    /// Whether a host may be sent credentials: the operator named it, or the DCS did over an
    /// authenticated channel.
    pub fn allows_host(&self, host: &Host) -> bool {
        self.configured.allows_host(host) || self.learned.authenticated.contains(host)
    }

    /// Whether an `api_url` may be followed: http(s), no credentials in it, https when the
    /// configured URLs are, and a host that [`allows_host`](Self::allows_host), or one that a
    /// plain-text Raft status named when the client sends no credentials.
    pub fn allows_url(&self, url: &Url) -> bool {
        let scheme_ok = match url.scheme() {
            "https" => true,
            "http" => !self.configured.https_only,
            _ => false,
        };
        scheme_ok
            && url.username().is_empty()
            && url.password().is_none()
            && Host::of_url(url).is_some_and(|host| {
                let plain = self.learned.plain.contains(&host)
                    || self.learned.retired_plain.contains(&host);
                self.allows_host(&host)
                    || self.learned.retired_authenticated.contains(&host)
                    || (!self.configured.sends_credentials && plain)
            })
    }
}

impl ConfiguredHosts {
    fn add_entry(&mut self, entry: &str) -> anyhow::Result<()> {
        let entry = entry.trim();
        if entry == "*" {
            self.any_host = true;
        } else if entry.contains('/') && !entry.contains("://") {
            let network = Network::parse(entry)
                .map_err(|_| anyhow::anyhow!("allow-api-url-hosts: invalid CIDR {entry:?}"))?;
            self.networks.push(network);
        } else {
            let host = Host::parse(entry).map_err(|_| {
                anyhow::anyhow!("allow-api-url-hosts: {entry:?} is not a host, an IP, a CIDR or *")
            })?;
            self.hosts.insert(host);
        }
        Ok(())
    }

    /// Whether the operator named `host` (or a network or `*` covering it).
    fn allows_host(&self, host: &Host) -> bool {
        self.any_host
            || self.hosts.contains(host)
            || match host {
                Host::Ip(address) => self
                    .networks
                    .iter()
                    .any(|network| network.contains(*address)),
                _ => false,
            }
    }
}
