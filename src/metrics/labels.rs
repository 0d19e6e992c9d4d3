//! Typed label sets, one struct per combination of labels the exporter emits.
//!
//! Written with two small macros: `label_sets!` declares the sets, which borrow from the
//! snapshot (no label value is cloned) and encode themselves as `{name="value",...}` with the
//! escaping of the text formats (`\\`, `\"`, `\n`), as prometheus-client does (compared in
//! the tests); `extended_by!` builds a set from the one with a label less
//! (`member_labels(s, m).role(role)`), so that a family names only the label it adds.

use crate::snapshot::{ClusterSnapshot, MemberSnapshot, RaftNodeSnapshot};

/// A set of labels that writes itself, braces included.
pub trait EncodeLabels {
    fn encode(&self, out: &mut String);
}

/// No labels: the sample of a family with one series (the exporter's own process figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoLabels;

impl EncodeLabels for NoLabels {
    fn encode(&self, _out: &mut String) {}
}

/// Appends a label value with `\`, `"` and newlines escaped.
pub fn escape_into(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

macro_rules! label_sets {
    ($($(#[$doc:meta])* $name:ident { $($field:ident),+ $(,)? };)+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<'a> {
            $(pub $field: &'a str),+
        }

        impl EncodeLabels for $name<'_> {
            fn encode(&self, out: &mut String) {
                let mut separator = '{';
                $(
                    out.push(separator);
                    out.push_str(concat!(stringify!($field), "=\""));
                    escape_into(out, self.$field);
                    out.push('"');
                    separator = ',';
                )+
                let _ = separator;
                out.push('}');
            }
        }
    )+};
}

label_sets! {
    /// A cluster.
    ScopeLabels { scope };
    /// A standby cluster and the source cluster it is configured to follow.
    StandbySourceLabels { scope, source_scope };
    /// A cluster and the kind of its DCS (`raft`, `etcd`).
    DcsLabels { scope, dcs };
    /// An etcd endpoint of a cluster, by its URL.
    EtcdEndpointLabels { scope, endpoint };
    /// An etcd endpoint and the member answering there.
    EtcdEndpointMemberLabels { scope, endpoint, member };
    /// An etcd endpoint, its member and the member's etcd version.
    EtcdMemberVersionLabels { scope, endpoint, member, version };
    /// An etcd endpoint, its member, the member's etcd version and the cluster version it
    /// answered.
    EtcdMemberInfoLabels { scope, endpoint, member, version, cluster_version };
    /// A cluster and one etcd alarm (`NOSPACE`, `CORRUPT`).
    AlarmLabels { scope, alarm };
    /// A cluster and one fact: asked of its DCS, or read only in some polls.
    FactLabels { scope, fact };
    /// A cluster and the evidence its quorum verdict rests on.
    EvidenceLabels { scope, evidence };
    /// A cluster and one reason why voters gave no status.
    UnansweredLabels { scope, reason };
    /// A member of a cluster.
    MemberLabels { scope, member };
    /// A member and one of its possible roles.
    MemberRoleLabels { scope, member, role };
    /// A member and one of its possible states.
    MemberStateLabels { scope, member, state };
    /// A member's identity.
    MemberInfoLabels { scope, member, host, api_url };
    /// A member and the Patroni version it runs.
    MemberVersionLabels { scope, member, version };
    /// A member and one reason why it would not be promoted.
    MemberReasonLabels { scope, member, reason };
    /// A member and one fact asked of it in rotation.
    MemberFactLabels { scope, member, fact };
    /// A member and one of its boolean tags.
    MemberTagLabels { scope, member, tag };
    /// A member and the member it replicates from (`replicatefrom` tag).
    MemberReplicatefromLabels { scope, member, replicatefrom };
    /// A cluster and one synchronous replication mode.
    SynchronousModeLabels { scope, mode };
    /// A member and one field of its DCS view.
    MemberFieldLabels { scope, member, field };
    /// A member's WAL position of one kind (`flush`, `received`, `replayed`).
    MemberWalLabels { scope, member, kind };
    /// A member's setting and where its value comes from.
    MemberSourceLabels { scope, member, source };
    /// One of a member's Raft timing settings.
    MemberSettingLabels { scope, member, setting };
    /// One of a member's Raft timing settings and where its value comes from.
    MemberSettingSourceLabels { scope, member, setting, source };
    /// A poll error counter.
    PollErrorLabels { scope, source, kind };
    /// A Raft node, by its address.
    NodeLabels { scope, node };
    /// A Raft node and one of its possible states.
    NodeStateLabels { scope, node, state };
    /// A Raft node and one of its partners.
    NodePartnerLabels { scope, node, partner };
    /// A Raft node and the leader it believes in.
    NodeLeaderLabels { scope, node, leader };
    /// A Raft node and its pysyncobj version.
    NodeVersionLabels { scope, node, version };
    /// A Raft voter and what it is to the cluster (`member`, `witness`, `unknown`).
    NodeKindLabels { scope, node, kind };
    /// The exporter's own build.
    BuildLabels { version, revision };
}

/// `base.extra(value)`: the label set `base` with one more label, so that a family's samples
/// start from the labels of their cluster, member or node.
macro_rules! extended_by {
    ($($base:ident $fields:tt => { $($extra:ident: $name:ident),+ $(,)? })+) => {$(
        impl<'a> $base<'a> {
            $(extended_by!(@method $fields $extra $name);)+
        }
    )+};
    (@method { $($field:ident),+ } $extra:ident $name:ident) => {
        pub fn $extra(self, $extra: &'a str) -> $name<'a> {
            $name {
                $($field: self.$field,)+
                $extra,
            }
        }
    };
}

extended_by! {
    ScopeLabels { scope } => {
        dcs: DcsLabels,
        endpoint: EtcdEndpointLabels,
        alarm: AlarmLabels,
        fact: FactLabels,
        evidence: EvidenceLabels,
        reason: UnansweredLabels,
        mode: SynchronousModeLabels,
    }
    MemberLabels { scope, member } => {
        role: MemberRoleLabels,
        state: MemberStateLabels,
        version: MemberVersionLabels,
        reason: MemberReasonLabels,
        tag: MemberTagLabels,
        fact: MemberFactLabels,
        replicatefrom: MemberReplicatefromLabels,
        field: MemberFieldLabels,
        kind: MemberWalLabels,
        source: MemberSourceLabels,
        setting: MemberSettingLabels,
    }
    MemberSettingLabels { scope, member, setting } => {
        source: MemberSettingSourceLabels,
    }
    EtcdEndpointLabels { scope, endpoint } => {
        member: EtcdEndpointMemberLabels,
    }
    EtcdEndpointMemberLabels { scope, endpoint, member } => {
        version: EtcdMemberVersionLabels,
    }
    EtcdMemberVersionLabels { scope, endpoint, member, version } => {
        cluster_version: EtcdMemberInfoLabels,
    }
    NodeLabels { scope, node } => {
        state: NodeStateLabels,
        partner: NodePartnerLabels,
        leader: NodeLeaderLabels,
        version: NodeVersionLabels,
        kind: NodeKindLabels,
    }
}

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
    member_named(snapshot, &member.member.name)
}

/// The labels of the member `member` of a cluster, for the judgements that name a member
/// (failover readiness, DCS views) rather than hold its snapshot.
pub fn member_named<'a>(snapshot: &'a ClusterSnapshot, member: &'a str) -> MemberLabels<'a> {
    MemberLabels {
        scope: &snapshot.scope,
        member,
    }
}

/// The labels of a Raft node of a cluster.
pub fn node_labels<'a>(
    snapshot: &'a ClusterSnapshot,
    node: &'a RaftNodeSnapshot,
) -> NodeLabels<'a> {
    node_named(snapshot, &node.node)
}

/// The labels of the Raft node `node` (its address) of a cluster.
pub fn node_named<'a>(snapshot: &'a ClusterSnapshot, node: &'a str) -> NodeLabels<'a> {
    NodeLabels {
        scope: &snapshot.scope,
        node,
    }
}
