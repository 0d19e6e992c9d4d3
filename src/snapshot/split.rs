//! Split views: what every member and every Raft node says, compared with each other.
//!
//! Why: each Patroni member answers `GET /cluster` from its *own* Raft replica, and each
//! pysyncobj node counts its majority against its *own* partner list. One member's view is
//! one replica's word. Replicas diverge when a node's log stalls (a Raft-only partition, a
//! hung process) or when pysyncobj forgets its term and vote over a restart (PySyncObj #201,
//! Patroni #1764); partner lists differ when a node starts with a stale or incomplete
//! configuration (canonical/postgresql-operator #1910, PySyncObj #133). And an isolated
//! leader keeps saying `primary` after the majority promoted another member, until its own
//! loop demotes it. None of this shows in one member's `/cluster`, so the judgements here
//! compare every answer the poll got: pure functions of the snapshot's parts.
//!
//! Only answers of this poll are evidence. A member whose own `/cluster` was not read this
//! poll (it timed out, failed, or was not asked) is unknown: it neither agrees nor differs,
//! and [`ViewComparison::unread`] names it. Leaving it out silently made the views read 1
//! while the one stale member merely did not answer in time (the partition lab's Raft cut on
//! a loaded machine: three exporters at once), and `PatroniDcsViewsDiverge` resolved on it.

use super::model::{DcsView, MemberDcsView, MemberSnapshot};
use crate::patroni::{MemberRole, MemberStatus};

/// One part of a DCS view that members can disagree on: the `field` label of
/// `patroni_member_dcs_view_differs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ViewField {
    /// Who holds the leader key.
    Leader,
    /// Which members have a key.
    Members,
    /// The timeline each member's key carries.
    Timelines,
    /// The dynamic configuration (`GET /config`).
    Config,
}

impl ViewField {
    pub const ALL: [ViewField; 4] = [
        ViewField::Leader,
        ViewField::Members,
        ViewField::Timelines,
        ViewField::Config,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ViewField::Leader => "leader",
            ViewField::Members => "members",
            ViewField::Timelines => "timelines",
            ViewField::Config => "config",
        }
    }
}

/// Every member's DCS view compared with the reference: the view most members share, a
/// tie going to the view the exporter reads (the member that answered `/cluster` first).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ViewComparison {
    /// Distinct views among the members whose `/cluster` answered; 0 when none did. A
    /// member whose `/config` is not known yet is taken to share the reference's.
    pub distinct: usize,
    /// Per member whose `/cluster` answered, in the snapshot's order: the fields in which
    /// its view differs from the reference (empty when it agrees), and whether its
    /// `/config` was compared at all.
    pub members: Vec<MemberViewDiff>,
    /// The members whose own `/cluster` was not read this poll, in the snapshot's order:
    /// their views are unknown, counted neither in `distinct` nor as agreeing.
    pub unread: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberViewDiff {
    pub member: String,
    pub differs: Vec<ViewField>,
    pub config_known: bool,
}

impl MemberViewDiff {
    /// Differs in who leads or who is a member: what a stale replica shows.
    fn diverged(&self) -> bool {
        self.differs
            .iter()
            .any(|f| matches!(f, ViewField::Leader | ViewField::Members))
    }
}

impl ViewComparison {
    /// Compares `views` (member name, its view), with `read` the view the exporter reads.
    pub fn compare(views: &[(&str, &MemberDcsView)], read: Option<&DcsView>) -> ViewComparison {
        let Some(reference) = most_common(views.iter().map(|(_, v)| &v.view), read) else {
            return ViewComparison::default();
        };
        let reference_config =
            most_common(views.iter().filter_map(|(_, v)| v.config.as_ref()), None);
        let distinct = count_distinct(
            views
                .iter()
                .map(|(_, seen)| (&seen.view, seen.config.as_ref().or(reference_config))),
        );
        let mut members = Vec::with_capacity(views.len());
        for (name, seen) in views {
            let config = seen.config.as_ref().or(reference_config);
            let mut differs = Vec::new();
            if seen.view.leaders != reference.leaders {
                differs.push(ViewField::Leader);
            }
            if !seen.view.members().eq(reference.members()) {
                differs.push(ViewField::Members);
            }
            if seen.view.timelines != reference.timelines {
                differs.push(ViewField::Timelines);
            }
            if config != reference_config {
                differs.push(ViewField::Config);
            }
            members.push(MemberViewDiff {
                member: (*name).to_owned(),
                differs,
                config_known: seen.config.is_some(),
            });
        }
        ViewComparison {
            distinct,
            members,
            unread: Vec::new(),
        }
    }

    /// Every member's view compared ([`ViewComparison::compare`] of those whose own
    /// `/cluster` answered this poll), and the members whose view was not read named.
    pub fn of_members<'a>(
        members: impl Iterator<Item = &'a MemberSnapshot> + Clone,
        read: Option<&DcsView>,
    ) -> ViewComparison {
        ViewComparison {
            unread: members
                .clone()
                .filter(|m| !matches!(m.dcs_view, Some(Ok(_))))
                .map(|m| m.member.name.clone())
                .collect(),
            ..ViewComparison::compare(&answered_views(members), read)
        }
    }

    /// The members whose view differs, with the fields, e.g. `postgresql-2 (members, timelines)`.
    pub fn describe_differences(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| !m.differs.is_empty())
            .map(|m| {
                let fields: Vec<&str> = m.differs.iter().map(|f| f.as_str()).collect();
                format!("{} ({})", m.member, fields.join(", "))
            })
            .collect()
    }

    /// Whether `member`'s view differs in who leads or who is a member: its replica is
    /// stale or diverged, and it cannot take the leader key on the majority's terms.
    pub fn diverged(&self, member: &str) -> bool {
        self.members
            .iter()
            .any(|m| m.member == member && m.diverged())
    }

    /// The members whose view differs in the leader or the member set, in order.
    pub fn diverged_members(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.diverged())
            .map(|m| m.member.clone())
            .collect()
    }
}

/// The value most items equal; a tie goes to `prefer` when it is among the tied, else to
/// the first of them. `None` only for no items.
pub(super) fn most_common<'a, T: PartialEq + 'a>(
    items: impl Iterator<Item = &'a T>,
    prefer: Option<&'a T>,
) -> Option<&'a T> {
    let mut counts: Vec<(&T, usize)> = Vec::new();
    for item in items {
        match counts.iter_mut().find(|(seen, _)| *seen == item) {
            Some((_, count)) => *count += 1,
            None => counts.push((item, 1)),
        }
    }
    let best = counts.iter().map(|(_, count)| *count).max()?;
    let tied: Vec<&T> = counts
        .iter()
        .filter(|(_, count)| *count == best)
        .map(|(item, _)| *item)
        .collect();
    prefer
        .and_then(|p| tied.iter().copied().find(|item| *item == p))
        .or_else(|| tied.first().copied())
}

/// How many different values `items` holds (by equality: views and sets are few and small).
pub(super) fn count_distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> usize {
    let mut seen: Vec<T> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen.len()
}

/// Whether a member says, in its own `GET /patroni`, that it leads the cluster: `primary`
/// (3.x `master`, normalised by the parser) or `standby_leader` in a standby cluster.
pub fn says_primary(own: &MemberStatus) -> bool {
    own.role.as_ref().is_some_and(MemberRole::says_leader)
}

/// The members (listed and remembered) that say they lead, by their own word.
pub fn primaries<'a>(members: impl Iterator<Item = &'a MemberSnapshot>) -> Vec<&'a MemberSnapshot> {
    members
        .filter(|m| m.own_view.as_ref().is_ok_and(says_primary))
        .collect()
}

/// Groups `(member, view)` pairs for [`ViewComparison::compare`]: only members whose own
/// `/cluster` answered.
pub fn answered_views<'a>(
    members: impl Iterator<Item = &'a MemberSnapshot>,
) -> Vec<(&'a str, &'a MemberDcsView)> {
    members
        .filter_map(|m| Some((m.member.name.as_str(), m.dcs_view.as_ref()?.as_ref().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::patroni::{parse_cluster, DynamicConfig};

    fn view(path: &str) -> DcsView {
        DcsView::of(&parse_cluster(&fixture(path)).unwrap())
    }

    fn seen(view: DcsView, config: Option<DynamicConfig>) -> MemberDcsView {
        MemberDcsView { view, config }
    }

    /// The captured 4.1.5 cluster after the switchover, each member's own `/cluster` as
    /// `answers` says: `Some(path)` its captured view, `None` not read this poll (a timeout).
    fn members_with_views(answers: [Option<&str>; 3]) -> Vec<MemberSnapshot> {
        let (_, mut members) = crate::snapshot::model::captured(
            "patroni-4.1.5/02-cluster-after-switchover.json",
            "patroni-4.1.5/02-patroni-after-switchover-m{i}.json",
        );
        for (member, answer) in members.iter_mut().zip(answers) {
            member.dcs_view = Some(match answer {
                Some(path) => Ok(seen(view(path), None)),
                None => Err(crate::snapshot::Failure {
                    kind: crate::error_kind::ErrorKind::Timeout,
                    message: "timeout after 800ms".into(),
                }),
            });
        }
        members
    }

    const STALE: &str = "patroni-4.1.5/01-cluster-from-m0.json";
    const MAJORITY: &str = "patroni-4.1.5/02-cluster-after-switchover.json";

    /// Issue 42: a member whose own `/cluster` was not read this poll never counts as
    /// agreeing. Its view is unknown and named; the read ones are compared among themselves.
    #[test]
    fn a_view_not_read_this_poll_is_unknown_not_agreement() {
        let split = members_with_views([Some(MAJORITY), Some(MAJORITY), Some(STALE)]);
        let compared = ViewComparison::of_members(split.iter(), None);
        assert_eq!(compared.distinct, 2);
        assert!(compared.unread.is_empty());
        assert!(compared.diverged("postgresql-2"));

        // The stale member's /cluster timed out: unknown, not agreeing, not differing.
        let unread = members_with_views([Some(MAJORITY), Some(MAJORITY), None]);
        let compared = ViewComparison::of_members(unread.iter(), None);
        assert_eq!(compared.unread, ["postgresql-2"]);
        assert_eq!(compared.distinct, 1, "among the views read");
        assert!(compared.members.iter().all(|m| m.member != "postgresql-2"));
        assert!(!compared.diverged("postgresql-2"));

        // Not asked at all (no answer to carry) is unknown too.
        let mut not_asked = members_with_views([Some(MAJORITY), Some(MAJORITY), Some(MAJORITY)]);
        not_asked[0].dcs_view = None;
        let compared = ViewComparison::of_members(not_asked.iter(), None);
        assert_eq!(compared.unread, ["postgresql-0"]);

        // Every view read and equal: the only agreement.
        let healed = members_with_views([Some(MAJORITY), Some(MAJORITY), Some(MAJORITY)]);
        let compared = ViewComparison::of_members(healed.iter(), None);
        assert_eq!((compared.distinct, compared.unread.len()), (1, 0));

        // Nothing read: no views, every member unknown.
        let none = members_with_views([None, None, None]);
        let compared = ViewComparison::of_members(none.iter(), None);
        assert_eq!(compared.distinct, 0);
        assert_eq!(compared.unread.len(), 3);
    }

    #[test]
    fn agreeing_views_are_one() {
        let a = seen(view("patroni-4.1.5/01-cluster-from-m0.json"), None);
        let b = seen(view("patroni-4.1.5/01-cluster-from-m1.json"), None);
        let c = seen(
            view("patroni-4.1.5/01-cluster-from-m2.json"),
            Some(DynamicConfig::default()),
        );
        let compared =
            ViewComparison::compare(&[("m0", &a), ("m1", &b), ("m2", &c)], Some(&a.view));
        assert_eq!(compared.distinct, 1);
        assert!(compared.members.iter().all(|m| m.differs.is_empty()));
        assert!(compared.describe_differences().is_empty());
    }

    #[test]
    fn a_frozen_replica_differs_from_the_majority_whatever_the_exporter_reads() {
        // Member 0's replica stopped before the switchover; 1 and 2 saw it.
        let frozen = seen(view("patroni-4.1.5/01-cluster-from-m0.json"), None);
        let moved = seen(view("patroni-4.1.5/02-cluster-after-switchover.json"), None);
        let views = [
            ("postgresql-0", &frozen),
            ("postgresql-1", &moved),
            ("postgresql-2", &moved),
        ];
        // Even when the exporter reads member 0's view, the majority is the reference.
        let compared = ViewComparison::compare(&views, Some(&frozen.view));
        assert_eq!(compared.distinct, 2);
        assert_eq!(
            compared.members[0].differs,
            vec![ViewField::Leader, ViewField::Timelines]
        );
        assert!(compared.members[1].differs.is_empty());
        assert!(compared.diverged("postgresql-0"));
        assert!(!compared.diverged("postgresql-1"));
        assert_eq!(
            compared.describe_differences(),
            vec!["postgresql-0 (leader, timelines)"]
        );
    }

    #[test]
    fn a_tie_goes_to_the_view_the_exporter_reads_and_unknown_configs_do_not_count() {
        let frozen = seen(view("patroni-4.1.5/01-cluster-from-m0.json"), None);
        let moved = seen(view("patroni-4.1.5/02-cluster-after-switchover.json"), None);
        let compared = ViewComparison::compare(&[("a", &frozen), ("b", &moved)], Some(&moved.view));
        assert_eq!(
            compared.members[0].differs,
            vec![ViewField::Leader, ViewField::Timelines]
        );
        assert!(compared.members[1].differs.is_empty());

        let other_ttl = DynamicConfig {
            ttl_seconds: 60,
            ..DynamicConfig::default()
        };
        let same = |config| seen(view("patroni-4.1.5/01-cluster-from-m0.json"), config);
        let (a, b, c) = (
            same(Some(DynamicConfig::default())),
            same(Some(DynamicConfig::default())),
            same(Some(other_ttl)),
        );
        let unknown = same(None);
        let compared =
            ViewComparison::compare(&[("a", &a), ("b", &b), ("c", &c), ("d", &unknown)], None);
        assert_eq!(compared.distinct, 2);
        assert_eq!(compared.members[2].differs, vec![ViewField::Config]);
        assert!(compared.members[3].differs.is_empty());
        assert!(!compared.members[3].config_known);
    }
}
