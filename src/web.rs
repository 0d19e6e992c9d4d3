//! The exporter's own endpoint security: `--web.config.file` in the format of the Prometheus
//! exporter-toolkit (what `node_exporter --web.config.file` reads), and the listener loop.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.pem          # paths are relative to this file
//!   key_file: server-key.pem
//!   client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
//!   client_ca_file: clients-ca.pem
//!   min_version: TLS12             # or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Without the file the endpoint is plain http without auth, as before. The file is read at
//! start and again on SIGHUP; a file that does not load on SIGHUP is logged and the previous
//! settings stay in force. What the toolkit offers and rustls cannot do (TLS 1.0/1.1, Go
//! cipher suite and curve names, client certificates accepted without verification) is an
//! error rather than silently ignored.
//!
//! The listener is a small accept loop over hyper rather than `axum::serve`, because the
//! latter has no TLS, no handshake or header-read timeout and no connection bound: a peer
//! that opens connections and sends nothing must not exhaust the exporter.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::Engine;
use rustls::server::WebPkiClientVerifier;
use serde::Deserialize;
use sha2::Digest;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections served at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 256;
/// Deadline of a TLS handshake, and of reading a request's headers.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection (keep-alive included) is closed after this long; Prometheus reconnects.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);

/// The file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfigFile {
    pub tls_server_config: Option<TlsServerConfig>,
    pub http_server_config: Option<HttpServerConfig>,
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub client_auth_type: Option<String>,
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub min_version: Option<String>,
    #[serde(default)]
    pub max_version: Option<String>,
    #[serde(default)]
    pub cipher_suites: Vec<String>,
    #[serde(default)]
    pub curve_preferences: Vec<String>,
    #[serde(default)]
    pub prefer_server_cipher_suites: Option<bool>,
    #[serde(default)]
    pub client_allowed_sans: Vec<String>,
}

/// Only `http2: false` is meaningful here (the listener speaks HTTP/1.1).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpServerConfig {
    pub http2: Option<bool>,
}

/// A loaded web configuration: what the listener and the auth check use.
#[derive(Clone, Default)]
pub struct WebConfig {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub users: Option<Arc<Users>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.users.as_ref().map(|users| users.names()))
            .finish()
    }
}

impl WebConfig {
    /// Reads and checks `--web.config.file`; relative paths are taken from its directory.
    ///
    /// # Errors
    /// When the file, a certificate or a key cannot be read, a hash is not bcrypt, or a
    /// setting is not supported.
    pub fn load(path: &Path) -> anyhow::Result<WebConfig> {
        let bytes = crate::capped_file::read_small(path, "web config file")?;
        let file: WebConfigFile = serde_yaml_ng::from_slice(&bytes).map_err(|error| {
            anyhow::anyhow!("parsing web config file {}: {error}", path.display())
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        WebConfig::from_file(&file, base)
            .map_err(|error| anyhow::anyhow!("web config file {}: {error:#}", path.display()))
    }

    /// Builds the configuration from a parsed file, resolving paths against `base`.
    ///
    /// # Errors
    /// As [`WebConfig::load`].
    pub fn from_file(file: &WebConfigFile, base: &Path) -> anyhow::Result<WebConfig> {
        if file.http_server_config.as_ref().and_then(|http| http.http2) == Some(true) {
            tracing::info!("http_server_config.http2 is ignored: the listener serves HTTP/1.1");
        }
        let tls = match &file.tls_server_config {
            Some(tls) => Some(Arc::new(server_config(tls, base)?)),
            None => None,
        };
        let users = if file.basic_auth_users.is_empty() {
            None
        } else {
            Some(Arc::new(Users::new(file.basic_auth_users.clone())?))
        };
        Ok(WebConfig { tls, users })
    }
}

fn server_config(tls: &TlsServerConfig, base: &Path) -> anyhow::Result<rustls::ServerConfig> {
    crate::tls::install_crypto_provider();
    if !tls.cipher_suites.is_empty()
        || !tls.curve_preferences.is_empty()
        || tls.prefer_server_cipher_suites.is_some()
    {
        anyhow::bail!(
            "cipher_suites, curve_preferences and prefer_server_cipher_suites are not supported (rustls' defaults are used)"
        );
    }
    if !tls.client_allowed_sans.is_empty() {
        anyhow::bail!("client_allowed_sans is not supported");
    }
    let version = |name: &Option<String>, default: u8| -> anyhow::Result<u8> {
        match name.as_deref() {
            None | Some("") => Ok(default),
            Some("TLS12") => Ok(12),
            Some("TLS13") => Ok(13),
            Some("TLS10") | Some("TLS11") => {
                anyhow::bail!("TLS 1.0 and 1.1 are not supported (TLS12 or TLS13)")
            }
            Some(other) => anyhow::bail!("unknown TLS version {other:?} (TLS12 or TLS13)"),
        }
    };
    let min = version(&tls.min_version, 12)?;
    let max = version(&tls.max_version, 13)?;
    if min > max {
        anyhow::bail!("min_version is above max_version");
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(number, _)| (min..=max).contains(number))
            .map(|(_, version)| version)
            .collect();
    let builder = rustls::ServerConfig::builder_with_protocol_versions(&versions);
    let client_ca = || -> anyhow::Result<Arc<rustls::RootCertStore>> {
        let path = tls
            .client_ca_file
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("client_auth_type needs client_ca_file"))?;
        let mut roots = rustls::RootCertStore::empty();
        for certificate in crate::tls::load_certificates(&base.join(path), "client CA file")? {
            roots.add(certificate)?;
        }
        Ok(Arc::new(roots))
    };
    let builder = match tls.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" | "" => builder.with_no_client_auth(),
        "RequireAndVerifyClientCert" => {
            builder.with_client_cert_verifier(WebPkiClientVerifier::builder(client_ca()?).build()?)
        }
        "VerifyClientCertIfGiven" => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder(client_ca()?)
                .allow_unauthenticated()
                .build()?,
        ),
        "RequestClientCert" | "RequireAnyClientCert" => anyhow::bail!(
            "client_auth_type {:?} accepts unverified certificates and is not supported; use RequireAndVerifyClientCert or VerifyClientCertIfGiven",
            tls.client_auth_type.as_deref().unwrap_or_default()
        ),
        other => anyhow::bail!("unknown client_auth_type {other:?}"),
    };
    let certificates = crate::tls::load_certificates(&base.join(&tls.cert_file), "cert_file")?;
    let key = crate::tls::load_private_key(&base.join(&tls.key_file), None)?;
    let mut config = builder
        .with_single_cert(certificates, key)
        .map_err(|error| anyhow::anyhow!("cert_file and key_file: {error}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// `basic_auth_users`: user names and bcrypt hashes, with a cache of accepted credentials.
///
/// bcrypt is slow on purpose (tens of milliseconds at cost 10); verifying on every scrape
/// would make `/metrics` slow and an easy CPU sink. Like the exporter-toolkit, a successful
/// check is cached, keyed by a SHA-256 of user, password and hash (never the password
/// itself), so a changed hash or password misses the cache. Unknown users are checked
/// against a dummy hash so the answer takes as long as for a known one.
pub struct Users {
    hashes: BTreeMap<String, String>,
    accepted: Mutex<HashSet<[u8; 32]>>,
}

const MAX_CACHED: usize = 1024;

impl Users {
    /// # Errors
    /// When a hash is not a bcrypt hash.
    pub fn new(hashes: BTreeMap<String, String>) -> anyhow::Result<Users> {
        for (user, hash) in &hashes {
            if !(hash.starts_with("$2") && hash.len() == 60) {
                anyhow::bail!("basic_auth_users: the hash of {user:?} is not a bcrypt hash");
            }
        }
        Ok(Users {
            hashes,
            accepted: Mutex::new(HashSet::new()),
        })
    }

    pub fn names(&self) -> Vec<&str> {
        self.hashes.keys().map(String::as_str).collect()
    }

    /// Whether an `Authorization` header carries valid credentials. Blocking (bcrypt).
    pub fn check(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = authorization.and_then(parse_basic) else {
            return false;
        };
        let Some(hash) = self.hashes.get(&user) else {
            let _ = bcrypt::verify(&password, dummy_hash());
            return false;
        };
        let mut digest = sha2::Sha256::new();
        for part in [user.as_bytes(), password.as_bytes(), hash.as_bytes()] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        let key: [u8; 32] = digest.finalize().into();
        if self.cache().contains(&key) {
            return true;
        }
        let ok = bcrypt::verify(&password, hash).unwrap_or(false);
        if ok {
            let mut cache = self.cache();
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key);
        }
        ok
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.accepted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn dummy_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| bcrypt::hash("not a password", 10).unwrap_or_default())
}

fn parse_basic(value: &HeaderValue) -> Option<(String, String)> {
    let value = value.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The web configuration in force, replaced whole on SIGHUP.
#[derive(Debug, Default)]
pub struct WebState {
    path: Option<PathBuf>,
    current: RwLock<WebConfig>,
}

impl WebState {
    /// Loads `path` (none: plain http without auth).
    ///
    /// # Errors
    /// As [`WebConfig::load`].
    pub fn load(path: Option<&Path>) -> anyhow::Result<WebState> {
        let current = match path {
            Some(path) => WebConfig::load(path)?,
            None => WebConfig::default(),
        };
        Ok(WebState {
            path: path.map(Path::to_path_buf),
            current: RwLock::new(current),
        })
    }

    pub fn current(&self) -> WebConfig {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Re-reads the file and applies it ([`WebState::read_new`], then [`WebState::apply`]).
    ///
    /// # Errors
    /// As [`WebState::read_new`]; the old settings stay.
    pub fn reload(&self) -> anyhow::Result<()> {
        if let Some(new) = self.read_new()? {
            self.apply(new);
        }
        Ok(())
    }

    /// Re-reads the file without applying it, so that a reload can apply it only once
    /// everything else it reads has loaded too; `None` without a file. Turning TLS on or
    /// off needs a restart (the scheme scrapers use would change under them), so such a
    /// change is refused.
    ///
    /// # Errors
    /// When the file does not load or would switch TLS on or off.
    pub fn read_new(&self) -> anyhow::Result<Option<WebConfig>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let new = WebConfig::load(path)?;
        if new.tls.is_some() != self.current().tls.is_some() {
            anyhow::bail!("switching TLS on or off needs a restart; keeping the old web config");
        }
        Ok(Some(new))
    }

    /// Puts `new` ([`WebState::read_new`]) in force.
    pub fn apply(&self, new: WebConfig) {
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = new;
    }
}

/// Adds the basic auth check (when `basic_auth_users` is configured) to every route.
pub fn protect(router: Router, web: Arc<WebState>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(web, require_auth))
}

async fn require_auth(State(web): State<Arc<WebState>>, request: Request, next: Next) -> Response {
    let Some(users) = web.current().users else {
        return next.run(request).await;
    };
    let authorization = request.headers().get(header::AUTHORIZATION).cloned();
    let ok = tokio::task::spawn_blocking(move || users.check(authorization.as_ref()))
        .await
        .unwrap_or(false);
    if ok {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic")],
            "Unauthorized\n",
        )
            .into_response()
    }
}

/// Serves `router` on `listener`, over TLS when the web config has it, until `shutdown`.
/// Bounded: [`MAX_CONNECTIONS`] at once, [`HANDSHAKE_TIMEOUT`] for the TLS handshake and
/// each request's headers, [`CONNECTION_LIFETIME`] per connection.
///
/// # Errors
/// Never for a failing connection (logged at debug); only if accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    web: Arc<WebState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return Ok(()),
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "too many connections; closing");
            continue;
        };
        let tls = web.current().tls;
        let router = router.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let served = tokio::time::timeout(CONNECTION_LIFETIME, async move {
                match tls {
                    Some(config) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(config);
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            Ok(Ok(stream)) => serve_connection(stream, router).await,
                            Ok(Err(error)) => {
                                tracing::debug!(%peer, %error, "TLS handshake failed")
                            }
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                    None => serve_connection(stream, router).await,
                }
            })
            .await;
            if served.is_err() {
                tracing::debug!(%peer, "connection closed after its maximum lifetime");
            }
        });
    }
}

async fn serve_connection<S>(stream: S, router: Router)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt;
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            router.clone().oneshot(request.map(axum::body::Body::new))
        });
    let result = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HANDSHAKE_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_checks_and_caches() {
        let hash = bcrypt::hash("scrape-pass", 4).unwrap();
        let users = Users::new(BTreeMap::from([("prom".to_owned(), hash)])).unwrap();
        let header = |user: &str, password: &str| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            HeaderValue::from_str(&format!("Basic {token}")).unwrap()
        };
        assert!(users.check(Some(&header("prom", "scrape-pass"))));
        assert!(users.check(Some(&header("prom", "scrape-pass"))));
        assert_eq!(users.cache().len(), 1);
        assert!(!users.check(Some(&header("prom", "wrong"))));
        assert!(!users.check(Some(&header("other", "scrape-pass"))));
        assert!(!users.check(None));
        assert!(!users.check(Some(&HeaderValue::from_static("Bearer abc"))));
        assert!(!users.check(Some(&HeaderValue::from_static("Basic !!!"))));
        assert_eq!(users.cache().len(), 1);
        assert!(Users::new(BTreeMap::from([("u".to_owned(), "plain".to_owned())])).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Whatever a client sends as `Authorization`, the check answers no (the hash is of
        /// a password the generator cannot produce) and never panics.
        #[test]
        fn arbitrary_authorization_headers_are_refused(value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let users = test_users();
            if let Ok(header) = HeaderValue::from_bytes(&value) {
                proptest::prop_assert!(!users.check(Some(&header)));
            }
            let token = base64::engine::general_purpose::STANDARD.encode(&value);
            let header = HeaderValue::from_str(&format!("Basic {token}")).unwrap();
            proptest::prop_assert!(!users.check(Some(&header)));
        }
    }

    fn test_users() -> &'static Users {
        static USERS: OnceLock<Users> = OnceLock::new();
        USERS.get_or_init(|| {
            let hash = bcrypt::hash("correct horse battery staple", 4).unwrap();
            Users::new(BTreeMap::from([("prom".to_owned(), hash)])).unwrap()
        })
    }

    #[test]
    fn unsupported_settings_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let path = dir.path().join("web.yml");
            std::fs::write(&path, text).unwrap();
            WebConfig::load(&path)
        };
        assert!(write("basic_auth_users: {}\nunknown: 1\n").is_err());
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.path().join("c.pem"), cert.cert.pem()).unwrap();
        std::fs::write(dir.path().join("k.pem"), cert.signing_key.serialize_pem()).unwrap();
        let tls = "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n";
        let loaded = write(tls).unwrap();
        assert!(loaded.tls.is_some() && loaded.users.is_none());
        for extra in [
            "  min_version: TLS10\n",
            "  client_auth_type: RequireAndVerifyClientCert\n",
            "  client_auth_type: RequireAnyClientCert\n",
            "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "  min_version: TLS13\n  max_version: TLS12\n",
        ] {
            assert!(write(&format!("{tls}{extra}")).is_err(), "{extra}");
        }
        let loaded = write(&format!(
            "{tls}  min_version: TLS13\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: c.pem\n"
        ))
        .unwrap();
        assert!(loaded.tls.is_some());
        assert!(!format!("{loaded:?}").contains("BEGIN"));
    }
}
