//! Typed label sets, one struct per combination of labels the exporter emits.
//!
//! Written with a small macro rather than `#[derive(EncodeLabelSet)]` because the derive of
//! prometheus-client 0.25 does not accept lifetimes: owned `String` fields would mean cloning
//! every label value of every series at every scrape. These borrow from the snapshot.

use std::fmt;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

use crate::snapshot::{ClusterSnapshot, MemberSnapshot, RaftNodeSnapshot};

macro_rules! label_set {
    ($(#[$doc:meta])* $name:ident { $($field:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<'a> {
            $(pub $field: &'a str),+
        }

        impl EncodeLabelSet for $name<'_> {
            fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
                [$((stringify!($field), self.$field)),+].encode(encoder)
            }
        }
    };
}

label_set!(
    /// A cluster.
    ScopeLabels { scope }
);
label_set!(
    /// A cluster and the evidence its quorum verdict rests on.
    EvidenceLabels { scope, evidence }
);
label_set!(
    /// A cluster and one reason why voters gave no status.
    UnansweredLabels { scope, reason }
);
label_set!(
    /// A member of a cluster.
    MemberLabels { scope, member }
);
label_set!(
    /// A member and one of its possible roles.
    MemberRoleLabels { scope, member, role }
);
label_set!(
    /// A member and one of its possible states.
    MemberStateLabels { scope, member, state }
);
label_set!(
    /// A member's identity.
    MemberInfoLabels { scope, member, host, api_url }
);
label_set!(
    /// A member and the Patroni version it runs.
    MemberVersionLabels { scope, member, version }
);
label_set!(
    /// A member and one reason why it would not be promoted.
    MemberReasonLabels { scope, member, reason }
);
label_set!(
    /// A member and one of its boolean tags.
    MemberTagLabels { scope, member, tag }
);
label_set!(
    /// A member and the member it replicates from (`replicatefrom` tag).
    MemberReplicatefromLabels { scope, member, replicatefrom }
);
label_set!(
    /// A cluster and one synchronous replication mode.
    SynchronousModeLabels { scope, mode }
);
label_set!(
    /// A member and one field of its DCS view.
    MemberFieldLabels { scope, member, field }
);
label_set!(
    /// A member's WAL position of one kind (`flush`, `received`, `replayed`).
    MemberWalLabels { scope, member, kind }
);
label_set!(
    /// A poll error counter.
    PollErrorLabels { scope, source, kind }
);
label_set!(
    /// A Raft node, by its address.
    NodeLabels { scope, node }
);
label_set!(
    /// A Raft node and one of its possible states.
    NodeStateLabels { scope, node, state }
);
label_set!(
    /// A Raft node and one of its partners.
    NodePartnerLabels { scope, node, partner }
);
label_set!(
    /// A Raft node and the leader it believes in.
    NodeLeaderLabels { scope, node, leader }
);
label_set!(
    /// A Raft node and its pysyncobj version.
    NodeVersionLabels { scope, node, version }
);
label_set!(
    /// The exporter's own build.
    BuildLabels { version, revision }
);

/// The labels of a cluster.
pub fn scope(snapshot: &ClusterSnapshot) -> ScopeLabels<'_> {
    ScopeLabels {
        scope: &snapshot.scope,
    }
}

/// The labels of a member of a cluster.
pub fn member_labels<'a>(
    snapshot: &'a ClusterSnapshot,
    member: &'a MemberSnapshot,
) -> MemberLabels<'a> {
    MemberLabels {
        scope: &snapshot.scope,
        member: &member.member.name,
    }
}

/// The labels of a Raft node of a cluster.
pub fn node_labels<'a>(
    snapshot: &'a ClusterSnapshot,
    node: &'a RaftNodeSnapshot,
) -> NodeLabels<'a> {
    NodeLabels {
        scope: &snapshot.scope,
        node: &node.node,
    }
}
