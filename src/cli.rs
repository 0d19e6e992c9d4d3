//! The command line, in the dotted style of Prometheus exporters (`--web.listen-address`).
//!
//! Secrets are never flag values: only paths to files that hold them.

use std::ffi::OsString;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Args as ClapArgs, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::config::file::{positive_duration, Inherited};
use crate::config::{ClusterConfig, ClusterEntry, Collector, ConfigFile};
use crate::status::{Output, StatusOptions};

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
    #[arg(long = "web.telemetry-path", default_value = "/metrics", value_parser = telemetry_path)]
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

/// What to watch and how to reach it: shared by the exporter and `status`. One cluster by
/// flags (the [`ClusterEntry`] flattened here), or many by `--config.file`, whose entries
/// inherit the poll settings and the Raft port given by flags.
#[derive(Debug, Clone, ClapArgs)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub cluster: ClusterEntry,

    /// Do not query Raft at all (REST view only).
    #[arg(long = "raft.disabled")]
    pub raft_disabled: bool,

    /// Do not ask GET /history (failover history and last failover time).
    #[arg(long = "no-collector.history")]
    pub no_collector_history: bool,

    /// Do not ask GET /config (the dynamic configuration; failover readiness then assumes
    /// Patroni's defaults).
    #[arg(long = "no-collector.config")]
    pub no_collector_config: bool,

    /// Do not ask every member's own GET /cluster (split views: patroni_cluster_dcs_views).
    #[arg(long = "no-collector.views")]
    pub no_collector_views: bool,

    /// Do not ask GET /liveness and GET /readiness.
    #[arg(long = "no-collector.probes")]
    pub no_collector_probes: bool,

    /// Do not ask GET /failsafe while failsafe mode is on.
    #[arg(long = "no-collector.failsafe")]
    pub no_collector_failsafe: bool,

    /// YAML file listing clusters to watch. Its entries take the place of the flags of one
    /// cluster, inheriting only --poll.*, --raft.port, --raft.disabled and --no-collector.*:
    /// --patroni.url and the other flags of one cluster are refused beside it.
    #[arg(
        long = "config.file",
        value_name = "FILE",
        conflicts_with_all = NOT_BESIDE_CONFIG_FILE
    )]
    pub config_file: Option<PathBuf>,
}

/// The flags of one cluster ([`ClusterEntry`]'s ids) that an entry of `--config.file` does
/// not inherit ([`Inherited`]): given beside it they would be silently ignored, so clap
/// refuses them at start. Not the password and key-passphrase file flags
/// ([`SECRET_FILES_NOT_BESIDE_CONFIG_FILE`]): they also come from environment variables, a
/// setting the user may not have made for this command line, and a validation never refuses
/// what the user did not set; [`try_parse_from`] refuses them only when given on the command
/// line.
const NOT_BESIDE_CONFIG_FILE: [&str; 17] = [
    "scope",
    "patroni_urls",
    "patroni_config_file",
    "ca_file",
    "insecure_skip_verify",
    "cert_file",
    "key_file",
    "username",
    "allow_api_url_hosts",
    "raft_nodes",
    "raft_command",
    "etcd_endpoints",
    "etcd_namespace",
    "etcd_ca_file",
    "etcd_cert_file",
    "etcd_key_file",
    "etcd_username",
];

/// The password and key-passphrase file flags of one cluster, which `--config.file`'s entries
/// do not inherit either: refused beside it when given on the command line, let be when
/// they come from their environment variables ([`NOT_BESIDE_CONFIG_FILE`] says why).
const SECRET_FILES_NOT_BESIDE_CONFIG_FILE: [&str; 4] = [
    "key_password_file",
    "password_file",
    "raft_password_file",
    "etcd_password_file",
];

/// Parses the process's command line as [`try_parse_from`]; on an error, prints it and exits
/// as clap does (0 for `--help` and `--version`, 2 for a usage error), except that a usage
/// error of `status` exits 3: a Nagios plugin's UNKNOWN, where 2 would read CRITICAL.
pub fn parse() -> Args {
    let argv: Vec<OsString> = std::env::args_os().collect();
    match try_parse_from(argv.iter().cloned()) {
        Ok(args) => args,
        Err(error) => {
            let code = if error.use_stderr() && is_status(&argv) {
                i32::from(crate::status::report::Level::Unknown.exit_code())
            } else {
                error.exit_code()
            };
            let _ = error.print();
            std::process::exit(code);
        }
    }
}

/// Parses `argv` (program name first), with what clap's derive cannot say: a password or
/// key-passphrase file flag given on the command line beside `--config.file` is refused,
/// as the other flags of one cluster are ([`SECRET_FILES_NOT_BESIDE_CONFIG_FILE`]).
///
/// # Errors
/// clap's error, ready to print: usage, `--help`, `--version`.
pub fn try_parse_from<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut command = Args::command();
    let matches = command.try_get_matches_from_mut(argv)?;
    match matches.subcommand() {
        Some((name, sub_matches)) => {
            let sub = command
                .find_subcommand_mut(name)
                .expect("a subcommand clap matched is one of the command's");
            refuse_secret_files_beside_config_file(sub, sub_matches)?;
        }
        None => refuse_secret_files_beside_config_file(&mut command, &matches)?,
    }
    Args::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
}

/// [`SECRET_FILES_NOT_BESIDE_CONFIG_FILE`]'s check of one command's matches, with clap's
/// wording of a conflict.
fn refuse_secret_files_beside_config_file(
    command: &mut clap::Command,
    matches: &clap::ArgMatches,
) -> Result<(), clap::Error> {
    if matches.value_source("config_file").is_none() {
        return Ok(());
    }
    for id in SECRET_FILES_NOT_BESIDE_CONFIG_FILE {
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let long = command
            .get_arguments()
            .find(|arg| arg.get_id() == id)
            .and_then(clap::Arg::get_long)
            .unwrap_or(id)
            .to_owned();
        return Err(command.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("the argument '--{long} <FILE>' cannot be used with '--config.file <FILE>' (its entries name their own files)"),
        ));
    }
    Ok(())
}

/// Whether `argv` runs the `status` subcommand, as far as clap can tell from a command line
/// that does not parse.
fn is_status(argv: &[OsString]) -> bool {
    Args::command()
        .ignore_errors(true)
        .try_get_matches_from(argv)
        .is_ok_and(|matches| matches.subcommand_name() == Some("status"))
}

/// `--web.telemetry-path`: an absolute path that is none of the endpoint's other routes and
/// that the router takes literally (no `{capture}` or `*wildcard` of axum's syntax), checked
/// here so that a wrong one is a usage error before listening, not a panic after.
fn telemetry_path(text: &str) -> Result<String, String> {
    if !text.starts_with('/') {
        return Err("must start with / (e.g. /metrics)".to_owned());
    }
    if ["/", "/-/healthy", "/-/ready"].contains(&text) {
        return Err(format!(
            "{text} is the endpoint's own route (/, /-/healthy and /-/ready are taken)"
        ));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "/-._~".contains(*c)))
    {
        return Err(format!(
            "{bad:?} is not allowed: letters, digits, / and -._~ only"
        ));
    }
    Ok(text.to_owned())
}

/// Options of the `status` subcommand.
#[derive(Debug, Clone, ClapArgs)]
pub struct StatusArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// Refresh every --poll.interval until interrupted.
    #[arg(long)]
    pub watch: bool,

    /// Total deadline of one run; never exceeded.
    #[arg(long, default_value = "10s", value_parser = positive_duration)]
    pub timeout: Duration,
}

impl StatusArgs {
    /// How `status` runs.
    pub fn options(&self) -> StatusOptions {
        StatusOptions {
            output: self.output,
            watch: self.watch,
            timeout: self.timeout,
        }
    }
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
        let inherited = Inherited::from_flags(
            &self.cluster,
            self.raft_disabled,
            self.disabled_collectors(),
        );
        match &self.config_file {
            Some(path) => ConfigFile::load_clusters(path, &inherited),
            None => Ok(vec![self.cluster.resolve(&inherited)?]),
        }
    }
}

impl ClusterArgs {
    /// The collectors switched off by `--no-collector.*`.
    fn disabled_collectors(&self) -> Vec<Collector> {
        [
            (self.no_collector_history, Collector::History),
            (self.no_collector_config, Collector::Config),
            (self.no_collector_views, Collector::Views),
            (self.no_collector_probes, Collector::Probes),
            (self.no_collector_failsafe, Collector::Failsafe),
        ]
        .into_iter()
        .filter_map(|(off, collector)| off.then_some(collector))
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
    use url::Url;

    #[test]
    fn the_defaults_help_prints_are_the_code_defaults() {
        use clap::CommandFactory;
        let help = Args::command().render_long_help().to_string();
        // `--flag ...` then, in its text, `[default: VALUE]` (clap's own or the doc's).
        let pattern =
            regex::Regex::new(r"(?s)--([a-z.-]+)[^\n]*\n(?:[^-]|-[^-])*?\[default: ([^\]]+)\]")
                .unwrap();
        let printed: std::collections::BTreeMap<String, String> = pattern
            .captures_iter(&help)
            .map(|c| {
                (
                    c[1].to_owned(),
                    c[2].split_whitespace().collect::<Vec<_>>().join(" "),
                )
            })
            .collect();
        let poll = crate::config::PollSettings::default();
        let show = |d: std::time::Duration| humantime::format_duration(d).to_string();
        let expected = [
            ("poll.interval", show(poll.interval)),
            (
                "poll.timeout",
                format!("the smaller of {} and the interval", show(poll.timeout)),
            ),
            (
                "poll.max-body-bytes",
                crate::patroni::ClientSettings::default()
                    .max_body_bytes
                    .to_string(),
            ),
            ("poll.max-concurrency", poll.max_concurrency.to_string()),
            (
                "raft.port",
                crate::config::RaftSettings::DEFAULT_PORT.to_string(),
            ),
        ];
        for (flag, value) in expected {
            assert_eq!(
                printed.get(flag),
                Some(&value),
                "--{flag} in --help:\n{help}"
            );
        }
    }

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
        assert_eq!(args.cluster.cluster.patroni_urls.len(), 2);
        assert_eq!(
            args.cluster.cluster.poll_interval,
            Some(Duration::from_secs(10))
        );
        assert_eq!(args.listen_address().unwrap().to_string(), "127.0.0.1:9393");
        let clusters = args.cluster.clusters().unwrap();
        assert_eq!(clusters.len(), 1);
        assert_eq!(clusters[0].identity.dcs.raft().unwrap().port, 2222);
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
        assert_eq!(status.cluster.cluster.patroni_urls.len(), 1);
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
    fn every_flag_of_one_cluster_is_inherited_by_the_file_or_refused_beside_it() {
        use clap::Args as _;
        // What `Inherited` hands on (config/file.rs: poll_settings, rest_settings' body cap,
        // raft_settings' port); the secret file flags, also from the environment, are refused
        // on the command line only (`try_parse_from`).
        let inherited = [
            "poll_interval",
            "poll_timeout",
            "max_body_bytes",
            "max_concurrency",
            "raft_port",
        ];
        let entry = ClusterEntry::augment_args(clap::Command::new("entry"));
        for arg in entry.get_arguments() {
            let id = arg.get_id().as_str();
            let decided = inherited.contains(&id)
                || NOT_BESIDE_CONFIG_FILE.contains(&id)
                || (arg.get_env().is_some() && SECRET_FILES_NOT_BESIDE_CONFIG_FILE.contains(&id));
            assert!(
                decided,
                "--{}: inherited or refused beside --config.file?",
                arg.get_long().unwrap_or(id)
            );
        }
        for id in NOT_BESIDE_CONFIG_FILE {
            let arg = entry.get_arguments().find(|arg| arg.get_id() == id);
            assert!(arg.is_some_and(|arg| arg.get_env().is_none()), "{id}");
        }
        Args::command().debug_assert();
    }

    #[test]
    fn a_telemetry_path_the_endpoint_cannot_serve_is_a_usage_error() {
        for path in [
            "/",
            "/-/ready",
            "/-/healthy",
            "metrics",
            "",
            "/m/{x}",
            "/*rest",
            "/a b",
        ] {
            let error = try_parse_from(["x", "--web.telemetry-path", path]).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{path:?}"
            );
            assert_eq!(error.exit_code(), 2, "{path:?}");
        }
        for path in ["/metrics", "/probe", "/exporter/metrics", "/-/metrics"] {
            let args = try_parse_from(["x", "--web.telemetry-path", path]).unwrap();
            assert_eq!(args.telemetry_path, path);
            // axum takes it (it panics on a route it cannot take).
            let state = crate::server::AppState::new(Default::default(), path);
            let _ = crate::server::router(state);
        }
    }

    #[test]
    fn a_secret_file_flag_on_the_command_line_beside_the_config_file_is_refused() {
        for flag in [
            "--raft.password-file",
            "--patroni.password-file",
            "--patroni.key-password-file",
            "--etcd.password-file",
        ] {
            for argv in [
                vec!["x", "--config.file", "c.yml", flag, "p"],
                vec!["x", "status", flag, "p", "--config.file", "c.yml"],
            ] {
                let error = try_parse_from(&argv).unwrap_err();
                assert_eq!(
                    error.kind(),
                    clap::error::ErrorKind::ArgumentConflict,
                    "{argv:?}"
                );
                let text = error.to_string();
                assert!(
                    text.contains(&format!(
                        "'{flag} <FILE>' cannot be used with '--config.file"
                    )),
                    "{text}"
                );
            }
            // Without --config.file, the flag of one cluster.
            assert!(try_parse_from(["x", "--patroni.url", "http://x:8008", flag, "p"]).is_ok());
        }
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
        let auth = cluster.rest.basic_auth.as_ref().unwrap();
        assert_eq!(auth.username, "watcher");
        assert_eq!(auth.password.expose(), "rest-secret");
        assert_eq!(cluster.poll.max_concurrency, 3);
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
