//! The HTTP endpoint: `/metrics`, a landing page, `/-/healthy` and `/-/ready`.
//!
//! Serving never touches the network: it encodes the snapshots already in memory, so a
//! scrape answers at once even while every member of every cluster hangs.

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::metrics::exposition::{render, Format};
use crate::snapshot::SnapshotStore;

/// What the handlers share.
pub struct AppState {
    pub registry: Registry,
    pub store: Arc<SnapshotStore>,
    pub telemetry_path: String,
}

/// The router, separate from [`serve`] so tests can drive it directly.
pub fn router(state: Arc<AppState>) -> Router {
    let telemetry_path = state.telemetry_path.clone();
    Router::new()
        .route("/", get(landing_page))
        .route(&telemetry_path, get(metrics))
        .route("/-/healthy", get(|| async { "Healthy\n" }))
        .route("/-/ready", get(ready))
        .with_state(state)
}

/// Serves until `shutdown` completes, then lets in-flight requests finish.
///
/// # Errors
/// When the server fails (not on shutdown).
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let format = Format::negotiate(accept);
    let body = render(&state.registry, format);
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

async fn ready(State(state): State<Arc<AppState>>) -> Response {
    if state.store.all_polled() {
        (StatusCode::OK, "Ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Not ready: first poll not finished\n",
        )
            .into_response()
    }
}

async fn landing_page(State(state): State<Arc<AppState>>) -> Html<String> {
    let path = html_escape(&state.telemetry_path);
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>Patroni Raft Exporter</title></head><body>\n\
         <h1>Patroni Raft Exporter</h1>\n\
         <p>Prometheus exporter for Patroni clusters on the Raft (pysyncobj) DCS, version {version} ({revision}).</p>\n\
         <ul><li><a href=\"{path}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li><li><a href=\"/-/ready\">Readiness</a></li></ul>\n\
         </body></html>\n",
        version = crate::metrics::VERSION,
        revision = crate::metrics::REVISION,
    ))
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
