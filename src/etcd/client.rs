//! The HTTP side of the etcd source: bounded requests to one member's JSON gateway, the auth
//! token, and refusals classified.
//!
//! Every request ends by a deadline: the client's timeout from the moment it is made, or the
//! caller's `deadline` when that comes first (the poller passes its poll's). The bound covers
//! everything the request needs: authenticating when no token is held, the request, and one
//! new token and retry after an `invalid auth token` answer. Bodies are read against a byte
//! cap ([`crate::http::read_body`]).
//!
//! Auth: with a user and password configured, the client authenticates once per endpoint and
//! keeps the token, sent as the `Authorization` header as Patroni does. One token per
//! endpoint rather than per cluster, so that a member that hangs while authenticating delays
//! only its own requests. The token and the password are [`Secret`]s: never in `Debug`, logs
//! or errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use tokio::time::Instant;
use url::Url;

use super::error::EtcdError;
use super::model::{
    grpc_code, parse_alarms, parse_gateway_error, parse_health, parse_lease_time_to_live,
    parse_member_list, parse_range, parse_status, parse_token, parse_versions, prefix_range_end,
    Alarm, EndpointStatus, Health, LeaseTimeToLive, MemberList, RangeAnswer, Versions,
};
use crate::error_kind::ErrorKind;
use crate::http::{
    connection_refused, read_body, transport_failure, BodyError, TlsFiles, TlsSettings, Transports,
};
use crate::secret::Secret;

/// How to reach one etcd cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// The members' client URLs (`http://10.0.0.1:2379`), as Patroni's `etcd3.hosts`.
    pub endpoints: Vec<Url>,
    pub tls: TlsSettings,
    /// The etcd user to authenticate as, when etcd auth is on; with `password`.
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// Bodies larger than this are refused (`body_too_large`).
    pub max_body_bytes: usize,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            endpoints: Vec::new(),
            tls: TlsSettings::default(),
            username: None,
            password: None,
            max_body_bytes: 4 * 1024 * 1024,
        }
    }
}

/// An answer and how long its request took, from sending it to the end of its body (not
/// counting an authentication before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed<T> {
    pub value: T,
    pub round_trip: Duration,
}

/// A client for one etcd cluster's members. Cheap to clone: clones share the HTTP client
/// and the tokens.
#[derive(Clone)]
pub struct EtcdClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// Shared with every cluster of the same TLS set-up and timeout ([`Transports`]).
    http: Arc<reqwest::Client>,
    settings: ClientSettings,
    timeout: Duration,
    /// One token slot per endpoint origin; the slot's lock is held while authenticating, so
    /// that concurrent requests to one endpoint authenticate once.
    tokens: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Slot>>>>>,
}

/// What a token slot holds once authentication was tried.
enum Slot {
    Token(Secret),
    /// etcd answered that authentication is not enabled: no token is needed.
    AuthDisabled,
}

impl std::fmt::Debug for EtcdClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("EtcdClient")
            .field("settings", &self.inner.settings)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// Whether a request carries the token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Authorize {
    /// Never (`/health`, `/version`, authenticate itself).
    No,
    /// When a user is configured.
    Yes,
    /// When a user is configured and a token can be had; sent without one when
    /// authenticating failed for another reason than the credentials (no leader: etcd
    /// 3.4 and 3.5 answer `Status` to anyone).
    IfPossible,
}

/// One answer: its HTTP status and body.
struct Answer {
    body: Vec<u8>,
    round_trip: Duration,
}

impl EtcdClient {
    /// Builds the client, reading the TLS files `settings` names on this thread (from async
    /// code, call it in `spawn_blocking`, as the Patroni client pool does).
    ///
    /// # Errors
    /// When a TLS file cannot be read or parsed, an endpoint URL carries credentials or is
    /// not http(s), or only one of user name and password is set.
    pub fn new(settings: ClientSettings, timeout: Duration) -> anyhow::Result<EtcdClient> {
        EtcdClient::sharing(settings, timeout, &Transports::default())
    }

    /// [`EtcdClient::new`] on the transport of `transports` for its TLS set-up and timeout
    /// (a fleet's clusters share one: [`Transports`] says why); the tokens stay its own.
    ///
    /// # Errors
    /// As [`EtcdClient::new`].
    pub fn sharing(
        settings: ClientSettings,
        timeout: Duration,
        transports: &Transports,
    ) -> anyhow::Result<EtcdClient> {
        for endpoint in &settings.endpoints {
            check_endpoint(endpoint).map_err(|error| anyhow::anyhow!("{error}"))?;
        }
        if settings.username.is_some() != settings.password.is_some() {
            anyhow::bail!("an etcd user needs both a user name and a password");
        }
        let files = TlsFiles::read(&settings.tls, &crate::capped_file::read_small)?;
        let http = transports.get(&settings.tls, &files, timeout)?;
        Ok(EtcdClient {
            inner: Arc::new(Inner {
                http,
                settings,
                timeout,
                tokens: Mutex::default(),
            }),
        })
    }

    /// The settings the client was built with (its endpoints).
    pub fn settings(&self) -> &ClientSettings {
        &self.inner.settings
    }

    /// The HTTP client every request goes through, for the bench floor (benches/floor.rs):
    /// the same requests without the parsing.
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// The bound of one request when the caller's deadline is later.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// `POST /v3/maintenance/status` `{}`: the member's own view, timed.
    ///
    /// # Errors
    /// Any [`EtcdError`]; [`EtcdError::Forbidden`] for a user that may not ask (etcd
    /// 3.6.0–3.6.9: root only).
    pub async fn status(
        &self,
        endpoint: &Url,
        deadline: Instant,
    ) -> Result<Timed<EndpointStatus>, EtcdError> {
        let answer = self
            .post(
                endpoint,
                "v3/maintenance/status",
                Bytes::from_static(b"{}"),
                Authorize::IfPossible,
                deadline,
            )
            .await?;
        Ok(Timed {
            value: parse_status(&answer.body)?,
            round_trip: answer.round_trip,
        })
    }

    /// `POST /v3/cluster/member/list`. `linearizable` asks the leader for the list (etcd
    /// 3.5+; 3.4 ignores it and answers from its own); without it the member answers from
    /// its own copy, even when it has no leader.
    ///
    /// # Errors
    /// Any [`EtcdError`].
    pub async fn member_list(
        &self,
        endpoint: &Url,
        linearizable: bool,
        deadline: Instant,
    ) -> Result<MemberList, EtcdError> {
        let body = if linearizable {
            Bytes::from_static(br#"{"linearizable":true}"#)
        } else {
            Bytes::from_static(b"{}")
        };
        let answer = self
            .post(
                endpoint,
                "v3/cluster/member/list",
                body,
                Authorize::Yes,
                deadline,
            )
            .await?;
        parse_member_list(&answer.body)
    }

    /// `POST /v3/maintenance/alarm` `{"action":"GET"}`: the active alarms. The only action
    /// this client ever sends.
    ///
    /// # Errors
    /// Any [`EtcdError`].
    pub async fn alarms(&self, endpoint: &Url, deadline: Instant) -> Result<Vec<Alarm>, EtcdError> {
        let answer = self
            .post(
                endpoint,
                "v3/maintenance/alarm",
                Bytes::from_static(br#"{"action":"GET"}"#),
                Authorize::Yes,
                deadline,
            )
            .await?;
        parse_alarms(&answer.body)
    }

    /// `POST /v3/kv/range` over every key starting with `prefix`. `serializable` reads the
    /// member's own copy without asking the leader (it answers without a leader, maybe
    /// stale); otherwise the read is linearizable.
    ///
    /// # Errors
    /// Any [`EtcdError`]; [`EtcdError::Forbidden`] when the user may not read the prefix.
    pub async fn range_prefix(
        &self,
        endpoint: &Url,
        prefix: &[u8],
        serializable: bool,
        deadline: Instant,
    ) -> Result<RangeAnswer, EtcdError> {
        use base64::Engine;
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let mut body = serde_json::json!({
            "key": encode(prefix),
            "range_end": encode(&prefix_range_end(prefix)),
        });
        if serializable {
            body["serializable"] = serde_json::Value::Bool(true);
        }
        let answer = self
            .post(
                endpoint,
                "v3/kv/range",
                Bytes::from(body.to_string()),
                Authorize::Yes,
                deadline,
            )
            .await?;
        parse_range(&answer.body)
    }

    /// `POST /v3/lease/timetolive` `{"ID": lease}`: the seconds the lease has left.
    ///
    /// # Errors
    /// Any [`EtcdError`].
    pub async fn lease_time_to_live(
        &self,
        endpoint: &Url,
        lease: i64,
        deadline: Instant,
    ) -> Result<LeaseTimeToLive, EtcdError> {
        let answer = self
            .post(
                endpoint,
                "v3/lease/timetolive",
                Bytes::from(format!(r#"{{"ID":"{lease}"}}"#)),
                Authorize::Yes,
                deadline,
            )
            .await?;
        parse_lease_time_to_live(&answer.body)
    }

    /// `GET /health` (200 or 503): whether the member has a leader and serves. Needs no
    /// user: the fallback when `Status` is refused.
    ///
    /// # Errors
    /// Any [`EtcdError`].
    pub async fn health(&self, endpoint: &Url, deadline: Instant) -> Result<Health, EtcdError> {
        let answer = self
            .send(
                endpoint,
                "health",
                None,
                None,
                &[200, 503],
                self.bound(deadline),
            )
            .await?;
        parse_health(&answer.body)
    }

    /// `GET /version`: the member's and the cluster's versions.
    ///
    /// # Errors
    /// Any [`EtcdError`].
    pub async fn version(&self, endpoint: &Url, deadline: Instant) -> Result<Versions, EtcdError> {
        let answer = self
            .send(
                endpoint,
                "version",
                None,
                None,
                &[200],
                self.bound(deadline),
            )
            .await?;
        parse_versions(&answer.body)
    }

    /// When a request made now must end: the caller's deadline or the client's timeout from
    /// now, the earlier.
    fn bound(&self, deadline: Instant) -> Instant {
        deadline.min(Instant::now() + self.inner.timeout)
    }

    /// `request`, failing as a timeout at the earlier of the caller's deadline and the
    /// client's timeout from now. A plain function over tokio's `Timeout`: an `async fn`
    /// would hold the request's future twice (the argument, and the value it awaits).
    fn bounded<T>(
        &self,
        deadline: Instant,
        request: impl std::future::Future<Output = Result<T, EtcdError>>,
    ) -> impl std::future::Future<Output = Result<T, EtcdError>> {
        let started = Instant::now();
        let bound = self.bound(deadline);
        tokio::time::timeout_at(bound, request).map(move |answer| {
            answer.unwrap_or_else(|_| {
                Err(EtcdError::Timeout(bound.saturating_duration_since(started)))
            })
        })
    }

    /// One POST of `body`, with the token as `authorize` says; one new token and one retry
    /// when the token is refused as invalid.
    async fn post(
        &self,
        endpoint: &Url,
        path: &str,
        body: Bytes,
        authorize: Authorize,
        deadline: Instant,
    ) -> Result<Answer, EtcdError> {
        let bound = self.bound(deadline);
        if self.inner.settings.username.is_none() {
            // No token to get: the request alone, bounded by its own timeout (one timer, as
            // every Patroni request has; the poll's deadline adds one per poll, not per
            // request).
            return self
                .send(endpoint, path, Some(body), None, &[200], bound)
                .await;
        }
        // Without a leader, authenticating (a Raft proposal) waits for one until etcd's own
        // request timeout (7 s on 3.4.23): a request that may go without a token gives it
        // half the time left, so that the member still says it has no leader.
        let patience = {
            let now = Instant::now();
            now + bound.saturating_duration_since(now) / 2
        };
        self.bounded(deadline, async {
            let token = if authorize == Authorize::IfPossible {
                tokio::time::timeout_at(patience, self.token(endpoint, authorize, None))
                    .await
                    .unwrap_or(Ok(None))
            } else {
                self.token(endpoint, authorize, None).await
            };
            let token = match token {
                Ok(token) => token,
                Err(error)
                    if authorize == Authorize::IfPossible && error.kind() != ErrorKind::Auth =>
                {
                    None
                }
                Err(error) => return Err(error),
            };
            let first = self
                .send(
                    endpoint,
                    path,
                    Some(body.clone()),
                    token.as_ref(),
                    &[200],
                    bound,
                )
                .await;
            match (first, token) {
                (Err(EtcdError::InvalidToken(_)), Some(refused)) => {
                    let fresh = self.token(endpoint, authorize, Some(&refused)).await?;
                    self.send(endpoint, path, Some(body), fresh.as_ref(), &[200], bound)
                        .await
                }
                (answer, _) => answer,
            }
        })
        .await
    }

    /// The token to send to `endpoint`: none without a configured user or for requests
    /// that never carry one; the one held, unless it is `refused`; else a new one.
    async fn token(
        &self,
        endpoint: &Url,
        authorize: Authorize,
        refused: Option<&Secret>,
    ) -> Result<Option<Secret>, EtcdError> {
        let settings = &self.inner.settings;
        let (Some(user), Some(password)) = (&settings.username, &settings.password) else {
            return Ok(None);
        };
        if authorize == Authorize::No {
            return Ok(None);
        }
        let slot = {
            let mut tokens = self
                .inner
                .tokens
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            Arc::clone(tokens.entry(origin(endpoint)).or_default())
        };
        let mut held = slot.lock().await;
        match held.as_ref() {
            Some(Slot::AuthDisabled) => return Ok(None),
            Some(Slot::Token(current)) if refused != Some(current) => {
                return Ok(Some(current.clone()))
            }
            _ => *held = None,
        }
        let body = zeroize::Zeroizing::new(
            serde_json::json!({ "name": user, "password": password.expose() })
                .to_string()
                .into_bytes(),
        );
        let answer = self
            .send(
                endpoint,
                "v3/auth/authenticate",
                Some(Bytes::copy_from_slice(&body)),
                None,
                &[200],
                // The callers' bound ends it sooner when theirs is earlier.
                Instant::now() + self.inner.timeout,
            )
            .await;
        let answer = match answer {
            // A user configured for a cluster without auth: requests go without a token.
            Err(EtcdError::Refused { message, .. })
                if message.contains("authentication is not enabled") =>
            {
                *held = Some(Slot::AuthDisabled);
                return Ok(None);
            }
            other => other?,
        };
        let token = parse_token(&answer.body)?;
        *held = Some(Slot::Token(token.clone()));
        Ok(Some(token))
    }

    /// One request, failing as a timeout at `bound` (reqwest's own timer, which covers the
    /// body too): a POST of `body` or a GET, with `token`; a status outside `accepted` is a
    /// refusal, read from etcd's error document.
    async fn send(
        &self,
        endpoint: &Url,
        path: &str,
        body: Option<Bytes>,
        token: Option<&Secret>,
        accepted: &[u16],
        bound: Instant,
    ) -> Result<Answer, EtcdError> {
        check_endpoint(endpoint)?;
        let url = join(endpoint, path);
        let mut request = match body {
            Some(body) => self
                .inner
                .http
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body),
            None => self.inner.http.get(url),
        };
        if let Some(token) = token {
            let mut value = reqwest::header::HeaderValue::from_str(token.expose())
                .map_err(|_| EtcdError::Decode("the auth token is not a header value".into()))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let started = Instant::now();
        let allowed = bound.saturating_duration_since(started);
        let mut response = request
            .timeout(allowed)
            .send()
            .await
            .map_err(|error| classify(error, allowed))?;
        let status = response.status().as_u16();
        let cap = self.inner.settings.max_body_bytes;
        let body = read_body(&mut response, cap)
            .await
            .map_err(|error| match error {
                BodyError::TooLarge => EtcdError::BodyTooLarge(cap),
                BodyError::Transport(error) => classify(error, allowed),
            })?;
        if !accepted.contains(&status) {
            return Err(refusal(status, &body));
        }
        Ok(Answer {
            body,
            round_trip: started.elapsed(),
        })
    }
}

/// A failed request's error, a timeout after `allowed`.
fn classify(error: reqwest::Error, allowed: Duration) -> EtcdError {
    match transport_failure(&error) {
        ErrorKind::Timeout => EtcdError::Timeout(allowed),
        ErrorKind::Tls => EtcdError::Tls(Arc::new(error)),
        ErrorKind::Connect if connection_refused(&error) => {
            EtcdError::ConnectionRefused(Arc::new(error))
        }
        ErrorKind::Connect => EtcdError::Connect(Arc::new(error)),
        _ => EtcdError::Transport(Arc::new(error)),
    }
}

/// What etcd's gateway answers (400, plain text) to every `/v3/` request made with a client
/// certificate that has a CommonName, when it runs with `--client-cert-auth` and auth is on
/// (`embed/serve.go`; real 3.4.23 answer: `etcd-3.4/auth-gateway-common-name.txt`).
const GATEWAY_REFUSES_COMMON_NAME: &str = "CommonName of client sending a request against gateway";

/// What a refused request's body says: etcd's error document classified by its gRPC code
/// and message, or the HTTP status with the start of the body.
///
/// The gateway's refusal of a client certificate with a CommonName is an authentication
/// failure (`auth`): the exporter's certificate is refused until it is replaced, `/health`
/// (not under `/v3/`) still answers, and only `auth` falls back to it.
fn refusal(status: u16, body: &[u8]) -> EtcdError {
    let Some(error) = parse_gateway_error(body) else {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)])
            .trim()
            .to_owned();
        if status == 400 && text.starts_with(GATEWAY_REFUSES_COMMON_NAME) {
            return EtcdError::Unauthenticated(format!(
                "{text} (the client certificate has a CommonName: etcd's gateway takes one \
                 without while auth is on)"
            ));
        }
        return EtcdError::Refused {
            status,
            code: None,
            message: text,
        };
    };
    let message = error.text().to_owned();
    if error.code == grpc_code::UNAUTHENTICATED
        || message.contains("invalid auth token")
        || message.contains("revision of auth store is old")
    {
        EtcdError::InvalidToken(message)
    } else if error.code == grpc_code::PERMISSION_DENIED || message.contains("permission denied") {
        EtcdError::Forbidden(message)
    } else if message.contains("user name is empty")
        || message.contains("authentication failed")
        || message.contains("user name not found")
    {
        EtcdError::Unauthenticated(message)
    } else {
        EtcdError::Refused {
            status,
            code: Some(error.code),
            message,
        }
    }
}

/// An endpoint the client may use: http(s), with no user or password in the URL (they would
/// show in every error, which names the URL).
fn check_endpoint(endpoint: &Url) -> Result<(), EtcdError> {
    if !matches!(endpoint.scheme(), "http" | "https") {
        return Err(EtcdError::Endpoint(format!(
            "{}: not an http or https URL",
            endpoint.scheme()
        )));
    }
    if !endpoint.username().is_empty() || endpoint.password().is_some() {
        return Err(EtcdError::Endpoint(
            "an endpoint URL must not carry a user or password".into(),
        ));
    }
    Ok(())
}

/// The key of an endpoint's token: scheme, host and port.
fn origin(endpoint: &Url) -> String {
    endpoint.origin().ascii_serialization()
}

/// `endpoint` joined with `path`, whether or not it ends in `/`.
fn join(endpoint: &Url, path: &str) -> Url {
    let mut url = endpoint.clone();
    let joined = format!("{}/{path}", endpoint.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.set_query(None);
    url.set_fragment(None);
    url
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::fake::{FakeEtcd, Reply};
    use crate::fixture;

    const PASSWORD: &str = "s3cret-pw";

    fn client_for(settings: ClientSettings, timeout: Duration) -> EtcdClient {
        EtcdClient::new(settings, timeout).unwrap()
    }

    fn plain(timeout: Duration) -> EtcdClient {
        client_for(ClientSettings::default(), timeout)
    }

    fn with_user(max_body_bytes: usize) -> EtcdClient {
        client_for(
            ClientSettings {
                username: Some("patroni-ro".into()),
                password: Some(Secret::new(PASSWORD)),
                max_body_bytes,
                ..ClientSettings::default()
            },
            Duration::from_secs(5),
        )
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    fn serve_3_4(fake: &FakeEtcd) {
        for (path, file) in [
            ("/v3/maintenance/status", "status-e1.json"),
            ("/v3/cluster/member/list", "member-list.json"),
            ("/v3/maintenance/alarm", "alarm-nospace.json"),
            ("/v3/kv/range", "range-patroni.json"),
            ("/v3/lease/timetolive", "timetolive-leader.json"),
            ("/health", "health.json"),
            ("/version", "version.json"),
        ] {
            fake.route(path, Reply::ok(fixture(&format!("etcd-3.4/{file}"))));
        }
    }

    #[tokio::test]
    async fn every_request_is_the_read_only_one_it_should_be() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        let client = plain(Duration::from_secs(5));
        let url = fake.url();
        let status = client.status(&url, soon()).await.unwrap();
        assert!(status.value.is_leader() && status.round_trip < Duration::from_secs(5));
        assert_eq!(
            client
                .member_list(&url, true, soon())
                .await
                .unwrap()
                .members
                .len(),
            3
        );
        assert_eq!(client.alarms(&url, soon()).await.unwrap().len(), 1);
        let range = client
            .range_prefix(&url, b"/service/capdemo/", false, soon())
            .await
            .unwrap();
        assert_eq!(range.kvs.len(), 10);
        let lease = client
            .lease_time_to_live(&url, 8_115_383_331_663_444_237, soon())
            .await
            .unwrap();
        assert_eq!(lease.ttl, 28);
        assert!(client.health(&url, soon()).await.unwrap().healthy);
        assert_eq!(client.version(&url, soon()).await.unwrap().server, "3.4.23");
        client
            .range_prefix(&url, b"/service/capdemo/", true, soon())
            .await
            .unwrap();
        client.member_list(&url, false, soon()).await.unwrap();
        let seen: Vec<(String, String, String)> = fake
            .requests()
            .into_iter()
            .map(|r| (r.method, r.path, r.body))
            .collect();
        let expected = [
            ("POST", "/v3/maintenance/status", "{}"),
            ("POST", "/v3/cluster/member/list", r#"{"linearizable":true}"#),
            ("POST", "/v3/maintenance/alarm", r#"{"action":"GET"}"#),
            (
                "POST",
                "/v3/kv/range",
                r#"{"key":"L3NlcnZpY2UvY2FwZGVtby8=","range_end":"L3NlcnZpY2UvY2FwZGVtbzA="}"#,
            ),
            ("POST", "/v3/lease/timetolive", r#"{"ID":"8115383331663444237"}"#),
            ("GET", "/health", ""),
            ("GET", "/version", ""),
            (
                "POST",
                "/v3/kv/range",
                r#"{"key":"L3NlcnZpY2UvY2FwZGVtby8=","range_end":"L3NlcnZpY2UvY2FwZGVtbzA=","serializable":true}"#,
            ),
            ("POST", "/v3/cluster/member/list", "{}"),
        ]
        .map(|(m, p, b)| (m.to_owned(), p.to_owned(), b.to_owned()));
        assert_eq!(seen, expected);
        assert!(fake.requests().iter().all(|r| r.authorization.is_none()));
    }

    /// A timeout that came after 300 ms (the earlier of deadline and timeout), well before
    /// the later one.
    fn assert_timed_out_at_300ms(error: &EtcdError, started: Instant) {
        let took = started.elapsed();
        assert_eq!(error.kind(), ErrorKind::Timeout, "{error:?}");
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn a_hanging_endpoint_fails_by_the_earlier_of_deadline_and_timeout() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        fake.route("/v3/maintenance/status", Reply::Hang);
        fake.route("/health", Reply::Hang);
        // The caller's deadline comes first.
        let client = plain(Duration::from_secs(30));
        let started = Instant::now();
        let error = client
            .status(&fake.url(), started + Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_timed_out_at_300ms(&error, started);
        // The client's timeout comes first.
        let client = plain(Duration::from_millis(300));
        let started = Instant::now();
        let error = client
            .health(&fake.url(), started + Duration::from_secs(30))
            .await
            .unwrap_err();
        assert_timed_out_at_300ms(&error, started);
    }

    #[tokio::test]
    async fn an_endless_or_large_body_stops_at_the_cap() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        fake.route("/v3/kv/range", Reply::EndlessBody);
        fake.route("/v3/maintenance/status", Reply::ok(vec![b' '; 70_000]));
        let plain = client_for(
            ClientSettings {
                max_body_bytes: 64 * 1024,
                ..ClientSettings::default()
            },
            Duration::from_secs(5),
        );
        let error = plain
            .range_prefix(&fake.url(), b"/p/", false, soon())
            .await
            .unwrap_err();
        assert!(matches!(error, EtcdError::BodyTooLarge(65536)), "{error:?}");
        let error = plain.status(&fake.url(), soon()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BodyTooLarge);
    }

    #[tokio::test]
    async fn the_token_is_reused_and_renewed_once_when_refused() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        fake.require_auth("patroni-ro", PASSWORD);
        let client = with_user(1 << 20);
        let url = fake.url();
        for _ in 0..3 {
            client
                .range_prefix(&url, b"/service/capdemo/", false, soon())
                .await
                .unwrap();
        }
        client.status(&url, soon()).await.unwrap();
        assert_eq!(
            fake.count("/v3/auth/authenticate"),
            1,
            "one token for every request"
        );
        let sent: Vec<Option<String>> = fake
            .requests()
            .into_iter()
            .filter(|r| r.path != "/v3/auth/authenticate")
            .map(|r| r.authorization)
            .collect();
        assert_eq!(sent, vec![Some("faketoken1.1".to_owned()); 4]);
        // A clone shares the token.
        client.clone().alarms(&url, soon()).await.unwrap();
        assert_eq!(fake.count("/v3/auth/authenticate"), 1);
        // The token expires: refused once, a new one, the request again.
        fake.expire_tokens();
        client.member_list(&url, true, soon()).await.unwrap();
        assert_eq!(fake.count("/v3/auth/authenticate"), 2);
        let last: Vec<Option<String>> = fake
            .requests()
            .iter()
            .rev()
            .take(3)
            .map(|r| r.authorization.clone())
            .collect();
        assert_eq!(
            last,
            [
                Some("faketoken2.2".into()),
                None,
                Some("faketoken1.1".into())
            ],
            "retry with the new token, the authenticate, the refused request"
        );
        // GET /health and /version never carry it.
        client.health(&url, soon()).await.unwrap();
        assert_eq!(fake.requests().last().unwrap().authorization, None);
    }

    #[tokio::test]
    async fn a_token_refused_twice_is_an_auth_error_after_one_renewal() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        fake.route(
            "/v3/kv/range",
            Reply::Answer(401, fixture("etcd-3.4/auth-range-invalid-token.json")),
        );
        fake.route(
            "/v3/auth/authenticate",
            Reply::ok(fixture("etcd-3.4/auth-authenticate.json")),
        );
        let client = with_user(1 << 20);
        let error = client
            .range_prefix(&fake.url(), b"/p/", false, soon())
            .await
            .unwrap_err();
        assert!(matches!(error, EtcdError::InvalidToken(_)), "{error:?}");
        assert_eq!(error.kind(), ErrorKind::Auth);
        assert_eq!(fake.count("/v3/auth/authenticate"), 2);
        assert_eq!(fake.count("/v3/kv/range"), 2);
    }

    #[tokio::test]
    async fn status_goes_without_a_token_when_none_can_be_had_for_want_of_a_leader() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        fake.route(
            "/v3/auth/authenticate",
            Reply::Answer(503, fixture("etcd-3.4/no-quorum-timetolive.json")),
        );
        let client = with_user(1 << 20);
        let url = fake.url();
        client.status(&url, soon()).await.unwrap();
        assert_eq!(fake.requests().last().unwrap().authorization, None);
        // Other requests need the token: the reason there is none is the error.
        let error = client.alarms(&url, soon()).await.unwrap_err();
        assert_eq!(
            error.describe(),
            "http status 503 (code 14): etcdserver: no leader"
        );
        assert_eq!(fake.count("/v3/maintenance/alarm"), 0);
    }

    #[tokio::test]
    async fn status_waits_half_its_time_for_a_token_that_does_not_come() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        fake.route("/v3/auth/authenticate", Reply::Hang);
        let client = with_user(1 << 20);
        let started = Instant::now();
        let status = client
            .status(&fake.url(), started + Duration::from_secs(2))
            .await
            .unwrap();
        let took = started.elapsed();
        assert!(status.value.is_leader());
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert_eq!(fake.requests().last().unwrap().authorization, None);
        // A request that needs the token waits for it until the deadline.
        let started = Instant::now();
        let error = client
            .alarms(&fake.url(), started + Duration::from_millis(300))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Timeout);
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn a_user_for_a_cluster_without_auth_authenticates_once() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        fake.route(
            "/v3/auth/authenticate",
            Reply::Answer(
                400,
                br#"{"error":"etcdserver: authentication is not enabled","message":"etcdserver: authentication is not enabled","code":9}"#.to_vec(),
            ),
        );
        let client = with_user(1 << 20);
        for _ in 0..3 {
            client.alarms(&fake.url(), soon()).await.unwrap();
        }
        assert_eq!(fake.count("/v3/auth/authenticate"), 1);
        assert_eq!(fake.count("/v3/maintenance/alarm"), 3);
    }

    #[tokio::test]
    async fn the_password_and_the_token_never_show() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        serve_3_4(&fake);
        fake.require_auth("patroni-ro", "another password");
        let client = with_user(1 << 20);
        let error = client.status(&fake.url(), soon()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Auth, "{error:?}");
        assert!(
            error.describe().contains("authentication failed"),
            "{}",
            error.describe()
        );
        fake.require_auth("patroni-ro", PASSWORD);
        client
            .range_prefix(&fake.url(), b"/p/", false, soon())
            .await
            .unwrap();
        let token = fake
            .requests()
            .last()
            .unwrap()
            .authorization
            .clone()
            .unwrap();
        for shown in [
            format!("{client:?}"),
            format!("{:?}", client.settings()),
            format!("{error:?}"),
            error.describe(),
        ] {
            assert!(!shown.contains(PASSWORD), "{shown}");
            assert!(!shown.contains(&token), "{shown}");
        }
        assert!(format!("{client:?}").contains("Secret(<redacted>)"));
    }

    #[tokio::test]
    async fn refusals_are_classified() {
        let fake = FakeEtcd::start("127.0.0.1").await;
        let client = plain(Duration::from_secs(5));
        let url = fake.url();
        let refuse = |path: &str, status: u16, file: &str| {
            fake.route(path, Reply::Answer(status, fixture(file)));
        };
        refuse(
            "/v3/maintenance/status",
            403,
            "etcd-3.6/auth-status-permission-denied.json",
        );
        let error = client.status(&url, soon()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Forbidden, "{error:?}");
        assert_eq!(error.describe(), "forbidden: etcdserver: permission denied");
        refuse("/v3/kv/range", 503, "etcd-3.4/no-quorum-range.json");
        let error = client
            .range_prefix(&url, b"/p/", false, soon())
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::HttpStatus);
        assert_eq!(
            error.describe(),
            "http status 503 (code 14): etcdserver: request timed out"
        );
        refuse("/v3/lease/timetolive", 503, "etcd-3.5/no-quorum-range.json");
        let error = client
            .lease_time_to_live(&url, 1, soon())
            .await
            .unwrap_err();
        assert!(
            matches!(error, EtcdError::Refused { code: Some(14), .. }),
            "{error:?}"
        );
        refuse(
            "/v3/cluster/member/list",
            400,
            "etcd-3.4/auth-range-no-token.json",
        );
        let error = client.member_list(&url, true, soon()).await.unwrap_err();
        assert!(matches!(error, EtcdError::Unauthenticated(_)), "{error:?}");
        let error = client.alarms(&url, soon()).await.unwrap_err();
        assert_eq!(error.describe(), "http status 404: Not Found");
        fake.route("/version", Reply::ok(b"{\"etcdserver\": 3}".to_vec()));
        assert_eq!(
            client.version(&url, soon()).await.unwrap_err().kind(),
            ErrorKind::Decode
        );
        // /health answers 503 with its body when unhealthy.
        refuse("/health", 503, "etcd-3.4/no-quorum-health.json");
        assert!(!client.health(&url, soon()).await.unwrap().healthy);
        // A client certificate with a CommonName, refused by the gateway: auth, not a status.
        refuse(
            "/v3/maintenance/status",
            400,
            "etcd-3.4/auth-gateway-common-name.txt",
        );
        let error = client.status(&url, soon()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Auth, "{error:?}");
        assert!(
            error
                .describe()
                .contains("the client certificate has a CommonName"),
            "{}",
            error.describe()
        );
        // The same words with another status, or under a JSON document, are not it.
        fake.route(
            "/v3/maintenance/status",
            Reply::Answer(403, fixture("etcd-3.4/auth-gateway-common-name.txt")),
        );
        let error = client.status(&url, soon()).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::HttpStatus, "{error:?}");
    }

    #[tokio::test]
    async fn the_real_3_5_1_refusals_are_classified() {
        // Each with the HTTP status real etcd 3.5.1 sent it with (tests/fixtures/etcd-3.5.1).
        let fake = FakeEtcd::start("127.0.0.1").await;
        let client = plain(Duration::from_secs(5));
        let url = fake.url();
        let refuse = |path: &str, status: u16, file: &str| {
            fake.route(
                path,
                Reply::Answer(status, fixture(&format!("etcd-3.5.1/{file}"))),
            );
        };
        let range = || client.range_prefix(&url, b"/service/capdemo/", false, soon());
        for (status, file, kind, described) in [
            (
                503,
                "no-quorum-range.json",
                ErrorKind::HttpStatus,
                "http status 503 (code 14): etcdserver: request timed out",
            ),
            (
                400,
                "error-invalid-argument.json",
                ErrorKind::HttpStatus,
                "http status 400 (code 3): illegal base64 data at input byte 0",
            ),
            (
                400,
                "auth-range-no-token.json",
                ErrorKind::Auth,
                "auth: etcdserver: user name is empty",
            ),
            (
                401,
                "auth-range-invalid-token.json",
                ErrorKind::Auth,
                "auth: etcdserver: invalid auth token",
            ),
            (
                403,
                "auth-range-permission-denied.json",
                ErrorKind::Forbidden,
                "forbidden: etcdserver: permission denied",
            ),
        ] {
            refuse("/v3/kv/range", status, file);
            let error = range().await.unwrap_err();
            assert_eq!(
                (error.kind(), error.describe().as_str()),
                (kind, described),
                "{file}"
            );
        }
        refuse("/v3/cluster/member/list", 503, "no-quorum-member-list.json");
        let error = client.member_list(&url, true, soon()).await.unwrap_err();
        assert!(
            matches!(
                error,
                EtcdError::Refused {
                    status: 503,
                    code: Some(14),
                    ..
                }
            ),
            "{error:?}"
        );
        refuse("/v3/lease/timetolive", 503, "no-quorum-timetolive.json");
        let error = client
            .lease_time_to_live(&url, 1, soon())
            .await
            .unwrap_err();
        assert_eq!(
            error.describe(),
            "http status 503 (code 14): etcdserver: no leader"
        );
        refuse("/v3/maintenance/alarm", 500, "no-quorum-alarm.json");
        let error = client.alarms(&url, soon()).await.unwrap_err();
        assert!(
            matches!(
                error,
                EtcdError::Refused {
                    status: 500,
                    code: Some(2),
                    ..
                }
            ),
            "{error:?}"
        );
        // /health answers 503 with its reason.
        for (file, reason) in [
            ("no-quorum-health.json", "RAFT NO LEADER"),
            ("alarm-nospace-health.json", "ALARM NOSPACE"),
        ] {
            refuse("/health", 503, file);
            let health = client.health(&url, soon()).await.unwrap();
            assert_eq!((health.healthy, health.reason.as_str()), (false, reason));
        }
        // A wrong password, as the user's client sees it.
        refuse(
            "/v3/auth/authenticate",
            400,
            "auth-authenticate-wrong-password.json",
        );
        refuse("/v3/maintenance/alarm", 200, "alarm-none.json");
        let error = with_user(1 << 20).alarms(&url, soon()).await.unwrap_err();
        assert!(matches!(error, EtcdError::Unauthenticated(_)), "{error:?}");
        assert!(error.describe().contains("invalid user ID or password"));
    }

    #[tokio::test]
    async fn a_closed_port_is_a_refused_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        drop(listener);
        let error = plain(Duration::from_secs(5))
            .status(&url, soon())
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Refused, "{error:?}");
    }

    #[test]
    fn settings_are_checked() {
        let with_endpoint = |url: &str| ClientSettings {
            endpoints: vec![Url::parse(url).unwrap()],
            ..ClientSettings::default()
        };
        let error = EtcdClient::new(
            with_endpoint("http://root:pw@127.0.0.1:2379"),
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("must not carry") && !error.contains("pw@"),
            "{error}"
        );
        assert!(EtcdClient::new(
            with_endpoint("unix:///run/etcd.sock"),
            Duration::from_secs(1)
        )
        .is_err());
        assert!(EtcdClient::new(
            with_endpoint("https://127.0.0.1:2379"),
            Duration::from_secs(1)
        )
        .is_ok());
        let half = ClientSettings {
            username: Some("u".into()),
            ..ClientSettings::default()
        };
        assert!(EtcdClient::new(half, Duration::from_secs(1)).is_err());
        assert_eq!(
            join(&Url::parse("http://h:2379/prefix/").unwrap(), "v3/kv/range").as_str(),
            "http://h:2379/prefix/v3/kv/range"
        );
    }
}
