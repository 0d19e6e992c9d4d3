//! The voter sets of the Raft nodes: who each answering node counts as voters, whether they
//! agree, and the set a quorum is counted against.
//!
//! Why a module of its own: the quorum verdict counts against these voters, the split views
//! report where they disagree, and the witness judgement classifies them; each of those reads
//! the comparison, none owns it.

use std::collections::BTreeSet;

use super::model::RaftNodeSnapshot;
use super::split::{count_distinct, most_common};

/// The voters a quorum is counted against, and whether most answering nodes agree on them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CountedVoters {
    pub voters: BTreeSet<String>,
    /// The set is held by more than half of the answering nodes.
    pub agreed: bool,
}

/// The voter set to count a majority against: the set (a node and its partners) that more
/// than half of the answering nodes hold; when no set is held by most, every voter any
/// answering node names. Empty when no node answers.
///
/// Why not always the union: a node started with a stale partner list names a voter that
/// exists only in its own configuration (canonical/postgresql-operator #1910, a partner
/// 127.0.0.99 in the partition lab). In the union that phantom makes a 3-node cluster
/// count 4 voters, so 3 are needed; with the misconfigured node cut off by its own list,
/// the leader's 2 connected voters no longer confirm anything and the verdict went to
/// "not visible". The set most nodes hold is the one the Raft leader commits with. Why not
/// the leader's set alone: a node started alone with no partners leads a cluster of one.
pub(super) fn counted_voter_set<'a>(
    sets: impl Iterator<Item = &'a BTreeSet<String>> + Clone,
) -> CountedVoters {
    let answering = sets.clone().count();
    let held_by_most = sets
        .clone()
        .find(|set| sets.clone().filter(|other| other == set).count() * 2 > answering);
    match held_by_most {
        Some(set) => CountedVoters {
            voters: set.clone(),
            agreed: true,
        },
        None => CountedVoters {
            voters: sets.flatten().cloned().collect(),
            agreed: false,
        },
    }
}

/// Every answering Raft node's voter set (itself and its partners), compared.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VoterSetComparison {
    /// Distinct voter sets among the nodes that answered; 0 when none did.
    pub distinct: usize,
    /// Per answering node (the address queried): whether its set differs from the one
    /// most nodes have, and its set.
    pub nodes: Vec<NodeVoterSet>,
    /// The voters the quorum verdict counts against ([`counted_voter_set`]).
    pub counted: CountedVoters,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVoterSet {
    pub node: String,
    pub voters: BTreeSet<String>,
    pub differs: bool,
}

impl VoterSetComparison {
    pub fn compare(nodes: &[RaftNodeSnapshot]) -> VoterSetComparison {
        let sets: Vec<(&str, BTreeSet<String>)> = nodes
            .iter()
            .filter_map(|node| {
                let status = node.status.as_ref().ok()?;
                let own = node.identity().to_owned();
                let mut voters: BTreeSet<String> =
                    status.partners.iter().map(|p| p.node.clone()).collect();
                voters.insert(own);
                Some((node.node.as_str(), voters))
            })
            .collect();
        let Some(reference) = most_common(sets.iter().map(|(_, set)| set), None) else {
            return VoterSetComparison::default();
        };
        let differs: Vec<bool> = sets.iter().map(|(_, set)| set != reference).collect();
        VoterSetComparison {
            counted: counted_voter_set(sets.iter().map(|(_, set)| set)),
            distinct: count_distinct(sets.iter().map(|(_, set)| set)),
            // The sets moved into the snapshot, not copied: three per poll of every cluster.
            nodes: sets
                .into_iter()
                .zip(differs)
                .map(|((node, voters), differs)| NodeVoterSet {
                    node: node.to_owned(),
                    differs,
                    voters,
                })
                .collect(),
        }
    }

    pub fn disagree(&self) -> bool {
        self.distinct > 1
    }

    /// The nodes whose set differs, with their sets: `127.0.0.13:2222 {…11:2222, …13:2222}`.
    pub fn describe_differences(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.differs)
            .map(|n| {
                let voters: Vec<&str> = n.voters.iter().map(String::as_str).collect();
                format!("{} counts {{{}}}", n.node, voters.join(", "))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::parse_admin_text;

    fn node(addr: &str, partners: &[&str]) -> RaftNodeSnapshot {
        let mut text = format!(
            "commit_idx: 41\nenabled_code_version: 0\nhas_quorum: True\nlast_applied: 41\nleader: {addr}\nleader_commit_idx: 41\nlog_len: 41\nraft_term: 1\nreadonly_nodes_count: 0\nrevision: deprecated\nself: {addr}\nself_code_version: 0\nstate: 2\nuptime: 18\nversion: 0.3.12\n"
        );
        for partner in partners {
            text.push_str(&format!("partner_node_status_server_{partner}: 2\n"));
        }
        text.push_str(&format!("partner_nodes_count: {}\n", partners.len()));
        RaftNodeSnapshot {
            node: addr.to_owned(),
            round_trip: None,
            status: Ok(parse_admin_text(&text).unwrap()),
        }
    }

    #[test]
    fn voter_sets_compared() {
        let (a, b, c) = ("127.0.0.11:2222", "127.0.0.12:2222", "127.0.0.13:2222");
        let agree =
            VoterSetComparison::compare(&[node(a, &[b, c]), node(b, &[a, c]), node(c, &[a, b])]);
        assert_eq!(agree.distinct, 1);
        assert!(!agree.disagree());
        // Member 2 started with member 0 as its only partner (postgresql-operator #1910).
        let stale =
            VoterSetComparison::compare(&[node(a, &[b, c]), node(b, &[a, c]), node(c, &[a])]);
        assert_eq!(stale.distinct, 2);
        assert!(stale.disagree());
        assert_eq!(stale.nodes.iter().filter(|n| n.differs).count(), 1);
        assert!(stale.nodes[2].differs);
        assert_eq!(
            stale.describe_differences(),
            vec![format!("{c} counts {{{a}, {c}}}")]
        );
        assert_eq!(VoterSetComparison::compare(&[]).distinct, 0);
    }
}
