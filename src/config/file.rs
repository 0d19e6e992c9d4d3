//! One cluster as the operator writes it, and how it resolves into a [`ClusterConfig`].
//!
//! Why one shape for flags and file: a cluster given by flags (`--patroni.url` ...) and a
//! cluster entry of `--config.file` say the same things, so they are the same type
//! ([`ClusterEntry`] derives both clap's `Args` and serde's `Deserialize`): a new setting is
//! one field here, one line in [`ClusterEntry::resolve`], and its home in the settings type
//! of its concern. Every field is optional; what is missing comes from the command line
//! ([`Inherited`], for entries of the file), then Patroni's YAML, then the defaults of the
//! settings types.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::patroni_yaml::PatroniEtcd3;
use super::{check_limits, cluster_name, describe_yaml_error, ApiUrlPolicy, ClusterConfig};
use super::{
    ClusterIdentity, Collector, Collectors, DcsSettings, EtcdSettings, PatroniYaml, PollSettings,
    RaftSettings,
};
use crate::address::Host;
use crate::patroni::{BasicAuth, ClientSettings};
use crate::secret::Secret;

/// One cluster: from the flags, or an entry of `--config.file` (same names with `_`:
/// `--patroni.url` is `patroni_urls`, `--poll.interval` is `poll_interval`).
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterEntry {
    /// Expected cluster name (scope); a /cluster answer naming another cluster is an error.
    #[arg(long = "patroni.scope", value_name = "NAME")]
    pub scope: Option<String>,

    /// REST base URL of a member, e.g. http://10.0.0.1:8008 (repeatable). One is enough:
    /// the other members are found through the Raft status; more add places to ask /cluster.
    #[arg(long = "patroni.url", value_name = "URL")]
    pub patroni_urls: Vec<Url>,

    /// Patroni's own YAML (e.g. Charmed PostgreSQL's patroni.yaml): supplies the REST URL,
    /// the CA, the Raft partners and the Raft password when not given otherwise.
    #[arg(long = "patroni.config-file", value_name = "FILE")]
    pub patroni_config_file: Option<PathBuf>,

    /// How often the cluster is polled [default: 5s].
    #[arg(long = "poll.interval", value_name = "DURATION", value_parser = positive_duration)]
    #[serde(with = "humantime_serde_option")]
    pub poll_interval: Option<Duration>,

    /// Deadline of each request to a member or a Raft node [default: the smaller of 2s and
    /// the interval].
    #[arg(long = "poll.timeout", value_name = "DURATION", value_parser = positive_duration)]
    #[serde(with = "humantime_serde_option")]
    pub poll_timeout: Option<Duration>,

    /// Largest REST response body accepted, in bytes [default: 4194304].
    #[arg(long = "poll.max-body-bytes", value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,

    /// Requests of one cluster's poll in flight at once (REST and Raft together) [default: 8].
    #[arg(long = "poll.max-concurrency", value_name = "N")]
    pub max_concurrency: Option<usize>,

    /// PEM CA bundle trusted for https member URLs (in addition to the system roots).
    #[arg(long = "patroni.ca-file", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,

    /// Accept any TLS certificate from members (insecure; logged as a warning).
    #[arg(
        long = "patroni.insecure-skip-verify",
        num_args = 0,
        default_missing_value = "true"
    )]
    pub insecure_skip_verify: Option<bool>,

    /// PEM client certificate for members with `verify_client: required` (with --patroni.key-file).
    #[arg(long = "patroni.cert-file", value_name = "FILE")]
    pub cert_file: Option<PathBuf>,

    /// PEM private key of --patroni.cert-file (PKCS#8, PKCS#1 or SEC1; may be encrypted).
    #[arg(long = "patroni.key-file", value_name = "FILE")]
    pub key_file: Option<PathBuf>,

    /// File holding the passphrase of an encrypted --patroni.key-file.
    #[arg(
        long = "patroni.key-password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_KEY_PASSWORD_FILE"
    )]
    pub key_password_file: Option<PathBuf>,

    /// User for HTTP basic auth on every GET (only where a site protects reads).
    #[arg(long = "patroni.username", value_name = "USER")]
    pub username: Option<String>,

    /// File holding the basic auth password of --patroni.username.
    #[arg(
        long = "patroni.password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_PATRONI_PASSWORD_FILE"
    )]
    pub password_file: Option<PathBuf>,

    /// Hosts whose member api_urls may be followed besides the configured REST and Raft
    /// hosts: a name, an IP, a CIDR (10.0.0.0/24) or * (repeatable or comma-separated).
    #[arg(
        long = "patroni.allow-api-url-hosts",
        value_name = "HOSTS",
        value_delimiter = ','
    )]
    pub allow_api_url_hosts: Vec<String>,

    /// Whether Raft is polled (file only; the flag is --raft.disabled).
    #[arg(skip)]
    pub raft_enabled: Option<bool>,

    /// Collectors switched off for this cluster, besides those switched off by flags (file
    /// only; the flags are --no-collector.history, ...): history, config, views, probes,
    /// failsafe.
    #[arg(skip)]
    pub disabled_collectors: Vec<Collector>,

    /// The scope of the cluster this one is a standby cluster of (Patroni's
    /// `standby_cluster:`), another entry of the same file with that `scope` (file only):
    /// the exporter then exports the lag from that cluster's leader to this one's standby
    /// leader (`patroni_standby_lag_bytes`).
    #[arg(skip)]
    pub standby_of: Option<String>,

    /// Raft node to query, host:port (repeatable). Default: the voters found from the
    /// configured REST hosts on --raft.port.
    #[arg(long = "raft.node", value_name = "HOST:PORT")]
    pub raft_nodes: Vec<String>,

    /// Port of the Raft nodes found through the member hosts [default: 2222].
    #[arg(long = "raft.port", value_name = "PORT")]
    pub raft_port: Option<u16>,

    /// File holding the Raft password (Patroni's raft.password).
    #[arg(
        long = "raft.password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_RAFT_PASSWORD_FILE"
    )]
    pub raft_password_file: Option<PathBuf>,

    /// Query Raft nodes by running this program instead of the native client, e.g.
    /// "charmed-postgresql.syncobj-admin". `{addr}` in an argument is replaced by the node
    /// address, else `-conn ADDR -status` is appended; the password is passed in the
    /// environment variable SYNCOBJ_PASSWORD, never in argv.
    #[arg(long = "raft.command", value_name = "PROGRAM")]
    pub raft_command: Option<String>,

    /// Client URL of a member of the cluster's etcd v3, e.g. http://10.0.0.1:2379
    /// (repeatable): the cluster's DCS is etcd, read through its JSON gateway (read-only).
    /// The other etcd members are found through its member list. Not with the --raft.* flags.
    #[arg(long = "etcd.endpoint", value_name = "URL")]
    pub etcd_endpoints: Vec<Url>,

    /// Patroni's namespace in etcd: its keys are under NAMESPACE/SCOPE/ [default: /service].
    #[arg(long = "etcd.namespace", value_name = "NAMESPACE")]
    pub etcd_namespace: Option<String>,

    /// PEM CA bundle trusted for https etcd endpoints (in addition to the system roots).
    #[arg(long = "etcd.ca-file", value_name = "FILE")]
    pub etcd_ca_file: Option<PathBuf>,

    /// PEM client certificate for etcd's --client-cert-auth (with --etcd.key-file).
    #[arg(long = "etcd.cert-file", value_name = "FILE")]
    pub etcd_cert_file: Option<PathBuf>,

    /// PEM private key of --etcd.cert-file.
    #[arg(long = "etcd.key-file", value_name = "FILE")]
    pub etcd_key_file: Option<PathBuf>,

    /// etcd user (with --etcd.password-file); least privilege: read on Patroni's prefix.
    #[arg(long = "etcd.username", value_name = "USER")]
    pub etcd_username: Option<String>,

    /// File holding the password of --etcd.username.
    #[arg(
        long = "etcd.password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_ETCD_PASSWORD_FILE"
    )]
    pub etcd_password_file: Option<PathBuf>,
}

/// What an entry of `--config.file` inherits from the command line: the poll settings, the
/// body cap and the Raft port of the cluster given by flags, whether Raft is polled
/// (`--raft.disabled`) and the collectors switched off by flags.
#[derive(Debug, Clone, Default)]
pub struct Inherited {
    /// The cluster given by flags. Only the fields named above are inherited: an entry's
    /// URLs, files and credentials are its own.
    pub flags: ClusterEntry,
    pub raft_disabled: bool,
    /// The collectors switched off by flags.
    pub disabled_collectors: Vec<Collector>,
}

impl Inherited {
    /// The inheritable settings of the cluster given by flags.
    pub fn from_flags(
        flags: &ClusterEntry,
        raft_disabled: bool,
        disabled_collectors: Vec<Collector>,
    ) -> Inherited {
        Inherited {
            flags: flags.clone(),
            raft_disabled,
            disabled_collectors,
        }
    }
}

/// A duration longer than zero (`5s`, `1m30s`): a zero interval would poll in a busy loop
/// and a zero timeout would fail every request.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if duration.is_zero() {
        return Err("must be longer than 0 (e.g. 5s)".to_owned());
    }
    Ok(duration)
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
        let text = crate::capped_file::read_small(path, "config file")?;
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
        file.check_standby_sources()
            .map_err(|error| anyhow::anyhow!("config file {}: {error}", path.display()))?;
        Ok(file)
    }

    /// Reads `--config.file` and resolves every entry ([`ClusterEntry::resolve`]).
    ///
    /// # Errors
    /// As [`ConfigFile::load`] and [`ClusterEntry::resolve`], and when two entries watch
    /// the same cluster ([`check_unique_names`]).
    pub fn load_clusters(path: &Path, inherited: &Inherited) -> anyhow::Result<Vec<ClusterConfig>> {
        let clusters = ConfigFile::load(path)?
            .clusters
            .iter()
            .map(|entry| entry.resolve(inherited))
            .collect::<anyhow::Result<Vec<_>>>()?;
        check_unique_names(&clusters)
            .map_err(|error| anyhow::anyhow!("config file {}: {error}", path.display()))?;
        Ok(clusters)
    }

    /// Every `standby_of` names the `scope` of another entry.
    fn check_standby_sources(&self) -> anyhow::Result<()> {
        for entry in &self.clusters {
            let Some(source) = &entry.standby_of else {
                continue;
            };
            if entry.scope.as_ref() == Some(source) {
                anyhow::bail!("cluster {source}: standby_of names the cluster itself");
            }
            if !self
                .clusters
                .iter()
                .any(|other| other.scope.as_ref() == Some(source))
            {
                anyhow::bail!(
                    "standby_of: {source} names no cluster of this file (give that cluster `scope: {source}`)"
                );
            }
        }
        Ok(())
    }
}

impl ClusterEntry {
    /// Resolves the entry into a complete [`ClusterConfig`].
    ///
    /// Precedence: the entry's own fields, then what it inherits from the command line, then
    /// the Patroni YAML it names, then the defaults of the settings types.
    ///
    /// # Errors
    /// When no REST URL is known, a named file cannot be read, settings go together but only
    /// one is given, or a limit cannot work ([`check_limits`]).
    pub fn resolve(&self, inherited: &Inherited) -> anyhow::Result<ClusterConfig> {
        let yaml = match &self.patroni_config_file {
            Some(path) => Some(PatroniYaml::load(path)?),
            None => None,
        };
        let yaml = yaml.as_ref();
        let expected_scope = self
            .scope
            .clone()
            .or_else(|| yaml.and_then(|yaml| yaml.scope.clone()));
        let patroni_urls =
            self.patroni_urls(yaml, &cluster_name(expected_scope.as_deref(), &[]))?;
        let name = cluster_name(expected_scope.as_deref(), &patroni_urls);
        let rest = self.rest_settings(yaml, inherited, &name)?;
        let poll = self.poll_settings(inherited);
        check_limits(&name, &poll, rest.max_body_bytes)?;
        Ok(ClusterConfig {
            identity: ClusterIdentity {
                standby_of: self.standby_of.clone(),
                expected_scope,
                patroni_urls,
                allow_api_url_hosts: self.allowed_hosts(yaml)?,
                dcs: self.dcs_settings(yaml, inherited, &name)?,
                collectors: Collectors::without(
                    inherited
                        .disabled_collectors
                        .iter()
                        .chain(&self.disabled_collectors)
                        .copied(),
                ),
            },
            poll,
            rest,
            member_settings: yaml.map(PatroniYaml::member_settings),
        })
    }

    /// The configured REST URLs, else the one of Patroni's YAML; at least one.
    fn patroni_urls(&self, yaml: Option<&PatroniYaml>, name: &str) -> anyhow::Result<Vec<Url>> {
        let mut urls = self.patroni_urls.clone();
        if urls.is_empty() {
            urls.extend(yaml.and_then(PatroniYaml::rest_url));
        }
        if urls.is_empty() {
            anyhow::bail!(
                "cluster {name}: no Patroni REST URL (give --patroni.url, patroni_urls, or a Patroni config file)"
            );
        }
        Ok(urls)
    }

    /// How requests to members are made: TLS as Patroni's own clients do it (the `ctl`
    /// section, then the REST server's CA), the client identity, basic auth, the body cap.
    fn rest_settings(
        &self,
        yaml: Option<&PatroniYaml>,
        inherited: &Inherited,
        name: &str,
    ) -> anyhow::Result<ClientSettings> {
        let ctl = yaml.and_then(|yaml| yaml.ctl.as_ref());
        let ca_file = self
            .ca_file
            .clone()
            .or_else(|| ctl.and_then(|ctl| ctl.cacert.clone()))
            .or_else(|| {
                yaml.and_then(|yaml| yaml.restapi.as_ref())
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
            (None, None) => match yaml.and_then(PatroniYaml::client_identity) {
                Some((cert, key, password)) => (Some(cert), Some(key), password),
                None => (None, None, None),
            },
            _ => anyhow::bail!("cluster {name}: cert_file and key_file go together"),
        };
        let basic_auth = match (&self.username, &self.password_file) {
            (Some(username), Some(path)) => Some(BasicAuth {
                username: username.clone(),
                password: Secret::from_file(path)?,
            }),
            (None, None) => None,
            _ => anyhow::bail!(
                "cluster {name}: a REST username needs a password file and vice versa"
            ),
        };
        Ok(ClientSettings {
            max_body_bytes: self
                .max_body_bytes
                .or(inherited.flags.max_body_bytes)
                .unwrap_or(ClientSettings::default().max_body_bytes),
            ca_file,
            insecure_skip_verify,
            cert_file,
            key_file,
            key_password,
            basic_auth,
        })
    }

    /// The allow list, plus the Raft addresses of Patroni's YAML: configured hosts even
    /// when Raft is not polled. Each entry is checked here, at start.
    fn allowed_hosts(&self, yaml: Option<&PatroniYaml>) -> anyhow::Result<Vec<String>> {
        let mut hosts = self.allow_api_url_hosts.clone();
        if let Some(yaml) = yaml {
            hosts.extend(
                yaml.raft_nodes()
                    .iter()
                    .filter_map(|node| Host::of_node(node).ok())
                    .map(|host| host.to_string()),
            );
        }
        let mut check = ApiUrlPolicy::default();
        for entry in &hosts {
            check.add_entry(entry)?;
        }
        Ok(hosts)
    }

    /// Which DCS is asked, and how: etcd when an endpoint is configured (flags, or the
    /// `etcd3:` of Patroni's YAML), else Raft unless switched off. Raft settings beside etcd
    /// ones are refused: one cluster has one DCS.
    fn dcs_settings(
        &self,
        yaml: Option<&PatroniYaml>,
        inherited: &Inherited,
        name: &str,
    ) -> anyhow::Result<DcsSettings> {
        let etcd3 = yaml.and_then(|yaml| yaml.etcd3.as_ref());
        let mut endpoints = self.etcd_endpoints.clone();
        if endpoints.is_empty() {
            endpoints = etcd3.map(PatroniEtcd3::endpoints).unwrap_or_default();
        }
        if endpoints.is_empty() {
            if etcd3.is_some() {
                anyhow::bail!("cluster {name}: the etcd3: section of the Patroni config names no usable endpoint (hosts, host or url)");
            }
            let etcd_flags = self.etcd_namespace.is_some()
                || self.etcd_ca_file.is_some()
                || self.etcd_cert_file.is_some()
                || self.etcd_key_file.is_some()
                || self.etcd_username.is_some();
            if etcd_flags {
                anyhow::bail!("cluster {name}: etcd settings without an etcd endpoint (give --etcd.endpoint or etcd_endpoints)");
            }
            return self.raft_settings(yaml, inherited);
        }
        let raft_given = !self.raft_nodes.is_empty()
            || self.raft_command.is_some()
            || self.raft_password_file.is_some()
            || self.raft_enabled == Some(true)
            || yaml.is_some_and(|yaml| yaml.raft.is_some());
        if raft_given {
            anyhow::bail!("cluster {name}: both Raft and etcd settings: a cluster has one DCS (remove the --raft.* flags or raft_* keys, or the etcd ones)");
        }
        for url in &endpoints {
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                anyhow::bail!(
                    "cluster {name}: etcd endpoint {url} is not an http(s) URL with a host"
                );
            }
        }
        let (cert_file, key_file) = match (&self.etcd_cert_file, &self.etcd_key_file) {
            (Some(cert), Some(key)) => (Some(cert.clone()), Some(key.clone())),
            (None, None) => (
                etcd3.and_then(|etcd3| etcd3.cert.clone()),
                etcd3.and_then(|etcd3| etcd3.key.clone()),
            ),
            _ => anyhow::bail!("cluster {name}: etcd cert_file and key_file go together"),
        };
        let username = self
            .etcd_username
            .clone()
            .or_else(|| etcd3.and_then(|etcd3| etcd3.username.clone()));
        let password = match &self.etcd_password_file {
            Some(path) => Some(Secret::from_file(path)?),
            None => etcd3.and_then(|etcd3| etcd3.password.clone()),
        };
        if username.is_some() != password.is_some() {
            anyhow::bail!("cluster {name}: an etcd username needs a password file and vice versa");
        }
        Ok(DcsSettings::Etcd(EtcdSettings {
            endpoints,
            namespace: self
                .etcd_namespace
                .clone()
                .or_else(|| yaml.and_then(|yaml| yaml.namespace.clone()))
                .unwrap_or_else(|| EtcdSettings::DEFAULT_NAMESPACE.to_owned()),
            ca_file: self
                .etcd_ca_file
                .clone()
                .or_else(|| etcd3.and_then(|etcd3| etcd3.cacert.clone())),
            cert_file,
            key_file,
            username,
            password,
        }))
    }

    /// How the Raft nodes are found and asked; `None` when Raft is not polled.
    fn raft_settings(
        &self,
        yaml: Option<&PatroniYaml>,
        inherited: &Inherited,
    ) -> anyhow::Result<DcsSettings> {
        if !self.raft_enabled.unwrap_or(!inherited.raft_disabled) {
            return Ok(DcsSettings::Unwatched);
        }
        let password = match (&self.raft_password_file, yaml) {
            (Some(path), _) => Some(Secret::from_file(path)?),
            (None, Some(yaml)) => yaml.raft.as_ref().and_then(|raft| raft.password.clone()),
            (None, None) => None,
        };
        let mut nodes = self.raft_nodes.clone();
        if nodes.is_empty() {
            nodes = yaml.map(PatroniYaml::raft_nodes).unwrap_or_default();
        }
        Ok(DcsSettings::Raft(RaftSettings {
            nodes,
            port: self
                .raft_port
                .or(inherited.flags.raft_port)
                .unwrap_or(RaftSettings::DEFAULT_PORT),
            password,
            command: self
                .raft_command
                .as_deref()
                .map(|command| command.split_whitespace().map(str::to_owned).collect()),
        }))
    }

    /// The poll's rhythm and bounds.
    fn poll_settings(&self, inherited: &Inherited) -> PollSettings {
        let defaults = PollSettings::default();
        let interval = self
            .poll_interval
            .or(inherited.flags.poll_interval)
            .unwrap_or(defaults.interval);
        PollSettings {
            interval,
            // As Prometheus does with scrape_timeout: a timeout nobody gave defaults to the
            // smaller of the default and the interval, so `--poll.interval 1s` alone works;
            // only a timeout given explicitly longer than the interval is refused.
            timeout: self
                .poll_timeout
                .or(inherited.flags.poll_timeout)
                .unwrap_or(defaults.timeout.min(interval)),
            max_concurrency: self
                .max_concurrency
                .or(inherited.flags.max_concurrency)
                .unwrap_or(defaults.max_concurrency),
        }
    }
}

/// Refuses two clusters with one name ([`ClusterConfig::name`]: the scope, else the first
/// REST URL), as resolved (a scope may come from Patroni's YAML). Their series would carry
/// the same labels, `/probe` would serve only one of them, and a reload could not tell which
/// running poller is which.
///
/// # Errors
/// Naming the duplicate and the positions of both entries (`clusters[0]`, as in the file).
pub fn check_unique_names(clusters: &[ClusterConfig]) -> anyhow::Result<()> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (at, cluster) in clusters.iter().enumerate() {
        let name = cluster.name();
        let Some(first) = seen.insert(name.clone(), at) else {
            continue;
        };
        let what = match &cluster.identity.expected_scope {
            Some(scope) => format!("scope {scope}"),
            None => format!("no scope and the first REST URL {name}"),
        };
        anyhow::bail!(
            "clusters[{first}] and clusters[{at}] both have {what}: each cluster must be listed once (their series would be the same); remove one, or give each its own scope"
        );
    }
    Ok(())
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
