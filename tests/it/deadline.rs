//! A poll keeps its interval: with members hung (a Patroni stopped by SIGSTOP: the kernel
//! still accepts its connections, nothing answers, REST and Raft alike), every poll ends by
//! its deadline, the live members' own `/patroni` are read in it, and no interval is skipped.
//! The lab proves the same on real members (`tests/e2e/pylab/test_hung_members.py`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use patroni_raft_exporter::config::ClusterConfig;
use patroni_raft_exporter::poller::ClusterPoller;
use patroni_raft_exporter::raft::fake::{Behaviour, FakeRaftNode};
use patroni_raft_exporter::raft::RaftKey;
use patroni_raft_exporter::snapshot::ClusterSnapshot;
use patroni_raft_exporter::snapshot::{SnapshotStore, WholeSnapshot};

use crate::support::*;

const PASSWORD: &str = "s3cret";

/// A healthy three-member cluster (REST and Raft) whose members `hung` hang, and settings
/// that poll it every `interval` with `timeout`, its URLs in member order (member 0 first).
async fn cluster_with_hung(
    hung: &[usize],
    interval: Duration,
    timeout: Duration,
) -> (FakeCluster, Vec<FakeRaftNode>, ClusterConfig) {
    let cluster = FakeCluster::start("pg-test", Captured::healthy_338()).await;
    let (mut nodes, mut fakes) = raft_cluster(
        [
            ("127.0.0.21", Some("enc_follower_0.3.12")),
            ("127.0.0.22", Some("enc_follower_0.3.12")),
            ("127.0.0.23", Some("enc_leader_0.3.12")),
        ],
        PASSWORD,
    )
    .await;
    for &index in hung {
        cluster.hang(index);
        let (address, fake) = FakeRaftNode::start(
            Behaviour::NeverAnswer,
            Some(RaftKey::derive(PASSWORD.as_bytes())),
        )
        .await
        .unwrap();
        nodes[index] = address;
        fakes.push(fake);
    }
    let config = cluster_config(cluster.urls(), Some((nodes, Some(PASSWORD)))).with(|config| {
        config.poll.interval = interval;
        config.poll.timeout = timeout;
    });
    (cluster, fakes, config)
}

/// Whose own `/patroni` answered in `snapshot`, and whose failed as a timeout.
fn answered_and_timed_out(snapshot: &ClusterSnapshot) -> (usize, usize) {
    let answered = snapshot
        .members
        .iter()
        .filter(|m| m.own_view.is_ok())
        .count();
    let timed_out = snapshot
        .members
        .iter()
        .filter(|m| {
            m.own_view
                .as_ref()
                .is_err_and(|failure| failure.message.contains("timeout"))
        })
        .count();
    (answered, timed_out)
}

/// Polls `rounds` times; each poll must end within `interval` and read the live members.
async fn polls_keep_the_interval(
    config: ClusterConfig,
    rounds: usize,
    live: usize,
    interval: Duration,
) {
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    for round in 0..rounds {
        // A current-thread runtime: the poll runs on this thread.
        let waited_before = thread_run_queue_wait();
        let started = Instant::now();
        let snapshot = poller.poll_once().await;
        let took = started.elapsed();
        let held = thread_run_queue_wait().saturating_sub(waited_before);
        assert!(
            took.saturating_sub(held) < interval,
            "poll {round} took {took:?}, {held:?} of it waiting for a CPU"
        );
        assert!(
            snapshot.poll_duration.saturating_sub(held) < interval,
            "{:?}, {held:?} of it waiting for a CPU",
            snapshot.poll_duration
        );
        assert!(snapshot.cluster.is_some(), "poll {round}: no /cluster");
        assert_eq!(
            answered_and_timed_out(&snapshot),
            (live, 3 - live),
            "poll {round}: {:#?}",
            snapshot.members
        );
        let raft = snapshot.dcs.raft().expect("Raft is polled");
        let answering_nodes = raft.nodes.iter().filter(|node| node.status.is_ok()).count();
        assert_eq!(answering_nodes, live, "poll {round}: {:?}", raft.nodes);
    }
}

/// The defaults' shape (a timeout of 2/5 of the interval), the first two of three URLs hung:
/// `/cluster` asked of them in turn took two timeouts, then the members one more.
#[tokio::test]
async fn the_first_two_urls_hung_the_poll_ends_within_its_interval() {
    let interval = Duration::from_millis(1000);
    let (_cluster, _fakes, config) =
        cluster_with_hung(&[0, 1], interval, Duration::from_millis(400)).await;
    polls_keep_the_interval(config, 3, 1, interval).await;
}

/// `--poll.interval 2s` alone's shape (the timeout is the interval), one member hung: its
/// `/cluster` and its Raft node in round one, its `/patroni` in round two.
#[tokio::test]
async fn the_timeout_equal_to_the_interval_one_member_hung_the_poll_ends_within_it() {
    let interval = Duration::from_millis(600);
    let (_cluster, _fakes, config) = cluster_with_hung(&[0], interval, interval).await;
    polls_keep_the_interval(config, 3, 2, interval).await;
}

/// Polling on its own clock, the poller with a hung member skips no interval.
#[tokio::test]
async fn a_hung_member_skips_no_interval() {
    let interval = Duration::from_millis(400);
    let (_cluster, _fakes, config) = cluster_with_hung(&[0], interval, interval).await;
    let poller = ClusterPoller::new(0, config).await.unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let store = Arc::new(SnapshotStore::<WholeSnapshot>::new(1));
    // A current-thread runtime: the poller's task runs on this thread.
    let waited_before = thread_run_queue_wait();
    let task = tokio::spawn(poller.run(store.numbered_publisher(0), shutdown));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let held = thread_run_queue_wait().saturating_sub(waited_before);
    let snapshot = store.current().pop().unwrap();
    // A poll skips the next tick only when it overruns its deadline's slack (the interval
    // after the deadline): without a CPU for that long, once per such wait.
    let slack = interval.mul_f64(1.0 - patroni_raft_exporter::poller::deadline::SHARE);
    let excused = (held.as_secs_f64() / slack.as_secs_f64()) as u64;
    assert!(
        snapshot.counters.polls_skipped <= excused,
        "{:?}, {held:?} waiting for a CPU",
        snapshot.counters
    );
    assert!(
        snapshot.poll_duration.saturating_sub(held) < interval,
        "{:?}, {held:?} waiting for a CPU",
        snapshot.poll_duration
    );
    assert_eq!(answered_and_timed_out(&snapshot), (2, 1));
}

/// The members the last poll knew are asked their own `/patroni` beside `/cluster`, not after
/// it answered: a `/cluster` candidate that hangs and a slow member cost the longer of the
/// two, not their sum.
#[tokio::test]
async fn remembered_members_are_asked_their_patroni_beside_cluster() {
    use patroni_raft_exporter::config::{Collector, Collectors};
    let cluster = FakeCluster::start("pg-test", Captured::healthy_338()).await;
    // The hedge asks the second URL a quarter of the timeout (1 s) after the first hung.
    let config = cluster_config(cluster.urls(), None).with(|config| {
        config.poll.interval = Duration::from_secs(10);
        config.poll.timeout = Duration::from_secs(4);
        // The hung member's own `/cluster` is not asked in round two.
        config.identity.collectors = Collectors::without([Collector::Views]);
    });
    let mut poller = ClusterPoller::new(0, config).await.unwrap();
    let first = poller.poll_once().await;
    assert_eq!(answered_and_timed_out(&first), (3, 0));
    cluster.hang_on(0, "/cluster");
    let slow = Duration::from_secs(2);
    let own = fixture("patroni-3.3.8/patroni-m2.json");
    cluster.serve_on_after(2, "/patroni", &own, slow);

    let second = poller.poll_once().await;
    assert!(second.cluster.is_some(), "the second URL answers /cluster");
    assert_eq!(answered_and_timed_out(&second), (3, 0));
    // `/cluster` answers at ~1 s, member 2's `/patroni` at ~2 s: asked in turn, ~3 s.
    assert!(
        second.poll_duration >= slow && second.poll_duration < Duration::from_millis(2600),
        "{:?}",
        second.poll_duration
    );
}
