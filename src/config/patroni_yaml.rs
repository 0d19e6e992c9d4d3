//! The parts of Patroni's own YAML the exporter uses: on a Charmed PostgreSQL unit it holds
//! the REST URL, the TLS files, the Raft partners and the Raft password, so pointing the
//! exporter at it avoids copying a secret.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use url::Url;

use super::describe_yaml_error;
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
