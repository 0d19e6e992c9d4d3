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
//! Every listener has a port chosen by the kernel: 6 per cluster (on Raft or etcd), so 1000 clusters need
//! 6000 file descriptors plus the open connections (raise `ulimit -n`). Each member (its
//! REST server and its Raft node or etcd member) has an address of its own in 127.1.0.0/16 ([`member_ip`]),
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
//! With `--etcd-clusters M`, M of the clusters (spread evenly over the fleet) are on etcd v3
//! instead of Raft: in place of the 3 Raft nodes, 3 fake etcd members ([`FakeEtcd`], the fake
//! the unit tests use; plain http) on the members' addresses, answering every request one
//! poll of the exporter makes of a healthy etcd (src/etcd/reading.rs) with the real 3.4.23
//! answers of `tests/fixtures/etcd-3.4/`, rewritten per cluster: `POST
//! /v3/maintenance/status` (member 0 the leader, as e1 is in the capture),
//! `/v3/cluster/member/list` (the members named `SCOPE-e1`… with their own client URLs, so the
//! exporter's listed endpoints are the configured ones), `/v3/maintenance/alarm` (none),
//! `/v3/kv/range` (Patroni's keys under `/service/SCOPE/`: the leader key, one member key per
//! REST member with its `api_url`, `sync`, `failsafe`, `status`, `history`, `config`, as the
//! members' `/cluster` says), `/v3/lease/timetolive` (the leader key's lease), and `GET
//! /health` and `/version`. Their requests are counted by path in `--stats-out` beside the
//! REST members'.
//!
//! The simulator writes the exporter's `--config.file` (every cluster with its 3 REST URLs,
//! its 3 Raft nodes explicit and the password file, or its 3 `etcd_endpoints`, and, over
//! https, the CA file), prints `ready` on stdout, and exits by itself after `--duration` (or
//! on SIGINT/SIGTERM).
//!
//! ```sh
//! fleet-sim --clusters 1000 --etcd-clusters 500 --duration 300s --config-out /tmp/fleet.yml --password-file /tmp/fleet-pw
//! ```

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use patroni_raft_exporter::etcd::fake::{self as fake_etcd, FakeEtcd};
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

/// The real etcd 3.4.23 answers a healthy fleet's etcd members give (e1 the leader).
const ETCD_STATUS: [&str; 3] = [
    include_str!("../../tests/fixtures/etcd-3.4/status-e1.json"),
    include_str!("../../tests/fixtures/etcd-3.4/status-e2.json"),
    include_str!("../../tests/fixtures/etcd-3.4/status-e3.json"),
];
const ETCD_MEMBER_LIST: &str = include_str!("../../tests/fixtures/etcd-3.4/member-list.json");
const ETCD_ALARMS: &str = include_str!("../../tests/fixtures/etcd-3.4/alarm-none.json");
const ETCD_RANGE: &str = include_str!("../../tests/fixtures/etcd-3.4/range-patroni.json");
const ETCD_LEASE: &str = include_str!("../../tests/fixtures/etcd-3.4/timetolive-leader.json");
const ETCD_HEALTH: &str = include_str!("../../tests/fixtures/etcd-3.4/health.json");
const ETCD_VERSION: &str = include_str!("../../tests/fixtures/etcd-3.4/version.json");
/// The prefix of Patroni's keys in the capture (`namespace: /service/`, scope `capdemo`).
const CAPTURED_PREFIX: &str = "/service/capdemo/";

/// A fleet of fake Patroni + Raft clusters on 127.0.0.1.
#[derive(Debug, Parser)]
#[command(name = "fleet-sim")]
struct Args {
    /// Number of clusters (3 members and 3 Raft nodes or etcd members each).
    #[arg(long, default_value_t = 10)]
    clusters: usize,
    /// How many of the clusters are on etcd (3 fake etcd members each) instead of Raft,
    /// spread evenly over the fleet.
    #[arg(long = "etcd-clusters", default_value_t = 0)]
    etcd_clusters: usize,
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
    /// `full_handshakes=N resumed_handshakes=M`, then `requests /cluster=N /patroni=N ...`
    /// (the etcd members' paths among them).
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

/// The fakes of the whole fleet, kept alive until the end.
#[derive(Default)]
struct Fleet {
    members: Vec<FakePatroni>,
    raft_nodes: Vec<FakeRaftNode>,
    etcd_members: Vec<FakeEtcd>,
}

/// What every cluster shares: the Raft key, the members' TLS, and the config lines that
/// follow from them.
struct Shared {
    key: RaftKey,
    pki: Option<FleetPki>,
    scheme: &'static str,
    ca_line: String,
}

async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.etcd_clusters <= args.clusters,
        "--etcd-clusters {} is more than --clusters {}",
        args.etcd_clusters,
        args.clusters
    );
    write_secret(&args.password_file, &args.password)?;
    patroni_raft_exporter::tls::install_crypto_provider();
    let pki = match &args.tls_ca_out {
        Some(path) => Some(FleetPki::new(path, !args.tls_no_resumption)?),
        None => None,
    };
    let shared = Shared {
        key: RaftKey::derive(args.password.as_bytes()),
        scheme: if pki.is_some() { "https" } else { "http" },
        pki,
        ca_line: match &args.tls_ca_out {
            Some(path) => format!("    ca_file: {}\n", path.display()),
            None => String::new(),
        },
    };

    let mut fleet = Fleet::default();
    let mut yaml = String::from("# written by fleet-sim\nclusters:\n");
    for index in 0..args.clusters {
        let on_etcd = on_etcd(index, args.clusters, args.etcd_clusters);
        yaml.push_str(&start_cluster(index, on_etcd, &args, &shared, &mut fleet).await?);
    }
    std::fs::write(&args.config_out, yaml)
        .with_context(|| format!("writing {}", args.config_out.display()))?;
    println!(
        "ready clusters={} etcd_clusters={} listeners={} config={}",
        args.clusters,
        args.etcd_clusters,
        args.clusters * 6,
        args.config_out.display()
    );

    let etcd_members = Arc::new(std::mem::take(&mut fleet.etcd_members));
    if let Some(path) = args.stats_out.clone() {
        let seen: Vec<Arc<Seen>> = fleet.members.iter().map(|fake| fake.seen.clone()).collect();
        tokio::spawn(write_stats(path, seen, etcd_members.clone()));
    }

    tokio::select! {
        _ = tokio::time::sleep(args.duration) => {}
        _ = patroni_raft_exporter::app::shutdown_signal() => {}
    }
    drop(fleet);
    drop(etcd_members);
    Ok(())
}

/// Whether cluster `index` of `clusters` is one of the `on_etcd` spread evenly over them.
fn on_etcd(index: usize, clusters: usize, on_etcd: usize) -> bool {
    (index + 1) * on_etcd / clusters > index * on_etcd / clusters
}

/// Starts cluster `index`: its 3 REST members, and its 3 Raft nodes or, `on_etcd`, its 3
/// etcd members, into `fleet`; its entry of the exporter's config file.
async fn start_cluster(
    index: usize,
    on_etcd: bool,
    args: &Args,
    shared: &Shared,
    fleet: &mut Fleet,
) -> anyhow::Result<String> {
    let scope = format!("{}-{index:04}", args.prefix);
    let scheme = shared.scheme;
    let ips: Vec<Ipv4Addr> = (index * 3..index * 3 + 3).map(member_ip).collect();
    let rest: Vec<TcpListener> = bind_all(&ips).await?;
    let dcs: Vec<TcpListener> = bind_all(&ips).await?;
    let rest_addrs = local_addrs(&rest)?;
    let dcs_addrs = local_addrs(&dcs)?;

    let cluster = cluster_document(&scope, scheme, &rest_addrs)?;
    for (member, listener) in rest.into_iter().enumerate() {
        let tls = match &shared.pki {
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
        fleet.members.push(fake);
    }
    let quoted = |addrs: &[String], scheme: &str| {
        addrs
            .iter()
            .map(|a| format!("'{scheme}{a}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let dcs_lines = if on_etcd {
        let documents = EtcdDocuments::of_cluster(index, &scope, scheme, &rest_addrs, &dcs_addrs)?;
        for (member, listener) in dcs.into_iter().enumerate() {
            fleet.etcd_members.push(documents.serve(member, listener));
        }
        format!("    etcd_endpoints: [{}]\n", quoted(&dcs_addrs, "http://"))
    } else {
        for (node, listener) in dcs.into_iter().enumerate() {
            let reply = healthy_status_pickle(node, &dcs_addrs);
            let (_, fake) =
                FakeRaftNode::serve(listener, Behaviour::Serve(reply), Some(shared.key.clone()))?;
            fleet.raft_nodes.push(fake);
        }
        format!(
            "    raft_nodes: [{}]\n    raft_password_file: {}\n",
            quoted(&dcs_addrs, ""),
            args.password_file.display()
        )
    };
    Ok(format!(
        "  - scope: {scope}\n    patroni_urls: [{}]\n{dcs_lines}    poll_interval: {}\n{}",
        quoted(&rest_addrs, &format!("{scheme}://")),
        args.poll_interval,
        shared.ca_line,
    ))
}

fn local_addrs(listeners: &[TcpListener]) -> anyhow::Result<Vec<String>> {
    Ok(listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<_, _>>()?)
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

/// Every second, the fleet's handshake counts, and its requests by path since the start (REST
/// members' and etcd members'), into
/// `path` (replaced whole, so a reader never sees half a line):
/// `full_handshakes=N resumed_handshakes=M`, then `requests /cluster=N /patroni=N ...`.
async fn write_stats(path: PathBuf, seen: Vec<Arc<Seen>>, etcd_members: Arc<Vec<FakeEtcd>>) {
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
        for member in etcd_members.iter() {
            for (path, count) in member.counts() {
                *paths.entry(path).or_default() += count;
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

/// What the 3 etcd members of one cluster answer: the captured 3.4.23 answers with this
/// cluster's id, member names and client URLs, and Patroni's keys under its prefix naming
/// its REST members.
struct EtcdDocuments {
    statuses: [Vec<u8>; 3],
    member_list: Vec<u8>,
    range: Vec<u8>,
    lease: Vec<u8>,
}

impl EtcdDocuments {
    /// The documents of cluster `index` (`scope`), whose REST members listen on `rest_addrs`
    /// (`scheme`) and etcd members on `etcd_addrs`.
    fn of_cluster(
        index: usize,
        scope: &str,
        scheme: &str,
        rest_addrs: &[String],
        etcd_addrs: &[String],
    ) -> anyhow::Result<EtcdDocuments> {
        let captured_id: u64 = serde_json::from_str::<Value>(ETCD_STATUS[0])?["header"]
            ["cluster_id"]
            .as_str()
            .context("no cluster_id in the captured status")?
            .parse()?;
        let cluster_id = (captured_id + index as u64).to_string();
        let rewrite = |text: &str, edit: &dyn Fn(&mut Value) -> anyhow::Result<()>| {
            let mut doc: Value = serde_json::from_str(text)?;
            if doc.get("header").is_some() {
                doc["header"]["cluster_id"] = Value::from(cluster_id.as_str());
            }
            edit(&mut doc)?;
            anyhow::Ok(serde_json::to_vec(&doc)?)
        };
        let status = |member: usize| rewrite(ETCD_STATUS[member], &|_| Ok(()));
        Ok(EtcdDocuments {
            statuses: [status(0)?, status(1)?, status(2)?],
            member_list: rewrite(ETCD_MEMBER_LIST, &|doc| {
                rename_etcd_members(doc, scope, etcd_addrs)
            })?,
            range: rewrite(ETCD_RANGE, &|doc| {
                patroni_keys(doc, scope, &format!("{scheme}://"), rest_addrs)
            })?,
            lease: rewrite(ETCD_LEASE, &|_| Ok(()))?,
        })
    }

    /// Etcd member `member` of the cluster, on `listener`, counting its requests by path.
    fn serve(&self, member: usize, listener: TcpListener) -> FakeEtcd {
        let fake = FakeEtcd::serve(listener);
        fake.forget_requests();
        for (path, body) in [
            ("/v3/maintenance/status", self.statuses[member].clone()),
            ("/v3/cluster/member/list", self.member_list.clone()),
            ("/v3/maintenance/alarm", ETCD_ALARMS.as_bytes().to_vec()),
            ("/v3/kv/range", self.range.clone()),
            ("/v3/lease/timetolive", self.lease.clone()),
            ("/health", ETCD_HEALTH.as_bytes().to_vec()),
            ("/version", ETCD_VERSION.as_bytes().to_vec()),
        ] {
            fake.route(path, fake_etcd::Reply::ok(body));
        }
        fake
    }
}

/// The captured member list (`e1`, `e2`, `e3`, in etcd's order) with member `eK` named
/// `SCOPE-eK` and serving its clients on `etcd_addrs[K - 1]`.
fn rename_etcd_members(doc: &mut Value, scope: &str, etcd_addrs: &[String]) -> anyhow::Result<()> {
    let members = doc["members"]
        .as_array_mut()
        .context("members is not an array")?;
    for member in members {
        let name = member["name"].as_str().context("a member without a name")?;
        let number: usize = name.trim_start_matches('e').parse()?;
        let addr = etcd_addrs
            .get(number - 1)
            .context("more captured members than etcd members")?;
        let ip = addr.rsplit_once(':').map_or(addr.as_str(), |(ip, _)| ip);
        member["name"] = Value::from(format!("{scope}-{name}"));
        member["clientURLs"] = Value::from(vec![format!("http://{addr}")]);
        member["peerURLs"] = Value::from(vec![format!("http://{ip}:2380")]);
    }
    Ok(())
}

/// The captured range over Patroni's keys (two members, `pg2` the leader) rewritten for a
/// cluster of the 3 members of the captured `/cluster` (the first the leader) under
/// `/service/SCOPE/`, their `api_url`s at `rest_addrs`: the leader key and its lease, one
/// member key each (the leader's from the captured primary's, the others' from the
/// replica's), `sync`, `failsafe` and `status` naming them; the rest as captured.
fn patroni_keys(
    doc: &mut Value,
    scope: &str,
    scheme: &str,
    rest_addrs: &[String],
) -> anyhow::Result<()> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let names: Vec<String> = serde_json::from_str::<Value>(CLUSTER)?["members"]
        .as_array()
        .context("members is not an array")?
        .iter()
        .filter_map(|m| m["name"].as_str().map(str::to_owned))
        .collect();
    let api_url = |k: usize| format!("{scheme}{}/patroni", rest_addrs[k]);
    let captured: Vec<(String, Value)> = doc["kvs"]
        .as_array()
        .context("kvs is not an array")?
        .iter()
        .map(|kv| {
            let key = String::from_utf8(b64.decode(kv["key"].as_str().unwrap_or_default())?)?;
            anyhow::Ok((key, kv.clone()))
        })
        .collect::<Result<_, _>>()?;
    let template = |suffix: &str| {
        captured
            .iter()
            .find(|(key, _)| key.strip_prefix(CAPTURED_PREFIX) == Some(suffix))
            .map(|(_, kv)| kv.clone())
            .with_context(|| format!("no {suffix} key in the capture"))
    };
    let value_of = |kv: &Value| -> anyhow::Result<Value> {
        Ok(serde_json::from_slice(
            &b64.decode(kv["value"].as_str().unwrap_or_default())?,
        )?)
    };
    let mut kvs: Vec<(String, Value)> = Vec::new();
    let mut push = |suffix: &str, mut kv: Value, value: Option<Vec<u8>>| {
        let key = format!("/service/{scope}/{suffix}");
        kv["key"] = Value::from(b64.encode(&key));
        if let Some(value) = value {
            kv["value"] = Value::from(b64.encode(value));
        }
        kvs.push((key, kv));
    };
    for (key, kv) in &captured {
        let suffix = key.strip_prefix(CAPTURED_PREFIX).unwrap_or(key);
        if matches!(suffix, "config" | "failover" | "initialize") {
            push(suffix, kv.clone(), None);
        }
    }
    // The captured failover's new leader is pg2: here the leader.
    let history = template("history")?;
    let rows = String::from_utf8(b64.decode(history["value"].as_str().unwrap_or_default())?)?;
    let rows = rows.replace("\"pg2\"", &format!("\"{}\"", names[0]));
    push("history", history, Some(rows.into_bytes()));
    push(
        "leader",
        template("leader")?,
        Some(names[0].clone().into_bytes()),
    );
    let (primary, replica) = (template("members/pg2")?, template("members/pg1")?);
    for (k, name) in names.iter().enumerate() {
        let mut kv = if k == 0 {
            primary.clone()
        } else {
            replica.clone()
        };
        let mut value = value_of(&kv)?;
        value["api_url"] = Value::from(api_url(k));
        let host = rest_addrs[k].rsplit_once(':').map_or("", |(ip, _)| ip);
        value["conn_url"] = Value::from(format!("postgres://{host}:5432/postgres"));
        if k > 1 {
            // A lease of its own, as each Patroni member keeps one.
            let lease: u64 = kv["lease"].as_str().unwrap_or_default().parse()?;
            kv["lease"] = Value::from((lease + k as u64 - 1).to_string());
        }
        push(
            &format!("members/{name}"),
            kv,
            Some(serde_json::to_vec(&value)?),
        );
    }
    let failsafe: serde_json::Map<String, Value> = names
        .iter()
        .enumerate()
        .map(|(k, name)| (name.clone(), Value::from(api_url(k))))
        .collect();
    push(
        "failsafe",
        template("failsafe")?,
        Some(serde_json::to_vec(&failsafe)?),
    );
    let sync = serde_json::json!({
        "leader": names[0], "quorum": 0, "sync_standby": names[1..].join(","),
    });
    push("sync", template("sync")?, Some(serde_json::to_vec(&sync)?));
    let mut status = value_of(&template("status")?)?;
    let optime = status["optime"].clone();
    status["slots"] = names.iter().map(|n| (n.clone(), optime.clone())).collect();
    status["retain_slots"] = Value::from(names.clone());
    push(
        "status",
        template("status")?,
        Some(serde_json::to_vec(&status)?),
    );
    kvs.sort_by(|(a, _), (b, _)| a.cmp(b));
    doc["count"] = Value::from(kvs.len().to_string());
    doc["kvs"] = Value::from(kvs.into_iter().map(|(_, kv)| kv).collect::<Vec<_>>());
    Ok(())
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
    fn etcd_answers_name_the_cluster_members_and_endpoints() {
        use patroni_raft_exporter::etcd;
        let rest: Vec<String> = ["127.1.0.4:5001", "127.1.0.5:5002", "127.1.0.6:5003"]
            .map(String::from)
            .to_vec();
        let etcd_addrs: Vec<String> = ["127.1.0.4:6001", "127.1.0.5:6002", "127.1.0.6:6003"]
            .map(String::from)
            .to_vec();
        let docs = EtcdDocuments::of_cluster(1, "sim-0001", "http", &rest, &etcd_addrs).unwrap();
        let statuses: Vec<etcd::EndpointStatus> = docs
            .statuses
            .iter()
            .map(|body| etcd::parse_status(body).unwrap())
            .collect();
        let leaders: Vec<bool> = statuses.iter().map(|s| s.is_leader()).collect();
        assert_eq!(leaders, [true, false, false], "member 0 leads");
        let list = etcd::parse_member_list(&docs.member_list).unwrap();
        assert_eq!(list.header.cluster_id, statuses[0].header.cluster_id);
        let mut listed: Vec<(String, Vec<String>)> = list
            .members
            .into_iter()
            .map(|m| (m.name, m.client_urls))
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                ("sim-0001-e1".into(), vec!["http://127.1.0.4:6001".into()]),
                ("sim-0001-e2".into(), vec!["http://127.1.0.5:6002".into()]),
                ("sim-0001-e3".into(), vec!["http://127.1.0.6:6003".into()]),
            ]
        );
        let prefix = etcd::patroni_prefix("/service", "sim-0001");
        let keys = etcd::parse_patroni_keys(&prefix, &etcd::parse_range(&docs.range).unwrap());
        let leader = keys.leader.unwrap();
        assert_eq!(leader.name, "postgresql-0");
        let lease = etcd::parse_lease_time_to_live(&docs.lease).unwrap();
        assert_eq!(leader.lease, lease.id);
        let members: Vec<(&str, Option<&str>, Option<&str>)> = keys
            .members
            .iter()
            .map(|m| (m.name.as_str(), m.api_url.as_deref(), m.role.as_deref()))
            .collect();
        assert_eq!(
            members,
            [
                (
                    "postgresql-0",
                    Some("http://127.1.0.4:5001/patroni"),
                    Some("primary")
                ),
                (
                    "postgresql-1",
                    Some("http://127.1.0.5:5002/patroni"),
                    Some("replica")
                ),
                (
                    "postgresql-2",
                    Some("http://127.1.0.6:5003/patroni"),
                    Some("replica")
                ),
            ]
        );
        assert_ne!(keys.members[1].lease, keys.members[2].lease);
        let sync = keys.sync.unwrap();
        assert_eq!(
            sync.sync_standby.as_deref(),
            Some("postgresql-1,postgresql-2")
        );
        assert_eq!(keys.failsafe.unwrap().len(), 3);
        assert!(keys.config.is_some());
    }

    #[test]
    fn etcd_clusters_are_spread_over_the_fleet() {
        let half: Vec<bool> = (0..6).map(|i| on_etcd(i, 6, 3)).collect();
        assert_eq!(half, [false, true, false, true, false, true]);
        assert_eq!((0..1000).filter(|&i| on_etcd(i, 1000, 500)).count(), 500);
        assert_eq!((0..7).filter(|&i| on_etcd(i, 7, 2)).count(), 2);
        assert!((0..5).all(|i| on_etcd(i, 5, 5) && !on_etcd(i, 5, 0)));
    }

    #[test]
    fn members_have_addresses_of_their_own() {
        assert_eq!(member_ip(0), Ipv4Addr::new(127, 1, 0, 1));
        assert_eq!(member_ip(249), Ipv4Addr::new(127, 1, 0, 250));
        assert_eq!(member_ip(250), Ipv4Addr::new(127, 1, 1, 1));
        assert_eq!(member_ip(2999), Ipv4Addr::new(127, 1, 11, 250));
    }
}
