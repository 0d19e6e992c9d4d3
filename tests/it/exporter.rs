//! The whole exporter in-process against fake members and Raft nodes that answer with real
//! captures: a golden file of the complete `/metrics` output, hostile peers, and the HTTP
//! endpoints.
//!
//! `UPDATE_GOLDEN=1 cargo test --test it exporter` rewrites `tests/golden/metrics.txt`.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use patroni_raft_exporter::config::{DcsSettings, EtcdSettings};
use patroni_raft_exporter::metrics::exposition::Format;
use patroni_raft_exporter::metrics::{render_store, Store};
use patroni_raft_exporter::patroni::fake::{FakePatroni, Reply};
use patroni_raft_exporter::poller::ClusterPoller;
use patroni_raft_exporter::server::{self, AppState};
use support::*;

const GOLDEN: &str = "tests/golden/metrics.txt";

/// Clusters in one exporter: a healthy Patroni 3.3.8 cluster with Raft, Patroni 4.1.5
/// right after a switchover, a 4.1.5 survivor 60 s after losing Raft quorum, 3.3.8 with tags
/// that leave no failover candidate, 4.1.5 in failsafe mode (Raft cut between members), and
/// more below (split views, departed members, a healthy 4.1.5, two standby clusters).
async fn golden_output(format: Format) -> String {
    let mut addresses = Addresses::default();

    let healthy = FakeCluster::start("healthy-3-3-8", Captured::healthy_338()).await;
    let (healthy_nodes, _healthy_raft) = raft_cluster(
        [
            ("127.0.0.41", Some("enc_leader_0.3.12")),
            ("127.0.0.42", Some("enc_follower_0.3.12")),
            ("127.0.0.43", None),
        ],
        "s3cret",
    )
    .await;
    addresses.add_raft_nodes(&healthy_nodes);

    let switchover = FakeCluster::start("switchover-4-1-5", Captured::switchover_415()).await;

    let survivor_cluster =
        FakeCluster::start("quorum-lost-4-1-5", Captured::quorum_lost_415()).await;
    let (survivor_nodes, _survivor_raft) = raft_cluster(
        [
            ("127.0.0.51", None),
            ("127.0.0.52", Some("enc_noquorum_stale_leader_0.3.12")),
            ("127.0.0.53", None),
        ],
        "s3cret",
    )
    .await;
    addresses.add_raft_nodes(&survivor_nodes);

    // Captured on the real cluster (tests/e2e/capture-states.sh): tags that leave no failover
    // candidate, and failsafe mode keeping the leader while Raft is cut.
    let captured = |version: &'static str, state: &'static str| async move {
        let cluster = FakeCluster::start(
            &format!("{state}-{}", version.replace('.', "-")),
            Captured::state(version, state, b"[]".to_vec()),
        )
        .await;
        cluster.serve_everywhere(
            "/config",
            &fixture(&format!("patroni-{version}/states/{state}/config.json")),
        );
        cluster
    };
    let tags = captured("3.3.8", "tags").await;
    let failsafe = captured("4.1.5", "failsafe-active").await;
    // Standby clusters (tests/e2e/standby.sh), paired with the healthy cluster as their
    // source: one streaming, one whose source primary was stopped.
    let standby = captured("4.1.5", "standby").await;
    // A healthy 4.1.5 cluster as first captured: its members' own GET /metrics of the same
    // moment (01-metrics-m*.txt) are what alerts/tests/compat.test.yml expects of the
    // recording rules of Patroni's names (scripts/compat-test.py).
    let healthy_415 = FakeCluster::start("healthy-4-1-5", Captured::healthy_415(0)).await;
    let standby_cut = captured("3.3.8", "standby-not-streaming").await;
    // The failsafe topology, as Patroni's GET /failsafe answers it while failsafe_mode is on
    // (asked from the second poll: the first one learns failsafe_mode from /config).
    failsafe.serve_everywhere(
        "/failsafe",
        br#"{"postgresql-0": "http://127.0.0.11:8008/patroni", "postgresql-1": "http://127.0.0.12:8008/patroni", "postgresql-2": "http://127.0.0.13:8008/patroni"}"#,
    );

    // An isolated leader: in the first poll every member lists postgresql-0 as leader; then
    // the majority's view drops it and promotes postgresql-1, while postgresql-0 still says
    // primary: remembered (in_dcs 0), two primaries.
    let departed = FakeCluster::start_on(
        ["127.0.0.71", "127.0.0.72", "127.0.0.73"],
        "departed-4-1-5",
        Captured::healthy_415(1),
    )
    .await;

    // Split views: members 1 and 2 answer from the replica that saw the switchover to
    // member 1 (timeline 2), member 0 from one frozen before it, and still says primary:
    // two primaries by their own word, two DCS views, member 0 out of the candidates.
    let split = FakeCluster::start_on(
        ["127.0.0.61", "127.0.0.62", "127.0.0.63"],
        "split-4-1-5",
        Captured::split_415(),
    )
    .await;
    split.serve_cluster_on(0, &fixture("patroni-4.1.5/01-cluster-from-m0.json"));
    // Its Raft nodes on the members' hosts, member 1's node the leader: the clock of the
    // primary is compared with the clock of the Raft leader's host (the same member here).
    let [follower, leader, other_follower] = healthy_raft(1);
    let (split_nodes, _split_raft) = raft_cluster(
        [
            ("127.0.0.61", follower),
            ("127.0.0.62", leader),
            ("127.0.0.63", other_follower),
        ],
        "s3cret",
    )
    .await;
    addresses.add_raft_nodes(&split_nodes);

    // A healthy 4.1.5 cluster on etcd: three etcd members (e1 the leader) answering etcd
    // 3.4.23's captured documents, with Patroni's keys of the capture under its prefix.
    let on_etcd = FakeCluster::start("etcd-4-1-5", Captured::healthy_415(0)).await;
    let etcd_members = fake_etcd_cluster("etcd-4-1-5").await;
    for (index, member) in etcd_members.iter().enumerate() {
        addresses.add(
            member.addr.to_string(),
            format!("127.0.0.3{}:2379", index + 1),
        );
    }
    let etcd_endpoints: Vec<url::Url> = etcd_members.iter().map(|m| m.url()).collect();
    // The same REST cluster on etcd 3.6.5 (documents written from its source): the database
    // quota in each status, a learner in the member list.
    let on_etcd36 = FakeCluster::start("etcd36-4-1-5", Captured::healthy_415(0)).await;
    let etcd36_members = fake_etcd_cluster_of(EtcdDocuments::V3_6, "etcd36-4-1-5").await;
    for (index, member) in etcd36_members.iter().enumerate() {
        addresses.add(
            member.addr.to_string(),
            format!("127.0.0.4{}:2379", index + 1),
        );
    }
    let etcd36_endpoints: Vec<url::Url> = etcd36_members.iter().map(|m| m.url()).collect();
    let on_etcd_config = |urls, scope: &str, endpoints: &Vec<url::Url>| {
        cluster_config(urls, None).with(|config| {
            config.identity.expected_scope = Some(scope.into());
            config.identity.dcs = DcsSettings::Etcd(EtcdSettings {
                endpoints: endpoints.clone(),
                namespace: EtcdSettings::DEFAULT_NAMESPACE.into(),
                ca_file: None,
                cert_file: None,
                key_file: None,
                username: None,
                password: None,
            });
        })
    };

    let configs = vec![
        cluster_config(healthy.urls(), Some((healthy_nodes, Some("s3cret")))),
        cluster_config(tags.urls(), None),
        cluster_config(failsafe.urls(), None),
        cluster_config(switchover.urls(), None),
        cluster_config(departed.urls_from(1), None),
        // Member 1 first: the exporter reads the majority's view; member 0 is asked too.
        cluster_config(split.urls_from(1), Some((split_nodes, Some("s3cret")))),
        cluster_config(
            // The first URL is a dead member: the next one must be asked in the same poll.
            vec![
                url::Url::parse(&format!("http://{}", dead_address().await)).unwrap(),
                survivor_cluster.urls()[1].clone(),
            ],
            Some((survivor_nodes, Some("s3cret"))),
        ),
        cluster_config(healthy_415.urls(), None),
        cluster_config(standby.urls(), None)
            .with(|config| config.identity.standby_of = Some("healthy-3-3-8".into())),
        cluster_config(standby_cut.urls(), None)
            .with(|config| config.identity.standby_of = Some("healthy-3-3-8".into())),
        on_etcd_config(on_etcd.urls(), "etcd-4-1-5", &etcd_endpoints),
        on_etcd_config(on_etcd36.urls(), "etcd36-4-1-5", &etcd36_endpoints),
    ];
    // Configs 2 (failsafe), 4 (departed) and 10 (on etcd: members' views are compared with
    // keys that did not change since the poll before) need a second poll.
    let output =
        poll_twice_and_render(configs, &[2, 4, 10], || departed.isolate_member_0(), format).await;
    let clusters = [
        &healthy,
        &switchover,
        &survivor_cluster,
        &tags,
        &failsafe,
        &split,
        &departed,
        &healthy_415,
        &standby,
        &standby_cut,
        &on_etcd,
        &on_etcd36,
    ];
    let output = clusters.iter().fold(output, |output, cluster| {
        cluster.addresses.normalize(&output)
    });
    normalize_volatile(&addresses.normalize(&output))
}

#[tokio::test]
async fn golden_metrics_output() {
    let output = golden_output(Format::PrometheusText).await;
    let path = format!("{}/{GOLDEN}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(std::path::Path::new(&path).parent().unwrap()).unwrap();
        std::fs::write(&path, &output).unwrap();
    }
    let expected =
        std::fs::read_to_string(&path).expect("golden file missing: run with UPDATE_GOLDEN=1");
    if output != expected {
        let actual_path = format!("{}/target/metrics.actual.txt", env!("CARGO_MANIFEST_DIR"));
        std::fs::write(&actual_path, &output).unwrap();
        panic!("/metrics differs from {GOLDEN}; see {actual_path} (UPDATE_GOLDEN=1 rewrites the golden file)");
    }
}

#[tokio::test]
async fn golden_output_says_what_an_operator_needs() {
    // Independent of the golden file: the facts the exporter exists for.
    let output = golden_output(Format::PrometheusText).await;
    let has = |line: &str| output.lines().any(|l| l == line);
    // On failure, what the exporter said of that cluster instead.
    let expect = |line: &str| {
        let scope = line
            .split("scope=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_default();
        let said: Vec<&str> = output
            .lines()
            .filter(|l| l.contains(&format!("scope=\"{scope}\"")))
            .collect();
        assert!(
            has(line),
            "{line} missing; {scope}'s lines:\n{}",
            said.join("\n")
        );
    };
    for line in [
        "patroni_raft_cluster_quorum{scope=\"healthy-3-3-8\"} 1",
        "patroni_raft_cluster_quorum{scope=\"quorum-lost-4-1-5\"} 0",
        "patroni_raft_has_quorum{scope=\"quorum-lost-4-1-5\",node=\"127.0.0.12:2222\"} 0",
        "patroni_raft_up{scope=\"quorum-lost-4-1-5\",node=\"127.0.0.11:2222\"} 0",
        // Split views: two members say primary; member 0's own /cluster is another replica's.
        "patroni_cluster_primaries{scope=\"split-4-1-5\"} 2",
        "patroni_cluster_leaders{scope=\"split-4-1-5\"} 1",
        "patroni_cluster_dcs_views{scope=\"split-4-1-5\"} 2",
        "patroni_member_dcs_view_differs{scope=\"split-4-1-5\",member=\"postgresql-0\",field=\"leader\"} 1",
        "patroni_member_dcs_view_differs{scope=\"split-4-1-5\",member=\"postgresql-2\",field=\"leader\"} 0",
        "patroni_member_failover_excluded{scope=\"split-4-1-5\",member=\"postgresql-0\",reason=\"dcs_view\"} 1",
        "patroni_cluster_dcs_views{scope=\"healthy-3-3-8\"} 1",
        "patroni_cluster_primaries{scope=\"healthy-3-3-8\"} 1",
        "patroni_raft_voter_sets{scope=\"healthy-3-3-8\"} 1",
        "patroni_cluster_leader_clock_skew_seconds{scope=\"split-4-1-5\"} <varies>",
        "patroni_member_in_dcs{scope=\"departed-4-1-5\",member=\"postgresql-0\"} 0",
        "patroni_cluster_primaries{scope=\"departed-4-1-5\"} 2",
        "patroni_member_left_dcs_timestamp_seconds{scope=\"departed-4-1-5\",member=\"postgresql-0\"} <varies>",
        "patroni_member_failsafe_topology{scope=\"failsafe-active-4-1-5\",member=\"postgresql-2\"} 1",
        // /cluster still shows a leader, but the survivor says it is a replica; the dead
        // members' own /patroni do not answer.
        "patroni_cluster_leaders{scope=\"quorum-lost-4-1-5\"} 1",
        "patroni_member_role_mismatch{scope=\"quorum-lost-4-1-5\",member=\"postgresql-1\"} 1",
        "patroni_member_api_up{scope=\"quorum-lost-4-1-5\",member=\"postgresql-0\"} 0",
        "patroni_member_api_up{scope=\"quorum-lost-4-1-5\",member=\"postgresql-2\"} 0",
        "patroni_member_role_mismatch{scope=\"healthy-3-3-8\",member=\"postgresql-0\"} 0",
        "patroni_member_reported_role{scope=\"healthy-3-3-8\",member=\"postgresql-0\",role=\"primary\"} 1",
        // During the switchover the stopped old leader has no timeline and no lag series.
        "patroni_member_state{scope=\"switchover-4-1-5\",member=\"postgresql-0\",state=\"stopped\"} 1",
        "patroni_up{scope=\"switchover-4-1-5\"} 1",
    ] {
        expect(line);
    }
    assert!(!output
        .contains("patroni_member_timeline{scope=\"switchover-4-1-5\",member=\"postgresql-0\"}"));
    assert!(!output
        .contains("patroni_member_lag_bytes{scope=\"switchover-4-1-5\",member=\"postgresql-0\"}"));
}

#[tokio::test]
async fn openmetrics_output_ends_with_eof_and_counters_are_typed_without_total() {
    let output = golden_output(Format::OpenMetrics).await;
    assert!(output.ends_with("# EOF\n"));
    assert!(output.contains("# TYPE patroni_cluster_leader_changes counter\n"));
    assert!(output.contains("patroni_cluster_leader_changes_total{scope=\"healthy-3-3-8\"} 0\n"));
}

async fn single_member_output(reply: Reply) -> (String, Duration) {
    let (_member, config) = single_member(reply).await;
    let started = Instant::now();
    let output = poll_and_render(vec![config], Format::PrometheusText).await;
    (output, started.elapsed())
}

fn error_count(output: &str, source: &str, kind: &str) -> u64 {
    let prefix = "patroni_exporter_poll_errors_total{";
    output
        .lines()
        .filter(|line| line.starts_with(prefix))
        .filter(|line| line.contains(&format!("source=\"{source}\",kind=\"{kind}\"")))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn hostile_members_give_the_right_error_kind_quickly() {
    // Twice the 4 MiB cap: the fake copies its reply per request, and a 50 MB one (as this
    // case had) took the 800 ms poll deadline beside a second CI run (load 15-25), so the
    // read ended as a timeout before the cap was reached.
    let huge = {
        let mut body = b"{\"members\": [], \"scope\": \"".to_vec();
        body.extend(std::iter::repeat_n(b'x', 8 * 1024 * 1024));
        body.extend_from_slice(b"\"}");
        body
    };
    let cap = patroni_raft_exporter::patroni::ClientSettings::default().max_body_bytes;
    assert!(
        huge.len() > cap,
        "the body must outgrow the cap of {cap} bytes"
    );
    let deep = "[".repeat(100_000).into_bytes();
    let cases: Vec<(&str, Reply, &str)> = vec![
        ("500", Reply::Status(500), "http_status"),
        ("hang", Reply::Hang, "timeout"),
        ("endless body", Reply::EndlessBody, "body_too_large"),
        ("1 byte per second", Reply::SlowBody, "timeout"),
        ("invalid json", Reply::Json(b"<html>".to_vec()), "decode"),
        ("invalid utf-8", Reply::Json(b"{\"scope\": \"\xff\xfe\", \"members\": []}".to_vec()), "decode"),
        ("wrong types", Reply::Json(br#"{"members": [{"name": 1}]}"#.to_vec()), "decode"),
        ("out of range", Reply::Json(br#"{"members": [{"name":"a","role":"leader","state":"running","timeline": 1e999}]}"#.to_vec()), "decode"),
        ("nested 100k deep", Reply::Json(deep), "decode"),
        ("8 MiB body", Reply::Json(huge), "body_too_large"),
        ("redirect", Reply::Redirect("http://127.0.0.1:1/cluster".into()), "http_status"),
    ];
    for (name, reply, kind) in cases {
        let (output, elapsed) = single_member_output(reply).await;
        assert!(output.contains("patroni_up{scope=\""), "{name}: {output}");
        assert!(
            output
                .lines()
                .any(|l| l.starts_with("patroni_up{") && l.ends_with(" 0")),
            "{name}: {output}"
        );
        assert_eq!(
            error_count(&output, "cluster", kind),
            1,
            "{name}: expected kind {kind}:\n{output}"
        );
        assert!(elapsed < Duration::from_secs(3), "{name}: took {elapsed:?}");
    }
}

#[tokio::test]
async fn endless_headers_fail_within_the_timeout() {
    let (output, elapsed) = single_member_output(Reply::EndlessHeaders).await;
    assert!(output
        .lines()
        .any(|l| l.starts_with("patroni_up{") && l.ends_with(" 0")));
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[tokio::test]
async fn scope_mismatch_is_an_error_not_a_mix() {
    let (_member, mut config) =
        single_member(Reply::Json(fixture("patroni-3.3.8/cluster.json"))).await;
    config.identity.expected_scope = Some("other-cluster".into());
    let output = poll_and_render(vec![config], Format::PrometheusText).await;
    assert!(
        output.contains("patroni_up{scope=\"other-cluster\"} 0"),
        "{output}"
    );
    assert_eq!(error_count(&output, "cluster", "scope_mismatch"), 1);
    assert!(!output.contains("pg-test"));
}

#[tokio::test]
async fn members_that_leave_are_remembered_for_ttl_then_vanish_from_the_output() {
    let member = FakePatroni::start("127.0.0.1").await;
    let three = String::from_utf8(fixture("patroni-3.3.8/cluster.json")).unwrap();
    member.route("/cluster", Reply::Json(three.clone().into_bytes()));
    // ttl 1 s: the memory of a departed member that does not say primary ends after it.
    member.route(
        "/config",
        Reply::Json(br#"{"ttl": 1, "loop_wait": 1}"#.to_vec()),
    );
    let config = cluster_config(vec![url::Url::parse(&member.url()).unwrap()], None);
    let store = Arc::new(Store::new(1));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    store.publish(0, poller.poll_once().await);
    let render = || patroni_raft_exporter::metrics::render_store(&store, Format::PrometheusText);
    let before = render();
    assert!(before.contains("patroni_member_in_dcs{scope=\"pg-test\",member=\"postgresql-2\"} 1"));

    let mut view: serde_json::Value = serde_json::from_str(&three).unwrap();
    view["members"].as_array_mut().unwrap().pop();
    member.route("/cluster", Reply::Json(serde_json::to_vec(&view).unwrap()));
    store.publish(0, poller.poll_once().await);
    let left = render();
    // Still asked and marked, but no longer described by the DCS view.
    assert!(
        left.contains("patroni_member_in_dcs{scope=\"pg-test\",member=\"postgresql-2\"} 0"),
        "{left}"
    );
    assert!(left.contains(
        "patroni_member_left_dcs_timestamp_seconds{scope=\"pg-test\",member=\"postgresql-2\"}"
    ));
    assert!(
        !left.contains("patroni_member_role{scope=\"pg-test\",member=\"postgresql-2\""),
        "{left}"
    );
    assert!(left.contains("patroni_cluster_members{scope=\"pg-test\"} 2"));

    tokio::time::sleep(Duration::from_millis(1100)).await;
    store.publish(0, poller.poll_once().await);
    let after = render();
    assert!(!after.contains("member=\"postgresql-2\""), "{after}");
}

#[tokio::test]
async fn a_view_that_differs_for_one_poll_takes_no_candidate_away() {
    // postgresql-1's own /cluster lacks postgresql-2's key for one poll (a key written between
    // two members' answers), then for two: only the second leaves it out of the candidates.
    let cluster = FakeCluster::start("one-poll-4-1-5", Captured::healthy_415(0)).await;
    let config = cluster_config(cluster.urls(), None);
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let dcs_view_excluded = |snapshot: &patroni_raft_exporter::snapshot::ClusterSnapshot| {
        let member = snapshot
            .failover
            .members
            .iter()
            .find(|m| m.name == "postgresql-1")
            .expect("postgresql-1 judged");
        member
            .exclusions
            .iter()
            .any(|e| e.reason.as_str() == "dcs_view")
    };
    let first = poller.poll_once().await;
    assert_eq!(first.failover.candidates(), 2, "{:?}", first.failover);

    let mut short: serde_json::Value =
        serde_json::from_slice(&fixture("patroni-4.1.5/01-cluster-from-m1.json")).unwrap();
    short["members"].as_array_mut().unwrap().pop();
    cluster.serve_cluster_on(1, &serde_json::to_vec(&short).unwrap());
    let once = poller.poll_once().await;
    assert!(once.views.diverged("postgresql-1"), "{:?}", once.views);
    assert!(!dcs_view_excluded(&once), "{:?}", once.failover);
    assert_eq!(once.failover.candidates(), 2);

    let twice = poller.poll_once().await;
    assert!(dcs_view_excluded(&twice), "{:?}", twice.failover);
    assert_eq!(twice.failover.candidates(), 1);

    cluster.serve_cluster_on(1, &fixture("patroni-4.1.5/01-cluster-from-m1.json"));
    let agreed = poller.poll_once().await;
    assert!(!agreed.views.diverged("postgresql-1"));
    assert_eq!(agreed.failover.candidates(), 2);
}

/// One poll: how many times the reader (member 0) was asked `/history` and `/config`, and
/// the entries of the history published.
async fn poll_reader_documents(
    poller: &mut ClusterPoller,
    cluster: &FakeCluster,
) -> ((usize, usize), usize) {
    let before = (
        cluster.times_asked(0, "/history"),
        cluster.times_asked(0, "/config"),
    );
    let snapshot = poller.poll_once().await;
    // what was not asked is still published, as last read
    assert!(snapshot.history.is_some() && snapshot.config.is_some());
    let asked = (
        cluster.times_asked(0, "/history") - before.0,
        cluster.times_asked(0, "/config") - before.1,
    );
    // ... with the time of the poll that read it: this poll's only when this poll asked it
    let now = snapshot.polled_at_seconds;
    for (fact, read_at, asked) in [
        ("history", snapshot.read_at.history, asked.0),
        ("config", snapshot.read_at.config, asked.1),
    ] {
        let read_at = read_at.unwrap_or_else(|| panic!("{fact} served without a read time"));
        assert_eq!(
            read_at == now,
            asked > 0,
            "{fact} read at {read_at}, poll at {now}"
        );
        assert!(read_at <= now, "{fact} read after the poll");
    }
    (asked, snapshot.history.map_or(0, |h| h.len()))
}

/// A poll in which no Raft node answers judges from the voter set last read: exported with the
/// time of the poll that read it, not as this poll's.
#[tokio::test]
async fn a_remembered_voter_set_carries_the_time_of_the_poll_that_read_it() {
    let cluster = FakeCluster::start("voters", Captured::healthy_338()).await;
    let (nodes, fakes) = raft_cluster(
        [
            ("127.0.0.81", Some("enc_leader_0.3.12")),
            ("127.0.0.82", Some("enc_follower_0.3.12")),
            ("127.0.0.83", None),
        ],
        "s3cret",
    )
    .await;
    let config = cluster_config(cluster.urls(), Some((nodes, Some("s3cret"))));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let read = poller.poll_once().await;
    assert_eq!(read.read_at.raft_voters, Some(read.polled_at_seconds));
    drop(fakes);
    let remembered = poller.poll_once().await;
    let raft = remembered.dcs.raft().expect("Raft is polled");
    assert!(
        raft.nodes.iter().all(|node| node.status.is_err()),
        "{raft:?}"
    );
    assert_eq!(raft.quorum.voters, 3, "judged against the voters last read");
    assert!(remembered.polled_at_seconds > read.polled_at_seconds);
    assert_eq!(remembered.read_at.raft_voters, Some(read.polled_at_seconds));
}

/// Over a rotation each member's `/liveness` is asked once: the member asked in a poll has that
/// poll's read time, the others the earlier poll's that asked them; nobody's is newer.
#[tokio::test]
async fn rotated_answers_carry_the_time_of_the_poll_that_read_them() {
    let cluster = FakeCluster::start("rotation", Captured::healthy_415(0)).await;
    let mut poller = ClusterPoller::new(0, cluster_config(cluster.urls(), None))
        .await
        .unwrap();
    let mut last_read: std::collections::BTreeMap<String, f64> = Default::default();
    for poll in 0..6 {
        let snapshot = poller.poll_once().await;
        let now = snapshot.polled_at_seconds;
        let mut fresh = 0;
        for member in &snapshot.members {
            let name = &member.member.name;
            let Some(at) = member.read_at.liveness else {
                assert!(poll < 3, "{name}'s liveness unasked after a whole rotation");
                assert!(member.probes.liveness.is_none(), "a value without a time");
                continue;
            };
            if at == now {
                fresh += 1;
                last_read.insert(name.clone(), at);
            } else {
                assert_eq!(
                    Some(&at),
                    last_read.get(name),
                    "{name}: an old read keeps its time"
                );
            }
        }
        assert_eq!(fresh, 1, "poll {poll}: one member asked in turn");
    }
    let store = Store::new(1);
    store.publish(0, poller.poll_once().await);
    let output = render_store(&store, Format::PrometheusText);
    let liveness_times = output
        .lines()
        .filter(|line| {
            line.starts_with("patroni_exporter_member_fact_read_timestamp_seconds{")
                && line.contains("fact=\"liveness\"")
        })
        .count();
    assert_eq!(liveness_times, 3, "{output}");
}

#[tokio::test]
async fn history_and_config_are_asked_when_due_and_kept_in_between() {
    let cluster = FakeCluster::start("cadence", Captured::healthy_415(0)).await;
    let mut poller = ClusterPoller::new(0, cluster_config(cluster.urls(), None))
        .await
        .unwrap();
    let mut asked = Vec::new();
    for _ in 0..6 {
        asked.push(poll_reader_documents(&mut poller, &cluster).await.0);
    }
    // (/history, /config): on timeline 1 the history once, the configuration every third poll
    assert_eq!(asked, [(1, 1), (0, 0), (0, 0), (0, 1), (0, 0), (0, 0)]);
    // A switchover: timeline 2 in /cluster, before Patroni has written its history entry
    // (polls 1 and 2), then with it.
    cluster.serve_cluster_on(
        0,
        &fixture("patroni-4.1.5/02-cluster-after-switchover.json"),
    );
    let mut seen = Vec::new();
    for poll in 1..=5 {
        if poll == 3 {
            let history = fixture("patroni-4.1.5/02-history-after-switchover.json");
            cluster.serve_on(0, "/history", &history);
        }
        seen.push(poll_reader_documents(&mut poller, &cluster).await);
    }
    // (/history, /config) asked, and the history entries served
    assert_eq!(
        seen,
        [
            ((1, 1), 0),
            ((1, 0), 0),
            ((1, 0), 1),
            ((0, 1), 1),
            ((0, 0), 1)
        ]
    );
}

#[tokio::test]
async fn leader_changes_are_counted() {
    let (member, config) = single_member(Reply::Json(fixture(
        "patroni-4.1.5/01-cluster-from-m0.json",
    )))
    .await;
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    assert_eq!(poller.poll_once().await.counters.leader_changes, 0);
    member.route(
        "/cluster",
        Reply::Json(fixture("patroni-4.1.5/02-cluster-after-switchover.json")),
    );
    assert_eq!(poller.poll_once().await.counters.leader_changes, 1);
    // A transient without a leader does not count, nor does the same leader again.
    member.route(
        "/cluster",
        Reply::Json(br#"{"scope":"pg-test","members":[]}"#.to_vec()),
    );
    assert_eq!(poller.poll_once().await.counters.leader_changes, 1);
    member.route(
        "/cluster",
        Reply::Json(fixture("patroni-4.1.5/02-cluster-after-switchover.json")),
    );
    assert_eq!(poller.poll_once().await.counters.leader_changes, 1);
}

#[tokio::test]
async fn http_endpoints() {
    let (store, endpoint) = endpoint_over_new_store(1).await;

    assert_eq!(endpoint.get("/-/healthy").await.status(), 200);
    assert_eq!(endpoint.get("/-/ready").await.status(), 503);
    let landing = endpoint.get("/").await.text().await.unwrap();
    assert!(landing.contains("href=\"/metrics\""));

    let (_member, config) = single_member(Reply::Json(fixture("patroni-3.3.8/cluster.json"))).await;
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    store.publish(0, poller.poll_once().await);
    assert_eq!(endpoint.get("/-/ready").await.status(), 200);

    let text = endpoint.get("/metrics").await;
    assert_eq!(
        text.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(text
        .text()
        .await
        .unwrap()
        .contains("patroni_cluster_members{scope=\"pg-test\"} 3"));
    let openmetrics = endpoint
        .get_with_header(
            "/metrics",
            ("accept", "application/openmetrics-text; version=1.0.0"),
        )
        .await;
    assert!(openmetrics.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    assert!(openmetrics.text().await.unwrap().ends_with("# EOF\n"));

    endpoint.shut_down().await;
}

/// `/probe?scope=NAME` serves one cluster; `/metrics` streams every cluster's chunks as of
/// the snapshots current when the scrape arrives, the bytes the assembly in one `String`
/// gives (the golden file's); both send gzip to a scraper that accepts it.
#[tokio::test]
async fn probe_streaming_and_gzip() {
    let (store, endpoint) = endpoint_over_new_store(2).await;

    assert_eq!(endpoint.get("/probe").await.status(), 400);
    assert_eq!(endpoint.get("/probe?scope=pg-test").await.status(), 404);

    let first = FakePatroni::start("127.0.0.1").await;
    first.route(
        "/cluster",
        Reply::Json(fixture("patroni-3.3.8/cluster.json")),
    );
    let second = FakePatroni::start("127.0.0.1").await;
    let other = String::from_utf8(fixture("patroni-4.1.5/01-cluster-from-m0.json"))
        .unwrap()
        .replace("\"pg-test\"", "\"other\"");
    second.route("/cluster", Reply::Json(other.into_bytes()));
    let mut pollers = Vec::new();
    for (slot, member) in [&first, &second].into_iter().enumerate() {
        let config = cluster_config(vec![url::Url::parse(&member.url()).unwrap()], None);
        let mut poller = ClusterPoller::new(slot, config).await.unwrap();
        store.publish(slot, poller.poll_once().await);
        pollers.push(poller);
    }

    let probe = endpoint.get("/probe?scope=other").await;
    assert_eq!(probe.status(), 200);
    let probe = probe.text().await.unwrap();
    assert!(probe.contains("patroni_cluster_members{scope=\"other\"} 3"));
    assert!(!probe.contains("pg-test"), "only the asked cluster");
    assert!(probe.contains("patroni_exporter_build_info"));

    // The process families are read anew every second: compared apart (tests in src/metrics).
    let metrics = without_process(&endpoint.get("/metrics").await.text().await.unwrap());
    assert!(metrics.contains("patroni_cluster_members{scope=\"other\"} 3"));
    assert!(metrics.contains("patroni_cluster_members{scope=\"pg-test\"} 3"));
    assert!(metrics.len() < endpoint.get("/metrics").await.text().await.unwrap().len());
    assert_eq!(
        metrics,
        without_process(&render_store(&store, Format::PrometheusText))
    );
    let openmetrics = endpoint
        .get_with_header(
            "/metrics",
            ("accept", "application/openmetrics-text; version=1.0.0"),
        )
        .await;
    assert_eq!(
        without_process(&openmetrics.text().await.unwrap()),
        without_process(&render_store(&store, Format::OpenMetrics))
    );
    // Nothing published since: the same bytes.
    assert_eq!(
        without_process(&endpoint.get("/metrics").await.text().await.unwrap()),
        metrics
    );
    // A publication is seen by the next scrape.
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.publish(0, pollers[0].poll_once().await);
    let fresh = without_process(&endpoint.get("/metrics").await.text().await.unwrap());
    assert_ne!(fresh, metrics, "the new poll's timestamp must show");

    for path in ["/metrics", "/probe?scope=pg-test"] {
        let plain = without_process(&endpoint.get(path).await.text().await.unwrap());
        let gzipped = endpoint
            .get_with_header(path, ("accept-encoding", "gzip"))
            .await;
        assert_eq!(gzipped.headers()["content-encoding"], "gzip", "{path}");
        assert_eq!(gzipped.headers()["vary"], "Accept-Encoding", "{path}");
        let compressed = gzipped.bytes().await.unwrap();
        assert!(compressed.len() < plain.len() / 4, "{path}");
        let mut unpacked = String::new();
        std::io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(&compressed[..]),
            &mut unpacked,
        )
        .unwrap();
        assert_eq!(without_process(&unpacked), plain, "{path}");
    }

    // A reload to one cluster: the other one is gone from the next scrape, plain and gzip.
    store.reset(1);
    store.publish(0, pollers[0].poll_once().await);
    let reloaded = endpoint.get("/metrics").await.text().await.unwrap();
    assert!(reloaded.contains("patroni_cluster_members{scope=\"pg-test\"} 3"));
    assert!(!reloaded.contains("scope=\"other\""), "{reloaded}");
    let compressed = endpoint
        .get_with_header("/metrics", ("accept-encoding", "gzip"))
        .await
        .bytes()
        .await
        .unwrap();
    let mut unpacked = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&compressed[..]),
        &mut unpacked,
    )
    .unwrap();
    // two scrapes: the process families (CPU, memory) may have moved between them
    assert_eq!(without_process(&unpacked), without_process(&reloaded));
    assert_eq!(endpoint.get("/probe?scope=other").await.status(), 404);

    endpoint.shut_down().await;
}

#[tokio::test]
async fn a_hanging_cluster_never_delays_metrics_or_another_cluster() {
    let hanging = FakePatroni::start("127.0.0.1").await;
    hanging.route("/cluster", Reply::Hang);
    let healthy = FakePatroni::start("127.0.0.1").await;
    healthy.route(
        "/cluster",
        Reply::Json(fixture("patroni-3.3.8/cluster.json")),
    );
    let store = Arc::new(Store::new(2));
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let mut slow = cluster_config(vec![url::Url::parse(&hanging.url()).unwrap()], None);
    slow.poll.timeout = Duration::from_secs(30);
    slow.identity.expected_scope = Some("hanging".into());
    let mut fast = cluster_config(vec![url::Url::parse(&healthy.url()).unwrap()], None);
    fast.poll.interval = Duration::from_millis(200);
    let slow = ClusterPoller::new(0, slow).await.unwrap();
    let fast = ClusterPoller::new(1, fast).await.unwrap();
    tokio::spawn(slow.run(store.numbered_publisher(0), shutdown.clone()));
    tokio::spawn(fast.run(store.numbered_publisher(1), shutdown));
    tokio::time::sleep(Duration::from_millis(700)).await;
    let started = Instant::now();
    let output = patroni_raft_exporter::metrics::render_store(&store, Format::PrometheusText);
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(
        output.contains("patroni_cluster_members{scope=\"pg-test\"} 3"),
        "{output}"
    );
    assert!(!output.contains("scope=\"hanging\""));
    assert!(!store.all_polled());
}

/// The exposition without the exporter's process families (their values change every second).
fn without_process(exposition: &str) -> String {
    exposition
        .lines()
        .filter(|line| {
            !line.starts_with("process_")
                && !line.starts_with("# HELP process_")
                && !line.starts_with("# TYPE process_")
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

#[test]
fn every_exported_family_is_documented() {
    let root = env!("CARGO_MANIFEST_DIR");
    let golden = std::fs::read_to_string(format!("{root}/{GOLDEN}")).unwrap();
    let docs = std::fs::read_to_string(format!("{root}/docs/metrics.md")).unwrap();
    let exported: Vec<&str> = golden
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert!(exported.len() > 40);
    for name in exported {
        // `name{labels}`, or `name` alone for a family without labels (process_*)
        assert!(
            docs.contains(&format!("`{name}{{")) || docs.contains(&format!("| `{name}` |")),
            "{name} is not in docs/metrics.md"
        );
    }
}

#[test]
fn a_telemetry_path_of_probe_is_not_a_conflict() {
    let store = Arc::new(Store::new(1));
    let state = AppState::new(store, "/probe");
    // axum panics on two routes for one path.
    let _router = server::router(state);
}

#[tokio::test]
async fn collectors_switched_off_are_not_asked_and_their_families_are_absent() {
    use patroni_raft_exporter::config::{Collector, Collectors};
    let start = || async { FakeCluster::start("collectors", Captured::healthy_415(0)).await };
    let series = |output: &str| {
        output
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains("scope=\"collectors\""))
            .count()
    };
    let all = start().await;
    let everything = poll_and_render(
        vec![cluster_config(all.urls(), None)],
        Format::PrometheusText,
    )
    .await;
    assert!(all.paths_asked().contains(&"/history".to_owned()));
    let mut report = vec![format!("all collectors: {} series", series(&everything))];
    for collector in Collector::ALL {
        let cluster = start().await;
        let config = cluster_config(cluster.urls(), None).with(|config| {
            config.identity.collectors = Collectors::without([collector]);
        });
        let output = poll_and_render(vec![config], Format::PrometheusText).await;
        let asked = cluster.paths_asked();
        let (path, family) = match collector {
            Collector::History => ("/history", "patroni_cluster_history_entries"),
            Collector::Config => ("/config", "patroni_config_ttl_seconds"),
            Collector::Views => ("/config", "patroni_cluster_dcs_views"),
            Collector::Probes => ("/liveness", "patroni_member_liveness"),
            // Not asked at all here: failsafe mode is off in this configuration.
            Collector::Failsafe => ("/failsafe", "patroni_member_failsafe_topology"),
        };
        if collector != Collector::Views {
            assert!(
                !asked.contains(&path.to_owned()),
                "{collector:?}: {asked:?}"
            );
        }
        assert!(
            !output.contains(&format!("{family}{{")),
            "{collector:?}:\n{output}"
        );
        report.push(format!(
            "without {}: {} series ({} fewer)",
            collector.as_str(),
            series(&output),
            series(&everything) - series(&output)
        ));
    }
    // Printed by `cargo test collectors -- --nocapture`; docs/performance.md quotes the same
    // count measured against fleet-sim (`scripts/bench.sh collectors`).
    println!("{}", report.join("\n"));
}

#[tokio::test]
async fn an_isolated_primary_out_of_the_dcs_view_is_still_asked_and_counted() {
    use patroni_raft_exporter::status::render::{self, Colour};
    use patroni_raft_exporter::status::report::{ClusterReport, Level};
    // Poll 1: the captured healthy cluster, member 0 the leader.
    let cluster = FakeCluster::start("isolated", Captured::healthy_415(1)).await;
    // The exporter reads member 1 (a majority member), as the README quick start would.
    let config = cluster_config(cluster.urls_from(1), None);
    let store = Arc::new(Store::new(1));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    store.publish(0, poller.poll_once().await);

    // Poll 2: member 0 isolated, member 1 promoted by the majority.
    cluster.isolate_member_0();
    let snapshot = poller.poll_once().await;
    let report = ClusterReport::from_snapshot(&snapshot);
    store.publish(0, snapshot);
    let output = patroni_raft_exporter::metrics::render_store(&store, Format::PrometheusText);
    for line in [
        "patroni_member_in_dcs{scope=\"isolated\",member=\"postgresql-0\"} 0",
        "patroni_member_in_dcs{scope=\"isolated\",member=\"postgresql-1\"} 1",
        "patroni_cluster_primaries{scope=\"isolated\"} 2",
        "patroni_cluster_leaders{scope=\"isolated\"} 1",
        "patroni_cluster_multiple_primaries_polls_total{scope=\"isolated\"} 1",
        "patroni_member_reported_role{scope=\"isolated\",member=\"postgresql-0\",role=\"primary\"} 1",
        "patroni_member_api_up{scope=\"isolated\",member=\"postgresql-0\"} 1",
        "patroni_cluster_dcs_views{scope=\"isolated\"} 2",
        "patroni_member_dcs_view_differs{scope=\"isolated\",member=\"postgresql-0\",field=\"members\"} 1",
    ] {
        assert!(output.lines().any(|l| l == line), "{line} missing:\n{output}");
    }
    // Not described by a DCS view it is not in.
    assert!(!output.contains("patroni_member_role{scope=\"isolated\",member=\"postgresql-0\""));
    assert_eq!(report.level, Level::Critical);
    let text = render::text(&[report], Colour(false));
    assert!(
        text.contains("TWO PRIMARIES: postgresql-0 (out of the DCS for 0 s) and postgresql-1"),
        "{text}"
    );
}

/// The round trips exported are each request's own, measured where it is made: a member whose
/// `GET /patroni` answers `DELAY` late and a Raft node whose status reply comes `DELAY` late
/// (after the key exchange) are exported at `DELAY` or more, their healthy peers below it, and
/// a member or node that does not answer has none. Beside them, the deadlines Patroni's
/// source fixes.
#[tokio::test]
async fn round_trips_are_each_requests_own() {
    use patroni_raft_exporter::raft::fake::{healthy_status_pickle, Behaviour, FakeRaftNode};
    use patroni_raft_exporter::raft::RaftKey;
    const DELAY: Duration = Duration::from_millis(300);

    let mut captured = Captured::healthy_415(0);
    captured.own[2] = None;
    let cluster = FakeCluster::start("slow", captured).await;
    cluster.serve_on_after(
        1,
        "/patroni",
        &fixture("patroni-4.1.5/01-patroni-m1.json"),
        DELAY,
    );
    let mut listeners = Vec::new();
    for _ in 0..2 {
        listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let mut nodes: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    nodes.push(dead_address().await);
    let key = RaftKey::derive(b"s3cret");
    let mut fakes = Vec::new();
    for (index, listener) in listeners.into_iter().enumerate() {
        let reply = healthy_status_pickle(index, &nodes);
        let behaviour = match index {
            1 => Behaviour::ServeAfter(DELAY, reply),
            _ => Behaviour::Serve(reply),
        };
        fakes.push(FakeRaftNode::serve(listener, behaviour, Some(key.clone())).unwrap());
    }
    let config = cluster_config(cluster.urls(), Some((nodes.clone(), Some("s3cret"))));
    let output = poll_and_render(vec![config], Format::PrometheusText).await;

    let delay = DELAY.as_secs_f64();
    let rest = |member: &str| {
        support::sample(
            &output,
            &format!(
                "patroni_member_rest_round_trip_seconds{{scope=\"slow\",member=\"{member}\"}}"
            ),
        )
    };
    let raft = |node: &str| {
        support::sample(
            &output,
            &format!("patroni_raft_status_round_trip_seconds{{scope=\"slow\",node=\"{node}\"}}"),
        )
    };
    let fast = rest("postgresql-0").expect("member 0's round trip");
    let slow = rest("postgresql-1").expect("member 1's round trip");
    assert!(fast > 0.0 && fast < delay, "fast member: {fast}\n{output}");
    assert!(
        (delay..delay + 0.5).contains(&slow),
        "slow member: {slow}\n{output}"
    );
    assert_eq!(
        rest("postgresql-2"),
        None,
        "a dead member has no round trip"
    );
    let fast = raft(&nodes[0]).expect("node 0's round trip");
    let slow = raft(&nodes[1]).expect("node 1's round trip");
    assert!(fast > 0.0 && fast < delay, "fast node: {fast}\n{output}");
    assert!(
        (delay..delay + 0.5).contains(&slow),
        "slow node: {slow}\n{output}"
    );
    assert_eq!(raft(&nodes[2]), None, "a dead node has no round trip");
    assert_eq!(
        support::sample(
            &output,
            "patroni_member_request_timeout_seconds{scope=\"slow\"}"
        ),
        Some(2.0)
    );
    // The connection timeout in force on a node is that of the member on its host: these fake
    // nodes and the fake members all listen on 127.0.0.1, and Patroni 4.1.5 runs pysyncobj's
    // default (no --patroni.config-file; 4.1.5 would ignore its raft.connection_timeout anyway).
    assert_eq!(
        support::sample(
            &output,
            &format!(
                "patroni_raft_connection_timeout_seconds{{scope=\"slow\",node=\"{}\"}}",
                nodes[0]
            )
        ),
        Some(3.5)
    );
}

/// Through `--raft.command` the node's status is read but no round trip is exported: the
/// program's run time is mostly its own start, not the node's answer.
#[tokio::test]
async fn a_status_command_exports_no_round_trip() {
    let cluster = FakeCluster::start("by-command", Captured::healthy_338()).await;
    let status = format!(
        "{}/tests/fixtures/patroni-3.3.8/syncobj_admin-status-m0.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut config = cluster_config(cluster.urls(), Some((vec!["127.0.0.11:2222".into()], None)));
    if let Some(raft) = config.identity.dcs.raft_mut() {
        raft.command = Some(
            ["sh", "-c", "cat \"$0\"", &status, "{addr}"]
                .map(str::to_owned)
                .to_vec(),
        );
    }
    let output = poll_and_render(vec![config], Format::PrometheusText).await;
    assert_eq!(
        support::sample(
            &output,
            "patroni_raft_up{scope=\"by-command\",node=\"127.0.0.11:2222\"}"
        ),
        Some(1.0),
        "{output}"
    );
    assert!(
        !output.contains("patroni_raft_status_round_trip_seconds{"),
        "{output}"
    );
    assert!(output.contains("patroni_member_rest_round_trip_seconds{scope=\"by-command\""));
}

#[tokio::test]
async fn a_reload_that_changes_only_request_settings_keeps_what_the_poller_learned() {
    let cluster = FakeCluster::start("reload", Captured::healthy_415(0)).await;
    let config = cluster_config(cluster.urls(), None);
    let mut poller = ClusterPoller::new(0, config.clone()).await.unwrap();
    // the first poll reads the reader's /history; the next one does not need it
    assert_eq!(poll_reader_documents(&mut poller, &cluster).await.0 .0, 1);
    assert_eq!(poll_reader_documents(&mut poller, &cluster).await.0 .0, 0);
    // SIGHUP with another timeout: the same cluster, and the same memory
    let timeout = config
        .clone()
        .with(|c| c.poll.timeout = Duration::from_millis(900));
    let mut poller = poller.reconfigured(timeout).await.unwrap();
    assert_eq!(poll_reader_documents(&mut poller, &cluster).await.0 .0, 0);
    // SIGHUP with Patroni's YAML saying another Raft timing and REST pool: the same cluster
    let timing = patroni_raft_exporter::raft::RaftTimingConfig::default().with(
        patroni_raft_exporter::raft::RaftSetting::ConnectionTimeout,
        6.0,
    );
    let member_settings = config.clone().with(|c| {
        c.member_settings = Some(patroni_raft_exporter::config::MemberSettings {
            raft_timing: timing,
            rest_thread_pool_size: Some(8.0),
        })
    });
    let mut poller = poller.reconfigured(member_settings).await.unwrap();
    assert_eq!(poll_reader_documents(&mut poller, &cluster).await.0 .0, 0);
    // SIGHUP with another host allowed: what was learned may not hold, asked again
    let allowed = config.with(|c| c.identity.allow_api_url_hosts = vec!["10.0.0.0/8".into()]);
    let mut poller = poller.reconfigured(allowed).await.unwrap();
    assert_eq!(poll_reader_documents(&mut poller, &cluster).await.0 .0, 1);
}

/// Issue 42, part 6: the partition lab's Raft cut under load. Member 0's own `/cluster` is a
/// stale replica's (two views); in the next poll it does not answer in time. Its view is then
/// unknown: never counted as agreeing, and said so (`patroni_member_dcs_view_read` 0), so
/// that `PatroniDcsViewsDiverge` does not resolve on it (alerts/tests/split.test.yml).
#[tokio::test]
async fn a_stale_view_not_read_this_poll_is_unknown_not_agreement() {
    let cluster = FakeCluster::start("unread", Captured::split_415()).await;
    cluster.serve_cluster_on(0, &fixture("patroni-4.1.5/01-cluster-from-m0.json"));
    let config = cluster_config(cluster.urls_from(1), None);
    let store = Arc::new(Store::new(1));
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let render = |store: &Store| render_store(store, Format::PrometheusText);
    store.publish(0, poller.poll_once().await);
    let output = render(&store);
    assert_eq!(
        support::sample(&output, "patroni_cluster_dcs_views{scope=\"unread\"}"),
        Some(2.0)
    );
    for member in ["postgresql-0", "postgresql-1", "postgresql-2"] {
        let read = format!("patroni_member_dcs_view_read{{scope=\"unread\",member=\"{member}\"}}");
        assert_eq!(
            support::sample(&output, &read),
            Some(1.0),
            "{read}\n{output}"
        );
    }

    // Its own /patroni answers, its /cluster times out.
    cluster.hang_on(0, "/cluster");
    store.publish(0, poller.poll_once().await);
    let output = render(&store);
    let read = |member: &str| {
        support::sample(
            &output,
            &format!("patroni_member_dcs_view_read{{scope=\"unread\",member=\"{member}\"}}"),
        )
    };
    assert_eq!(read("postgresql-0"), Some(0.0), "{output}");
    assert_eq!(read("postgresql-1"), Some(1.0));
    assert_eq!(read("postgresql-2"), Some(1.0));
    // The two views read agree; the third is unknown, with no differs series of its own.
    assert_eq!(
        support::sample(&output, "patroni_cluster_dcs_views{scope=\"unread\"}"),
        Some(1.0)
    );
    assert!(
        !output
            .contains("patroni_member_dcs_view_differs{scope=\"unread\",member=\"postgresql-0\""),
        "{output}"
    );

    // Its /cluster answers again, now the majority's: read and agreeing.
    cluster.serve_cluster_on(
        0,
        &fixture("patroni-4.1.5/02-cluster-after-switchover.json"),
    );
    store.publish(0, poller.poll_once().await);
    let output = render(&store);
    assert_eq!(
        support::sample(&output, "patroni_cluster_dcs_views{scope=\"unread\"}"),
        Some(1.0)
    );
    assert_eq!(
        support::sample(
            &output,
            "patroni_member_dcs_view_read{scope=\"unread\",member=\"postgresql-0\"}"
        ),
        Some(1.0)
    );
}

/// A member whose `/patroni` fails in a poll has no clock offset on `/metrics` for that poll:
/// a gauge shows what this poll measured. Its last measure is kept for the replay lag's
/// correction only (`last_clock`), and its measure is back once it answers again.
#[tokio::test]
async fn a_clock_offset_is_exported_only_from_this_polls_answer() {
    let cluster = FakeCluster::start("clocks", Captured::healthy_415(0)).await;
    let mut poller = ClusterPoller::new(0, cluster_config(cluster.urls(), None))
        .await
        .unwrap();
    let offsets = |snapshot| {
        let store = Arc::new(Store::new(1));
        store.publish(0, snapshot);
        let text = render_store(&store, Format::PrometheusText);
        text.lines()
            .filter(|line| line.starts_with("patroni_member_clock_offset_seconds{"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let first = poller.poll_once().await;
    assert_eq!(first.members.len(), 3);
    assert!(first.members.iter().all(|m| m.clock.is_some()));
    assert_eq!(offsets(first).len(), 3);

    cluster.hang_on(1, "/patroni");
    let second = poller.poll_once().await;
    let failed: Vec<_> = second
        .members
        .iter()
        .filter(|m| m.own_view.is_err())
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", second.members);
    let name = failed[0].member.name.clone();
    assert_eq!(failed[0].clock, None);
    assert!(failed[0].last_clock.is_some(), "{:?}", failed[0]);
    let exported = offsets(second);
    assert_eq!(exported.len(), 2, "{exported:?}");
    assert!(
        !exported
            .iter()
            .any(|line| line.contains(&format!("member=\"{name}\""))),
        "{exported:?}"
    );
}
