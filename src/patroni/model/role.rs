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

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// An enum of the values Patroni names, each with its text, plus `Other(String)` for the
/// rest; `as_str`, `From<String>`/`From<&str>`, `Default` (the empty `Other`) and `Display`
/// from the one table, so that a value's text is written once.
macro_rules! named_values {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $text:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)*
            /// Any other value, as Patroni sent it.
            Other(String),
        }

        impl $name {
            /// The value as Patroni says it.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(text) => text,
                }
            }
        }

        impl From<String> for $name {
            fn from(text: String) -> Self {
                match text.as_str() {
                    $($text => $name::$variant,)*
                    _ => $name::Other(text),
                }
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                match text {
                    $($text => $name::$variant,)*
                    _ => $name::Other(text.to_owned()),
                }
            }
        }

        /// From a JSON string, matched where it lies in the body: a known value allocates
        /// nothing (`#[serde(from = "String")]` made a `String` of every one, each member's
        /// role and state of every `/cluster` and `/patroni`).
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Text;
                impl Visitor<'_> for Text {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: de::Error>(self, text: &str) -> Result<$name, E> {
                        Ok($name::from(text))
                    }
                    fn visit_string<E: de::Error>(self, text: String) -> Result<$name, E> {
                        Ok($name::from(text))
                    }
                }
                deserializer.deserialize_str(Text)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::Other(String::new())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_values! {
    /// A member's role: in `/cluster` `leader`, `standby_leader`, `sync_standby`,
    /// `quorum_standby` (4.0+) or `replica`; in its own `/patroni` `primary` (3.x says
    /// `master`, read as `primary`), `standby_leader` or `replica`.
    pub enum MemberRole {
        /// `/cluster`: holds the leader key of a primary cluster.
        Leader = "leader",
        /// `/patroni`: the writable primary.
        Primary = "primary",
        /// Holds the leader key of a standby cluster (both endpoints).
        StandbyLeader = "standby_leader",
        SyncStandby = "sync_standby",
        QuorumStandby = "quorum_standby",
        Replica = "replica",
    }
}

impl MemberRole {
    /// A role as a member's own `/patroni` says it: Patroni 3.x calls the primary `master`,
    /// 4.x calls it `primary`; both are [`MemberRole::Primary`].
    pub(super) fn reported(text: &str) -> MemberRole {
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

named_values! {
    /// A member's PostgreSQL state: `/cluster` gives a running replica's replication state
    /// (`streaming`, `in archive recovery`) in its place, and `/patroni` gives that one as
    /// `replication_state`, so one type serves all three. The variants are the states the
    /// exporter judges by (serving or not); every other one (`stopped`, `starting`,
    /// `crashed`, `unknown` when PostgreSQL runs but Patroni's query failed, a future
    /// Patroni's) is kept as `Other`, with its text for the labels.
    pub enum MemberState {
        Running = "running",
        Streaming = "streaming",
        InArchiveRecovery = "in archive recovery",
    }
}

impl MemberState {
    /// PostgreSQL is up and serving: running, or a replica that streams or replays from the
    /// archive.
    pub fn is_serving(&self) -> bool {
        matches!(
            self,
            MemberState::Running | MemberState::Streaming | MemberState::InArchiveRecovery
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_round_trip_and_unknown_ones_are_kept() {
        use MemberRole as R;
        use MemberState as S;
        let roles = [R::Leader, R::Primary, R::StandbyLeader, R::SyncStandby];
        for role in roles.into_iter().chain([R::QuorumStandby, R::Replica]) {
            assert_eq!(MemberRole::from(role.as_str()), role);
            assert_eq!(role.to_string(), role.as_str());
        }
        for state in [S::Running, S::Streaming, S::InArchiveRecovery] {
            assert_eq!(MemberState::from(state.as_str()), state);
            assert_eq!(state.to_string(), state.as_str());
        }
        for other in ["stopped", "crashed", "creating replica", "unknown", ""] {
            assert_eq!(MemberState::from(other), S::Other(other.into()));
            assert_eq!(MemberState::from(other).as_str(), other);
        }
        for unknown in ["future_role", "master", ""] {
            assert_eq!(MemberRole::from(unknown), R::Other(unknown.into()));
            assert_eq!(MemberRole::from(unknown).as_str(), unknown);
        }
        assert_eq!(MemberRole::reported("master"), R::Primary);
        assert_eq!(MemberRole::reported("future_role").as_str(), "future_role");
        assert_eq!(MemberState::default().as_str(), "");
    }
}
