//! Families of standby clusters (Patroni's `standby_cluster:`): which clusters are standby
//! clusters, whether their standby leader streams from its source, and the lag to the source
//! named by `standby_of` (the pairing and the judgements are made in `snapshot`; this maps
//! them to names).

use std::fmt;
use std::sync::Arc;

use super::families::{declare_families, flag, FamilyWriter};
use super::labels::{member_labels, scope, StandbySourceLabels};
use crate::snapshot::{
    standby_leader_archive_recovery, standby_leader_streaming, ClusterSnapshot, MemberSnapshot,
};

declare_families! {
    CLUSTER_STANDBY: cached_gauge("patroni_cluster_standby", "1 when the cluster is a standby cluster (the member holding the leader key in GET /cluster is a standby_leader), 0 when it is not; absent without GET /cluster or a leader.");
    STANDBY_LEADER_STREAMING: cached_gauge("patroni_standby_leader_streaming", "1 when the standby leader streams from its source (replication_state streaming in its own GET /patroni), 0 when it does not (archive only, or neither). Only members that say standby_leader.");
    STANDBY_LEADER_ARCHIVE_RECOVERY: cached_gauge("patroni_standby_leader_archive_recovery", "1 when the standby leader replays from the archive only (replication_state 'in archive recovery' in its own GET /patroni), 0 otherwise. Only members that say standby_leader.");
    STANDBY_SOURCE_INFO: cached_gauge("patroni_standby_source_info", "1 for each standby cluster whose source is configured (standby_of in --config.file): source_scope is the source cluster.");
    STANDBY_LAG_BYTES: cached_gauge("patroni_standby_lag_bytes", "The source cluster's leader WAL position (its own GET /patroni, as of the source's latest poll) minus the standby leader's replayed position; 0 when the standby replayed past that reading. Absent when either is unknown.");
    STANDBY_SOURCE_POSITION_TIMESTAMP: cached_gauge("patroni_standby_source_position_timestamp_seconds", "When the source's poll that read the source position of patroni_standby_lag_bytes finished (Unix time): the lag's source side is as of then, its standby side as of patroni_exporter_last_poll_timestamp_seconds of the standby cluster. Absent with the lag.");
}

/// One value per member that says standby_leader, where `value` has one.
fn per_standby_leader<'a>(
    snapshots: &'a [Arc<ClusterSnapshot>],
    value: fn(&MemberSnapshot) -> Option<bool>,
) -> impl Iterator<Item = (super::labels::MemberLabels<'a>, f64)> + 'a {
    snapshots.iter().flat_map(move |s| {
        s.standby_leaders()
            .filter_map(move |m| Some((member_labels(s, m), flag(value(m)?))))
    })
}

/// The configured pair of each standby cluster with a `standby_of`.
fn pair(s: &ClusterSnapshot) -> Option<StandbySourceLabels<'_>> {
    Some(StandbySourceLabels {
        scope: &s.scope,
        source_scope: &s.standby_source.as_ref()?.scope,
    })
}

pub fn encode(writer: &mut FamilyWriter, snapshots: &[Arc<ClusterSnapshot>]) -> fmt::Result {
    writer.write(
        &CLUSTER_STANDBY,
        snapshots
            .iter()
            .filter_map(|s| Some((scope(s), flag(s.is_standby_cluster()?)))),
    )?;
    writer.write(
        &STANDBY_LEADER_STREAMING,
        per_standby_leader(snapshots, standby_leader_streaming),
    )?;
    writer.write(
        &STANDBY_LEADER_ARCHIVE_RECOVERY,
        per_standby_leader(snapshots, standby_leader_archive_recovery),
    )?;
    writer.write(
        &STANDBY_SOURCE_INFO,
        snapshots.iter().filter_map(|s| Some((pair(s)?, 1.0))),
    )?;
    writer.write(
        &STANDBY_LAG_BYTES,
        snapshots
            .iter()
            .filter_map(|s| Some((pair(s)?, s.standby_lag_bytes()? as f64))),
    )?;
    writer.write(
        &STANDBY_SOURCE_POSITION_TIMESTAMP,
        snapshots.iter().filter_map(|s| {
            s.standby_lag_bytes()?;
            let position = s.standby_source.as_ref()?.position.as_ref()?;
            Some((pair(s)?, position.polled_at_seconds))
        }),
    )?;
    Ok(())
}
