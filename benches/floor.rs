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
//! A cluster on etcd (`etcd_endpoints`, `fleet-sim --etcd-clusters`) has no Raft queries: its
//! etcd reading (src/etcd/reading.rs, run as src/poller/etcd.rs runs it) starts with round
//! one, on a task of its own: `POST /v3/maintenance/status` (then `GET /version` in the first
//! poll and every [`VERSIONS_EVERY_POLLS`]th) to every endpoint at once, and as soon as the
//! leader answered both, to the leader one after the other `/v3/cluster/member/list`,
//! `/v3/kv/range` over Patroni's prefix (no alarm GET: the alarms are the status's) and
//! `/v3/lease/timetolive` of the leader key's lease (a member's requests one at a time, on
//! one connection); round two starts once `/cluster`
//! answered and the reading ended (or half the interval passed), and the poll ends with both.
//! fleet-sim's leader is always the first endpoint and the leader key's lease the captured
//! one, so the floor knows both without reading a body (if the first endpoint fails, the
//! facts are asked of the first that answered, once all did). The request bodies are the
//! exporter's, through the exporter's etcd client (`EtcdClient::sharing`, one per cluster on
//! the fleet's shared transport, as the poller builds them).
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
use patroni_raft_exporter::etcd::{self, EtcdClient};
use patroni_raft_exporter::http::Transports;
use patroni_raft_exporter::patroni::{ClientSettings, PatroniClient};
use patroni_raft_exporter::poller::{
    CONFIG_EVERY_POLLS, HISTORY_REFRESH_POLLS, READINESS_EVERY_TURNS, VERSIONS_EVERY_POLLS,
};
use patroni_raft_exporter::raft::{query_raw, QueryLimits, RaftKey};
use serde::Deserialize;

#[derive(Deserialize)]
struct ConfigFile {
    clusters: Vec<Cluster>,
}

#[derive(Deserialize)]
struct Cluster {
    scope: String,
    patroni_urls: Vec<String>,
    #[serde(default)]
    raft_nodes: Vec<String>,
    #[serde(default)]
    raft_password_file: Option<std::path::PathBuf>,
    #[serde(default)]
    etcd_endpoints: Vec<url::Url>,
    poll_interval: String,
    #[serde(default)]
    ca_file: Option<std::path::PathBuf>,
}

/// The lease of the leader key in fleet-sim's answers (tests/fixtures/etcd-3.4/
/// timetolive-leader.json): the exporter reads it from the range, the floor knows it.
const LEADER_LEASE: &str = "8115383331663444237";

/// A cluster on etcd, as the floor asks it: the fleet's transport (shared by every cluster, as
/// the exporter's [`Transports`] share it), its endpoints, and the bodies of the exporter's
/// requests.
struct EtcdCluster {
    http: reqwest::Client,
    endpoints: Vec<String>,
    range_body: String,
}

impl EtcdCluster {
    fn new(
        cluster: &Cluster,
        timeout: Duration,
        transports: &Transports,
    ) -> anyhow::Result<Option<EtcdCluster>> {
        if cluster.etcd_endpoints.is_empty() {
            return Ok(None);
        }
        let settings = etcd::ClientSettings {
            endpoints: cluster.etcd_endpoints.clone(),
            ..etcd::ClientSettings::default()
        };
        let client = EtcdClient::sharing(settings, timeout, transports)?;
        // As EtcdClient::range_prefix builds it.
        use base64::Engine;
        let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let prefix = etcd::patroni_prefix("/service", &cluster.scope);
        let range = serde_json::json!({
            "key": encode(prefix.as_bytes()),
            "range_end": encode(&etcd::prefix_range_end(prefix.as_bytes())),
        });
        Ok(Some(EtcdCluster {
            http: client.http().clone(),
            endpoints: cluster
                .etcd_endpoints
                .iter()
                .map(|url| url.as_str().trim_end_matches('/').to_owned())
                .collect(),
            range_body: range.to_string(),
        }))
    }

    /// One POST of `body` as the exporter's etcd client sends it; the answer read and dropped.
    async fn post(&self, endpoint: &str, path: &str, body: String) -> bool {
        let request = self
            .http
            .post(format!("{endpoint}/{path}"))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.into_bytes());
        match request.send().await {
            Ok(response) => {
                let ok = response.status().as_u16() == 200;
                response.bytes().await.is_ok() && ok
            }
            Err(_) => false,
        }
    }

    /// The cluster's facts from `endpoint`, one request after the other: the member list, the
    /// range, the leader key's lease (the alarms are read from the status, as the exporter
    /// reads them).
    async fn facts(&self, endpoint: &str, counts: &Counts) {
        let list = self
            .post(
                endpoint,
                "v3/cluster/member/list",
                serde_json::json!({ "linearizable": true }).to_string(),
            )
            .await;
        counts.note(list);
        let keys = self
            .post(endpoint, "v3/kv/range", self.range_body.clone())
            .await;
        counts.note(keys);
        if keys {
            let lease = serde_json::json!({ "ID": LEADER_LEASE }).to_string();
            counts.note(self.post(endpoint, "v3/lease/timetolive", lease).await);
        }
    }

    /// One reading (src/etcd/reading.rs): every endpoint's status at once (then its
    /// `/version` when `versions`), the facts from the leader (the first endpoint) as soon as
    /// it answered.
    async fn reading(self: Arc<Self>, counts: Arc<Counts>, versions: bool) {
        let mut statuses: FuturesUnordered<_> = self
            .endpoints
            .iter()
            .enumerate()
            .map(|(index, endpoint)| {
                // after the status, `GET /version` when due (src/poller/etcd.rs: the
                // first poll and every VERSIONS_EVERY_POLLS-th, fleet-sim's versions never
                // change), as read_endpoint
                let status = self.post(endpoint, "v3/maintenance/status", "{}".to_owned());
                let http = self.http.clone();
                let counts = Arc::clone(&counts);
                async move {
                    let ok = status.await;
                    if versions {
                        counts.note(get(http, format!("{endpoint}/version")).await);
                    }
                    (index, ok)
                }
            })
            .collect();
        let mut answered: Option<usize> = None;
        let mut facts = None;
        let mut facts_done = false;
        while !statuses.is_empty() {
            tokio::select! {
                Some((index, ok)) = statuses.next() => {
                    counts.note(ok);
                    if ok && answered.map_or(true, |first| index < first) {
                        answered = Some(index);
                    }
                    if ok && index == 0 {
                        facts = Some(Box::pin(self.facts(&self.endpoints[0], &counts)));
                    }
                }
                () = async { facts.as_mut().expect("guarded").await }, if facts.is_some() && !facts_done => {
                    facts_done = true;
                }
            }
        }
        match (facts, answered) {
            (Some(facts), _) if !facts_done => facts.await,
            (None, Some(first)) => self.facts(&self.endpoints[first], &counts).await,
            _ => {}
        }
    }
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
    /// On etcd, each endpoint's `GET /version`.
    versions: bool,
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
        let versions = self.polls % u64::from(VERSIONS_EVERY_POLLS) == 0;
        self.polls += 1;
        Plan {
            versions,
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
    (cluster, etcd): (&Cluster, Option<&Arc<EtcdCluster>>),
    key: &RaftKey,
    limits: &QueryLimits,
    (plan, interval): (Plan, Duration),
    counts: &Arc<Counts>,
) {
    let started = tokio::time::Instant::now();
    // On etcd: the reading, on a task of its own from the start of the poll.
    let mut reading: Option<RemoteHandle<()>> = etcd.map(|etcd| {
        let (reading, handle) = etcd
            .clone()
            .reading(counts.clone(), plan.versions)
            .remote_handle();
        tokio::spawn(reading);
        handle
    });
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
    // On etcd, the reading is waited for until the same halfway (src/poller/etcd.rs).
    if let Some(handle) = reading.as_mut() {
        if tokio::time::timeout_at(halfway, handle).await.is_ok() {
            reading = None;
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
    let rest_of_etcd = async {
        if let Some(handle) = reading {
            handle.await;
        }
    };
    tokio::join!(join_all(members), rest_of_raft, rest_of_etcd);
    counts
        .polls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The exporter's allocator and its settings (src/allocator.rs): the floor is the same client
/// with the same runtime and allocator, so what the allocator saves is not the exporter's own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    patroni_raft_exporter::allocator::configure();
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
    // The Raft password of the first cluster on Raft (fleet-sim gives them all one).
    let password = match file
        .clusters
        .iter()
        .find_map(|c| c.raft_password_file.as_ref())
    {
        Some(path) => std::fs::read_to_string(path)?,
        None => String::new(),
    };
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
    let transports = Transports::default();
    for (slot, cluster) in file.clusters.into_iter().enumerate() {
        let interval = humantime::parse_duration(&cluster.poll_interval)?;
        // The exporter's schedule (ClusterPoller::run_until): a first poll at once, then
        // every interval from 0.5 + the slot's golden-ratio phase.
        let phase = (slot as f64 * 0.618_033_988_749_895).fract();
        let second = tokio::time::Instant::now() + interval.mul_f64(0.5 + phase);
        let etcd = EtcdCluster::new(&cluster, timeout, &transports)?.map(Arc::new);
        let (client, key, limits, counts) =
            (client.clone(), key.clone(), limits.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            let mut turns = Turns::default();
            let members = cluster.patroni_urls.len();
            let mut ticks = tokio::time::interval_at(second, interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                // the first poll at once, the next ones on the ticks from `second`
                let plan = turns.plan(members);
                poll(
                    &client,
                    (&cluster, etcd.as_ref()),
                    &key,
                    &limits,
                    (plan, interval),
                    &counts,
                )
                .await;
                ticks.tick().await;
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
