//! pysyncobj's timing settings: what each one bounds, its default, and the values a Patroni
//! configuration gives them.
//!
//! Why here: the deadlines a Raft node keeps (how long a silent connection lives, when a
//! follower starts an election, how long a leader without a quorum keeps claiming) are
//! pysyncobj's own (`pysyncobj/config.py`, `SyncObjConf`). Patroni up to 4.1.x does not pass
//! any of them (`patroni/dcs/raft.py`, `KVStoreTTL.__init__`: only journal, password and
//! membership settings), so its nodes run pysyncobj's defaults; Patroni 4.2.0 takes six of
//! them from the local `raft:` section (and from `PATRONI_RAFT_*` environment variables).
//! No maintenance line backports it (REL_3_3, REL_4_0, REL_4_1 read none of those keys). Which
//! Patroni honours them is judged where the members' versions are known (the snapshot, by
//! [`crate::patroni::Feature::RaftTiming`]); this module only names the settings and their
//! defaults.

/// One of the pysyncobj settings Patroni 4.2 reads from its `raft:` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RaftSetting {
    /// `raftMinTimeout`: the shortest time a follower waits without hearing from a leader
    /// before it starts an election.
    MinTimeout,
    /// `raftMaxTimeout`: the longest such wait (each node draws its own between the two).
    MaxTimeout,
    /// `connectionTimeout`: a connection that receives nothing for this long is closed, and
    /// a connect that takes longer fails (`pysyncobj/tcp_connection.py`).
    ConnectionTimeout,
    /// `appendEntriesPeriod`: how often a leader sends (heartbeats included).
    AppendEntriesPeriod,
    /// `connectionRetryTime`: how long a node waits before it connects again to a partner
    /// it lost.
    ConnectionRetryTime,
    /// `leaderFallbackTimeout`: how long a leader that lost the majority keeps calling itself
    /// leader before it steps down.
    LeaderFallbackTimeout,
}

impl RaftSetting {
    pub const ALL: [RaftSetting; 6] = [
        RaftSetting::MinTimeout,
        RaftSetting::MaxTimeout,
        RaftSetting::ConnectionTimeout,
        RaftSetting::AppendEntriesPeriod,
        RaftSetting::ConnectionRetryTime,
        RaftSetting::LeaderFallbackTimeout,
    ];

    /// The key in Patroni's `raft:` section (and the `setting` label).
    pub fn key(self) -> &'static str {
        match self {
            RaftSetting::MinTimeout => "min_timeout",
            RaftSetting::MaxTimeout => "max_timeout",
            RaftSetting::ConnectionTimeout => "connection_timeout",
            RaftSetting::AppendEntriesPeriod => "append_entries_period",
            RaftSetting::ConnectionRetryTime => "connection_retry_time",
            RaftSetting::LeaderFallbackTimeout => "leader_fallback_timeout",
        }
    }

    /// pysyncobj's default, in seconds: the same in 0.3.12 to 0.3.17 (`pysyncobj/config.py`).
    pub fn pysyncobj_default(self) -> f64 {
        match self {
            RaftSetting::MinTimeout => 0.4,
            RaftSetting::MaxTimeout => 1.4,
            RaftSetting::ConnectionTimeout => 3.5,
            RaftSetting::AppendEntriesPeriod => 0.1,
            RaftSetting::ConnectionRetryTime => 5.0,
            RaftSetting::LeaderFallbackTimeout => 30.0,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The values a Patroni configuration gives the six settings, in seconds; `None` where it
/// gives none (the node then runs pysyncobj's default).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RaftTimingConfig {
    values: [Option<f64>; 6],
}

impl RaftTimingConfig {
    /// The configuration with `setting` set to `seconds`.
    pub fn with(mut self, setting: RaftSetting, seconds: f64) -> RaftTimingConfig {
        self.values[setting.index()] = Some(seconds);
        self
    }

    /// The value configured for `setting`, if any.
    pub fn get(&self, setting: RaftSetting) -> Option<f64> {
        self.values[setting.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_defaults_are_pysyncobjs() {
        let keys: std::collections::BTreeSet<_> =
            RaftSetting::ALL.iter().map(|s| s.key()).collect();
        assert_eq!(keys.len(), 6);
        let defaults: Vec<f64> = RaftSetting::ALL
            .iter()
            .map(|s| s.pysyncobj_default())
            .collect();
        assert_eq!(defaults, [0.4, 1.4, 3.5, 0.1, 5.0, 30.0]);
        for (index, setting) in RaftSetting::ALL.iter().enumerate() {
            assert_eq!(setting.index(), index);
        }
    }

    #[test]
    fn a_configured_value_is_kept_and_others_stay_unset() {
        let config = RaftTimingConfig::default().with(RaftSetting::ConnectionTimeout, 6.0);
        assert_eq!(config.get(RaftSetting::ConnectionTimeout), Some(6.0));
        assert_eq!(config.get(RaftSetting::MaxTimeout), None);
    }
}
