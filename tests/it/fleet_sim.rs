//! The fleet simulator used by `scripts/bench.sh` gives the exporter a healthy fleet: every
//! cluster answers `/cluster`, its members and Raft nodes (encrypted) with no error, under the
//! config file the simulator writes. A broken simulator would make the benchmark measure
//! error paths instead. Over https, the exporter's client resumes the TLS sessions of the
//! members it polled before (fleet-sim counts the handshakes), and resumes none when
//! fleet-sim issues no tickets.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use patroni_raft_exporter::config::file::Inherited;
use patroni_raft_exporter::config::{ClusterConfig, ConfigFile};
use patroni_raft_exporter::poller::ClusterPoller;

/// Kills the simulator when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A simulator of 3 clusters, over https with the `tls` flags if given; its directory and the
/// clusters of its config.
async fn start(tls: Option<&[&str]>) -> (Child, tempfile::TempDir, Vec<ClusterConfig>) {
    let dir = tempfile::tempdir().unwrap();
    let mut extra = Vec::new();
    if let Some(flags) = tls {
        extra.push("--tls-ca-out".to_owned());
        extra.push(dir.path().join("ca.pem").display().to_string());
        extra.extend(flags.iter().map(|flag| flag.to_string()));
    }
    let config = dir.path().join("exporter.yml");
    let password = dir.path().join("raft-password");
    let mut sim = Child(
        Command::new(env!("CARGO_BIN_EXE_fleet-sim"))
            .args(["--clusters", "3", "--duration", "60s", "--prefix", "t"])
            .arg("--config-out")
            .arg(&config)
            .arg("--password-file")
            .arg(&password)
            .arg("--stats-out")
            .arg(dir.path().join("handshakes"))
            .args(&extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = sim.0.stdout.take().unwrap();
    let ready = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let ready = tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .expect("fleet-sim ready within 30 s")
        .unwrap();
    assert!(
        ready.starts_with("ready clusters=3 etcd_clusters=0 listeners=18"),
        "{ready}"
    );

    let defaults = Inherited::default();
    let clusters: Vec<_> = ConfigFile::load(&config)
        .unwrap()
        .clusters
        .iter()
        .map(|entry| entry.resolve(&defaults).unwrap())
        .collect();
    assert_eq!(clusters.len(), 3);
    assert_eq!(clusters[0].poll.interval, Duration::from_secs(10));
    (sim, dir, clusters)
}

/// fleet-sim's handshake counts once it wrote them after the polls: (full, resumed).
async fn handshakes(dir: &tempfile::TempDir) -> (usize, usize) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let line = std::fs::read_to_string(dir.path().join("handshakes")).unwrap();
    let count = |name: &str| {
        line.split_whitespace()
            .find_map(|field| field.strip_prefix(name))
            .unwrap()
            .parse()
            .unwrap()
    };
    (count("full_handshakes="), count("resumed_handshakes="))
}

#[tokio::test]
async fn fleet_sim_serves_a_healthy_fleet() {
    let (_sim, dir, clusters) = start(None).await;
    assert_eq!(handshakes(&dir).await, (0, 0), "no TLS over http");
    for (slot, cluster) in clusters.into_iter().enumerate() {
        let mut poller = ClusterPoller::new(slot, cluster).await.unwrap();
        let snapshot = poller.poll_once().await;
        assert_eq!(snapshot.scope, format!("t-{slot:04}"));
        assert!(snapshot.cluster_failure.is_none(), "{snapshot:?}");
        assert_eq!(snapshot.members.len(), 3);
        assert!(snapshot.members.iter().all(|m| m.own_view.is_ok()));
        assert_eq!(
            snapshot
                .members
                .iter()
                .filter(|m| m.role_mismatch() == Some(true))
                .count(),
            0
        );
        assert_eq!(snapshot.history.as_ref().map(|h| h.len()), Some(3));
        let raft = snapshot.dcs.raft().expect("Raft is polled");
        assert_eq!(raft.nodes.len(), 3, "partners are the configured nodes");
        assert!(
            raft.nodes.iter().all(|n| n.status.is_ok()),
            "{:?}",
            raft.nodes
        );
        assert!(raft.quorum.confirmed());
        assert_eq!(raft.quorum.leaders_claiming, 1);
        assert!(snapshot.counters.poll_errors.is_empty());
    }
}

/// Polls every cluster twice over https; the handshakes fleet-sim counted.
async fn poll_twice_over_tls(flags: &[&str]) -> (usize, usize) {
    let (_sim, dir, clusters) = start(Some(flags)).await;
    let mut pollers = Vec::new();
    for (slot, cluster) in clusters.into_iter().enumerate() {
        assert!(cluster.rest.ca_file.is_some());
        pollers.push(ClusterPoller::new(slot, cluster).await.unwrap());
    }
    for _ in 0..2 {
        for poller in &mut pollers {
            let snapshot = poller.poll_once().await;
            assert!(snapshot.cluster_failure.is_none(), "{snapshot:?}");
            assert!(snapshot.members.iter().all(|m| m.own_view.is_ok()));
            assert!(snapshot.counters.poll_errors.is_empty());
        }
    }
    handshakes(&dir).await
}

#[tokio::test]
async fn the_exporter_resumes_tls_sessions() {
    let (full, resumed) = poll_twice_over_tls(&[]).await;
    // Requests in flight at once to one member, in the first poll, find no ticket yet; every
    // request of the second poll finds one.
    assert!(full > 0 && resumed > full, "full {full}, resumed {resumed}");
    let (full, resumed) = poll_twice_over_tls(&["--tls-no-resumption"]).await;
    assert!(full > 0 && resumed == 0, "full {full}, resumed {resumed}");
}
