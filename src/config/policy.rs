//! Which hosts the exporter contacts, and with what (the reasoning is in docs/security.md).

use std::collections::BTreeSet;
use std::net::IpAddr;

use url::Url;

use super::ClusterConfig;

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
    names: BTreeSet<String>,
    addresses: BTreeSet<IpAddr>,
    networks: Vec<(IpAddr, u8)>,
    https_only: bool,
    /// Whether the REST client sends credentials (basic auth or a client certificate).
    sends_credentials: bool,
    /// Hosts of voters named in statuses decrypted with the Raft password.
    raft_hosts_authenticated: BTreeSet<String>,
    /// Hosts of voters named in plain-text statuses.
    raft_hosts_plain: BTreeSet<String>,
}

impl ApiUrlPolicy {
    /// The policy of a cluster: its configured hosts plus its allow list.
    ///
    /// # Errors
    /// When an allow-list entry is not a host, an IP, a CIDR or `*`.
    pub fn for_cluster(config: &ClusterConfig) -> anyhow::Result<ApiUrlPolicy> {
        let mut policy = ApiUrlPolicy::default();
        for url in &config.patroni_urls {
            if let Some(host) = url.host_str() {
                policy.add_host(host);
            }
            if url.scheme() == "https" {
                policy.https_only = true;
            }
        }
        if let Some(raft) = &config.raft {
            for node in &raft.nodes {
                policy.add_host(host_of(node));
            }
        }
        for entry in &config.allow_api_url_hosts {
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
        let hosts: BTreeSet<String> = nodes
            .into_iter()
            .map(|node| normalize_host(host_of(node)))
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
    pub fn allows_raft_query(&self, host: &str) -> bool {
        self.allows_host(host) || self.named_in_plain_text(host)
    }

    /// Whether `host` was named by a Raft status without password.
    fn named_in_plain_text(&self, host: &str) -> bool {
        self.raft_hosts_plain.contains(&normalize_host(host))
    }

    /// Adds one allow-list entry: `*`, a CIDR, an IP or a host name.
    ///
    /// # Errors
    /// When a CIDR is malformed or the entry is empty or contains a scheme, path or port.
    pub fn add_entry(&mut self, entry: &str) -> anyhow::Result<()> {
        let entry = entry.trim();
        if entry == "*" {
            self.any_host = true;
            return Ok(());
        }
        if let Some((address, prefix)) = entry.split_once('/') {
            let address: IpAddr = address
                .trim_matches(['[', ']'])
                .parse()
                .map_err(|_| anyhow::anyhow!("allow-api-url-hosts: invalid CIDR {entry:?}"))?;
            let max = if address.is_ipv4() { 32 } else { 128 };
            let prefix: u8 = prefix
                .parse()
                .ok()
                .filter(|prefix| *prefix <= max)
                .ok_or_else(|| anyhow::anyhow!("allow-api-url-hosts: invalid CIDR {entry:?}"))?;
            self.networks.push((address, prefix));
            return Ok(());
        }
        if entry.is_empty() || entry.contains(['/', '@', ' ']) || entry.contains("://") {
            anyhow::bail!("allow-api-url-hosts: {entry:?} is not a host, an IP, a CIDR or *");
        }
        self.add_host(entry);
        Ok(())
    }

    fn add_host(&mut self, host: &str) {
        let host = host.trim_matches(['[', ']']);
        match host.parse::<IpAddr>() {
            Ok(address) => {
                self.addresses.insert(address);
            }
            Err(_) => {
                self.names.insert(host.to_ascii_lowercase());
            }
        }
    }

    /// Whether a host (name or IP, IPv6 with or without brackets) may be sent credentials:
    /// the operator named it, or an authenticated Raft status did.
    pub fn allows_host(&self, host: &str) -> bool {
        if self.any_host
            || self
                .raft_hosts_authenticated
                .contains(&normalize_host(host))
        {
            return true;
        }
        let host = host.trim_matches(['[', ']']);
        match host.parse::<IpAddr>() {
            Ok(address) => {
                self.addresses.contains(&address)
                    || self
                        .networks
                        .iter()
                        .any(|(network, prefix)| in_network(address, *network, *prefix))
            }
            Err(_) => self.names.contains(&host.to_ascii_lowercase()),
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
            && url.host_str().is_some_and(|host| {
                self.allows_host(host)
                    || (!self.sends_credentials && self.named_in_plain_text(host))
            })
    }
}

fn in_network(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// A host as compared by the policy: no brackets, lower case, IPs in canonical form.
pub fn normalize_host(host: &str) -> String {
    let host = host.trim_matches(['[', ']']);
    match host.parse::<IpAddr>() {
        Ok(address) => address.to_string(),
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// The host of `host:port` (`[v6]:port` too); `node` itself when it has no port.
pub fn host_of(node: &str) -> &str {
    split_node(node).map_or(node, |(host, _)| host.trim_matches(['[', ']']))
}

/// The port of `host:port` (`[v6]:port` too); `None` when it has none.
pub fn port_of(node: &str) -> Option<u16> {
    split_node(node).and_then(|(_, port)| port.parse().ok())
}

/// `host:port` split at its last colon, when what follows is a number (a bare IPv6 address
/// has colons too, but its last group is hex, and Raft names nodes with their port).
fn split_node(node: &str) -> Option<(&str, &str)> {
    node.rsplit_once(':')
        .filter(|(host, port)| !host.is_empty() && port.chars().all(|c| c.is_ascii_digit()))
}
