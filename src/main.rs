//! The `patroni-raft-exporter` binary: parse flags, set up logging, run the library.

use patroni_raft_exporter::cli::{self, Command};
use patroni_raft_exporter::{app, status};

/// mimalloc, not glibc's malloc: [`patroni_raft_exporter::allocator`] says why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    patroni_raft_exporter::allocator::configure();
    let args = cli::parse();
    if let Some(what) = args.generate {
        return match cli::generate(what, &mut std::io::stdout().lock()) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("--generate: {error}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    app::init_logging(&args);
    raise_open_files_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match args.command.clone() {
        Some(Command::Status(status_args)) => match status_args.cluster.clusters() {
            Ok(clusters) => {
                let code = runtime.block_on(status::run(clusters, status_args.options()));
                // The deadline bounds the process, not only the report: a Raft key derivation
                // the deadline cut short (PBKDF2 on the blocking pool, seconds on a starved
                // CPU) is abandoned here; dropping the runtime would wait for it.
                runtime.shutdown_background();
                std::process::ExitCode::from(code)
            }
            Err(error) => {
                eprintln!("UNKNOWN: {error:#}");
                std::process::ExitCode::from(3)
            }
        },
        None => match runtime.block_on(app::run(args)) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "exiting");
                std::process::ExitCode::FAILURE
            }
        },
    }
}

/// Raises the soft limit of open files to the hard limit, as Go's runtime does for Go
/// exporters: each cluster uses up to 8 sockets during a poll (`--poll.max-concurrency`),
/// and a large fleet has many polls in flight at once, more when members are slow: under
/// the usual soft limit of 1024 a fleet of a thousand clusters fails to connect.
fn raise_open_files_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed by reference.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return;
            }
            let previous = limit.rlim_cur;
            if previous >= limit.rlim_max.min(1 << 20) {
                return;
            }
            // An unlimited hard limit is still capped by the kernel's nr_open.
            limit.rlim_cur = limit.rlim_max.min(1 << 20);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                tracing::debug!(
                    from = previous,
                    to = limit.rlim_cur,
                    "raised the open files limit"
                );
            }
        }
    }
}
