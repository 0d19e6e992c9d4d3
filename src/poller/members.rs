//! Member memory: the members a recent poll saw, still asked after they leave `/cluster`.
//!
//! Why: the `/cluster` the exporter reads is one Raft replica's word. When the leader is cut
//! off from the other members, the majority lets its key expire (after `ttl`) and promotes
//! another member, but the old primary stays primary until its own HA loop demotes it
//! (~10 s later in the partition lab). An exporter that only asks the members `/cluster`
//! lists stops asking the old primary exactly when it matters: two PostgreSQL servers accept
//! writes and nobody sees it. So a member that leaves the view is remembered and still asked
//! its own `/patroni` and `/cluster`:
//! * for the cluster's `ttl` after it left (long enough for its own loop to demote it, or
//!   for a restarted member to come back), and
//! * beyond that for as long as it says it is primary (or standby leader): a primary that
//!   never demotes is the worst case, not one to forget;
//! * and for as long as its own `/cluster` still lists it: its Raft replica is stale (a node
//!   cut off from the Raft majority keeps serving the last state it applied, the member's own
//!   key included), and that split view is what `patroni_cluster_dcs_views` must keep showing
//!   until the member catches up (the partition lab's Raft cut: forgotten after `ttl`, the
//!   view it still served vanished from the comparison while the split lasted).
//!
//! A member that answers nothing for `ttl` (or whose own view no longer lists it, and that is
//! no primary) is forgotten, so a removed member leaves the output. The memory holds at most
//! [`MAX_MEMBERS`] members.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::MAX_MEMBERS;
use crate::patroni::{ClusterView, DynamicConfig, Member};
use crate::snapshot::{says_primary, MemberSnapshot, Probes};

/// A member gone from the view and still asked.
#[derive(Debug, Clone)]
struct Departed {
    /// Its last entry in `/cluster`: its name and where to ask it.
    member: Member,
    /// Unix time of the first poll that missed it.
    left_at: f64,
    /// The same moment on the monotonic clock, to judge `ttl`.
    left: Instant,
}

/// What the poller remembers of the members across polls.
#[derive(Debug, Default)]
pub(super) struct MemberMemory {
    /// The members of the last `/cluster` answer, by name.
    listed: BTreeMap<String, Member>,
    departed: BTreeMap<String, Departed>,
    /// What each member answered to the requests made one member per poll, in rotation.
    rotated: BTreeMap<String, Rotated>,
    /// Which member the rotation asks next.
    rotation: usize,
}

/// The answers of the rotating requests: documents that rarely change or judgements that
/// need not be fresher than a few polls (liveness fails only after `ttl` of a stalled loop).
#[derive(Debug, Clone, Default)]
struct Rotated {
    /// Its own `/config`.
    config: Option<DynamicConfig>,
    /// Its `/liveness` and `/readiness`.
    probes: Probes,
}

impl MemberMemory {
    /// Takes this poll's view: members back in it are no longer departed, members that were
    /// listed last time and are missing now depart. Returns the departed members to ask in
    /// this poll, with the time each left, by name.
    pub(super) fn departed_after(
        &mut self,
        view: &ClusterView,
        now_unix: f64,
    ) -> Vec<(Member, f64)> {
        let listed: BTreeMap<String, Member> = view
            .members
            .iter()
            .map(|m| (m.name.clone(), m.clone()))
            .collect();
        self.departed.retain(|name, _| !listed.contains_key(name));
        let now = Instant::now();
        for (name, member) in std::mem::replace(&mut self.listed, listed) {
            if !self.listed.contains_key(&name) && self.departed.len() < MAX_MEMBERS {
                self.departed.insert(
                    name,
                    Departed {
                        member,
                        left_at: now_unix,
                        left: now,
                    },
                );
            }
        }
        self.rotated
            .retain(|name, _| self.listed.contains_key(name) || self.departed.contains_key(name));
        self.departed
            .values()
            .map(|d| (d.member.clone(), d.left_at))
            .collect()
    }

    /// After the poll: forgets the departed members that left more than `ttl` ago, do not
    /// say they are primary and are not listed in their own `/cluster` (a stale replica),
    /// and drops them from `departed` (this poll's answers).
    pub(super) fn settle(&mut self, departed: &mut Vec<MemberSnapshot>, ttl: Duration) {
        departed.retain(|snapshot| {
            let name = &snapshot.member.name;
            let expired = self
                .departed
                .get(name)
                .is_some_and(|d| d.left.elapsed() > ttl);
            let primary = snapshot.own_view.as_ref().is_ok_and(says_primary);
            let lists_itself = snapshot
                .dcs_view
                .as_ref()
                .and_then(|view| view.as_ref().ok())
                .is_some_and(|seen| seen.view.members.contains(name));
            let keep = !expired || primary || lists_itself;
            if !keep {
                self.departed.remove(name);
                self.rotated.remove(name);
            }
            keep
        });
    }

    /// The member the rotating requests go to in this poll: the next of `names` in turn;
    /// `None` without members. With N members, each is asked every N polls.
    pub(super) fn next_rotated<'a>(&mut self, names: &[&'a str]) -> Option<&'a str> {
        if names.is_empty() {
            return None;
        }
        self.rotation = self.rotation.wrapping_add(1);
        Some(names[self.rotation % names.len()])
    }

    /// Records `member`'s `/config`. When the reader's configuration changed, the others'
    /// are forgotten until read again: an old copy is no evidence of a split.
    pub(super) fn record_config(&mut self, member: &str, config: DynamicConfig, reader: bool) {
        let known = self.rotated.get(member).and_then(|r| r.config.as_ref());
        if reader && known.is_some_and(|known| *known != config) {
            for other in self.rotated.values_mut() {
                other.config = None;
            }
        }
        self.rotated.entry(member.to_owned()).or_default().config = Some(config);
    }

    /// Records what `member`'s health endpoints answered (`None`: no answer, kept as unknown).
    pub(super) fn record_probes(&mut self, member: &str, probes: Probes) {
        self.rotated.entry(member.to_owned()).or_default().probes = probes;
    }

    /// `member`'s `/config` as last read.
    pub(super) fn config_of(&self, member: &str) -> Option<&DynamicConfig> {
        self.rotated.get(member)?.config.as_ref()
    }

    /// `member`'s health endpoints as last asked.
    pub(super) fn probes_of(&self, member: &str) -> Probes {
        self.rotated
            .get(member)
            .map(|r| r.probes)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patroni::parse_cluster;
    use crate::patroni::MemberStatus;
    use crate::snapshot::Failure;

    fn view(names: &[&str]) -> ClusterView {
        let members: Vec<String> = names
            .iter()
            .map(|n| format!(r#"{{"name": "{n}", "role": "replica", "state": "streaming", "api_url": "http://{n}:8008/patroni"}}"#))
            .collect();
        parse_cluster(format!(r#"{{"members": [{}]}}"#, members.join(",")).as_bytes()).unwrap()
    }

    fn answered(member: &Member, role: Option<&str>) -> MemberSnapshot {
        MemberSnapshot {
            member: member.clone(),
            own_view: match role {
                Some(role) => Ok(MemberStatus {
                    role: Some(role.to_owned()),
                    ..MemberStatus::default()
                }),
                None => Err(Failure {
                    kind: "connect",
                    message: "refused".into(),
                }),
            },
            dcs_view: None,
            left_dcs_at: Some(1.0),
            clock: None,
            probes: Probes::default(),
        }
    }

    #[test]
    fn a_member_that_leaves_is_asked_until_ttl_then_forgotten() {
        let mut memory = MemberMemory::default();
        assert!(memory
            .departed_after(&view(&["a", "b", "c"]), 1.0)
            .is_empty());
        let departed = memory.departed_after(&view(&["b", "c"]), 2.0);
        assert_eq!(departed.len(), 1);
        assert_eq!(departed[0].0.name, "a");
        assert_eq!(departed[0].1, 2.0);
        // Within ttl: kept, whatever it says; the time it left does not move.
        let mut asked = vec![answered(&departed[0].0, None)];
        memory.settle(&mut asked, Duration::from_secs(30));
        assert_eq!(asked.len(), 1);
        assert_eq!(memory.departed_after(&view(&["b", "c"]), 3.0)[0].1, 2.0);
        // Past ttl and silent: forgotten, and left out of this poll's snapshot.
        memory.settle(&mut asked, Duration::ZERO);
        assert!(asked.is_empty());
        assert!(memory.departed_after(&view(&["b", "c"]), 4.0).is_empty());
    }

    #[test]
    fn a_departed_primary_is_kept_past_ttl() {
        let mut memory = MemberMemory::default();
        memory.departed_after(&view(&["a", "b"]), 1.0);
        let departed = memory.departed_after(&view(&["b"]), 2.0);
        memory.settle(
            &mut vec![answered(&departed[0].0, Some("primary"))],
            Duration::ZERO,
        );
        assert_eq!(memory.departed_after(&view(&["b"]), 3.0).len(), 1);
        memory.settle(
            &mut vec![answered(&departed[0].0, Some("replica"))],
            Duration::ZERO,
        );
        assert!(memory.departed_after(&view(&["b"]), 4.0).is_empty());
    }

    #[test]
    fn a_departed_member_whose_own_view_still_lists_it_is_kept_past_ttl() {
        use crate::snapshot::{DcsView, MemberDcsView};
        let mut memory = MemberMemory::default();
        memory.departed_after(&view(&["a", "b", "c"]), 1.0);
        let departed = memory.departed_after(&view(&["b", "c"]), 2.0);
        // Its Raft replica is cut off: its own /cluster is the last state it applied.
        let mut stale = answered(&departed[0].0, Some("replica"));
        let own = |names: &[&str]| {
            Some(Ok(MemberDcsView {
                view: DcsView::of(&view(names)),
                config: None,
            }))
        };
        stale.dcs_view = own(&["a", "b", "c"]);
        let mut asked = vec![stale.clone()];
        memory.settle(&mut asked, Duration::ZERO);
        assert_eq!(asked.len(), 1);
        assert_eq!(memory.departed_after(&view(&["b", "c"]), 3.0).len(), 1);
        // It caught up with the majority (its key gone there too): forgotten after ttl.
        stale.dcs_view = own(&["b", "c"]);
        let mut asked = vec![stale.clone()];
        memory.settle(&mut asked, Duration::ZERO);
        assert!(asked.is_empty());
        assert!(memory.departed_after(&view(&["b", "c"]), 4.0).is_empty());
    }

    #[test]
    fn a_member_back_in_the_view_is_no_longer_departed() {
        let mut memory = MemberMemory::default();
        memory.departed_after(&view(&["a", "b"]), 1.0);
        assert_eq!(memory.departed_after(&view(&["b"]), 2.0).len(), 1);
        assert!(memory.departed_after(&view(&["a", "b"]), 3.0).is_empty());
    }

    #[test]
    fn the_rotation_visits_everyone_and_forgets_old_configs_on_a_change() {
        let mut memory = MemberMemory::default();
        let names = ["a", "b", "c"];
        let mut picks: Vec<_> = (0..3)
            .map(|_| memory.next_rotated(&names).unwrap())
            .collect();
        picks.sort();
        assert_eq!(picks, names);
        assert_eq!(memory.next_rotated(&[]), None);
        memory.record_probes(
            "b",
            Probes {
                liveness: Some(false),
                readiness: Some(true),
            },
        );
        assert_eq!(memory.probes_of("b").liveness, Some(false));
        assert_eq!(memory.probes_of("c"), Probes::default());
        let config = DynamicConfig::default();
        memory.record_config("a", config.clone(), true);
        memory.record_config("b", config.clone(), false);
        let changed = DynamicConfig {
            ttl_seconds: config.ttl_seconds + 1,
            ..config
        };
        memory.record_config("a", changed.clone(), true);
        assert_eq!(memory.config_of("a"), Some(&changed));
        assert_eq!(memory.config_of("b"), None);
    }
}
