//! Shared helpers of the integration tests: fake members built from real captures, fake Raft
//! nodes, and an exporter wired to them in-process.

pub mod pki;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use patroni_raft_exporter::config::{ClusterConfig, ClusterIdentity, DcsSettings, RaftSettings};
use patroni_raft_exporter::metrics::exposition::Format;
use patroni_raft_exporter::metrics::render_store;
use patroni_raft_exporter::metrics::{ReloadStatus, Store};
use patroni_raft_exporter::poller::ClusterPoller;
use patroni_raft_exporter::raft::fake::{unwrap_captured_reply, Behaviour, FakeRaftNode};
use patroni_raft_exporter::raft::RaftKey;
use patroni_raft_exporter::secret::Secret;
use patroni_raft_exporter::server::{self, AppState};
use patroni_raft_exporter::web::WebState;
use url::Url;

use patroni_raft_exporter::patroni::fake::{FakePatroni, Reply};

/// The value of the one sample `series` (name and labels, as written) in a `/metrics` text;
/// `None` when absent (or not a number).
pub fn sample(output: &str, series: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

pub fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|error| panic!("{full}: {error}"))
}

/// The three members' own `/patroni` captures, `{prefix}m0.json` to `{prefix}m2.json`.
fn own_captures(prefix: &str) -> [Option<Vec<u8>>; 3] {
    [0, 1, 2].map(|i| Some(fixture(&format!("{prefix}m{i}.json"))))
}

/// A captured state of a three-member cluster, for [`FakeCluster::start`]: its `/cluster`,
/// each member's own `/patroni` (`None`: the member is dead) and its `/history`. The
/// constructors name the states the tests share (`tests/fixtures`).
pub struct Captured {
    pub cluster: Vec<u8>,
    pub own: [Option<Vec<u8>>; 3],
    pub history: Vec<u8>,
}

impl Captured {
    /// `cluster` and `history` fixtures, the members' own captures `{own_prefix}m0.json` to
    /// `{own_prefix}m2.json`.
    fn files(cluster: &str, own_prefix: &str, history: &str) -> Captured {
        Captured {
            cluster: fixture(cluster),
            own: own_captures(own_prefix),
            history: fixture(history),
        }
    }

    /// A healthy Patroni 3.3.8 cluster.
    pub fn healthy_338() -> Captured {
        Captured::files(
            "patroni-3.3.8/cluster.json",
            "patroni-3.3.8/patroni-",
            "patroni-3.3.8/history.json",
        )
    }

    /// A healthy Patroni 4.1.5 cluster, member 0 the leader, its `/cluster` as member
    /// `seen_from` (0 or 1) answered it.
    pub fn healthy_415(seen_from: usize) -> Captured {
        Captured::files(
            &format!("patroni-4.1.5/01-cluster-from-m{seen_from}.json"),
            "patroni-4.1.5/01-patroni-",
            "patroni-4.1.5/01-history.json",
        )
    }

    /// Patroni 4.1.5 right after a switchover to member 1.
    pub fn switchover_415() -> Captured {
        Captured::files(
            "patroni-4.1.5/02-cluster-right-after-switchover.json",
            "patroni-4.1.5/02-patroni-after-switchover-",
            "patroni-4.1.5/02-history-after-switchover.json",
        )
    }

    /// Patroni 4.1.5, the survivor (member 1) 60 s after the Raft quorum was lost; members 0
    /// and 2 are dead.
    pub fn quorum_lost_415() -> Captured {
        Captured {
            cluster: fixture("patroni-4.1.5/03-cluster-survivor-t+60s.json"),
            own: [
                None,
                Some(fixture("patroni-4.1.5/03-patroni-survivor-t+60s.json")),
                None,
            ],
            history: fixture("patroni-4.1.5/02-history-after-switchover.json"),
        }
    }

    /// Patroni 4.1.5 after the switchover to member 1, member 0 still saying primary (its
    /// own `/patroni` from before the switchover). Serving member 0 the `/cluster` of a
    /// replica frozen before it (`patroni-4.1.5/01-cluster-from-m0.json`, with
    /// [`FakeCluster::serve_cluster_on`]) makes the members' views split.
    pub fn split_415() -> Captured {
        let [_, m1, m2] = own_captures("patroni-4.1.5/02-patroni-after-switchover-");
        Captured {
            cluster: fixture("patroni-4.1.5/02-cluster-after-switchover.json"),
            own: [Some(fixture("patroni-4.1.5/01-patroni-m0.json")), m1, m2],
            history: fixture("patroni-4.1.5/02-history-after-switchover.json"),
        }
    }

    /// A state captured on the real cluster (tests/e2e/capture-states.sh),
    /// `patroni-{version}/states/{state}/`, with `history` as its `/history`.
    pub fn state(version: &str, state: &str, history: Vec<u8>) -> Captured {
        let dir = format!("patroni-{version}/states/{state}");
        Captured {
            cluster: fixture(&format!("{dir}/cluster.json")),
            own: own_captures(&format!("{dir}/patroni-")),
            history,
        }
    }
}

/// The captured Raft statuses of three healthy nodes, node `leader` the leader, for
/// [`raft_cluster`].
pub fn healthy_raft(leader: usize) -> [Option<&'static str>; 3] {
    std::array::from_fn(|index| {
        Some(if index == leader {
            "enc_leader_0.3.12"
        } else {
            "enc_follower_0.3.12"
        })
    })
}

/// Address substitutions that make output independent of the random ports of the fakes.
#[derive(Default, Clone)]
pub struct Addresses {
    pairs: Vec<(String, String)>,
}

impl Addresses {
    pub fn add(&mut self, actual: impl Into<String>, stable: impl Into<String>) {
        self.pairs.push((actual.into(), stable.into()));
    }

    /// The fake Raft `nodes` under the names the captures give them: `127.0.0.1N:2222`.
    pub fn add_raft_nodes(&mut self, nodes: &[String]) {
        for (index, node) in nodes.iter().enumerate() {
            self.add(node.clone(), format!("127.0.0.1{}:2222", index + 1));
        }
    }

    /// Replaces every actual address (followed by a delimiter) with its stable name.
    pub fn normalize(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (actual, stable) in &self.pairs {
            for delimiter in ['"', '/', ',', '}', ' ', '\n', ':', ')'] {
                text = text.replace(
                    &format!("{actual}{delimiter}"),
                    &format!("{stable}{delimiter}"),
                );
            }
        }
        text
    }
}

/// The captured `/config` of the test cluster (synchronous_mode on, 2 sync standbys), served
/// by every fake member.
const CAPTURED_CONFIG: &[u8] = include_bytes!("../../fixtures/patroni-4.1.5/01-config.json");

/// A dead member's address: a port bound and never listened on, so that every connection is
/// refused for as long as it is held. Not a fake that was stopped: under the load of the whole
/// test suite another test's fake took such a freed port, and a dead member answered
/// (`golden_output_says_what_an_operator_needs` saw `patroni_member_api_up` 1 for one).
pub struct DeadPort(tokio::net::TcpSocket);

impl DeadPort {
    pub fn reserve(ip: &str) -> DeadPort {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::new(ip.parse().unwrap(), 0))
            .unwrap();
        DeadPort(socket)
    }

    pub fn address(&self) -> SocketAddr {
        self.0.local_addr().unwrap()
    }
}

/// A fake 3-member cluster answering with captured documents.
pub struct FakeCluster {
    /// Keeps the running members alive (`None` for a dead member).
    _running: Vec<Option<FakePatroni>>,
    /// The dead members' ports, held so that they refuse for as long as the cluster lives.
    _dead: Vec<DeadPort>,
    urls: Vec<Url>,
    pub addresses: Addresses,
    scope: String,
}

impl FakeCluster {
    /// Starts three members on 127.0.0.1. See [`FakeCluster::start_on`].
    pub async fn start(scope: &str, captured: Captured) -> FakeCluster {
        Self::start_on(["127.0.0.1"; 3], scope, captured).await
    }

    /// Starts three members on `ips`, answering with `captured`. Its `/cluster`'s
    /// `api_url`s (`http://127.0.0.1N:8008`) are rewritten to the fakes and its scope
    /// becomes `scope`. `own[i]` is member i's `/patroni`; `None` makes member i dead (nothing
    /// listens at its address any more), while the others still list it, as a frozen DCS
    /// view does.
    pub async fn start_on(ips: [&str; 3], scope: &str, captured: Captured) -> FakeCluster {
        let Captured {
            cluster,
            own,
            history,
        } = captured;
        let mut members = Vec::new();
        let mut dead = Vec::new();
        let mut member_urls = Vec::new();
        for (ip, own) in ips.into_iter().zip(&own) {
            if own.is_some() {
                let member = FakePatroni::start(ip).await;
                member_urls.push(member.url());
                members.push(Some(member));
            } else {
                let port = DeadPort::reserve(ip);
                member_urls.push(format!("http://{}", port.address()));
                dead.push(port);
                members.push(None);
            }
        }
        let mut addresses = Addresses::default();
        for (index, url) in member_urls.iter().enumerate() {
            addresses.add(url.clone(), format!("http://127.0.0.1{}:8008", index + 1));
        }
        let cluster = rewrite_cluster(&cluster, scope, &member_urls);
        let urls = member_urls.iter().map(|u| Url::parse(u).unwrap()).collect();
        for (member, own) in members.iter().zip(own) {
            let (Some(member), Some(body)) = (member, own) else {
                continue;
            };
            member.route("/cluster", Reply::Json(cluster.clone().into_bytes()));
            member.route("/history", Reply::Json(history.clone()));
            member.route("/config", Reply::Json(CAPTURED_CONFIG.to_vec()));
            member.route("/patroni", Reply::Json(body));
            // Patroni answers its health endpoints with a status code only.
            member.route("/liveness", Reply::Status(200));
            member.route("/readiness", Reply::Status(200));
        }
        FakeCluster {
            _running: members,
            _dead: dead,
            urls,
            addresses,
            scope: scope.to_owned(),
        }
    }

    /// Serves another captured `/cluster` on member `index` only: its own Raft replica's
    /// view, when the members' views differ.
    pub fn serve_cluster_on(&self, index: usize, cluster: &[u8]) {
        let urls: Vec<String> = self
            .urls
            .iter()
            .map(|u| u.as_str().trim_end_matches('/').to_owned())
            .collect();
        let body = rewrite_cluster(cluster, &self.scope, &urls);
        if let Some(member) = &self._running[index] {
            member.route("/cluster", Reply::Json(body.into_bytes()));
        }
    }

    /// For a cluster started from the `patroni-4.1.5/01-*` captures, an isolated primary:
    /// members 1 and 2 let member 0's key expire and member 1 promoted itself (its own
    /// `/patroni` says primary), while member 0, cut off from them, still says primary.
    pub fn isolate_member_0(&self) {
        let mut majority: serde_json::Value =
            serde_json::from_slice(&fixture("patroni-4.1.5/01-cluster-from-m1.json")).unwrap();
        let members = majority["members"].as_array_mut().unwrap();
        members.remove(0);
        members[0]["role"] = "leader".into();
        let majority = serde_json::to_vec(&majority).unwrap();
        self.serve_cluster_on(1, &majority);
        self.serve_cluster_on(2, &majority);
        self.serve_on(1, "/patroni", &fixture("patroni-4.1.5/01-patroni-m0.json"));
    }

    /// Makes member `index` hang, as a Patroni stopped by SIGSTOP: the kernel still accepts
    /// its connections, and nothing answers.
    pub fn hang(&self, index: usize) {
        if let Some(member) = &self._running[index] {
            for path in [
                "/cluster",
                "/patroni",
                "/history",
                "/config",
                "/liveness",
                "/readiness",
            ] {
                member.route(path, Reply::Hang);
            }
        }
    }

    /// Makes member `index` hang at `path` only (e.g. its `/cluster`, its other requests
    /// answered).
    pub fn hang_on(&self, index: usize, path: &str) {
        if let Some(member) = &self._running[index] {
            member.route(path, Reply::Hang);
        }
    }

    /// Serves `body` at `path` on every running member (e.g. another captured `/config`).
    pub fn serve_everywhere(&self, path: &str, body: &[u8]) {
        for member in self._running.iter().flatten() {
            member.route(path, Reply::Json(body.to_vec()));
        }
    }

    /// Serves `body` at `path` on member `index` only.
    pub fn serve_on(&self, index: usize, path: &str, body: &[u8]) {
        if let Some(member) = &self._running[index] {
            member.route(path, Reply::Json(body.to_vec()));
        }
    }

    /// Serves `body` at `path` on member `index` only, after `delay` (a slow member or link).
    pub fn serve_on_after(&self, index: usize, path: &str, body: &[u8], delay: Duration) {
        if let Some(member) = &self._running[index] {
            member.route(
                path,
                Reply::Delayed(delay, Box::new(Reply::Json(body.to_vec()))),
            );
        }
    }

    /// The paths every running member was asked (`GET /cluster`, ...), sorted.
    pub fn paths_asked(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            ._running
            .iter()
            .flatten()
            .flat_map(|member| member.requests())
            .filter_map(|request| request.split_whitespace().nth(1).map(str::to_owned))
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// How many times member `index` was asked `path` (0 for a dead member).
    pub fn times_asked(&self, index: usize, path: &str) -> usize {
        self._running[index].as_ref().map_or(0, |member| {
            member
                .requests()
                .iter()
                .filter(|request| request.split_whitespace().nth(1) == Some(path))
                .count()
        })
    }

    /// The REST URLs of all three members, dead ones included.
    pub fn urls(&self) -> Vec<Url> {
        self.urls.clone()
    }

    /// The same, member `first`'s URL first (the one the exporter asks first), then the
    /// others in order.
    pub fn urls_from(&self, first: usize) -> Vec<Url> {
        let mut urls = self.urls();
        urls.rotate_left(first);
        urls
    }
}

/// A captured `/cluster` body with the scope `scope` and the captured members' api_urls
/// (`http://127.0.0.1N:8008`) pointing at `member_urls`.
fn rewrite_cluster(cluster: &[u8], scope: &str, member_urls: &[String]) -> String {
    let mut cluster = String::from_utf8(cluster.to_vec()).unwrap();
    // pg-test on 127.0.0.1N, and the standby cluster pg-dr of tests/e2e/standby.sh on 127.0.0.2N
    for captured in ["pg-test", "pg-dr"] {
        cluster = cluster
            .replace(
                &format!("\"scope\": \"{captured}\""),
                &format!("\"scope\": \"{scope}\""),
            )
            .replace(
                &format!("\"scope\":\"{captured}\""),
                &format!("\"scope\":\"{scope}\""),
            );
    }
    for (index, url) in member_urls.iter().enumerate() {
        for subnet in [1, 2] {
            cluster = cluster.replace(&format!("http://127.0.0.{subnet}{}:8008", index + 1), url);
        }
    }
    cluster
}

/// A fake Raft node serving the reply of a captured keyed vector (`enc_*` cases), as
/// captured: it names the capture's own node ids (`127.0.0.1:600x`).
pub async fn raft_node_from_vector(case: &str, password: &str) -> FakeRaftNode {
    let reply = captured_status(case);
    let (_, node) = FakeRaftNode::start(
        Behaviour::Serve(reply),
        Some(RaftKey::derive(password.as_bytes())),
    )
    .await
    .unwrap();
    node
}

/// The status-dict pickle of a captured keyed vector.
fn captured_status(case: &str) -> Vec<u8> {
    let wrapped = fixture(&format!("pysyncobj/{case}/s2c_frame2.pickle"));
    unwrap_captured_reply(&wrapped).expect("captured keyed reply")
}

/// `self`, `leader` and `state` of a captured status, from the case's `expected_admin.txt`.
fn captured_identity(case: &str) -> (String, Option<String>, bool) {
    let text = String::from_utf8(fixture(&format!("pysyncobj/{case}/expected_admin.txt"))).unwrap();
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}: ")))
            .map(str::to_owned)
    };
    let leader = field("leader").filter(|leader| leader != "None");
    (
        field("self").unwrap(),
        leader,
        field("state").as_deref() == Some("2"),
    )
}

/// Three fake Raft nodes of one cluster, one per `(ip, case)`, `None` for a dead node (port
/// 1 of that ip). Each replays a captured status whose node ids (`self`, `leader`, the
/// partners) are renamed to the fakes' real addresses, so that the statuses name the nodes
/// the exporter queries, as in a real cluster: the node's own id becomes its address, the
/// leader it names becomes the address of the node serving a leader's capture, the other
/// ids the remaining addresses in order.
pub async fn raft_cluster(
    nodes: [(&str, Option<&str>); 3],
    password: &str,
) -> (Vec<String>, Vec<FakeRaftNode>) {
    let mut listeners = Vec::new();
    let mut addresses = Vec::new();
    for (ip, case) in nodes {
        match case {
            Some(_) => {
                let listener = tokio::net::TcpListener::bind(format!("{ip}:0"))
                    .await
                    .unwrap();
                addresses.push(listener.local_addr().unwrap().to_string());
                listeners.push(Some(listener));
            }
            None => {
                addresses.push(dead_address_on(ip).await);
                listeners.push(None);
            }
        }
    }
    let leader_address = nodes
        .iter()
        .zip(&addresses)
        .find(|((_, case), _)| case.is_some_and(|case| captured_identity(case).2))
        .map(|(_, address)| address.clone());
    let captured_ids = ["127.0.0.1:6001", "127.0.0.1:6002", "127.0.0.1:6003"];
    let mut fakes = Vec::new();
    for (index, ((_, case), listener)) in nodes.iter().zip(listeners).enumerate() {
        let (Some(case), Some(listener)) = (case, listener) else {
            continue;
        };
        let (own_id, leader_id, _) = captured_identity(case);
        let mut renames = vec![(own_id.clone(), addresses[index].clone())];
        if let (Some(leader_id), Some(leader_address)) = (&leader_id, &leader_address) {
            if *leader_id != own_id {
                renames.push((leader_id.clone(), leader_address.clone()));
            }
        }
        let taken: Vec<String> = renames.iter().map(|(_, to)| to.clone()).collect();
        let mut free_addresses = addresses.iter().filter(|address| !taken.contains(address));
        for id in captured_ids {
            if !renames.iter().any(|(from, _)| from == id) {
                renames.push((id.to_owned(), free_addresses.next().unwrap().clone()));
            }
        }
        let reply = rename_pickle_strings(&captured_status(case), &renames);
        let (_, fake) = FakeRaftNode::serve(
            listener,
            Behaviour::Serve(reply),
            Some(RaftKey::derive(password.as_bytes())),
        )
        .unwrap();
        fakes.push(fake);
    }
    (addresses, fakes)
}

/// Replaces substrings inside the strings of a protocol-2 pickle. Python 3 writes every
/// `str` there as BINUNICODE (`X`, a little-endian u32 length, UTF-8), so a string that
/// contains one of the names is rewritten with its new length. Test data only: a byte `X`
/// inside other data is taken for a string only when its length and UTF-8 check out and it
/// contains a name.
fn rename_pickle_strings(pickle: &[u8], renames: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pickle.len() + 256);
    let mut i = 0;
    while i < pickle.len() {
        if pickle[i] == b'X' && i + 5 <= pickle.len() {
            let length = u32::from_le_bytes(pickle[i + 1..i + 5].try_into().unwrap()) as usize;
            if let Some(Ok(text)) = pickle.get(i + 5..i + 5 + length).map(std::str::from_utf8) {
                if renames.iter().any(|(from, _)| text.contains(from.as_str())) {
                    // One pass over the original text, so that a new name is never renamed again.
                    let mut renamed = String::new();
                    let mut rest = text;
                    'scan: while !rest.is_empty() {
                        for (from, to) in renames {
                            if let Some(tail) = rest.strip_prefix(from.as_str()) {
                                renamed.push_str(to);
                                rest = tail;
                                continue 'scan;
                            }
                        }
                        let next = rest.chars().next().unwrap();
                        renamed.push(next);
                        rest = &rest[next.len_utf8()..];
                    }
                    out.push(b'X');
                    out.extend_from_slice(&(renamed.len() as u32).to_le_bytes());
                    out.extend_from_slice(renamed.as_bytes());
                    i += 5 + length;
                    continue;
                }
            }
        }
        out.push(pickle[i]);
        i += 1;
    }
    out
}

/// A `host:port` where nothing listens.
pub async fn dead_address() -> String {
    // A distinct loopback address per call, so that output normalisation can tell them apart.
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(200);
    let host = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dead_address_on(&format!("127.0.0.{host}")).await
}

/// A `host:port` on `ip` where nothing listens: port 1 (tcpmux), which nothing on a test
/// machine serves. Not a port freed by closing a listener, which another process may take
/// in the meantime (seen once: `timeout` instead of `connect`).
pub async fn dead_address_on(ip: &str) -> String {
    format!("{ip}:1")
}

/// A member as `/cluster` lists it: a `leader` runs, any other role streams.
pub fn listed_member(name: &str, role: &str, api_base: &str) -> String {
    let state = if role == "leader" {
        "running"
    } else {
        "streaming"
    };
    format!(
        r#"{{"name":"{name}","role":"{role}","state":"{state}","api_url":"{api_base}/patroni","host":"127.0.0.1","timeline":1}}"#
    )
}

/// A `/cluster` document of `scope` listing `members` ([`listed_member`]).
pub fn cluster_json(scope: &str, members: &[String]) -> Reply {
    Reply::Json(format!(r#"{{"scope":"{scope}","members":[{}]}}"#, members.join(",")).into_bytes())
}

/// The one way tests build a cluster's settings: the REST URLs and, optionally, the Raft
/// nodes and password; the rest as the defaults, with a short request timeout. Adjust
/// with [`Configure::with`].
pub fn cluster_config(
    urls: Vec<Url>,
    raft_nodes: Option<(Vec<String>, Option<&str>)>,
) -> ClusterConfig {
    ClusterConfig {
        identity: ClusterIdentity {
            patroni_urls: urls,
            dcs: raft_nodes.map_or(DcsSettings::Unwatched, |(nodes, password)| {
                DcsSettings::Raft(RaftSettings {
                    nodes,
                    password: password.map(Secret::new),
                    ..RaftSettings::default()
                })
            }),
            ..ClusterIdentity::default()
        },
        ..ClusterConfig::default()
    }
    .with(|config| config.poll.timeout = Duration::from_millis(800))
}

/// A member on 127.0.0.1 answering `/cluster` with `reply` (nothing else), and the settings
/// that poll it.
pub async fn single_member(reply: Reply) -> (FakePatroni, ClusterConfig) {
    let member = FakePatroni::start("127.0.0.1").await;
    member.route("/cluster", reply);
    let config = cluster_config(vec![Url::parse(&member.url()).unwrap()], None);
    (member, config)
}

/// Changes settings in place and gives them back, so that a variant of a test cluster is
/// one expression: `base.clone().with(|config| config.rest.ca_file = None)`.
pub trait Configure {
    fn with(self, change: impl FnOnce(&mut Self)) -> Self;
}

impl Configure for ClusterConfig {
    fn with(mut self, change: impl FnOnce(&mut Self)) -> Self {
        change(&mut self);
        self
    }
}

/// Polls the clusters at the indexes `first` once, calls `between` (which changes what their
/// fakes answer), then polls every cluster, publishes, and renders `/metrics` in `format`:
/// for what only a second poll shows (a member that left the view, failsafe topology).
pub async fn poll_twice_and_render(
    configs: Vec<ClusterConfig>,
    first: &[usize],
    between: impl FnOnce(),
    format: Format,
) -> String {
    let store = Arc::new(Store::new(configs.len()));
    // As the binary's store: the exporter's own families first.
    ReloadStatus::loaded(&store);
    let standby_of: Vec<Option<String>> = configs
        .iter()
        .map(|c| c.identity.standby_of.clone())
        .collect();
    let mut pollers = Vec::with_capacity(configs.len());
    for (slot, config) in configs.into_iter().enumerate() {
        pollers.push(ClusterPoller::new(slot, config).await.unwrap());
    }
    for index in first {
        pollers[*index].poll_once().await;
    }
    between();
    for (slot, poller) in pollers.iter_mut().enumerate() {
        let snapshot = poller.poll_once().await;
        store.publish_paired(slot, snapshot, standby_of[slot].as_deref());
    }
    render_store(&store, format)
}

/// Polls each cluster once, publishes, and renders `/metrics` in `format`.
pub async fn poll_and_render(configs: Vec<ClusterConfig>, format: Format) -> String {
    let store = Arc::new(Store::new(configs.len()));
    for (slot, config) in configs.into_iter().enumerate() {
        let mut poller = ClusterPoller::new(slot, config).await.unwrap();
        let snapshot = poller.poll_once().await;
        store.publish(slot, snapshot);
    }
    render_store(&store, format)
}

/// Replaces the values that change from run to run (poll timing, the process's figures, build
/// revision), and sorts the samples of each family (Raft nodes are ordered by their random
/// fake ports).
/// A client builder for the tests' own requests. reqwest is built without a rustls provider
/// (the exporter installs ring's, `tls::install_crypto_provider`); a test run alone may reach
/// here before any exporter code has, so this installs it first.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    patroni_raft_exporter::tls::install_crypto_provider();
    reqwest::Client::builder()
}

/// [`http_client_builder`], built as it is.
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().unwrap()
}

/// The `scope` label's value of a sample line.
fn scope_of(line: &str) -> Option<&str> {
    line.split("scope=\"").nth(1)?.split('"').next()
}

pub fn normalize_volatile(text: &str) -> String {
    // Each cluster's last poll: a fact read in it is shown as `<this poll>`, one served from an
    // earlier read as `<earlier poll>` (the time itself varies).
    let polled_at: std::collections::HashMap<&str, &str> = text
        .lines()
        .filter(|line| line.starts_with("patroni_exporter_last_poll_timestamp_seconds{"))
        .filter_map(|line| Some((scope_of(line)?, line.rsplit_once(' ')?.1)))
        .collect();
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with("patroni_exporter_fact_read_timestamp_seconds{")
                || line.starts_with("patroni_exporter_member_fact_read_timestamp_seconds{")
            {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let this_poll = scope_of(line).and_then(|scope| polled_at.get(scope));
                let when = if this_poll == Some(&value) {
                    "<this poll>"
                } else {
                    "<earlier poll>"
                };
                return format!("{series} {when}");
            }
            // Timings, and what depends on the clock at the moment of the poll.
            if [
                "patroni_exporter_poll_duration_seconds{",
                "patroni_exporter_last_poll_timestamp_seconds{",
                "patroni_exporter_config_last_reload_success_timestamp_seconds ",
                "patroni_member_clock_offset_seconds{",
                "patroni_member_clock_offset_error_seconds{",
                "patroni_cluster_leader_clock_skew_seconds{",
                "patroni_member_replay_lag_seconds{",
                "patroni_member_left_dcs_timestamp_seconds{",
                "patroni_standby_source_position_timestamp_seconds{",
                "patroni_member_rest_round_trip_seconds{",
                "patroni_raft_status_round_trip_seconds{",
                "patroni_etcd_status_round_trip_seconds{",
                // the exporter's own process (test binary's), read at the render
                "process_cpu_seconds_total ",
                "process_max_fds ",
                "process_open_fds ",
                "process_resident_memory_bytes ",
                "process_start_time_seconds ",
                "process_virtual_memory_bytes ",
            ]
            .iter()
            .any(|prefix| line.starts_with(prefix))
            {
                let (series, _) = line.rsplit_once(' ').unwrap();
                format!("{series} <varies>")
            } else if line.starts_with("patroni_exporter_build_info{") {
                "patroni_exporter_build_info{version=\"<version>\",revision=\"<revision>\"} 1"
                    .to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect();
    let mut output = String::new();
    for block in lines.chunk_by(|a, b| a.starts_with('#') == b.starts_with('#')) {
        let mut block = block.to_vec();
        if !block[0].starts_with('#') {
            block.sort();
        }
        for line in block {
            output.push_str(&line);
            output.push('\n');
        }
    }
    output
}

/// A running exporter endpoint for tests, on the production listener ([`server::serve`]).
pub struct Endpoint {
    pub addr: std::net::SocketAddr,
    /// Stops the server when sent or dropped.
    pub stop: tokio::sync::oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Endpoint {
    /// GET `path` over plain http.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.request(path).send().await.unwrap()
    }

    /// GET `path` over plain http with one more request header.
    pub async fn get_with_header(
        &self,
        path: &str,
        (name, value): (&str, &str),
    ) -> reqwest::Response {
        self.request(path).header(name, value).send().await.unwrap()
    }

    fn request(&self, path: &str) -> reqwest::RequestBuilder {
        http_client().get(format!("http://{}{path}", self.addr))
    }

    /// Stops the server and waits for it to end cleanly.
    pub async fn shut_down(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

/// A new store of `slots` clusters, served as by [`start_endpoint`] over plain http without
/// auth: the store to publish into, and its endpoint.
pub async fn endpoint_over_new_store(slots: usize) -> (Arc<Store>, Endpoint) {
    let store = Arc::new(Store::new(slots));
    let endpoint = start_endpoint(store.clone(), None).await;
    (store, endpoint)
}

/// Serves `store` on a free port of 127.0.0.1 under `/metrics`, behind `web` (TLS and basic
/// auth as configured; `None`: plain http, no auth), as the binary does.
pub async fn start_endpoint(store: Arc<Store>, web: Option<Arc<WebState>>) -> Endpoint {
    let web = web.unwrap_or_else(|| Arc::new(WebState::load(None).unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(
        listener,
        AppState::new(store, "/metrics"),
        web,
        async move {
            let _ = stopped.await;
        },
    ));
    Endpoint { addr, stop, task }
}

/// A fake etcd cluster of three members answering etcd 3.4.23's captured documents
/// (`tests/fixtures/etcd-3.4`, e1 the leader): the member list names the fakes' own URLs,
/// and Patroni's keys are those of the capture moved under `/service/<scope>/`, its members
/// renamed as the REST capture's.
pub async fn fake_etcd_cluster(scope: &str) -> Vec<patroni_raft_exporter::etcd::fake::FakeEtcd> {
    fake_etcd_cluster_of(EtcdDocuments::V3_4, scope).await
}

/// Which documents a fake etcd cluster answers: the fixture folder, the scope its keys are
/// under, and its member list's client URLs without the member's digit (1, 2, 3).
pub struct EtcdDocuments {
    pub folder: &'static str,
    pub scope: &'static str,
    pub client_url: &'static str,
}

impl EtcdDocuments {
    /// etcd 3.4.23's captured documents.
    pub const V3_4: EtcdDocuments = EtcdDocuments {
        folder: "etcd-3.4",
        scope: "capdemo",
        client_url: "http://127.0.0.1",
    };
    /// etcd 3.6.5's documents written from its source (`tests/fixtures/etcd-3.6`): the quota
    /// in its statuses, a learner in its member list, etcd-b the leader.
    pub const V3_6: EtcdDocuments = EtcdDocuments {
        folder: "etcd-3.6",
        scope: "batman",
        client_url: "https://10.0.0.1",
    };
}

/// A fake etcd cluster of three members answering `documents`, as [fake_etcd_cluster].
pub async fn fake_etcd_cluster_of(
    documents: EtcdDocuments,
    scope: &str,
) -> Vec<patroni_raft_exporter::etcd::fake::FakeEtcd> {
    use base64::Engine;
    use patroni_raft_exporter::etcd::fake::{FakeEtcd, Reply};
    let EtcdDocuments {
        folder,
        scope: captured_scope,
        client_url,
    } = documents;
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(FakeEtcd::start("127.0.0.1").await);
    }
    let mut member_list =
        String::from_utf8(fixture(&format!("{folder}/member-list.json"))).unwrap();
    for (index, member) in members.iter().enumerate() {
        let url = member.url().as_str().trim_end_matches('/').to_owned();
        member_list = member_list.replace(&format!("{client_url}{}:2379", index + 1), &url);
    }
    let base64 = base64::engine::general_purpose::STANDARD;
    let mut range: serde_json::Value =
        serde_json::from_slice(&fixture(&format!("{folder}/range-patroni.json"))).unwrap();
    // The capture's members pg2 (its leader) and pg1 renamed as the REST capture's members
    // (postgresql-0 the leader, postgresql-1, and postgresql-2 a copy of pg1's key), so that
    // every member's own view agrees with the keys (patroni_member_dcs_view_stale 0).
    let renamed = |key: String| {
        key.replace(
            &format!("/service/{captured_scope}/"),
            &format!("/service/{scope}/"),
        )
        .replace("/members/pg2", "/members/postgresql-0")
        .replace("/members/pg1", "/members/postgresql-1")
    };
    let kvs = range["kvs"].as_array_mut().unwrap();
    let mut third = None;
    for kv in kvs.iter_mut() {
        let key = String::from_utf8(base64.decode(kv["key"].as_str().unwrap()).unwrap()).unwrap();
        if key.ends_with("/leader") {
            kv["value"] = serde_json::Value::String(base64.encode("postgresql-0"));
        }
        let moved = renamed(key);
        if moved.ends_with("/members/postgresql-1") {
            let mut copy = kv.clone();
            copy["key"] = serde_json::Value::String(
                base64.encode(moved.replace("postgresql-1", "postgresql-2")),
            );
            third = Some(copy);
        }
        kv["key"] = serde_json::Value::String(base64.encode(moved));
    }
    kvs.extend(third);
    range["count"] = serde_json::Value::String(kvs.len().to_string());
    let range = serde_json::to_vec(&range).unwrap();
    for (index, member) in members.iter().enumerate() {
        let answers = [
            (
                "/v3/maintenance/status",
                fixture(&format!("{folder}/status-e{}.json", index + 1)),
            ),
            ("/v3/cluster/member/list", member_list.clone().into_bytes()),
            (
                "/v3/maintenance/alarm",
                fixture(&format!("{folder}/alarm-none.json")),
            ),
            ("/v3/kv/range", range.clone()),
            (
                "/v3/lease/timetolive",
                fixture(&format!("{folder}/timetolive-leader.json")),
            ),
            ("/health", fixture(&format!("{folder}/health.json"))),
            ("/version", fixture(&format!("{folder}/version.json"))),
        ];
        for (path, body) in answers {
            member.route(path, Reply::ok(body));
        }
    }
    members
}

/// How long the calling thread has been runnable without a CPU (the kernel's schedstat: time
/// waiting on a run queue); zero where the kernel does not say.
///
/// Why: a timing assertion about the exporter (a poll ends by its interval, a scrape does not
/// wait for a poll) may excuse the time another process held the CPU, measured, and nothing
/// else. Two clean-clone CI runs at once on two cores held a poll of the debug build 98 ms past
/// its deadline; a fixed allowance would hide a slow exporter on a quiet machine.
pub fn thread_run_queue_wait() -> Duration {
    run_queue_wait_of("/proc/thread-self/schedstat")
}

/// [`thread_run_queue_wait`] summed over every thread of this process (a multi-thread runtime
/// serves a scrape on any of its workers).
pub fn process_run_queue_wait() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .map(|task| run_queue_wait_of(task.path().join("schedstat")))
        .sum()
}

fn run_queue_wait_of(path: impl AsRef<std::path::Path>) -> Duration {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| text.split_whitespace().nth(1)?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}
