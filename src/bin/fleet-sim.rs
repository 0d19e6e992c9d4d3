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
//! Every listener has a port chosen by the kernel: 6 per cluster, so 1000 clusters need
//! 6000 file descriptors plus the open connections (raise `ulimit -n`). Each member (its
//! REST server and its Raft node) has an address of its own in 127.1.0.0/16 ([`member_ip`]),
//! as members of a real fleet have their own hosts: a client keeps per host what a host
//! needs (rustls its TLS sessions, keyed by server name), and one shared 127.0.0.1 would
//! hide how many hosts that is.
//!
//! With `--tls-ca-out`, the REST servers speak https as Patroni's does with a `certfile`:
//! a CA made at start signs one certificate per member (ECDSA P-256, its address as the
//! subject alternative name), each member has a rustls server of its own with its own
//! ticket key (one Patroni process each: a session of one member is worth nothing at
//! another), issuing 2 TLS 1.3 tickets per handshake as Python's `ssl` does
//! (`SSLContext.num_tickets`), and closing the connection after each response, so that every
//! request pays a handshake, full or resumed. `--tls-no-resumption` issues no ticket and keeps
//! no session: every handshake is full (the bench's "without resumption"). `--stats-out`
//! counts the handshakes, full and resumed, of the whole fleet, and its requests by path (the
//! bench compares the exporter's with its floor's).
//!
//! The simulator writes the exporter's `--config.file` (every cluster with its 3 REST URLs,
//! its 3 Raft nodes explicit, the password file and, over https, the CA file), prints `ready`
//! on stdout, and exits by itself after `--duration` (or on SIGINT/SIGTERM).
//!
//! ```sh
//! fleet-sim --clusters 1000 --duration 300s --config-out /tmp/fleet.yml --password-file /tmp/fleet-pw
//! ```

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use patroni_raft_exporter::patroni::fake::{FakePatroni, Reply, Seen};
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
    /// Serve the REST endpoints over https, and write the CA that signed the members'
    /// certificates to this file (the config names it as every cluster's `ca_file`).
    #[arg(long = "tls-ca-out")]
    tls_ca_out: Option<PathBuf>,
    /// Over https, issue no session ticket and keep no session: every handshake is full.
    #[arg(long = "tls-no-resumption", requires = "tls_ca_out")]
    tls_no_resumption: bool,
    /// Write the fleet's handshake counts and requests by path here every second:
    /// `full_handshakes=N resumed_handshakes=M`, then `requests /cluster=N /patroni=N ...`.
    #[arg(long = "stats-out")]
    stats_out: Option<PathBuf>,
}

/// The address of member `k` of the fleet (cluster `k / 3`): 127.1.0.1, 127.1.0.2, ...,
/// 250 to a /24, up to 64 000 members.
fn member_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 1, (k / 250) as u8, (k % 250 + 1) as u8)
}

/// The CA of a TLS fleet, and a rustls server per member.
struct FleetPki {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    resumption: bool,
}

impl FleetPki {
    /// A new CA, written as PEM to `ca_out`.
    fn new(ca_out: &Path, resumption: bool) -> anyhow::Result<FleetPki> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fleet-sim CA");
        std::fs::write(ca_out, params.self_signed(&key)?.pem())
            .with_context(|| format!("writing {}", ca_out.display()))?;
        Ok(FleetPki {
            issuer: rcgen::Issuer::new(params, key),
            resumption,
        })
    }

    /// The server of the member at `ip`: its certificate, its own ticket key.
    fn server(&self, ip: Ipv4Addr) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(ip.into()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, ip.to_string());
        let cert = params.signed_by(&key, &self.issuer)?;
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)?;
        if self.resumption {
            // Stateless tickets, as OpenSSL issues them (2 per handshake, rustls' default).
            config.ticketer = rustls::crypto::ring::Ticketer::new()?;
        } else {
            config.send_tls13_tickets = 0;
            config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        }
        Ok(Arc::new(config))
    }
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
    patroni_raft_exporter::tls::install_crypto_provider();
    let pki = match &args.tls_ca_out {
        Some(path) => Some(FleetPki::new(path, !args.tls_no_resumption)?),
        None => None,
    };
    let scheme = if pki.is_some() { "https" } else { "http" };
    let ca_line = match &args.tls_ca_out {
        Some(path) => format!("    ca_file: {}\n", path.display()),
        None => String::new(),
    };

    let mut keep_alive: Vec<FakeRaftNode> = Vec::with_capacity(args.clusters * 3);
    let mut members: Vec<FakePatroni> = Vec::with_capacity(args.clusters * 3);
    let mut yaml = String::from("# written by fleet-sim\nclusters:\n");
    for index in 0..args.clusters {
        let scope = format!("{}-{index:04}", args.prefix);
        let ips: Vec<Ipv4Addr> = (index * 3..index * 3 + 3).map(member_ip).collect();
        let rest: Vec<TcpListener> = bind_all(&ips).await?;
        let raft: Vec<TcpListener> = bind_all(&ips).await?;
        let rest_addrs: Vec<String> = rest
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<Result<_, _>>()?;
        let raft_addrs: Vec<String> = raft
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<Result<_, _>>()?;

        let cluster = cluster_document(&scope, scheme, &rest_addrs)?;
        for (member, listener) in rest.into_iter().enumerate() {
            let tls = match &pki {
                Some(pki) => Some(pki.server(ips[member])?),
                None => None,
            };
            let fake = FakePatroni::serve(listener, tls);
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
            "  - scope: {scope}\n    patroni_urls: [{}]\n    raft_nodes: [{}]\n    raft_password_file: {}\n    poll_interval: {}\n{ca_line}",
            rest_addrs
                .iter()
                .map(|a| format!("'{scheme}://{a}'"))
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

    if let Some(path) = args.stats_out.clone() {
        let seen: Vec<Arc<Seen>> = members.iter().map(|fake| fake.seen.clone()).collect();
        tokio::spawn(write_stats(path, seen));
    }

    tokio::select! {
        _ = tokio::time::sleep(args.duration) => {}
        _ = patroni_raft_exporter::app::shutdown_signal() => {}
    }
    drop(keep_alive);
    drop(members);
    Ok(())
}

async fn bind_all(ips: &[Ipv4Addr]) -> anyhow::Result<Vec<TcpListener>> {
    let mut listeners = Vec::with_capacity(ips.len());
    for ip in ips {
        listeners.push(
            TcpListener::bind((*ip, 0))
                .await
                .with_context(|| format!("binding a listener on {ip} (raise ulimit -n?)"))?,
        );
    }
    Ok(listeners)
}

/// Every second, the fleet's handshake counts, and its requests by path since the start, into
/// `path` (replaced whole, so a reader never sees half a line):
/// `full_handshakes=N resumed_handshakes=M`, then `requests /cluster=N /patroni=N ...`.
async fn write_stats(path: PathBuf, seen: Vec<Arc<Seen>>) {
    let partial = path.with_extension("partial");
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticks.tick().await;
        let sum = |count: fn(&Seen) -> usize| seen.iter().map(|s| count(s)).sum::<usize>();
        let mut paths: std::collections::BTreeMap<String, usize> = Default::default();
        for member in &seen {
            for (path, count) in member.paths.lock().unwrap().iter() {
                *paths.entry(path.clone()).or_default() += count;
            }
        }
        let by_path: String = paths
            .iter()
            .map(|(path, count)| format!(" {path}={count}"))
            .collect();
        let line = format!(
            "full_handshakes={} resumed_handshakes={}\nrequests{by_path}\n",
            sum(|s| s.full_handshakes.load(Ordering::Relaxed)),
            sum(|s| s.resumed_handshakes.load(Ordering::Relaxed)),
        );
        if std::fs::write(&partial, line).is_ok() {
            let _ = std::fs::rename(&partial, &path);
        }
    }
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
fn cluster_document(scope: &str, scheme: &str, rest_addrs: &[String]) -> anyhow::Result<Vec<u8>> {
    let mut doc: Value = serde_json::from_str(CLUSTER)?;
    doc["scope"] = Value::from(scope);
    let members = doc["members"]
        .as_array_mut()
        .context("members is not an array")?;
    for (member, addr) in members.iter_mut().zip(rest_addrs) {
        member["api_url"] = Value::from(format!("{scheme}://{addr}/patroni"));
        let host = addr
            .rsplit_once(':')
            .map_or(addr.as_str(), |(host, _)| host);
        member["host"] = Value::from(host);
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
            &cluster_document("sim-0007", "http", &addrs).unwrap(),
        )
        .unwrap();
        assert_eq!(cluster.scope.as_deref(), Some("sim-0007"));
        assert_eq!(
            cluster.members[2]
                .api_url
                .as_ref()
                .map(patroni_raft_exporter::patroni::ApiUrl::as_str),
            Some("http://127.0.0.1:5003/patroni")
        );
    }

    #[test]
    fn members_have_addresses_of_their_own() {
        assert_eq!(member_ip(0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(member_ip(249), Ipv4Addr::new(127, 1, 0, 250));
        assert_eq!(member_ip(250), Ipv4Addr::new(127, 1, 1, 1));
        assert_eq!(member_ip(2999), Ipv4Addr::new(127, 1, 11, 250));
    }
}
