//! `patroni-raft-exporter status`: one poll, printed for a human (or a script, or Nagios),
//! that never hangs.
//!
//! Why: the operator's own tools hang or lie exactly when they are needed. `patronictl list`
//! waits for ever when the Raft node it asks has no leader; `syncobj_admin` can wait 15
//! minutes and exits 0 on errors; `/cluster` is frozen without quorum. This command runs the
//! exporter's poll (the same sources and judgements as the metrics) under one total deadline
//! and says what is wrong in plain words, with the Nagios exit codes.

mod model;
pub mod render;
pub mod report;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use futures::future::join_all;

use crate::config::ClusterConfig;
use crate::patroni::ClientPool;
use crate::poller::ClusterPoller;
use crate::snapshot::StandbySource;
use render::Colour;
use report::{ClusterReport, Level, Problem};

/// How `status` runs, besides the clusters it watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusOptions {
    pub output: Output,
    /// Refresh every poll interval until interrupted.
    pub watch: bool,
    /// Total deadline of one run; never exceeded.
    pub timeout: Duration,
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// Polls every cluster once, concurrently, within `deadline`.
///
/// Each poll ends by the deadline itself ([`ClusterPoller::within`]: a request still running
/// then fails as a timeout, so what answered is still reported), and each request's timeout
/// is at most half of it, so that a hung member in round one leaves round two its time. The
/// deadline is also enforced around the whole poll (the Raft key's derivation included), so
/// a cluster that does not finish in time is reported as UNKNOWN rather than waited for.
pub async fn collect(clusters: Vec<ClusterConfig>, deadline: Duration) -> Vec<ClusterReport> {
    let started = Instant::now();
    // One pool for the run: clusters with the same request settings share a client.
    let clients = &ClientPool::default();
    let polls = clusters.into_iter().map(|mut config| async move {
        config.poll.timeout = config.poll.timeout.min(deadline / 2);
        let fallback_scope = config.name();
        let standby_of = config.identity.standby_of.clone();
        let remaining = deadline.saturating_sub(started.elapsed());
        let poll = async {
            let poller = ClusterPoller::with_clients(0, config, clients)
                .await?
                .asking_everything();
            let mut poller = poller.within(deadline.saturating_sub(started.elapsed()));
            anyhow::Ok(poller.poll_once().await)
        };
        match tokio::time::timeout(remaining, poll).await {
            Ok(Ok(snapshot)) => Ok((snapshot, standby_of)),
            Ok(Err(error)) => Err(unknown(fallback_scope, format!("cannot poll: {error:#}"))),
            Err(_) => Err(unknown(
                fallback_scope,
                format!("no complete answer within the deadline of {deadline:?}"),
            )),
        }
    });
    let polled = join_all(polls).await;
    // Standby clusters are paired with their source's snapshot of the same run, as the
    // pollers pair them with the source's latest published one (crate::snapshot, `standby`):
    // every pairing is read first, then written into its snapshot.
    let snapshot_of = |scope: &str| {
        polled
            .iter()
            .filter_map(|poll| poll.as_ref().ok())
            .map(|(snapshot, _)| snapshot)
            .find(|snapshot| snapshot.scope == scope)
    };
    let pairings: Vec<Option<StandbySource>> = polled
        .iter()
        .map(|poll| {
            let standby_of = poll.as_ref().ok()?.1.as_deref()?;
            Some(StandbySource::new(standby_of, snapshot_of(standby_of)))
        })
        .collect();
    polled
        .into_iter()
        .zip(pairings)
        .map(|(poll, pairing)| match poll {
            Ok((mut snapshot, _)) => {
                snapshot.standby_source = pairing;
                ClusterReport::from_snapshot(&snapshot)
            }
            Err(report) => report,
        })
        .collect()
}

fn unknown(scope: String, message: String) -> ClusterReport {
    ClusterReport {
        scope,
        level: Level::Unknown,
        rest_reachable: false,
        leaders: Vec::new(),
        timeline: None,
        paused: false,
        raft_quorum: None,
        raft_quorum_evidence: None,
        raft_quorum_margin: None,
        raft_voters: 0,
        quorum_confirmed_by: Vec::new(),
        etcd_quorum: None,
        etcd_quorum_evidence: None,
        etcd_quorum_margin: None,
        etcd_members: Vec::new(),
        members: Vec::new(),
        raft_nodes: Vec::new(),
        failover: None,
        standby: None,
        problems: vec![Problem {
            level: Level::Unknown,
            message,
        }],
    }
}

/// Runs the subcommand on resolved `clusters`; returns the Nagios exit code of the (last) run.
pub async fn run(clusters: Vec<ClusterConfig>, options: StatusOptions) -> u8 {
    let args = options;
    let watch_interval = clusters
        .iter()
        .map(|cluster| cluster.poll.interval)
        .min()
        .unwrap_or_default();
    let terminal = std::io::stdout().is_terminal();
    let colour = Colour(terminal && std::env::var_os("NO_COLOR").is_none());
    loop {
        let reports = collect(clusters.clone(), args.timeout).await;
        let output = match args.output {
            Output::Table => render::text(&reports, colour),
            Output::Json => render::json(&reports),
        };
        if args.watch && terminal {
            print!("\x1b[2J\x1b[H");
        }
        print!("{output}");
        let level = report::overall(&reports);
        if !args.watch {
            return level.exit_code();
        }
        tokio::select! {
            _ = tokio::time::sleep(watch_interval) => {}
            _ = tokio::signal::ctrl_c() => return level.exit_code(),
        }
    }
}
