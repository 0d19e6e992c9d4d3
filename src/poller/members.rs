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
//! * for `2 × ttl + loop_wait` after it left while its own `/patroni` answers, and beyond
//!   that for as long as its `/liveness` says 503. A replica whose HA loop is stalled leaves
//!   `/cluster` at ~`ttl` (nothing renews its key), but its `/liveness` turns 503 only
//!   `2 × ttl` after its next loop was due (Patroni's `api.py`, `do_GET_liveness`: `ttl` on a
//!   primary, `2 × ttl` on a replica, counted from `next_run`), ~`ttl + loop_wait` after it
//!   left. Forgotten at `ttl`, it would vanish before it could say so (docs/failure-modes.md,
//!   "A stalled HA loop");
//! * and for as long as its own `/cluster` still lists it: its Raft replica is stale (a node
//!   cut off from the Raft majority keeps serving the last state it applied, the member's own
//!   key included), and that split view is what `patroni_cluster_dcs_views` must keep showing
//!   until the member catches up (the partition lab's Raft cut: forgotten after `ttl`, the
//!   view it still served vanished from the comparison while the split lasted).
//!
//! A member that answers nothing for `ttl` is forgotten, and so is one past every limit above,
//! so a removed member leaves the output. The memory holds at most [`MAX_MEMBERS`] members.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::placement::MAX_MEMBERS;
use crate::patroni::{ClockOffset, ClusterView, DynamicConfig, Member};
use crate::snapshot::{says_primary, MemberReadTimes, MemberSnapshot, Probes};

/// `/readiness` is asked on one turn of the rotation in this many (each of 3 members every 12
/// polls, once a minute at the default interval), `/liveness` on every turn. Why: readiness
/// feeds no alert and no verdict (the dashboard shows it), while liveness says a stalled HA
/// loop (`PatroniHaLoopStalled`) and keeps a departed member remembered; every request takes
/// one of the few workers Patroni (3.3.9, 4.0.8, 4.1.1 and later) serves its REST API with, shared with the
/// members' own leader race.
pub const READINESS_EVERY_TURNS: usize = 4;

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

/// The cluster's `ttl` and `loop_wait` (from `/config`, else Patroni's defaults): how long a
/// departed member is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DcsTiming {
    pub(super) ttl: Duration,
    pub(super) loop_wait: Duration,
}

impl DcsTiming {
    /// From the cluster's `/config`; Patroni's defaults until it was read.
    pub(super) fn of(config: Option<&DynamicConfig>) -> DcsTiming {
        let defaults = DynamicConfig::default();
        let config = config.unwrap_or(&defaults);
        DcsTiming {
            ttl: Duration::from_secs(config.ttl_seconds),
            loop_wait: Duration::from_secs(config.loop_wait_seconds),
        }
    }
}

/// Whether `member`'s own `/cluster` still lists it: its Raft replica is stale (cut off from
/// the majority, it serves the state it last applied, its own key included).
fn lists_itself(member: &MemberSnapshot) -> bool {
    member
        .dcs_view
        .as_ref()
        .and_then(|view| view.as_ref().ok())
        .is_some_and(|seen| seen.view.members().any(|name| name == member.member.name))
}

/// What the poller remembers of the members across polls.
#[derive(Debug, Default)]
pub(super) struct MemberMemory {
    /// The members of the last `/cluster` answer. A `Vec`, kept by every poller: a map's
    /// node reserves room for eleven members, for the usual three.
    listed: Vec<Member>,
    departed: BTreeMap<String, Departed>,
    /// What is kept of each member from one poll to the next.
    kept: BTreeMap<String, Kept>,
    /// Which member the rotation asks next.
    rotation: usize,
}

/// What is kept of one member from one poll to the next: the answers of the rotating requests
/// (documents that rarely change, or judgements that need not be fresher than a few polls:
/// liveness fails only after `ttl` of a stalled loop), each with the Unix time of the poll that
/// read it (exported beside it: [`MemberReadTimes`]), and its clock's last measured offset.
/// Forgotten with the member.
#[derive(Debug, Clone, Default)]
struct Kept {
    /// Its own `/config`, and when it was read.
    config: Option<(DynamicConfig, f64)>,
    /// Its `/liveness` and `/readiness`.
    probes: Probes,
    /// When `probes.liveness` and `probes.readiness` were answered (`None` with the value).
    liveness_at: Option<f64>,
    readiness_at: Option<f64>,
    /// Its clock's offset, from the `Date` of its last `/patroni` answer.
    clock: Option<ClockOffset>,
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
        let is_listed = |name: &str| view.members.iter().any(|m| m.name == name);
        self.departed.retain(|name, _| !is_listed(name));
        let now = Instant::now();
        for member in std::mem::replace(&mut self.listed, view.members.clone()) {
            if !is_listed(&member.name) && self.departed.len() < MAX_MEMBERS {
                self.departed.insert(
                    member.name.clone(),
                    Departed {
                        member,
                        left_at: now_unix,
                        left: now,
                    },
                );
            }
        }
        self.kept
            .retain(|name, _| is_listed(name) || self.departed.contains_key(name));
        self.departed
            .values()
            .map(|d| (d.member.clone(), d.left_at))
            .collect()
    }

    /// `view`'s members take the `api_url`s remembered for them where the texts are the
    /// same: parsed already, they are not parsed again ([`crate::patroni::ApiUrl`]).
    pub(super) fn adopt_api_urls(&self, view: Option<&mut ClusterView>) {
        let Some(view) = view else {
            return;
        };
        for member in &mut view.members {
            let earlier = self.remembered().find(|m| m.name == member.name);
            if let (Some(api_url), Some(earlier)) = (
                member.api_url.as_mut(),
                earlier.and_then(|m| m.api_url.as_ref()),
            ) {
                api_url.adopt(earlier);
            }
        }
    }

    /// The members a poll asks before `/cluster` answers: those of the last `/cluster`
    /// answer and those still remembered after they left it.
    pub(super) fn remembered(&self) -> impl Iterator<Item = &Member> {
        self.listed
            .iter()
            .chain(self.departed.values().map(|departed| &departed.member))
    }

    /// The hosts of the members of the last `/cluster` answer.
    pub(super) fn listed_hosts(&self) -> Vec<String> {
        self.listed.iter().filter_map(|m| m.host.clone()).collect()
    }

    /// After the poll: forgets the departed members whose time is up (see the module doc:
    /// `ttl`, or `2 × ttl + loop_wait` while they answer, or as long as they say primary, fail
    /// `/liveness` or are listed in their own `/cluster`), and drops them from `departed`
    /// (this poll's answers).
    pub(super) fn settle(&mut self, departed: &mut Vec<MemberSnapshot>, timing: DcsTiming) {
        departed.retain(|snapshot| {
            let name = &snapshot.member.name;
            let Some(absent) = self.departed.get(name).map(|d| d.left.elapsed()) else {
                return true;
            };
            let keep = if snapshot.own_view.is_err() {
                absent <= timing.ttl
            } else {
                absent <= timing.ttl * 2 + timing.loop_wait
                    || snapshot.own_view.as_ref().is_ok_and(says_primary)
                    || snapshot.probes.liveness == Some(false)
                    || lists_itself(snapshot)
            };
            if !keep {
                self.departed.remove(name);
                self.kept.remove(name);
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

    /// Whether the member the rotation picked in this poll ([`next_rotated`]) is asked its
    /// `/readiness` too: on every [`READINESS_EVERY_TURNS`]th turn of the rotation over
    /// `members`, so each member every `members × READINESS_EVERY_TURNS` polls.
    ///
    /// [`next_rotated`]: MemberMemory::next_rotated
    pub(super) fn readiness_turn(&self, members: usize) -> bool {
        (self.rotation / members.max(1)) % READINESS_EVERY_TURNS == 0
    }

    /// Records `member`'s own `/config`, asked in turn in the poll of Unix time `at`.
    pub(super) fn record_config(&mut self, member: &str, config: DynamicConfig, at: f64) {
        self.kept.entry(member.to_owned()).or_default().config = Some((config, at));
    }

    /// Forgets every member's `/config` until read again: the cluster's changed, and an old
    /// copy is no evidence of a split.
    pub(super) fn forget_configs(&mut self) {
        for member in self.kept.values_mut() {
            member.config = None;
        }
    }

    /// Forgets `member`'s `/config` asked in turn: a newer one was read from it as the
    /// reader, and that one the cadence keeps ([`super::cadence`]).
    pub(super) fn forget_config(&mut self, member: &str) {
        if let Some(kept) = self.kept.get_mut(member) {
            kept.config = None;
        }
    }

    /// Records what `member`'s health endpoints answered in the poll of Unix time `at`:
    /// `liveness` (`None`: no answer, kept as unknown), and `readiness` when it was asked
    /// (`Some`; not asked, the last answer stands with its time: [`READINESS_EVERY_TURNS`]).
    pub(super) fn record_probes(
        &mut self,
        member: &str,
        liveness: Option<bool>,
        readiness: Option<Option<bool>>,
        at: f64,
    ) {
        let kept = self.kept.entry(member.to_owned()).or_default();
        kept.probes.liveness = liveness;
        kept.liveness_at = liveness.map(|_| at);
        if let Some(readiness) = readiness {
            kept.probes.readiness = readiness;
            kept.readiness_at = readiness.map(|_| at);
        }
    }

    /// `member`'s `/config` as last read, and when.
    pub(super) fn config_of(&self, member: &str) -> Option<(&DynamicConfig, f64)> {
        let (config, at) = self.kept.get(member)?.config.as_ref()?;
        Some((config, *at))
    }

    /// Remembers `member`'s clock offset from this poll's `/patroni` answer.
    pub(super) fn record_clock(&mut self, member: &str, clock: Option<ClockOffset>) {
        if clock.is_some() {
            self.kept.entry(member.to_owned()).or_default().clock = clock;
        }
    }

    /// `member`'s clock offset as last measured: for the replay lag's correction when its
    /// `/patroni` failed in this poll ([`MemberSnapshot::last_clock`]), never exported.
    pub(super) fn clock_of(&self, member: &str) -> Option<ClockOffset> {
        self.kept.get(member)?.clock
    }

    /// `member`'s health endpoints as last asked.
    pub(super) fn probes_of(&self, member: &str) -> Probes {
        self.kept.get(member).map(|r| r.probes).unwrap_or_default()
    }

    /// When `member`'s facts asked in turn were read: its health endpoints' answers and its
    /// own `/config` (the cluster's copy read from it as the reader is the cadence's).
    pub(super) fn read_times_of(&self, member: &str) -> MemberReadTimes {
        self.kept
            .get(member)
            .map(|kept| MemberReadTimes {
                config: kept.config.as_ref().map(|(_, at)| *at),
                liveness: kept.liveness_at,
                readiness: kept.readiness_at,
            })
            .unwrap_or_default()
    }
}

/// Now, in Unix seconds: the clock of departures (and of the snapshot's `polled_at`).
pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patroni::parse_cluster;
    use crate::patroni::MemberStatus;
    use crate::snapshot::Failure;

    #[test]
    fn a_clock_offset_stands_until_the_member_answers_again() {
        let mut memory = MemberMemory::default();
        let ahead = |seconds| ClockOffset {
            seconds,
            error_seconds: 0.5,
        };
        assert_eq!(memory.clock_of("postgresql-2"), None);
        memory.record_clock("postgresql-2", Some(ahead(8.0)));
        // its /patroni failed: nothing measured, the last measure stands
        memory.record_clock("postgresql-2", None);
        assert_eq!(memory.clock_of("postgresql-2"), Some(ahead(8.0)));
        memory.record_clock("postgresql-2", Some(ahead(0.1)));
        assert_eq!(memory.clock_of("postgresql-2"), Some(ahead(0.1)));
        assert_eq!(memory.clock_of("postgresql-0"), None);
    }

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
                    role: Some(role.into()),
                    ..MemberStatus::default()
                }),
                None => Err(Failure {
                    kind: crate::error_kind::ErrorKind::Connect,
                    message: "refused".into(),
                }),
            },
            dcs_view: None,
            left_dcs_at: Some(1.0),
            clock: None,
            last_clock: None,
            round_trip: None,
            probes: Probes::default(),
            read_at: crate::snapshot::MemberReadTimes::default(),
        }
    }

    /// The next `/cluster`'s members take the last poll's parsed `api_url`s where their
    /// texts are the same, a departed member's included; a URL that changed is its own.
    #[test]
    fn api_urls_already_parsed_are_taken_from_the_last_poll() {
        let mut memory = MemberMemory::default();
        memory.departed_after(&view(&["a", "b", "c"]), 1.0);
        memory.departed_after(&view(&["a", "b"]), 2.0); // c departed, still remembered
        let url_of = |member: &Member| member.api_url.as_ref().unwrap().url().unwrap() as *const _;
        let remembered: Vec<*const url::Url> = memory.remembered().map(url_of).collect();
        let mut next = view(&["a", "b", "c"]);
        next.members[1].api_url = Some("http://b.moved:8008/patroni".into());
        memory.adopt_api_urls(Some(&mut next));
        let adopted: Vec<*const url::Url> = next.members.iter().map(url_of).collect();
        assert_eq!(
            adopted[0], remembered[0],
            "a: the same text, the same parse"
        );
        assert_ne!(adopted[1], remembered[1], "b: moved, parsed anew");
        assert_eq!(adopted[2], remembered[2], "c: the departed member's parse");
        assert_eq!(
            next.members[1]
                .api_url
                .as_ref()
                .unwrap()
                .url()
                .unwrap()
                .host_str(),
            Some("b.moved")
        );
        let texts: Vec<&str> = next
            .members
            .iter()
            .map(|m| m.api_url.as_ref().unwrap().as_str())
            .collect();
        assert_eq!(
            texts,
            [
                "http://a:8008/patroni",
                "http://b.moved:8008/patroni",
                "http://c:8008/patroni"
            ]
        );
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
        let silent = answered(&departed[0].0, None);
        assert!(kept(&mut memory, &silent, timing(30, 10)));
        assert_eq!(memory.departed_after(&view(&["b", "c"]), 3.0)[0].1, 2.0);
        // Past ttl and silent: forgotten, and left out of this poll's snapshot.
        assert!(!kept(&mut memory, &silent, timing(0, 0)));
        assert!(memory.departed_after(&view(&["b", "c"]), 4.0).is_empty());
    }

    #[test]
    fn a_departed_primary_is_kept_past_ttl() {
        let (mut memory, departed) = departed_member(&["a", "b"], &["b"]);
        memory.settle(
            &mut vec![answered(&departed, Some("primary"))],
            timing(0, 0),
        );
        assert_eq!(memory.departed_after(&view(&["b"]), 3.0).len(), 1);
        memory.settle(
            &mut vec![answered(&departed, Some("replica"))],
            timing(0, 0),
        );
        assert!(memory.departed_after(&view(&["b"]), 4.0).is_empty());
    }

    /// A memory that saw the view `before` at 1.0 and `after` at 2.0, and the one member that
    /// left between them.
    fn departed_member(before: &[&str], after: &[&str]) -> (MemberMemory, Member) {
        let mut memory = MemberMemory::default();
        memory.departed_after(&view(before), 1.0);
        let departed = memory.departed_after(&view(after), 2.0);
        assert_eq!(departed.len(), 1);
        let member = departed[0].0.clone();
        (memory, member)
    }

    /// Settles a poll that asked `member` alone: whether it stays in that poll's snapshot.
    fn kept(memory: &mut MemberMemory, member: &MemberSnapshot, timing: DcsTiming) -> bool {
        let mut asked = vec![member.clone()];
        memory.settle(&mut asked, timing);
        asked.len() == 1
    }

    fn timing(ttl: u64, loop_wait: u64) -> DcsTiming {
        DcsTiming {
            ttl: Duration::from_secs(ttl),
            loop_wait: Duration::from_secs(loop_wait),
        }
    }

    /// A replica whose HA loop is stalled: out of `/cluster` at ~ttl, `/liveness` 503 only
    /// ~ttl + loop_wait later. It must still be there to say so.
    #[test]
    fn a_departed_member_that_answers_is_kept_for_two_ttl_and_loop_wait() {
        let (mut memory, departed) = departed_member(&["a", "b"], &["b"]);
        let replica = answered(&departed, Some("replica"));
        // Past ttl (0) but within 2 x ttl + loop_wait (an hour): kept while it answers...
        assert!(kept(&mut memory, &replica, timing(0, 3600)));
        // ... but not when it stopped answering: ttl alone counts then.
        let silent = answered(&departed, None);
        assert!(!kept(&mut memory, &silent, timing(0, 3600)));
        assert!(memory.departed_after(&view(&["b"]), 3.0).is_empty());
    }

    #[test]
    fn a_departed_member_whose_liveness_fails_is_kept_past_every_limit() {
        let (mut memory, departed) = departed_member(&["a", "b"], &["b"]);
        let mut stalled = answered(&departed, Some("replica"));
        stalled.probes.liveness = Some(false);
        assert!(
            kept(&mut memory, &stalled, timing(0, 0)),
            "kept while /liveness says 503"
        );
        let mut recovered = stalled;
        recovered.probes.liveness = Some(true);
        assert!(
            !kept(&mut memory, &recovered, timing(0, 0)),
            "forgotten once the limits are past and it is live"
        );
    }

    #[test]
    fn a_departed_member_whose_own_view_still_lists_it_is_kept_past_ttl() {
        use crate::snapshot::{DcsView, MemberDcsView};
        let (mut memory, departed) = departed_member(&["a", "b", "c"], &["b", "c"]);
        // Its Raft replica is cut off: its own /cluster is the last state it applied.
        let mut stale = answered(&departed, Some("replica"));
        let own = |names: &[&str]| {
            Some(Ok(MemberDcsView {
                view: DcsView::of(&view(names)),
                config: None,
            }))
        };
        stale.dcs_view = own(&["a", "b", "c"]);
        assert!(kept(&mut memory, &stale, timing(0, 0)));
        assert_eq!(memory.departed_after(&view(&["b", "c"]), 3.0).len(), 1);
        // It caught up with the majority (its key gone there too): forgotten after ttl.
        stale.dcs_view = own(&["b", "c"]);
        assert!(!kept(&mut memory, &stale, timing(0, 0)));
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
    fn readiness_comes_round_to_every_member_every_few_turns() {
        let mut memory = MemberMemory::default();
        let names = ["a", "b", "c"];
        let polls = 3 * READINESS_EVERY_TURNS * 2;
        let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
        for _ in 0..polls {
            let picked = memory.next_rotated(&names).unwrap();
            if memory.readiness_turn(names.len()) {
                *asked.entry(picked).or_default() += 1;
            }
        }
        // Each member twice in 24 polls: every 12 polls, once a minute at the default 5 s.
        assert_eq!(asked.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
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
        memory.record_probes("b", Some(false), Some(Some(true)), 1.0);
        assert_eq!(memory.probes_of("b").liveness, Some(false));
        assert_eq!(memory.probes_of("c"), Probes::default());
        let config = DynamicConfig::default();
        memory.record_config("a", config.clone(), 1.0);
        memory.record_config("b", config.clone(), 2.0);
        memory.forget_config("a");
        assert_eq!(memory.config_of("a"), None);
        assert_eq!(memory.config_of("b"), Some((&config, 2.0)));
        memory.record_config("a", config.clone(), 3.0);
        memory.forget_configs();
        assert_eq!(memory.config_of("a"), None);
        assert_eq!(memory.config_of("b"), None);
    }

    /// Between two turns a member's probes and `/config` are served from their last answer,
    /// with that answer's time; a turn that asks moves it, a failed answer drops value and time.
    #[test]
    fn the_rotations_answers_keep_the_time_of_the_poll_that_read_them() {
        let mut memory = MemberMemory::default();
        assert_eq!(memory.read_times_of("a"), MemberReadTimes::default());
        memory.record_probes("a", Some(true), Some(Some(true)), 10.0);
        memory.record_config("a", DynamicConfig::default(), 10.0);
        let first = MemberReadTimes {
            config: Some(10.0),
            liveness: Some(10.0),
            readiness: Some(10.0),
        };
        assert_eq!(memory.read_times_of("a"), first);
        // the next turn asks /liveness but not /readiness: readiness keeps its old time
        memory.record_probes("a", Some(false), None, 25.0);
        let times = memory.read_times_of("a");
        assert_eq!(times.liveness, Some(25.0));
        assert_eq!(times.readiness, Some(10.0));
        assert_eq!(memory.probes_of("a").readiness, Some(true));
        assert_eq!(times.config, Some(10.0), "not asked: the old read");
        // a turn whose requests fail: unknown, and no time to export
        memory.record_probes("a", None, Some(None), 40.0);
        let times = memory.read_times_of("a");
        assert_eq!((times.liveness, times.readiness), (None, None));
        assert_eq!(memory.probes_of("a"), Probes::default());
        memory.forget_config("a");
        assert_eq!(memory.read_times_of("a").config, None);
    }
}
