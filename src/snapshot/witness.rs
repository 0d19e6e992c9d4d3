//! What each Raft voter is to the cluster: the node of a Patroni member, or a witness.
//!
//! Why: Charmed PostgreSQL's stereo mode runs two database units and a `postgresql-watcher`
//! unit that runs only a Raft node (Patroni's `patroni_raft_controller`: no PostgreSQL, no
//! REST API), listed in every member's `partner_addrs`. It votes, so it counts towards the
//! quorum and its margin like any voter, but it holds no data and can never be promoted. An
//! exporter that takes it for an ordinary node sees one voter more than members for good and
//! blames a removed unit (`PatroniRaftZombieVoter`).
//!
//! A voter is a **witness** when no member (listed in `/cluster` or remembered after it left)
//! has its host, the Patroni REST API on that host does not answer, and its Raft node answers
//! its status, now or in an earlier poll in which it was already a witness. A **removed member
//! that still votes** is told apart by what it lacks: its Patroni is gone, and with it the Raft
//! node that ran inside it, so it does not answer its status and was never seen as a witness;
//! it stays `unknown` and still counts as a voter without a member. A voter on a member's host
//! is that member's, except a second voter there on another port than the members' Raft port
//! that answers: a witness placed beside a member.
//!
//! What it cannot tell: a witness that was already down when the exporter started (it never
//! answered, so it is `unknown` until it answers once), and any witness when the Raft password
//! is not given (the voters' REST APIs are then not probed: their hosts are not trusted).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::model::RaftNodeSnapshot;
use crate::address::{Host, NodeAddress};

/// What a Raft voter is: the `kind` label of `patroni_raft_node_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum VoterKind {
    /// The Raft node of a Patroni member: a member listed or remembered has its host.
    Member,
    /// A voter that runs only Raft (stereo mode's watcher): it votes but holds no data.
    Witness,
    /// Neither: no member has its host and it is not known to be a witness (a removed
    /// member's voter that no longer answers, or one not judged yet).
    Unknown,
}

impl VoterKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VoterKind::Member => "member",
            VoterKind::Witness => "witness",
            VoterKind::Unknown => "unknown",
        }
    }
}

/// Every voter of the poll with its kind, sorted by the voter's id (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VoterKinds {
    pub voters: Vec<(String, VoterKind)>,
}

/// What the classification reads from one poll and the poller's memory.
#[derive(Debug, Clone, Copy)]
pub struct VoterFacts<'a> {
    /// The voters counted by the quorum verdict (ids, `host:port`).
    pub voters: &'a BTreeSet<String>,
    /// This poll's Raft answers.
    pub raft_nodes: &'a [RaftNodeSnapshot],
    /// Hosts of the members listed or remembered (their `host` and their `api_url`'s host).
    pub member_hosts: &'a BTreeSet<Host>,
    /// Hosts of voters without a member whose Patroni REST API was asked and did not answer,
    /// with when it last did not (the poller's memory as it is kept: only the hosts count here).
    pub rest_silent_hosts: &'a BTreeMap<Host, Instant>,
    /// The voters that were witnesses in the last poll.
    pub known_witnesses: &'a BTreeSet<String>,
    /// The Raft port of the members' nodes (`--raft.port`).
    pub member_raft_port: u16,
    /// How many members are listed or remembered: each runs a voter of its own.
    pub members: usize,
}

impl VoterKinds {
    pub fn classify(facts: VoterFacts<'_>) -> VoterKinds {
        let answered: BTreeSet<&str> = facts
            .raft_nodes
            .iter()
            .filter(|node| node.status.is_ok())
            .map(RaftNodeSnapshot::identity)
            .collect();
        let mut voters = facts
            .voters
            .iter()
            .map(|voter| {
                let address = NodeAddress::parse(voter).ok();
                let host = address.as_ref().map(|address| &address.host);
                let speaks =
                    answered.contains(voter.as_str()) || facts.known_witnesses.contains(voter);
                let kind = if host.is_some_and(|host| facts.member_hosts.contains(host)) {
                    let on_member_port = |node: &Option<NodeAddress>| {
                        node.as_ref().map(|node| node.port) == Some(facts.member_raft_port)
                    };
                    let beside_member = !on_member_port(&address)
                        && facts.voters.iter().any(|other| {
                            let other = NodeAddress::parse(other).ok();
                            other.as_ref().map(|other| &other.host) == host
                                && on_member_port(&other)
                        });
                    if beside_member && speaks {
                        VoterKind::Witness
                    } else {
                        VoterKind::Member
                    }
                } else if speaks
                    && host.is_some_and(|host| facts.rest_silent_hosts.contains_key(host))
                {
                    VoterKind::Witness
                } else {
                    VoterKind::Unknown
                };
                (voter.clone(), kind)
            })
            .collect::<Vec<_>>();
        // Every member runs a voter, so there are at most voters - members witnesses. More
        // candidates than that means the members' voters are among them (REST and Raft on
        // different addresses, hostnames against IPs): nothing can be told apart then.
        let candidates = voters
            .iter()
            .filter(|(_, kind)| *kind == VoterKind::Witness);
        if candidates.count() > facts.voters.len().saturating_sub(facts.members) {
            for (_, kind) in &mut voters {
                if *kind == VoterKind::Witness {
                    *kind = VoterKind::Unknown;
                }
            }
        }
        VoterKinds { voters }
    }

    /// The kind of the voter `node` (its id); `None` for a node that is not a voter.
    pub fn kind_of(&self, node: &str) -> Option<VoterKind> {
        self.voters
            .iter()
            .find(|(voter, _)| voter == node)
            .map(|(_, kind)| *kind)
    }

    /// The voters that are witnesses.
    pub fn witnesses(&self) -> impl Iterator<Item = &str> {
        self.voters
            .iter()
            .filter(|(_, kind)| *kind == VoterKind::Witness)
            .map(|(voter, _)| voter.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::parse_admin_text;
    use crate::snapshot::Failure;

    /// The captured healthy 3.3.8 status of member 0, re-addressed: the node `id` with
    /// partners `partners`.
    fn answering(id: &str) -> RaftNodeSnapshot {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/patroni-3.3.8/syncobj_admin-status-m0.txt",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
        .replace("127.0.0.11:2222", id);
        RaftNodeSnapshot {
            node: id.to_owned(),
            round_trip: None,
            status: Ok(parse_admin_text(&text).unwrap()),
        }
    }

    fn refused(id: &str) -> RaftNodeSnapshot {
        RaftNodeSnapshot {
            node: id.to_owned(),
            round_trip: None,
            status: Err(Failure {
                kind: crate::error_kind::ErrorKind::Connect,
                message: "refused".into(),
            }),
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn hosts(items: &[&str]) -> BTreeSet<Host> {
        items.iter().map(|s| Host::parse(s).unwrap()).collect()
    }

    struct Case {
        voters: BTreeSet<String>,
        nodes: Vec<RaftNodeSnapshot>,
        member_hosts: BTreeSet<Host>,
        silent: BTreeSet<Host>,
        known: BTreeSet<String>,
        members: usize,
    }

    impl Case {
        /// Stereo mode: members on .11 and .12, the watcher on .20:2224.
        fn stereo() -> Case {
            Case {
                voters: set(&["127.0.0.11:2222", "127.0.0.12:2222", "127.0.0.20:2224"]),
                nodes: vec![
                    answering("127.0.0.11:2222"),
                    answering("127.0.0.12:2222"),
                    answering("127.0.0.20:2224"),
                ],
                member_hosts: hosts(&["127.0.0.11", "127.0.0.12"]),
                silent: hosts(&["127.0.0.20"]),
                known: BTreeSet::new(),
                members: 2,
            }
        }

        fn classify(&self) -> VoterKinds {
            let silent_since = self
                .silent
                .iter()
                .map(|host| (host.clone(), Instant::now()))
                .collect();
            VoterKinds::classify(VoterFacts {
                voters: &self.voters,
                raft_nodes: &self.nodes,
                member_hosts: &self.member_hosts,
                rest_silent_hosts: &silent_since,
                known_witnesses: &self.known,
                member_raft_port: 2222,
                members: self.members,
            })
        }
    }

    #[test]
    fn the_watcher_of_stereo_mode_is_a_witness() {
        let kinds = Case::stereo().classify();
        assert_eq!(kinds.kind_of("127.0.0.11:2222"), Some(VoterKind::Member));
        assert_eq!(kinds.kind_of("127.0.0.12:2222"), Some(VoterKind::Member));
        assert_eq!(kinds.kind_of("127.0.0.20:2224"), Some(VoterKind::Witness));
        assert_eq!(kinds.witnesses().collect::<Vec<_>>(), ["127.0.0.20:2224"]);
        assert_eq!(kinds.kind_of("127.0.0.99:2222"), None);
    }

    #[test]
    fn a_witness_that_stops_answering_stays_a_witness() {
        let mut case = Case::stereo();
        case.nodes[2] = refused("127.0.0.20:2224");
        // Never seen answering: not a witness (an exporter started while it was down).
        assert_eq!(
            case.classify().kind_of("127.0.0.20:2224"),
            Some(VoterKind::Unknown)
        );
        // A witness in the last poll: still one while it is down.
        case.known = set(&["127.0.0.20:2224"]);
        assert_eq!(
            case.classify().kind_of("127.0.0.20:2224"),
            Some(VoterKind::Witness)
        );
    }

    #[test]
    fn a_removed_member_that_still_votes_is_no_witness() {
        // Three members, one removed without `syncobj_admin -remove`: no member has its host
        // any more, its REST API and its Raft node (inside its Patroni) are gone.
        let mut case = Case::stereo();
        case.voters = set(&["127.0.0.11:2222", "127.0.0.12:2222", "127.0.0.13:2222"]);
        case.nodes = vec![
            answering("127.0.0.11:2222"),
            answering("127.0.0.12:2222"),
            refused("127.0.0.13:2222"),
        ];
        case.silent = hosts(&["127.0.0.13"]);
        let kinds = case.classify();
        assert_eq!(kinds.kind_of("127.0.0.13:2222"), Some(VoterKind::Unknown));
        assert_eq!(kinds.witnesses().count(), 0);
    }

    #[test]
    fn a_raft_node_whose_host_answers_rest_is_no_witness() {
        // A Patroni answers on the host (another cluster's member, or one not listed yet):
        // its REST API was not silent, so the voter is not a witness.
        let mut case = Case::stereo();
        case.silent.clear();
        assert_eq!(
            case.classify().kind_of("127.0.0.20:2224"),
            Some(VoterKind::Unknown)
        );
    }

    #[test]
    fn no_witness_when_the_members_voters_cannot_be_told_apart() {
        // Three members whose REST API is on other addresses than their Raft nodes: no voter
        // is on a member's host and no REST answers on the voters' hosts. Each member runs
        // one of the three voters, so none can be a witness.
        let mut case = Case::stereo();
        case.member_hosts = hosts(&["127.0.0.31", "127.0.0.32", "127.0.0.33"]);
        case.silent = hosts(&["127.0.0.11", "127.0.0.12", "127.0.0.20"]);
        case.members = 3;
        let kinds = case.classify();
        assert_eq!(kinds.witnesses().count(), 0);
        assert!(kinds
            .voters
            .iter()
            .all(|(_, kind)| *kind == VoterKind::Unknown));
        // Two members and three such voters: still ambiguous (which one is the witness?).
        case.members = 2;
        assert_eq!(case.classify().witnesses().count(), 0);
    }

    #[test]
    fn a_member_that_appears_on_the_host_ends_the_witness() {
        let mut case = Case::stereo();
        case.known = set(&["127.0.0.20:2224"]);
        case.member_hosts.insert(Host::parse("127.0.0.20").unwrap());
        assert_eq!(
            case.classify().kind_of("127.0.0.20:2224"),
            Some(VoterKind::Member)
        );
    }

    #[test]
    fn a_witness_beside_a_member_on_another_port() {
        let mut case = Case::stereo();
        case.voters = set(&["127.0.0.11:2222", "127.0.0.12:2222", "127.0.0.12:2224"]);
        case.nodes[2] = answering("127.0.0.12:2224");
        case.silent.clear();
        let kinds = case.classify();
        assert_eq!(kinds.kind_of("127.0.0.12:2222"), Some(VoterKind::Member));
        assert_eq!(kinds.kind_of("127.0.0.12:2224"), Some(VoterKind::Witness));
    }
}
