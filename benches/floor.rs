//! The floor of `scripts/bench.sh fleet`: a bare client that sends the exporter's requests to
//! the same fleet-sim, with the same HTTP stack and nothing else.
//!
//! Per cluster and poll, the requests a poll of a healthy 3-member cluster makes with every
//! collector on (src/poller): `GET /cluster` of the first member (the reader), `/patroni` of
//! every member at its URL, `/cluster` of the two others (their DCS views), `/history` and
//! `/config` of the reader, `/config` of the member in rotation unless it is the reader,
//! `/liveness` and `/readiness` of the member in rotation, and the status of the 3 Raft
//! nodes. The exporter's own reqwest client (`PatroniClient::new`: rustls with its session
//! cache, the `ca_file` of the first cluster, timeouts, no redirect, no proxy, user agent),
//! one client shared by every cluster, the
//! same default tokio runtime; each cluster polls at its own phase of the interval as the
//! exporter's pollers do (the first poll at once). The Raft exchange is the exporter's own
//! ([`query_raw`]): connect, key exchange, status command, reply frame; the handshake's reply
//! is decrypted as the protocol needs, the status reply is not. Bodies are read whole and
//! dropped: no JSON, no pickle, no snapshot, no encoding.
//!
//! ```sh
//! cargo bench --bench floor -- --config FILE --duration 90s
//! ```
//! Prints `ready` when every cluster started its first poll, and at the end the requests
//! made and failed. CPU is measured from outside (`/proc/PID/stat`), as for the exporter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use patroni_raft_exporter::patroni::{ClientSettings, PatroniClient};
use patroni_raft_exporter::raft::{query_raw, QueryLimits, RaftKey};
use serde::Deserialize;

#[derive(Deserialize)]
struct ConfigFile {
    clusters: Vec<Cluster>,
}

#[derive(Deserialize)]
struct Cluster {
    patroni_urls: Vec<String>,
    raft_nodes: Vec<String>,
    raft_password_file: std::path::PathBuf,
    poll_interval: String,
    #[serde(default)]
    ca_file: Option<std::path::PathBuf>,
}

#[derive(Default)]
struct Counts {
    requests: std::sync::atomic::AtomicU64,
    failures: std::sync::atomic::AtomicU64,
    polls: std::sync::atomic::AtomicU64,
}

impl Counts {
    fn note(&self, ok: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.requests.fetch_add(1, Relaxed);
        if !ok {
            self.failures.fetch_add(1, Relaxed);
        }
    }
}

async fn get(client: &reqwest::Client, url: String) -> bool {
    match client.get(url).send().await {
        Ok(response) => {
            let ok = matches!(response.status().as_u16(), 200 | 503);
            response.bytes().await.is_ok() && ok
        }
        Err(_) => false,
    }
}

async fn poll(
    client: &reqwest::Client,
    cluster: &Cluster,
    key: &RaftKey,
    limits: &QueryLimits,
    round: usize,
    counts: &Counts,
) {
    let urls: Vec<&str> = cluster
        .patroni_urls
        .iter()
        .map(|u| u.trim_end_matches('/'))
        .collect();
    let reader = urls[0];
    let rotated = round % urls.len();
    // Discovery: the reader's /cluster and the Raft nodes, together (as poll_once does).
    let (cluster_ok, raft) = tokio::join!(
        get(client, format!("{reader}/cluster")),
        join_all(
            cluster
                .raft_nodes
                .iter()
                .map(|node| query_raw(node, Some(key), limits))
        )
    );
    counts.note(cluster_ok);
    for answer in &raft {
        counts.note(answer.is_ok());
    }
    let mut requests = Vec::new();
    for (index, url) in urls.iter().enumerate() {
        requests.push(format!("{url}/patroni"));
        if index != 0 {
            requests.push(format!("{url}/cluster"));
            if index == rotated {
                requests.push(format!("{url}/config"));
            }
        }
        if index == rotated {
            requests.push(format!("{url}/liveness"));
            requests.push(format!("{url}/readiness"));
        }
    }
    requests.push(format!("{reader}/history"));
    requests.push(format!("{reader}/config"));
    for ok in join_all(requests.into_iter().map(|url| get(client, url))).await {
        counts.note(ok);
    }
    counts
        .polls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut config = None;
    let mut duration = Duration::from_secs(60);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" => config = args.next(),
            "--duration" => {
                duration = humantime::parse_duration(&args.next().unwrap_or_default())?;
            }
            // `cargo bench` passes --bench to every benchmark binary.
            "--bench" => {}
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let config = config.ok_or_else(|| anyhow::anyhow!("--config FILE is required"))?;
    let file: ConfigFile = serde_yaml_ng::from_str(&std::fs::read_to_string(&config)?)?;
    // The exporter's runtime: tokio's default multi-threaded one.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(file, duration))
}

async fn run(file: ConfigFile, duration: Duration) -> anyhow::Result<()> {
    patroni_raft_exporter::tls::install_crypto_provider();
    let timeout = Duration::from_secs(2);
    let settings = ClientSettings {
        ca_file: file.clusters[0].ca_file.clone(),
        ..ClientSettings::default()
    };
    let client = PatroniClient::new(settings, timeout)?.http().clone();
    let password = std::fs::read_to_string(&file.clusters[0].raft_password_file)?;
    // One derivation for the shared password, as the exporter's shared_key does.
    let key = Arc::new(RaftKey::derive(password.trim_end().as_bytes()));
    let limits = Arc::new(QueryLimits {
        timeout,
        ..QueryLimits::default()
    });
    let counts = Arc::new(Counts::default());
    let clusters = file.clusters.len();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(clusters);
    for (slot, cluster) in file.clusters.into_iter().enumerate() {
        let interval = humantime::parse_duration(&cluster.poll_interval)?;
        // The exporter's schedule (ClusterPoller::run_until): a first poll at once, then
        // every interval from 0.5 + the slot's golden-ratio phase.
        let phase = (slot as f64 * 0.618_033_988_749_895).fract();
        let second = tokio::time::Instant::now() + interval.mul_f64(0.5 + phase);
        let (client, key, limits, counts) =
            (client.clone(), key.clone(), limits.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            poll(&client, &cluster, &key, &limits, 0, &counts).await;
            let mut ticks = tokio::time::interval_at(second, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut round = 1;
            loop {
                ticks.tick().await;
                poll(&client, &cluster, &key, &limits, round, &counts).await;
                round += 1;
            }
        }));
    }
    println!("ready clusters={clusters}");
    tokio::time::sleep(duration.saturating_sub(started.elapsed())).await;
    for task in &tasks {
        task.abort();
    }
    use std::sync::atomic::Ordering::Relaxed;
    println!(
        "done polls={} requests={} failures={}",
        counts.polls.load(Relaxed),
        counts.requests.load(Relaxed),
        counts.failures.load(Relaxed)
    );
    Ok(())
}
