//! A response body of `/metrics` (and `/probe`) assembled frame by frame from the clusters'
//! encoded chunks, and gzip-compressed as it goes when the scraper accepts it.
//!
//! Why a stream: a large fleet's exposition is tens of megabytes of text, while each
//! cluster's samples are already encoded with its snapshot ([`EncodedCluster`]).
//! Concatenating them into one body per scrape would keep a body of the whole exposition
//! (and its gzip) between scrapes and put one more in memory per distinct body in flight
//! under concurrent scrapers. Here a scrape holds the list of the clusters' `Arc` chunks it
//! started with and copies them into frames of [`FRAME`] bytes only as hyper asks for the
//! next one; so a scrape costs a frame or two of memory (plus what hyper queues for a slow
//! reader), whatever the fleet's size, and nothing is kept between scrapes.
//!
//! Freshness: the chunks are those of the snapshots current when the scrape arrived, never
//! older ones. The bytes are those of `super::render` (built with the `testkit` feature only:
//! it collects this same assembly into one `String`, for the tests and the golden file).
//!
//! Why gzip per scrape, while streaming (fast level): one gzip member per cluster cannot be
//! kept with its chunks, since a cluster's samples are not contiguous in the output (each
//! family lists every cluster before the next family starts, as the formats require), and a
//! member per chunk (a few hundred bytes each) would compress little and add 18 bytes of
//! header and 8 of trailer to each of them. Keeping one gzip per store generation would
//! serve only scrapes arriving between two publications, and a large fleet's polls publish
//! all the time; one Prometheus scraping once per interval compresses once per scrape either
//! way. What a scrape costs is in docs/performance.md ("Scraping a large fleet").
//!
//! A frame is built on the runtime's thread that sends the response: a copy of 16 KiB (and
//! its gzip) at a time, so polls sharing the thread are not held up as a rendering of the
//! whole exposition would hold them.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

use super::exposition::Format;
use super::families::Catalog;
use super::process::ProcessFamilies;
use super::{EncodedCluster, BUILD_INFO, CATALOG};

/// The size a frame is filled to (a frame ends after the chunk that crosses it). Small
/// enough that hyper's queue of a slow connection (up to 16 frames) stays a few hundred KiB
/// and a frame's gzip short; large enough that the per-frame overhead (a chunk header, a
/// poll of the body) is negligible for a large exposition. Not larger: frames of 64 KiB
/// (80 KiB allocations) came each from pages the allocator had just given back
/// (`crate::allocator` returns freed pages at once), 6 900 page faults per scrape at
/// N = 1000 and 17 ms of assembly CPU against 10. Frames of 32 KiB did not help either: at once
/// beside this size (`scripts/bench.sh fleet`, 3 rounds, N = 1000), 7.0–10.5 ms of assembly CPU
/// p50 against 4.9–7.6, though fewer frames read the CPU clock half as often.
pub const FRAME: usize = 16 * 1024;

/// How many clusters ahead of the one being copied the assembly prefetches its chunk. Each
/// cluster's text is its own allocation, so a family's chunks, one per cluster, lie far apart
/// in memory: no hardware prefetcher guesses the next one, and at a large fleet (26 MB, more
/// than the caches) each chunk's copy waited for its first lines from memory, one cluster after
/// the other. Asked for 16 clusters ahead, the waits overlap the copies: `cargo bench --bench
/// assembly` (N = 1000, caches cold) went from 3.9–6.2 ms of CPU p50 to 2.9–4.4 (5 runs of
/// each build, medians 4.4 and 3.1). Distances 4, 8, 16 and 32 were tried: 8 and 16 best, 32
/// as slow as 4 (the lines are evicted before their copy); prefetching the offsets of the
/// cluster after that too gained nothing.
pub(super) const PREFETCH_DISTANCE: usize = 16;

/// Where the assembly is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The exporter's own build info.
    Head,
    /// The chunks of family `index`, from cluster `from` on; `described` once its descriptor
    /// is written, which it is just before the first chunk that is not empty (a family no
    /// cluster has samples in gets none).
    Chunks {
        index: usize,
        from: usize,
        described: bool,
    },
    /// `# EOF` in OpenMetrics.
    Tail,
    Done,
}

/// The exposition of some clusters in one format, as frames: the exporter's build info and,
/// on `/metrics`, its process families, then each family that some cluster has samples for,
/// its descriptor once and every cluster's chunk after it, in the order of the clusters;
/// `# EOF` last in OpenMetrics.
#[derive(Debug)]
pub struct Exposition {
    clusters: Vec<Arc<EncodedCluster>>,
    /// The families the clusters' chunks are indexed by.
    catalog: &'static Catalog,
    /// The exporter's process families (`/metrics`), or none (`/probe`).
    process: Option<Arc<ProcessFamilies>>,
    format: Format,
    stage: Stage,
    /// What the assembly cost so far, for the log line of the response.
    bytes: usize,
    cpu: CpuMeter,
}

impl Exposition {
    /// The exposition of `clusters`, after the process families of `process` if given.
    pub fn new(
        clusters: Vec<Arc<EncodedCluster>>,
        process: Option<Arc<ProcessFamilies>>,
        format: Format,
    ) -> Exposition {
        Exposition::of_catalog(clusters, format, &CATALOG).with_process(process)
    }

    /// The exposition of clusters encoded with `catalog`'s families.
    pub(super) fn of_catalog(
        clusters: Vec<Arc<EncodedCluster>>,
        format: Format,
        catalog: &'static Catalog,
    ) -> Exposition {
        Exposition {
            clusters,
            catalog,
            process: None,
            format,
            stage: Stage::Head,
            bytes: 0,
            cpu: CpuMeter::for_debug_log(),
        }
    }

    fn with_process(self, process: Option<Arc<ProcessFamilies>>) -> Exposition {
        Exposition { process, ..self }
    }

    /// Family `index` of the catalog from its first cluster, or the tail after the last.
    fn family_from_start(&self, index: usize) -> Stage {
        if index == self.catalog.len() {
            Stage::Tail
        } else {
            Stage::Chunks {
                index,
                from: 0,
                described: false,
            }
        }
    }

    /// Appends to `out` until it holds at least `limit` bytes or the exposition ends.
    fn fill(&mut self, out: &mut Vec<u8>, limit: usize) {
        while out.len() < limit {
            self.stage = match self.stage {
                Stage::Head => {
                    out.extend_from_slice(BUILD_INFO.as_bytes());
                    if let Some(process) = &self.process {
                        out.extend_from_slice(process.text(self.format).as_bytes());
                    }
                    self.family_from_start(0)
                }
                Stage::Chunks {
                    index,
                    from,
                    mut described,
                } => {
                    let mut next = from;
                    while next < self.clusters.len() && out.len() < limit {
                        if let Some(ahead) = self.clusters.get(next + PREFETCH_DISTANCE) {
                            ahead.prefetch_family(index);
                        }
                        let chunk = self.clusters[next].family(index);
                        if !chunk.is_empty() {
                            if !described {
                                let descriptor = self.catalog.descriptor(index);
                                out.extend_from_slice(descriptor.text(self.format).as_bytes());
                                described = true;
                            }
                            out.extend_from_slice(chunk);
                        }
                        next += 1;
                    }
                    if next == self.clusters.len() {
                        self.family_from_start(index + 1)
                    } else {
                        Stage::Chunks {
                            index,
                            from: next,
                            described,
                        }
                    }
                }
                Stage::Tail => {
                    if self.format == Format::OpenMetrics {
                        out.extend_from_slice(b"# EOF\n");
                    }
                    Stage::Done
                }
                Stage::Done => return,
            };
        }
    }
}

impl Iterator for Exposition {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.stage == Stage::Done {
            return None;
        }
        let started = self.cpu.start();
        let mut frame = Vec::with_capacity(FRAME + FRAME / 4);
        self.fill(&mut frame, FRAME);
        self.bytes += frame.len();
        self.cpu.stop(started);
        (!frame.is_empty()).then(|| Bytes::from(frame))
    }
}

/// The frames of an [`Exposition`] as one gzip member (fast level), compressed as they
/// are asked for.
#[derive(Debug)]
pub struct Gzipped {
    plain: Exposition,
    /// `None` once the trailer is out.
    encoder: Option<GzEncoder<Vec<u8>>>,
    bytes: usize,
    cpu: CpuMeter,
}

impl Gzipped {
    pub fn new(plain: Exposition) -> Gzipped {
        Gzipped {
            cpu: CpuMeter::like(&plain.cpu),
            plain,
            encoder: Some(GzEncoder::new(Vec::new(), Compression::fast())),
            bytes: 0,
        }
    }
}

impl Iterator for Gzipped {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        loop {
            let plain = self.plain.next();
            let started = self.cpu.start();
            let compressed = match plain {
                Some(frame) => {
                    let encoder = self.encoder.as_mut()?;
                    encoder
                        .write_all(&frame)
                        .expect("compressing into a Vec cannot fail");
                    // The encoder only appends to its Vec: what it holds is the next frame.
                    std::mem::take(encoder.get_mut())
                }
                None => self
                    .encoder
                    .take()?
                    .finish()
                    .expect("compressing into a Vec cannot fail"),
            };
            self.cpu.stop(started);
            self.bytes += compressed.len();
            // A frame can leave nothing yet: deflate holds input back until it has enough.
            if !compressed.is_empty() {
                return Some(Bytes::from(compressed));
            }
        }
    }
}

/// A response body's frames: the exposition, plain or gzipped. Logs what the response cost
/// (at debug level) when its last frame is out.
#[derive(Debug)]
pub struct Frames {
    body: Body,
    /// When the first frame was asked for.
    started: Option<Instant>,
    done: bool,
}

#[derive(Debug)]
enum Body {
    Plain(Exposition),
    /// Boxed: the encoder is held inline (376 bytes), the plain stream in 96.
    Gzip(Box<Gzipped>),
}

impl Frames {
    /// The exposition of `clusters` (after the process families of `process` if given) in
    /// `format`, gzip-compressed when `gzip`.
    pub fn new(
        clusters: Vec<Arc<EncodedCluster>>,
        process: Option<Arc<ProcessFamilies>>,
        format: Format,
        gzip: bool,
    ) -> Frames {
        let plain = Exposition::new(clusters, process, format);
        Frames {
            body: if gzip {
                Body::Gzip(Box::new(Gzipped::new(plain)))
            } else {
                Body::Plain(plain)
            },
            started: None,
            done: false,
        }
    }

    fn log(&self, started: Instant) {
        let (plain, compressed, gzip_cpu) = match &self.body {
            Body::Plain(plain) => (plain, None, None),
            Body::Gzip(gzipped) => (&gzipped.plain, Some(gzipped.bytes), gzipped.cpu.seconds()),
        };
        tracing::debug!(
            format = ?plain.format,
            clusters = plain.clusters.len(),
            bytes = plain.bytes,
            gzip_bytes = compressed,
            send_seconds = started.elapsed().as_secs_f64(),
            encode_cpu_seconds = plain.cpu.seconds(),
            gzip_cpu_seconds = gzip_cpu,
            "served metrics"
        );
    }
}

impl Iterator for Frames {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let started = *self.started.get_or_insert_with(Instant::now);
        let frame = match &mut self.body {
            Body::Plain(plain) => plain.next(),
            Body::Gzip(gzipped) => gzipped.next(),
        };
        if frame.is_none() {
            self.done = true;
            self.log(started);
        }
        frame
    }
}

/// Samples up to which a gzip body is kept for the next scrapes ([`GzipReuse`]): 256 KiB,
/// about 15 clusters of 3 members.
pub const REUSE_UP_TO: usize = 256 * 1024;

/// The gzip body of the last small exposition of `/metrics`, served again until a cluster
/// publishes or the process families are read anew (once a second, [`super::process`]).
///
/// Why: a gzip scrape compresses the stream as it goes, with a compressor of its own; for a
/// small exposition that costs several times the copy, so many concurrent gzip scrapers of a
/// small fleet would each pay it for the same bytes. A small body is cheap to keep: it is kept with the chunks it was
/// made from, their `Arc`s held (so that a newer chunk cannot take an old one's address),
/// and served while `/metrics` would assemble exactly those chunks. Above [`REUSE_UP_TO`]
/// nothing is kept: a large fleet is streamed so that nothing of its size stays in memory,
/// and its polls publish too often for a kept body to be reused.
#[derive(Debug, Default)]
pub struct GzipReuse {
    last: std::sync::Mutex<Option<Kept>>,
}

#[derive(Debug)]
struct Kept {
    clusters: Vec<Arc<EncodedCluster>>,
    process: Arc<ProcessFamilies>,
    format: Format,
    body: Bytes,
}

impl GzipReuse {
    /// The gzip of the exposition of `clusters` and `process` in `format` when it is small:
    /// the kept body when it was made from the same chunks and reading, else one made now
    /// (and kept). `None` above [`REUSE_UP_TO`]: stream it.
    pub fn small(
        &self,
        clusters: &[Arc<EncodedCluster>],
        process: &Arc<ProcessFamilies>,
        format: Format,
    ) -> Option<Bytes> {
        if clusters.iter().map(|cluster| cluster.len()).sum::<usize>() > REUSE_UP_TO {
            return None;
        }
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |kept: &&Kept| {
            kept.format == format
                && Arc::ptr_eq(&kept.process, process)
                && kept.clusters.len() == clusters.len()
                && kept
                    .clusters
                    .iter()
                    .zip(clusters)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
        };
        if let Some(kept) = last.as_ref().filter(same) {
            return Some(kept.body.clone());
        }
        let exposition = Exposition::new(clusters.to_vec(), Some(process.clone()), format);
        let body: Vec<u8> = Gzipped::new(exposition)
            .flat_map(|frame| frame.to_vec())
            .collect();
        let body = Bytes::from(body);
        *last = Some(Kept {
            clusters: clusters.to_vec(),
            process: process.clone(),
            format,
            body: body.clone(),
        });
        Some(body)
    }
}

/// The CPU time a response's assembly or compression took, estimated from a sample of its
/// frames, for the debug log line of the response (`scripts/bench.sh` reads it).
///
/// Why it reads the clock only when that line will be written: the thread's CPU clock is a
/// system call (not in the vDSO), which a profile of many small scrapes showed as a large
/// share of the exporter's CPU for a line nobody reads.
///
/// Why a sample: read around every frame, the clock's own cost (two system calls, and the
/// caches they disturb) added 0.6–1.1 ms to the 2.5–2.7 ms that `cargo bench --bench
/// assembly` measures of 1 000 clusters' assembly without it (1.3–1.7 to 4.4–4.6 on a
/// slower VM), a cost production (no debug log) does not pay; sampled, it adds ~0.1 ms. It is read around one frame in [`METERED_EVERY`], the first always,
/// and the sum is scaled by the frames over those measured: frames are all of one size but
/// the last, so the estimate is of the whole response.
#[derive(Debug)]
struct CpuMeter {
    total: Option<Duration>,
    /// Frames started, and of those measured.
    frames: u32,
    measured: u32,
}

/// One frame in this many is measured ([`CpuMeter`]).
const METERED_EVERY: u32 = 8;

impl CpuMeter {
    /// Measuring when debug logging is on for this module, idle otherwise.
    fn for_debug_log() -> CpuMeter {
        CpuMeter {
            total: tracing::enabled!(tracing::Level::DEBUG).then_some(Duration::ZERO),
            frames: 0,
            measured: 0,
        }
    }

    /// Measuring when `other` measures: one `enabled!` per response, not one per stage.
    fn like(other: &CpuMeter) -> CpuMeter {
        CpuMeter {
            total: other.total.map(|_| Duration::ZERO),
            frames: 0,
            measured: 0,
        }
    }

    /// Before a frame: the clock, when this frame is one of the sample.
    fn start(&mut self) -> Option<Duration> {
        self.total?;
        let sampled = self.frames % METERED_EVERY == 0;
        self.frames += 1;
        sampled.then(thread_cpu_time)
    }

    /// After the frame `started` began.
    fn stop(&mut self, started: Option<Duration>) {
        if let (Some(total), Some(started)) = (self.total.as_mut(), started) {
            *total += thread_cpu_time().saturating_sub(started);
            self.measured += 1;
        }
    }

    /// The seconds of all the frames, from those measured; `None` when not measuring.
    fn seconds(&self) -> Option<f64> {
        let total = self.total?.as_secs_f64();
        Some(match self.measured {
            0 => total,
            measured => total * f64::from(self.frames) / f64::from(measured),
        })
    }
}

/// CPU time of the calling thread: what assembling and compressing cost, apart from the
/// waits for the socket and for a core.
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
mod cpu_meter_tests {
    use std::time::Duration;

    use super::{CpuMeter, METERED_EVERY};

    fn subscriber(level: tracing::Level) -> impl tracing::Subscriber + Send + Sync {
        tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::sink)
            .finish()
    }

    #[test]
    fn the_cpu_clock_is_read_only_when_the_debug_line_will_be_written() {
        tracing::subscriber::with_default(subscriber(tracing::Level::INFO), || {
            let mut idle = CpuMeter::for_debug_log();
            let started = idle.start();
            assert_eq!(started, None, "no clock read below debug");
            idle.stop(started);
            assert_eq!(idle.seconds(), None);
            assert_eq!(
                CpuMeter::like(&idle).seconds(),
                None,
                "the gzip stage follows"
            );
        });
        tracing::subscriber::with_default(subscriber(tracing::Level::DEBUG), || {
            let mut meter = CpuMeter::for_debug_log();
            let started = meter.start();
            assert!(started.is_some(), "the clock is read at debug");
            let sum =
                (0..2_000_000u64).fold(0u64, |acc, i| acc.wrapping_add(std::hint::black_box(i)));
            std::hint::black_box(sum);
            meter.stop(started);
            assert!(meter.seconds().expect("measuring") > 0.0);
            assert_eq!(
                CpuMeter::like(&meter).seconds(),
                Some(0.0),
                "the gzip stage follows"
            );
        });
    }

    /// One frame in [`METERED_EVERY`] is measured, the first always, and the sum is scaled to
    /// every frame started.
    #[test]
    fn one_frame_in_a_sample_is_measured_and_the_sum_scaled_to_all() {
        tracing::subscriber::with_default(subscriber(tracing::Level::DEBUG), || {
            let mut meter = CpuMeter::for_debug_log();
            let measured: Vec<bool> = (0..2 * METERED_EVERY + 1)
                .map(|_| {
                    let started = meter.start();
                    meter.stop(started);
                    started.is_some()
                })
                .collect();
            let expected: Vec<bool> = (0..2 * METERED_EVERY + 1)
                .map(|frame| frame % METERED_EVERY == 0)
                .collect();
            assert_eq!(measured, expected);
            assert_eq!((meter.frames, meter.measured), (2 * METERED_EVERY + 1, 3));
        });
        let meter = CpuMeter {
            total: Some(Duration::from_millis(3)),
            frames: 20,
            measured: 3,
        };
        let seconds = meter.seconds().expect("measuring");
        assert!((seconds - 0.020).abs() < 1e-12, "{seconds}");
        let unstarted = CpuMeter {
            total: Some(Duration::ZERO),
            frames: 0,
            measured: 0,
        };
        assert_eq!(unstarted.seconds(), Some(0.0));
    }
}
