//! The command line, in the dotted style of Prometheus exporters (`--web.listen-address`).
//!
//! Secrets are never flag values: only paths to files that hold them.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, CommandFactory, Parser, Subcommand, ValueEnum};
use url::Url;

use crate::config::{ClusterConfig, ClusterEntry, ConfigFile, Defaults};
use crate::status::StatusArgs;

/// Prometheus exporter for Patroni clusters on the Raft (pysyncobj) DCS.
#[derive(Debug, Clone, Parser)]
#[command(name = "patroni-raft-exporter", version, about, long_about = None)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Address to serve metrics on.
    #[arg(long = "web.listen-address", default_value = ":9393")]
    pub listen_address: String,

    /// Path under which to expose metrics.
    #[arg(long = "web.telemetry-path", default_value = "/metrics")]
    pub telemetry_path: String,

    /// Exporter-toolkit web configuration (TLS and basic auth of this endpoint); re-read on
    /// SIGHUP. Without it, plain http.
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<PathBuf>,

    /// Log level: error, warn, info, debug, trace (or a tracing filter). Default: info for
    /// the exporter, error for `status` (whose output already lists the problems).
    #[arg(long = "log.level", global = true)]
    pub log_level: Option<String>,

    /// Log format.
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt, global = true)]
    pub log_format: LogFormat,

    /// Print the man page or a shell completion script to stdout and exit. For packagers
    /// (`make deb`), so hidden: generated from these definitions, they never drift from them.
    #[arg(long = "generate", value_enum, value_name = "WHAT", hide = true)]
    pub generate: Option<Generated>,
}

/// What `--generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    /// man page, section 1 (roff)
    Man,
    CompleteBash,
    CompleteZsh,
    CompleteFish,
}

/// Writes the man page or a completion script of the whole command line (subcommands
/// included) to `out`.
///
/// # Errors
/// When `out` cannot be written.
pub fn generate(what: Generated, out: &mut dyn Write) -> std::io::Result<()> {
    use clap_complete::Shell;
    let mut command = Args::command();
    let name = command.get_name().to_owned();
    let shell = match what {
        Generated::Man => return clap_mangen::Man::new(command).render(out),
        Generated::CompleteBash => Shell::Bash,
        Generated::CompleteZsh => Shell::Zsh,
        Generated::CompleteFish => Shell::Fish,
    };
    clap_complete::generate(shell, &mut command, name, out);
    Ok(())
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Poll once and print the clusters' state and problems; exit 0 OK, 1 WARNING,
    /// 2 CRITICAL, 3 UNKNOWN (Nagios plugin convention). Never hangs (--timeout).
    Status(StatusArgs),
}

/// What to watch and how to reach it: shared by the exporter and `status`.
#[derive(Debug, Clone, ClapArgs)]
pub struct ClusterArgs {
    /// REST base URL of a member, e.g. http://10.0.0.1:8008 (repeatable). GET /cluster is
    /// asked of the first that answers; more members are learned from their api_url.
    #[arg(long = "patroni.url", value_name = "URL")]
    pub patroni_urls: Vec<Url>,

    /// Expected cluster name (scope); a /cluster answer naming another cluster is an error.
    #[arg(long = "patroni.scope", value_name = "NAME")]
    pub patroni_scope: Option<String>,

    /// Patroni's own YAML (e.g. Charmed PostgreSQL's patroni.yaml): supplies the REST URL,
    /// the CA, the Raft partners and the Raft password when not given otherwise.
    #[arg(long = "patroni.config-file", value_name = "FILE")]
    pub patroni_config_file: Option<PathBuf>,

    /// PEM CA bundle trusted for https member URLs (in addition to the system roots).
    #[arg(long = "patroni.ca-file", value_name = "FILE")]
    pub patroni_ca_file: Option<PathBuf>,

    /// Accept any TLS certificate from members (insecure; logged as a warning).
    #[arg(long = "patroni.insecure-skip-verify")]
    pub patroni_insecure_skip_verify: bool,

    /// PEM client certificate for members with `verify_client: required` (with --patroni.key-file).
    #[arg(long = "patroni.cert-file", value_name = "FILE")]
    pub patroni_cert_file: Option<PathBuf>,

    /// PEM private key of --patroni.cert-file (PKCS#8, PKCS#1 or SEC1; may be encrypted).
    #[arg(long = "patroni.key-file", value_name = "FILE")]
    pub patroni_key_file: Option<PathBuf>,

    /// File holding the passphrase of an encrypted --patroni.key-file.
    #[arg(
        long = "patroni.key-password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_KEY_PASSWORD_FILE"
    )]
    pub patroni_key_password_file: Option<PathBuf>,

    /// User for HTTP basic auth on every GET (only where a site protects reads).
    #[arg(long = "patroni.username", value_name = "USER")]
    pub patroni_username: Option<String>,

    /// File holding the basic auth password of --patroni.username.
    #[arg(
        long = "patroni.password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_PATRONI_PASSWORD_FILE"
    )]
    pub patroni_password_file: Option<PathBuf>,

    /// Hosts whose member api_urls may be followed besides the configured REST and Raft
    /// hosts: a name, an IP, a CIDR (10.0.0.0/24) or * (repeatable or comma-separated).
    #[arg(
        long = "patroni.allow-api-url-hosts",
        value_name = "HOSTS",
        value_delimiter = ','
    )]
    pub patroni_allow_api_url_hosts: Vec<String>,

    /// Raft node to query, host:port (repeatable). Default: the member hosts on --raft.port.
    #[arg(long = "raft.node", value_name = "HOST:PORT")]
    pub raft_nodes: Vec<String>,

    /// Port of the Raft nodes found through the member hosts.
    #[arg(long = "raft.port", default_value_t = 2222)]
    pub raft_port: u16,

    /// File holding the Raft password (Patroni's raft.password).
    #[arg(
        long = "raft.password-file",
        value_name = "FILE",
        env = "PATRONI_RAFT_EXPORTER_RAFT_PASSWORD_FILE"
    )]
    pub raft_password_file: Option<PathBuf>,

    /// Query Raft nodes by running this program instead of the native client, e.g.
    /// "charmed-postgresql.syncobj-admin". `{addr}` in an argument is replaced by the node
    /// address, else `-conn ADDR -status` is appended; the password is passed in the
    /// environment variable SYNCOBJ_PASSWORD, never in argv.
    #[arg(long = "raft.command", value_name = "PROGRAM")]
    pub raft_command: Option<String>,

    /// Do not query Raft at all (REST view only).
    #[arg(long = "raft.disabled")]
    pub raft_disabled: bool,

    /// How often each cluster is polled.
    #[arg(long = "poll.interval", default_value = "5s", value_parser = positive_duration)]
    pub poll_interval: Duration,

    /// Deadline of each request to a member or a Raft node.
    #[arg(long = "poll.timeout", default_value = "2s", value_parser = positive_duration)]
    pub poll_timeout: Duration,

    /// Largest REST response body accepted, in bytes.
    #[arg(long = "poll.max-body-bytes", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Requests of one cluster's poll in flight at once (REST and Raft together).
    #[arg(long = "poll.max-concurrency", default_value_t = crate::config::DEFAULT_MAX_CONCURRENCY)]
    pub max_concurrency: usize,

    /// YAML file listing clusters to watch (overrides --patroni.url and the Raft flags).
    #[arg(long = "config.file", value_name = "FILE")]
    pub config_file: Option<PathBuf>,
}

/// A duration longer than zero (`5s`, `1m30s`): a zero interval would poll in a busy loop
/// and a zero timeout would fail every request.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|error| error.to_string())?;
    if duration.is_zero() {
        return Err("must be longer than 0 (e.g. 5s)".to_owned());
    }
    Ok(duration)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Logfmt,
    Json,
}

impl ClusterArgs {
    /// The clusters to watch, resolved from `--config.file` or from the flags.
    ///
    /// # Errors
    /// When the config file or a secret file cannot be read, or no URL is given.
    pub fn clusters(&self) -> anyhow::Result<Vec<ClusterConfig>> {
        let defaults = Defaults {
            poll_interval: self.poll_interval,
            poll_timeout: self.poll_timeout,
            max_body_bytes: self.max_body_bytes,
            raft_port: self.raft_port,
            raft_enabled: !self.raft_disabled,
            max_concurrency: self.max_concurrency,
        };
        let entries = match &self.config_file {
            Some(path) => ConfigFile::load(path)?.clusters,
            None => vec![ClusterEntry {
                scope: self.patroni_scope.clone(),
                patroni_urls: self.patroni_urls.clone(),
                patroni_config_file: self.patroni_config_file.clone(),
                poll_interval: None,
                poll_timeout: None,
                ca_file: self.patroni_ca_file.clone(),
                insecure_skip_verify: self.patroni_insecure_skip_verify.then_some(true),
                raft_enabled: None,
                raft_nodes: self.raft_nodes.clone(),
                raft_port: None,
                raft_password_file: self.raft_password_file.clone(),
                raft_command: self.raft_command.clone(),
                cert_file: self.patroni_cert_file.clone(),
                key_file: self.patroni_key_file.clone(),
                key_password_file: self.patroni_key_password_file.clone(),
                username: self.patroni_username.clone(),
                password_file: self.patroni_password_file.clone(),
                allow_api_url_hosts: self.patroni_allow_api_url_hosts.clone(),
                max_concurrency: None,
            }],
        };
        entries
            .iter()
            .map(|entry| entry.resolve(&defaults))
            .collect()
    }
}

impl Args {
    /// `--web.listen-address`, where `:9393` means every interface, as in Go exporters.
    ///
    /// # Errors
    /// When the address cannot be parsed.
    pub fn listen_address(&self) -> anyhow::Result<SocketAddr> {
        let address = if self.listen_address.starts_with(':') {
            format!("[::]{}", self.listen_address)
        } else {
            self.listen_address.clone()
        };
        address.parse().map_err(|error| {
            anyhow::anyhow!(
                "invalid --web.listen-address {:?}: {error}",
                self.listen_address
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_flags_parse() {
        let args = Args::try_parse_from([
            "patroni-raft-exporter",
            "--patroni.url",
            "http://127.0.0.11:8008",
            "--patroni.url",
            "http://127.0.0.12:8008",
            "--poll.interval",
            "10s",
            "--web.listen-address",
            "127.0.0.1:9393",
        ])
        .unwrap();
        assert_eq!(args.cluster.patroni_urls.len(), 2);
        assert_eq!(args.cluster.poll_interval, Duration::from_secs(10));
        assert_eq!(args.listen_address().unwrap().to_string(), "127.0.0.1:9393");
        let clusters = args.cluster.clusters().unwrap();
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0].raft.as_ref().unwrap().port, 2222);
    }

    #[test]
    fn default_listen_address_is_every_interface() {
        let args =
            Args::try_parse_from(["patroni-raft-exporter", "--patroni.url", "http://x:8008"])
                .unwrap();
        assert_eq!(args.listen_address().unwrap().port(), 9393);
    }

    #[test]
    fn status_takes_the_same_cluster_flags() {
        let args = Args::try_parse_from([
            "patroni-raft-exporter",
            "status",
            "--patroni.url",
            "http://127.0.0.11:8008",
            "--output",
            "json",
            "--timeout",
            "3s",
        ])
        .unwrap();
        let Some(Command::Status(status)) = args.command else {
            panic!("no status command")
        };
        assert_eq!(status.cluster.patroni_urls.len(), 1);
        assert_eq!(status.timeout, Duration::from_secs(3));
    }

    #[test]
    fn generated_man_page_and_completions_name_the_flags() {
        let render = |what| {
            let mut out = Vec::new();
            generate(what, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let man = render(Generated::Man);
        assert!(
            man.starts_with(".ie"),
            "not roff: {:?}",
            &man[..40.min(man.len())]
        );
        assert!(man.contains(".TH patroni-raft-exporter 1"));
        assert!(man.contains("raft.password\\-file"));
        assert!(!man.contains("generate"), "the hidden flag is documented");
        for what in [
            Generated::CompleteBash,
            Generated::CompleteZsh,
            Generated::CompleteFish,
        ] {
            let script = render(what);
            assert!(script.contains("raft.password-file"), "{what:?}");
            assert!(script.contains("status"), "{what:?}: no subcommand");
        }
        assert!(render(Generated::CompleteZsh).starts_with("#compdef patroni-raft-exporter"));
    }

    #[test]
    fn there_is_no_password_flag() {
        assert!(Args::try_parse_from(["x", "--raft.password", "secret"]).is_err());
        assert!(Args::try_parse_from(["x", "--patroni.password", "secret"]).is_err());
    }

    #[test]
    fn credentials_and_tls_flags() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("rest-pw");
        std::fs::write(&password, "rest-secret\n").unwrap();
        let args = Args::try_parse_from([
            "x",
            "--patroni.url",
            "https://10.0.0.1:8008",
            "--patroni.username",
            "watcher",
            "--patroni.password-file",
            password.to_str().unwrap(),
            "--patroni.allow-api-url-hosts",
            "10.0.0.0/24,db.example",
            "--poll.max-concurrency",
            "3",
        ])
        .unwrap();
        let cluster = args.cluster.clusters().unwrap().remove(0);
        let auth = cluster.basic_auth.as_ref().unwrap();
        assert_eq!(auth.username, "watcher");
        assert_eq!(auth.password.expose(), "rest-secret");
        assert_eq!(cluster.max_concurrency, 3);
        assert!(!format!("{cluster:?}").contains("rest-secret"));
        let policy = crate::config::ApiUrlPolicy::for_cluster(&cluster).unwrap();
        assert!(policy.allows_url(&Url::parse("https://10.0.0.7:8008/patroni").unwrap()));
        assert!(policy.allows_url(&Url::parse("https://DB.example:8008/patroni").unwrap()));
        // https configured: no downgrade to http, even to an allowed host.
        assert!(!policy.allows_url(&Url::parse("http://10.0.0.7:8008/patroni").unwrap()));
        assert!(!policy.allows_url(&Url::parse("https://10.0.1.7:8008/patroni").unwrap()));
        // A username without a password file is an error, not an unauthenticated client.
        let args = Args::try_parse_from([
            "x",
            "--patroni.url",
            "http://x:8008",
            "--patroni.username",
            "u",
        ])
        .unwrap();
        assert!(args.cluster.clusters().is_err());
    }
}
