//! The metrics encoder: snapshots in, Prometheus exposition out.
//!
//! A custom prometheus-client [`Collector`] reads the current snapshots at scrape time and
//! writes one family at a time across all clusters. Nothing here is stateful: a member or a
//! node that is not in the latest snapshot simply produces no series, so series of members
//! that left vanish at the next poll (no stale gauges, no `remove()` bookkeeping); a member
//! the poller still remembers after it left `/cluster` is in the snapshot, marked.
//!
//! Layout: `families` is the small writer every family goes through; `patroni_families`
//! and `raft_families` map the two sources' parts of a snapshot to metric names (the names
//! are an interface: dashboards and alerts depend on them, see `docs/metrics.md`),
//! `failover_families` failover readiness, `split_families` what comparing every member
//! and node shows (primaries by their own word, diverging views and voter sets), and
//! `margin_families` how close the next outage is;
//! [`exposition`] renders the registry in the format the scraper asked for; [`cache`] keeps
//! the latest rendering so that concurrent scrapes share one encoding.

pub mod cache;
pub mod exposition;
mod failover_families;
mod families;
pub mod labels;
mod margin_families;
mod patroni_families;
mod raft_families;
mod split_families;

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::snapshot::{ClusterSnapshot, SnapshotStore};
use families::FamilyWriter;
use labels::BuildLabels;

/// The exporter's version and the git revision it was built from.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("PATRONI_RAFT_EXPORTER_REVISION");

/// Encodes the latest snapshots of every cluster at each scrape.
#[derive(Debug)]
pub struct SnapshotCollector {
    store: Arc<SnapshotStore>,
}

impl SnapshotCollector {
    pub fn new(store: Arc<SnapshotStore>) -> SnapshotCollector {
        SnapshotCollector { store }
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshots = self.store.current();
        encode_snapshots(encoder, &snapshots)
    }
}

/// Writes every family for the given snapshots.
pub fn encode_snapshots(
    encoder: DescriptorEncoder,
    snapshots: &[Arc<ClusterSnapshot>],
) -> Result<(), std::fmt::Error> {
    let mut writer = FamilyWriter::new(encoder);
    writer.gauge(
        "patroni_exporter_build_info",
        "A metric with a constant '1' labelled by the exporter's version and git revision.",
        [(
            BuildLabels {
                version: VERSION,
                revision: REVISION,
            },
            1.0,
        )],
    )?;
    patroni_families::encode(&mut writer, snapshots)?;
    failover_families::encode(&mut writer, snapshots)?;
    raft_families::encode(&mut writer, snapshots)?;
    split_families::encode(&mut writer, snapshots)?;
    margin_families::encode(&mut writer, snapshots)?;
    Ok(())
}

/// A registry holding the snapshot collector, ready to be rendered by [`exposition`].
pub fn registry(store: Arc<SnapshotStore>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector::new(store)));
    registry
}

/// A collector over a fixed list of snapshots (e.g. one cluster for `/probe`).
#[derive(Debug)]
struct FixedSnapshots(Vec<Arc<ClusterSnapshot>>);

impl Collector for FixedSnapshots {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_snapshots(encoder, &self.0)
    }
}

/// Renders only the given snapshots (plus the exporter's build info) in `format`.
pub fn render_snapshots(
    snapshots: Vec<Arc<ClusterSnapshot>>,
    format: exposition::Format,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(FixedSnapshots(snapshots)));
    exposition::render(&registry, format)
}
