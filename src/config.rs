//! What to watch and how: the resolved per-cluster settings, from flags, from a YAML file of
//! many clusters (`--config.file`), and from Patroni's own YAML (`--patroni.config-file`).
//!
//! Why three inputs: one cluster is quickest to set up with flags; a fleet needs a file; and
//! on a Charmed PostgreSQL unit everything (REST URL, TLS, Raft partners and password) is
//! already in `/var/snap/charmed-postgresql/current/etc/patroni/patroni.yaml`, so reading it
//! avoids copying a secret. All three resolve to the same [`ClusterConfig`].

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::patroni::BasicAuth;
use crate::secret::Secret;

/// Default bound on the requests one cluster's poll has in flight at once.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

/// Everything the poller of one cluster needs. Built once at start (and on reload).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The expected cluster name: the `scope` label before the first answer, and checked
    /// against what `/cluster` reports.
    pub expected_scope: Option<String>,
    /// REST base URLs of members, asked for `/cluster` in order.
    pub patroni_urls: Vec<Url>,
    pub poll_interval: Duration,
    /// Deadline of each request (REST or Raft).
    pub poll_timeout: Duration,
    pub max_body_bytes: usize,
    pub ca_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
    /// Client certificate and key for members with `verify_client: required`.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Passphrase of an encrypted key file.
    pub key_password: Option<Secret>,
    /// Basic auth for every GET, for sites that protect reads (Patroni itself does not).
    pub basic_auth: Option<BasicAuth>,
    /// Hosts (names, IPs, CIDRs, or `*`) whose `api_url`s may be followed besides the
    /// configured ones; see [`ApiUrlPolicy`].
    pub allow_api_url_hosts: Vec<String>,
    /// Requests of one poll in flight at once (REST and Raft together).
    pub max_concurrency: usize,
    /// `None` when Raft is not polled for this cluster.
    pub raft: Option<RaftSettings>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            expected_scope: None,
            patroni_urls: Vec::new(),
            poll_interval: Duration::from_secs(5),
            poll_timeout: Duration::from_secs(2),
            max_body_bytes: 4 * 1024 * 1024,
            ca_file: None,
            insecure_skip_verify: false,
            cert_file: None,
            key_file: None,
            key_password: None,
            basic_auth: None,
            allow_api_url_hosts: Vec::new(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            raft: None,
        }
    }
}

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
        policy.sends_credentials = config.basic_auth.is_some() || config.cert_file.is_some();
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
fn normalize_host(host: &str) -> String {
    let host = host.trim_matches(['[', ']']);
    match host.parse::<IpAddr>() {
        Ok(address) => address.to_string(),
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// The host of `host:port` (`[v6]:port` too).
pub fn host_of(node: &str) -> &str {
    match node.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) && !host.is_empty() => {
            host.trim_matches(['[', ']'])
        }
        _ => node,
    }
}

/// How the Raft nodes of a cluster are found and queried.
#[derive(Debug, Clone)]
pub struct RaftSettings {
    /// Nodes always queried (`host:port`). When empty, nodes come from the member hosts.
    pub nodes: Vec<String>,
    /// Port of the Raft nodes found through member hosts.
    pub port: u16,
    pub password: Option<Secret>,
    /// Run this program instead of the native client (`--raft.command`).
    pub command: Option<Vec<String>>,
}

/// The defaults a cluster entry of the config file inherits (from the command line).
#[derive(Debug, Clone)]
pub struct Defaults {
    pub poll_interval: Duration,
    pub poll_timeout: Duration,
    pub max_body_bytes: usize,
    pub raft_port: u16,
    pub raft_enabled: bool,
    pub max_concurrency: usize,
}

/// One cluster as written in `--config.file` or assembled from flags. Every field is
/// optional; what is missing comes from [`Defaults`] or the Patroni YAML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterEntry {
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub patroni_urls: Vec<Url>,
    #[serde(default)]
    pub patroni_config_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde_option")]
    pub poll_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde_option")]
    pub poll_timeout: Option<Duration>,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub insecure_skip_verify: Option<bool>,
    #[serde(default)]
    pub raft_enabled: Option<bool>,
    #[serde(default)]
    pub raft_nodes: Vec<String>,
    #[serde(default)]
    pub raft_port: Option<u16>,
    #[serde(default)]
    pub raft_password_file: Option<PathBuf>,
    #[serde(default)]
    pub raft_command: Option<String>,
    /// PEM client certificate and key (for `verify_client: required`).
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// File holding the passphrase of an encrypted key file.
    #[serde(default)]
    pub key_password_file: Option<PathBuf>,
    /// Basic auth user for GETs; the password is read from `password_file`.
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Extra hosts whose `api_url`s may be followed (names, IPs, CIDRs, `*`).
    #[serde(default)]
    pub allow_api_url_hosts: Vec<String>,
    /// Requests of one poll in flight at once.
    #[serde(default)]
    pub max_concurrency: Option<usize>,
}

/// The `--config.file` document.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub clusters: Vec<ClusterEntry>,
}

impl ConfigFile {
    /// Reads and parses `--config.file`.
    ///
    /// # Errors
    /// When the file cannot be read or is not the documented YAML.
    pub fn load(path: &Path) -> anyhow::Result<ConfigFile> {
        let text = crate::tls::read_pem_file(path, "config file")?;
        let file: ConfigFile = serde_yaml_ng::from_slice(&text).map_err(|error| {
            anyhow::anyhow!(
                "parsing config file {}: {}",
                path.display(),
                describe_yaml_error(&error)
            )
        })?;
        if file.clusters.is_empty() {
            anyhow::bail!("config file {} lists no clusters", path.display());
        }
        Ok(file)
    }
}

/// The parts of Patroni's own YAML the exporter uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatroniYaml {
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub restapi: Option<PatroniRestApi>,
    #[serde(default)]
    pub ctl: Option<PatroniCtl>,
    #[serde(default)]
    pub raft: Option<PatroniRaft>,
}

/// Patroni's `ctl` section: how patronictl (a client, like the exporter) talks to the API.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatroniCtl {
    #[serde(default)]
    pub insecure: Option<bool>,
    #[serde(default)]
    pub cacert: Option<PathBuf>,
    #[serde(default)]
    pub certfile: Option<PathBuf>,
    #[serde(default)]
    pub keyfile: Option<PathBuf>,
    #[serde(default)]
    pub keyfile_password: Option<Secret>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatroniRestApi {
    #[serde(default)]
    pub connect_address: Option<String>,
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default)]
    pub certfile: Option<PathBuf>,
    #[serde(default)]
    pub keyfile: Option<PathBuf>,
    #[serde(default)]
    pub keyfile_password: Option<Secret>,
    #[serde(default)]
    pub cafile: Option<PathBuf>,
    /// `none`, `optional` or `required`: whether members ask for a client certificate.
    #[serde(default)]
    pub verify_client: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatroniRaft {
    #[serde(default)]
    pub self_addr: Option<String>,
    #[serde(default)]
    pub partner_addrs: Vec<String>,
    #[serde(default)]
    pub password: Option<Secret>,
}

impl PatroniYaml {
    /// Reads a Patroni configuration file.
    ///
    /// # Errors
    /// When the file cannot be read or parsed. Errors never quote the file's content.
    pub fn load(path: &Path) -> anyhow::Result<PatroniYaml> {
        let text = crate::tls::read_pem_file(path, "Patroni config")?;
        serde_yaml_ng::from_slice(&text).map_err(|error| {
            anyhow::anyhow!(
                "parsing Patroni config {}: {}",
                path.display(),
                describe_yaml_error(&error)
            )
        })
    }

    /// The REST URL of this member: `connect_address` (else `listen`), https when a
    /// certificate is configured.
    pub fn rest_url(&self) -> Option<Url> {
        let restapi = self.restapi.as_ref()?;
        let address = restapi
            .connect_address
            .as_deref()
            .or(restapi.listen.as_deref())?;
        let scheme = if restapi.certfile.is_some() {
            "https"
        } else {
            "http"
        };
        Url::parse(&format!("{scheme}://{address}")).ok()
    }

    /// The client certificate, key and key passphrase to present, as Patroni's own clients
    /// (patronictl, member-to-member requests) choose them: the `ctl` section, else the
    /// REST server's own certificate. The latter only when the members ask for a client
    /// certificate (`verify_client`), so an exporter that cannot read the server key is not
    /// broken on sites that do not need it.
    pub fn client_identity(&self) -> Option<(PathBuf, PathBuf, Option<Secret>)> {
        if let Some(ctl) = &self.ctl {
            if let (Some(cert), Some(key)) = (&ctl.certfile, &ctl.keyfile) {
                return Some((cert.clone(), key.clone(), ctl.keyfile_password.clone()));
            }
        }
        let restapi = self.restapi.as_ref()?;
        let asks = matches!(
            restapi.verify_client.as_deref(),
            Some("required") | Some("optional")
        );
        match (asks, &restapi.certfile, &restapi.keyfile) {
            (true, Some(cert), Some(key)) => {
                Some((cert.clone(), key.clone(), restapi.keyfile_password.clone()))
            }
            _ => None,
        }
    }

    /// All Raft voters this member knows: itself and its partners.
    pub fn raft_nodes(&self) -> Vec<String> {
        let Some(raft) = &self.raft else {
            return Vec::new();
        };
        raft.self_addr
            .iter()
            .chain(raft.partner_addrs.iter())
            .cloned()
            .collect()
    }
}

impl ClusterEntry {
    /// Resolves the entry into a complete [`ClusterConfig`].
    ///
    /// Precedence: the entry's own fields, then the Patroni YAML it names, then defaults.
    ///
    /// # Errors
    /// When no REST URL is known, or a named file cannot be read.
    pub fn resolve(&self, defaults: &Defaults) -> anyhow::Result<ClusterConfig> {
        let patroni_yaml = match &self.patroni_config_file {
            Some(path) => Some(PatroniYaml::load(path)?),
            None => None,
        };
        let mut patroni_urls = self.patroni_urls.clone();
        if patroni_urls.is_empty() {
            if let Some(url) = patroni_yaml.as_ref().and_then(PatroniYaml::rest_url) {
                patroni_urls.push(url);
            }
        }
        if patroni_urls.is_empty() {
            anyhow::bail!(
                "cluster {}: no Patroni REST URL (give --patroni.url, patroni_urls, or a Patroni config file)",
                self.scope.as_deref().unwrap_or("<unnamed>")
            );
        }
        let expected_scope = self
            .scope
            .clone()
            .or_else(|| patroni_yaml.as_ref().and_then(|yaml| yaml.scope.clone()));
        let ctl = patroni_yaml.as_ref().and_then(|yaml| yaml.ctl.as_ref());
        let ca_file = self
            .ca_file
            .clone()
            .or_else(|| ctl.and_then(|ctl| ctl.cacert.clone()))
            .or_else(|| {
                patroni_yaml
                    .as_ref()
                    .and_then(|yaml| yaml.restapi.as_ref())
                    .and_then(|restapi| restapi.cafile.clone())
            });
        let insecure_skip_verify = self
            .insecure_skip_verify
            .or_else(|| ctl.and_then(|ctl| ctl.insecure))
            .unwrap_or(false);
        let (cert_file, key_file, key_password) = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                let password = match &self.key_password_file {
                    Some(path) => Some(Secret::from_file(path)?),
                    None => None,
                };
                (Some(cert.clone()), Some(key.clone()), password)
            }
            (None, None) => match patroni_yaml.as_ref().and_then(PatroniYaml::client_identity) {
                Some((cert, key, password)) => (Some(cert), Some(key), password),
                None => (None, None, None),
            },
            _ => anyhow::bail!(
                "cluster {}: cert_file and key_file go together",
                self.scope.as_deref().unwrap_or("<unnamed>")
            ),
        };
        let basic_auth = match (&self.username, &self.password_file) {
            (Some(username), Some(path)) => Some(BasicAuth {
                username: username.clone(),
                password: Secret::from_file(path)?,
            }),
            (None, None) => None,
            _ => anyhow::bail!(
                "cluster {}: a REST username needs a password file and vice versa",
                self.scope.as_deref().unwrap_or("<unnamed>")
            ),
        };
        // Raft addresses from Patroni's YAML are configured hosts even when Raft is not polled.
        let mut allow_api_url_hosts = self.allow_api_url_hosts.clone();
        if let Some(yaml) = &patroni_yaml {
            allow_api_url_hosts.extend(
                yaml.raft_nodes()
                    .iter()
                    .map(|node| host_of(node).to_owned()),
            );
        }
        let mut check = ApiUrlPolicy::default();
        for entry in &allow_api_url_hosts {
            check.add_entry(entry)?;
        }
        let raft = if self.raft_enabled.unwrap_or(defaults.raft_enabled) {
            let password = match (&self.raft_password_file, &patroni_yaml) {
                (Some(path), _) => Some(Secret::from_file(path)?),
                (None, Some(yaml)) => yaml.raft.as_ref().and_then(|raft| raft.password.clone()),
                (None, None) => None,
            };
            let mut nodes = self.raft_nodes.clone();
            if nodes.is_empty() {
                nodes = patroni_yaml
                    .as_ref()
                    .map(PatroniYaml::raft_nodes)
                    .unwrap_or_default();
            }
            Some(RaftSettings {
                nodes,
                port: self.raft_port.unwrap_or(defaults.raft_port),
                password,
                command: self
                    .raft_command
                    .as_deref()
                    .map(|command| command.split_whitespace().map(str::to_owned).collect()),
            })
        } else {
            None
        };
        let name = expected_scope.as_deref().unwrap_or("<unnamed>");
        let poll_interval = self.poll_interval.unwrap_or(defaults.poll_interval);
        let poll_timeout = self.poll_timeout.unwrap_or(defaults.poll_timeout);
        let max_concurrency = self.max_concurrency.unwrap_or(defaults.max_concurrency);
        check_limits(
            name,
            poll_interval,
            poll_timeout,
            defaults.max_body_bytes,
            max_concurrency,
        )?;
        Ok(ClusterConfig {
            expected_scope,
            patroni_urls,
            poll_interval,
            poll_timeout,
            max_body_bytes: defaults.max_body_bytes,
            ca_file,
            insecure_skip_verify,
            cert_file,
            key_file,
            key_password,
            basic_auth,
            allow_api_url_hosts,
            max_concurrency,
            raft,
        })
    }
}

/// Refuses settings that cannot work, at start rather than as a poller that fails for ever:
/// a zero interval (a busy loop), a zero timeout (every request fails), a timeout longer
/// than the interval (a poll that asks a hanging member overruns every time: each request
/// may take the whole timeout), and zero limits.
///
/// # Errors
/// Naming the setting, its value and what would work.
fn check_limits(
    cluster: &str,
    poll_interval: Duration,
    poll_timeout: Duration,
    max_body_bytes: usize,
    max_concurrency: usize,
) -> anyhow::Result<()> {
    if poll_interval.is_zero() {
        anyhow::bail!("cluster {cluster}: poll interval must be longer than 0 (e.g. 5s)");
    }
    if poll_timeout.is_zero() {
        anyhow::bail!("cluster {cluster}: poll timeout must be longer than 0 (e.g. 2s)");
    }
    if poll_timeout > poll_interval {
        anyhow::bail!(
            "cluster {cluster}: poll timeout {} is longer than the poll interval {}: a hanging member would make every poll overrun; use a timeout of at most the interval",
            humantime::format_duration(poll_timeout),
            humantime::format_duration(poll_interval)
        );
    }
    if max_body_bytes == 0 {
        anyhow::bail!("cluster {cluster}: max body bytes must be at least 1 (default 4194304)");
    }
    if max_concurrency == 0 {
        anyhow::bail!("cluster {cluster}: max concurrency must be at least 1 (default {DEFAULT_MAX_CONCURRENCY})");
    }
    Ok(())
}

/// A YAML error without the file's content: the kind of mistake and its line and column.
///
/// serde_yaml's messages quote the offending value (`invalid type: string "root:x:0:0:..."`):
/// a file given by mistake (or a value holding a secret) would end up in the log. Only what
/// the exporter's own schema says is kept: the text after "expected", which names our keys
/// and types, never the user's.
fn describe_yaml_error(error: &serde_yaml_ng::Error) -> String {
    let message = error.to_string();
    let kind = if message.contains("unknown field") {
        "unknown key"
    } else if message.contains("missing field") {
        "missing key"
    } else if message.contains("invalid type") {
        "wrong type"
    } else if message.contains("invalid value") || message.contains("invalid length") {
        "invalid value"
    } else if message.contains("duplicate") {
        "duplicate key"
    } else if message.contains("duration") || message.contains("time unit") {
        "invalid duration (e.g. 5s, 1m30s)"
    } else {
        "invalid YAML"
    };
    let expected = message
        .split_once(", expected ")
        .map(|(_, expected)| {
            let expected = expected.split(" at line ").next().unwrap_or(expected);
            format!(", expected {expected}")
        })
        .unwrap_or_default();
    let position = error
        .location()
        .map(|l| format!(" at line {} column {}", l.line(), l.column()))
        .unwrap_or_default();
    // The path of the value (`clusters[0].poll_interval: ...`) is made of our key names.
    let path = message
        .split_once(": ")
        .map(|(path, _)| path)
        .filter(|path| {
            path.starts_with("clusters")
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c))
        })
        .map(|path| format!("{path}: "))
        .unwrap_or_default();
    format!("{path}{kind}{expected}{position}")
}

/// `humantime` durations (`5s`, `1m30s`) for optional YAML fields.
mod humantime_serde_option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(deserializer)?;
        text.map(|text| humantime::parse_duration(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults {
            poll_interval: Duration::from_secs(5),
            poll_timeout: Duration::from_secs(2),
            max_body_bytes: 1 << 22,
            raft_port: 2222,
            raft_enabled: true,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }

    #[test]
    fn config_file_with_two_clusters() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("raft-pw");
        std::fs::write(&password, "raft-pass\n").unwrap();
        let path = dir.path().join("exporter.yml");
        std::fs::write(
            &path,
            format!(
                "clusters:\n  - scope: a\n    patroni_urls: [http://127.0.0.11:8008]\n    poll_interval: 10s\n    raft_password_file: {}\n  - patroni_urls: [http://127.0.0.21:8008, http://127.0.0.22:8008]\n    raft_enabled: false\n",
                password.display()
            ),
        )
        .unwrap();
        let file = ConfigFile::load(&path).unwrap();
        let a = file.clusters[0].resolve(&defaults()).unwrap();
        assert_eq!(a.expected_scope.as_deref(), Some("a"));
        assert_eq!(a.poll_interval, Duration::from_secs(10));
        assert_eq!(a.poll_timeout, Duration::from_secs(2));
        assert_eq!(
            a.raft.as_ref().unwrap().password.as_ref().unwrap().expose(),
            "raft-pass"
        );
        let b = file.clusters[1].resolve(&defaults()).unwrap();
        assert_eq!(b.patroni_urls.len(), 2);
        assert!(b.raft.is_none());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exporter.yml");
        std::fs::write(&path, "clusters:\n  - patroni_url: http://x\n").unwrap();
        assert!(ConfigFile::load(&path).is_err());
    }

    #[test]
    fn charmed_postgresql_patroni_yaml() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("patroni.yaml");
        std::fs::write(
            &path,
            "scope: postgresql\nnamespace: /db/\nname: postgresql-0\nrestapi:\n  listen: '10.1.2.3:8008'\n  connect_address: '10.1.2.3:8008'\n  certfile: /var/snap/charmed-postgresql/current/etc/patroni/cert.pem\n  cafile: /var/snap/charmed-postgresql/current/etc/patroni/ca.pem\n  authentication:\n    username: patroni\n    password: rest-secret\nraft:\n  data_dir: /var/snap/charmed-postgresql/common/var/lib/postgresql/raft\n  self_addr: '10.1.2.3:2222'\n  partner_addrs:\n  - 10.1.2.4:2222\n  - 10.1.2.5:2222\n  password: raft-secret\nbootstrap:\n  dcs:\n    ttl: 30\n",
        )
        .unwrap();
        let entry = ClusterEntry {
            patroni_config_file: Some(path),
            ..ClusterEntry::default()
        };
        let config = entry.resolve(&defaults()).unwrap();
        assert_eq!(config.patroni_urls[0].as_str(), "https://10.1.2.3:8008/");
        assert_eq!(config.expected_scope.as_deref(), Some("postgresql"));
        let raft = config.raft.unwrap();
        assert_eq!(
            raft.nodes,
            ["10.1.2.3:2222", "10.1.2.4:2222", "10.1.2.5:2222"]
        );
        assert_eq!(raft.password.unwrap().expose(), "raft-secret");
        assert!(config.ca_file.is_some());
        // The password never shows in Debug output of the resolved settings.
        let debug = format!("{:?}", entry_debug_probe());
        assert!(!debug.contains("raft-secret"));
    }

    fn entry_debug_probe() -> RaftSettings {
        RaftSettings {
            nodes: vec![],
            port: 2222,
            password: Some(Secret::new("raft-secret")),
            command: None,
        }
    }

    #[test]
    fn patroni_yaml_client_certificate_only_when_members_ask_for_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("patroni.yaml");
        let base = "scope: pg\nrestapi:\n  connect_address: 10.1.2.3:8008\n  certfile: /etc/p/cert.pem\n  keyfile: /etc/p/key.pem\n  keyfile_password: key-secret\n  cafile: /etc/p/ca.pem\n";
        let entry = ClusterEntry {
            patroni_config_file: Some(path.clone()),
            raft_enabled: Some(false),
            ..ClusterEntry::default()
        };
        std::fs::write(&path, base).unwrap();
        let config = entry.resolve(&defaults()).unwrap();
        assert!(config.cert_file.is_none() && config.key_password.is_none());
        std::fs::write(&path, format!("{base}  verify_client: required\n")).unwrap();
        let config = entry.resolve(&defaults()).unwrap();
        assert_eq!(
            config.cert_file.as_deref(),
            Some(Path::new("/etc/p/cert.pem"))
        );
        assert_eq!(
            config.key_file.as_deref(),
            Some(Path::new("/etc/p/key.pem"))
        );
        assert_eq!(config.key_password.as_ref().unwrap().expose(), "key-secret");
        assert!(!format!("{config:?}").contains("key-secret"));
        // patronictl's own section wins, as in Patroni.
        std::fs::write(
            &path,
            format!("{base}  verify_client: required\nctl:\n  certfile: /etc/p/ctl.pem\n  keyfile: /etc/p/ctl.key\n  cacert: /etc/p/ctl-ca.pem\n  insecure: true\n"),
        )
        .unwrap();
        let config = entry.resolve(&defaults()).unwrap();
        assert_eq!(
            config.cert_file.as_deref(),
            Some(Path::new("/etc/p/ctl.pem"))
        );
        assert_eq!(
            config.ca_file.as_deref(),
            Some(Path::new("/etc/p/ctl-ca.pem"))
        );
        assert!(config.key_password.is_none());
        assert!(config.insecure_skip_verify);
    }

    #[test]
    fn api_url_policy() {
        let config = ClusterConfig {
            patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
            raft: Some(RaftSettings {
                nodes: vec!["10.0.0.2:2222".into(), "[fd00::3]:2222".into()],
                port: 2222,
                password: None,
                command: None,
            }),
            allow_api_url_hosts: vec!["192.168.0.0/16".into(), "Member-4.example".into()],
            ..ClusterConfig::default()
        };
        let policy = ApiUrlPolicy::for_cluster(&config).unwrap();
        for allowed in [
            "http://10.0.0.1:8008/patroni",
            "http://10.0.0.2:8008/patroni",
            "http://[fd00::3]:8008/patroni",
            "http://192.168.7.9:8008/patroni",
            "https://member-4.example:8008/patroni",
        ] {
            assert!(
                policy.allows_url(&Url::parse(allowed).unwrap()),
                "{allowed}"
            );
        }
        for refused in [
            "http://10.0.0.9:8008/patroni",
            "http://169.254.169.254/latest/meta-data",
            "http://user:pw@10.0.0.1:8008/patroni",
            "ftp://10.0.0.1/patroni",
            "http://member-5.example:8008/patroni",
        ] {
            assert!(
                !policy.allows_url(&Url::parse(refused).unwrap()),
                "{refused}"
            );
        }
        let mut any = ApiUrlPolicy::default();
        any.add_entry("*").unwrap();
        assert!(any.allows_host("anything"));
        for bad in ["10.0.0.0/33", "http://x", "", "a/b"] {
            assert!(ApiUrlPolicy::default().add_entry(bad).is_err(), "{bad}");
        }
        assert_eq!(host_of("[::1]:2222"), "::1");
        assert_eq!(host_of("10.0.0.1:2222"), "10.0.0.1");
    }

    #[test]
    fn a_cluster_needs_a_url() {
        assert!(ClusterEntry::default().resolve(&defaults()).is_err());
    }

    #[test]
    fn parse_errors_name_the_line_never_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "root:x:0:0:root:/root:/bin/bash\nhunter2:x:1:1::/:/bin/sh\n",
                "wrong type",
            ),
            (
                "clusters:\n  - scope: a\n    hunter2_key: hunter2\n",
                "unknown key",
            ),
            (
                "clusters:\n  - scope: a\n    poll_interval: hunter2\n",
                "clusters[0]",
            ),
            ("clusters: [\"hunter2\"\n", "at line"),
        ];
        for (text, says) in cases {
            let path = dir.path().join("exporter.yml");
            std::fs::write(&path, text).unwrap();
            let error = format!("{:#}", ConfigFile::load(&path).unwrap_err());
            assert!(!error.contains("hunter2"), "{error}");
            assert!(!error.contains("root:x"), "{error}");
            assert!(error.contains("exporter.yml"), "{error}");
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        let entry = |interval: &str, timeout: &str, concurrency: usize| ClusterEntry {
            patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
            poll_interval: Some(humantime::parse_duration(interval).unwrap()),
            poll_timeout: Some(humantime::parse_duration(timeout).unwrap()),
            max_concurrency: Some(concurrency),
            ..ClusterEntry::default()
        };
        assert!(entry("5s", "2s", 8).resolve(&defaults()).is_ok());
        assert!(entry("5s", "5s", 1).resolve(&defaults()).is_ok());
        for (interval, timeout, concurrency, says) in [
            ("0s", "0s", 8, "interval must be longer than 0"),
            ("5s", "0s", 8, "timeout must be longer than 0"),
            ("1s", "5s", 8, "longer than the poll interval"),
            ("5s", "2s", 0, "concurrency must be at least 1"),
        ] {
            let error = entry(interval, timeout, concurrency)
                .resolve(&defaults())
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{error}");
        }
    }
}
