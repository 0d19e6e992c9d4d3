//! The HTTP endpoint: `/metrics`, `/probe?scope=NAME`, a landing page, `/-/healthy` and
//! `/-/ready`.
//!
//! Serving never touches the network: it assembles the samples encoded when each snapshot
//! was published, so a scrape answers at once even while every member of every cluster
//! hangs. Both endpoints stream their body frame by frame from the clusters' chunks
//! ([`Frames`]: nothing of the size of the whole exposition is built or kept), and send
//! gzip to scrapers that accept it (Prometheus does); only a small `/metrics` keeps its gzip
//! body until a cluster publishes or a second passes ([`GzipReuse`]). `/metrics` also has
//! the exporter's process families; `/probe?scope=NAME` serves one cluster (no process
//! families), so that Prometheus can shard a large fleet by target (see docs/scaling.md).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::exposition::Format;
use crate::metrics::process::{self, ProcessFamilies};
use crate::metrics::stream::{accepts_gzip, Frames, GzipReuse};
use crate::metrics::{EncodedCluster, Store};
use crate::web::WebState;

/// What the handlers share.
pub struct AppState {
    pub store: Arc<Store>,
    pub telemetry_path: String,
    /// `/metrics`' gzip body while the exposition is small and unchanged.
    gzip_reuse: GzipReuse,
}

impl AppState {
    /// The state of an exporter serving the snapshots of `store` under `telemetry_path`.
    pub fn new(store: Arc<Store>, telemetry_path: impl Into<String>) -> Arc<AppState> {
        Arc::new(AppState {
            store,
            telemetry_path: telemetry_path.into(),
            gzip_reuse: GzipReuse::default(),
        })
    }
}

/// The routes, without the listener ([`serve`] adds it with TLS and basic auth).
pub fn router(state: Arc<AppState>) -> Router {
    let telemetry_path = state.telemetry_path.clone();
    let mut router = Router::new()
        .route("/", get(landing_page))
        .route(&telemetry_path, get(metrics));
    // A telemetry path of /probe wins (axum refuses two routes on one path).
    if telemetry_path != "/probe" {
        router = router.route("/probe", get(probe));
    }
    router
        .route("/-/healthy", get(|| async { "Healthy\n" }))
        .route("/-/ready", get(ready))
        .with_state(state)
}

/// Serves the exporter on `listener` the one way it is served, in production and in tests:
/// the routes behind the basic auth check, on the bounded (and, when configured, TLS)
/// listener of [`crate::web`], until `shutdown` completes.
///
/// # Errors
/// Only if accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    web: Arc<WebState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = crate::web::protect(router(state), web.clone());
    crate::web::serve(listener, router, web, shutdown).await
}

/// `/metrics`: every cluster, as of the snapshots current when the scrape arrived.
async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    exposition_response(
        &headers,
        state.store.current_encoded(),
        Some((&state.gzip_reuse, process::current())),
    )
}

/// The query of `/probe`.
#[derive(Debug, serde::Deserialize)]
struct ProbeParams {
    scope: Option<String>,
}

/// `/probe?scope=NAME`: the families of one cluster (and the exporter's build info), as
/// of its last poll. 400 without a scope, 404 for a scope not configured or not yet polled.
async fn probe(
    State(state): State<Arc<AppState>>,
    Query(params): Query<ProbeParams>,
    headers: HeaderMap,
) -> Response {
    let Some(scope) = params.scope.filter(|scope| !scope.is_empty()) else {
        return (
            StatusCode::BAD_REQUEST,
            "missing parameter: /probe?scope=NAME\n",
        )
            .into_response();
    };
    let Some(encoded) = state.store.encoded_by_scope(&scope) else {
        return (
            StatusCode::NOT_FOUND,
            "no such scope (not configured, or not polled yet)\n",
        )
            .into_response();
    };
    exposition_response(&headers, vec![encoded], None)
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The exposition of `clusters` in the format the request asks for (`Accept`), gzipped
/// when it accepts gzip, as a streamed body; `/metrics` also gives the exporter's process
/// families and where a small gzip body is kept (`own`).
fn exposition_response(
    headers: &HeaderMap,
    clusters: Vec<Arc<EncodedCluster>>,
    own: Option<(&GzipReuse, Arc<ProcessFamilies>)>,
) -> Response {
    let format = Format::negotiate(header_str(headers, header::ACCEPT));
    let gzipped = accepts_gzip(header_str(headers, header::ACCEPT_ENCODING));
    let kept = own
        .as_ref()
        .filter(|_| gzipped)
        .and_then(|(reuse, process)| reuse.small(&clusters, process, format));
    let body = match kept {
        Some(kept) => Body::from(kept),
        None => {
            let process = own.map(|(_, process)| process);
            let frames = Frames::new(clusters, process, format, gzipped);
            Body::from_stream(futures::stream::iter(frames.map(Ok::<_, Infallible>)))
        }
    };
    let mut response = ([(header::CONTENT_TYPE, format.content_type())], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("Accept-Encoding"),
    );
    if gzipped {
        headers.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static("gzip"),
        );
    }
    response
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
