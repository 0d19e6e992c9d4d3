//! The HTTP side of the Patroni source: bounded requests, classified errors.
//!
//! Patroni's REST server is Python's `BaseHTTPRequestHandler` speaking HTTP/1.0 without
//! `Content-Length`: the body ends when the connection closes. hyper (under reqwest) reads
//! such bodies to the close, so nothing special is needed for that, but it also means a peer
//! can stream for ever. Every request therefore has a total deadline and the body is read in
//! chunks against a byte cap, never with an unbounded `bytes()`.

use std::time::Duration;

use url::Url;

use super::model::{
    parse_cluster, parse_history, parse_member_status, ClusterView, HistoryEntry, MemberStatus,
};
use super::PatroniError;
use crate::secret::Secret;

/// How requests to one cluster's members are made.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Deadline of a whole request: connect, headers and body.
    pub timeout: Duration,
    /// Bodies larger than this are refused (`body_too_large`).
    pub max_body_bytes: usize,
    /// PEM CA bundle to trust in addition to the system's roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// Accept any server certificate (logged once as a warning by the caller).
    pub insecure_skip_verify: bool,
    /// PEM client certificate (chain), for members with `verify_client: required`.
    pub cert_file: Option<std::path::PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<std::path::PathBuf>,
    /// Passphrase of an encrypted `key_file` (Patroni's `keyfile_password`).
    pub key_password: Option<Secret>,
    /// HTTP basic auth sent with every GET, for sites that protect reads.
    pub basic_auth: Option<BasicAuth>,
}

/// A user name and password for HTTP basic auth. `Debug` never shows the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub username: String,
    pub password: Secret,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            timeout: Duration::from_secs(2),
            max_body_bytes: 4 * 1024 * 1024,
            ca_file: None,
            insecure_skip_verify: false,
            cert_file: None,
            key_file: None,
            key_password: None,
            basic_auth: None,
        }
    }
}

/// A client for the REST API of one cluster's members. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PatroniClient {
    http: reqwest::Client,
    settings: ClientSettings,
}

impl PatroniClient {
    /// Builds the client.
    ///
    /// # Errors
    /// When the CA file, the client certificate or its key cannot be read or parsed.
    pub fn new(settings: ClientSettings) -> anyhow::Result<PatroniClient> {
        crate::tls::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.timeout)
            .timeout(settings.timeout)
            // Patroni never redirects; following one would let a peer point us anywhere.
            .redirect(reqwest::redirect::Policy::none())
            // The members are addressed directly; an environment proxy would change what we see.
            .no_proxy()
            .user_agent(concat!("patroni-raft-exporter/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &settings.ca_file {
            // Parsed by rustls-pki-types first: reqwest's own parser accepts a file with no
            // certificate at all, which would silently trust nothing extra.
            for certificate in crate::tls::load_certificates(path, "CA file")? {
                builder =
                    builder.add_root_certificate(reqwest::Certificate::from_der(&certificate)?);
            }
        }
        match (&settings.cert_file, &settings.key_file) {
            (Some(cert_file), Some(key_file)) => {
                let mut pem = crate::tls::read_pem_file(cert_file, "client certificate")?;
                crate::tls::load_certificates(cert_file, "client certificate")?;
                let key = crate::tls::load_private_key(key_file, settings.key_password.as_ref())?;
                pem.push(b'\n');
                pem.extend_from_slice(crate::tls::private_key_pem(&key)?.as_bytes());
                let identity = reqwest::Identity::from_pem(&pem).map_err(|_| {
                    anyhow::anyhow!(
                        "client certificate {} and key {} do not form a usable identity",
                        cert_file.display(),
                        key_file.display()
                    )
                })?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => anyhow::bail!("a client certificate needs both a certificate file and a key file"),
        }
        if settings.insecure_skip_verify {
            builder = builder.danger_accept_invalid_certs(true);
        }
        Ok(PatroniClient {
            http: builder.build()?,
            settings,
        })
    }

    /// `GET {base}/cluster`.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn cluster(&self, base: &Url) -> Result<ClusterView, PatroniError> {
        let body = self.get(&join(base, "cluster")).await?;
        parse_cluster(&body)
    }

    /// `GET {base}/history`.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn history(&self, base: &Url) -> Result<Vec<HistoryEntry>, PatroniError> {
        let body = self.get(&join(base, "history")).await?;
        parse_history(&body)
    }

    /// `GET {api_url}`: a member's own `/patroni`, at the URL it advertises.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn member_status(&self, api_url: &Url) -> Result<MemberStatus, PatroniError> {
        let body = self.get(api_url).await?;
        parse_member_status(&body)
    }

    /// One bounded GET; returns the body of a 200 answer.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, PatroniError> {
        let deadline = self.settings.timeout;
        // reqwest's own timeout covers the body too; this outer one makes the bound a property
        // of this function rather than of a builder setting far away.
        tokio::time::timeout(deadline, self.get_unbounded(url))
            .await
            .map_err(|_| PatroniError::Timeout(deadline))?
    }

    async fn get_unbounded(&self, url: &Url) -> Result<Vec<u8>, PatroniError> {
        let mut request = self.http.get(url.clone());
        if let Some(auth) = &self.settings.basic_auth {
            request = request.basic_auth(&auth.username, Some(auth.password.expose()));
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| self.classify(&error))?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            return Err(PatroniError::HttpStatus(status.as_u16()));
        }
        let cap = self.settings.max_body_bytes;
        if response
            .content_length()
            .is_some_and(|length| length > cap as u64)
        {
            return Err(PatroniError::BodyTooLarge(cap));
        }
        let mut body = Vec::with_capacity(4096);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.classify(&error))?
        {
            if body.len() + chunk.len() > cap {
                return Err(PatroniError::BodyTooLarge(cap));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn classify(&self, error: &reqwest::Error) -> PatroniError {
        if error.is_timeout() {
            return PatroniError::Timeout(self.settings.timeout);
        }
        let chain = error_chain(error);
        // rustls' messages: "invalid peer certificate: UnknownIssuer", "received fatal
        // alert: CertificateRequired" (TLS 1.3 refuses a missing client certificate after
        // the handshake, so it surfaces on the first read), "HandshakeFailure".
        let lower = chain.to_ascii_lowercase();
        if ["certificate", "tls", "handshake", "fatal alert"]
            .iter()
            .any(|needle| lower.contains(needle))
        {
            return PatroniError::Tls(chain);
        }
        if error.is_connect() {
            return PatroniError::Connect(chain);
        }
        PatroniError::Transport(chain)
    }
}

/// reqwest's top-level message is generic ("error sending request"); the cause is in the chain.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `base` joined with an endpoint, whether or not `base` ends in `/`.
fn join(base: &Url, endpoint: &str) -> Url {
    let mut url = base.clone();
    let path = format!("{}/{endpoint}", base.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url
}

/// The REST base of a member from its `api_url` (`http://host:8008/patroni` → `http://host:8008/`).
pub fn base_of(api_url: &Url) -> Url {
    let mut base = api_url.clone();
    base.set_path("/");
    base.set_query(None);
    base.set_fragment(None);
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_handles_trailing_slashes_and_prefixes() {
        let base = Url::parse("http://127.0.0.11:8008").unwrap();
        assert_eq!(
            join(&base, "cluster").as_str(),
            "http://127.0.0.11:8008/cluster"
        );
        let base = Url::parse("https://proxy/pg/").unwrap();
        assert_eq!(join(&base, "history").as_str(), "https://proxy/pg/history");
    }

    #[test]
    fn base_of_api_url() {
        let api = Url::parse("http://127.0.0.12:8008/patroni").unwrap();
        assert_eq!(base_of(&api).as_str(), "http://127.0.0.12:8008/");
    }
}
