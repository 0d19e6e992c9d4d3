//! Wires the parts together for the binary: pollers, the snapshot store, the HTTP server,
//! signals. Kept out of `main.rs` so the binary stays a thin shell over the library.
//!
//! SIGHUP re-reads everything that comes from files: `--config.file`, Patroni's YAML,
//! password, key and certificate files, and `--web.config.file`. Every file is read and
//! checked before anything is applied ([`load`]): a configuration that does not load
//! whole is logged, naming the file, and the running one (web settings included) stays in
//! force. At start, the same failure ends the process (exit 1), as Prometheus refuses a
//! configuration that does not load.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

use crate::cli::{Args, ClusterArgs, LogFormat};
use crate::config::ClusterConfig;
use crate::metrics::{ReloadStatus, Store};
use crate::patroni::{ClientPool, PatroniClient};
use crate::poller::{ClusterPoller, DcsTransport, StartGate};
use crate::server::{self, AppState};
use crate::snapshot::ClusterId;
use crate::web::WebState;

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

/// Runs the exporter until SIGINT or SIGTERM; SIGHUP re-reads the configuration.
///
/// # Errors
/// When the configuration is invalid or the listen address cannot be bound.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut fleet = Fleet::default();
    let loaded = load(&args.cluster, &fleet.clients).await?;
    let listen_address = args.listen_address()?;
    let web = Arc::new(WebState::load(args.web_config_file.as_deref())?);
    let store = Arc::new(Store::default());
    let reload_status = ReloadStatus::loaded(&store);
    let (shutdown_sender, shutdown) = watch::channel(false);
    fleet.apply(loaded, &store, &shutdown).await;

    let listener = bind(listen_address).await?;
    let current_web = web.current();
    tracing::info!(address = %listener.local_addr()?, path = %args.telemetry_path, version = crate::metrics::VERSION,
        tls = current_web.tls.is_some(), basic_auth = current_web.users.is_some(), "listening");
    let state = AppState::new(store.clone(), args.telemetry_path.clone());
    let reloader = tokio::spawn(reload_on_hangup(
        args,
        Reloadable {
            fleet,
            store,
            web: web.clone(),
            status: reload_status,
        },
        shutdown,
    ));
    server::serve(listener, state, web, async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        let _ = shutdown_sender.send(true);
    })
    .await?;
    reloader.abort();
    Ok(())
}

/// The running pollers, one per cluster, keyed by the cluster's id, each fed its
/// configuration through a channel so a reload reaches it without restarting its task.
#[derive(Default)]
struct Fleet {
    pollers: HashMap<ClusterId, RunningPoller>,
    /// The phase seat the next new poller gets ([`ClusterPoller::new`]'s `slot`: its polls'
    /// phase in the interval); never reused, so that a new cluster does not poll in step
    /// with one that stays.
    next_seat: usize,
    /// Clusters already warned about `insecure_skip_verify` (warned once, not per reload).
    warned_insecure: HashSet<String>,
    /// Bounds the first polls in flight at once, at start-up and after a reload.
    start_gate: StartGate,
    /// The HTTP clients of the fleet's pollers, shared by the clusters with the same request
    /// settings.
    clients: ClientPool,
    /// The clients [`load`] built for the configuration in force. The pool holds its clients
    /// weakly: kept here, so that the pollers take these from the pool rather than building
    /// them again; replaced by the next configuration's.
    loaded_clients: Vec<Arc<PatroniClient>>,
    /// The same for the DCS transports [`load`] built (etcd's).
    loaded_dcs_transports: Vec<DcsTransport>,
}

/// One cluster's poller task and the channel of its configuration.
struct RunningPoller {
    config: watch::Sender<ClusterConfig>,
    task: tokio::task::JoinHandle<()>,
}

impl Fleet {
    fn spawn(
        &mut self,
        id: ClusterId,
        config: ClusterConfig,
        store: &Arc<Store>,
        shutdown: &watch::Receiver<bool>,
    ) -> RunningPoller {
        self.warn_insecure(&config);
        let seat = self.next_seat;
        self.next_seat += 1;
        let (sender, receiver) = watch::channel(config);
        let task = tokio::spawn(supervise(
            Seat {
                id,
                phase: seat,
                start_gate: self.start_gate.clone(),
                clients: self.clients.clone(),
            },
            receiver,
            store.clone(),
            shutdown.clone(),
        ));
        RunningPoller {
            config: sender,
            task,
        }
    }

    fn warn_insecure(&mut self, config: &ClusterConfig) {
        let urls = url_list(&config.identity.patroni_urls);
        if config.rest.insecure_skip_verify && self.warned_insecure.insert(urls.clone()) {
            tracing::warn!(cluster = %config.name(), %urls, "TLS certificate verification of members is disabled");
        }
    }

    /// Applies a list of clusters (at start, the first). A cluster already watched (same
    /// [`ClusterId`]) keeps its poller, reconfigured in place, and its slot: its series and
    /// counters go on. A new cluster gets a poller and an empty slot; the poller of a
    /// cluster no longer listed stops, and its series go. The names are unique (loading
    /// refuses duplicates, [`crate::config::file::check_unique_names`]).
    async fn apply(
        &mut self,
        loaded: Loaded,
        store: &Arc<Store>,
        shutdown: &watch::Receiver<bool>,
    ) {
        let Loaded {
            clusters,
            clients,
            dcs_transports,
        } = loaded;
        self.loaded_clients = clients;
        self.loaded_dcs_transports = dcs_transports;
        let ids: Vec<ClusterId> = clusters
            .iter()
            .map(|config| ClusterId::new(config.name()))
            .collect();
        let mut running = std::mem::take(&mut self.pollers);
        let mut staying = Vec::new();
        let mut new = Vec::new();
        for (id, config) in ids.iter().cloned().zip(clusters) {
            match running.remove(&id) {
                Some(poller) => staying.push((id, poller, config)),
                None => new.push((id, config)),
            }
        }
        for poller in running.into_values() {
            poller.task.abort();
            let _ = poller.task.await;
        }
        // The slots (a standby's source's too) exist before a poller publishes into them.
        store.arrange(&ids);
        for (id, poller, config) in staying {
            self.warn_insecure(&config);
            let _ = poller.config.send(config);
            self.pollers.insert(id, poller);
        }
        for (id, config) in new {
            let poller = self.spawn(id.clone(), config, store, shutdown);
            self.pollers.insert(id, poller);
        }
    }
}

/// What a reload changes: the fleet, the web settings, and what `/metrics` says of reloads.
struct Reloadable {
    fleet: Fleet,
    store: Arc<Store>,
    web: Arc<WebState>,
    status: ReloadStatus,
}

async fn reload_on_hangup(args: Args, mut running: Reloadable, shutdown: watch::Receiver<bool>) {
    #[cfg(unix)]
    {
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(signal) => signal,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; reloading is disabled");
                std::future::pending::<()>().await;
                return;
            }
        };
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the configuration and secret files");
            let applied = reload(&args, &mut running, &shutdown).await;
            running.status.record(&running.store, applied);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (args, &mut running, shutdown);
        std::future::pending::<()>().await;
    }
}

/// A configuration read whole and checked: the clusters ([`ClusterArgs::clusters`] reads
/// `--config.file`, Patroni's YAML and the password files), the files of their DCS
/// ([`ClusterPoller::check_dcs_files`]: etcd's TLS files), and the HTTP clients built from
/// the CA, client certificate, key and key passphrase each cluster names.
struct Loaded {
    clusters: Vec<ClusterConfig>,
    /// One per cluster (clusters with the same settings share one).
    clients: Vec<Arc<PatroniClient>>,
    /// The DCS transports the check built (etcd's), kept as `clients` are.
    dcs_transports: Vec<DcsTransport>,
}

/// Reads and checks every file a configuration names, at start and on reload, before
/// anything is applied: a CA that does not parse is refused here, naming the cluster and
/// the file, rather than found later by a poller that fails for ever behind a reload
/// reported successful. The files are read on the blocking pool, off the async workers
/// that poll and serve; the clients come from the fleet's `pool`.
///
/// # Errors
/// The first file that does not load, named.
async fn load(args: &ClusterArgs, pool: &ClientPool) -> anyhow::Result<Loaded> {
    let cluster_args = args.clone();
    let dcs_pool = pool.clone();
    let (clusters, dcs_transports) = tokio::task::spawn_blocking(move || {
        let clusters = cluster_args.clusters()?;
        let mut transports = Vec::new();
        for config in &clusters {
            let transport = ClusterPoller::check_dcs_files(config, &dcs_pool)
                .map_err(|error| anyhow::anyhow!("cluster {}: {error:#}", config.name()))?;
            transports.extend(transport);
        }
        anyhow::Ok((clusters, transports))
    })
    .await
    .map_err(|error| anyhow::anyhow!("reading the configuration: {error}"))??;
    let mut clients = Vec::with_capacity(clusters.len());
    for config in &clusters {
        let client = pool
            .client(&config.rest, config.poll.timeout)
            .await
            .map_err(|error| anyhow::anyhow!("cluster {}: {error:#}", config.name()))?;
        clients.push(client);
    }
    Ok(Loaded {
        clusters,
        clients,
        dcs_transports,
    })
}

/// Re-reads every file ([`load`], [`WebState::read_new`]) and applies the new
/// configuration only when all of it loaded: any file that does not is logged with its
/// cause, and the clusters and web settings in force stay as they were. True when applied.
async fn reload(args: &Args, running: &mut Reloadable, shutdown: &watch::Receiver<bool>) -> bool {
    let web_state = running.web.clone();
    let web = match tokio::task::spawn_blocking(move || web_state.read_new()).await {
        Ok(Ok(web)) => Some(web),
        Ok(Err(error)) => {
            tracing::error!(error = format!("{error:#}"), "web config not reloaded");
            None
        }
        Err(error) => {
            tracing::error!(%error, "web config not reloaded");
            None
        }
    };
    let loaded = match load(&args.cluster, &running.fleet.clients).await {
        Ok(loaded) => Some(loaded),
        Err(error) => {
            tracing::error!(error = format!("{error:#}"), "clusters not reloaded");
            None
        }
    };
    let (Some(web), Some(loaded)) = (web, loaded) else {
        tracing::error!("configuration not reloaded; the previous one stays in force");
        return false;
    };
    if let Some(web) = web {
        running.web.apply(web);
    }
    let count = loaded.clusters.len();
    running.fleet.apply(loaded, &running.store, shutdown).await;
    tracing::info!(clusters = count, "reloaded");
    true
}

/// How long a panicked task waits before it is started again.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Where a poller sits in the fleet: its cluster's id (its slot in the store), its polls'
/// phase seat, and what it shares with the fleet's other pollers.
#[derive(Clone)]
struct Seat {
    id: ClusterId,
    phase: usize,
    start_gate: StartGate,
    clients: ClientPool,
}

/// Runs the poller of one cluster, reconfiguring it when a new configuration arrives, and
/// starts it again if it ever panics (it should not): one cluster's bug must not silence
/// the others, nor this one for good.
async fn supervise(
    seat: Seat,
    configs: watch::Receiver<ClusterConfig>,
    store: Arc<Store>,
    shutdown: watch::Receiver<bool>,
) {
    let name = format!("poller of cluster {}", seat.id);
    restart_on_panic(&name, RESTART_DELAY, || {
        run_cluster(
            seat.clone(),
            configs.clone(),
            store.clone(),
            shutdown.clone(),
        )
    })
    .await;
}

/// Runs `make()`'s future as its own task and starts a new one each time it panics; returns
/// when a run ends normally or is cancelled. Dropping (or aborting) this future aborts the
/// running task too, so a reload that replaces a poller never leaves the old one running.
pub async fn restart_on_panic<F, Fut>(name: &str, delay: Duration, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    struct AbortOnDrop(tokio::task::AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    loop {
        let task = tokio::spawn(make());
        let _abort = AbortOnDrop(task.abort_handle());
        match task.await {
            Ok(()) => return,
            Err(error) if error.is_panic() => {
                tracing::error!(task = name, "task panicked; restarting it");
                tokio::time::sleep(delay).await;
            }
            Err(_) => return,
        }
    }
}

async fn run_cluster(
    seat: Seat,
    mut configs: watch::Receiver<ClusterConfig>,
    store: Arc<Store>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut poller = loop {
        let config = configs.borrow_and_update().clone();
        // Boxed, as the reload below: inline, the future of this rare step (a poller being
        // built) would size every idle poller's task, for its whole life.
        let setup = Box::pin(ClusterPoller::with_clients(
            seat.phase,
            config.clone(),
            &seat.clients,
        ));
        match setup.await {
            Ok(poller) => break poller.through(seat.start_gate.clone()),
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), urls = %url_list(&config.identity.patroni_urls), "cannot set up the poller; retrying in 30s or on reload");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                    _ = configs.changed() => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    };
    loop {
        let standby_of = configs.borrow().identity.standby_of.clone();
        // Looked up once per configuration: the slot stays while the cluster is listed.
        let Some(publisher) = store.publisher(&seat.id, standby_of.as_deref()) else {
            return;
        };
        let mut next_config = configs.clone();
        let mut stop = shutdown.clone();
        poller
            .run_until(&publisher, async move {
                tokio::select! {
                    _ = next_config.changed() => {}
                    _ = stop.changed() => {}
                }
            })
            .await;
        if *shutdown.borrow() || shutdown.has_changed().is_err() || configs.has_changed().is_err() {
            return;
        }
        let config = configs.borrow_and_update().clone();
        match Box::pin(poller.reconfigured(config)).await {
            Ok(new) => {
                poller = new;
                tracing::info!(cluster = %seat.id, "poller reconfigured");
            }
            Err(error) => tracing::error!(
                error = format!("{error:#}"),
                cluster = %seat.id,
                "new configuration not applied; polling with the previous one"
            ),
        }
    }
}

/// URLs as a log field: as written, comma-separated (their `Debug` is `Url { scheme: ... }`).
fn url_list(urls: &[url::Url]) -> String {
    let urls: Vec<&str> = urls.iter().map(url::Url::as_str).collect();
    urls.join(",")
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

/// Resolves on SIGINT or SIGTERM: the exporter's (and fleet-sim's) cue to shut down.
pub async fn shutdown_signal() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn urls_are_logged_as_written() {
        let urls = ["https://10.0.0.1:8008", "http://db.example:8008/"]
            .map(|url| url::Url::parse(url).unwrap());
        assert_eq!(
            url_list(&urls),
            "https://10.0.0.1:8008/,http://db.example:8008/"
        );
    }

    #[tokio::test]
    async fn a_panicking_task_is_restarted() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        tokio::time::timeout(
            Duration::from_secs(5),
            restart_on_panic("test task", Duration::from_millis(5), move || {
                let counter = counter.clone();
                async move {
                    if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                        panic!("deliberate test panic");
                    }
                }
            }),
        )
        .await
        .expect("the third run returns normally");
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn aborting_the_supervisor_stops_its_task() {
        let ticks = Arc::new(AtomicUsize::new(0));
        let counter = ticks.clone();
        let supervisor = tokio::spawn(async move {
            restart_on_panic("ticker", Duration::from_millis(5), move || {
                let counter = counter.clone();
                async move {
                    loop {
                        counter.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
            .await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        supervisor.abort();
        let _ = supervisor.await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let after_abort = ticks.load(Ordering::SeqCst);
        assert!(after_abort > 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(ticks.load(Ordering::SeqCst), after_abort);
    }
}
