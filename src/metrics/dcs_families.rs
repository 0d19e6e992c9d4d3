//! The DCS-generic families: the quorum verdict and its margin of every cluster whose DCS is
//! watched, whatever the DCS, labelled with its kind.
//!
//! Why apart from each DCS's own families: the alerts and dashboards that page a human on a
//! lost quorum, and the fleet view, read one family for Raft and etcd alike; the evidence and
//! the per-member figures stay in each kind's families (`patroni_raft_*`, `patroni_etcd_*`),
//! whose names say what they are made of.

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, FamilyWriter};
use super::labels::{scope, DcsLabels};
use crate::snapshot::{ClusterSnapshot, DcsKind};

declare_families! {
    DCS_QUORUM: cached_gauge("patroni_dcs_quorum", "The DCS's quorum verdict, whatever the DCS (dcs: raft, etcd): 1 confirmed, 0 lost (positive evidence), -1 not visible from this exporter. The evidence is in patroni_raft_quorum_evidence or patroni_etcd_quorum_evidence. The best of several exporters is their max.");
    DCS_QUORUM_MARGIN: cached_gauge("patroni_dcs_quorum_margin", "How many more DCS members (Raft voters, etcd voting members) can fail before the quorum is lost: 1 on a healthy 3-member DCS, 0 with one down, negative once lost. Absent when not known.");
}

/// Every cluster whose DCS is watched, with its kind.
fn watched(
    snapshots: &[Arc<ClusterSnapshot>],
) -> impl Iterator<Item = (&ClusterSnapshot, DcsKind)> {
    snapshots
        .iter()
        .filter_map(|s| Some((s.as_ref(), s.dcs.kind()?)))
}

fn dcs_labels(snapshot: &ClusterSnapshot, kind: DcsKind) -> DcsLabels<'_> {
    scope(snapshot).dcs(kind.as_str())
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &DCS_QUORUM,
        watched(snapshots)
            .filter_map(|(s, kind)| Some((dcs_labels(s, kind), s.dcs.verdict()?.gauge_value()))),
    )?;
    writer.write(
        &DCS_QUORUM_MARGIN,
        watched(snapshots)
            .filter_map(|(s, kind)| Some((dcs_labels(s, kind), s.dcs.margin()? as f64))),
    )
}
