//! The fleet simulator used by `scripts/bench.sh` gives the exporter a healthy fleet: every
//! cluster answers `/cluster`, its members and Raft nodes (encrypted) with no error, under the
//! config file the simulator writes. A broken simulator would make the benchmark measure
//! error paths instead.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use patroni_raft_exporter::config::file::Inherited;
use patroni_raft_exporter::config::ConfigFile;
use patroni_raft_exporter::poller::ClusterPoller;

/// Kills the simulator when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn fleet_sim_serves_a_healthy_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("exporter.yml");
    let password = dir.path().join("raft-password");
    let mut sim = Child(
        Command::new(env!("CARGO_BIN_EXE_fleet-sim"))
            .args(["--clusters", "3", "--duration", "60s", "--prefix", "t"])
            .arg("--config-out")
            .arg(&config)
            .arg("--password-file")
            .arg(&password)
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
        ready.starts_with("ready clusters=3 listeners=18"),
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
        assert_eq!(snapshot.history.as_ref().map(Vec::len), Some(3));
        assert_eq!(
            snapshot.raft_nodes.len(),
            3,
            "partners are the configured nodes"
        );
        assert!(
            snapshot.raft_nodes.iter().all(|n| n.status.is_ok()),
            "{:?}",
            snapshot.raft_nodes
        );
        assert!(snapshot.quorum.confirmed());
        assert_eq!(snapshot.quorum.leaders_claiming, 1);
        assert!(snapshot.counters.poll_errors.is_empty());
    }
}
