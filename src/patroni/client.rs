//! The HTTP side of the Patroni source: bounded requests, classified errors.
//!
//! Patroni's REST server is Python's `BaseHTTPRequestHandler` speaking HTTP/1.0 without
//! `Content-Length`: the body ends when the connection closes. hyper (under reqwest) reads
//! such bodies to the close, so nothing special is needed for that, but it also means a peer
//! can stream for ever. Every request therefore has a total deadline and the body is read in
//! chunks against a byte cap, never with an unbounded `bytes()`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use url::Url;

use super::dynamic_config::{parse_dynamic_config, DynamicConfig};
use super::model::{
    parse_cluster, parse_compared_view, parse_history, parse_member_status, ClusterView,
    ComparedView, HistoryEntry, MemberStatus,
};
use super::PatroniError;
use crate::error_kind::ErrorKind;
use crate::http::{
    build_client, read_body, transport_failure, BodyError, ReadFile, SharedClients, TlsFiles,
    TlsSettings, Transports,
};
use crate::secret::Secret;

/// How requests to one cluster's members are made (the request deadline is the poll's, and
/// given to [`PatroniClient::new`] beside these).
#[derive(Debug, Clone)]
pub struct ClientSettings {
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

impl ClientSettings {
    /// The TLS side of these settings, for the shared HTTP plumbing ([`crate::http`]).
    fn tls(&self) -> TlsSettings {
        TlsSettings {
            ca_file: self.ca_file.clone(),
            insecure_skip_verify: self.insecure_skip_verify,
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            key_password: self.key_password.clone(),
        }
    }
}

/// A client for the REST API of one cluster's members. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PatroniClient {
    http: reqwest::Client,
    settings: ClientSettings,
    /// Deadline of a whole request: connect, headers and body.
    timeout: Duration,
}

impl PatroniClient {
    /// Builds the client, reading the files `settings` names.
    ///
    /// # Errors
    /// When the CA file, the client certificate or its key cannot be read or parsed.
    pub fn new(settings: ClientSettings, timeout: Duration) -> anyhow::Result<PatroniClient> {
        let files = TlsFiles::read(&settings.tls(), &crate::capped_file::read_small)?;
        PatroniClient::with_files(settings, &files, timeout)
    }

    /// Builds the client from the content of the files `settings` names, read by the caller.
    fn with_files(
        settings: ClientSettings,
        files: &TlsFiles,
        timeout: Duration,
    ) -> anyhow::Result<PatroniClient> {
        Ok(PatroniClient {
            http: build_client(&settings.tls(), files, timeout)?,
            settings,
            timeout,
        })
    }

    /// The HTTP client itself: the floor of `scripts/bench.sh fleet` (benches/floor.rs) sends
    /// its bare requests through it, so that both measure the same HTTP and TLS stack.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `GET {base}/cluster`.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn cluster(&self, base: &Url) -> Result<ClusterView, PatroniError> {
        let body = self.get(&join(base, "cluster")).await?;
        parse_cluster(&body)
    }

    /// `GET {base}/cluster`, as far as a member's view is compared ([`ComparedView`]).
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn compared_view(&self, base: &Url) -> Result<ComparedView, PatroniError> {
        let body = self.get(&join(base, "cluster")).await?;
        parse_compared_view(&body)
    }

    /// `GET {base}/history`.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn history(&self, base: &Url) -> Result<Vec<HistoryEntry>, PatroniError> {
        let body = self.get(&join(base, "history")).await?;
        parse_history(&body)
    }

    /// `GET {base}/config`: the dynamic configuration, with Patroni's defaults filled in.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn dynamic_config(&self, base: &Url) -> Result<DynamicConfig, PatroniError> {
        let body = self.get(&join(base, "config")).await?;
        parse_dynamic_config(&body)
    }

    /// `GET {api_url}`: a member's own `/patroni`, at the URL it advertises, with what its
    /// `Date` header says of the member's clock and how long the request took.
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn member_status(&self, api_url: &Url) -> Result<OwnAnswer, PatroniError> {
        let answer = self.get_answer(api_url, &[200]).await?;
        Ok(OwnAnswer {
            clock: answer.clock_offset(),
            round_trip: answer.took,
            status: parse_member_status(&answer.body)?,
        })
    }

    /// `GET {base}/{probe}` of a health endpoint that answers with its status code only
    /// (`liveness`, `readiness`): `true` for 200, `false` for 503.
    ///
    /// # Errors
    /// Any [`PatroniError`]; another status code is [`PatroniError::HttpStatus`].
    pub async fn probe(&self, base: &Url, probe: &str) -> Result<bool, PatroniError> {
        let answer = self.get_answer(&join(base, probe), &[200, 503]).await?;
        Ok(answer.status == 200)
    }

    /// `GET {base}/failsafe`: the members of the failsafe topology, by name (Patroni 3.0+,
    /// only while `failsafe_mode` is on; Patroni answers 502 otherwise).
    ///
    /// # Errors
    /// Any [`PatroniError`]: transport, status, size or decode.
    pub async fn failsafe_members(&self, base: &Url) -> Result<Vec<String>, PatroniError> {
        let body = self.get(&join(base, "failsafe")).await?;
        parse_failsafe(&body)
    }

    /// One bounded GET; returns the body of a 200 answer.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, PatroniError> {
        Ok(self.get_answer(url, &[200]).await?.body)
    }

    /// One bounded GET whose status must be one of `accepted`.
    ///
    /// Bounded by the client's timeout ([`build_client`]'s `timeout`), which reqwest applies
    /// from the connect to the body's last byte and reports as a timeout ([`Self::classify`]).
    /// No second timer around it: one per request is what every request of a poll costs the
    /// runtime's timer wheel, and the poll's deadline already adds one.
    async fn get_answer(&self, url: &Url, accepted: &[u16]) -> Result<Answer, PatroniError> {
        let mut request = self.http.get(url.clone());
        if let Some(auth) = &self.settings.basic_auth {
            request = request.basic_auth(&auth.username, Some(auth.password.expose()));
        }
        let sent = SystemTime::now();
        let started = Instant::now();
        let mut response = request.send().await.map_err(|error| self.classify(error))?;
        let round_trip = started.elapsed();
        let status = response.status().as_u16();
        if !accepted.contains(&status) {
            return Err(PatroniError::HttpStatus(status));
        }
        let date = response
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| httpdate::parse_http_date(text).ok());
        let cap = self.settings.max_body_bytes;
        let body = read_body(&mut response, cap)
            .await
            .map_err(|error| match error {
                BodyError::TooLarge => PatroniError::BodyTooLarge(cap),
                BodyError::Transport(error) => self.classify(error),
            })?;
        Ok(Answer {
            status,
            date,
            sent,
            round_trip,
            took: started.elapsed(),
            body,
        })
    }

    fn classify(&self, error: reqwest::Error) -> PatroniError {
        match transport_failure(&error) {
            ErrorKind::Timeout => PatroniError::Timeout(self.timeout),
            ErrorKind::Tls => PatroniError::Tls(Arc::new(error)),
            ErrorKind::Connect => PatroniError::Connect(Arc::new(error)),
            _ => PatroniError::Transport(Arc::new(error)),
        }
    }
}

/// The HTTP clients of a fleet: one per distinct [`ClientSettings`] and timeout, shared by
/// every cluster with the same ones. Owned by the fleet (and by a `status` run), so that two
/// fleets, or two tests, never share a client.
///
/// Building a client builds its TLS verifier, which loads and parses the system's root
/// certificates: a client per cluster would multiply that CPU at start and that memory by
/// the size of the fleet. Clients are told apart by timeout, body cap, the *content* of the
/// CA file (a changed file on reload gets a new client), insecure mode, and the credentials:
/// the *content* of the client certificate and key, the key passphrase and the basic auth
/// user and password, so that two clusters never share a client that would present one's
/// credentials to the other. Only a SHA-256 of the credentials is kept as the key. The pool
/// holds its clients weakly: a client goes when no poller uses it.
#[derive(Debug, Clone, Default)]
pub struct ClientPool {
    clients: SharedClients<ClientKey, PatroniClient>,
    /// The fleet's bare transports, for the DCS clients that keep state of their own beside
    /// one (etcd's tokens): held here so that they are the fleet's too.
    transports: Transports,
}

/// What tells two clients apart (see [`ClientPool`]): timeout, body cap, CA file digest,
/// insecure mode, credentials digest.
type ClientKey = (Duration, usize, Option<[u8; 32]>, bool, [u8; 32]);

impl ClientPool {
    /// The fleet's bare transports ([`Transports`]).
    pub fn transports(&self) -> &Transports {
        &self.transports
    }

    /// The client for `settings` and `timeout`: the pool's, or a new one. The files it names
    /// (CA, client certificate and key) are read once, and parsed, on the blocking pool, off
    /// the async workers that poll and serve.
    ///
    /// # Errors
    /// When a file cannot be read or parsed ([`PatroniClient::new`]).
    pub async fn client(
        &self,
        settings: &ClientSettings,
        timeout: Duration,
    ) -> anyhow::Result<Arc<PatroniClient>> {
        let pool = self.clone();
        let settings = settings.clone();
        tokio::task::spawn_blocking(move || {
            pool.client_blocking(&settings, timeout, &crate::capped_file::read_small)
        })
        .await
        .map_err(|error| anyhow::anyhow!("building the HTTP client: {error}"))?
    }

    /// [`ClientPool::client`] on this thread, reading the files with `read`: once each, for
    /// the key and, on a miss, for the new client.
    fn client_blocking(
        &self,
        settings: &ClientSettings,
        timeout: Duration,
        read: &ReadFile<'_>,
    ) -> anyhow::Result<Arc<PatroniClient>> {
        let files = TlsFiles::read(&settings.tls(), read)?;
        self.clients
            .get_or_build(client_key(settings, &files, timeout), || {
                PatroniClient::with_files(settings.clone(), &files, timeout)
            })
    }
}

/// The [`ClientKey`] of `settings`, the content of its `files`, and `timeout`.
fn client_key(settings: &ClientSettings, files: &TlsFiles, timeout: Duration) -> ClientKey {
    let ca_digest = files.ca.as_ref().map(|ca| Sha256::digest(&ca.pem).into());
    // Length-prefixed parts, so that no two different settings hash alike.
    let mut credentials = Sha256::new();
    let mut part = |bytes: &[u8]| {
        credentials.update((bytes.len() as u64).to_be_bytes());
        credentials.update(bytes);
    };
    match &files.identity {
        Some((cert, key)) => {
            part(&cert.pem);
            part(&key.pem);
        }
        None => {
            part(b"-");
            part(b"-");
        }
    }
    part(
        settings
            .key_password
            .as_ref()
            .map_or(&b"-"[..], |password| password.expose().as_bytes()),
    );
    match &settings.basic_auth {
        Some(auth) => {
            part(auth.username.as_bytes());
            part(auth.password.expose().as_bytes());
        }
        None => part(b"-"),
    }
    (
        timeout,
        settings.max_body_bytes,
        ca_digest,
        settings.insecure_skip_verify,
        credentials.finalize().into(),
    )
}

/// One answer, with what is needed to read the peer's clock.
struct Answer {
    status: u16,
    /// The `Date` header: the peer's clock, truncated to the second.
    date: Option<SystemTime>,
    /// Our clock when the request was sent, and the time until the headers arrived.
    sent: SystemTime,
    round_trip: Duration,
    /// The whole request: connect (and TLS handshake), request, headers and body.
    took: Duration,
    body: Vec<u8>,
}

/// A member's own `/patroni`, as [`PatroniClient::member_status`] read it.
#[derive(Debug, Clone)]
pub struct OwnAnswer {
    pub status: MemberStatus,
    /// What its `Date` header says of the member's clock.
    pub clock: Option<ClockOffset>,
    /// How long the request took, from the connect to the end of the body (what
    /// `curl -w %{time_total}` reports). It is the very request Patroni's members send one
    /// another in the leader race (`GET /patroni`, `patroni/ha.py`, `fetch_node_status`),
    /// though over the exporter's path to the member rather than theirs.
    pub round_trip: Duration,
}

impl Answer {
    fn clock_offset(&self) -> Option<ClockOffset> {
        ClockOffset::estimate(self.date?, self.sent, self.round_trip)
    }
}

/// How far a member's clock is ahead of ours (negative: behind), read from the `Date` header
/// of its answer.
///
/// The header has a resolution of one second and was written at some moment between our
/// request and its answer. So the member's clock at the middle of the round trip lies in
/// `[date, date + 1 s)` plus or minus half the round trip; the estimate is the middle of that
/// interval and `error_seconds` its half width: 0.5 s + half the round trip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    pub seconds: f64,
    pub error_seconds: f64,
}

impl ClockOffset {
    pub fn estimate(
        date: SystemTime,
        sent: SystemTime,
        round_trip: Duration,
    ) -> Option<ClockOffset> {
        let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64());
        let middle = unix(sent)? + round_trip.as_secs_f64() / 2.0;
        Some(ClockOffset {
            seconds: unix(date)? + 0.5 - middle,
            error_seconds: 0.5 + round_trip.as_secs_f64() / 2.0,
        })
    }
}

/// `/failsafe`: `{"member name": "api_url", ...}`, the names sorted.
pub fn parse_failsafe(body: &[u8]) -> Result<Vec<String>, PatroniError> {
    let document: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)?;
    let mut names: Vec<String> = document.into_iter().map(|(name, _)| name).collect();
    names.sort();
    Ok(names)
}

/// `base` joined with an endpoint, whether or not `base` ends in `/`. The endpoint is pushed
/// onto the copy's path in place: every request of a poll is one such URL, and a path
/// written apart and set (`format!`, `set_path`) was two allocations more.
fn join(base: &Url, endpoint: &str) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    // `…//`: more than one empty segment to drop; joined as text, as below.
    let pushed = match url.path_segments_mut() {
        Ok(_) if base.path().ends_with("//") => false,
        Ok(mut path) => {
            path.pop_if_empty().push(endpoint);
            true
        }
        Err(()) => false,
    };
    if !pushed {
        // A URL that cannot be a base (`mailto:`…, refused by the client's scheme check) or
        // whose path ends in `//`.
        let path = format!("{}/{endpoint}", base.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    url
}

/// The REST base of a member as text, `http://host:8008` of `http://host:8008/patroni`: the
/// URL up to its path, in its own serialization. Two URLs have the same [`base_of`] exactly
/// when they have the same base text; the text is a slice of the URL, so comparing bases or
/// looking one up costs no copy of either.
pub fn base_text(api_url: &Url) -> &str {
    &api_url[..url::Position::BeforePath]
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
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn a_date_header_reads_the_peer_clock_within_its_resolution() {
        let sent = UNIX_EPOCH + Duration::from_secs(1_000_000);
        // The peer said 10 s later, during a 200 ms round trip.
        let offset = ClockOffset::estimate(
            sent + Duration::from_secs(10),
            sent,
            Duration::from_millis(200),
        )
        .unwrap();
        assert!((offset.seconds - 10.4).abs() < 1e-9, "{offset:?}");
        assert!((offset.error_seconds - 0.6).abs() < 1e-9, "{offset:?}");
        let date = httpdate::parse_http_date("Tue, 24 Nov 2026 12:13:26 GMT").unwrap();
        assert!(
            ClockOffset::estimate(date, date, Duration::ZERO)
                .unwrap()
                .seconds
                == 0.5
        );
    }

    #[test]
    fn failsafe_names_the_members() {
        let body = br#"{"postgresql-1": "http://127.0.0.12:8008/patroni", "postgresql-0": "http://127.0.0.11:8008/patroni"}"#;
        assert_eq!(
            parse_failsafe(body).unwrap(),
            ["postgresql-0", "postgresql-1"]
        );
        assert!(parse_failsafe(b"[]").is_err());
        assert!(parse_failsafe(b"").is_err());
    }

    #[test]
    fn join_handles_trailing_slashes_and_prefixes() {
        let base = Url::parse("http://127.0.0.11:8008").unwrap();
        assert_eq!(
            join(&base, "cluster").as_str(),
            "http://127.0.0.11:8008/cluster"
        );
        let base = Url::parse("https://proxy/pg/").unwrap();
        assert_eq!(join(&base, "history").as_str(), "https://proxy/pg/history");
        let base = Url::parse("https://proxy/pg?x=1#f").unwrap();
        assert_eq!(join(&base, "patroni").as_str(), "https://proxy/pg/patroni");
        let base = Url::parse("https://proxy/pg//").unwrap();
        assert_eq!(join(&base, "cluster").as_str(), "https://proxy/pg/cluster");
        let base = Url::parse("http://[::1]:8008/").unwrap();
        assert_eq!(
            join(&base, "liveness").as_str(),
            "http://[::1]:8008/liveness"
        );
    }

    #[test]
    fn base_of_api_url() {
        let api = Url::parse("http://127.0.0.12:8008/patroni").unwrap();
        assert_eq!(base_of(&api).as_str(), "http://127.0.0.12:8008/");
        assert_eq!(base_text(&api), "http://127.0.0.12:8008");
    }

    #[test]
    fn urls_have_the_same_base_text_when_they_have_the_same_base() {
        let urls = [
            "http://127.0.0.12:8008/patroni",
            "http://127.0.0.12:8008/",
            "http://127.0.0.12:8008/cluster?x=1#f",
            "HTTP://127.0.0.12:8008/other",
            "http://127.0.0.12:80/patroni",
            "http://127.0.0.12/patroni",
            "https://127.0.0.12:8008/patroni",
            "http://user:pw@127.0.0.12:8008/patroni",
            "http://[::1]:8008/patroni",
            "http://pg-0.example:8008/patroni",
            "http://PG-0.example:8008/patroni",
        ]
        .map(|url| Url::parse(url).unwrap());
        for a in &urls {
            for b in &urls {
                assert_eq!(
                    base_text(a) == base_text(b),
                    base_of(a) == base_of(b),
                    "{a} {b}"
                );
            }
        }
    }

    #[tokio::test]
    async fn clients_are_shared_by_settings_within_one_pool() {
        let settings = ClientSettings::default;
        let pool = ClientPool::default();
        let a = pool
            .client(&settings(), Duration::from_millis(1234))
            .await
            .unwrap();
        let b = pool
            .client(&settings(), Duration::from_millis(1234))
            .await
            .unwrap();
        let c = pool
            .client(&settings(), Duration::from_millis(4321))
            .await
            .unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        assert!(!std::sync::Arc::ptr_eq(&a, &c));
        let other = ClientPool::default();
        let d = other
            .client(&settings(), Duration::from_millis(1234))
            .await
            .unwrap();
        assert!(!std::sync::Arc::ptr_eq(&a, &d), "pools share nothing");
        drop((a, b));
        let e = pool
            .client(&settings(), Duration::from_millis(1234))
            .await
            .unwrap();
        assert!(!std::sync::Arc::ptr_eq(&d, &e));
        assert_eq!(pool.clients.len(), 2, "the unused client went");
    }

    #[test]
    fn a_client_reads_each_of_its_files_once() {
        const TIMEOUT: Duration = Duration::from_millis(1234);
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let contents = [
            ("ca.pem", ca.cert.pem()),
            ("c.pem", cert.cert.pem()),
            ("k.pem", cert.signing_key.serialize_pem()),
        ]
        .map(|(name, pem)| (dir.path().join(name), pem));
        let write_files = || {
            for (path, pem) in &contents {
                std::fs::write(path, pem).unwrap();
            }
        };
        let files = contents.clone().map(|(path, _)| path);
        let settings = ClientSettings {
            ca_file: Some(files[0].clone()),
            cert_file: Some(files[1].clone()),
            key_file: Some(files[2].clone()),
            ..ClientSettings::default()
        };
        // Each file is gone once read: a second read of it, by any means, would fail.
        let reads = Mutex::new(HashMap::<PathBuf, usize>::new());
        let read_once = |path: &Path, what: &str| {
            *reads.lock().unwrap().entry(path.to_owned()).or_default() += 1;
            let pem = crate::capped_file::read_small(path, what);
            std::fs::remove_file(path).unwrap();
            pem
        };
        let times_read = || files.clone().map(|path| reads.lock().unwrap()[&path]);
        let pool = ClientPool::default();
        // A miss: the key's digest and the new client are made of one read of each file.
        write_files();
        let first = pool
            .client_blocking(&settings, TIMEOUT, &read_once)
            .unwrap();
        assert_eq!(times_read(), [1, 1, 1]);
        assert!(files.iter().all(|path| !path.exists()));
        // A hit reads them again, once, for the key: a file changed since is another client.
        write_files();
        let second = pool
            .client_blocking(&settings, TIMEOUT, &read_once)
            .unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(times_read(), [2, 2, 2]);
    }

    #[tokio::test]
    async fn clients_with_other_credentials_are_never_shared() {
        use crate::patroni::BasicAuth;
        use crate::secret::Secret;
        const TIMEOUT: Duration = Duration::from_millis(1234);
        let pool = ClientPool::default();
        let plain = ClientSettings::default();
        let with_auth = |password: &str| ClientSettings {
            basic_auth: Some(BasicAuth {
                username: "watcher".into(),
                password: Secret::new(password),
            }),
            ..plain.clone()
        };
        let a = pool.client(&plain, TIMEOUT).await.unwrap();
        let b = pool.client(&plain, TIMEOUT).await.unwrap();
        assert!(std::sync::Arc::ptr_eq(&a, &b));
        let c = pool.client(&with_auth("one"), TIMEOUT).await.unwrap();
        let d = pool.client(&with_auth("two"), TIMEOUT).await.unwrap();
        let e = pool.client(&with_auth("one"), TIMEOUT).await.unwrap();
        assert!(!std::sync::Arc::ptr_eq(&a, &c));
        assert!(!std::sync::Arc::ptr_eq(&c, &d));
        assert!(std::sync::Arc::ptr_eq(&c, &e));
        let dir = tempfile::tempdir().unwrap();
        let cert = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let (cert_file, key_file) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert_file, cert.cert.pem()).unwrap();
        std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
        let identity = ClientSettings {
            cert_file: Some(cert_file),
            key_file: Some(key_file),
            ..plain.clone()
        };
        let f = pool.client(&identity, TIMEOUT).await.unwrap();
        assert!(!std::sync::Arc::ptr_eq(&a, &f));
    }
}
