//! A cluster on etcd, end to end in one process: fake Patroni members and fake etcd members
//! answering captured documents, the real poller, the real encoder.

use std::sync::Arc;

use base64::Engine;
use patroni_raft_exporter::config::{DcsSettings, EtcdSettings};
use patroni_raft_exporter::etcd::fake::{FakeEtcd, Reply};
use patroni_raft_exporter::metrics::exposition::Format;
use patroni_raft_exporter::metrics::{render_store, Store};
use patroni_raft_exporter::patroni::ClientPool;
use patroni_raft_exporter::poller::ClusterPoller;

use crate::support::*;

/// Patroni's keys of a cluster `scope` as etcd's range answers them: the leader key naming
/// `leader`, and a member key per `(name, api_url)`.
fn patroni_keys(scope: &str, leader: &str, members: &[(String, String)]) -> Vec<u8> {
    let base64 = base64::engine::general_purpose::STANDARD;
    let key = |relative: &str, value: &str, lease: &str| {
        serde_json::json!({
            "key": base64.encode(format!("/service/{scope}/{relative}")),
            "value": base64.encode(value),
            "create_revision": "5", "mod_revision": "9", "version": "1", "lease": lease,
        })
    };
    let mut kvs = vec![key("leader", leader, "7587883380187226395")];
    for (name, api_url) in members {
        let value = serde_json::json!({"api_url": api_url, "role": "replica", "state": "running"});
        kvs.push(key(&format!("members/{name}"), &value.to_string(), "0"));
    }
    serde_json::to_vec(&serde_json::json!({
        "header": {"cluster_id": "1", "member_id": "9472030171395453087", "revision": "12", "raft_term": "2"},
        "kvs": kvs, "count": kvs.len().to_string(),
    }))
    .unwrap()
}

/// A healthy 4.1.5 cluster `scope` on `ips`, and its members' names and `api_url`s as
/// Patroni's member keys give them.
async fn cluster_on(ips: [&str; 3], scope: &str) -> (FakeCluster, Vec<(String, String)>) {
    let cluster = FakeCluster::start_on(ips, scope, Captured::healthy_415(0)).await;
    let members = cluster
        .urls()
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("postgresql-{i}"), format!("{url}patroni")))
        .collect();
    (cluster, members)
}

/// One etcd member, the leader by its own status (etcd 3.4.23's captured `status-e1.json`),
/// serving `keys` as Patroni's keys.
async fn etcd_leader(keys: Vec<u8>) -> FakeEtcd {
    let fake = FakeEtcd::start("127.0.0.1").await;
    let mut member_list = String::from_utf8(fixture("etcd-3.4/member-list.json")).unwrap();
    member_list = member_list.replace(
        "http://127.0.0.11:2379",
        fake.url().as_str().trim_end_matches('/'),
    );
    for (path, body) in [
        ("/v3/maintenance/status", fixture("etcd-3.4/status-e1.json")),
        ("/v3/cluster/member/list", member_list.into_bytes()),
        ("/v3/maintenance/alarm", fixture("etcd-3.4/alarm-none.json")),
        ("/v3/kv/range", keys),
        (
            "/v3/lease/timetolive",
            fixture("etcd-3.4/timetolive-leader.json"),
        ),
        ("/version", fixture("etcd-3.4/version.json")),
    ] {
        fake.route(path, Reply::ok(body));
    }
    fake
}

fn etcd_settings(endpoint: &FakeEtcd) -> DcsSettings {
    DcsSettings::Etcd(EtcdSettings {
        endpoints: vec![endpoint.url()],
        namespace: EtcdSettings::DEFAULT_NAMESPACE.into(),
        ca_file: None,
        cert_file: None,
        key_file: None,
        username: None,
        password: None,
    })
}

/// The README's quick start on etcd (one `--patroni.url`, one plain `--etcd.endpoint`, no
/// scope given): the first poll learns the scope from `/cluster`, reads Patroni's keys under
/// it, and follows the other members' `api_url`s that the keys name, on hosts nothing else
/// named, so that every member is read in the first poll, `status`'s only one.
#[tokio::test]
async fn the_first_poll_finds_every_member_through_patronis_keys() {
    let (cluster, members) =
        cluster_on(["127.0.0.91", "127.0.0.92", "127.0.0.93"], "on-etcd").await;
    let etcd = etcd_leader(patroni_keys("on-etcd", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls()[..1].to_vec(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let store = Arc::new(Store::new(1));
    store.publish(0, poller.poll_once().await);
    let output = render_store(&store, Format::PrometheusText);
    for i in 0..3 {
        let up = format!("patroni_member_api_up{{scope=\"on-etcd\",member=\"postgresql-{i}\"}}");
        assert_eq!(sample(&output, &up), Some(1.0), "{up}\n{output}");
    }
    assert_eq!(
        sample(&output, "patroni_etcd_member_keys{scope=\"on-etcd\"}"),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &output,
            "patroni_dcs_quorum{scope=\"on-etcd\",dcs=\"etcd\"}"
        ),
        Some(1.0)
    );
    let range = etcd
        .requests()
        .into_iter()
        .find(|request| request.path == "/v3/kv/range")
        .expect("the keys were read in the first poll");
    let prefix = base64::engine::general_purpose::STANDARD.encode("/service/on-etcd/");
    assert!(range.body.contains(&prefix), "{}", range.body);
    // Read-only: nothing but reads, health and version was asked.
    for request in etcd.requests() {
        assert!(
            [
                "/v3/maintenance/status",
                "/v3/cluster/member/list",
                "/v3/maintenance/alarm",
                "/v3/kv/range",
                "/v3/lease/timetolive",
                "/health",
                "/version"
            ]
            .contains(&request.path.as_str()),
            "{request:?}"
        );
        if request.path == "/v3/maintenance/alarm" {
            assert!(request.body.contains("\"GET\""), "{request:?}");
        }
    }
    // Every status answered: no alarm GET, which etcd serves as a Raft proposal.
    assert_eq!(etcd.count("/v3/maintenance/alarm"), 0);
}

/// zalando/patroni #3359: one member's own `/cluster` still names the old leader while
/// Patroni's keys in etcd name the new one. From the second poll with the same keys, that
/// member, and only it, is named stale.
#[tokio::test]
async fn a_member_whose_view_disagrees_with_etcds_keys_is_named_stale() {
    let (cluster, members) =
        cluster_on(["127.0.0.94", "127.0.0.95", "127.0.0.96"], "stale-view").await;
    // The members' views name postgresql-0; the keys postgresql-0 as well, but member 2's
    // own view is the switchover's: postgresql-1 leads there.
    cluster.serve_cluster_on(
        2,
        &fixture("patroni-4.1.5/02-cluster-after-switchover.json"),
    );
    let etcd = etcd_leader(patroni_keys("stale-view", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let store = Arc::new(Store::new(1));
    store.publish(0, poller.poll_once().await);
    let first = render_store(&store, Format::PrometheusText);
    assert!(
        !first.contains("patroni_member_dcs_view_stale{"),
        "judged from the second poll with the same keys:\n{first}"
    );
    store.publish(0, poller.poll_once().await);
    let second = render_store(&store, Format::PrometheusText);
    let stale = |i: usize| {
        sample(
            &second,
            &format!(
                "patroni_member_dcs_view_stale{{scope=\"stale-view\",member=\"postgresql-{i}\"}}"
            ),
        )
    };
    assert_eq!(
        [stale(0), stale(1), stale(2)],
        [Some(0.0), Some(0.0), Some(1.0)],
        "{second}"
    );
}

/// `status` on a cluster on etcd: the etcd verdict in the header, the etcd members' table, and
/// the problems in plain words when etcd has no leader (the survivor's real 3.4.23 answer).
#[tokio::test]
async fn status_prints_the_etcd_members_and_says_what_is_wrong() {
    use patroni_raft_exporter::status::render::{self, Colour};
    use patroni_raft_exporter::status::report::{ClusterReport, Level};
    let (cluster, members) =
        cluster_on(["127.0.0.97", "127.0.0.98", "127.0.0.99"], "status-etcd").await;
    let etcd = etcd_leader(patroni_keys("status-etcd", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let report = ClusterReport::from_snapshot(&poller.poll_once().await);
    let text = render::text(std::slice::from_ref(&report), Colour(false));
    assert!(
        text.contains("etcd quorum: confirmed: 1 of 3 voting members answer, leader e1 (the leader says it leads)"),
        "{text}"
    );
    assert!(text.contains("| etcd endpoint"), "{text}");
    assert!(text.contains("| e1 "), "{text}");
    assert!(text.contains("| leader "), "{text}");
    // The two other members etcd lists (the capture's addresses, where nothing runs here) are
    // asked in the same, only poll: unreachable, and said so.
    assert_eq!(report.level, Level::Warning, "{text}");
    for listed in ["http://127.0.0.12:2379", "http://127.0.0.13:2379"] {
        assert!(
            text.contains(&format!("WARNING etcd member {listed} unreachable")),
            "{text}"
        );
    }

    // The member left alone without a leader: etcd's own words for it.
    etcd.route(
        "/v3/maintenance/status",
        Reply::ok(fixture("etcd-3.4/no-quorum-status-e1.json")),
    );
    let report = ClusterReport::from_snapshot(&poller.poll_once().await);
    let text = render::text(std::slice::from_ref(&report), Colour(false));
    assert_eq!(report.level, Level::Critical, "{text}");
    assert!(text.contains("etcd quorum: lost"), "{text}");
    assert!(
        text.contains("CRITICAL etcd quorum lost: 1 of 3 voting members answer (every member that answers knows no leader)"),
        "{text}"
    );
    assert!(text.contains("nobody can take the leader key"), "{text}");
}

/// A poll whose member list cannot be read judges from the voting members last listed:
/// exported with the time of the poll that listed them, not as this poll's.
#[tokio::test]
async fn remembered_voting_members_carry_the_time_of_the_poll_that_listed_them() {
    let (cluster, members) = cluster_on(["127.0.0.97", "127.0.0.98", "127.0.0.99"], "listed").await;
    let etcd = etcd_leader(patroni_keys("listed", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let listed = poller.poll_once().await;
    assert_eq!(listed.read_at.etcd_members, Some(listed.polled_at_seconds));
    etcd.route(
        "/v3/cluster/member/list",
        Reply::Answer(403, br#"{"error":"permission denied","code":7}"#.to_vec()),
    );
    let remembered = poller.poll_once().await;
    let read = remembered.dcs.etcd().expect("etcd is read");
    assert_eq!(read.listed_voters(), None, "the member list was refused");
    assert_eq!(
        read.quorum.voters, 3,
        "judged against the members last listed"
    );
    assert!(remembered.polled_at_seconds > listed.polled_at_seconds);
    assert_eq!(
        remembered.read_at.etcd_members,
        Some(listed.polled_at_seconds)
    );
}

/// A configuration's load checks each etcd cluster's TLS files by building its transport from
/// the fleet's pool ([`ClusterPoller::check_dcs_files`]); held until the pollers are built, that
/// transport is theirs: a reload of 500 etcd clusters builds each distinct transport once, not
/// twice (a transport parses the system's roots).
#[tokio::test]
async fn the_transport_a_load_checked_is_the_pollers() {
    let (cluster, members) = cluster_on(["127.0.0.94", "127.0.0.95", "127.0.0.96"], "held").await;
    let etcd = etcd_leader(patroni_keys("held", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls()[..1].to_vec(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let pool = ClientPool::default();
    let held = ClusterPoller::check_dcs_files(&config, &pool).unwrap();
    assert!(
        held.is_some(),
        "an etcd cluster's check builds its transport"
    );
    assert_eq!(pool.transports().built(), 1);
    let poller = ClusterPoller::with_clients(0, config.clone(), &pool)
        .await
        .unwrap();
    assert_eq!(
        pool.transports().built(),
        1,
        "the poller took the checked transport"
    );
    drop((held, poller));
    // Nothing held: the next poller builds its own (the count can tell the two apart).
    let _poller = ClusterPoller::with_clients(1, config, &pool).await.unwrap();
    assert_eq!(pool.transports().built(), 2);
    let without_etcd = cluster_config(cluster.urls()[..1].to_vec(), None);
    assert!(!matches!(without_etcd.identity.dcs, DcsSettings::Etcd(_)));
    let none = ClusterPoller::check_dcs_files(&without_etcd, &pool).unwrap();
    assert!(none.is_none(), "no DCS transport to build");
    assert_eq!(pool.transports().built(), 2);
}

/// `GET /version` (the cluster version) is asked of an endpoint in the first poll, then every
/// twelfth, its answer kept in between with the time it was read; a member whose status names
/// another version is asked again at once, and every endpoint every poll while the cluster
/// version is behind a member's own (a rolling upgrade), until it caught up.
#[tokio::test]
async fn the_etcd_versions_are_asked_every_twelfth_poll_and_while_they_change() {
    let (cluster, members) =
        cluster_on(["127.0.0.94", "127.0.0.95", "127.0.0.96"], "versions").await;
    let etcd = etcd_leader(patroni_keys("versions", "postgresql-0", &members)).await;
    let config = cluster_config(cluster.urls().to_vec(), None)
        .with(|config| config.identity.dcs = etcd_settings(&etcd));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let store = Arc::new(Store::new(1));
    macro_rules! poll {
        () => {{
            store.publish(0, poller.poll_once().await);
            render_store(&store, Format::PrometheusText)
        }};
    }
    let info = |cluster_version: &str| {
        format!(
            "patroni_etcd_member_info{{scope=\"versions\",endpoint=\"{}\",member=\"e1\",version=\"3.4.23\",cluster_version=\"{cluster_version}\"}}",
            etcd.url().as_str().trim_end_matches('/')
        )
    };
    let read_at = |output: &str| {
        let fact = "patroni_exporter_fact_read_timestamp_seconds{scope=\"versions\",fact=\"etcd_versions\"}";
        let last = "patroni_exporter_last_poll_timestamp_seconds{scope=\"versions\"}";
        (sample(output, fact).unwrap(), sample(output, last).unwrap())
    };
    let first = poll!();
    assert_eq!(etcd.count("/version"), 1);
    assert_eq!(sample(&first, &info("3.4.0")), Some(1.0), "{first}");
    let (read, polled) = read_at(&first);
    assert_eq!(read, polled, "read by this poll");
    for n in 2..=12 {
        let output = poll!();
        assert_eq!(etcd.count("/version"), 1, "poll {n}");
        assert_eq!(sample(&output, &info("3.4.0")), Some(1.0), "poll {n}");
        let (kept, polled) = read_at(&output);
        assert!(kept == read && polled > read, "poll {n}: {kept} {polled}");
    }
    poll!();
    assert_eq!(etcd.count("/version"), 2, "the thirteenth poll asks again");
    // The member restarted into 3.5.21: asked again in the poll after its status said so,
    // and every poll while the cluster version stays 3.4.0.
    let status = String::from_utf8(fixture("etcd-3.4/status-e1.json")).unwrap();
    etcd.route(
        "/v3/maintenance/status",
        Reply::ok(status.replace("3.4.23", "3.5.21").into_bytes()),
    );
    etcd.route(
        "/version",
        Reply::ok(br#"{"etcdserver":"3.5.21","etcdcluster":"3.4.0"}"#.to_vec()),
    );
    poll!();
    assert_eq!(
        etcd.count("/version"),
        2,
        "its status names 3.5.21 from now"
    );
    for asked in 3..=4 {
        poll!();
        assert_eq!(
            etcd.count("/version"),
            asked,
            "the cluster version is behind"
        );
    }
    etcd.route(
        "/version",
        Reply::ok(br#"{"etcdserver":"3.5.21","etcdcluster":"3.5.0"}"#.to_vec()),
    );
    let caught_up = poll!();
    assert_eq!(etcd.count("/version"), 5);
    assert!(
        caught_up.contains("cluster_version=\"3.5.0\""),
        "{caught_up}"
    );
    poll!();
    assert_eq!(etcd.count("/version"), 5, "settled: not asked again");
}
