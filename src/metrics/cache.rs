//! Renderings of `/metrics` shared between scrapes, and their gzip encoding.
//!
//! Why: encoding every cluster costs time proportional to the fleet (about 150 series per
//! cluster), while the snapshots only change when a poller publishes. So a rendering is
//! kept with the store generation it was started at and reused by every scrape that arrives
//! before the next publication; and only one rendering per format runs at a time, so 50
//! scrapers arriving together cost one encoding, not 50 (single flight).
//!
//! Freshness rule: a scrape is answered with a rendering started after it arrived, or with
//! one that already contained every snapshot published before it arrived. It never sees
//! older data than without the cache.
//!
//! The encoding runs on tokio's blocking pool: for a thousand clusters it takes tens of
//! milliseconds, which must not stall the pollers sharing the runtime's workers.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use tokio::sync::Mutex;

use super::exposition::Format;
use super::Store;

/// One rendering of the exposition, with its gzip form made on first demand.
#[derive(Debug)]
pub struct Rendered {
    /// The store it was rendered from ([`crate::snapshot::SnapshotStore::id`]).
    pub store: u64,
    /// The store generation read just before encoding started.
    pub generation: u64,
    pub body: Bytes,
    /// How long the encoding took.
    pub encode_time: Duration,
    gzip: OnceLock<Bytes>,
}

impl Rendered {
    pub fn new(store: u64, generation: u64, body: String, encode_time: Duration) -> Rendered {
        Rendered {
            store,
            generation,
            body: Bytes::from(body),
            encode_time,
            gzip: OnceLock::new(),
        }
    }

    /// The body gzip-compressed (fast level), computed once per rendering.
    pub fn gzip(&self) -> Bytes {
        self.gzip
            .get_or_init(|| {
                let cpu = thread_cpu_time();
                let compressed = gzip(&self.body);
                tracing::debug!(
                    generation = self.generation,
                    bytes = compressed.len(),
                    gzip_cpu_seconds = thread_cpu_time().saturating_sub(cpu).as_secs_f64(),
                    "compressed metrics"
                );
                compressed
            })
            .clone()
    }

    /// Whether [`Rendered::gzip`] is already computed (and so cheap).
    pub fn has_gzip(&self) -> bool {
        self.gzip.get().is_some()
    }
}

/// The latest rendering per format.
#[derive(Debug, Default)]
pub struct RenderCache {
    openmetrics: Mutex<Option<Arc<Rendered>>>,
    prometheus_text: Mutex<Option<Arc<Rendered>>>,
}

impl RenderCache {
    pub fn new() -> RenderCache {
        RenderCache::default()
    }

    /// A rendering in `format` at least as fresh as `store` is now: the cached one when no
    /// cluster published since it was started, else a new one made by `render` (on the
    /// blocking pool). Concurrent callers wait for the rendering in progress and share it.
    ///
    /// `render` gets the format and an empty buffer to write into: the previous rendering's
    /// when no response holds it any more (its pages are already mapped: a fresh buffer of a
    /// fleet's 20 MB costs one page fault per 4 KiB, most of a rendering's CPU), else a new
    /// one of the previous size plus an eighth.
    pub async fn get(
        &self,
        store: &Store,
        format: Format,
        render: impl FnOnce(Format, String) -> String + Send + 'static,
    ) -> Arc<Rendered> {
        let arrived = store.generation();
        let slot = match format {
            Format::OpenMetrics => &self.openmetrics,
            Format::PrometheusText => &self.prometheus_text,
        };
        let mut slot = slot.lock().await;
        if let Some(rendered) = slot.as_ref() {
            if rendered.store == store.id() && rendered.generation >= arrived {
                return rendered.clone();
            }
        }
        let buffer = match slot.take() {
            Some(previous) => reuse(previous),
            None => String::with_capacity(64 * 1024),
        };
        let generation = store.generation();
        let started = Instant::now();
        let (body, encode_cpu) = match tokio::task::spawn_blocking(move || {
            let cpu = thread_cpu_time();
            let body = render(format, buffer);
            (body, thread_cpu_time().saturating_sub(cpu))
        })
        .await
        {
            Ok(rendered) => rendered,
            Err(error) => std::panic::resume_unwind(error.into_panic()),
        };
        let rendered = Arc::new(Rendered::new(
            store.id(),
            generation,
            body,
            started.elapsed(),
        ));
        tracing::debug!(
            format = ?format,
            generation,
            bytes = rendered.body.len(),
            encode_seconds = rendered.encode_time.as_secs_f64(),
            encode_cpu_seconds = encode_cpu.as_secs_f64(),
            "rendered metrics"
        );
        *slot = Some(rendered.clone());
        rendered
    }
}

/// An empty buffer for the next rendering: `previous`'s own when nothing else holds it,
/// else a new one of its size plus an eighth.
fn reuse(previous: Arc<Rendered>) -> String {
    let capacity = previous.body.len() + previous.body.len() / 8;
    let Ok(previous) = Arc::try_unwrap(previous) else {
        return String::with_capacity(capacity);
    };
    match previous.body.try_into_mut() {
        Ok(mut bytes) => {
            bytes.clear();
            let mut buffer = Vec::from(bytes);
            buffer.reserve(capacity);
            // Empty, so valid UTF-8.
            String::from_utf8(buffer).unwrap_or_default()
        }
        Err(_) => String::with_capacity(capacity),
    }
}

/// CPU time of the calling thread: what a rendering costs, apart from the wait for a thread
/// of the blocking pool and for a core (the wall-clock `encode_seconds` includes both).
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// gzip at the fastest level: exposition text compresses about 15:1 even so.
pub fn gzip(body: &[u8]) -> Bytes {
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 8 + 64), Compression::fast());
    encoder
        .write_all(body)
        .expect("compressing into a Vec cannot fail");
    Bytes::from(
        encoder
            .finish()
            .expect("compressing into a Vec cannot fail"),
    )
}

/// Whether an `Accept-Encoding` header value accepts gzip (`gzip` or `*`, without `q=0`).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let Some(value) = accept_encoding else {
        return false;
    };
    value.split(',').any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or_default().trim();
        if !(coding.eq_ignore_ascii_case("gzip") || coding == "*") {
            return false;
        }
        !parts.any(|param| {
            let param = param.trim();
            param
                .strip_prefix("q=")
                .or_else(|| param.strip_prefix("Q="))
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn accept_encoding() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, GZIP;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("x-gzip-ish")));
        assert!(!accepts_gzip(None));
    }

    #[test]
    fn gzip_round_trips() {
        let text = "a_metric{scope=\"x\"} 1\n".repeat(1000);
        let compressed = gzip(text.as_bytes());
        assert!(compressed.len() < text.len() / 10);
        let mut out = String::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, text);
    }

    #[tokio::test]
    async fn an_unheld_rendering_lends_its_buffer_to_the_next() {
        let store = Store::new(1);
        let cache = RenderCache::new();
        let render = |_, mut buffer: String| {
            buffer.push_str(&"a_metric 1\n".repeat(10_000));
            buffer
        };
        let first = cache.get(&store, Format::PrometheusText, render).await;
        let first_address = first.body.as_ptr() as usize;
        drop(first);
        store.reset(1); // a new generation: the next scrape renders again
        let second = cache.get(&store, Format::PrometheusText, render).await;
        assert_eq!(second.body.as_ptr() as usize, first_address);
        assert_eq!(second.body.len(), 110_000);
        // Held by a response still being sent: the next rendering gets a buffer of its own.
        store.reset(1);
        let third = cache.get(&store, Format::PrometheusText, render).await;
        assert_ne!(third.body.as_ptr(), second.body.as_ptr());
        assert_eq!(&third.body[..], &second.body[..]);
    }

    #[tokio::test]
    async fn one_rendering_per_generation() {
        let store = Store::new(1);
        let cache = RenderCache::new();
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let render = |counter: Arc<std::sync::atomic::AtomicUsize>| {
            move |_, mut buffer: String| {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                buffer.push_str("x 1\n");
                buffer
            }
        };
        let first = cache
            .get(&store, Format::PrometheusText, render(counter.clone()))
            .await;
        let second = cache
            .get(&store, Format::PrometheusText, render(counter.clone()))
            .await;
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Another format is another rendering.
        cache
            .get(&store, Format::OpenMetrics, render(counter.clone()))
            .await;
        assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Another store (e.g. after a reload) is never served an old rendering, although
        // its generations start from 0 again.
        let reloaded = Store::new(1);
        cache
            .get(&reloaded, Format::PrometheusText, render(counter.clone()))
            .await;
        assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
