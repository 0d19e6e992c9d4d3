//! Typed views of Patroni's REST answers and the pure parsers that build them.
//!
//! The parsers take bytes and return values: no I/O, so every shape Patroni has been seen to
//! produce (3.x and 4.x, during switchover, failover and quorum loss) is tested against the
//! real captures in `tests/fixtures/`.
//!
//! Why the types are lenient in some places and strict in others:
//! * Fields that differ between versions or states are optional (`timeline` is missing for a
//!   stopped member, `receive_lag` exists only from 4.1, `lag` is the string `unknown` when
//!   a member has not reported an LSN). Unknown role and state strings are kept as seen,
//!   never dropped: an exporter that hides a value it does not know hides an incident.
//! * The fields that identify a member (`name`, `role`, `state`) and the types of the numbers
//!   are strict: a document that breaks them is not Patroni's, and is reported as a decode
//!   error rather than half-exported.
//!
//! One module per endpoint ([`cluster`], [`member`], [`history`]); the tags, the roles and
//! states ([`role`]), which two endpoints carry, and the timestamp format, which two
//! endpoints use, have their own.

mod cluster;
mod history;
mod member;
mod role;
mod tags;
mod timestamp;

pub use cluster::{
    parse_cluster, parse_compared_view, ApiUrl, ClusterView, ComparedMember, ComparedView, Lag,
    Member,
};
pub use history::{parse_history, HistoryEntry};
pub use member::{parse_member_status, MemberStatus, ReplicationPeer};
pub use role::{MemberRole, MemberState};
pub use tags::MemberTags;
pub use timestamp::parse_timestamp;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fixture;

    /// An `api_url` keeps its text as sent and is parsed when used; adopting an earlier one
    /// of the same text shares its parse, of another text changes nothing.
    #[test]
    fn api_urls_are_parsed_when_used_and_shared_when_adopted() {
        let earlier = ApiUrl::from("http://PG-0:8008/patroni");
        assert_eq!(earlier.as_str(), "http://PG-0:8008/patroni");
        assert_eq!(earlier.url().unwrap().as_str(), "http://pg-0:8008/patroni");
        let mut same = ApiUrl::from("http://PG-0:8008/patroni");
        same.adopt(&earlier);
        assert!(std::ptr::eq(same.url().unwrap(), earlier.url().unwrap()));
        let mut other = ApiUrl::from("http://pg-1:8008/patroni");
        other.adopt(&earlier);
        assert_eq!(other.as_str(), "http://pg-1:8008/patroni");
        assert_eq!(other.url().unwrap().host_str(), Some("pg-1"));
        let mut no_url = ApiUrl::from("not a url");
        no_url.adopt(&earlier);
        assert_eq!((no_url.as_str(), no_url.url()), ("not a url", None));
        // Equal by their texts, whether parsed yet or not.
        assert_eq!(ApiUrl::from("http://PG-0:8008/patroni"), earlier);
        assert_ne!(ApiUrl::from("http://pg-0:8008/patroni"), earlier);
    }

    #[test]
    fn cluster_3_3_8_healthy() {
        let view = parse_cluster(&fixture("patroni-3.3.8/cluster.json")).unwrap();
        assert_eq!(view.scope.as_deref(), Some("pg-test"));
        assert_eq!(view.members.len(), 3);
        assert_eq!(
            view.leaders().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["postgresql-0"]
        );
        assert_eq!(view.leader_timeline(), Some(1));
        let replica = &view.members[1];
        assert_eq!(replica.role.as_str(), "sync_standby");
        assert_eq!(replica.state.as_str(), "streaming");
        assert_eq!(replica.lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.receive_lag, None);
        assert_eq!(
            replica.api_url.as_ref().map(ApiUrl::as_str),
            Some("http://127.0.0.12:8008/patroni")
        );
        assert!(view.members[0].lag.is_none());
        assert!(!view.pause);
    }

    #[test]
    fn cluster_4_1_5_has_receive_and_replay_lag() {
        let view = parse_cluster(&fixture("patroni-4.1.5/01-cluster-from-m0.json")).unwrap();
        let replica = &view.members[2];
        assert_eq!(replica.receive_lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.replay_lag, Some(Lag::Bytes(0)));
        assert_eq!(replica.timeline, Some(1));
    }

    #[test]
    fn cluster_during_switchover_has_unknown_lag_and_no_timeline() {
        let view = parse_cluster(&fixture(
            "patroni-4.1.5/02-cluster-right-after-switchover.json",
        ))
        .unwrap();
        let old_leader = &view.members[0];
        assert_eq!(old_leader.role.as_str(), "replica");
        assert_eq!(old_leader.state.as_str(), "stopped");
        assert_eq!(old_leader.timeline, None);
        assert_eq!(old_leader.lag.as_ref().and_then(Lag::bytes), None);
        assert_eq!(old_leader.lag, Some(Lag::Text("unknown".into())));
        assert_eq!(view.leaders().next().unwrap().name, "postgresql-1");
    }

    #[test]
    fn every_captured_cluster_document_parses() {
        for dir in ["patroni-3.3.8", "patroni-4.1.5"] {
            let base = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
            for entry in std::fs::read_dir(&base).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if !name.ends_with(".json") {
                    continue;
                }
                let body = std::fs::read(&path).unwrap();
                if name.contains("cluster") {
                    let view = parse_cluster(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(!view.members.is_empty(), "{name}");
                } else if name.contains("patroni") {
                    let status =
                        parse_member_status(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert!(status.role.is_some(), "{name}");
                } else if name.contains("history") {
                    parse_history(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }

    #[test]
    fn quorum_loss_view_is_frozen_but_member_tells_the_truth() {
        // The survivor 60 s after losing quorum: /cluster still shows it as leader...
        let view = parse_cluster(&fixture("patroni-4.1.5/03-cluster-survivor-t+60s.json")).unwrap();
        let survivor = view
            .members
            .iter()
            .find(|m| m.name == "postgresql-1")
            .unwrap();
        assert!(survivor.is_leader());
        // ...while its own /patroni says it demoted itself.
        let own =
            parse_member_status(&fixture("patroni-4.1.5/03-patroni-survivor-t+60s.json")).unwrap();
        assert_eq!(own.role.as_ref().map(MemberRole::as_str), Some("replica"));
        assert!(!own.reports_primary());
    }

    #[test]
    fn member_status_3_3_8_master_is_normalized() {
        let status = parse_member_status(&fixture("patroni-3.3.8/patroni-m0.json")).unwrap();
        assert_eq!(
            status.role.as_ref().map(MemberRole::as_str),
            Some("primary")
        );
        assert_eq!(status.patroni_version.as_deref(), Some("3.3.8"));
        assert_eq!(status.patroni_version_number, Some(30308));
        assert!(status.wal_flush_bytes.is_some());
    }

    /// The number Patroni's own `/metrics` gives as `patroni_version` (captured next to the
    /// `/patroni` it is compared with: `patroni_version{...} 030308` and `040105`).
    #[test]
    fn patroni_version_number_is_patronis_own() {
        for (patroni, metrics) in [
            (
                "patroni-3.3.8/patroni-m0.json",
                "patroni-3.3.8/metrics-m0.txt",
            ),
            (
                "patroni-4.1.5/01-patroni-m0.json",
                "patroni-4.1.5/01-metrics-m0.txt",
            ),
        ] {
            let status = parse_member_status(&fixture(patroni)).unwrap();
            let text = String::from_utf8(fixture(metrics)).unwrap();
            let own: f64 = text
                .lines()
                .find(|l| l.starts_with("patroni_version{"))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                status.patroni_version_number.map(f64::from),
                Some(own),
                "{patroni}"
            );
        }
    }

    #[test]
    fn patroni_version_number_only_for_major_minor_patch() {
        use super::member::encode_patroni_version as encode;
        assert_eq!(encode("3.3.8"), Some(30308));
        assert_eq!(encode("4.1.5"), Some(40105));
        assert_eq!(encode("10.12.0"), Some(101200));
        assert_eq!(encode("04.01.05"), Some(40105));
        for bad in [
            "",
            "4",
            "4.1",
            "4.1.5.1",
            "4.1.0.dev0",
            "4.0.0rc1",
            "4.100.0",
            "4..5",
            "-4.1.5",
            "4.1.+5",
            " 4.1.5",
        ] {
            assert_eq!(encode(bad), None, "{bad:?}");
        }
        let status = parse_member_status(br#"{"patroni": {"version": "4.1.0.dev0"}}"#).unwrap();
        assert_eq!(status.patroni_version.as_deref(), Some("4.1.0.dev0"));
        assert_eq!(status.patroni_version_number, None);
    }

    #[test]
    fn member_status_replica_3_3_8() {
        let status = parse_member_status(&fixture("patroni-3.3.8/patroni-m1.json")).unwrap();
        assert_eq!(
            status.role.as_ref().map(MemberRole::as_str),
            Some("replica")
        );
        assert_eq!(
            status.state.as_ref().map(MemberState::as_str),
            Some("running")
        );
        assert_eq!(status.server_version, Some(150018));
        assert_eq!(status.wal_received_bytes, Some(67109008));
        assert_eq!(status.wal_replayed_bytes, Some(67109008));
        assert!(status.sync_standby);
        assert_eq!(
            status.replication_state.as_ref().map(MemberState::as_str),
            Some("streaming")
        );
        assert_eq!(status.dcs_last_seen_seconds, Some(1795312530));
        assert_eq!(status.patroni_name.as_deref(), Some("postgresql-1"));
        let start = status.postmaster_start_time_seconds.unwrap();
        // 2026-11-22 01:55:20.449452+00:00
        assert!((start - 1_795_312_520.449_452).abs() < 1e-3, "{start}");
        assert!(status.replayed_timestamp_seconds.is_some());
    }

    #[test]
    fn texts_with_escapes_are_read_as_the_plain_ones() {
        // Borrowed where they lie, copied when JSON escapes a character: the same values.
        let plain = parse_member_status(
            br#"{"state": "running", "role": "master", "replication_state": "streaming",
                 "postmaster_start_time": "2026-11-22 01:55:20.449452+00:00",
                 "xlog": {"replayed_timestamp": "2026-11-22 01:55:20.449452+00:00"},
                 "scheduled_restart": {"schedule": "2026-11-22T02:00:00+00:00"}}"#,
        )
        .unwrap();
        let escaped = parse_member_status(
            br#"{"state": "runn\u0069ng", "role": "mast\u0065r", "replication_state": "stream\u0069ng",
                 "postmaster_start_time": "2026-11-22 01:55:20.449452\u002b00:00",
                 "xlog": {"replayed_timestamp": "2026-11-22 01:55:20.449452\u002b00:00"},
                 "scheduled_restart": {"schedule": "2026-11-22T02:00:00\u002b00:00"}}"#,
        )
        .unwrap();
        assert_eq!(plain, escaped);
        assert_eq!(plain.role, Some(MemberRole::Primary));
        assert!(plain.postmaster_start_time_seconds.is_some());
        assert!(plain.replayed_timestamp_seconds.is_some());
        assert!(plain.scheduled_restart_seconds.is_some());
    }

    #[test]
    fn member_status_4_1_5_primary() {
        let status = parse_member_status(&fixture("patroni-4.1.5/01-patroni-m0.json")).unwrap();
        assert_eq!(
            status.role.as_ref().map(MemberRole::as_str),
            Some("primary")
        );
        assert_eq!(status.wal_flush_bytes, Some(67108952));
        assert_eq!(status.timeline, Some(1));
    }

    #[test]
    fn history_after_recovery() {
        let history =
            parse_history(&fixture("patroni-4.1.5/04-history-after-recovery.json")).unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[1].timeline, 2);
        assert_eq!(history[1].switch_lsn, 100663456);
        assert_eq!(history[1].new_leader.as_deref(), Some("postgresql-1"));
        // 2026-11-22T01:47:58.846824+00:00
        assert!((history[1].timestamp_seconds.unwrap() - 1_795_312_078.846_824).abs() < 1e-3);
        assert!(parse_history(&fixture("patroni-3.3.8/history.json"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn history_of_old_versions_has_three_elements() {
        let history = parse_history(br#"[[1, 25165984, "no recovery target specified"]]"#).unwrap();
        assert_eq!(history[0].timestamp_seconds, None);
        assert_eq!(history[0].new_leader, None);
    }

    #[test]
    fn tags_are_read_as_patroni_reads_them() {
        let status = |tags: &str| {
            parse_member_status(format!(r#"{{"state": "running", "tags": {tags}}}"#).as_bytes())
                .unwrap()
                .tags
        };
        let none = status("{}");
        assert_eq!(
            (none.any, none.nofailover, none.failover_priority),
            (false, false, 1)
        );
        let priority_zero = status(r#"{"failover_priority": 0}"#);
        assert!(
            priority_zero.nofailover,
            "failover_priority 0 means nofailover"
        );
        assert_eq!(priority_zero.failover_priority, 0);
        let overridden = status(r#"{"nofailover": false, "failover_priority": "0"}"#);
        assert!(
            !overridden.nofailover,
            "the boolean tag wins over the priority"
        );
        let truthy = status(
            r#"{"nofailover": "false", "nosync": 1, "noloadbalance": true, "clonefrom": true,
                "nostream": true, "replicatefrom": "postgresql-1"}"#,
        );
        assert!(
            truthy.nofailover,
            "Python's bool(\"false\") is true, as in Patroni"
        );
        assert_eq!(truthy.failover_priority, 0);
        assert!(truthy.nosync && truthy.noloadbalance && truthy.clonefrom && truthy.nostream);
        assert_eq!(truthy.replicatefrom.as_deref(), Some("postgresql-1"));
        assert_eq!(
            status("[1]"),
            MemberTags::default(),
            "tags that are not an object"
        );
    }

    #[test]
    fn member_signals_of_patroni_4_are_read() {
        let status = parse_member_status(
            br#"{"state": "running", "role": "replica", "watchdog_failed": true,
                 "failsafe_mode_is_active": true,
                 "scheduled_restart": {"schedule": "2026-11-23T15:00:00+00:00"},
                 "xlog": {"received_location": 5, "replayed_location": 4, "paused": true}}"#,
        )
        .unwrap();
        assert!(status.watchdog_failed && status.failsafe_active && status.wal_replay_paused);
        assert_eq!(status.scheduled_restart_seconds, Some(1_795_446_000.0));
        let leader = parse_member_status(&fixture("patroni-4.1.5/01-patroni-m0.json")).unwrap();
        assert_eq!(leader.replication.len(), 2);
        assert!(leader
            .replication
            .iter()
            .all(|p| p.is_streaming() && p.is_synchronous()));
        assert_eq!(leader.replication[0].application_name, "postgresql-2");
    }

    #[test]
    fn unknown_roles_and_states_are_kept() {
        let body = br#"{"scope":"x","members":[{"name":"a","role":"future_role","state":"creating replica"}]}"#;
        let view = parse_cluster(body).unwrap();
        assert_eq!(view.members[0].role.as_str(), "future_role");
        assert_eq!(view.members[0].state.as_str(), "creating replica");
    }

    #[test]
    fn roles_states_and_lags_by_their_json_types() {
        // an escaped string is the same role; a role that is no string and a lag that is
        // neither bytes nor a string are refused, as before
        let body = br#"{"members":[{"name":"a","role":"re\u0070lica","state":"streaming","lag":"unknown","replay_lag":7}]}"#;
        let view = parse_cluster(body).unwrap();
        assert_eq!(view.members[0].role, MemberRole::Replica);
        assert_eq!(view.members[0].lag, Some(Lag::Text("unknown".into())));
        assert_eq!(view.members[0].replay_lag, Some(Lag::Bytes(7)));
        for bad in [
            &br#"{"members":[{"name":"a","role":5,"state":"running"}]}"#[..],
            br#"{"members":[{"name":"a","role":"replica","state":"running","lag":-1}]}"#,
            br#"{"members":[{"name":"a","role":"replica","state":"running","lag":1.5}]}"#,
        ] {
            assert!(
                parse_cluster(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn api_url_is_kept_as_sent_and_read_as_a_url() {
        let body = br#"{"members":[
            {"name":"a","role":"leader","state":"running","api_url":"HTTP://Member-A:80/patroni"},
            {"name":"b","role":"replica","state":"running","api_url":"not a url"},
            {"name":"c","role":"replica","state":"running"}]}"#;
        let view = parse_cluster(body).unwrap();
        let parsed = view.members[0].api_url.as_ref().unwrap();
        assert_eq!(parsed.as_str(), "HTTP://Member-A:80/patroni");
        assert_eq!(
            parsed.url().map(url::Url::as_str),
            Some("http://member-a/patroni")
        );
        let unparseable = view.members[1].api_url.as_ref().unwrap();
        assert_eq!(unparseable.as_str(), "not a url");
        assert_eq!(unparseable.url(), None);
        assert_eq!(view.members[2].api_url, None);
        assert!(parse_cluster(
            br#"{"members":[{"name":"a","role":"leader","state":"running","api_url":7}]}"#
        )
        .is_err());
    }

    #[test]
    fn hostile_documents_are_decode_errors() {
        let deep = "[".repeat(100_000);
        for body in [
            b"not json".to_vec(),
            b"\xff\xfe{}".to_vec(),
            br#"{"members": "nope"}"#.to_vec(),
            br#"{"members":[{"name":"a","role":"leader","state":"running","timeline":-1}]}"#
                .to_vec(),
            br#"{"members":[{"name":"a","role":"leader","state":"running","lag":1e400}]}"#.to_vec(),
            br#"{"members":[{"name":"a","role":7,"state":"running"}]}"#.to_vec(),
            deep.into_bytes(),
        ] {
            assert_eq!(
                parse_cluster(&body).unwrap_err().kind(),
                crate::error_kind::ErrorKind::Decode
            );
        }
        assert!(parse_history(br#"[[1]]"#).is_err());
        assert!(parse_history(br#"[["x", 1, "r"]]"#).is_err());
        assert!(parse_member_status(br#"{"server_version": "15"}"#).is_err());
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        // serde_json refuses duplicate struct fields, which keeps a confused or hostile peer
        // from choosing which of two values the exporter believes.
        let body = br#"{"members":[],"members":[]}"#;
        assert!(parse_cluster(body).is_err());
    }

    /// Property tests of every Patroni decoder (a bounded number of cases, run in CI; the
    /// `fuzz/` targets run the same decoders for longer). Whatever the bytes, a parser
    /// returns a value or a `Decode` error: it never panics, and never takes long.
    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        fn fixtures() -> Vec<Vec<u8>> {
            let mut all = Vec::new();
            for dir in ["patroni-3.3.8", "patroni-4.1.5"] {
                let base = format!("{}/tests/fixtures/{dir}", env!("CARGO_MANIFEST_DIR"));
                let mut paths: Vec<_> = std::fs::read_dir(&base)
                    .unwrap()
                    .map(|entry| entry.unwrap().path())
                    .filter(|path| path.extension().is_some_and(|e| e == "json"))
                    .collect();
                paths.sort();
                all.extend(paths.iter().map(|path| std::fs::read(path).unwrap()));
            }
            all
        }

        fn all_parsers(body: &[u8]) {
            for result in [
                parse_cluster(body).map(|_| ()),
                parse_member_status(body).map(|_| ()),
                parse_history(body).map(|_| ()),
                crate::patroni::parse_dynamic_config(body).map(|_| ()),
            ] {
                if let Err(error) = result {
                    assert_eq!(
                        error.kind(),
                        crate::error_kind::ErrorKind::Decode,
                        "{error:?}"
                    );
                }
            }
        }

        /// Any JSON value, a few levels deep, with the keys Patroni uses.
        fn json() -> impl Strategy<Value = serde_json::Value> {
            let key = prop_oneof![
                Just("members".to_owned()),
                Just("name".to_owned()),
                Just("role".to_owned()),
                Just("state".to_owned()),
                Just("timeline".to_owned()),
                Just("lag".to_owned()),
                Just("api_url".to_owned()),
                Just("xlog".to_owned()),
                Just("location".to_owned()),
                Just("patroni".to_owned()),
                Just("postmaster_start_time".to_owned()),
                "[a-z_]{1,12}",
            ];
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<u64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                ".{0,24}".prop_map(serde_json::Value::from),
                Just(serde_json::Value::from("2026-11-22 01:46:11.074677+00:00")),
            ];
            leaf.prop_recursive(4, 64, 8, move |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..6)
                        .prop_map(serde_json::Value::Array),
                    proptest::collection::btree_map(key.clone(), inner, 0..8)
                        .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
                all_parsers(&body);
            }

            #[test]
            fn mutated_captures_never_panic(
                index in any::<usize>(),
                edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
                cut in any::<usize>(),
            ) {
                let all = fixtures();
                let mut body = all[index % all.len()].clone();
                for (position, byte) in edits {
                    let position = position % body.len();
                    body[position] = byte;
                }
                let cut = cut % (body.len() + 1);
                all_parsers(&body);
                all_parsers(&body[..cut]);
            }

            #[test]
            fn arbitrary_json_never_panics(value in json()) {
                all_parsers(&serde_json::to_vec(&value).unwrap());
                let wrapped = serde_json::json!({"scope": "s", "members": [value]});
                all_parsers(&serde_json::to_vec(&wrapped).unwrap());
            }

            #[test]
            fn timestamps_never_panic(text in ".{0,40}") {
                let _ = parse_timestamp(&text);
            }

            #[test]
            fn valid_members_round_trip(
                name in "[a-z0-9-]{1,20}",
                role in "[a-z_]{1,16}",
                state in "[a-z ]{1,16}",
                timeline in proptest::option::of(any::<u64>()),
                lag in proptest::option::of(any::<u64>()),
            ) {
                let body = serde_json::json!({"scope": "s", "members": [
                    {"name": name, "role": role, "state": state, "timeline": timeline, "lag": lag}
                ]});
                let view = parse_cluster(&serde_json::to_vec(&body).unwrap()).unwrap();
                let member = &view.members[0];
                prop_assert_eq!(&member.name, &name);
                prop_assert_eq!(member.role.as_str(), &role);
                prop_assert_eq!(member.timeline, timeline);
                prop_assert_eq!(member.lag.as_ref().and_then(Lag::bytes), lag);
            }
        }
    }
}
