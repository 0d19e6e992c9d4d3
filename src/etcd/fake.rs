//! An in-process fake etcd member (tests and feature `testkit`): the JSON gateway's paths
//! answer with captured documents (`tests/fixtures/etcd-*`), or misbehave on purpose (hang,
//! stream for ever), and etcd's auth is imitated closely enough to test the client's token
//! handling: `POST /v3/auth/authenticate` hands out tokens, every other `/v3/` request
//! without one is refused as etcd refuses it (`user name is empty`, 400), and with an
//! unknown or expired one as `invalid auth token` (401).
//!
//! For unit tests and hostile input only; the end-to-end tests run a real etcd.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use url::Url;

/// How the fake answers a path.
#[derive(Clone, Debug)]
pub enum Reply {
    /// This HTTP status with this body.
    Answer(u16, Vec<u8>),
    /// Accept and never answer.
    Hang,
    /// 200, then a body that never ends.
    EndlessBody,
}

impl Reply {
    /// 200 with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply::Answer(200, body.into())
    }
}

/// One request the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRequest {
    /// The client's address and port: one per connection.
    pub peer: SocketAddr,
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub body: String,
}

#[derive(Default)]
struct Shared {
    routes: Mutex<HashMap<String, Reply>>,
    requests: Mutex<Vec<SeenRequest>>,
    /// Requests by path since the start, kept even when `requests` is not.
    by_path: Mutex<BTreeMap<String, usize>>,
    /// Whether each request is kept whole in `requests` (a long-running fleet-sim counts
    /// only: its members answer hundreds of thousands of requests).
    forget_requests: AtomicBool,
    auth: Mutex<Option<Auth>>,
}

struct Auth {
    user: String,
    password: String,
    valid: Vec<String>,
    issued: usize,
}

/// A running fake member. Dropping it stops the listener.
pub struct FakeEtcd {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEtcd {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeEtcd {
    /// Starts a fake on `ip` (any port), with no routes (every path answers 404) and auth
    /// off.
    pub async fn start(ip: &str) -> FakeEtcd {
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .expect("bind fake etcd");
        FakeEtcd::serve(listener)
    }

    /// Starts a fake on `listener` (inside a tokio runtime), with no routes and auth off.
    pub fn serve(listener: tokio::net::TcpListener) -> FakeEtcd {
        let addr = listener.local_addr().expect("bound listener");
        let shared = Arc::new(Shared::default());
        let state = Arc::clone(&shared);
        let router = axum::Router::new().fallback(
            move |ConnectInfo(peer): ConnectInfo<SocketAddr>,
                  method: Method,
                  uri: Uri,
                  headers: HeaderMap,
                  body: Bytes| {
                let state = Arc::clone(&state);
                async move { answer(&state, peer, method, uri, headers, body).await }
            },
        );
        let task = tokio::spawn(async move {
            let service = router.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, service).await;
        });
        FakeEtcd { addr, shared, task }
    }

    /// The client URL of the fake (`http://ip:port`).
    pub fn url(&self) -> Url {
        Url::parse(&format!("http://{}", self.addr)).expect("an address is a URL")
    }

    /// Answers `path` (`/v3/maintenance/status`, `/health`) with `reply` from now on.
    pub fn route(&self, path: &str, reply: Reply) {
        lock(&self.shared.routes).insert(path.to_owned(), reply);
    }

    /// Turns auth on: `user` with `password` gets tokens; every other `/v3/` request needs
    /// one.
    pub fn require_auth(&self, user: &str, password: &str) {
        *lock(&self.shared.auth) = Some(Auth {
            user: user.to_owned(),
            password: password.to_owned(),
            valid: Vec::new(),
            issued: 0,
        });
    }

    /// Forgets every token handed out (as a member restart or the token TTL does).
    pub fn expire_tokens(&self) {
        if let Some(auth) = lock(&self.shared.auth).as_mut() {
            auth.valid.clear();
        }
    }

    /// From now on, counts the requests by path ([`FakeEtcd::counts`]) without keeping them
    /// ([`FakeEtcd::requests`] stays as it is).
    pub fn forget_requests(&self) {
        self.shared.forget_requests.store(true, Ordering::Relaxed);
    }

    /// The requests received so far by path, kept or not.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        lock(&self.shared.by_path).clone()
    }

    /// The requests received so far, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests were made to `path`.
    pub fn count(&self, path: &str) -> usize {
        lock(&self.shared.requests)
            .iter()
            .filter(|request| request.path == path)
            .count()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn json(status: u16, body: impl Into<Vec<u8>>) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).expect("a valid status"))
        .header("content-type", "application/json")
        .body(Body::from(body.into()))
        .expect("a valid response")
}

fn refusal(status: u16, code: u8, message: &str) -> Response {
    json(
        status,
        format!(r#"{{"error":"{message}","message":"{message}","code":{code}}}"#),
    )
}

async fn answer(
    shared: &Shared,
    peer: SocketAddr,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let authorization = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    *lock(&shared.by_path).entry(path.clone()).or_default() += 1;
    if !shared.forget_requests.load(Ordering::Relaxed) {
        lock(&shared.requests).push(SeenRequest {
            peer,
            method: method.to_string(),
            path: path.clone(),
            authorization: authorization.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
    if let Some(refused) = check_auth(shared, &path, authorization.as_deref(), &body) {
        return refused;
    }
    let reply = lock(&shared.routes).get(&path).cloned();
    match reply {
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("Not Found\n"))
            .expect("a valid response"),
        Some(Reply::Answer(status, body)) => json(status, body),
        Some(Reply::Hang) => std::future::pending().await,
        Some(Reply::EndlessBody) => {
            let chunk = Bytes::from(vec![b' '; 16 * 1024]);
            let endless = futures::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
            Response::new(Body::from_stream(endless))
        }
    }
}

/// etcd's auth, imitated: the answer to an authenticate request, or the refusal of a request
/// without a valid token; `None` when the request may go on to its route.
fn check_auth(
    shared: &Shared,
    path: &str,
    authorization: Option<&str>,
    body: &[u8],
) -> Option<Response> {
    let mut auth = lock(&shared.auth);
    let auth = auth.as_mut()?;
    if path == "/v3/auth/authenticate" {
        let request: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        if request["name"] == auth.user.as_str() && request["password"] == auth.password.as_str() {
            auth.issued += 1;
            let token = format!("faketoken{}.{}", auth.issued, auth.issued);
            auth.valid.push(token.clone());
            return Some(json(200, format!(r#"{{"header":{{}},"token":"{token}"}}"#)));
        }
        return Some(refusal(
            400,
            3,
            "etcdserver: authentication failed, invalid user ID or password",
        ));
    }
    if !path.starts_with("/v3/") {
        return None;
    }
    match authorization {
        None => Some(refusal(400, 3, "etcdserver: user name is empty")),
        Some(token) if !auth.valid.iter().any(|valid| valid == token) => {
            Some(refusal(401, 16, "etcdserver: invalid auth token"))
        }
        Some(_) => None,
    }
}
