//! fleet-sim: N fake Patroni clusters on loopback, for measuring the exporter at scale.
//!
//! Each cluster has 3 members serving `GET /cluster`, `/patroni` and `/history` the way
//! Patroni's REST server does (HTTP/1.0, no `Content-Length`, body ended by closing the
//! connection), with documents taken from the real Patroni 4.1.5 captures in
//! `tests/fixtures/` (scope and `api_url`s rewritten per cluster), and 3 fake pysyncobj
//! nodes ([`FakeRaftNode`]) speaking the real protocol, encrypted with one Raft password:
//! key exchange, Fernet, zlib, pickle. Their status replies name the other two nodes as
//! partners and node 0 as the leader, as a healthy 0.3.17 cluster does.
//!
//! Every listener is on 127.0.0.1 with a port chosen by the kernel: 6 per cluster, so
//! 1000 clusters need 6000 file descriptors plus the open connections (raise `ulimit -n`).
//! The simulator writes the exporter's `--config.file` (every cluster with its 3 REST URLs,
//! its 3 Raft nodes explicit and the password file), prints `ready` on stdout, and exits by
//! itself after `--duration` (or on SIGINT/SIGTERM).
//!
//! ```sh
//! fleet-sim --clusters 1000 --duration 300s --config-out /tmp/fleet.yml --password-file /tmp/fleet-pw
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use patroni_raft_exporter::raft::fake::{Behaviour, FakeRaftNode};
use patroni_raft_exporter::raft::RaftKey;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CLUSTER: &str = include_str!("../../tests/fixtures/patroni-4.1.5/01-cluster-from-m0.json");
const MEMBERS: [&str; 3] = [
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m0.json"),
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m1.json"),
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m2.json"),
];
const HISTORY: &str =
    include_str!("../../tests/fixtures/patroni-4.1.5/05-history-after-failover.json");

/// A fleet of fake Patroni + Raft clusters on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(name = "fleet-sim")]
struct Args {
    /// Number of clusters (3 members and 3 Raft nodes each).
    #[arg(long, default_value_t = 10)]
    clusters: usize,
    /// Exit after this long.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Where to write the exporter's --config.file.
    #[arg(long = "config-out")]
    config_out: PathBuf,
    /// Where to write the Raft password (mode 0600); the config names this file.
    #[arg(long = "password-file")]
    password_file: PathBuf,
    /// The Raft password of every cluster.
    #[arg(long, default_value = "fleet-raft-pass")]
    password: String,
    /// poll_interval written into the config.
    #[arg(long = "poll-interval", default_value = "10s")]
    poll_interval: String,
    /// Tokio worker threads of the simulator.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Prefix of the cluster names (scopes): PREFIX-0000, PREFIX-0001, ...
    #[arg(long, default_value = "sim")]
    prefix: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let key = RaftKey::derive(args.password.as_bytes());
    write_secret(&args.password_file, &args.password)?;

    let mut keep_alive: Vec<FakeRaftNode> = Vec::with_capacity(args.clusters * 3);
    let mut yaml = String::from("# written by fleet-sim\nclusters:\n");
    for index in 0..args.clusters {
        let scope = format!("{}-{index:04}", args.prefix);
        let rest: Vec<TcpListener> = bind_n(3).await?;
        let raft: Vec<TcpListener> = bind_n(3).await?;
        let rest_addrs: Vec<String> = rest
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<Result<_, _>>()?;
        let raft_addrs: Vec<String> = raft
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<Result<_, _>>()?;

        let cluster = Arc::<[u8]>::from(cluster_document(&scope, &rest_addrs)?);
        let history = Arc::<[u8]>::from(HISTORY.as_bytes());
        for (member, listener) in rest.into_iter().enumerate() {
            let routes = Routes {
                cluster: cluster.clone(),
                patroni: Arc::from(member_document(member, &scope)?),
                history: history.clone(),
            };
            tokio::spawn(serve_rest(listener, Arc::new(routes)));
        }
        for (node, listener) in raft.into_iter().enumerate() {
            let reply = status_pickle(node, &raft_addrs);
            let (_, fake) =
                FakeRaftNode::serve(listener, Behaviour::Serve(reply), Some(key.clone()))?;
            keep_alive.push(fake);
        }

        yaml.push_str(&format!(
            "  - scope: {scope}\n    patroni_urls: [{}]\n    raft_nodes: [{}]\n    raft_password_file: {}\n    poll_interval: {}\n",
            rest_addrs
                .iter()
                .map(|a| format!("'http://{a}'"))
                .collect::<Vec<_>>()
                .join(", "),
            raft_addrs
                .iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(", "),
            args.password_file.display(),
            args.poll_interval,
        ));
    }
    std::fs::write(&args.config_out, yaml)
        .with_context(|| format!("writing {}", args.config_out.display()))?;
    println!(
        "ready clusters={} listeners={} config={}",
        args.clusters,
        args.clusters * 6,
        args.config_out.display()
    );

    tokio::select! {
        _ = tokio::time::sleep(args.duration) => {}
        _ = shutdown_signal() => {}
    }
    drop(keep_alive);
    Ok(())
}

async fn bind_n(n: usize) -> anyhow::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(n);
    for _ in 0..n {
        listeners.push(
            TcpListener::bind("127.0.0.1:0")
                .await
                .context("binding a listener on 127.0.0.1 (raise ulimit -n?)")?,
        );
    }
    Ok(listeners)
}

fn write_secret(path: &PathBuf, password: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    writeln!(file, "{password}")?;
    Ok(())
}

/// The captured `/cluster` with this cluster's scope and member addresses.
fn cluster_document(scope: &str, rest_addrs: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut doc: Value = serde_json::from_str(CLUSTER)?;
    doc["scope"] = Value::from(scope);
    let members = doc["members"]
        .as_array_mut()
        .context("members is not an array")?;
    for (member, addr) in members.iter_mut().zip(rest_addrs) {
        member["api_url"] = Value::from(format!("http://{addr}/patroni"));
        member["host"] = Value::from("127.0.0.1");
    }
    Ok(serde_json::to_vec_pretty(&doc)?)
}

/// The captured `/patroni` of member `index`, with this cluster's scope.
fn member_document(index: usize, scope: &str) -> anyhow::Result<Vec<u8>> {
    let mut doc: Value = serde_json::from_str(MEMBERS[index])?;
    doc["patroni"]["scope"] = Value::from(scope);
    Ok(serde_json::to_vec_pretty(&doc)?)
}

struct Routes {
    cluster: Arc<[u8]>,
    patroni: Arc<[u8]>,
    history: Arc<[u8]>,
}

async fn serve_rest(listener: TcpListener, routes: Arc<Routes>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // EMFILE and the like: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let routes = routes.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), answer(stream, &routes)).await;
        });
    }
}

/// Answers one request like Patroni's `BaseHTTPRequestHandler`: HTTP/1.0, then close.
async fn answer(mut stream: TcpStream, routes: &Routes) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await?;
        if read == 0 || request.len() > 16 * 1024 {
            return Ok(());
        }
        request.extend_from_slice(&buffer[..read]);
    }
    let path = request
        .split(|&b| b == b' ')
        .nth(1)
        .map(|p| p.split(|&b| b == b'?').next().unwrap_or_default())
        .unwrap_or_default();
    let body: Option<&[u8]> = match path {
        b"/cluster" => Some(&routes.cluster),
        b"/patroni" | b"/" => Some(&routes.patroni),
        b"/history" => Some(&routes.history),
        _ => None,
    };
    match body {
        Some(body) => {
            stream
                .write_all(b"HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nContent-Type: application/json\r\n\r\n")
                .await?;
            stream.write_all(body).await?;
        }
        None => {
            stream
                .write_all(b"HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnot found")
                .await?;
        }
    }
    stream.shutdown().await
}

/// A protocol-2 pickle of pysyncobj 0.3.17's status dict for node `index` of `nodes`
/// (node 0 leads), shaped like the captured `enc_leader_patroni_0.3.17` reply: `self` and
/// `leader` are `pysyncobj.node.TCPNode` instances.
fn status_pickle(index: usize, nodes: &[String]) -> Vec<u8> {
    let mut p = Pickle(vec![0x80, 0x02, b'}', b'(']);
    p.str("version");
    p.str("0.3.17");
    p.str("revision");
    p.str("deprecated");
    p.str("self");
    p.tcp_node(&nodes[index]);
    p.str("state");
    p.int(if index == 0 { 2 } else { 0 });
    p.str("leader");
    p.tcp_node(&nodes[0]);
    p.str("has_quorum");
    p.0.push(0x88); // NEWTRUE
    p.str("partner_nodes_count");
    p.int(nodes.len() as i32 - 1);
    for (other, addr) in nodes.iter().enumerate() {
        if other != index {
            p.str(&format!("partner_node_status_server_{addr}"));
            p.int(2);
        }
    }
    for (name, value) in [
        ("readonly_nodes_count", 0),
        ("log_len", 3),
        ("last_applied", 1234),
        ("commit_idx", 1234),
        ("raft_term", 2),
        ("next_node_idx_count", if index == 0 { 2 } else { 0 }),
        ("match_idx_count", if index == 0 { 2 } else { 0 }),
        ("leader_commit_idx", 1234),
        ("uptime", 3600),
        ("self_code_version", 0),
        ("enabled_code_version", 0),
    ] {
        p.str(name);
        p.int(value);
    }
    p.0.extend_from_slice(b"u."); // SETITEMS, STOP
    p.0
}

struct Pickle(Vec<u8>);

impl Pickle {
    fn str(&mut self, s: &str) {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn int(&mut self, value: i32) {
        self.0.push(b'J');
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    fn tcp_node(&mut self, addr: &str) {
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        self.0
            .extend_from_slice(b"cpysyncobj.node\nTCPNode\n)\x81}(");
        self.str("_id");
        self.str(addr);
        self.str("_TCPNode__address");
        self.str(addr);
        self.str("_TCPNode__host");
        self.str(host);
        self.str("_TCPNode__port");
        self.int(port.parse().expect("port"));
        self.0.extend_from_slice(b"ub"); // SETITEMS, BUILD
    }
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use patroni_raft_exporter::raft::pickle::{decode, PickleLimits};
    use patroni_raft_exporter::raft::{status_from_value, RaftState};

    #[test]
    fn status_pickle_decodes_like_a_real_reply() {
        let nodes: Vec<String> = ["127.0.0.1:4001", "127.0.0.1:4002", "127.0.0.1:4003"]
            .map(String::from)
            .to_vec();
        let limits = PickleLimits {
            max_depth: 32,
            max_items: 100_000,
        };
        let leader =
            status_from_value(&decode(&status_pickle(0, &nodes), limits).unwrap()).unwrap();
        assert_eq!(leader.state, RaftState::Leader);
        assert_eq!(leader.self_node, "127.0.0.1:4001");
        assert!(leader.has_quorum);
        let follower =
            status_from_value(&decode(&status_pickle(2, &nodes), limits).unwrap()).unwrap();
        assert_eq!(follower.state, RaftState::Follower);
        let partners: Vec<&str> = follower.partners.iter().map(|p| p.node.as_str()).collect();
        assert_eq!(partners, ["127.0.0.1:4001", "127.0.0.1:4002"]);
    }

    #[test]
    fn documents_carry_the_cluster_addresses() {
        let addrs: Vec<String> = ["127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"]
            .map(String::from)
            .to_vec();
        let cluster = patroni_raft_exporter::patroni::parse_cluster(
            &cluster_document("sim-0007", &addrs).unwrap(),
        )
        .unwrap();
        assert_eq!(cluster.scope.as_deref(), Some("sim-0007"));
        assert_eq!(
            cluster.members[2].api_url.as_deref(),
            Some("http://127.0.0.1:5003/patroni")
        );
    }
}
