//! The etcd part of a snapshot: what one reading of a cluster's etcd proves about its quorum,
//! and which members' own views of the DCS are stale against the keys read from etcd.
//!
//! Why a verdict of its own, with the same three values as Raft's: etcd's own `has_leader`
//! says whether one member knows a leader; it does not say whether **this Patroni cluster**
//! can keep and take its leader key, and an exporter that reaches one member of three must
//! not page for a healthy etcd. So, as on Raft, every poll ends in one of:
//!
//! * **confirmed**, by positive evidence:
//!   * `leader`: the leader answered its own `Status` and says it leads. etcd's leaders run
//!     with CheckQuorum: a leader that stops hearing from a majority steps down within an
//!     election timeout (1 s by default), so a leader's own word is a quorum's;
//!   * `majority`: a majority of the voting members answer and name the same leader;
//!   * `health`: `Status` was refused to the exporter's user (etcd 3.6.0–3.6.9 answer it to
//!     root only) and a majority of the voting members answer `GET /health` true.
//! * **lost**, by positive evidence against it:
//!   * `no_leader`: at least one voting member answers its `Status`, and every one that does
//!     knows no leader (`leader` absent, `errors` holding "etcdserver: no leader");
//!   * `refused`: no member names a leader and a majority of the voting members refuse
//!     connections (nothing listens on their client port: the process is down), for a member
//!     set etcd listed once (a wrong `--etcd.endpoint` port refuses as a stopped member does).
//! * **not visible** (`not_visible`): neither; typically the members time out, or `/health`
//!   is all there is and it says false (an alarm makes it false as well as a missing leader).
//!
//! The margin is how many more voting members can fail before the majority is lost: the
//! members seen with the agreed leader minus the majority (confirmed), the members alive
//! minus the majority (lost, so negative), unknown otherwise.
//!
//! Stale views (zalando/patroni #3359): Patroni's members read etcd through a watch cache,
//! so a member whose watch stopped keeps a view that etcd no longer holds. A member's own
//! `GET /cluster` is compared with Patroni's keys read from etcd in the same poll, and named
//! stale only when the keys were read through a leader (linearizable) and were the same in
//! the poll before: a leader change that lands between the two readings of one poll is a
//! race, not a stale member.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{DcsView, MemberSnapshot};
use super::quorum::QuorumVerdict;
use crate::error_kind::ErrorKind;
use crate::etcd::{
    ClusterFacts, EndpointReading, EndpointStatus, EtcdReading, MemberList, PatroniKeys,
};

/// Which evidence decided the etcd verdict: the `evidence` label of
/// `patroni_etcd_quorum_evidence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EtcdEvidence {
    Leader,
    Majority,
    Health,
    NoLeader,
    Refused,
    #[default]
    NotVisible,
}

impl EtcdEvidence {
    /// Every evidence, in label order of the verdicts (confirmed, lost, not visible).
    pub const ALL: [EtcdEvidence; 6] = [
        EtcdEvidence::Leader,
        EtcdEvidence::Majority,
        EtcdEvidence::Health,
        EtcdEvidence::NoLeader,
        EtcdEvidence::Refused,
        EtcdEvidence::NotVisible,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EtcdEvidence::Leader => "leader",
            EtcdEvidence::Majority => "majority",
            EtcdEvidence::Health => "health",
            EtcdEvidence::NoLeader => "no_leader",
            EtcdEvidence::Refused => "refused",
            EtcdEvidence::NotVisible => "not_visible",
        }
    }

    /// The verdict this evidence gives.
    pub fn verdict(self) -> QuorumVerdict {
        match self {
            EtcdEvidence::Leader | EtcdEvidence::Majority | EtcdEvidence::Health => {
                QuorumVerdict::Confirmed
            }
            EtcdEvidence::NoLeader | EtcdEvidence::Refused => QuorumVerdict::Lost,
            EtcdEvidence::NotVisible => QuorumVerdict::NotVisible,
        }
    }
}

/// The quorum verdict of an etcd cluster, with the counts it rests on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdQuorum {
    pub verdict: QuorumVerdict,
    pub evidence: EtcdEvidence,
    /// Voting members: those of the member list, else as many as were last known, else the
    /// endpoints asked.
    pub voters: usize,
    /// Learners of the member list (they do not vote).
    pub learners: usize,
    /// Voting members whose `Status` (or, where it is refused, `/health`) answered.
    pub answering: usize,
    /// The leader all answering members agree on (its name, else its id in hex); `None`
    /// while there is none, or no agreement.
    pub leader: Option<String>,
    /// Distinct leaders named by the answering members (more than 1: they disagree).
    pub leaders_named: usize,
    /// How many more voting members can fail before the majority is lost.
    pub margin: Option<i64>,
}

impl EtcdQuorum {
    /// The evidence in words, for `status`: "2 of 3 voting members answer, 2 name leader e1
    /// (the leader says it leads)".
    pub fn describe(&self) -> String {
        let how = match self.evidence {
            EtcdEvidence::Leader => "the leader says it leads",
            EtcdEvidence::Majority => "a majority name one leader",
            EtcdEvidence::Health => "Status refused to this user; a majority answer /health true",
            EtcdEvidence::NoLeader => "every member that answers knows no leader",
            EtcdEvidence::Refused => "a majority refuse connections",
            EtcdEvidence::NotVisible => "neither a leader nor its absence is proven from here",
        };
        let leader = match &self.leader {
            Some(leader) => format!(", leader {leader}"),
            None if self.leaders_named > 1 => format!(", {} leaders named", self.leaders_named),
            None => String::new(),
        };
        format!(
            "{} of {} voting members answer{leader} ({how})",
            self.answering, self.voters
        )
    }
}

/// A member's own view of the DCS against Patroni's keys read from etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewAgainstKeys {
    pub member: String,
    /// True when its view names another leader or another member set than the keys do.
    pub stale: bool,
}

/// What the leader key and the member keys say: what a member's view is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyContent {
    pub leader: Option<String>,
    pub members: BTreeSet<String>,
}

impl KeyContent {
    pub fn of(keys: &PatroniKeys) -> KeyContent {
        KeyContent {
            leader: keys.leader.as_ref().map(|leader| leader.name.clone()),
            members: keys.members.iter().map(|m| m.name.clone()).collect(),
        }
    }

    /// Whether `view` (a member's `/cluster`) says the same: the one leader and the members.
    fn agrees_with(&self, view: &DcsView) -> bool {
        let leader_agrees = match (&self.leader, &view.leaders[..]) {
            (None, []) => true,
            (Some(leader), [one]) => leader == one,
            _ => false,
        };
        let members: BTreeSet<&str> = view.members().collect();
        leader_agrees && members == self.members.iter().map(String::as_str).collect()
    }
}

/// One poll of a cluster's etcd: every endpoint's answer, the cluster's facts, and what is
/// judged from them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdSnapshot {
    /// Each endpoint asked, one per member (an endpoint that answered as a member already
    /// answered through another URL is left out), in the order asked.
    pub endpoints: Vec<EndpointReading>,
    /// The member name of each of `endpoints` (from its status and the member list; its id
    /// in hex when the list does not name it); `None` for an endpoint that did not answer.
    pub endpoint_members: Vec<Option<String>>,
    /// The member list, alarms, Patroni's keys and the leader key's lease, as one endpoint
    /// gave them; `None` when no endpoint answered.
    pub facts: Option<ClusterFacts>,
    pub quorum: EtcdQuorum,
    /// Each member (listed or remembered) whose own view was read, against the keys; empty
    /// when the keys were not read through a leader, or changed since the last poll.
    pub views: Vec<ViewAgainstKeys>,
}

impl EtcdSnapshot {
    /// Judges one `reading`. `known_voters` is the voting members last known (0: none yet),
    /// for a poll whose member list could not be read; `previous` is what the keys said in
    /// the last poll, and `members` are the members whose own views are compared.
    pub fn judge<'a>(
        reading: EtcdReading,
        known_voters: usize,
        previous: Option<&KeyContent>,
        members: impl Iterator<Item = &'a MemberSnapshot>,
    ) -> EtcdSnapshot {
        let EtcdReading { endpoints, facts } = reading;
        let endpoints = one_per_member(endpoints);
        let quorum = assess(&endpoints, facts.as_ref(), known_voters);
        let views = match facts.as_ref().and_then(comparable_keys) {
            Some(content) if previous == Some(&content) => compare_views(&content, members),
            _ => Vec::new(),
        };
        let mut snapshot = EtcdSnapshot {
            endpoints,
            endpoint_members: Vec::new(),
            facts,
            quorum,
            views,
        };
        snapshot.endpoint_members = snapshot
            .endpoints
            .iter()
            .map(|reading| {
                let status = reading.status.as_ref().ok()?;
                Some(snapshot.member_name(status.value.header.member_id))
            })
            .collect();
        snapshot
    }

    /// What the keys said in this poll, for the next poll's comparison; `None` when they
    /// were not read through a leader.
    pub fn key_content(&self) -> Option<KeyContent> {
        self.facts.as_ref().and_then(comparable_keys)
    }

    /// The voting members of the member list, when it was read.
    pub fn listed_voters(&self) -> Option<usize> {
        let members = self.facts.as_ref()?.members.as_ref().ok()?;
        Some(members.members.iter().filter(|m| !m.is_learner).count())
    }

    /// The member name of a member id, from the member list; its id in hex without one.
    pub fn member_name(&self, id: u64) -> String {
        self.facts
            .as_ref()
            .and_then(|facts| facts.members.as_ref().ok())
            .and_then(|list| list.members.iter().find(|m| m.id == id))
            .map(|m| m.name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| format!("{id:x}"))
    }

    /// The first client URL of each member etcd lists, as listed (unparsed); none when the
    /// list was not read.
    pub fn listed_client_url_texts(&self) -> impl Iterator<Item = &str> + Clone {
        self.facts
            .as_ref()
            .and_then(|facts| facts.members.as_ref().ok())
            .into_iter()
            .flat_map(|list| &list.members)
            .filter_map(|member| member.client_urls.first().map(String::as_str))
    }

    /// The client URLs of the members etcd lists (their first, http or https), for the next
    /// poll to ask.
    pub fn listed_endpoints(&self) -> Vec<url::Url> {
        match self.facts.as_ref().map(|facts| &facts.members) {
            Some(Ok(list)) => crate::etcd::listed_client_urls(list),
            _ => Vec::new(),
        }
    }
}

/// The keys' content, when they were read through a leader and hold a member key: a prefix
/// with no member key at all is a wrong namespace or scope (or a cluster not bootstrapped),
/// not a view every member disagrees with.
fn comparable_keys(facts: &ClusterFacts) -> Option<KeyContent> {
    if !facts.linearizable {
        return None;
    }
    let keys = facts.keys.as_ref()?.as_ref().ok()?;
    (!keys.members.is_empty()).then(|| KeyContent::of(keys))
}

/// Each member whose own view was read this poll, against `content`.
fn compare_views<'a>(
    content: &KeyContent,
    members: impl Iterator<Item = &'a MemberSnapshot>,
) -> Vec<ViewAgainstKeys> {
    members
        .filter_map(|m| {
            let view = m.dcs_view.as_ref()?.as_ref().ok()?;
            Some(ViewAgainstKeys {
                member: m.member.name.clone(),
                stale: !content.agrees_with(&view.view),
            })
        })
        .collect()
}

/// The readings with one per member: a reading whose status names a member that an earlier
/// reading already answered for (the configured URL and the listed one of the same member)
/// is left out.
fn one_per_member(endpoints: Vec<EndpointReading>) -> Vec<EndpointReading> {
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    endpoints
        .into_iter()
        .filter(|reading| match &reading.status {
            Ok(status) => seen.insert(status.value.header.member_id),
            Err(_) => true,
        })
        .collect()
}

/// What one reading's voting members said, counted: what the verdict is judged from.
struct Counts {
    /// Voting members (see [`EtcdQuorum::voters`]), and whether etcd listed them once.
    voters: usize,
    voter_set_known: bool,
    learners: usize,
    /// Voting members whose `Status` answered, and those judged from `/health` (healthy).
    statuses: usize,
    healths: usize,
    healthy: usize,
    /// Voting members that refused the connection.
    refused: usize,
    /// Answering members per leader they name.
    named: BTreeMap<u64, usize>,
    /// The leader's own `Status` says it leads.
    leader_speaks: bool,
}

impl Counts {
    fn of(endpoints: &[EndpointReading], list: Option<&MemberList>, known_voters: usize) -> Counts {
        let learner_ids: BTreeSet<u64> = list
            .map(|list| {
                list.members
                    .iter()
                    .filter(|m| m.is_learner)
                    .map(|m| m.id)
                    .collect()
            })
            .unwrap_or_default();
        let voting: Vec<&EndpointReading> = endpoints
            .iter()
            .filter(|reading| match &reading.status {
                Ok(status) => {
                    !status.value.is_learner
                        && !learner_ids.contains(&status.value.header.member_id)
                }
                Err(_) => true,
            })
            .collect();
        let voters = match list {
            Some(list) => list.members.iter().filter(|m| !m.is_learner).count(),
            None if known_voters > 0 => known_voters,
            None => voting.len(),
        };
        let statuses: Vec<&EndpointStatus> = voting
            .iter()
            .filter_map(|reading| Some(&reading.status.as_ref().ok()?.value))
            .collect();
        let healths: Vec<bool> = voting
            .iter()
            .filter(|reading| reading.status.is_err())
            .filter_map(|reading| reading.health.as_ref()?.as_ref().ok())
            .map(|health| health.healthy)
            .collect();
        let mut named: BTreeMap<u64, usize> = BTreeMap::new();
        for leader in statuses.iter().filter_map(|status| status.leader) {
            *named.entry(leader).or_default() += 1;
        }
        let agreed = named
            .iter()
            .max_by_key(|(_, count)| **count)
            .map(|(id, _)| *id);
        Counts {
            voters,
            // Refusals are evidence only against a member set etcd itself listed, in this poll
            // or an earlier one: a wrong port refuses as a stopped member does.
            voter_set_known: list.is_some() || known_voters > 0,
            learners: learner_ids.len(),
            statuses: statuses.len(),
            healths: healths.len(),
            healthy: healths.iter().filter(|healthy| **healthy).count(),
            refused: voting
                .iter()
                .filter(|r| {
                    r.status
                        .as_ref()
                        .is_err_and(|e| e.kind() == ErrorKind::Refused)
                })
                .count(),
            leader_speaks: statuses
                .iter()
                .any(|status| status.is_leader() && Some(status.header.member_id) == agreed),
            named,
        }
    }

    /// The leader most answering members name, and how many name it.
    fn agreed(&self) -> Option<(u64, usize)> {
        self.named
            .iter()
            .max_by_key(|(_, count)| **count)
            .map(|(leader, count)| (*leader, *count))
    }

    fn evidence(&self) -> EtcdEvidence {
        let majority = self.voters / 2 + 1;
        let with_leader = self.agreed().map_or(0, |(_, count)| count);
        if self.leader_speaks {
            EtcdEvidence::Leader
        } else if with_leader >= majority {
            EtcdEvidence::Majority
        } else if self.statuses == 0 && self.healthy >= majority {
            EtcdEvidence::Health
        } else if self.statuses > 0 && self.named.is_empty() {
            EtcdEvidence::NoLeader
        } else if self.voter_set_known
            && self.named.is_empty()
            && self.healthy == 0
            && self.refused >= majority
        {
            EtcdEvidence::Refused
        } else {
            EtcdEvidence::NotVisible
        }
    }

    /// The members seen healthy minus the majority: those naming the agreed leader (or
    /// healthy by `/health`) while confirmed, at least a majority (fewer seen on the leader's
    /// word alone: unknown, as the others may be fine); those answering at all once lost.
    fn margin(&self, evidence: EtcdEvidence) -> Option<i64> {
        let majority = self.voters / 2 + 1;
        let seen = match evidence.verdict() {
            QuorumVerdict::Confirmed if evidence == EtcdEvidence::Health => self.healthy,
            QuorumVerdict::Confirmed => self.agreed().map_or(0, |(_, count)| count),
            QuorumVerdict::Lost => {
                return Some((self.statuses + self.healths) as i64 - majority as i64)
            }
            QuorumVerdict::NotVisible => return None,
        };
        (seen >= majority).then(|| seen as i64 - majority as i64)
    }
}

/// The verdict of one reading ([module docs](self)).
fn assess(
    endpoints: &[EndpointReading],
    facts: Option<&ClusterFacts>,
    known_voters: usize,
) -> EtcdQuorum {
    let list = facts.and_then(|facts| facts.members.as_ref().ok());
    let counts = Counts::of(endpoints, list, known_voters);
    let evidence = counts.evidence();
    let verdict = evidence.verdict();
    let leader = match (verdict, counts.agreed()) {
        (QuorumVerdict::Confirmed, Some((leader, _)))
            if counts.named.len() == 1 || counts.leader_speaks =>
        {
            Some(leader)
        }
        _ => None,
    };
    let name = |id: u64| {
        list.and_then(|list| list.members.iter().find(|m| m.id == id))
            .map(|m| m.name.clone())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| format!("{id:x}"))
    };
    EtcdQuorum {
        verdict,
        evidence,
        voters: counts.voters,
        learners: counts.learners,
        answering: counts.statuses + counts.healths,
        leader: leader.map(name),
        leaders_named: counts.named.len(),
        margin: counts.margin(evidence),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use url::Url;

    use super::*;
    use crate::etcd::{
        parse_health, parse_member_list, parse_patroni_keys, parse_range, parse_status, EtcdError,
        Timed, Versions,
    };
    use crate::patroni::Member;
    use crate::snapshot::{MemberDcsView, Probes};

    fn url(n: u8) -> Url {
        Url::parse(&format!("http://127.0.0.1{n}:2379")).unwrap()
    }

    /// An endpoint that answered its `Status` with the fixture at `path`.
    fn answered(n: u8, path: &str) -> EndpointReading {
        EndpointReading {
            endpoint: url(n),
            status: Ok(Timed {
                value: parse_status(&crate::fixture(path)).unwrap(),
                round_trip: Duration::from_millis(2),
            }),
            health: None,
            versions: Ok(Versions {
                server: "3.4.23".into(),
                cluster: "3.4.0".into(),
            }),
            versions_asked: true,
        }
    }

    /// An endpoint whose `Status` timed out.
    fn silent(n: u8) -> EndpointReading {
        EndpointReading {
            endpoint: url(n),
            status: Err(EtcdError::Timeout(Duration::from_secs(2))),
            health: None,
            versions: Err(EtcdError::Timeout(Duration::from_secs(2))),
            versions_asked: true,
        }
    }

    /// An endpoint whose `Status` was refused to the user (etcd 3.6.0–3.6.9), and whose
    /// `/health` answered the fixture at `health`.
    fn forbidden(n: u8, health: &str) -> EndpointReading {
        EndpointReading {
            endpoint: url(n),
            status: Err(EtcdError::Forbidden("etcdserver: permission denied".into())),
            health: Some(parse_health(&crate::fixture(health))),
            versions: Ok(Versions {
                server: "3.6.5".into(),
                cluster: "3.6.0".into(),
            }),
            versions_asked: true,
        }
    }

    /// The cluster's facts from a version's fixtures, read through a leader or not.
    fn facts(version: &str, linearizable: bool) -> ClusterFacts {
        let dir = format!("etcd-{version}");
        let range = parse_range(&crate::fixture(&format!("{dir}/range-patroni.json"))).unwrap();
        ClusterFacts {
            source: url(1),
            prefix: Some(fixture_prefix(&range)),
            linearizable,
            members: parse_member_list(&crate::fixture(&format!("{dir}/member-list.json"))),
            alarms: None,
            keys: Some(Ok(parse_patroni_keys(&fixture_prefix(&range), &range))),
            leader_lease: None,
        }
    }

    /// The prefix of the fixture's keys: everything up to the `leader` key's name.
    fn fixture_prefix(range: &crate::etcd::RangeAnswer) -> String {
        let key = range
            .kvs
            .iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .find(|key| key.ends_with("/leader"))
            .expect("the fixture has a leader key");
        key.trim_end_matches("leader").to_owned()
    }

    fn judge(endpoints: Vec<EndpointReading>, facts: Option<ClusterFacts>) -> EtcdSnapshot {
        EtcdSnapshot::judge(
            EtcdReading { endpoints, facts },
            0,
            None,
            std::iter::empty(),
        )
    }

    #[test]
    fn a_healthy_cluster_on_every_version_is_confirmed_by_its_leader() {
        for version in ["3.4", "3.5.1", "3.5", "3.6", "3.7"] {
            let dir = format!("etcd-{version}");
            let endpoints = (1..=3)
                .map(|n| answered(n, &format!("{dir}/status-e{n}.json")))
                .collect();
            let snapshot = judge(endpoints, Some(facts(version, true)));
            let quorum = &snapshot.quorum;
            assert_eq!(quorum.verdict, QuorumVerdict::Confirmed, "{version}");
            assert_eq!(quorum.evidence, EtcdEvidence::Leader, "{version}");
            assert_eq!((quorum.voters, quorum.answering), (3, 3), "{version}");
            assert_eq!(quorum.margin, Some(1), "{version}");
            assert_eq!(quorum.leaders_named, 1, "{version}");
            assert!(quorum.leader.is_some(), "{version}");
            assert!(snapshot.endpoint_members.iter().all(Option::is_some));
        }
    }

    #[test]
    fn one_member_down_leaves_no_margin() {
        // The real answers of 3.4.23 and 3.5.1, e3 stopped.
        for dir in ["etcd-3.4", "etcd-3.5.1"] {
            let endpoints = vec![
                answered(1, &format!("{dir}/one-down-status-e1.json")),
                answered(2, &format!("{dir}/one-down-status-e2.json")),
                silent(3),
            ];
            let quorum = judge(endpoints, None).quorum;
            assert_eq!(quorum.verdict, QuorumVerdict::Confirmed, "{dir}");
            assert_eq!(quorum.margin, Some(0), "{dir}");
            assert_eq!(quorum.answering, 2, "{dir}");
        }
    }

    #[test]
    fn the_leaders_word_alone_confirms_with_no_margin_known() {
        // Only the leader reachable: its word is a quorum's (CheckQuorum), but how many more
        // members can fail is not seen from here.
        let endpoints = vec![answered(1, "etcd-3.4/status-e1.json"), silent(2), silent(3)];
        let quorum = judge(endpoints, Some(facts("3.4", true))).quorum;
        assert_eq!(quorum.evidence, EtcdEvidence::Leader);
        assert_eq!(quorum.margin, None);
        assert_eq!(quorum.leader.as_deref(), Some("e1"));
    }

    #[test]
    fn a_survivor_without_a_leader_is_a_lost_quorum() {
        // The real 3.4.23 and 3.5.1 answers of the one member left running of three.
        for dir in ["etcd-3.4", "etcd-3.5.1"] {
            let endpoints = vec![
                answered(1, &format!("{dir}/no-quorum-status-e1.json")),
                silent(2),
                silent(3),
            ];
            let quorum = judge(endpoints, None).quorum;
            assert_eq!(quorum.evidence, EtcdEvidence::NoLeader, "{dir}");
            assert_eq!(quorum.verdict, QuorumVerdict::Lost, "{dir}");
            assert_eq!(quorum.margin, Some(-1), "{dir}");
            assert_eq!(quorum.leader, None, "{dir}");
        }
    }

    /// Three endpoints nothing listens on: real refused connections.
    async fn refused_reading() -> EtcdReading {
        let mut endpoints = Vec::new();
        for _ in 0..3 {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            endpoints
                .push(Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap());
        }
        let client = crate::etcd::EtcdClient::new(
            crate::etcd::ClientSettings::default(),
            Duration::from_secs(2),
        )
        .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        crate::etcd::read_cluster(
            &client,
            &endpoints,
            0,
            &[],
            std::future::ready(None),
            deadline,
        )
        .await
    }

    #[tokio::test]
    async fn a_majority_refusing_connections_is_a_lost_quorum_once_the_members_are_known() {
        let reading = refused_reading().await;
        assert!(reading.endpoints.iter().all(|e| e
            .status
            .as_ref()
            .is_err_and(|error| error.kind() == ErrorKind::Refused)));
        // Known from an earlier poll's member list: lost.
        let known = EtcdSnapshot::judge(reading.clone(), 3, None, std::iter::empty());
        assert_eq!(known.quorum.evidence, EtcdEvidence::Refused);
        assert_eq!(known.quorum.margin, Some(-2));
        // Never listed: a wrong port looks the same, so it is not evidence.
        let unknown = EtcdSnapshot::judge(reading, 0, None, std::iter::empty());
        assert_eq!(unknown.quorum.verdict, QuorumVerdict::NotVisible);
    }

    #[test]
    fn silence_is_not_evidence() {
        let quorum = judge(vec![silent(1), silent(2), silent(3)], None).quorum;
        assert_eq!(quorum.verdict, QuorumVerdict::NotVisible);
        assert_eq!(quorum.margin, None);
        // One member of three answering with a leader it does not run: not a majority, and
        // not the leader's own word.
        let endpoints = vec![answered(2, "etcd-3.4/status-e2.json"), silent(1), silent(3)];
        let quorum = judge(endpoints, None).quorum;
        assert_eq!(quorum.verdict, QuorumVerdict::NotVisible);
    }

    #[test]
    fn status_refused_to_the_user_falls_back_to_health_and_never_claims_a_loss() {
        let healthy = vec![
            forbidden(1, "etcd-3.6/health.json"),
            forbidden(2, "etcd-3.6/health.json"),
            silent(3),
        ];
        let quorum = judge(healthy, None).quorum;
        assert_eq!(quorum.evidence, EtcdEvidence::Health);
        assert_eq!(quorum.margin, Some(0));
        // /health false says "no leader" or "an alarm": not enough to page.
        let unhealthy = (1..=3)
            .map(|n| forbidden(n, "etcd-3.6/health-no-leader.json"))
            .collect();
        let quorum = judge(unhealthy, None).quorum;
        assert_eq!(quorum.verdict, QuorumVerdict::NotVisible);
        assert_eq!(quorum.answering, 3);
    }

    /// A member whose view names a leader: `leader` and members `names`.
    fn member_with_view(name: &str, leader: &str, names: &[&str]) -> MemberSnapshot {
        let mut members: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        members.sort();
        MemberSnapshot {
            member: Member {
                name: name.to_owned(),
                ..Member::default()
            },
            own_view: Err(crate::snapshot::Failure {
                kind: ErrorKind::Timeout,
                message: String::new(),
            }),
            dcs_view: Some(Ok(MemberDcsView {
                view: DcsView {
                    leaders: vec![leader.to_owned()],
                    timelines: members.iter().map(|m| (m.clone(), Some(1))).collect(),
                },
                config: None,
            })),
            left_dcs_at: None,
            clock: None,
            last_clock: None,
            round_trip: None,
            probes: Probes::default(),
            read_at: crate::snapshot::MemberReadTimes::default(),
        }
    }

    #[test]
    fn a_prefix_without_member_keys_judges_no_view() {
        // A wrong --etcd.namespace reads an empty prefix: no member would agree with it, and
        // none is stale for it.
        let member = member_with_view("a", "a", &["a"]);
        let mut empty = facts("3.4", true);
        empty.keys = Some(Ok(PatroniKeys::default()));
        let reading = || EtcdReading {
            endpoints: vec![answered(1, "etcd-3.4/status-e1.json")],
            facts: Some(empty.clone()),
        };
        let previous = KeyContent::default();
        let judged = EtcdSnapshot::judge(reading(), 3, Some(&previous), std::iter::once(&member));
        assert!(judged.views.is_empty());
        assert_eq!(judged.key_content(), None);
    }

    #[test]
    fn a_view_that_disagrees_with_stable_keys_is_stale() {
        let content = KeyContent::of(facts("3.4", true).keys.unwrap().as_ref().unwrap());
        let leader = content.leader.clone().expect("the fixture has a leader");
        let names: Vec<&str> = content.members.iter().map(String::as_str).collect();
        let fresh = member_with_view("a", &leader, &names);
        let stale = member_with_view("b", "someone-else", &names);
        let reading = || EtcdReading {
            endpoints: vec![answered(1, "etcd-3.4/status-e1.json")],
            facts: Some(facts("3.4", true)),
        };
        let members = [fresh.clone(), stale.clone()];
        let judged = EtcdSnapshot::judge(reading(), 3, Some(&content), members.iter());
        let verdicts: Vec<(&str, bool)> = judged
            .views
            .iter()
            .map(|v| (v.member.as_str(), v.stale))
            .collect();
        assert_eq!(verdicts, [("a", false), ("b", true)]);
        // Keys that changed since the last poll (or were not read then): no judgement.
        let first = EtcdSnapshot::judge(reading(), 3, None, members.iter());
        assert!(first.views.is_empty());
        // Keys read without a leader (a member's own copy): no judgement either.
        let serializable = EtcdReading {
            endpoints: vec![answered(1, "etcd-3.4/status-e1.json")],
            facts: Some(facts("3.4", false)),
        };
        let judged = EtcdSnapshot::judge(serializable, 3, Some(&content), members.iter());
        assert!(judged.views.is_empty());
        assert_eq!(judged.key_content(), None);
    }
}
