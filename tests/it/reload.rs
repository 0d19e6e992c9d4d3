//! The binary with `--config.file`: duplicate clusters refused at start, and SIGHUP (a file
//! that cannot work keeps every running cluster; a good one applies). A file a cluster's
//! settings name (a CA) that does not load refuses the start, and a reload (web config too).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use patroni_raft_exporter::patroni::fake::FakePatroni;

use crate::support::pki::Pki;
use crate::support::{cluster_json, http_client, listed_member, sample, Captured, FakeCluster};

/// A `--config.file` entry with `scope` (when given) and `cluster`'s member URLs.
fn entry(scope: Option<&str>, cluster: &FakeCluster) -> String {
    let urls: Vec<String> = cluster.urls().iter().map(|url| url.to_string()).collect();
    let scope = scope.map_or(String::new(), |scope| format!("scope: {scope}\n    "));
    format!(
        "  - {scope}patroni_urls: [{}]\n    raft_enabled: false\n",
        urls.join(", ")
    )
}

fn write_config(path: &Path, entries: &[String]) {
    std::fs::write(path, format!("clusters:\n{}", entries.concat())).unwrap();
}

#[tokio::test]
async fn duplicate_scopes_or_urls_are_refused_at_start_naming_them() {
    let alpha = FakeCluster::start("alpha", Captured::healthy_415(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exporter.yml");
    for (entries, named) in [
        (
            vec![entry(Some("alpha"), &alpha), entry(Some("alpha"), &alpha)],
            "clusters[0] and clusters[1] both have scope alpha".to_owned(),
        ),
        (
            vec![entry(None, &alpha), entry(None, &alpha)],
            format!(
                "clusters[0] and clusters[1] both have no scope and the first REST URL {}",
                alpha.urls()[0]
            ),
        ),
    ] {
        write_config(&path, &entries);
        let out = Command::new(env!("CARGO_BIN_EXE_patroni-raft-exporter"))
            .arg("--config.file")
            .arg(&path)
            .args(["--web.listen-address", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{out:?}");
        assert!(stderr.contains(&named), "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    }
}

/// The binary with `args` (and `env`), its exit code, stdout and stderr; killed after 30 s
/// (the refused runs end at once; a run that is not refused would serve for ever).
async fn run_binary(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String, String) {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_patroni-raft-exporter"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the binary did not exit within 30 s")
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test]
async fn flags_of_one_cluster_given_beside_the_config_file_are_refused_at_start() {
    let alpha = FakeCluster::start("alpha", Captured::healthy_415(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exporter.yml");
    write_config(&path, &[entry(Some("alpha"), &alpha)]);
    let config = path.to_str().unwrap();
    let url = alpha.urls()[0].to_string();
    let secret = dir.path().join("raft-password");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let secret_path = secret.to_str().unwrap();
    // The exporter and `status`, with --patroni.url, --raft.node or a password file on the
    // command line; `status` exits 3 (UNKNOWN) on a usage error, the exporter 2.
    for args in [
        vec!["--config.file", config, "--patroni.url", &url],
        vec![
            "--web.listen-address",
            "127.0.0.1:0",
            "--config.file",
            config,
            "--patroni.url",
            &url,
        ],
        vec![
            "status",
            "--config.file",
            config,
            "--patroni.url",
            &url,
            "--timeout",
            "5s",
        ],
        vec![
            "status",
            "--raft.node",
            "127.0.0.11:2222",
            "--config.file",
            config,
        ],
        vec!["--config.file", config, "--raft.password-file", secret_path],
        vec![
            "--log.level",
            "warn",
            "status",
            "--patroni.password-file",
            secret_path,
            "--config.file",
            config,
        ],
    ] {
        let (code, stdout, stderr) = run_binary(&args, &[]).await;
        let usage_error = if args.contains(&"status") { 3 } else { 2 };
        assert_eq!(code, Some(usage_error), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        let flag = args.iter().find(|arg| {
            [
                "--patroni.url",
                "--raft.node",
                "--raft.password-file",
                "--patroni.password-file",
            ]
            .contains(arg)
        });
        assert!(
            stderr.starts_with("error: the argument '")
                && stderr.contains("' cannot be used with '")
                && stderr.contains("'--config.file <FILE>'")
                && stderr.contains(&format!("'{} <", flag.unwrap())),
            "{args:?}: {stderr}"
        );
    }
    // What the file's entries inherit, and a password file from the environment (which the
    // user may have set for another command line), are not refused.
    let args = [
        "status",
        "--config.file",
        config,
        "--poll.interval",
        "2s",
        "--timeout",
        "5s",
    ];
    let env = [("PATRONI_RAFT_EXPORTER_RAFT_PASSWORD_FILE", secret.as_path())];
    let (code, stdout, stderr) = run_binary(&args, &env).await;
    assert!(!stderr.contains("cannot be used with"), "{stderr}");
    assert!(matches!(code, Some(0 | 1)), "{code:?}: {stdout}{stderr}");
    assert!(stdout.contains("alpha"), "{stdout}");
}

/// The exporter binary on a free port of 127.0.0.1 with `--config.file`, killed when dropped.
struct Exporter {
    child: std::process::Child,
    metrics: String,
    /// The basic auth password of its endpoint (user `prometheus`), if any.
    web_password: Option<String>,
}

impl Exporter {
    fn start(config: &Path, log: &Path) -> Exporter {
        Exporter::start_with(config, log, &[])
    }

    fn start_with(config: &Path, log: &Path, args: &[&str]) -> Exporter {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_patroni-raft-exporter"))
            .arg("--config.file")
            .arg(config)
            .args(["--poll.interval", "1s"])
            .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdin(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        Exporter {
            child,
            metrics: format!("http://127.0.0.1:{port}/metrics"),
            web_password: None,
        }
    }

    /// The status of a `/metrics` request as the user `prometheus` with `password`.
    async fn status_with(&self, password: &str) -> u16 {
        http_client()
            .get(&self.metrics)
            .basic_auth("prometheus", Some(password))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    fn hang_up(&self) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on the PID of the child this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    }

    /// The first `/metrics` for which `until` holds, within 20 s.
    async fn scrape_until(&self, what: &str, until: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut request = http_client().get(&self.metrics);
            if let Some(password) = &self.web_password {
                request = request.basic_auth("prometheus", Some(password));
            }
            if let Ok(response) = request.timeout(Duration::from_secs(5)).send().await {
                let body = response.text().await.unwrap_or_default();
                if until(&body) {
                    return body;
                }
            }
            assert!(Instant::now() < deadline, "no /metrics with {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every series (name and labels) written twice.
fn repeated_series(metrics: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    metrics
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series.to_owned()))
        .filter(|series| !seen.insert(series.clone()))
        .collect()
}

const SUCCESSFUL: &str = "patroni_exporter_config_last_reload_successful";
const SUCCESS_AT: &str = "patroni_exporter_config_last_reload_success_timestamp_seconds";

fn last_poll(scope: &str) -> String {
    format!("patroni_exporter_last_poll_timestamp_seconds{{scope=\"{scope}\"}}")
}

/// A usage error of `status` exits 3 (UNKNOWN: it could not check), never 2 (CRITICAL); its
/// `--help` exits 0. A telemetry path the endpoint cannot serve is a usage error before
/// listening.
#[tokio::test]
async fn usage_errors_exit_before_anything_runs() {
    for (args, code, said) in [
        (
            vec!["status", "--no-such-flag"],
            Some(3),
            "unexpected argument",
        ),
        (vec!["status", "--timeout", "0s"], Some(3), "longer than 0"),
        (vec!["status", "--help"], Some(0), "Usage:"),
        (vec!["--no-such-flag"], Some(2), "unexpected argument"),
        (
            vec![
                "--web.telemetry-path",
                "/",
                "--patroni.url",
                "http://127.0.0.1:1",
            ],
            Some(2),
            "/ is the endpoint's own route",
        ),
        (
            vec![
                "--web.telemetry-path",
                "/-/ready",
                "--patroni.url",
                "http://127.0.0.1:1",
            ],
            Some(2),
            "/-/ready is the endpoint's own route",
        ),
        (
            vec![
                "--web.telemetry-path",
                "metrics",
                "--patroni.url",
                "http://127.0.0.1:1",
            ],
            Some(2),
            "must start with /",
        ),
    ] {
        let (exit, stdout, stderr) = run_binary(&args, &[]).await;
        assert_eq!(exit, code, "{args:?}: {stderr}");
        assert!(
            stdout.contains(said) || stderr.contains(said),
            "{args:?}: {stdout}{stderr}"
        );
        assert!(
            !stderr.contains("listening") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn a_reload_to_a_file_that_cannot_work_keeps_the_running_clusters() {
    let alpha = FakeCluster::start("alpha", Captured::healthy_415(0)).await;
    let beta = FakeCluster::start("beta", Captured::healthy_415(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let (path, log) = (dir.path().join("exporter.yml"), dir.path().join("stderr"));
    let good = [entry(Some("alpha"), &alpha), entry(Some("beta"), &beta)];
    write_config(&path, &good);
    let exporter = Exporter::start(&path, &log);
    let polled_both = |m: &str| {
        sample(m, &last_poll("alpha")).is_some() && sample(m, &last_poll("beta")).is_some()
    };
    let started = exporter.scrape_until("both clusters", polled_both).await;
    assert_eq!(sample(&started, SUCCESSFUL), Some(1.0), "{started}");
    let loaded_at = sample(&started, SUCCESS_AT).unwrap();

    // beta listed twice: refused, alpha and beta go on as they were
    write_config(
        &path,
        &[
            good[0].clone(),
            good[1].clone(),
            entry(Some("beta"), &alpha),
        ],
    );
    let hung_up = Instant::now();
    exporter.hang_up();
    let refused = exporter
        .scrape_until("the reload refused", |m| sample(m, SUCCESSFUL) == Some(0.0))
        .await;
    eprintln!("a refused reload shows in {:?}", hung_up.elapsed());
    assert_eq!(sample(&refused, SUCCESS_AT), Some(loaded_at), "{refused}");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("clusters[1] and clusters[2] both have scope beta"),
        "{log_text}"
    );
    // both still polled after the refusal, and never a series twice
    let alpha_before = sample(&refused, &last_poll("alpha")).unwrap();
    let beta_before = sample(&refused, &last_poll("beta")).unwrap();
    let polled_again = exporter
        .scrape_until("both clusters polled again", |m| {
            sample(m, &last_poll("alpha")).is_some_and(|at| at > alpha_before)
                && sample(m, &last_poll("beta")).is_some_and(|at| at > beta_before)
        })
        .await;
    for metrics in [&started, &refused, &polled_again] {
        assert_eq!(repeated_series(metrics), Vec::<String>::new(), "{metrics}");
    }
    assert_eq!(sample(&polled_again, SUCCESSFUL), Some(0.0));

    // a good file again (beta removed): applied, 1, a later timestamp
    write_config(&path, &good[..1]);
    exporter.hang_up();
    let applied = exporter
        .scrape_until("the reload applied", |m| {
            sample(m, SUCCESSFUL) == Some(1.0) && sample(m, &last_poll("beta")).is_none()
        })
        .await;
    assert!(
        sample(&applied, SUCCESS_AT).unwrap() > loaded_at,
        "{applied}"
    );
    assert!(sample(&applied, &last_poll("alpha")).is_some(), "{applied}");
    assert_eq!(repeated_series(&applied), Vec::<String>::new(), "{applied}");
}

/// An https member signed by `pki`'s CA, alone in the cluster `tls`, and a `--config.file`
/// polling it that trusts the CA at `ca` (a copy of `pki`'s that the test can spoil).
async fn tls_cluster(pki: &Pki, ca: &Path, config: &Path) -> FakePatroni {
    let member = FakePatroni::start_tls("127.0.0.1", pki.server_config(false)).await;
    member.route(
        "/cluster",
        cluster_json("tls", &[listed_member("m0", "leader", &member.url())]),
    );
    std::fs::copy(&pki.ca, ca).unwrap();
    std::fs::write(
        config,
        format!(
            "clusters:\n  - scope: tls\n    patroni_urls: [{}]\n    ca_file: {}\n    raft_enabled: false\n",
            member.url(),
            ca.display()
        ),
    )
    .unwrap();
    member
}

const GARBAGE_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";

#[tokio::test]
async fn a_ca_that_does_not_parse_refuses_the_start_naming_the_file() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (ca, config) = (dir.path().join("ca.pem"), dir.path().join("exporter.yml"));
    let _member = tls_cluster(&pki, &ca, &config).await;
    for garbage in [GARBAGE_PEM, "no PEM at all\n"] {
        std::fs::write(&ca, garbage).unwrap();
        assert_start_refused_naming(&config, &ca, "cluster tls").await;
    }
}

/// Starts the binary on `config` and checks that it exits 1 before listening, its error
/// naming the CA file `ca` and `cluster`.
async fn assert_start_refused_naming(config: &Path, ca: &Path, cluster: &str) {
    let args = [
        "--config.file",
        config.to_str().unwrap(),
        "--web.listen-address",
        "127.0.0.1:0",
    ];
    let (code, _, stderr) = run_binary(&args, &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("CA file {}", ca.display())) && stderr.contains(cluster),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
}

/// The same for etcd's CA: a file of the cluster's DCS settings, checked before the start.
#[tokio::test]
async fn an_etcd_ca_that_does_not_parse_refuses_the_start_naming_the_file() {
    let alpha = FakeCluster::start("alpha", Captured::healthy_415(0)).await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, config) = (
        dir.path().join("etcd-ca.pem"),
        dir.path().join("exporter.yml"),
    );
    std::fs::write(&ca, GARBAGE_PEM).unwrap();
    let urls: Vec<String> = alpha.urls().iter().map(|url| url.to_string()).collect();
    std::fs::write(
        &config,
        format!(
            "clusters:\n  - scope: alpha\n    patroni_urls: [{}]\n    etcd_endpoints: [https://127.0.0.1:2379]\n    etcd_ca_file: {}\n",
            urls.join(", "),
            ca.display()
        ),
    )
    .unwrap();
    assert_start_refused_naming(&config, &ca, "cluster alpha").await;
}

fn write_web_config(path: &Path, password: &str) {
    std::fs::write(
        path,
        format!(
            "basic_auth_users:\n  prometheus: '{}'\n",
            bcrypt::hash(password, 4).unwrap()
        ),
    )
    .unwrap();
}

/// SIGHUP with a CA turned into garbage and a new web password: refused whole (the gauge 0,
/// the CA named in the log, the cluster still polled, the old web password still the one),
/// and applied once the CA is good again.
#[tokio::test]
async fn a_reload_with_a_ca_that_does_not_parse_is_refused_whole() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (ca, config) = (dir.path().join("ca.pem"), dir.path().join("exporter.yml"));
    let (web, log) = (dir.path().join("web.yml"), dir.path().join("stderr"));
    let _member = tls_cluster(&pki, &ca, &config).await;
    write_web_config(&web, "first-pass");
    let mut exporter =
        Exporter::start_with(&config, &log, &["--web.config.file", web.to_str().unwrap()]);
    exporter.web_password = Some("first-pass".to_owned());
    let up = "patroni_up{scope=\"tls\"}";
    let started = exporter
        .scrape_until("the TLS cluster up", |m| sample(m, up) == Some(1.0))
        .await;
    assert_eq!(sample(&started, SUCCESSFUL), Some(1.0), "{started}");
    let loaded_at = sample(&started, SUCCESS_AT).unwrap();

    std::fs::write(&ca, GARBAGE_PEM).unwrap();
    write_web_config(&web, "second-pass");
    exporter.hang_up();
    let refused = exporter
        .scrape_until("the reload refused", |m| sample(m, SUCCESSFUL) == Some(0.0))
        .await;
    assert_eq!(sample(&refused, SUCCESS_AT), Some(loaded_at), "{refused}");
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains(&format!("CA file {}", ca.display()))
            && log_text.contains("configuration not reloaded"),
        "{log_text}"
    );
    // The new web config was not applied: the old password still opens /metrics.
    assert_eq!(exporter.status_with("second-pass").await, 401);
    assert_eq!(exporter.status_with("first-pass").await, 200);
    let polled_at = sample(&refused, &last_poll("tls")).unwrap();
    let polled_again = exporter
        .scrape_until("the cluster polled again", |m| {
            sample(m, &last_poll("tls")).is_some_and(|at| at > polled_at)
        })
        .await;
    assert_eq!(sample(&polled_again, up), Some(1.0), "{polled_again}");

    // The good CA back: applied, the new web password with it.
    std::fs::copy(&pki.ca, &ca).unwrap();
    exporter.hang_up();
    exporter.web_password = Some("second-pass".to_owned());
    let applied = exporter
        .scrape_until("the reload applied", |m| sample(m, SUCCESSFUL) == Some(1.0))
        .await;
    assert!(
        sample(&applied, SUCCESS_AT).unwrap() > loaded_at,
        "{applied}"
    );
    assert_eq!(exporter.status_with("first-pass").await, 401);
    let polled_at = sample(&applied, &last_poll("tls")).unwrap();
    let polled_again = exporter
        .scrape_until("the cluster polled after the reload", |m| {
            sample(m, &last_poll("tls")).is_some_and(|at| at > polled_at)
        })
        .await;
    assert_eq!(sample(&polled_again, up), Some(1.0), "{polled_again}");
}
