//! Settings resolved from flags, the config file and Patroni's YAML; the api_url policy.

use std::time::Duration;

use super::file::Inherited;
use super::*;
use crate::secret::Secret;

fn defaults() -> Inherited {
    Inherited::default()
}

#[test]
fn config_file_with_two_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("raft-pw");
    std::fs::write(&password, "raft-pass\n").unwrap();
    let path = dir.path().join("exporter.yml");
    std::fs::write(
        &path,
        format!(
            "clusters:\n  - scope: a\n    patroni_urls: [http://127.0.0.11:8008]\n    poll_interval: 10s\n    raft_password_file: {}\n  - patroni_urls: [http://127.0.0.21:8008, http://127.0.0.22:8008]\n    raft_enabled: false\n",
            password.display()
        ),
    )
    .unwrap();
    let file = ConfigFile::load(&path).unwrap();
    let a = file.clusters[0].resolve(&defaults()).unwrap();
    assert_eq!(a.identity.expected_scope.as_deref(), Some("a"));
    assert_eq!(a.poll.interval, Duration::from_secs(10));
    assert_eq!(a.poll.timeout, Duration::from_secs(2));
    assert_eq!(
        a.identity
            .dcs
            .raft()
            .unwrap()
            .password
            .as_ref()
            .unwrap()
            .expose(),
        "raft-pass"
    );
    let b = file.clusters[1].resolve(&defaults()).unwrap();
    assert_eq!(b.identity.patroni_urls.len(), 2);
    assert!(b.identity.dcs.raft().is_none());
}

#[test]
fn unknown_keys_are_errors() {
    let (_dir, path) = crate::temp_file("exporter.yml", "clusters:\n  - patroni_url: http://x\n");
    assert!(ConfigFile::load(&path).is_err());
}

#[test]
fn charmed_postgresql_patroni_yaml() {
    let (_dir, path) = crate::temp_file(
        "patroni.yaml",
        "scope: postgresql\nnamespace: /db/\nname: postgresql-0\nrestapi:\n  listen: '10.1.2.3:8008'\n  connect_address: '10.1.2.3:8008'\n  certfile: /var/snap/charmed-postgresql/current/etc/patroni/cert.pem\n  cafile: /var/snap/charmed-postgresql/current/etc/patroni/ca.pem\n  authentication:\n    username: patroni\n    password: rest-secret\nraft:\n  data_dir: /var/snap/charmed-postgresql/common/var/lib/postgresql/raft\n  self_addr: '10.1.2.3:2222'\n  partner_addrs:\n  - 10.1.2.4:2222\n  - 10.1.2.5:2222\n  password: raft-secret\nbootstrap:\n  dcs:\n    ttl: 30\n",
    );
    let entry = ClusterEntry {
        patroni_config_file: Some(path),
        ..ClusterEntry::default()
    };
    let config = entry.resolve(&defaults()).unwrap();
    let identity = &config.identity;
    assert_eq!(identity.patroni_urls[0].as_str(), "https://10.1.2.3:8008/");
    assert_eq!(identity.expected_scope.as_deref(), Some("postgresql"));
    let raft = config.identity.dcs.raft().unwrap();
    assert_eq!(
        raft.nodes,
        ["10.1.2.3:2222", "10.1.2.4:2222", "10.1.2.5:2222"]
    );
    assert_eq!(raft.password.as_ref().unwrap().expose(), "raft-secret");
    assert!(config.rest.ca_file.is_some());
    // The password never shows in Debug output of the resolved settings.
    let debug = format!("{:?}", entry_debug_probe());
    assert!(!debug.contains("raft-secret"));
}

/// The shape Charmed PostgreSQL's `templates/patroni.yml.j2` (postgresql-charms-single-kernel
/// 16.3.20, machine substrate) renders: REST TLS with the peer files and no `verify_client`,
/// `ctl` with only the CA, REST authentication (for Patroni's unsafe methods), the watcher's
/// Raft address last in `partner_addrs`, and the YAML 1.1 the rest of the file holds.
/// tests/e2e/charm-config.sh runs the exporter on the real rendering.
#[test]
fn charmed_postgresql_rendered_template() {
    let (_dir, path) = crate::temp_file(
        "patroni.yml",
        r#"# patroni configuration file maintained by the postgres-operator
scope: postgresql
namespace: /db/
name: postgresql-0

log:
  dateformat: "%Y-%m-%d %H:%M:%S %Z"
  format: "%(asctime)s [%(process)d]: %(levelname)s: %(message)s "

restapi:
  listen: '10.1.2.3:8008'
  connect_address: '10.1.2.3:8008'
  authentication:
    username: patroni
    password: rest-secret
  cafile: /var/snap/charmed-postgresql/current/etc/patroni/peer_ca.pem
  certfile: /var/snap/charmed-postgresql/current/etc/patroni/peer_cert.pem
  keyfile: /var/snap/charmed-postgresql/current/etc/patroni/peer_key.pem

ctl:
  cacert: /var/snap/charmed-postgresql/current/etc/patroni/peer_ca.pem

raft:
  data_dir: /var/snap/charmed-postgresql/current/etc/patroni/raft
  self_addr: '10.1.2.3:2222'
  password: raft-secret
  partner_addrs:
  - 10.1.2.4:2222
  - 10.1.2.9:2223

bootstrap:
  dcs:
    ttl: 30
    synchronous_mode: true
    postgresql:
      parameters:
        synchronous_standby_names: "*"
        archive_mode: on
        log_line_prefix: '%t [%p]: user=%u,db=%d,app=%a,client=%h,line=%l '
    slots:
  initdb:
  - encoding: UTF8
  - data-checksums

postgresql:
  listen: '10.1.2.3:5432'
  pg_hba:
    - local all backup peer map=operator
    - host replication replication 10.1.2.4/0 scram-sha-256
  pg_ident:
  - operator _daemon_ backup
use_unix_socket: true
"#,
    );
    let entry = ClusterEntry {
        patroni_config_file: Some(path),
        ..ClusterEntry::default()
    };
    let config = entry.resolve(&defaults()).unwrap();
    let identity = &config.identity;
    assert_eq!(identity.patroni_urls[0].as_str(), "https://10.1.2.3:8008/");
    assert_eq!(identity.expected_scope.as_deref(), Some("postgresql"));
    // the peer CA verifies the members, as for patronictl (ctl.cacert)
    assert_eq!(
        config.rest.ca_file,
        Some("/var/snap/charmed-postgresql/current/etc/patroni/peer_ca.pem".into())
    );
    assert!(!config.rest.insecure_skip_verify);
    // no verify_client: the members ask no client certificate, and Patroni's own clients
    // present none (ctl has no certfile)
    assert!(config.rest.cert_file.is_none() && config.rest.key_file.is_none());
    // restapi.authentication guards Patroni's unsafe methods; the exporter only GETs
    assert!(config.rest.basic_auth.is_none());
    let raft = config.identity.dcs.raft().unwrap();
    assert_eq!(
        raft.nodes,
        ["10.1.2.3:2222", "10.1.2.4:2222", "10.1.2.9:2223"]
    );
    assert_eq!(raft.password.as_ref().unwrap().expose(), "raft-secret");
    assert!(config
        .identity
        .allow_api_url_hosts
        .contains(&"10.1.2.9".to_owned()));
}

fn entry_debug_probe() -> RaftSettings {
    RaftSettings {
        nodes: vec![],
        port: 2222,
        password: Some(Secret::new("raft-secret")),
        command: None,
    }
}

#[test]
fn patroni_yaml_client_certificate_only_when_members_ask_for_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("patroni.yaml");
    let base = "scope: pg\nrestapi:\n  connect_address: 10.1.2.3:8008\n  certfile: /etc/p/cert.pem\n  keyfile: /etc/p/key.pem\n  keyfile_password: key-secret\n  cafile: /etc/p/ca.pem\n";
    let entry = ClusterEntry {
        patroni_config_file: Some(path.clone()),
        raft_enabled: Some(false),
        ..ClusterEntry::default()
    };
    std::fs::write(&path, base).unwrap();
    let config = entry.resolve(&defaults()).unwrap();
    assert!(config.rest.cert_file.is_none() && config.rest.key_password.is_none());
    std::fs::write(&path, format!("{base}  verify_client: required\n")).unwrap();
    let config = entry.resolve(&defaults()).unwrap();
    assert_eq!(config.rest.cert_file, Some("/etc/p/cert.pem".into()));
    assert_eq!(config.rest.key_file, Some("/etc/p/key.pem".into()));
    assert_eq!(
        config.rest.key_password.as_ref().unwrap().expose(),
        "key-secret"
    );
    assert!(!format!("{config:?}").contains("key-secret"));
    // patronictl's own section wins, as in Patroni.
    std::fs::write(
        &path,
        format!("{base}  verify_client: required\nctl:\n  certfile: /etc/p/ctl.pem\n  keyfile: /etc/p/ctl.key\n  cacert: /etc/p/ctl-ca.pem\n  insecure: true\n"),
    )
    .unwrap();
    let config = entry.resolve(&defaults()).unwrap();
    assert_eq!(config.rest.cert_file, Some("/etc/p/ctl.pem".into()));
    assert_eq!(config.rest.ca_file, Some("/etc/p/ctl-ca.pem".into()));
    assert!(config.rest.key_password.is_none());
    assert!(config.rest.insecure_skip_verify);
}

#[test]
fn api_url_policy() {
    let config = ClusterConfig {
        identity: ClusterIdentity {
            patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
            dcs: DcsSettings::Raft(RaftSettings {
                nodes: vec!["10.0.0.2:2222".into(), "[fd00::3]:2222".into()],
                port: 2222,
                password: None,
                command: None,
            }),
            allow_api_url_hosts: vec!["192.168.0.0/16".into(), "Member-4.example".into()],
            ..ClusterIdentity::default()
        },
        ..ClusterConfig::default()
    };
    let policy = ApiUrlPolicy::for_cluster(&config).unwrap();
    for allowed in [
        "http://10.0.0.1:8008/patroni",
        "http://10.0.0.2:8008/patroni",
        "http://[fd00::3]:8008/patroni",
        "http://192.168.7.9:8008/patroni",
        "https://member-4.example:8008/patroni",
    ] {
        assert!(
            policy.allows_url(&Url::parse(allowed).unwrap()),
            "{allowed}"
        );
    }
    for refused in [
        "http://10.0.0.9:8008/patroni",
        "http://169.254.169.254/latest/meta-data",
        "http://user:pw@10.0.0.1:8008/patroni",
        "ftp://10.0.0.1/patroni",
        "http://member-5.example:8008/patroni",
    ] {
        assert!(
            !policy.allows_url(&Url::parse(refused).unwrap()),
            "{refused}"
        );
    }
    let mut any = ApiUrlPolicy::default();
    any.add_entry("*").unwrap();
    assert!(any.allows_host(&crate::address::Host::parse("anything").unwrap()));
    for bad in ["10.0.0.0/33", "http://x", "", "a/b", "db-0:8008"] {
        assert!(ApiUrlPolicy::default().add_entry(bad).is_err(), "{bad}");
    }
}

/// A reload rebuilds what the settings allow and keeps what the DCS named: credentials
/// added by a reload never reach a host only a plain-text Raft status named, and a reload
/// that removes them follows such hosts again.
#[test]
fn a_reload_judges_learned_hosts_by_the_new_credentials() {
    let plain_config = ClusterConfig {
        identity: ClusterIdentity {
            patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
            ..ClusterIdentity::default()
        },
        ..ClusterConfig::default()
    };
    let mut with_credentials = plain_config.clone();
    with_credentials.rest.basic_auth = Some(crate::patroni::BasicAuth {
        username: "u".into(),
        password: Secret::new("p"),
    });
    let named_by_plain_status = Url::parse("http://10.0.0.7:8008/patroni").unwrap();

    let mut before = ApiUrlPolicy::for_cluster(&plain_config).unwrap();
    before.learn_raft_hosts(["10.0.0.7:2222"], false);
    assert!(before.allows_url(&named_by_plain_status));

    // Credentials added: the learned host stays learned, but gets no credential.
    let added = ApiUrlPolicy::reconfigured(&with_credentials, before.learned.clone()).unwrap();
    assert_eq!(added.learned, before.learned);
    assert!(!added.allows_url(&named_by_plain_status));
    // The same settings without the reload's rule would have kept the old flag.
    assert!(before.allows_url(&named_by_plain_status));

    // Credentials removed again: followed again, without asking the DCS first.
    let removed = ApiUrlPolicy::reconfigured(&plain_config, added.learned.clone()).unwrap();
    assert!(removed.allows_url(&named_by_plain_status));

    // A host an authenticated status named is trusted whatever the credentials.
    let mut vouched = ApiUrlPolicy::for_cluster(&plain_config).unwrap();
    vouched.learn_raft_hosts(["10.0.0.8:2222"], true);
    let reloaded = ApiUrlPolicy::reconfigured(&with_credentials, vouched.learned).unwrap();
    assert!(reloaded.allows_url(&Url::parse("http://10.0.0.8:8008/patroni").unwrap()));
}

/// A voter removed from Raft (the charm's `syncobj_admin -remove` on a scale-down) is no
/// longer named by any status, but its member stays in `/cluster` until its key expires: its
/// `api_url` is still followed, with the trust it had, until `/cluster` lists it no more.
#[test]
fn a_host_the_dcs_stops_naming_is_followed_while_cluster_lists_it() {
    use crate::address::Host;
    use std::collections::BTreeSet;
    let config = ClusterConfig {
        identity: ClusterIdentity {
            patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
            ..ClusterIdentity::default()
        },
        rest: crate::patroni::ClientSettings {
            basic_auth: Some(crate::patroni::BasicAuth {
                username: "u".into(),
                password: Secret::new("p"),
            }),
            ..crate::patroni::ClientSettings::default()
        },
        ..ClusterConfig::default()
    };
    let removed = Url::parse("http://10.0.0.3:8008/patroni").unwrap();
    let mut policy = ApiUrlPolicy::for_cluster(&config).unwrap();
    policy.learn_raft_hosts(["10.0.0.2:2222", "10.0.0.3:2222"], true);
    assert!(policy.allows_url(&removed));
    // -remove: the statuses name two voters; /cluster still lists the member on 10.0.0.3.
    policy.learn_raft_hosts(["10.0.0.2:2222"], true);
    let listed: BTreeSet<Host> = ["10.0.0.2", "10.0.0.3"]
        .into_iter()
        .map(|h| Host::parse(h).unwrap())
        .collect();
    policy.learned.keep_listed(|| listed.clone());
    assert!(
        policy.allows_url(&removed),
        "still listed: still followed, with credentials"
    );
    // Not for a Raft query: only what a status names is asked on the Raft port.
    assert!(!policy.allows_raft_query(&Host::parse("10.0.0.3").unwrap()));
    // Its key expired: /cluster no longer lists it, nor is it followed.
    policy
        .learned
        .keep_listed(|| listed.iter().take(1).cloned().collect());
    assert!(!policy.allows_url(&removed));
    // Nothing retired any more: the hosts listed are not even gathered.
    policy
        .learned
        .keep_listed(|| unreachable!("nothing retired"));
    // Named again (-add): trusted again.
    policy.learn_raft_hosts(["10.0.0.2:2222", "10.0.0.3:2222"], true);
    assert!(policy.allows_url(&removed));
}

#[test]
fn a_cluster_needs_a_url() {
    assert!(ClusterEntry::default().resolve(&defaults()).is_err());
}

#[test]
fn parse_errors_name_the_line_never_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "root:x:0:0:root:/root:/bin/bash\nhunter2:x:1:1::/:/bin/sh\n",
            "wrong type",
        ),
        (
            "clusters:\n  - scope: a\n    hunter2_key: hunter2\n",
            "unknown key",
        ),
        (
            "clusters:\n  - scope: a\n    poll_interval: hunter2\n",
            "clusters[0]",
        ),
        ("clusters: [\"hunter2\"\n", "at line"),
    ];
    for (text, says) in cases {
        let path = dir.path().join("exporter.yml");
        std::fs::write(&path, text).unwrap();
        let error = format!("{:#}", ConfigFile::load(&path).unwrap_err());
        assert!(!error.contains("hunter2"), "{error}");
        assert!(!error.contains("root:x"), "{error}");
        assert!(error.contains("exporter.yml"), "{error}");
        assert!(error.contains(says), "{error}");
    }
}

#[test]
fn settings_that_cannot_work_are_refused() {
    let entry = |interval: &str, timeout: &str, concurrency: usize| ClusterEntry {
        patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
        poll_interval: Some(humantime::parse_duration(interval).unwrap()),
        poll_timeout: Some(humantime::parse_duration(timeout).unwrap()),
        max_concurrency: Some(concurrency),
        ..ClusterEntry::default()
    };
    assert!(entry("5s", "2s", 8).resolve(&defaults()).is_ok());
    assert!(entry("5s", "5s", 1).resolve(&defaults()).is_ok());
    for (interval, timeout, concurrency, says) in [
        ("0s", "0s", 8, "interval must be longer than 0"),
        ("5s", "0s", 8, "timeout must be longer than 0"),
        ("1s", "5s", 8, "longer than the poll interval"),
        ("5s", "2s", 0, "concurrency must be at least 1"),
    ] {
        let error = entry(interval, timeout, concurrency)
            .resolve(&defaults())
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{error}");
    }
}

#[test]
fn a_short_interval_alone_clamps_the_default_timeout_but_an_explicit_one_is_checked() {
    let entry = |interval: &str, timeout: Option<&str>| ClusterEntry {
        patroni_urls: vec![Url::parse("http://10.0.0.1:8008").unwrap()],
        poll_interval: Some(humantime::parse_duration(interval).unwrap()),
        poll_timeout: timeout.map(|t| humantime::parse_duration(t).unwrap()),
        ..ClusterEntry::default()
    };
    let short = entry("1s", None)
        .resolve(&defaults())
        .expect("an interval of 1s alone must be accepted");
    assert_eq!(short.poll.timeout, Duration::from_secs(1));
    let long = entry("10s", None).resolve(&defaults()).unwrap();
    assert_eq!(long.poll.timeout, Duration::from_secs(2));
    let error = entry("1s", Some("2s"))
        .resolve(&defaults())
        .unwrap_err()
        .to_string();
    assert!(error.contains("longer than the poll interval"), "{error}");
}

#[test]
fn standby_of_names_another_cluster_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exporter.yml");
    let load = |text: &str| {
        std::fs::write(&path, text).unwrap();
        ConfigFile::load(&path)
    };
    let file = load(
        "clusters:\n  - scope: main\n    patroni_urls: [http://127.0.0.11:8008]\n  - scope: dr\n    patroni_urls: [http://127.0.0.21:8008]\n    standby_of: main\n",
    )
    .unwrap();
    let dr = file.clusters[1].resolve(&defaults()).unwrap();
    assert_eq!(dr.identity.standby_of.as_deref(), Some("main"));
    assert_eq!(
        file.clusters[0]
            .resolve(&defaults())
            .unwrap()
            .identity
            .standby_of,
        None
    );

    let error = format!(
        "{:#}",
        load("clusters:\n  - scope: dr\n    patroni_urls: [http://127.0.0.21:8008]\n    standby_of: main\n")
            .unwrap_err()
    );
    assert!(
        error.contains("standby_of: main names no cluster of this file"),
        "{error}"
    );
    let error = format!(
        "{:#}",
        load("clusters:\n  - scope: dr\n    patroni_urls: [http://127.0.0.21:8008]\n    standby_of: dr\n")
            .unwrap_err()
    );
    assert!(error.contains("names the cluster itself"), "{error}");
}

#[test]
fn two_entries_with_one_scope_or_unscoped_first_url_are_refused_naming_it() {
    for (file, named) in [
        (
            "clusters:\n  - scope: alpha\n    patroni_urls: [http://127.0.0.11:8008]\n  - scope: beta\n    patroni_urls: [http://127.0.0.21:8008]\n  - scope: alpha\n    patroni_urls: [http://127.0.0.31:8008]\n",
            "clusters[0] and clusters[2] both have scope alpha",
        ),
        (
            "clusters:\n  - patroni_urls: [http://127.0.0.11:8008]\n  - patroni_urls: [http://127.0.0.11:8008, http://127.0.0.12:8008]\n",
            "clusters[0] and clusters[1] both have no scope and the first REST URL http://127.0.0.11:8008/",
        ),
    ] {
        let (_dir, path) = crate::temp_file("exporter.yml", file);
        let error = format!(
            "{:#}",
            ConfigFile::load_clusters(&path, &defaults()).unwrap_err()
        );
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains(named), "{error}");
    }
}

#[test]
fn distinct_scopes_and_urls_load() {
    let (_dir, path) = crate::temp_file(
        "exporter.yml",
        "clusters:\n  - scope: alpha\n    patroni_urls: [http://127.0.0.11:8008]\n  - patroni_urls: [http://127.0.0.11:8008]\n  - patroni_urls: [http://127.0.0.21:8008]\n",
    );
    let names: Vec<String> = ConfigFile::load_clusters(&path, &defaults())
        .unwrap()
        .iter()
        .map(ClusterConfig::name)
        .collect();
    assert_eq!(
        names,
        [
            "alpha",
            "http://127.0.0.11:8008/",
            "http://127.0.0.21:8008/"
        ]
    );
}

#[test]
fn the_same_cluster_is_its_identity_whatever_the_request_settings() {
    let base = ClusterEntry {
        scope: Some("alpha".into()),
        patroni_urls: vec![Url::parse("http://127.0.0.11:8008").unwrap()],
        ..ClusterEntry::default()
    };
    let config = base.resolve(&defaults()).unwrap();
    let requests = ClusterEntry {
        poll_interval: Some(Duration::from_secs(10)),
        poll_timeout: Some(Duration::from_secs(3)),
        max_body_bytes: Some(1024),
        insecure_skip_verify: Some(true),
        ..base.clone()
    }
    .resolve(&defaults())
    .unwrap();
    assert!(config.same_cluster(&requests));
    for other in [
        ClusterEntry {
            scope: Some("beta".into()),
            ..base.clone()
        },
        ClusterEntry {
            allow_api_url_hosts: vec!["10.0.0.0/8".into()],
            ..base.clone()
        },
        ClusterEntry {
            raft_port: Some(2223),
            ..base.clone()
        },
        ClusterEntry {
            disabled_collectors: vec![Collector::History],
            ..base.clone()
        },
    ] {
        let other = other.resolve(&defaults()).unwrap();
        assert!(!config.same_cluster(&other), "{other:?}");
    }
}

#[test]
fn members_settings_from_patroni_yaml_are_not_what_makes_another_cluster() {
    // What the members run with (raft.* timing, restapi.thread_pool_size) is read for the
    // settings in force, not for what is watched: the same file with other values is the
    // same cluster; the same values from another member's file (other Raft partners) is not.
    let yaml = |partner: &str, timeout: &str, pool: u32| {
        format!(
            "scope: pg\nrestapi:\n  connect_address: '127.0.0.11:8008'\n  thread_pool_size: {pool}\nraft:\n  self_addr: '127.0.0.11:2222'\n  partner_addrs: ['{partner}']\n  connection_timeout: {timeout}\n"
        )
    };
    let resolve = |text: String| {
        let (dir, path) = crate::temp_file("patroni.yaml", text);
        let config = ClusterEntry {
            patroni_config_file: Some(path),
            ..ClusterEntry::default()
        }
        .resolve(&defaults())
        .unwrap();
        drop(dir);
        config
    };
    let before = resolve(yaml("127.0.0.12:2222", "3.5", 5));
    for changed in [
        yaml("127.0.0.12:2222", "6", 5),
        yaml("127.0.0.12:2222", "3.5", 8),
    ] {
        let after = resolve(changed);
        assert_ne!(after.member_settings, before.member_settings);
        assert!(before.same_cluster(&after), "{after:?}");
    }
    let other_partner = resolve(yaml("127.0.0.13:2222", "3.5", 5));
    assert_eq!(other_partner.member_settings, before.member_settings);
    assert!(!before.same_cluster(&other_partner));
}

/// etcd from flags: the endpoints, Patroni's default namespace, and the prefix Patroni builds.
#[test]
fn etcd_from_flags() {
    let entry = ClusterEntry {
        patroni_urls: vec![Url::parse("http://127.0.0.11:8008").unwrap()],
        etcd_endpoints: vec![Url::parse("http://127.0.0.31:2379").unwrap()],
        ..ClusterEntry::default()
    };
    let config = entry.resolve(&defaults()).unwrap();
    let etcd = config.identity.dcs.etcd().expect("etcd is the DCS");
    assert_eq!(etcd.endpoints.len(), 1);
    assert_eq!(etcd.namespace, "/service");
    assert_eq!(etcd.prefix("pg-test"), "/service/pg-test/");
    assert!(config.identity.dcs.raft().is_none());
    // Patroni collapses repeated slashes: namespace "/db/" gives /db/pg/.
    let with_namespace = EtcdSettings {
        namespace: "/db/".into(),
        ..etcd.clone()
    };
    assert_eq!(with_namespace.prefix("pg"), "/db/pg/");
    // The configured endpoint's host is a configured host of the policy.
    let policy = ApiUrlPolicy::for_cluster(&config).unwrap();
    assert!(policy.allows_url(&Url::parse("http://127.0.0.31:8008/patroni").unwrap()));
    // Plain http without credentials: listed endpoints are asked, nothing is vouched for.
    assert!(etcd.follows_listed_endpoints());
    assert!(!etcd.authenticated());
}

/// One cluster has one DCS: Raft settings beside etcd ones are a usage error, and etcd
/// settings without an endpoint too.
#[test]
fn etcd_and_raft_on_one_cluster_is_refused() {
    let url = Url::parse("http://127.0.0.11:8008").unwrap();
    let both = ClusterEntry {
        patroni_urls: vec![url.clone()],
        etcd_endpoints: vec![Url::parse("http://127.0.0.31:2379").unwrap()],
        raft_nodes: vec!["127.0.0.11:2222".into()],
        ..ClusterEntry::default()
    };
    let error = both.resolve(&defaults()).unwrap_err().to_string();
    assert!(error.contains("one DCS"), "{error}");
    let no_endpoint = ClusterEntry {
        patroni_urls: vec![url],
        etcd_username: Some("patroni-ro".into()),
        ..ClusterEntry::default()
    };
    let error = no_endpoint.resolve(&defaults()).unwrap_err().to_string();
    assert!(error.contains("without an etcd endpoint"), "{error}");
}

/// Patroni's `etcd3:` in every form Patroni takes: `hosts` as a list or a comma-separated
/// string, `host`, `url`, with `protocol`; its TLS files, user and password, and `namespace`.
#[test]
fn etcd_from_patroni_yaml() {
    let cases = [
        (
            "hosts: ['10.0.0.1:2379', '10.0.0.2:2379']",
            vec!["http://10.0.0.1:2379/", "http://10.0.0.2:2379/"],
        ),
        (
            "hosts: 10.0.0.1:2379,10.0.0.2:2379\n  protocol: https",
            vec!["https://10.0.0.1:2379/", "https://10.0.0.2:2379/"],
        ),
        ("host: 10.0.0.1:2379", vec!["http://10.0.0.1:2379/"]),
        (
            "url: https://etcd.example:2379",
            vec!["https://etcd.example:2379/"],
        ),
    ];
    for (section, expected) in cases {
        let text = format!("scope: pg\nnamespace: /db/\nrestapi:\n  connect_address: '10.0.0.1:8008'\netcd3:\n  {section}\n  cacert: /etc/etcd/ca.pem\n  username: patroni\n  password: etcd-secret\n");
        let (_dir, path) = crate::temp_file("patroni.yml", text);
        let entry = ClusterEntry {
            patroni_config_file: Some(path),
            ..ClusterEntry::default()
        };
        let config = entry.resolve(&defaults()).unwrap();
        let etcd = config.identity.dcs.etcd().expect("etcd is the DCS");
        let got: Vec<String> = etcd.endpoints.iter().map(Url::to_string).collect();
        assert_eq!(got, expected, "{section}");
        assert_eq!(etcd.prefix("pg"), "/db/pg/");
        assert_eq!(etcd.username.as_deref(), Some("patroni"));
        assert_eq!(etcd.password.as_ref().unwrap().expose(), "etcd-secret");
        assert_eq!(
            etcd.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/etcd/ca.pem"))
        );
        assert!(etcd.authenticated(), "credentials vouch for what etcd says");
    }
    let both = "scope: pg\nrestapi:\n  connect_address: '10.0.0.1:8008'\netcd3:\n  host: 10.0.0.1:2379\nraft:\n  self_addr: '10.0.0.1:2222'\n";
    let (_dir, path) = crate::temp_file("patroni.yml", both);
    let entry = ClusterEntry {
        patroni_config_file: Some(path),
        ..ClusterEntry::default()
    };
    assert!(entry.resolve(&defaults()).is_err());
}
