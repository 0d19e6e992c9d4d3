//! The parts of Patroni's own YAML the exporter uses: on a Charmed PostgreSQL unit it holds
//! the REST URL, the TLS files, the Raft partners and the Raft password, so pointing the
//! exporter at it avoids copying a secret. It also says what the exporter cannot ask a member:
//! the Raft timing its pysyncobj node runs (Patroni 4.2's `raft.*_timeout` keys) and the size
//! of its REST API's worker pool (`restapi.thread_pool_size`, Patroni 3.3.9, 4.0.8, 4.1.1 and later): the
//! [`MemberSettings`]. Patroni also takes these from `PATRONI_RAFT_*` and `PATRONI_RESTAPI_*`
//! environment variables, which a separate process cannot see; the exporter assumes every
//! member has the same `raft:` and `restapi:` settings as the file it reads (as Charmed
//! PostgreSQL renders them).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use url::Url;

use super::describe_yaml_error;
use crate::raft::{RaftSetting, RaftTimingConfig};
use crate::secret::Secret;

/// The parts of Patroni's own YAML the exporter uses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatroniYaml {
    /// The cluster's name: the expected scope unless `--patroni.scope` names one.
    pub scope: Option<String>,
    /// Where this member's REST API listens, and its TLS.
    pub restapi: Option<PatroniRestApi>,
    /// How patronictl reaches the API: the client side of `restapi`'s TLS.
    pub ctl: Option<PatroniCtl>,
    /// The Raft node of this member: its partners and the password.
    pub raft: Option<PatroniRaft>,
    /// The etcd v3 cluster of this member (Patroni's `etcd3:` DCS).
    pub etcd3: Option<PatroniEtcd3>,
    /// Where Patroni keeps its keys in the DCS (default `/service`).
    pub namespace: Option<String>,
}

/// Patroni's `etcd3` section: how its members reach etcd (`patroni/dcs/etcd.py`).
/// `PATRONI_ETCD3_*` environment variables override it in Patroni, invisibly to the exporter.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatroniEtcd3 {
    /// `host:port` endpoints: a list, or one comma-separated string.
    pub hosts: Option<Hosts>,
    /// One `host:port`.
    pub host: Option<String>,
    /// One URL (`http://host:port`).
    pub url: Option<String>,
    /// `http` or `https`, for `hosts` and `host`.
    pub protocol: Option<String>,
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub username: Option<String>,
    pub password: Option<Secret>,
}

/// Patroni's `hosts`: a YAML list or a comma-separated string, as Patroni takes both.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Hosts {
    List(Vec<String>),
    Text(String),
}

impl PatroniEtcd3 {
    /// The endpoints as URLs, in the order written: `url`, else `hosts`, else `host`, each
    /// `host:port` with `protocol` (default http) as its scheme. Entries that are no URL are
    /// left out (Patroni would refuse them at its own start).
    pub fn endpoints(&self) -> Vec<Url> {
        if let Some(url) = &self.url {
            return Url::parse(url).into_iter().collect();
        }
        let scheme = self.protocol.as_deref().unwrap_or("http");
        let hosts: Vec<String> = match (&self.hosts, &self.host) {
            (Some(Hosts::List(hosts)), _) => hosts.clone(),
            (Some(Hosts::Text(text)), _) => text.split(',').map(str::to_owned).collect(),
            (None, Some(host)) => vec![host.clone()],
            (None, None) => Vec::new(),
        };
        hosts
            .iter()
            .map(|host| host.trim())
            .filter(|host| !host.is_empty())
            .filter_map(|host| Url::parse(&format!("{scheme}://{host}")).ok())
            .collect()
    }
}

/// Patroni's `ctl` section: how patronictl (a client, like the exporter) talks to the API.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatroniCtl {
    /// Skip the verification of the members' certificates.
    pub insecure: Option<bool>,
    /// The CA patronictl trusts (preferred to `restapi.cafile`).
    pub cacert: Option<PathBuf>,
    /// A client certificate, for members with `verify_client: required`,
    pub certfile: Option<PathBuf>,
    /// with its key,
    pub keyfile: Option<PathBuf>,
    /// and the passphrase of that key when it is encrypted.
    pub keyfile_password: Option<Secret>,
}

/// Patroni's `restapi` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatroniRestApi {
    /// host:port other members and clients use; the exporter's REST URL.
    pub connect_address: Option<String>,
    /// host:port the API binds: the URL when there is no `connect_address`.
    pub listen: Option<String>,
    /// The server's certificate: when set, the API speaks https.
    pub certfile: Option<PathBuf>,
    /// Its key. With `certfile`, also the exporter's client identity when `ctl` names none
    /// and `verify_client` asks for one.
    pub keyfile: Option<PathBuf>,
    /// The passphrase of `keyfile`.
    pub keyfile_password: Option<Secret>,
    /// The CA of the members' certificates.
    pub cafile: Option<PathBuf>,
    /// `none`, `optional` or `required`: whether members ask for a client certificate.
    pub verify_client: Option<String>,
    /// The REST API's worker pool (Patroni 3.3.9, 4.0.8, 4.1.1 and later: `thread_pool_size` + 1 workers;
    /// Patroni raises a value below 5 to 5). A number, or a string of one as environment
    /// variables give it.
    #[serde(deserialize_with = "number::optional")]
    pub thread_pool_size: Option<f64>,
}

/// Patroni's `raft` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PatroniRaft {
    /// This member's Raft node, host:port.
    pub self_addr: Option<String>,
    /// The other voters, host:port.
    pub partner_addrs: Vec<String>,
    /// The Raft password (`SYNCOBJ_PASSWORD` of syncobj_admin).
    pub password: Option<Secret>,
    /// pysyncobj's timing, in seconds, where set (Patroni 4.2.0 and later pass them on;
    /// earlier versions ignore them): `raftMinTimeout`,
    #[serde(deserialize_with = "number::optional")]
    pub min_timeout: Option<f64>,
    /// `raftMaxTimeout`,
    #[serde(deserialize_with = "number::optional")]
    pub max_timeout: Option<f64>,
    /// `connectionTimeout`,
    #[serde(deserialize_with = "number::optional")]
    pub connection_timeout: Option<f64>,
    /// `appendEntriesPeriod`,
    #[serde(deserialize_with = "number::optional")]
    pub append_entries_period: Option<f64>,
    /// `connectionRetryTime`,
    #[serde(deserialize_with = "number::optional")]
    pub connection_retry_time: Option<f64>,
    /// and `leaderFallbackTimeout`.
    #[serde(deserialize_with = "number::optional")]
    pub leader_fallback_timeout: Option<f64>,
}

impl PatroniRaft {
    /// The timing settings this section gives.
    pub fn timing(&self) -> RaftTimingConfig {
        [
            (RaftSetting::MinTimeout, self.min_timeout),
            (RaftSetting::MaxTimeout, self.max_timeout),
            (RaftSetting::ConnectionTimeout, self.connection_timeout),
            (RaftSetting::AppendEntriesPeriod, self.append_entries_period),
            (RaftSetting::ConnectionRetryTime, self.connection_retry_time),
            (
                RaftSetting::LeaderFallbackTimeout,
                self.leader_fallback_timeout,
            ),
        ]
        .into_iter()
        .filter_map(|(setting, value)| Some((setting, value?)))
        .fold(RaftTimingConfig::default(), |config, (setting, value)| {
            config.with(setting, value)
        })
    }
}

/// What Patroni's YAML says about the members that the exporter cannot ask them: the Raft
/// timing their pysyncobj nodes are configured with and the size of their REST worker pool.
/// Which of it a member honours depends on its Patroni version, known only from its own
/// `GET /patroni` (the snapshot judges it).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MemberSettings {
    /// The `raft:` section's timing settings.
    pub raft_timing: RaftTimingConfig,
    /// `restapi.thread_pool_size`, as written (Patroni raises it to at least 5).
    pub rest_thread_pool_size: Option<f64>,
}

impl PatroniYaml {
    /// Reads a Patroni configuration file.
    ///
    /// # Errors
    /// When the file cannot be read or parsed. Errors never quote the file's content.
    pub fn load(path: &Path) -> anyhow::Result<PatroniYaml> {
        let text = crate::capped_file::read_small(path, "Patroni config")?;
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

    /// The settings of the members this file describes.
    pub fn member_settings(&self) -> MemberSettings {
        MemberSettings {
            raft_timing: self
                .raft
                .as_ref()
                .map(PatroniRaft::timing)
                .unwrap_or_default(),
            rest_thread_pool_size: self
                .restapi
                .as_ref()
                .and_then(|restapi| restapi.thread_pool_size),
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

/// Numbers as Patroni reads them: a YAML number, or a string of one (what a value from an
/// environment variable, or a quoted one, is). Patroni converts both with `float()`/`int()`.
mod number {
    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }

    pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
        let value: Option<NumberOrText> = Option::deserialize(deserializer)?;
        match value {
            None => Ok(None),
            Some(NumberOrText::Number(number)) => Ok(Some(number)),
            Some(NumberOrText::Text(text)) => text
                .trim()
                .parse::<f64>()
                .map(Some)
                .map_err(|_| serde::de::Error::custom("invalid value, expected a number")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PatroniYaml {
        let path = format!(
            "{}/tests/fixtures/patroni-yaml/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        PatroniYaml::load(Path::new(&path)).unwrap()
    }

    #[test]
    fn raft_timing_and_rest_pool_of_a_42_style_file() {
        let settings = fixture("patroni-4.2-raft-timing.yml").member_settings();
        let timing = settings.raft_timing;
        assert_eq!(timing.get(RaftSetting::MinTimeout), Some(1.0));
        assert_eq!(timing.get(RaftSetting::MaxTimeout), Some(3.0));
        assert_eq!(timing.get(RaftSetting::ConnectionTimeout), Some(6.0));
        assert_eq!(timing.get(RaftSetting::AppendEntriesPeriod), None);
        assert_eq!(timing.get(RaftSetting::ConnectionRetryTime), None);
        assert_eq!(timing.get(RaftSetting::LeaderFallbackTimeout), Some(45.0));
        assert_eq!(settings.rest_thread_pool_size, Some(8.0));
    }

    #[test]
    fn files_without_the_keys_set_nothing() {
        for name in ["patroni-3.3.8.yml", "patroni-4.1.5.yml"] {
            let yaml = fixture(name);
            assert_eq!(yaml.member_settings(), MemberSettings::default(), "{name}");
            assert_eq!(yaml.raft_nodes().len(), 3, "{name}");
        }
    }

    #[test]
    fn a_timing_that_is_not_a_number_is_refused_without_its_text() {
        let (_dir, path) = crate::temp_file(
            "patroni.yaml",
            "raft:\n  self_addr: '10.1.2.3:2222'\n  connection_timeout: six-secret\n",
        );
        let error = PatroniYaml::load(&path).unwrap_err().to_string();
        assert!(!error.contains("six-secret"), "{error}");
        assert!(
            error.contains("invalid value, expected a number"),
            "{error}"
        );
    }
}
