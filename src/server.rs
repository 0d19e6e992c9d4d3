//! The HTTP endpoint: `/metrics`, `/probe?scope=NAME`, a landing page, `/-/healthy` and
//! `/-/ready`.
//!
//! Serving never touches the network: it assembles the samples encoded when each snapshot
//! was published, so a scrape answers at once even while every member of every cluster
//! hangs. `/metrics` reuses the latest rendering while no cluster published
//! ([`RenderCache`]); both endpoints send
//! gzip to scrapers that accept it (Prometheus does). `/probe?scope=NAME` serves one
//! cluster, so that Prometheus can shard a large fleet by target (see docs/scaling.md).

use std::future::Future;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::metrics::cache::{accepts_gzip, gzip, RenderCache};
use crate::metrics::exposition::Format;
use crate::metrics::Store;
use crate::web::WebState;

/// What the handlers share.
pub struct AppState {
    pub store: Arc<Store>,
    pub telemetry_path: String,
    /// The latest `/metrics` rendering per format.
    pub render_cache: RenderCache,
}

impl AppState {
    /// The state of an exporter serving the snapshots of `store` under `telemetry_path`.
    pub fn new(store: Arc<Store>, telemetry_path: impl Into<String>) -> Arc<AppState> {
        Arc::new(AppState {
            store,
            telemetry_path: telemetry_path.into(),
            render_cache: RenderCache::default(),
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

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let format = Format::negotiate(header_str(&headers, header::ACCEPT));
    let shared = state.clone();
    let rendered = state
        .render_cache
        .get(&state.store, format, move |format, mut buffer| {
            crate::metrics::render_into(&shared.store.current_encoded(), format, &mut buffer);
            buffer
        })
        .await;
    if !accepts_gzip(header_str(&headers, header::ACCEPT_ENCODING)) {
        return exposition_response(format, rendered.body.clone(), false);
    }
    let body = if rendered.has_gzip() {
        rendered.gzip()
    } else {
        let rendered = rendered.clone();
        match tokio::task::spawn_blocking(move || rendered.gzip()).await {
            Ok(body) => body,
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        }
    };
    exposition_response(format, body, true)
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
    let format = Format::negotiate(header_str(&headers, header::ACCEPT));
    let body = crate::metrics::render(&[encoded], format, 32 * 1024);
    if accepts_gzip(header_str(&headers, header::ACCEPT_ENCODING)) {
        exposition_response(format, gzip(body.as_bytes()), true)
    } else {
        exposition_response(format, Bytes::from(body), false)
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn exposition_response(format: Format, body: Bytes, gzipped: bool) -> Response {
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
