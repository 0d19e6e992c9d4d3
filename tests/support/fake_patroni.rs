//! An in-process fake Patroni REST member that answers like the real one: HTTP/1.0, no
//! `Content-Length`, body delimited by closing the connection. It serves captured
//! documents, or misbehaves on purpose.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
}

/// A running fake member. Dropping it stops the listener.
pub struct FakePatroni {
    pub addr: SocketAddr,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakePatroni {
    /// Starts a fake on `ip` (any port) with no routes (every path answers 404).
    pub async fn start(ip: &str) -> FakePatroni {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind fake patroni");
        let addr = listener.local_addr().unwrap();
        let routes: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
        let shared = routes.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let routes = shared.clone();
                tokio::spawn(async move {
                    let _ = answer(stream, routes).await;
                });
            }
        });
        FakePatroni { addr, routes, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

async fn answer(
    mut stream: TcpStream,
    routes: Arc<Mutex<HashMap<String, Reply>>>,
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
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let reply = routes
        .lock()
        .unwrap()
        .get(&path)
        .cloned()
        .unwrap_or(Reply::Status(404));
    match reply {
        Reply::Json(body) => {
            stream
                .write_all(b"HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nContent-Type: application/json\r\n\r\n")
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
            tokio::time::sleep(Duration::from_secs(3600)).await;
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
        Reply::Redirect(location) => {
            stream
                .write_all(format!("HTTP/1.0 302 Found\r\nLocation: {location}\r\n\r\n").as_bytes())
                .await?;
        }
    }
    stream.shutdown().await
}
