//! `patroni-raft-exporter status` on fake clusters built from real captures: golden text and
//! JSON output, and the Nagios exit codes.
//!
//! `UPDATE_GOLDEN=1 cargo test --test it status` rewrites `tests/golden/status-*`.

use crate::support;

use std::time::{Duration, Instant};

use patroni_raft_exporter::config::ClusterConfig;
use patroni_raft_exporter::metrics::exposition::Format;
use patroni_raft_exporter::patroni::fake::{FakePatroni, Reply};
use patroni_raft_exporter::status::render::{self, Colour};
use patroni_raft_exporter::status::report::{overall, ClusterReport, Level};
use patroni_raft_exporter::status::{self as status_command};
use support::*;

/// One fake cluster with its Raft nodes, and the substitutions that make output stable.
struct Case {
    _cluster: FakeCluster,
    _raft: Vec<patroni_raft_exporter::raft::fake::FakeRaftNode>,
    config: ClusterConfig,
    addresses: Vec<Addresses>,
}

/// Raft nodes on 127.0.0.21-23 (so that they sort like the members), replaying captured
/// statuses renamed to their addresses; `None` is a dead node.
async fn raft_nodes(
    cases: [Option<&str>; 3],
) -> (
    Vec<String>,
    Vec<patroni_raft_exporter::raft::fake::FakeRaftNode>,
    Addresses,
) {
    let (nodes, fakes) = raft_cluster(
        [
            ("127.0.0.21", cases[0]),
            ("127.0.0.22", cases[1]),
            ("127.0.0.23", cases[2]),
        ],
        "s3cret",
    )
    .await;
    let mut addresses = Addresses::default();
    addresses.add_raft_nodes(&nodes);
    (nodes, fakes, addresses)
}

async fn case(captured: Captured, raft: [Option<&str>; 3]) -> Case {
    let cluster = FakeCluster::start_on(
        ["127.0.0.31", "127.0.0.32", "127.0.0.33"],
        "pg-test",
        captured,
    )
    .await;
    let (nodes, fakes, raft_addresses) = raft_nodes(raft).await;
    let config = cluster_config(cluster.urls(), Some((nodes, Some("s3cret"))));
    let addresses = vec![cluster.addresses.clone(), raft_addresses];
    Case {
        _cluster: cluster,
        _raft: fakes,
        config,
        addresses,
    }
}

async fn healthy() -> Case {
    case(Captured::healthy_338(), healthy_raft(0)).await
}

async fn switchover_in_progress() -> Case {
    case(Captured::switchover_415(), healthy_raft(1)).await
}

async fn quorum_lost() -> Case {
    case(
        Captured::quorum_lost_415(),
        [None, Some("enc_noquorum_stale_leader_0.3.12"), None],
    )
    .await
}

async fn member_down() -> Case {
    let mut captured = Captured::healthy_338();
    captured.own[2] = None; // member 2 down, and its Raft node
    let [leader, follower, _] = healthy_raft(0);
    case(captured, [leader, follower, None]).await
}

/// Captured on the real cluster: both replicas tagged `nofailover`, the leader up.
async fn no_failover_candidate() -> Case {
    let history = fixture("patroni-3.3.8/history.json");
    let captured = Captured::state("3.3.8", "nofailover-all-replicas", history);
    case(captured, healthy_raft(0)).await
}

/// Member 0 answers from a Raft replica frozen before the switchover to member 1 and still
/// says primary; members 1 and 2 saw the switchover. The checker reads member 0 first.
async fn two_primaries() -> Case {
    let case = case(Captured::split_415(), healthy_raft(1)).await;
    case._cluster
        .serve_cluster_on(0, &fixture("patroni-4.1.5/01-cluster-from-m0.json"));
    case
}

async fn reports(case: &Case) -> Vec<ClusterReport> {
    status_command::collect(vec![case.config.clone()], Duration::from_secs(10)).await
}

fn normalize(case: &Case, text: &str) -> String {
    case.addresses
        .iter()
        .fold(text.to_owned(), |text, addresses| {
            addresses.normalize(&text)
        })
}

/// The reports with the fakes' random addresses replaced by the captured ones, before
/// rendering, so that table widths do not depend on port numbers.
fn normalized(case: &Case, reports: &[ClusterReport]) -> Vec<ClusterReport> {
    let json = serde_json::to_string(reports).unwrap();
    serde_json::from_str(&normalize(case, &json)).unwrap()
}

fn check_golden(name: &str, actual: &str) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{path} missing: run with UPDATE_GOLDEN=1"));
    assert_eq!(
        actual, expected,
        "{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it)"
    );
}

async fn golden(name: &str, case: Case, level: Level) {
    let reports = normalized(&case, &reports(&case).await);
    assert_eq!(overall(&reports), level, "{name}: {reports:#?}");
    check_golden(
        &format!("status-{name}.txt"),
        &render::text(&reports, Colour(false)),
    );
    check_golden(&format!("status-{name}.json"), &render::json(&reports));
}

#[tokio::test]
async fn healthy_cluster_is_ok() {
    golden("healthy", healthy().await, Level::Ok).await;
}

#[tokio::test]
async fn switchover_in_progress_is_a_warning() {
    golden("switchover", switchover_in_progress().await, Level::Warning).await;
}

/// [`golden`], after checking that the text says each of `lines` and that the exit code is
/// `exit_code`.
async fn golden_saying(name: &str, case: Case, level: Level, exit_code: u8, lines: &[&str]) {
    let reports = reports(&case).await;
    let text = render::text(&reports, Colour(false));
    for line in lines {
        assert!(text.contains(line), "{name}: {line:?} missing:\n{text}");
    }
    assert_eq!(overall(&reports).exit_code(), exit_code);
    golden(name, case, level).await;
}

#[tokio::test]
async fn quorum_lost_is_critical_and_says_so() {
    golden_saying(
        "quorum-lost",
        quorum_lost().await,
        Level::Critical,
        2,
        &[
            "CRITICAL Raft quorum lost: 1 of 3 voters answer, 0 report has_quorum; 2 refuse connections",
            "postgresql-1 is leader in the DCS view but reports itself as replica: the DCS view is frozen",
        ],
    )
    .await;
}

#[tokio::test]
async fn no_failover_candidate_is_a_warning_that_names_the_reasons() {
    golden_saying(
        "no-failover-candidate",
        no_failover_candidate().await,
        Level::Warning,
        1,
        &[
            "If the leader dies now: nobody can take over",
            "postgresql-1 excluded: tagged nofailover (failover_priority 0)",
            "WARNING no failover candidate: if the leader dies now, nobody is promoted; excluded: postgresql-1 (nofailover), postgresql-2 (nofailover)",
        ],
    )
    .await;
}

#[tokio::test]
async fn two_primaries_are_critical_and_named_whichever_view_is_read() {
    golden_saying(
        "two-primaries",
        two_primaries().await,
        Level::Critical,
        2,
        &[
            "CRITICAL TWO PRIMARIES: postgresql-0 and postgresql-1: each says primary in its own GET /patroni",
            // The checker read member 0's frozen view, but the majority's view is the
            // reference.
            "WARNING the members' DCS views differ (2 views): postgresql-0 (leader, timelines)",
        ],
    )
    .await;
}

#[tokio::test]
async fn member_down_is_a_warning() {
    golden("member-down", member_down().await, Level::Warning).await;
}

#[tokio::test]
async fn nothing_reachable_is_unknown() {
    let dead = dead_address().await;
    let config = cluster_config(
        vec![url::Url::parse(&format!("http://{dead}")).unwrap()],
        Some((vec![dead], None)),
    );
    let reports = status_command::collect(vec![config], Duration::from_secs(5)).await;
    assert_eq!(overall(&reports), Level::Unknown);
    assert_eq!(overall(&reports).exit_code(), 3);
}

#[tokio::test]
async fn the_deadline_is_never_exceeded() {
    // Every member hangs; three URLs would take 3 × 2 s with the configured timeout.
    let mut hanging = Vec::new();
    for _ in 0..3 {
        let member = FakePatroni::start("127.0.0.1").await;
        member.route("/cluster", Reply::Hang);
        hanging.push(member);
    }
    let mut config = cluster_config(
        hanging
            .iter()
            .map(|m| url::Url::parse(&m.url()).unwrap())
            .collect(),
        None,
    );
    config.poll.timeout = Duration::from_secs(2);
    let started = Instant::now();
    let reports = status_command::collect(vec![config], Duration::from_millis(1500)).await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(1800), "took {elapsed:?}");
    assert_eq!(overall(&reports), Level::Unknown, "{reports:#?}");
}

#[tokio::test]
async fn several_clusters_take_the_worst_level() {
    let ok = healthy().await;
    let critical = quorum_lost().await;
    let mut configs = vec![ok.config.clone(), critical.config.clone()];
    configs[1].identity.expected_scope = Some("pg-test".into());
    let reports = status_command::collect(configs, Duration::from_secs(10)).await;
    assert_eq!(reports[0].level, Level::Ok);
    assert_eq!(reports[1].level, Level::Critical);
    assert_eq!(overall(&reports), Level::Critical);
}

/// A replica whose HA loop is stalled: its member key expired, so the `/cluster` the checker
/// reads lists only the primary, but its Raft node still votes and its REST API answers,
/// with `/liveness` 503. Found through its voter (same REST port as the member read), it is
/// named in `status` and exported out of the DCS view with liveness 0.
#[tokio::test]
async fn a_stalled_member_out_of_the_dcs_view_is_found_through_its_voter() {
    let reader = FakePatroni::start("127.0.0.41").await;
    let port = reader.addr.port();
    let stalled = FakePatroni::serve(
        tokio::net::TcpListener::bind(("127.0.0.42", port))
            .await
            .unwrap(),
        None,
    );
    let own = |path: &str| {
        String::from_utf8(fixture(path))
            .unwrap()
            .replace("\"pg-test\"", "\"stall-test\"")
            .into_bytes()
    };
    let cluster = format!(
        r#"{{"scope": "stall-test", "members": [{{"name": "postgresql-0", "role": "leader", "state": "running", "api_url": "{}/patroni", "host": "127.0.0.41", "port": 5432, "timeline": 1}}]}}"#,
        reader.url()
    );
    reader.route("/cluster", Reply::Json(cluster.into_bytes()));
    reader.route(
        "/patroni",
        Reply::Json(own("patroni-4.1.5/01-patroni-m0.json")),
    );
    reader.route("/history", Reply::Json(b"[]".to_vec()));
    reader.route("/liveness", Reply::Status(200));
    reader.route("/readiness", Reply::Status(200));
    stalled.route(
        "/patroni",
        Reply::Json(own("patroni-4.1.5/01-patroni-m1.json")),
    );
    stalled.route("/liveness", Reply::Status(503));
    stalled.route("/readiness", Reply::Status(200));
    let (nodes, _raft) = raft_cluster(
        [
            ("127.0.0.41", Some("enc_leader_0.3.12")),
            ("127.0.0.42", Some("enc_follower_0.3.12")),
            // A voter whose REST API answers nowhere: no member is made up for it.
            ("127.0.0.43", Some("enc_follower_0.3.12")),
        ],
        "s3cret",
    )
    .await;
    let url = url::Url::parse(&reader.url()).unwrap();
    let config = cluster_config(vec![url], Some((nodes, Some("s3cret"))));

    let reports = status_command::collect(vec![config.clone()], Duration::from_secs(10)).await;
    let text = render::text(&reports, Colour(false));
    assert!(
        text.contains(
            "postgresql-1: GET /liveness fails while its REST API answers: its HA loop is stalled"
        ),
        "{text}"
    );

    let metrics = poll_and_render(vec![config], Format::PrometheusText).await;
    let member =
        |family: &str, name: &str| format!("{family}{{scope=\"stall-test\",member=\"{name}\"}}");
    for (series, value) in [
        (member("patroni_member_in_dcs", "postgresql-0"), 1),
        (member("patroni_member_in_dcs", "postgresql-1"), 0),
        (member("patroni_member_api_up", "postgresql-1"), 1),
    ] {
        assert!(
            metrics.contains(&format!("{series} {value}\n")),
            "{series} {value} missing:\n{metrics}"
        );
    }
    assert!(
        !metrics.contains("member=\"voter "),
        "a voter without REST must not become a member:\n{metrics}"
    );
}

/// One run of the binary's `status` against a refusing member and a refusing Raft node with a
/// Raft password (so the key is derived), under `timeout`: its wall time.
fn run_status_binary(dir: &std::path::Path, dead: &str, timeout: &str) -> Duration {
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_patroni-raft-exporter"))
        .args(["status", "--patroni.url", &format!("http://{dead}")])
        .args(["--raft.node", dead, "--raft.password-file"])
        .arg(dir.join("raft-password"))
        .args(["--timeout", timeout])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    elapsed
}

#[tokio::test]
async fn the_process_exits_at_the_deadline_while_the_raft_key_is_still_derived() {
    // The key derivation (PBKDF2, 100 000 rounds) runs on the blocking pool; a deadline that
    // cuts it short must not leave the process waiting for it (the partition lab saw `status
    // --timeout 10s` killed at 20 s on a starved CPU).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("raft-password"), "s3cret\n").unwrap();
    let dead = dead_address().await;
    // a deadline long enough for the derivation: the process lives as long as it takes
    let derivation = run_status_binary(dir.path(), &dead, "60s");
    let cut_short = run_status_binary(dir.path(), &dead, "20ms");
    // An optimised build derives the key in a few ms: nothing to cut short, nothing to tell.
    if derivation > Duration::from_millis(300) {
        assert!(
            cut_short < derivation / 2,
            "status --timeout 20ms took {cut_short:?}, a full run with the key derived {derivation:?}"
        );
    }
}
