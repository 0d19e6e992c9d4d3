//! The roles and states Patroni names a member by, as types.
//!
//! Both endpoints say them as strings: `/cluster` (the DCS view) and the member's own
//! `/patroni`. They are read into enums here, once, so that the rest of the exporter matches
//! on variants rather than comparing strings it could misspell. A value this exporter does not
//! know is kept as [`MemberRole::Other`] / [`MemberState::Other`], never rejected: an exporter
//! that hides a value it does not know hides an incident. [`MemberRole::as_str`] and
//! [`MemberState::as_str`] give back the text as Patroni sent it (the labels and the status
//! output show it).

use std::fmt;

use serde::Deserialize;

/// A member's role: in `/cluster` `leader`, `standby_leader`, `sync_standby`,
/// `quorum_standby` (4.0+) or `replica`; in its own `/patroni` `primary` (3.x says `master`,
/// read as `primary`), `standby_leader` or `replica`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
pub enum MemberRole {
    /// `/cluster`: holds the leader key of a primary cluster.
    Leader,
    /// `/patroni`: the writable primary.
    Primary,
    /// Holds the leader key of a standby cluster (both endpoints).
    StandbyLeader,
    SyncStandby,
    QuorumStandby,
    Replica,
    /// Any other value, as Patroni sent it.
    Other(String),
}

impl MemberRole {
    /// The role as Patroni says it.
    pub fn as_str(&self) -> &str {
        match self {
            MemberRole::Leader => "leader",
            MemberRole::Primary => "primary",
            MemberRole::StandbyLeader => "standby_leader",
            MemberRole::SyncStandby => "sync_standby",
            MemberRole::QuorumStandby => "quorum_standby",
            MemberRole::Replica => "replica",
            MemberRole::Other(text) => text,
        }
    }

    /// A role as a member's own `/patroni` says it: Patroni 3.x calls the primary `master`,
    /// 4.x calls it `primary`; both are [`MemberRole::Primary`].
    pub(super) fn reported(text: String) -> MemberRole {
        if text == "master" {
            MemberRole::Primary
        } else {
            MemberRole::from(text)
        }
    }

    /// `leader` and `standby_leader` hold the leader key (the latter in a standby cluster).
    pub fn is_leader(&self) -> bool {
        matches!(self, MemberRole::Leader | MemberRole::StandbyLeader)
    }

    /// Synchronous standbys, in the old (`sync_standby`) and the quorum commit
    /// (`quorum_standby`) modes.
    pub fn is_sync(&self) -> bool {
        matches!(self, MemberRole::SyncStandby | MemberRole::QuorumStandby)
    }

    /// A member's own word that it leads: the writable primary, or a standby cluster's
    /// standby leader.
    pub fn says_leader(&self) -> bool {
        matches!(self, MemberRole::Primary | MemberRole::StandbyLeader)
    }
}

impl Default for MemberRole {
    fn default() -> Self {
        MemberRole::Other(String::new())
    }
}

impl From<String> for MemberRole {
    fn from(text: String) -> Self {
        match text.as_str() {
            "leader" => MemberRole::Leader,
            "primary" => MemberRole::Primary,
            "standby_leader" => MemberRole::StandbyLeader,
            "sync_standby" => MemberRole::SyncStandby,
            "quorum_standby" => MemberRole::QuorumStandby,
            "replica" => MemberRole::Replica,
            _ => MemberRole::Other(text),
        }
    }
}

impl From<&str> for MemberRole {
    fn from(text: &str) -> Self {
        MemberRole::from(text.to_owned())
    }
}

impl fmt::Display for MemberRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A member's PostgreSQL state: `/cluster` gives a running replica's replication state
/// (`streaming`, `in archive recovery`) in its place, and `/patroni` gives that one as
/// `replication_state`, so one type serves all three.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
pub enum MemberState {
    Running,
    Streaming,
    InArchiveRecovery,
    Starting,
    Stopping,
    Stopped,
    Restarting,
    Crashed,
    StartFailed,
    CreatingReplica,
    /// Any other value (`unknown` when PostgreSQL runs but Patroni's query failed, a state
    /// of a future Patroni), as Patroni sent it.
    Other(String),
}

impl MemberState {
    /// The state as Patroni says it.
    pub fn as_str(&self) -> &str {
        match self {
            MemberState::Running => "running",
            MemberState::Streaming => "streaming",
            MemberState::InArchiveRecovery => "in archive recovery",
            MemberState::Starting => "starting",
            MemberState::Stopping => "stopping",
            MemberState::Stopped => "stopped",
            MemberState::Restarting => "restarting",
            MemberState::Crashed => "crashed",
            MemberState::StartFailed => "start failed",
            MemberState::CreatingReplica => "creating replica",
            MemberState::Other(text) => text,
        }
    }

    /// PostgreSQL is up and serving: running, or a replica that streams or replays from the
    /// archive.
    pub fn is_serving(&self) -> bool {
        matches!(
            self,
            MemberState::Running | MemberState::Streaming | MemberState::InArchiveRecovery
        )
    }
}

impl Default for MemberState {
    fn default() -> Self {
        MemberState::Other(String::new())
    }
}

impl From<String> for MemberState {
    fn from(text: String) -> Self {
        match text.as_str() {
            "running" => MemberState::Running,
            "streaming" => MemberState::Streaming,
            "in archive recovery" => MemberState::InArchiveRecovery,
            "starting" => MemberState::Starting,
            "stopping" => MemberState::Stopping,
            "stopped" => MemberState::Stopped,
            "restarting" => MemberState::Restarting,
            "crashed" => MemberState::Crashed,
            "start failed" => MemberState::StartFailed,
            "creating replica" => MemberState::CreatingReplica,
            _ => MemberState::Other(text),
        }
    }
}

impl From<&str> for MemberState {
    fn from(text: &str) -> Self {
        MemberState::from(text.to_owned())
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_round_trip_and_unknown_ones_are_kept() {
        for text in [
            "leader",
            "primary",
            "standby_leader",
            "sync_standby",
            "quorum_standby",
            "replica",
            "future_role",
            "master",
            "",
        ] {
            let role = MemberRole::from(text);
            assert_eq!(role.as_str(), text);
            assert_eq!(role.to_string(), text);
        }
        assert_eq!(
            MemberRole::from("master"),
            MemberRole::Other("master".into())
        );
        assert_eq!(MemberRole::reported("master".into()), MemberRole::Primary);
        for text in [
            "running",
            "streaming",
            "in archive recovery",
            "starting",
            "stopping",
            "stopped",
            "restarting",
            "crashed",
            "start failed",
            "creating replica",
            "unknown",
            "",
        ] {
            let state = MemberState::from(text);
            assert_eq!(state.as_str(), text);
            assert_eq!(state.to_string(), text);
        }
        assert_eq!(
            MemberState::from("unknown"),
            MemberState::Other("unknown".into())
        );
    }
}
