//! The `patroni-raft-exporter` binary: parse flags, set up logging, run the library.

use clap::Parser;

use patroni_raft_exporter::cli::{Args, Command};
use patroni_raft_exporter::{app, status};

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    app::init_logging(&args);
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
        Some(Command::Status(status_args)) => match runtime.block_on(status::run(status_args)) {
            Ok(code) => std::process::ExitCode::from(code),
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
