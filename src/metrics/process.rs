//! The exporter's own process, reported as every client_golang exporter reports it:
//! `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds` and
//! `process_start_time_seconds`, with client_golang's names, help texts and types. So the
//! panels and alerts written for any exporter work on this one, an operator sees what the
//! exporter costs (it raises its own fd limit: that shows here too), and the soak
//! reads its figures from `/metrics` instead of from `/proc` outside.
//!
//! Why on `/metrics` only, read at most once a second: they are the process's figures at
//! the scrape, not a poll's, and `/probe` serves one cluster per target (a sharded fleet
//! would repeat them once per scope). One reading serves the scrapes of its second, so many
//! concurrent scrapers cost one reading and a small fleet's gzip body can still be kept for
//! them ([`super::stream::GzipReuse`]); a Prometheus scrapes far less often than that.
//!
//! Why the `procfs` crate: prometheus-client, whose text the exporter writes, has no process
//! collector (client_rust issue 29 is open); the `prometheus` crate's collector would bring
//! a second metrics library and registry for six numbers, and is itself built on procfs.
//! procfs (eminence/procfs, the crate that reads `/proc` for most of the Rust ecosystem)
//! parses `/proc/self/stat` and `/proc/self/limits` and counts `/proc/self/fd` (with one
//! `stat` on Linux 6.2 and later), without its default features (chrono, flate2).
//!
//! Linux only: elsewhere, or where `/proc` cannot be read, the families are absent, each on
//! its own (a value that cannot be read is left out, never written as 0).

use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::exposition::Format;
use super::families::{declare_families, Catalog, Chunks, FamilyWriter};
use super::labels::NoLabels;

// client_golang's process collector (prometheus/process_collector.go), in its output order.
declare_families! {
    CPU_SECONDS: live_counter("process_cpu_seconds", "Total user and system CPU time spent in seconds.");
    MAX_FDS: gauge("process_max_fds", "Maximum number of open file descriptors.");
    OPEN_FDS: gauge("process_open_fds", "Number of open file descriptors.");
    RESIDENT_MEMORY_BYTES: gauge("process_resident_memory_bytes", "Resident memory size in bytes.");
    START_TIME_SECONDS: gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.");
    VIRTUAL_MEMORY_BYTES: gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.");
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(|| Catalog::new(FAMILIES.iter().copied()));

/// How long one reading serves the scrapes that follow it.
const READING_SERVES: Duration = Duration::from_secs(1);

/// One reading of the process's figures; `None` where a figure could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
    /// The soft limit on open file descriptors (`Max open files`); `None` when unlimited.
    pub max_fds: Option<u64>,
    pub open_fds: Option<u64>,
    pub resident_memory_bytes: Option<u64>,
    /// Unix time at which the process started.
    pub start_time_seconds: Option<f64>,
    pub virtual_memory_bytes: Option<u64>,
}

impl ProcessSample {
    /// Reads the figures of this process from `/proc/self`.
    #[cfg(target_os = "linux")]
    pub fn read() -> ProcessSample {
        use procfs::process::{LimitValue, Process};
        let Ok(me) = Process::myself() else {
            return ProcessSample::default();
        };
        let stat = me.stat().ok();
        let ticks = procfs::ticks_per_second() as f64;
        ProcessSample {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / ticks),
            max_fds: me
                .limits()
                .ok()
                .and_then(|limits| match limits.max_open_files.soft_limit {
                    LimitValue::Value(limit) => Some(limit),
                    LimitValue::Unlimited => None,
                }),
            open_fds: me.fd_count().ok().map(|count| count as u64),
            resident_memory_bytes: stat.as_ref().map(|s| s.rss * procfs::page_size()),
            // As client_golang: the boot time of /proc/stat plus the start in clock ticks.
            start_time_seconds: stat.as_ref().and_then(|s| {
                Some(procfs::boot_time_secs().ok()? as f64 + s.starttime as f64 / ticks)
            }),
            virtual_memory_bytes: stat.as_ref().map(|s| s.vsize),
        }
    }

    /// Nothing to read outside Linux: the families are absent.
    #[cfg(not(target_os = "linux"))]
    pub fn read() -> ProcessSample {
        ProcessSample::default()
    }
}

/// The process families of one reading, written for both formats.
#[derive(Debug)]
pub struct ProcessFamilies {
    read_at: Instant,
    openmetrics: String,
    text: String,
}

impl ProcessFamilies {
    /// The families of `sample`, each with its descriptor; a figure that is `None` leaves
    /// its family out.
    pub fn of(sample: &ProcessSample) -> ProcessFamilies {
        let one = |value: Option<u64>| value.map(|value| (NoLabels, value));
        let one_float = |value: Option<f64>| value.map(|value| (NoLabels, value));
        let mut writer = FamilyWriter::new(&CATALOG, String::new());
        writer
            .write(&CPU_SECONDS, one_float(sample.cpu_seconds))
            .and_then(|()| writer.write(&MAX_FDS, one(sample.max_fds)))
            .and_then(|()| writer.write(&OPEN_FDS, one(sample.open_fds)))
            .and_then(|()| writer.write(&RESIDENT_MEMORY_BYTES, one(sample.resident_memory_bytes)))
            .and_then(|()| writer.write(&START_TIME_SECONDS, one_float(sample.start_time_seconds)))
            .and_then(|()| writer.write(&VIRTUAL_MEMORY_BYTES, one(sample.virtual_memory_bytes)))
            .expect("writing into a String cannot fail");
        let (chunks, _) = writer.finish();
        ProcessFamilies {
            read_at: Instant::now(),
            openmetrics: with_descriptors(&chunks, Format::OpenMetrics),
            text: with_descriptors(&chunks, Format::PrometheusText),
        }
    }

    /// The families in `format`.
    pub fn text(&self, format: Format) -> &str {
        match format {
            Format::OpenMetrics => &self.openmetrics,
            Format::PrometheusText => &self.text,
        }
    }
}

/// Every family of `chunks` that has samples, its descriptor in `format` first.
fn with_descriptors(chunks: &Chunks, format: Format) -> String {
    let mut out = String::new();
    let mut start = 0;
    for (index, &end) in chunks.ends.iter().enumerate() {
        let samples = &chunks.text[start..end as usize];
        start = end as usize;
        if !samples.is_empty() {
            out.push_str(CATALOG.descriptor(index).text(format));
            out.push_str(samples);
        }
    }
    out
}

/// The families of the reading of this second: the last one, or a new one when the last is
/// [`READING_SERVES`] old.
pub fn current() -> Arc<ProcessFamilies> {
    static LAST: Mutex<Option<Arc<ProcessFamilies>>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    match last.as_ref() {
        Some(reading) if reading.read_at.elapsed() < READING_SERVES => reading.clone(),
        _ => {
            let reading = Arc::new(ProcessFamilies::of(&ProcessSample::read()));
            *last = Some(reading.clone());
            reading
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_families_are_client_golangs_in_both_formats() {
        let sample = ProcessSample {
            cpu_seconds: Some(1.25),
            max_fds: Some(1_048_576),
            open_fds: Some(12),
            resident_memory_bytes: Some(20_480_000),
            start_time_seconds: Some(1_700_000_000.5),
            virtual_memory_bytes: Some(300_000_000),
        };
        let families = ProcessFamilies::of(&sample);
        let text = "\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.25
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 1048576
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 12
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 20480000
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1700000000.5
# HELP process_virtual_memory_bytes Virtual memory size in bytes.
# TYPE process_virtual_memory_bytes gauge
process_virtual_memory_bytes 300000000
";
        assert_eq!(families.text(Format::PrometheusText), text);
        // OpenMetrics names the counter family without `_total`; its sample keeps it.
        let openmetrics = text
            .replace(
                "# HELP process_cpu_seconds_total ",
                "# HELP process_cpu_seconds ",
            )
            .replace(
                "# TYPE process_cpu_seconds_total counter",
                "# TYPE process_cpu_seconds counter",
            );
        assert_eq!(families.text(Format::OpenMetrics), openmetrics);
    }

    #[test]
    fn a_figure_that_cannot_be_read_is_absent_not_zero() {
        let sample = ProcessSample {
            open_fds: Some(7),
            ..ProcessSample::default()
        };
        assert_eq!(
            ProcessFamilies::of(&sample).text(Format::PrometheusText),
            "# HELP process_open_fds Number of open file descriptors.\n\
             # TYPE process_open_fds gauge\nprocess_open_fds 7\n"
        );
        assert_eq!(
            ProcessFamilies::of(&ProcessSample::default()).text(Format::OpenMetrics),
            ""
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_sane_figures() {
        let sample = ProcessSample::read();
        let rss = sample.resident_memory_bytes.expect("rss");
        assert!(rss > 1024 * 1024, "rss {rss}");
        assert!(sample.virtual_memory_bytes.expect("vsize") >= rss);
        let open = sample.open_fds.expect("open fds");
        let max = sample.max_fds.expect("max fds");
        assert!(open > 0 && open <= max, "open {open}, max {max}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = sample.start_time_seconds.expect("start time");
        assert!(
            (now - 3600.0..=now + 1.0).contains(&started),
            "started {started}, now {now}"
        );
        assert!(sample.cpu_seconds.expect("cpu") >= 0.0);
    }

    #[test]
    fn one_reading_serves_the_scrapes_of_its_second() {
        let first = current();
        let second = current();
        // Unless a second passed between the two calls (a very loaded machine), the same.
        if first.read_at.elapsed() < READING_SERVES {
            assert!(Arc::ptr_eq(&first, &second));
        }
        std::thread::sleep(READING_SERVES);
        assert!(!Arc::ptr_eq(&first, &current()), "read anew a second later");
    }
}
