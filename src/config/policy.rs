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
///   `--config.file`, or Patroni's `raft.self_addr`/`partner_addrs`), an entry of
///   `--patroni.allow-api-url-hosts` (a host name, an IP, a CIDR such as `10.0.0.0/24`, or
///   `*` for any host);
/// * hosts of the Raft voters named in a status that was decrypted with the cluster's Raft
///   password ([`ApiUrlPolicy::learn_raft_hosts`] with `authenticated`): only a holder of
///   the password can produce it, so it is as trustworthy as the operator's configuration;
/// * hosts of voters named in a plain-text status (a Raft without password), but only while
///   the REST client carries no credentials (no basic auth, no client certificate): such a
///   document can come from anyone on the path, so it may direct a credential-free GET, never
///   a credential ([`ApiUrlPolicy::allows_url`]).
///
/// The member `host` fields of `/cluster` are never trusted by themselves: they come from the
/// same document. When any configured URL is https, http `api_url`s are refused (no
/// downgrade). The reasoning is in docs/security.md.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiUrlPolicy {
    any_host: bool,
    hosts: BTreeSet<Host>,
    networks: Vec<Network>,
    https_only: bool,
    /// Whether the REST client sends credentials (basic auth or a client certificate).
    sends_credentials: bool,
    /// Hosts of voters named in statuses decrypted with the Raft password.
    raft_hosts_authenticated: BTreeSet<Host>,
    /// Hosts of voters named in plain-text statuses.
    raft_hosts_plain: BTreeSet<Host>,
}

impl ApiUrlPolicy {
    /// The policy of a cluster: its configured hosts plus its allow list.
    ///
    /// # Errors
    /// When an allow-list entry is not a host, an IP, a CIDR or `*`.
    pub fn for_cluster(config: &ClusterConfig) -> anyhow::Result<ApiUrlPolicy> {
        let mut policy = ApiUrlPolicy::default();
        for url in &config.identity.patroni_urls {
            policy.hosts.extend(Host::of_url(url));
            if url.scheme() == "https" {
                policy.https_only = true;
            }
        }
        if let Some(raft) = &config.identity.raft {
            // A node that names no host is refused by its query, not here.
            let hosts = raft
                .nodes
                .iter()
                .filter_map(|node| Host::of_node(node).ok());
            policy.hosts.extend(hosts);
        }
        for entry in &config.identity.allow_api_url_hosts {
            policy.add_entry(entry)?;
        }
        policy.sends_credentials =
            config.rest.basic_auth.is_some() || config.rest.cert_file.is_some();
        Ok(policy)
    }

    /// Replaces the hosts learned from Raft statuses with the hosts of `nodes` (`host:port`),
    /// as named by the statuses of one poll; `authenticated` when the statuses were
    /// decrypted with the cluster's Raft password.
    pub fn learn_raft_hosts<'a>(
        &mut self,
        nodes: impl IntoIterator<Item = &'a str>,
        authenticated: bool,
    ) {
        let hosts: BTreeSet<Host> = nodes
            .into_iter()
            .filter_map(|node| Host::of_node(node).ok())
            .collect();
        if authenticated {
            self.raft_hosts_authenticated = hosts;
            self.raft_hosts_plain.clear();
        } else {
            self.raft_hosts_plain = hosts;
            self.raft_hosts_authenticated.clear();
        }
    }

    /// Whether `host` may receive a Raft `status` query: the operator named it or a Raft
    /// status did (with or without password). A host that only `/cluster` names is not
    /// asked: that document would otherwise direct connections to any host on the Raft port.
    pub fn allows_raft_query(&self, host: &Host) -> bool {
        self.allows_host(host) || self.raft_hosts_plain.contains(host)
    }

    /// Adds one allow-list entry: `*`, a CIDR, an IP or a host name.
    ///
    /// # Errors
    /// When a CIDR is malformed or the entry is empty or contains a scheme, path or port.
    pub fn add_entry(&mut self, entry: &str) -> anyhow::Result<()> {
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

    /// Whether a host may be sent credentials: the operator named it, or an authenticated
    /// Raft status did.
    pub fn allows_host(&self, host: &Host) -> bool {
        self.any_host
            || self.hosts.contains(host)
            || self.raft_hosts_authenticated.contains(host)
            || match host {
                Host::Ip(address) => self
                    .networks
                    .iter()
                    .any(|network| network.contains(*address)),
                _ => false,
            }
    }

    /// Whether an `api_url` may be followed: http(s), no credentials in it, https when the
    /// configured URLs are, and a host that [`allows_host`](Self::allows_host), or one that a
    /// plain-text Raft status named when the client sends no credentials.
    pub fn allows_url(&self, url: &Url) -> bool {
        let scheme_ok = match url.scheme() {
            "https" => true,
            "http" => !self.https_only,
            _ => false,
        };
        scheme_ok
            && url.username().is_empty()
            && url.password().is_none()
            && Host::of_url(url).is_some_and(|host| {
                self.allows_host(&host)
                    || (!self.sends_credentials && self.raft_hosts_plain.contains(&host))
            })
    }
}
