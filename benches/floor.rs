//! The floor of `scripts/bench.sh fleet`: a bare client that sends the exporter's requests to
//! the same fleet-sim, with the same HTTP stack and nothing else.
//!
//! Exactly the requests a poll of a healthy 3-member cluster makes with every collector on
//! (src/poller), in the same two rounds and on the same cadence:
//! - round one: `GET /cluster` of the first member (the reader), beside the own `/patroni` of
//!   the two others (from the second poll on: the members the last poll knew) and the status
//!   of the 3 Raft nodes; it ends once `/cluster` answered and a Raft node did (or half the
//!   interval passed);
//! - round two: the reader's own `/patroni`, the others' own `/cluster` (their views); for
//!   the member in rotation (one per poll, in turn), its `/config` unless it is the reader,
//!   `/liveness`, and `/readiness` on every [`READINESS_EVERY_TURNS`]th turn (and on its first);
//!   the reader's `/config` every [`CONFIG_EVERY_POLLS`] polls and `/history` every
//!   [`HISTORY_REFRESH_POLLS`] (both in the first poll: src/poller/cadence.rs); the Raft
//!   queries still running end here;
//! - one request at a time to a member (src/poller/requests.rs,
//!   `REQUESTS_PER_MEMBER_AT_ONCE`): a member's requests go one after the other, the members'
//!   at once.
//!
//! With the exporter's own reqwest client (`PatroniClient::new`: rustls with its session
//! cache, the `ca_file` of the first cluster, timeouts, no redirect, no proxy, user agent),
//! one client shared by every cluster, the same default tokio runtime; each cluster polls at
//! its own phase of the interval as the exporter's pollers do (the first poll at once). The
//! Raft exchange is the exporter's own ([`query_raw`]): connect, key exchange, status command,
//! reply frame; the handshake's reply is decrypted as the protocol needs, the status reply is
//! not. Bodies are read whole and dropped: no JSON, no pickle, no snapshot, no encoding.
//! `fleet-sim --stats-out` counts the requests by path, so `scripts/bench.sh fleet` shows both
//! mixes side by side.
//!
//! ```sh
//! cargo bench --bench floor -- --config FILE --duration 90s
//! ```
//! Prints `ready` when every cluster started its first poll, and at the end the requests
//! made and failed. CPU is measured from outside (`/proc/PID/stat`), as for the exporter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, FutureExt, RemoteHandle};
use futures::stream::{FuturesUnordered, StreamExt};
use patroni_raft_exporter::patroni::{ClientSettings, PatroniClient};
use patroni_raft_exporter::poller::{
    CONFIG_EVERY_POLLS, HISTORY_REFRESH_POLLS, READINESS_EVERY_TURNS,
};
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

async fn get(client: reqwest::Client, url: String) -> bool {
    match client.get(url).send().await {
        Ok(response) => {
            let ok = matches!(response.status().as_u16(), 200 | 503);
            response.bytes().await.is_ok() && ok
        }
        Err(_) => false,
    }
}

/// What the exporter's poller remembers from one poll to the next that decides what it asks
/// (src/poller/members.rs's rotation, src/poller/cadence.rs), for a cluster whose members
/// all answer.
#[derive(Default)]
struct Turns {
    rotation: usize,
    polls: u64,
    polls_since_config: Option<u32>,
    polls_since_history: Option<u32>,
    readiness_known: Vec<bool>,
}

/// What one poll asks besides every poll's requests.
struct Plan {
    /// The members the last poll knew are asked their `/patroni` in round one.
    early: bool,
    /// The member in rotation (an index into the cluster's URLs, the order of `/cluster`).
    rotated: usize,
    readiness: bool,
    history: bool,
    config: bool,
}

impl Turns {
    fn plan(&mut self, members: usize) -> Plan {
        self.readiness_known.resize(members, false);
        self.rotation = self.rotation.wrapping_add(1);
        let rotated = self.rotation % members;
        let readiness = (self.rotation / members) % READINESS_EVERY_TURNS == 0
            || !self.readiness_known[rotated];
        self.readiness_known[rotated] = true;
        let due = |since: Option<u32>, every: u32| since.map_or(true, |p| p + 1 >= every);
        let config = due(self.polls_since_config, CONFIG_EVERY_POLLS);
        let history = due(self.polls_since_history, HISTORY_REFRESH_POLLS);
        let next = |asked: bool, since: Option<u32>| {
            if asked {
                Some(0)
            } else {
                since.map(|p| p + 1)
            }
        };
        self.polls_since_config = next(config, self.polls_since_config);
        self.polls_since_history = next(history, self.polls_since_history);
        self.polls += 1;
        Plan {
            early: self.polls > 1,
            rotated,
            readiness,
            history,
            config,
        }
    }
}

/// The paths asked of member `index` in round two, in order (its own `/patroni` first,
/// unless it went in round one).
fn member_paths(index: usize, plan: &Plan) -> Vec<&'static str> {
    let mut paths = Vec::new();
    let reader = index == 0;
    if reader || !plan.early {
        paths.push("patroni");
    }
    if !reader {
        paths.push("cluster");
    }
    if index == plan.rotated {
        if !reader {
            paths.push("config");
        }
        paths.push("liveness");
        if plan.readiness {
            paths.push("readiness");
        }
    }
    if reader {
        if plan.history {
            paths.push("history");
        }
        if plan.config {
            paths.push("config");
        }
    }
    paths
}

async fn poll(
    client: &reqwest::Client,
    cluster: &Cluster,
    key: &RaftKey,
    limits: &QueryLimits,
    (plan, interval): (Plan, Duration),
    counts: &Counts,
) {
    let started = tokio::time::Instant::now();
    let urls: Vec<&str> = cluster
        .patroni_urls
        .iter()
        .map(|u| u.trim_end_matches('/'))
        .collect();
    let reader = urls[0];
    // Round one: the reader's /cluster, the others' own /patroni, the Raft nodes.
    let early: Vec<Option<RemoteHandle<bool>>> = urls
        .iter()
        .enumerate()
        .map(|(index, url)| {
            (plan.early && index != 0).then(|| {
                let (request, answer) =
                    get(client.clone(), format!("{url}/patroni")).remote_handle();
                tokio::spawn(request);
                answer
            })
        })
        .collect();
    let mut raft: FuturesUnordered<_> = cluster
        .raft_nodes
        .iter()
        .map(|node| query_raw(node, Some(key), limits))
        .collect();
    let mut raft_answered = false;
    let view = get(client.clone(), format!("{reader}/cluster"));
    tokio::pin!(view);
    let view_ok = loop {
        tokio::select! {
            ok = &mut view => break ok,
            Some(answer) = raft.next(), if !raft.is_empty() => {
                raft_answered |= answer.is_ok();
                counts.note(answer.is_ok());
            }
        }
    };
    counts.note(view_ok);
    // The exporter's round one waits for a Raft answer until half its deadline (a share of
    // the interval): a healthy fleet answers long before either.
    let halfway = started + interval / 2;
    while !raft.is_empty() && !raft_answered {
        tokio::select! {
            Some(answer) = raft.next() => {
                raft_answered |= answer.is_ok();
                counts.note(answer.is_ok());
            }
            () = tokio::time::sleep_until(halfway) => break,
        }
    }
    // Round two: each member's requests one after the other, the members at once.
    let members = urls
        .iter()
        .zip(early)
        .enumerate()
        .map(|(index, (url, early))| {
            let paths = member_paths(index, &plan);
            async move {
                if let Some(own) = early {
                    counts.note(own.await);
                }
                for path in paths {
                    counts.note(get(client.clone(), format!("{url}/{path}")).await);
                }
            }
        });
    let rest_of_raft = raft.for_each(|answer| {
        counts.note(answer.is_ok());
        std::future::ready(())
    });
    tokio::join!(join_all(members), rest_of_raft);
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
            let mut turns = Turns::default();
            let members = cluster.patroni_urls.len();
            let plan = turns.plan(members);
            poll(&client, &cluster, &key, &limits, (plan, interval), &counts).await;
            let mut ticks = tokio::time::interval_at(second, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                let plan = turns.plan(members);
                poll(&client, &cluster, &key, &limits, (plan, interval), &counts).await;
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
