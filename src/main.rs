//! The `patroni-raft-exporter` binary: parse flags, set up logging, run the library.

use patroni_raft_exporter::cli::{self, Command};
use patroni_raft_exporter::{app, status};

fn main() -> std::process::ExitCode {
    tune_allocator();
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
        None => match runtime.block_on(async {
            tokio::spawn(trim_allocator());
            app::run(args).await
        }) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "exiting");
                std::process::ExitCode::FAILURE
            }
        },
    }
}

/// Keeps glibc's malloc from holding on to memory the exporter no longer uses.
///
/// By default glibc raises its mmap threshold after the first large buffer is freed, so
/// later ones come from a heap arena that is rarely given back, and every thread may get its
/// own arena. A fixed 1 MiB threshold returns big buffers to the system when freed, and two
/// arenas are plenty for two to four busy threads. So a burst of large allocations (a big
/// reply, the buffers of many requests at once) does not stay in the RSS after it ends.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread
    // exists, and invalid values are refused by returning 0, which is ignored here.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Gives the memory glibc's malloc holds free back to the system, every 10 s.
///
/// Many requests in flight at once (the first polls of a large fleet, members that hang,
/// concurrent scrapes) each hold a connection, buffers and futures. Once they end, malloc
/// keeps the freed pages in its arenas (free chunks amid live ones are never returned by
/// `free`), and the RSS would stay at that peak for the life of the process. `malloc_trim`
/// returns the free pages of every arena (`madvise(MADV_DONTNEED)`), on the blocking pool,
/// so the RSS follows what is in use (docs/performance.md, "Memory at N clusters").
async fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut ticks = tokio::time::interval(std::time::Duration::from_secs(10));
        loop {
            ticks.tick().await;
            // SAFETY: malloc_trim only releases free memory of malloc's own arenas.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
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
