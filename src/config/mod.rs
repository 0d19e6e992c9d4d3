//! What to watch and how: the resolved per-cluster settings, from flags, from a YAML file of
//! many clusters (`--config.file`), and from Patroni's own YAML (`--patroni.config-file`).
//!
//! Why three inputs: one cluster is quickest to set up with flags; a fleet needs a file; and
//! on a Charmed PostgreSQL unit everything (REST URL, TLS, Raft partners and password) is
//! already in `/var/snap/charmed-postgresql/current/etc/patroni/patroni.yaml`, so reading it
//! avoids copying a secret. All three resolve to the same [`ClusterConfig`], in two parts:
//! which cluster is watched and what of it ([`ClusterIdentity`]: scope, members, Raft nodes
//! ([`RaftSettings`]), collectors), and how requests are made and read (the poll's rhythm and
//! bounds, [`PollSettings`], [`ClientSettings`], the REST
//! source's own type, and what Patroni's YAML says of the members' own settings,
//! [`MemberSettings`]). Two configurations of the same cluster have equal identities: what
//! a poller learned still holds when only the other settings change. Each default is
//! written once, in those types.
//!
//! Layout, one concern per file:
//! * [`file`](mod@file): one cluster as the operator writes it ([`ClusterEntry`], the same shape from
//!   flags and from `--config.file`), the file itself, and the resolution into a
//!   [`ClusterConfig`];
//! * [`patroni_yaml`]: the parts of Patroni's own YAML the exporter reads;
//! * [`policy`]: which hosts the exporter contacts, and with what ([`ApiUrlPolicy`]).

pub mod file;
pub mod patroni_yaml;
pub mod policy;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

pub use file::{ClusterEntry, ConfigFile};
pub use patroni_yaml::{MemberSettings, PatroniEtcd3, PatroniYaml};
pub use policy::ApiUrlPolicy;

use crate::patroni::ClientSettings;
use crate::secret::Secret;

/// Everything the poller of one cluster needs. Built once at start (and on reload).
///
/// Its parts are named at every use (`config.identity.patroni_urls`, `config.poll.interval`):
/// which part a setting is in says whether changing it makes another cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// Which cluster, and what of it is watched.
    pub identity: ClusterIdentity,
    pub poll: PollSettings,
    /// How requests to the members are made (TLS, credentials, body cap).
    pub rest: ClientSettings,
    /// What Patroni's YAML (`--patroni.config-file`) says of the members' Raft timing and
    /// REST pool; `None` without one. Read into the members' settings in force, never into
    /// what is watched: a file that changes only these is the same cluster.
    pub member_settings: Option<MemberSettings>,
}

/// Which cluster is watched, through which members and Raft nodes, and what of it: equal
/// identities are the same cluster ([`ClusterConfig::same_cluster`]), so what a poller
/// learned of it (members that left, witnesses, hosts a Raft status vouched for, the last
/// answers of the requests asked in turn) still holds after a reload. A new setting that
/// changes what is watched belongs here; one that changes only how requests are made or
/// read, in [`PollSettings`], [`ClientSettings`] or [`ClusterConfig::member_settings`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterIdentity {
    /// The expected cluster name: the `scope` label before the first answer, and checked
    /// against what `/cluster` reports.
    pub expected_scope: Option<String>,
    /// REST base URLs of members, asked for `/cluster` in order.
    pub patroni_urls: Vec<Url>,
    /// Hosts (names, IPs, CIDRs, or `*`) whose `api_url`s may be followed besides the
    /// configured ones; see [`ApiUrlPolicy`].
    pub allow_api_url_hosts: Vec<String>,
    /// The DCS asked directly, by kind: Raft today; nothing (REST only) when not polled.
    pub dcs: DcsSettings,
    /// The requests a user switched off (`--no-collector.history`, ...).
    pub collectors: Collectors,
    /// The scope of the cluster this one is a standby cluster of (`standby_of`).
    pub standby_of: Option<String>,
}

/// A group of requests that can be switched off, like node_exporter's collectors: for
/// families a site does not use, and to save the requests (docs/performance.md lists the
/// series of each). `/cluster`, each member's own `/patroni` and Raft (`--raft.disabled`)
/// are the core and cannot be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Collector {
    /// `GET /history`: failovers and timelines (`patroni_cluster_last_failover_*`, ...).
    History,
    /// `GET /config`: the dynamic configuration (`patroni_config_*`); without it failover
    /// readiness assumes Patroni's defaults.
    Config,
    /// Every member's own `GET /cluster` (and `GET /config` in rotation): split views.
    Views,
    /// `GET /liveness` and `GET /readiness` (one member per poll, in rotation).
    Probes,
    /// `GET /failsafe` while failsafe mode is on.
    Failsafe,
}

impl Collector {
    pub const ALL: [Collector; 5] = [
        Collector::History,
        Collector::Config,
        Collector::Views,
        Collector::Probes,
        Collector::Failsafe,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Collector::History => "history",
            Collector::Config => "config",
            Collector::Views => "views",
            Collector::Probes => "probes",
            Collector::Failsafe => "failsafe",
        }
    }
}

/// Which collectors run: all but the ones switched off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collectors {
    disabled: std::collections::BTreeSet<Collector>,
}

impl Collectors {
    pub fn without(disabled: impl IntoIterator<Item = Collector>) -> Collectors {
        Collectors {
            disabled: disabled.into_iter().collect(),
        }
    }

    pub fn enabled(&self, collector: Collector) -> bool {
        !self.disabled.contains(&collector)
    }
}

impl ClusterConfig {
    /// The one name of a cluster in logs, errors and (until Patroni names it) the `scope`
    /// label: the configured scope, else the first REST URL.
    pub fn name(&self) -> String {
        cluster_name(
            self.identity.expected_scope.as_deref(),
            &self.identity.patroni_urls,
        )
    }

    /// Whether `other` watches the same cluster ([`ClusterIdentity`]) and differs at most
    /// in how requests are made (TLS and credential files, timeouts, the interval) and in
    /// what Patroni's YAML says of the members' settings.
    pub fn same_cluster(&self, other: &ClusterConfig) -> bool {
        self.identity == other.identity
    }
}

/// [`ClusterConfig::name`] before the configuration is complete: the scope, else the first
/// REST URL, else `<unnamed>` (only in the error that says no URL is configured).
pub(crate) fn cluster_name(scope: Option<&str>, urls: &[Url]) -> String {
    match (scope, urls.first()) {
        (Some(scope), _) => scope.to_owned(),
        (None, Some(url)) => url.to_string(),
        (None, None) => "<unnamed>".to_owned(),
    }
}

/// The rhythm and bounds of one cluster's polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollSettings {
    /// How often the cluster is polled.
    pub interval: Duration,
    /// Deadline of each request (REST or Raft).
    pub timeout: Duration,
    /// Requests of one poll in flight at once (REST and Raft together).
    pub max_concurrency: usize,
}

impl Default for PollSettings {
    fn default() -> Self {
        PollSettings {
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            max_concurrency: 8,
        }
    }
}

/// Which DCS of a cluster is asked directly, and how: one kind per cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum DcsSettings {
    /// Only the REST API is watched (`--raft.disabled`).
    #[default]
    Unwatched,
    /// Patroni's Raft (pysyncobj): every node's status.
    Raft(RaftSettings),
    /// etcd v3, through its JSON gateway: its members' status and Patroni's keys.
    Etcd(EtcdSettings),
}

impl DcsSettings {
    /// The Raft settings, on a cluster whose Raft is polled.
    pub fn raft(&self) -> Option<&RaftSettings> {
        match self {
            DcsSettings::Raft(raft) => Some(raft),
            _ => None,
        }
    }

    /// The etcd settings, on a cluster on etcd.
    pub fn etcd(&self) -> Option<&EtcdSettings> {
        match self {
            DcsSettings::Etcd(etcd) => Some(etcd),
            _ => None,
        }
    }

    /// The Raft settings to change, on a cluster whose Raft is polled.
    pub fn raft_mut(&mut self) -> Option<&mut RaftSettings> {
        match self {
            DcsSettings::Raft(raft) => Some(raft),
            _ => None,
        }
    }
}

/// How a cluster's etcd is reached, and where Patroni keeps its keys there.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdSettings {
    /// Client URLs asked (`--etcd.endpoint`, Patroni's `etcd3:` `hosts`/`host`/`url`); the
    /// members etcd lists are asked too ([`EtcdSettings::follows_listed_endpoints`]).
    pub endpoints: Vec<Url>,
    /// Patroni's `namespace` (default `/service`): its keys are under `<namespace>/<scope>/`.
    pub namespace: String,
    /// PEM CA bundle trusted for https endpoints (in addition to the system roots).
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate, for etcd's `--client-cert-auth`,
    pub cert_file: Option<PathBuf>,
    /// and its key.
    pub key_file: Option<PathBuf>,
    /// etcd's user (`/v3/auth/authenticate`), with `password`.
    pub username: Option<String>,
    pub password: Option<Secret>,
}

impl EtcdSettings {
    /// Patroni's default `namespace`.
    pub const DEFAULT_NAMESPACE: &'static str = "/service";

    /// The prefix of the keys of cluster `scope`, as Patroni builds it
    /// ([`crate::etcd::patroni_prefix`]).
    pub fn prefix(&self, scope: &str) -> String {
        crate::etcd::patroni_prefix(&self.namespace, scope)
    }

    /// Whether what etcd says reached the exporter over an authenticated channel: https
    /// (the server's certificate verified), or with etcd credentials. Only then are the
    /// hosts etcd names trusted as the operator's configuration is.
    pub fn authenticated(&self) -> bool {
        self.username.is_some() || self.endpoints.iter().all(|url| url.scheme() == "https")
    }

    /// Whether the client URLs etcd's member list names are asked too: when the channel
    /// that named them is authenticated, or when nothing secret is sent (no credentials, no
    /// client certificate), as with a plain-text Raft status.
    pub fn follows_listed_endpoints(&self) -> bool {
        self.authenticated() || (self.username.is_none() && self.cert_file.is_none())
    }
}

/// How the Raft nodes of a cluster are found and queried.
#[derive(Debug, Clone, PartialEq)]
pub struct RaftSettings {
    /// Nodes always queried (`host:port`). When empty, nodes come from the member hosts.
    pub nodes: Vec<String>,
    /// Port of the Raft nodes found through member hosts.
    pub port: u16,
    pub password: Option<Secret>,
    /// Run this program instead of the native client (`--raft.command`).
    pub command: Option<Vec<String>>,
}

impl RaftSettings {
    /// pysyncobj's port in Patroni's and Charmed PostgreSQL's configurations.
    pub const DEFAULT_PORT: u16 = 2222;

    /// Whether statuses are authenticated: with the Raft password, a status that decrypts
    /// comes from a holder of the password, so the voters it names can be trusted.
    pub fn authenticated(&self) -> bool {
        self.password.is_some()
    }
}

impl Default for RaftSettings {
    fn default() -> Self {
        RaftSettings {
            nodes: Vec::new(),
            port: RaftSettings::DEFAULT_PORT,
            password: None,
            command: None,
        }
    }
}

/// Refuses settings that cannot work, at start rather than as a poller that fails for ever:
/// a zero interval (a busy loop), a zero timeout (every request fails), a timeout longer
/// than the interval (a poll that asks a hanging member overruns every time: each request
/// may take the whole timeout), and zero limits.
///
/// # Errors
/// Naming the setting, its value and what would work.
pub(crate) fn check_limits(
    cluster: &str,
    poll: &PollSettings,
    max_body_bytes: usize,
) -> anyhow::Result<()> {
    let defaults = PollSettings::default();
    let show = |duration: Duration| humantime::format_duration(duration).to_string();
    if poll.interval.is_zero() {
        anyhow::bail!(
            "cluster {cluster}: poll interval must be longer than 0 (default {})",
            show(defaults.interval)
        );
    }
    if poll.timeout.is_zero() {
        anyhow::bail!(
            "cluster {cluster}: poll timeout must be longer than 0 (default {})",
            show(defaults.timeout)
        );
    }
    if poll.timeout > poll.interval {
        anyhow::bail!(
            "cluster {cluster}: poll timeout {} is longer than the poll interval {}: a hanging member would make every poll overrun; use a timeout of at most the interval",
            show(poll.timeout),
            show(poll.interval)
        );
    }
    if max_body_bytes == 0 {
        anyhow::bail!(
            "cluster {cluster}: max body bytes must be at least 1 (default {})",
            ClientSettings::default().max_body_bytes
        );
    }
    if poll.max_concurrency == 0 {
        anyhow::bail!(
            "cluster {cluster}: max concurrency must be at least 1 (default {})",
            defaults.max_concurrency
        );
    }
    Ok(())
}

/// A YAML error without the file's content: the kind of mistake and its line and column.
///
/// serde_yaml's messages quote the offending value (`invalid type: string "root:x:0:0:..."`):
/// a file given by mistake (or a value holding a secret) would end up in the log. Only what
/// the exporter's own schema says is kept: the text after "expected", which names our keys
/// and types, never the user's.
pub(crate) fn describe_yaml_error(error: &serde_yaml_ng::Error) -> String {
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
