//! CPU of assembling one `/metrics` body of a large fleet, caches cold: what a scrape costs
//! the exporter before any byte reaches the socket (the `encode_cpu_seconds` of its debug log,
//! `encode CPU p50` in `scripts/bench.sh fleet`), without the polls and the network around it.
//!
//! ```sh
//! cargo bench --bench assembly                      # 1 000 clusters, 101 scrapes
//! CLUSTERS=100 SCRAPES=301 cargo bench --bench assembly
//! ```
//! Each cluster is the captured healthy Patroni 4.1.5 cluster (3 members, each with its own
//! `/patroni`) with the 3 captured Raft statuses, under its own scope, encoded as a poll
//! encodes it. Before each scrape the bench writes 64 MiB (twice the caches of the machines it
//! ran on), as the polls between two real scrapes replace what the caches held. The figures
//! are the thread's CPU time per scrape (`CLOCK_THREAD_CPUTIME_ID`), printed as percentiles.
//! The allocator is the binary's, with its settings (no transparent huge pages).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use patroni_raft_exporter::metrics::exposition::Format;
use patroni_raft_exporter::metrics::stream::Exposition;
use patroni_raft_exporter::metrics::EncodedCluster;
use patroni_raft_exporter::patroni::{parse_cluster, parse_member_status};
use patroni_raft_exporter::raft::parse_admin_text;
use patroni_raft_exporter::snapshot::{
    ClusterSnapshot, DcsSnapshot, MemberReadTimes, MemberSnapshot, Probes, QuorumAssessment,
    RaftNodeSnapshot, RaftSnapshot,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What the bench writes between two scrapes to push the fleet's text out of the caches.
const EVICTION_BYTES: usize = 64 << 20;

fn fixture(path: &str) -> Vec<u8> {
    let root = env!("CARGO_MANIFEST_DIR");
    std::fs::read(format!("{root}/tests/fixtures/{path}")).expect("fixture")
}

/// The captured healthy cluster as one poll would leave it, under `scope`.
fn captured_cluster(scope: &str) -> ClusterSnapshot {
    let dir = "patroni-4.1.5/states/healthy";
    let view = parse_cluster(&fixture(&format!("{dir}/cluster.json"))).expect("cluster.json");
    let members = view
        .members
        .iter()
        .enumerate()
        .map(|(i, member)| MemberSnapshot {
            member: member.clone(),
            own_view: Ok(
                parse_member_status(&fixture(&format!("{dir}/patroni-m{i}.json")))
                    .expect("patroni-m{i}.json"),
            ),
            dcs_view: None,
            left_dcs_at: None,
            clock: None,
            last_clock: None,
            round_trip: Some(Duration::from_micros(800)),
            probes: Probes::default(),
            read_at: MemberReadTimes::default(),
        })
        .collect();
    let nodes: Vec<RaftNodeSnapshot> = (0..3)
        .map(|i| {
            let text = fixture(&format!("patroni-3.3.8/syncobj_admin-status-m{i}.txt"));
            RaftNodeSnapshot {
                node: format!("127.0.0.1{}:2222", i + 1),
                round_trip: Some(Duration::from_micros(600)),
                status: Ok(
                    parse_admin_text(std::str::from_utf8(&text).expect("text")).expect("status")
                ),
            }
        })
        .collect();
    let quorum = QuorumAssessment::assess(&nodes, &BTreeSet::new());
    ClusterSnapshot {
        scope: scope.to_owned(),
        polled_at_seconds: 1_700_000_000.25,
        cluster: Some(view),
        members,
        dcs: DcsSnapshot::Raft(RaftSnapshot {
            nodes,
            quorum,
            ..RaftSnapshot::default()
        }),
        ..ClusterSnapshot::default()
    }
}

fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0;
    assert!(!failed, "the thread's CPU clock cannot be read");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn main() {
    patroni_raft_exporter::allocator::configure();
    // METER=1: with the debug log on (written nowhere), as `scripts/bench.sh` runs the
    // exporter: the assembly then reads the thread's CPU clock around each frame.
    if std::env::var_os("METER").is_some_and(|value| value == "1") {
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(std::io::sink)
            .init();
    }
    let clusters = env_or("CLUSTERS", 1000);
    let scrapes = env_or("SCRAPES", 101).max(1);
    // Encoded in a scrambled order, among allocations of other sizes kept alive: in the
    // exporter each cluster's text is allocated when its own poll publishes, so a family's
    // chunks lie at no regular stride a hardware prefetcher could follow (encoded in order,
    // one after the other, they would, and the assembly would look cheaper than it is).
    let mut encoded: Vec<Option<Arc<EncodedCluster>>> = vec![None; clusters];
    let mut interleaved = Vec::with_capacity(clusters);
    for step in 0..clusters {
        let i = (step * 7919 + 13) % clusters.max(1);
        let i = if encoded[i].is_some() {
            encoded
                .iter()
                .position(Option::is_none)
                .expect("a cluster left")
        } else {
            i
        };
        let snapshot = Arc::new(captured_cluster(&format!("cluster-{i:04}")));
        encoded[i] = Some(Arc::new(EncodedCluster::encode(&snapshot)));
        interleaved.push(vec![step as u8; 512 + (step * 2654435761) % 24_000]);
    }
    let fleet: Vec<Arc<EncodedCluster>> = encoded.into_iter().flatten().collect();
    let text_bytes: usize = fleet.iter().map(|cluster| cluster.len()).sum();
    let mut eviction = vec![0u8; EVICTION_BYTES];
    let mut spent = Vec::with_capacity(scrapes);
    for scrape in 0..scrapes {
        for byte in eviction.iter_mut().step_by(64) {
            *byte = byte.wrapping_add(scrape as u8 | 1);
        }
        std::hint::black_box(&eviction);
        let started = thread_cpu_time();
        let mut body_bytes = 0;
        for frame in Exposition::new(fleet.clone(), None, Format::PrometheusText) {
            body_bytes += std::hint::black_box(frame).len();
        }
        spent.push(thread_cpu_time() - started);
        assert!(
            body_bytes > text_bytes,
            "the body holds every cluster's samples"
        );
    }
    spent.sort();
    let at = |quantile: f64| spent[((spent.len() - 1) as f64 * quantile).round() as usize];
    println!(
        "assembly of {clusters} clusters ({text_bytes} bytes of samples), {scrapes} scrapes, \
         caches cold: CPU min {:.2} ms, p50 {:.2} ms, p90 {:.2} ms",
        at(0.0).as_secs_f64() * 1e3,
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
    );
}
