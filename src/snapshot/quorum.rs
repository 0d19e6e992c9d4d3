//! The quorum verdict: what one poll's Raft answers prove about the cluster's quorum.
//!
//! Why a verdict with three values: "the exporter could not see enough" is not "the cluster
//! lost its quorum". An exporter given one member's URL, a firewall between the exporter and
//! two members, or a wrong password must never page a human for a healthy cluster; and a
//! real loss must page even when the dead members' hosts no longer answer at all. So every
//! poll ends in one of:
//!
//! * **confirmed**, by one of three kinds of positive evidence:
//!   * `leader`: a node in state leader reports `has_quorum`: it holds connections to a
//!     majority of voters, itself included, and leads them;
//!   * `majority`: a majority of the voters answer and report `has_quorum`;
//!   * `follower`: a follower reports `has_quorum` and names a leader it is connected to.
//!     That is one node's word: it proves that a majority of voter processes were alive and
//!     connected to it at the moment of the query (pysyncobj drops a connection that stays
//!     silent longer than its connection timeout), and that it heard from that leader within
//!     the election timeout. It does not prove that the leader still holds its own quorum.
//!     It is enough not to page; `evidence="follower"` tells it apart.
//! * **lost**, by positive evidence against it, and only for a voter set the exporter knows
//!   (some node answered once, in this poll or an earlier one):
//!   * `no_quorum`: at least one voter answers, and every voter that answers reports no
//!     quorum (the survivors of a loss), whatever the others do;
//!   * `refused`: no voter answers with a quorum and a majority of the voters refuse
//!     connections (nothing listens on their Raft port: the process is down).
//! * **not visible** (`not_visible`): neither; typically the nodes time out, or refuse the
//!   password, and those that answer report a quorum without naming a connected leader.
//!
//! A voter set learned from no answer at all (a wrong `--raft.port`, an exporter started
//! during an outage) is never evidence of loss: refusals then give `not_visible`. One
//! exporter is one vantage point: an exporter that shares a partition with a member that
//! lost the others sees `no_quorum` although the majority side is fine; run a second
//! exporter elsewhere and alert on the best verdict of the two (docs/metrics.md).

use std::collections::{BTreeMap, BTreeSet};

use super::model::RaftNodeSnapshot;
use super::voters::VoterSetComparison;
use crate::error_kind::ErrorKind;
use crate::raft::{RaftState, RaftStatus};

/// The three answers to "does the Raft cluster have a quorum?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuorumVerdict {
    Confirmed,
    Lost,
    #[default]
    NotVisible,
}

impl QuorumVerdict {
    /// The value of `patroni_raft_cluster_quorum`: 1, 0, -1. Ordered so that the best
    /// verdict of several exporters is their maximum.
    pub fn gauge_value(self) -> f64 {
        match self {
            QuorumVerdict::Confirmed => 1.0,
            QuorumVerdict::Lost => 0.0,
            QuorumVerdict::NotVisible => -1.0,
        }
    }

    /// `confirmed`, `lost` or `not visible`, for humans.
    pub fn as_str(self) -> &'static str {
        match self {
            QuorumVerdict::Confirmed => "confirmed",
            QuorumVerdict::Lost => "lost",
            QuorumVerdict::NotVisible => "not visible",
        }
    }
}

/// Which evidence decided the verdict: the `evidence` label of `patroni_raft_quorum_evidence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuorumEvidence {
    Leader,
    Majority,
    Follower,
    NoQuorum,
    Refused,
    #[default]
    NotVisible,
}

impl QuorumEvidence {
    /// Every value, in the order of the label's one-hot series.
    pub const ALL: [QuorumEvidence; 6] = [
        QuorumEvidence::Leader,
        QuorumEvidence::Majority,
        QuorumEvidence::Follower,
        QuorumEvidence::NoQuorum,
        QuorumEvidence::Refused,
        QuorumEvidence::NotVisible,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QuorumEvidence::Leader => "leader",
            QuorumEvidence::Majority => "majority",
            QuorumEvidence::Follower => "follower",
            QuorumEvidence::NoQuorum => "no_quorum",
            QuorumEvidence::Refused => "refused",
            QuorumEvidence::NotVisible => "not_visible",
        }
    }

    pub fn verdict(self) -> QuorumVerdict {
        match self {
            QuorumEvidence::Leader | QuorumEvidence::Majority | QuorumEvidence::Follower => {
                QuorumVerdict::Confirmed
            }
            QuorumEvidence::NoQuorum | QuorumEvidence::Refused => QuorumVerdict::Lost,
            QuorumEvidence::NotVisible => QuorumVerdict::NotVisible,
        }
    }
}

/// Why a voter gave no status: the `reason` label of `patroni_raft_voters_unanswered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unanswered {
    /// Connection refused: nothing listens on the voter's Raft port.
    Refused,
    /// No answer in time: a dead host, a partition, a hung process.
    Timeout,
    /// The node closed the connection on our first frame: the password is wrong.
    Auth,
    /// Anything else: another connect error, a protocol or decode error, a failing
    /// `--raft.command`, or a voter that was not queried.
    Error,
}

impl Unanswered {
    pub const ALL: [Unanswered; 4] = [
        Unanswered::Refused,
        Unanswered::Timeout,
        Unanswered::Auth,
        Unanswered::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Unanswered::Refused => "refused",
            Unanswered::Timeout => "timeout",
            Unanswered::Auth => "auth",
            Unanswered::Error => "error",
        }
    }

    /// The reason of a failed query, from its error kind.
    pub fn from_kind(kind: ErrorKind) -> Unanswered {
        match kind {
            ErrorKind::Refused => Unanswered::Refused,
            ErrorKind::Timeout => Unanswered::Timeout,
            ErrorKind::Auth => Unanswered::Auth,
            _ => Unanswered::Error,
        }
    }
}

/// What the exporter can say about the Raft quorum from one poll, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuorumAssessment {
    /// Voters in the configuration: the voter set's size, at least partners + 1 of any
    /// answering node.
    pub voters: u64,
    /// Voters whose status was read in this poll.
    pub answering: u64,
    /// Answering voters that report `has_quorum`.
    pub with_quorum: u64,
    /// Voters without a status, by reason.
    pub unanswered: BTreeMap<Unanswered, u64>,
    /// Answering nodes in state leader.
    pub leaders_claiming: u64,
    /// Whether the voter set came from an answer (this poll's or an earlier one's) rather
    /// than from the list of addresses queried.
    pub voters_known: bool,
    /// Distinct voter sets (a node and its partners) among the answering nodes: more than
    /// one when the nodes disagree on who votes. The verdict then counts the majority of
    /// the set most answering nodes hold, or of the union of the sets when no set is held by
    /// most ([`counted_voter_set`](super::voters::counted_voter_set)); a node's word counts only when the voters it is
    /// connected to are a majority of that set.
    pub voter_sets: u64,
    /// Whether the voters counted are the set a majority of the answering nodes hold (true
    /// also when they all agree), rather than the union of disagreeing sets.
    pub voter_set_agreed: bool,
    pub evidence: QuorumEvidence,
    /// How many more voters can fail before the quorum is lost: the voters seen healthy (a
    /// leader with has_quorum and the voters it is connected to, or the answering voters
    /// with has_quorum and a connected leader) minus the majority. 1 on a healthy 3-voter
    /// cluster, 0 with one voter down, negative once lost (-1: one live voter short of a
    /// majority). `None` when
    /// the quorum is not visible, or confirmed on a word that does not show who is healthy
    /// (an exporter that sees only a follower).
    pub margin: Option<i64>,
}

impl QuorumAssessment {
    /// Judges one poll's answers. `remembered_voters` is the voter set of the last poll in
    /// which a node answered (empty when none ever did); it is used when no node answers.
    pub fn assess(
        nodes: &[RaftNodeSnapshot],
        remembered_voters: &BTreeSet<String>,
    ) -> QuorumAssessment {
        Self::assess_with(
            nodes,
            remembered_voters,
            &VoterSetComparison::compare(nodes),
        )
    }

    /// [`QuorumAssessment::assess`] with the voter sets of `nodes` already compared (the
    /// poller compares them once a poll, for this, for `patroni_raft_voter_sets` and for
    /// the voters it remembers).
    pub fn assess_with(
        nodes: &[RaftNodeSnapshot],
        remembered_voters: &BTreeSet<String>,
        sets: &VoterSetComparison,
    ) -> QuorumAssessment {
        let answered: Vec<Answered> = nodes
            .iter()
            .filter_map(|node| Some((node, node.status.as_ref().ok()?)))
            .collect();
        let named = &sets.counted;
        let (voter_set, voters_known) = if !named.voters.is_empty() {
            (named.voters.clone(), true)
        } else if !remembered_voters.is_empty() {
            (remembered_voters.clone(), true)
        } else {
            (nodes.iter().map(|node| node.node.clone()).collect(), false)
        };
        let voters = (voter_set.len() as u64).max(reported_size(&answered, sets, &voter_set));
        let unanswered = unanswered_by_reason(nodes, &answered, &voter_set);
        let voter_statuses: Vec<&RaftStatus> = answered
            .iter()
            .filter(|(node, _)| voter_set.contains(node.identity()))
            .map(|(_, status)| *status)
            .collect();
        let answering = voter_statuses.len() as u64;
        let with_quorum = voter_statuses.iter().filter(|s| s.has_quorum).count() as u64;
        let counted = Counted {
            answered: &answered,
            voter_set: &voter_set,
            voters,
        };
        let evidence = if counted.leader_with_majority() {
            QuorumEvidence::Leader
        } else if voters > 0 && with_quorum * 2 > voters {
            QuorumEvidence::Majority
        } else if counted.follower_with_majority() {
            QuorumEvidence::Follower
        } else if voters_known && with_quorum == 0 && answering > 0 {
            QuorumEvidence::NoQuorum
        } else if voters_known && with_quorum == 0 && unanswered[&Unanswered::Refused] * 2 > voters
        {
            QuorumEvidence::Refused
        } else {
            QuorumEvidence::NotVisible
        };
        let majority = voters / 2 + 1;
        let healthy = counted.healthy();
        let margin = match evidence.verdict() {
            QuorumVerdict::Confirmed if healthy >= majority => {
                Some(healthy as i64 - majority as i64)
            }
            // Lost: how many voters are missing for a majority of the live (answering) ones.
            // (at most -1: voters that answer but cannot reach each other are no quorum).
            QuorumVerdict::Lost => Some((answering as i64 - majority as i64).min(-1)),
            _ => None,
        };
        QuorumAssessment {
            voters,
            answering,
            with_quorum,
            unanswered,
            leaders_claiming: answered
                .iter()
                .filter(|(_, status)| status.state == RaftState::Leader)
                .count() as u64,
            voters_known,
            voter_sets: sets.distinct as u64,
            voter_set_agreed: named.agreed,
            evidence,
            margin,
        }
    }

    pub fn verdict(&self) -> QuorumVerdict {
        self.evidence.verdict()
    }

    /// Whether the quorum is confirmed.
    pub fn confirmed(&self) -> bool {
        self.verdict() == QuorumVerdict::Confirmed
    }

    /// Voters without a status for `reason`.
    pub fn unanswered(&self, reason: Unanswered) -> u64 {
        self.unanswered.get(&reason).copied().unwrap_or(0)
    }

    /// Whether every voter answered, so that "no node leads" is a fact and not a blind spot.
    pub fn all_voters_answer(&self) -> bool {
        self.voters > 0 && self.answering >= self.voters
    }

    /// The evidence in words, for `status` and logs: "2 of 3 voters answer; both report no
    /// quorum; 1 refuses connections".
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "{} of {} voters answer, {} report has_quorum",
            self.answering, self.voters, self.with_quorum
        )];
        for reason in Unanswered::ALL {
            let count = self.unanswered(reason);
            if count > 0 {
                let (one, several) = match reason {
                    Unanswered::Refused => ("refuses connections", "refuse connections"),
                    Unanswered::Timeout => ("times out", "time out"),
                    Unanswered::Auth => ("refuses the password", "refuse the password"),
                    Unanswered::Error => ("fails otherwise", "fail otherwise"),
                };
                parts.push(format!(
                    "{count} {}",
                    if count == 1 { one } else { several }
                ));
            }
        }
        let basis = match self.evidence {
            QuorumEvidence::Leader => "a leader reports has_quorum",
            QuorumEvidence::Majority => "a majority of voters report has_quorum",
            QuorumEvidence::Follower => {
                "only a follower's word: it reports has_quorum and is connected to its leader"
            }
            QuorumEvidence::NoQuorum => "every voter that answers reports no quorum",
            QuorumEvidence::Refused => "a majority of voters refuse connections",
            QuorumEvidence::NotVisible if !self.voters_known => {
                "no voter has answered yet: the voter set is unknown"
            }
            QuorumEvidence::NotVisible => "too few voters answer to decide",
        };
        if self.voter_sets > 1 {
            parts.push(if self.voter_set_agreed {
                format!(
                    "the voters disagree on the voter set ({} distinct sets): counted against the {} voters most of them name",
                    self.voter_sets, self.voters
                )
            } else {
                format!(
                    "the voters disagree on the voter set ({} distinct sets): counted against all {} voters they name",
                    self.voter_sets, self.voters
                )
            });
        }
        format!("{} ({basis})", parts.join("; "))
    }
}

/// A node that answered, with its status.
type Answered<'a> = (&'a RaftNodeSnapshot, &'a RaftStatus);

/// The partner counts of the nodes that hold the counted set (or a part of it): a node whose
/// list names more voters than the agreed set is the one that disagrees.
fn reported_size(
    answered: &[Answered],
    sets: &VoterSetComparison,
    voter_set: &BTreeSet<String>,
) -> u64 {
    answered
        .iter()
        .filter(|(node, _)| {
            sets.nodes
                .iter()
                .find(|own| own.node == node.node)
                .is_some_and(|own| own.voters.is_subset(voter_set))
        })
        .map(|(_, status)| status.partner_nodes_count.max(0) as u64 + 1)
        .max()
        .unwrap_or(0)
}

/// The voters that gave no status, by reason. A voter is known by its own id (`self`) once it
/// answers, else by the address queried; Patroni names both alike (`host:port` of
/// raft.self_addr).
fn unanswered_by_reason(
    nodes: &[RaftNodeSnapshot],
    answered: &[Answered],
    voter_set: &BTreeSet<String>,
) -> BTreeMap<Unanswered, u64> {
    let answering_ids: BTreeSet<&str> = answered
        .iter()
        .map(|(node, _)| node.identity())
        .filter(|id| voter_set.contains(*id))
        .collect();
    let failures: BTreeMap<&str, Unanswered> = nodes
        .iter()
        .filter_map(|node| {
            let failure = node.status.as_ref().err()?;
            Some((node.node.as_str(), Unanswered::from_kind(failure.kind)))
        })
        .collect();
    let mut unanswered: BTreeMap<Unanswered, u64> =
        Unanswered::ALL.iter().map(|reason| (*reason, 0)).collect();
    for voter in voter_set {
        if answering_ids.contains(voter.as_str()) {
            continue;
        }
        let reason = failures
            .get(voter.as_str())
            .copied()
            .unwrap_or(Unanswered::Error);
        *unanswered.entry(reason).or_default() += 1;
    }
    unanswered
}

/// The answers counted against the voter set.
struct Counted<'a> {
    answered: &'a [Answered<'a>],
    voter_set: &'a BTreeSet<String>,
    voters: u64,
}

impl Counted<'_> {
    /// The voters in the set a node is connected to.
    fn connected(&self, status: &RaftStatus) -> u64 {
        status
            .partners
            .iter()
            .filter(|p| p.connected() && self.voter_set.contains(&p.node))
            .count() as u64
    }

    /// A node's has_quorum is counted against its own partner list; when the lists differ,
    /// it is evidence for the cluster only if the voters it is connected to are a majority of
    /// the counted set (a node started alone with no partners "has a quorum" of one).
    fn majority_of_all(&self, node: &RaftNodeSnapshot, status: &RaftStatus) -> bool {
        let own = u64::from(self.voter_set.contains(node.identity()));
        (self.connected(status) + own) * 2 > self.voters
    }

    /// A leader reports `has_quorum` and is connected to a majority of the counted voters.
    fn leader_with_majority(&self) -> bool {
        self.answered.iter().any(|(node, status)| {
            status.state == RaftState::Leader
                && status.has_quorum
                && self.majority_of_all(node, status)
        })
    }

    /// A follower reports `has_quorum`, names a connected leader and is connected to a
    /// majority of the counted voters.
    fn follower_with_majority(&self) -> bool {
        self.answered.iter().any(|(node, status)| {
            follower_with_connected_leader(status) && self.majority_of_all(node, status)
        })
    }

    /// The voters seen healthy: the answering voters with has_quorum that lead or follow a
    /// connected leader, or a leader with has_quorum and the voters it is connected to,
    /// whichever is more.
    fn healthy(&self) -> u64 {
        let by_answers = self
            .answered
            .iter()
            .filter(|(node, status)| {
                self.voter_set.contains(node.identity())
                    && status.has_quorum
                    && (status.state == RaftState::Leader || follower_with_connected_leader(status))
            })
            .count() as u64;
        let by_leader = self
            .answered
            .iter()
            .filter(|(_, status)| status.state == RaftState::Leader && status.has_quorum)
            .map(|(_, status)| 1 + self.connected(status))
            .max()
            .unwrap_or(0);
        by_answers.max(by_leader)
    }
}

/// A follower with `has_quorum` whose named leader is one of its connected partners.
fn follower_with_connected_leader(status: &RaftStatus) -> bool {
    status.state == RaftState::Follower
        && status.has_quorum
        && status.leader.as_deref().is_some_and(|leader| {
            status
                .partners
                .iter()
                .any(|partner| partner.node == leader && partner.connected())
        })
}

#[cfg(test)]
mod tests {
    //! The truth table of docs/metrics.md, row by row, on a 3-voter cluster
    //! (a = 127.0.0.11:2222, b = .12, c = .13).
    use super::*;
    use crate::raft::parse_admin_text;
    use crate::snapshot::{CountedVoters, Failure};

    const A: &str = "127.0.0.11:2222";
    const B: &str = "127.0.0.12:2222";
    const C: &str = "127.0.0.13:2222";

    /// A node's status as `syncobj_admin -status` prints it: `state` 0 follower, 1 candidate,
    /// 2 leader; `connected` are the partners it has a connection to.
    fn answer(
        addr: &str,
        state: i64,
        leader: Option<&str>,
        connected: &[&str],
    ) -> RaftNodeSnapshot {
        let partners: Vec<&str> = [A, B, C].into_iter().filter(|n| *n != addr).collect();
        answer_naming(addr, state, leader, &partners, connected)
    }

    /// A node whose partner list is `partners` (its own configuration), connected to
    /// `connected`; it has a quorum when those are a majority of its own list.
    fn answer_naming(
        addr: &str,
        state: i64,
        leader: Option<&str>,
        partners: &[&str],
        connected: &[&str],
    ) -> RaftNodeSnapshot {
        let has_quorum = (connected.len() + 1) * 2 > partners.len() + 1;
        let mut text = format!(
            "commit_idx: 41\nenabled_code_version: 0\nhas_quorum: {}\nlast_applied: 41\nleader: {}\nleader_commit_idx: 41\nlog_len: 41\n",
            if has_quorum { "True" } else { "False" },
            leader.unwrap_or("None"),
        );
        for partner in partners {
            let status = if connected.contains(partner) { 2 } else { 0 };
            text.push_str(&format!("partner_node_status_server_{partner}: {status}\n"));
        }
        text.push_str(&format!(
            "partner_nodes_count: {}\nraft_term: 1\nreadonly_nodes_count: 0\nrevision: deprecated\nself: {addr}\nself_code_version: 0\nstate: {state}\nuptime: 18\nversion: 0.3.12\n",
            partners.len()
        ));
        RaftNodeSnapshot {
            node: addr.to_owned(),
            round_trip: None,
            status: Ok(parse_admin_text(&text).unwrap()),
        }
    }

    fn failed(addr: &str, kind: ErrorKind) -> RaftNodeSnapshot {
        RaftNodeSnapshot {
            node: addr.to_owned(),
            round_trip: None,
            status: Err(Failure {
                kind,
                message: kind.to_string(),
            }),
        }
    }

    fn known() -> BTreeSet<String> {
        [A, B, C].into_iter().map(str::to_owned).collect()
    }

    fn judge(nodes: &[RaftNodeSnapshot]) -> QuorumAssessment {
        QuorumAssessment::assess(nodes, &BTreeSet::new())
    }

    /// A, B and C all answering, `leader` (state 2) leading, everyone connected to everyone.
    fn healthy(leader: &str) -> QuorumAssessment {
        let node = |addr: &str| {
            let state = if addr == leader { 2 } else { 0 };
            let others: Vec<&str> = [A, B, C].into_iter().filter(|n| *n != addr).collect();
            answer(addr, state, Some(leader), &others)
        };
        judge(&[node(A), node(B), node(C)])
    }

    #[test]
    fn healthy_seen_whole_is_confirmed_by_the_leader() {
        let q = healthy(B);
        assert_eq!(q.evidence, QuorumEvidence::Leader);
        assert_eq!((q.voters, q.answering, q.with_quorum), (3, 3, 3));
        assert!(q.all_voters_answer());
    }

    #[test]
    fn one_follower_seen_alone_is_confirmed_by_its_word() {
        // The quick start pointed at a follower whose two partners the exporter cannot reach.
        let q = judge(&[
            answer(A, 0, Some(B), &[B, C]),
            failed(B, ErrorKind::Timeout),
            failed(C, ErrorKind::Timeout),
        ]);
        assert_eq!(q.evidence, QuorumEvidence::Follower);
        assert_eq!(q.verdict(), QuorumVerdict::Confirmed);
        assert_eq!(q.unanswered(Unanswered::Timeout), 2);
    }

    #[test]
    fn a_follower_not_connected_to_its_leader_confirms_nothing() {
        // has_quorum through the other follower, but the leader it names is gone: an
        // election is due, nothing is proven either way.
        let q = judge(&[
            answer(A, 0, Some(B), &[C]),
            failed(B, ErrorKind::Timeout),
            failed(C, ErrorKind::Timeout),
        ]);
        assert_eq!(q.evidence, QuorumEvidence::NotVisible);
    }

    #[test]
    fn majority_with_quorum_confirms_without_a_leader() {
        let q = judge(&[
            answer(A, 1, None, &[C]),
            answer(B, 0, None, &[]),
            answer(C, 1, None, &[A]),
        ]);
        assert_eq!(q.evidence, QuorumEvidence::Majority);
        assert_eq!(q.leaders_claiming, 0);
    }

    #[test]
    fn survivors_without_quorum_are_a_loss_whatever_the_others_do() {
        for other in [
            ErrorKind::Refused,
            ErrorKind::Timeout,
            ErrorKind::Auth,
            ErrorKind::Connect,
        ] {
            let q = judge(&[
                failed(A, other),
                answer(B, 2, Some(B), &[]),
                failed(C, other),
            ]);
            assert_eq!(q.evidence, QuorumEvidence::NoQuorum, "{other}");
            assert_eq!(q.verdict(), QuorumVerdict::Lost);
        }
    }

    #[test]
    fn a_majority_refusing_is_a_loss_once_the_voters_are_known() {
        let nodes = [
            failed(A, ErrorKind::Refused),
            failed(B, ErrorKind::Refused),
            failed(C, ErrorKind::Timeout),
        ];
        // Never answered: a wrong --raft.port looks exactly like this.
        assert_eq!(judge(&nodes).evidence, QuorumEvidence::NotVisible);
        let q = QuorumAssessment::assess(&nodes, &known());
        assert_eq!(q.evidence, QuorumEvidence::Refused);
        assert_eq!(q.unanswered(Unanswered::Refused), 2);
        // One refusal of three is not a majority.
        let nodes = [
            failed(A, ErrorKind::Refused),
            failed(B, ErrorKind::Timeout),
            failed(C, ErrorKind::Timeout),
        ];
        assert_eq!(
            QuorumAssessment::assess(&nodes, &known()).evidence,
            QuorumEvidence::NotVisible
        );
    }

    /// Asserts that the assessment's description (what `status` prints) says `text`.
    fn assert_describes(q: &QuorumAssessment, text: &str) {
        let description = q.describe();
        assert!(description.contains(text), "{description}");
    }

    #[test]
    fn a_wrong_password_is_never_a_loss() {
        let nodes = [
            failed(A, ErrorKind::Auth),
            failed(B, ErrorKind::Auth),
            failed(C, ErrorKind::Auth),
        ];
        let q = QuorumAssessment::assess(&nodes, &known());
        assert_eq!(q.verdict(), QuorumVerdict::NotVisible);
        assert_eq!(q.unanswered(Unanswered::Auth), 3);
        assert_describes(&q, "3 refuse the password");
    }

    #[test]
    fn an_isolated_node_seen_with_the_others_is_flagged_not_fatal() {
        let q = judge(&[
            answer(A, 0, Some(B), &[]),
            answer(B, 2, Some(B), &[C]),
            answer(C, 0, Some(B), &[B]),
        ]);
        assert_eq!(q.evidence, QuorumEvidence::Leader);
        assert_eq!(q.with_quorum, 2);
    }

    #[test]
    fn unqueried_voters_count_as_unanswered() {
        // Only A was queried; it names B and C.
        let q = judge(&[answer(A, 0, Some(B), &[])]);
        assert_eq!(q.voters, 3);
        assert_eq!(q.unanswered(Unanswered::Error), 2);
        assert_eq!(q.evidence, QuorumEvidence::NoQuorum);
    }

    #[test]
    fn gauge_values_order_verdicts_for_max() {
        let values = [
            QuorumVerdict::NotVisible.gauge_value(),
            QuorumVerdict::Lost.gauge_value(),
            QuorumVerdict::Confirmed.gauge_value(),
        ];
        assert_eq!(values, [-1.0, 0.0, 1.0]);
        for evidence in QuorumEvidence::ALL {
            assert!(!evidence.as_str().is_empty());
        }
    }
    /// A node restarted with a partner list of its own: `partners` are the ones it names,
    /// all connected.
    fn answer_with_partners(addr: &str, state: i64, partners: &[&str]) -> RaftNodeSnapshot {
        let leader = if state == 2 { addr } else { partners[0] };
        answer_naming(addr, state, Some(leader), partners, partners)
    }

    #[test]
    fn a_node_alone_with_its_own_partner_list_confirms_nothing() {
        // C restarted with no partners: a one-voter cluster of its own, leader with "quorum".
        // A, which names B and C, has lost both. The union is {A, B, C}: C leads 1 of 3.
        let q = judge(&[
            answer(A, 0, None, &[]),
            failed(B, ErrorKind::Refused),
            answer_with_partners(C, 2, &[]),
        ]);
        assert_eq!(q.voter_sets, 2);
        assert_ne!(q.verdict(), QuorumVerdict::Confirmed, "{q:?}");
        assert_describes(&q, "disagree on the voter set");
    }

    #[test]
    fn a_stale_partner_list_that_still_reaches_a_majority_is_no_false_loss() {
        // C names only A (canonical/postgresql-operator #1910); A leads B and C: confirmed.
        let q = judge(&[
            answer(A, 2, Some(A), &[B, C]),
            answer(B, 0, Some(A), &[A]),
            answer_with_partners(C, 0, &[A]),
        ]);
        assert_eq!(q.voter_sets, 2);
        assert_eq!(q.voters, 3);
        assert_eq!(q.verdict(), QuorumVerdict::Confirmed);
        assert_eq!(q.evidence, QuorumEvidence::Leader);
    }

    #[test]
    fn a_phantom_partner_named_by_one_node_does_not_raise_the_majority() {
        // The partition lab's 6b: C was started naming A and 127.0.0.99, a node that does not
        // exist; A and B do not answer it, so C has no quorum. A leads B: the cluster of the
        // two nodes that agree (and C) still commits. The union would count 4 voters.
        const PHANTOM: &str = "127.0.0.99:2222";
        let q = judge(&[
            answer(A, 2, Some(A), &[B]),
            answer(B, 0, Some(A), &[A]),
            answer_naming(C, 1, None, &[A, PHANTOM], &[]),
        ]);
        assert_eq!(q.voter_sets, 2);
        assert!(q.voter_set_agreed);
        assert_eq!(q.voters, 3, "{q:?}");
        assert_eq!(q.evidence, QuorumEvidence::Leader);
        assert_eq!(q.margin, Some(0));
        assert_describes(&q, "counted against the 3 voters most of them name");
        // No set held by most (two nodes, two sets): the union, as before.
        let split = judge(&[
            answer(A, 2, Some(A), &[B]),
            answer_naming(C, 1, None, &[A, PHANTOM], &[]),
        ]);
        assert!(!split.voter_set_agreed);
        assert_eq!(split.voters, 4);
        assert_ne!(split.verdict(), QuorumVerdict::Confirmed);
        assert_eq!(
            VoterSetComparison::compare(&[]).counted,
            CountedVoters::default(),
            "nothing answered, nothing counted"
        );
    }

    #[test]
    fn the_margin_counts_the_voters_that_can_still_fail() {
        assert_eq!(healthy(A).margin, Some(1));
        // One voter down: the leader still leads a majority, with nothing to spare.
        let one_down = judge(&[
            answer(A, 2, Some(A), &[B]),
            answer(B, 0, Some(A), &[A]),
            failed(C, ErrorKind::Refused),
        ]);
        assert_eq!(one_down.margin, Some(0));
        // Only the leader answers: its connections still count the healthy voters.
        let leader_only = judge(&[
            answer(A, 2, Some(A), &[B, C]),
            failed(B, ErrorKind::Timeout),
            failed(C, ErrorKind::Timeout),
        ]);
        assert_eq!(leader_only.margin, Some(1));
        // Two down: lost, one voter short.
        let lost = QuorumAssessment::assess(
            &[
                answer(A, 0, None, &[]),
                failed(B, ErrorKind::Refused),
                failed(C, ErrorKind::Refused),
            ],
            &known(),
        );
        assert_eq!(lost.verdict(), QuorumVerdict::Lost);
        assert_eq!(lost.margin, Some(-1));
        // Nothing visible: no margin either.
        assert_eq!(
            judge(&[failed(A, ErrorKind::Timeout), failed(B, ErrorKind::Timeout)]).margin,
            None
        );
    }
}
