//! fleet-sim: N fake Patroni clusters on loopback, for measuring the exporter at scale.
//!
//! Each cluster has 3 members ([`FakePatroni`], the fake the tests use) serving `GET /cluster`,
//! `/patroni` and `/history` the way
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
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use patroni_raft_exporter::patroni::fake::{FakePatroni, Reply};
use patroni_raft_exporter::raft::fake::{healthy_status_pickle, Behaviour, FakeRaftNode};
use patroni_raft_exporter::raft::RaftKey;
use serde_json::Value;
use tokio::net::TcpListener;

const CLUSTER: &str = include_str!("../../tests/fixtures/patroni-4.1.5/01-cluster-from-m0.json");
const MEMBERS: [&str; 3] = [
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m0.json"),
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m1.json"),
    include_str!("../../tests/fixtures/patroni-4.1.5/01-patroni-m2.json"),
];
const HISTORY: &str =
    include_str!("../../tests/fixtures/patroni-4.1.5/05-history-after-failover.json");
const CONFIG: &str = include_str!("../../tests/fixtures/patroni-4.1.5/01-config.json");

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
    let mut members: Vec<FakePatroni> = Vec::with_capacity(args.clusters * 3);
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

        let cluster = cluster_document(&scope, &rest_addrs)?;
        for (member, listener) in rest.into_iter().enumerate() {
            let fake = FakePatroni::serve(listener, None);
            fake.route("/cluster", Reply::Json(cluster.clone()));
            fake.route("/patroni", Reply::Json(member_document(member, &scope)?));
            fake.route("/history", Reply::Json(HISTORY.as_bytes().to_vec()));
            fake.route("/config", Reply::Json(CONFIG.as_bytes().to_vec()));
            fake.route("/liveness", Reply::Status(200));
            fake.route("/readiness", Reply::Status(200));
            members.push(fake);
        }
        for (node, listener) in raft.into_iter().enumerate() {
            let reply = healthy_status_pickle(node, &raft_addrs);
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
        _ = patroni_raft_exporter::app::shutdown_signal() => {}
    }
    drop(keep_alive);
    drop(members);
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

#[cfg(test)]
mod tests {
    use super::*;

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
