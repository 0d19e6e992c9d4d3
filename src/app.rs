//! Wires the parts together for the binary: pollers, the snapshot store, the HTTP server,
//! signals. Kept out of `main.rs` so the binary stays a thin shell over the library.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use crate::cli::{Args, LogFormat};
use crate::config::ClusterConfig;
use crate::poller::ClusterPoller;
use crate::server::{self, AppState};
use crate::snapshot::SnapshotStore;

/// Sets up `tracing` from `--log.level` and `--log.format`, writing to stderr.
pub fn init_logging(args: &Args) {
    let default_level = if args.command.is_some() {
        "error"
    } else {
        "info"
    };
    let level = args.log_level.as_deref().unwrap_or(default_level);
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new(default_level));
    let registry = tracing_subscriber::registry().with(filter);
    match args.log_format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .init(),
        LogFormat::Logfmt => registry
            .with(
                tracing_logfmt::builder()
                    .layer()
                    .with_writer(std::io::stderr),
            )
            .init(),
    }
}

/// Runs the exporter until SIGINT or SIGTERM.
///
/// # Errors
/// When the configuration is invalid or the listen address cannot be bound.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let clusters = args.cluster.clusters()?;
    let listen_address = args.listen_address()?;
    let store = Arc::new(SnapshotStore::new(clusters.len()));
    let (shutdown_sender, shutdown) = watch::channel(false);

    for (slot, config) in clusters.into_iter().enumerate() {
        if config.insecure_skip_verify {
            tracing::warn!(urls = ?config.patroni_urls, "TLS certificate verification of members is disabled");
        }
        tokio::spawn(supervise(slot, config, store.clone(), shutdown.clone()));
    }

    let listener = bind(listen_address).await?;
    tracing::info!(address = %listener.local_addr()?, path = %args.telemetry_path, version = crate::metrics::VERSION, "listening");
    let state = Arc::new(AppState {
        registry: crate::metrics::registry(store.clone()),
        store,
        telemetry_path: args.telemetry_path.clone(),
        render_cache: Default::default(),
    });
    server::serve(listener, state, async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        let _ = shutdown_sender.send(true);
    })
    .await?;
    Ok(())
}

/// Runs the poller of one cluster, and starts it again if it ever panics (it should not):
/// one cluster's bug must not silence the others, nor this one for good.
async fn supervise(
    slot: usize,
    config: ClusterConfig,
    store: Arc<SnapshotStore>,
    shutdown: watch::Receiver<bool>,
) {
    loop {
        let poller = match ClusterPoller::new(slot, config.clone(), store.clone()).await {
            Ok(poller) => poller,
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), urls = ?config.patroni_urls, "cannot set up the poller; retrying in 30s");
                tokio::time::sleep(Duration::from_secs(30)).await;
                continue;
            }
        };
        let task = tokio::spawn(poller.run(shutdown.clone()));
        match task.await {
            Ok(()) => return,
            Err(error) if error.is_panic() => {
                tracing::error!(urls = ?config.patroni_urls, "poller panicked; restarting it");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(_) => return,
        }
    }
}

/// Binds the listen address; `[::]` falls back to `0.0.0.0` on hosts without IPv6.
async fn bind(address: SocketAddr) -> anyhow::Result<TcpListener> {
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(listener),
        Err(error) if address.ip().is_unspecified() && address.is_ipv6() => {
            tracing::debug!(%error, "IPv6 unavailable, listening on IPv4 only");
            let v4 = SocketAddr::from(([0, 0, 0, 0], address.port()));
            TcpListener::bind(v4)
                .await
                .map_err(|error| anyhow::anyhow!("cannot listen on {v4}: {error}"))
        }
        Err(error) => Err(anyhow::anyhow!("cannot listen on {address}: {error}")),
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
