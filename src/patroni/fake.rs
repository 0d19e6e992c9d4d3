//! An in-process fake Patroni REST member (feature `testkit`) that answers like the real one:
//! HTTP/1.0, no `Content-Length`, body delimited by closing the connection. It serves
//! captured documents, or misbehaves on purpose. The one fake member of the project: the
//! integration tests and `fleet-sim` (thousands of them) use it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// The request heads a fake keeps (the latest ones).
const MAX_RECORDED_REQUESTS: usize = 1000;

/// How the fake answers a request for a path.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with this JSON body, like Patroni.
    Json(Vec<u8>),
    /// This status line code with a short body.
    Status(u16),
    /// Accept and never answer.
    Hang,
    /// Headers, then a body that never ends, as fast as the client reads.
    EndlessBody,
    /// Headers, then one byte per second.
    SlowBody,
    /// Header lines for ever.
    EndlessHeaders,
    /// A redirect to another location.
    Redirect(String),
    /// These bytes as they are (status line, headers and body), each part 20 ms after the
    /// one before so that the client reads it as a chunk of its own, then the end.
    Raw(Vec<&'static str>),
    /// This reply, after this delay (a slow member or link).
    Delayed(Duration, Box<Reply>),
}

/// What the fake saw: each request's head, how many were in flight at most, and over https
/// how many TLS handshakes were full and how many resumed a session (fleet-sim counts them
/// to show whether the exporter resumes).
#[derive(Default)]
pub struct Seen {
    pub requests: Mutex<Vec<String>>,
    in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub full_handshakes: AtomicUsize,
    pub resumed_handshakes: AtomicUsize,
    /// Every request since the start, by path (`requests` keeps only the latest): fleet-sim
    /// counts what the exporter and the bench's floor ask.
    pub paths: Mutex<HashMap<String, usize>>,
}

/// A running fake member. Dropping it stops the listener.
pub struct FakePatroni {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    pub seen: Arc<Seen>,
    scheme: &'static str,
    task: tokio::task::JoinHandle<()>,
}

impl FakePatroni {
    /// Starts a fake on `ip` (any port) with no routes (every path answers 404).
    pub async fn start(ip: &str) -> FakePatroni {
        FakePatroni::start_with(ip, None).await
    }

    /// Starts a fake that speaks https with `tls` (e.g. requiring client certificates).
    pub async fn start_tls(ip: &str, tls: Arc<rustls::ServerConfig>) -> FakePatroni {
        FakePatroni::start_with(ip, Some(tls)).await
    }

    async fn start_with(ip: &str, tls: Option<Arc<rustls::ServerConfig>>) -> FakePatroni {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind fake patroni");
        FakePatroni::serve(listener, tls)
    }

    /// A fake on a listener the caller bound (e.g. a simulator that must know every
    /// address before it writes the documents naming them); https when `tls` is given.
    pub fn serve(listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>) -> FakePatroni {
        let addr = listener.local_addr().expect("bound listener");
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let seen: Arc<Seen> = Arc::default();
        let shared = routes.clone();
        let shared_seen = seen.clone();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let task = tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        // EMFILE and the like (a simulated fleet): back off, do not spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let routes = shared.clone();
                let seen = shared_seen.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => {
                            let _ = answer(stream, routes, seen).await;
                        }
                        Some(config) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(config);
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let resumed = stream.get_ref().1.handshake_kind()
                                    == Some(rustls::HandshakeKind::Resumed);
                                let count = if resumed {
                                    &seen.resumed_handshakes
                                } else {
                                    &seen.full_handshakes
                                };
                                count.fetch_add(1, Ordering::Relaxed);
                                let _ = answer(stream, routes, seen).await;
                            }
                        }
                    }
                });
            }
        });
        FakePatroni {
            addr,
            routes,
            seen,
            scheme,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The request heads received so far.
    pub fn requests(&self) -> Vec<String> {
        self.seen.requests.lock().unwrap().clone()
    }

    /// Sets the reply for `path` (e.g. `/cluster`).
    pub fn route(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_owned(), reply);
    }
}

impl Drop for FakePatroni {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    seen: Arc<Seen>,
) -> std::io::Result<()> {
    let now = seen.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    seen.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let result = answer_inner(&mut stream, routes, &seen).await;
    seen.in_flight.fetch_sub(1, Ordering::SeqCst);
    result
}

async fn answer_inner<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    seen: &Seen,
) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 || request.len() > 64 * 1024 {
            return Ok(());
        }
        request.extend_from_slice(&buffer[..read]);
    }
    let text = String::from_utf8_lossy(&request);
    {
        let mut requests = seen.requests.lock().unwrap();
        // Bounded: a simulated fleet answers for hours.
        if requests.len() >= MAX_RECORDED_REQUESTS {
            requests.remove(0);
        }
        requests.push(text.to_string());
    }
    let target = text.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_owned();
    *seen.paths.lock().unwrap().entry(path.clone()).or_default() += 1;
    let mut reply = routes
        .lock()
        .unwrap()
        .get(&path)
        .cloned()
        .unwrap_or(Reply::Status(404));
    while let Reply::Delayed(delay, delayed) = reply {
        tokio::time::sleep(delay).await;
        reply = *delayed;
    }
    match reply {
        Reply::Json(body) => {
            // Python's BaseHTTPRequestHandler sends the server's clock in `Date`.
            let date = httpdate::fmt_http_date(std::time::SystemTime::now());
            stream
                .write_all(format!("HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nDate: {date}\r\nContent-Type: application/json\r\n\r\n").as_bytes())
                .await?;
            stream.write_all(&body).await?;
        }
        Reply::Status(code) => {
            stream
                .write_all(
                    format!(
                        "HTTP/1.0 {code} Error\r\nContent-Type: text/plain\r\n\r\nerror {code}"
                    )
                    .as_bytes(),
                )
                .await?;
        }
        Reply::Hang => {
            // Never answer, but notice when the client gives up (so `in_flight` is exact).
            let mut sink = [0u8; 256];
            let _ = tokio::time::timeout(Duration::from_secs(3600), async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
        }
        Reply::EndlessBody => {
            stream
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[")
                .await?;
            let chunk = vec![b' '; 64 * 1024];
            loop {
                stream.write_all(&chunk).await?;
            }
        }
        Reply::SlowBody => {
            stream
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
                .await?;
            loop {
                stream.write_all(b" ").await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        Reply::EndlessHeaders => {
            stream.write_all(b"HTTP/1.0 200 OK\r\n").await?;
            loop {
                stream
                    .write_all(b"X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")
                    .await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        Reply::Raw(parts) => {
            for part in parts {
                tokio::time::sleep(Duration::from_millis(20)).await;
                stream.write_all(part.as_bytes()).await?;
                stream.flush().await?;
            }
        }
        Reply::Redirect(location) => {
            stream
                .write_all(format!("HTTP/1.0 302 Found\r\nLocation: {location}\r\n\r\n").as_bytes())
                .await?;
        }
        Reply::Delayed(..) => unreachable!("delays are waited for above"),
    }
    stream.shutdown().await
}
