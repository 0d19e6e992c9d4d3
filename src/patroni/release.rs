//! Which Patroni releases carry a change the exporter keys on: one table, by maintenance line.
//!
//! Why by line and not "≥ 4.1.1": Patroni maintains several lines at once (3.3.x, 4.0.x,
//! 4.1.x, then 4.2) and backports fixes into the older ones. The REST API's worker pool came
//! in 4.1.1 and in 3.3.9 and 4.0.8 too; the gauge `patroni_postgres_timeline` in 4.1.4, 3.3.11
//! and 4.0.10. Charmed PostgreSQL runs 3.3.x: a gate keyed to the newest line alone would call
//! its 3.3.9 a release without the pool. So each change is listed with the first release that
//! carries it on every line that has it ([`Feature::first_releases`]), checked against
//! Patroni's own branches (github.com/patroni/patroni, `git tag --contains` of each commit):
//!
//! | change | 3.3.x | 4.0.x | 4.1.x | 4.2 |
//! |---|---|---|---|---|
//! | REST worker pool `restapi.thread_pool_size` (#3526: 8af79d56 on REL_3_3, 3017dc1a on REL_4_0, 617a0330 on REL_4_1) | 3.3.9 | 4.0.8 | 4.1.1 | 4.2.0 |
//! | own `/metrics`: `patroni_postgres_timeline` a gauge (was a counter), no space before `patroni_postgres_server_version`'s labels (#3642: dabe8e95, 99c22cba, 1fc55f72) | 3.3.11 | 4.0.10 | 4.1.4 | 4.2.0 |
//! | `/readiness` wants a replica streaming and within `maximum_lag_on_failover` (#3250: 30915f33, not on REL_3_3 up to 3.3.11 nor REL_4_0 up to 4.0.10) | — | — | 4.1.0 | 4.2.0 |
//! | the `raft:` section's pysyncobj timing passed on (release/v4.2.0; none of REL_3_3, REL_4_0, REL_4_1 reads those keys) | — | — | — | 4.2.0 |
//!
//! A release of a line the table does not name has a change when its line is newer than the
//! line the change was first released on (5.0.0 has them all; 3.2.x and 4.0.x lack the Raft
//! timing).

/// A Patroni release as `major.minor.patch`, from its version string: each part's leading
/// digits, so a pre-release of 4.2.0 (`4.2.0rc1`, `4.2.0.dev0`) counts as 4.2.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PatroniRelease(pub u32, pub u32, pub u32);

impl PatroniRelease {
    /// `None` when the version does not start with three dot-separated numbers.
    pub fn parse(version: &str) -> Option<PatroniRelease> {
        let mut parts = version.trim().splitn(3, '.').map(|part| {
            let digits = part.len() - part.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            part[..digits].parse::<u32>().ok()
        });
        Some(PatroniRelease(
            parts.next()??,
            parts.next()??,
            parts.next()??,
        ))
    }

    /// Its maintenance line, `major.minor`.
    fn line(self) -> (u32, u32) {
        (self.0, self.1)
    }
}

impl std::fmt::Display for PatroniRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A change in Patroni that the exporter's judgements or docs depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// The REST API serves every request from a pool of `restapi.thread_pool_size` + 1
    /// workers (at least 5 + 1; `patroni/api.py`, `RestApiServer`); before, a thread per
    /// request.
    RestThreadPool,
    /// Patroni's own `/metrics` types `patroni_postgres_timeline` as a gauge (before: a
    /// counter, whose drop to 0 on every restart `rate()` and `increase()` read as a reset) and
    /// writes `patroni_postgres_server_version{…}` without the space before its labels.
    TimelineGauge,
    /// `GET /readiness` answers 200 for a replica only while it streams and its lag is within
    /// `maximum_lag_on_failover`; before, whenever its PostgreSQL runs and the DCS answers.
    ReadinessWantsStreaming,
    /// The `raft:` section's timing keys (`min_timeout`, `connection_timeout`, ...) are passed
    /// to pysyncobj; before, ignored (pysyncobj's defaults).
    RaftTiming,
}

impl Feature {
    pub const ALL: [Feature; 4] = [
        Feature::RestThreadPool,
        Feature::TimelineGauge,
        Feature::ReadinessWantsStreaming,
        Feature::RaftTiming,
    ];

    /// The first release carrying the change on each maintenance line that has it, oldest
    /// line first. The last is where it was first released; every newer line has it from its
    /// first release.
    pub const fn first_releases(self) -> &'static [PatroniRelease] {
        match self {
            Feature::RestThreadPool => &[
                PatroniRelease(3, 3, 9),
                PatroniRelease(4, 0, 8),
                PatroniRelease(4, 1, 1),
            ],
            Feature::TimelineGauge => &[
                PatroniRelease(3, 3, 11),
                PatroniRelease(4, 0, 10),
                PatroniRelease(4, 1, 4),
            ],
            Feature::ReadinessWantsStreaming => &[PatroniRelease(4, 1, 0)],
            Feature::RaftTiming => &[PatroniRelease(4, 2, 0)],
        }
    }

    /// Whether `release` carries the change.
    pub fn in_release(self, release: PatroniRelease) -> bool {
        let firsts = self.first_releases();
        match firsts.iter().find(|first| first.line() == release.line()) {
            Some(first) => release >= *first,
            None => firsts
                .last()
                .is_some_and(|origin| release.line() > origin.line()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_and_order() {
        let parse = PatroniRelease::parse;
        assert_eq!(parse("3.3.8"), Some(PatroniRelease(3, 3, 8)));
        assert_eq!(parse("4.2.0rc1"), Some(PatroniRelease(4, 2, 0)));
        assert_eq!(parse("4.2.0.dev0"), Some(PatroniRelease(4, 2, 0)));
        assert_eq!(parse(" 4.0.10\n"), Some(PatroniRelease(4, 0, 10)));
        assert_eq!(parse("4.1"), None);
        assert_eq!(parse("x.1.2"), None);
        assert_eq!(parse(""), None);
        assert!(parse("4.10.0") > parse("4.2.0"));
        assert!(parse("3.3.11") > parse("3.3.9"));
        assert_eq!(PatroniRelease(4, 0, 10).to_string(), "4.0.10");
    }

    /// The table at every boundary of every maintenance line: (release, [thread pool, gauge
    /// timeline, readiness wants streaming, Raft timing]).
    #[test]
    fn features_by_release_at_every_boundary() {
        use Feature::*;
        let table: &[(&str, [bool; 4])] = &[
            ("3.2.2", [false, false, false, false]),
            ("3.3.0", [false, false, false, false]),
            ("3.3.8", [false, false, false, false]),
            ("3.3.9", [true, false, false, false]),
            ("3.3.10", [true, false, false, false]),
            ("3.3.11", [true, true, false, false]),
            ("3.3.12", [true, true, false, false]),
            ("4.0.0", [false, false, false, false]),
            ("4.0.7", [false, false, false, false]),
            ("4.0.8", [true, false, false, false]),
            ("4.0.9", [true, false, false, false]),
            ("4.0.10", [true, true, false, false]),
            ("4.0.11", [true, true, false, false]),
            ("4.1.0", [false, false, true, false]),
            ("4.1.1", [true, false, true, false]),
            ("4.1.3", [true, false, true, false]),
            ("4.1.4", [true, true, true, false]),
            ("4.1.5", [true, true, true, false]),
            ("4.2.0rc1", [true, true, true, true]),
            ("4.2.0", [true, true, true, true]),
            ("4.3.0", [true, true, true, true]),
            ("5.0.0", [true, true, true, true]),
        ];
        for (version, expected) in table {
            let release = PatroniRelease::parse(version).unwrap();
            let got = [
                RestThreadPool,
                TimelineGauge,
                ReadinessWantsStreaming,
                RaftTiming,
            ]
            .map(|feature| feature.in_release(release));
            assert_eq!(&got, expected, "{version}");
        }
    }

    #[test]
    fn each_feature_is_listed_oldest_line_first_once_per_line() {
        for feature in Feature::ALL {
            let lines: Vec<(u32, u32)> =
                feature.first_releases().iter().map(|r| r.line()).collect();
            let mut sorted = lines.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(lines, sorted, "{feature:?}");
            assert!(!lines.is_empty(), "{feature:?}");
        }
    }

    /// The table against Patroni's own `/metrics` as captured from 3.3.8 and 4.1.5: the
    /// timeline's `# TYPE` and the space before `patroni_postgres_server_version`'s labels
    /// are what [`Feature::TimelineGauge`] says of each release.
    #[test]
    fn timeline_gauge_matches_patronis_captured_metrics() {
        for (version, metrics) in [
            ("3.3.8", "patroni-3.3.8/metrics-m0.txt"),
            ("4.1.5", "patroni-4.1.5/01-metrics-m0.txt"),
        ] {
            let text = String::from_utf8(crate::fixture(metrics)).unwrap();
            let gauge = Feature::TimelineGauge.in_release(PatroniRelease::parse(version).unwrap());
            let timeline_type = if gauge { "gauge" } else { "counter" };
            assert!(
                text.contains(&format!(
                    "# TYPE patroni_postgres_timeline {timeline_type}\n"
                )),
                "{version}: timeline is a {timeline_type}"
            );
            assert_eq!(
                text.contains("\npatroni_postgres_server_version {"),
                !gauge,
                "{version}: the stray space"
            );
            assert!(text.contains("\npatroni_postgres_server_version"));
        }
    }
}
