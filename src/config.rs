//! What to watch and how: the resolved per-cluster settings, from flags, from a YAML file of
//! many clusters (`--config.file`), and from Patroni's own YAML (`--patroni.config-file`).
//!
//! Why three inputs: one cluster is quickest to set up with flags; a fleet needs a file; and
//! on a Charmed PostgreSQL unit everything (REST URL, TLS, Raft partners and password) is
//! already in `/var/snap/charmed-postgresql/current/etc/patroni/patroni.yaml`, so reading it
//! avoids copying a secret. All three resolve to the same [`ClusterConfig`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::secret::Secret;

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
    /// `None` when Raft is not polled for this cluster.
    pub raft: Option<RaftSettings>,
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
        let text = std::fs::read_to_string(path)
            .map_err(|error| anyhow::anyhow!("reading config file {}: {error}", path.display()))?;
        let file: ConfigFile = serde_yaml_ng::from_str(&text)
            .map_err(|error| anyhow::anyhow!("parsing config file {}: {error}", path.display()))?;
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
    pub raft: Option<PatroniRaft>,
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
    pub cafile: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PatroniRaft {
    #[serde(default)]
    pub self_addr: Option<String>,
    #[serde(default)]
    pub partner_addrs: Vec<String>,
    #[serde(default)]
    pub password: Option<String>,
}

impl PatroniYaml {
    /// Reads a Patroni configuration file.
    ///
    /// # Errors
    /// When the file cannot be read or parsed. Errors never quote the file's content.
    pub fn load(path: &Path) -> anyhow::Result<PatroniYaml> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            anyhow::anyhow!("reading Patroni config {}: {error}", path.display())
        })?;
        serde_yaml_ng::from_str(&text).map_err(|error| {
            // serde_yaml's messages can quote a value; keep only the position.
            let position = error
                .location()
                .map(|l| format!("line {} column {}", l.line(), l.column()))
                .unwrap_or_default();
            anyhow::anyhow!(
                "parsing Patroni config {}: invalid YAML {position}",
                path.display()
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
        let ca_file = self.ca_file.clone().or_else(|| {
            patroni_yaml
                .as_ref()
                .and_then(|yaml| yaml.restapi.as_ref())
                .and_then(|restapi| restapi.cafile.clone())
        });
        let raft = if self.raft_enabled.unwrap_or(defaults.raft_enabled) {
            let password = match (&self.raft_password_file, &patroni_yaml) {
                (Some(path), _) => Some(Secret::from_file(path)?),
                (None, Some(yaml)) => yaml
                    .raft
                    .as_ref()
                    .and_then(|raft| raft.password.clone())
                    .map(Secret::new),
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
        Ok(ClusterConfig {
            expected_scope,
            patroni_urls,
            poll_interval: self.poll_interval.unwrap_or(defaults.poll_interval),
            poll_timeout: self.poll_timeout.unwrap_or(defaults.poll_timeout),
            max_body_bytes: defaults.max_body_bytes,
            ca_file,
            insecure_skip_verify: self.insecure_skip_verify.unwrap_or(false),
            raft,
        })
    }
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
    fn a_cluster_needs_a_url() {
        assert!(ClusterEntry::default().resolve(&defaults()).is_err());
    }
}
