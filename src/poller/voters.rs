//! What the poller remembers of the Raft voters from one poll to the next.
//!
//! Why two sets: the nodes the answers *named* (each answering node and its partners, under
//! every name they were given) are where to look next, so a voter whose REST API is down is
//! still asked; the *counted* voter set ([`VoterSetComparison`]'s choice among the nodes'
//! sets, which differ while a membership change spreads) is what the quorum verdict judges
//! when no node answers. They are equal in a settled cluster and differ while a membership
//! change spreads or when nodes name one another by different addresses.
//!
//! [`VoterSetComparison`]: crate::snapshot::VoterSetComparison

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::placement::MAX_MEMBERS;
use crate::address::{Host, NodeAddress};
use crate::snapshot::{
    self, MemberSnapshot, RaftNodeSnapshot, VoterFacts, VoterKinds, VoterSetComparison,
};

/// The voters across polls; each set is kept when no node answered, so that a cluster that
/// comes back is found, and judged, through them.
#[derive(Debug, Default)]
pub(super) struct VoterMemory {
    /// Every node the answering nodes of the last poll in which one answered named (each
    /// node itself and its partners), at most [`MAX_MEMBERS`]: asked in the next poll.
    named: BTreeSet<String>,
    /// The counted voter set of the last poll in which a node answered: what the quorum
    /// verdict judges when no node answers.
    counted: BTreeSet<String>,
    /// The Unix time of that poll: exported beside what is judged from `counted`.
    counted_at: Option<f64>,
    /// The voters that were witnesses in the last poll: one stays a witness while it is
    /// down ([`VoterKinds`]).
    witnesses: BTreeSet<String>,
    /// Hosts of voters without a member whose REST API did not answer when last asked, and
    /// when: not asked again for a `ttl`, so that a voter whose REST port is elsewhere or
    /// filtered does not stretch every poll to the timeout; kept until it answers or the
    /// host stops voting (a voter without REST to [`VoterKinds`]).
    without_rest: BTreeMap<Host, Instant>,
}

impl VoterMemory {
    /// Learns the nodes that `raft_nodes` name; returns them (for the policy to learn their
    /// hosts), or `None` when no node answered (the last ones are kept then).
    pub(super) fn learn_named<'n>(
        &mut self,
        raft_nodes: &'n [RaftNodeSnapshot],
    ) -> Option<BTreeSet<&'n str>> {
        let named = named_voters(raft_nodes);
        if named.is_empty() {
            return None;
        }
        // Copied only when they changed: the same voters poll after poll.
        let kept = named.iter().take(MAX_MEMBERS).copied();
        if !kept.clone().eq(self.named.iter().map(String::as_str)) {
            self.named = kept.map(str::to_owned).collect();
        }
        Some(named)
    }

    /// The nodes named in the last poll in which a node answered.
    pub(super) fn named(&self) -> impl Iterator<Item = &String> {
        self.named.iter()
    }

    /// The counted voter set remembered from the last poll in which a node answered.
    pub(super) fn counted(&self) -> &BTreeSet<String> {
        &self.counted
    }

    /// When the remembered counted voter set was read: the Unix time of the last poll in
    /// which a node answered; `None` while no set is remembered.
    pub(super) fn counted_read_at(&self) -> Option<f64> {
        self.counted_at.filter(|_| !self.counted.is_empty())
    }

    /// Remembers this poll's counted voter set, if a node answered, read in the poll of Unix
    /// time `at`.
    pub(super) fn count(
        &mut self,
        raft_nodes: &[RaftNodeSnapshot],
        sets: &VoterSetComparison,
        at: f64,
    ) {
        if raft_nodes.iter().any(|node| node.status.is_ok()) {
            self.counted = sets.counted.voters.clone();
            self.counted_at = Some(at);
        }
    }

    /// Remembers whether the REST API of the voter at `host`, asked as a member, answered.
    pub(super) fn note_rest(&mut self, host: Host, answered: bool) {
        if answered {
            self.without_rest.remove(&host);
        } else {
            self.without_rest.insert(host, Instant::now());
        }
    }

    /// The hosts of the named voters that no member in `known_hosts` has and that are not
    /// resting (their REST API did not answer within the last `ttl`).
    pub(super) fn unlisted_hosts(
        &self,
        known_hosts: &BTreeSet<Host>,
        ttl: Duration,
    ) -> BTreeSet<Host> {
        let resting = |host: &Host| {
            self.without_rest
                .get(host)
                .is_some_and(|since| since.elapsed() < ttl)
        };
        self.named
            .iter()
            .filter_map(|node| NodeAddress::parse(node).ok())
            .map(|node| node.host)
            .filter(|host| !known_hosts.contains(host) && !resting(host))
            .collect()
    }

    /// What each voter of the counted set is, from this poll's answers and what is
    /// remembered (the hosts without REST, the last poll's witnesses), with members' Raft
    /// nodes on `member_raft_port`; remembers the witnesses for the next poll.
    pub(super) fn judge_kinds<'a>(
        &mut self,
        raft_nodes: &[RaftNodeSnapshot],
        members: impl Iterator<Item = &'a MemberSnapshot>,
        member_raft_port: u16,
    ) -> VoterKinds {
        let mut member_count = 0;
        let member_hosts: BTreeSet<Host> = members
            .inspect(|_| member_count += 1)
            .flat_map(|m| snapshot::member_hosts(&m.member))
            .collect();
        let voting_hosts: BTreeSet<Host> = self
            .counted
            .iter()
            .filter_map(|voter| Host::of_node(voter).ok())
            .collect();
        self.without_rest
            .retain(|host, _| voting_hosts.contains(host));
        let kinds = VoterKinds::classify(VoterFacts {
            voters: &self.counted,
            raft_nodes,
            member_hosts: &member_hosts,
            rest_silent_hosts: &self.without_rest,
            known_witnesses: &self.witnesses,
            member_raft_port,
            members: member_count,
        });
        self.witnesses = kinds.witnesses().map(str::to_owned).collect();
        kinds
    }
}

/// Every voter the answering nodes name: each node itself and its partners.
fn named_voters(raft_nodes: &[RaftNodeSnapshot]) -> BTreeSet<&str> {
    let mut voters = BTreeSet::new();
    for status in raft_nodes
        .iter()
        .filter_map(|node| node.status.as_ref().ok())
    {
        if !status.self_node.is_empty() {
            voters.insert(status.self_node.as_str());
        }
        voters.extend(status.partners.iter().map(|partner| partner.node.as_str()));
    }
    voters
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::parse_admin_text;
    use crate::snapshot::Failure;

    fn node(answer: Option<&str>) -> RaftNodeSnapshot {
        let status = match answer {
            Some(text) => Ok(parse_admin_text(text).unwrap()),
            None => Err(Failure {
                kind: crate::error_kind::ErrorKind::Timeout,
                message: "timed out".into(),
            }),
        };
        RaftNodeSnapshot {
            node: "127.0.0.1:2222".into(),
            status,
            round_trip: None,
        }
    }

    /// The voters named are every answering node and its partners, remembered while no node
    /// answers, and replaced when they change.
    #[test]
    fn the_voters_named_follow_the_answers() {
        let path = format!(
            "{}/tests/fixtures/patroni-3.3.8/syncobj_admin-status-m0.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut memory = VoterMemory::default();
        let answered = [node(Some(&text)), node(None)];
        let status = answered[0].status.as_ref().unwrap();
        let mut expected: Vec<&str> = status.partners.iter().map(|p| p.node.as_str()).collect();
        expected.push(&status.self_node);
        expected.sort_unstable();
        let named = memory.learn_named(&answered).unwrap();
        assert_eq!(named.into_iter().collect::<Vec<_>>(), expected);
        assert!(memory
            .named()
            .map(String::as_str)
            .eq(expected.iter().copied()));
        // no node answers: none named, the last ones kept
        assert!(memory.learn_named(&[node(None)]).is_none());
        assert!(memory
            .named()
            .map(String::as_str)
            .eq(expected.iter().copied()));
        // a node renamed: the memory follows
        let renamed = text.replace(&status.self_node, "127.0.0.99:2222");
        memory.learn_named(&[node(Some(&renamed))]).unwrap();
        assert!(memory.named().any(|n| n == "127.0.0.99:2222"));
        assert!(!memory.named().any(|n| *n == status.self_node));
    }

    /// The voter set judged while no node answers is the last one read, with that poll's time.
    #[test]
    fn the_counted_voters_keep_the_time_of_the_last_poll_a_node_answered() {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/patroni-3.3.8/syncobj_admin-status-m0.txt",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut memory = VoterMemory::default();
        assert_eq!(memory.counted_read_at(), None);
        let answered = [node(Some(&text))];
        memory.count(&answered, &VoterSetComparison::compare(&answered), 10.0);
        assert!(!memory.counted().is_empty());
        assert_eq!(memory.counted_read_at(), Some(10.0));
        let silent = [node(None)];
        memory.count(&silent, &VoterSetComparison::compare(&silent), 15.0);
        assert_eq!(
            memory.counted_read_at(),
            Some(10.0),
            "nobody answered: the old set"
        );
        memory.count(&answered, &VoterSetComparison::compare(&answered), 20.0);
        assert_eq!(memory.counted_read_at(), Some(20.0));
    }
}
