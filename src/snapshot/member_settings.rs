//! What a member runs with that depends on its Patroni version: the Raft timing in force on
//! its pysyncobj node, the size of its REST worker pool, and what its `GET /readiness` means.
//!
//! Why by version: the same `patroni.yaml` means different things to different Patroni
//! releases. Patroni 4.2.0 passes the `raft:` section's timing keys to pysyncobj; 4.1.x, 4.0.x
//! and 3.x ignore them and run pysyncobj's defaults (`patroni/dcs/raft.py`). Patroni 3.3.9,
//! 4.0.8 and 4.1.1 serve their REST API from a pool of `restapi.thread_pool_size` + 1 workers
//! (`patroni/api.py`, `RestApiServer`: at least 5 + 1); before, a thread per request. And
//! `/readiness` asks more of a replica from 4.1.0 on. Which release carries which is
//! [`Feature`]'s table. A member's version is known from its own `GET /patroni`, so these are
//! judged per member, in the snapshot, and a member that did not answer has none.

use super::cluster::ClusterSnapshot;
use super::model::{member_hosts, MemberSnapshot, RaftNodeSnapshot};
use crate::address::Host;
use crate::config::MemberSettings;
use crate::patroni::{Feature, PatroniRelease};
use crate::raft::RaftSetting;

impl PatroniRelease {
    /// The release of a member, from its own `GET /patroni`.
    pub fn of(member: &MemberSnapshot) -> Option<PatroniRelease> {
        let own = member.own_view.as_ref().ok()?;
        PatroniRelease::parse(own.patroni_version.as_deref()?)
    }
}

/// Where a member's value of a setting comes from: the `source` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingSource {
    /// The member's release honours the setting and `--patroni.config-file` sets it.
    ConfigFile,
    /// pysyncobj's default: the member's release ignores the setting, or the file does not set it.
    PysyncobjDefault,
    /// Patroni's own default: the file does not set it.
    PatroniDefault,
    /// The member's release honours the setting but the exporter reads no Patroni config
    /// file: the default, assumed.
    NoConfigFile,
}

impl SettingSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SettingSource::ConfigFile => "config_file",
            SettingSource::PysyncobjDefault => "pysyncobj_default",
            SettingSource::PatroniDefault => "patroni_default",
            SettingSource::NoConfigFile => "no_config_file",
        }
    }
}

/// One setting in force on a member, and where its value comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InForce {
    pub value: f64,
    pub source: SettingSource,
}

/// The value of a setting on a member of `release`: the file's when the release honours it
/// (carries `feature`) and the file sets it; else `default`, from `default_source` (or
/// [`SettingSource::NoConfigFile`] when the release would honour a file the exporter lacks).
fn in_force(
    release: PatroniRelease,
    feature: Feature,
    settings: Option<&MemberSettings>,
    configured: impl Fn(&MemberSettings) -> Option<f64>,
    default: f64,
    default_source: SettingSource,
) -> InForce {
    let default_from = |source| InForce {
        value: default,
        source,
    };
    if !feature.in_release(release) {
        return default_from(SettingSource::PysyncobjDefault);
    }
    match settings {
        None => default_from(SettingSource::NoConfigFile),
        Some(settings) => match configured(settings) {
            Some(value) => InForce {
                value,
                source: SettingSource::ConfigFile,
            },
            None => default_from(default_source),
        },
    }
}

/// The REST worker pool's `thread_pool_size` when the file gives none, and its least value.
pub const PATRONI_REST_THREAD_POOL_SIZE: f64 = 5.0;

impl ClusterSnapshot {
    /// The Raft timing in force on a member's pysyncobj node, setting by setting; `None` when
    /// its release is unknown (it did not answer its own `GET /patroni`).
    pub fn raft_timing_of(
        &self,
        member: &MemberSnapshot,
    ) -> Option<impl Iterator<Item = (RaftSetting, InForce)> + '_> {
        let release = PatroniRelease::of(member)?;
        Some(RaftSetting::ALL.into_iter().map(move |setting| {
            let value = in_force(
                release,
                Feature::RaftTiming,
                self.member_settings.as_ref(),
                |settings| settings.raft_timing.get(setting),
                setting.pysyncobj_default(),
                SettingSource::PysyncobjDefault,
            );
            (setting, value)
        }))
    }

    /// One setting of [`ClusterSnapshot::raft_timing_of`].
    pub fn raft_setting_of(
        &self,
        member: &MemberSnapshot,
        setting: RaftSetting,
    ) -> Option<InForce> {
        self.raft_timing_of(member)?
            .find(|(each, _)| *each == setting)
            .map(|(_, value)| value)
    }

    /// The `connectionTimeout` in force on a Raft node: that of the member on the node's
    /// host. `None` for a node no member with a known release runs on (a witness: the
    /// watcher's `patroni_raft_controller` has no REST API to tell its version).
    pub fn node_connection_timeout(&self, node: &RaftNodeSnapshot) -> Option<InForce> {
        let host = Host::of_node(&node.node).ok()?;
        self.members_and_departed()
            .filter(|m| member_hosts(&m.member).contains(&host))
            .find_map(|m| self.raft_setting_of(m, RaftSetting::ConnectionTimeout))
    }

    /// The `restapi.thread_pool_size` in force on a member (its REST API has one more worker
    /// than that); `None` for a release without the pool (a thread per request: before 3.3.9,
    /// 4.0.8, 4.1.1) and when its release is unknown.
    pub fn rest_thread_pool_size_of(&self, member: &MemberSnapshot) -> Option<InForce> {
        let release = PatroniRelease::of(member)?;
        if !Feature::RestThreadPool.in_release(release) {
            return None;
        }
        let mut size = in_force(
            release,
            Feature::RestThreadPool,
            self.member_settings.as_ref(),
            |settings| settings.rest_thread_pool_size,
            PATRONI_REST_THREAD_POOL_SIZE,
            SettingSource::PatroniDefault,
        );
        // `max(5, int(thread_pool_size))` in patroni/api.py
        size.value = size.value.trunc().max(PATRONI_REST_THREAD_POOL_SIZE);
        Some(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PatroniYaml;
    use crate::snapshot::captured;

    /// A captured cluster whose members say `version` in their own `GET /patroni`, watched
    /// with the Patroni YAML fixture `yaml` (or none).
    fn cluster(version: &str, yaml: Option<&str>) -> ClusterSnapshot {
        let (view, mut members) = captured(
            "patroni-4.1.5/01-cluster-from-m0.json",
            "patroni-4.1.5/01-patroni-m{i}.json",
        );
        for member in &mut members {
            member.own_view.as_mut().unwrap().patroni_version = Some(version.to_owned());
        }
        let member_settings = yaml.map(|name| {
            let path = format!(
                "{}/tests/fixtures/patroni-yaml/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            PatroniYaml::load(std::path::Path::new(&path))
                .unwrap()
                .member_settings()
        });
        ClusterSnapshot {
            cluster: Some(view),
            members,
            member_settings,
            ..ClusterSnapshot::default()
        }
    }

    fn connection_timeout(snapshot: &ClusterSnapshot) -> Vec<(f64, &'static str)> {
        snapshot
            .members
            .iter()
            .map(|m| {
                let value = snapshot
                    .raft_setting_of(m, RaftSetting::ConnectionTimeout)
                    .unwrap();
                (value.value, value.source.as_str())
            })
            .collect()
    }

    /// The done-when of issue 36: the config files of a 3.3.8 and a 4.1.5 cluster give 3.5 s,
    /// a 4.2-style one with `raft.connection_timeout: 6` gives 6 s on a 4.2 member, and the
    /// same file read for 3.3.8 and 4.1.5 members still 3.5 s (they ignore it).
    #[test]
    fn effective_connection_timeout_by_release_and_file() {
        let default = vec![(3.5, "pysyncobj_default"); 3];
        assert_eq!(
            connection_timeout(&cluster("3.3.8", Some("patroni-3.3.8.yml"))),
            default
        );
        assert_eq!(
            connection_timeout(&cluster("4.1.5", Some("patroni-4.1.5.yml"))),
            default
        );
        assert_eq!(
            connection_timeout(&cluster("4.2.0", Some("patroni-4.2-raft-timing.yml"))),
            vec![(6.0, "config_file"); 3]
        );
        for older in ["3.3.8", "3.3.11", "4.0.10", "4.1.5"] {
            assert_eq!(
                connection_timeout(&cluster(older, Some("patroni-4.2-raft-timing.yml"))),
                default,
                "{older} ignores raft.connection_timeout"
            );
        }
        // a 4.2 member, the file without the key: pysyncobj's default; no file at all: assumed
        assert_eq!(
            connection_timeout(&cluster("4.2.0", Some("patroni-4.1.5.yml"))),
            default
        );
        assert_eq!(
            connection_timeout(&cluster("4.2.0", None)),
            vec![(3.5, "no_config_file"); 3]
        );
    }

    #[test]
    fn every_raft_setting_of_the_42_file() {
        let snapshot = cluster("4.2.0", Some("patroni-4.2-raft-timing.yml"));
        let timing: Vec<(&str, f64, &str)> = snapshot
            .raft_timing_of(&snapshot.members[0])
            .unwrap()
            .map(|(setting, value)| (setting.key(), value.value, value.source.as_str()))
            .collect();
        assert_eq!(
            timing,
            [
                ("min_timeout", 1.0, "config_file"),
                ("max_timeout", 3.0, "config_file"),
                ("connection_timeout", 6.0, "config_file"),
                ("append_entries_period", 0.1, "pysyncobj_default"),
                ("connection_retry_time", 5.0, "pysyncobj_default"),
                ("leader_fallback_timeout", 45.0, "config_file"),
            ]
        );
    }

    #[test]
    fn a_member_that_did_not_answer_has_no_timing() {
        let mut snapshot = cluster("4.2.0", Some("patroni-4.2-raft-timing.yml"));
        snapshot.members[1].own_view = Err(crate::snapshot::Failure {
            kind: crate::error_kind::ErrorKind::Timeout,
            message: "timed out".into(),
        });
        assert!(snapshot.raft_timing_of(&snapshot.members[1]).is_none());
        assert!(snapshot
            .rest_thread_pool_size_of(&snapshot.members[1])
            .is_none());
    }

    #[test]
    fn raft_nodes_take_the_timeout_of_the_member_on_their_host() {
        let snapshot = cluster("4.2.0", Some("patroni-4.2-raft-timing.yml"));
        let node = |addr: &str| RaftNodeSnapshot {
            node: addr.to_owned(),
            status: Err(crate::snapshot::Failure {
                kind: crate::error_kind::ErrorKind::Connect,
                message: String::new(),
            }),
            round_trip: None,
        };
        let host = snapshot.members[2].member.host.clone().unwrap();
        assert_eq!(
            snapshot
                .node_connection_timeout(&node(&format!("{host}:2222")))
                .map(|t| t.value),
            Some(6.0)
        );
        assert_eq!(
            snapshot.node_connection_timeout(&node("10.9.9.9:2222")),
            None
        );
    }

    /// `restapi.thread_pool_size`: none before 3.3.9, 4.0.8 and 4.1.1, on each line; 5 when
    /// unset; at least 5 when set.
    #[test]
    fn rest_thread_pool_size_by_release_and_file() {
        let size = |version, yaml| {
            let snapshot = cluster(version, yaml);
            snapshot
                .rest_thread_pool_size_of(&snapshot.members[0])
                .map(|size| (size.value, size.source.as_str()))
        };
        assert_eq!(size("3.3.8", Some("patroni-3.3.8.yml")), None);
        assert_eq!(size("4.1.0", Some("patroni-4.2-raft-timing.yml")), None);
        for (without, with) in [("3.3.8", "3.3.9"), ("4.0.7", "4.0.8"), ("4.1.0", "4.1.1")] {
            assert_eq!(size(without, Some("patroni-4.2-raft-timing.yml")), None);
            assert_eq!(
                size(with, Some("patroni-4.2-raft-timing.yml")),
                Some((8.0, "config_file")),
                "{with} backports the pool"
            );
            assert_eq!(size(with, None), Some((5.0, "no_config_file")));
        }
        assert_eq!(
            size("3.3.11", Some("patroni-3.3.8.yml")),
            Some((5.0, "patroni_default"))
        );
        assert_eq!(
            size("4.1.5", Some("patroni-4.1.5.yml")),
            Some((5.0, "patroni_default"))
        );
        assert_eq!(
            size("4.1.5", Some("patroni-4.2-raft-timing.yml")),
            Some((8.0, "config_file"))
        );
        assert_eq!(size("4.1.5", None), Some((5.0, "no_config_file")));
        let mut small = cluster("4.1.5", Some("patroni-4.1.5.yml"));
        small
            .member_settings
            .as_mut()
            .unwrap()
            .rest_thread_pool_size = Some(2.0);
        assert_eq!(
            small
                .rest_thread_pool_size_of(&small.members[0])
                .map(|s| s.value),
            Some(5.0),
            "Patroni raises it to 5"
        );
    }
}
