//! When the reader's `/history` and `/config` are asked: not in every poll, but when what they
//! hold may have changed, and at least every few polls.
//!
//! Why: every request costs the member a Python thread and a JSON document, and the reader
//! (the member whose `/cluster` the exporter reads) gets the most of a poll's requests. These
//! two documents change only when a promotion ends a timeline (`/history`) or when someone
//! edits the dynamic configuration (`/config`), and no alert needs them fresher than that:
//! - `/history` is asked when the highest timeline in `/cluster` differs from the one at the
//!   last read, while the history read does not reach that timeline yet (Patroni writes the
//!   new entry an HA loop after the promotion), after a failed read, and at least every
//!   [`HISTORY_REFRESH_POLLS`] polls (a history rewritten by hand). Its families
//!   (`patroni_cluster_history_entries`, `patroni_cluster_last_failover_timestamp_seconds`)
//!   feed no alert; the timeline itself comes from `/cluster` and `/patroni` in every poll.
//! - `/config` is asked every [`CONFIG_EVERY_POLLS`] polls, after a failed read, and in the
//!   poll after another member's own `/config` (asked in turn, [`super::members`]) differed
//!   from the cluster's: an edit is seen within two polls instead of one. The alerts that read
//!   the configuration (`patroni_config_*`, failover readiness) wait 2 minutes or more.
//!
//! Between two reads the last one is served, and exported with the time of the poll that read
//! it (`patroni_exporter_fact_read_timestamp_seconds{fact="config"|"history"}`): a value no
//! poll measured is never shown as current.
//!
//! `status` (one poll that must see everything) asks both every time.

use std::sync::Arc;

use super::requests::ReaderDue;
use crate::patroni::{ClusterView, DynamicConfig, HistoryEntry};

/// The longest run of polls without `/history` (5 minutes at the default 5 s interval).
pub const HISTORY_REFRESH_POLLS: u32 = 60;

/// The longest run of polls without the reader's `/config`: with 3 members, as often as each
/// member's own copy is read in turn.
pub const CONFIG_EVERY_POLLS: u32 = 3;

/// A `/history` served: its entries, and the Unix time of the poll that read them. Shared
/// between the cadence's memory and each poll's snapshot: a cluster's history only grows
/// (one entry per failover or switchover over its life) and is read again every few minutes,
/// but served by every poll.
pub(super) type TimedHistory = (Arc<[HistoryEntry]>, f64);

/// What the cadence remembers from one poll to the next.
#[derive(Debug, Default)]
pub(super) struct Cadence {
    /// The last `/history` read.
    history: Option<HistoryRead>,
    polls_since_history: u32,
    /// Polls since the last `/config` read (`None`: none read, or the last one failed).
    polls_since_config: Option<u32>,
    /// Another member's `/config` differed from the cluster's: read it again.
    config_suspect: bool,
    /// The reader's `/config` as last read: the cluster's dynamic configuration, and the
    /// Unix time of the poll that read it.
    config: Option<(DynamicConfig, f64)>,
    /// The member it was read from (`None`: a URL that no member's `api_url` names): that
    /// member's own copy too ([`Cadence::config_read_from`]).
    config_reader: Option<String>,
}

/// A `/history` read.
#[derive(Debug)]
struct HistoryRead {
    entries: Arc<[HistoryEntry]>,
    /// The highest timeline `/cluster` showed in the poll that read it.
    timeline: Option<u64>,
    /// The Unix time of the poll that read it.
    at: f64,
}

impl Cadence {
    /// Whether this poll asks `/history`, with `timeline` the highest in this poll's `/cluster`.
    pub(super) fn history_due(&self, timeline: Option<u64>) -> bool {
        let Some(read) = &self.history else {
            return true;
        };
        read.timeline != timeline
            || !reaches(&read.entries, timeline)
            || self.polls_since_history + 1 >= HISTORY_REFRESH_POLLS
    }

    /// Records a `/history` asked at `timeline` in the poll of Unix time `at`: its entries, or
    /// `None` when it failed (nothing is kept then: no history is served without a read).
    pub(super) fn history_read(
        &mut self,
        entries: Option<Arc<[HistoryEntry]>>,
        timeline: Option<u64>,
        at: f64,
    ) {
        self.history = entries.map(|entries| HistoryRead {
            entries,
            timeline,
            at,
        });
        self.polls_since_history = 0;
    }

    /// Which of the reader's documents this poll asks, of those whose collectors are on
    /// (`history_on`, `config_on`; `everything` in a `status` poll), and the highest timeline
    /// of this poll's `/cluster`, which `/history`'s cadence follows.
    pub(super) fn due(
        &self,
        cluster: Option<&ClusterView>,
        (history_on, config_on): (bool, bool),
        everything: bool,
    ) -> (ReaderDue, Option<u64>) {
        let timeline =
            cluster.and_then(|view| view.members.iter().filter_map(|m| m.timeline).max());
        let due = ReaderDue {
            history: history_on && (everything || self.history_due(timeline)),
            config: config_on && (everything || self.config_due()),
        };
        (due, timeline)
    }

    /// The reader's `/history` for the poll of Unix time `at`: the one `read` now at
    /// `timeline` when it was asked (`Some`: its entries, or `None` when it failed), else the
    /// last one read; with the time of the poll that read it.
    pub(super) fn history_of_poll(
        &mut self,
        read: Option<Option<Vec<HistoryEntry>>>,
        timeline: Option<u64>,
        at: f64,
    ) -> Option<TimedHistory> {
        let Some(history) = read else {
            return self.known_history();
        };
        let history: Option<Arc<[HistoryEntry]>> = history.map(Arc::from);
        self.history_read(history.clone(), timeline, at);
        history.map(|entries| (entries, at))
    }

    /// The last `/history` read and the time of the poll that read it, for a poll that did
    /// not ask it.
    pub(super) fn known_history(&mut self) -> Option<TimedHistory> {
        self.polls_since_history = self.polls_since_history.saturating_add(1);
        self.history
            .as_ref()
            .map(|read| (read.entries.clone(), read.at))
    }

    /// Whether this poll asks the reader's `/config`.
    pub(super) fn config_due(&self) -> bool {
        self.config_suspect
            || self
                .polls_since_config
                .map_or(true, |polls| polls + 1 >= CONFIG_EVERY_POLLS)
    }

    /// Records the reader's `/config` of this poll: `Some(true)` read, `Some(false)` failed,
    /// `None` not asked.
    pub(super) fn config_read(&mut self, answered: Option<bool>) {
        match answered {
            Some(true) => {
                self.polls_since_config = Some(0);
                self.config_suspect = false;
            }
            Some(false) => self.polls_since_config = None,
            None => {
                self.polls_since_config = self.polls_since_config.map(|p| p.saturating_add(1));
            }
        }
    }

    /// Another member's `/config` differed from the cluster's: ask the reader's next poll.
    pub(super) fn config_differs(&mut self) {
        self.config_suspect = true;
    }

    /// Keeps the `/config` read from the member named `reader` in the poll of Unix time `at`;
    /// true when it differs from the one read before (the first read is no change).
    pub(super) fn keep_config(
        &mut self,
        config: DynamicConfig,
        reader: Option<&str>,
        at: f64,
    ) -> bool {
        let changed = self.config().is_some_and(|known| *known != config);
        self.config = Some((config, at));
        self.config_reader = reader.map(str::to_owned);
        changed
    }

    /// The cluster's dynamic configuration when it was last read from `member`: that
    /// member's own copy, with the time of the poll that read it.
    pub(super) fn config_read_from(&self, member: &str) -> Option<(&DynamicConfig, f64)> {
        self.config
            .as_ref()
            .filter(|_| self.config_reader.as_deref() == Some(member))
            .map(|(config, at)| (config, *at))
    }

    /// The cluster's dynamic configuration: the reader's `/config` as last read.
    pub(super) fn config(&self) -> Option<&DynamicConfig> {
        self.config.as_ref().map(|(config, _)| config)
    }

    /// When the cluster's dynamic configuration was last read: the Unix time of that poll.
    pub(super) fn config_read_at(&self) -> Option<f64> {
        self.config.as_ref().map(|(_, at)| *at)
    }
}

/// Whether `entries` reach `timeline`: Patroni's entry for timeline N is written when N ends,
/// so on timeline T the newest entry is T - 1 (none on timeline 1).
fn reaches(entries: &[HistoryEntry], timeline: Option<u64>) -> bool {
    let Some(timeline) = timeline else {
        return true;
    };
    let newest = entries.iter().map(|e| e.timeline).max().unwrap_or(0);
    newest + 1 >= timeline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(timeline: u64) -> HistoryEntry {
        HistoryEntry {
            timeline,
            switch_lsn: 0,
            reason: "no recovery target specified".into(),
            timestamp_seconds: None,
            new_leader: None,
        }
    }

    #[test]
    fn history_is_asked_first_then_only_when_the_timeline_moves() {
        let mut cadence = Cadence::default();
        assert!(cadence.history_due(Some(3)));
        cadence.history_read(Some(vec![entry(1), entry(2)].into()), Some(3), 0.0);
        for _ in 0..10 {
            assert!(!cadence.history_due(Some(3)));
            assert_eq!(cadence.known_history().map(|(h, _)| h.len()), Some(2));
        }
        // a promotion: timeline 4, asked at once
        assert!(cadence.history_due(Some(4)));
    }

    #[test]
    fn history_is_asked_again_until_it_holds_the_new_timeline() {
        let mut cadence = Cadence::default();
        // Patroni has not written the entry of timeline 3 yet
        cadence.history_read(Some(vec![entry(1), entry(2)].into()), Some(4), 0.0);
        assert!(cadence.history_due(Some(4)));
        cadence.history_read(
            Some(vec![entry(1), entry(2), entry(3)].into()),
            Some(4),
            0.0,
        );
        assert!(!cadence.history_due(Some(4)));
        // timeline 1 has no entry; a member without a timeline asks nothing more
        cadence.history_read(Some(vec![].into()), Some(1), 0.0);
        assert!(!cadence.history_due(Some(1)));
        assert!(cadence.history_due(None));
        cadence.history_read(Some(vec![].into()), None, 0.0);
        assert!(!cadence.history_due(None));
    }

    #[test]
    fn history_is_asked_after_a_failure_and_at_least_every_refresh() {
        let mut cadence = Cadence::default();
        cadence.history_read(None, Some(2), 0.0);
        assert!(cadence.history_due(Some(2)));
        assert_eq!(cadence.known_history(), None);
        cadence.history_read(Some(vec![entry(1)].into()), Some(2), 0.0);
        let mut skipped = 0;
        while !cadence.history_due(Some(2)) {
            cadence.known_history();
            skipped += 1;
        }
        assert_eq!(skipped, HISTORY_REFRESH_POLLS - 1);
    }

    #[test]
    fn config_is_asked_every_few_polls_after_failures_and_differences() {
        let mut cadence = Cadence::default();
        assert!(cadence.config_due());
        cadence.config_read(Some(true));
        let mut asked = Vec::new();
        for _ in 0..6 {
            let due = cadence.config_due();
            asked.push(due);
            cadence.config_read(due.then_some(true));
        }
        assert_eq!(asked, [false, false, true, false, false, true]);
        // a failed read is asked again in the next poll
        cadence.config_read(Some(false));
        assert!(cadence.config_due());
        cadence.config_read(Some(true));
        // another member saw a different configuration: asked in the next poll, once
        cadence.config_differs();
        assert!(cadence.config_due());
        cadence.config_read(Some(true));
        assert!(!cadence.config_due());
    }

    #[test]
    fn the_clusters_config_is_a_members_own_copy_only_while_read_from_it() {
        let mut cadence = Cadence::default();
        let config = DynamicConfig::default();
        assert!(
            !cadence.keep_config(config.clone(), Some("a"), 1.0),
            "the first read is no change"
        );
        assert_eq!(cadence.config_read_from("a"), Some((&config, 1.0)));
        assert_eq!(cadence.config_read_from("b"), None);
        let changed = DynamicConfig {
            ttl_seconds: config.ttl_seconds + 1,
            ..config
        };
        assert!(cadence.keep_config(changed.clone(), Some("b"), 2.0));
        assert_eq!(cadence.config(), Some(&changed));
        assert_eq!(cadence.config_read_from("a"), None);
        assert_eq!(cadence.config_read_from("b"), Some((&changed, 2.0)));
        assert!(!cadence.keep_config(changed, None, 3.0));
        assert_eq!(cadence.config_read_from("b"), None);
    }

    /// A poll that does not ask `/config` serves the last read with that read's time; a read
    /// (changed or not) moves it; a failed read keeps the old one with its old time.
    #[test]
    fn the_clusters_config_keeps_the_time_of_the_poll_that_read_it() {
        let mut cadence = Cadence::default();
        assert_eq!(cadence.config_read_at(), None, "nothing read, no time");
        cadence.config_read(Some(true));
        cadence.keep_config(DynamicConfig::default(), Some("a"), 100.0);
        for _ in 1..CONFIG_EVERY_POLLS {
            assert!(!cadence.config_due());
            cadence.config_read(None);
            assert_eq!(
                cadence.config_read_at(),
                Some(100.0),
                "skipped: the old read"
            );
        }
        assert!(cadence.config_due());
        cadence.config_read(Some(false));
        assert_eq!(
            cadence.config_read_at(),
            Some(100.0),
            "failed: the old read"
        );
        cadence.config_read(Some(true));
        cadence.keep_config(DynamicConfig::default(), Some("a"), 115.0);
        assert_eq!(
            cadence.config_read_at(),
            Some(115.0),
            "read again, unchanged"
        );
    }

    /// The history served between two reads carries the time of the poll that read it; a
    /// failed read serves none, so no time either.
    #[test]
    fn the_history_keeps_the_time_of_the_poll_that_read_it() {
        let mut cadence = Cadence::default();
        let read = cadence.history_of_poll(Some(Some(vec![entry(1)])), Some(2), 10.0);
        assert_eq!(read, Some((vec![entry(1)].into(), 10.0)));
        let served = cadence.history_of_poll(None, Some(2), 15.0);
        assert_eq!(
            served,
            Some((vec![entry(1)].into(), 10.0)),
            "not asked: the old read"
        );
        let reread = cadence.history_of_poll(Some(Some(vec![entry(1)])), Some(2), 20.0);
        assert_eq!(reread.map(|(_, at)| at), Some(20.0));
        assert_eq!(cadence.history_of_poll(Some(None), Some(2), 25.0), None);
        assert_eq!(cadence.history_of_poll(None, Some(2), 30.0), None);
    }
}
